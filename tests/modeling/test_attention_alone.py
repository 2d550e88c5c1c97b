"""The attention module and its projections used on their own, as an extender builds them: initialised, checked, and
extended through the registries (a sharing mode in SHARING, a projection through register_projection)."""

import itertools
import math
import re

import pytest
import torch
from torch import nn
from transformers import initialization as init

from linformer import LinformerForMaskedLM, LinformerModel
from linformer.errors import ConfigError
from linformer.modeling import attention, configuration
from linformer.modeling.attention import (
    ConvProjection,
    LinearProjection,
    LinformerSelfAttention,
    PoolProjection,
    Projection,
    build_projection,
    register_projection,
    window_mean_matrix,
)
from linformer.modeling.configuration import SHARING, Sharing

from .conftest import tiny_config

LEARNED = ("linear", "conv")


def _batch(config, B=2, T=12):
    torch.manual_seed(1)
    hidden = torch.randn(B, T, config.hidden_size)
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[1, T // 2:] = False
    return hidden, mask


def _layer_of(model, i=0):
    return model.encoder.layer[i].attention.self


@pytest.mark.parametrize("sharing, projection, projection_init",
                         itertools.product(SHARING, LEARNED, ("mean", "xavier")))
def test_a_layer_built_alone_is_initialised_and_computes_what_the_models_layer_does(sharing, projection,
                                                                                   projection_init):
    """Its E and F were torch.empty (outputs of 1e35, no error) until a model's _init_weights filled them: now each
    projection initialises itself as the model's init does (the mean init exactly), and with the model's layer's
    weights the layer alone gives the model's layer's output."""
    config = tiny_config(sharing=sharing, projection=projection, projection_init=projection_init)
    torch.manual_seed(0)
    alone = LinformerSelfAttention(config, 0).eval()
    shared = build_projection(config, config.k_of_layer(0), per_head=False) if SHARING[sharing].across_layers else None
    model = LinformerModel(config).eval()
    layer, model_shared = _layer_of(model), model.encoder.E
    projections = [m for m in (*alone.modules(), *([shared] if shared else [])) if isinstance(m, Projection)]
    assert projections and all(torch.isfinite(p).all() for m in projections for p in m.parameters())
    if projection_init == "mean":
        mine = dict(alone.named_parameters()) | ({"E.weight": shared.weight} if shared else {})
        theirs = dict(layer.named_parameters()) | ({"E.weight": model_shared.weight} if shared else {})
        for name in ("E.weight", "F.weight"):
            if name in theirs:
                torch.testing.assert_close(mine[name], theirs[name], rtol=0, atol=0)
    else:  # the same distribution: within xavier's (or the conv's normal's) scale
        for m in projections:
            assert 0 < m.weight.abs().max() < 1, m
    hidden, mask = _batch(config)
    out = alone(hidden, mask, shared)[0]
    assert torch.isfinite(out).all() and out.abs().max() < 10
    alone.load_state_dict(layer.state_dict())
    if shared is not None:
        shared.load_state_dict(model_shared.state_dict())
    torch.testing.assert_close(alone(hidden, mask, shared)[0], layer(hidden, mask, model_shared)[0], rtol=0, atol=0)


def test_projections_alone_take_each_init():
    torch.testing.assert_close(LinearProjection(16, 4).weight, window_mean_matrix(16, 4), rtol=0, atol=0)
    per_head = LinearProjection(16, 4, num_heads=3, projection_init="xavier").weight
    bound = math.sqrt(6.0 / (16 + 4)) / math.sqrt(2.0)
    assert per_head.shape == (3, 16, 4) and per_head.abs().max() <= bound and per_head.std() > bound / 4
    conv = ConvProjection(16, 4, head_dim=8)
    x = torch.randn(2, 4, 16, 8)
    torch.testing.assert_close(conv(x, None)[0], PoolProjection(16, 4, "mean")(x, None)[0])
    assert torch.isfinite(ConvProjection(16, 4, 8, 4, projection_init="xavier").weight).all()
    with pytest.raises(ValueError, match="projection_init='uniform' is not one of mean, xavier"):
        LinearProjection(16, 4, projection_init="uniform")


@pytest.mark.parametrize("projection", LEARNED)
def test_a_seeded_model_draws_its_projections_once_in_post_init(projection, monkeypatch):
    """The model builds its encoder under initialised_later: its projections are initialised by HF's post_init
    alone, so a seed gives the weights it gave before the projections initialised themselves (xavier draws)."""
    config = tiny_config(projection=projection, projection_init="xavier", sharing="none")
    torch.manual_seed(0)
    built = LinformerForMaskedLM(config).state_dict()
    monkeypatch.setattr(Projection, "initialise", lambda self: None)  # the projections as they were: left empty
    torch.manual_seed(0)
    before = LinformerForMaskedLM(config).state_dict()
    assert built.keys() == before.keys()
    for name in built:
        torch.testing.assert_close(built[name], before[name], rtol=0, atol=0, msg=name)


def test_from_pretrained_keeps_loaded_projections(tmp_path):
    """HF's path: from_pretrained skips the initialisation of what it loads (_is_hf_initialized), projections too."""
    config = tiny_config(projection_init="xavier", sharing="none")
    model = LinformerForMaskedLM(config)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LinearProjection):
                m.weight.add_(1.0)  # no init gives these values
    model.save_pretrained(tmp_path)
    loaded = LinformerForMaskedLM.from_pretrained(tmp_path)
    for name, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], value, rtol=0, atol=0, msg=name)


MIN = torch.finfo(torch.float32).min


def _additive(keep: torch.Tensor) -> torch.Tensor:
    return torch.where(keep, 0.0, MIN)


def _causal(m: torch.Tensor) -> torch.Tensor:
    T = m.shape[-1]
    return m[:, None, None, :] & torch.ones(T, T, dtype=torch.bool).tril()


@pytest.mark.parametrize("mask, expected", [
    (lambda m: torch.where(m, 0.0, torch.finfo(torch.float32).min),
     (r"read as a keep mask, 1 at real tokens and 0 at padding \(as transformers reads it\); this one also holds "
      r"-3.40282e\+38. From an additive mask .* pass mask == 0")),
    (lambda m: m * 0.5, "this one also holds 0.5."),
    (lambda m: torch.where(m, 1.0, float("nan")), "this one also holds nan."),
    (lambda m: m.to(torch.complex64), "bool, integer or float 0/1 .* got torch.complex64 of shape"),
    (lambda m: m[:, :6], "must be \\(batch, tokens\\) = \\(2, 12\\)"),
    # transformers' 4-D masks that say more than which keys are padding: the projected keys cannot say it
    (_causal, (r"masks keys differently for different queries \(a causal or per-query mask\): the Linformer "
               r"projects the keys and values to k positions that every query shares")),
    (lambda m: _additive(_causal(m)), "a causal or per-query mask"),
    (lambda m: m[:, None, None, :].expand(2, 4, 1, 12), r"got \(2, 4, 1, 12\) \(a mask per head cannot be expressed"),
    (lambda m: m[:, None, None, :6], (r"4-D \(batch, 1, 1, tokens\) = \(2, 1, 1, 12\) or key-padding-only \(batch, "
                                      r"1, tokens, tokens\) = \(2, 1, 12, 12\), every query's row the same; got")),
    (lambda m: m[:, None, None, :].float(), r"read as transformers' additive one .* \(a 0/1 mask, or an attention bias"),
    (lambda m: torch.where(m, 0.0, -2.5)[:, None, None, :], "additive one"),
])
def test_a_mask_the_layer_cannot_read_is_refused_naming_the_form(mask, expected):
    """Transformers' additive float mask gave NaN, an all-zero one read as all padding, a 4-D one another result;
    a 4-D one that says more than which keys are padding cannot be expressed, and says why."""
    config = tiny_config(sharing="kv")
    layer = LinformerSelfAttention(config, 0)
    hidden, bool_mask = _batch(config)
    with pytest.raises(ValueError, match=expected):
        layer(hidden, mask(bool_mask))


def test_full_attention_refuses_a_causal_mask_saying_what_it_takes_not_the_linformer_s_reason():
    """attention="full" refused a causal mask because "the Linformer projects the keys and values to k positions":
    full attention has no projection; it takes the key padding alone, as the Linformer does."""
    model = LinformerModel(tiny_config(attention="full")).eval()
    ids = torch.randint(4, 64, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.bool)
    for given in (_causal(mask), _additive(_causal(mask))):
        with pytest.raises(ValueError) as refused:
            model(ids, attention_mask=given)
        assert "full attention here takes the key padding alone" in str(refused.value)
        assert "Linformer projects" not in str(refused.value) and "k positions" not in str(refused.value)
    per_head = "a mask per head cannot be expressed: full attention here takes the key padding alone"
    for bad, said in ((mask[:, None, None, :].expand(2, 4, 1, 12), per_head),
                      (mask[:, None, None, :].float(), "an attention bias, which full attention here does not take")):
        with pytest.raises(ValueError, match=re.escape(said)):
            model(ids, attention_mask=bad)
    with pytest.raises(ValueError, match="the Linformer projects the keys and values to k positions"):
        LinformerModel(tiny_config()).eval()(ids, attention_mask=_causal(mask))


@pytest.mark.parametrize("extended", [
    lambda m: m[:, None, None, :],  # (B, 1, 1, T)
    lambda m: _additive(m)[:, None, None, :],  # transformers' extended mask: 0 / finfo.min
    lambda m: torch.where(m, 0.0, -10000.0)[:, None, None, :],  # older code's -10000
    lambda m: m[:, None, None, :].long(),
    lambda m: m[:, None, None, :].expand(2, 1, 12, 12),  # (B, 1, T, T), every query's row the same
    lambda m: _additive(m)[:, None, None, :].expand(2, 1, 12, 12),
], ids=["bool", "additive", "additive-1e4", "integer", "bool-TxT", "additive-TxT"])
@pytest.mark.parametrize("sharing", ["kv", "none"])
def test_a_transformers_4d_padding_mask_reads_as_its_key_mask(extended, sharing):
    config = tiny_config(sharing=sharing)
    layer = LinformerSelfAttention(config, 0).eval()
    hidden, mask = _batch(config)
    torch.testing.assert_close(layer(hidden, extended(mask))[0], layer(hidden, mask)[0], rtol=0, atol=0)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_the_model_takes_the_4d_mask_transformers_builds(impl):
    """transformers' own masks (``create_bidirectional_mask``: additive float for eager, bool for SDPA, (B, 1, T, T))
    give the (batch, tokens) mask's outputs, mean pooling's included."""
    from transformers.masking_utils import create_bidirectional_mask

    from linformer import LinformerForSequenceClassification

    config = tiny_config(sharing="kv", classifier_pooling="mean", num_labels=2)
    config._attn_implementation = impl
    model = LinformerForSequenceClassification(config).eval()
    ids = torch.randint(4, 64, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 7:] = 0
    extended = create_bidirectional_mask(config, torch.zeros(2, 12, 32), mask, allow_is_bidirectional_skip=False)
    assert tuple(extended.shape) == (2, 1, 12, 12)
    torch.testing.assert_close(model(ids, attention_mask=extended).logits, model(ids, attention_mask=mask).logits,
                               rtol=0, atol=0)
    with pytest.raises(ValueError, match="a causal or per-query mask"):
        model(ids, attention_mask=_causal(mask.bool()))


@pytest.mark.parametrize("sharing", ["kv", "none"])
def test_an_integer_mask_reads_as_a_tokenizers_attention_mask(sharing):
    config = tiny_config(sharing=sharing)
    layer = LinformerSelfAttention(config, 0).eval()
    hidden, mask = _batch(config)
    torch.testing.assert_close(layer(hidden, mask.long())[0], layer(hidden, mask)[0], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_a_float_0_1_mask_reads_as_a_keep_mask_as_transformers_reads_it(dtype):
    """torch.ones(B, T) in float, which BERT and RoBERTa take as a keep mask, was refused as an additive mask."""
    config = tiny_config(sharing="kv")
    layer = LinformerSelfAttention(config, 0).eval()
    hidden, mask = _batch(config)
    torch.testing.assert_close(layer(hidden, mask.to(dtype))[0], layer(hidden, mask)[0], rtol=0, atol=0)
    unpadded = torch.ones(mask.shape, dtype=dtype)
    torch.testing.assert_close(layer(hidden, unpadded)[0], layer(hidden)[0], rtol=0, atol=0)


def test_the_layers_misuses_are_one_clear_error_each():
    config = tiny_config(sharing="kv")
    too_long = torch.randn(2, config.max_seq_len + 1, config.hidden_size)
    with pytest.raises(ValueError, match="Input has 17 tokens but the model's max_seq_len is n=16"):
        LinformerSelfAttention(config, 0)(too_long)
    layerwise = tiny_config(sharing="layerwise")
    hidden, mask = _batch(layerwise)
    with pytest.raises(ValueError, match="sharing='layerwise'.*pass the encoder's \\(LinformerEncoder.E\\) as "
                                         "shared_projection"):
        LinformerSelfAttention(layerwise, 0)(hidden, mask)


@pytest.mark.parametrize("padded", [True, False])
def test_a_models_forward_checks_its_mask_once_not_in_every_layer(padded, monkeypatch):
    """Every layer checked the mask and length the model had checked already: L checks a forward. The first layer's
    check serves the others; an integer mask given to the encoder is still read as bool by every layer."""
    config = tiny_config(sharing="kv", num_hidden_layers=3)
    model = LinformerModel(config).eval()
    calls = []
    real = LinformerSelfAttention._checked
    monkeypatch.setattr(LinformerSelfAttention, "_checked", lambda self, *a: calls.append(self) or real(self, *a))
    ids = torch.randint(4, config.vocab_size, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    if padded:
        mask[1, 6:] = 0
    model(ids, attention_mask=mask)
    assert len(calls) == 1
    hidden, bool_mask = _batch(config)
    out = model.encoder(hidden, bool_mask.long())[0]
    assert len(calls) == 2
    torch.testing.assert_close(out, model.encoder(hidden, bool_mask)[0], rtol=0, atol=0)
    layer = _layer_of(model)
    layer(hidden, bool_mask)
    layer(hidden, bool_mask)
    assert len(calls) == 5  # a layer used alone checks every call


def test_a_sharing_mode_added_to_sharing_is_taken_built_and_counted(monkeypatch):
    """SHARING is the one table of modes: SHARING_MODES, a copy taken at import, refused a mode added to it."""
    monkeypatch.setitem(SHARING, "kv_per_head", Sharing(per_head=True, separate_f=False, across_layers=False))
    model = LinformerModel(tiny_config(sharing="kv_per_head"))
    layer = _layer_of(model)
    assert layer.F is None and layer.E.per_head
    hidden, mask = _batch(model.config)
    assert torch.isfinite(layer(hidden, mask)[0]).all()


class ScaledMeanPool(Projection):
    """A projection of one's own: mean pooling, then a learned scale per projected column (initialised to 1)."""

    def __init__(self, n: int, k: int):
        super().__init__()
        self.pool = PoolProjection(n, k, "mean")
        self.scale = nn.Parameter(torch.empty(k))
        self.initialise()

    num_matrices = 1

    def reset_parameters(self) -> None:
        init.ones_(self.scale)

    def forward(self, x, mask):
        pooled, kmask = self.pool(x, mask)
        return pooled * self.scale[: pooled.shape[-2], None], kmask


def test_the_projection_registries_name_the_same_projections():
    assert list(attention.PROJECTION_BUILDERS) == list(configuration.PROJECTIONS)


def test_a_registered_projection_builds_trains_and_reloads(registries, tmp_path):
    with pytest.raises(ConfigError, match="register_projection"):
        tiny_config(projection="scaled_mean_pool")
    register_projection("scaled_mean_pool", lambda config, k, heads: None)
    # registered again (a notebook cell run again): the new builder replaces it, listed once
    register_projection("scaled_mean_pool", lambda config, k, heads: ScaledMeanPool(config.max_seq_len, k))
    assert list(attention.PROJECTION_BUILDERS) == list(configuration.PROJECTIONS)
    assert configuration.PROJECTIONS.count("scaled_mean_pool") == 1
    package_s = attention.PROJECTION_BUILDERS["mean_pool"]
    with pytest.raises(ConfigError, match="'mean_pool' is one of the package's own"):  # never shadows the package's
        register_projection("mean_pool", lambda config, k, heads: ScaledMeanPool(config.max_seq_len, k))
    assert attention.PROJECTION_BUILDERS["mean_pool"] is package_s
    config = tiny_config(projection="scaled_mean_pool", sharing="headwise")
    torch.manual_seed(0)
    model = LinformerForMaskedLM(config)
    scales = [m.scale for m in model.modules() if isinstance(m, ScaledMeanPool)]
    assert len(scales) == 2 * config.num_hidden_layers and all(torch.equal(s, torch.ones(4)) for s in scales)
    ids = torch.randint(5, config.vocab_size, (2, 12))
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    assert not all(torch.equal(s, torch.ones(4)) for s in scales)
    model.eval().save_pretrained(tmp_path)
    loaded = LinformerForMaskedLM.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits, rtol=0, atol=0)
