"""Linformer attention semantics: shapes, sharing counts, padding invariance, first-T-rows, identity E/F."""

import itertools

import pytest
import torch

from linformer import LinformerForMaskedLM, LinformerModel, count_projection_matrices
from linformer.modeling import LinearProjection
from linformer.modeling.configuration import PROJECTIONS, SHARING
from linformer.modeling.errors import ConfigError
from linformer.modeling.flops import forward_flops_per_token
from linformer.modeling.values import Sharing

from .conftest import tiny_config

SHARINGS = tuple(SHARING)  # every mode the config takes, so that a new one is tested as it is added


def _padded_batch(vocab=64, lengths=(16, 11, 5), pad=1):
    """Random token ids with <s> ... </s> and right padding; returns ids and attention mask."""
    T = max(lengths)
    ids = torch.full((len(lengths), T), pad)
    mask = torch.zeros(len(lengths), T, dtype=torch.long)
    for i, L in enumerate(lengths):
        ids[i, :L] = torch.randint(4, vocab, (L,))
        ids[i, 0], ids[i, L - 1] = 0, 2
        mask[i, :L] = 1
    return ids, mask


def _trained_biases(model):
    """Every bias drawn from N(0, 1), as in a trained model: the init's zero biases hide any bias term a path drops,
    weights wrongly or counts at padded positions (the key and value biases of the shared-E path: E^T 1 b^T)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 1.0)
    return model


@pytest.mark.parametrize("sharing, projection", itertools.product(SHARINGS, PROJECTIONS))
def test_shapes_every_mode(sharing, projection):
    config = tiny_config(sharing=sharing, projection=projection)
    model = LinformerForMaskedLM(config).eval()
    ids, mask = _padded_batch()
    out = model(ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    B, T = ids.shape
    assert out.logits.shape == (B, T, config.vocab_size)
    assert len(out.hidden_states) == config.num_hidden_layers + 1
    # linear: k projected positions; pooling/conv: ceil(T / (n/k)) windows
    k_out = 4 if projection == "linear" else -(-T // (16 // 4))
    for probs in out.attentions:
        assert probs.shape == (B, config.num_attention_heads, T, k_out)
        torch.testing.assert_close(probs.sum(-1), torch.ones(B, config.num_attention_heads, T))
    labels = torch.where(torch.rand(B, T) < 0.3, ids, torch.full_like(ids, -100))
    labels[0, 1] = ids[0, 1]  # at least one target
    out = model(ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (B, T, config.vocab_size)
    assert torch.isfinite(out.loss)


@pytest.mark.parametrize("sharing, projection", itertools.product(SHARINGS, PROJECTIONS))
def test_attention_gets_keys_and_values_at_unit_stride_over_the_head_dimension(sharing, projection, monkeypatch):
    """The GPU's fused attention kernels (flash, memory-efficient, cuDNN) refuse q, k, v or a mask whose last
    dimension is not at stride 1; the CPU's math kernel accepts them, so this is checked here."""
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, **kwargs):
        seen.append([t.stride(-1) for t in (q, k, v, attn_mask) if t is not None])
        return sdpa(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    model = LinformerModel(tiny_config(sharing=sharing, projection=projection), add_pooling_layer=False).eval()
    ids, mask = _padded_batch()
    model(ids, attention_mask=mask)
    model(ids)
    assert seen and all(stride == 1 for strides in seen for stride in strides), seen


def test_matrix_counts_follow_the_paper():
    """12 layers x 12 heads: 288 / 24 / 12 / 1 matrices for none / headwise / kv / layerwise."""
    expected = {"none": 288, "headwise": 24, "kv": 12, "layerwise": 1}
    for sharing, count in expected.items():
        config = tiny_config(num_hidden_layers=12, num_attention_heads=12, hidden_size=48, sharing=sharing)
        assert count_projection_matrices(LinformerModel(config)) == count, sharing
    # Pooling has no learned projection at all.
    assert count_projection_matrices(LinformerModel(tiny_config(projection="mean_pool"))) == 0


@pytest.mark.parametrize("sharing, projection",
                         itertools.product([s for s in SHARINGS if s != "layerwise"], PROJECTIONS))
def test_a_per_layer_projected_dim_gives_each_layer_its_own_k(sharing, projection):
    """projected_dim=[4, 8]: layer 0 attends over 4 projected keys, layer 1 over 8 (layerwise, one E for every layer,
    refuses a per-layer list)."""
    model = LinformerModel(tiny_config(projected_dim=[4, 8], sharing=sharing, projection=projection)).eval()
    out = model(torch.randint(4, 64, (2, 16)), output_attentions=True)
    assert [probs.shape[-1] for probs in out.attentions] == [4, 8]


def test_layerwise_is_one_parameter_shared_by_every_layer():
    model = LinformerModel(tiny_config(sharing="layerwise"))
    names = [n for n, _ in model.named_parameters() if ".E." in n or ".F." in n or n.startswith("encoder.E")]
    assert names == ["encoder.E.weight"]
    assert model.encoder.E.weight.shape == (16, 4)  # n x k


# Sharing modes of one's own shared across layers (guide: "a new sharing mode is one entry in SHARING"), each with the
# built-in mode that computes the same in every layer: per-head E for all layers (E = F), and E apart from F
ACROSS_LAYER_MODES = {"layerwise_heads": (Sharing(per_head=True, separate_f=False, across_layers=True), "none"),
                      "layerwise_ef": (Sharing(per_head=False, separate_f=True, across_layers=True), "headwise")}


@pytest.mark.parametrize("mode", ACROSS_LAYER_MODES)
def test_a_new_mode_shared_across_layers_is_built_saved_and_counted_as_it_says(mode, monkeypatch, tmp_path):
    """Both were built as plain 'layerwise' (one E for every head, F = E) while the FLOPs counted the mode as written:
    the encoder's E is per head where the mode says so and its F apart where it says so, the model computes what the
    per-layer mode of the same shape computes with those matrices in every layer, FLOPs agree with that mode's, and a
    saved model loads its E and F back."""
    sharing, twin = ACROSS_LAYER_MODES[mode]
    monkeypatch.setitem(SHARING, mode, sharing)
    torch.manual_seed(0)
    shape = dict(num_hidden_layers=3, max_seq_len=32, projected_dim=8, projection_init="xavier")
    model = _trained_biases(LinformerModel(tiny_config(sharing=mode, **shape)).eval())
    state = {n: p for n, p in model.state_dict().items() if n.rsplit(".", 2)[-2] in ("E", "F")}
    matrix = (4, 32, 8) if sharing.per_head else (32, 8)
    assert {n: tuple(p.shape) for n, p in state.items()} == (
        {"encoder.E.weight": matrix} | ({"encoder.F.weight": matrix} if sharing.separate_f else {}))
    assert count_projection_matrices(model) == (4 if sharing.per_head else 1) * (2 if sharing.separate_f else 1)

    per_layer = LinformerModel(tiny_config(sharing=twin, **shape)).eval()
    weights = dict(model.state_dict())
    E, F = weights.pop("encoder.E.weight"), weights.pop("encoder.F.weight", None)
    for i in range(3):
        layer = f"encoder.layer.{i}.attention.self"
        weights[f"{layer}.E.weight"] = E
        if SHARING[twin].separate_f:
            weights[f"{layer}.F.weight"] = F if F is not None else E
    per_layer.load_state_dict(weights)
    ids, mask = _padded_batch(lengths=(32, 20, 7))
    out = model(ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(out, per_layer(ids, attention_mask=mask).last_hidden_state, atol=1e-5, rtol=1e-5)
    assert forward_flops_per_token(model.config, 32) == forward_flops_per_token(per_layer.config, 32)

    model.save_pretrained(tmp_path)
    loaded = LinformerModel.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded(ids, attention_mask=mask).last_hidden_state, out, rtol=0, atol=0)


@pytest.mark.parametrize(
    "overrides",
    [dict(sharing=s, projection=p) for s, p in itertools.product(SHARINGS, PROJECTIONS)] + [dict(attention="full")]
    + [dict(sharing=s, mask_empty_windows=True) for s in SHARINGS],
    ids=lambda o: "-".join(map(str, o.values())),
)
def test_padding_does_not_leak(overrides):
    """Each sequence gives the same output alone and inside a padded batch, with a trained model's nonzero biases."""
    torch.manual_seed(0)
    model = _trained_biases(LinformerModel(tiny_config(**overrides)).eval())
    lengths = (16, 11, 5)
    ids, mask = _padded_batch(lengths=lengths)
    batched = model(ids, attention_mask=mask).last_hidden_state
    for i, L in enumerate(lengths):
        alone = model(ids[i : i + 1, :L]).last_hidden_state
        torch.testing.assert_close(batched[i : i + 1, :L], alone, atol=1e-5, rtol=1e-5)


def test_short_batch_uses_first_T_rows_of_E():
    model = LinformerModel(tiny_config(sharing="layerwise")).eval()
    ids = torch.randint(4, 64, (2, 10))
    before = model(ids).last_hidden_state
    with torch.no_grad():
        model.encoder.E.weight[10:] += 5.0  # rows past T=10 are unused
    torch.testing.assert_close(model(ids).last_hidden_state, before)
    with torch.no_grad():
        model.encoder.E.weight[9] += 5.0  # row T-1 is used
    assert not torch.allclose(model(ids).last_hidden_state, before)


@pytest.mark.parametrize("sharing", SHARINGS)
def test_identity_projection_with_k_equal_n_is_full_attention(sharing):
    config = tiny_config(projected_dim=16, sharing=sharing)
    lin = LinformerModel(config).eval()
    for m in lin.modules():
        if isinstance(m, LinearProjection):
            with torch.no_grad():
                m.weight.copy_(torch.eye(16).expand_as(m.weight))
    full = LinformerModel(tiny_config(attention="full")).eval()
    missing, unexpected = full.load_state_dict(lin.state_dict(), strict=False)
    assert not missing and all(".E." in k or ".F." in k or k.startswith("encoder.E") for k in unexpected)
    ids = torch.randint(4, 64, (3, 16))
    torch.testing.assert_close(lin(ids).last_hidden_state, full(ids).last_hidden_state, atol=1e-5, rtol=1e-5)


def test_the_relative_error_of_float64_outputs_is_float64s():
    """squared_relative_error (transfer's and distillation's loss, the fidelity report's figure) cast both sides to
    float32 first: between float64 outputs 1e-9 apart it measured float32's rounding (about 1e-15, where the error is
    1e-18), so a float64 fidelity or exactness study bottomed out there. bf16 outputs are still measured in float32."""
    from linformer.modeling.reference import squared_relative_error

    torch.manual_seed(0)
    teacher = torch.randn(2, 5, 8, dtype=torch.float64)
    student = teacher + 1e-9 * torch.randn(2, 5, 8, dtype=torch.float64)
    mask = torch.tensor([[1] * 5, [1] * 3 + [0] * 2])
    keep = mask[..., None].double()
    want = ((student - teacher) * keep).square().sum() / (teacher * keep).square().sum()
    got = squared_relative_error(student, teacher, mask)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-9, atol=0)
    assert squared_relative_error(student.bfloat16(), teacher.bfloat16()).dtype == torch.float32


@pytest.mark.parametrize("sharing", [s for s in SHARINGS if s != "none"])
def test_projecting_hidden_states_first_equals_projecting_keys(sharing):
    """Every sharing whose E serves all heads takes the shared-E fast path (E^T X then W, the key/value bias weighted
    by E^T 1): it equals the per-head path (W then E^T) given the same E and F in every head, with a trained model's
    nonzero biases, padded or not."""
    torch.manual_seed(0)
    shared = _trained_biases(LinformerModel(tiny_config(sharing=sharing)).eval())
    per_head = LinformerModel(tiny_config(sharing="none")).eval()
    state = shared.state_dict()
    for i in range(2):
        layer = f"encoder.layer.{i}.attention.self"
        E = state.get(f"{layer}.E.weight", state.get("encoder.E.weight"))
        F = state.get(f"{layer}.F.weight", E)
        state[f"{layer}.E.weight"], state[f"{layer}.F.weight"] = E.expand(4, 16, 4).clone(), F.expand(4, 16, 4).clone()
    state.pop("encoder.E.weight", None)
    per_head.load_state_dict(state)
    for ids, mask in (_padded_batch(), (torch.randint(4, 64, (2, 16)), None)):
        torch.testing.assert_close(
            shared(ids, attention_mask=mask).last_hidden_state,
            per_head(ids, attention_mask=mask).last_hidden_state,
            atol=1e-5,
            rtol=1e-5,
        )


@pytest.mark.parametrize("sharing", SHARINGS)
def test_exact_short_inputs_attend_exactly_up_to_k_tokens_and_project_from_k_plus_1(sharing):
    """exact_short_inputs at its boundary (k = 4): an input of k tokens or fewer is full attention over them, alone or
    as a row of a padded batch; a row of k + 1 tokens is projected, and gives inside the batch what it gives alone."""
    torch.manual_seed(0)
    k = 4
    model = _trained_biases(LinformerModel(tiny_config(sharing=sharing, exact_short_inputs=True)).eval())
    full = LinformerModel(tiny_config(attention="full")).eval()
    missing, _ = full.load_state_dict(model.state_dict(), strict=False)
    assert not missing
    lengths = (16, k + 1, k, k - 1)
    ids, mask = _padded_batch(lengths=lengths)
    batched = model(ids, attention_mask=mask).last_hidden_state
    for i, length in enumerate(lengths):
        alone = model(ids[i : i + 1, :length]).last_hidden_state
        torch.testing.assert_close(batched[i : i + 1, :length], alone, atol=1e-5, rtol=1e-5)
        if length <= k:
            torch.testing.assert_close(alone, full(ids[i : i + 1, :length]).last_hidden_state, atol=1e-5, rtol=1e-5)
    longer = ids[1:2, : k + 1]
    assert not torch.allclose(model(longer).last_hidden_state, full(longer).last_hidden_state, atol=1e-3)


# every attention the model builds: the paper's sharings and projections, full, the exact local and global keys
DEPLOYED_VARIANTS = {
    **{f"sharing={s}": dict(sharing=s) for s in SHARINGS},
    **{f"projection={p}": dict(projection=p) for p in PROJECTIONS},
    "resample": dict(length_policy="resample"),
    "mask_empty_windows": dict(mask_empty_windows=True),
    "full": dict(attention="full"),
    "local_global": dict(local_window=4, global_positions=[0, -1]),
    "landmark": dict(sharing="kv", local_window=4, global_positions=[0, -1], landmark_pooling=True,
                     length_policy="resample"),
    "overlap_mask": dict(sharing="layerwise", local_window=4, global_positions=[0, -1], overlap_columns="mask",
                         exact_short_inputs=True),
    "overlap_reduce": dict(local_window=4, global_positions=[0, -1], overlap_columns="reduce",
                           length_policy="resample"),
}


@pytest.mark.parametrize("overrides", DEPLOYED_VARIANTS.values(), ids=DEPLOYED_VARIANTS.keys())
def test_dynamic_int8_quantization_runs_every_variant_close_to_fp32(overrides):
    """torch.ao.quantization.quantize_dynamic swaps every nn.Linear for an int8 layer whose weight and bias are
    methods: the attention computes through the layers, never their weight, so every variant runs and stays within
    int8's error of the fp32 model."""
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(**overrides)).eval()
    quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    ids, mask = _padded_batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).last_hidden_state
        torch.testing.assert_close(quantized(ids, attention_mask=mask).last_hidden_state, expected,
                                   atol=5e-3, rtol=0)


@pytest.mark.parametrize("overrides", DEPLOYED_VARIANTS.values(), ids=DEPLOYED_VARIANTS.keys())
def test_the_eager_path_that_returns_attention_maps_gives_the_kernels_hidden_states(overrides):
    """output_attentions=True runs the explicit matmul-softmax-matmul instead of the fused kernel: the same attention
    (its 1/sqrt(d) temperature included), so the same hidden states. Weights x3 sharpen the softmax, where a wrong
    scale shows."""
    torch.manual_seed(0)
    model = LinformerModel(tiny_config(**{**overrides, "exact_short_inputs": True})).eval()  # and a row of <= k
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    ids, mask = _padded_batch(lengths=(16, 11, 3))
    with torch.no_grad():
        kernel = model(ids, attention_mask=mask).last_hidden_state
        eager = model(ids, attention_mask=mask, output_attentions=True).last_hidden_state
    torch.testing.assert_close(eager, kernel, atol=1e-4, rtol=1e-4)


class _Logits(torch.nn.Module):
    """The model as a deployment exports it: ids and mask in, the last hidden state out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _served(model, T):
    """A batch of length T with a short row (3 real tokens) beside a full one, and eager's output for it."""
    ids, mask = torch.randint(4, 64, (2, T)), torch.ones(2, T, dtype=torch.long)
    mask[1, 3:] = 0
    with torch.no_grad():
        return ids, mask, model(ids, mask)


@pytest.mark.parametrize("name", DEPLOYED_VARIANTS)
def test_the_torchscript_onnx_exporter_writes_a_graph_onnxruntime_runs_like_eager(name):
    """torch.onnx.export(dynamo=False) traces the forward: every variant exports (the exact local and global keys at
    a static shape: their band is a strided view of the keys), and where onnxruntime is installed the graph gives
    eager's outputs at other lengths and paddings (the paper's variants, exported with dynamic axes) or at the export
    shape with other paddings."""
    pytest.importorskip("onnx")  # the exporter writes through it
    import io

    torch.manual_seed(0)
    model = _Logits(LinformerModel(tiny_config(max_seq_len=32, **DEPLOYED_VARIANTS[name])).eval()).eval()
    static = bool(DEPLOYED_VARIANTS[name].get("local_window"))  # the block layout follows the length
    ids, mask = torch.randint(4, 64, (2, 24)), torch.ones(2, 24, dtype=torch.long)  # unpadded at export
    axes = None if static else {"input_ids": {0: "B", 1: "T"}, "attention_mask": {0: "B", 1: "T"}}
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), f, input_names=["input_ids", "attention_mask"], dynamo=False,
                          dynamic_axes=axes, opset_version=17)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    for B, T in [(2, 24)] if static else [(2, 24), (3, 17), (1, 32)]:
        ids, mask = torch.randint(4, 64, (B, T)), torch.ones(B, T, dtype=torch.long)
        mask[-1, 3:] = 0  # within k tokens: a short row
        if B > 2:
            mask[1, 9:] = 0
        with torch.no_grad():
            expected = model(ids, mask)
        got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("window, T", [(4, 23), (4, 25), (16, 20), (16, 25), (16, 31)])
def test_the_torchscript_onnx_exporter_takes_the_exact_local_keys_at_any_fixed_length(window, T):
    """The TorchScript exporter refused the exact local keys' band (its strided view "not constant", in thousands of
    lines of its IR) unless T was a whole number of blocks (window / 2): the block count, ceil(T / b), was a floor
    division of a negative number, which the exporter neither folds to a constant nor rounds as torch does. Every
    fixed length exports now, and where onnxruntime is installed the graph gives eager's outputs, a short padded row
    included."""
    pytest.importorskip("onnx")
    import io

    torch.manual_seed(0)
    config = tiny_config(max_seq_len=32, num_hidden_layers=1, local_window=window, global_positions=[0, -1],
                         exact_short_inputs=True)
    model = _Logits(LinformerModel(config).eval()).eval()
    ids, mask, expected = _served(model, T)
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), f, input_names=["input_ids", "attention_mask"], dynamo=False,
                          opset_version=17)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-5, rtol=1e-5)


POOLED = {
    **{p: dict(projection=p) for p in ("mean_pool", "max_pool", "conv")},
    "landmark": dict(sharing="kv", local_window=4, global_positions=[0, -1], landmark_pooling=True,
                     length_policy="resample"),
}


@pytest.mark.parametrize("name", POOLED)
def test_the_torchscript_onnx_exporter_pools_a_length_that_is_no_multiple_of_the_window_as_eager(name):
    """Pooling windows of n/k positions (the pooled and convolved E) and the landmarks' (k, W) blocks of
    W = ceil(T / k) + 1 tokens, exported by the TorchScript exporter at T = 23 (k = 4: 8-position windows, 6 tokens a
    landmark): onnxruntime gives eager's outputs, a short padded row included, and at other lengths where the graph
    takes them (the pooled E, with dynamic axes). Written -(-T // k), the landmarks' ceiling was rounded towards zero
    in the graph: blocks one token short, outputs 1e-3 away from eager's."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import io

    torch.manual_seed(0)
    model = _Logits(LinformerModel(tiny_config(max_seq_len=32, num_hidden_layers=1, **POOLED[name])).eval()).eval()
    static = name == "landmark"  # exact local keys: the block layout follows the length
    ids, mask, _ = _served(model, 23)
    axes = None if static else {"input_ids": {1: "T"}, "attention_mask": {1: "T"}}
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask), f, input_names=["input_ids", "attention_mask"], dynamo=False,
                          dynamic_axes=axes, opset_version=17)
    session = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    for T in [23] if static else [23, 9, 17, 32]:
        ids, mask, expected = _served(model, T)
        got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("overrides", [dict(sharing=s) for s in SHARINGS] + [dict(length_policy="resample")],
                         ids=[*SHARINGS, "resample"])
def test_torch_export_with_a_dynamic_length_up_to_n_gives_eager_outputs_at_every_length(overrides):
    """The paper's Linformer (the linear E, any sharing) exports with one dynamic length from 2 to n, n included:
    nothing in its forward branches on T = n."""
    from torch.export import Dim, export

    torch.manual_seed(0)
    model = LinformerModel(tiny_config(**overrides)).eval()
    n = model.config.max_seq_len
    T = Dim("T", min=2, max=n)
    ids = torch.randint(4, 64, (2, 12))
    exported = export(model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
                      dynamic_shapes={"input_ids": {1: T}, "attention_mask": {1: T}}).module()
    for length in (2, 7, n - 1, n):
        ids, mask = torch.randint(4, 64, (2, length)), torch.ones(2, length, dtype=torch.long)
        mask[1, length // 2 + 1:] = 0
        with torch.no_grad():
            torch.testing.assert_close(exported(input_ids=ids, attention_mask=mask).last_hidden_state,
                                       model(ids, attention_mask=mask).last_hidden_state)


FIXED_LENGTH_VARIANTS = {"local_global": dict(local_window=4, global_positions=[0, -1]),
                         "mask_empty_windows": dict(mask_empty_windows=True)}


@pytest.mark.parametrize("name", FIXED_LENGTH_VARIANTS)
def test_a_dynamic_length_export_of_a_fixed_length_layout_is_refused_naming_it(name):
    """The exact local/global keys and mask_empty_windows lay out their attention by the length: torch.export refused
    a dynamic one in its own words, and the ONNX dynamo exporter took torch's suggested fix, the example's length,
    writing a graph onnxruntime refused at any other length without a word. Both now stop on one ConfigError naming
    the setting; at a fixed length they export and give eager's outputs."""
    from torch.export import Dim, export

    torch.manual_seed(0)
    model = _Logits(LinformerModel(tiny_config(max_seq_len=32, **FIXED_LENGTH_VARIANTS[name])).eval()).eval()
    ids, mask = torch.randint(4, 64, (2, 24)), torch.ones(2, 24, dtype=torch.long)
    mask[1, 15:] = 0
    T = Dim("T", min=2, max=32)
    with pytest.raises(ConfigError, match="exports at a fixed length only"):
        export(model, (ids, mask), dynamic_shapes={"input_ids": {1: T}, "attention_mask": {1: T}})
    with torch.no_grad():
        torch.testing.assert_close(export(model, (ids, mask)).module()(ids, mask), model(ids, mask))
    pytest.importorskip("onnxscript")  # the dynamo exporter writes through it
    with pytest.raises(Exception, match="exports at a fixed length only"):
        torch.onnx.export(model, (ids, mask), input_names=["input_ids", "attention_mask"], dynamo=True,
                          dynamic_shapes={"input_ids": {1: T}, "attention_mask": {1: T}})


def test_a_strict_or_onnx_export_from_an_example_of_at_most_k_tokens_refuses_the_local_global_keys_length():
    """A converted model (exact_short_inputs=True, local/global keys) exported from an example of at most k tokens:
    Dynamo (strict export, the ONNX dynamo exporter's retry) showed the dynamic length to the layer as an int, which
    took the exact short-input branch and guarded T <= k; the ONNX exporter accepted that range and wrote a graph of
    unbounded length, wrong beyond k without a word. Every export path now reaches the refusal naming the setting
    (strict export: torch wraps the package's ConfigError in its own error, whose message quotes it), and a fixed
    length exports strict or not with eager's outputs."""
    from torch.export import Dim, export

    torch.manual_seed(0)
    config = tiny_config(max_seq_len=32, projected_dim=8, sharing="layerwise", length_policy="resample",
                         exact_short_inputs=True, local_window=4, global_positions=[0, -1])
    model = _Logits(LinformerModel(config).eval()).eval()
    ids, mask, expected = _served(model, 6)  # k = 8
    T = Dim("T", min=2, max=32)
    dynamic = {"input_ids": {1: T}, "attention_mask": {1: T}}
    with pytest.raises(ConfigError, match="exports at a fixed length only"):
        export(model, (ids, mask), dynamic_shapes=dynamic, strict=False)
    with pytest.raises(Exception, match="exports at a fixed length only"):
        export(model, (ids, mask), dynamic_shapes=dynamic, strict=True)
    for strict in (False, True):
        with torch.no_grad():
            torch.testing.assert_close(export(model, (ids, mask), strict=strict).module()(ids, mask), expected)
    pytest.importorskip("onnxscript")  # the dynamo exporter writes through it
    with pytest.raises(Exception, match="exports at a fixed length only"):
        torch.onnx.export(model, (ids, mask), input_names=["input_ids", "attention_mask"], dynamo=True,
                          dynamic_shapes=dynamic)


@pytest.mark.parametrize("policy, example", [("resample", 6), ("slice", 20)], ids=["example<=k", "example>k"])
def test_a_dynamic_length_graph_of_exact_short_inputs_gives_eager_outputs_on_both_sides_of_k(policy, example):
    """exact_short_inputs=True (a converted model's default) attends exactly when the batch is at most k tokens long,
    a branch on the length: a graph captured with a dynamic length (torch.export, the ONNX exporters, torch.jit.trace)
    kept the example's side of k and gave other outputs on the other side, without a word. A captured forward now
    keeps both, so the paper's Linformer loaded from a conversion (local_window=0, global_positions=[], what the
    refusal of a dynamic length names) exports with a dynamic length: eager's outputs at lengths on both sides of k,
    from an example on either side."""
    from torch.export import Dim, export

    torch.manual_seed(0)
    config = tiny_config(max_seq_len=32, projected_dim=8, sharing="layerwise", length_policy=policy,
                         exact_short_inputs=True, local_window=0, global_positions=[])
    model = _Logits(LinformerModel(config).eval()).eval()
    example = _served(model, example)[:2]
    T = Dim("T", min=2, max=32)
    dynamic = {"input_ids": {1: T}, "attention_mask": {1: T}}
    exported = export(model, example, dynamic_shapes=dynamic).module()
    strict = export(model, example, dynamic_shapes=dynamic, strict=True).module()  # Dynamo, as the ONNX dynamo retry
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
    for length in (3, 8, 9, 20, 32):  # k = 8
        ids, mask, expected = _served(model, length)
        with torch.no_grad():
            torch.testing.assert_close(exported(ids, mask), expected)
            torch.testing.assert_close(strict(ids, mask), expected)
            torch.testing.assert_close(traced(ids, mask), expected)
    pytest.importorskip("onnx")  # the TorchScript exporter writes through it
    ort = pytest.importorskip("onnxruntime")
    import io

    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, example, f, input_names=["input_ids", "attention_mask"], dynamo=False,
                          dynamic_axes={"input_ids": {1: "T"}, "attention_mask": {1: "T"}}, opset_version=17)
    session = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    for length in (3, 8, 9, 20, 32):
        ids, mask, expected = _served(model, length)
        got = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        torch.testing.assert_close(torch.from_numpy(got), expected, atol=1e-5, rtol=1e-5)


def test_position_ids_count_padding_as_integers():
    """ONNX's CumSum takes no bool tensor: the traced embeddings count real tokens as integers (what the ONNX test
    above checks through onnxruntime, here where only torch is installed)."""
    model = LinformerModel(tiny_config()).eval()
    ids = torch.randint(4, 64, (2, 16))
    with torch.no_grad():
        traced = torch.jit.trace(model.embeddings, (ids,))
    cumsums = [node for node in traced.inlined_graph.nodes() if node.kind() == "aten::cumsum"]
    assert cumsums and all(next(node.inputs()).type().scalarType() != "Bool" for node in cumsums)


def test_input_longer_than_n_names_n():
    model = LinformerModel(tiny_config())
    with pytest.raises(ValueError, match=r"17 tokens.*n=16"):
        model(torch.randint(4, 64, (1, 17)))


def test_mlm_logits_are_dense_by_default_and_masked_only_with_sparse_prediction():
    dense = LinformerForMaskedLM(tiny_config()).eval()
    sparse = LinformerForMaskedLM(tiny_config(sparse_prediction=True)).eval()
    sparse.load_state_dict(dense.state_dict())
    ids, mask = _padded_batch()
    labels = torch.full_like(ids, -100)
    labels[0, [1, 5, 9]] = ids[0, [1, 5, 9]]
    labels[2, 2] = ids[2, 2]
    a = dense(ids, attention_mask=mask, labels=labels)
    b = sparse(ids, attention_mask=mask, labels=labels)
    assert a.logits.shape == (*ids.shape, 64)
    assert b.logits.shape == (4, 64)
    torch.testing.assert_close(b.loss, a.loss)
    torch.testing.assert_close(b.logits, a.logits[labels != -100])
    # without labels there is nothing to select: dense logits either way
    assert sparse(ids, attention_mask=mask).logits.shape == (*ids.shape, 64)


def test_projecting_padding_leaks_and_zero_padding_prevents_it():
    """zero_padding=False (fairseq's projection) changes a padded sequence's output; the default does not."""
    model = LinformerModel(tiny_config(sharing="headwise")).eval()
    ids, mask = _padded_batch(lengths=(16, 5))
    alone = model(ids[1:, :5]).last_hidden_state
    torch.testing.assert_close(model(ids, attention_mask=mask).last_hidden_state[1:, :5], alone)
    for m in model.modules():
        if isinstance(m, LinearProjection):
            m.zero_padding = False
    leaked = model(ids, attention_mask=mask).last_hidden_state[1:, :5]
    assert (leaked - alone).abs().max() > 1e-3


def test_gradient_checkpointing_gives_the_same_gradients():
    config = tiny_config()
    ids, mask = _padded_batch()
    labels = torch.where(mask.bool(), ids, -100)
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = LinformerForMaskedLM(config).train()
        if checkpointing:
            # transformers' newer name for gradient_checkpointing_enable; both exist from the newer releases on
            getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
            assert model.roberta.encoder.layer[0].gradient_checkpointing
        model(ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)


def test_every_parameter_gets_a_gradient():
    for sharing, projection in itertools.product(SHARINGS, ("linear", "conv")):
        model = LinformerForMaskedLM(tiny_config(sharing=sharing, projection=projection))
        ids, mask = _padded_batch()
        model(ids, attention_mask=mask, labels=torch.where(mask.bool(), ids, -100)).loss.backward()
        no_grad = [n for n, p in model.named_parameters() if p.grad is None]
        assert no_grad == [], (sharing, projection, no_grad)


@pytest.mark.parametrize("sharing", SHARINGS)
def test_mean_init_starts_as_mean_pooling(sharing):
    """projection_init='mean': a new linear (or conv) Linformer equals the parameter-free mean_pool projection."""
    pooled = LinformerModel(tiny_config(projection="mean_pool", sharing=sharing)).eval()
    ids = torch.randint(4, 64, (2, 16))
    for projection in ("linear", "conv"):
        model = LinformerModel(tiny_config(projection=projection, sharing=sharing)).eval()
        model.load_state_dict(pooled.state_dict(), strict=False)
        torch.testing.assert_close(model(ids).last_hidden_state, pooled(ids).last_hidden_state)


def test_xavier_init_is_zero_mean():
    model = LinformerModel(tiny_config(projection_init="xavier", max_seq_len=256, projected_dim=64))
    E = model.encoder.layer[0].attention.self.E.weight
    assert abs(E.mean().item()) < 0.01 and E.abs().max().item() <= (6 / 320) ** 0.5 / 2**0.5 + 1e-6


@pytest.mark.parametrize("sharing", SHARINGS)
def test_masking_empty_windows_makes_short_inputs_match_mean_pooling(sharing):
    """A mean-initialised E with mask_empty_windows equals mean pooling on inputs shorter than n, padded or not:
    only the windows holding a token take part. Without the mask the empty columns (zero keys and values) still
    take softmax mass and the outputs differ."""
    pooled = LinformerModel(tiny_config(projection="mean_pool", sharing=sharing)).eval()
    ids, mask = _padded_batch(lengths=(11, 5, 2))
    expected = pooled(ids, attention_mask=mask).last_hidden_state
    masked = LinformerModel(tiny_config(sharing=sharing, mask_empty_windows=True)).eval()
    masked.load_state_dict(pooled.state_dict(), strict=False)
    torch.testing.assert_close(masked(ids, attention_mask=mask).last_hidden_state, expected)
    plain = LinformerModel(tiny_config(sharing=sharing)).eval()
    plain.load_state_dict(pooled.state_dict(), strict=False)
    real = mask.bool()
    assert not torch.allclose(plain(ids, attention_mask=mask).last_hidden_state[real], expected[real], atol=1e-3)


@pytest.mark.parametrize("sharing", ("none", "layerwise"))
def test_masked_columns_no_token_reaches_are_unused_whatever_E_holds(sharing):
    """The mask follows positions, not E's values: after training has filled every entry of E, the columns past
    the last token's window (here T=6, n=16, k=4: columns 2 and 3) still change nothing."""
    model = LinformerModel(tiny_config(sharing=sharing, mask_empty_windows=True)).eval()
    projections = [m for m in model.modules() if isinstance(m, LinearProjection)]
    with torch.no_grad():
        for m in projections:
            m.weight.normal_()  # a trained E: no zeros left
    ids = torch.randint(4, 64, (2, 6))
    before = model(ids).last_hidden_state
    with torch.no_grad():
        for m in projections:
            m.weight[..., 2:] += 5.0
    torch.testing.assert_close(model(ids).last_hidden_state, before)
    with torch.no_grad():
        for m in projections:
            m.weight[..., :6, 1] += 5.0  # the last covered column is used
    assert not torch.allclose(model(ids).last_hidden_state, before)


@pytest.mark.parametrize("field, value", [("projection", "sum_pool"), ("length_policy", "stretch")])
def test_a_value_the_config_takes_but_no_code_builds_fails_rather_than_acting_as_another(field, value, monkeypatch):
    """A projection added to PROJECTIONS alone built a max pool, a length policy added to LENGTH_POLICIES alone
    sliced: each place that builds from a field names every value it knows."""
    import linformer.modeling.configuration as configuration

    name = {"projection": "PROJECTIONS", "length_policy": "LENGTH_POLICIES"}[field]
    monkeypatch.setattr(configuration, name, (*getattr(configuration, name), value))
    with pytest.raises(KeyError, match=value):
        LinformerModel(tiny_config(**{field: value}))
