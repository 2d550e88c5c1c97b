import pytest
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, BertConfig, BertModel

from linformer import LinformerConfig, LinformerForMaskedLM, LinformerModel
from linformer.errors import ConfigError
from linformer.modeling import attention_label

from .conftest import tiny_config


def test_roberta_defaults():
    c = LinformerConfig()
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads) == (50265, 768, 12, 12)
    assert c.intermediate_size == 3072 and c.layer_norm_eps == 1e-5 and c.initializer_range == 0.02
    assert (c.pad_token_id, c.bos_token_id, c.eos_token_id) == (1, 0, 2)
    assert c.hidden_dropout_prob == 0.1 and c.attention_probs_dropout_prob == 0.1
    assert c.max_seq_len == 512 and c.max_position_embeddings == 514  # n + 2
    assert c.model_type == "linformer"


def test_max_position_embeddings_follows_n():
    assert LinformerConfig(max_seq_len=1024).max_position_embeddings == 1026


def test_per_layer_k():
    c = LinformerConfig(num_hidden_layers=3, projected_dim=[64, 128, 256])
    assert [c.k_of_layer(i) for i in range(3)] == [64, 128, 256]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_seq_len=128, projected_dim=256), r"projected_dim \(k=256\).*n=128"),
        (dict(num_hidden_layers=2, projected_dim=[64, 128, 256]), "per-layer list of 3"),
        (dict(num_hidden_layers=2, projected_dim=[64, 600]), r"projected_dim\[1\] \(k=600\).*n=512"),
        (dict(num_hidden_layers=2, projected_dim=[64, 128], sharing="layerwise"), "same for all layers"),
        (dict(sharing="rowwise"), "sharing='rowwise'"),
        (dict(attention="sparse"), "attention='sparse'"),
        (dict(projection="fft"), "projection='fft'"),
        (dict(max_seq_len=512, projected_dim=100, projection="mean_pool"), "divisible"),
        (dict(max_seq_len=512, max_position_embeddings=512), "max_position_embeddings"),
        (dict(hidden_size=100, num_attention_heads=12), "multiple of num_attention_heads"),
        # values the model cannot run with (they used to train to NaN or drop everything, and exit 0)
        (dict(hidden_dropout_prob=1.5), r"^hidden_dropout_prob=1.5 must be a probability in \[0, 1\)"),
        (dict(attention_probs_dropout_prob=-0.1), "attention_probs_dropout_prob=-0.1 must be a probability"),
        (dict(classifier_dropout=2), "classifier_dropout=2 must be a probability"),
        (dict(layer_norm_eps=-1), r"^layer_norm_eps=-1 must be a positive number"),
        (dict(layer_norm_eps=0.0), "layer_norm_eps=0.0 must be a positive number"),
        (dict(hidden_act="gelux"), r"^hidden_act='gelux' is not one of gelu"),
        (dict(initializer_range=-1.0), "initializer_range=-1.0 must be a number >= 0"),
        # what an encoder cannot be, and a loss it does not have (each was accepted and ignored)
        (dict(is_decoder=True), r"^is_decoder=True: the Linformer is an encoder only \(E and F mix every position"),
        (dict(attention="full", add_cross_attention=True),  # it has no E or F to blame
         r"^add_cross_attention=True: the Linformer is an encoder only \(its full attention takes a padding mask"),
        (dict(add_cross_attention=True), "^add_cross_attention=True"),
        (dict(problem_type="foo"), "^problem_type='foo' is not one of regression"),
        # a position given twice was kept as a second copy of its key in every softmax
        (dict(local_window=4, global_positions=[0, 0]), r"^global_positions=\[0, 0\]: 0 is given twice"),
    ],
)
def test_bad_config_names_the_key(kwargs, match):
    # ConfigError itself (not @strict's wrapper), so the CLI prints it as one line
    with pytest.raises(ConfigError, match=match):
        LinformerConfig(**kwargs)


def test_a_field_set_after_the_config_is_built_is_checked_before_a_model_is_built_or_saved(tmp_path):
    """from_pretrained's keyword overrides and attributes set by hand reach the same checks as the constructor's."""
    LinformerForMaskedLM(tiny_config()).save_pretrained(tmp_path / "saved")
    for load in (AutoConfig.from_pretrained, LinformerConfig.from_pretrained, AutoModel.from_pretrained,
                 LinformerForMaskedLM.from_pretrained):
        with pytest.raises(ConfigError, match="^sharing='bogus' is not one of"):
            load(tmp_path / "saved", sharing="bogus")
    config = tiny_config()
    config.max_seq_len *= 2  # the position table is not lengthened with it
    with pytest.raises(ConfigError, match="^max_position_embeddings"):
        LinformerModel(config)
    model = LinformerModel(tiny_config())
    model.config.local_window = -5
    with pytest.raises(ConfigError, match="^local_window=-5"):
        model.save_pretrained(tmp_path / "bad")
    assert not (tmp_path / "bad").exists()  # nothing written: no code files without a config


def test_a_default_set_to_none_after_the_config_is_built_is_derived_again():
    """None is "the default" for position_offset, max_position_embeddings and classifier_pooling; set so afterwards
    (by hand, or as from_pretrained's override), building the model raised a bare TypeError comparing None with an
    int. The default is derived again, as when the config is built."""
    built = tiny_config(classifier_head="bert")
    for key in ("position_offset", "max_position_embeddings", "classifier_pooling"):
        config = tiny_config(classifier_head="bert")
        setattr(config, key, None)
        LinformerModel(config)
        assert getattr(config, key) == getattr(built, key) is not None
    config = LinformerConfig.from_dict(built.to_dict(), position_offset=None, max_position_embeddings=None)
    assert (config.position_offset, config.max_position_embeddings) == (2, built.max_seq_len + 2)
    config.position_offset = None
    assert config.pads_positions  # read before any check: RoBERTa's offset, pad_token_id + 1


def test_another_model_types_checkpoint_is_refused_naming_the_conversion(tmp_path):
    bert = BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    BertModel(bert).save_pretrained(tmp_path)
    for load in (LinformerConfig.from_pretrained, LinformerModel.from_pretrained):
        with pytest.raises(ConfigError, match=rf"^{tmp_path} holds a 'bert' model, not a Linformer: convert it with "
                                              r"LinformerModel.from_pretrained_encoder"):
            load(tmp_path)


def test_an_attribute_the_linformer_does_not_know_is_kept_and_survives_save_and_load(tmp_path, caplog):
    """As PretrainedConfig keeps any attribute (tools annotate configs): a saved model whose config carries one loads
    again with it; a near-miss of a real field is kept too, with a warning naming the field."""
    config = tiny_config(batch_norm_eps=1e-3, tool_annotation={"bits": 8})
    config.quantization_note = "added by a tool"
    assert config.batch_norm_eps == 1e-3 and config.tool_annotation == {"bits": 8}
    model = LinformerForMaskedLM(config)
    model.save_pretrained(tmp_path)
    loaded = LinformerForMaskedLM.from_pretrained(tmp_path)
    assert loaded.config.batch_norm_eps == 1e-3 and loaded.config.quantization_note == "added by a tool"
    assert loaded.config.tool_annotation == {"bits": 8}
    assert AutoConfig.from_pretrained(tmp_path).quantization_note == "added by a tool"
    with caplog.at_level("WARNING", logger="linformer.modeling.configuration"):
        near = tiny_config(sharng="kv", tool_annotation2=1)
    assert near.sharng == "kv" and near.sharing == "headwise"  # kept, read by nothing
    assert "'sharng' is not a field" in caplog.text and "did you mean sharing?" in caplog.text
    assert "tool_annotation2" not in caplog.text  # nothing like a field: no warning


def test_where_a_person_types_model_settings_a_typo_is_one_error_naming_the_key():
    from linformer.configs import compose
    from linformer.runconfig.runs import PretrainSpec

    with pytest.raises(ConfigError, match=r"^model\.sharng is not a LinformerConfig field \(did you mean sharing\?\)"):
        PretrainSpec.read(compose("pretrain", ["+model.sharng=kv"]))


def test_keywords_hugging_face_passes_are_accepted_and_round_trip(tmp_path):
    config = tiny_config(
        num_labels=3, problem_type="single_label_classification", torch_dtype="float32", return_dict=True,
        output_attentions=False, attn_implementation="sdpa", tie_word_embeddings=True, architectures=["X"],
        name_or_path="somewhere", transformers_version="5.0.0", max_length=20,
    )
    assert config.num_labels == 3
    assert LinformerConfig(**config.to_dict()).to_dict() == config.to_dict()
    LinformerForMaskedLM(tiny_config(sparse_prediction=True)).save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path, attention="full").sparse_prediction is True
    clf = AutoModelForSequenceClassification.from_pretrained(tmp_path, num_labels=4, dtype="auto")
    clf.save_pretrained(tmp_path / "clf")
    assert AutoConfig.from_pretrained(tmp_path / "clf").num_labels == 4


def test_full_attention_ignores_k():
    # k is meaningless without projections: not checked against n, and not in the model's name
    config = LinformerConfig(attention="full", max_seq_len=64, projected_dim=256, sharing="kv")
    assert config.attention_label == "full attention"
    assert attention_label("full", 256, "kv") == "full attention"
    assert LinformerConfig(projected_dim=128, sharing="kv").attention_label == "linformer k=128, kv"
    assert tiny_config(projected_dim=[4, 8], projection="conv").attention_label == "linformer k=4..8, headwise, conv"


@pytest.mark.parametrize("fields, message", [
    ({"projected_dim": 1.5}, "projected_dim=1.5 must be a whole number"),
    ({"projected_dim": [64, 128.0]}, r"projected_dim=\[64, 128.0\] must be a whole number"),
    ({"num_hidden_layers": 2.0}, "num_hidden_layers=2.0 must be a whole number >= 1"),
    ({"max_seq_len": 0}, "max_seq_len=0 must be a whole number >= 1"),
    ({"exact_short_inputs": "yes"}, "exact_short_inputs='yes' must be true or false"),
    ({"sparse_prediction": 1}, "sparse_prediction=1 must be true or false"),
])
def test_numbers_and_switches_of_the_wrong_type_name_their_key(fields, message):
    """A k of 1.5 was built as 1 and recorded as 1.5; a 'yes' switch was kept as a truthy string."""
    with pytest.raises(ConfigError, match=message):
        LinformerConfig(**fields)


UNKNOWN_MODE = r"^attention='nystrom' is not one of linformer, full\.$"


def test_an_unknown_attention_mode_is_refused_in_one_place_with_one_message():
    """The mode was a name compared in about twenty places, some as == "full" and some as == "linformer": a third
    value was full attention in the layers, a Linformer in the run name and the trackers' tags, and refused only by
    the FLOPs count. Every place now asks the one table (modeling/values.py) and gets its one refusal."""
    from linformer.modeling.configuration import projects_keys
    from linformer.modeling.flops import layer_flops

    assert projects_keys("linformer") and not projects_keys("full") and not projects_keys(None)
    for refused in (lambda: projects_keys("nystrom"), lambda: LinformerConfig(attention="nystrom"),
                    lambda: layer_flops(128, 64, 256, "nystrom", 32), lambda: attention_label("nystrom", 32)):
        with pytest.raises(ConfigError, match=UNKNOWN_MODE):
            refused()


def test_a_mode_added_to_the_table_means_one_thing_everywhere(monkeypatch):
    """A mode added to ATTENTION_MODES is built, counted, named and reported as the table says, by every module."""
    from linformer.modeling import values
    from linformer.modeling.flops import layer_flops
    from linformer.modeling.model import left_padding
    from linformer.rundir import is_full_attention
    from linformer.runname import _attn_tag

    monkeypatch.setitem(values.ATTENTION_MODES, "dense", values.AttentionMode(projects_keys=False))
    config = tiny_config(attention="dense")
    assert not config.projects_keys and config.attention_label == "full attention"
    model = LinformerModel(config)
    assert model.encoder.E is None and not any(layer.attention.self.linformer for layer in model.encoder.layer)
    assert layer_flops(128, 64, 256, "dense") == layer_flops(128, 64, 256, "full")
    assert not left_padding(config, False, False)
    assert _attn_tag("dense", 128, 32, "kv") == "dense-n128"
    assert is_full_attention({"attention": "dense", "projected_dim": 32})


def test_no_module_compares_the_attention_mode_s_name():
    """Every module asks ``projects_keys``; a comparison with a mode's name would give a new mode another meaning
    there."""
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "linformer"
    compare = re.compile(r"""attention["')\]]*\s*(==|!=)\s*["'](full|linformer)["']|attention["')\]]*\s+in\s+\(""")
    found = [f"{f.relative_to(package)}:{i}" for f in sorted(package.rglob("*.py"))
             for i, line in enumerate(f.read_text().splitlines(), 1) if compare.search(line)]
    assert found == []


def test_a_tuple_for_a_list_field_is_kept_as_the_list_config_json_gives_back(tmp_path):
    """projected_dim's tuple became a list and global_positions' stayed a tuple, so a config did not equal itself
    saved and read again; a string was taken for its characters and named so in the refusal."""
    config = tiny_config(projected_dim=(4, 4), local_window=4, global_positions=(0, -1), eos_token_id=(2, 3))
    assert (config.projected_dim, config.global_positions, config.eos_token_id) == ([4, 4], [0, -1], [2, 3])
    config.global_positions = (0,)  # set afterwards, as from_pretrained's overrides are
    assert config.global_positions == [0]
    LinformerModel(config).save_pretrained(tmp_path)
    again = LinformerModel.from_pretrained(tmp_path, global_positions=(0,)).config
    assert again.global_positions == config.global_positions and again.projected_dim == config.projected_dim
    with pytest.raises(ConfigError, match=r"^global_positions='0' must be a list of positions"):
        tiny_config(local_window=4, global_positions="0")


def test_exact_short_inputs_with_k_equal_to_n_warns_that_e_and_f_are_never_used(caplog):
    """Every input has at most n tokens, so with k = n each is attended exactly: E and F are trained parameters that
    nothing reads. Said once, naming the layers (all of them, or those of a per-layer k)."""
    with caplog.at_level("WARNING", logger="linformer.modeling.configuration"):
        tiny_config(projected_dim=16, exact_short_inputs=True)
        tiny_config(projected_dim=16, exact_short_inputs=True)
        tiny_config(projected_dim=[4, 16], exact_short_inputs=True)
        tiny_config(projected_dim=8, exact_short_inputs=True)  # k < n: E and F serve longer inputs
        tiny_config(projected_dim=16)  # without exact short inputs, E and F project every input
    lines = [r.getMessage() for r in caplog.records if "never used" in r.getMessage()]
    assert len(lines) == 2 and "n = 16 in every layer" in lines[0] and "in layers [1]" in lines[1]
