"""`make demo`: the whole pipeline at toy scale on the mirror data (linformer/experiments/demo.py).

Usage: python scripts/demo.py [--under DIR] [Hydra overrides for the pretraining stage, e.g. trainer.max_steps=100]
"""

import sys
from pathlib import Path

from linformer.cli import ArgumentParser, cli_errors
from linformer.experiments import demo
from linformer.stages import STOPPED, StageFailed

if __name__ == "__main__":
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--under", type=Path, default=None, metavar="DIR",
                    help="write data/ and outputs/ under DIR instead of the checkout (a rehearsal)")
    args, overrides = ap.parse_known_args()
    with cli_errors():
        try:
            demo.run(overrides, args.under)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (run_stages): the running stage was stopped
            print(STOPPED, file=sys.stderr)
            sys.exit(130)
        except StageFailed as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(1)
