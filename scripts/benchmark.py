"""Efficiency benchmark (Table 3 + training throughput): `python scripts/benchmark.py [overrides]`."""

import sys

from omegaconf import DictConfig

from linformer.bench.cli import benchmark_from_config
from linformer.hydra_start import hydra_main
from linformer.shell import shell_command


@hydra_main("benchmark")
def main(cfg: DictConfig) -> None:
    benchmark_from_config(cfg, command=shell_command("python", "scripts/benchmark.py", *sys.argv[1:]))


if __name__ == "__main__":
    main()
