"""Table 2 from finetuning runs: python scripts/table2.py 'outputs/finetune/*' --out docs/results/table2
python scripts/table2.py --render FILE.json   (the report's figures, and a pretrained report's table, again from its
                                              JSON; nothing read from the runs)"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import path
from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import path_root
from linformer.files.locations import relative_to
from linformer.report.layouts import LAYOUT_OPTIONS, LAYOUT_PLANS, LAYOUTS, misplaced_option


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description="Table 2 of the Linformer paper from finetuning run directories")
    ap.add_argument("runs", nargs="*", help="finetuning run dirs, results.json files, or globs (quote them; "
                                            f"{relative_to()})")
    ap.add_argument("--render", metavar="JSON", type=path, default=None,
                    help="instead of runs: an earlier report's <out>.json; draws <out>_forest.png (each row's "
                         "difference from the teacher or full attention) and, for the pretrained layout, writes its "
                         "table and by-length figure again, nothing read from the runs")
    ap.add_argument("--out", type=path, default=None,
                    help="writes <out>.md and <out>.json (default: paths.reports_dir/table2, or with --render the "
                         f"JSON's path less .json; {relative_to()})")
    ap.add_argument("--hardware", default=None, help="the machine this report is made on, as it names it (default: detected; where the runs were made comes from their records)")
    ap.add_argument("--command", default=None, help="command string recorded in the report (default: this one)")
    ap.add_argument("--layout", choices=LAYOUTS, default="paper",
                    help="paper: rows by (attention, n, k, sharing, pretrained) and every other architecture field "
                         "a run records (a conv or local/global run is its own row) beside the paper's numbers; "
                         "pretrained: a converted encoder's teacher against its Linformer variants, with and without "
                         "transfer, with paired intervals and cost per example (make reproduce-pretrained); "
                         "scratch: the framework's own pretraining against full attention and no pretraining, with "
                         "Figure 3a (make reproduce-scratch)")
    ap.add_argument("--profile", default=None, help="pretrained and scratch layouts: the reproduction's profile (its "
                                                     "recipe and its runs not done yet go into the table; default: "
                                                     + " and ".join(p.DEFAULT_PROFILE for p in LAYOUT_PLANS.values())
                                                     + ")")
    timing = ap.add_mutually_exclusive_group()
    timing.add_argument("--measure", action="store_true",
                        help="pretrained layout: time the cost columns here even where the report being replaced has "
                             "them (default: keep those, so a refresh on a busy machine does not replace them)")
    timing.add_argument("--no-measure", action="store_true", help="pretrained layout: no time/memory columns")
    ap.add_argument("--no-by-length", action="store_true",
                    help="pretrained layout: skip the difference by input length (it re-tokenizes each task's eval "
                         "data); the eval examples old runs trained on are still left out")
    ap.add_argument("--subsets", action="store_true",
                    help="paper layout: take runs scored on a subset of their dev/test split (max_eval_examples), each "
                         "such cell saying how many examples scored it (default: refused)")
    ap.add_argument("--overwrite", action="store_true",
                    help="replace whatever is at the output paths (else only an earlier table2 of the same runs "
                         "and layout)")
    args = ap.parse_args(argv)
    if args.render is not None:
        if args.runs:
            ap.error("--render draws from the JSON alone: give no runs with it")
        # the work's modules (torch, transformers): imported once the command line is read
        from linformer.report.table2 import render

        with cli_errors():
            render(args.render, args.out, args.overwrite)
        return 0
    if not args.runs:
        ap.error("the following arguments are required: runs (or --render JSON)")
    misplaced = misplaced_option(args.layout, [flag for flag in LAYOUT_OPTIONS
                                               if getattr(args, flag[2:].replace("-", "_"))])
    if misplaced:
        ap.error(misplaced)
    from linformer.report.table2 import write_report

    with cli_errors():  # the default --out is read from the configs here: --help and a given --out need none
        args.out = args.out or path(f"{path_root('reports_dir')}/table2")
        write_report(args.runs, args.out, args.layout, args.profile, args.hardware, args.command,
                     measure=False if args.no_measure else (True if args.measure else None),
                     by_length=not args.no_by_length, overwrite=args.overwrite, subsets=args.subsets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
