import pytest
from huggingface_hub.errors import StrictDataclassError

from linformer import LinformerConfig


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
    ],
)
def test_bad_config_names_the_key(kwargs, match):
    # transformers wraps validator errors in StrictDataclassError, as for RobertaConfig
    with pytest.raises((ValueError, StrictDataclassError), match=match):
        LinformerConfig(**kwargs)


def test_full_attention_ignores_k():
    # k is meaningless without projections, so it is not checked against n
    assert LinformerConfig(attention="full", max_seq_len=64, projected_dim=256).attention == "full"
