"""Fidelity of converted Linformers to their source, by input length:
python scripts/fidelity.py LABEL=MODEL_DIR ... --source minilm --corpus data/processed/mirror_slice-minilm-n512 [--out FILE]
python scripts/fidelity.py --render FILE.json --out FILE   (the report again from its JSON, nothing measured)

Writes FILE.md, FILE.json and FILE.png (linformer/report/fidelity.py). argparse, not Hydra: the models are a list.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import at_least, given_path, path
from linformer.cli import ArgumentParser
from linformer.files.locations import relative_to
from linformer.report import measured
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=description(__doc__, __file__))
    ap.add_argument("models", nargs="*", help="LABEL=DIR (or DIR; split at the last =): converted or transferred "
                                              "Linformer directories")
    ap.add_argument("--render", metavar="JSON", type=path,
                    help=f"write the report again from the JSON of an earlier run ({relative_to()}), "
                         "with today's tables and figure; nothing is measured, the other options are not read")
    ap.add_argument("--corpus", type=given_path, help="a corpus prepared with the models' tokenizer and n "
                                                    f"({relative_to()}, as the models)")
    reference = ap.add_mutually_exclusive_group()
    reference.add_argument("--source", help="the encoder the models were converted from, run with full attention: "
                                            "the reference (a directory, a hub name, or minilm)")
    reference.add_argument("--self-reference", action="store_true",
                           help="compare each model with its own weights in full attention: what the projection "
                                "changes, not fidelity to the source")
    ap.add_argument("--lengths", type=at_least(2), nargs="+", default=[16, 32, 64, 128, 256, 512],
                    help="input lengths in tokens, 2 or more ([CLS] ... [SEP])")
    ap.add_argument("--blocks", type=at_least(1), default=16,
                    help="held-out blocks (default 16; the corpus's validation split may hold fewer)")
    measured.add_output_options(ap, "fidelity")
    args = ap.parse_args(argv)
    if args.render is None:  # what a measurement needs (argparse's own error line and exit status)
        for missing, flag in ((not args.models, "models"), (args.corpus is None, "--corpus"),
                              (args.source is None and not args.self_reference, "--source or --self-reference")):
            if missing:
                ap.error(f"the following arguments are required: {flag} (or --render JSON)")
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report import fidelity

    with measured.report_outputs(args, "fidelity"):  # an earlier report of the same models and options is replaced
        if args.render is not None:
            fidelity.render(measured.read_measured(args.render, "scripts/fidelity.py"), args.out)
            measured.show(args.out)
            return 0
        # the corpus as given: the report's recorded settings keep it so
        fidelity.run(args.models, args.corpus, args.lengths, args.blocks, None if args.self_reference else args.source,
                     args.out)
    measured.show(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
