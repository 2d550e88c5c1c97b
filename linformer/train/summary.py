"""What a run prints: a log file's progress lines and the closing summary."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..cli import names_script
from ..files.locations import repo_relative
from ..files.runs import export_command, recorded_imports
from ..logfile import say
from ..shell import hydra_override, imports_words, script_command


def progress_line(stage: str, step: int, max_steps: int, row: Mapping[str, Any]) -> str:
    """One step's line for a log file: its loss, rate and speed, and its validation scores (val_*) where it
    evaluated, e.g. ``pretrain step 200/300: loss 6.8123, lr 4.44e-04, 41,230 tokens/s (avg 38,900), val_loss 6.9,
    val_ppl 992.4``. The speed is over the steps since the last host read (``tokens_per_s``), the average over all
    of this start's steps (``tokens_per_s_avg``) beside it: the first steps' warm-up can hold the two far apart."""
    parts = [f"loss {row['loss']:.4f}"] if "loss" in row else []
    parts += [f"lr {row['lr']:.2e}"] if "lr" in row else []
    if row.get("tokens_per_s"):
        average = f" (avg {row['tokens_per_s_avg']:,.0f})" if row.get("tokens_per_s_avg") else ""
        parts.append(f"{row['tokens_per_s']:,.0f} tokens/s{average}")
    parts += [f"{key} {value:.5g}" for key, value in row.items()
              if key.startswith("val_") and isinstance(value, (int, float))]
    return f"{stage} step {step}/{max_steps}: {', '.join(parts)}"


def print_summary(summary: Mapping[str, Any], results: Mapping[str, Any] | None) -> None:
    """The closing lines of a run: what it reached, where the model is, what to run next."""
    lines = [(f"{summary['stage']} complete: {summary['steps']} steps, {summary['tokens']:,} tokens, "
             f"{summary['wall_time_s']:.1f} s ({summary['run_dir']})")]
    if summary.get("tokens_per_s_steady"):
        speed = f"  speed: {summary['tokens_per_s_steady']:,.0f} tokens/s ({steady_span(summary)})"
        speed += f", MFU {summary['mfu']:.1%}" if summary.get("mfu") is not None else ""
        if summary.get("compile"):
            c = summary["compile"]
            mode = f", mode {c['mode']}" if c.get("mode", "default") != "default" else ""
            speed += (f"; torch.compile ({c['backend']}{mode}): {c['graphs']} graph(s), {c['graph_breaks']} graph "
                      "break(s)")
        lines.append(speed)
    lines += continued_lines(summary)
    if summary.get("skipped_steps"):
        lines.append(f"  {summary['skipped_steps']} of the {summary['steps']} updates were skipped for a non-finite "
                     f"loss or gradient (the first at step {summary.get('first_skipped_step')})")
    lines += [f"  {line}" for line in summary.get("report", [])]
    if summary.get("model_dir"):
        lines.append(f"  model: {summary['model_dir']}")
    if summary.get("next"):
        lines.append(f"  next: {summary['next']}")
    say("\n".join(lines))


SAVE_FINAL = "trainer.save_best=false kept no model: this saves the final one"  # export_next's reason


def next_line(stage: str | None, run_dir: Path | str, model_dir: str | None) -> str | None:
    """The summary's next for a run of `stage` at `run_dir` whose kept model is `model_dir` (None: it kept none),
    worded for the caller now: a pretraining's or transfer's model to finetune (``finetune_next``), a finetuning
    without its model to export (``export_next``); None where nothing follows (a distillation saves its student).
    A fresh run's summary says it, and a finished run run again says it anew (``core.already_complete``): its
    record's line was worded for the caller then, a command line or the Python call."""
    if stage in ("pretrain", "transfer"):
        return finetune_next(run_dir, recorded_imports(run_dir))
    if stage == "finetune" and model_dir is None:
        return export_next(run_dir, SAVE_FINAL)
    return None


def continued_lines(summary: Mapping[str, Any]) -> list[str]:
    """For a run that continued another run's checkpoint (trainer.resume=<its checkpoint>): which run, from which
    step, and that the totals above count that run's steps, which this run's own files (metrics.jsonl, its events)
    do not hold."""
    continued = summary.get("continued_from") or []
    lines = [f"  continued {c['run']} from its step {c['step']}" for c in continued]
    if continued:
        whose = "those runs'" if len(continued) > 1 else "that run's"
        lines[-1] += (f": the steps, tokens, time and evaluations above include {whose} steps 1-{continued[-1]['step']}, "
                      f"which this run's metrics.jsonl does not hold (it holds steps {continued[-1]['step'] + 1}-"
                      f"{summary['steps']})")
    return lines


def steady_span(summary: Mapping[str, Any]) -> str:
    """Which steps the summary's steady speed is the median of: the later half of this attempt's (``steady_steps``,
    recorded since), which after a resume are not the run's, e.g. "median of steps 1976-2100, the later half of
    this attempt's, which resumed at step 1851"."""
    steps = summary.get("steady_steps")
    if not steps:
        return "median of the later steps"
    span = f"median of steps {steps[0]}-{steps[1]}" if steps[0] != steps[1] else f"step {steps[0]}"
    resumed = summary.get("resumed_from_step")
    return f"{span}, the later half of this attempt's, which resumed at step {resumed}" if resumed else span


def finetune_next(model_path: Path | str, imports: Sequence[str] = ()) -> str:
    """The summary's next: for a model to finetune, worded for the caller (``cli.names_script``, as a stop's resume
    advice): the finetuning script's command to paste into a shell, or from Python (a notebook) the
    call docs/guide.md's "From Python" shows, the same overrides in it. A model in the repository is named relative
    to it (``locations.repo_relative``), as the run's record names it: the line pastes from any folder, on any
    checkout. `imports`: the modules the run imported (``files.runs.recorded_imports``), carried as ``imports=``:
    the model names their projection or sharing mode, which finetuning cannot build without them."""
    overrides = ["task=sst2", hydra_override("model_path", repo_relative(model_path)), *imports_words(imports)]
    if names_script("finetune"):  # a command whose scripts are found (not a copy of one over a wheel)
        return script_command("finetune", *overrides)
    return (f"finetune(FinetuneSpec.read(compose(\"finetune\", [{', '.join(map(python_str, overrides))}])), "
            "run_dir)  # linformer.train.finetune; run_dir: a folder for the finetuning")


def export_next(run_dir: Path | str, reason: str) -> str:
    """The summary's next: for a run whose model is to be exported, worded for the caller as ``finetune_next``:
    scripts/export.py's command, or the call of ``linformer.train.export.export_run``; `reason` follows as a
    comment, so that the whole line pastes; the run named as ``finetune_next`` names a model."""
    imports, shown = recorded_imports(run_dir), repo_relative(run_dir)
    if names_script("export"):
        return f"{export_command(run_dir, shown=shown)}  # {reason}"
    given = f", imports={imports!r}" if imports else ""
    return f"export_run({python_str(str(shown))}{given})  # linformer.train.export; {reason}"


def python_str(text: str) -> str:
    """`text` as a Python string literal in double quotes, as docs/guide.md writes them (a JSON string is one, its
    escapes Python's; non-ASCII letters kept as they are)."""
    return json.dumps(text, ensure_ascii=False)
