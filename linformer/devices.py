"""What a run computes on, in words: the CPU's model name, the device a run used, the CUDA device of a GPU target.
One home for the training core's run summaries, the benchmarks, the reports and the GPU targets, and for the dtype
names (fp32, bf16, fp16) that configs and flags use."""

from __future__ import annotations

import platform

import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # the names configs and flags use


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: torch.device) -> str:
    """What a run computed on, in words: the GPU's name, or the CPU's."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU: {cpu_model_name()}"


def cuda_device_name() -> str | None:
    """The first CUDA device's name; None without one."""
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
