"""Efficiency measurements: the paper's Table 3 (inference time and memory) and training throughput.

FLOP counts live beside the model, in linformer.modeling.flops.
"""

from .inference import InferenceSettings, plan_grid, run_inference
from .runner import run_benchmark
from .throughput import ThroughputSettings, run_throughput

__all__ = [
    "InferenceSettings",
    "ThroughputSettings",
    "plan_grid",
    "run_benchmark",
    "run_inference",
    "run_throughput",
]
