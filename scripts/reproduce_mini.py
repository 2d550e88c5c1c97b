"""`make reproduce-mini`: the mini Table 2 on the mirror data (experiment table2_mini), ~50 min on 2 idle CPU cores.

Stages (each real CLI line is printed before it runs; a stage whose output is complete is skipped, so an
interrupted run resumes where it stopped; pretraining also resumes from its last checkpoint):
  1. tokenizer + corpus (data=mirror_mini: books + Wikipedia, n = 128)          ~4 min
  2. pretrain 7 variants, 2400 updates x 16 x 128 tokens = 4.9M tokens each:
     full attention; Linformer k = 32 (n/k = 4) and k = 64 (n/k = 2) x {headwise, kv, layerwise}
     tiny model, bf16, same seed and recipe                                      7 x ~3 min = ~21 min
  3. finetune each pretrained variant + the full baseline from random init (from_scratch=true)
     on SST-2 (20k sentences x 2 epochs) and IMDB (10k reviews x 3 epochs, 25k test) 8 x ~1.2 + 8 x ~2.8 min = ~32 min
  4. scripts/table2.py -> docs/results/table2_mini.{md,json}; docs/results/pretrain_curves.png   <1 min
  Estimate: ~55 min on 2 idle cores (measured idle: ~30k tokens/s tiny bf16 pretraining, ~17 steps/s SST-2).
Usage: python scripts/reproduce_mini.py [--dry-run]
"""

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
EXP = "experiment=table2_mini"
SEED = 0
N = 128
VARIANTS = [("full", "full", None, "headwise")] + [
    (f"k{k}-{s}", "linformer", k, s) for k in (N // 4, N // 2) for s in ("headwise", "kv", "layerwise")]
TASKS = ("sst2", "imdb")


def plan() -> list[tuple[str, list[str], Path]]:
    """(stage name, argv after python, the file whose existence marks the stage complete)."""
    stages = [("tokenizer", ["scripts/train_tokenizer.py", "data=mirror_mini"],
               REPO / "data/tokenizers/mirror_mini/tokenizer.json"),
              ("corpus", ["scripts/prepare_corpus.py", "data=mirror_mini"],
               REPO / "data/processed/mirror_mini/manifest.json")]
    finetune_from = []
    for label, attention, k, sharing in VARIANTS:
        run = f"mini-{label}"
        args = ["scripts/pretrain.py", EXP, f"run_name={run}", f"model.attention={attention}",
                f"model.projected_dim={k or 32}", f"model.sharing={sharing}", f"seed={SEED}"]
        stages.append((f"pretrain {label}", args, REPO / f"outputs/pretrain/{run}/summary.json"))
        finetune_from.append((run, False))
    finetune_from.append(("mini-full", True))  # the same baseline, random initialisation
    for run, scratch in finetune_from:
        for task in TASKS:
            name = f"mini-{task}-{run.removeprefix('mini-')}" + ("-scratch" if scratch else "")
            args = ["scripts/finetune.py", EXP, f"task={task}", f"model_path=outputs/pretrain/{run}",
                    f"from_scratch={str(scratch).lower()}", f"run_name={name}", f"seed={SEED}"]
            stages.append((f"finetune {name}", args, REPO / f"outputs/finetune/{name}/results.json"))
    return stages


def report_commands() -> list[list[str]]:
    return [["scripts/table2.py", "outputs/finetune/mini-*", "--out", "docs/results/table2_mini",
             "--command", "make reproduce-mini"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the mini Table 2 reproduction")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    stages = plan()
    print(__doc__.split("Usage")[0])
    for name, cmd, done in stages:
        state = "done" if done.exists() else "todo"
        print(f"[{state}] {name}: {shlex.join(['python', *cmd])}")
    for cmd in report_commands():
        print(f"[report] {shlex.join(['python', *cmd])}")
    if args.dry_run:
        return 0
    times = {}
    for name, cmd, done in stages:
        if done.exists():
            continue
        print(f"\n==> {name}: {shlex.join(['python', *cmd])}", flush=True)
        t0 = time.perf_counter()
        subprocess.run([PY, *cmd], cwd=REPO, check=True)
        times[name] = round(time.perf_counter() - t0, 1)
    for cmd in report_commands():
        subprocess.run([PY, *cmd], cwd=REPO, check=True)
    sys.path.insert(0, str(REPO))
    from linformer.report.curves import plot_pretrain_curves

    runs = {label: REPO / f"outputs/pretrain/mini-{label}" for label, *_ in VARIANTS}
    plot_pretrain_curves(runs, REPO / "docs/results/pretrain_curves.png",
                         f"Mini Table 2 pretraining (tiny model, n={N}, books + Wikipedia)")
    (REPO / "outputs/reproduce_mini_times.json").write_text(json.dumps(times, indent=2) + "\n")
    print("wrote docs/results/table2_mini.{md,json} and docs/results/pretrain_curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
