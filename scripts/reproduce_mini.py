"""`make reproduce-mini`: the mini Table 2 on the mirror data (experiment table2_mini), hours on 2 CPU cores.

The plan and its jobs: linformer/experiments/mini.py. Each real CLI line is printed; two jobs run at once with
one thread each (--jobs 2; logs in outputs/reproduce_mini_logs/; why: linformer/jobs.py), a finetune as soon as its
pretraining is done.
Usage: python scripts/reproduce_mini.py [--dry-run] [--jobs N] [--report-only] [--under DIR]
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.cli import ArgumentParser, cli_errors
from linformer.experiments import Places, frontend, mini


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description="the mini Table 2 reproduction")
    frontend.plan_arguments(ap)
    args = ap.parse_args(argv)
    with cli_errors(resumes=True):  # the plan's finished jobs are kept
        # two jobs at a time, one thread each: two 1-thread jobs of the tiny model get more done than one 2-thread
        # job; --jobs 1 runs them one by one with their progress bars
        jobs = frontend.jobs_of(args.jobs, 2)
        return mini.reproduce(jobs, args.dry_run, args.report_only, Places.of(args.under))


if __name__ == "__main__":
    sys.exit(main())
