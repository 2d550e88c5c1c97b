"""The projection's length policy: exact attention for inputs of at most k tokens, and E resampled to each input's
length so that every length uses all k columns. Both keep a row's output independent of how its batch is padded."""

import pytest
import torch
import torch.nn.functional as F

from linformer import LinformerModel
from linformer.errors import ConfigError
from linformer.modeling.attention import resampled_rows, window_mean_matrix
from linformer.modeling.flops import forward_flops_per_token

from .conftest import tiny_config

SHARINGS = ("none", "headwise", "kv", "layerwise")
LENGTHS = (16, 11, 6, 3)  # k = 6 below: two rows above k, one at k, one under


def _batch(lengths=LENGTHS, pad=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), pad)
    mask = torch.zeros_like(ids)
    for i, L in enumerate(lengths):
        ids[i, :L] = torch.randint(4, 64, (L,), generator=g)
        mask[i, :L] = 1
    return ids, mask


def _model(**overrides):
    """Random (xavier) E and F, so that nothing holds only because of the mean initialisation."""
    torch.manual_seed(0)
    settings = dict(projected_dim=6, projection_init="xavier") | overrides
    return LinformerModel(tiny_config(**settings)).eval()


# ---------------------------------------------------------------------------------------------------- resampling
def test_resampling_to_n_rows_gives_E_itself():
    E = torch.randn(16, 4)
    torch.testing.assert_close(resampled_rows(E, 16), E)


@pytest.mark.parametrize("T", [2, 4, 8])
def test_resampling_to_a_divisor_of_n_sums_whole_blocks_of_rows(T):
    """Against torch's area interpolation (exact for T dividing n), scaled from a mean to a sum."""
    E = torch.randn(16, 4)
    expected = F.interpolate(E.t()[None], size=T, mode="area")[0].t() * (16 / T)
    torch.testing.assert_close(resampled_rows(E, T), expected)


@pytest.mark.parametrize("T", [3, 5, 7, 13])
def test_resampling_keeps_column_sums_at_every_length(T):
    E = torch.randn(3, 16, 4)  # per head
    torch.testing.assert_close(resampled_rows(E, T).sum(-2), E.sum(-2), atol=1e-5, rtol=0)


def test_mean_windows_resampled_to_k_rows_become_the_identity():
    """At T = k each of the k windows holds one token: the resampled projection is exact attention."""
    torch.testing.assert_close(resampled_rows(window_mean_matrix(16, 4), 4), torch.eye(4))


def test_rows_of_a_padded_batch_are_each_resampled_to_their_own_length():
    E = torch.randn(16, 4)
    rows = resampled_rows(E, 12, torch.tensor([12, 7]))
    torch.testing.assert_close(rows[0], resampled_rows(E, 12))
    torch.testing.assert_close(rows[1, :7], resampled_rows(E, 7))
    assert rows[1, 7:].abs().max() == 0


def test_a_float64_E_is_resampled_in_float64():
    """The resampled rows were computed from E's cumulative sums in float32 and cast back, so a float64 model kept
    only float32's precision there and its gradchecks with respect to E failed (Jacobian mismatch); one E shared by
    the heads and one per head, every row as long as the batch and rows of their own lengths."""
    from torch.autograd import gradcheck

    torch.manual_seed(0)
    assert resampled_rows(torch.randn(7, 3, dtype=torch.bfloat16), 5).dtype == torch.bfloat16
    shared, per_head = torch.randn(7, 3, dtype=torch.float64), torch.randn(2, 7, 3, dtype=torch.float64)
    for E in (shared, per_head):
        E.requires_grad_()
        assert gradcheck(lambda E: resampled_rows(E, 5), (E,))
        assert gradcheck(lambda E: resampled_rows(E, 5, torch.tensor([5, 2])), (E,))


@pytest.mark.parametrize("form", [{}, dict(local_window=3, global_positions=[0, -1], overlap_columns="reduce")])
def test_a_float64_layer_with_resampled_E_passes_gradcheck_in_E(form):
    """One attention layer (E per head, a separate F) with length_policy="resample" in float64, over a padded
    batch: its outputs' gradients with respect to E and F are float64's, as the slice's are (they failed gradcheck:
    the resampled rows held float32's precision)."""
    from torch.autograd import gradcheck

    from linformer.modeling.attention import LinformerSelfAttention

    torch.manual_seed(0)
    config = tiny_config(hidden_size=8, num_attention_heads=2, max_seq_len=7, projected_dim=3, sharing="none",
                         length_policy="resample", projection_init="xavier", **form)
    layer = LinformerSelfAttention(config, 0).double().eval()
    hidden = torch.randn(2, 7, 8, dtype=torch.float64)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    outputs = lambda e, f: torch.func.functional_call(layer, {"E.weight": e, "F.weight": f}, (hidden, mask))[0]
    E, F_ = (p.detach().clone().requires_grad_() for p in (layer.E.weight, layer.F.weight))
    assert gradcheck(outputs, (E, F_))


def test_a_short_input_reaches_every_column_only_when_resampled():
    """Mean-initialised E at n = 16, k = 6: the slice's first 5 rows reach 2 of the 6 windows (T k / n), so 4 keys
    are zero; resampled, all 6 hold tokens. The gradient reaches E's rows past T only through the resampling."""
    ids = torch.randint(4, 64, (1, 5))
    for policy, columns in (("slice", 2), ("resample", 6)):
        model = _model(sharing="layerwise", length_policy=policy, projection_init="mean")
        E = model.encoder.E
        assert int((E.rows(5, None).abs().sum(0) > 0).sum()) == columns
        grad = torch.autograd.grad(model(ids).last_hidden_state.sum(), E.weight)[0]
        assert bool(grad[5:].abs().max() > 0) == (policy == "resample")


# --------------------------------------------------------------------------------------------- padded batches
@pytest.mark.parametrize("sharing", SHARINGS)
@pytest.mark.parametrize("policy", [dict(length_policy="resample"), dict(exact_short_inputs=True),
                                    dict(length_policy="resample", exact_short_inputs=True),
                                    dict(exact_short_inputs=True, mask_empty_windows=True)],
                         ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_each_row_of_a_padded_batch_equals_that_row_alone(sharing, policy):
    model = _model(sharing=sharing, **policy)
    ids, mask = _batch()
    with torch.no_grad():
        batched = model(ids, attention_mask=mask).last_hidden_state
        for i, L in enumerate(LENGTHS):
            alone = model(ids[i : i + 1, :L]).last_hidden_state
            torch.testing.assert_close(batched[i, :L], alone[0], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------- exact attention
def _with_weights_of(model, **overrides):
    other = _model(**overrides)
    other.load_state_dict(model.state_dict(), strict=False)
    return other


@pytest.mark.parametrize("sharing", SHARINGS)
def test_inputs_of_at_most_k_tokens_get_exactly_full_attention(sharing):
    model = _model(sharing=sharing, exact_short_inputs=True)
    full = _with_weights_of(model, attention="full")
    ids, mask = _batch()
    with torch.no_grad():
        ours = model(ids, attention_mask=mask, output_attentions=True)
        reference = full(ids, attention_mask=mask).last_hidden_state
    for i, L in enumerate(LENGTHS):
        close = torch.allclose(ours.last_hidden_state[i, :L], reference[i, :L], atol=1e-5, rtol=1e-5)
        assert close == (L <= 6), f"row of {L} tokens"
    # and alone, where the whole batch fits in k
    short = ids[3:, :3]
    torch.testing.assert_close(model(short).last_hidden_state, full(short).last_hidden_state, atol=1e-5, rtol=1e-5)
    assert ours.attentions[0].shape[-1] == 6  # probabilities over k key positions either way


def test_without_the_policy_short_inputs_are_still_projected():
    model = _model(sharing="layerwise")
    full = _with_weights_of(model, attention="full")
    short = torch.randint(4, 64, (1, 3))
    assert not torch.allclose(model(short).last_hidden_state, full(short).last_hidden_state, atol=1e-3)


def test_exact_short_inputs_counts_full_attention_flops_up_to_k():
    config = tiny_config(projected_dim=6, exact_short_inputs=True)
    full = tiny_config(attention="full")
    projected = tiny_config(projected_dim=6)
    assert forward_flops_per_token(config, 5) == forward_flops_per_token(full, 5)
    assert forward_flops_per_token(config, 12) == forward_flops_per_token(projected, 12)


# ------------------------------------------------------------------------------------------------- bad settings
@pytest.mark.parametrize("settings, named", [
    (dict(length_policy="resample", projection="conv"), "projection='conv'"),
    (dict(length_policy="resample", projection="mean_pool"), "projection='mean_pool'"),
    (dict(length_policy="resample", mask_empty_windows=True), "mask_empty_windows=True"),
    (dict(length_policy="stretch"), "length_policy='stretch'"),
])
def test_a_policy_the_projection_cannot_support_is_a_config_error(settings, named):
    with pytest.raises(ConfigError, match=named):
        tiny_config(**settings)
