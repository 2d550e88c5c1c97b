"""A maintainer's check that each module's own unit tests catch its bugs: deliberate bugs, one at a time, each run
against the tests of the module it breaks (in-process, seconds), never the end-to-end runs.

Usage: python tools/mutation_probe.py [NAME ...] [--out FILE.md]
(NAME: run the bugs whose description contains it; exit 1 when a bug passes its module's tests, 2 before running
any when an entry's text to change is not found once in its file or its tests are missing). The source file is
restored after each bug, also on Ctrl-C; run it on a clean tree, with nothing else reading the package.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MUTATIONS = [  # (what the bug does, file, text, its replacement, the module's own unit tests)
 ("collator: special tokens maskable", "linformer/data/collator.py", "prob.masked_fill_(no_mask, 0.0)", "prob.masked_fill_(no_mask, self.mlm_probability)", ["tests/data/test_collator.py"]),
 ("collator: labels kept at unmasked", "linformer/data/collator.py", "labels[~masked] = -100", "labels[masked] = -100", ["tests/data/test_collator.py"]),
 ("collator: random replace overwrites [MASK]", "linformer/data/collator.py", "& masked & ~replaced", "& masked", ["tests/data/test_collator.py"]),
 ("param_groups: biases decayed", "linformer/train/common.py", "p.ndim < 2 or ", "", ["tests/train/test_common.py"]),
 ("step: micro-batches averaged unweighted", "linformer/train/step.py", "part = share(loss_fn(model, batch), n, total)", "part = loss_fn(model, batch) / len(micro)", ["tests/train/test_step.py"]),
 ("packing: block opens with </s>", "linformer/data/corpus.py", "blocks[:, 0] = self.bos", "blocks[:, 0] = self.eos", ["tests/data/test_corpus.py"]),
 ("packing: no separator between documents", "linformer/data/corpus.py", "            if self.last_doc >= 0:\n                self._push(np.array([self.sep]", "            if False:\n                self._push(np.array([self.sep]", ["tests/data/test_corpus.py"]),
 ("corpus: validation may take every document", "linformer/data/corpus.py", "for i in order[:-1]:", "for i in order:", ["tests/data/test_corpus.py"]),
 ("stratified pick: remainders dropped", "linformer/data/task_splits.py", '    quota[np.argsort(quota - exact, kind="stable")[: n - int(quota.sum())]] += 1\n', "", ["tests/data/test_tasks.py"]),
 ("carve: validation rows also trained on", "linformer/data/task_splits.py", 'rest = np.setdiff1d(np.arange(len(cols["labels"])), held)', 'rest = np.arange(len(cols["labels"]))', ["tests/data/test_tasks.py"]),
 ("duplicates: whitespace makes a text new", "linformer/data/task_splits.py", 'return tuple(" ".join(str(cols[f][i]).split()) for f in fields)', 'return tuple(str(cols[f][i]) for f in fields)', ["tests/data/test_tasks.py"]),
 ("identity: old-default model field counted as change", "linformer/rundir.py", "return _is_model_default(k, other.get(k)) or (missing is a and _later(k))", "return (missing is a and _later(k))", ["tests/test_rundir.py", "tests/test_runconfig.py"]),
 ("paired: seed spread left out", "linformer/report/paired.py", "    if seeds == 1:\n        parts = examples", "    if True:\n        parts = examples", ["tests/report/test_paired.py"]),
 ("paired: p one-sided", "linformer/report/paired.py", "p = float(2 * stats.t.sf(", "p = float(stats.t.sf(", ["tests/report/test_paired.py"]),
 ("paired: seeds unmatched", "linformer/report/paired.py", "b = np.stack([np.asarray(b_by_seed[s], dtype=np.float64) for s in seeds])", "b = np.stack([np.asarray(b_by_seed[s], dtype=np.float64) for s in seeds[::-1]])", ["tests/report/test_paired.py"]),
 ("checkpoint: RNG never restored on resume", "linformer/train/checkpoint.py", "contextlib.nullcontext() if rng_ok else _keeping_rng(accelerator)", "_keeping_rng(accelerator)", ["tests/train/test_checkpoint.py"]),
 ("flex: global keys' blocks left out", "linformer/modeling/flex.py", "        blocks |= (kb[None] == gblock[:, :, None]).any(1)[:, None, :]", "        pass", ["tests/modeling/test_flex.py"]),
 ("flex: band's right edge left out", "linformer/modeling/flex.py", "(kb * BLOCK <= (qb + 1) * BLOCK - 1 + r)", "(kb * BLOCK <= (qb + 1) * BLOCK - 1)", ["tests/modeling/test_flex.py"]),
 ("flex: log counts not added", "linformer/modeling/flex.py", "score + bias.to(score.dtype), score)", "score, score)", ["tests/modeling/test_flex.py"]),
 ("checkpoint: keep_last keeps one fewer", "linformer/train/checkpoint.py", "[: -max(int(keep_last), 1)]", "[: -max(int(keep_last) + 1, 1)]", ["tests/train/test_checkpoint.py"]),
 ("step: fused optimizer not told of a non-finite step", "linformer/train/step.py", "inner.found_inf = (~finite).to(torch.float32)", "inner.found_inf = torch.zeros((), dtype=torch.float32)", ["tests/train/test_step.py"]),
 ("reads: rows before the last not logged", "linformer/train/trainer.py", "            if record is not pending[-1]:\n", "            if False:\n", ["tests/train/test_pretrain.py"]),
 ("reads: a row's lr taken at the read", "linformer/train/trainer.py", '"lr": record.lr,', '"lr": self.scheduler.get_last_lr()[self._lr_group],', ["tests/train/test_pretrain.py"]),
 ("reads: a late non-finite stop names the read's step", "linformer/train/trainer.py", "self._diverged(record.step, bar)", 'self._diverged(self.state["step"], bar)', ["tests/train/test_pretrain.py"]),
 ("settings: compile_mode under another backend accepted", "linformer/runconfig/settings.py", ' and values["compile_backend"] == "inductor"', "", ["tests/test_runconfig.py"]),
 ("inference: reference models in the run's dtype", "linformer/bench/inference.py", ".to(dtype=DTYPES[in_dtype or s.dtype])", ".to(dtype=DTYPES[s.dtype])", ["tests/bench/test_bench.py"]),
 ("length policy: bf16 rows run in fp32", "linformer/report/length_policy.py", ".eval().to(\n            DTYPES[dtype])", ".eval()", ["tests/report/test_length_policy.py"]),
]


def stale(mutations: list) -> list[str]:
    """One line per entry whose text to change is not found exactly once in its file, or whose tests are missing:
    such an entry would probe nothing (or the wrong line), so the tool refuses to run until it points at the code
    as it is now."""
    errors = []
    for name, file, old, _, tests in mutations:
        path = REPO / file
        count = path.read_text(encoding="utf-8").count(old) if path.is_file() else 0
        if count != 1:
            errors.append(f"entry {name!r}: the text to change is found {count} times in {file} (expected once)")
        errors += [f"entry {name!r}: no test file {t}" for t in tests if not (REPO / t).is_file()]
    return errors


def probe(name: str, file: str, old: str, new: str, tests: list[str]) -> tuple[str, str]:
    path = REPO / file
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    try:
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                              *tests], cwd=REPO, capture_output=True, text=True, timeout=600,
                              encoding="utf-8", errors="replace")
        last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        return ("caught" if out.returncode else "missed"), f"{last} ({time.perf_counter() - t0:.0f} s)"
    finally:
        path.write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])  # None under python -OO
    ap.add_argument("names", nargs="*")
    ap.add_argument("--out", type=Path, help="also write the table as markdown")
    args = ap.parse_args()
    errors = stale(MUTATIONS)
    if errors:
        print("\n".join(f"error: tools/mutation_probe.py: {e}; point it at the code as it is now" for e in errors),
              file=sys.stderr)
        return 2
    rows = []
    for name, file, old, new, tests in MUTATIONS:
        if args.names and not any(n in name for n in args.names):
            continue
        verdict, detail = probe(name, file, old, new, tests)
        rows.append(f"| {name} | `{file}` | {', '.join(f'`{t}`' for t in tests)} | {verdict} | {detail} |")
        print(rows[-1], flush=True)
    table = ["| deliberate bug | module | its tests | verdict | pytest |", "|---|---|---|---|---|", *rows]
    if args.out:
        head = f"# Mutation probe\n\nCommand: `python tools/mutation_probe.py --out {args.out}`\n"
        args.out.write_text("\n".join([head, *table, ""]), encoding="utf-8")
    missed = sum("| missed |" in r for r in rows)
    print(f"{len(rows) - missed} of {len(rows)} deliberate bugs caught by their module's own tests")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
