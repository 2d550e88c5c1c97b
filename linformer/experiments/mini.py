"""The mini Table 2 on the mirror data (experiment table2_mini): the plan of ``make reproduce-mini``.

Jobs (a job whose output is complete is skipped, so an interrupted run resumes where it stopped; pretraining
also resumes from its last checkpoint):
  1. tokenizer + corpus (data=mirror_mini: books + Wikipedia, n = 128)
  2. pretrain 7 variants, 7200 updates x 16 x 128 tokens = 14.7M tokens each:
     full attention; Linformer k = 32 (n/k = 4) and k = 64 (n/k = 2) x {headwise, kv, layerwise}
     tiny model, bf16, same seed and recipe
  3. finetune each pretrained variant + the full baseline from random init (from_scratch=true) on SST-2
     (20k sentences x 2 epochs) and IMDB (10k reviews x 3 epochs, 25k test), each at lr 1e-3 and 3e-4, with
     10% of the train rows held out (validation_fraction): the epoch and the lr of each cell are chosen there
     (table2.py keeps the lr with the better validation score), never on the reported split
  4. scripts/table2.py -> docs/results/table2_mini.{md,json}; docs/results/pretrain_curves.png
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from ..configs import config_dir
from ..data.tasks import MIRROR_TASKS
from ..files.atomic import write_json
from ..files.locations import repo_root
from ..files.mappings import read_yaml
from ..jobs import Job
from ..script_help import module_doc
from ..shell import hydra_override
from . import CHECKOUT, Places, corpus_job, done_file, frontend, job_script, tokenizer_job

REPO = repo_root()
EXP = "experiment=table2_mini"
SEED = 0


@functools.cache
def _n() -> int:
    """n, as the experiment's config sets it for every run: the variants' k are a quarter and a half of it."""
    return int(read_yaml(config_dir() / "experiment" / "table2_mini.yaml")["model"]["max_seq_len"])


@functools.cache
def _variants() -> list[tuple[str, str, int | None, str | None]]:
    """(label, attention, k, sharing) of each pretraining run."""
    return [("full", "full", None, None)] + [
        (f"k{k}-{s}", "linformer", k, s) for k in (_n() // 4, _n() // 2) for s in ("headwise", "kv", "layerwise")]


def __getattr__(name: str):
    """N and VARIANTS, read from the configs when first asked for: importing the module needs none (a wheel)."""
    if name in ("N", "VARIANTS"):
        return {"N": _n, "VARIANTS": _variants}[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TASKS = MIRROR_TASKS
LRS = (1e-3, 3e-4)  # finetuning lr grid; table2.py keeps the lr with the better validation score per cell
VALIDATION = 0.1  # share of each task's train rows held out to choose the epoch and the lr on


def plan(python: str = sys.executable, places: Places = CHECKOUT) -> list[Job]:
    """Every job in order; `needs` lets run_jobs start a finetune as soon as its pretraining is done."""
    base = list(places.overrides)
    plan = [tokenizer_job(python, [*base, "data=mirror_mini"]),
            corpus_job(python, [*base, "data=mirror_mini"], needs=("tokenizer",))]
    finetune_from = []
    for label, attention, k, sharing in _variants():
        run = f"mini-{label}"
        linformer = [f"model.projected_dim={k}", f"model.sharing={sharing}"] if k else []  # full attention has no k
        args = [job_script("pretrain"), *base, EXP, f"run_name={run}", f"model.attention={attention}", *linformer,
                f"seed={SEED}"]
        plan.append(Job(f"pretrain {label}", [python, *args], REPO / done_file("pretrain", places.run("pretrain", run)),
                            ("corpus",)))
        finetune_from.append((label, run, False))
    finetune_from.append(("full", "mini-full", True))  # the same baseline, random initialisation
    for label, run, scratch in finetune_from:
        for task, lr in ((task, lr) for task in TASKS for lr in LRS):
            name = f"mini-{task}-{label}" + ("-scratch" if scratch else "") + f"-lr{lr:g}"
            args = [job_script("finetune"), *base, EXP, f"task={task}", hydra_override("model_path", places.run('pretrain', run)),
                    f"from_scratch={str(scratch).lower()}", f"trainer.lr={lr:g}", f"run_name={name}", f"seed={SEED}",
                    f"validation_fraction={VALIDATION:g}"]
            plan.append(Job(f"finetune {name}", [python, *args],
                                REPO / done_file("finetune", places.run("finetune", name)), (f"pretrain {label}",)))
    return plan


def pretrain_runs(places: Places = CHECKOUT) -> dict[str, Path]:
    """Each variant's pretraining run directory, by label (the curves' legend)."""
    return {label: REPO / places.run("pretrain", f"mini-{label}") for label, *_ in _variants()}


def report_argv(places: Places = CHECKOUT) -> list[str]:
    """scripts/table2.py's arguments for the mini table (--overwrite: the reproduction owns docs/results/table2_mini.*,
    which is committed without the output record)."""
    runs = places.run("finetune", "mini-*")
    return [str(runs), "--out", str(places.results("table2_mini")), "--command", "make reproduce-mini", "--overwrite"]


def reproduce(jobs: int, dry_run: bool, report_only: bool = False, places: Places = CHECKOUT) -> int:
    """`make reproduce-mini`: the plan, its table, and beside them the pretraining curves and the jobs' wall times."""
    logs = places.outputs("reproduce_mini_logs")

    def after(times: dict[str, float]) -> None:
        from ..report.curves import plot_pretrain_curves  # matplotlib: not for the plan's parser

        plot_pretrain_curves(pretrain_runs(places), REPO / places.results("pretrain_curves.png"),
                             f"Mini Table 2 pretraining (tiny model, n={_n()}, books + Wikipedia)")
        if times:
            write_json(REPO / places.outputs("reproduce_mini_times.json"), times)
        print(f"wrote {places.results('table2_mini')}.{{md,json}} and "
              f"{places.results('pretrain_curves.png')}")

    return frontend.reproduce(
        plan(places=places), title=module_doc(__doc__, __file__), minutes=None, timing=f"logs in {logs}", jobs=jobs, dry_run=dry_run,
        report_only=report_only, report=report_argv(places), log_dir=REPO / logs, after=after)
