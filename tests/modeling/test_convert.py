"""from_pretrained_encoder / convert_encoder: BERT and RoBERTa sources (tiny, random, built here) become Linformers
that, in full mode, give the source's outputs; their heads come over, and what starts fresh is said."""

import json
import logging
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    GPT2Config,
    GPT2Model,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaForMaskedLM,
    RobertaForSequenceClassification,
    RobertaModel,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

from linformer import LinformerConfig, LinformerForMaskedLM, LinformerForSequenceClassification, LinformerModel
from linformer.errors import CheckpointError, ConfigError
from linformer.modeling.convert import convert_encoder

REPO = Path(__file__).resolve().parents[2]
N = 24  # the sources' longest input
VOCAB = 100
SIZE = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            hidden_act="gelu_new", num_labels=3)  # gelu_new: BERT's LM head must use hidden_act, not gelu
BERT = BertConfig(max_position_embeddings=N, **SIZE)
ROBERTA = RobertaConfig(max_position_embeddings=N + 2, type_vocab_size=1, **SIZE)
XLMR = XLMRobertaConfig(max_position_embeddings=N + 2, type_vocab_size=1, **SIZE)

CASES = [  # source class, its config, our class
    (BertModel, BERT, LinformerModel),
    (BertForMaskedLM, BERT, LinformerForMaskedLM),
    (BertForPreTraining, BERT, LinformerForMaskedLM),
    (BertForSequenceClassification, BERT, LinformerForSequenceClassification),
    (RobertaModel, ROBERTA, LinformerModel),
    (RobertaForMaskedLM, ROBERTA, LinformerForMaskedLM),
    (RobertaForSequenceClassification, ROBERTA, LinformerForSequenceClassification),
    (XLMRobertaForMaskedLM, XLMR, LinformerForMaskedLM),
]


def save_source(path, source_class, config, seed=0):
    torch.manual_seed(seed)
    model = source_class(config)
    model.save_pretrained(path)
    return model.eval()


def batch(config, T=N, seed=1):
    """Right-padded rows (lengths T, T-7, 5) starting with the family's first token; BERT rows have a second
    segment (token type 1)."""
    g = torch.Generator().manual_seed(seed)
    pad = config.pad_token_id
    ids = torch.randint(5, config.vocab_size, (3, T), generator=g)
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    for i, length in enumerate((T, T - 7, 5)):
        ids[i, length:], mask[i, length:] = pad, 0
        if config.type_vocab_size > 1:
            types[i, length // 2 : length] = 1
    ids[:, 0] = 2
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def outputs(model, inputs):
    """What to compare: classification logits, MLM logits or hidden states at the real tokens."""
    with torch.no_grad():
        out = model(**inputs)
    if hasattr(out, "logits") and out.logits.dim() == 2:
        return out.logits
    values = out.prediction_logits if hasattr(out, "prediction_logits") else getattr(out, "logits", None)
    values = out.last_hidden_state if values is None else values
    return values[inputs["attention_mask"].bool()]


@pytest.mark.parametrize("source_class, config, ours_class", CASES, ids=[c[0].__name__ for c in CASES])
def test_full_mode_gives_the_source_outputs(tmp_path, source_class, config, ours_class):
    source = save_source(tmp_path, source_class, config)
    ours = ours_class.from_pretrained_encoder(tmp_path, attention="full").eval()
    inputs = batch(config)
    torch.testing.assert_close(outputs(ours, inputs), outputs(source, inputs), atol=1e-4, rtol=0)
    if hasattr(source, "pooler") and source.pooler is not None:  # the bare encoder keeps its pooler
        with torch.no_grad():
            torch.testing.assert_close(ours(**inputs).pooler_output, source(**inputs).pooler_output,
                                       atol=1e-4, rtol=0)


def test_a_2d_mask_of_any_dtype_reads_as_bert_reads_it(tmp_path):
    """BERT takes a (batch, tokens) mask of any dtype as a keep mask (nonzero: attended); so do the models here. A
    float one holding other values, which BERT would read as a keep mask too (an additive one as its inverse), is
    refused naming them."""
    source = save_source(tmp_path, BertForSequenceClassification, BERT)
    ours = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, attention="full").eval()
    mean = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, projected_dim=8,
                                                                      classifier_pooling="mean").eval()
    inputs = batch(BERT)
    keep = inputs["attention_mask"]
    for mask in (keep.float(), keep.double(), keep.bool(), keep.to(torch.int32)):
        given = {**inputs, "attention_mask": mask}
        torch.testing.assert_close(outputs(ours, given), outputs(source, given), atol=1e-4, rtol=0)
        torch.testing.assert_close(outputs(mean, given), outputs(mean, inputs), atol=0, rtol=0)  # the pooling too
    for mask, values in ((torch.where(keep.bool(), 0.0, -10000.0), "-10000"), (keep * 0.5, "0.5")):
        with pytest.raises(ValueError, match=f"this one also holds {values}\\."):
            ours(**{**inputs, "attention_mask": mask})


@pytest.mark.parametrize("source_class, ours_class, mlm_prefix", [
    (BertForMaskedLM, LinformerForMaskedLM, "cls.predictions."),
    (BertForSequenceClassification, LinformerForSequenceClassification, None),
])
def test_every_bert_weight_is_copied_and_only_projections_start_fresh(tmp_path, source_class, ours_class,
                                                                     mlm_prefix):
    source = save_source(tmp_path, source_class, BERT).state_dict()
    ours = ours_class.from_pretrained_encoder(tmp_path, projected_dim=8, sharing="kv").state_dict()
    renamed = {k.replace("bert.", "roberta.", 1).replace("cls.predictions.transform.dense", "lm_head.dense")
               .replace("cls.predictions.transform.LayerNorm", "lm_head.layer_norm")
               .replace("cls.predictions.", "lm_head."): v for k, v in source.items()}
    fresh = [f"roberta.encoder.layer.{i}.attention.self.E.weight" for i in (0, 1)]
    if mlm_prefix:  # BertForMaskedLM has no pooler; ours carries one for the classifier finetuned from it
        fresh += ["roberta.pooler.dense.bias", "roberta.pooler.dense.weight"]
    assert sorted(set(ours) - set(renamed)) == sorted(fresh)
    assert set(renamed) <= set(ours)
    for name, tensor in renamed.items():
        torch.testing.assert_close(ours[name], tensor, msg=name)


def test_bert_differences_are_config_fields(tmp_path):
    save_source(tmp_path, BertForSequenceClassification, BERT)
    config = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, projected_dim=8).config
    assert (config.position_offset, config.classifier_head, config.lm_head_activation) == (0, "bert", "gelu_new")
    assert (config.type_vocab_size, config.max_seq_len, config.max_position_embeddings) == (2, N, N)
    assert config.layer_norm_eps == BERT.layer_norm_eps and config.num_labels == 3


def test_missing_head_starts_fresh_and_says_so(tmp_path, caplog):
    save_source(tmp_path, BertModel, BERT)  # no MLM head, as sentence-transformers checkpoints
    caplog.set_level(logging.INFO, logger="linformer.modeling.convert")
    source = BertModel.from_pretrained(tmp_path)
    model = LinformerForMaskedLM.from_pretrained_encoder(tmp_path, projected_dim=8)
    (line,) = [r.getMessage() for r in caplog.records]
    # lm_head.decoder is tied to the word embeddings, which were copied
    assert "starting fresh: lm_head, lm_head.dense, lm_head.layer_norm (not in the source" in line
    assert "and 4 projection weights (E/F)" in line
    assert line.endswith("unused from the source: none")
    # the MLM model carries BERT's pooler (frozen) so a classifier finetuned from it starts from the source's
    torch.testing.assert_close(model.roberta.pooler.dense.weight, source.pooler.dense.weight)
    assert not model.roberta.pooler.dense.weight.requires_grad


def test_what_starts_fresh_names_e_and_f_only_where_the_model_has_them(tmp_path, caplog):
    """A full-attention classifier lengthened (distill.py's teacher) has no E or F, and the line said "starting
    fresh: 0 projection weights (E/F)"; switched to a Linformer it says how many start fresh."""
    from linformer.modeling.configuration import LinformerConfig

    LinformerForSequenceClassification(LinformerConfig(**SIZE, max_seq_len=N, attention="full")).save_pretrained(
        tmp_path)
    caplog.set_level(logging.INFO, logger="linformer.modeling.convert")
    LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, attention="full", max_seq_len=2 * N)
    LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, attention="linformer", projected_dim=8,
                                                               sharing="layerwise")
    full, linformer = [r.getMessage() for r in caplog.records]
    assert "starting fresh: none; unused from the source: none" in full and "(E/F)" not in full
    assert "starting fresh: 1 projection weights (E/F);" in linformer


def test_a_bert_head_from_an_mlm_source_gets_a_fresh_pooler_and_classifier(tmp_path, caplog):
    save_source(tmp_path, BertForMaskedLM, BERT)  # BertForMaskedLM has no pooler
    caplog.set_level(logging.INFO, logger="linformer.modeling.convert")
    model = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, num_labels=2, projected_dim=8)
    assert "starting fresh: classifier, roberta.pooler.dense (" in caplog.records[0].getMessage()
    assert model.classifier.out_features == 2


def test_converted_bert_round_trips_through_the_auto_classes(tmp_path):
    save_source(tmp_path / "bert", BertForSequenceClassification, BERT)
    ours = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path / "bert", attention="full").eval()
    ours.save_pretrained(tmp_path / "ours")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "ours").eval()
    inputs = batch(BERT)
    torch.testing.assert_close(outputs(again, inputs), outputs(ours, inputs))


@pytest.mark.parametrize("source_class, config", [(BertForMaskedLM, BERT), (RobertaForMaskedLM, ROBERTA)],
                         ids=["bert", "roberta"])
def test_an_untied_mlm_head_keeps_its_own_decoder(tmp_path, source_class, config):
    """tie_word_embeddings=false: the source's decoder is a weight of its own, which tying would overwrite with the
    word embeddings (every logit changed), in the converted model and in the one saved from it."""
    untied = config.__class__(**{**config.to_dict(), "tie_word_embeddings": False})
    source = save_source(tmp_path / "src", source_class, untied)
    save_tokenizer(tmp_path / "src", VOCAB, pad_id=untied.pad_token_id)
    assert not torch.equal(source.get_output_embeddings().weight, source.get_input_embeddings().weight)
    ours = LinformerForMaskedLM.from_pretrained_encoder(tmp_path / "src", attention="full").eval()
    assert ours.config.tie_word_embeddings is False
    inputs = batch(untied)
    torch.testing.assert_close(outputs(ours, inputs), outputs(source, inputs), atol=1e-4, rtol=0)
    out = convert_encoder(tmp_path / "src", tmp_path / "out", attention="full")
    again = AutoModelForMaskedLM.from_pretrained(out).eval()
    torch.testing.assert_close(outputs(again, inputs), outputs(source, inputs), atol=1e-4, rtol=0)


def test_config_json_without_the_new_fields_loads_as_roberta(tmp_path, make_config):
    torch.manual_seed(0)
    model = LinformerForMaskedLM(make_config()).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    for key in ("position_offset", "classifier_head", "lm_head_activation"):
        del config[key]
    (tmp_path / "config.json").write_text(json.dumps(config))
    again = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert (again.config.position_offset, again.config.classifier_head) == (2, "roberta")
    inputs = batch(again.config, T=16)
    del inputs["token_type_ids"]
    torch.testing.assert_close(outputs(again, inputs), outputs(model, inputs))


def test_converted_encoders_take_the_measured_length_policy_unless_told_otherwise(tmp_path):
    from linformer.modeling.convert import CONVERTED_LENGTH_POLICY

    save_source(tmp_path, BertModel, BERT)
    config = LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8).config
    assert {key: getattr(config, key) for key in CONVERTED_LENGTH_POLICY} == CONVERTED_LENGTH_POLICY
    sliced = LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, length_policy="slice").config
    assert (sliced.length_policy, sliced.mask_empty_windows) == ("slice", True)
    paper = LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, length_policy="slice",
                                                   mask_empty_windows=False, exact_short_inputs=False).config
    assert (paper.length_policy, paper.mask_empty_windows, paper.exact_short_inputs) == ("slice", False, False)
    # a projection with no learned E cannot be resampled: asked for alone, it takes the slice (not a refusal that
    # blames a length_policy the user never set)
    for projection in ("max_pool", "mean_pool", "conv"):
        pooled = LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, projection=projection).config
        assert (pooled.projection, pooled.length_policy, pooled.mask_empty_windows) == (projection, "slice", True)
    # full attention projects nothing: its config keeps the defaults, which mean unused, and takes the converted
    # policy where it is switched to a Linformer
    full = LinformerModel.from_pretrained_encoder(tmp_path, attention="full")
    defaults = LinformerConfig()
    assert {key: getattr(full.config, key) for key in CONVERTED_LENGTH_POLICY} == \
        {key: getattr(defaults, key) for key in CONVERTED_LENGTH_POLICY}
    full.save_pretrained(tmp_path / "full")
    switched = LinformerModel.from_pretrained_encoder(tmp_path / "full", attention="linformer", projected_dim=8).config
    assert {key: getattr(switched, key) for key in CONVERTED_LENGTH_POLICY} == CONVERTED_LENGTH_POLICY


def test_converted_linformers_get_the_exact_keys_unless_told_otherwise(tmp_path):
    """The converted default: a window of 128 tokens (at most n) and the first and last real token global; the
    paper's Linformer when asked (local_window=0, global_positions=[]); nothing for full attention or a projection
    that cannot have them. A finetuned full-attention model switched to a Linformer gets the same default."""
    from linformer.modeling.convert import CONVERTED_EXACT_KEYS, NO_EXACT_KEYS, from_linformer

    save_source(tmp_path, BertModel, BERT)
    fields = lambda config: (config.local_window, config.global_positions)
    assert fields(LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8).config) == (N, [0, -1])
    assert CONVERTED_EXACT_KEYS["local_window"] > N  # so the window above was capped at n
    long = LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, max_seq_len=512).config
    assert fields(long) == (128, [0, -1])
    assert fields(LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, **NO_EXACT_KEYS).config) == (0, [])
    assert fields(LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, local_window=8).config) == \
        (8, [0, -1])
    assert fields(LinformerModel.from_pretrained_encoder(tmp_path, attention="full").config) == (0, None)
    assert fields(LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, projection="conv",
                                                         length_policy="slice").config) == \
        (0, None)
    full = tmp_path / "full"
    LinformerModel.from_pretrained_encoder(tmp_path, attention="full").save_pretrained(full)
    assert fields(from_linformer(full, AutoModel, attention="linformer", projected_dim=8).config) == (N, [0, -1])
    assert fields(from_linformer(full, AutoModel, attention="linformer", projected_dim=8, **NO_EXACT_KEYS).config) \
        == (0, [])


@pytest.mark.parametrize("sharing", ["layerwise", "headwise", "none"])
def test_a_saved_linformer_lengthened_again_keeps_its_projections_for_the_lengths_it_took(tmp_path, sharing):
    """A converted Linformer (length_policy=resample) lengthened from n to 2n: E and F resampled to 2n rows, so
    every input of at most n tokens is projected exactly as before, padded or not; it was a size-mismatch traceback.
    A change E and F cannot follow (k, sharing, or n under the slice policy) is one ConfigError naming it."""
    from linformer.modeling.convert import from_linformer

    save_source(tmp_path, BertModel, BERT)
    short = tmp_path / "short"
    LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, sharing=sharing).save_pretrained(short)
    a = LinformerModel.from_pretrained(short).eval()
    b = from_linformer(str(short), AutoModel, max_seq_len=2 * N).eval()
    assert (a.config.length_policy, b.config.max_seq_len, b.config.projected_dim) == ("resample", 2 * N, 8)
    torch.manual_seed(0)
    for T in (5, 17, N):
        ids = torch.randint(5, VOCAB, (2, T))
        mask = torch.ones(2, T, dtype=torch.long)
        mask[1, T // 2:] = 0
        with torch.no_grad():
            torch.testing.assert_close(b(input_ids=ids, attention_mask=mask).last_hidden_state,
                                       a(input_ids=ids, attention_mask=mask).last_hidden_state, atol=1e-5, rtol=1e-5)
    with pytest.raises(ConfigError, match=r"E and F are kept, so its k, sharing and projection stay as saved "
                                          r"\(projected_dim: 8 -> 4\): give model.projected_dim=8"):
        from_linformer(str(short), AutoModel, projected_dim=4)
    other = "headwise" if sharing != "headwise" else "kv"  # the cryptic 'weights [...E.weight] differ' it was
    with pytest.raises(ConfigError, match=rf"\(sharing: '{sharing}' -> '{other}'\): give model.projected_dim=8, "
                                          rf"model.sharing='{sharing}'"):
        from_linformer(str(short), AutoModel, sharing=other, max_seq_len=2 * N)
    paper = tmp_path / "paper"
    LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8, sharing=sharing,
                                           length_policy="slice").save_pretrained(paper)
    # the policy the source was saved under is named, whatever the conversion asks for: the line said "only a
    # linear projection under length_policy=resample changes n" to a user who had given length_policy=resample
    saved_so = (rf"{re.escape(str(paper))} was saved under length_policy='slice', whose E rows are positions; only a model saved "
                r"under length_policy=resample takes another n")
    with pytest.raises(ConfigError, match=rf"cannot take n={2 * N} \(max_seq_len: {N} -> {2 * N}\): {saved_so}"):
        from_linformer(str(paper), AutoModel, max_seq_len=2 * N)
    with pytest.raises(ConfigError, match=rf"length_policy: 'slice' -> 'resample'\): {saved_so}"):
        from_linformer(str(paper), AutoModel, max_seq_len=2 * N, length_policy="resample", mask_empty_windows=False)


# ------------------------------------------------------------------------------------------ convert_encoder
def save_tokenizer(path, size, pad_id=0):
    """A WordPiece tokenizer of `size` tokens with BERT's special tokens, [PAD] at `pad_id` (BERT's 0 or
    RoBERTa's 1, to match the model it is saved with)."""
    specials = ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    specials.insert(pad_id, "[PAD]")
    vocab = {t: i for i, t in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(vocab), size)})
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(path)


def test_a_converted_models_tokenizer_json_truncates_at_its_n_and_pads_nothing(tmp_path):
    """A source whose tokenizer.json truncates and pads to a fixed length (sentence-transformers' 128): the
    converted model's tokenizer.json, which the tokenizers library applies as it is, truncates at the model's n and
    pads nothing, like its tokenizer_config.json's model_max_length."""
    save_source(tmp_path / "bert", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    source = tmp_path / "bert" / "tokenizer.json"
    state = json.loads(source.read_text())
    state["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    state["padding"] = {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                        "pad_type_id": 0, "pad_token": "[PAD]"}
    source.write_text(json.dumps(state))
    out = convert_encoder(tmp_path / "bert", tmp_path / "out", attention="full", max_seq_len=2 * N)
    saved = Tokenizer.from_file(str(out / "tokenizer.json"))
    assert len(saved.encode(" ".join(f"w{i}" for i in range(5, 5 + 3 * N))).ids) == 2 * N
    assert saved.encode("w5").ids == [5]  # no padding
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 2 * N


def test_a_seeded_conversion_leaves_the_callers_generator_as_it_found_it(tmp_path):
    """seed= seeded torch's global generator and left it so: a notebook's draws after each conversion repeated. The
    seed still decides what starts fresh (the classifier's head here)."""
    save_source(tmp_path / "bert", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    heads = []
    for out in ("a", "b"):
        torch.manual_seed(123)
        convert_encoder(tmp_path / "bert", tmp_path / out, LinformerForSequenceClassification, projected_dim=8,
                        seed=5)
        assert torch.equal(torch.rand(4), (torch.manual_seed(123), torch.rand(4))[1])  # the caller's next draw
        heads.append(LinformerForSequenceClassification.from_pretrained(tmp_path / out).classifier.state_dict())
    assert all(torch.equal(heads[0][k], heads[1][k]) for k in heads[0])


def test_convert_encoder_saves_model_and_tokenizer(tmp_path):
    source = save_source(tmp_path / "bert", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    out = convert_encoder(tmp_path / "bert", tmp_path / "out", attention="full", max_seq_len=2 * N)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bert", "out"]  # no temporary left behind
    model = AutoModelForMaskedLM.from_pretrained(out).eval()
    assert isinstance(model, LinformerForMaskedLM)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert len(tokenizer) == VOCAB and tokenizer.model_max_length == 2 * N  # the converted model's limit
    inputs = tokenizer(["w5 w6 w7", "w8"], padding=True, return_tensors="pt")
    torch.testing.assert_close(outputs(model, inputs), outputs(source, inputs), atol=1e-4, rtol=0)


def test_a_converted_model_damaged_since_it_was_written_is_refused_as_a_start_naming_the_file_and_its_command(
        tmp_path):
    """A converted model recorded no checksums, and a model folder taken as a start was not checked: one changed byte
    of its weights (the same size, so that safetensors still reads them) went into a finetuning unnoticed. The folder
    records its files' checksums (not its card's, which later steps rewrite in place), and a command that starts from
    it names a changed weight file and the conversion that writes it again (a config edited on purpose passes)."""
    from linformer.configs import compose
    from linformer.files.outputs import output_damage
    from linformer.modeling.card import read_card_info, write_model_card
    from linformer.modeling.convert import convert_and_report
    from linformer.modeling.loading import resolve_model_path
    from linformer.modeling.saving import is_current_model_folder
    from linformer.runconfig import ConvertSpec

    def convert(overrides):  # scripts/convert.py's body, in this process
        return convert_and_report(ConvertSpec.read(compose("convert", overrides)))

    save_source(tmp_path / "bert", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    out = convert([f"model_path={tmp_path / 'bert'}", f"model.max_seq_len={N}", "model.projected_dim=8",
                   "model.sharing=kv", "seed=3", f"out_dir={tmp_path / 'out'}"])
    assert output_damage(out) == [] and is_current_model_folder(out)
    write_model_card(out, {**read_card_info(out), "note": "a card edited after the conversion"})
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "hidden_dropout_prob": 0.0}))  # the user's to edit
    assert resolve_model_path(str(out)) == str(out)
    intact = (out / "model.safetensors").read_bytes()
    weights = bytearray(intact)
    weights[-8] ^= 0xFF
    (out / "model.safetensors").write_bytes(bytes(weights))
    damaged = (f"the weights of the model {out} differ from what the package recorded when it wrote them "
               "(model.safetensors: content differs from what was written (sha256)): if the change is yours "
               f"(save_pretrained into the folder, another tool), remove {out}/manifest.json to take the folder as it "
               "is; else restore them: write it again: python scripts/convert.py ")
    for start in (lambda: resolve_model_path(str(out), "init_from"),
                  lambda: convert_encoder(out, tmp_path / "longer", projected_dim=8, sharing="kv")):
        with pytest.raises(CheckpointError, match=r"^(init_from|model_path)=") as refused:
            start()
        assert damaged in str(refused.value)
    assert not (tmp_path / "longer").exists()
    command = shlex.split(str(refused.value).split("write it again: ", 1)[1].rstrip("."))
    assert command[:2] == ["python", "scripts/convert.py"]
    convert(command[2:])  # the command it names writes the same model again
    assert (out / "model.safetensors").read_bytes() == intact and resolve_model_path(str(out)) == str(out)


def test_convert_encoder_rejects_a_tokenizer_larger_than_the_vocabulary(tmp_path):
    save_source(tmp_path / "bert", BertModel, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB + 20)
    with pytest.raises(CheckpointError, match=f"has {VOCAB + 20} tokens but the model's vocab_size is {VOCAB}"):
        convert_encoder(tmp_path / "bert", tmp_path / "out", model_class=LinformerModel, projected_dim=8)
    assert not (tmp_path / "out").exists()


def test_convert_encoder_needs_a_tokenizer(tmp_path):
    save_source(tmp_path / "bert", BertModel, BERT)
    with pytest.raises(CheckpointError, match="bert has no tokenizer"):
        convert_encoder(tmp_path / "bert", tmp_path / "out")


# ------------------------------------------------------------------------------------------ scripts/convert.py
def _error_line(result) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    return line


def _refused(*overrides) -> str:
    """scripts/convert.py's body in this process: the one `error:` line it prints when it refuses (exit 2). The script
    itself, its `__main__` block included, runs in cli_converted."""
    import contextlib
    import io

    from linformer.cli import cli_errors
    from linformer.configs import compose
    from linformer.modeling.convert import convert_and_report
    from linformer.runconfig import ConvertSpec

    err = io.StringIO()
    with pytest.raises(SystemExit) as stop, contextlib.redirect_stderr(err), cli_errors():
        convert_and_report(ConvertSpec.read(compose("convert", list(overrides))))
    assert stop.value.code == 2 and "Traceback" not in err.getvalue()
    (line,) = [x for x in err.getvalue().splitlines() if x.startswith("error: ")]
    return line


def _tree(root: Path) -> dict[str, bytes]:
    """Every entry under `root` (hidden ones too) with a file's bytes: what a refused command must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"" for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def cli_converted(tmp_path_factory):
    """scripts/convert.py on a BERT without an MLM head (as sentence-transformers checkpoints) into <root>/out, k=8."""
    root = tmp_path_factory.mktemp("cli")
    save_source(root / "bert", BertModel, BERT)
    save_tokenizer(root / "bert", VOCAB)
    common = [f"model_path={root / 'bert'}", f"model.max_seq_len={N}", "model.sharing=layerwise"]
    return root, common, _convert_cli(*common, "model.projected_dim=8", f"out_dir={root / 'out'}")


def _convert_cli(*overrides) -> subprocess.CompletedProcess:
    """scripts/convert.py run in this process as its command line runs it (tests.conftest.run_script), under umask
    002, not the usual 022: permissions that follow it are told apart from a fixed 0644. The process-wide umask,
    streams, loggers and torch's threads are put back after it."""
    import contextlib
    import io

    from linformer.hydra_start import logging_restored
    from tests.conftest import run_script

    out, err = io.StringIO(), io.StringIO()
    umask, threads = os.umask(0o002), torch.get_num_threads()
    try:
        with pytest.MonkeyPatch.context() as mp, logging_restored(), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            mp.setenv("HF_HUB_OFFLINE", "1")
            mp.chdir(REPO)
            code = run_script("convert", list(overrides), mp)
    finally:
        os.umask(umask)
        torch.set_num_threads(threads)
    return subprocess.CompletedProcess([], code, out.getvalue(), err.getvalue())


def test_convert_script_writes_a_linformer_with_card_and_tokenizer(cli_converted):
    root, common, result = cli_converted
    assert result.returncode == 0, result.stderr[-3000:]
    out = root / "out"
    config = json.loads((out / "config.json").read_text())
    assert config["attention"] == "linformer" and config["length_policy"] == "resample"
    assert (config["projected_dim"], config["max_seq_len"], config["sharing"]) == (8, N, "layerwise")
    assert (out / "README.md").is_file() and (out / "tokenizer_config.json").is_file()
    assert len(AutoTokenizer.from_pretrained(out)) == VOCAB
    assert str(out) in result.stdout and "lm_head starts fresh" in result.stdout

    line = _refused(*common, f"model.projected_dim={N + 8}", f"out_dir={root / 'bad'}")
    assert f"projected_dim (k={N + 8})" in line
    assert sorted(p.name for p in root.iterdir()) == ["bert", "out"]  # no bad/, no temporary


def test_converted_files_get_the_umask_permissions(cli_converted):
    """transformers writes model.safetensors 0600; on a shared machine the model must be as readable as the rest."""
    root, _, result = cli_converted
    assert result.returncode == 0, result.stderr[-3000:]
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (root / "out").iterdir()}
    assert modes["model.safetensors"] == oct(0o664)
    assert set(modes.values()) == {oct(0o664)}


def test_converting_again_with_another_k_is_refused_naming_it(cli_converted):
    """A finetuning run naming out/ as its model_path must keep describing the model it was trained from."""
    root, common, result = cli_converted
    assert result.returncode == 0, result.stderr[-3000:]
    before = _tree(root)
    line = _refused(*common, "model.projected_dim=16", f"out_dir={root / 'out'}")
    assert line == (f"error: {root / 'out'} holds an earlier convert output with other settings "
                    "(model.projected_dim: 8 -> 16): choose another out_dir=, or pass overwrite=true to replace it.")
    assert _tree(root) == before


@pytest.mark.parametrize("setting, said", [
    ("model.sharing=bogus", ("model: sharing='bogus' is not one of none, headwise, kv, layerwise; one of your own: "
                             "an entry in linformer.modeling.configuration.SHARING in a module, which a command "
                             "imports")),
    ("model.projected_dim=99", f"model: projected_dim (k=99) must be in 1..max_seq_len (n={N})"),
    ("model.local_window=abc", "model.local_window='abc' must be a whole number >= 0."),  # the key as typed
    ("model.global_positions=[500]", "model: global_positions=[500]: [500] not a position"),
    # a shape the source's weights keep: torch's size-mismatch traceback, from a saved Linformer
    ("+model.hidden_size=64", "model: hidden_size=64: a conversion keeps the shapes of the weights of "),
    ("+model.num_hidden_layers=3", "model: num_hidden_layers=3: a conversion keeps the shapes of the weights of "),
    ("+model.max_position_embeddings=99", "model: max_position_embeddings=99: a conversion sets it from max_seq_len"),
])
@pytest.mark.parametrize("source", ["bert", "saved linformer"])
def test_a_bad_model_setting_names_its_group_before_any_weights_load(tmp_path, forbid_loading, setting, said, source):
    """The same check whatever the source: a BERT converted, or a saved Linformer reshaped (from_linformer)."""
    save_source(tmp_path / "bert", BertModel, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    path = tmp_path / "bert"
    if source == "saved linformer":
        path = convert_encoder(path, tmp_path / "full", attention="full")
    forbid_loading()
    line = _refused(f"model_path={path}", f"model.max_seq_len={N}", setting, f"out_dir={tmp_path / 'out'}")
    assert line.startswith(f"error: {said}"), line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("what", ["directory", "file"])
def test_convert_into_a_path_holding_the_user_s_files_is_refused(tmp_path, what):
    save_source(tmp_path / "bert", BertModel, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    target = tmp_path / "mine"
    if what == "directory":
        target.mkdir()
        (target / "notes.txt").write_text("my notes")
    else:
        target.write_text("my notes")
    before = _tree(tmp_path)
    line = _refused(f"model_path={tmp_path / 'bert'}", f"model.max_seq_len={N}", "model.projected_dim=8",
                    f"out_dir={target}")
    there = "is a directory with other content (notes.txt), no output of this package's" if what == "directory" \
        else "is a regular file"
    assert line.startswith(f"error: {target} {there}:")
    assert ("pass overwrite=true" in line) == (what == "file")  # a folder that is no output: the flag is no answer
    assert _tree(tmp_path) == before  # byte-identical, and no hidden .old-* or .tmp-* beside it


def _converted(capsys, *overrides) -> str:
    """scripts/convert.py's body in this process on a conversion that succeeds: what it prints."""
    from linformer.configs import compose
    from linformer.modeling.convert import convert_and_report
    from linformer.runconfig import ConvertSpec

    capsys.readouterr()
    convert_and_report(ConvertSpec.read(compose("convert", list(overrides))))
    return capsys.readouterr().out


@pytest.mark.parametrize("source_class, config", [(BertForSequenceClassification, BERT),
                                                  (RobertaForSequenceClassification, ROBERTA)], ids=["bert", "roberta"])
def test_the_script_keeps_a_classifier_source_a_classifier_with_its_labels(tmp_path, capsys, source_class, config):
    """A finetuned HF classifier (a finetune.py best/ of an HF encoder) stays one: its head, labels and problem type
    come along, as convert_encoder with LinformerForSequenceClassification gives, and the card and the script say so."""
    labelled = config.__class__(**{**config.to_dict(), "id2label": {0: "bad", 1: "meh", 2: "good"},
                                   "label2id": {"bad": 0, "meh": 1, "good": 2},
                                   "problem_type": "single_label_classification"})
    source = save_source(tmp_path / "src", source_class, labelled)
    save_tokenizer(tmp_path / "src", VOCAB, pad_id=labelled.pad_token_id)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"out_dir={tmp_path / 'out'}")
    assert "the source's classifier is kept, with its labels (bad, meh, good)" in said
    assert "next: python scripts/distill.py" in said
    ours = AutoModelForSequenceClassification.from_pretrained(tmp_path / "out").eval()
    assert isinstance(ours, LinformerForSequenceClassification)
    assert ours.config.id2label == {0: "bad", 1: "meh", 2: "good"}
    assert ours.config.problem_type == "single_label_classification"
    inputs = batch(labelled)
    torch.testing.assert_close(outputs(ours, inputs), outputs(source, inputs), atol=1e-4, rtol=0)
    card = (tmp_path / "out" / "README.md").read_text()
    assert "Its classifier is kept, with its labels (bad, meh, good)." in card
    assert "pipeline_tag: text-classification" in card
    # with projected attention the classifier is finetuned first (E, F are new): not a distillation teacher
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.projected_dim=8", f"model.max_seq_len={N}",
                      f"out_dir={tmp_path / 'lin'}")
    assert f"next: python scripts/finetune.py 'task=<a 3-label task>' model_path={tmp_path / 'lin'}" in said


@pytest.mark.parametrize("labels, task", [(("NEGATIVE", "POSITIVE"), "task=sst2"), (("neg", "pos"), "task=imdb"),
                                          (("LABEL_0", "LABEL_1"), "task=<sst2|qnli|qqp|imdb>"),
                                          (("no", "yes"), "task=<a 2-label task>")])
def test_the_next_command_names_the_task_a_classifiers_labels_name(labels, task):
    """A converted classifier's next command (distill or finetune) names the task its labels are, where one is."""
    from linformer.modeling.configuration import LinformerConfig
    from linformer.modeling.convert import _next_command

    config = LinformerConfig(id2label=dict(enumerate(labels)), architectures=["LinformerForSequenceClassification"],
                             attention="full")
    assert shlex.split(_next_command(Path("out"), config))[2] == task
    # a conversion that imported the user's modules (their projection or sharing mode) hands them on: pasted, the
    # command would refuse the model's names without them
    assert shlex.split(_next_command(Path("out"), config, ["my_sharing"]))[-1] == "imports=[my_sharing]"


def test_a_reshaped_linformer_s_untrained_head_is_not_said_to_lack_a_source_head(tmp_path, capsys):
    """Lengthening a converted sentence encoder (its lm_head fresh, never trained) said "the source has no MLM head":
    the source, a Linformer, has one; it is still as initialised."""
    save_source(tmp_path / "src", BertModel, BERT)
    save_tokenizer(tmp_path / "src", VOCAB, pad_id=BERT.pad_token_id)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"out_dir={tmp_path / 'a'}")
    assert "; the source has no MLM head, so lm_head starts fresh" in said
    said = _converted(capsys, f"model_path={tmp_path / 'a'}", f"out_dir={tmp_path / 'b'}")
    assert "; lm_head is still as initialised: the encoder first converted had no MLM head" in said


@pytest.mark.parametrize("source_class, config, left", [(RobertaModel, ROBERTA, ["roberta.pooler.dense"]),
                                                        (BertModel, BERT, []),
                                                        (BertForPreTraining, BERT, ["cls.seq_relationship"])],
                         ids=["roberta", "bert", "bert-pretraining"])
def test_what_a_conversion_does_not_copy_is_named_by_the_card_and_the_script(tmp_path, capsys, source_class, config,
                                                                            left):
    """A masked LM holds no RoBERTa pooler (as HF's RobertaForMaskedLM) and no next-sentence head: the card says
    which of the source's weights it left, where it said every weight was copied."""
    from linformer.modeling.card import read_card_info

    save_source(tmp_path / "src", source_class, config)
    save_tokenizer(tmp_path / "src", VOCAB, pad_id=config.pad_token_id)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"out_dir={tmp_path / 'out'}")
    assert read_card_info(tmp_path / "out")["model"]["not_copied"] == left
    card = (tmp_path / "out" / "README.md").read_text()
    # a source without an MLM head gets a fresh one: not "nothing is new"
    assert ("in full attention only the head below is new." in card) == (source_class is not BertForPreTraining)
    if left:
        assert f"copied except `{left[0]}`, which a LinformerForMaskedLM does not hold;" in card
        assert f"; not copied from the source: {left[0]}, which a LinformerForMaskedLM does not hold" in said
    else:
        assert "every weight of the source is copied;" in card and "not copied" not in said


@pytest.mark.parametrize("source_class, left", [(RobertaForSequenceClassification, ["classifier.dense",
                                                                                  "classifier.out_proj"]),
                                                 (RobertaForMaskedLM, ["lm_head"])], ids=["classifier", "mlm"])
def test_a_bare_encoder_names_the_source_heads_it_leaves(tmp_path, source_class, left):
    """The card of a bare encoder (transfer.py's) names the heads it left, where it said every weight was copied."""
    from linformer.modeling.card import conversion_info

    save_source(tmp_path, source_class, ROBERTA)
    model = LinformerModel.from_pretrained_encoder(tmp_path, attention="full")
    assert conversion_info(tmp_path, model, name="bare")["model"]["not_copied"] == left


def test_a_gpt2_source_is_refused_as_unsupported_not_for_its_tokenizer(tmp_path):
    GPT2Model(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=N)).save_pretrained(tmp_path)
    line = _refused(f"model_path={tmp_path}", f"out_dir={tmp_path / 'out'}")
    assert "is a 'gpt2' model; only bert, roberta, xlm-roberta, camembert encoders can be converted" in line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ bad inputs
def test_unsupported_model_type_names_the_supported_ones(tmp_path):
    DistilBertModel(DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=4, hidden_dim=64)).save_pretrained(
        tmp_path)
    with pytest.raises(CheckpointError, match="'distilbert' model; only bert, roberta, xlm-roberta, camembert"):
        LinformerModel.from_pretrained_encoder(tmp_path)


def test_k_above_n_is_a_config_error(tmp_path):
    save_source(tmp_path, BertModel, BERT)
    with pytest.raises(ConfigError, match=r"projected_dim \(k=64\) must be in 1..max_seq_len \(n=24\)"):
        LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=64)


def test_unknown_setting_is_a_config_error(tmp_path):
    save_source(tmp_path, BertModel, BERT)
    with pytest.raises(ConfigError, match=r"^projected_dims is not a LinformerConfig field \(did you mean projected_dim\?\)"):
        LinformerModel.from_pretrained_encoder(tmp_path, projected_dims=8)


def test_paths_without_a_model_are_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="holds no model"):
        LinformerModel.from_pretrained_encoder(tmp_path)
    save_source(tmp_path, BertModel, BERT)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no weights that load"):
        LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8)  # settings that fit: they are checked first


def test_another_number_of_labels_starts_the_classifier_fresh(tmp_path, caplog):
    source = save_source(tmp_path, BertForSequenceClassification, BERT)  # 3 labels
    caplog.set_level(logging.INFO, logger="linformer.modeling.convert")
    model = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, num_labels=2, projected_dim=8)
    assert model.config.num_labels == 2 and model.classifier.out_features == 2
    assert "starting fresh: classifier (" in caplog.records[0].getMessage()
    torch.testing.assert_close(model.roberta.pooler.dense.weight, source.bert.pooler.dense.weight)


# ------------------------------------------------------------------------------------------ longer inputs
@pytest.mark.parametrize("source_class, config, offset", [(BertModel, BERT, 0), (RobertaModel, ROBERTA, 2)],
                         ids=["bert", "roberta"])
def test_longer_n_repeats_the_learned_positions(tmp_path, source_class, config, offset):
    source = save_source(tmp_path, source_class, config)
    n = 3 * N + 5  # not a whole number of copies
    ours = LinformerModel.from_pretrained_encoder(tmp_path, max_seq_len=n, attention="full").eval()
    old = source.embeddings.position_embeddings.weight
    new = ours.embeddings.position_embeddings.weight
    assert new.shape[0] == n + offset == ours.config.max_position_embeddings
    torch.testing.assert_close(new[: old.shape[0]], old)  # the source's rows (RoBERTa's first two too) stay
    learned = old[offset:]
    for start in range(offset, n + offset, N):
        block = new[start : start + N]
        torch.testing.assert_close(block, learned[: len(block)])
    inputs = batch(config)  # no longer than the source's limit: the source's outputs
    torch.testing.assert_close(outputs(ours, inputs), outputs(source, inputs), atol=1e-4, rtol=0)
    long = batch(config, T=n)
    with torch.no_grad():
        assert ours(**long).last_hidden_state.shape == (3, n, config.hidden_size)


def test_longer_n_sizes_the_projections_to_it(tmp_path):
    save_source(tmp_path, RobertaForMaskedLM, ROBERTA)
    model = LinformerForMaskedLM.from_pretrained_encoder(tmp_path, max_seq_len=4 * N, projected_dim=8)
    assert model.roberta.encoder.layer[0].attention.self.E.weight.shape[-2:] == (4 * N, 8)
    inputs = batch(ROBERTA, T=4 * N)
    with torch.no_grad():
        assert model(**inputs).logits.shape == (3, 4 * N, VOCAB)


def test_longer_n_without_extension_is_a_config_error(tmp_path):
    save_source(tmp_path, BertModel, BERT)
    with pytest.raises(ConfigError, match=f"max_seq_len=48 is longer .* so max_seq_len <= {N}; pass extend_positions"):
        LinformerModel.from_pretrained_encoder(tmp_path, max_seq_len=48, projected_dim=8, extend_positions=False)


# ------------------------------------------------------------------------------------------ a saved Linformer
@pytest.mark.parametrize("source_class, config, offset", [(BertForSequenceClassification, BERT, 0),
                                                          (RobertaForSequenceClassification, ROBERTA, 2)],
                         ids=["bert", "roberta"])
def test_a_saved_linformer_is_lengthened_and_projected_keeping_every_weight(tmp_path, source_class, config, offset):
    """from_linformer: a finetuned full-mode classifier at 4 N tokens is, for inputs it took before, the same model;
    with Linformer attention only E and F are new, and it takes the converted models' length policy."""
    from linformer.modeling.convert import from_linformer

    source = save_source(tmp_path / "src", source_class, config)
    LinformerForSequenceClassification.from_pretrained_encoder(tmp_path / "src", attention="full").save_pretrained(
        tmp_path / "full")
    longer = from_linformer(str(tmp_path / "full"), AutoModelForSequenceClassification, max_seq_len=4 * N).eval()
    assert longer.config.max_seq_len == 4 * N and longer.config.max_position_embeddings == 4 * N + offset
    inputs = batch(config)
    with torch.no_grad():
        torch.testing.assert_close(longer(**inputs).logits, source.eval()(**inputs).logits, atol=1e-4, rtol=0)
        assert longer(**batch(config, T=4 * N)).logits.shape == (3, config.num_labels)
    projected = from_linformer(str(tmp_path / "full"), AutoModelForSequenceClassification, attention="linformer",
                               projected_dim=8, max_seq_len=4 * N)
    assert (projected.config.length_policy, projected.config.exact_short_inputs) == ("resample", True)
    fresh = {k for k, v in projected.state_dict().items()
             if k not in longer.state_dict() or not torch.equal(v, longer.state_dict()[k])}
    assert fresh and all(".E." in k or ".F." in k or k.endswith((".E.weight", ".F.weight")) for k in fresh)
    with pytest.raises(ConfigError, match="pass extend_positions=True"):
        from_linformer(str(tmp_path / "full"), AutoModelForSequenceClassification, max_seq_len=4 * N,
                       extend_positions=False)


@pytest.mark.parametrize("sharing", ["headwise", "layerwise"])
def test_a_saved_linformer_turned_to_full_attention_drops_its_projections_and_says_so(tmp_path, capsys, sharing):
    """configs/convert.yaml's longer teacher (model.attention=full from a pretraining run): the saved E and F, which
    full attention has no use for, were counted as an encoder mismatch and the conversion refused. They are dropped,
    named once (every layer's as one name) by the script and the card, and the model is the full-attention model of
    the same encoder weights."""
    from linformer.modeling.card import read_card_info
    from linformer.modeling.configuration import LinformerConfig

    torch.manual_seed(0)
    config = LinformerConfig(**{**SIZE, "vocab_size": VOCAB + 2}, max_seq_len=N, projected_dim=8, sharing=sharing,
                             type_vocab_size=1, position_offset=2, max_position_embeddings=N + 2, pad_token_id=1)
    saved = LinformerForMaskedLM(config)
    saved.save_pretrained(tmp_path / "src")
    save_tokenizer(tmp_path / "src", VOCAB + 2, pad_id=1)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"model.max_seq_len={N}",
                      f"out_dir={tmp_path / 'out'}")
    left = read_card_info(tmp_path / "out")["model"]["not_copied"]
    assert left == (["roberta.encoder.E"] if sharing == "layerwise" else
                    ["roberta.encoder.layer.*.attention.self.E", "roberta.encoder.layer.*.attention.self.F"])
    assert said.count("not copied from the source: roberta.encoder.") == 1
    full = LinformerForMaskedLM(LinformerConfig(**{**config.to_dict(), "attention": "full"}))
    full.load_state_dict({k: v for k, v in saved.state_dict().items() if k in full.state_dict()})
    converted = AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    assert converted.config.attention == "full"
    inputs = {k: v for k, v in batch(config).items() if k != "token_type_ids"}
    with torch.no_grad():
        torch.testing.assert_close(converted(**inputs).logits, full.eval()(**inputs).logits)


@pytest.mark.parametrize("sharing", ["headwise", "layerwise"])
def test_the_source_projections_a_conversion_drops_are_said_as_full_attentions_not_the_class(tmp_path, capsys,
                                                                                           sharing):
    """A saved Linformer's E and F, dropped by a conversion to full attention: the line said "(LinformerForMaskedLM
    holds none)", and the card "which a LinformerForMaskedLM does not hold", as if the class held no E or F; it is
    full attention that has none (a Linformer target keeps them). A pooler or head is still one the class does not
    hold."""
    from linformer.modeling.card import not_copied_words, read_card_info, render_card
    from linformer.modeling.configuration import LinformerConfig

    torch.manual_seed(0)
    config = LinformerConfig(**{**SIZE, "vocab_size": VOCAB + 2}, max_seq_len=N, projected_dim=8, sharing=sharing,
                             type_vocab_size=1, position_offset=2, max_position_embeddings=N + 2, pad_token_id=1)
    LinformerForMaskedLM(config).save_pretrained(tmp_path / "src")
    save_tokenizer(tmp_path / "src", VOCAB + 2, pad_id=1)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"model.max_seq_len={N}",
                      f"out_dir={tmp_path / 'out'}")
    dropped = ("roberta.encoder.E" if sharing == "layerwise" else
               "roberta.encoder.layer.*.attention.self.E, roberta.encoder.layer.*.attention.self.F")
    assert f"not copied from the source: {dropped} (full attention has no E or F)" in said
    assert "holds none" not in said
    info = read_card_info(tmp_path / "out")
    card = str(render_card(info, "out"))
    assert "`roberta.encoder.E` (full attention has no E or F)" in card or "self.F` (full attention" in card
    assert "does not hold" not in card
    both = {**info["model"], "not_copied": ["roberta.pooler", *info["model"]["not_copied"]]}
    assert not_copied_words(both).startswith("roberta.pooler, which a LinformerForMaskedLM does not hold; roberta.")


def test_a_truncated_source_is_a_checkpoint_error(tmp_path):
    save_source(tmp_path, BertModel, BERT)
    weights = tmp_path / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    with pytest.raises(CheckpointError, match="no weights that load .*damaged or incomplete"):
        LinformerModel.from_pretrained_encoder(tmp_path, projected_dim=8)


def test_a_hub_name_the_hub_cannot_give_is_one_line_saying_so(monkeypatch):
    """Online without a network, transformers' several-line message used to be reported as a config.json that
    transformers cannot read, of a folder that does not exist."""
    import linformer.modeling.convert as convert

    def unreachable(path, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(convert.AutoConfig, "from_pretrained", unreachable)
    with pytest.raises(CheckpointError) as err:
        convert._source_config("someone/no-such-model")
    assert str(err.value) == ("'someone/no-such-model' is not a folder here, and the Hugging Face hub did not give it "
                              "(We couldn't connect to 'https://huggingface.co' to load the files.): give a local "
                              "model directory, or check the name and the network.")


def test_the_model_classes_convert_through_a_function_not_a_converter_base_class():
    """Conversion lives in convert.py; the model classes only name it (from_pretrained_encoder delegates), so a
    model class's hierarchy holds nothing of the converter."""
    from linformer.modeling import convert
    from linformer.modeling.model import LinformerModel
    from linformer.modeling.task_models import LinformerForMaskedLM, LinformerForSequenceClassification

    for cls in (LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification):
        assert not [base for base in cls.__mro__ if base.__module__ == convert.__name__]
        assert callable(cls.from_pretrained_encoder)
    assert LinformerForSequenceClassification.copies_classifier_fields and not LinformerModel.copies_classifier_fields


def test_the_converted_default_counts_no_token_twice_unless_told():
    from linformer.modeling.convert import converted_exact_keys

    assert converted_exact_keys({}, 512) == {"local_window": 128, "global_positions": [0, -1],
                                             "overlap_columns": "mask"}
    assert converted_exact_keys({"overlap_columns": "keep"}, 512) == {"local_window": 128,
                                                                      "global_positions": [0, -1]}
    assert converted_exact_keys({"attention": "full"}, 512) == {}


def test_a_field_left_unset_at_conversion_keeps_its_converted_default(tmp_path):
    """Naming one exact-key field (a window of 64, or the defaults given explicitly) dropped every other: the global
    tokens became none and overlap_columns "keep", a model the user did not ask for. Each unset field keeps its
    default; 0 and [] turn a part off, and with no exact keys left overlap_columns has nothing to do (not set)."""
    from linformer.modeling.configuration import exact_key_variants
    from linformer.modeling.convert import converted_config, converted_exact_keys

    assert converted_exact_keys({"local_window": 64}, 512) == {"global_positions": [0, -1], "overlap_columns": "mask"}
    assert converted_exact_keys({"local_window": 128, "global_positions": [0, -1]}, 512) == {
        "overlap_columns": "mask"}
    assert converted_exact_keys({"global_positions": []}, 512) == {"local_window": 128, "overlap_columns": "mask"}
    assert converted_exact_keys({"local_window": 0}, 512) == {"global_positions": [0, -1], "overlap_columns": "mask"}
    assert converted_exact_keys({"local_window": 0, "global_positions": []}, 512) == {}

    save_source(tmp_path, BertModel, BERT)

    def fields(**settings):
        config = converted_config(str(tmp_path), projected_dim=8, **settings)
        return config.local_window, config.global_positions, config.overlap_columns

    assert fields(local_window=8) == (8, [0, -1], "mask")
    assert fields(local_window=N, global_positions=[0, -1]) == fields()
    # the measurement scripts' rows are the overlap rule their labels say
    assert all(row["overlap_columns"] == "keep" for label, row in exact_key_variants([8], [0, -1]).items())


@pytest.mark.parametrize("dtype", [torch.bfloat16, "bfloat16", "torch.float16"])
def test_a_conversion_gives_the_dtype_asked_as_from_pretrained_does(tmp_path, dtype):
    """dtype= (or torch_dtype=), from_pretrained's keyword, was kept on the config and the weights stayed float32."""
    save_source(tmp_path / "bert", BertModel, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    want = getattr(torch, str(dtype).removeprefix("torch.")) if isinstance(dtype, str) else dtype
    model = LinformerModel.from_pretrained_encoder(tmp_path / "bert", projected_dim=8, dtype=dtype)
    assert {p.dtype for p in model.parameters()} == {want} and model.config.dtype == want
    out = convert_encoder(tmp_path / "bert", tmp_path / "out", LinformerModel, projected_dim=8, torch_dtype=dtype)
    assert LinformerModel.from_pretrained(out, dtype="auto").dtype == want  # saved as asked, read back so
    assert LinformerModel.from_pretrained_encoder(tmp_path / "bert", projected_dim=8, dtype="auto").dtype == torch.float32
    with pytest.raises(ConfigError, match=r"^dtype='int8' is not a floating-point torch dtype"):
        LinformerModel.from_pretrained_encoder(tmp_path / "bert", projected_dim=8, dtype="int8")


@pytest.mark.parametrize("half", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_a_half_precision_source_keeps_its_dtype_with_auto_and_in_a_saved_conversion(tmp_path, half):
    """dtype="auto" (from_pretrained's) is the source's dtype; none given, float32 (a model to train); a saved
    conversion (convert_encoder, scripts/convert.py) keeps the source's dtype, and so does a reshape of it."""
    save_source(tmp_path / "bert", BertModel, BERT)
    BertModel.from_pretrained(tmp_path / "bert", dtype=torch.float32).to(half).save_pretrained(tmp_path / "half")
    save_tokenizer(tmp_path / "half", VOCAB)
    assert LinformerModel.from_pretrained_encoder(tmp_path / "half", projected_dim=8, dtype="auto").dtype == half
    assert LinformerModel.from_pretrained_encoder(tmp_path / "half", projected_dim=8).dtype == torch.float32
    out = convert_encoder(tmp_path / "half", tmp_path / "out", projected_dim=8)
    assert json.loads((out / "config.json").read_text())["dtype"] == str(half).removeprefix("torch.")
    assert AutoModelForMaskedLM.from_pretrained(out, dtype=torch.float32).dtype == torch.float32  # a choice, still
    longer = convert_encoder(out, tmp_path / "longer", max_seq_len=2 * N)  # reshaped: from_linformer
    assert LinformerForMaskedLM.from_pretrained(longer).dtype == half
    assert LinformerForMaskedLM.from_pretrained_encoder(out, max_seq_len=2 * N).dtype == torch.float32
    as_float = convert_encoder(tmp_path / "half", tmp_path / "float", projected_dim=8, dtype="float32")
    assert LinformerForMaskedLM.from_pretrained(as_float).dtype == torch.float32


def test_a_saved_linformer_is_reshaped_by_either_entry_point_in_the_class_it_was_saved_as(tmp_path):
    """from_pretrained_encoder refused a saved Linformer that convert_encoder reshapes, and convert_encoder gave a
    saved bare encoder a masked-LM head of random weights; both now keep what was saved, and model_class chooses."""
    save_source(tmp_path / "bert", BertModel, BERT)
    save_tokenizer(tmp_path / "bert", VOCAB)
    encoder = convert_encoder(tmp_path / "bert", tmp_path / "enc", LinformerModel, projected_dim=8)
    longer = convert_encoder(encoder, tmp_path / "longer", max_seq_len=2 * N)
    assert json.loads((longer / "config.json").read_text())["architectures"] == ["LinformerModel"]
    saved = LinformerModel.from_pretrained(encoder)
    same = LinformerModel.from_pretrained(longer)
    assert not any(k.startswith("lm_head") for k in same.state_dict())
    ids = batch(BERT)
    with torch.no_grad():  # inputs as long as before: the same model (positions copied, E's rows resampled alike)
        via_python = LinformerModel.from_pretrained_encoder(encoder, max_seq_len=2 * N).eval()
        torch.testing.assert_close(outputs(via_python, ids), outputs(same.eval(), ids))
    assert via_python.config.max_seq_len == 2 * N and saved.config.max_seq_len == N
    mlm = convert_encoder(encoder, tmp_path / "mlm", LinformerForMaskedLM, max_seq_len=2 * N)
    assert json.loads((mlm / "config.json").read_text())["architectures"] == ["LinformerForMaskedLM"]


@pytest.mark.parametrize("value, message", [("abc", "max_seq_len='abc' must be a whole number >= 1."),
                                            (0, "max_seq_len=0 must be a whole number >= 1.")])
def test_a_length_of_the_wrong_type_is_named_as_given_by_either_conversion(tmp_path, value, message):
    """The position table is sized from max_seq_len before the config checks it: 'abc' was a ValueError from int(),
    0 an error about max_position_embeddings, a field nobody gave. A BERT source and a saved Linformer alike."""
    save_source(tmp_path / "bert", BertModel, BERT)
    LinformerModel.from_pretrained_encoder(tmp_path / "bert", projected_dim=8).save_pretrained(tmp_path / "linformer")
    for source in ("bert", "linformer"):
        with pytest.raises(ConfigError) as err:
            LinformerModel.from_pretrained_encoder(tmp_path / source, projected_dim=8, max_seq_len=value)
        assert str(err.value) == message


def test_a_folder_with_a_single_weights_file_beside_a_sharded_index_is_refused_naming_both(tmp_path):
    """A sharded save_pretrained into a folder holding model.safetensors leaves that file, and transformers loads it
    (the older weights) without a word: a start model with both is refused, naming them."""
    from linformer.modeling.loading import check_model_intact

    (tmp_path / "model.safetensors").write_bytes(b"old")
    check_model_intact(tmp_path, "model_path='x'")  # one set of weights, recorded nowhere: taken as it is
    (tmp_path / "model.safetensors.index.json").write_text("{}")
    with pytest.raises(CheckpointError, match=r"^model_path='x': the model .* holds both model.safetensors and "
                                              r"model.safetensors.index.json"):
        check_model_intact(tmp_path, "model_path='x'")


@pytest.mark.parametrize("edit, said", [
    ({"num_hidden_layers": 1}, " (it gives num_hidden_layers=1, the weights hold 2 layers)"),
    ({"num_hidden_layers": 3}, " (it gives num_hidden_layers=3, the weights hold 2 layers)"),
    ({"intermediate_size": 128}, (": bert.encoder.layer.0.intermediate.dense.bias is [64] in the weights, [128] by "
                                  "config.json; bert.encoder.layer.0.intermediate.dense.weight is [64, 32] in the "
                                  "weights, [128, 32] by config.json (and 4 more)")),
], ids=["fewer-layers", "more-layers", "shape"])
def test_a_config_json_that_does_not_describe_its_weights_is_one_error_line(tmp_path, edit, said):
    """A config.json edited after the weights were saved: with fewer layers the conversion dropped a layer and its
    record said nothing was left out; with more, transformers started a layer at random and it was copied as the
    source's; with another FFN width, transformers' 47-line traceback. One line naming the file, exit 2, nothing
    written."""
    save_source(tmp_path / "src", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "src", VOCAB)
    path = tmp_path / "src" / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))
    line = _refused(f"model_path={tmp_path / 'src'}", f"out_dir={tmp_path / 'out'}", f"model.max_seq_len={N}",
                    "model.projected_dim=8")
    assert line == (f"error: {path} does not describe the weights beside it{said}: give the folder the "
                    "config.json its weights were saved with."), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_what_the_weight_files_hold_beside_the_source_class_is_copied_or_named(tmp_path):
    """bert-base-uncased's folder: config.json names BertForMaskedLM, the weights are BertForPreTraining's, with a
    pooler and a next-sentence head that BertForMaskedLM does not take. The pooler, which a classifier holds, started
    at random (Hugging Face's classifier loaded from the folder has it), and the next-sentence head went unnamed. The
    pooler is copied from the file, and the head is named as not copied."""
    from linformer.modeling.card import conversion_info

    source = save_source(tmp_path, BertForPreTraining, BERT)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "architectures": ["BertForMaskedLM"]}))
    model = LinformerForSequenceClassification.from_pretrained_encoder(tmp_path, attention="full")
    torch.testing.assert_close(model.roberta.pooler.dense.weight, source.bert.pooler.dense.weight, rtol=0, atol=0)
    record = conversion_info(tmp_path, model, name="cls")["model"]
    assert record["not_copied"] == ["cls.seq_relationship", "lm_head"] and record["fresh"] == ["classifier"]


@pytest.mark.parametrize("attention", ["full", "linformer"])
def test_the_card_and_the_script_name_a_pooler_that_starts_fresh(tmp_path, capsys, attention):
    """A BertForMaskedLM holds no pooler, and the masked LM converted from it carries a fresh one (a classifier
    finetuned from it reads it): the card said "in full attention nothing is new"."""
    from linformer.modeling.card import read_card_info

    save_source(tmp_path / "src", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "src", VOCAB)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", f"model.attention={attention}",
                      f"model.max_seq_len={N}", "model.projected_dim=8", f"out_dir={tmp_path / 'out'}")
    assert "; roberta.pooler.dense starts fresh (not in the source)" in said
    assert read_card_info(tmp_path / "out")["model"]["fresh"] == ["roberta.pooler.dense"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "nothing is new" not in card
    assert "The source holds no weights for `roberta.pooler.dense`: it starts at random (until trained)." in card
    assert ("in full attention only `roberta.pooler.dense` is new." in card) == (attention == "full")


def test_a_converted_linformer_turned_to_full_attention_drops_its_exact_keys_and_says_so(tmp_path, capsys):
    """The guide's longer teacher: a converted Linformer (with the converted default exact keys) given
    model.attention=full was refused until the user also passed local_window=0 and global_positions=[]. The exact
    keys, which full attention has no projection to sit beside, are cleared and the summary says so; the model is the
    source's again."""
    source = save_source(tmp_path / "src", BertForMaskedLM, BERT)
    save_tokenizer(tmp_path / "src", VOCAB)
    _converted(capsys, f"model_path={tmp_path / 'src'}", f"model.max_seq_len={N}", "model.projected_dim=8",
               f"out_dir={tmp_path / 'lin'}")
    assert LinformerConfig.from_pretrained(tmp_path / "lin").global_positions == [0, -1]
    said = _converted(capsys, f"model_path={tmp_path / 'lin'}", "model.attention=full", f"out_dir={tmp_path / 'full'}")
    assert f"; local_window={N}, global_positions=[0, -1] cleared: full attention attends to every key" in said
    full = AutoModelForMaskedLM.from_pretrained(tmp_path / "full").eval()
    assert (full.config.attention, full.config.local_window, full.config.global_positions) == ("full", 0, [])
    inputs = batch(BERT)
    torch.testing.assert_close(outputs(full, inputs), outputs(source, inputs), atol=1e-4, rtol=0)


def test_the_summary_says_when_the_source_positions_repeat_to_reach_n(tmp_path, capsys):
    """The CLI's default n (512) on a shorter source repeated its positions without a word in the command's output."""
    save_source(tmp_path / "src", BertModel, BERT)
    save_tokenizer(tmp_path / "src", VOCAB)
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"model.max_seq_len={4 * N}",
                      f"out_dir={tmp_path / 'long'}")
    assert f"; the source's {N} position rows repeat to fill n = {4 * N}" in said
    said = _converted(capsys, f"model_path={tmp_path / 'src'}", "model.attention=full", f"model.max_seq_len={N}",
                      f"out_dir={tmp_path / 'same'}")
    assert "repeat" not in said
