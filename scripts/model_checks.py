"""Numerical and speed checks of the model side by side: python scripts/model_checks.py [--out FILE.md]"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import path
from linformer.cli import ArgumentParser, cli_errors
from linformer.files.atomic import output_files
from linformer.files.locations import relative_to
from linformer.files.outputs import made_by
from linformer.script_help import module_doc
from linformer.shell import shell_command


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=module_doc(__doc__, __file__))
    ap.add_argument("--out", type=path,
                    help=f"also write the results as markdown to this file ({relative_to()})")
    ap.add_argument("--overwrite", action="store_true", help="replace --out when model_checks did not write it")
    args = ap.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.bench.model_checks import report

    with cli_errors(), output_files([args.out] if args.out else [], made_by("model_checks", {}), args.overwrite,
                                       key="--out"):
        report(args.out, shell_command("python", "scripts/model_checks.py", *(sys.argv[1:] if argv is None else argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
