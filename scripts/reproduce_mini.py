"""`make reproduce-mini`: the mini Table 2 on the mirror data (experiment table2_mini), hours on 2 CPU cores.

Stages (each real CLI line is printed; a stage whose output is complete is skipped, so an interrupted run
resumes where it stopped; pretraining also resumes from its last checkpoint). Two stages run at once with one
thread each (--jobs 2; logs in outputs/reproduce_mini_logs/; why: linformer/stages.py), a finetune as soon as its
pretraining is done:
  1. tokenizer + corpus (data=mirror_mini: books + Wikipedia, n = 128)
  2. pretrain 7 variants, 7200 updates x 16 x 128 tokens = 14.7M tokens each:
     full attention; Linformer k = 32 (n/k = 4) and k = 64 (n/k = 2) x {headwise, kv, layerwise}
     tiny model, bf16, same seed and recipe
  3. finetune each pretrained variant + the full baseline from random init (from_scratch=true) on SST-2
     (20k sentences x 2 epochs) and IMDB (10k reviews x 3 epochs, 25k test), each at lr 1e-3 and 3e-4
     (table2.py keeps the better lr per cell)
  4. scripts/table2.py -> docs/results/table2_mini.{md,json}; docs/results/pretrain_curves.png
Usage: python scripts/reproduce_mini.py [--dry-run] [--jobs N]
"""

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from linformer.cli import cli_errors
from linformer.errors import ConfigError
from linformer.files import write_json
from linformer.report import table2
from linformer.report.curves import plot_pretrain_curves
from linformer.stages import STOPPED, Stage, StageFailed, run_stages

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
EXP = "experiment=table2_mini"
SEED = 0
N = 128
VARIANTS = [("full", "full", None, None)] + [
    (f"k{k}-{s}", "linformer", k, s) for k in (N // 4, N // 2) for s in ("headwise", "kv", "layerwise")]
TASKS = ("sst2", "imdb")
LRS = (1e-3, 3e-4)  # finetuning lr grid; table2.py keeps the better lr per cell


def plan() -> list[Stage]:
    """Every stage in order; `needs` lets run_stages start a finetune as soon as its pretraining is done."""
    stages = [Stage("tokenizer", [PY, "scripts/train_tokenizer.py", "data=mirror_mini"],
                    REPO / "data/tokenizers/mirror_mini/tokenizer.json"),
              Stage("corpus", [PY, "scripts/prepare_corpus.py", "data=mirror_mini"],
                    REPO / "data/processed/mirror_mini/manifest.json", ("tokenizer",))]
    finetune_from = []
    for label, attention, k, sharing in VARIANTS:
        run = f"mini-{label}"
        linformer = [f"model.projected_dim={k}", f"model.sharing={sharing}"] if k else []  # full attention has no k
        args = ["scripts/pretrain.py", EXP, f"run_name={run}", f"model.attention={attention}", *linformer,
                f"seed={SEED}"]
        stages.append(Stage(f"pretrain {label}", [PY, *args], REPO / f"outputs/pretrain/{run}/summary.json",
                            ("corpus",)))
        finetune_from.append((label, run, False))
    finetune_from.append(("full", "mini-full", True))  # the same baseline, random initialisation
    for label, run, scratch in finetune_from:
        for task, lr in ((task, lr) for task in TASKS for lr in LRS):
            name = f"mini-{task}-{label}" + ("-scratch" if scratch else "") + f"-lr{lr:g}"
            args = ["scripts/finetune.py", EXP, f"task={task}", f"model_path=outputs/pretrain/{run}",
                    f"from_scratch={str(scratch).lower()}", f"trainer.lr={lr:g}", f"run_name={name}", f"seed={SEED}"]
            stages.append(Stage(f"finetune {name}", [PY, *args], REPO / f"outputs/finetune/{name}/results.json",
                                (f"pretrain {label}",)))
    return stages


def report_commands() -> list[list[str]]:
    # --overwrite: the reproduction owns docs/results/table2_mini.*, which is committed without the output record
    return [["scripts/table2.py", "outputs/finetune/mini-*", "--out", "docs/results/table2_mini",
             "--command", "make reproduce-mini", "--overwrite"]]


def _shown(argv: list[str]) -> str:
    return shlex.join(["python", *argv[1:]])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the mini Table 2 reproduction")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    ap.add_argument("--jobs", type=int, default=2,
                    help="stages run at once, each with cores/jobs threads (default 2: two 1-thread jobs of the tiny "
                         "model get more done than one 2-thread job); 1 runs them one by one with their progress bars")
    args = ap.parse_args(argv)
    with cli_errors():
        if args.jobs < 1:
            raise ConfigError(f"--jobs {args.jobs}: at least one stage must run at a time")
        return reproduce(args.jobs, args.dry_run)


def reproduce(jobs: int, dry_run: bool) -> int:
    os.chdir(REPO)  # the stages and reports take paths relative to the repository
    stages = plan()
    print(__doc__.split("Usage")[0])
    for s in stages:
        print(f"[{'done' if s.done.exists() else 'todo'}] {s.name}: {_shown(s.argv)}")
    for cmd in report_commands():
        print(f"[report] {shlex.join(['python', *cmd])}")
    if dry_run:
        return 0
    t0 = time.perf_counter()
    try:
        times = run_stages(stages, jobs=jobs, cwd=REPO, log_dir=REPO / "outputs/reproduce_mini_logs")
    except KeyboardInterrupt:
        print(STOPPED, file=sys.stderr)
        return 130
    except StageFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    times["total (stages run now)"] = round(time.perf_counter() - t0, 1)
    for cmd in report_commands():
        table2.main(cmd[1:])
    runs = {label: REPO / f"outputs/pretrain/mini-{label}" for label, *_ in VARIANTS}
    plot_pretrain_curves(runs, REPO / "docs/results/pretrain_curves.png",
                         f"Mini Table 2 pretraining (tiny model, n={N}, books + Wikipedia)")
    write_json(REPO / "outputs/reproduce_mini_times.json", times)
    print("wrote docs/results/table2_mini.{md,json} and docs/results/pretrain_curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
