"""Length policies on a converted encoder, before training:
python scripts/length_policy.py [--source minilm] [--ks 64 128] [--sst2 872] [--imdb 128] [--out FILE]
    [--local-windows 32 64 128 [--global-positions 0 -1] [--local-only] [--landmarks]] [--longer-than TOKENS]
python scripts/length_policy.py --render FILE.json --out FILE   (the report again from its JSON, nothing measured)

Writes FILE.md, FILE.json and FILE.png (linformer/report/length_policy.py). argparse, not Hydra: a measurement with
a handful of options, like scripts/fidelity.py.
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
    ap.add_argument("--source", default="minilm", help="the encoder to convert (default minilm)")
    ap.add_argument("--render", metavar="JSON", type=path,
                    help=f"write the report again from the JSON of an earlier run ({relative_to()}), "
                         "with today's labels and figure; the other options are not read")
    ap.add_argument("--ks", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--sharing", default="layerwise", choices=list(SHARING))
    ap.add_argument("--n", type=at_least(1), default=512, help="max_seq_len of the converted models (default 512)")
    ap.add_argument("--sst2", type=at_least(0), default=872, help="SST-2 dev examples (stratified; 0 = skip)")
    ap.add_argument("--imdb", type=at_least(0), default=128, help="IMDB test reviews (stratified; 0 = skip)")
    measured.add_exact_key_options(ap, "the converted policy")
    ap.add_argument("--local-only", action="store_true",
                    help="measure only the converted policy and its --local-windows rows")
    ap.add_argument("--longer-than", type=int, default=0, metavar="TOKENS",
                    help="draw the examples at random among those longer than TOKENS (tokenized at --n) instead of "
                         "a stratified subset: where a lengthened model's projection acts")
    ap.add_argument("--split", choices=["eval", "train"], default="eval",
                    help="the split the examples come from: eval (SST-2 dev, IMDB test: what a report shows) or train "
                         "(without the rows whose text is also an eval row's: where a default is chosen, so that "
                         "nothing is chosen on the split the tables report)")
    ap.add_argument("--dtypes", nargs="+", default=["fp32"], choices=["fp32", "bf16"],
                    help="run the converted models in each (the reference stays fp32): bf16 rows show what bf16 "
                         "inference adds to the error")
    measured.add_output_options(ap, "length_policy")
    args = ap.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.report import length_policy

    with measured.report_outputs(args, "length_policy", check=measured.check_exact_key_options):
        if args.render is not None:
            length_policy.render(measured.read_measured(args.render, "scripts/length_policy.py"), args.out)
            measured.show(args.out)
            return 0
        length_policy.run(args.source, args.ks, args.sharing, args.n, {"sst2": args.sst2, "imdb": args.imdb},
                          args.out, args.local_windows, args.global_positions, args.local_only, args.landmarks,
                          args.overlap, args.longer_than, args.split, args.dtypes)
    measured.show(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
