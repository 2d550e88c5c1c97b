"""Efficiency measurements: the paper's Table 3 (inference time and memory) and training throughput.

FLOP counts live beside the model, in linformer.modeling.flops. Each name is imported from its module when first
asked for (``linformer.lazy``): a light module of the package (``bench.common``) is imported without torch.
"""

from typing import TYPE_CHECKING

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

# A type checker reads the names from their modules (the real classes and functions, and a misspelt name is an
# error); at run time they stay lazy. tests/test_imports.py checks that this block, _LAZY and __all__ agree.
if TYPE_CHECKING:
    from .inference import InferenceSettings, plan_grid, run_inference
    from .runner import run_benchmark
    from .throughput import ThroughputSettings, run_throughput
else:
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)
