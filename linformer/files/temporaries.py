"""The temporaries of an atomic write (``atomic``): their names (.tmp-/.old-<name>-<place>-<pid>, as earlier versions
named them too) and their removal once the process that left them is gone."""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from pathlib import Path

from .hashing import short_digest
from .names import NAME_MAX_BYTES
from .processes import pid_alive, process_place

log = logging.getLogger(__name__)


def _remove(path: Path) -> None:
    """Delete a file, link or directory tree; nothing when it is missing. A link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def _remove_left(path: Path) -> bool:
    """``_remove`` of what a gone process left, where it can be: whether `path` is gone. One this process may not
    remove (a read-only data folder, another user's) is left as it is, logged at debug level: a command that only
    reads the folder (a reuse) must not fail over it, and one that writes there names the folder itself."""
    try:
        _remove(path)
    except OSError as err:
        log.debug("left %s, which cannot be removed (%s)", path, err.strerror or err)
    return not os.path.lexists(path)


def _temp_name(kind: str, final: Path) -> Path:
    """The temporaries of ``atomic_dir`` and ``atomic_write``: .tmp- (being built) and .old- (being replaced)
    <name>-<place>-<pid>, the name as ``_temp_stem`` has it."""
    return final.with_name(f".{kind}-{_temp_stem(final.name)}-{process_place()}-{os.getpid()}")


# bytes of a name left to the output's own name in its temporary's: .tmp-/.old-, -<place>- and a pid of up to 7
# digits (Linux's largest pid_max, 4194304)
_TEMP_ROOM = NAME_MAX_BYTES - len(".tmp--00000000-0000000")


def _temp_stem(name: str) -> str:
    """`name` as its temporaries carry it: whole where it fits in _TEMP_ROOM bytes, else cut short and ended by
    ~<8 hex digits of the whole name>, so that a temporary's name fits wherever the output's own name does."""
    raw = os.fsencode(name)  # the bytes the file system gets (a name decoded from argv may hold surrogates)
    if len(raw) <= _TEMP_ROOM:
        return name
    return raw[:_TEMP_ROOM - 9].decode(sys.getfilesystemencoding(), errors="ignore") + "~" + short_digest(raw, 8)


def _temporaries(name: str) -> re.Pattern:
    """Every name an interrupted atomic write of a name matching the regex `name` leaves, as this version names its
    temporaries (``_temp_name``: .tmp-/.old-<name>-<place>-<pid>) and as earlier ones did (.tmp-/.old-<name>-<pid>
    before places; atomic_write's .<name>.tmp-<pid>). Groups: 1 or 4 the name written, 2 the place, 3 or 5 the pid."""
    return re.compile(rf"\.(?:tmp|old)-({name})(?:-([0-9a-f]{{8}}))?-(\d+)|\.({name})\.tmp-(\d+)")


_TEMPORARY = _temporaries(".+?")


def temporary_of(name: str) -> str | None:
    """The name whose atomic write (``atomic_dir``, ``atomic_write``) the file or folder `name` is a temporary of,
    left by an interrupted write; None for any other name."""
    found = _TEMPORARY.fullmatch(name)
    return (found.group(1) or found.group(4)) if found else None


def remove_stale_temps(final: Path) -> None:
    """Remove the temporaries next to `final` (every name ``_temporaries`` knows) whose process is gone; another
    place's (another host or container) cannot be checked, and are left, as is one that cannot be removed
    (``_remove_left``)."""
    pattern = _temporaries(re.escape(_temp_stem(final.name)))
    for p in final.parent.glob(".*"):
        found = pattern.fullmatch(p.name)
        if found is None:
            continue
        place, pid = found.group(2), int(found.group(3) or found.group(5))
        here = place in (None, process_place())  # None: a name with a pid and no place, taken as this host's
        if here and pid != os.getpid() and not pid_alive(pid):
            _remove_left(p)


def remove_dead_builds_temps(folder: Path) -> list[Path]:
    """Remove the build temporaries in `folder` (.tmp-<name>-<place>-<pid>: ``atomic_dir``'s and ``atomic_write``'s,
    ``_temp_name``) of every output whose process, of this place, is gone; returns those removed. A build killed by
    SIGKILL leaves one the size of its output (tens of GB for a large corpus), which ``remove_stale_temps`` removes
    only when that same output is written again. One that cannot be removed (``_remove_left``) is left, unlisted. Only this version's names that carry this place: an earlier
    version's name, or a name alike another program's, is left to its own output's write. An .old- is left too: a
    swap killed between its renames leaves the only copy of its output there."""
    removed = []
    for p in folder.glob(".tmp-*"):
        found = _TEMPORARY.fullmatch(p.name)
        if found is None or found.group(2) != process_place():
            continue
        pid = int(found.group(3))
        if pid != os.getpid() and not pid_alive(pid) and _remove_left(p):
            removed.append(p)
    return removed
