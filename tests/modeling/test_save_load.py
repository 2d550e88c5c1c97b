"""save_pretrained (safetensors) and Auto*.from_pretrained round trips, ties and classification losses."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification

from linformer import (
    LinformerConfig,
    LinformerForMaskedLM,
    LinformerForSequenceClassification,
    LinformerModel,
)
from linformer.errors import ConfigError

from .conftest import tiny_config


@pytest.mark.parametrize("sharing", ["none", "headwise", "kv", "layerwise"])
def test_mlm_auto_round_trip(tmp_path, sharing):
    config = tiny_config(sharing=sharing, projected_dim=[4, 8] if sharing != "layerwise" else 4)
    model = LinformerForMaskedLM(config).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "linformer" and saved["sharing"] == sharing

    assert isinstance(AutoConfig.from_pretrained(tmp_path), LinformerConfig)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, LinformerForMaskedLM)
    assert loaded.config.projected_dim == config.projected_dim
    assert loaded.lm_head.decoder.weight.data_ptr() == loaded.roberta.embeddings.word_embeddings.weight.data_ptr()
    ids = torch.randint(4, 64, (2, 12))
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, msg=name)


def test_auto_model_loads_the_encoder_of_an_mlm_checkpoint(tmp_path):
    mlm = LinformerForMaskedLM(tiny_config()).eval()
    mlm.save_pretrained(tmp_path)
    encoder = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(encoder, LinformerModel)
    ids = torch.randint(4, 64, (2, 12))
    torch.testing.assert_close(encoder(ids).last_hidden_state, mlm.roberta(ids).last_hidden_state)


def test_sequence_classification_from_mlm_checkpoint(tmp_path):
    mlm = LinformerForMaskedLM(tiny_config())
    mlm.save_pretrained(tmp_path)
    clf = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert isinstance(clf, LinformerForSequenceClassification)
    torch.testing.assert_close(
        clf.roberta.embeddings.word_embeddings.weight, mlm.roberta.embeddings.word_embeddings.weight
    )
    clf.save_pretrained(tmp_path / "clf")
    again = AutoModelForSequenceClassification.from_pretrained(tmp_path / "clf")
    torch.testing.assert_close(again.classifier.out_proj.weight, clf.classifier.out_proj.weight)


@pytest.mark.parametrize(
    "num_labels, labels, problem_type, reference",
    [
        (1, torch.tensor([0.5, -1.0]), "regression", lambda z, y: torch.nn.functional.mse_loss(z.squeeze(-1), y)),
        (3, torch.tensor([2, 0]), "single_label_classification", torch.nn.functional.cross_entropy),
        (
            3,
            torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
            "multi_label_classification",
            torch.nn.functional.binary_cross_entropy_with_logits,
        ),
    ],
)
def test_problem_types(num_labels, labels, problem_type, reference):
    model = LinformerForSequenceClassification(tiny_config(num_labels=num_labels)).eval()
    out = model(torch.randint(4, 64, (2, 10)), labels=labels)
    assert model.config.problem_type == problem_type
    assert out.logits.shape == (2, num_labels)
    torch.testing.assert_close(out.loss, reference(out.logits, labels))


def test_return_dict_false_gives_a_tuple():
    model = LinformerForMaskedLM(tiny_config()).eval()
    out = model(torch.randint(4, 64, (1, 8)), return_dict=False)
    assert isinstance(out, tuple) and out[0].shape == (1, 8, 64)


@pytest.mark.parametrize("cls", [LinformerModel, LinformerForMaskedLM, LinformerForSequenceClassification])
def test_config_return_dict_false_gives_the_dict_forms_values_as_a_tuple(cls):
    """config.return_dict=False (as HF's common tests set it): the heads used to read the encoder's output as a
    ModelOutput and crashed on its tuple. Every output, as a tuple, equals the dict form's values in order."""
    torch.manual_seed(0)
    model = cls(tiny_config(return_dict=False)).eval()
    ids, mask = torch.randint(4, 64, (2, 8)), torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    kwargs = dict(attention_mask=mask, output_hidden_states=True, output_attentions=True)
    if cls is not LinformerModel:
        kwargs["labels"] = torch.randint(0, 2, (2,)) if cls is LinformerForSequenceClassification else \
            torch.where(torch.rand(2, 8) < 0.5, ids, -100)
    as_tuple = model(ids, **kwargs)
    as_dict = model(ids, **kwargs, return_dict=True)
    assert isinstance(as_tuple, tuple)
    values = as_dict.to_tuple()
    assert len(as_tuple) == len(values)

    def same(a, b):
        if isinstance(a, tuple):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return (a is None and b is None) or torch.equal(a, b)

    assert all(same(a, b) for a, b in zip(as_tuple, values))


@pytest.mark.parametrize("attention", ["full", "linformer"])
def test_set_attn_implementation_changes_what_runs_and_both_agree(attention, monkeypatch):
    """eager: the explicit matmul-softmax-matmul; sdpa: the fused kernel (HF's switch). A forward under eager never
    calls scaled_dot_product_attention, and the two agree within HF's tolerance."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = LinformerModel(tiny_config(attention=attention)).eval()
    ids, mask = torch.randint(4, 64, (2, 16)), torch.ones(2, 16, dtype=torch.long)
    mask[1, 9:] = 0
    sdpa = model(ids, attention_mask=mask).last_hidden_state
    model.set_attn_implementation("eager")
    assert model.config._attn_implementation == "eager"
    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    eager = model(ids, attention_mask=mask).last_hidden_state
    assert calls == []  # eager ran
    torch.testing.assert_close(eager[mask.bool()], sdpa[mask.bool()], atol=1e-5, rtol=1e-5)
    model.set_attn_implementation("sdpa")
    model(ids, attention_mask=mask)
    assert calls  # sdpa ran


@pytest.mark.parametrize("segments", [1, 2])
def test_a_saved_tokenizer_gives_the_inputs_its_model_takes(tmp_path, segments):
    """A one-segment model (RoBERTa's layout) saved with a BERT tokenizer (pretraining with tokenizer_dir=minilm):
    the saved tokenizer gave token_type_ids, so a pipeline given a pair passed segment 1 to a one-row embedding. Every
    save (save_model_dir: a run's model/ and best/, an export, a conversion) now records the model's inputs in the
    tokenizer's model_input_names; a two-segment model keeps its segment ids, and the caller's tokenizer is unchanged."""
    from transformers import AutoTokenizer, BertTokenizer, pipeline

    from linformer.modeling.saving import save_model_dir

    words = ["good", "bad", "film", "is", "."]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])})
    torch.manual_seed(0)
    model = LinformerForSequenceClassification(tiny_config(num_labels=2, type_vocab_size=segments,
                                                           pad_token_id=tok.pad_token_id)).eval()
    save_model_dir(model, tok, tmp_path)
    saved = AutoTokenizer.from_pretrained(tmp_path)
    pair = saved("good film", "is bad .")
    assert ("token_type_ids" in pair) == (segments == 2) and "token_type_ids" in tok("good film", "is bad .")
    classify = pipeline("text-classification", model=model, tokenizer=saved, top_k=None)
    scores = {s["label"]: s["score"] for s in classify({"text": "good film", "text_pair": "is bad ."})}
    inputs = {k: torch.tensor([v]) for k, v in pair.items()}
    with torch.no_grad():
        probs = model(**inputs).logits.softmax(-1)[0]
    assert [scores[model.config.id2label[i]] for i in range(2)] == pytest.approx(probs.tolist(), abs=1e-6)


def test_a_saved_tokenizer_json_truncates_at_n_and_pads_nothing_whatever_the_tokenizer_was_called_with(tmp_path):
    """Every model directory (a run's model/ and best/, an export, a conversion: save_model_dir) writes a
    tokenizer.json that the tokenizers library, which applies its truncation and padding to every encode, reads as
    the model's n and no padding, even after the tokenizer encoded with other settings (a finetuning's batches)."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from linformer.modeling.saving import save_model_dir

    from .test_convert import save_tokenizer

    save_tokenizer(tmp_path / "tok", 64)
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok")
    tok(["w5 w6 w7 w8", "w9"], truncation=True, max_length=3, padding="max_length")
    save_model_dir(LinformerModel(tiny_config()), tok, tmp_path / "model")
    saved = json.loads((tmp_path / "model" / "tokenizer.json").read_text())
    assert saved["truncation"]["max_length"] == 16 and saved["padding"] is None
    encoded = Tokenizer.from_file(str(tmp_path / "model" / "tokenizer.json")).encode(" ".join(["w5"] * 40))
    assert len(encoded.ids) == 16


def test_saving_a_model_draws_no_progress_bar(tmp_path):
    """transformers' "Writing model shards" bar wrote carriage returns into a conversion's log file: every save of a
    model folder (a conversion's, an export's, a run's) goes through save_model_dir, with the bars off."""
    from transformers.utils import logging as hf_logging

    from linformer.modeling.saving import save_model_dir

    seen = []

    class Model:
        def save_pretrained(self, directory, **kwargs):
            seen.append(hf_logging.is_progress_bar_enabled())

    hf_logging.enable_progress_bar()
    save_model_dir(Model(), None, tmp_path)
    assert seen == [False] and hf_logging.is_progress_bar_enabled()


def _trained(tmp_path, **fields):
    """A tiny Linformer whose E and F stand for trained ones (moved off their window-mean start), saved."""
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(**fields)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith((".E.weight", ".F.weight")):
                p.add_(torch.randn_like(p))
    model.save_pretrained(tmp_path)
    return model


@pytest.mark.parametrize("load", [LinformerModel.from_pretrained,
                                  lambda path, **kw: AutoModel.from_pretrained(path, trust_remote_code=True, **kw)],
                         ids=["class", "auto"])
@pytest.mark.parametrize("saved, asked", [("kv", "headwise"), ("headwise", "kv"), ("kv", "layerwise"),
                                          ("layerwise", "kv")])
def test_from_pretrained_refuses_another_sharing_naming_the_field_both_values_and_the_route(tmp_path, load, saved,
                                                                                          asked):
    """Another sharing would load the saved E and F dropped or fresh (same shapes: no mismatch to refuse on)."""
    _trained(tmp_path, sharing=saved)
    with pytest.raises(ConfigError, match=rf"^sharing='{asked}' differs from the saved model's sharing='{saved}'.*"
                                          r"from_pretrained_encoder\(source, sharing="):
        load(tmp_path, sharing=asked)


def test_from_pretrained_refuses_a_longer_n_naming_max_seq_len_and_from_pretrained_encoder(tmp_path):
    _trained(tmp_path, length_policy="resample")
    with pytest.raises(ConfigError, match=r"^max_seq_len=32 differs from the saved model's max_seq_len=16.*"
                                          r"from_pretrained_encoder\(path, max_seq_len=32\)"):
        LinformerModel.from_pretrained(tmp_path, max_seq_len=32)
    longer = LinformerModel.from_pretrained_encoder(tmp_path, max_seq_len=32)  # the route it names
    assert longer.config.max_seq_len == 32


def test_from_pretrained_keeps_safe_overrides_and_the_saved_values(tmp_path):
    """Dropout, output flags, an override equal to the saved value (in another form: a tuple, one k for a uniform
    per-layer list), attention='full' (E and F left unread): loaded; a config alone may take any value."""
    model = _trained(tmp_path, projected_dim=[4, 4])
    ids = torch.randint(3, 64, (2, 16))
    again = LinformerModel.from_pretrained(tmp_path, hidden_dropout_prob=0.2, output_hidden_states=True,
                                           sharing="headwise", projected_dim=4).eval()
    assert again.config.hidden_dropout_prob == 0.2 and again.config.projected_dim == [4, 4]
    assert torch.equal(again(ids).last_hidden_state, model(ids).last_hidden_state)
    assert LinformerModel.from_pretrained(tmp_path, projected_dim=(4, 4)).config.projected_dim == [4, 4]
    assert LinformerModel.from_pretrained(tmp_path, attention="full").config.attention == "full"
    assert AutoConfig.from_pretrained(tmp_path, sharing="kv").sharing == "kv"  # no weights follow


@pytest.mark.parametrize("cls, saved, asked", [
    (LinformerModel, {"length_policy": "resample"}, {"length_policy": "slice"}),
    (LinformerModel, {"sharing": "kv"}, {"sharing": "headwise"}),
    (LinformerForSequenceClassification, {"classifier_pooling": "mean"}, {"classifier_pooling": "cls"}),
    (LinformerForMaskedLM, {}, {"tie_word_embeddings": False})], ids=["length_policy", "sharing", "pooling", "tie"])
@pytest.mark.parametrize("route", ["config", "config path", "auto"])
def test_a_config_passed_to_from_pretrained_is_checked_as_a_keyword_override_is(tmp_path, cls, saved, asked, route):
    """transformers builds the model from `config=` without reading config.json: a field the weights depend on,
    changed there, loaded them dropped, fresh or read as something else (another length policy, pooling or sharing)
    without a word, where the same keyword is a ConfigError."""
    torch.manual_seed(0)
    cls(tiny_config(**saved)).save_pretrained(tmp_path / "saved")
    (key, value), = asked.items()
    with pytest.raises(ConfigError, match=rf"^{key}={value!r} differs from the saved model's {key}=.*which its "
                                          rf"weights were saved for: from_pretrained loads them as saved, so leave "
                                          rf"{key} out; or "):
        cls.from_pretrained(tmp_path / "saved", **asked)  # the keyword: the same words, but for how to keep it
    config = AutoConfig.from_pretrained(tmp_path / "saved", **asked)  # a config alone takes any value
    config.save_pretrained(tmp_path / "changed")
    given = str(tmp_path / "changed") if route == "config path" else config
    load = AutoModel.from_pretrained if route == "auto" else cls.from_pretrained
    with pytest.raises(ConfigError, match=rf"^{key}={value!r} differs from the saved model's {key}=.*so give "
                                          rf"config= the saved {key}; or "):
        load(tmp_path / "saved", config=given)


@pytest.mark.parametrize("fields", [{}, {"projected_dim": [4, 8, 4]}], ids=["one k", "k per layer"])
def test_a_shallower_model_asked_of_a_deeper_one_is_told_the_slicing_that_keeps_its_first_layers(tmp_path, fields):
    """cfg.num_hidden_layers = 2 and from_pretrained(dir, config=cfg) on a 3-layer model (Hugging Face's way to a
    model's first layers) was refused with advice to pretrain or convert, and convert refuses it too. The refusal
    gives the slicing that works: followed as written, the model is the saved one's first two layers, and saves and
    loads as such. A BERT encoder's config= gets the same words, not advice to fix its folder's config.json."""
    import re

    from transformers import BertConfig, BertModel

    from linformer.errors import CheckpointError
    from linformer.modeling.convert import check_kept_shapes
    from linformer.modeling.loading import load_pretrained

    model = _trained(tmp_path / "saved", num_hidden_layers=3, **fields)
    config = AutoConfig.from_pretrained(tmp_path / "saved")
    config.num_hidden_layers = 2
    with pytest.raises(ConfigError, match=r"^num_hidden_layers=2 differs from the saved model's num_hidden_layers=3"
                                          r".* to keep its first 2 layers, load it whole and slice it: ") as err:
        LinformerModel.from_pretrained(tmp_path / "saved", config=config)
    route = re.search(r"slice it: (.*) \(and, where k is given per layer, (.*)\)\.$", str(err.value))
    whole = LinformerModel.from_pretrained(tmp_path / "saved").eval()
    exec(route[1] + (f"; {route[2]}" if fields else ""), {"model": whole})
    ids = torch.randint(3, 64, (2, 16))
    with torch.no_grad():
        first_two = model(ids, output_hidden_states=True).hidden_states[2]
        assert torch.allclose(whole(ids).last_hidden_state, first_two, atol=1e-6)
    whole.save_pretrained(tmp_path / "shallow")
    assert LinformerModel.from_pretrained(tmp_path / "shallow").config.num_hidden_layers == 2
    with pytest.raises(ConfigError, match=re.escape("leave num_hidden_layers out (it comes from the source); "
                                                    "to keep its first 2 layers, load it whole and slice it")):
        check_kept_shapes({"num_hidden_layers": 2}, LinformerConfig.from_pretrained(tmp_path / "saved"), "x")
    BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=64)).save_pretrained(tmp_path / "bert")
    bert = AutoConfig.from_pretrained(tmp_path / "bert")
    bert.num_hidden_layers = 2
    with pytest.raises(CheckpointError, match=r"^the config given \(config=\) does not describe the weights of .*: "
                                              r"give config= the one they were saved with, its own config.json; or to keep its first 2 "):
        load_pretrained(AutoModel, str(tmp_path / "bert"), config=bert)


def test_a_config_passed_to_from_pretrained_keeps_full_attention_and_the_other_fields_open(tmp_path):
    """attention='full', dropout and the labels through config= load as the keywords do; a folder without a
    config.json has only the given config to go by."""
    model = _trained(tmp_path / "saved", length_policy="resample")
    ids = torch.randint(3, 64, (2, 16))
    config = AutoConfig.from_pretrained(tmp_path / "saved", hidden_dropout_prob=0.3, num_labels=3)
    config.attention = "full"
    loaded = LinformerModel.from_pretrained(tmp_path / "saved", config=config)
    assert loaded.config.attention == "full" and loaded.config.hidden_dropout_prob == 0.3
    same = LinformerModel.from_pretrained(tmp_path / "saved", config=AutoConfig.from_pretrained(tmp_path / "saved"))
    assert torch.equal(same.eval()(ids).last_hidden_state, model(ids).last_hidden_state)
    (tmp_path / "saved" / "config.json").unlink()
    config.attention, config.length_policy = "linformer", "slice"
    assert LinformerModel.from_pretrained(tmp_path / "saved", config=config).config.length_policy == "slice"


@pytest.mark.parametrize("field, value", [("length_policy", "resample"), ("exact_short_inputs", True),
                                          ("local_window", 8), ("attention", "full"), ("projected_dim", 8)])
def test_a_field_changed_after_the_model_is_built_is_refused_at_save_naming_it(tmp_path, field, value):
    """model.config.<field> = ... after the build left the model computing as built, while save_pretrained wrote the
    new value: a reload computed otherwise, or refused the weights. The save names the field and writes nothing;
    set back, the model saves and reloads to the same outputs."""
    import re

    model = LinformerModel(tiny_config()).eval()
    was = getattr(model.config, field)
    setattr(model.config, field, value)
    shown = ([value] * 2, [was] * 2) if field == "projected_dim" else (value, was)  # k of each layer
    with pytest.raises(ConfigError, match=re.escape(f"config.{field} is {shown[0]!r}, the model was built with "
                                                    f"{shown[1]!r}")):
        model.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()
    setattr(model.config, field, was)
    model.save_pretrained(tmp_path / "saved")
    ids = torch.randint(3, 64, (1, 9))
    with torch.no_grad():
        again = LinformerModel.from_pretrained(tmp_path / "saved").eval()
        assert torch.allclose(again(ids).last_hidden_state, model(ids).last_hidden_state, atol=1e-6)
