"""`make reproduce-scratch`: Table 2 from the framework's own pretraining: full attention and Linformer at k = n/4
and n/2 with headwise, kv and layerwise sharing, pretrained side by side, each finetuned on SST-2 and IMDB with 3
seeds beside the same model with no pretraining, and Figure 3a from the same runs (the plan and its profiles:
linformer/experiments/scratch.py; the table: scripts/table2.py --layout scratch). Resumable: run it again.

Usage: python scripts/reproduce_scratch.py [--profile toy|gpu] [--dry-run] [--jobs N] [--rows N] [--under DIR]
                                           [--tasks sst2,imdb,qnli,qqp] [--report-only] [--only ROW[,ROW...]]
                                           [--stop-after MIN]
"""

import sys

from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import repo_root
from linformer.errors import ConfigError
from linformer.experiments import Places, frontend
from linformer.experiments import scratch as exp

REPO = repo_root()


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    frontend.plan_arguments(ap, exp.PROFILES, "toy", "toy: the whole plan at toy scale on 2 CPU cores, in minutes (a "
                                                     "rehearsal); gpu: the table on one GPU, in slices (default toy)")
    ap.add_argument("--rows", type=int, default=None, metavar="N",
                    help="run the first N rows not complete (a slice of GPU time that finishes whole rows)")
    ap.add_argument("--tasks", default=None, metavar="T,T",
                    help="finetuning tasks (default sst2,imdb); qnli and qqp need GLUE's train.tsv under "
                         "paths.data_mirror/glue/<task>/ (e.g. --tasks sst2,imdb,qnli,qqp)")
    frontend.row_arguments(ap, "full, full-scratch, k128-headwise, ...; with --rows N the first N of them not complete")
    args = ap.parse_args(argv)
    with cli_errors():
        profile = exp.with_tasks(exp.PROFILES[args.profile], args.tasks.split(",") if args.tasks is not None else None)
        jobs = frontend.jobs_of(args.jobs, profile.jobs)
        if args.rows is not None and args.rows < 1:
            raise ConfigError(f"--rows {args.rows}: give at least 1 (or leave it out for every row)")
        only = frontend.chosen_rows(args.only, [row.label for row in exp.rows(profile)])
        log_dir = REPO / Places.of(args.under).outputs(f"reproduce_scratch_{profile.name}_logs")
        chosen, _ = exp.slice_rows(profile, Places.of(args.under, profile.records), args.rows, only=only)
        return frontend.reproduce(
            exp.plan(profile, under=args.under, max_rows=args.rows, only=only),
            title="\n".join(filter(None, [exp.__doc__.split("\n\n")[0],
                                          exp.slice_line(profile, args.under, args.rows, only)])),
            minutes=lambda s: exp.estimated_minutes(profile, s), timing=profile.timing, jobs=jobs,
            dry_run=args.dry_run, report_only=args.report_only, report=exp.report_argv(profile, args.under),
            log_dir=log_dir, rows=exp.row_runs(profile, chosen), stop_after=args.stop_after)


if __name__ == "__main__":
    sys.exit(main())
