"""`make reproduce-pretrained`: Table 2 from all-MiniLM-L6-v2 converted to Linformer, with and without attention
transfer (the plan and its profiles: linformer/experiments/pretrained.py; the table: scripts/table2.py --layout
pretrained). Every job is skipped once its output exists, so an interrupted run resumes where it stopped.

Usage: python scripts/reproduce_pretrained.py [--profile cpu|cpu12k|gpu] [--dry-run] [--jobs N] [--report-only] [--under DIR]
                                              [--only ROW[,ROW...]] [--stop-after MIN] [--end-by EPOCH_S]
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.cli import ArgumentParser, cli_errors
from linformer.experiments import Places, frontend
from linformer.experiments import pretrained as exp
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=description(__doc__, __file__, paragraph=True))
    frontend.plan_arguments(ap, exp.PROFILES, exp.DEFAULT_PROFILE, "cpu: subsets sized for 2 CPU cores, in sittings; "
                            "cpu12k: IMDB on 12,000 reviews, the target rows only, over several sittings; gpu: the "
                            "full-size table (default %(default)s)")
    frontend.row_arguments(ap, "as the runs name them: full, k128-layerwise-local-tr, ...")
    args = ap.parse_args(argv)
    with cli_errors(resumes=True):  # the plan's finished jobs are kept
        profile = exp.PROFILES[args.profile]
        jobs = frontend.jobs_of(args.jobs, profile.jobs)
        if not args.dry_run:
            # the work's modules (torch, transformers): imported once the command line is read
            from linformer.modeling.loading import resolve_model_path

            resolve_model_path(exp.SOURCE)  # a missing optional extra is one error line, before any job starts
        places = Places.of(args.under, exp.RECORDS)
        only = frontend.chosen_rows(args.only, list(exp.row_runs(profile, places)))
        return exp.reproduce(profile, jobs, args.dry_run, args.report_only, places, only, args.stop_after,
                             args.end_by)


if __name__ == "__main__":
    sys.exit(main())
