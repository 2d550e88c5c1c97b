"""Whether a process id names a live process of this place (the host and its PID namespace)."""

from __future__ import annotations

import functools
import os
import socket

from .hashing import short_digest


@functools.cache
def process_place() -> str:
    """Where this process's id names this process, as 8 hex digits: the host and its PID namespace. Containers on
    one host share its name but not their process ids (each may have a pid 1), so a pid is checked, or compared,
    only against those of the same place."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # no /proc (not Linux): the host alone
        namespace = ""
    return short_digest(f"{socket.gethostname()}|{namespace}", 8)  # 8: recorded in locks and temporaries


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
