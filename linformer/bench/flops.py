"""Analytic FLOPs of a Linformer or full-attention encoder, and the device peak for MFU.

Counts multiply-adds as 2 FLOPs, matmuls only (softmax, LayerNorm, gelu and embeddings are a few percent).
Per token of a sequence of T tokens, width D, FFN width F, per layer:
- Q and output projections 4 D^2; K and V 4 D^2, or 4 D^2 k/T when a head-shared E is applied to the hidden
  states first (then E^T X costs 2 k D per matrix);
- with per-head E, F (sharing=none) or pooling/conv: E^T K and F^T V cost 2 k D each;
- scores and weighted values 4 T' D, with T' = k (Linformer) or T (full attention);
- FFN 4 D F.
The MLM head (dense 2 D^2 + decoder 2 D V) runs on the masked fraction p of tokens (all tokens when p = 1).
A training step is 3x the forward (backward = 2x forward).
"""

from __future__ import annotations

import contextlib

import torch

# Dense tensor-core peaks in FLOP/s (fp16/bf16, and fp32 without TF32), from the vendors' datasheets.
_GPU_PEAKS = {
    "H200": (989e12, 67e12),
    "H100": (989e12, 67e12),
    "A100": (312e12, 19.5e12),
    "A10": (125e12, 31.2e12),
    "L4": (121e12, 30.3e12),
    "V100": (125e12, 15.7e12),
    "T4": (65e12, 8.1e12),
}


def forward_flops_per_token(config, seq_len: int, mlm_fraction: float | None = None) -> float:
    """Forward FLOPs per token; ``mlm_fraction`` adds the MLM head on that fraction of tokens."""
    D, F, T = config.hidden_size, config.intermediate_size, seq_len
    total = 0.0
    for layer in range(config.num_hidden_layers):
        total += 4 * D * D + 4 * D * F  # Q, output, FFN
        if config.attention == "full":
            total += 4 * D * D + 4 * T * D
            continue
        k = min(config.k_of_layer(layer), T)
        if config.projection == "linear" and config.sharing != "none":
            matrices = 1 if config.sharing in ("kv", "layerwise") else 2
            total += 4 * D * D * k / T + 2 * k * D * matrices  # K, V on k rows; E^T X (and F^T X)
        else:
            total += 4 * D * D + 4 * k * D  # K, V on T rows; E^T K and F^T V
        total += 4 * k * D
    if mlm_fraction is not None:
        total += mlm_fraction * (2 * D * D + 2 * D * config.vocab_size)
    return total


def training_flops_per_token(config, seq_len: int, mlm_fraction: float) -> float:
    return 3.0 * forward_flops_per_token(config, seq_len, mlm_fraction)


def peak_flops(device: torch.device, mixed_precision: str, override_tflops: float | None = None) -> float | None:
    """Peak FLOP/s of the device for MFU: an explicit value, a GPU datasheet peak, or a CPU estimate."""
    if override_tflops:
        return float(override_tflops) * 1e12
    half = mixed_precision in ("fp16", "bf16")
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, (p16, p32) in _GPU_PEAKS.items():
            if key in name:
                return p16 if half else p32
        return None
    return _cpu_peak(bf16=mixed_precision == "bf16")


def _cpu_peak(bf16: bool) -> float | None:
    """cores x clock x FLOPs/cycle (2 FMA units: 64 fp32 with AVX-512, 32 with AVX2); an estimate."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        text = open("/proc/cpuinfo").read()
        flags = set(next(line for line in text.splitlines() if line.startswith("flags")).split(":")[1].split())
        mhz = float(next(line for line in text.splitlines() if line.startswith("cpu MHz")).split(":")[1])
        per_cycle = 64 if "avx512f" in flags else 32 if {"avx2", "fma"} <= flags else 8
        if bf16 and "avx512_bf16" in flags:
            per_cycle *= 2
        return torch.get_num_threads() * mhz * 1e6 * per_cycle
    return None
