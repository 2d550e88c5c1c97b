"""Fidelity of converted Linformers to their source, by input length:
python scripts/fidelity.py LABEL=MODEL_DIR ... --source minilm --corpus data/processed/mirror_slice-minilm-n512 [--out FILE]

Writes FILE.md, FILE.json and FILE.png (linformer/report/fidelity.py). argparse, not Hydra: the models are a list.
"""

import shlex
import sys

from linformer.cli import ArgumentParser
from linformer.errors import ConfigError
from linformer.modeling.loading import resolve_model_path
from linformer.report import fidelity, measured


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="LABEL=DIR (or DIR; split at the last =): converted or transferred "
                                              "Linformer directories")
    ap.add_argument("--corpus", required=True, help="a corpus prepared with the models' tokenizer and n")
    reference = ap.add_mutually_exclusive_group(required=True)
    reference.add_argument("--source", help="the encoder the models were converted from, run with full attention: "
                                            "the reference (a directory, a hub name, or minilm)")
    reference.add_argument("--self-reference", action="store_true",
                           help="compare each model with its own weights in full attention: what the projection "
                                "changes, not fidelity to the source")
    ap.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512])
    ap.add_argument("--blocks", type=int, default=16, help="held-out blocks (default 16)")
    measured.add_output_options(ap, "fidelity")
    args = ap.parse_args(argv)
    with measured.report_outputs(args, "fidelity"):  # an earlier report of the same models and options is replaced
        if min(args.lengths) < 2 or args.blocks < 1:
            raise ConfigError("--lengths must be 2 or more tokens ([CLS] ... [SEP]) and --blocks at least 1")
        models = dict(m.rsplit("=", 1) if "=" in m else (m, m) for m in args.models)  # labels may hold "="
        models = {label: resolve_model_path(path) for label, path in models.items()}
        source = None if args.self_reference else resolve_model_path(args.source)
        errors = fidelity.measure(models, args.corpus, sorted(args.lengths), args.blocks, source)
        reference = fidelity.SELF_REFERENCE if source is None else f"{args.source} with full attention"
        fidelity.write_report(errors, args.out, shlex.join(["python", "scripts/fidelity.py", *sys.argv[1:]]),
                              reference)
    measured.show(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
