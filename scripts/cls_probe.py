"""<s> before finetuning: python scripts/cls_probe.py outputs/pretrain/mini-* [--tasks sst2 imdb] [--out FILE.md]

For each pretrained model and task, on a seeded sample of the eval split: the entropy of <s>'s attention per
layer (against its maximum, uniform attention) and how much the final <s> state varies across inputs
(linformer/report/cls_probe.py). argparse, not Hydra: the runs are shell-expanded paths.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import at_least, path
from linformer.cli import ArgumentParser, cli_errors
from linformer.configs import added_config_dir, command_sources
from linformer.data.io import data_mirror_words
from linformer.data.tasks import MIRROR_TASKS
from linformer.files.atomic import output_files
from linformer.files.locations import relative_to
from linformer.files.outputs import made_by
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("runs", nargs="+", help="pretraining run directories (with model/), model directories or hub names")
    p.add_argument("--tasks", nargs="+", default=list(MIRROR_TASKS),
                   help="task configs, as finetune's task= names them: configs/task/<name>.yaml, or --config-dir's "
                        f"(default: {' '.join(MIRROR_TASKS)})")
    p.add_argument("--config-dir", default=None,
                   help="a folder of configs of your own (task/<name>.yaml) read after the repository's, as Hydra's "
                        "--config-dir is")
    p.add_argument("--data-mirror", type=path, default=None,
                   help=f"default: {data_mirror_words()}")
    # two at least: the spread is a standard deviation across inputs
    p.add_argument("--examples", type=at_least(2), default=64, help="eval examples per task (default 64, at least 2)")
    p.add_argument("--out", type=path, default=None,
                   help=f"also write the markdown table here ({relative_to()})")
    p.add_argument("--overwrite", action="store_true",
                   help="replace whatever is at --out (else only an earlier cls_probe table)")
    args = p.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report.cls_probe import write_probe

    with cli_errors(), command_sources(added_config_dir(args.config_dir)), \
            output_files([args.out] if args.out else [], made_by("cls_probe", {}), args.overwrite, key="--out"):
        write_probe(args.runs, args.tasks, args.data_mirror, args.examples, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
