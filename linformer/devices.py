"""What a run computes on, in words: the CPU's model name, the device a run used, the CUDA device of a GPU target.
One home for the training core's run summaries, the benchmarks, the reports and the GPU targets, and for the dtype
names (fp32, bf16, fp16) that configs and flags use."""

from __future__ import annotations

import platform

import torch

from .errors import ConfigError

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # the names configs and flags use


def device_type(device: str) -> str:
    """The kind of device ("cpu" or "cuda") a config's value names, without checking that the machine has it: "auto"
    is this machine's, a GPU where one is visible (as ``resolve_device`` picks). configs/benchmark.yaml's CPU cap on n
    follows it (``${device_type:${device}}``), so device=auto on a GPU is not capped as a CPU is."""
    name = str(device)
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name.split(":", 1)[0]


def resolve_device(device: str = "auto", key: str = "device") -> torch.device:
    """The torch device a config's `key` names: "auto" (the first GPU if there is one, else the CPU), "cpu", "cuda"
    or "cuda:<index>". ConfigError naming the key for anything else, or for a GPU this machine does not have, before
    anything is loaded (torch would otherwise fail with a traceback at the first tensor moved there)."""
    name = str(device)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda") or (dev.type == "cpu" and dev.index):
        raise ConfigError(f"{key}={name!r} is not a device here: use auto, cpu, cuda or cuda:<index>.")
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if not count:
            built = "built without CUDA" if torch.version.cuda is None else "no GPU visible"
            raise ConfigError(f"{key}={name!r}: this machine has no CUDA device (torch {torch.__version__}, "
                              f"{built}): use {key}=cpu or {key}=auto.")
        if dev.index is not None and dev.index >= count:
            raise ConfigError(f"{key}={name!r}: this machine has {count} CUDA device(s), cuda:0 .. cuda:{count - 1}.")
    return dev


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
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
