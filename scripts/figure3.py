"""The paper's Figure 3 from pretraining runs: python scripts/figure3.py outputs/pretrain/fig3-* --out docs/results/figure3_gpu

Writes <out>.json (each run's validation-perplexity curve, final perplexity and its ratio to full attention's) and
<out>.png, and prints whether every Linformer with k >= 128 ends within 5% of full attention. With --panel d (runs
of one k over several n, full attention beside them: python scripts/figure3.py --panel d outputs/pretrain/fig3d-*
--out docs/results/figure3d_gpu) it prints whether the Linformer's final perplexities lie within 5% of one another
across n. argparse, not Hydra: the runs are positional paths that the shell expands from globs.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import path
from linformer.cli import ArgumentParser, cli_errors
from linformer.files.locations import relative_to
from linformer.script_help import description
from linformer.shell import shell_command


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("runs", nargs="+", help="pretraining run directories (one full attention, the Linformers)")
    p.add_argument("--out", type=path, required=True,
                   help=f"output path without suffix (<out>.json, <out>.png; {relative_to()})")
    p.add_argument("--overwrite", action="store_true", help="replace files that an earlier figure3 did not write")
    p.add_argument("--panel", choices=["a", "d"], default="a",
                   help="a: several k at one n (default); d: one k over several n")
    args = p.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report.figure3 import figure3, figure3_lines

    with cli_errors():
        data = figure3(args.runs, args.out, args.overwrite, panel=args.panel,
                       command=shell_command("python", "scripts/figure3.py", *sys.argv[1:]))
    print(f"figure 3: {len(data['runs'])} runs -> {args.out}.json, {args.out}.png")
    print("\n".join(figure3_lines(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
