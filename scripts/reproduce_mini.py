"""`make reproduce-mini`: the mini Table 2 on the mirror data (experiment table2_mini), hours on 2 CPU cores.

The plan and its jobs: linformer/experiments/mini.py. Each real CLI line is printed; two jobs run at once with
one thread each (--jobs 2; logs in outputs/reproduce_mini_logs/; why: linformer/jobs.py), a finetune as soon as its
pretraining is done.
Usage: python scripts/reproduce_mini.py [--dry-run] [--jobs N] [--report-only] [--under DIR]
"""

import sys

from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import repo_root
from linformer.experiments import CHECKOUT, Places, frontend, mini
from linformer.files import write_json
from linformer.report.curves import plot_pretrain_curves

REPO = repo_root()


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description="the mini Table 2 reproduction")
    frontend.plan_arguments(ap)
    args = ap.parse_args(argv)
    with cli_errors():
        # two jobs at a time, one thread each: two 1-thread jobs of the tiny model get more done than one 2-thread
        # job; --jobs 1 runs them one by one with their progress bars
        jobs = frontend.jobs_of(args.jobs, 2)
        return reproduce(jobs, args.dry_run, args.report_only, Places.of(args.under))


def reproduce(jobs: int, dry_run: bool, report_only: bool = False, places: Places = CHECKOUT) -> int:
    def after(times: dict[str, float]) -> None:  # the curves and the jobs' wall times beside the table
        plot_pretrain_curves(mini.pretrain_runs(places), REPO / places.results("pretrain_curves.png"),
                             f"Mini Table 2 pretraining (tiny model, n={mini.N}, books + Wikipedia)")
        if times:
            write_json(REPO / places.outputs("reproduce_mini_times.json"), times)
        print(f"wrote {places.results('table2_mini')}.{{md,json}} and "
              f"{places.results('pretrain_curves.png')}")

    return frontend.reproduce(
        mini.plan(places=places), title=mini.__doc__, minutes=None, timing="logs in "
        f"{places.outputs('reproduce_mini_logs')}", jobs=jobs, dry_run=dry_run, report_only=report_only,
        report=mini.report_argv(places), log_dir=REPO / places.outputs("reproduce_mini_logs"),
        after=after)


if __name__ == "__main__":
    sys.exit(main())
