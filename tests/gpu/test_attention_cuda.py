"""Linformer attention on CUDA: padding invariance in every sharing mode and precision, and which SDPA kernel runs.

What the model hands to ``F.scaled_dot_product_attention`` (linformer/modeling/attention.py):
- nothing padded: ``LinformerModel.forward`` turns an all-ones attention_mask into None, so attn_mask=None, full
  attention and Linformer alike: the flash kernel can run;
- padded, linear E/F (the default): padded keys and values are zeroed before the n -> k projection, so there is no key
  mask either (attn_mask=None) and flash still runs (q: T rows, k and v: k rows);
- padded, full attention, or ``mask_empty_windows``, or pooling/conv projections: a (B, 1, 1, keys) boolean mask, which
  flash cannot take; the memory-efficient kernel can, so such batches must not fall back to the math kernel.
"""

import contextlib

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from linformer import LinformerForMaskedLM, LinformerModel
from linformer.modeling import LinearProjection
from linformer.modeling.attention import LinformerSelfAttention

from ..modeling.conftest import tiny_config
from ..modeling.test_attention import SHARINGS, _padded_batch
from .conftest import DEVICE, rel_error

pytestmark = pytest.mark.gpu

LENGTHS = (16, 11, 5)  # n = 16: one full row, two padded ones
HALF = {"fp16": torch.float16, "bf16": torch.bfloat16}
# name: (parameter dtype, autocast dtype or None, relative tolerance). Measured on CPU against fp32: pure bf16 about
# 6e-3, pure fp16 7e-4; projecting the padding (the bug these catch) moves the self-attention outputs by 12-90%.
PRECISIONS = {
    "fp32": (torch.float32, None, 1e-4),
    "bf16": (torch.bfloat16, None, 2e-2),
    "fp16": (torch.float16, None, 5e-3),
    "bf16-autocast": (torch.float32, torch.bfloat16, 2e-2),
    "fp16-autocast": (torch.float32, torch.float16, 5e-3),
}
MODES = [dict(sharing=s) for s in SHARINGS] + [
    dict(attention="full"),
    dict(sharing="kv", mask_empty_windows=True),
    dict(projection="mean_pool"),
    dict(projection="max_pool"),
    dict(projection="conv", sharing="headwise"),
]
UNMASKED_MODES = MODES[:4]  # linear E/F in each sharing mode: no key mask, padded or not
MASKED_MODES = MODES[4:]  # padded batches of these pass a key mask to SDPA
FUSED_OPS = {"aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
             "aten::_scaled_dot_product_cudnn_attention"}
MATH_OP = "aten::_scaled_dot_product_attention_math"


def _ids(modes):
    return ["-".join(map(str, m.values())) for m in modes]


def _autocast(dtype):
    return torch.autocast(DEVICE, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def _batch():
    ids, mask = _padded_batch(lengths=LENGTHS)
    return ids.to(DEVICE), mask.to(DEVICE)


def _outputs(model, ids, mask=None):
    """The last hidden states and every layer's self-attention output (before the residual and LayerNorm, where a
    leak through the projections is largest)."""
    outs = []
    hooks = [m.register_forward_hook(lambda module, args, out: outs.append(out[0]))
             for m in model.modules() if isinstance(m, LinformerSelfAttention)]
    try:
        with torch.no_grad():
            hidden = model(ids, attention_mask=mask).last_hidden_state
    finally:
        for h in hooks:
            h.remove()
    return [hidden, *outs]


def _worst_padding_error(model, autocast):
    """The largest relative difference, over sequences and outputs, between a sequence alone and inside the padded
    batch (at its real positions)."""
    ids, mask = _batch()
    with _autocast(autocast):
        batched = _outputs(model, ids, mask)
        errors = [rel_error(b[i, :L], a[0])
                  for i, L in enumerate(LENGTHS)
                  for b, a in zip(batched, _outputs(model, ids[i : i + 1, :L]))]
    return max(errors)


# ------------------------------------------------------------------------------------------ padding invariance
@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("overrides", MODES, ids=_ids(MODES))
def test_a_sequence_gives_the_same_outputs_alone_and_padded_in_a_batch(overrides, precision):
    dtype, autocast, tol = PRECISIONS[precision]
    model = LinformerModel(tiny_config(**overrides)).to(DEVICE, dtype).eval()
    assert _worst_padding_error(model, autocast) < tol


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("sharing", SHARINGS)
def test_projecting_the_padding_would_break_that_tolerance(sharing, precision):
    """The control: with zero_padding=False (fairseq's projection) the same comparison fails, by far, in every
    precision; so the tolerances above are tight enough to catch a leak."""
    dtype, autocast, tol = PRECISIONS[precision]
    model = LinformerModel(tiny_config(sharing=sharing)).to(DEVICE, dtype).eval()
    for m in model.modules():
        if isinstance(m, LinearProjection):
            m.zero_padding = False
    assert _worst_padding_error(model, autocast) > 3 * tol


# ------------------------------------------------------------------------------------------ SDPA kernels
def _train_step(model, ids, mask):
    """One MLM forward and backward: finite loss and gradients."""
    real = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
    labels = torch.where((torch.rand(ids.shape, device=DEVICE) < 0.3) & real, ids, -100)
    labels[:, 1] = ids[:, 1]  # at least one target per row (every row has 5 or more real tokens)
    loss = model(ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("dtype", list(HALF))
@pytest.mark.parametrize("overrides", [dict(attention="full"), *UNMASKED_MODES],
                         ids=_ids([dict(attention="full"), *UNMASKED_MODES]))
def test_unpadded_batches_run_on_flash_attention(overrides, dtype):
    """sdpa_kernel([FLASH_ATTENTION]) raises if flash cannot take the call: nothing padded means attn_mask=None, also
    when the tokenizer's all-ones attention_mask is passed. Training mode, attention dropout on, backward included."""
    model = LinformerForMaskedLM(tiny_config(attention_probs_dropout_prob=0.1, **overrides)).to(DEVICE).train()
    ids = torch.randint(4, 64, (3, 16), device=DEVICE)
    for mask in (None, torch.ones_like(ids)):
        model.zero_grad()
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), torch.autocast(DEVICE, dtype=HALF[dtype]):
            _train_step(model, ids, mask)


@pytest.mark.parametrize("dtype", list(HALF))
@pytest.mark.parametrize("sharing", SHARINGS)
def test_padded_batches_of_the_linear_linformer_still_run_on_flash_attention(sharing, dtype):
    """Linear E/F zero the padded keys and values before projecting, so a padded batch needs no key mask."""
    model = LinformerForMaskedLM(tiny_config(sharing=sharing, attention_probs_dropout_prob=0.1)).to(DEVICE).train()
    ids, mask = _batch()
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), torch.autocast(DEVICE, dtype=HALF[dtype]):
        _train_step(model, ids, mask)


@pytest.mark.parametrize("dtype", ["fp32", *HALF])
@pytest.mark.parametrize("overrides", MASKED_MODES, ids=_ids(MASKED_MODES))
def test_padded_batches_that_need_a_key_mask_run_on_memory_efficient_attention(overrides, dtype):
    """Full attention, masked empty windows and pooling/conv pass a (B, 1, 1, keys) mask: the memory-efficient kernel
    takes it (fp32 too), so these batches never need the math kernel's materialised scores."""
    model = LinformerForMaskedLM(tiny_config(attention_probs_dropout_prob=0.1, **overrides)).to(DEVICE).train()
    ids, mask = _batch()
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]), _autocast(HALF.get(dtype)):
        _train_step(model, ids, mask)


@pytest.mark.parametrize("dtype", list(HALF))
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("overrides", [dict(attention="full"), dict(sharing="kv"), dict(projection="mean_pool")],
                         ids=["full", "linformer", "mean_pool"])
def test_default_dispatch_picks_a_fused_kernel_not_math(overrides, padded, dtype):
    """Without any sdpa_kernel restriction, what PyTorch picks (flash, memory-efficient or cuDNN, by its own priority
    on this GPU) is a fused kernel for every batch here: the profiler records the fused op, never the math one."""
    model = LinformerForMaskedLM(tiny_config(**overrides)).to(DEVICE).eval()
    ids, mask = _batch()
    if not padded:
        mask = torch.ones_like(ids)
    with torch.no_grad(), torch.autocast(DEVICE, dtype=HALF[dtype]), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(ids, attention_mask=mask)
    ops = {e.key for e in prof.key_averages()}
    assert ops & FUSED_OPS, sorted(op for op in ops if "attention" in op)
    assert MATH_OP not in ops
