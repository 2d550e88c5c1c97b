"""`make demo`: the whole pipeline at toy scale on the mirror data (linformer/experiments/demo.py).

Usage: python scripts/demo.py [Hydra overrides for the pretraining stage, e.g. trainer.max_steps=100]
"""

import sys

from linformer.cli import cli_errors
from linformer.experiments import demo
from linformer.stages import STOPPED, StageFailed

if __name__ == "__main__":
    with cli_errors():
        try:
            demo.run(sys.argv[1:])
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (run_stages): the running stage was stopped
            print(STOPPED, file=sys.stderr)
            sys.exit(130)
        except StageFailed as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(1)
