"""The analytic FLOP count (linformer/modeling/flops.py) against torch's FlopCounterMode on CUDA, where attention runs
in the fused SDPA kernels (memory-efficient in fp32 and bf16, flash in bf16) that FlopCounterMode counts as ops of
their own: the CPU suite (tests/modeling/test_flops.py) can only count the math kernel's matmuls.

Forward: exact. Backward: FlopCounterMode charges a fused SDPA backward five score-sized products, the fifth being the
recomputation of Q K^T that flash and memory-efficient kernels do instead of storing the scores. Model FLOPs (what
MFU divides by) leave recomputation out, so the analytic training count is 3x the forward and the counter's total is
that plus one Q K^T per layer: half of what it charged the SDPA forward (Q K^T and P V)."""

import contextlib

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from linformer import LinformerForMaskedLM
from linformer.modeling.flops import forward_flops_per_token, training_flops_per_token

from ..modeling.conftest import tiny_config
from ..modeling.test_flops import MODES
from .conftest import DEVICE

pytestmark = pytest.mark.gpu

aten = torch.ops.aten
B = 2
KERNELS = {  # name: (autocast dtype or None, SDPA backend, its forward op, its backward op)
    "fp32-efficient": (None, SDPBackend.EFFICIENT_ATTENTION, aten._scaled_dot_product_efficient_attention,
                       aten._scaled_dot_product_efficient_attention_backward),
    "bf16-efficient": (torch.bfloat16, SDPBackend.EFFICIENT_ATTENTION, aten._scaled_dot_product_efficient_attention,
                       aten._scaled_dot_product_efficient_attention_backward),
    "bf16-flash": (torch.bfloat16, SDPBackend.FLASH_ATTENTION, aten._scaled_dot_product_flash_attention,
                   aten._scaled_dot_product_flash_attention_backward),
}


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("T", [16, 12])
@pytest.mark.parametrize("overrides", MODES, ids=["-".join(map(str, m.values())) for m in MODES])
def test_count_matches_flop_counter_on_cuda(overrides, T, kernel):
    autocast, backend, forward_op, backward_op = KERNELS[kernel]
    model = LinformerForMaskedLM(tiny_config(sparse_prediction=True, **overrides)).to(DEVICE)
    ids = torch.randint(4, 64, (B, T), device=DEVICE)
    labels = torch.full_like(ids, -100)
    labels[:, ::4] = ids[:, ::4]
    fraction = 0.25
    cast = torch.autocast(DEVICE, dtype=autocast) if autocast is not None else contextlib.nullcontext()
    with sdpa_kernel([backend]), cast, FlopCounterMode(display=False) as counter:
        loss = model(ids, labels=labels).loss
        forward = counter.get_total_flops()
        loss.backward()
        total = counter.get_total_flops()
    ops = counter.get_flop_counts()["Global"]
    assert forward_op in ops and backward_op in ops  # the fused kernel ran and was counted
    assert forward == pytest.approx(B * T * forward_flops_per_token(model.config, T, fraction), rel=1e-9)
    recomputed_scores = ops[forward_op] / 2
    assert total == pytest.approx(B * T * training_flops_per_token(model.config, T, fraction) + recomputed_scores,
                                  rel=1e-9)
