"""Efficiency measurements: the paper's Table 3 (inference time and memory), FLOP ratios, training throughput."""

from .flops import flop_ratio, layer_flops, model_flops
from .inference import InferenceSettings, plan_grid, run_inference
from .runner import run_benchmark
from .throughput import ThroughputSettings, run_throughput

__all__ = [
    "InferenceSettings",
    "ThroughputSettings",
    "flop_ratio",
    "layer_flops",
    "model_flops",
    "plan_grid",
    "run_benchmark",
    "run_inference",
    "run_throughput",
]
