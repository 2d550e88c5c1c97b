"""Run the GPU stages of the reproduction, each as one command whose results are a few small files.

    python scripts/gpu_stage.py tests table3 throughput --out results/

Stages (see README, "On a GPU"):
  tests       pytest -m gpu tests/gpu (fp16/bf16 training, padding invariance, RoBERTa equality, SDPA kernels,
              exact resume, finetuning and conversion, FLOP counts on CUDA) -> gpu_tests.log
  table3      the paper's Table 3 (configs/benchmark_table3_gpu.yaml) -> table3_gpu.{md,csv,png}
  throughput  training throughput and MFU (configs/benchmark_throughput_gpu.yaml) -> throughput_gpu.{md,csv}

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


def stage_commands(out: Path) -> dict[str, list[str]]:
    py = sys.executable
    return {
        "tests": [py, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q", "-rA", "--timeout=600", "-p", "no:cacheprovider"],
        "table3": [py, "scripts/benchmark.py", "--config-name", "benchmark_table3_gpu", f"out_dir={out}",
                   "progress=false"],
        "throughput": [py, "scripts/benchmark.py", "--config-name", "benchmark_throughput_gpu", f"out_dir={out}",
                       "progress=false"],
    }


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"


def run_stage(name: str, command: list[str], out: Path) -> dict:
    """Run one stage with its output streamed to the console and to <out>/<name>.log (tests: gpu_tests.log)."""
    log_path = out / ("gpu_tests.log" if name == "tests" else f"{name}.log")
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        rc = proc.wait()
    return {"stage": name, "command": " ".join(command), "rc": rc, "wall_s": round(time.perf_counter() - start, 1),
            "log": log_path.name}


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
