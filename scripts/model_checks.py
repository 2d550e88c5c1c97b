"""Numerical and speed checks of the model side by side: python scripts/model_checks.py [--out FILE.md]"""

import sys

from linformer.bench.model_checks import report
from linformer.cli import ArgumentParser, cli_errors, shell_command
from linformer.files import made_by, output_files

if __name__ == "__main__":
    ap = ArgumentParser(description=__doc__)
    ap.add_argument("--out", help="also write the results as markdown to this file")
    ap.add_argument("--overwrite", action="store_true", help="replace --out when model_checks did not write it")
    args = ap.parse_args()
    with cli_errors(), output_files([args.out] if args.out else [], made_by("model_checks", {}), args.overwrite):
        report(args.out, shell_command("python", "scripts/model_checks.py", *sys.argv[1:]))
    sys.exit(0)
