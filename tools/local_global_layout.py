"""The local/global masks built once per forward (one ExactKeyLayout shared by the layers) against once per layer,
side by side in one process: all-MiniLM-L6-v2's shape (6 x 384, 12 heads), k = 128, w = 128, global [0, -1], the
overlap masked, batch 1, inference, the two interleaved (median of 5 each).

Usage: python tools/local_global_layout.py THREADS N [N ...]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from linformer.modeling import LinformerConfig, LinformerModel
from linformer.modeling import local_global as lg

SHARED = lg.ExactKeyLayout.of.__func__


def _per_layer(cls, shared, *args):  # as before: every layer builds its own
    return SHARED(cls, None, *args)


def measure(n: int, reps: int = 5) -> tuple[float, float]:
    config = LinformerConfig(vocab_size=1000, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                             intermediate_size=1536, max_seq_len=n, projected_dim=128, sharing="layerwise",
                             local_window=128, global_positions=[0, -1], overlap_columns="mask",
                             length_policy="resample", exact_short_inputs=True)
    model = LinformerModel(config).eval()
    ids = torch.randint(5, 1000, (1, n))
    mask = torch.ones(1, n, dtype=torch.long)
    times: dict[str, list[float]] = {"once": [], "per layer": []}
    try:
        with torch.no_grad():
            model(ids, attention_mask=mask)
            for _ in range(reps):
                for name in times:
                    lg.ExactKeyLayout.of = classmethod(SHARED if name == "once" else _per_layer)
                    t0 = time.perf_counter()
                    model(ids, attention_mask=mask)
                    times[name].append(time.perf_counter() - t0)
    finally:
        lg.ExactKeyLayout.of = classmethod(SHARED)
    return statistics.median(times["once"]), statistics.median(times["per layer"])


def main() -> None:
    threads, ns = int(sys.argv[1]), [int(n) for n in sys.argv[2:]]
    torch.set_num_threads(threads)
    for n in ns:
        once, per_layer = measure(n)
        print(f"n={n} threads={threads}: masks once per forward {once * 1000:.0f} ms, once per layer "
              f"{per_layer * 1000:.0f} ms: ratio {once / per_layer:.3f}", flush=True)


if __name__ == "__main__":
    main()
