"""`make demo`: the whole pipeline at toy scale on the mirror data, in minutes on 2 CPU cores.

Runs the real command lines one after another (each printed before it runs), then writes
outputs/demo/summary.json: perplexity before and after pretraining, SST-2 dev accuracy and wall times.
Extra arguments are Hydra overrides for the pretraining stage (e.g. trainer.max_steps=100).
"""

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def stage(name: str, args: list[str], times: dict) -> None:
    print(f"\n==> {name}: {shlex.join(['python', *args])}", flush=True)
    t0 = time.perf_counter()
    subprocess.run([PY, *args], cwd=REPO, check=True)
    times[name] = round(time.perf_counter() - t0, 1)


def main() -> None:
    extra = sys.argv[1:]
    for old in ("outputs/pretrain/demo", "outputs/finetune/demo-sst2"):  # the demo always starts over
        shutil.rmtree(REPO / old, ignore_errors=True)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    stage("tokenizer", ["scripts/train_tokenizer.py", "data=mirror_slice"], times)
    stage("prepare_corpus", ["scripts/prepare_corpus.py", "data=mirror_slice"], times)
    pretrain = ["scripts/pretrain.py", "run_name=demo", "model=tiny", "data=mirror_slice",
                "trainer.max_steps=300", "trainer.batch_size=16", "trainer.lr=1e-3", "trainer.warmup_steps=30",
                "trainer.eval_every=100", "trainer.save_every=100", "trainer.mixed_precision=bf16", *extra]
    stage("pretrain", pretrain, times)
    finetune = ["scripts/finetune.py", "task=sst2", "model_path=outputs/pretrain/demo", "run_name=demo-sst2",
                "max_train_examples=20000", "trainer.epochs=2", "trainer.lr=1e-3", "trainer.mixed_precision=bf16"]
    stage("finetune_sst2", finetune, times)

    pre = json.loads((REPO / "outputs/pretrain/demo/summary.json").read_text())
    fin = json.loads((REPO / "outputs/finetune/demo-sst2/results.json").read_text())
    summary = {
        "val_ppl_before_pretraining": _ppl(pre["initial_val_loss"]),
        "val_ppl_after_pretraining": pre["final_val_ppl"],
        "pretrain_steps": pre["steps"],
        "pretrain_tokens": pre["tokens"],
        "pretrain_tokens_per_s": round(pre["tokens_per_s"]),
        "sst2_dev_accuracy": fin["metrics"]["accuracy"],
        "sst2_train_examples": fin["num_train_examples"],
        "sst2_dev_examples": fin["num_eval_examples"],
        "wall_time_s": {**times, "total": round(time.perf_counter() - t0, 1)},
        "commands": {"pretrain": shlex.join(["python", *pretrain]), "finetune": shlex.join(["python", *finetune])},
    }
    out = REPO / "outputs/demo/summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print("\n==> demo summary (outputs/demo/summary.json)")
    print(f"  validation perplexity: {summary['val_ppl_before_pretraining']:,.1f} before pretraining -> "
          f"{summary['val_ppl_after_pretraining']:,.1f} after {pre['steps']} steps ({pre['tokens']:,} tokens)")
    print(f"  SST-2 dev accuracy:    {100 * summary['sst2_dev_accuracy']:.1f}% "
          f"({fin['num_eval_examples']} examples, finetuned on {fin['num_train_examples']:,})")
    print("  wall time (s):         " + ", ".join(f"{k} {v}" for k, v in summary["wall_time_s"].items()))


def _ppl(loss):
    import math

    return math.exp(loss) if loss is not None else None


if __name__ == "__main__":
    main()
