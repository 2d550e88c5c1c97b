"""GPU tests: training through Accelerate on CUDA, the SDPA kernels, padding invariance, interop and FLOPs on the
device. Every test is marked ``gpu``: deselected by default (pyproject) and skipped without CUDA (tests/conftest.py).

    pytest -m gpu tests/gpu

Fixtures come from the CPU suites (re-exported below); what is set here is only what the device needs."""

import os

# Bitwise resume (test_train_cuda) runs under torch.use_deterministic_algorithms, which needs cuBLAS's fixed
# workspace; cuBLAS reads the variable when its first handle is made, so it is set before any CUDA work.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import pytest
import torch

from ..modeling.test_roberta_interop import roberta_dir  # noqa: F401  (fixture reused by test_interop_cuda)
from ..train.conftest import pretrained_run, tiny_data  # noqa: F401  (fixtures reused by test_train_cuda)

DEVICE = "cuda"


@pytest.fixture(autouse=True)
def _no_tf32():
    """fp32 matmuls in full fp32 (no TF32), so that fp32 comparisons can be tight whatever the process default."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(before)


@pytest.fixture
def deterministic():
    """torch.use_deterministic_algorithms(True) for the test: cuBLAS with a fixed workspace, SDPA backward kernels
    without split-key atomics (flash, memory-efficient; cuDNN attention is then never picked)."""
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def rel_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """||actual - expected|| / ||expected|| in fp32."""
    actual, expected = actual.float(), expected.float()
    return ((actual - expected).norm() / expected.norm()).item()
