"""Long inputs: a finetuned full-attention classifier lengthened to n tokens, with full and Linformer attention:
python scripts/long_inputs.py --classifier DIR [--task imdb] [--ns 1024 2048] [--k 128] [--examples 200]
[--out FILE]
python scripts/long_inputs.py --render FILE.json --out FILE   (the report again from its JSON, nothing measured)

Writes FILE.md, FILE.json and FILE.png (linformer/report/long_inputs.py). argparse, not Hydra: a measurement with a
handful of options, like scripts/length_policy.py.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.argtypes import at_least, path
from linformer.cli import ArgumentParser
from linformer.files.locations import relative_to
from linformer.modeling.values import SHARING
from linformer.report import measured
from linformer.script_help import description


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=description(__doc__, __file__))
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--classifier", help="a finetuned sequence classifier with full attention (a finetuning run's "
                                           "best/)")
    what.add_argument("--render", metavar="JSON", type=path,
                      help=f"write the report again from the JSON of an earlier run ({relative_to()})")
    ap.add_argument("--task", default="imdb", choices=("imdb", "sst2"))
    ap.add_argument("--ns", type=at_least(1), nargs="+", default=[1024, 2048],
                    help="lengths to lengthen the classifier to (IMDB's test reviews reach 2,048 tokens in 4 cases and "
                         "3,000 in none; an n that no input of the sample reaches is left out, and said so)")
    ap.add_argument("--k", type=at_least(1), default=128)
    ap.add_argument("--sharing", default="layerwise", choices=list(SHARING))
    ap.add_argument("--examples", type=at_least(0), default=200,
                    help="eval examples longer than the classifier's n, drawn at random (0 = all)")
    ap.add_argument("--batch-size", type=at_least(1), default=4)
    measured.add_exact_key_options(ap, "the Linformer twin")
    ap.add_argument("--students", nargs="*", default=[], metavar="DIR",
                    help="also these Linformer classifiers of the classifier's tokenizer (distilled from it at length: "
                         "scripts/distill.py), at every n up to their own")
    measured.add_output_options(ap, "long_inputs")
    args = ap.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report import long_inputs

    with measured.report_outputs(args, "long_inputs", check=measured.check_exact_key_options):
        if args.render is not None:
            long_inputs.render(measured.read_measured(args.render, "scripts/long_inputs.py"), args.out)
            measured.show(args.out)
            return 0
        long_inputs.run(args.classifier, args.task, args.ns, args.k, args.sharing, args.out, args.examples,
                        args.batch_size, args.students, tuple(args.local_windows), tuple(args.global_positions),
                        args.landmarks, args.overlap)
    measured.show(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
