"""classifier_pooling: what the sentence classifier reads ([CLS] through the pooler, [CLS] itself, or the mean over
the real tokens), and conversion reading a sentence-transformers model's own pooling."""

import json

import pytest
import torch
from transformers import BertConfig, BertModel

from linformer import LinformerForSequenceClassification
from linformer.errors import ConfigError
from linformer.modeling.convert import sentence_transformers_pooling

from .conftest import tiny_config

BERT = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=24)


def _model(**overrides):
    torch.manual_seed(0)
    return LinformerForSequenceClassification(tiny_config(num_labels=2, **overrides)).eval()


def _captured_features(model, **inputs):
    """The (batch, hidden) tensor the classifier's linear layers receive."""
    seen = []
    head = model.classifier.dense if hasattr(model.classifier, "dense") else model.classifier
    hook = head.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    with torch.no_grad():
        model(**inputs)
    hook.remove()
    return seen[0]


def test_each_family_keeps_its_own_default():
    assert tiny_config().classifier_pooling == "cls"
    assert tiny_config(classifier_head="bert").classifier_pooling == "pooler"


@pytest.mark.parametrize("head", ["roberta", "bert"])
def test_mean_pooling_averages_the_real_tokens_only(head):
    model = _model(classifier_head=head, classifier_pooling="mean")
    ids = torch.randint(5, 64, (2, 10))
    mask = torch.ones_like(ids)
    ids[1, 6:], mask[1, 6:] = 1, 0  # row 1 has 6 real tokens, then padding (pad id 1)
    features = _captured_features(model, input_ids=ids, attention_mask=mask)
    with torch.no_grad():
        hidden = model.roberta(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(features[0], hidden[0].mean(0))
    torch.testing.assert_close(features[1], hidden[1, :6].mean(0))
    # a row's prediction does not depend on how far it is padded
    alone = model(input_ids=ids[1:, :6]).logits
    torch.testing.assert_close(model(input_ids=ids, attention_mask=mask).logits[1:], alone, atol=1e-5, rtol=0)


def test_cls_pooling_reads_the_first_token_without_the_pooler():
    model = _model(classifier_head="bert", classifier_pooling="cls")
    assert model.roberta.pooler is None  # no untrained pooler weights carried along
    ids = torch.randint(5, 64, (2, 8))
    features = _captured_features(model, input_ids=ids)
    with torch.no_grad():
        torch.testing.assert_close(features, model.roberta(input_ids=ids).last_hidden_state[:, 0])


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_a_classifier_that_reads_no_pooler_loads_a_bert_layout_checkpoint_without_calling_its_pooler_unexpected(
        tmp_path, pooling):
    from linformer import LinformerForMaskedLM

    LinformerForMaskedLM(tiny_config(classifier_head="bert", classifier_pooling=pooling)).save_pretrained(tmp_path)
    _, info = LinformerForSequenceClassification.from_pretrained(tmp_path, num_labels=2, output_loading_info=True)
    assert info["unexpected_keys"] and not [k for k in info["unexpected_keys"] if "pooler" in k]  # lm_head's remain
    assert {"classifier.dense.weight", "classifier.weight"} & set(info["missing_keys"])


def test_pooler_pooling_reads_the_pooler_output():
    model = _model(classifier_head="bert")
    ids = torch.randint(5, 64, (2, 8))
    with torch.no_grad():
        expected = model.roberta(input_ids=ids).pooler_output
    torch.testing.assert_close(_captured_features(model, input_ids=ids), expected)


def test_mean_pooling_without_a_mask_over_padded_ids_is_refused():
    model = _model(classifier_pooling="mean")
    ids = torch.randint(5, 64, (2, 8))
    model(input_ids=ids)  # nothing padded: the mean over every token is right
    ids[1, 5:] = 1
    with pytest.raises(ValueError, match=r"classifier_pooling='mean'.*pad_token_id=1.*attention_mask is None"):
        model(input_ids=ids)


@pytest.mark.parametrize("settings, key", [
    (dict(classifier_pooling="max"), "classifier_pooling='max'"),
    (dict(classifier_pooling="pooler"), "needs classifier_head='bert'"),
])
def test_bad_pooling_settings_name_the_key(settings, key):
    with pytest.raises(ConfigError, match=key):
        tiny_config(**settings)


def _sentence_transformers_dir(path, **modes):
    BertModel(BERT).save_pretrained(path)
    (path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (path / "1_Pooling").mkdir()
    settings = {"word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                "pooling_mode_max_tokens": False, **modes}
    (path / "1_Pooling" / "config.json").write_text(json.dumps(settings))
    return path


@pytest.mark.parametrize("modes, expected", [
    (dict(pooling_mode_mean_tokens=True), "mean"),
    (dict(pooling_mode_cls_token=True), "cls"),
    (dict(pooling_mode_max_tokens=True), None),  # no classifier pooling of ours matches: the family's default
])
def test_conversion_reads_the_sentence_transformers_pooling(tmp_path, modes, expected):
    source = _sentence_transformers_dir(tmp_path, **modes)
    assert sentence_transformers_pooling(str(source)) == expected
    model = LinformerForSequenceClassification.from_pretrained_encoder(source, projected_dim=8, num_labels=2)
    assert model.config.classifier_pooling == (expected or "pooler")
    told = LinformerForSequenceClassification.from_pretrained_encoder(source, projected_dim=8, num_labels=2,
                                                                       classifier_pooling="pooler")
    assert told.config.classifier_pooling == "pooler"  # an explicit setting wins over the source's


def test_a_plain_checkpoint_keeps_the_family_default(tmp_path):
    BertModel(BERT).save_pretrained(tmp_path)
    assert sentence_transformers_pooling(str(tmp_path)) is None
    model = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, projected_dim=8, num_labels=2)
    assert model.config.classifier_pooling == "pooler"
