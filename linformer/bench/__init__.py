"""Efficiency measurements: the paper's Table 3 (inference time and memory) and training throughput.

FLOP counts live beside the model, in linformer.modeling.flops. Each name is imported from its module when first
asked for (``linformer.lazy``): a light module of the package (``bench.common``) is imported without torch.
"""

from ..lazy import lazy_names

_LAZY = {
    "InferenceSettings": ".inference",
    "ThroughputSettings": ".throughput",
    "plan_grid": ".inference",
    "run_benchmark": ".runner",
    "run_inference": ".inference",
    "run_throughput": ".throughput",
}

__all__ = [
    "InferenceSettings",
    "ThroughputSettings",
    "plan_grid",
    "run_benchmark",
    "run_inference",
    "run_throughput",
]

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
