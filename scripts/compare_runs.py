"""Compare runs: python scripts/compare_runs.py outputs/pretrain/* [--metrics loss] [--where k=64] [--group-by seed]

Writes DIR/runs.md (DIR: --out; final and best metrics per run, with attention, k, sharing, model, task, a column per
setting in which runs of one stage differ (trainer.lr, seed, ...), and the reported scores; then the mean and sd over
the seeds of runs that differ in their seed alone; where pretraining runs differ in tokens per step, a tokens column
and the runs at equal tokens, ranked) and DIR/<metric>.png (metric vs step, or vs tokens seen by --x or where tokens
per step differ, but a rate, tokens/s or MFU, by step; one line per run, a panel per stage, and per tokenizer for a
perplexity or loss of runs of different tokenizers, which do not compare; runs that share a name labelled by what
differs), and prints the table (fitted to the terminal's width: the settings the same in every row named under it,
long values shortened, columns that do not fit named; runs.md has it whole). A sweep is narrowed by --where (the
runs of a setting's value) and summarised by --group-by (the mean +- sd over each value's runs). argparse, not Hydra:
the runs are positional paths that the shell expands from globs, which Hydra's key=value overrides cannot take.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import at_least, path
from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import path_root
from linformer.files.locations import relative_to
from linformer.progress import terminal_size
from linformer.script_help import description
from linformer.shell import shell_command


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("runs", nargs="+", help="run directories, or folders of them (outputs/pretrain; "
                                         f"{relative_to()})")
    p.add_argument("--metrics", nargs="*", default=None,
                   help="metrics.jsonl keys for the table (default: those of val_ppl val_loss loss eval_accuracy "
                        "eval_f1 tokens_per_s mfu that the runs logged)")
    p.add_argument("--plot", nargs="*", default=None, help="metrics to plot (default: the table's)")
    p.add_argument("--x", choices=["step", "tokens"], default=None,
                   help="the plots' x axis (default: tokens seen where runs of one stage differ in tokens per step, "
                        "but step for tokens_per_s and mfu, rates; else step)")
    p.add_argument("--out", type=path, default=None,
                   help="output folder (default: paths.output_dir/compare)")
    p.add_argument("--where", action="append", metavar="KEY=VALUE",
                   help="keep only the runs of this value of a setting, named as the table names it (a column: k, "
                        "sharing, stage; or a config key: model.sharing=kv, trainer.lr=3e-4, seed=1); numbers "
                        "compare numerically, an unset setting is null; repeat for more settings (all must hold) or "
                        "for more values of one (either)")
    p.add_argument("--group-by", action="append", metavar="KEY",
                   help="replace the \"Across seeds\" table (runs differing in their seed alone) by one row per "
                        "value of this setting (k, model.sharing, trainer.lr; repeat or give k,sharing for "
                        "combinations): the mean +- sd over its runs of each metric's final value and of the chosen "
                        "and reported scores, pooled over the other settings, which it names; the table's rows in the "
                        "order of its values")
    p.add_argument("--width", type=at_least(0), default=None,
                   help="characters a printed table may take (default: the terminal's width, no limit where the "
                        "output is no terminal; 0: no limit): a wider one leaves out the settings the same in every "
                        "row, shortens long values and leaves out columns, saying which (runs.md has them all)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace files in --out that an earlier compare_runs did not write")
    args = p.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report.compare import compare_runs

    given = sys.argv[1:] if argv is None else argv
    with cli_errors():  # the default --out is read from the configs here: --help and a given --out need none
        out = args.out or path(f"{path_root('output_dir')}/compare")
        size = terminal_size(sys.stdout)  # a terminal that reports 0 columns: progress.FALLBACK_SIZE's
        width = args.width if args.width is not None else (size.columns if size is not None else 0)
        result = compare_runs(args.runs, out, args.metrics, args.plot, args.overwrite, x=args.x,
                              command=shell_command("python", "scripts/compare_runs.py", *given), where=args.where,
                              group_by=args.group_by, width=width)
        print(result["printed"])
        print(f"wrote {result['markdown']}" + "".join(f"\nwrote {p}" for p in result["plots"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
