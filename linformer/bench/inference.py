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
round and reverses every other round: ``common.round_order``), so machine noise hits all models alike; the median is
reported, with the lowest and highest round (``time_*_min_s``, ``time_*_max_s``) and, for each speed ratio, the lowest
and highest of its per-round ratios (``<ratio>_min``, ``<ratio>_max``: both models of a round were timed side by
side). Memory, the column the ratios use: on CPU the peak of live tensors a forward adds (``common.peak_tensor_bytes``:
the profiler's record, the same figure every run), beside the process's resident-set peak (``rss_*_mib``,
``common.peak_memory_bytes``: one reading, which moves by tens of percent between runs on a busy machine); on CUDA
``torch.cuda.max_memory_allocated``.
With ``reference_dtype`` (e.g. fp32 beside a bf16 run) full attention and the Linformer also run in that dtype in
the same rounds: what the dtype alone gains, and the Linformer in ``dtype`` against full attention as it runs today.
With ``tokens_per_batch`` every n runs ``tokens_per_batch // n`` sequences (at least one), so a GPU is kept busy at
short n instead of timing kernel launches. With ``find_max_batch`` (CUDA) each model's largest batch is searched, as
the paper measured memory ("memory saved" = ratio of the largest batches).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass, field

import torch
from torch import nn

from ..devices import DTYPES, resolve_device
from ..errors import ConfigError, Preempted
from ..modeling.flops import flop_ratio, forward_flops_per_token, model_flops
from ..progress import progress_bar
from .common import (
    available_memory_bytes,
    beyond_flop_bound,
    flop_bound_warning,
    free_memory,
    interleaved_rounds,
    load_average,
    machine_description,
    max_batch_that_fits,
    peak_memory_bytes,
    peak_tensor_bytes,
    round_ratio_range,
    synchronize,
    thread_range,
    threads_words,
    timed,
)
from .models import build_ours, build_peer, build_roberta, linformer_fields, ours_config, size_of, with_kernel
from .paper import PAPER_MEMORY_SAVED, PAPER_TIME_SAVED, paper_value

LINFORMER_KERNELS = ("sdpa", "flex_attention")  # attn_implementation of the Linformer rows (full keeps sdpa)
PEERS = ("modernbert", "longformer")  # the long-document encoders users pick instead: opt-in (baselines=[...])
DEFAULT_BASELINES = ("full", "eager", "roberta_sdpa")
BASELINES = (*DEFAULT_BASELINES, *PEERS)
# Rough cost of each model relative to its analytic FLOPs at GEMM speed, for planning the grid only.
_OVERHEAD = {"linformer": 1.3, "full": 1.6, "eager": 2.2, "roberta_sdpa": 1.6, "modernbert": 1.4, "longformer": 2.5}
_BUILD_S = 1.5  # seconds to build and initialise one base-width model (50k-word embedding) on a CPU


@dataclass
class InferenceSettings:
    ns: list[int] = field(default_factory=lambda: [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536])
    ks: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048])
    batch_size: int = 1
    tokens_per_batch: int | None = None  # batch = tokens_per_batch // n per n (at least 1); None: batch_size
    layers: int = 2
    hidden: int = 768
    heads: int = 12
    ffn: int = 3072
    vocab: int = 50265
    sharing: str = "layerwise"
    baselines: list[str] = field(default_factory=lambda: list(DEFAULT_BASELINES))
    reps: int = 3
    warmup: int = 1
    budget_s: float = 900.0  # planned wall-clock seconds for the grid; larger n are dropped to fit
    max_n: int | None = None  # hard cap on n (e.g. 8192 on CPU); None = no cap
    memory: bool = True
    memory_fraction: float = 0.6  # skip an n whose eager n x n scores would need more of the free memory
    find_max_batch: bool = False  # CUDA only: binary-search the largest batch of each model (as the paper)
    max_batch_limit: int = 4096  # sequences
    max_batch_tokens: int | None = None  # and at most this many tokens (a search costs a forward at its batch)
    max_batch_max_n: int | None = None  # search only up to this n (full attention's forward grows as n^2)
    max_batch_tolerance: float = 0.05  # stop bisecting once the largest fitting batch is known to this fraction
    max_batch_models: list[str] = field(default_factory=lambda: ["linformer", "full", "eager"])
    dtype: str = "fp32"
    reference_dtype: str | None = None  # also full attention and the Linformer in this dtype, side by side
    device: str = "auto"
    seed: int = 0
    local_window: int = 0  # the Linformer's exact local keys (LinformerConfig.local_window; 0: the paper's)
    global_positions: list[int] | None = None  # ... and its global tokens (e.g. [0, -1])
    landmark_pooling: bool = False  # ... with its projected keys pooled by attention (LinformerConfig.landmark_pooling)
    linformer_attn_implementation: str = "sdpa"  # the Linformer rows' kernel: sdpa (blocked) or flex_attention


def build_model(kind: str, n: int, k: int | None, s: InferenceSettings) -> nn.Module:
    """A model of `kind` (linformer or one of BASELINES), in eval mode, for sequences of up to n tokens."""
    if kind in ("linformer", "full"):
        if kind == "full":
            return build_ours(size_of(s), n, kind, k, s.sharing).eval()
        model = build_ours(size_of(s), n, kind, k, s.sharing, **linformer_fields(s)).eval()
        return with_kernel(model, s.linformer_attn_implementation)
    if kind in ("eager", "roberta_sdpa"):
        return build_roberta(size_of(s), n, "eager" if kind == "eager" else "sdpa").eval()
    if kind in PEERS:
        return build_peer(kind, size_of(s), n).eval()
    raise ValueError(f"unknown model kind {kind!r}; expected linformer or one of {BASELINES}")


def batch_of(n: int, s: InferenceSettings) -> int:
    """Sequences per timed forward at length n."""
    return max(1, s.tokens_per_batch // n) if s.tokens_per_batch else s.batch_size


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
    per_round, batch = 0.0, batch_of(n, s)
    for kind in s.baselines:
        per_round += _OVERHEAD[kind] * model_flops(n, s.hidden, s.ffn, s.layers, "full", batch=batch)
    for k in ks:
        per_round += _OVERHEAD["linformer"] * model_flops(n, s.hidden, s.ffn, s.layers, "linformer", k, s.sharing,
                                                          batch)
    if reference(s):  # the same full and Linformer models again, in the reference dtype
        per_round += _OVERHEAD["full"] * model_flops(n, s.hidden, s.ffn, s.layers, "full", batch=batch) * (
            "full" in s.baselines)
        per_round += sum(_OVERHEAD["linformer"] * model_flops(n, s.hidden, s.ffn, s.layers, "linformer", k, s.sharing,
                                                              batch) for k in ks)
    runs = max(1, s.warmup) + s.reps + int(s.memory)  # warm-up, timed rounds, one forward for the memory
    build = _BUILD_S * models_per_n(ks, s) * s.hidden * s.vocab / (768 * 50265)
    return runs * per_round / flops_per_s + build


def reference(s: InferenceSettings) -> str | None:
    """The dtype the full and Linformer models also run in (None: none, or the run's own)."""
    return s.reference_dtype if s.reference_dtype not in (None, s.dtype) else None


def models_per_n(ks: list[int], s: InferenceSettings) -> int:
    """Models timed at one n: the baselines, a Linformer per k, and full attention and those again in the reference
    dtype."""
    return len(s.baselines) + len(ks) + (len(ks) + ("full" in s.baselines)) * bool(reference(s))


def eager_scores_bytes(n: int, s: InferenceSettings, batch: int | None = None) -> int:
    """Memory of the eager baseline's n x n tensors at their peak (scores, scaled scores, probabilities)."""
    itemsize = torch.tensor([], dtype=DTYPES[s.dtype]).element_size()
    return 3 * (batch or batch_of(n, s)) * s.heads * n * n * itemsize


def eager_fits(n: int, s: InferenceSettings, free_bytes: int, batch: int | None = None) -> bool:
    return eager_scores_bytes(n, s, batch) <= s.memory_fraction * free_bytes


def plan_grid(
    s: InferenceSettings, flops_per_s: float, free_bytes: int
) -> tuple[list[tuple[int, list[int]]], list[tuple[int, str]]]:
    """Trim the grid to the device and the time budget: returns the kept (n, ks) and (n, reason) dropped.

    n are taken in increasing order while their planned time fits in ``budget_s``; an n above ``max_n`` is
    dropped. Where the eager baseline's n x n tensors would need more than ``memory_fraction`` of the free memory,
    only that baseline is left out at that n (a dropped entry names it; the other models still run).
    """
    kept, dropped, total = [], [], 0.0
    for n in sorted(s.ns):  # a k >= n has nothing to project at that n: said, not silently left out
        beyond = [k for k in sorted(s.ks) if k >= n]
        if beyond:
            dropped.append((n, f"k={', '.join(map(str, beyond))} only: k >= n leaves nothing to project"))
    for n, ks in grid_cells(s):
        if s.max_n is not None and n > s.max_n:
            dropped.append((n, f"n > max_n={s.max_n}"))
            continue
        cell = s
        if "eager" in s.baselines and not eager_fits(n, s, free_bytes):
            need = eager_scores_bytes(n, s) / 2**30
            dropped.append((n, f"eager baseline only: its n x n scores need {need:.1f} GiB"))
            cell = dataclasses.replace(s, baselines=[b for b in s.baselines if b != "eager"])
        est = estimate_seconds(n, ks, cell, flops_per_s)
        if total + est > s.budget_s:
            dropped.append((n, f"over the time budget ({total + est:.0f} s planned > {s.budget_s:.0f} s)"))
            continue
        kept.append((n, ks))
        total += est
    return kept, dropped


CALIBRATION_SECONDS = 0.2  # the longest one calibration product may take: the plan needs a rate, not a benchmark


def calibrate_flops_per_s(device: torch.device, dtype: torch.dtype = torch.float32, size: int = 1024) -> float:
    """Matmul throughput of this device (FLOP/s), the yardstick for planning the grid: the median of five size x size
    products, or of smaller ones where one would take over CALIBRATION_SECONDS (bf16 on a CPU without native bf16 is
    over ten times slower than fp32: a 1024-wide product takes seconds), as a 256-wide probe predicts."""
    probe = min(256, size)
    a = torch.randn(probe, probe, device=device, dtype=dtype)
    a @ a
    predicted = timed(lambda: a @ a, device) * (size / probe) ** 3
    if predicted > CALIBRATION_SECONDS:
        size = max(probe, int(size * (CALIBRATION_SECONDS / predicted) ** (1 / 3)) // 64 * 64)
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
    dtype = DTYPES[s.dtype]
    torch.manual_seed(s.seed)
    load = load_average()
    rate = calibrate_flops_per_s(device, dtype, size=4096 if device.type == "cuda" else 1024)  # a GPU-sized GEMM
    free = available_memory_bytes(device)
    cells, dropped = plan_grid(s, rate, free)
    if not cells:  # every n over the budget: refused before anything is written, as any other empty grid
        raise ConfigError(f"inference.budget_s={s.budget_s:g}: nothing would be measured, "
                          + "; ".join(f"n={n} {why}" for n, why in dropped)
                          + ": raise inference.budget_s, or give smaller inference.ns.")
    planned = sum(estimate_seconds(n, ks, s, rate) for n, ks in cells)
    for n, why in dropped:
        log(f"[bench] n={n} dropped: {why}")
    log(f"[bench] grid: {[(n, ks) for n, ks in cells]}; planned {planned:.0f} s at {rate / 1e9:.0f} GFLOP/s matmul")
    ref = reference(s)
    total_runs = sum(models_per_n(ks, s) * (max(s.warmup, 1) + s.reps) for n, ks in cells)
    bar = progress_bar(None if progress else False, total=total_runs, desc="inference", unit="fwd")
    rows: list[dict] = []
    start, stop = time.perf_counter(), None
    total_cells = sum(len(ks) for _, ks in cells)
    for i, (n, ks) in enumerate(cells):
        if time.perf_counter() - start > 1.5 * s.budget_s:  # the plan was far too optimistic: stop here
            dropped.append((n, "time budget exhausted during the run"))
            continue
        t0 = time.perf_counter()
        try:
            measured, timed = _measure_n(n, ks, s, device, free, ref, bar, dropped)
            rows += measured
        except Preempted as err:  # SIGTERM or Ctrl-C (bench.cli): the cells measured so far are kept and written
            stop = err.with_traceback(None)  # not its frames: they hold the models
            dropped += [(m, "the run was stopped before it was measured") for m, _ in cells[i:]]
            break
        finally:
            free_memory(device)
        # each n's line, as throughput's per block: the progress where stderr is a log file (no bar there), and a
        # record in benchmark.log; cleared from under a terminal's bar, which is drawn again after it
        with bar.external_write_mode():
            log(f"[bench] inference n={n}: {timed} models, {time.perf_counter() - t0:.1f} s "
                f"({len(rows)} of {total_cells} cells)")
    bar.close()
    machine = machine_description(device, load)
    for line in beyond_flops_warnings(rows, machine):
        log(line)
    meta = {
        "machine": machine,
        "matmul_gflops": rate / 1e9,
        "planned_s": planned,
        "elapsed_s": time.perf_counter() - start,
        "dropped": dropped,
        "settings": s,
        "stop": stop,
    }
    return rows, meta


def _measure_n(n: int, ks: list[int], s: InferenceSettings, device, free: int, ref: str | None, bar,
               dropped: list) -> tuple[list[dict], int]:
    """One n of the grid: every model built, warmed up and timed side by side; (one row per k, the models timed)."""
    batch = batch_of(n, s)
    ids = torch.randint(3, s.vocab, (batch, n), device=device)
    baselines = [b for b in s.baselines if b != "eager" or eager_fits(n, s, free)]
    names = baselines + [f"linformer@{k}" for k in ks]
    if ref:  # "full:fp32", "linformer@128:fp32": the same models in the reference dtype
        names += [f"{name}:{ref}" for name in names if name == "full" or name.startswith("linformer@")]
    models = {}
    for name in names:
        kind_k, _, in_dtype = name.partition(":")
        kind, _, k = kind_k.partition("@")
        with device:  # initialised where it runs: a base-width model builds in seconds on a CPU
            models[name] = build_model(kind, n, int(k) if k else None, s).to(dtype=DTYPES[in_dtype or s.dtype])
    bar.set_postfix(n=n, batch=batch)
    mem, rss = _warm_up(models, ids, s, device, bar, lambda why: dropped.append((n, f"{why} at batch {batch}")))
    names = list(models)  # without a baseline that ran out of memory
    fwds = {name: (lambda m=models[name], x=ids: _forward(m, x)) for name in names}
    used: dict[str, list[int]] = {}
    rounds = interleaved_rounds(fwds, s.reps, device, on_call=lambda: bar.update(1), threads_used=used)
    max_batch = {}
    if s.find_max_batch and device.type == "cuda" and (s.max_batch_max_n is None or n <= s.max_batch_max_n):
        del ids
        max_batch = _max_batches(models, n, s, device, bar)
    return [_row(n, k, batch, s, rounds, mem, max_batch, used, rss) for k in ks], len(names)


def _warm_up(models: dict, ids: torch.Tensor, s: InferenceSettings, device, bar,
             drop) -> tuple[dict[str, int | None], dict[str, int | None]]:
    """Each model's warm-up forwards (first-call allocations, kernel selection), then its peak memory on forwards of
    its own (one-off allocations not counted): ({name: peak bytes the ratios use}, {name: the process's resident-set
    peak, CPU only}), None where not measured. On CPU the first is the peak of live tensors (peak_tensor_bytes: the
    same figure every run; one resident-set reading moves by tens of percent on a busy machine), on CUDA
    max_memory_allocated (peak_memory_bytes). A baseline that runs out of memory is removed from `models` and named
    to `drop`; a Linformer that does is an error."""
    mem: dict[str, int | None] = {name: None for name in models}
    rss: dict[str, int | None] = {name: None for name in models}
    for name in list(models):
        fwd = lambda m=models[name], x=ids: _forward(m, x)
        try:
            for _ in range(max(s.warmup, 1)):
                fwd()
                bar.update(1)
            if s.memory:
                if device.type == "cuda":
                    mem[name] = peak_memory_bytes(fwd, device)
                else:
                    rss[name] = peak_memory_bytes(fwd, device)
                    mem[name] = peak_tensor_bytes(fwd, device)
        except torch.OutOfMemoryError:
            if name.startswith("linformer"):
                raise
            drop(f"{name} baseline only: out of memory")
            del models[name]
            free_memory(device)
    return mem, rss


def _max_batches(models: dict, n: int, s: InferenceSettings, device, bar) -> dict[str, int]:
    """{model name: the largest batch of n tokens that fits (doubling, then bisecting), "limit": the search's cap}
    for the models of ``s.max_batch_models``."""
    limit = s.max_batch_limit if not s.max_batch_tokens else min(s.max_batch_limit, s.max_batch_tokens // n)
    found: dict[str, int] = {}
    for name, model in models.items():
        if name.partition("@")[0] not in s.max_batch_models or ":" in name:  # not the reference dtype's copies
            continue

        def try_batch(b, m=model):
            _forward(m, torch.randint(3, s.vocab, (b, n), device=device))
            synchronize(device)
        bar.set_postfix(n=n, max_batch=name)
        found[name] = max_batch_that_fits(try_batch, limit=max(1, limit), tolerance=s.max_batch_tolerance)
    found["limit"] = limit
    return found


def _ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def _flop_ratio(n: int, k: int, s: InferenceSettings) -> float:
    """Full-attention FLOPs / the Linformer row's FLOPs (its local and global keys counted)."""
    if not linformer_fields(s):
        return flop_ratio(n, k, s.hidden, s.ffn, s.sharing)
    size = size_of(s)
    full = forward_flops_per_token(ours_config(size, n, "full"), n)
    return full / forward_flops_per_token(ours_config(size, n, "linformer", k, s.sharing, **linformer_fields(s)), n)


def beyond_flops_warnings(rows: list[dict], machine: dict) -> list[str]:
    """A warning line for each cell whose speed-up over full attention beats its FLOP ratio by far
    (common.beyond_flop_bound), naming the load and the threads each model ran with."""
    return [flop_bound_warning(f"n={r['n']}, k={r['k']}", r["speedup_vs_full"], r["flop_ratio"],
                               machine.get("load_average", "load average unknown"),
                               f"the Linformer at {threads_words(r.get('threads_linformer'))} and full attention at "
                               f"{threads_words(r.get('threads_full'))}")
            for r in rows if beyond_flop_bound(r.get("speedup_vs_full"), r.get("flop_ratio"))]


def _row(n: int, k: int, batch: int, s: InferenceSettings, rounds: dict[str, list[float]], mem: dict,
         max_batch: dict, used: dict | None = None, rss: dict | None = None) -> dict:
    """One (n, k) cell from each model's per-round seconds (common.interleaved_rounds), the peak memory its ratios
    use (`mem`) and, on CPU, the process's resident-set peak (`rss`)."""
    lin = f"linformer@{k}"
    t = {name: statistics.median(times) for name, times in rounds.items()}
    used = used or {}
    mb = lambda b: None if b is None else b / 2**20
    row = {
        "n": n, "k": k, "batch_size": batch, "layers": s.layers, "hidden": s.hidden, "heads": s.heads,
        "ffn": s.ffn, "sharing": s.sharing, "dtype": s.dtype,
        "time_linformer_s": t[lin],
    }
    # the CPU threads each timed model ran with: under the adaptive policy the Linformer's follow the free cores
    row["threads_linformer"] = thread_range(used.get(lin, []))
    row["threads_full"] = thread_range(used.get("full", []))
    for kind in BASELINES:
        row[f"time_{kind}_s"] = t.get(kind)
    row["mem_linformer_mib"] = mb(mem.get(lin))
    for kind in BASELINES:
        row[f"mem_{kind}_mib"] = mb(mem.get(kind))
    row["flop_ratio"] = _flop_ratio(n, k, s)
    row["speedup_vs_full"] = _ratio(t.get("full"), t[lin])
    row["speedup_vs_eager"] = _ratio(t.get("eager"), t[lin])
    row["speedup_over_flop_ratio"] = _ratio(row["speedup_vs_full"], row["flop_ratio"])
    row["full_vs_roberta_sdpa"] = _ratio(t.get("roberta_sdpa"), t.get("full"))  # > 1: ours is faster
    row["mem_saved_vs_full"] = _ratio(mem.get("full"), mem.get(lin))
    row["mem_saved_vs_eager"] = _ratio(mem.get("eager"), mem.get(lin))
    for kind in PEERS:  # > 1: the Linformer is faster / holds less
        row[f"speedup_vs_{kind}"] = _ratio(t.get(kind), t[lin])
        row[f"mem_saved_vs_{kind}"] = _ratio(mem.get(kind), mem.get(lin))
    ref = reference(s)
    if ref:
        row["reference_dtype"] = ref
        for model, name in (("full", f"full:{ref}"), ("linformer", f"{lin}:{ref}")):
            row[f"time_{model}_ref_s"], row[f"mem_{model}_ref_mib"] = t.get(name), mb(mem.get(name))
        # the Linformer in this dtype against full attention in the reference dtype: what a user gains over today
        row["speedup_vs_full_ref"] = _ratio(t.get(f"full:{ref}"), t[lin])
        row["mem_saved_vs_full_ref"] = _ratio(mem.get(f"full:{ref}"), mem.get(lin))
        # the dtype alone, each model against itself in the reference dtype
        row["dtype_speedup_linformer"] = _ratio(t.get(f"{lin}:{ref}"), t[lin])
        row["dtype_speedup_full"] = _ratio(t.get(f"full:{ref}"), t.get("full"))
    # the spread of the timed rounds, after the columns of earlier runs' CSVs: each model's fastest and slowest round,
    # and each speed ratio's lowest and highest per-round ratio
    ratios = {"speedup_vs_full": ("full", lin), "speedup_vs_eager": ("eager", lin),
              "full_vs_roberta_sdpa": ("roberta_sdpa", "full"), **{f"speedup_vs_{kind}": (kind, lin) for kind in PEERS}}
    if ref:
        ratios.update(speedup_vs_full_ref=(f"full:{ref}", lin), dtype_speedup_linformer=(f"{lin}:{ref}", lin),
                      dtype_speedup_full=(f"full:{ref}", "full"))
    spread = {}
    for model, name in (("linformer", lin), *((kind, kind) for kind in BASELINES),
                        *((f"{model}_ref", f"{name}:{ref}") for model, name in (("full", "full"), ("linformer", lin))
                          if ref)):
        if rounds.get(name):
            spread[f"time_{model}_min_s"], spread[f"time_{model}_max_s"] = min(rounds[name]), max(rounds[name])
    for key, (num, den) in ratios.items():
        found = round_ratio_range(rounds.get(num), rounds.get(den))
        if found is not None:
            spread[f"{key}_min"], spread[f"{key}_max"] = found
    row["paper_time_saved"] = paper_value(PAPER_TIME_SAVED, n, k)
    row["paper_mem_saved"] = paper_value(PAPER_MEMORY_SAVED, n, k)
    if max_batch:
        row["max_batch_limit"] = max_batch["limit"]  # a model at the limit fits at least that many
        row["max_batch_linformer"] = max_batch.get(lin)
        for kind in BASELINES:
            row[f"max_batch_{kind}"] = max_batch.get(kind)
        row["max_batch_ratio_vs_full"] = _ratio(max_batch.get(lin), max_batch.get("full"))
        row["max_batch_ratio_vs_eager"] = _ratio(max_batch.get(lin), max_batch.get("eager"))
    row.update(spread)
    rss = rss or {}
    for model, name in (("linformer", lin), *((kind, kind) for kind in BASELINES)):
        if rss.get(name) is not None:  # CPU: the resident-set peak beside the tensors' (not what the ratios use)
            row[f"rss_{model}_mib"] = mb(rss[name])
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
