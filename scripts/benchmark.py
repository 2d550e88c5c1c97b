"""Efficiency benchmark (Table 3 + training throughput): `python scripts/benchmark.py [overrides]`.
python scripts/benchmark.py --render NAME.csv [--out FILE]   (the inference report NAME.md and .png again from its
CSV and the report beside it, nothing measured: linformer/bench/rendered.py)
"""

import sys

from omegaconf import DictConfig

from linformer.bench.cli import benchmark_from_config
from linformer.bench.rendered import render_inference
from linformer.hydra_start import hydra_main
from linformer.report import measured
from linformer.shell import shell_command


@hydra_main("benchmark")
def main(cfg: DictConfig) -> None:
    benchmark_from_config(cfg, command=shell_command("python", "scripts/benchmark.py", *sys.argv[1:]))


if __name__ == "__main__":
    if measured.asks_render(sys.argv[1:]):
        sys.exit(measured.render_main(sys.argv[1:], "scripts/benchmark.py", "benchmark", (".md", ".png", ".csv", "_paper.png"),
                                      render_inference))
    main()
