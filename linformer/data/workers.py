"""Worker processes that cannot outlive the run that started them.

`datasets.map(num_proc=...)` forks a pool of workers and a Manager process (module `multiprocess`). If the parent
is killed (SIGKILL, or SIGTERM with Python's default action) they are orphaned: each holds its share of the data
and waits forever on a queue nobody writes. ``children_die_with_parent`` makes every process `multiprocess` forks
inside the block ask the kernel for SIGKILL when its parent dies (Linux ``PR_SET_PDEATHSIG``) and leave Ctrl-C to
the parent (a terminal sends SIGINT to the whole process group); ``linformer.signals.signals_stop`` turns SIGTERM and
SIGINT in the parent into an exception, so temporary directories are removed and the pool is terminated on the way
out.

The same kernel request keeps other children from outliving what started them: a job of the plan runner
(``linformer.jobs``) or the dashboard's TensorBoard gets SIGTERM when its parent dies (``dies_with_this_process``),
and each process torchrun starts (a rank, torchrun's elastic agent being its parent) asks for SIGTERM when the
launcher dies (``die_with_launcher``): killed by SIGKILL or the out-of-memory killer, a launcher would otherwise leave
its ranks training in sessions of their own, holding the run's lock. SIGTERM, not SIGKILL: a training script saves
a checkpoint on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# libc's prctl, looked up at import: a child forked from a process with threads (the job runner's log readers) then
# calls it without dlopen, whose loader lock another thread may have held at the fork
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


class _Parent:
    """The process whose death the children watch (an object: the after-fork registry holds weak references)."""

    def __init__(self) -> None:
        self.pid = os.getpid()


def _die_with(parent: _Parent) -> None:
    """Run in each forked child before its target: a process group of its own, SIGKILL on the parent's death,
    default SIGTERM, no SIGINT."""
    # A signal sent to the parent's whole group (Ctrl-C, a scheduler's or `kill -- -PGID` stop) would kill a worker
    # wherever it stands, inside the pool's queue operations too: one that dies holding a queue's lock (an idle
    # worker waits for its next task holding the task queue's) leaves the parent's Pool.terminate() waiting on that
    # lock forever. In a group of its own a worker is stopped by the parent alone, the way the pool expects.
    os.setpgid(0, 0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # Pool.terminate() sends SIGTERM: it must end the worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the pool
    signal_on_parent_death(parent.pid, signal.SIGKILL)


def signal_on_parent_death(parent_pid: int, sig: int) -> None:
    """In a child just forked (Linux): ask the kernel to send it `sig` when the parent `parent_pid` dies
    (PR_SET_PDEATHSIG), and exit at once if the parent died before the request was in place. Nothing elsewhere."""
    if _PRCTL is None:
        return
    _PRCTL(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent_pid:
        os._exit(1)


def dies_with_this_process(sig: int = signal.SIGTERM) -> dict:
    """`subprocess.Popen` keyword arguments for a child the kernel sends `sig` when this process dies, SIGKILL and
    the out-of-memory killer included (Linux); none elsewhere, where such a child outlives a killed parent."""
    if _PRCTL is None:
        return {}
    return {"preexec_fn": functools.partial(signal_on_parent_death, os.getpid(), sig)}


_launcher: list[int] = []  # the pid of the launcher whose death this process watches (``die_with_launcher``)


def launched_by_torchrun() -> bool:
    """Whether torchrun's elastic agent (torchrun, accelerate launch) started this process: it sets these variables
    in each rank's environment."""
    return "TORCHELASTIC_RUN_ID" in os.environ and "LOCAL_RANK" in os.environ


def die_with_launcher() -> None:
    """In a process torchrun started (``launched_by_torchrun``): ask the kernel for SIGTERM when the launcher, this
    process's parent, dies (Linux), which stops a run as the launcher's own SIGTERM does, checkpointed; exit at once
    where it died before the request was in place. torchrun starts each rank in a session of its own, so a launcher
    killed by SIGKILL or the out-of-memory killer, which cannot stop its ranks, left them training, holding the run's
    lock. Once per process; nothing for a process started otherwise, or elsewhere than Linux."""
    if _PRCTL is None or _launcher or not launched_by_torchrun():
        return
    launcher = os.getppid()
    signal_on_parent_death(launcher, signal.SIGTERM)
    _launcher.append(launcher)


def launcher_gone() -> bool:
    """Whether the launcher whose death this process watches (``die_with_launcher``) has died: its store, which the
    ranks share, went with it."""
    return bool(_launcher) and os.getppid() != _launcher[0]


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
