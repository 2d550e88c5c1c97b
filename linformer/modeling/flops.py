"""Analytic FLOPs of the Linformer and full-attention encoders (a multiply-add counts as 2 FLOPs), and the
device's peak FLOP/s for model FLOP utilisation.

Counted per layer: the query/key/value and output projections, the attention score (Q K^T) and value
(P V) matmuls, the Linformer's E/F projections and the FFN. Embeddings, LayerNorm, softmax, GELU and
biases are left out: they are the same for both models or O(n D), far below the matmuls.

The Linformer count follows our implementation, not the paper's naive order: when E (and F) is shared
by the heads (sharing = headwise | kv | layerwise, linear projection), the layer input is projected first
(E^T X, 2 n k D), so the key/value linear layers run on k rows (2 k D^2 each). With kv/layerwise sharing,
E = F and E^T X is computed once per layer. With sharing = none, K and V are computed on all n rows and each
head projects its own d columns (2 n k D for keys, as much for values). An input of T < n tokens uses the first
T rows of E, a T x k matrix: it still gives k keys and values, also when T < k. The count equals what
``torch.utils.flop_counter.FlopCounterMode`` measures where attention runs as matmuls the counter sees (eager, or
SDPA's MATH backend; it does not see a fused SDPA kernel's FLOPs) (tests/modeling/test_flops.py).

Every other projection (pooling, conv, a per-head E, one of your own from ``register_projection``) is counted by its
own declaration, ``Projection.projected_flops``: K and V on all n rows, each projected as it says. A projection that
declares nothing is an UncountedProjection naming it, not a guess.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from .attention import Projection, build_projection, initialised_later, window_columns
from .configuration import SHARING, projects_keys
from .errors import ConfigError
from .values import ceil_div, round_up


class UncountedProjection(ConfigError):
    """config.projection names a projection whose class declares no FLOPs (``Projection.projected_flops``)."""

# Dense peaks in FLOP/s (fp16/bf16 tensor cores, and fp32 without TF32), from the vendors' datasheets (L40: 181.05
# bf16 / 90.5 fp32 TFLOP/s, L40S: 362.05 / 91.6, NVIDIA's L40 and L40S datasheets). A key is the model as CUDA names it,
# matched whole: its words must appear together among the words of the device name (split at spaces and hyphens, any
# case), and the longest key that does wins. So "NVIDIA H100 PCIe" is the PCIe part, not the SXM one CUDA names plainly
# ("NVIDIA H100 80GB HBM3", "NVIDIA H200"), and "NVIDIA L40S" is neither the L4 nor the L40. A device not here (A10G,
# a GeForce card, ...) has no peak: MFU is left out unless trainer.peak_tflops (or throughput.peak_tflops) gives one.
_GPU_PEAKS = {
    "H100 PCIe": (756e12, 51e12),
    "H100 NVL": (835e12, 60e12),
    "H200 NVL": (835e12, 60e12),
    "H200": (989e12, 67e12),
    "H100": (989e12, 67e12),
    "A100": (312e12, 19.5e12),
    "A10": (125e12, 31.2e12),
    "L4": (121e12, 30.3e12),
    "L40": (181.05e12, 90.5e12),
    "L40S": (362.05e12, 91.6e12),
    "V100": (125e12, 15.7e12),
    "T4": (65e12, 8.1e12),
}


def _words(name: str) -> list[str]:
    return name.replace("-", " ").lower().split()


def _gpu_peak(name: str) -> tuple[float, float] | None:
    """The (fp16/bf16, fp32) dense peak FLOP/s of the GPU CUDA calls ``name``, or None for a model not in the table."""
    words = _words(name)
    found = [key for key in _GPU_PEAKS
             if any(words[i:i + len(_words(key))] == _words(key) for i in range(len(words)))]
    return _GPU_PEAKS[max(found, key=lambda key: len(_words(key)))] if found else None


def layer_flops(n: int, hidden: int, ffn: int, attention: str, k: int | None = None,
                sharing: str = "layerwise") -> float:
    """FLOPs of one post-LN encoder layer's forward for one sequence of n tokens (linear E, F)."""
    D = hidden
    if not projects_keys(attention):
        kv = 2 * 2 * n * D * D
        return _query_output_ffn(n, D, ffn) + kv + _attention_core(n, n, D)
    if k is None:
        raise ValueError(f"attention={attention!r} projects keys to k rows: give k")
    # A batch of T < n tokens uses the first T rows of E: T x k, so keys, values and scores stay k wide even for
    # T < k (the columns the T rows do not reach hold zero keys and values, and still take part).
    if SHARING[sharing].per_head:
        kv = 2 * 2 * n * D * D + 2 * (2 * n * k * D)  # K, V on n rows, then E_i^T K_i, F_i^T V_i per head
    else:
        projections = 2 if SHARING[sharing].separate_f else 1  # E^T X (and F^T X when F is apart from E)
        kv = projections * 2 * n * k * D + 2 * 2 * k * D * D
    return _query_output_ffn(n, D, ffn) + kv + _attention_core(n, k, D)


def _query_output_ffn(n: int, D: int, ffn: int) -> float:
    """The query and output projections (n rows each) and the FFN (D -> ffn -> D)."""
    return float(2 * 2 * n * D * D + 2 * 2 * n * D * ffn)


def _attention_core(n: int, keys: int, D: int) -> float:
    """Scores Q K^T (n x keys) and values P V, over all heads (H * d = D)."""
    return float(2 * 2 * n * keys * D)


def _projected_layer_flops(n: int, config, k: int) -> float:
    """One layer whose keys and values are computed on all n rows and then projected, each as the projection
    declares (``Projection.projected_flops``: to how many positions, at what cost)."""
    D = config.hidden_size
    keys, project = declared_projection_flops(config, k, n)
    return _query_output_ffn(n, D, config.intermediate_size) + 2 * 2 * n * D * D + 2 * project + \
        _attention_core(n, keys, D)


def declared_projection_flops(config, k: int, T: int) -> tuple[int, float]:
    """(positions, FLOPs) of config.projection on one sequence's keys (or values) of T tokens, all heads, as its
    class declares them; built on the meta device (no memory, no initialisation). UncountedProjection where the
    class declares nothing: a registered projection's cost cannot be guessed (taking it for pooling counted a learned
    one's products as none)."""
    with torch.device("meta"), initialised_later():
        projection = build_projection(config, k, SHARING[config.sharing].per_head)
    if type(projection).projected_flops is Projection.projected_flops:
        raise UncountedProjection(
            f"projection={config.projection!r} ({type(projection).__name__}) declares no FLOPs: define "
            f"projected_flops(T, head_dim, num_heads) on {type(projection).__name__}, returning the positions T "
            "tokens' keys are projected to and the FLOPs of projecting them (Projection.projected_flops), so that "
            "FLOP counts and MFU count what it computes.")
    return projection.projected_flops(T, config.head_dim, config.num_attention_heads)


def local_global_layer_flops(n: int, config, k: int) -> float:
    """One layer with exact local and global keys beside the projected ones, as executed
    (linformer.modeling.local_global): K and V on all n rows, E^T K and F^T V, then the queries, padded up to whole
    blocks of b = max(1, r) (r = local_window // 2), each against its block's b + 2r band keys, the G global keys and
    the k projected keys; the G global queries against all n keys. A window wider than the input still scores its
    whole band (zeros beyond the ends), so short inputs cost more than their n alone suggests. With landmark pooling, E^T Q (the landmark queries) in place of E^T K and F^T V, and
    each landmark against its window's keys, then the weighted sums of keys and values: the k windows are gathered as
    blocks of min(n, ceil(n / k) + 1) tokens each (n + k tokens where k divides n), padding included."""
    D, G = config.hidden_size, len(config.global_positions or [])
    radius = config.local_window // 2
    block = max(1, radius)  # ExactKeyLayout's blocks of queries: n padded up to whole blocks, even when n < block
    queries, band = round_up(n, block), block + 2 * radius
    if config.landmark_pooling:
        pooled = k * min(n, ceil_div(n, k) + 1)  # local_global.landmark_pooling's (k, W) blocks
        kv = 2 * 2 * n * D * D + 2 * n * k * D + 3 * 2 * pooled * D
    else:
        kv = 2 * 2 * n * D * D + 2 * (2 * n * k * D)
    return _query_output_ffn(n, D, config.intermediate_size) + kv + _attention_core(queries, band + G + k, D) + \
        _attention_core(G, n, D)


def model_flops(n: int, hidden: int, ffn: int, layers: int, attention: str, k: int | None = None,
                sharing: str = "layerwise", batch: int = 1) -> float:
    return batch * layers * layer_flops(n, hidden, ffn, attention, k, sharing)


def flop_ratio(n: int, k: int, hidden: int, ffn: int, sharing: str = "layerwise") -> float:
    """Full-attention FLOPs / Linformer FLOPs: the speed-up a perfectly efficient implementation would see."""
    return layer_flops(n, hidden, ffn, "full") / layer_flops(n, hidden, ffn, "linformer", k, sharing)


def forward_flops_per_token(config, seq_len: int, mlm_fraction: float | None = None) -> float:
    """Forward FLOPs per token of a LinformerConfig (per-layer k included) on sequences of seq_len tokens. The
    length policy is followed: ``exact_short_inputs`` counts full attention up to k tokens; ``resample`` costs what
    the slice does (all k columns; the resampling itself is O(T k) additions, not counted).

    With ``mlm_fraction``, the MLM head (dense 2 D^2 + decoder 2 D V) runs on that fraction of the tokens (the
    model's ``sparse_prediction=True``; pass 1.0 for full logits).
    """
    D, ffn, T = config.hidden_size, config.intermediate_size, seq_len
    total = 0.0
    for layer in range(config.num_hidden_layers):
        exact = config.exact_short_inputs and config.k_of_layer(layer) >= T  # exact attention up to k tokens
        if not config.projects_keys or exact:
            total += layer_flops(T, D, ffn, "full")
        elif config.local_window or config.global_positions:
            total += local_global_layer_flops(T, config, config.k_of_layer(layer))
        elif config.projection == "linear" and not SHARING[config.sharing].per_head:  # E^T X: ``layer_flops``
            k = config.k_of_layer(layer)
            if config.mask_empty_windows:  # only the columns the T tokens reach take part
                k = window_columns(T, config.max_seq_len, k)
            total += layer_flops(T, D, ffn, "linformer", k, config.sharing)
        else:
            total += _projected_layer_flops(T, config, config.k_of_layer(layer))
    total /= T
    if mlm_fraction is not None:
        total += mlm_fraction * (2 * D * D + 2 * D * config.vocab_size)
    return total


def training_flops_per_token(config, seq_len: int, mlm_fraction: float) -> float:
    """3x the forward: the backward of every matmul computes two products of the same size (the gradients for its
    input and for its weight, or for both operands of an activation-activation product)."""
    return 3.0 * forward_flops_per_token(config, seq_len, mlm_fraction)


def peak_flops(device: torch.device, mixed_precision: str, override_tflops: float | None = None) -> float | None:
    """Peak FLOP/s for MFU: an explicit value, a GPU datasheet peak, or a CPU estimate (None if unknown)."""
    if override_tflops:
        return float(override_tflops) * 1e12
    half = mixed_precision in ("fp16", "bf16")
    if device.type == "cuda":
        peaks = _gpu_peak(torch.cuda.get_device_name(device))
        return (peaks[0] if half else peaks[1]) if peaks else None
    return _cpu_peak(bf16=mixed_precision == "bf16")


def _cpu_peak(bf16: bool) -> float | None:
    """threads x clock x FLOPs/cycle (2 FMA units: 64 fp32 with AVX-512, 32 with AVX2); an estimate."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
        flags = set(next(x for x in lines if x.startswith("flags")).split(":")[1].split())
        mhz = float(next(x for x in lines if x.startswith("cpu MHz")).split(":")[1])
        per_cycle = 64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else 8
        if bf16 and "avx512_bf16" in flags:
            per_cycle *= 2
        return torch.get_num_threads() * mhz * 1e6 * per_cycle
    return None


__all__ = [
    "UncountedProjection",
    "declared_projection_flops",
    "flop_ratio",
    "forward_flops_per_token",
    "layer_flops",
    "model_flops",
    "peak_flops",
    "training_flops_per_token",
]
