"""Write benchmark results: CSV, a markdown table laid out like the paper's Table 3, and a log-log plot."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from .. import plots
from ..files.atomic import atomic_write, save_figure
from ..files.tables import table_lines, table_row
from ..modeling.values import round_up
from .common import BEYOND_FLOPS, beyond_flop_bound, warning_paragraph
from .inference import BASELINES, PEERS, beyond_flops_warnings, reference
from .models import label, linformer_fields
from .paper import PAPER_KS, PAPER_MEMORY_SAVED, PAPER_TIME_SAVED
from .throughput import Variant


def write_csv(rows: list[dict], path: str | Path) -> Path:
    """The rows as CSV, their keys as the header; no rows (a run stopped before its first): the header n, k."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = [] if rows else ["n", "k"]
    for row in rows:
        fields += [f for f in row if f not in fields]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=fields)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(v) for k, v in row.items()})
    atomic_write(path, text.getvalue())
    return path


def read_csv(path: str | Path) -> list[dict]:
    """The rows of a CSV that write_csv wrote, each value's type back as far as the text tells it: an empty cell
    None, True/False a bool, a number an int or a float, anything else the text."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: _csv_parsed(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _csv_parsed(text: str):
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _csv_value(v):
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else v


def _x(v, digits: int = 2) -> str:
    if v is None:
        return "-"
    return f"{v:.{digits}g}x" if v >= 10 else f"{v:.{digits - 1}f}x"


def _s(v) -> str:
    return "-" if v is None else (f"{v * 1000:.0f} ms" if v < 10 else f"{v:.1f} s")


def _xr(r: dict, key: str) -> str:
    """A speed ratio of a row, with the lowest and highest of its per-round ratios in brackets where the row has them
    (``<key>_min``, ``<key>_max``; rows of runs before they were recorded have none): "1.2x (1.15-1.31)"."""
    lo, hi = r.get(f"{key}_min"), r.get(f"{key}_max")
    spread = "" if lo is None or hi is None else (f" ({lo:.3g}-{hi:.3g})" if hi >= 10 else f" ({lo:.2f}-{hi:.2f})")
    return _x(r.get(key)) + spread


def _sr(r: dict, model: str) -> str:
    """A model's median forward time of a row (``time_<model>_s``), with its fastest and slowest round in brackets
    where the row has them: "820 ms (790-850)"."""
    v, lo, hi = r.get(f"time_{model}_s"), r.get(f"time_{model}_min_s"), r.get(f"time_{model}_max_s")
    if v is None or lo is None or hi is None:
        return _s(v)
    return _s(v) + (f" ({lo * 1000:.0f}-{hi * 1000:.0f})" if v < 10 else f" ({lo:.1f}-{hi:.1f})")


def _mem(r: dict, model: str) -> str:
    """A model's peak memory of a row (``mem_<model>_mib``), with the process's resident-set peak in brackets where
    the row has it (CPU): "33 MiB (RSS 46)"."""
    rss = r.get(f"rss_{model}_mib")
    return f"{_mib(r.get(f'mem_{model}_mib'))} MiB" + ("" if rss is None else f" (RSS {_mib(rss)})")


def _mib(v) -> str:
    return "-" if v is None else f"{v:.0f}"


def thread_policy(machine: dict) -> str:
    """The machine line's note of how our models' CPU inference chose its threads (benchmark key cpu_threads);
    nothing for a GPU or a record made before the key."""
    if machine.get("device") != "cpu" or "cpu_thread_policy" not in machine:
        return ""
    if machine["cpu_thread_policy"] == "adaptive":
        return ("; our Linformers' inference fitted to the cores other processes leave free (cpu_threads=adaptive; "
                "full attention and the HF models keep torch's setting)")
    return "; every model at torch's setting (cpu_threads=fixed)"


def competing(machine: dict) -> str:
    """The machine line's note of the busy processes the benchmark started beside the measurement (benchmark key
    competing) and of the machine's load, which counts everyone's processes (a record made before the key has
    none)."""
    count = int(machine.get("competing_processes") or 0)
    started = f", beside {count} competing one-thread busy process{'es' if count > 1 else ''} it started" \
        if count else ""
    return started + (f", {machine['load_average']}" if machine.get("load_average") else "")


def machine_words(m: dict) -> str:
    """A benchmark's machine (common.machine_description) in words: CPU, cores, threads, memory, the busy processes
    it started and the machine's load, the CPU thread policy, the device and the library versions."""
    return (f"{m.get('cpu')} ({m.get('cpu_cores')} cores, {m.get('torch_threads')} torch threads, "
            f"{m.get('memory_gib', '?')} GiB){competing(m)}{thread_policy(m)}, device `{m.get('device')}`"
            + (f" ({m['gpu']})" if "gpu" in m else "")
            + f"; torch {m.get('torch')}, transformers {m.get('transformers')}, Python {m.get('python')}")


def _thread_lines(rows: list[dict], machine: dict) -> list[str]:
    """The CPU threads each cell's Linformer and full attention ran with, and a warning for each cell whose speed-up
    beats its FLOP ratio by far (inference.beyond_flops_warnings)."""
    out = []
    if machine.get("device") == "cpu" and any(r.get("threads_linformer") for r in rows):
        out += ["", "CPU threads per timed forward (Linformer / full attention): " + "; ".join(
            f"n={r['n']}, k={r['k']}: {r['threads_linformer']} / {r.get('threads_full') or '-'}" for r in rows) + "."]
    warnings = beyond_flops_warnings(rows, machine)
    if warnings:
        out += ["", *map(warning_paragraph, warnings)]
    return out


def _cell_table(rows: list[dict], ks: list[int], fmt) -> list[str]:
    lines = table_lines(["n", *(f"k = {k}" for k in ks)])
    by_n: dict[int, dict[int, dict]] = {}
    for r in rows:
        by_n.setdefault(r["n"], {})[r["k"]] = r
    for n in sorted(by_n):
        cells = [fmt(by_n[n][k]) if k in by_n[n] else "" for k in ks]
        lines.append(table_row([n, *cells]))
    return lines


def inference_markdown(rows: list[dict], meta: dict, command: str = "", paper_png: str | None = None) -> str:
    return "\n".join(_inference_header(meta, command) + inference_sections(rows, meta["settings"], meta["machine"],
                                                                           paper_png)) + "\n"


def inference_sections(rows: list[dict], s, machine: dict, paper_png: str | None = None) -> list[str]:
    """The report's tables below its header: against full attention, the peers and the reference dtype, the
    per-model times and memory, the largest batches, and the paper's Table 3 (the eager baseline's only where it was
    run), with `paper_png`, the figure of the measured against it, named under it."""
    ks = sorted({r["k"] for r in rows}) or sorted(s.ks)  # none measured (a stopped run): the ks asked for
    out: list[str] = []
    if not rows or any(r.get("time_eager_s") is not None for r in rows):  # a run without the eager baseline: none
        out += _eager_section(rows, ks)
    out += [
        "",
        "## Against today's standard attention (`F.scaled_dot_product_attention`)",
        "",
        ("Each cell: **measured speed-up / memory saved** of the Linformer against our model with "
        "`attention=\"full\"`, then *(analytic FLOP ratio)*: full-model FLOPs / Linformer FLOPs of a forward "
        "(QKV/output projections, score and value matmuls, E/F projections, FFN; see linformer/modeling/flops.py). "
        "A measured speed-up at or above the FLOP ratio means the Linformer realises all of its arithmetic saving; "
        "one more than twice the FLOP ratio is more than the saving explains (a loaded CPU, unequal thread counts) "
        "and is flagged below the table."),
        "",
    ]
    out += _cell_table(rows, ks, lambda r: (
        f"**{_xr(r, 'speedup_vs_full')} / {_x(r.get('mem_saved_vs_full'))}** *({_x(r.get('flop_ratio'))})*"
    ))
    out += _thread_lines(rows, machine)
    peers = [kind for kind in PEERS if any(r.get(f"time_{kind}_s") is not None for r in rows)]
    if peers:
        out += ["", "## Against the long-document encoders users pick instead", "",
                ("Each cell: **speed-up / memory saved** of the Linformer against " + " and ".join(
                    label(kind) for kind in peers) + " (same layers, width and heads; "
                 + ("ModernBERT's GLU feed-forward at 2/3 of our FFN width, which gives it our FFN's parameters and "
                    "FLOPs; " if "modernbert" in peers else "the same FFN; ")
                 + "random weights), measured side by side in this run. Above 1x the Linformer is faster / holds "
                 "less."), ""]
        for kind in peers:
            out += [f"{label(kind)}:", ""]
            out += _cell_table(rows, ks, lambda r, kind=kind: (
                f"**{_xr(r, f'speedup_vs_{kind}')} / {_x(r.get(f'mem_saved_vs_{kind}'))}**"))
            out += [""]
    if any(r.get("reference_dtype") for r in rows):
        ref = next(r["reference_dtype"] for r in rows if r.get("reference_dtype"))
        out += ["", f"## Against the same models in {ref}", "",
                (f"Each cell: **speed-up / memory saved** of the Linformer in {s.dtype} against full attention in "
                 f"{ref} (the model as it runs without the Linformer or the dtype), then *({s.dtype} alone: the "
                 f"Linformer's speed-up over itself in {ref}, full attention's over itself)*, measured side by side "
                 "in this run."), ""]
        out += _cell_table(rows, ks, lambda r: (
            f"**{_xr(r, 'speedup_vs_full_ref')} / {_x(r.get('mem_saved_vs_full_ref'))}** "
            f"*({_xr(r, 'dtype_speedup_linformer')}, {_xr(r, 'dtype_speedup_full')})*"))
    out += _per_model_table(rows, ks, s.sharing)
    if any(r.get("max_batch_linformer") is not None for r in rows):
        out += ["", "## Memory as the paper measured it: the largest batch that fits", "",
                ("Each cell: **largest batch ratio** Linformer / eager standard Transformer, then Linformer / our "
                 "full mode (SDPA), *(paper: memory saved)*, and the Linformer's largest batch. Found by doubling "
                 "then bisecting forward passes until out of memory (to within "
                 f"{s.max_batch_tolerance:.0%}); a batch at the search's limit is marked >=, as the model fits at least "
                 "that many: a ratio with the Linformer's batch at the limit is a lower bound (>=), with the other's "
                 "an upper bound (<=), and with both there the cell says \"both at the limit\" (limit over limit: "
                 "neither a bound nor a measurement)."), ""]
        out += _cell_table([r for r in rows if r.get("max_batch_linformer") is not None], ks, _max_batch_cell)
    out += ["", "## The paper's Table 3 (for reference)", ""]
    if linformer_fields(s):
        out += [("The paper's values are of its plain Linformer (k projected keys, no exact local or global keys) at "
                 "the base shape on a V100; this run's Linformer attends to exact local and global keys beside its "
                 "projected ones, another model, so they are no target for it (and no figure draws them beside it)."),
                ""]
    paper_rows = [{"n": n, "k": k, "t": PAPER_TIME_SAVED[n][i], "m": PAPER_MEMORY_SAVED[n][i]}
                  for n in PAPER_TIME_SAVED for i, k in enumerate(PAPER_KS) if i < len(PAPER_TIME_SAVED[n])]
    out += _cell_table(paper_rows, list(PAPER_KS), lambda r: f"{_x(r['t'])} / {_x(r['m'])}")
    if paper_png:
        out += ["", f"Plot of the measured speed-up and memory saved against these: `{paper_png}`."]
    return out


def _eager_section(rows: list[dict], ks: list[int]) -> list[str]:
    out = [
        "",
        "## Against the paper-era standard Transformer (eager n x n softmax)",
        "",
        ("Each cell: **time saved / memory saved** of the Linformer against HF RoBERTa with "
         "`attn_implementation=\"eager\"` (same size), then *(paper: time / memory)*. The paper's numbers are "
         "against its standard Transformer on a V100 (Wang et al. 2020, Table 3; the paper does not say how that "
         "computes attention: the eager n x n softmax is our stand-in), ours on the machine above. The two memory "
         "figures are different measures: ours is the ratio of the peak memory one forward adds at the batch above "
         "(see Memory), the paper's the ratio of the largest batches that fit (its section 5.3)."),
        "",
    ]
    return out + _cell_table(rows, ks, lambda r: (
        f"**{_xr(r, 'speedup_vs_eager')} / {_x(r.get('mem_saved_vs_eager'))}** "
        f"*({_x(r.get('paper_time_saved'))} / {_x(r.get('paper_mem_saved'))})*"
        if r.get("paper_time_saved") is not None else
        f"**{_xr(r, 'speedup_vs_eager')} / {_x(r.get('mem_saved_vs_eager'))}**"
    ))


def _inference_header(meta: dict, command: str) -> list[str]:
    """The lines above Table 3's tables: the machine, the model, how time and memory were measured, the command and
    the cells not measured."""
    s, m = meta["settings"], meta["machine"]
    out = [
        INFERENCE_TITLE,
        "",
        f"Machine: {machine_words(m)}.",
        model_line(s),
        (f"Timing: {s.warmup} warm-up, then {s.reps} interleaved rounds (every model once per round, order "
        "rotated, reversed every other round), median; in brackets the fastest and slowest round of each time, and "
        "the lowest and highest of each speed ratio's per-round ratios (the two models of a round ran side by side). "
        "Ratios are measured side by side in this one run."),
        (("Memory: peak bytes of live tensors a forward adds over the live model and inputs (torch.profiler's "
          "record of every allocation and free, replayed: the same figure every run; scratch space a kernel "
          "allocates and frees inside itself is not seen); every memory ratio uses it. In brackets the process's "
          "resident-set peak (VmHWM reset through /proc/self/clear_refs, after malloc_trim): one reading per model, "
          "which moves by tens of percent between runs on a busy machine. ")
         if m.get("device") == "cpu" else
         "Memory: peak memory a forward adds over the live model and inputs (`torch.cuda.max_memory_allocated`). ")
        + "Measured on forwards of its own after the warm-up (one-off allocations of the first calls excluded).",
    ]
    if meta.get("note"):
        out.append(meta["note"])
    if meta.get("stopped"):
        out += ["", f"**{meta['stopped']}**"]
    if command:
        out += ["", "Command:", "", "```bash", command, "```"]
    dropped = meta.get("dropped") or []
    if dropped:
        out += ["", "Not measured: " + "; ".join(f"n={n} ({why})" for n, why in dropped) + "."]
    return out


INFERENCE_TITLE = "# Table 3 reproduction: Linformer inference efficiency"


def model_line(s) -> str:
    """The report's "Model:" line: the shape, batch and dtype, and the Linformer's sharing, keys and kernel."""
    return (f"Model: {s.hidden} hidden, {s.heads} heads, FFN {s.ffn}, {s.layers} layers, "
        + (f"{s.tokens_per_batch} tokens per batch (batch = tokens // n, at least 1)" if s.tokens_per_batch
           else f"batch {s.batch_size}") + f", {s.dtype}"
        + (f" (full attention and the Linformer also in {reference(s)})" if reference(s) else "")
        + f"; Linformer with `sharing={s.sharing}` (one E = F, as the paper's "
        "Table 3)" + (f", exact local keys of w = {s.local_window} tokens and global tokens "
                      f"{list(s.global_positions or [])} beside the projected ones"
                      + (", the projected ones pooled by attention (landmark_pooling, length_policy=resample)"
                         if s.landmark_pooling else "") + " (their FLOPs in the FLOP ratio)"
                      if linformer_fields(s) else "")
        + (f", through `attn_implementation=\"{s.linformer_attn_implementation}\"`"
           if s.linformer_attn_implementation != "sdpa" else "")
        + ". Forward pass only (inference mode), random token ids, nothing padded.")


def _per_model_table(rows: list[dict], ks: list[int], sharing: str) -> list[str]:
    """Forward time and peak memory of every model per n, and our full mode against HF RoBERTa (SDPA)."""
    out = ["", "## Forward time and peak memory per model", ""]
    kinds = [b for b in BASELINES if rows and rows[0].get(f"time_{b}_s") is not None]
    ref = rows[0].get("reference_dtype") if rows else None
    head = ["n", "batch"] + [label(b) for b in kinds] + [label("linformer", k, sharing) for k in ks]
    if ref:  # the same models in the reference dtype
        head += [f"{label('full')} in {ref}"] * (rows[0].get("time_full_ref_s") is not None)
        head += [f"{label('linformer', k, sharing)} in {ref}" for k in ks]
    out += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    by_n: dict[int, dict[int, dict]] = {}
    for r in rows:
        by_n.setdefault(r["n"], {})[r["k"]] = r
    for n in sorted(by_n):
        first = next(iter(by_n[n].values()))
        cells = [f"{_sr(first, b)}, {_mem(first, b)}" for b in kinds]
        cells += [f"{_sr(by_n[n][k], 'linformer')}, {_mem(by_n[n][k], 'linformer')}"
                  if k in by_n[n] else "" for k in ks]
        if ref:
            if rows[0].get("time_full_ref_s") is not None:
                cells.append(f"{_sr(first, 'full_ref')}, {_mib(first.get('mem_full_ref_mib'))} MiB")
            cells += [f"{_sr(by_n[n][k], 'linformer_ref')}, {_mib(by_n[n][k].get('mem_linformer_ref_mib'))} MiB"
                      if k in by_n[n] else "" for k in ks]
        out.append(f"| {n} | {first['batch_size']} | " + " | ".join(cells) + " |")
    if any(r.get("full_vs_roberta_sdpa") is not None for r in rows):
        out += ["", "Our full-attention mode against HF RoBERTa (SDPA), time ratio (> 1: ours faster): "
                + ", ".join(f"n={n}: {_full_vs_roberta(next(iter(by_n[n].values())))}" for n in sorted(by_n)) + "."]
    return out


def _full_vs_roberta(r: dict) -> str:
    lo, hi = r.get("full_vs_roberta_sdpa_min"), r.get("full_vs_roberta_sdpa_max")
    return f"{r['full_vs_roberta_sdpa']:.2f}x" + ("" if lo is None or hi is None else f" ({lo:.2f}-{hi:.2f})")


def _max_batch_cell(r: dict) -> str:
    capped = lambda b: "-" if b is None else (f">={b}" if b == r.get("max_batch_limit") else str(b))
    paper = f" *({_x(r['paper_mem_saved'])})*" if r.get("paper_mem_saved") is not None else ""
    return (f"**{_batch_ratio(r, 'eager')}** / {_batch_ratio(r, 'full')}{paper}, "
            f"batch {capped(r.get('max_batch_linformer'))}")


def _batch_ratio(r: dict, other: str) -> str:
    """The Linformer's largest batch over `other`'s. A batch at the search's limit only says the model fits at
    least that many: over a measured batch that is a lower bound (>=), under one an upper bound (<=), and with
    both at the limit the ratio says nothing (limit over limit), so the cell says so instead of a number."""
    ratio, limit = r.get(f"max_batch_ratio_vs_{other}"), r.get("max_batch_limit")
    if ratio is None or limit is None:
        return _x(ratio)
    top_lin, top_other = r.get("max_batch_linformer") == limit, r.get(f"max_batch_{other}") == limit
    if top_lin and top_other:
        return "both at the limit"
    return (">=" if top_lin else "<=" if top_other else "") + _x(ratio)


def _pct(v) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _tokens(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _compile_cell(r: dict) -> str:
    if not r.get("compile"):
        return "off"
    if r.get("compile_s") is None:
        return "on"
    return f"on ({r['compile_s']:.0f} s)" if r["compile_s"] >= 0.5 else "on (compiled above)"


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _step_cell(r: dict) -> str:
    return f"failed: {_md_cell(r['error'])}" if r.get("error") else _s(r.get("step_s"))


def _variant_words(r: dict) -> str:
    return ", ".join([f"{r['precision']}", "torch.compile" if r["compile"] else "eager", f"{r['optimizer']} AdamW",
                      "sparse logits" if r["sparse_prediction"] else "full logits",
                      "attention_mask=None" if r["attention_mask"] == "none" else "all-ones attention_mask"])


def _tokens_per_step(s) -> str:
    """What a step of each n held: batch = max(1, tokens_per_step // n) sequences of n tokens."""
    used = {n: max(1, s.tokens_per_step // n) * n for n in s.ns}
    if set(used.values()) == {s.tokens_per_step}:
        return f"{s.tokens_per_step} tokens per step (batch = tokens // n)"
    return ("tokens per step: " + ", ".join(f"{t} at n = {n}" for n, t in used.items())
            + f" (batch = max(1, {s.tokens_per_step} // n))")


def throughput_markdown(rows: list[dict], meta: dict, command: str = "") -> str:
    s = meta["settings"]
    grid = [r for r in rows if r.get("section", "grid") == "grid"]
    levers = [r for r in rows if r.get("section") == "levers"]
    out = ["# Training throughput and MFU: one MLM step (forward, backward, clipping, AdamW)", "",
           *_throughput_setup(rows, s, meta["machine"])]
    if meta.get("note"):
        out.append(meta["note"])
    if meta.get("stopped"):
        out += ["", f"**{meta['stopped']}** Not measured: {'; '.join(meta.get('not_measured') or [])}."]
    if command:
        out += ["", "Command:", "", "```bash", command, "```"]
    out += _target_lines(meta.get("target") or {})
    if meta.get("beyond_n"):
        out += ["", "Not measured: " + "; ".join(f"the Linformer at n={n}, k={', '.join(map(str, ks))} (k >= n leaves "
                                                 "nothing to project)" for n, ks in meta["beyond_n"]) + "."]
    if meta.get("compiles_during_timing"):
        out += ["", (f"Warning: {meta['compiles_during_timing']} graph(s) were compiled during timed steps; raise "
                     "throughput.compile_warmup.")]
    memory = any(r.get("step_mem_gib") is not None for r in grid)
    out += ["", "## Throughput", "",
            "| n | precision | compile | model | batch | step | tokens/s | MFU | vs HF RoBERTa |"
            + (" step memory |" if memory else ""), "|---" * (10 if memory else 9) + "|"]
    for r in grid:
        mem = r.get("step_mem_gib")
        out.append(f"| {r['n']} | {r['precision']} | {_compile_cell(r)} | {r['label']} | {r['batch_size']} | "
                   f"{_step_cell(r)} | {_tokens(r.get('tokens_per_s'))} | {_pct(r.get('mfu'))} | "
                   f"{_x(r.get('speedup_vs_roberta'))} |" + ((" - |" if mem is None else f" {mem:.0f} GiB |")
                                                             if memory else ""))
    if memory:
        out += ["", ("Step memory: the most a step allocates above the live models and optimizer states "
                     "(`torch.cuda.max_memory_allocated`, last warm-up step).")]
    if levers:
        out += _levers_table(levers, s)
    if meta.get("profile"):
        out += ["", ("Where the time of the best configuration goes (torch.profiler, kernels by category): "
                     f"`{meta.get('profile_path', '<name>_profile.md')}`.")]
    out += ["", f"Run time: {meta.get('elapsed_s', 0):.0f} s, compilation included."]
    return "\n".join(out) + "\n"


def _throughput_setup(rows: list[dict], s, m: dict) -> list[str]:
    """The paragraphs that say what was timed: machine, model, step, timing and how MFU is counted."""
    shape = " (the RoBERTa-base shape)" if s.is_base_shape() else ""
    peaks = {r["precision"]: r["peak_tflops"] for r in rows if r.get("peak_tflops")}
    compiled_where = ""
    if True in s.compile:
        compiled_where = (" at n = " + ", ".join(str(n) for n in s.compile_ns) if s.compile_ns is not None else "") + (
            " in " + ", ".join(s.compile_precisions) if s.compile_precisions is not None else "")
    return [
        (f"Machine: {m.get('cpu')} ({m.get('cpu_cores')} cores, {m.get('torch_threads')} torch threads)"
         f"{competing(m)}, device `{m.get('device')}`" + (f" (**{m['gpu']}**)" if "gpu" in m else "")
         + f"; torch {m.get('torch')}, transformers {m.get('transformers')}, Python {m.get('python')}."),
        (f"Model: {s.layers} layers, width {s.hidden}, {s.heads} heads, FFN {s.ffn}{shape}, vocabulary {s.vocab}"
         + (f" (ours padded to {round_up(s.vocab, s.pad_vocab_to_multiple_of)} rows, the padding masked out)"
            if round_up(s.vocab, s.pad_vocab_to_multiple_of) > s.vocab else "") + ", "
         f"dropout {s.dropout}; {_tokens_per_step(s)}, random ids, nothing padded, "
         f"{int(s.mask_prob * 100)}% of positions labelled. Linformer: k = {', '.join(map(str, s.ks))}, sharing = "
         f"{s.sharing}"
         + (f", exact local keys of w = {s.local_window} tokens and global tokens {list(s.global_positions or [])}"
            if linformer_fields(s) else "")
         + (f", through `attn_implementation=\"{s.linformer_attn_implementation}\"`"
            if s.linformer_attn_implementation != "sdpa" else "")
         + ". Ours: LinformerForMaskedLM (SDPA attention unless said); HF RoBERTa: RobertaForMaskedLM "
         "(`attn_implementation=\"sdpa\"`), which computes the vocabulary logits at every position."),
        ("Step: the trainer's (forward, backward, gradients clipped to norm "
         f"{s.max_grad_norm}, the non-finite check, AdamW); bf16 = `torch.autocast` bf16 forward with fp32 weights and "
         "optimizer state; fp16 = autocast fp16 with a `torch.amp.GradScaler` (scaled backward, unscaled before "
         "clipping, `scaler.step`, `scaler.update`, as Accelerate does); fp32 = no autocast. "
         f"Grid: {s.optimizer} AdamW, {'sparse' if s.sparse_prediction else 'full'} MLM logits for ours, "
         f"attention_mask={'None' if s.attention_mask == 'none' else 'all ones'}; compile = `torch.compile(model, "
         f"dynamic=False{', mode=' + repr(s.compile_mode) if s.compile_mode else ''})`"
         + (f", compiled rows only{compiled_where}" if compiled_where else "") + "."),
        (f"Timing: {max(1, s.warmup)} warm-up step(s), {max(1, s.warmup, s.compile_warmup)} for a compiled model (its "
         "first step compiles; the compile time shown is that step's time less the median step), excluded; then "
         f"{s.steps} interleaved rounds per block (each round runs every model of the block once, order rotated, "
         "reversed every other round; the device synchronised around each step), median step time. Ratios are side "
         "by side inside one block."),
        ("MFU = training FLOPs per token x tokens/s / the device's dense peak at that precision ("
         + (", ".join(f"{p}: {v:.3g} TFLOP/s" for p, v in peaks.items()) or "peak unknown") + "). FLOPs per token "
         "from `linformer/modeling/flops.py` (`training_flops_per_token`: 3x the forward's matmuls): each model is "
         "credited with what it executes - ours with its own count (the Linformer's with k; the MLM head on the "
         "batch's labelled fraction with sparse logits, on every token with full logits), HF RoBERTa with the "
         "full-attention count and the head on every token (mlm_fraction = 1.0). MFU says how busy the device is; "
         "\"vs HF RoBERTa\" (tokens/s ratio) says how much faster the same tokens train."),
    ]


def _target_lines(target: dict) -> list[str]:
    """The MFU target's verdict on the best row of ours at n = 512 (nothing when the run has no target)."""
    out: list[str] = []
    best = target.get("best")
    if target:
        head = f"**Target: at least {target['target']:.0%} MFU for the base model at n = 512.** "
        if best is None:
            out += ["", head + "No row of ours with sparse MLM logits at n = 512 was measured."]
        else:
            verdict = ("**met**" if target["met"] else "**missed**") if target["applies"] else (
                "not assessed: this run's model is not the base shape")
            line = (f"{head}Best row of ours at n = 512 training as pretraining does (sparse MLM logits): "
                    f"{best['label']} ({_variant_words(best)}), {_pct(best['mfu'])} MFU: {verdict}.")
            dense = target.get("best_full_logits")
            if dense is not None:
                line += (f" (With full logits, {dense['label']} reaches {_pct(dense['mfu'])} MFU at "
                         f"{_tokens(dense['tokens_per_s'])} tokens/s against {_tokens(best['tokens_per_s'])}: more "
                         "FLOPs per token, so a busier GPU that trains slower.)")
            out += ["", line]
    return out


def _levers_table(levers: list[dict], s) -> list[str]:
    """The lever block: one change at a time from the base configuration, timed in one interleaved block."""

    L = s.levers
    base = L.base_variant()
    out = ["", f"## Levers (n = {L.n}, {L.precision}): one change at a time from the base configuration", "",
            ("Base: " + ", ".join(base.describe(lever) for lever in ("compile", "optimizer", "sparse_prediction",
                                                                     "attention_mask"))
             + ". Each other row flips one lever. Every row of this table is timed in one interleaved block, so "
             "\"vs base\" (base step time / this step time; below 1x = slower than the base) is a ratio inside one "
             "run. An all-ones attention_mask is what the pretraining collator builds for packed blocks: eager, "
             "our model turns it into no mask (`mask.all()`, one host sync per forward); compiled, it keeps "
             "the mask (no host sync, no graph break), so the trainer drops an all-ones mask on the host "
             "before the forward."),
            "", "| model | lever | setting | step | tokens/s | MFU | vs base | compile |",
            "|---|---|---|---|---|---|---|---|"]
    for r in levers:
        lever = r["lever"]
        v = Variant(r["compile"], r["optimizer"], r["sparse_prediction"], r["attention_mask"])
        setting = "base" if lever == "base" else v.describe(lever)
        out.append(f"| {r['label']} | {lever} | {setting} | {_step_cell(r)} | {_tokens(r.get('tokens_per_s'))} | "
                   f"{_pct(r.get('mfu'))} | {_x(r.get('speedup_vs_base'))} | {_compile_cell(r)} |")
    return out


def profile_markdown(meta: dict, command: str = "") -> str:
    """Where one training step's time goes: kernels (CUDA) or operators (CPU) by category and the longest ones."""
    p, m = meta["profile"], meta["machine"]
    r, k = p["row"], p["kernels"]
    device = m.get("gpu", m.get("device"))
    out = [
        f"# Where the time of a training step goes: {r['label']}, n = {r['n']}, {_variant_words(r)}",
        "",
        (f"Device: {device}; torch {m.get('torch')}. The lever block's base configuration, for the model with the "
         f"highest MFU there ({_pct(r.get('mfu'))}, measured step {_s(r.get('step_s'))}, batch {r['batch_size']}, "
         f"{_tokens(r.get('tokens_per_s'))} tokens/s). `torch.profiler` over {p['steps']} steps "
         f"after one warm-up step; times are per step. {k['unit']}: {k['per_step_ms']:.1f} ms per step in "
         "all" + (" (GPU busy time; the measured step less this is time the GPU waited: kernel launches, host "
                  "syncs)" if k["unit"].startswith("CUDA") else "") + "."),
    ]
    if command:
        out += ["", "Command:", "", "```bash", command, "```"]
    out += ["", "## By category", "", "| category | ms per step | share |", "|---|---|---|"]
    total = k["per_step_ms"] or 1.0
    for cat, ms in k["categories"]:
        out.append(f"| {cat} | {ms:.2f} | {ms / total:.1%} |")
    out += ["", f"## The {len(k['top'])} longest", "", "| # | name | category | calls per step | ms per step | share |",
            "|---|---|---|---|---|---|"]
    for i, kern in enumerate(k["top"], 1):
        name = kern["name"] if len(kern["name"]) <= 110 else kern["name"][:107] + "..."
        out.append(f"| {i} | `{_md_cell(name)}` | {kern['category']} | {kern['calls']:.0f} | "
                   f"{kern['total_ms']:.2f} | {kern['share']:.1%} |")
    return "\n".join(out) + "\n"


# each baseline's (colour, marker, line style) in Okabe and Ito's colours (plots.OKABE_ITO), full attention dashed
# as in every figure: the two peers (vermillion, sky blue) far apart under every colour vision deficiency, where
# red and orange were two olive-yellows to a deuteranope, and both far from the Linformer's first colour (green)
BASELINE_STYLES = {"eager": ("#000000", "s", "-"), "full": ("#0072B2", "o", plots.FULL_STYLE),
                   "roberta_sdpa": ("#CC79A7", "^", ":"), "modernbert": ("#D55E00", "D", "-."),
                   "longformer": ("#56B4E9", "v", "-.")}
K_COLOURS = ("#009E73", "#E69F00", "#F0E442", *plots.OKABE_ITO)  # a k's colour: the first no baseline drawn holds


def flagged(rows: list[dict]) -> list[dict]:
    """The rows whose speed-up over full attention the report warns of (common.beyond_flop_bound): more than
    BEYOND_FLOPS times its FLOP ratio, more than the arithmetic saved explains."""
    return [r for r in rows if beyond_flop_bound(r.get("speedup_vs_full"), r.get("flop_ratio"))]


FLAGGED_WORDS = (f"ringed: speed-up over full attention above {BEYOND_FLOPS:g}x its FLOP ratio, more than the "
                 "arithmetic saved explains (load, threads: the report's warning)")


def _ring(ax, points: list[tuple[float, float]], label: str) -> None:
    """A black ring around each of `points` (a flagged cell's point), one legend entry `label` saying why."""
    if points:
        ax.plot(*zip(*points), linestyle="none", marker="o", ms=14, markerfacecolor="none", markeredgecolor="black",
                markeredgewidth=1.3, label=label)


def coinciding_notes(ax, where: str = "") -> list[str]:
    """A line for each group of `ax`'s lines drawn one over another (plots.coinciding), for the legend's title, so
    that a hidden line is not read as missing: "memory saved: k = 128, 256 and 512, measured vs eager attention:
    ..."."""
    notes = []
    for group in plots.coinciding(ax):
        labels = [line.get_label() for line in group]
        parts = [label.split(", ", 1) for label in labels]
        if all(len(p) == 2 and p[0].startswith("k = ") and p[1] == parts[0][1] for p in parts):
            ks = [p[0].removeprefix("k = ") for p in parts]
            words = f"k = {', '.join(ks[:-1])} and {ks[-1]}, {parts[0][1]}"
        else:
            words = "; ".join(labels[:-1]) + " and " + labels[-1]
        notes.append(f"{where}{words}: equal within {plots.COINCIDE:.0%}, one line over the others")
    return notes


def plot_times(rows: list[dict], path: str | Path, title: str = "", local_window: int = 0,
               global_positions: list[int] | None = None, landmarks: bool = False) -> Path:
    """Forward time against n, log-log, one line per model (the paper's Figure 2, top right): full attention dashed
    as in every figure, a Linformer solid and named with its exact local and global keys and landmark pooling where
    it has them (`local_window`, `global_positions`, `landmarks`: the benchmark's keys); where
    the rows were also timed in a reference dtype (``time_*_ref_s``), those as dotted lines of the same colours and
    markers, so that the headline "the Linformer in bf16 against full attention in fp32" is drawn. Colours are
    Okabe and Ito's (a k takes one no baseline drawn has); a cell the report warns of (``flagged``) is ringed, and
    lines drawn one over another are said in the legend."""
    plt = plots.pyplot()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plots.figure(size=(7, 5))
    ax = axes[0][0]
    ns = sorted({r["n"] for r in rows})
    first = {n: next(r for r in rows if r["n"] == n) for n in ns}
    dtype = rows[0].get("dtype") or ""
    ref = rows[0].get("reference_dtype") or ""
    in_dtype = lambda key: f", {dtype}" if ref and key in ("full", "linformer") else ""
    used = set()
    for kind in BASELINES:
        c, mk, ls = BASELINE_STYLES[kind]
        for column, style, words in ((f"time_{kind}_s", ls, in_dtype(kind)), (f"time_{kind}_ref_s", ":", f", {ref}")):
            pts = [(n, first[n][column] / first[n]["batch_size"]) for n in ns
                   if isinstance(first[n].get(column), (int, float)) and first[n][column] == first[n][column]]
            if pts:
                used.add(c)
                ax.plot(*zip(*pts), color=c, marker=mk, linestyle=style, label=label(kind) + words,
                        markerfacecolor=c if style == ls else "white")
    ks = sorted({r["k"] for r in rows})
    free = [c for c in dict.fromkeys(K_COLOURS) if c not in used]
    cmap = plt.get_cmap("viridis")  # more ks than free colours: a ramp, told apart by the markers
    k_colours = free[:len(ks)] if len(ks) <= len(free) else [cmap(i / max(1, len(ks) - 1) * 0.85)
                                                               for i in range(len(ks))]
    k_markers = ("x", "P", "*", "h", "+", "p", "1", "X")  # a marker per k besides its colour
    for i, k in enumerate(ks):
        mine = [r for r in rows if r["k"] == k]
        name = f"Linformer, k = {k}{exact_keys_words(local_window, global_positions, landmarks)}"
        for column, style, words in (("time_linformer_s", "-", in_dtype("linformer")),
                                     ("time_linformer_ref_s", ":", f", {ref}")):
            pts = sorted((r["n"], r[column] / r["batch_size"]) for r in mine
                         if isinstance(r.get(column), (int, float)) and r[column] == r[column])
            if pts:
                ax.plot(*zip(*pts), color=k_colours[i], marker=k_markers[i % len(k_markers)], linestyle=style,
                        label=name + words)
    _ring(ax, [(r["n"], r["time_linformer_s"] / r["batch_size"]) for r in flagged(rows)
               if isinstance(r.get("time_linformer_s"), (int, float))],
          FLAGGED_WORDS.replace("ringed: speed-up", "ringed: the Linformer's time, its speed-up"))
    notes = coinciding_notes(ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (tokens, log scale)")
    ax.set_ylabel("forward time per sequence (s, log scale)")
    plots.title(ax, title or "Inference time against sequence length")
    ax.grid(True, which="both", alpha=0.3)
    plots.legend_below(fig, title="\n".join(notes) or None)
    return save_figure(fig, path, dpi=120)


PAPER_CURVE = 3  # a grid with a paper value at this many lengths n or more is drawn against the paper (a curve)


def paper_grid(rows: list[dict], s) -> bool:
    """Whether `rows` are a Table 3 grid the paper's values can be drawn against: the paper's own model, a plain
    Linformer (no exact local or global keys, no landmark pooling: `s`'s ``linformer_fields``), at least PAPER_CURVE
    lengths n with a paper value (two-length comparisons are read from their tables). A Linformer with exact keys is
    another model, which attends to w + k keys per query where the paper's attends to k: its ratios drawn beside the
    paper's read as the paper's model falling short, so its report gives the paper's table as text only."""
    return not linformer_fields(s) and len({r["n"] for r in rows if r.get("paper_time_saved") is not None}) >= PAPER_CURVE


def plot_paper(rows: list[dict], path: str | Path, title: str) -> Path:
    """Measured against the paper's Table 3, one panel per quantity against n (log-log): the speed-up of each k
    over our full attention (SDPA; solid) and over the eager standard Transformer where it was run (dash-dot), and
    the paper's (dotted, hollow markers); the memory saved the same way, the measured one a ratio of the peak memory a
    forward adds, the paper's a ratio of largest batches (the report's largest-batch table is the paper's measure). A
    k keeps its colour and marker in both panels. A speed-up the report warns of (``flagged``) is ringed, and lines
    drawn one over another (the same ratio at every k) are said in the legend."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    path = Path(path)
    ks = sorted({r["k"] for r in rows})
    colour, marker = dict(zip(ks, plots.colours(len(ks)))), dict(zip(ks, plots.markers(len(ks))))
    fig, axes = plots.figure(2, size=(11, 4.8))
    notes: list[str] = []
    quantities = (("speed-up (x, log scale)", "speedup_vs_full", "speedup_vs_eager", "paper_time_saved"),
                  ("memory saved (x, log scale)", "mem_saved_vs_full", "mem_saved_vs_eager", "paper_mem_saved"))
    for ax, (words, full, eager, paper) in zip(axes[0], quantities):
        for k in ks:
            mine = sorted((r for r in rows if r["k"] == k), key=lambda r: r["n"])
            for column, style, what in ((full, "-", "measured vs our full attention (SDPA)"),
                                        (eager, "-.", "measured vs eager attention"),
                                        (paper, ":", "paper")):
                pts = [(r["n"], r[column]) for r in mine if isinstance(r.get(column), (int, float))
                       and r[column] == r[column]]
                if pts:
                    ax.plot(*zip(*pts), color=colour[k], marker=marker[k], linestyle=style, ms=5,
                            markerfacecolor="white" if column == paper else colour[k], label=f"k = {k}, {what}")
        if full == "speedup_vs_full":
            _ring(ax, [(r["n"], r[full]) for r in flagged(rows)], FLAGGED_WORDS)
        notes += coinciding_notes(ax, words.split(" (")[0] + ": ")
        ax.axhline(1, color="black", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ns = sorted({r["n"] for r in rows})
        ax.set_xticks(ns, [f"{n:,}" for n in ns])
        ax.minorticks_off()
        # ratios read as "2x", at 1, 2 and 5 of each decade: a log axis' bare "10^0" names no ratio in a narrow range
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.set_xlabel("sequence length n (tokens, log scale)")
        ax.set_ylabel(words)
        ax.grid(True, which="major", alpha=0.3)
    plots.title(axes[0][0], "time: Linformer faster above 1")
    plots.title(axes[0][1], "memory: measured peak memory ratio; the paper's, largest batch ratio")
    plots.title(fig, title)
    plots.legend_below(fig, title="\n".join(notes) or None)
    return save_figure(fig, path, dpi=120)


def exact_keys_words(window: int, positions: list[int] | None, landmarks: bool = False) -> str:
    """", window w, global: first and last tokens" for a Linformer with exact local or global keys (and ", landmark
    pooling" where its projected keys are pooled by attention), else nothing (the paper's Linformer): the global
    positions in words, not the config's list, where -1 is the last token."""
    return ((f", window {window}" if window else "") + (f", global: {position_words(positions)}" if positions else "")
            + (", landmark pooling" if landmarks else ""))


def position_words(positions: list[int]) -> str:
    """Token positions as a reader names them: 0 "first", -1 "last", p "token p" (from 0) or "p-th from the end"."""
    words = ["first token" if p == 0 else "last token" if p == -1 else f"token {p}" if p > 0 else f"token {p} from the end"
             for p in positions]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


__all__ = ["inference_markdown", "inference_sections", "paper_grid", "plot_paper", "plot_times", "profile_markdown", "read_csv",
           "throughput_markdown", "write_csv"]
