"""The offline dashboard: python scripts/dashboard.py [--outputs outputs] [--port 6006] (or make dashboard PORT=6006).

Starts TensorBoard on 127.0.0.1, then mirrors every run's metrics.jsonl under --outputs into the event files it
serves (outputs/.dashboard/<stage>/<run>/, incremental; each run appears as it is mirrored), and re-mirrors every
--watch seconds. argparse, not Hydra:
this command starts a server over existing runs; it is not a run and has no run directory.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys
from pathlib import Path

from linformer.argtypes import path, positive_seconds, tcp_port
from linformer.cli import ArgumentParser, cli_errors
from linformer.data.io import path_root
from linformer.errors import ConfigError
from linformer.files.locations import relative_to
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("--outputs", type=path, default=None,
                   help=f"folder of run directories (default: paths.output_dir; {relative_to()})")
    p.add_argument("--logdir", type=path, default=None,
                   help="where the event files go (default: <outputs>/.dashboard)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=tcp_port, default=6006)
    p.add_argument("--watch", type=positive_seconds, default=10.0, help="re-mirror every this many seconds while serving")
    p.add_argument("--mirror-only", action="store_true", help="write the event files and exit")
    p.add_argument("--overwrite", action="store_true", help="replace a --logdir that the dashboard did not write")
    args, extra = p.parse_known_args(argv)   # anything else goes to tensorboard (e.g. --load_fast=false)
    if extra and not extra[0].startswith("-"):  # not a tensorboard flag: a folder meant as --outputs, say
        p.error(f"unrecognized arguments: {' '.join(extra)} (the folder of runs is --outputs DIR)")
    if extra and args.mirror_only:
        p.error(f"{' '.join(extra)}: flags for tensorboard, which --mirror-only does not start")
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report.dashboard import mirror_once, serve, warn_if_no_runs

    with cli_errors():
        if args.outputs is None:  # read from the configs here: --help and a given --outputs need none
            args.outputs = path(path_root("output_dir"))
        if not Path(args.outputs).is_dir():
            raise ConfigError(f"--outputs {args.outputs} is not a directory: name the folder that holds the runs")
        if args.mirror_only:
            written = mirror_once(args.outputs, args.logdir, args.overwrite)
            warn_if_no_runs(args.outputs, written)
            print(f"{len(written)} runs, {sum(written.values())} new rows")
            return 0
        return serve(args.outputs, args.logdir, args.host, args.port, args.watch, extra, args.overwrite)


if __name__ == "__main__":
    sys.exit(main())
