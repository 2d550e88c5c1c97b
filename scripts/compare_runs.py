"""Compare runs: python scripts/compare_runs.py outputs/pretrain/* [--metrics val_ppl loss] [--out DIR]

Writes DIR/runs.md (final and best metrics per run, with attention, k, sharing, model, task, a column per setting
in which runs of one stage differ (trainer.lr, seed, ...), and the reported scores; then the mean and sd over the
seeds of runs that differ in their seed alone; where pretraining runs differ in tokens per step, a tokens column and
the runs at equal tokens, ranked) and DIR/<metric>.png (metric vs step, or vs tokens seen by --x or where tokens per
step differ, but a rate, tokens/s or MFU, by step; one line per run, a panel per stage, and per tokenizer for a
perplexity or loss of runs of different tokenizers, which do not compare; runs that share a name labelled by what
differs), and prints the table. argparse, not Hydra: the runs are positional paths
that the shell expands from globs, which Hydra's key=value overrides cannot take.
"""

import sys

from linformer.argtypes import path
from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import path_root
from linformer.script_help import description
from linformer.shell import shell_command


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("runs", nargs="+", help="run directories, or folders of them (outputs/pretrain; relative to "
                                         "the repository)")
    p.add_argument("--metrics", nargs="*", default=None,
                   help="metrics.jsonl keys for the table (default: those of val_ppl val_loss loss eval_accuracy "
                        "eval_f1 tokens_per_s mfu that the runs logged)")
    p.add_argument("--plot", nargs="*", default=None, help="metrics to plot (default: the table's)")
    p.add_argument("--x", choices=["step", "tokens"], default=None,
                   help="the plots' x axis (default: tokens seen where runs of one stage differ in tokens per step, "
                        "but step for tokens_per_s and mfu, rates; else step)")
    p.add_argument("--out", type=path, default=None,
                   help="output folder (default: paths.output_dir/compare)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace files in --out that an earlier compare_runs did not write")
    args = p.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report.compare import compare_runs

    given = sys.argv[1:] if argv is None else argv
    with cli_errors():  # the default --out is read from the configs here: --help and a given --out need none
        out = args.out or path(f"{path_root('output_dir')}/compare")
        result = compare_runs(args.runs, out, args.metrics, args.plot, args.overwrite, x=args.x,
                              command=shell_command("python", "scripts/compare_runs.py", *given))
        print(result["table"])
        print(f"wrote {result['markdown']}" + "".join(f"\nwrote {p}" for p in result["plots"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
