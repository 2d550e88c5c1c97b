"""Efficiency benchmark (Table 3 + training throughput): `python scripts/benchmark.py [overrides]`.
python scripts/benchmark.py --render NAME.csv [--out FILE]   (the inference report NAME.md and .png again from its
CSV and the report beside it, nothing measured: linformer/bench/rendered.py)
"""

__linformer_command__ = True  # one of linformer's commands, set before its import (locations.started_script)

import sys

from linformer.hydra_start import hydra_main
from linformer.report import measured


@hydra_main("benchmark")
def main(cfg) -> None:
    from linformer.bench.cli import benchmark_from_config  # the work's modules (torch): after the command line
    from linformer.shell import shell_command

    benchmark_from_config(cfg, command=shell_command("python", "scripts/benchmark.py", *sys.argv[1:]))


def render(csv_path: str, out: str) -> None:
    """The inference report again from its CSV (``measured.render_main``), the report's modules imported once it is
    asked."""
    from linformer.bench.rendered import render_inference

    render_inference(csv_path, out)


if __name__ == "__main__":
    if measured.asks_render(sys.argv[1:]):
        sys.exit(measured.render_main(sys.argv[1:], "scripts/benchmark.py", "benchmark", (".md", ".png", ".csv", "_paper.png"),
                                      render))
    main()
