"""Efficiency benchmark (Table 3 + training throughput): `python scripts/benchmark.py [overrides]`."""

import sys

import hydra
from omegaconf import DictConfig

from linformer.bench.cli import benchmark_from_config


@hydra.main(version_base="1.3", config_path="../configs", config_name="benchmark")
def main(cfg: DictConfig) -> None:
    benchmark_from_config(cfg, command=" ".join(["python", "scripts/benchmark.py", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
