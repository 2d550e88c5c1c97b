"""`make demo`: the whole pipeline at toy scale on the mirror data, in minutes on 2 CPU cores.

Runs the real command lines one after another (each printed before it runs), then writes
outputs/demo/summary.json: perplexity before and after pretraining, SST-2 dev accuracy and wall times.
Extra arguments are Hydra overrides for the pretraining stage (e.g. trainer.max_steps=100).
"""

import math
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

from linformer.cli import cli_errors
from linformer.errors import DataError
from linformer.files import write_json
from linformer.rundir import RunRecord
from linformer.stages import StageFailed
from linformer.train.common import native_cpu_bf16

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
PRETRAIN, FINETUNE = REPO / "outputs/pretrain/demo", REPO / "outputs/finetune/demo-sst2"


def stage(name: str, args: list[str], times: dict) -> None:
    print(f"\n==> {name}: {shlex.join(['python', *args])}", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.run([PY, *args], cwd=REPO, check=False).returncode
    if rc != 0:
        raise StageFailed(f"{name}: exit status {rc}\n  command: {shlex.join(['python', *args])}")
    times[name] = round(time.perf_counter() - t0, 1)


def main() -> int:
    extra = sys.argv[1:]
    for old in (PRETRAIN, FINETUNE):  # the demo always starts over
        shutil.rmtree(old, ignore_errors=True)
    # bf16 where the CPU computes it natively (faster than fp32 there); emulated bf16 is slower than fp32
    precision = "bf16" if torch.cuda.is_available() or native_cpu_bf16() else "no"
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    stage("tokenizer", ["scripts/train_tokenizer.py", "data=mirror_slice"], times)
    stage("prepare_corpus", ["scripts/prepare_corpus.py", "data=mirror_slice"], times)
    pretrain = ["scripts/pretrain.py", "run_name=demo", "model=tiny", "data=mirror_slice",
                "trainer.max_steps=300", "trainer.batch_size=16", "trainer.lr=1e-3", "trainer.warmup_steps=30",
                "trainer.eval_every=100", "trainer.save_every=100", f"trainer.mixed_precision={precision}", *extra]
    stage("pretrain", pretrain, times)
    finetune = ["scripts/finetune.py", "task=sst2", f"model_path={PRETRAIN.relative_to(REPO)}",
                f"run_name={FINETUNE.name}", "max_train_examples=20000", "trainer.epochs=2", "trainer.lr=1e-3",
                f"trainer.mixed_precision={precision}"]
    stage("finetune_sst2", finetune, times)

    pre, fin = RunRecord(PRETRAIN, "pretrain").summary(), RunRecord(FINETUNE, "finetune").results()
    if not pre or not fin:
        raise DataError(f"the demo's runs finished without {PRETRAIN}/summary.json or {FINETUNE}/results.json")
    before = pre.get("initial_val_loss")
    summary = {
        "val_ppl_before_pretraining": math.exp(before) if before is not None else None,
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
    write_json(REPO / "outputs/demo/summary.json", summary)
    print("\n==> demo summary (outputs/demo/summary.json)")
    print(f"  validation perplexity: {summary['val_ppl_before_pretraining']:,.1f} before pretraining -> "
          f"{summary['val_ppl_after_pretraining']:,.1f} after {pre['steps']} steps ({pre['tokens']:,} tokens)")
    print(f"  SST-2 dev accuracy:    {100 * summary['sst2_dev_accuracy']:.1f}% "
          f"({fin['num_eval_examples']} examples, finetuned on {fin['num_train_examples']:,})")
    print("  wall time (s):         " + ", ".join(f"{k} {v}" for k, v in summary["wall_time_s"].items()))
    return 0


if __name__ == "__main__":
    with cli_errors():
        try:
            sys.exit(main())
        except StageFailed as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(1)
