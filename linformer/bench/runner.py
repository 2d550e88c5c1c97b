"""Run the inference grid and/or the training-throughput benchmark and write every output file."""

from __future__ import annotations

from pathlib import Path

from ..errors import PartialOutput, Preempted
from ..files.atomic import atomic_write
from .inference import InferenceSettings, run_inference
from .report import (
    exact_keys_words,
    inference_markdown,
    paper_grid,
    plot_paper,
    plot_times,
    profile_markdown,
    throughput_markdown,
    write_csv,
)
from .throughput import BASE_SHAPE, ThroughputSettings, run_throughput


def run_benchmark(
    out_dir: str | Path,
    name: str = "table3",
    inference: InferenceSettings | None = None,
    throughput: ThroughputSettings | None = None,
    throughput_name: str | None = None,
    command: str = "",
    note: str = "",
    progress: bool = True,
    log=print,
) -> dict[str, Path]:
    """Writes ``{name}.csv/.md/.png`` (inference) and ``{throughput_name}.csv/.md`` (training; with
    ``throughput.profile`` also ``{throughput_name}_profile.md``) into out_dir.

    Either part is skipped when its settings are None. Returns the paths written. A part stopped by a signal
    (Preempted, from bench.cli's handler) writes what it measured, marked partial, then raises PartialOutput
    carrying the Preempted (``atomic.output_files`` keeps those files and raises the Preempted); the part after it
    does not start.
    """
    files = benchmark_files(out_dir, name, inference, throughput, throughput_name)
    written: dict[str, Path] = {}
    if inference is not None:
        rows, meta = run_inference(inference, progress=progress, log=log)
        stop = meta.pop("stop")
        meta["stopped"] = _stopped_words(stop, len(rows), "cells")
        Path(out_dir).mkdir(parents=True, exist_ok=True)  # once something was measured: a refused start leaves none
        meta["note"] = note
        written["csv"] = write_csv(rows, files["csv"])
        if paper_grid(rows, inference):
            written["paper_png"] = plot_paper(rows, files["paper_png"],
                                              paper_title(inference, meta["machine"], stop is not None))
        atomic_write(files["md"], inference_markdown(rows, meta, command,
                                                     written["paper_png"].name if "paper_png" in written else None))
        written["md"] = files["md"]
        if rows:
            written["png"] = plot_times(rows, files["png"], inference_title(inference, meta["machine"], stop is not None),
                                        inference.local_window, inference.global_positions, inference.landmark_pooling)
        log(f"[bench] inference: {len(rows)} cells in {meta['elapsed_s']:.0f} s -> {files['md']}")
        if stop is not None:
            raise PartialOutput(stop)
    if throughput is not None:
        rows, meta = run_throughput(throughput, progress=progress, log=log)
        stop = meta.pop("stop", None)
        meta["stopped"] = _stopped_words(stop, len(rows), "rows")
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        meta["note"] = note
        written["throughput_csv"] = write_csv(rows, files["throughput_csv"])
        if meta.get("profile"):  # the lever block's best row under torch.profiler
            meta["profile_path"] = files["throughput_profile"].name
            atomic_write(files["throughput_profile"], profile_markdown(meta, command))
            written["throughput_profile"] = files["throughput_profile"]
        atomic_write(files["throughput_md"], throughput_markdown(rows, meta, command))
        written["throughput_md"] = files["throughput_md"]
        log(f"[bench] throughput: {len(rows)} rows in {meta['elapsed_s']:.0f} s -> {files['throughput_md']}")
        if stop is not None:
            raise PartialOutput(stop)
    return written


def _stopped_words(stop: Preempted | None, measured: int, what: str) -> str | None:
    """The line a stopped part's report opens with, so a partial table is never taken for the whole one."""
    if stop is None:
        return None
    return (f"Partial: the run was stopped ({stop.signal_name}) after {measured} {what}; the rest was not measured. "
            "The same command again measures the whole grid.")


def benchmark_files(out_dir: str | Path, name: str, inference: InferenceSettings | None,
                    throughput: ThroughputSettings | None, throughput_name: str | None = None) -> dict[str, Path]:
    """Every file run_benchmark may write, by its key in run_benchmark's result."""
    out_dir, tname = Path(out_dir), throughput_name or f"{name}_throughput"
    files = {}
    if inference is not None:
        files.update({key: out_dir / f"{name}.{key}" for key in ("csv", "md", "png")})
        files["paper_png"] = out_dir / f"{name}_paper.png"  # for a grid the paper's Table 3 covers (paper_grid)
    if throughput is not None:
        files.update(throughput_csv=out_dir / f"{tname}.csv", throughput_md=out_dir / f"{tname}.md",
                     throughput_profile=out_dir / f"{tname}_profile.md")
    return files


PARTIAL = "\npartial: the run was stopped before the whole grid"


def inference_title(s: InferenceSettings, machine: dict, partial: bool = False) -> str:
    """The inference figure's title: the model's shape, batch and dtype (and which lines are in the reference dtype,
    where there is one), and where it ran (``_where``)."""
    ref = s.reference_dtype if s.reference_dtype not in (None, s.dtype) else None
    dtype = f"{s.dtype}, dotted lines {ref}" if ref else s.dtype
    return (f"Forward time, {s.layers} layers x {s.hidden} wide, {_batch_words(s)}, {dtype} ({_where(machine)})"
            + (PARTIAL if partial else ""))


def paper_title(s: InferenceSettings, machine: dict, partial: bool = False) -> str:
    """The figure against the paper's Table 3: the measured model (its Linformer, shape, batch and dtype) and where
    it ran, and what the paper measured: its plain Linformer at the base shape (BASE_SHAPE) on a V100, said plainly
    where this run's shape differs (report.paper_grid draws no other Linformer against the paper)."""
    shape = {"layers": s.layers, "hidden": s.hidden, "heads": s.heads, "ffn": s.ffn}
    base = f"{BASE_SHAPE['layers']} layers x {BASE_SHAPE['hidden']} wide"
    variant = exact_keys_words(s.local_window, s.global_positions, s.landmark_pooling).removeprefix(", ")
    return (f"Measured: Linformer ({variant or 'plain'}, sharing={s.sharing}), {s.layers} layers x {s.hidden} wide, "
            f"{s.heads} heads, FFN {s.ffn}, {_batch_words(s)}, {s.dtype} ({_where(machine)}), against the paper's "
            "Table 3: " + ("the paper's plain Linformer at this shape on a V100" if shape == BASE_SHAPE else
                           f"the paper measured its plain Linformer at the base shape ({base}) on a V100, not this "
                           "shape: compare how the ratios grow with n, not their levels")
            + (PARTIAL if partial else ""))


def _where(machine: dict) -> str:
    """The machine in a figure's title: the GPU; or the CPU, its torch threads and the busy processes started
    beside the measurement (times on one CPU differ by 2x between 1 and 2 threads). A record without the CPU or
    its threads (a report rendered from an older run's files) says so."""
    if "gpu" in machine:
        return machine["gpu"]
    count = int(machine.get("competing_processes") or 0)
    threads = machine.get("torch_threads")
    return (f"{machine.get('cpu') or machine.get('device') or 'machine not recorded'}, "
            + (f"{threads} thread{'s' if threads != 1 else ''}" if threads is not None else "threads not recorded")
            + (f", beside {count} busy process{'es' if count > 1 else ''}" if count else ""))


def _batch_words(s: InferenceSettings) -> str:
    return f"{s.tokens_per_batch} tokens per batch" if s.tokens_per_batch else f"batch {s.batch_size}"


__all__ = ["benchmark_files", "inference_title", "run_benchmark"]
