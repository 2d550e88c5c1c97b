"""A finetuned classifier over a file: python scripts/predict.py MODEL_DIR --input FILE [--output OUT.jsonl]

One JSON line a row, in the file's order: {"row": its line in FILE, "label", "score", "probs": {label: p}}
(linformer/train/predict.py). FILE: .tsv or .csv with a header naming the text columns, .jsonl (an object a line),
or plain text (one text a line). argparse, not Hydra: a model folder and a file, like scripts/export.py.
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import argparse
import sys
from pathlib import Path

from linformer.argtypes import at_least, path
from linformer.cli import ArgumentParser, cli_errors
from linformer.files.atomic import output_files
from linformer.files.locations import relative_to
from linformer.files.outputs import made_by
from linformer.script_help import description


def _columns(text: str) -> tuple[str, ...]:
    columns = tuple(c.strip() for c in text.split(","))
    if not 1 <= len(columns) <= 2 or not all(columns):
        raise argparse.ArgumentTypeError(f"{text!r}: give one column, or two for a pair (a,b)")
    return columns


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=description(__doc__, __file__))
    p.add_argument("model_dir", help="a finetuned sequence classifier: a finetuning run's best/ or model/, an "
                                     f"exported or distilled one ({relative_to()})")
    p.add_argument("--input", type=path, required=True,
                   help="the rows to classify: .tsv/.csv with a header, .jsonl, or plain text, one text a line "
                        f"({relative_to()}); a file, not a pipe or standard input")
    p.add_argument("--output", type=path, default=None,
                   help="write the JSON lines here, whole once all are made (default: standard output)")
    p.add_argument("--text-columns", type=_columns, default=None, metavar="A[,B]",
                   help="the column(s) (jsonl: keys) holding the texts; default: the columns of the task the model "
                        "records, else text")
    p.add_argument("--max-length", type=at_least(1), default=None, metavar="TOKENS",
                   help="cut each row to this many tokens, at most the model's n; default: the length the model was "
                        "finetuned at, where its card or run's results.json records it, else its n")
    p.add_argument("--batch-size", type=at_least(1), default=32)
    p.add_argument("--device", default="auto", help="auto (a GPU where one is visible, else the CPU), cpu, cuda or "
                                                    "cuda:N")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip and count a bad row (a wrong count of fields, an empty text), where it is refused "
                        "naming its line")
    p.add_argument("--overwrite", action="store_true", help="replace whatever is at --output (else only an earlier "
                                                            "predict output)")
    args = p.parse_args(argv)
    # the work's modules (torch, transformers): imported once the command line is read
    from linformer.errors import ConfigError
    from linformer.files.atomic import atomic_stream
    from linformer.train.predict import (
        check_source,
        load_classifier_dir,
        model_weights,
        predict_file,
        what_predict_reads,
    )

    with cli_errors():
        check_source(args.input, "--input")  # before the model loads (seconds): a file, not a pipe
        out = Path(args.output) if args.output else None  # /dev/stdout, a fifo: no file to replace whole
        special = out is not None and out.exists() and not (out.is_file() or out.is_dir())
        if special or (out is not None and str(out).startswith(("/dev/", "/proc/"))):
            raise ConfigError(f"--output {args.output}: not a file (a pipe, terminal or device): predict writes to "
                              "standard output without --output: leave it out")
        # --output may not be, nor lie inside, what predict reads (the input, the model folder), overwrite or not
        reads = what_predict_reads(args.model_dir, args.input)
    with cli_errors(), output_files([args.output] if args.output else [], made_by("predict", {}), args.overwrite,
                                    key="--output", reads=reads):
        classifier = load_classifier_dir(args.model_dir, args.text_columns, args.device, "--device", args.max_length,
                                         "--max-length")
        weights = model_weights(classifier)
        if args.output is None:
            summary = predict_file(classifier, args.input, sys.stdout.buffer, args.batch_size, args.skip_bad_rows)
        else:
            with atomic_stream(args.output) as out:
                summary = predict_file(classifier, args.input, out, args.batch_size, args.skip_bad_rows)
        for line in summary.lines(args.input, classifier, weights, args.output):
            print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
