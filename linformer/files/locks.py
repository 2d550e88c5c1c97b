"""Locks between processes: a run directory's lock file and its holder (``rundir.RunLock`` takes it; read here, below
the run's start in ``hydra_start``, which names a live holder before it says a folder cannot be written), and blocks
that one process at a time runs under an flock (a folder's file records merged, an output folder built)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..errors import OutputPathError
from .processes import pid_alive, process_place
from .temporaries import _temp_stem


# A run directory's LOCK records its holder: {pid, host, place, since}.
def lock_holder(lock: str | Path) -> dict | None:
    """What the lock file `lock` records of its holder, or None: no file, or one that does not read (being written
    this instant, or torn)."""
    try:
        data = json.loads(Path(lock).read_text())
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
    exclusive flock on the stale file itself: a second start waits for the first, then finds the file gone from the
    path (or the path holding the first's lock) and leaves it. Nothing is made beside the lock. Without flock (some
    NFS and FUSE mounts) the check runs unguarded, and two starts within the same instant may still both take it.
    OSError where the file cannot be removed (another user's, in a sticky folder)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:  # removed by another start meanwhile
        return False
    try:
        with contextlib.suppress(ImportError, OSError):  # POSIX only, and not on every file system: checked alone
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if not os.path.samestat(os.fstat(fd), os.stat(lock)) or lock_holder(lock) != holder:
                return False  # another start removed it, and the path now holds its lock (or none)
            lock.unlink()
        except FileNotFoundError:
            return False
        return True
    finally:
        os.close(fd)  # the flock goes with it, once the stale file is gone from the path


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
def records_locked(lock: Path) -> Iterator[None]:
    """The block (a read-merge-write of a folder's file records, whose lock file is `lock`) run under an exclusive
    flock (``_flocked``). Where the file system has no flock (some NFS and FUSE mounts: ENOLCK, EOPNOTSUPP) or the
    lock file cannot be made, the block runs unlocked: two commands recording at the same instant may lose an entry,
    and the one that lost it is refused as "a file ... did not write" when run again (--overwrite replaces it)."""
    with _flocked(lock, wait=True):
        yield


@contextlib.contextmanager
def building_alone(out: str | Path, key: str = "out_dir=") -> Iterator[None]:
    """The block (the build of the output folder `out`: a tokenizer's training, a corpus's preparation) run by one
    process at a time: a second command building the same output meanwhile is refused in one line naming the process
    that builds it (an OutputPathError; `key`, the setting that chose `out`), where it did the whole work again and
    its log lines mixed into the first's, the later rename winning. The flock (``_flocked``) is on a hidden lock file
    beside `out`, removed when the block ends; without flock (some NFS and FUSE mounts) the block runs unguarded."""
    out = Path(out)
    lock = out.parent / f".building-{_temp_stem(out.name)}"
    with _flocked(lock, wait=False) as held:
        if held is not None:
            who = (f" (process {held['pid']} on {held.get('host')}, since {held.get('since')})"
                   if held.get("pid") else "")
            raise OutputPathError(f"{out} is being built by another process now{who}: wait for it to finish and run "
                                  f"the same command again, or choose another {key} for this one.")
        yield


@contextlib.contextmanager
def _flocked(path: Path, wait: bool) -> Iterator[dict | None]:
    """An exclusive flock on the lock file `path`, which records its holder ({pid, host, since}) and which the holder
    removes before it lets go: none is left beside what it guards (docs/results/ is committed). A waiter that then
    gets the lock of the removed file takes the new one instead. The flock goes with the process, so a command killed
    in the block blocks no one (its lock file stays until the next holder removes it). Yields None once held (or
    where there is no flock to take: the block runs unlocked), or, without `wait`, the holder's record where another
    descriptor holds it (the block must not run then)."""
    fd, busy = None, None
    try:
        import fcntl  # POSIX only: elsewhere unlocked

        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                fd, busy = None, lock_holder(path) or {}
                break
            try:
                if os.path.samestat(os.fstat(fd), os.stat(path)):
                    break
            except FileNotFoundError:  # removed by the holder this one waited on
                pass
            os.close(fd)
            fd = None
        if fd is not None:
            me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(me).encode())
    except (OSError, ImportError):
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
