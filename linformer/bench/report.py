"""Write benchmark results: CSV, a markdown table laid out like the paper's Table 3, and a log-log plot."""

from __future__ import annotations

import csv
from pathlib import Path

from .inference import BASELINES
from .models import label
from .paper import PAPER_KS, PAPER_MEMORY_SAVED, PAPER_TIME_SAVED


def write_csv(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields += [f for f in row if f not in fields]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(v) for k, v in row.items()})
    return path


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


def _mib(v) -> str:
    return "-" if v is None else f"{v:.0f}"


def _cell_table(rows: list[dict], ks: list[int], fmt) -> list[str]:
    lines = ["| n | " + " | ".join(f"k = {k}" for k in ks) + " |", "|---" * (len(ks) + 1) + "|"]
    by_n: dict[int, dict[int, dict]] = {}
    for r in rows:
        by_n.setdefault(r["n"], {})[r["k"]] = r
    for n in sorted(by_n):
        cells = [fmt(by_n[n][k]) if k in by_n[n] else "" for k in ks]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def inference_markdown(rows: list[dict], meta: dict, command: str = "") -> str:
    s = meta["settings"]
    ks = sorted({r["k"] for r in rows}) or list(PAPER_KS)
    m = meta["machine"]
    out = [
        "# Table 3 reproduction: Linformer inference efficiency",
        "",
        f"Machine: {m.get('cpu')} ({m.get('cpu_cores')} cores, {m.get('torch_threads')} torch threads, "
        f"{m.get('memory_gib', '?')} GiB), device `{m.get('device')}`"
        + (f" ({m['gpu']})" if "gpu" in m else "")
        + f"; torch {m.get('torch')}, transformers {m.get('transformers')}, Python {m.get('python')}.",
        (f"Model: base width ({s.hidden} hidden, {s.heads} heads, FFN {s.ffn}), {s.layers} layers, "
        f"batch {s.batch_size}, {s.dtype}; Linformer with `sharing={s.sharing}` (one E = F, as the paper's "
        "Table 3). Forward pass only (inference mode), random token ids, nothing padded."),
        (f"Timing: {s.warmup} warm-up, then {s.reps} interleaved rounds (every model once per round, order "
        "rotated), median. Ratios are measured side by side in this one run."),
        ("Memory: peak memory a forward adds over the live model and inputs - on CPU the process's resident-set "
        "high-water mark (VmHWM reset through /proc/self/clear_refs, after malloc_trim), on CUDA "
        "`torch.cuda.max_memory_allocated`. Measured on the last warm-up forward."),
    ]
    if meta.get("note"):
        out.append(meta["note"])
    if command:
        out += ["", "Command:", "", "```bash", command, "```"]
    dropped = meta.get("dropped") or []
    if dropped:
        out += ["", "Not measured: " + "; ".join(f"n={n} ({why})" for n, why in dropped) + "."]
    out += [
        "",
        "## Against the paper-era standard Transformer (eager n x n softmax)",
        "",
        ("Each cell: **time saved / memory saved** of the Linformer against HF RoBERTa with "
        "`attn_implementation=\"eager\"` (same size), then *(paper: time / memory)*. The paper's numbers are "
        "against a 2020 standard Transformer on a V100 (Wang et al. 2020, Table 3), ours on the machine above."),
        "",
    ]
    out += _cell_table(rows, ks, lambda r: (
        f"**{_x(r.get('speedup_vs_eager'))} / {_x(r.get('mem_saved_vs_eager'))}** "
        f"*({_x(r.get('paper_time_saved'))} / {_x(r.get('paper_mem_saved'))})*"
        if r.get("paper_time_saved") is not None else
        f"**{_x(r.get('speedup_vs_eager'))} / {_x(r.get('mem_saved_vs_eager'))}**"
    ))
    out += [
        "",
        "## Against today's standard attention (`F.scaled_dot_product_attention`)",
        "",
        ("Each cell: **measured speed-up / memory saved** of the Linformer against our model with "
        "`attention=\"full\"`, then *(analytic FLOP ratio)*: full-model FLOPs / Linformer FLOPs of a forward "
        "(QKV/output projections, score and value matmuls, E/F projections, FFN; see linformer/modeling/flops.py). "
        "A measured speed-up at or above the FLOP ratio means the Linformer realises all of its arithmetic saving."),
        "",
    ]
    out += _cell_table(rows, ks, lambda r: (
        f"**{_x(r.get('speedup_vs_full'))} / {_x(r.get('mem_saved_vs_full'))}** *({_x(r.get('flop_ratio'))})*"
    ))
    out += ["", "## Forward time and peak memory per model", ""]
    kinds = [b for b in BASELINES if rows and rows[0].get(f"time_{b}_s") is not None]
    head = ["n"] + [label(b) for b in kinds] + [label("linformer", k, s.sharing) for k in ks]
    out += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    by_n: dict[int, dict[int, dict]] = {}
    for r in rows:
        by_n.setdefault(r["n"], {})[r["k"]] = r
    for n in sorted(by_n):
        first = next(iter(by_n[n].values()))
        cells = [f"{_s(first.get(f'time_{b}_s'))}, {_mib(first.get(f'mem_{b}_mib'))} MiB" for b in kinds]
        cells += [f"{_s(by_n[n][k]['time_linformer_s'])}, {_mib(by_n[n][k].get('mem_linformer_mib'))} MiB"
                  if k in by_n[n] else "" for k in ks]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    if any(r.get("full_vs_roberta_sdpa") is not None for r in rows):
        out += ["", "Our full-attention mode against HF RoBERTa (SDPA), time ratio (> 1: ours faster): "
                + ", ".join(f"n={n}: {next(iter(by_n[n].values()))['full_vs_roberta_sdpa']:.2f}x"
                            for n in sorted(by_n)) + "."]
    if any("max_batch_linformer" in r for r in rows):
        out += ["", "## Largest batch that fits (GPU)", ""]
        out += _cell_table(rows, ks, lambda r: f"{r.get('max_batch_linformer')} vs full {r.get('max_batch_full')}"
                           f", eager {r.get('max_batch_eager')}")
    out += ["", "## The paper's Table 3 (for reference)", ""]
    paper_rows = [{"n": n, "k": k, "t": PAPER_TIME_SAVED[n][i], "m": PAPER_MEMORY_SAVED[n][i]}
                  for n in PAPER_TIME_SAVED for i, k in enumerate(PAPER_KS) if i < len(PAPER_TIME_SAVED[n])]
    out += _cell_table(paper_rows, list(PAPER_KS), lambda r: f"{_x(r['t'])} / {_x(r['m'])}")
    return "\n".join(out) + "\n"


def throughput_markdown(rows: list[dict], meta: dict, command: str = "") -> str:
    s = meta["settings"]
    m = meta["machine"]
    out = [
        "# Training throughput: one MLM step (forward, backward, AdamW)",
        "",
        (f"Machine: {m.get('cpu')} ({m.get('cpu_cores')} cores, {m.get('torch_threads')} torch threads), device "
        f"`{m.get('device')}`; torch {m.get('torch')}, transformers {m.get('transformers')}."),
        (f"Model: {s.layers} layers, width {s.hidden}, {s.heads} heads, FFN {s.ffn}, vocabulary {s.vocab}, dropout "
        f"{s.dropout}; {s.tokens_per_step} tokens per step; {int(s.mask_prob * 100)}% of positions labelled. "
        f"Linformer: k = {s.k}, sharing = {s.sharing}. {s.warmup} warm-up step, then {s.steps} interleaved "
        "rounds, median step time. bf16 = `torch.autocast` bf16 forward, fp32 weights and fused AdamW."),
    ]
    if meta.get("note"):
        out.append(meta["note"])
    if command:
        out += ["", "Command:", "", "```bash", command, "```"]
    out += ["", "| n | precision | batch | model | step | tokens/s | vs HF RoBERTa |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['n']} | {r['precision']} | {r['batch_size']} | {r['label']} | "
                   f"{_s(r['step_s'])} | {r['tokens_per_s']:.0f} | {_x(r.get('speedup_vs_roberta'))} |")
    return "\n".join(out) + "\n"


def plot_times(rows: list[dict], path: str | Path, title: str = "") -> Path:
    """Forward time against n, log-log, one line per model (the paper's Figure 2, top right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 5))
    ns = sorted({r["n"] for r in rows})
    first = {n: next(r for r in rows if r["n"] == n) for n in ns}
    styles = {"eager": ("k", "s", "-"), "full": ("tab:blue", "o", "-"), "roberta_sdpa": ("tab:gray", "^", ":")}
    for kind in BASELINES:
        pts = [(n, first[n].get(f"time_{kind}_s")) for n in ns if first[n].get(f"time_{kind}_s") is not None]
        if pts:
            c, mk, ls = styles[kind]
            ax.plot(*zip(*pts), color=c, marker=mk, linestyle=ls, label=label(kind))
    cmap = plt.get_cmap("viridis")
    ks = sorted({r["k"] for r in rows})
    for i, k in enumerate(ks):
        pts = sorted((r["n"], r["time_linformer_s"]) for r in rows if r["k"] == k)
        ax.plot(*zip(*pts), color=cmap(i / max(1, len(ks) - 1) * 0.85), marker="x", linestyle="--",
                label=f"Linformer, k = {k}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward time per batch (s)")
    ax.set_title(title or "Inference time against sequence length")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["inference_markdown", "plot_times", "throughput_markdown", "write_csv"]
