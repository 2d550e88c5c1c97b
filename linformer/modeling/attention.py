"""Linformer self-attention: keys and values projected along the sequence axis from n to k.

Shapes use B = batch, H = heads, T = tokens in this batch (T <= n), d = head width, D = H * d.

Padding never leaks into the projection: keys and values at padded positions are zeroed before E/F are
applied, so a sequence gives the same output alone and inside a right-padded batch (E's rows are positions from
the sequence's start, so left padding moves them: the model warns). (The official fairseq code and
lucidrains/linformer project the padded positions too, so their outputs depend on how a batch was padded.)

Projections (paper §4, "general projections"), each a ``Projection`` built by name from ``PROJECTION_BUILDERS``
(``register_projection`` adds one):
- ``LinearProjection``: a learned n x k matrix; a batch of T < n tokens uses its first T rows
  (``length_policy="slice"``, fairseq's; the paper does not say). With ``config.mask_empty_windows`` it also keeps
  only the columns whose window (row t belongs to column t k / n, the windows the mean initialisation averages)
  holds a real token, as the pooling projections always do. ``length_policy="resample"`` integrates E over T windows of n / T rows instead,
  so every input length uses all k columns (``resampled_rows``).
- ``PoolProjection`` / ``ConvProjection``: mean, max or a strided convolution with kernel = stride = n/k.
  Their output length is ceil(T / window); windows that hold only padding are masked out of the softmax.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .configuration import PROJECTION_INITS, PROJECTIONS, SHARING, LinformerConfig
from .errors import ConfigError
from .flex import attend, key_mask
from .flex import local_global as flex_local_global
from .local_global import (
    ExactKeyLayout,
    column_log_counts,
    eager_attention,
    landmark_pooling,
    local_global_attention,
    once,
)
from .threads import capturing, is_exporting, static_length_only
from .values import ceil_div


def resampled_rows(E: torch.Tensor, T: int, lengths: torch.Tensor | None = None) -> torch.Tensor:
    """E (n x k, or H x n x k) resampled to inputs of T tokens: row t of the result is the integral of E's rows over
    [t n / L, (t + 1) n / L), L an input's length (area resampling, E's rows read as a piecewise-constant function
    of position). Each column keeps its sum, so a window mean stays a mean, over windows of L / k tokens; L = n
    gives E itself (to the rounding of differences of its cumulative sums: about 1e-6 of E in float32). Computed in
    E's dtype, float32 at least.

    ``lengths`` (B,): each row's real length (right padding), giving a (B, T, k) or (B, H, T, k) matrix whose rows
    at t >= L are zero; None: every input is T long, giving (T, k) or (H, T, k).
    """
    n = E.shape[-2]
    # the cumsum in float32 at least (a bf16 E's differences of sums would keep 3 digits), float64 in a float64 model
    acc = torch.promote_types(E.dtype, torch.float32)
    C = F.pad(E.to(acc).cumsum(-2), (0, 0, 1, 0))  # C[i] = sum of E's first i rows: (..., n + 1, k)
    t = torch.arange(T + 1, device=E.device, dtype=torch.float64)
    L = torch.tensor([float(T)], device=E.device, dtype=torch.float64) if lengths is None else \
        lengths.double().clamp(min=1)  # an all-padding row: any finite matrix (its keys are zero)
    x = (torch.minimum(t, L[:, None]) * n / L[:, None]).clamp_(0, n)  # window edges, in rows of E: (B, T + 1)
    i0 = x.floor().long().clamp_(max=n - 1)
    frac = (x - i0).to(C.dtype).unsqueeze(-1)  # (B, T + 1, 1)
    edges = C[..., i0, :] * (1 - frac) + C[..., i0 + 1, :] * frac  # C at x: (B, T + 1, k) or (H, B, T + 1, k)
    rows = (edges[..., 1:, :] - edges[..., :-1, :]).to(E.dtype)
    if E.dim() == 3:
        rows = rows.transpose(0, 1)  # (B, H, T, k)
    return rows[0] if lengths is None else rows


def window_columns(T: int, n: int, k: int) -> int:
    """Columns of a window-masked n x k projection that T tokens reach (row t belongs to column floor(t k / n))."""
    return (T - 1) * k // n + 1


def window_mean_matrix(n: int, k: int) -> torch.Tensor:
    """n x k matrix averaging consecutive windows: row t belongs to window floor(t k / n)."""
    window = torch.arange(n) * k // n
    E = torch.zeros(n, k)
    E[torch.arange(n), window] = 1.0
    return E / E.sum(0, keepdim=True)


def too_long(T: int, n: int, projects: bool = True) -> str:
    """The message for an input of T tokens given to a model or layer of n positions: one whose E and F have n rows
    where it `projects` keys and values, else (full attention) one whose position table has n rows."""
    why = "E and F are n x k" if projects else "its position table holds n positions"
    return f"Input has {T} tokens but the model's max_seq_len is n={n} ({why}). Truncate inputs to {n} tokens."


# The largest value transformers' additive masks put at a masked key: finfo(dtype).min, or -10000 in older code
ADDITIVE_MASKED = -1e4


def accepted_masks(B: int, T: int) -> str:
    """The attention masks every model here takes, for an error that refuses another."""
    return (f"(batch, tokens) = {(B, T)}, True (1) at real tokens, or transformers' 4-D (batch, 1, 1, tokens) = "
            f"{(B, 1, 1, T)} or key-padding-only (batch, 1, tokens, tokens) = {(B, 1, T, T)}, every query's row the "
            "same")


# why a mask that says more than which keys are padding is refused, by config.attention: the Linformer cannot
# express it; full attention here masks keys as the Linformer does, so that both read a mask alike
_ONLY_KEY_PADDING = {
    "linformer": (("the Linformer projects the keys and values to k positions that every query shares, so it can "
                   "leave padded keys out, the same for every query, and nothing finer"),
                  "the heads share the projected keys' layout", "which the projected keys cannot take"),
    "full": (("full attention here takes the key padding alone, as the Linformer does (padded keys left out, the "
              "same for every query): a causal, per-query or per-head mask and an attention bias are not implemented"),
             "full attention here takes the key padding alone", "which full attention here does not take"),
}


def key_padding_mask(mask: torch.Tensor, B: int, T: int, attention: str = "linformer") -> torch.Tensor:
    """A transformers-style 4-D attention mask -> the (B, T) bool key mask (True at real tokens) it expresses. Taken:
    (B, 1, 1, T), and (B, 1, T, T) whose rows are the same for every query; bool or integer (True, 1: attended), or
    float read as additive (0 attended; a large negative number, <= -1e4, not). Anything else is a ValueError saying
    why for the model's `attention` (config.attention): the keys and values are projected to k positions every query
    shares, so a mask can leave padded keys out, the same for every query, and nothing finer (a causal or per-query
    mask, a per-head one, an attention bias); full attention here reads masks as the Linformer does.
    The values are checked in one host sync, left out in a captured forward (``threads.capturing``)."""
    finer, per_head, bias = _ONLY_KEY_PADDING[attention]
    shape = tuple(mask.shape)
    if len(shape) != 4 or shape[0] != B or shape[1] != 1 or shape[2] not in (1, T) or shape[3] != T:
        why = (f" (a mask per head cannot be expressed: {per_head})" if len(shape) == 4 and shape[1] != 1 else "")
        raise ValueError(f"an attention mask must be {accepted_masks(B, T)}; got {shape}{why}.")
    if mask.is_complex():
        raise ValueError(f"a 4-D attention mask must be bool, integer 0/1 or additive float; got {mask.dtype}.")
    keys = mask[:, 0, 0]
    checks = {}
    if not capturing():
        if shape[2] == T and T > 1:
            checks["per_query"] = (mask != mask[:, :, :1]).any()
        if mask.is_floating_point():
            checks["not_additive"] = ~((mask == 0) | (mask <= ADDITIVE_MASKED)).all()
    seen = dict(zip(checks, torch.stack(list(checks.values())).tolist())) if checks else {}
    if seen.get("per_query"):
        raise ValueError(
            f"this {shape} attention mask masks keys differently for different queries (a causal or per-query "
            f"mask): {finer}. Pass the (batch, tokens) padding mask, True at real tokens.")
    if seen.get("not_additive"):
        raise ValueError(
            f"a float 4-D attention mask is read as transformers' additive one (0 where a key is attended, a large "
            f"negative number, <= {ADDITIVE_MASKED:g}, where it is not); this one holds other values (a 0/1 mask, or "
            f"an attention bias, {bias}): pass a bool mask, True at real tokens.")
    return keys == 0 if mask.is_floating_point() else keys != 0



def keep_mask(mask: torch.Tensor, B: int, T: int, attention: str = "linformer") -> torch.Tensor:
    """Any attention mask the models and layers here take -> the (B, T) bool key mask, True at real tokens. A 4-D
    one is read by ``key_padding_mask``; a (B, T) one of any dtype is a keep mask, nonzero at real tokens, as
    transformers reads a 2-D mask (a tokenizer's integer one, or ``torch.ones(B, T)`` in float). A float one holding
    values other than 0 and 1 is refused naming them: transformers would read an additive mask (0 at real tokens) as
    its inverse, and a weight is not a mask. That check is one host sync, for float masks only, left out in a
    captured forward (``threads.capturing``). Anything else is a ValueError saying what to pass."""
    if mask.dim() == 4:  # transformers' extended masks: the key padding they express, or why there is none
        return key_padding_mask(mask, B, T, attention)
    if mask.is_complex() or tuple(mask.shape) != (B, T):
        raise ValueError(f"mask must be {accepted_masks(B, T)}; bool, integer or float 0/1 (a 4-D one also "
                         f"additive float); got {mask.dtype} of shape {tuple(mask.shape)}.")
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() and not capturing():
        other = mask[(mask != 0) & (mask != 1)]
        if other.numel():
            values = ", ".join(f"{v:g}" for v in other.unique()[:4].tolist())
            raise ValueError(
                f"a float (batch, tokens) attention mask is read as a keep mask, 1 at real tokens and 0 at padding "
                f"(as transformers reads it); this one also holds {values}. From an additive mask (0 at real tokens, "
                "a large negative number at padding) pass mask == 0; from weights, pass the bool mask they apply to.")
    return mask != 0


_INITIALISED_LATER = contextvars.ContextVar("linformer_projections_initialised_later", default=False)


@contextlib.contextmanager
def initialised_later():
    """Projections built inside skip their own initialisation, because what builds them initialises them afterwards:
    a LinformerPreTrainedModel builds its encoder inside, and its post_init (HF's ``_init_weights``, which
    ``from_pretrained`` skips for the weights it loads) calls each projection's ``reset_parameters`` once, so the
    random draws of ``projection_init='xavier'`` come in the order they always have and a seed gives the same model."""
    token = _INITIALISED_LATER.set(True)
    try:
        yield
    finally:
        _INITIALISED_LATER.reset(token)


class Projection(nn.Module):
    """Keys or values (B, H, T, d) projected along the sequence axis: ``forward(x, mask)`` -> (B, H, c, d) and the
    (B, c) bool mask of the columns to attend (None: all). ``num_matrices``: learned matrices it holds (counted by
    ``count_projection_matrices``). ``reset_parameters`` is the one definition of its initialisation: a subclass
    calls ``self.initialise()`` at the end of ``__init__`` (so a projection built alone is ready to use, as an
    nn.Linear is), and the model's ``_init_weights`` calls it for every projection. ``projected_flops`` declares
    what ``forward`` computes, for the FLOP counts (``modeling.flops``)."""

    num_matrices = 0

    def projected_flops(self, T: int, head_dim: int, num_heads: int) -> tuple[int, float]:
        """(c, FLOPs) of ``forward`` on one sequence's keys (or values) of T tokens, all heads: the c positions
        (H, T, d) is projected to, and the FLOPs that takes (a multiply-add counts 2; pooling's additions and
        maxima count 0, as softmax and LayerNorm do). ``modeling.flops`` counts the projection by it; one that
        does not define it is refused there by name, since no count fits every projection."""
        raise NotImplementedError(f"{type(self).__name__} declares no FLOPs (Projection.projected_flops)")

    def reset_parameters(self) -> None:
        """Initialise the parameters (none here) through ``transformers.initialization``, whose functions leave a
        weight that ``from_pretrained`` loaded (``_is_hf_initialized``) as it is."""

    def initialise(self) -> None:
        if not _INITIALISED_LATER.get():
            self.reset_parameters()


def _check_init(projection_init: str) -> str:
    if projection_init not in PROJECTION_INITS:
        raise ValueError(f"projection_init={projection_init!r} is not one of {', '.join(PROJECTION_INITS)}.")
    return projection_init


class LinearProjection(Projection):
    """A learned E (or F) of shape n x k, or H x n x k when every head has its own (sharing='none').

    ``projection_init`` (config ``projection_init``): ``"mean"`` starts E as the mean over windows of about n/k
    consecutive positions; ``"xavier"`` as fairseq's Linformer, xavier_uniform with gain 1/sqrt(2) on each n x k matrix.

    ``zero_padding`` (default True) keeps padded positions out of the projection. False projects them like real
    tokens, as fairseq's and lucidrains' Linformer do: only for measuring how much that leaks.

    ``window_mask`` (config ``mask_empty_windows``): row t of E belongs to window (column) floor(t k / n). An input
    of T < n tokens then fills only the first floor((T-1) k / n) + 1 columns; the others would be zero keys and
    values that still take softmax mass (k - T k / n of them: 123 of 128 for a 20-token sentence at n=512), which
    dilutes every short input's attention towards zero. With the mask only the columns holding a real token take
    part, whatever values training gives E: the rule depends on positions, not on E.
    """

    def __init__(self, n: int, k: int, num_heads: int | None = None, zero_padding: bool = True,
                 window_mask: bool = False, length_policy: str = "slice", projection_init: str = "mean"):
        super().__init__()
        shape = (n, k) if num_heads is None else (num_heads, n, k)
        self.weight = nn.Parameter(torch.empty(shape))
        self.zero_padding = zero_padding
        self.window_mask = window_mask
        self.resample = {"slice": False, "resample": True}[length_policy]  # every LENGTH_POLICIES value, no other
        self.projection_init = _check_init(projection_init)
        self.initialise()

    def reset_parameters(self) -> None:
        n, k = self.weight.shape[-2:]
        if self.projection_init == "mean":  # E_tj = 1/|window j| for the ~n/k consecutive positions t of window j
            init.copy_(self.weight, window_mean_matrix(n, k).expand_as(self.weight))
        else:  # fairseq's Linformer: xavier_uniform with gain 1/sqrt(2) on each n x k matrix
            bound = math.sqrt(6.0 / (n + k)) / math.sqrt(2.0)
            init.uniform_(self.weight, -bound, bound)

    @property
    def per_head(self) -> bool:
        return self.weight.dim() == 3

    def projected_flops(self, T: int, head_dim: int, num_heads: int) -> tuple[int, float]:
        """E^T x per head: (c x T) @ (T x d), c = k (or the columns T tokens fill, with window_mask). A model whose
        heads share E projects the layer input instead (``project_hidden``), which ``flops.layer_flops`` counts."""
        c, _ = self._columns(T, None)
        return c, float(2 * T * c * head_dim * num_heads)

    @property
    def num_matrices(self) -> int:
        return self.weight.shape[0] if self.per_head else 1

    def _columns(self, T: int, mask: torch.Tensor | None) -> tuple[int, torch.Tensor | None]:
        """How many columns T tokens use, and the (B, columns) mask of those holding a real token (None = all)."""
        n, k = self.weight.shape[-2:]
        if not self.window_mask:
            return k, None
        static_length_only(T, "mask_empty_windows=True", "mask_empty_windows=False")
        c = window_columns(T, n, k)
        if mask is None:
            return c, None
        window = F.one_hot(torch.arange(T, device=mask.device) * k // n, c).to(torch.float32)  # (T, c)
        return c, (mask.to(torch.float32) @ window) > 0

    def rows(self, T: int, mask: torch.Tensor | None) -> torch.Tensor:
        """The T x c matrix the inputs use: E's first T rows (slice), or E resampled to each row's length
        (resample: (B, T, k) or (B, H, T, k) when ``mask`` says the rows' lengths differ)."""
        if self.resample:
            return resampled_rows(self.weight, T, None if mask is None else mask.sum(-1))
        c, _ = self._columns(T, None)
        if self.per_head and isinstance(T, torch.SymInt):
            # a symbolic length (torch.export with a dynamic one): H x T slices of H x n are a contiguous view at T = n
            # only, a branch the export would keep as a guard refusing T = n; the rows gathered are one at every T
            return self.weight[..., :c].index_select(-2, torch.arange(T, device=self.weight.device))
        return self.weight[..., :T, :c]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, rows: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x: (B, H, T, d) keys or values, already zero at padded positions -> (B, H, c, d) and the column mask,
        c = k (or the columns T tokens fill, with window_mask). ``rows``: ``self.rows(T, mask)`` if the caller has
        them already."""
        T = x.shape[-2]
        _, kmask = self._columns(T, mask)
        E = self.rows(T, mask) if rows is None else rows  # (T, c), (H, T, c), or per row (B, T, k) / (B, H, T, k)
        if self.per_head and E.dim() == 3:
            E = E.unsqueeze(0)  # broadcast over the batch: (1, H, T, c)
        elif not self.per_head and E.dim() == 3:
            E = E.unsqueeze(1)  # one matrix per batch row, shared by the heads: (B, 1, T, k)
        return E.transpose(-1, -2) @ x, kmask

    def project_hidden(self, hidden: torch.Tensor, mask: torch.Tensor | None):
        """Project the layer input instead of the keys (only when E is shared by the heads).

        E^T (X W^T + 1 b^T) = (E^T X) W^T + (E^T 1) b^T, so the key/value linear layers then run on k rows instead
        of T: the same result for about k/T of their cost. With padding, X and the ones-vector are masked.
        Returns E^T X: (B, c, D), the bias weights E^T m: (c,) or (B, c), and the column mask (as ``forward``).
        """
        T = hidden.shape[1]
        _, kmask = self._columns(T, mask)
        E = self.rows(T, mask if self.zero_padding else None)  # (T, c), or (B, T, k) resampled per row
        if mask is None or not self.zero_padding:
            return E.transpose(-1, -2) @ hidden, E.sum(-2), kmask
        m = mask.to(hidden.dtype)
        Et = E.transpose(-1, -2)
        return Et @ (hidden * m.unsqueeze(-1)), (Et.to(m.dtype) @ m.unsqueeze(-1)).squeeze(-1), kmask


def _window_mask(mask: torch.Tensor | None, length: int, window: int) -> torch.Tensor | None:
    """(B, T) token mask -> (B, ceil(T/window)) mask of windows holding at least one real token."""
    if mask is None:
        return None  # every window holds a real token: the last one is only right-padded by F.pad
    pad = (-length) % window
    return F.pad(mask, (0, pad), value=False).view(mask.shape[0], -1, window).any(-1)


class PoolProjection(Projection):
    """Mean or max pooling over windows of n/k positions (no parameters)."""

    def __init__(self, n: int, k: int, kind: str):
        super().__init__()
        self.window, self.kind = n // k, kind

    def projected_flops(self, T: int, head_dim: int, num_heads: int) -> tuple[int, float]:
        return ceil_div(T, self.window), 0.0  # windows; pooling multiplies nothing

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, H, T, d = x.shape
        w, pad = self.window, (-T) % self.window
        if self.kind == "max":
            if mask is not None:
                x = x.masked_fill(~mask[:, None, :, None], float("-inf"))
            x = F.pad(x, (0, 0, 0, pad), value=float("-inf")).view(B, H, -1, w, d).amax(3)
        else:  # mean over the whole window; padding is zero, as it would be if the sequence were alone
            x = F.pad(x, (0, 0, 0, pad)).view(B, H, -1, w, d).mean(3)
        kmask = _window_mask(mask, T, w)
        if kmask is not None and self.kind == "max":
            x = x.masked_fill(~kmask[:, None, :, None], 0.0)  # all-padding windows: -inf -> 0, masked anyway
        return x, kmask


class ConvProjection(Projection):
    """A strided Conv1d over the sequence axis (kernel = stride = n/k) on each head's d channels.

    With sharing='none' every head has its own kernel (a grouped convolution); otherwise one kernel serves all
    heads. No bias, so the projection of an all-padding window is zero. ``projection_init``: ``"mean"`` starts each
    output channel as the mean of its own input channel over the window; ``"xavier"`` as normal(0, 1/sqrt(d window)).
    """

    def __init__(self, n: int, k: int, head_dim: int, num_heads: int | None = None, projection_init: str = "mean"):
        super().__init__()
        self.window, self.groups = n // k, num_heads or 1
        # Conv1d kernel (out channels, in channels per group, window), held directly: reset_parameters is its init
        self.weight = nn.Parameter(torch.empty(head_dim * self.groups, head_dim, self.window))
        self.projection_init = _check_init(projection_init)
        self.initialise()

    def reset_parameters(self) -> None:
        channels, w = self.weight.shape[1:]
        if self.projection_init == "mean":  # each output channel averages its own input channel over the window
            kernel = torch.eye(channels).repeat(self.groups, 1)[:, :, None].expand(-1, -1, w) / w
            init.copy_(self.weight, kernel)
        else:
            init.normal_(self.weight, 0.0, 1.0 / math.sqrt(channels * w))

    @property
    def num_matrices(self) -> int:
        return self.groups

    def projected_flops(self, T: int, head_dim: int, num_heads: int) -> tuple[int, float]:
        """A d x d x window kernel per head at each of the ceil(T / window) output positions (shared or grouped,
        the same products)."""
        c = ceil_div(T, self.window)
        return c, float(2 * c * self.window * head_dim * head_dim * num_heads)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, H, T, d = x.shape
        x = F.pad(x, (0, 0, 0, (-T) % self.window))
        if self.groups > 1:  # (B, H*d, T') -> grouped conv, one group per head
            x = x.permute(0, 1, 3, 2).reshape(B, H * d, -1)
        else:  # heads folded into the batch
            x = x.reshape(B * H, -1, d).transpose(1, 2)
        y = F.conv1d(x, self.weight, stride=self.window, groups=self.groups).view(B, H, d, -1)
        # contiguous over d: the GPU's fused attention kernels need the last dimension at stride 1
        return y.transpose(-1, -2).contiguous(), _window_mask(mask, T, self.window)


# name -> build(config, k, heads): one E or F of a sharing unit; heads is None when the heads share it. Every name here
# is a value of config.projection (configuration.PROJECTIONS, held equal by register_projection and a test): none falls
# to another's builder.
PROJECTION_BUILDERS: dict[str, Callable[[LinformerConfig, int, int | None], Projection]] = {
    "linear": lambda config, k, heads: LinearProjection(
        config.max_seq_len, k, heads, window_mask=config.mask_empty_windows, length_policy=config.length_policy,
        projection_init=config.projection_init),
    "mean_pool": lambda config, k, heads: PoolProjection(config.max_seq_len, k, "mean"),
    "max_pool": lambda config, k, heads: PoolProjection(config.max_seq_len, k, "max"),
    "conv": lambda config, k, heads: ConvProjection(config.max_seq_len, k, config.head_dim, heads,
                                                    projection_init=config.projection_init),
}


# the package's own projections, which a registration may not replace
BUILT_IN_PROJECTIONS = frozenset(PROJECTION_BUILDERS)


def register_projection(name: str, build: Callable[[LinformerConfig, int, int | None], Projection]) -> None:
    """Make ``config.projection=name`` build ``build(config, k, heads)`` (a ``Projection``; ``heads``: the number of
    heads when each head has its own, None when they share it) in this process. Registering a name of one's own again
    replaces its builder (a notebook cell run again makes a new function, which no comparison tells from another
    one); one of the package's own names is a ConfigError. A model saved with it loads only where the same
    registration ran first: the code saved beside a model for ``trust_remote_code`` is the package's own, without a
    projection of one's own."""
    if name in BUILT_IN_PROJECTIONS:
        raise ConfigError(f"projection {name!r} is one of the package's own ({', '.join(sorted(BUILT_IN_PROJECTIONS))})"
                          ": give yours a name of its own.")
    if name not in PROJECTIONS:
        PROJECTIONS.append(name)
    PROJECTION_BUILDERS[name] = build


def build_projection(config: LinformerConfig, k: int, per_head: bool) -> Projection:
    """One E or F for a sharing unit (a head, a layer, or the whole model)."""
    return PROJECTION_BUILDERS[config.projection](config, k, config.num_attention_heads if per_head else None)


def _projected_linear(linear: nn.Module, projected: torch.Tensor, bias_weights: torch.Tensor) -> torch.Tensor:
    """E^T (X W^T + 1 b^T) = (E^T X) W^T + (E^T 1) b^T from `projected` = E^T X (B, c, D) and `bias_weights` = E^T 1
    ((c,) or (B, c)), through the layer's own call: linear(E^T X) = (E^T X) W^T + b, plus (E^T 1 - 1) b, b being the
    layer at 0. Never its .weight and .bias, so that any affine twin of an nn.Linear computes it: the int8 layer of
    torch.ao.quantization.quantize_dynamic (whose weight and bias are methods), an adapter wrapping the layer. A plain
    nn.Linear takes one GEMM with the bias term fused, without the extra call at 0."""
    if type(linear) is nn.Linear:
        return F.linear(projected, linear.weight).addcmul_(bias_weights.unsqueeze(-1), linear.bias)
    bias = linear(projected.new_zeros(1, projected.shape[-1]))[0]  # (D,)
    return linear(projected).addcmul_(bias_weights.unsqueeze(-1) - 1, bias)  # the bias term added in place


def every_gradient_needed() -> bool:
    """Whether this forward must give every trainable parameter a gradient: under torch.distributed with grad enabled,
    unless the DistributedDataParallel running it finds unused parameters itself (``find_unused_parameters=True``).
    DDP without it (its default, and transformers' Trainer's with gradient checkpointing) waits for a gradient of
    every parameter, and fails on the next step where one got none."""
    if not (torch.is_grad_enabled() and torch.distributed.is_available() and torch.distributed.is_initialized()):
        return False
    # the DDP module whose forward this is (DDP sets it, for torch.compile); None under another wrapper, and in
    # gradient checkpointing's recomputation, which the ops below change in no saved tensor
    active = getattr(nn.parallel.DistributedDataParallel, "_get_active_ddp_module", lambda: None)()
    return active is None or not active.find_unused_parameters


def with_zero_gradients(out: torch.Tensor, *projections: nn.Module | None) -> torch.Tensor:
    """``out`` plus a 0 computed from the projections' trainable parameters (None: none), when ``every_gradient_needed``:
    a forward that leaves them out (``exact_short_inputs``, a batch of at most k tokens) still gives each a gradient,
    of zeros, so that DDP without ``find_unused_parameters`` takes the step, in the package's runs and a user's own
    loop alike. That costs a few scalar ops per matrix and one add over ``out``, on those batches only, where
    ``find_unused_parameters`` walks the autograd graph and all-reduces the map of used parameters every step. It is
    added in the layer that left them out, not once per model: under reentrant gradient checkpointing each layer's
    backward runs on its own, and a gradient from outside it as well would reach DDP twice.
    One process runs none of it, so its training is as it was to the bit: E and F keep a None gradient on such a step
    (AdamW skips them: no weight decay, no moment update). Under several processes they get zeros (AdamW decays them
    and moves them by their moments); a DDP that finds unused parameters keeps the None where no process used them,
    so the 0 is left out under it. The sum of an empty slice is 0 whatever E holds (0 * E would be NaN at an inf)."""
    if not every_gradient_needed():
        return out
    params = [p for m in projections if m is not None for p in m.parameters() if p.requires_grad]
    return out + sum(p.view(-1)[:0].sum().to(out.device) for p in params) if params else out


class LinformerSelfAttention(nn.Module):
    """RoBERTa's self-attention (query/key/value names kept), with Linformer or full attention.

    Attention itself goes through ``F.scaled_dot_product_attention`` (attn_implementation "sdpa"), the explicit
    matmul-softmax-matmul (``eager_attention``) under "eager" or with ``output_attentions=True``, which returns
    (B, H, T, k) probabilities (T x T in full mode), or flex_attention. Only eager has a double backward on the CPU
    (torch's CPU flash kernel behind sdpa has none; flex there no backward at all).
    """

    def __init__(self, config: LinformerConfig, layer_idx: int):
        super().__init__()
        D = config.hidden_size
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.dropout_p = config.attention_probs_dropout_prob
        # read at every forward, as HF's attention modules do: set_attn_implementation("eager") switches the softmax
        # attention to the explicit matmul-softmax-matmul (the path that returns attention maps; the local/global
        # attention's global rows too), "sdpa" to the kernel
        self.config = config
        self.linformer = config.projects_keys
        self.k = config.k_of_layer(layer_idx) if self.linformer else None
        self.exact_short = self.linformer and config.exact_short_inputs
        # exact local and global keys beside the projected ones (linformer.modeling.local_global)
        self.local_radius = config.local_window // 2 if self.linformer else 0
        self.global_positions = list(config.global_positions or []) if self.linformer else []
        self.landmarks = self.linformer and config.landmark_pooling  # projected keys pooled by attention (E = F)
        # what the exact keys do to the projected columns whose tokens they hold (None: nothing, "keep")
        self.overlap_rule = config.overlap_columns if self.linformer and config.overlap_columns != "keep" else None
        # Projections owned by this layer; with a mode shared across layers ('layerwise') the encoder owns them.
        self.E = self.F = None
        sharing = SHARING[config.sharing] if self.linformer else None
        if sharing is not None and not sharing.across_layers:
            k = config.k_of_layer(layer_idx)
            self.E = build_projection(config, k, sharing.per_head)
            if sharing.separate_f:
                self.F = build_projection(config, k, sharing.per_head)
        # what forward's checks read, kept as plain attributes (a config's or submodule's lookup costs microseconds)
        self.max_len = config.max_seq_len if self.linformer else None
        self.needs_shared = sharing is not None and sharing.across_layers

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # (B, L, D) -> (B, H, L, d)
        return x.view(x.shape[0], -1, self.num_heads, self.head_dim).transpose(1, 2)

    def _project_kv(self, hidden, mask, E, F_):
        """Keys and values projected to k positions, and the mask over them (None = attend to all)."""
        if isinstance(E, LinearProjection) and not E.per_head:
            # Shared by the heads: project the hidden states first (see LinearProjection.project_hidden).
            xe, se, kmask = E.project_hidden(hidden, mask)
            xf, sf, _ = (xe, se, kmask) if F_ is E else F_.project_hidden(hidden, mask)
            key, value = _projected_linear(self.key, xe, se), _projected_linear(self.value, xf, sf)
            return self._heads(key), self._heads(value), kmask
        key, value = self._heads(self.key(hidden)), self._heads(self.value(hidden))
        leaky = isinstance(E, LinearProjection) and not E.zero_padding
        if mask is not None and not leaky:  # zero padded keys/values so they add nothing to the projection
            keep = mask[:, None, :, None].to(key.dtype)
            key, value = key * keep, value * keep
        key, kmask = E(key, mask)
        value, _ = F_(value, mask)
        return key, value, kmask

    def forward(self, hidden, mask=None, shared_projection=None, output_attentions=False, per_forward=None):
        """hidden: (B, T, D), T <= n (config.max_seq_len); mask: (B, T) bool (or integer or float 0/1, as a
        tokenizer's attention_mask), True at real tokens, or None when nothing is padded, or transformers' 4-D one
        (``keep_mask``); shared_projection: with a mode shared across layers (sharing='layerwise'), the encoder's E
        (LinformerEncoder.E, used for keys and values), or its pair (E, F) where the mode keeps F apart from E;
        per_forward: a dict the encoder's layers share for one forward (what depends only on the input's lengths is
        built once). Anything else is a ValueError saying what to pass. The checks read shapes and dtypes only (no
        host sync) but for a float or 4-D mask's values. Within one forward (a per_forward dict) the first layer
        checks and the others take its mask: they are given the same hidden shape and mask."""
        mask = once(per_forward, ("checked_mask",), lambda: self._checked(hidden, mask, shared_projection))
        q = self._heads(self.query(hidden))
        T = hidden.shape[1]
        # T <= k attends exactly, decided here where T is a number: eager, compiled (Dynamo sees an int and guards
        # on it: another length compiles again). An export or a trace would freeze the example's side of k into a
        # graph meant for any length: torch.export non-strict (T a SymInt) and strict (Dynamo shows a dynamic T to
        # isinstance as an int, and the ONNX dynamo exporter's strict retry accepts the guard T <= k it adds),
        # torch.jit.trace and the TorchScript ONNX exporter. Those take the general path below, which holds both
        # (at T <= k every row is short and attends exactly, as here)
        fixed = isinstance(T, int) and not (is_exporting() or torch.jit.is_tracing())
        if not self.linformer or (self.exact_short and fixed and self.k >= T):
            keys, values = self._heads(self.key(hidden)), self._heads(self.value(hidden))
            out, probs = self._attend(q, keys, values, mask, output_attentions, (per_forward, "input"))
            if self.linformer:  # E and F left out, which DDP may still wait for (with_zero_gradients)
                shared = shared_projection if isinstance(shared_projection, tuple) else (shared_projection,)
                out = with_zero_gradients(out, self.E, self.F, *shared)
            return out, probs
        if self.E is not None:
            E, F_ = self.E, self.F if self.F is not None else self.E
        else:
            E, F_ = shared_projection if isinstance(shared_projection, tuple) else (shared_projection,) * 2
        if self.local_radius or self.global_positions:
            out, probs = self._local_global(q, hidden, mask, E, F_, per_forward), None
        else:
            out, probs = self._attend(q, *self._project_kv(hidden, mask, E, F_), output_attentions,
                                      (per_forward, "projected"))
        if self.exact_short and (mask is not None or not fixed):
            # Rows whose real tokens all lie in the first k positions attend exactly over those positions (T x k,
            # as much as the projection), so a short row gives the same output inside a longer padded batch.
            head, real = hidden, mask
            if not fixed:  # k positions more, masked, so that slicing at k decides no side of k (torch.export would
                # guard on it and fix the length to the example's side)
                real = mask if mask is not None else hidden.new_ones(hidden.shape[:2], dtype=torch.bool)
                head, real = F.pad(hidden, (0, 0, 0, self.k)), F.pad(real, (0, self.k))
            short = ~real[:, self.k:].any(-1)
            if capturing() or bool(short.any()):  # compiled, exported, traced: no host sync, both paths
                head = head[:, : self.k]
                exact, exact_probs = self._attend(q, self._heads(self.key(head)), self._heads(self.value(head)),
                                                  real[:, : self.k], output_attentions, (per_forward, "input"))
                out = torch.where(short[:, None, None], exact, out)
                if probs is not None:  # the projection may fill fewer than k columns (mask_empty_windows)
                    probs = F.pad(probs, (0, exact_probs.shape[-1] - probs.shape[-1]))
                    probs = torch.where(short[:, None, None, None], exact_probs, probs)
        return out, probs

    def _checked(self, hidden, mask, shared_projection):
        """The mask as a (B, T) bool tensor, after ValueErrors for what the layer cannot take."""
        if self.needs_shared and shared_projection is None:
            raise ValueError(f"sharing={self.config.sharing!r}: this layer has no projection of its own; pass the "
                             "encoder's (LinformerEncoder.E) as shared_projection, or its (E, F) where it has an F.")
        if torch.jit.is_tracing():  # a trace's shapes are tensors: comparing them would warn and record a constant
            return mask
        B, T = hidden.shape[:2]
        if self.max_len is not None and self.max_len < T:
            raise ValueError(too_long(T, self.max_len))
        if mask is None:
            return mask
        return keep_mask(mask, B, T, self.config.attention)

    def _local_global(self, q, hidden, mask, E, F_, shared=None):
        """One softmax over the local window's exact keys, the global tokens' and the projected ones -> (B, T, D).
        Attention probabilities are not materialised (output_attentions gives None for these layers)."""
        B, T = hidden.shape[:2]
        keys, values = self._heads(self.key(hidden)), self._heads(self.value(hidden))
        if mask is not None:
            keep = mask[:, None, :, None].to(keys.dtype)
            keys, values = keys * keep, values * keep
        rows = E.rows(T, mask)  # (T, c), (H, T, c), (B, T, k) or (B, H, T, k)
        if not self.landmarks:
            pk, pmask = E(keys, mask, rows)
            pv, _ = F_(values, mask, rows if F_ is E else None)
        if not E.per_head:
            rows = rows.unsqueeze(-3)  # a head axis of 1
        if rows.dim() == 3:
            rows = rows.unsqueeze(0)  # a batch axis of 1: (1 or B, H or 1, T, c)
        if mask is not None:
            rows = rows * mask[:, None, :, None].to(rows.dtype)
        lengths = mask.sum(-1) if mask is not None else torch.full((B,), T, device=hidden.device)
        if self.landmarks:  # resampled E fills every column: no column mask
            pk, pv, log_count = landmark_pooling(q, keys, values, rows, lengths)
            pmask = None
        else:
            log_count = column_log_counts(rows)
        layout = ExactKeyLayout.of(shared, lengths, T, self.local_radius, self.global_positions)
        overlap = None
        if self.overlap_rule:  # the tokens each column stands for: its window of the row (resample) or of E's n rows
            overlap = layout.overlap(pk.shape[-2], *((None, None) if (E.resample or self.landmarks) else
                                                     E.weight.shape[-2:]), rule=self.overlap_rule,
                                     dtype=torch.promote_types(q.dtype, torch.float32))
        dropout_p = self.dropout_p if self.training else 0.0
        if self.config._attn_implementation == "flex_attention":
            out = flex_local_global(q, keys, values, layout, (pk, pv, pmask, log_count), overlap, dropout_p,
                                    reduced=self.overlap_rule == "reduce")
        else:
            out = local_global_attention(q, keys, values, lengths, self.local_radius, self.global_positions,
                                         (pk, pv, pmask, log_count), dropout_p, layout=layout, overlap=overlap,
                                         eager=self.config._attn_implementation == "eager")
        return out.transpose(1, 2).reshape(B, T, -1)

    def _attend(self, q, keys, values, kmask, output_attentions, memo=(None, None)):
        """Softmax attention of q over keys and values (kmask: (B, keys) bool or None) -> (B, T, D) and the probabilities.
        memo: (the forward's per_forward dict or None, what kmask is: "input" for the attention mask or a prefix of
        it, "projected" for the projection's column mask): a function of the input's mask and the key count only, the
        same in every layer, so flex's block mask is built once per forward."""
        attn_mask = None if kmask is None else kmask[:, None, None, :]
        dropout_p = self.dropout_p if self.training else 0.0
        probs = None
        if output_attentions or self.config._attn_implementation == "eager":
            out, probs = eager_attention(q, keys, values, attn_mask, dropout_p)
        elif self.config._attn_implementation == "flex_attention":
            shared, what = memo
            mask = once(shared, ("flex_key_mask", what, q.shape[2], keys.shape[-2]),
                        lambda: key_mask(kmask, q.shape[0], q.shape[2], keys.shape[-2], q.device))
            out = attend(q, keys, values, mask, dropout_p=dropout_p)
        else:
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=attn_mask, dropout_p=dropout_p)
        B, _, T, _ = q.shape
        return out.transpose(1, 2).reshape(B, T, -1), probs


__all__ = [
    "PROJECTION_BUILDERS",
    "ConvProjection",
    "LinearProjection",
    "LinformerSelfAttention",
    "PoolProjection",
    "Projection",
    "accepted_masks",
    "build_projection",
    "keep_mask",
    "key_padding_mask",
    "register_projection",
    "resampled_rows",
    "window_mean_matrix",
]
