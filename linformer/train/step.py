"""One optimizer step over a step's micro-batches: the trainer's (``trainer.Trainer``) and the throughput benchmark's
(``bench.throughput``), so that the tokens/s and MFU the benchmark reports are those of the step users run.

The step's loss is the mean over the step's items on every rank: each micro-batch's mean loss is weighted by its
share of the global item count (so 2 processes x batch b equal 1 process x batch 2b; a micro-batch of no item, an
MLM batch that drew no mask, adds 0: ``share``), gradients are clipped, and the
optimizer steps only when the loss and the gradient norm are finite (fp16 excepted: the grad scaler skips an
overflowing step itself and lowers its scale). An optimizer that takes a ``found_inf`` tensor (fused AdamW, the
trainer's on CUDA) skips on the device, so the step never waits for the GPU; any other reads the flag on the host.

``ops`` is an ``accelerate.Accelerator`` in training, or anything with the same six members (``AmpOps`` for the
benchmark, which compares precisions in one process and so cannot build one Accelerator per precision).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence

import torch


def optimizer_step(ops, model, optimizer, micro: Sequence[Mapping[str, torch.Tensor]], counts: Sequence[int],
                   loss_fn: Callable, max_grad_norm: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(the step's loss over every rank, the gradient norm before clipping, whether both were finite), as tensors
    on the device: reading them is the caller's host sync."""
    world = ops.num_processes
    # the step's item count over every rank; on several, a tensor left on the device (reading it back would wait)
    total = max(sum(counts), 1) if world == 1 else \
        ops.reduce(torch.tensor(float(sum(counts)), device=ops.device), "sum").clamp(min=1)
    loss_sum = torch.zeros((), device=ops.device)
    for i, (batch, n) in enumerate(zip(micro, counts)):
        batch = {k: v.to(ops.device, non_blocking=True) for k, v in batch.items()}  # from pinned memory: no wait
        with contextlib.nullcontext() if i == len(micro) - 1 else ops.no_sync(model):
            # this batch's share of the step's mean loss; x world because DDP averages gradients over ranks
            part = share(loss_fn(model, batch), n, total)
            ops.backward(part * world)
            loss_sum += part.detach()
    loss = ops.reduce(loss_sum, "sum") if world > 1 else loss_sum
    grad_norm = torch.as_tensor(ops.clip_grad_norm_(model.parameters(), max_grad_norm), device=loss.device)
    finite = torch.isfinite(loss) & torch.isfinite(grad_norm)
    step_if_finite(optimizer, finite, scaled=ops.mixed_precision == "fp16")
    optimizer.zero_grad(set_to_none=True)
    return loss, grad_norm, finite


def share(mean: torch.Tensor, n: int, total) -> torch.Tensor:
    """`mean`, a loss averaged over `n` items, as its part of a mean over `total` items: mean x n / total. A mean over
    no item is 0/0 = NaN, and NaN x 0 is NaN: it adds 0 instead, so that a batch without a target (an MLM batch that
    drew no mask: short blocks, small micro-batches, a low mask rate) neither poisons the other batches' step nor an
    evaluation's sum. Its graph is kept (the cross-entropy's backward gives ignored positions no gradient, so the
    model's gradients from it are zeros): every rank still runs one backward per micro-batch, as DDP and FSDP need."""
    if n == 0:
        mean = torch.nan_to_num(mean, nan=0.0, posinf=0.0, neginf=0.0)
    return mean * n / total


def step_if_finite(optimizer, finite: torch.Tensor, scaled: bool = False) -> None:
    """``optimizer.step()`` where `finite` (a 0-d bool tensor) holds, else no change to the weights or the optimizer's
    state. `scaled` (fp16): the grad scaler decides itself. An optimizer whose step takes ``found_inf`` (torch's
    fused Adam/AdamW: the attribute GradScaler sets) is handed the flag and skips inside its kernel, step count
    included, without a host sync; any other is stepped after reading the flag on the host."""
    if scaled:
        optimizer.step()
        return
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer wraps the torch one
    if getattr(inner, "_step_supports_amp_scaling", False):
        inner.found_inf = (~finite).to(torch.float32)
        try:
            optimizer.step()
        finally:
            del inner.found_inf
    elif bool(finite):
        optimizer.step()


class AmpOps:
    """What ``optimizer_step`` needs of an Accelerator, for one process, one precision and one optimizer, as
    Accelerate does it: the forward pass under autocast (bf16 or fp16), and for fp16 a ``torch.amp.GradScaler``: a
    scaled backward, gradients unscaled before clipping, ``scaler.step`` (which skips a step whose gradients
    overflowed) and ``scaler.update``. ``optimizer`` is the one to give ``optimizer_step``."""

    num_processes = 1

    def __init__(self, device: torch.device, precision: str, optimizer: torch.optim.Optimizer):
        self.device, self._raw, self.mixed_precision = device, optimizer, precision
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None  # "fp32" reads as "no"
        self.optimizer = optimizer if self.scaler is None else _ScaledOptimizer(optimizer, self.scaler)

    def autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(self.device.type, dtype=self.dtype or torch.bfloat16, enabled=self.dtype is not None)

    def backward(self, loss: torch.Tensor) -> None:
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def clip_grad_norm_(self, parameters, max_norm: float) -> torch.Tensor:
        if self.scaler is not None:
            self.scaler.unscale_(self._raw)
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)

    def no_sync(self, model) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def reduce(self, tensor: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
        return tensor


class _ScaledOptimizer:
    def __init__(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler):
        self.optimizer, self.scaler = optimizer, scaler

    def step(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)
