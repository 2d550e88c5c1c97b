"""Long inputs: a finetuned full-attention classifier lengthened to n tokens, with full and Linformer attention:
python scripts/long_inputs.py --classifier DIR [--task imdb] [--ns 2048 4096] [--k 128] [--examples 200]
[--out FILE]

Writes FILE.md, FILE.json and FILE.png (linformer/report/long_inputs.py). argparse, not Hydra: a measurement with a
handful of options, like scripts/length_policy.py.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from linformer.data.io import default_data_mirror, resolve_path
from linformer.data.tasks import TASKS, load_task
from linformer.errors import ConfigError
from linformer.modeling.configuration import exact_keys_label
from linformer.modeling.convert import is_sequence_classifier
from linformer.modeling.loading import resolve_model_path
from linformer.report import long_inputs, measured
from linformer.train.distill import check_same_vocabulary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--classifier", required=True, help="a finetuned sequence classifier with full attention")
    ap.add_argument("--task", default="imdb", choices=("imdb", "sst2"))
    ap.add_argument("--ns", type=int, nargs="+", default=[2048, 4096], help="lengths to lengthen the classifier to")
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--sharing", default="layerwise")
    ap.add_argument("--examples", type=int, default=200, help="eval examples longer than the classifier's n, drawn "
                    "at random (0 = all)")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--local-windows", type=int, nargs="*", default=[],
                    help="also the Linformer twin with exact local keys of these windows (w) and the global tokens")
    ap.add_argument("--global-positions", type=int, nargs="*", default=[0, -1],
                    help="global tokens of the --local-windows rows (default 0 -1: the first and last real token)")
    ap.add_argument("--students", nargs="*", default=[], metavar="DIR",
                    help="also these Linformer classifiers of the classifier's tokenizer (distilled from it at length: "
                         "scripts/distill.py), at every n up to their own")
    measured.add_output_options(ap, "outputs/reports/long_inputs")
    args = ap.parse_args(argv)
    with measured.report_outputs(args, "long_inputs"):
        from transformers import AutoConfig, AutoTokenizer

        t0 = time.perf_counter()
        classifier = resolve_model_path(args.classifier, "--classifier")
        config = AutoConfig.from_pretrained(classifier)
        base_n = getattr(config, "max_seq_len", None)
        if config.model_type != "linformer" or getattr(config, "attention", None) != "full":
            what = f"a {config.model_type} model"
            if config.model_type == "linformer":
                what = (f"a classifier with {config.attention_label} attention (the Linformer rows are built from "
                        "the full-attention one)")
            raise ConfigError(f"--classifier {args.classifier}: a finetuned Linformer classifier in full mode (a "
                              f"finetuning run of a converted model), not {what}")
        if min(args.ns) <= base_n or args.k >= min(args.ns):
            raise ConfigError(f"--ns {args.ns} --k {args.k}: every n must be above the classifier's n = {base_n}, "
                              "and k below every n")
        tokenizer = AutoTokenizer.from_pretrained(classifier)
        students = {}
        for given in args.students:
            path = resolve_model_path(given, "--students")
            student = AutoConfig.from_pretrained(path)
            if student.model_type != "linformer" or not is_sequence_classifier(student):
                raise ConfigError(f"--students {given}: a Linformer sequence classifier, not a "
                                  f"{', '.join(student.architectures or [student.model_type])}")
            check_same_vocabulary(tokenizer, AutoTokenizer.from_pretrained(path), classifier, path)
            exact = f" + {exact_keys_label(student.local_window, student.global_positions)}" \
                if student.local_window or student.global_positions else ""
            students[f"{Path(given).name} ({student.attention_label}{exact}, n = {student.max_seq_len})"] = path
        mirror = Path(default_data_mirror())
        split = load_task(args.task, str(mirror / TASKS[args.task].mirror_subdir), tokenizer, max(args.ns), splits=("eval",),
                          cache_dir=resolve_path("data/cache/tasks"))["eval"]
        lengths = np.array([len(x) for x in split["input_ids"]])
        long = np.flatnonzero(lengths > base_n)
        if not len(long):
            raise ConfigError(f"--task {args.task}: no eval example is longer than {base_n} tokens")
        if args.examples and args.examples < len(long):
            long = np.sort(np.random.default_rng(0).choice(long, args.examples, replace=False))
        rows = split.select(long.tolist())
        ids, labels = rows["input_ids"], np.asarray(rows["labels"])
        result = long_inputs.measure(classifier, ids, labels, args.ns, args.k, args.sharing, tokenizer.pad_token_id,
                                     args.batch_size, local_windows=tuple(args.local_windows),
                                     global_positions=tuple(args.global_positions), students=students)
        command, provenance = measured.provenance("scripts/long_inputs.py", t0)
        lens = result["lengths"]
        longer = int((lengths > base_n).sum())
        header = [(f"Classifier: `{args.classifier}` (finetuned at n = {base_n}); positions extended by copying its "
                   f"learned rows; the Linformer twin: k = {args.k}, {args.sharing}, E/F as window means, the "
                   "converted length policy. Nothing trained at the new lengths"
                   + (f" but the students: {', '.join(students)}." if students else ".")),
                  (f"Examples: {len(ids)} {args.task} eval examples longer than {base_n} tokens (of {longer}; "
                   f"{lens['min']}-{lens['max']} tokens, median {lens['median']:.0f}), each truncated to n."),
                  ("Cost: forward time and peak memory per example at n tokens (batch 1, median of 3 interleaved "
                   "rounds), and their ratios to full attention at the same n, measured side by side."),
                  *provenance]
        long_inputs.write_report(result, args.out, header, {"command": command})
    measured.show(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
