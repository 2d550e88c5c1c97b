"""The local/global attention's blocked softmax as one parallel region per layer on the CPU (``csrc/local_global.cpp``).

The op-by-op path (``local_global._chunked_softmax``) launches a handful of small operations per chunk of query blocks,
each its own parallel region; the fused kernel runs the same operations on the same chunks inside one region, the
chunks handed to the threads one at a time, so its outputs are the op-by-op path's and a slow thread delays the layer
by at most one chunk. It serves CPU inference only (no gradient, no attention dropout, not under ``torch.compile``):
training keeps the op-by-op path, whose backward autograd derives.

It is built on first use by torch's extension builder (a C++ compiler and ninja are needed; the build is cached in
torch's extensions folder, ``TORCH_EXTENSIONS_DIR``), which takes about half a minute once per machine and torch.
``LINFORMER_CPU_KERNEL`` chooses: ``auto`` (the default: the fused kernel where it builds, else the op-by-op path
with one warning saying why), ``fused`` (an ``error:`` when it cannot build) or ``ops`` (the op-by-op path always).
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

from ..errors import ConfigError

logger = logging.getLogger(__name__)

KERNEL_ENV = "LINFORMER_CPU_KERNEL"
CHOICES = ("auto", "fused", "ops")
SOURCE = Path(__file__).parent / "csrc" / "local_global.cpp"


def choice() -> str:
    """``LINFORMER_CPU_KERNEL``, read at each call (a test or a benchmark may set it between forwards)."""
    value = os.environ.get(KERNEL_ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(f"{KERNEL_ENV}={value!r} is not one of {', '.join(CHOICES)}.")
    return value


@functools.cache
def _built() -> tuple[object | None, str]:
    """The compiled module and "", or None and why it could not be built (once per process)."""
    try:
        from torch.utils.cpp_extension import load

        logger.info("loading the fused CPU kernel of the local/global attention (built once: about 30 s)")
        return load("linformer_local_global", [str(SOURCE)], extra_cflags=["-O3"], verbose=False), ""
    except Exception as e:  # no compiler, no ninja, a failed compile: the op-by-op path still works
        reason = " ".join(str(e).split())
        return None, f"{type(e).__name__}: {reason[:300]}"


def fused_softmax():
    """The fused kernel's ``blocked_softmax`` (arguments as ``local_global._chunked_softmax``'s, then the scale and
    the blocks per chunk), or None for the op-by-op path (``ops``, or ``auto`` where it does not build)."""
    wanted = choice()
    if wanted == "ops":
        return None
    module, reason = _built()
    if module is None:
        if wanted == "fused":
            raise ConfigError(f"{KERNEL_ENV}=fused but the fused CPU kernel ({SOURCE.name}) did not build: {reason}")
        _warn_once(reason)
        return None
    return module.blocked_softmax


@functools.cache
def _warn_once(reason: str) -> None:
    logger.warning("the fused CPU kernel of the local/global attention did not build (%s): it runs op by op, "
                   "slower on a shared CPU. Set %s=ops to skip the build.", reason, KERNEL_ENV)
