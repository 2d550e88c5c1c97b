"""Locks between processes: a run directory's lock file and its holder (``rundir.RunLock`` takes it; read here, below
the run's start in ``hydra_start``, which names a live holder before it says a folder cannot be written), and blocks
that one process at a time runs under an flock (``flocked``: a folder's file records merged, an output folder built).
The run lock is made exclusively (O_EXCL) and held while its file exists, not by an flock: it holds on file systems
without flock, and a live run of an earlier version, which holds no flock on its lock, is never taken over."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from ..errors import OutputPathError
from .processes import pid_alive, process_place
from .temporaries import _temp_stem, remove_dead_builds_temps

log = logging.getLogger(__name__)


# A run directory's LOCK records its holder: {pid, host, place, since}.
def lock_holder(lock: str | Path) -> dict | None:
    """What the lock file `lock` records of its holder, or None: no file, or one that does not read (being written
    this instant, or torn)."""
    try:
        data = json.loads(Path(lock).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def holder_gone(holder: Mapping) -> bool:
    """Whether a lock's holder is a process of this place (host and PID namespace: ``process_place``) that is gone;
    another host's or container's cannot be checked. A lock without a place names its host only."""
    pid = holder.get("pid")
    here = holder.get("place", process_place()) == process_place() and holder.get("host") == socket.gethostname()
    return here and isinstance(pid, int) and not pid_alive(pid)


def remove_stale_lock(lock: Path, holder: Mapping) -> bool:
    """Remove the lock file `lock` where it is still the one that recorded `holder` (read from it, a process that is
    gone): True where removed, False where another start took it over meanwhile (removed it, and maybe made its own).
    Two starts that read the same dead holder would otherwise both remove the lock and make their own, the second
    removing the one the first had just made, and both would hold the run. The check and the removal run under an
    exclusive flock on the stale file itself (``_flock``): a second start waits for the first, then finds the path
    empty or holding the first's lock (another holder) and leaves it. Nothing is made beside the lock. Without flock
    (some NFS and FUSE mounts) the check runs unguarded, and two starts within the same instant may still both take
    it. OSError where the file cannot be removed (another user's, in a sticky folder)."""
    try:
        fd = _flock(lock, wait=True, make=False)
    except _NoFlock:
        fd = -1  # checked unguarded
    if fd is None:  # removed by another start meanwhile
        return False
    try:
        if lock_holder(lock) != holder:
            return False  # the path holds another start's lock now (or one still being written)
        lock.unlink()
    except FileNotFoundError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)  # the flock goes with it, once the stale file is gone from the path
    return True


def in_use(lock: Path, holder: Mapping, otherwise: str) -> str:
    """The line refusing a start in the folder whose `lock` a live `holder` holds (`otherwise`: what to do instead
    of waiting)."""
    return (f"{lock.parent} is in use by process {holder.get('pid')} on {holder.get('host')} (since "
            f"{holder.get('since')}): wait for it to finish, or {otherwise}. If that process is gone, delete {lock}.")


def file_owner(path: Path) -> str:
    """The name of the user who owns `path` (its uid where the system names none)."""
    import pwd

    uid = path.lstat().st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


@contextlib.contextmanager
def building_alone(out: str | Path, key: str = "out_dir=") -> Iterator[None]:
    """The block (the build of the output folder `out`: a tokenizer's training, a corpus's preparation) run by one
    process at a time: a second command building the same output meanwhile is refused in one line naming the process
    that builds it (an OutputPathError; `key`, the setting that chose `out`), where it did the whole work again and
    its log lines mixed into the first's, the later rename winning. The flock (``flocked``) is on a hidden lock file
    beside `out`, removed when the block ends; without flock (some NFS and FUSE mounts) the block runs unguarded."""
    out = Path(out)
    lock = out.parent / f".building-{_temp_stem(out.name)}"
    with flocked(lock, wait=False) as held:
        if held is not None:
            who = (f" (process {held['pid']} on {held.get('host')}, since {held.get('since')})"
                   if held.get("pid") else "")
            raise OutputPathError(f"{out} is being built by another process now{who}: wait for it to finish and run "
                                  f"the same command again, or choose another {key} for this one.")
        yield


def remove_dead_builds(folder: str | Path) -> list[Path]:
    """Remove what builds killed by SIGKILL left in the output folder `folder` (a data folder's processed/ or
    tokenizers/), whatever output they built: their temporaries (``temporaries.remove_dead_builds_temps``) and their
    ``building_alone`` lock files whose holder, of this place, is gone (``holder_gone``); returns those removed. A lock
    file another process holds the flock of now is left, read or not, as is every one where there is no flock to take
    (it could not be told from a live build's) and every one this process may not remove (a read-only or another
    user's folder: a reuse there must not fail over it)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = remove_dead_builds_temps(folder)
    for lock in folder.glob(".building-*"):
        try:
            fd = _flock(lock, wait=False, make=False)
        except (OSError, _NoFlock):  # held by a live build (BlockingIOError), no flock, or not ours to open
            continue
        if fd is None:  # removed meanwhile
            continue
        try:
            holder = lock_holder(lock)
            if holder and holder_gone(holder):
                lock.unlink(missing_ok=True)  # under its flock: a build that opened it meanwhile takes the path's own
                removed.append(lock)
        except OSError as err:  # a read-only or another user's folder: left, as a reuse there must still run
            log.debug("left %s, which cannot be removed (%s)", lock, err.strerror or err)
        finally:
            os.close(fd)
    return removed


def holder_record() -> dict:
    """This process as a lock file records its holder: {pid, host, place, since} (``holder_gone`` reads it)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "place": process_place(),
            "since": time.strftime("%Y-%m-%d %H:%M:%S")}


def settled_holder(read: Callable[[], dict | None]) -> dict:
    """The holder a lock file records, by `read` (``lock_holder`` of it); one that does not read, its holder
    writing it this instant, is read again 50 ms later; {} where it still does not."""
    holder = read()
    if holder is None:
        time.sleep(0.05)
        holder = read()
    return holder or {}


@contextlib.contextmanager
def flocked(path: Path, wait: bool = True) -> Iterator[dict | None]:
    """The block run under an exclusive flock (``_flock``) on the lock file `path`, which records its holder
    (``holder_record``) and which the holder removes before it lets go: none is left beside what it guards
    (docs/results/ is committed). The flock goes with the process, so a command killed in the block blocks no one
    (its lock file stays until the next holder removes it). Yields None once held, or where there is no flock to take
    (some NFS and FUSE mounts: ENOLCK, EOPNOTSUPP) or the lock file cannot be made: the block runs unlocked. Without
    `wait`, yields instead the holder's record ({} where it does not read) where another descriptor holds it: the
    block must not run then."""
    fd, busy = None, None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _flock(path, wait, make=True)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(holder_record()).encode())
    except BlockingIOError:
        busy = settled_holder(lambda: lock_holder(path))
    except (_NoFlock, OSError):
        if fd is not None:
            os.close(fd)
        fd = None
    if busy is not None:
        yield busy
        return
    try:
        yield None
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)  # the flock goes with the last descriptor


class _NoFlock(Exception):
    """No flock to take: the file system has none (some NFS and FUSE mounts: ENOLCK, EOPNOTSUPP), or the platform
    (fcntl is POSIX only)."""


def _flock(path: Path, wait: bool, make: bool) -> int | None:
    """A descriptor of the lock file `path` that holds an exclusive flock on it, the file still the one at `path`:
    a holder removes its lock file before it lets go, and a waiter that then gets the flock of the removed file takes
    the one at the path now instead. The file is made where `make`; without it, None where there is none.
    BlockingIOError without `wait` where another descriptor holds the flock; _NoFlock where there is none to take."""
    try:
        import fcntl
    except ImportError:
        raise _NoFlock from None
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR if make else os.O_RDONLY, 0o644)
        except FileNotFoundError:
            if make:
                raise
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as err:
            os.close(fd)
            if isinstance(err, BlockingIOError):
                raise
            raise _NoFlock from err
        with contextlib.suppress(FileNotFoundError):  # removed by the holder waited on
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        os.close(fd)
