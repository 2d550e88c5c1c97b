"""The model's entry checks its inputs: each mistake is a ValueError saying what was expected, not a reshape or
index error from deep inside, and a wrong-shaped all-ones mask is not silently accepted."""

import pytest
import torch

from linformer import LinformerForMaskedLM, LinformerForSequenceClassification, LinformerModel
from tests.modeling.conftest import tiny_config


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    config = tiny_config(num_labels=2)
    return [cls(config).eval() for cls in (LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification)]


IDS = torch.randint(4, 60, (2, 10))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"input_ids": IDS[0]}, r"input_ids must be \(batch, tokens\); got shape \(10,\): add the batch dimension"),
    ({"input_ids": IDS[:0]}, r"input_ids is empty \(shape \(0, 10\)\)"),
    ({"input_ids": IDS[:, :0]}, r"input_ids is empty \(shape \(2, 0\)\)"),
    ({"input_ids": IDS, "attention_mask": torch.ones(2, 12)},
     r"attention_mask must be \(batch, tokens\) = \(2, 10\), True \(1\) at real tokens, or .*; got \(2, 12\)"),
    ({"input_ids": IDS, "attention_mask": torch.ones(1, 10)}, r"attention_mask must be \(batch, tokens\)"),
    ({"input_ids": IDS, "attention_mask": torch.ones(2, 1, 10)}, r"attention_mask must be \(batch, tokens\)"),
    ({"input_ids": IDS, "token_type_ids": torch.zeros(2, 9, dtype=torch.long)}, r"token_type_ids must have"),
    ({"input_ids": IDS, "position_ids": torch.arange(9)}, r"position_ids must be"),
    ({"inputs_embeds": torch.zeros(10, 32)}, r"inputs_embeds must be \(batch, tokens, hidden\)"),
    ({}, "Give exactly one of input_ids or inputs_embeds"),
])
def test_a_bad_input_is_a_value_error_saying_what_was_expected(models, kwargs, message):
    for model in models:
        with pytest.raises(ValueError, match=message):
            model(**kwargs)


def test_a_wrongly_shaped_mask_names_the_4d_masks_it_takes_too(models):
    """A (batch, 1, tokens) mask was told only that (batch, tokens) was expected, though the model also takes
    transformers' (batch, 1, 1, tokens) mask and a (batch, 1, tokens, tokens) one that masks keys alone."""
    for model in models:
        with pytest.raises(ValueError) as refused:
            model(input_ids=IDS, attention_mask=torch.ones(2, 1, 10))
        assert str(refused.value) == (
            "attention_mask must be (batch, tokens) = (2, 10), True (1) at real tokens, or transformers' 4-D (batch, "
            "1, 1, tokens) = (2, 1, 1, 10) or key-padding-only (batch, 1, tokens, tokens) = (2, 1, 10, 10), every "
            "query's row the same (input_ids is (batch, tokens) = (2, 10)); got (2, 1, 10).")
        for accepted in (torch.ones(2, 1, 1, 10, dtype=torch.bool), torch.ones(2, 1, 10, 10, dtype=torch.bool)):
            model(input_ids=IDS, attention_mask=accepted)


def test_the_shapes_it_accepts_still_run(models):
    for model in models:
        model(input_ids=IDS, attention_mask=torch.ones(2, 10), position_ids=torch.arange(10)[None] + 2)
        model(input_ids=IDS[:1, :1])  # one sequence of one token


@pytest.mark.parametrize("cls", [LinformerModel, LinformerForSequenceClassification])
def test_from_pretrained_on_a_missing_folder_names_the_folder(cls, tmp_path):
    from linformer import LinformerConfig

    missing = tmp_path / "no" / "such-model"
    for load in (cls.from_pretrained, LinformerConfig.from_pretrained):
        with pytest.raises(FileNotFoundError, match=rf"{missing} is not a folder here"):
            load(str(missing))
        with pytest.raises(OSError):  # what transformers' callers catch
            load(missing)


def _left_padding_warnings(model, monkeypatch) -> list[str]:
    import linformer.modeling.model as model_module

    said = []
    monkeypatch.setattr(model_module.logger, "warning_once", said.append)
    left = torch.ones(2, 10, dtype=torch.long)
    left[1, :3] = 0
    model(input_ids=IDS, attention_mask=left)
    return said


def test_left_padding_is_named_where_the_projections_read_positions_and_only_there(monkeypatch):
    """E's rows are positions from the sequence's start, so a left-padded row's output is not its output alone: a
    warning says to pad on the right. Right padding, no padding and full attention with RoBERTa's positions (which
    skip padding) read by every token stay silent."""
    import linformer.modeling.model as model_module

    said = []
    monkeypatch.setattr(model_module.logger, "warning_once", said.append)
    torch.manual_seed(0)
    linformer = LinformerModel(tiny_config()).eval()
    full = LinformerModel(tiny_config(attention="full"), add_pooling_layer=False).eval()
    right, left = torch.ones(2, 10, dtype=torch.long), torch.ones(2, 10, dtype=torch.long)
    right[1, 7:] = 0
    left[1, :3] = 0
    for model, mask in ((linformer, right), (linformer, None), (full, left)):
        model(input_ids=IDS, attention_mask=mask)
    assert said == []
    linformer(input_ids=IDS, attention_mask=left)
    assert len(said) == 1 and "left padding" in said[0] and "padding_side = 'right'" in said[0]
    assert "E and F project keys by position" in said[0]


@pytest.mark.parametrize(("build", "effect"), [
    # BERT's layout counts positions from the sequence's start: left padding moves every token's position
    (lambda: LinformerModel(tiny_config(attention="full", position_offset=0), add_pooling_layer=False),
     "positions count from the sequence's start (position_offset 0)"),
    # RoBERTa's positions skip padding, but the first position, read for the sentence, is then a pad
    (lambda: LinformerModel(tiny_config(attention="full")), "the first position, which the pooler or classifier"),
    (lambda: LinformerForSequenceClassification(tiny_config(attention="full", num_labels=2)),
     "the first position, which the pooler or classifier"),
    (lambda: LinformerForSequenceClassification(tiny_config(attention="full", num_labels=2,
                                                            classifier_pooling="mean")), None),
    (lambda: LinformerForMaskedLM(tiny_config(attention="full", classifier_head="bert")), None),
])
def test_left_padding_under_full_attention_is_warned_where_it_changes_the_output(monkeypatch, build, effect):
    """Full attention was exempt from the warning, though a BERT-layout model's positions move under left padding
    (as Hugging Face's BERT's do) and a [CLS]-reading classifier reads a pad: each is said, in the one warning; what
    left padding leaves unchanged (the mean of real tokens, MLM under RoBERTa's positions) stays silent."""
    torch.manual_seed(0)
    said = _left_padding_warnings(build().eval(), monkeypatch)
    if effect is None:
        assert said == []
    else:
        assert len(said) == 1 and effect in said[0] and "padding_side = 'right'" in said[0]
        assert "E and F" not in said[0]


@pytest.mark.parametrize("segments", [1, 2])
def test_a_segment_id_without_an_embedding_row_is_refused_saying_so(segments):
    """A one-segment model (RoBERTa's layout) given a BERT tokenizer's pair (the second text is segment 1) failed
    with an IndexError from the embedding (a device assert on a GPU): a ValueError now names the segment id and what
    the model takes. Ids the model has rows for run as before."""
    torch.manual_seed(0)
    model = LinformerForSequenceClassification(tiny_config(num_labels=2, type_vocab_size=segments)).eval()
    types = torch.zeros(2, 10, dtype=torch.long)
    types[:, 6:] = segments - 1
    model(input_ids=IDS, token_type_ids=types)
    types[1, 8] = segments
    message = ("one segment .*pass no token_type_ids.*return_token_type_ids=False" if segments == 1 else
               r"segment ids run from 0 to 1 \(type_vocab_size=2\)")
    with pytest.raises(ValueError, match=rf"token_type_ids holds segment id {segments}, but this model.*{message}"):
        model(input_ids=IDS, attention_mask=torch.ones(2, 10), token_type_ids=types)


def test_attention_maps_asked_of_the_exact_key_attention_say_why_they_are_none(monkeypatch):
    """The attention with exact local and global keys computes no probabilities: output_attentions=True gave a tuple
    of None without a word. It now warns, naming how to get maps; the paper's Linformer and full attention give
    their maps and stay silent."""
    import linformer.modeling.model as model_module

    said = []
    monkeypatch.setattr(model_module.logger, "warning_once", said.append)
    torch.manual_seed(0)
    plain, full = (LinformerModel(tiny_config(attention=a)).eval() for a in ("linformer", "full"))
    for model in (plain, full):
        assert all(a is not None for a in model(input_ids=IDS, output_attentions=True).attentions)
    assert said == []
    exact = LinformerModel(tiny_config(local_window=4, global_positions=[0, -1])).eval()
    assert all(a is None for a in exact(input_ids=IDS, output_attentions=True).attentions)
    assert len(said) == 1 and "computes no probabilities" in said[0] and "global_positions=[]" in said[0]
    exact(input_ids=IDS)  # maps not asked: nothing said
    assert len(said) == 1


def test_the_warning_says_exactly_when_the_exact_key_attention_returns_maps(monkeypatch):
    """The converted default (exact_short_inputs, local and global keys): a short input alone got T x T maps, the same
    input in a batch padded past k got None; the warning spoke of "an input of at most k tokens". It came for the
    maps too, saying `attentions` held None: it comes only when a layer's entry is None."""
    import linformer.modeling.model as model_module

    said = []
    monkeypatch.setattr(model_module.logger, "warning_once", said.append)
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(projected_dim=8, local_window=4, global_positions=[0, -1], sharing="layerwise",
                                       length_policy="resample", exact_short_inputs=True)).eval()
    short = IDS[:1, :5]
    assert [a.shape for a in model(input_ids=short, output_attentions=True).attentions] == [(1, 4, 5, 5)] * 2
    assert said == []  # every layer gave its maps
    ids = torch.cat([torch.cat([short, torch.ones(1, 11, dtype=torch.long)], 1), torch.randint(4, 60, (1, 16))])
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    assert all(a is None for a in model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions)
    assert said and "unless the batch as padded is at most k tokens long" in said[0]
    assert "a short row padded in a longer batch gets none" in said[0]


def test_a_bad_n_is_named_as_max_seq_len_not_as_the_position_table_derived_from_it():
    import numpy as np

    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^max_seq_len=-4 must be a whole number >= 1\.$"):
        tiny_config(max_seq_len=-4)
    with pytest.raises(ConfigError, match=r"^max_seq_len=np.int64\(16\) must be .*got a numpy.int64: pass int\(value\)"):
        tiny_config(max_seq_len=np.int64(16))


@pytest.mark.parametrize("attention, why", [("linformer", r"E and F are n x k"),
                                            ("full", r"its position table holds n positions")])
def test_an_input_longer_than_n_is_refused_naming_what_holds_n_rows(attention, why):
    """A full-attention model has no E or F: its n is the length of its position table."""
    torch.manual_seed(0)
    config = tiny_config(attention=attention, num_labels=2)  # n = 16
    for cls in (LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification):
        with pytest.raises(ValueError, match=rf"^Input has 17 tokens but the model's max_seq_len is n=16 \({why}\)\. "
                                             r"Truncate inputs to 16 tokens\.$"):
            cls(config).eval()(torch.randint(4, 60, (1, 17)))
