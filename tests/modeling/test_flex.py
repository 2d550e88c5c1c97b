"""attn_implementation="flex_attention": the local/global attention as one flex_attention call equals the dense
masked reference and the blocked path, its block mask visits a bounded number of key blocks, every attention path
honours it, and what flex cannot do (a CPU backward, attention dropout, an old torch) is refused in one line.

The mask tests run torch's eager flex_attention (the same masks and scores, without the compiler's minutes); one test
runs the compiled CPU kernel, and tests/gpu/test_flex_cuda.py the compiled kernel's forward and backward."""

import pytest
import torch

from linformer.errors import ConfigError
from linformer.modeling import LinformerConfig, LinformerModel, attention, flex
from linformer.modeling.local_global import ExactKeyLayout, column_spans, local_global_attention

from .test_local_global import _dense, dense_reduced, window_mean_rows

pytestmark = [pytest.mark.skipif(not flex.available(), reason="this torch has no flex_attention"),
              # the eager fixture's deliberate choice, which torch warns about
              pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")]


@pytest.fixture
def eager(monkeypatch):
    """flex.attend without torch.compile: the mask logic under test, not the compiler."""
    from torch.nn.attention.flex_attention import flex_attention

    monkeypatch.setattr(flex, "_compiled", lambda: flex_attention)

SMALL = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_seq_len=160, projected_dim=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _case(lengths, c, seed=0):
    g = torch.Generator().manual_seed(seed)
    B, H, T, d = len(lengths), 2, max(lengths), 8
    q, k, v = (torch.randn(B, H, T, d, generator=g) for _ in range(3))
    L = torch.tensor(lengths)
    real = (torch.arange(T)[None, :] < L[:, None])[:, None, :, None]
    k, v = k * real, v * real
    pk, pv = torch.randn(B, H, c, d, generator=g), torch.randn(B, H, c, d, generator=g)
    return q, k, v, L, pk, pv, torch.rand(B, H, c, generator=g)


# T = 150 spans two blocks of 128 and T = 600 five, so that some query blocks reach the global keys' blocks only
# through the block mask's global columns: the band, global and projected blocks are all exercised
@pytest.mark.parametrize("lengths", [[150, 131, 2], [600, 450, 2]])
@pytest.mark.parametrize("radius, positions, overlap", [(4, [0, -1], None), (3, [], None), (0, [0, -1], None),
                                                        (5, [0, 2, -1, -3], "mask"), (64, [0, -1], "mask"),
                                                        (5, [0, 2, -1, -3], "reduce"), (64, [0, -1], "reduce"),
                                                        (0, [0, -1], "reduce")])
def test_flex_local_global_equals_the_dense_reference(lengths, radius, positions, overlap, eager):
    c = 5
    q, k, v, L, pk, pv, log_count = _case(lengths, c)
    T = max(lengths)
    layout = ExactKeyLayout(L, T, radius, positions)
    with torch.no_grad():
        out = flex.local_global(q, k, v, layout, (pk, pv, None, log_count),
                                layout.overlap(c, rule=overlap) if overlap else None, reduced=overlap == "reduce")
    lowered = dense_reduced(T, L, radius, positions, window_mean_rows(L, T, c)) if overlap == "reduce" else None
    ref, rows = _dense(q, k, v, L, radius, positions, pk, pv, log_count,
                       column_spans(L, c) if overlap == "mask" else None, lowered)
    at = rows[:, None].expand(-1, 2, -1)
    torch.testing.assert_close(out[at], ref[at], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("rule", ["mask", "reduce"])
def test_flex_equals_the_blocked_path_with_masked_columns(rule, eager):
    lengths, c = [140, 60], 6
    q, k, v, L, pk, pv, log_count = _case(lengths, c, seed=1)
    column_mask = torch.arange(c)[None, :] < torch.tensor([[6], [3]])
    layout = ExactKeyLayout(L, 140, 8, [0, -1])
    projected = (pk, pv, column_mask, log_count)
    overlap = layout.overlap(c, 8 * c, c, rule=rule)  # the slice: columns of 8 rows, cut at a row's end
    with torch.no_grad():
        out = flex.local_global(q, k, v, layout, projected, overlap, reduced=rule == "reduce")
        blocked = local_global_attention(q, k, v, L, 8, [0, -1], projected, layout=layout, overlap=overlap)
    at = (torch.arange(140)[None, :] < L[:, None])[:, None].expand(-1, 2, -1)
    torch.testing.assert_close(out[at], blocked[at], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("radius, positions, overlap, column_mask", [
    (4, [0, -1], None, False), (64, [0, -1], "mask", True), (0, [0, 2, -1, -3], "mask", False),
    (130, [], None, True), (64, [0, -1], "reduce", True)])
def test_the_block_mask_lists_every_block_its_mask_mod_opens(radius, positions, overlap, column_mask):
    """The compiled kernel visits only the listed blocks (the eager one reads mask_mod alone): a block holding a
    (query, key) pair that mask_mod opens but the block mask leaves out would silently lose that key."""
    lengths, c = torch.tensor([600, 450, 2]), 40
    T, S = 600, 640
    layout = ExactKeyLayout(lengths, T, radius, positions)
    columns = torch.arange(c)[None, :] < torch.tensor([[40], [31], [1]]) if column_mask else None
    mask = flex.local_global_mask(layout, c, columns, layout.overlap(c, rule=overlap) if overlap else None)
    b = torch.arange(3).view(3, 1, 1)
    opened = mask.mask_mod(b, torch.zeros(1, dtype=torch.long), torch.arange(T).view(1, T, 1),
                           torch.arange(S).view(1, 1, S))  # (B, T, S), densely
    B_ = flex.BLOCK
    needed = torch.nn.functional.pad(opened, (0, -S % B_, 0, -T % B_)).view(3, -(-T // B_), B_, -1, B_).any(4).any(2)
    listed = mask.to_dense()[:, 0].bool()
    assert needed.any()
    assert not (needed & ~listed).any(), (needed & ~listed).nonzero()[:5]


def test_the_block_mask_visits_a_bounded_number_of_key_blocks():
    """At n = 4096 (32 query blocks), w = 128, k = 128: a block of queries visits its band's blocks (3), the global
    keys' (2) and the projected keys' (1 or 2), whatever n; only the two blocks holding a global query visit all."""
    T, c = 4096, 128
    layout = ExactKeyLayout(torch.tensor([T, 3000]), T, 64, [0, -1])
    mask = flex.local_global_mask(layout, c, None, None)
    visits = mask.kv_num_blocks[:, 0]  # (B, query blocks)
    all_blocks = -(-(T + c) // flex.BLOCK)
    for row, last in ((0, T - 1), (1, 2999)):
        global_blocks = {0, last // flex.BLOCK}
        for qb in range(visits.shape[1]):
            expected_max = all_blocks if qb in global_blocks else 3 + 2 + 2
            assert visits[row, qb] <= expected_max, (row, qb, int(visits[row, qb]))
        assert visits[row, 0] == all_blocks
    assert visits.float().mean() < 8


def _sdpa_and_flex(prepare=lambda model: model, **fields) -> tuple[torch.Tensor, torch.Tensor]:
    """A small model's hidden states at the real tokens of a padded batch, under sdpa and under flex_attention
    (`prepare`: what is done to the fresh model first, e.g. a dtype)."""
    torch.manual_seed(0)
    model = prepare(LinformerModel(LinformerConfig(**{**SMALL, **fields}))).eval()
    ids = torch.randint(3, 50, (2, 150))
    mask = torch.ones_like(ids)
    mask[1, 100:] = 0
    outs = []
    for impl in ("sdpa", "flex_attention"):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            outs.append(model(ids, attention_mask=mask).last_hidden_state[mask.bool()])
    return outs[0], outs[1]


@pytest.mark.parametrize("fields", [
    dict(local_window=16, global_positions=[0, -1], overlap_columns="mask", length_policy="resample"),
    dict(local_window=16, global_positions=[0, -1], overlap_columns="reduce", length_policy="resample"),
    dict(local_window=16, global_positions=[0, -1], overlap_columns="reduce"),  # the slice's columns
    dict(local_window=16, global_positions=[0, -1], sharing="layerwise"),
    dict(),                                                      # the paper's Linformer
    dict(mask_empty_windows=True),                               # its empty-window column mask
    dict(attention="full"),
])
def test_a_model_under_flex_gives_the_sdpa_hidden_states(fields, eager):
    sdpa, flexed = _sdpa_and_flex(**fields)
    torch.testing.assert_close(flexed, sdpa, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("fields", [
    dict(local_window=16, global_positions=[0, -1], overlap_columns="reduce", length_policy="resample"),
    dict(local_window=16, global_positions=[0, -1]),
])
def test_a_float64_model_under_flex_gives_the_sdpa_hidden_states_to_float64s_precision(fields, eager):
    """flex's score_mod added the projected columns' log counts through float32 whatever the model's dtype: a float64
    model under flex was 3e-9 from itself under sdpa (random E and F, whose counts float32 does not hold exactly)."""
    def random_float64(model):
        model = model.double()
        with torch.no_grad():
            for layer in model.encoder.layer:
                layer.attention.self.E.weight.normal_(0, 0.3)
                layer.attention.self.F.weight.normal_(0, 0.3)
        return model

    sdpa, flexed = _sdpa_and_flex(random_float64, **fields)
    assert flexed.dtype == torch.float64
    torch.testing.assert_close(flexed, sdpa, atol=1e-12, rtol=0)


def test_the_block_mask_is_built_once_per_forward(eager, monkeypatch):
    built = []
    make = flex.local_global_mask
    monkeypatch.setattr(flex, "local_global_mask", lambda *a: (built.append(1), make(*a))[1])
    sdpa, flexed = _sdpa_and_flex(local_window=16, global_positions=[0, -1], num_hidden_layers=3)
    assert len(built) == 1  # one forward under flex, three layers
    torch.testing.assert_close(flexed, sdpa, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("fields, masks", [
    (dict(attention="full"), 1),
    (dict(), 1),                                   # the paper's Linformer: its column mask
    (dict(exact_short_inputs=True, projected_dim=120), 2),  # and a prefix of the input mask (a row of 100 <= k)
])
def test_the_key_masks_are_built_once_per_forward_not_per_layer(fields, masks, eager, monkeypatch):
    built = []
    make = flex.key_mask
    monkeypatch.setattr(attention, "key_mask", lambda *a: (built.append(a[3]), make(*a))[1])
    sdpa, flexed = _sdpa_and_flex(num_hidden_layers=3, **fields)
    assert len(built) == masks, built  # one forward under flex, three layers
    torch.testing.assert_close(flexed, sdpa, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("fields", [{}, dict(overlap_columns="reduce", length_policy="resample")])
def test_compiled_flex_inference_on_the_cpu_equals_sdpa(fields):
    """Without gradients the CPU runs torch.compile's flex kernel (inference only there), lowered counts (a score_mod
    reading a per-query bias) included."""
    sdpa, flexed = _sdpa_and_flex(local_window=16, global_positions=[0, -1], **fields)
    torch.testing.assert_close(flexed, sdpa, atol=2e-5, rtol=2e-5)


def test_flex_refuses_attention_dropout_in_training_naming_the_key():
    model = LinformerModel(LinformerConfig(**{**SMALL, "attention_probs_dropout_prob": 0.1}, local_window=16,
                                           global_positions=[0, -1]))
    model.set_attn_implementation("flex_attention")
    ids = torch.randint(3, 50, (1, 150))
    with pytest.raises(ConfigError, match="set attention_probs_dropout_prob=0 .it is 0.1. or use .*sdpa"):
        model.train()(ids)


def test_flex_refuses_a_cpu_backward_saying_what_to_use(eager):
    model = LinformerModel(LinformerConfig(**SMALL, local_window=16, global_positions=[0, -1]))
    model.set_attn_implementation("flex_attention")
    with pytest.raises(ConfigError, match="no backward on the CPU .* attn_implementation='sdpa'"):
        model(torch.randint(3, 50, (1, 150)))
    with torch.no_grad():
        assert torch.isfinite(model(torch.randint(3, 50, (1, 150))).last_hidden_state).all()


def test_a_torch_without_flex_is_named_with_the_version_that_has_it(monkeypatch):
    monkeypatch.setattr(flex, "available", lambda: False)
    model = LinformerModel(LinformerConfig(**SMALL))
    with pytest.raises(ImportError, match=r"needs torch >= 2\.5 .*this is torch"):
        model.set_attn_implementation("flex_attention")


def test_more_input_shapes_than_torch_compiles_is_said_once(monkeypatch):
    """The compiled flex_attention is built per input shape (static: inductor's dynamic CPU kernel does not build for
    every mask); past torch's recompile limit torch runs its unfused flex_attention, which holds the full scores: a
    warning says so, once, and what to do."""
    from torch.nn.attention.flex_attention import flex_attention

    said = []
    monkeypatch.setattr(flex.logger, "warning_once", said.append)
    monkeypatch.setattr(flex, "_compiled", lambda: lambda *a, **kw: flex_attention(*a, **kw))  # a stand-in, counted
    monkeypatch.setattr(flex, "_compiled_shapes", set())
    model = LinformerModel(LinformerConfig(**SMALL, attn_implementation="flex_attention")).eval()
    # config.patch, not monkeypatch: undoing a setattr on torch's config module leaves the key hidden, and every later
    # compile in the process fails reading it
    with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=2):
        for length in (20, 20, 21):  # two shapes: within the limit
            model(torch.randint(4, 50, (2, length)))
        assert said == []
        model(torch.randint(4, 50, (2, 22)))
        model(torch.randint(4, 50, (2, 23)))
    assert len(said) == 1 and "recompile_limit" in said[0] and "attn_implementation='sdpa'" in said[0]
