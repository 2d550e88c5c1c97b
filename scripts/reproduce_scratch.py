"""`make reproduce-scratch`: Table 2 from the framework's own pretraining: full attention and Linformer at k = n/4
and n/2 with headwise, kv and layerwise sharing, pretrained side by side, each finetuned on SST-2 and IMDB with 3
seeds beside the same model with no pretraining, and Figure 3a from the same runs (the plan and its profiles:
linformer/experiments/scratch.py; the table: scripts/table2.py --layout scratch). Resumable: run it again.

Usage: python scripts/reproduce_scratch.py [--profile toy|gpu] [--dry-run] [--jobs N] [--rows N] [--under DIR]
                                           [--tasks sst2,imdb,qnli,qqp] [--report-only] [--only ROW[,ROW...]]
                                           [--stop-after MIN] [--end-by EPOCH_S]
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.cli import ArgumentParser, cli_errors
from linformer.experiments import frontend
from linformer.experiments import scratch as exp
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=description(__doc__, __file__, paragraph=True))
    frontend.plan_arguments(ap, exp.PROFILE_NAMES, exp.DEFAULT_PROFILE, "toy: the whole plan at toy scale on 2 CPU cores, in "
                            "minutes (a rehearsal); gpu: the table on one GPU, in slices (default %(default)s)")
    ap.add_argument("--rows", type=int, default=None, metavar="N",
                    help="run the first N rows not complete (a slice of GPU time that finishes whole rows)")
    ap.add_argument("--tasks", default=None, metavar="T,T",
                    help="finetuning tasks (default sst2,imdb); qnli and qqp need GLUE's train.tsv under "
                         "paths.data_mirror/glue/<task>/ (e.g. --tasks sst2,imdb,qnli,qqp)")
    frontend.row_arguments(ap, "full, full-scratch, k128-headwise, ...; with --rows N the first N of them not complete")
    args = ap.parse_args(argv)
    with cli_errors(resumes=True):  # the plan's finished jobs are kept
        profile = exp.with_tasks(exp.PROFILES[args.profile], args.tasks.split(",") if args.tasks is not None else None)
        jobs = frontend.jobs_of(args.jobs, profile.jobs)
        only = frontend.chosen_rows(args.only, [row.label for row in exp.rows(profile)])
        return exp.reproduce(profile, jobs, args.dry_run, args.report_only, args.under, args.rows, only,
                             args.stop_after, args.end_by)


if __name__ == "__main__":
    sys.exit(main())
