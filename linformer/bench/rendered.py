"""An inference report (<name>.md and .png) written again from the CSV of an earlier benchmark, nothing measured:
``python scripts/benchmark.py --render <name>.csv`` (report.measured.render_main).

The tables and the figure are today's, from the CSV's rows. The lines above the tables (machine, timing, memory,
note, command, cells not measured) are the earlier report's own, read from the <name>.md beside the CSV: they say how
that run measured, which today's code may say otherwise. Its "Model:" line is written again from the settings the
CSV's output record holds (outputs.FILE_RECORDS); where no record is kept, the settings are those its recorded command
composes to today, and the Model line is written again only where every row agrees with them. Sections people
added after the run (headed "## Notes") are kept below the tables. What neither holds (a CPU's threads, the machine) is "not recorded".
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
from functools import partial
from pathlib import Path

from ..errors import ConfigError
from ..files.atomic import atomic_write
from ..files.outputs import file_record
from .inference import InferenceSettings
from .report import INFERENCE_TITLE, inference_sections, model_line, paper_grid, plot_paper, plot_times, read_csv
from .runner import inference_title, paper_title


def render_inference(csv_path: str, out: str) -> None:
    """Write <out>.md and <out>.png from `csv_path` and the report beside it (and <out>.csv, a copy, when `out` is
    elsewhere; <out>_paper.png for a grid the paper's Table 3 covers, ``paper_grid``, and where it covers none an
    <out>_paper.png an earlier render left is removed)."""
    source = Path(csv_path)
    if not source.is_file():
        raise ConfigError(f"--render {csv_path}: no such file: give the <name>.csv of an earlier benchmark.")
    if source.suffix != ".csv":
        raise ConfigError(f"--render {csv_path}: give the <name>.csv of an earlier benchmark's inference grid.")
    rows = read_csv(source)
    report = source.with_suffix(".md")
    header = recorded_header(report)
    record = file_record(source)
    settings = recorded_settings(record, header, rows)
    if rows and all(map(partial(_agrees, settings), rows)):  # the Model line in today's words
        header = [model_line(settings) if line.startswith("Model: ") else line for line in header]
    machine = machine_of(header, (record or {}).get("settings") or {})
    notes = notes_sections(report)
    paper = paper_grid(rows, settings) and plot_paper(rows, f"{out}_paper.png", paper_title(settings, machine)).name
    if not paper:  # an earlier code's figure against the paper, which today's report neither draws nor names
        Path(f"{out}_paper.png").unlink(missing_ok=True)
    atomic_write(f"{out}.md", "\n".join(header + inference_sections(rows, settings, machine, paper or None)
                                        + (["", *notes] if notes else [])) + "\n")
    if rows:
        plot_times(rows, f"{out}.png", inference_title(settings, machine), settings.local_window,
                   settings.global_positions, settings.landmark_pooling)
    if Path(f"{out}.csv").resolve() != source.resolve():
        shutil.copyfile(source, f"{out}.csv")


def _agrees(s: InferenceSettings, row: dict) -> bool:
    """Whether a CSV row was measured with the model `s` describes (its shape, sharing, dtype and batch)."""
    batch = max(1, s.tokens_per_batch // row["n"]) if s.tokens_per_batch else s.batch_size
    return row.get("batch_size") == batch and all(row.get(key) == getattr(s, key) for key in
                                                  ("layers", "hidden", "heads", "ffn", "sharing", "dtype"))


NOTES = "## Notes"  # a section people added to a report after its run ("## Notes (written after the run)")


def notes_sections(md: Path) -> list[str]:
    """The report's sections headed NOTES..., as written: what people added after the run, kept below today's
    tables."""
    kept, keep = [], False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            keep = line.startswith(NOTES)
        if keep:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return kept


def recorded_header(md: Path) -> list[str]:
    """The lines of an inference report between its title and its first table's section ("## "), blank lines at
    the end dropped."""
    lines = md.read_text(encoding="utf-8").splitlines() if md.is_file() else []
    if not lines or lines[0] != INFERENCE_TITLE or not any(x.startswith("## ") for x in lines):
        raise ConfigError(f"--render: {md} is not the inference report of its CSV: the lines above its tables (the "
                          "machine, how it was timed, the command) are read from it; measure again.")
    header = lines[:next(i for i, x in enumerate(lines) if x.startswith("## "))]
    while header and not header[-1].strip():
        header.pop()
    return header


def recorded_settings(record, header: list[str], rows: list[dict]) -> InferenceSettings:
    """The run's InferenceSettings: those its output record holds (a key recorded before it existed: its default,
    the reference dtype its rows name), else those its recorded command composes to today."""
    known = {f.name for f in dataclasses.fields(InferenceSettings)}
    given = ((record or {}).get("settings") or {}).get("inference") if isinstance(record, dict) else None
    if isinstance(given, dict):
        values = {k: v for k, v in given.items() if k in known}
        if "reference_dtype" not in values and rows:
            values["reference_dtype"] = rows[0].get("reference_dtype")
        return InferenceSettings(**values)
    return _composed(_recorded_command(header))


def _recorded_command(header: list[str]) -> list[str]:
    text = "\n".join(header)
    found = re.search(r"```bash\n(python3? scripts/benchmark\.py[^\n]*)\n```", text)
    if found is None:
        raise ConfigError("--render: the CSV has no output record and its report no recorded command: its settings "
                          "are not known; measure again.")
    return shlex.split(found.group(1))[2:]


def _composed(words: list[str]) -> InferenceSettings:
    """The settings the recorded command `words` (benchmark.py's arguments) composes to today, its command line read
    as Hydra reads it (``configs.hydra_command_line``: -cn, --config-name=..., --config-dir, anywhere in it)."""
    from ..configs import (
        HydraCommandLine,
        command_sources,
        compose,
        config_sources,
        hydra_command_line,
        reads_command_lines,
    )
    from .cli import _settings

    line = hydra_command_line(words, "benchmark")
    if line is None and not reads_command_lines():  # a Hydra that moved its parser: overrides alone are read
        line = HydraCommandLine("benchmark", words, config_sources(), True, False)
    if line is None or not line.runs:
        raise ConfigError(f"--render: the report's recorded command ({' '.join(words)}) is not a benchmark's run as "
                          "Hydra reads it: its settings are not known; measure again.")
    with command_sources(line.sources):
        cfg = compose(line.config_name, line.overrides)
    return _settings(InferenceSettings, cfg.inference, cfg.device, "inference")


def machine_of(header: list[str], recorded: dict) -> dict:
    """What the figure's title and the tables read of the machine (runner._where, report._thread_lines), from the
    report's "Machine:" line and the recorded settings (threads, competing); a key neither holds is left out."""
    line = next((x for x in header if x.startswith("Machine: ")), "")
    machine: dict = {}
    for key, pattern, kind in (("device", r"device `([^`]+)`", str), ("gpu", r"device `cuda[^`]*` \(([^)]+)\)", str),
                               ("torch_threads", r"(\d+) torch threads", int),
                               ("competing_processes", r"beside (\d+) competing", int),
                               ("load_average", r"((?:1-minute )?load average [^,;]+)", str)):
        found = re.search(pattern, line)
        if found:
            machine[key] = kind(found.group(1))
    cpu = re.match(r"Machine: ([^(,;]+?) \(", line)
    if cpu:
        machine["cpu"] = cpu.group(1)
    if recorded.get("threads") is not None:
        machine.setdefault("torch_threads", int(recorded["threads"]))
    if recorded.get("competing"):
        machine.setdefault("competing_processes", int(recorded["competing"]))
    return machine


__all__ = ["machine_of", "recorded_header", "recorded_settings", "render_inference"]
