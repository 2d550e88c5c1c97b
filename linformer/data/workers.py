"""Worker processes that cannot outlive the run that started them.

`datasets.map(num_proc=...)` forks a pool of workers and a Manager process (module `multiprocess`). If the parent
is killed (SIGKILL, or SIGTERM with Python's default action) they are orphaned: each holds its share of the data
and waits forever on a queue nobody writes. ``children_die_with_parent`` makes every process `multiprocess` forks
inside the block ask the kernel for SIGKILL when its parent dies (Linux ``PR_SET_PDEATHSIG``) and leave Ctrl-C to
the parent (a terminal sends SIGINT to the whole process group); ``linformer.signals.signals_stop`` turns SIGTERM and
SIGINT in the parent into an exception, so temporary directories are removed and the pool is terminated on the way
out.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class _Parent:
    """The process whose death the children watch (an object: the after-fork registry holds weak references)."""

    def __init__(self) -> None:
        self.pid = os.getpid()


def _die_with(parent: _Parent) -> None:
    """Run in each forked child before its target: SIGKILL on the parent's death, default SIGTERM, no SIGINT."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Pool.terminate() sends SIGTERM: it must end the worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent stops the pool
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent.pid:  # the parent died before the request was in place
        os._exit(1)


@contextlib.contextmanager
def children_die_with_parent() -> Iterator[None]:
    """Every `multiprocess` child forked inside the block is killed by the kernel when this process dies."""
    if not sys.platform.startswith("linux"):
        yield
        return
    import multiprocess.util

    parent = _Parent()
    multiprocess.util.register_after_fork(parent, _die_with)
    try:
        yield
    finally:
        del parent  # the registry's entry goes with the last reference
