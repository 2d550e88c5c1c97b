"""Inference time and peak memory per example of several sentence classifiers at one input length, side by side.

The models are built from their configs with random weights (cost does not depend on the values), run in
interleaved rounds (``common.interleaved_medians``) so machine load hits them alike, and divided by the batch.
"""

from __future__ import annotations

import torch

from ..devices import resolve_device
from ..modeling import LinformerForSequenceClassification
from .common import interleaved_medians, peak_memory_bytes, peak_tensor_bytes, thread_range


def cost_per_example(configs: dict, n: int = 512, batch: int = 8, reps: int = 5, device: str = "auto") -> dict:
    """{name: {"ms": forward milliseconds per example, "mib": peak MiB per example (the process's, peak_memory_bytes),
    "tensor_mib": peak MiB of live tensors per example (peak_tensor_bytes: the same figure every run), "threads":
    the CPU threads its timed forwards ran with (common.thread_range)}} for LinformerConfigs."""

    dev = resolve_device(device)
    models, inputs = {}, {}
    for name, config in configs.items():
        models[name] = LinformerForSequenceClassification(config).to(dev).eval()
        inputs[name] = torch.randint(5, config.vocab_size, (batch, n), device=dev)

    def call(name):
        def run():
            with torch.inference_mode():
                models[name](input_ids=inputs[name])
        return run

    calls = {name: call(name) for name in configs}
    for run in calls.values():  # warm-up: allocator and kernels, outside the timing
        run()
    used: dict[str, list[int]] = {}
    seconds = interleaved_medians(calls, reps, dev, threads_used=used)
    out = {}
    for name, run in calls.items():
        peak = peak_memory_bytes(run, dev)
        out[name] = {"ms": 1000 * seconds[name] / batch,
                     "mib": None if peak is None else peak / batch / 2**20,
                     "tensor_mib": peak_tensor_bytes(run, dev) / batch / 2**20, "threads": thread_range(used[name])}
    return out
