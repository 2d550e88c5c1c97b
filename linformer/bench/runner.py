"""Run the inference grid and/or the training-throughput benchmark and write every output file."""

from __future__ import annotations

from pathlib import Path

from .inference import InferenceSettings, run_inference
from .report import inference_markdown, plot_times, throughput_markdown, write_csv
from .throughput import ThroughputSettings, run_throughput


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
    """Writes ``{name}.csv/.md/.png`` (inference) and ``{throughput_name}.csv/.md`` (training) into out_dir.

    Either part is skipped when its settings are None. Returns the paths written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if inference is not None:
        rows, meta = run_inference(inference, progress=progress, log=log)
        meta["note"] = note
        written["csv"] = write_csv(rows, out_dir / f"{name}.csv")
        md = out_dir / f"{name}.md"
        md.write_text(inference_markdown(rows, meta, command))
        written["md"] = md
        if rows:
            written["png"] = plot_times(rows, out_dir / f"{name}.png",
                                        f"Forward time, {inference.layers} layers x {inference.hidden} wide, "
                                        f"batch {inference.batch_size} ({meta['machine']['device']})")
        log(f"[bench] inference: {len(rows)} cells in {meta['elapsed_s']:.0f} s -> {md}")
    if throughput is not None:
        tname = throughput_name or f"{name}_throughput"
        rows, meta = run_throughput(throughput, progress=progress, log=log)
        meta["note"] = note
        written["throughput_csv"] = write_csv(rows, out_dir / f"{tname}.csv")
        md = out_dir / f"{tname}.md"
        md.write_text(throughput_markdown(rows, meta, command))
        written["throughput_md"] = md
        log(f"[bench] throughput: {len(rows)} rows in {meta['elapsed_s']:.0f} s -> {md}")
    return written


__all__ = ["run_benchmark"]
