"""Run the GPU stages of the reproduction, each as one command whose results are a few small files.

    python scripts/gpu_stage.py tests table3 throughput --out results/

Stages (see README, "On a GPU"):
  tests       pytest -m gpu tests/gpu (fp16/bf16 training, padding invariance, RoBERTa equality, SDPA kernels,
              exact resume, finetuning and conversion, FLOP counts on CUDA) -> gpu_tests.log
  table3      the paper's Table 3 (configs/benchmark_table3_gpu.yaml) -> table3_gpu.{md,csv,png}
  throughput  training throughput and MFU (configs/benchmark_throughput_gpu.yaml) -> throughput_gpu.{md,csv}
  figure3     the paper's Figure 3a: a tokenizer and n = 512 corpus of the Wikipedia slice (data=wiki, read from
              paths.data_mirror: set LINFORMER_DATA_MIRROR where ../shared/data is not beside the checkout), then
              full attention and Linformer k = 64, 128, 256 pretrained on the same tokens
              (configs/experiment/figure3_gpu.yaml) -> figure3_gpu.{json,png}

Every stage's command line, exit code and wall time go into <out>/gpu_stages.json (one record per stage run,
newest last), so a batch of stages returns what each did even when one of them fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


FIGURE3_KS = (64, 128, 256)


def figure3_commands(py: str, out: Path) -> list[list[str]]:
    """Data, the four pretraining runs (the same tokens and steps), then the figure."""
    pretrain = [py, "scripts/pretrain.py", "model=base", "data=wiki", "experiment=figure3_gpu"]
    runs = [[*pretrain, "model.attention=full", "run_name=fig3-full"]]
    runs += [[*pretrain, f"model.projected_dim={k}", f"run_name=fig3-k{k}"] for k in FIGURE3_KS]
    dirs = ["outputs/pretrain/fig3-full", *(f"outputs/pretrain/fig3-k{k}" for k in FIGURE3_KS)]
    return [[py, "scripts/train_tokenizer.py", "data=wiki", "show_progress=false"],
            [py, "scripts/prepare_corpus.py", "data=wiki", "data.num_proc=16"],
            *runs,
            [py, "scripts/figure3.py", *dirs, "--out", str(out / "figure3_gpu")]]


def stage_commands(out: Path) -> dict[str, list[list[str]]]:
    """Each stage's commands, run in order; a stage stops at its first failing command."""
    py = sys.executable
    return {
        "tests": [[py, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-rA", "--timeout=600", "-p",
                   "no:cacheprovider"]],
        "table3": [[py, "scripts/benchmark.py", "--config-name", "benchmark_table3_gpu", f"out_dir={out}",
                    "progress=false"]],
        "throughput": [[py, "scripts/benchmark.py", "--config-name", "benchmark_throughput_gpu", f"out_dir={out}",
                        "progress=false"]],
        "figure3": figure3_commands(py, out),
    }


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"


def run_stage(name: str, commands: list[list[str]], out: Path) -> dict:
    """Run one stage's commands in order, their output streamed to the console and to <out>/<name>.log (tests:
    gpu_tests.log); the first that fails ends the stage."""
    log_path = out / ("gpu_tests.log" if name == "tests" else f"{name}.log")
    start, rc = time.perf_counter(), 0
    with open(log_path, "w") as log:
        for command in commands:
            log.write(f"$ {' '.join(command)}\n")
            proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in proc.stdout:
                sys.stdout.write(line)
                log.write(line)
            rc = proc.wait()
            if rc != 0:
                break
    return {"stage": name, "commands": [" ".join(c) for c in commands], "rc": rc,
            "wall_s": round(time.perf_counter() - start, 1), "log": log_path.name}


def main(argv: list[str] | None = None) -> int:
    commands = stage_commands(Path("."))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stages", nargs="+", choices=sorted(commands), help="stages to run, in order")
    parser.add_argument("--out", required=True, type=Path, help="directory for the stages' results")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    commands = stage_commands(out)
    record_path = out / "gpu_stages.json"
    records = json.loads(record_path.read_text()) if record_path.is_file() else []
    gpu = device_name()
    for name in args.stages:
        print(f"== stage {name} on {gpu}", flush=True)
        record = {**run_stage(name, commands[name], out), "device": gpu}
        records.append(record)
        record_path.write_text(json.dumps(records, indent=1) + "\n")
        print(f"== stage {name}: exit {record['rc']} in {record['wall_s']} s", flush=True)
    failed = [r["stage"] for r in records[-len(args.stages):] if r["rc"] != 0]
    print(f"gpu stages: {len(args.stages) - len(failed)} of {len(args.stages)} passed"
          + (f"; failed: {', '.join(failed)}" if failed else "") + f" ({record_path})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
