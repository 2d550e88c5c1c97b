"""FlexAttention for the Linformer's attention (``attn_implementation="flex_attention"``; torch >= 2.5).

The local/global attention becomes one ``flex_attention`` call over the concatenated keys [K ; E^T K] (values
[V ; F^T V]): a block mask names, per block of queries, the blocks of keys it can see (its band, the global keys'
blocks, the projected keys' blocks, and every block for a block holding a global query), a ``mask_mod`` masks within
them exactly as ``local_global`` does, and a ``score_mod`` adds each projected column's log count (lowered per
query under overlap_columns="reduce"). On the GPU the
compiled kernel then skips the blocks outside the mask, and its backward trains. Full attention and the paper's
Linformer go through it with their padding (or empty-window) masks only.

Torch's FlexAttention has no backward on the CPU (inference only there) and no attention dropout: a CPU step that
needs gradients, and training with ``attention_probs_dropout_prob > 0``, are refused in one line saying what to change.
"""

from __future__ import annotations

import functools

import torch
from transformers.utils import logging

from .errors import ConfigError
from .local_global import _NEG, once
from .values import ceil_div

FLEX_TORCH = "2.5"  # the first torch with torch.nn.attention.flex_attention
BLOCK = 128  # queries and keys per block of the block mask (flex's default tile)

logger = logging.get_logger(__name__)


def available() -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def check_available() -> None:
    """ImportError naming the torch that has flex_attention, where the installed one does not."""
    if not available():
        raise ImportError(f"attn_implementation='flex_attention' needs torch >= {FLEX_TORCH} "
                          f"(torch.nn.attention.flex_attention); this is torch {torch.__version__}. Upgrade torch, "
                          "or use attn_implementation='sdpa'.")


@functools.cache
def _compiled():
    """flex_attention compiled for static shapes: one compile per input shape. Dynamic shapes are not used: on the
    CPU (torch 2.13) inductor's flex kernel for a dynamic batch and length fails to build for the local/global mask."""
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)


_compiled_shapes: set[tuple] = set()  # the (q, k) shapes, dtype and device _compiled() has run: a compile each


def _note_shape(q: torch.Tensor, k: torch.Tensor) -> None:
    """Warn once when the compiled flex_attention meets more input shapes than torch compiles one function for
    (torch._dynamo's recompile limit): from there torch runs its unfused flex_attention, which holds the whole
    T x S score matrix, with only its own log lines to say so."""
    key = (tuple(q.shape), tuple(k.shape), q.dtype, q.device)
    if key in _compiled_shapes:
        return
    _compiled_shapes.add(key)
    config = torch._dynamo.config
    limit = getattr(config, "recompile_limit", None) or getattr(config, "cache_size_limit", 8)
    if len(_compiled_shapes) == limit + 1:
        logger.warning_once(
            f"attn_implementation='flex_attention' is compiled once per input shape, and torch compiles at most "
            f"{limit} (torch._dynamo.config.recompile_limit): inputs of other shapes now run torch's unfused "
            "flex_attention, which holds the full T x S scores. Pad inputs to a few fixed lengths (padding='max_length', "
            "or multiples of 128), raise the limit, or use attn_implementation='sdpa'.")


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask, score_mod=None,
           dropout_p: float = 0.0) -> torch.Tensor:
    """flex_attention(q, k, v) -> (B, H, T, d), compiled (inside an outer torch.compile, traced by it)."""
    from torch.nn.attention.flex_attention import flex_attention

    if dropout_p:
        raise ConfigError(f"attn_implementation='flex_attention' has no attention dropout: set "
                          f"attention_probs_dropout_prob=0 (it is {dropout_p}) or use attn_implementation='sdpa'.")
    if q.device.type == "cpu" and torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        raise ConfigError("attn_implementation='flex_attention' has no backward on the CPU (torch's FlexAttention "
                          "trains on GPUs only): train with attn_implementation='sdpa' here, or run under "
                          "torch.no_grad() for inference.")
    if torch.compiler.is_compiling():  # an outer compile traces it
        return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    compiled = _compiled()
    if compiled is not flex_attention:  # (tests run the eager function in its place)
        _note_shape(q, k)
    return compiled(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _packed(blocks: torch.Tensor, T: int, S: int, mask_mod):
    """A BlockMask from a (B, nQ, nKV) bool matrix of the key blocks each query block visits, mask_mod applied within
    every one of them (none is marked full)."""
    from torch.nn.attention.flex_attention import BlockMask

    blocks = blocks[:, None]  # one mask for every head
    count = blocks.sum(-1, dtype=torch.int32)
    order = torch.argsort(blocks.to(torch.int8), dim=-1, descending=True, stable=True).to(torch.int32)
    return BlockMask.from_kv_blocks(count, order, BLOCK_SIZE=BLOCK, mask_mod=mask_mod, seq_lengths=(T, S))


def key_mask(kmask: torch.Tensor | None, B: int, T: int, S: int, device) -> object:
    """The block mask of attention over S keys of which `kmask` (B, S) says which are seen (None: all)."""
    nq, nk = ceil_div(T, BLOCK), ceil_div(S, BLOCK)
    if kmask is None:
        return _packed(torch.ones(B, nq, nk, dtype=torch.bool, device=device), T, S, lambda b, h, qi, ki: ki >= 0)
    seen = torch.nn.functional.pad(kmask, (0, nk * BLOCK - S)).view(B, nk, BLOCK).any(-1)  # (B, nk)
    return _packed(seen[:, None, :].expand(B, nq, nk), T, S, lambda b, h, qi, ki: kmask[b, ki])


def local_global_mask(layout, c: int, column_mask: torch.Tensor | None, overlap: torch.Tensor | None) -> object:
    """The block mask of ``local_global.local_global_attention`` over [K ; E^T K] (T + c keys): query t sees
    - exact key s < T when s is real and |s - t| <= radius, or s is a global token, or t is one (global queries
      attend to every real position, and only to them);
    - projected key T + j when t is not a global token, column j is not masked (``column_mask``, (B, c)) and,
      with ``overlap`` (``ExactKeyLayout.overlap``'s additive bias), t's exact keys do not already hold all its
      tokens.
    A padded query that sees no key gets a zero output from flex (the blocked path lets it see itself); no real
    token reads it."""
    lengths, T, r = layout.lengths, layout.T, layout.radius
    B, device = lengths.shape[0], lengths.device
    S = T + c
    real, is_global = layout.real, layout.is_global
    open_ = torch.ones(B, T, c, dtype=torch.bool, device=device) if column_mask is None else \
        column_mask[:, None, :].expand(B, T, c).clone()
    if overlap is not None:  # (B, 1, nb, b, c) additive: finite where the column counts for the query
        open_ &= overlap.view(B, -1, c)[:, :T] > _NEG
    open_ &= ~is_global[:, :, None]

    def mask_mod(b, h, qi, ki):  # indices past the ends (a last block's tail) are clamped, and masked by flex
        qt, kt, j = qi.clamp(max=T - 1), ki.clamp(max=T - 1), (ki - T).clamp(0, c - 1)
        exact = (ki < T) & real[b, kt] & (((qt - kt).abs() <= r) & (r > 0) | is_global[b, kt] | is_global[b, qt])
        return exact | ((ki >= T) & open_[b, qt, j])

    nq, nk = ceil_div(T, BLOCK), ceil_div(S, BLOCK)
    qb = torch.arange(nq, device=device)[:, None]
    kb = torch.arange(nk, device=device)[None, :]
    band = (kb * BLOCK <= (qb + 1) * BLOCK - 1 + r) & ((kb + 1) * BLOCK - 1 >= qb * BLOCK - r) & (kb * BLOCK < T)
    projected = ((kb + 1) * BLOCK > T) & (kb * BLOCK < S)  # (1, nk)
    blocks = (band | projected)[None].expand(B, nq, nk).clone()
    if layout.gi is not None:
        gblock = torch.where(layout.gvalid, layout.gi // BLOCK, -1)  # (B, G): -1 for an unused slot
        blocks |= (kb[None] == gblock[:, :, None]).any(1)[:, None, :]  # the global keys' blocks, for every query
        blocks |= (qb.view(1, -1, 1) == gblock[:, None, :]).any(-1)[:, :, None]  # a global query's block: all
    return _packed(blocks, T, S, mask_mod)


def local_global(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout, projected: tuple,
                 overlap: torch.Tensor | None, dropout_p: float = 0.0, reduced: bool = False) -> torch.Tensor:
    """``local_global.local_global_attention`` as one flex_attention call -> (B, H, T, d). projected: (keys
    (B, H, c, d), values, column mask (B, c) or None, log counts (B or 1, H or 1, c)); overlap: the columns' additive
    bias (``ExactKeyLayout.overlap``) or None; reduced: whether it also lowers the counts of the columns it leaves
    open (overlap_columns="reduce": added by the score_mod), not only masks ("mask")."""
    pk, pv, column_mask, log_count = projected
    B, H, T, _ = q.shape
    c = pk.shape[-2]
    counts = log_count.expand(B, H, c).to(torch.promote_types(log_count.dtype, torch.float32))

    def finite_part() -> torch.Tensor:  # (B, T, c): the lowered counts per query (the mask_mod masks the rest)
        bias = overlap.view(B, -1, c)[:, :T]
        return torch.where(bias > _NEG, bias, 0.0)

    lowered = once(layout.memo, ("flex lowered", c), finite_part) if reduced else None  # once per forward

    def score_mod(score, b, h, qi, ki):  # each projected column's logit + log(tokens it stands for)
        j = (ki - T).clamp(0, c - 1)
        bias = counts[b, h, j] if lowered is None else counts[b, h, j] + lowered[b, qi.clamp(max=T - 1), j]
        return torch.where(ki >= T, score + bias.to(score.dtype), score)

    mask = once(layout.memo, ("flex", c, column_mask is not None, overlap is not None),  # one per projection shape
                lambda: local_global_mask(layout, c, column_mask, overlap))
    return attend(q, torch.cat([k, pk], 2), torch.cat([v, pv], 2), mask, score_mod, dropout_p)
