"""Exact local and global keys beside the projected ones, in one softmax (``local_window``, ``global_positions``).

Every query attends, in one softmax, to
- the exact keys of a local window: the positions s with |s - t| <= r, r = local_window // 2;
- the exact keys of the global tokens (``global_positions``: the first token and each row's last real token by
  default), unless the window already holds them;
- the k projected keys of the Linformer (E^T K, F^T V), each logit raised by the log of the number of tokens its
  column stands for (the effective count (sum_t E_tj)^2 / sum_t E_tj^2: n/k for a window mean), so that a column
  weighs like the tokens it summarises rather than like one token.
The global tokens' own queries attend to every position exactly (Longformer's global attention).

The local part is blocked: the sequence is cut into blocks of r queries, each attending to its own block and its two
neighbours (3r keys, masked to the window), so time and memory are O(T (r + g + k)), never T x T.

Shapes: B batch, H heads, T tokens, d head width, c projected columns, G global positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_ELEMENTS = 1 << 21  # attention scores materialised at once (2M: 8 MiB in fp32)


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
    (..., T, c) -> (..., c): (sum_t E_tj)^2 / sum_t E_tj^2 (exactly m for a mean over m tokens), at least 1."""
    rows = rows.float()
    count = rows.sum(-2).square() / rows.square().sum(-2).clamp(min=1e-12)
    return count.clamp(min=1.0).log()


def _blocks(x: torch.Tensor, r: int, nb: int) -> torch.Tensor:
    """(B, H, T, d) -> (B, H, nb, r, d), zero-padded to nb * r positions."""
    B, H, T, d = x.shape
    return F.pad(x, (0, 0, 0, nb * r - T)).view(B, H, nb, r, d)


class _Band:
    """Each block's band of keys, its previous, own and next block (zeros beyond the ends), cut for a range of
    blocks at a time: (B, H, blocks, 3r, d) is built per chunk, never for the whole sequence."""

    def __init__(self, x: torch.Tensor, r: int, nb: int):
        B, H, _, d = x.shape
        self.padded = F.pad(_blocks(x, r, nb).view(B, H, nb * r, d), (0, 0, r, r)).view(B, H, nb + 2, r, d)

    def __getitem__(self, part: slice) -> torch.Tensor:
        i, j = part.start, part.stop
        xp = self.padded
        return torch.cat([xp[:, :, i:j], xp[:, :, i + 1:j + 1], xp[:, :, i + 2:j + 2]], dim=3)


def local_global_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                           radius: int, positions: list[int], projected: tuple | None,
                           dropout_p: float = 0.0) -> torch.Tensor:
    """One softmax over local, global and projected keys -> (B, H, T, d).

    q, k, v: (B, H, T, d), k and v zero at padded positions; lengths: (B,) real tokens per row (right padding);
    radius: r >= 0 (0: no local keys); positions: the global positions ([] for none); projected: None, or
    (keys (B, H, c, d), values, column mask (B, c) or None, log counts (B or 1, H or 1, c)).
    """
    B, H, T, d = q.shape
    device = q.device
    t = torch.arange(T, device=device)
    real = t[None, :] < lengths[:, None]  # (B, T)
    r = radius if radius > 0 else 1  # without local keys, blocks of 1 query see only themselves (masked below)
    nb = -(-T // r)
    qb = _blocks(q, r, nb)
    tq = torch.arange(nb * r, device=device).view(nb, r)  # query positions per block
    neg = torch.finfo(torch.float32).min

    # local: 3r band keys per block, those within r of the query and real (a padded query keeps itself, so that
    # no row of the softmax is empty; its output is never read by a real token)
    ts = (torch.arange(nb, device=device)[:, None] - 1) * r + torch.arange(3 * r, device=device)  # (nb, 3r)
    itself = tq[:, :, None] == ts[:, None, :]  # (nb, r, 3r)
    if radius > 0:
        near = (tq[:, :, None] - ts[:, None, :]).abs() <= radius
        key_real = F.pad(real, (r, nb * r - T + r))[:, ts + r]  # (B, nb, 3r)
        allowed = (near[None] & key_real[:, :, None, :]) | itself[None]  # (B, nb, r, 3r)
    else:  # no window: only a padded query keeps itself
        padded = ~F.pad(real, (0, nb * r - T)).view(B, nb, r)
        allowed = itself[None] & padded[..., None]
    band_k, band_v = _Band(k, r, nb), _Band(v, r, nb)
    parts_k, parts_v = [], []  # the global and projected keys, the same for every block
    parts_bias = [torch.where(allowed, 0.0, neg)[:, None]]  # (B, 1, nb, r, 3r), then theirs

    # global: exact keys for every query, unless the window already holds them
    if positions:
        gi, gvalid = global_index(positions, lengths, T)  # (B, G)
        gather = gi[:, None, :, None].expand(B, H, -1, d)
        gk, gv = k.gather(2, gather), v.gather(2, gather)  # (B, H, G, d)
        in_window = (tq[None, :, :, None] - gi[:, None, None, :]).abs() <= radius if radius > 0 else \
            torch.zeros(1, 1, 1, 1, dtype=torch.bool, device=device)
        g_allowed = gvalid[:, None, None, :] & ~in_window  # (B, nb, r, G)
        G = gi.shape[1]
        parts_k.append(gk[:, :, None].expand(B, H, nb, G, d))
        parts_v.append(gv[:, :, None].expand(B, H, nb, G, d))
        parts_bias.append(torch.where(g_allowed, 0.0, neg)[:, None])

    # projected: E^T K and F^T V for every query, each logit + log(tokens the column stands for)
    if projected is not None:
        pk, pv, pmask, log_count = projected
        c = pk.shape[2]
        bias = log_count.float()  # (B or 1, H or 1, c): kept without a head axis where E is shared by the heads
        if pmask is not None:
            bias = bias.masked_fill(~pmask[:, None, :], neg)
        parts_k.append(pk[:, :, None].expand(B, H, nb, c, pk.shape[-1]))
        parts_v.append(pv[:, :, None].expand(B, H, nb, c, pv.shape[-1]))
        parts_bias.append(bias[:, :, None, None, :].expand(bias.shape[0], bias.shape[1], nb, r, c))

    heads = max(b.shape[1] for b in parts_bias)  # 1 unless E differs by head: the mask then broadcasts over them
    batch = max(b.shape[0] for b in parts_bias)
    width = sum(b.shape[-1] for b in parts_bias)  # keys per query: 3r + G + c
    # A chunk of blocks at a time: each block's keys (the global and projected ones repeated per block) and its
    # mask are materialised for CHUNK_ELEMENTS scores at most, so memory stays linear in T with a small constant.
    chunk = max(1, CHUNK_ELEMENTS // (B * H * r * width))
    outs = []
    for i in range(0, nb, chunk):
        part = slice(i, min(i + chunk, nb))
        keys = torch.cat([band_k[part], *(x[:, :, part] for x in parts_k)], dim=3)
        values = torch.cat([band_v[part], *(x[:, :, part] for x in parts_v)], dim=3)
        bias = torch.cat([b.expand(batch, heads, nb, r, b.shape[-1])[:, :, part] for b in parts_bias],
                         dim=-1).to(q.dtype)
        outs.append(F.scaled_dot_product_attention(qb[:, :, part], keys, values, attn_mask=bias,
                                                   dropout_p=dropout_p))
    out = torch.cat(outs, dim=2).reshape(B, H, nb * r, d)[:, :, :T]

    if positions:  # the global tokens' queries attend to every real position exactly
        gq = q.gather(2, gather)  # (B, H, G, d)
        full = F.scaled_dot_product_attention(gq, k, v, attn_mask=real[:, None, None, :], dropout_p=dropout_p)
        for j in range(gi.shape[1]):  # a where per global slot: an invalid slot may share a valid one's index
            at = (t[None, :] == gi[:, j, None]) & gvalid[:, j, None]  # (B, T)
            out = torch.where(at[:, None, :, None], full[:, :, j, None], out)
    return out


__all__ = ["column_log_counts", "global_index", "local_global_attention"]
