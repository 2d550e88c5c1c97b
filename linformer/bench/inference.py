"""Inference benchmark (the paper's Table 3): forward time and peak memory over a grid of n and k.

Four models of the same size run on the same batch (random token ids, nothing padded):

- ``linformer``: LinformerModel, sharing='layerwise' (one E = F for every layer and head, as Table 3);
- ``full``: the same model with attention='full' (``F.scaled_dot_product_attention``, today's baseline);
- ``eager``: Hugging Face RobertaModel with attn_implementation='eager' (matmul, n x n softmax, matmul: the
  paper-era standard Transformer). Chosen over our own output_attentions=True path because that path returns
  (so keeps alive) every layer's n x n probabilities, which no 2020 inference did;
- ``roberta_sdpa``: the same RobertaModel with attn_implementation='sdpa', to check that our full mode is as
  fast as Hugging Face's.

Time: one warm-up per model, then ``reps`` rounds; in each round every model runs once (the order rotates each
round), so machine noise hits all models alike; the median is reported. Memory: see ``common.peak_memory_bytes``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from ..modeling.flops import flop_ratio, model_flops
from .common import (
    available_memory_bytes,
    interleaved_medians,
    machine_description,
    max_batch_that_fits,
    peak_memory_bytes,
    resolve_device,
    synchronize,
    timed,
)
from .models import build_ours, build_roberta, size_of
from .paper import PAPER_MEMORY_SAVED, PAPER_TIME_SAVED, paper_value

BASELINES = ("full", "eager", "roberta_sdpa")
# Rough cost of each model relative to its analytic FLOPs at GEMM speed, for planning the grid only.
_OVERHEAD = {"linformer": 1.3, "full": 1.6, "eager": 2.2, "roberta_sdpa": 1.6}
_BUILD_S = 1.5  # seconds to build and initialise one base-width model (50k-word embedding) on a CPU
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class InferenceSettings:
    ns: list[int] = field(default_factory=lambda: [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536])
    ks: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048])
    batch_size: int = 1
    layers: int = 2
    hidden: int = 768
    heads: int = 12
    ffn: int = 3072
    vocab: int = 50265
    sharing: str = "layerwise"
    baselines: list[str] = field(default_factory=lambda: list(BASELINES))
    reps: int = 3
    warmup: int = 1
    budget_s: float = 900.0  # planned wall-clock seconds for the grid; larger n are dropped to fit
    max_n: int | None = None  # hard cap on n (e.g. 8192 on CPU); None = no cap
    memory: bool = True
    memory_fraction: float = 0.6  # skip an n whose eager n x n scores would need more of the free memory
    find_max_batch: bool = False  # CUDA only: binary-search the largest batch of each model (as the paper)
    max_batch_limit: int = 4096
    dtype: str = "fp32"
    device: str = "auto"
    seed: int = 0


def build_model(kind: str, n: int, k: int | None, s: InferenceSettings) -> nn.Module:
    """One of the four models, in eval mode, for sequences of up to n tokens."""
    if kind in ("linformer", "full"):
        return build_ours(size_of(s), n, kind, k, s.sharing).eval()
    if kind in ("eager", "roberta_sdpa"):
        return build_roberta(size_of(s), n, "eager" if kind == "eager" else "sdpa").eval()
    raise ValueError(f"unknown model kind {kind!r}; expected linformer or one of {BASELINES}")


def grid_cells(s: InferenceSettings) -> list[tuple[int, list[int]]]:
    """(n, [k < n]) for every n of the settings, before any trimming."""
    cells = []
    for n in sorted(s.ns):
        ks = [k for k in sorted(s.ks) if k < n]
        if ks:
            cells.append((n, ks))
    return cells


def estimate_seconds(n: int, ks: list[int], s: InferenceSettings, flops_per_s: float) -> float:
    """Planned wall-clock seconds of one n: warm-up, timed rounds and one memory run of every model."""
    per_round = 0.0
    for kind in s.baselines:
        attention = "full"
        per_round += _OVERHEAD[kind] * model_flops(n, s.hidden, s.ffn, s.layers, attention, batch=s.batch_size)
    for k in ks:
        per_round += _OVERHEAD["linformer"] * model_flops(
            n, s.hidden, s.ffn, s.layers, "linformer", k, s.sharing, s.batch_size
        )
    runs = max(1, s.warmup) + s.reps  # memory is measured on the (last) warm-up run
    build = _BUILD_S * (len(s.baselines) + len(ks)) * s.hidden * s.vocab / (768 * 50265)
    return runs * per_round / flops_per_s + build


def eager_scores_bytes(n: int, s: InferenceSettings) -> int:
    """Memory of the eager baseline's n x n tensors at their peak (scores, scaled scores, probabilities)."""
    itemsize = torch.tensor([], dtype=_DTYPES[s.dtype]).element_size()
    return 3 * s.batch_size * s.heads * n * n * itemsize


def plan_grid(
    s: InferenceSettings, flops_per_s: float, free_bytes: int
) -> tuple[list[tuple[int, list[int]]], list[tuple[int, str]]]:
    """Trim the grid to the device and the time budget: returns the kept (n, ks) and (n, reason) dropped.

    n are taken in increasing order while their planned time fits in ``budget_s``; an n above ``max_n`` or
    whose eager n x n tensors would need more than ``memory_fraction`` of the free memory is dropped.
    """
    kept, dropped, total = [], [], 0.0
    for n, ks in grid_cells(s):
        if s.max_n is not None and n > s.max_n:
            dropped.append((n, f"n > max_n={s.max_n}"))
            continue
        if "eager" in s.baselines and eager_scores_bytes(n, s) > s.memory_fraction * free_bytes:
            dropped.append((n, f"eager n x n scores need {eager_scores_bytes(n, s) / 2**30:.1f} GiB"))
            continue
        est = estimate_seconds(n, ks, s, flops_per_s)
        if total + est > s.budget_s:
            dropped.append((n, f"over the time budget ({total + est:.0f} s planned > {s.budget_s:.0f} s)"))
            continue
        kept.append((n, ks))
        total += est
    return kept, dropped


def calibrate_flops_per_s(device: torch.device, dtype: torch.dtype = torch.float32, size: int = 1024) -> float:
    """Matmul throughput of this device (FLOP/s), the yardstick for planning the grid."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b
    times = [timed(lambda: a @ b, device) for _ in range(5)]
    return 2 * size**3 / statistics.median(times)


def _forward(model: nn.Module, ids: torch.Tensor):
    with torch.inference_mode():
        return model(input_ids=ids)


def run_inference(s: InferenceSettings, progress: bool = True, log=print) -> tuple[list[dict], dict]:
    """Run the grid; returns one row per (n, k) cell and the run's metadata (machine, plan, dropped n)."""
    device = resolve_device(s.device)
    dtype = _DTYPES[s.dtype]
    torch.manual_seed(s.seed)
    rate = calibrate_flops_per_s(device, dtype)
    cells, dropped = plan_grid(s, rate, available_memory_bytes(device))
    planned = sum(estimate_seconds(n, ks, s, rate) for n, ks in cells)
    for n, why in dropped:
        log(f"[bench] n={n} dropped: {why}")
    log(f"[bench] grid: {[(n, ks) for n, ks in cells]}; planned {planned:.0f} s at {rate / 1e9:.0f} GFLOP/s matmul")
    total_runs = sum((len(s.baselines) + len(ks)) * (s.warmup + s.reps) for n, ks in cells)
    bar = tqdm(total=total_runs, desc="inference", disable=not progress, unit="fwd")
    rows: list[dict] = []
    start = time.perf_counter()
    for n, ks in cells:
        if time.perf_counter() - start > 1.5 * s.budget_s:  # the plan was far too optimistic: stop here
            dropped.append((n, "time budget exhausted during the run"))
            continue
        ids = torch.randint(3, s.vocab, (s.batch_size, n), device=device)
        names = list(s.baselines) + [f"linformer@{k}" for k in ks]
        models = {}
        for name in names:
            kind, _, k = name.partition("@")
            models[name] = build_model(kind, n, int(k) if k else None, s).to(device=device, dtype=dtype)
        bar.set_postfix(n=n)
        mem: dict[str, int | None] = {name: None for name in names}
        for name in names:  # warm-up (first-call allocations, kernel selection); its peak memory is recorded
            for i in range(s.warmup):
                fwd = lambda m=models[name], x=ids: _forward(m, x)
                if s.memory and i == s.warmup - 1:
                    mem[name] = peak_memory_bytes(fwd, device)
                else:
                    fwd()
                bar.update(1)
        if s.memory and s.warmup == 0:
            mem = {name: peak_memory_bytes(lambda m=models[name], x=ids: _forward(m, x), device) for name in names}
        fwds = {name: (lambda m=models[name], x=ids: _forward(m, x)) for name in names}
        t = interleaved_medians(fwds, s.reps, device, on_call=lambda: bar.update(1))
        max_batch = {}
        if s.find_max_batch and device.type == "cuda":
            for name in names:
                def try_batch(b, m=models[name], n=n):
                    _forward(m, torch.randint(3, s.vocab, (b, n), device=device))
                    synchronize(device)
                max_batch[name] = max_batch_that_fits(try_batch, limit=s.max_batch_limit)
        for k in ks:
            rows.append(_row(n, k, s, t, mem, max_batch))
        del models
        if device.type == "cuda":
            torch.cuda.empty_cache()
    bar.close()
    meta = {
        "machine": machine_description(device),
        "matmul_gflops": rate / 1e9,
        "planned_s": planned,
        "elapsed_s": time.perf_counter() - start,
        "dropped": dropped,
        "settings": s,
    }
    return rows, meta


def _ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def _row(n: int, k: int, s: InferenceSettings, t: dict, mem: dict, max_batch: dict) -> dict:
    lin = f"linformer@{k}"
    mb = lambda b: None if b is None else b / 2**20
    row = {
        "n": n, "k": k, "batch_size": s.batch_size, "layers": s.layers, "hidden": s.hidden, "heads": s.heads,
        "ffn": s.ffn, "sharing": s.sharing, "dtype": s.dtype,
        "time_linformer_s": t[lin],
    }
    for kind in BASELINES:
        row[f"time_{kind}_s"] = t.get(kind)
    row["mem_linformer_mib"] = mb(mem.get(lin))
    for kind in BASELINES:
        row[f"mem_{kind}_mib"] = mb(mem.get(kind))
    row["flop_ratio"] = flop_ratio(n, k, s.hidden, s.ffn, s.sharing)
    row["speedup_vs_full"] = _ratio(t.get("full"), t[lin])
    row["speedup_vs_eager"] = _ratio(t.get("eager"), t[lin])
    row["speedup_over_flop_ratio"] = _ratio(row["speedup_vs_full"], row["flop_ratio"])
    row["full_vs_roberta_sdpa"] = _ratio(t.get("roberta_sdpa"), t.get("full"))  # > 1: ours is faster
    row["mem_saved_vs_full"] = _ratio(mem.get("full"), mem.get(lin))
    row["mem_saved_vs_eager"] = _ratio(mem.get("eager"), mem.get(lin))
    row["paper_time_saved"] = paper_value(PAPER_TIME_SAVED, n, k)
    row["paper_mem_saved"] = paper_value(PAPER_MEMORY_SAVED, n, k)
    if max_batch:
        row["max_batch_linformer"] = max_batch.get(lin)
        for kind in BASELINES:
            row[f"max_batch_{kind}"] = max_batch.get(kind)
    return row


__all__ = [
    "BASELINES",
    "InferenceSettings",
    "build_model",
    "calibrate_flops_per_s",
    "estimate_seconds",
    "grid_cells",
    "plan_grid",
    "run_inference",
]
