"""Exact local and global keys beside the projected ones, in one softmax (``local_window``, ``global_positions``).

Every query attends, in one softmax, to
- the exact keys of a local window: the positions s with |s - t| <= r, r = local_window // 2;
- the exact keys of the global tokens (``global_positions``: the first token and each row's last real token by
  default), unless the window already holds them;
- the k projected keys of the Linformer (E^T K, F^T V), each logit raised by the log of the number of tokens its
  column stands for (the effective count (sum_t E_tj)^2 / sum_t E_tj^2: n/k for a window mean), so that a column
  weighs like the tokens it summarises rather than like one token.
The global tokens' own queries attend to every position exactly (Longformer's global attention).

With ``landmark_pooling`` the projected keys depend on the input (Transformer-LS's dynamic projection; Nystromformer's
segment-mean landmarks): column j pools the exact keys and values of its window of a row's L real tokens (the tokens
t with t k < (j + 1) L and (t + 1) k > j L: about L / k of them, the ones a window-mean E averages) with attention
weights from a landmark query, E's column applied to the queries (sum_t E_tj q_t: the window's mean query while E is a
window mean). Its logit's log count is then the effective number of tokens those weights spread over.

The local part is blocked: the sequence is cut into blocks of r queries, each scored against the 3r positions around
it (a strided view of the keys, masked to the window), and against the global and projected keys in one product for
all blocks; one softmax normalises the two sets of scores. Time and memory are O(T (r + g + k)), never T x T, and no
key is copied per block.

Shapes: B batch, H heads, T tokens, d head width, c projected columns, G global positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .threads import share, static_length_only, traced_length_only
from .values import ceil_div

# Attention scores materialised at once (256K: 1 MiB in fp32). Larger chunks launch fewer operations but leave the
# caches, and take longer at MiniLM's shape on the CPU (docs/results/local_global_cpu.md measures chunk sizes by
# threads and load; tools/local_global_chunks.py)
CHUNK_ELEMENTS = 1 << 18


def global_index(positions: list[int], lengths: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, G) token index of each global position in each row (a negative position counts from the row's last real
    token: -1 is it), and (B, G) whether it is a real token not named twice (a 1-token row's first and last are one)."""
    pos = torch.tensor(positions, device=lengths.device, dtype=torch.long)
    idx = torch.where(pos >= 0, pos, lengths[:, None] + pos)  # (B, G)
    valid = (idx >= 0) & (idx < lengths[:, None])
    G = len(positions)
    earlier = torch.triu(torch.ones(G, G, dtype=torch.bool, device=idx.device), 1)  # [a, b]: a < b
    repeated = ((idx[:, :, None] == idx[:, None, :]) & valid[:, :, None] & earlier).any(1)  # b repeats an earlier a
    return idx.clamp(0, T - 1), valid & ~repeated  # an invalid slot points at any position: it is never used


def column_log_counts(rows: torch.Tensor) -> torch.Tensor:
    """log of the effective number of tokens each projected column stands for, from the rows of E the input used
    (..., T, c) -> (..., c): (sum_t E_tj)^2 / sum_t E_tj^2 (exactly m for a mean over m tokens), at least 1. In float32
    at least, as the scores it biases (a float64 model's in float64)."""
    rows = rows.to(torch.promote_types(rows.dtype, torch.float32))
    count = rows.sum(-2).square() / rows.square().sum(-2).clamp(min=1e-12)
    return count.clamp(min=1.0).log()


def landmark_pooling(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: torch.Tensor, lengths: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Projected keys and values pooled by attention within each column's window (module docstring) -> keys and
    values (B, H, c, d) and log counts (B, H, c).

    q, k, v: (B, H, T, d), k and v zero at padded positions; rows: the resampled E the inputs use, (B or 1, H or 1,
    T, c), zero at padded positions; lengths: (B,) real tokens per row. A window holds at most ceil(T / c) + 1
    tokens, so the windows are gathered as (c, W) blocks: time and memory O(T d), not T x c. A row's windows depend
    on its own length only, so a row gives the same keys alone and inside a padded batch.
    """
    B, H, T, d = q.shape
    c = rows.shape[-1]
    # (B, c): window j is tokens start..end-1 (an all-padding row: windows over its zero first token)
    start, end = column_spans(lengths, c).unbind(-1)
    W = min(T, ceil_div(T, c) + 1)  # the widest window of any row length <= T
    idx = start[:, :, None] + torch.arange(W, device=q.device)  # (B, c, W)
    inside = idx < end[:, :, None]
    gather = idx.clamp(max=T - 1).view(B, 1, c * W, 1).expand(B, H, c * W, d)
    kw, vw = (x.gather(2, gather).view(B, H, c, W, d) for x in (k, v))
    landmarks = rows.transpose(-1, -2).to(q.dtype) @ q  # (B, H, c, d)
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = (kw @ landmarks.unsqueeze(-1)).squeeze(-1).to(acc) * d ** -0.5  # (B, H, c, W)
    p = scores.masked_fill(~inside[:, None], _NEG).softmax(-1)
    log_count = (1.0 / p.square().sum(-1)).clamp(min=1.0).log()  # effective tokens: exactly m for m equal weights
    p = p.to(q.dtype).unsqueeze(-2)  # (B, H, c, 1, W)
    return (p @ kw).squeeze(-2), (p @ vw).squeeze(-2), log_count


def column_spans(lengths: torch.Tensor, c: int, n: int | None = None, k: int | None = None) -> torch.Tensor:
    """(B, c, 2) first and one-past-last token each projected column stands for: its window of a row's L real tokens,
    (j L / c, (j + 1) L / c) rounded outwards (E resampled to L, or pooled by landmarks: n None), or E's rows
    j n / k to (j + 1) n / k cut to L (the slice of an n x k window-mean E, of which an input uses the first c
    columns: c < k under mask_empty_windows; k None: c)."""
    L = lengths.clamp(min=1)[:, None]
    j = torch.arange(c, device=lengths.device)[None, :]
    scale, k = (L, c) if n is None else (torch.full_like(L, n), k or c)
    # both rounded on non-negative numbers: the TorchScript ONNX exporter's integer division truncates
    start, end = (j * scale) // k, ((j + 1) * scale + k - 1) // k
    return torch.stack([start.clamp(max=L), end.clamp(max=L)], -1)


def overlap_bias(spans: torch.Tensor, is_global: torch.Tensor, b: int, nb: int, radius: int) -> torch.Tensor:
    """(B, 1, nb, b, c) additive mask of the projected columns a query's exact keys already hold (overlap_columns=
    "mask"): every token of the column's span lies within the query's window, or the one or two outside it are global
    tokens (`is_global`, (B, T): ``ExactKeyLayout.is_global``). An empty span (past a short row's end) is never masked
    here: the column mask takes care of it. Radius 0 is no window at all (the band then shows a query no key, not
    even itself)."""
    B, T = is_global.shape
    t = torch.arange(nb * b, device=spans.device).view(1, nb, b, 1)
    a, e = spans[..., 0].view(B, 1, 1, -1), spans[..., 1].view(B, 1, 1, -1)
    lo, hi = (t - radius, t + radius + 1) if radius else (t, t)  # the window [lo, hi), empty without one
    left = (torch.minimum(e, lo) - a).clamp(min=0)    # tokens of the span before the window: a, a + 1, ...
    right = (e - torch.maximum(a, hi)).clamp(min=0)   # ... and after it: ..., e - 1

    def global_at(pos: torch.Tensor) -> torch.Tensor:  # (B, 1, 1, c): whether each column's token there is global
        inside = (pos >= 0) & (pos < T)  # an empty span's ends may lie past the row
        return is_global.gather(1, pos.view(B, -1).clamp(0, T - 1)).view(pos.shape) & inside

    covered = ((left == 0) | ((left == 1) & global_at(a))) & ((right == 0) | ((right == 1) & global_at(e - 1)))
    return torch.where(covered & (e > a), _NEG, 0.0)[:, None]


def column_extents(lengths: torch.Tensor, c: int, n: int | None = None, k: int | None = None
                   ) -> tuple[torch.Tensor, int]:
    """(B, c, 2) the stretch of a row's tokens over which each projected column spreads its weight, in units of
    1/`unit` of a token (token t is [t unit, (t + 1) unit)), and `unit`: E resampled to a row's L tokens spreads
    window-mean column j evenly over (j L / c, (j + 1) L / c), its end tokens holding part of a token each (n None:
    unit c, as for landmark pooling's windows); the slice of an n x k window-mean E weighs each token of its
    ``column_spans`` the same (unit 1)."""
    if n is not None:
        return column_spans(lengths, c, n, k), 1
    L = lengths.clamp(min=1)[:, None]
    j = torch.arange(c, device=lengths.device)[None, :]
    return torch.stack([j * L, (j + 1) * L], -1), c


def reduced_count_bias(extents: torch.Tensor, unit: int, gi: torch.Tensor | None, gvalid: torch.Tensor | None,
                       b: int, nb: int, radius: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B, 1, nb, b, c) additive bias of overlap_columns="reduce": each projected column's count less the tokens of
    it the query's exact keys hold, as log(1 - held share), the share of the column's weight on those tokens
    (``column_extents``: h / m of a mean over m tokens, so that the count m becomes m - h); a column whose tokens
    they hold all is masked, as overlap_bias masks it. The share is E's window as positions define it (a window
    mean), not a trained E's weights: one bias per forward, whatever the layer. Global tokens (gi, gvalid: (B, G),
    ``global_index``) are held outside the window too. An empty extent (past a short row's end) is left to the
    column mask. In `dtype`, the scores' (float64 in a float64 model)."""
    B, c = extents.shape[:2]
    t = torch.arange(nb * b, device=extents.device).view(1, nb, b, 1)
    a, e = extents[..., 0].view(B, 1, 1, c), extents[..., 1].view(B, 1, 1, c)

    def within(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:  # how much of [a, e) lies in [lo, hi), in units
        return (torch.minimum(e, hi) - torch.maximum(a, lo)).clamp(min=0)

    lo, hi = (t - radius, t + radius + 1) if radius else (t, t)  # the window [lo, hi), empty without one
    held = within(lo * unit, hi * unit)  # (B, nb, b, c)
    for slot in range(0 if gi is None else gi.shape[1]):  # a global token outside the window (inside: held already)
        g = gi[:, slot].view(B, 1, 1, 1)
        outside = gvalid[:, slot].view(B, 1, 1, 1) & (((t - g).abs() > radius) if radius else True)
        held = held + within(g * unit, (g + 1) * unit) * outside
    width = e - a
    share = held.to(dtype) / width.clamp(min=1).to(dtype)
    bias = torch.where(held < width, torch.log1p(-share), _NEG)  # log1p(-1) = -inf where all held: replaced
    return torch.where(width > 0, bias, 0.0)[:, None]


def eager_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None = None,
                    dropout_p: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention as matmul, softmax, matmul (attn_implementation="eager"): queries (B, H, T, d) over keys and
    values (B, H, S, d) -> the output (B, H, T, d) and the probabilities (B, H, T, S). keep: a bool mask broadcasting
    to (B, H, T, S), True where a key is seen, or None. As HF's eager attention: the softmax in float32 at least, then
    in q's dtype, and dropout (`dropout_p`: 0 outside training) on the probabilities before V (the ones returned
    are before it). Every operation here has a double backward (torch's CPU flash kernel behind sdpa has none)."""
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if keep is not None:
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    probs = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(q.dtype)
    return (F.dropout(probs, dropout_p) if dropout_p else probs) @ v, probs


def once(store: dict | None, key: tuple, build):
    """What `build()` returns, built the first time `key` is asked of `store` (a dict that lives for one forward, so
    that every layer shares what depends on the input's shape and mask only) and looked up after; built each time
    without a store."""
    if store is None or any(isinstance(part, torch.SymInt) for part in key):
        return build()  # a symbolic size (torch.export with dynamic shapes) is no dict key: traced once anyway
    if key not in store:
        store[key] = build()
    return store[key]


def _blocks(x: torch.Tensor, r: int, nb: int) -> torch.Tensor:
    """(B, H, T, d) -> (B, H, nb, r, d), zero-padded to nb * r positions (a view when T is whole blocks and x is
    contiguous: no copy)."""
    B, H, T, d = x.shape
    if nb * r != T or not x.is_contiguous():
        x = F.pad(x, (0, 0, 0, nb * r - T))
    return x.view(B, H, nb, r, d)


def _band(x: torch.Tensor, b: int, nb: int, radius: int) -> torch.Tensor:
    """(B, H, T, d) -> (B, H, nb, b + 2 radius, d): for each block of b queries, the positions from radius before
    its first to radius after its last (zeros beyond the ends), a strided view of the padded sequence: nothing is
    copied per block."""
    B, H, T, d = x.shape
    xp = F.pad(x, (0, 0, radius, nb * b - T + radius)).contiguous()  # (B, H, radius + nb b + radius, d)
    return xp.as_strided((B, H, nb, b + 2 * radius, d), (xp.stride(0), xp.stride(1), b * d, d, 1))


EXACT_KEYS = "the attention with exact local and global keys (local_window, global_positions)"
EXACT_KEYS_OFF = "local_window=0, global_positions=[] (the paper's Linformer)"


class ExactKeyLayout:
    """What every layer's local/global attention shares in one forward: it depends on the rows' lengths, T, the
    radius and the global positions only, so the encoder's layers build it once (``of``) instead of once each: the
    blocks, the band's and the global keys' masks, the global tokens' indices, and the biases of the projected
    columns the exact keys hold (``overlap``, per projection shape)."""

    def __init__(self, lengths: torch.Tensor, T: int, radius: int, positions: list[int]):
        static_length_only(T, EXACT_KEYS, EXACT_KEYS_OFF)
        lengths = traced_length_only(T, lengths, EXACT_KEYS, EXACT_KEYS_OFF)
        self.lengths, self.T, self.radius, self.positions = lengths, T, radius, positions
        self.real = torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]  # (B, T)
        # Blocks of b = radius queries: a band is then 3 radius keys wide, of which 2 radius + 1 are in a query's
        # window. Smaller blocks would score fewer keys outside it, in more and smaller products: on CPU no faster.
        self.b = max(1, radius)
        self.nb = ceil_div(T, self.b)  # traced, a constant to the exporter: the band's strided view needs one
        self.band_bias = _band_bias(self.real, self.b, self.nb, radius)
        self.gi = self.gvalid = self.global_bias = self.slot = None
        self.is_global = torch.zeros_like(self.real)  # (B, T): which positions are global tokens
        if positions:
            self.gi, self.gvalid = global_index(positions, lengths, T)  # (B, G)
            self.global_bias = _global_bias(self.gi, self.gvalid, self.b, self.nb, radius)
            # (B, G, T): the valid slot naming each position (at most one: global_index drops a repeat); computed,
            # not written by index, so that the TorchScript ONNX exporter takes it
            names = (torch.arange(T, device=lengths.device) == self.gi[:, :, None]) & self.gvalid[:, :, None]
            self.is_global = names.any(1)
            self.slot = names.long().argmax(1)  # (B, T): that slot, where is_global
        self.memo: dict[tuple, object] = {}  # built once per forward: the overlap biases, flex's block masks

    @classmethod
    def of(cls, shared: dict | None, lengths: torch.Tensor, T: int, radius: int, positions: list[int]
           ) -> ExactKeyLayout:
        """The forward's layout from `shared` (a dict the encoder hands every layer for one forward), built by the
        first layer that asks; a new one without `shared`."""
        static_length_only(T, EXACT_KEYS, EXACT_KEYS_OFF)  # before the key below: hashing T fixes it to the example's
        return once(shared, ("exact_key_layout", T, radius, tuple(positions)),
                    lambda: cls(lengths, T, radius, positions))

    def overlap(self, c: int, n: int | None = None, k: int | None = None, rule: str = "mask",
                dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The additive bias of c projected columns under overlap_columns=`rule` (their tokens: ``column_spans(lengths,
        c, n, k)``): ``overlap_bias`` ("mask") or ``reduced_count_bias`` ("reduce"), in `dtype` (the scores'), built
        once per shape: every layer whose projection has it biases the same columns."""
        def build() -> torch.Tensor:
            if rule == "reduce":
                return reduced_count_bias(*column_extents(self.lengths, c, n, k), self.gi, self.gvalid, self.b, self.nb,
                                          self.radius, dtype)
            return overlap_bias(column_spans(self.lengths, c, n, k), self.is_global, self.b, self.nb,
                                self.radius).to(dtype)

        return once(self.memo, ("overlap", rule, c, n, k, dtype), build)


def local_global_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                           radius: int, positions: list[int], projected: tuple | None,
                           dropout_p: float = 0.0, spans: torch.Tensor | None = None,
                           layout: ExactKeyLayout | None = None, overlap: torch.Tensor | None = None,
                           eager: bool = False) -> torch.Tensor:
    """One softmax over local, global and projected keys -> (B, H, T, d).

    q, k, v: (B, H, T, d), k and v zero at padded positions; lengths: (B,) real tokens per row (right padding);
    radius: r >= 0 (0: no local keys); positions: the global positions ([] for none); projected: None, or
    (keys (B, H, c, d), values, column mask (B, c) or None, log counts (B or 1, H or 1, c)); spans: (B, c, 2)
    the tokens each projected column stands for (``column_spans``) to mask it for the queries whose exact keys hold
    them all (overlap_columns="mask"), or None to keep every column; layout: the forward's ``ExactKeyLayout`` (None:
    built here); overlap: the columns' additive bias already built (``ExactKeyLayout.overlap``, "mask" or "reduce"),
    in place of `spans`; eager: the global tokens' rows (attending to every position) through ``eager_attention``
    (attn_implementation="eager", which has a double backward) rather than F.scaled_dot_product_attention.

    Each block of b queries is scored against its band (the b + 2 radius positions around it), the global keys
    and the projected keys in two products, and normalised together in one softmax: no key is copied per block.
    """
    B, H, T, d = q.shape
    layout = layout or ExactKeyLayout(lengths, T, radius, positions)
    real, b, nb, gi = layout.real, layout.b, layout.nb, layout.gi
    acc = torch.promote_types(q.dtype, torch.float32)  # scores and softmax in float32 at least
    # the band before the global keys' gather: autograd then sums k's and v's gradients in the same order whatever
    # the caller, so a run's numbers stay the same to the bit
    band_k, band_v = _band(k, b, nb, radius), _band(v, b, nb, radius)  # (B, H, nb, L, d)
    biases = [layout.band_bias.to(acc)]
    others_k, others_v = [], []  # keys every query sees: the global ones, then the projected ones
    if positions:  # global: exact keys for every query, unless the window already holds them
        gather = gi[:, None, :, None].expand(B, H, -1, d)
        others_k.append(k.gather(2, gather))  # (B, H, G, d)
        others_v.append(v.gather(2, gather))
        biases.append(layout.global_bias.to(acc))
    if projected is not None:  # projected: E^T K and F^T V for every query, each logit + log(tokens it stands for)
        pk, pv, pmask, log_count = projected
        others_k.append(pk)
        others_v.append(pv)
        bias = _projected_bias(log_count.to(acc), pmask)
        if overlap is None and spans is not None:
            overlap = overlap_bias(spans, layout.is_global, b, nb, radius)
        if overlap is not None:
            bias = bias + overlap.to(acc)
        biases.append(bias)
    others = (torch.cat(others_k, dim=2), torch.cat(others_v, dim=2)) if others_k else None  # (B, H, G + c, d)
    out = _chunked_softmax(_blocks(q, b, nb), band_k, band_v, others, biases, dropout_p).reshape(B, H, nb * b, d)[
        :, :, :T]
    if positions:  # the global tokens' queries attend to every real position exactly
        if eager:
            full, _ = eager_attention(q.gather(2, gather), k, v, real[:, None, None, :], dropout_p)  # (B, H, G, d)
        else:
            full = F.scaled_dot_product_attention(q.gather(2, gather), k, v, attn_mask=real[:, None, None, :],
                                                  dropout_p=dropout_p)
        # each global token's row taken from its slot's (selected, not written by index: no host sync, and the
        # TorchScript ONNX exporter takes it), copied a row of d at a time: a gather by a (B, H, T, d) index would
        # read and follow an index per element where this moves whole rows
        G = full.shape[2]
        rows = once(layout.memo, ("slot_rows", H, G), lambda: (
            torch.arange(B * H, device=q.device).view(B, H, 1) * G + layout.slot[:, None, :]).flatten())
        from_slot = full.reshape(B * H * G, d).index_select(0, rows).view(B, H, T, d)
        out = torch.where(layout.is_global[:, None, :, None], from_slot, out)
    return out


_NEG = torch.finfo(torch.float32).min  # the additive mask of a key a query does not see


def _band_bias(real: torch.Tensor, b: int, nb: int, radius: int) -> torch.Tensor:
    """The band keys' additive mask, (B, 1, nb, b, b + 2 radius): query t sees band key s when |s - t| <= radius
    and s is real. Query a of block i is position i b + a; band key j is position i b - radius + j, so the window is
    a <= j <= a + 2 radius and the query itself is j = a + radius. A padded query keeps itself, so that no row of
    the softmax is empty (its output is never read by a real token)."""
    B, T = real.shape
    L = b + 2 * radius
    device = real.device
    ts = torch.arange(nb, device=device)[:, None] * b - radius + torch.arange(L, device=device)  # (nb, L) positions
    key_real = F.pad(real, (radius, nb * b - T + radius))[:, ts + radius]  # (B, nb, L)
    a_, j_ = torch.arange(b, device=device)[:, None], torch.arange(L, device=device)[None, :]
    itself = j_ == a_ + radius  # (b, L)
    if radius > 0:
        near = (j_ >= a_) & (j_ <= a_ + 2 * radius)
        allowed = (near[None, None] & key_real[:, :, None, :]) | itself  # (B, nb, b, L)
    else:  # no window: only a padded query keeps itself
        padded = ~F.pad(real, (0, nb * b - T)).view(B, nb, b)
        allowed = itself[None, None] & padded[..., None]
    return torch.where(allowed, 0.0, _NEG)[:, None]


def _global_bias(gi: torch.Tensor, gvalid: torch.Tensor, b: int, nb: int, radius: int) -> torch.Tensor:
    """The global keys' additive mask, (B, 1, nb, b, G): a valid global key outside the query's window."""
    tq = torch.arange(nb * b, device=gi.device).view(nb, b)  # query positions per block
    if radius > 0:
        in_window = (tq[None, :, :, None] - gi[:, None, None, :]).abs() <= radius
    else:
        in_window = torch.zeros(1, 1, 1, 1, dtype=torch.bool, device=gi.device)
    return torch.where(gvalid[:, None, None, :] & ~in_window, 0.0, _NEG)[:, None]  # (B, 1, nb, b, G)


def _projected_bias(log_count: torch.Tensor, pmask: torch.Tensor | None) -> torch.Tensor:
    """The projected keys' additive bias, (B or 1, H or 1, 1, 1, c): each column's log count, masked columns out
    (kept without a head axis where E is shared by the heads)."""
    if pmask is not None:
        log_count = log_count.masked_fill(~pmask[:, None, :], _NEG)
    return log_count[:, :, None, None, :]


def _chunked_softmax(qb: torch.Tensor, band_k: torch.Tensor, band_v: torch.Tensor,
                     others: tuple[torch.Tensor, torch.Tensor] | None, biases: list[torch.Tensor],
                     dropout_p: float) -> torch.Tensor:
    """(B, H, nb, b, d): each block's queries qb against its band keys (B, H, nb, L, d) and the keys every query
    sees (``others``: (B, H, G + c, d) keys and values), one softmax over both with the additive ``biases`` (band,
    then the others' in their order). A chunk of blocks at a time, so that the scores held at once stay under
    CHUNK_ELEMENTS: memory linear in T. The biases are joined once (where they do not differ by head: else per
    chunk, to keep them linear in T too), so a chunk costs a handful of products and one softmax."""
    B, H, nb, b, d = qb.shape
    L = band_k.shape[-2]
    acc = biases[0].dtype
    scale = d ** -0.5  # applied where the scores meet their masks: one pass, no scaled copy of q
    batch = max(x.shape[0] for x in biases)
    heads = max(x.shape[1] for x in biases)  # 1 unless E differs by head: the mask then broadcasts over them
    width = sum(x.shape[-1] for x in biases)  # keys per query: L + G + c

    def joined(i: int, j: int) -> torch.Tensor:
        return torch.cat([x.expand(batch, heads, nb, b, x.shape[-1])[:, :, i:j] for x in biases], dim=-1)

    whole = joined(0, nb) if heads == 1 else None  # (B or 1, 1, nb, b, width): batch x T x width floats
    chunk = max(1, CHUNK_ELEMENTS // (B * H * b * width))
    others_kt = None if others is None else others[0].transpose(-1, -2)
    starts = range(0, nb, chunk)
    outs: list[torch.Tensor | None] = [None] * len(starts)

    def piece(c: int) -> None:  # the chunk of blocks from starts[c]: independent of the others
        i = starts[c]
        j = min(i + chunk, nb)
        qc, m = qb[:, :, i:j], j - i  # (B, H, m, b, d)
        scores = qc @ band_k[:, :, i:j].transpose(-1, -2)  # (B, H, m, b, L)
        if others_kt is not None:
            scores = torch.cat([scores, (qc.reshape(B, H, m * b, d) @ others_kt).view(B, H, m, b, -1)], dim=-1)
        if scores.dtype != acc:
            scores = scores.to(acc)
        bias = whole[:, :, i:j] if whole is not None else joined(i, j)
        probs = torch.add(bias, scores, alpha=scale).softmax(-1)
        if dropout_p:
            probs = F.dropout(probs, dropout_p)
        if probs.dtype != qb.dtype:
            probs = probs.to(qb.dtype)
        out = probs[..., :L] @ band_v[:, :, i:j]
        if others is not None:
            out = out + (probs[..., L:].reshape(B, H, m * b, -1) @ others[1]).view(B, H, m, b, d)
        outs[c] = out

    # in order, or among workers on a loaded machine (threads.fitted); dropout's masks always drawn in chunk order,
    # so that a seed gives the same masks
    share(len(starts), piece, in_order=bool(dropout_p))
    return torch.cat(outs, dim=2)
