"""`make demo`: the whole pipeline at toy scale on the mirror data (linformer/experiments/demo.py).

Usage: python scripts/demo.py [--under DIR] [--dry-run] [Hydra overrides for the pretraining job, e.g.
trainer.max_steps=100]
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import folder
from linformer.cli import ArgumentParser, cli_errors
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=description(__doc__, __file__))
    ap.add_argument("--under", type=folder, default=None, metavar="DIR",
                    help="write data/ and outputs/ under DIR instead of the checkout (a rehearsal)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="Hydra overrides for the pretraining job, e.g. trainer.max_steps=100")
    args = ap.parse_args(argv)  # a mistyped flag (--dryrun) is an unknown flag, not a Hydra override
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.experiments import demo

    with cli_errors():
        return demo.run(args.overrides, args.under, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
