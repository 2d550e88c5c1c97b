"""Exact local and global keys beside the projected ones: the blocked computation equals dense masked attention,
the defaults are the paper's Linformer bitwise, padding never leaks, and bad settings name their key."""

import math

import pytest
import torch

from linformer.errors import ConfigError
from linformer.modeling import LinformerConfig, LinformerModel
from linformer.modeling.flops import forward_flops_per_token
from linformer.modeling.local_global import column_log_counts, global_index, local_global_attention

SMALL = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_seq_len=64, projected_dim=8, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def dense_reference_mask(T: int, lengths: torch.Tensor, radius: int, positions: list[int]) -> torch.Tensor:
    """(B, T, T) which exact keys each query sees in local_global_attention: the window and the global tokens (both
    ways), written densely."""
    t = torch.arange(T)
    real = t[None, :] < lengths[:, None]
    allowed = ((t[:, None] - t[None, :]).abs() <= radius)[None] & real[:, None, :] if radius > 0 else \
        torch.zeros(1, T, T, dtype=torch.bool) & real[:, None, :]
    if positions:
        gi, gvalid = global_index(positions, lengths, T)
        is_global = ((t[None, None, :] == gi[:, :, None]) & gvalid[:, :, None]).any(1)  # (B, T)
        allowed = allowed | is_global[:, None, :] & real[:, :, None]
        allowed = torch.where(is_global[:, :, None], real[:, None, :], allowed)
    return allowed | (torch.eye(T, dtype=torch.bool)[None] & ~real[:, :, None])


def dense_overlap(T: int, lengths: torch.Tensor, radius: int, positions: list[int], spans: torch.Tensor
                  ) -> torch.Tensor:
    """(B, T, c) which projected columns a query's exact keys already hold, written token by token: every token of
    the column's span is within the query's window or a global token (overlap_columns="mask")."""
    B, c = spans.shape[:2]
    t = torch.arange(T)
    near = (t[:, None] - t[None, :]).abs() <= radius if radius else torch.zeros(T, T, dtype=torch.bool)  # no window
    held = near[None].expand(B, T, T).clone()  # [b, query, token]
    if positions:
        gi, gvalid = global_index(positions, lengths, T)
        is_global = ((t[None, None, :] == gi[:, :, None]) & gvalid[:, :, None]).any(1)  # (B, T)
        held |= is_global[:, None, :]
    out = torch.zeros(B, T, c, dtype=torch.bool)
    for b in range(B):
        for j in range(c):
            a, e = spans[b, j].tolist()
            out[b, :, j] = held[b, :, a:e].all(-1) if e > a else False
    return out


def held_keys(T: int, lengths: torch.Tensor, radius: int, positions: list[int]) -> torch.Tensor:
    """(B, T, T) [b, query, token]: whether the query's exact keys hold the token (its window, or a global token)."""
    t = torch.arange(T)
    near = (t[:, None] - t[None, :]).abs() <= radius if radius else torch.zeros(T, T, dtype=torch.bool)
    held = near[None].expand(len(lengths), T, T).clone()
    if positions:
        gi, gvalid = global_index(positions, lengths, T)
        held |= ((t[None, None, :] == gi[:, :, None]) & gvalid[:, :, None]).any(1)[:, None, :]
    return held


def dense_reduced(T: int, lengths: torch.Tensor, radius: int, positions: list[int], weights: torch.Tensor
                  ) -> torch.Tensor:
    """(B, T, c) overlap_columns="reduce" written query by query from a window-mean E's rows as the input uses them
    (`weights`, (B, T, c), zero at padding): log of the share of each column's weight on tokens the query's exact
    keys do not hold, -inf where that is none, 0 for an empty column."""
    held = held_keys(T, lengths, radius, positions).double()
    w = weights.double()
    total = w.sum(1, keepdim=True)  # (B, 1, c)
    left = total - held @ w  # (B, T, c): the weight on tokens not held
    out = torch.where(left > 1e-9 * total, (left / total.clamp(min=1e-30)).log(), float("-inf"))
    return torch.where(total > 0, out, 0.0)


def window_mean_rows(lengths: torch.Tensor, T: int, c: int, per_column: int = 8, resample: bool = True
                     ) -> torch.Tensor:
    """(B, T, c) the rows of an n x c window-mean E (n = per_column c) the inputs use: resampled to each row's
    length, or its first T rows (slice), zero at padding."""
    from linformer.modeling.attention import resampled_rows, window_mean_matrix

    E = window_mean_matrix(per_column * c, c).double()
    rows = resampled_rows(E, T, lengths) if resample else E[:T].expand(len(lengths), T, c)
    return rows * (torch.arange(T)[None, :, None] < lengths[:, None, None])


def _dense(q, k, v, lengths, radius, positions, pk, pv, log_count, spans=None, lowered=None):
    """The same attention with a dense T x T mask: exact keys where dense_reference_mask allows, the projected keys
    (logit + log count) for every query but the global ones (and, with spans, but the columns its exact keys hold;
    with lowered, (B, T, c), that added to each query's), one softmax."""
    B, _, T, d = q.shape
    allowed = dense_reference_mask(T, lengths, radius, positions)[:, None]  # (B, 1, T, T)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(~allowed, float("-inf"))
    proj = (q @ pk.transpose(-1, -2)) / math.sqrt(d) + log_count[:, :, None, :]
    t = torch.arange(T)
    is_global = torch.zeros(B, T, dtype=torch.bool)
    for p in positions:
        idx = torch.where(torch.tensor(p) >= 0, torch.tensor(p), lengths + p)
        is_global[torch.arange(B), idx.clamp(0, T - 1)] |= (idx >= 0) & (idx < lengths)
    proj = proj.masked_fill(is_global[:, None, :, None], float("-inf"))
    if spans is not None:
        proj = proj.masked_fill(dense_overlap(T, lengths, radius, positions, spans)[:, None], float("-inf"))
    if lowered is not None:
        proj = proj + lowered[:, None].to(proj.dtype)
    probs = torch.cat([scores, proj], -1).softmax(-1)
    out = probs[..., :T] @ v + probs[..., T:] @ pv
    return out, t[None, :] < lengths[:, None]


def _against_dense(radius, positions, lengths: list[int], c: int, seed: int, overlap: bool | str = False):
    """local_global_attention on a random float64 case (B = len(lengths), 2 heads, T = max(lengths), padding zeroed)
    checked against _dense at every real position (overlap: True or "mask" masks the columns the exact keys hold,
    "reduce" lowers their counts, against dense_reduced of a resampled window-mean E); returns the case's spans
    (or None)."""
    from linformer.modeling.local_global import ExactKeyLayout, column_spans

    torch.manual_seed(seed)
    B, H, T, d = len(lengths), 2, max(lengths), 8
    q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor(lengths)
    real = torch.arange(T)[None, :] < lengths[:, None]
    k, v = k * real[:, None, :, None], v * real[:, None, :, None]
    pk, pv = torch.randn(B, H, c, d, dtype=torch.float64), torch.randn(B, H, c, d, dtype=torch.float64)
    log_count = torch.rand(B, H, c, dtype=torch.float64)
    spans = column_spans(lengths, c) if overlap else None
    if overlap == "reduce":
        layout = ExactKeyLayout(lengths, T, radius, positions)
        out = local_global_attention(q, k, v, lengths, radius, positions, (pk, pv, None, log_count), layout=layout,
                                     overlap=layout.overlap(c, rule="reduce"))
        lowered = dense_reduced(T, lengths, radius, positions, window_mean_rows(lengths, T, c))
        ref, rows = _dense(q, k, v, lengths, radius, positions, pk, pv, log_count, lowered=lowered)
    else:
        out = local_global_attention(q, k, v, lengths, radius, positions, (pk, pv, None, log_count), spans=spans)
        ref, rows = _dense(q, k, v, lengths, radius, positions, pk, pv, log_count, spans)
    torch.testing.assert_close(out[rows[:, None].expand(-1, H, -1)], ref[rows[:, None].expand(-1, H, -1)])
    return spans


@pytest.mark.parametrize("chunk_elements", [1 << 21, 64])  # one chunk of blocks, or a block at a time
@pytest.mark.parametrize("radius, positions", [(4, [0, -1]), (3, []), (0, [0, -1]), (5, [0, 2, -1, -3])])
def test_blocked_attention_equals_a_dense_masked_reference(radius, positions, chunk_elements, monkeypatch):
    from linformer.modeling import local_global

    monkeypatch.setattr(local_global, "CHUNK_ELEMENTS", chunk_elements)
    _against_dense(radius, positions, [23, 17, 2], c=5, seed=0)


def test_the_defaults_are_the_paper_linformer_bitwise():
    torch.manual_seed(0)
    plain = LinformerModel(LinformerConfig(**SMALL)).eval()
    explicit = LinformerModel(LinformerConfig(**SMALL, local_window=0, global_positions=[])).eval()
    explicit.load_state_dict(plain.state_dict())
    ids = torch.randint(3, 50, (2, 40))
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, 30:] = 0
    assert torch.equal(plain(ids, attention_mask=mask).last_hidden_state,
                       explicit(ids, attention_mask=mask).last_hidden_state)


@pytest.mark.parametrize("extra", [
    {},
    {"sharing": "none"},
    {"length_policy": "resample"},
    {"sharing": "layerwise", "length_policy": "resample"},
    {"mask_empty_windows": True},
    {"length_policy": "resample", "exact_short_inputs": True},  # the converted policy: rows <= k tokens exact
    {"sharing": "layerwise", "length_policy": "resample", "landmark_pooling": True},
    {"sharing": "kv", "length_policy": "resample", "exact_short_inputs": True, "landmark_pooling": True},
    {"length_policy": "resample", "exact_short_inputs": True, "overlap_columns": "reduce"},
    {"overlap_columns": "reduce"},  # slice: columns of E's rows, the last cut at each row's length
    {"sharing": "layerwise", "length_policy": "resample", "landmark_pooling": True, "overlap_columns": "reduce"},
])
def test_a_row_in_a_padded_batch_equals_the_row_alone(extra):
    torch.manual_seed(0)
    model = LinformerModel(LinformerConfig(**SMALL, local_window=8, global_positions=[0, -1], **extra)).eval()
    ids = torch.randint(3, 50, (3, 40))
    lengths = [40, 25, 3]
    mask = torch.zeros(3, 40, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    batch = model(ids, attention_mask=mask).last_hidden_state
    assert torch.isfinite(batch).all()
    for i, n in enumerate(lengths):
        alone = model(ids[i:i + 1, :n]).last_hidden_state[0]
        torch.testing.assert_close(batch[i, :n], alone, atol=5e-6, rtol=0)


def test_a_local_window_of_w_sees_the_tokens_within_w_floor_2_of_each_query():
    """local_window w: the exact keys within w // 2 positions on either side, so an odd w = 5 attends as w = 4 does
    (2 each side and the query's own), and w = 6 sees more."""
    torch.manual_seed(0)
    fields = dict(SMALL, initializer_range=0.3)  # sharp attention: which keys a query sees shows
    models = {w: LinformerModel(LinformerConfig(**fields, local_window=w, global_positions=[0])).eval() for w in (4, 5, 6)}
    models[5].load_state_dict(models[4].state_dict())
    models[6].load_state_dict(models[4].state_dict())
    ids = torch.randint(4, 50, (2, 64))
    out = {w: model(ids).last_hidden_state for w, model in models.items()}
    torch.testing.assert_close(out[5], out[4])
    assert not torch.allclose(out[6], out[4], atol=1e-4)


@pytest.mark.parametrize("weight", [0.25, 1.0, 3.0, -0.5])
def test_a_columns_count_is_how_many_tokens_it_weighs_equally_whatever_their_weight(weight):
    """A column of E weighing m tokens equally stands for m tokens, at any scale or sign of that weight (a trained E's
    columns do not sum to 1, as the mean-initialised one's do); two tokens weighed 3:1 count as 1.6; an empty
    column as 1."""
    rows = torch.zeros(8, 4, dtype=torch.float64)
    rows[:4, 0], rows[4:6, 1], rows[6, 2] = weight, weight, weight
    rows[6:, 3] = torch.tensor([3.0, 1.0], dtype=torch.float64) * weight
    expected = torch.tensor([4.0, 2.0, 1.0, 16 / 10], dtype=torch.float64).log()
    torch.testing.assert_close(column_log_counts(rows), expected)
    assert column_log_counts(torch.zeros(8, 1))[0] == 0.0


@pytest.mark.parametrize("extra", [{}, {"length_policy": "resample"}])
def test_a_float64_model_computes_its_column_counts_in_float64(extra):
    """The projected columns' log counts were computed in float32 whatever the model's dtype: a float64 model's row
    alone and in a padded batch differed at float32's rounding, not float64's (E and F random rather than window
    means, whose counts float32 holds exactly)."""
    assert column_log_counts(torch.full((3, 2), 0.5, dtype=torch.float64)).dtype == torch.float64
    assert column_log_counts(torch.full((3, 2), 0.5, dtype=torch.bfloat16)).dtype == torch.float32
    torch.manual_seed(0)
    fields = dict(SMALL, max_seq_len=128, projected_dim=16, initializer_range=0.3)
    model = LinformerModel(LinformerConfig(**fields, local_window=8, global_positions=[0, -1], **extra)).double().eval()
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.E.weight.normal_(0, 0.5)
            layer.attention.self.F.weight.normal_(0, 0.5)
    ids = torch.randint(3, 50, (2, 128))
    mask = torch.ones(2, 128, dtype=torch.long)
    for length in (7, 37, 100):
        mask[1] = torch.arange(128) < length
        batch = model(ids, attention_mask=mask).last_hidden_state
        alone = model(ids[1:, :length]).last_hidden_state[0]
        torch.testing.assert_close(batch[1, :length], alone, atol=1e-11, rtol=0)


@pytest.mark.parametrize("extra", [
    {},
    {"length_policy": "resample", "exact_short_inputs": True, "overlap_columns": "mask"},  # the converted default
    {"sharing": "layerwise", "length_policy": "resample", "landmark_pooling": True},
])
def test_a_bf16_model_stays_in_bf16_and_within_its_rounding_of_fp32(extra):
    """Loaded in bf16 (``from_pretrained(..., dtype=torch.bfloat16)``, CPU inference where the CPU computes bf16):
    every tensor of the local/global path follows the weights' dtype (a float32 constant would upcast the output, or
    fail a matmul) and a padded batch's pooled output stays within bf16's rounding of the fp32 model's."""
    torch.manual_seed(0)
    model = LinformerModel(LinformerConfig(**SMALL, local_window=8, global_positions=[0, -1], **extra)).eval()
    half = LinformerModel(model.config).eval()
    half.load_state_dict(model.state_dict())
    half = half.to(torch.bfloat16)
    ids = torch.randint(3, 50, (2, 40))
    mask = torch.ones(2, 40, dtype=torch.long)
    mask[1, 25:] = 0
    with torch.no_grad():
        want = model(ids, attention_mask=mask).last_hidden_state
        got = half(ids, attention_mask=mask).last_hidden_state
    assert got.dtype == torch.bfloat16
    m = mask.unsqueeze(-1)
    pooled = lambda h: (h.float() * m).sum(1) / m.sum(1)
    error = (pooled(got) - pooled(want)).norm(dim=-1) / pooled(want).norm(dim=-1)
    assert (error < 0.02).all(), error


def test_local_and_global_keys_change_the_output_and_train():
    torch.manual_seed(0)
    base = LinformerModel(LinformerConfig(**SMALL)).eval()
    local = LinformerModel(LinformerConfig(**SMALL, local_window=8, global_positions=[0, -1]))
    local.load_state_dict(base.state_dict())
    ids = torch.randint(3, 50, (2, 40))
    out = local(ids).last_hidden_state
    assert not torch.allclose(out, base(ids).last_hidden_state)
    out.square().mean().backward()
    assert all(p.grad is not None for n, p in local.named_parameters() if "pooler" not in n)


def test_flops_count_the_window_and_the_global_keys():
    plain = LinformerConfig(**SMALL)
    local = LinformerConfig(**SMALL, local_window=16, global_positions=[0, -1])
    extra = forward_flops_per_token(local, 64) - forward_flops_per_token(plain, 64)
    assert extra > 0
    # per layer and token: the band (3 x 8 keys) and 2 global keys, scores and values, and the 2 global queries
    # over 64 keys; K and V on every row instead of projecting the hidden states first
    assert forward_flops_per_token(local, 64) < forward_flops_per_token(LinformerConfig(**{**SMALL, "attention":
                                                                                          "full"}), 64) * 1.5


@pytest.mark.parametrize("fields, key", [
    ({"local_window": -1}, "local_window=-1"),
    ({"local_window": 65}, "local_window=65"),
    ({"local_window": 1}, "local_window=1 gives no window"),  # radius w // 2 = 0: it was accepted and did nothing
    ({"global_positions": [0, 64]}, "global_positions=[0, 64]"),
    ({"global_positions": [-65]}, "global_positions=[-65]"),
    ({"local_window": 8, "projection": "conv"}, "projection='conv'"),
    ({"global_positions": [0], "attention": "full"}, "attention='full'"),
])
def test_bad_settings_name_their_key(fields, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        LinformerConfig(**{**SMALL, **fields})


def _landmark_reference(q, k, v, rows, lengths):
    """landmark_pooling written as loops: column j of a row of L tokens pools the tokens t with t c < (j + 1) L and
    (t + 1) c > j L, weighted by softmax over them of (sum_t rows_tj q_t) . k_t / sqrt(d)."""
    B, H, T, d = q.shape
    c = rows.shape[-1]
    rows = rows.expand(B, H, T, c)
    pk, pv, log_count = torch.zeros(B, H, c, d, dtype=q.dtype), torch.zeros(B, H, c, d, dtype=q.dtype), \
        torch.zeros(B, H, c, dtype=q.dtype)
    for b in range(B):
        L = max(int(lengths[b]), 1)
        for j in range(c):
            window = [t for t in range(L) if t * c < (j + 1) * L and (t + 1) * c > j * L]
            for h in range(H):
                landmark = rows[b, h, :, j] @ q[b, h]
                p = (k[b, h, window] @ landmark / math.sqrt(d)).softmax(0)
                pk[b, h, j], pv[b, h, j] = p @ k[b, h, window], p @ v[b, h, window]
                log_count[b, h, j] = math.log(max(1.0, float(1 / p.square().sum())))
    return pk, pv, log_count


@pytest.mark.parametrize("c, lengths", [(5, [23, 17, 2]), (4, [23, 8, 0]), (8, [23, 23, 23])])
def test_landmark_pooling_equals_its_definition(c, lengths):
    from linformer.modeling.local_global import landmark_pooling

    torch.manual_seed(0)
    B, H, T, d = 3, 2, 23, 8
    q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor(lengths)
    real = torch.arange(T)[None, :] < lengths[:, None]
    k, v = k * real[:, None, :, None], v * real[:, None, :, None]
    rows = torch.rand(B, 1, T, c, dtype=torch.float64) * real[:, None, :, None]  # shared by the heads
    got = landmark_pooling(q, k, v, rows, lengths)
    for g, want in zip(got, _landmark_reference(q, k, v, rows, lengths)):
        torch.testing.assert_close(g, want)


def test_landmark_pooling_of_equal_scores_is_the_window_mean_projection():
    """Queries of zero give every token of a window the same weight: the pooled keys are then E's own window means
    (the resampled mean-initialised E, L a multiple of k) with the same log counts."""
    from linformer.modeling.local_global import landmark_pooling

    torch.manual_seed(0)
    model = LinformerModel(LinformerConfig(**SMALL, length_policy="resample", sharing="layerwise", local_window=8))
    E = model.encoder.E
    T = 48  # 6 tokens per window of the 8 columns
    rows = E.rows(T, None)[None, None]  # (1, 1, T, c)
    k, v = torch.randn(2, 1, 2, T, 4).unbind(0)
    pk, pv, log_count = landmark_pooling(torch.zeros(1, 2, T, 4), k, v, rows, torch.tensor([T]))
    torch.testing.assert_close(pk, rows.transpose(-1, -2) @ k)
    torch.testing.assert_close(pv, rows.transpose(-1, -2) @ v)
    torch.testing.assert_close(log_count, column_log_counts(rows).expand_as(log_count))


def test_landmark_pooling_changes_the_output_and_trains_E():
    torch.manual_seed(0)
    fields = dict(SMALL, sharing="layerwise", length_policy="resample", local_window=8, global_positions=[0, -1])
    model = LinformerModel(LinformerConfig(**fields, landmark_pooling=True))
    fixed = LinformerModel(LinformerConfig(**fields)).eval()
    fixed.load_state_dict(model.state_dict())
    ids = torch.randint(3, 50, (2, 40))
    out = model(ids).last_hidden_state
    assert not torch.allclose(out, fixed(ids).last_hidden_state)
    out.square().mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters() if "pooler" not in n}
    assert all(g is not None for g in grads.values())
    assert grads["encoder.E.weight"].abs().sum() > 0  # E weighs the landmark queries


def test_flops_count_landmark_pooling():
    plain = LinformerConfig(**SMALL, length_policy="resample", local_window=16, sharing="layerwise")
    landmark = LinformerConfig(**SMALL, length_policy="resample", local_window=16, sharing="layerwise",
                               landmark_pooling=True)
    D, n, k, layers = SMALL["hidden_size"], 64, SMALL["projected_dim"], SMALL["num_hidden_layers"]
    # E^T Q instead of E^T K and F^T V (2 n k D less), then scores and two weighted sums over the n + k window tokens
    want = layers * (-2 * n * k * D + 3 * 2 * (n + k) * D) / n
    assert forward_flops_per_token(landmark, n) - forward_flops_per_token(plain, n) == pytest.approx(want)


@pytest.mark.parametrize("fields, key", [
    ({"landmark_pooling": True, "length_policy": "resample", "sharing": "layerwise"}, "local_window or global"),
    ({"landmark_pooling": True, "local_window": 8, "sharing": "layerwise"}, "length_policy='resample'"),
    ({"landmark_pooling": True, "local_window": 8, "length_policy": "resample"}, "sharing='kv' or 'layerwise'"),
    ({"landmark_pooling": "yes"}, "landmark_pooling='yes'"),
])
def test_bad_landmark_settings_name_their_key(fields, key):
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")) as err:
        LinformerConfig(**{**SMALL, **fields})
    assert "landmark_pooling" in str(err.value)


def _local_global_inputs(T: int, H: int = 12, d: int = 8, c: int = 128):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, T, d, generator=g) for _ in range(3))
    projected = (torch.randn(1, H, c, d, generator=g), torch.randn(1, H, c, d, generator=g), None,
                 torch.rand(1, 1, c, generator=g))
    return q, k, v, torch.tensor([T]), projected


def _ops(T: int, rule: str | None = None) -> int:
    from torch.profiler import ProfilerActivity, profile

    from linformer.modeling.local_global import ExactKeyLayout

    q, k, v, lengths, projected = _local_global_inputs(T)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        layout = ExactKeyLayout(lengths, T, 64, [0, -1])
        overlap = layout.overlap(projected[0].shape[-2], rule=rule) if rule else None
        local_global_attention(q, k, v, lengths, 64, [0, -1], projected, layout=layout, overlap=overlap)
    return sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))


@pytest.mark.parametrize("rule", [None, "mask", "reduce"])
def test_the_operations_per_forward_are_bounded_per_chunk_and_in_all(rule):
    """MiniLM's 12 heads, w = 128, k = 128 (counted with the profiler, not timed): what a longer input adds is its
    chunks, each a handful of products and one softmax (about 80 operations, views included), and the rest of a
    layer's forward is a few hundred, the projected columns' overlap bias (built once per forward) included. Masks
    and biases rebuilt per chunk, or per block, would break the bound."""
    import linformer.modeling.local_global as lg

    short, long = _ops(2048, rule), _ops(4096, rule)
    per_block = 12 * 64 * (3 * 64 + 2 + 128)  # scores of one block of 64 queries: band, global and projected keys
    chunks = lambda T: -(-(T // 64) // max(1, lg.CHUNK_ELEMENTS // per_block))
    per_chunk = (long - short) / (chunks(4096) - chunks(2048))
    assert per_chunk <= 100, (per_chunk, short, long)
    assert short - per_chunk * chunks(2048) <= 500, short


def test_the_chunk_size_changes_no_output(monkeypatch):
    import linformer.modeling.local_global as lg

    q, k, v, lengths, projected = _local_global_inputs(2048, H=4)
    lengths = torch.tensor([1900])  # padding at the end
    big = local_global_attention(q, k, v, lengths, 64, [0, -1], projected)
    monkeypatch.setattr(lg, "CHUNK_ELEMENTS", 1 << 14)  # a block or two per chunk
    small = local_global_attention(q, k, v, lengths, 64, [0, -1], projected)
    torch.testing.assert_close(big[:, :, :1900], small[:, :, :1900], atol=1e-6, rtol=1e-6)


def test_no_token_counts_twice_column_by_column():
    """overlap_columns="mask" on a small case, checked column by column against its definition: T = 16 tokens in
    c = 4 columns of 4, window radius 2, globals [0, -1]."""
    from linformer.modeling.local_global import ExactKeyLayout, column_spans, overlap_bias

    lengths = torch.tensor([16])
    spans = column_spans(lengths, 4)
    assert spans[0].tolist() == [[0, 4], [4, 8], [8, 12], [12, 16]]
    is_global = ExactKeyLayout(lengths, 16, 2, [0, -1]).is_global
    masked = overlap_bias(spans, is_global, b=4, nb=4, radius=2)[0, 0].reshape(16, 4) < 0  # (query, column)
    # query 5 sees 3..7 exactly: column 1 (4..7) is all there; column 0 (0..3) lacks 1 and 2
    assert masked[5].tolist() == [False, True, False, False]
    # query 2 sees 0..4: column 0 all there; query 13 sees 11..15 (15 is also global): column 3 all there
    assert masked[2].tolist() == [True, False, False, False] and masked[13].tolist() == [False, False, False, True]
    # query 1 sees 0..3: column 0; 12..15 are not near it, and only 15 of them is global
    assert masked[1].tolist() == [True, False, False, False]
    assert torch.equal(masked, dense_overlap(16, lengths, 2, [0, -1], spans)[0])
    # the slice of an n x c E: column j stands for rows j n / c .. (j + 1) n / c, cut to the row's length
    assert column_spans(torch.tensor([10]), 4, n=32)[0].tolist() == [[0, 8], [8, 10], [10, 10], [10, 10]]
    # an n = 16, k = 8 window-mean E of which 8 tokens use the first 4 columns: column j is E's rows 2j, 2j + 1
    assert column_spans(torch.tensor([8]), 4, n=16, k=8)[0].tolist() == [[0, 2], [2, 4], [4, 6], [6, 8]]


@pytest.mark.parametrize("radius, positions", [(4, [0, -1]), (3, []), (2, [0, 2, -1]), (0, [0, -1])])
def test_masked_overlap_equals_the_dense_reference(radius, positions):
    spans = _against_dense(radius, positions, [23, 17, 5], c=6, seed=1, overlap=True)
    assert dense_overlap(23, torch.tensor([23, 17, 5]), radius, positions, spans).any()  # the case masks a column


def test_reduced_counts_column_by_column():
    """overlap_columns="reduce" on a small case, checked column by column: T = 16 tokens in c = 4 columns of 4
    (the slice of a 16 x 4 window-mean E), window radius 2, globals [0, -1]; each column's count m becomes m - h for
    the h of its tokens the query's exact keys hold, a column left with none is masked as "mask" masks it."""
    from linformer.modeling.local_global import ExactKeyLayout

    lengths = torch.tensor([16])
    layout = ExactKeyLayout(lengths, 16, 2, [0, -1])
    lowered = layout.overlap(4, 16, 4, rule="reduce")[0, 0].reshape(16, 4)  # (query, column)
    count = lambda held: math.log((4 - held) / 4) if held < 4 else torch.finfo(torch.float32).min
    # query 5 sees 3..7 and 0, 15: column 0 (0..3) holds 0 and 3, column 1 all, column 2 none, column 3 only 15
    torch.testing.assert_close(lowered[5], torch.tensor([count(2), count(4), count(0), count(1)]))
    # query 9 sees 7..11 and 0, 15: 0 of column 0, 7 of column 1, all of column 2, 15 of column 3
    torch.testing.assert_close(lowered[9], torch.tensor([count(1), count(1), count(4), count(1)]))
    masked = layout.overlap(4, 16, 4, rule="mask")[0, 0].reshape(16, 4) < 0
    assert torch.equal(lowered == torch.finfo(torch.float32).min, masked)  # masked where "mask" masks, nowhere else


@pytest.mark.parametrize("resample", [True, False])
@pytest.mark.parametrize("radius, positions", [(4, [0, -1]), (3, []), (2, [0, 2, -1]), (0, [0, -1]), (9, [-1])])
def test_reduced_counts_equal_the_share_of_a_window_mean_e_query_by_query(radius, positions, resample):
    """The closed form (each column's stretch of tokens against each query's window and global tokens) equals the
    share of the window-mean E's weight, as the input uses E, on the tokens the query's exact keys do not hold,
    written query by query: resampled to each row's length (columns of fractional tokens: 23 or 17 tokens in 6
    columns) or sliced (columns of 8 rows of a 48 x 6 E, the last ones cut by a row's end)."""
    from linformer.modeling.local_global import ExactKeyLayout

    lengths, T, c = torch.tensor([23, 17, 5]), 23, 6
    layout = ExactKeyLayout(lengths, T, radius, positions)
    got = layout.overlap(c, *((None, None) if resample else (8 * c, c)), rule="reduce").view(3, -1, c)[:, :T]
    want = dense_reduced(T, lengths, radius, positions, window_mean_rows(lengths, T, c, resample=resample))
    real = torch.arange(T)[None, :] < lengths[:, None]
    want = want.float().clamp(min=torch.finfo(torch.float32).min)
    torch.testing.assert_close(got[real], want[real], atol=1e-6, rtol=1e-6)
    assert (want[real] > torch.finfo(torch.float32).min).any() and (want[real] < 0).any()


@pytest.mark.parametrize("resample", [True, False])
def test_a_float64_models_reduced_counts_are_float64s(resample):
    """overlap_columns="reduce" built its bias in float32 whatever the model's dtype: a float64 model's lowered
    counts (log(1 - h / m), h / m a share such as 1/6 or 3/23) were float32's rounding of them. A float64 layer's
    forward now builds them in float64, to float64's precision; a bf16 one's in float32 (its scores' dtype), and
    the layout alone in float32 as before."""
    from linformer.modeling.attention import LinformerSelfAttention
    from linformer.modeling.local_global import ExactKeyLayout

    lengths, T, c = torch.tensor([23, 17, 5]), 23, 6
    real = torch.arange(T)[None, :] < lengths[:, None]
    want = dense_reduced(T, lengths, 4, [0, -1], window_mean_rows(lengths, T, c, resample=resample))
    want = want.clamp(min=torch.finfo(torch.float32).min)
    config = LinformerConfig(**dict(SMALL, max_seq_len=8 * c, projected_dim=c), local_window=8,
                             global_positions=[0, -1], overlap_columns="reduce",
                             length_policy="resample" if resample else "slice")
    for dtype in (torch.float64, torch.bfloat16):
        layer = LinformerSelfAttention(config, 0).to(dtype).eval()
        shared = {}
        with torch.no_grad():
            layer(torch.randn(3, T, 32, dtype=dtype), real, per_forward=shared)
        [layout] = [v for v in shared.values() if isinstance(v, ExactKeyLayout)]
        [bias] = [v for key, v in layout.memo.items() if key[0] == "overlap"]
        got = bias.view(3, -1, c)[:, :T]
        tol = 1e-13 if dtype == torch.float64 else 1e-6
        torch.testing.assert_close(got[real].double(), want[real], atol=tol, rtol=tol)
        assert bias.dtype == torch.promote_types(dtype, torch.float32)
    shape = (None, None) if resample else (8 * c, c)
    assert ExactKeyLayout(lengths, T, 4, [0, -1]).overlap(c, *shape, rule="reduce").dtype == torch.float32


@pytest.mark.parametrize("radius, positions", [(4, [0, -1]), (3, []), (2, [0, 2, -1]), (0, [0, -1])])
def test_reduced_counts_equal_the_dense_reference(radius, positions):
    _against_dense(radius, positions, [23, 17, 5], c=6, seed=1, overlap="reduce")


def test_exact_keys_turned_off_on_a_saved_converted_model_give_the_paper_s_linformer(tmp_path):
    """A converted model saves overlap_columns='mask'; local_window=0, global_positions=[] alone (the documented
    recipe) load it as the paper's Linformer, the mask having nothing left to mask; full attention names every field
    it needs in one refusal; an unknown choice is refused."""
    from linformer import LinformerModel

    converted = LinformerModel(LinformerConfig(**SMALL, local_window=8, global_positions=[0, -1],
                                               overlap_columns="mask"))
    converted.save_pretrained(tmp_path)
    paper = LinformerModel.from_pretrained(tmp_path, local_window=0, global_positions=[]).eval()
    plain = LinformerModel(LinformerConfig(**SMALL)).eval()
    plain.load_state_dict(paper.state_dict())
    ids = torch.randint(3, SMALL["vocab_size"], (2, 20))
    mask = torch.ones_like(ids)
    mask[1, 13:] = 0
    assert torch.equal(paper(ids, attention_mask=mask).last_hidden_state, plain(ids, attention_mask=mask).last_hidden_state)
    with pytest.raises(ConfigError, match=r"pass local_window=0 and global_positions=\[\] too \(the model has "
                                          r"local_window=8, global_positions=\[0, -1\]\)"):
        LinformerModel.from_pretrained(tmp_path, attention="full")
    with pytest.raises(ConfigError, match="overlap_columns='drop' is not one of keep, mask"):
        LinformerConfig(**SMALL, local_window=8, overlap_columns="drop")


def test_the_masks_are_built_once_per_forward_and_shared_by_every_layer(monkeypatch):
    """What depends only on the input's lengths (the band's and global keys' masks, the overlap mask) is built by the
    first layer and reused by the others: once per forward, not once per layer."""
    from linformer.modeling import LinformerModel
    from linformer.modeling import local_global as lg

    built, overlaps = [], []
    init, overlap_bias = lg.ExactKeyLayout.__init__, lg.overlap_bias
    monkeypatch.setattr(lg.ExactKeyLayout, "__init__", lambda self, *a: (built.append(1), init(self, *a))[1])
    monkeypatch.setattr(lg, "overlap_bias", lambda *a: (overlaps.append(1), overlap_bias(*a))[1])
    config = LinformerConfig(**{**SMALL, "num_hidden_layers": 3}, local_window=8, global_positions=[0, -1],
                             overlap_columns="mask", length_policy="resample")
    model = LinformerModel(config).eval()
    ids = torch.randint(5, config.vocab_size, (2, config.max_seq_len))
    mask = torch.ones_like(ids)
    mask[1, 20:] = 0
    with torch.no_grad():
        model(ids, attention_mask=mask)
    assert (len(built), len(overlaps)) == (1, 1)
    with torch.no_grad():
        model(ids, attention_mask=mask)  # a new forward builds its own: another batch has other lengths
    assert (len(built), len(overlaps)) == (2, 2)


def test_the_global_queries_rows_are_copied_a_row_at_a_time_not_gathered_by_element():
    """The global tokens' G rows of exact attention reach the output through a (B, H, T) row index: a gather by a
    (B, H, T, d) index follows an index per element where a copy moves whole rows (the longer the input, the more
    it costs: all T rows pass to change G of them)."""
    from torch.profiler import ProfilerActivity, profile

    T, H, d = 256, 2, 8
    q, k, v, lengths, projected = _local_global_inputs(T, H=H, d=d, c=16)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        local_global_attention(q, k, v, lengths, 8, [0, -1], projected)
    gathers = [e.input_shapes for e in prof.events() if e.name == "aten::gather"]
    assert gathers and all(shapes[2][2] <= 2 for shapes in gathers), gathers  # only the G global keys and queries


@pytest.mark.parametrize("lengths", [[23, 17, 1, 2], [12]])
def test_the_global_queries_gradients_equal_the_dense_reference(lengths):
    """Backward through the rows the global queries write (a 1-token row names its only token twice: the repeat
    writes nothing, nor takes a gradient) equals the dense masked attention's, for q, k, v and the projected keys."""
    torch.manual_seed(0)
    B, H, T, d, c, radius, positions = len(lengths), 2, max(lengths), 8, 5, 3, [0, -1]
    lengths = torch.tensor(lengths)
    real = torch.arange(T)[None, :] < lengths[:, None]
    inputs = [torch.randn(B, H, T, d, dtype=torch.float64) * (real[:, None, :, None] if i else 1) for i in range(3)]
    inputs += [torch.randn(B, H, c, d, dtype=torch.float64) for _ in range(2)]
    log_count = torch.rand(B, H, c, dtype=torch.float64)
    weight = torch.randn(B, H, T, d, dtype=torch.float64) * real[:, None, :, None]  # real rows only

    def grads(attend):
        leaves = [x.clone().requires_grad_() for x in inputs]
        (attend(*leaves) * weight).sum().backward()
        return [x.grad for x in leaves]

    blocked = grads(lambda q, k, v, pk, pv: local_global_attention(q, k, v, lengths, radius, positions,
                                                                   (pk, pv, None, log_count)))
    dense = grads(lambda q, k, v, pk, pv: _dense(q, k, v, lengths, radius, positions, pk, pv, log_count)[0])
    for a, b in zip(blocked, dense):
        torch.testing.assert_close(a, b)


def _tiny_global_layer(impl: str, dropout: float = 0.0):
    from linformer.modeling.attention import LinformerSelfAttention

    torch.manual_seed(0)
    config = LinformerConfig(**dict(SMALL, hidden_size=4, max_seq_len=6, projected_dim=3,
                                    attention_probs_dropout_prob=dropout),
                             local_window=3, global_positions=[0, -1], projection_init="xavier")
    config._attn_implementation = impl
    return LinformerSelfAttention(config, 0).double()


def test_eager_attention_with_global_tokens_has_a_double_backward():
    """attn_implementation="eager" is the explicit matmul-softmax-matmul everywhere, the global tokens' rows (which
    attend to every position) included: those went through F.scaled_dot_product_attention whatever it said, whose CPU
    kernel has no double backward, so a gradient penalty or meta-learning step failed with global tokens under eager
    too. The eager layer gives sdpa's outputs."""
    from torch.autograd import gradgradcheck

    layer = _tiny_global_layer("eager").eval()
    hidden = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    assert gradgradcheck(lambda h: layer(h, mask)[0], (hidden,))
    with torch.no_grad():
        eager = layer(hidden, mask)[0]
        layer.config._attn_implementation = "sdpa"
        torch.testing.assert_close(layer(hidden, mask)[0][mask.bool()], eager[mask.bool()], atol=1e-13, rtol=0)


def test_eager_global_rows_drop_out_their_probabilities(monkeypatch):
    """Under eager, attention dropout on the global tokens' rows falls where HF's eager attention puts it: on the
    softmax's probabilities over the row's real tokens, before they weigh the values."""
    import torch.nn.functional as F

    seen = []
    dropout = F.dropout

    def recorded(x, *args, **kwargs):
        seen.append(x.detach().clone())
        return dropout(x, *args, **kwargs)

    layer = _tiny_global_layer("eager", dropout=0.5).train()
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    monkeypatch.setattr(F, "dropout", recorded)
    layer(torch.randn(2, 6, 4, dtype=torch.float64), mask)
    rows = [x for x in seen if x.shape == (2, 2, 2, 6)]  # (B, H, G, T): the global tokens' rows over every key
    assert len(rows) == 1, [x.shape for x in seen]
    torch.testing.assert_close(rows[0].sum(-1), torch.ones(2, 2, 2, dtype=torch.float64))
    assert (rows[0][1, :, :, 4:] == 0).all()  # the padded keys take nothing


def test_a_trace_at_one_length_run_at_another_says_so_in_the_graph():
    """torch.jit.trace keeps the block layout of the traced length as constants: run at another length, the graph
    gave outputs 1e-2 from eager's without a word (a longer input) or a strided view's storage error (a shorter one).
    It now stops with the traced length in its message; at the traced length it gives eager's outputs."""
    torch.manual_seed(0)
    model = LinformerModel(LinformerConfig(**SMALL, local_window=4, global_positions=[0, -1])).eval()

    def batch(T):
        mask = torch.ones(2, T, dtype=torch.long)
        mask[1, T // 2:] = 0
        return torch.randint(4, 50, (2, T)), mask

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, mask):
            return self.model(input_ids=ids, attention_mask=mask).last_hidden_state

    with torch.no_grad():
        traced = torch.jit.trace(Hidden().eval(), batch(24), check_trace=False)
        ids, mask = batch(24)
        torch.testing.assert_close(traced(ids, mask), Hidden()(ids, mask))
        for T in (25, 20):
            with pytest.raises(RuntimeError, match="traced at length 24 and runs at that length only"):
                traced(*batch(T))
