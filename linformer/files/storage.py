"""What the storage refuses a write for (a full disk, a quota, a file too large), told in one error line that names
the output being written and what to do (``disk_full_names``)."""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import DiskFullError

# What the storage refuses a write for, by errno and by the text of a serializer's error that has no errno, with what
# the user can do about it. safetensors (a Rust io error) names its cause; torch's zip serializer does not ("file
# write failed", or "unexpected pos N vs M" when a short write shifts the archive): UNTOLD, whose cause the free space
# tells where little is left (a full disk), and which otherwise names every cause it may be.
UNTOLD = 0
FULL_BELOW = 64 * 2**20  # bytes free under which an untold refusal is taken for a full disk
_REFUSALS = {
    errno.ENOSPC: ("no space left on device", "Free some space"),
    errno.EDQUOT: ("disk quota exceeded", "Free some space in your quota"),
    errno.EFBIG: ("a file larger than this file system or the file-size limit (ulimit -f) allows",
                  "Write to a file system that takes large files (not FAT32), or raise the limit,"),
}
_REFUSAL_TEXT = {"No space left": errno.ENOSPC, "StorageFull": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                 "File too large": errno.EFBIG, "file write failed": UNTOLD, "unexpected pos": UNTOLD}


def storage_refusal(err: BaseException) -> int | None:
    """The errno of a write the storage refused (ENOSPC a full disk, EDQUOT a quota, EFBIG a file too large), UNTOLD
    for a refusal whose error does not say which, or None for any other error."""
    if isinstance(err, OSError) and err.errno in _REFUSALS:
        return err.errno
    if isinstance(err, Exception):
        return next((code for text, code in _REFUSAL_TEXT.items() if text in str(err)), None)
    return None


def _refusal_words(code: int, free: int) -> tuple[str, str]:
    """(what refused the write, what to do) for a storage_refusal `code` with `free` bytes left."""
    if code != UNTOLD:
        return _REFUSALS[code]
    if free < FULL_BELOW:
        return _REFUSALS[errno.ENOSPC]
    reason = (f"the storage refused a write with space free: a disk quota, or a file larger than the file system "
              f"(FAT32 takes 4 GiB at most) or the file-size limit ({_file_size_limit()}) allows")
    return reason, "Free some space in your quota, or write to a file system that takes large files, or raise the limit,"


def _file_size_limit() -> str:
    """This process's file-size limit (ulimit -f), in words."""
    try:
        import resource
    except ImportError:  # not POSIX: no such limit
        return "ulimit -f"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return "ulimit -f, unlimited here" if limit == resource.RLIM_INFINITY else \
        f"ulimit -f, {limit / 2**20:,.0f} MiB here"


def mib(size: int) -> str:
    """`size` bytes in MiB, in words: a tenth below 10 MiB (a small corpus's), whole above."""
    size /= 2**20
    return f"{size:,.1f} MiB" if size < 10 else f"{size:,.0f} MiB"


def free_bytes(path: str | Path) -> int:
    """The bytes free on the file system `path` is (or would be) written to: that of its nearest existing folder."""
    there = next(p for p in (Path(path), *Path(path).absolute().parents) if p.exists())
    return shutil.disk_usage(there).free


@contextlib.contextmanager
def disk_full_names(output: str | Path, needs: int | None = None) -> Iterator[None]:
    """A write the storage refuses inside this block (``storage_refusal``) raises DiskFullError naming `output`
    (the file or folder being written, not the folder it goes into), the cause (or the causes it may be), the space
    the writer `needs` (bytes, an estimate) where it gave it, and what to do; its ``cause`` is that first clause
    alone, for a caller that goes on without the output (a cache)."""
    try:
        yield
    except Exception as err:
        code = storage_refusal(err)
        if code is None:
            raise
        free = free_bytes(output)
        reason, advice = _refusal_words(code, free)
        need = f"; it needs about {mib(needs)} at its peak, an estimate" if needs else ""
        cause = f"{reason} while writing {output} ({free / 2**20:.0f} MiB free{need})"
        full = DiskFullError(f"{cause}; earlier files are intact. {advice} and run the same command again.")
        full.cause = cause
        raise full from err
