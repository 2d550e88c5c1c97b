"""RoBERTa interop: parameter names, from_pretrained_encoder, and full-mode equality with RobertaForMaskedLM (no hub)."""

import pytest
import torch
from transformers import RobertaConfig, RobertaForMaskedLM, RobertaForSequenceClassification

from linformer import LinformerForMaskedLM, LinformerForSequenceClassification
from linformer.errors import CheckpointError, ConfigError

N = 32


def _roberta_config(**overrides):
    kwargs = dict(
        vocab_size=100,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=N + 2,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
    )
    kwargs.update(overrides)
    return RobertaConfig(**kwargs)


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory):
    """A small randomly initialised RoBERTa saved as a checkpoint directory."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("roberta")
    RobertaForMaskedLM(_roberta_config()).save_pretrained(path)
    return path


def _batch():
    ids = torch.randint(4, 100, (3, N))
    mask = torch.ones_like(ids)
    for i, L in enumerate((N, 20, 7)):
        ids[i, L:], mask[i, L:] = 1, 0
    ids[:, 0] = 0
    return ids, mask


def test_parameter_names_match_roberta(roberta_dir):
    ours = LinformerForMaskedLM.from_pretrained_encoder(roberta_dir, attention="full")
    theirs = RobertaForMaskedLM.from_pretrained(roberta_dir)
    assert set(ours.state_dict()) == set(theirs.state_dict())


def test_full_mode_reproduces_roberta_mlm_logits(roberta_dir):
    ours = LinformerForMaskedLM.from_pretrained_encoder(roberta_dir, attention="full").eval()
    theirs = RobertaForMaskedLM.from_pretrained(roberta_dir).eval()
    ids, mask = _batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask).logits
        b = theirs(ids, attention_mask=mask).logits
    real = mask.bool()
    assert (a[real] - b[real]).abs().max().item() < 1e-4


def test_full_mode_reproduces_roberta_classification(tmp_path):
    torch.manual_seed(0)
    RobertaForSequenceClassification(_roberta_config(num_labels=3)).save_pretrained(tmp_path)
    ours = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, attention="full").eval()
    theirs = RobertaForSequenceClassification.from_pretrained(tmp_path).eval()
    assert ours.config.num_labels == 3
    ids, mask = _batch()
    with torch.no_grad():
        assert (ours(ids, attention_mask=mask).logits - theirs(ids, attention_mask=mask).logits).abs().max() < 1e-4


def test_from_pretrained_encoder_only_projections_start_fresh(roberta_dir):
    theirs = RobertaForMaskedLM.from_pretrained(roberta_dir).state_dict()
    ours = LinformerForMaskedLM.from_pretrained_encoder(roberta_dir, projected_dim=8, sharing="kv").state_dict()
    fresh = sorted(set(ours) - set(theirs))
    assert fresh == [f"roberta.encoder.layer.{i}.attention.self.E.weight" for i in range(2)]
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, msg=name)


def test_from_pretrained_encoder_with_shorter_n_truncates_positions(roberta_dir):
    model = LinformerForMaskedLM.from_pretrained_encoder(roberta_dir, max_seq_len=16, projected_dim=4)
    assert model.config.max_position_embeddings == 18
    assert model.roberta.embeddings.position_embeddings.weight.shape[0] == 18
    with pytest.raises(ConfigError, match="max_seq_len=64 .* 34 position embeddings, so max_seq_len <= 32"):
        LinformerForMaskedLM.from_pretrained_encoder(roberta_dir, max_seq_len=64, projected_dim=4, extend_positions=False)


def test_from_pretrained_encoder_accepts_a_model_object(roberta_dir):
    roberta = RobertaForMaskedLM.from_pretrained(roberta_dir)
    model = LinformerForMaskedLM.from_pretrained_encoder(roberta, projected_dim=8)
    torch.testing.assert_close(
        model.roberta.embeddings.word_embeddings.weight, roberta.roberta.embeddings.word_embeddings.weight
    )
    # the LM decoder stays tied to the word embeddings
    assert model.lm_head.decoder.weight.data_ptr() == model.roberta.embeddings.word_embeddings.weight.data_ptr()


def test_from_pretrained_encoder_missing_path_is_clear(tmp_path):
    with pytest.raises(CheckpointError, match="nope.*holds no model"):
        LinformerForMaskedLM.from_pretrained_encoder(tmp_path / "nope")
