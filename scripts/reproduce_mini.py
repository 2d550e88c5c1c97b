"""`make reproduce-mini`: the mini Table 2 on the mirror data (experiment table2_mini), hours on 2 CPU cores.

The plan and its stages: linformer/experiments/mini.py. Each real CLI line is printed; two stages run at once with
one thread each (--jobs 2; logs in outputs/reproduce_mini_logs/; why: linformer/stages.py), a finetune as soon as its
pretraining is done.
Usage: python scripts/reproduce_mini.py [--dry-run] [--jobs N] [--under DIR]
"""

import shlex
import subprocess
import sys
import time
from pathlib import Path

from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import repo_root
from linformer.errors import ConfigError
from linformer.experiments import CHECKOUT, Places, frontend, mini
from linformer.files import write_json
from linformer.report.curves import plot_pretrain_curves

REPO = repo_root()


def _shown(argv: list[str]) -> str:
    return shlex.join(["python", *argv[1:]])


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description="the mini Table 2 reproduction")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    ap.add_argument("--jobs", type=int, default=2,
                    help="stages run at once, each with cores/jobs threads (default 2: two 1-thread jobs of the tiny "
                         "model get more done than one 2-thread job); 1 runs them one by one with their progress bars")
    ap.add_argument("--under", type=Path, default=None, metavar="DIR",
                    help="write data, runs and the report under DIR instead of the checkout (a rehearsal)")
    args = ap.parse_args(argv)
    with cli_errors():
        if args.jobs < 1:
            raise ConfigError(f"--jobs {args.jobs}: at least one stage must run at a time")
        return reproduce(args.jobs, args.dry_run, Places.of(args.under))


def reproduce(jobs: int, dry_run: bool, places: Places = CHECKOUT) -> int:
    stages = mini.plan(places=places)
    print(mini.__doc__)
    for s in stages:
        print(f"[{'done' if s.finished else 'todo'}] {s.name}: {_shown(s.argv)}")
    for cmd in mini.report_commands(places):
        print(f"[report] {shlex.join(['python', *cmd])}")
    if dry_run:
        return 0
    t0 = time.perf_counter()
    rc, times = frontend.run(stages, jobs, REPO / places.path("outputs/reproduce_mini_logs"))
    if rc:
        return rc
    times["total (stages run now)"] = round(time.perf_counter() - t0, 1)
    for cmd in mini.report_commands(places):  # the table2 script's own command line, in a process of its own
        subprocess.run([sys.executable, *cmd], cwd=REPO, check=True)
    plot_pretrain_curves(mini.pretrain_runs(places), REPO / places.path("docs/results/pretrain_curves.png"),
                         f"Mini Table 2 pretraining (tiny model, n={mini.N}, books + Wikipedia)")
    write_json(REPO / places.path("outputs/reproduce_mini_times.json"), times)
    print("wrote docs/results/table2_mini.{md,json} and docs/results/pretrain_curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
