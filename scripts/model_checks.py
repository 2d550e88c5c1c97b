"""Numerical and speed checks of the model side by side: python scripts/model_checks.py [--out FILE.md]"""

import sys

from linformer.bench.model_checks import report
from linformer.cli import ArgumentParser, cli_errors

if __name__ == "__main__":
    ap = ArgumentParser(description=__doc__)
    ap.add_argument("--out", help="also write the results as markdown to this file")
    args = ap.parse_args()
    with cli_errors():
        report(args.out)
    sys.exit(0)
