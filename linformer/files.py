"""Files every command writes and reads: atomic writes (a reader sees the old or the new file, never half), the
rule for output paths a user chooses, checksums and the one cache-key scheme of prepared data, the one cache of
what a file gives while it is unchanged (``ReadOnce``), and mapping readers.

The output rule covers converted models, tokenizers, corpora, benchmark and report files: what made an output is
recorded (``made_by``), and only an earlier output of the same command with the same settings is replaced without
asking. Run directories build on this module (``rundir``)."""

from __future__ import annotations

import collections
import contextlib
import errno
import functools
import hashlib
import io
import json
import logging
import os
import re
import shutil
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, DataError, DiskFullError, OutputPathError, PartialOutput, RunDirError
from .signals import signals_stop, sigterm_unclaimed
from .version import __version__

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"                # an output directory's record (``made_by``) and its command's own facts
FILE_RECORDS = ".linformer-outputs.json"  # a folder's output files: {file name: made_by record}

# A run directory's record (what each holds: rundir.py): its files, and the folders of the models it saves
CONFIG = "config.yaml"
RUN = "run.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
RESULTS = "results.json"
PREDICTIONS = "eval_predictions.json"  # finetuning: label and prediction per example of the reported split (scored once)
LOCK = ".lock"
MODEL_DIR = "model"                    # the model a run saves at its end
BEST_DIR = "best"                      # finetuning: the model its validation chose
CHECKPOINTS_DIR = "checkpoints"        # train/checkpoint.py's step-NNNNNNNN folders


# ------------------------------------------------------------------------------------------------ atomic writes
# What the storage refuses a write for, by errno and by the text of a serializer's error that has no errno, with what
# the user can do about it. safetensors (a Rust io error) names its cause; torch's zip serializer does not ("file
# write failed", or "unexpected pos N vs M" when a short write shifts the archive): UNTOLD, whose cause the free space
# tells where little is left (a full disk), and which otherwise names every cause it may be.
UNTOLD = 0
FULL_BELOW = 64 * 2**20  # bytes free under which an untold refusal is taken for a full disk
NAME_MAX_BYTES = 255  # the longest name of one file or folder that Linux's file systems take
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


def written_at(path: str | Path) -> Path:
    """Where a write of `path` lands: where a symlink at `path` points (followed to the end), else `path`. An output
    the user linked elsewhere (a folder on a big disk) is written there and the link kept; its temporary goes beside
    the target, on the target's file system, so the final rename never crosses file systems."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write `path` whole or not at all: a temporary file in the same directory (``atomic_dir``'s name for one), fsynced,
    then renamed. One a killed process (SIGKILL) left beside `path` is removed by the next write of it. A symlink at
    `path` is written through (``written_at``)."""
    with atomic_stream(path) as f:
        f.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def atomic_stream(path: str | Path) -> Iterator[io.BufferedWriter]:
    """``atomic_write`` of what the block writes to the binary file it is given, as it goes: an output too large to
    hold in memory (a prediction per line of a large file) is whole at `path` once the block ends, and where the block
    raises, `path` is as it was."""
    shown, path = Path(path), written_at(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = _temp_name("tmp", path)
    try:
        with _named(shown, tmp), disk_full_names(shown):
            with open(tmp, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def save_figure(fig, path: str | Path, dpi: float | None = None) -> Path:
    """Write a matplotlib figure as a PNG through atomic_write (a reader never sees half a file), and close it."""
    import matplotlib.pyplot as plt  # here, not at the top: matplotlib is slow to import and only plots need it

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    atomic_write(path, buffer.getvalue())
    return Path(path)


def write_json(path: str | Path, data: Any, indent: int | None = 2) -> None:
    """indent=None writes compact JSON (one line), for long lists that are read by programs rather than people."""
    atomic_write(path, json.dumps(data, indent=indent, separators=None if indent else (",", ":")) + "\n")


def write_json_when_full(path: str | Path, data: Any) -> None:
    """``write_json``, or where the storage refuses it (a full disk, a quota) and the text fits in the blocks the
    file `path` already holds, the text written over it in place, padded with spaces to its length: no new block is
    needed, so the write goes through where the temporary's could not. Not atomic (a reader at that instant may see a
    mix, a crash may tear it), so only for a small record that would otherwise stay wrong: a run's status at its end,
    which left `running` is read as a run killed before it could record how it ended. Where it does not fit, or the
    file system refuses this too (one that copies on every write: btrfs, ZFS), the DiskFullError is raised."""
    try:
        write_json(path, data)
    except DiskFullError as full:
        if not _rewrite_in_place(written_at(path), (json.dumps(data, indent=2) + "\n").encode()):
            raise full from full.__cause__


def _rewrite_in_place(path: Path, text: bytes) -> bool:
    """Write `text` over the file `path` from its start, within the blocks it holds (a shorter text padded with
    spaces before its last byte, so that nothing of the earlier text is left after it); whether it was."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or len(text) > max(st.st_blocks * 512, st.st_size):
            return False
        text = text[:-1] + b" " * max(st.st_size - len(text), 0) + text[-1:]
        if os.pwrite(fd, text, 0) != len(text):
            return False
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def write_yaml(path: str | Path, data: Any) -> None:
    atomic_write(path, yaml.safe_dump(data, sort_keys=False))


@contextlib.contextmanager
def atomic_dir(final: str | Path, record: Mapping[str, Any] | None = None, overwrite: bool = False,
               flag: str = "overwrite=true", checksums: bool = False,
               replaces: Mapping[str, Any] | None = None, key: str | None = None,
               needs: int | None = None) -> Iterator[Path]:
    """Yield a hidden temporary directory next to `final`; when the block succeeds it becomes `final` in one rename.

    `final` is replaced only where ``check_output_dir`` allows it (missing, empty, or an earlier output with this
    `record`), checked before the block and again before the swap, unless `overwrite` (the command's `flag`: an
    output of another command or other settings, never a folder that is none of this package's); a refusal leaves it
    as it was. `record` (``made_by``) goes into ``final/manifest.json``, over what the block wrote
    there; with `checksums`, so does every other file's size and sha256 (``output_damage`` reads them back). Only the
    temporary and, after the swap, the output it replaced are deleted. The temporary goes on any exception and on
    SIGTERM; one left by a killed process (SIGKILL) goes on the next call for the same path. Every file gets the
    umask's permissions (``umask_modes``). `replaces`: the record of the earlier output at `final` that this one
    replaces as its own although its settings name other paths (``io.moved_output``: the same texts moved), checked
    in place of `record`. A symlink at `final` is written through (``written_at``): the output lands where it points.
    `key`: the flag or setting that chose `final` ("--out", "out_dir="), named in a refusal (``check_writable``).
    `needs`: the bytes the block's temporary takes at its peak (an estimate), said where the disk fills up.
    """
    shown, final = Path(final), written_at(final)
    check = replaces or record
    check_output_dir(final, check, overwrite, flag, key=key)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(final)
    tmp, old = _temp_name("tmp", final), _temp_name("old", final)
    _remove(tmp)
    with _named(shown, tmp):
        tmp.mkdir()
    try:
        with disk_full_names(shown, needs), _sigterm_unwinds(final):
            yield tmp
            _write_manifest(tmp, record, checksums)
            umask_modes(tmp)
            check_output_dir(final, check, overwrite, flag, key=key)  # another process may have written it meanwhile
            with _named(shown, tmp, old):
                swap_in(tmp, final, old)
    except BaseException:
        _remove(tmp)
        raise


def _write_manifest(tmp: Path, record: Mapping[str, Any] | None, checksums: bool) -> None:
    """``atomic_dir``'s MANIFEST: `record` under what the block wrote there and, with `checksums`, the other files'
    ``file_checksums`` as "files" where the block recorded none itself (a corpus lists its data files)."""
    if record is None and not checksums:
        return
    manifest = {**(record or {}), **read_json(tmp / MANIFEST)}
    # what the block put at the top: a rebuild with the same record may replace these, and nothing put beside them
    manifest["entries"] = sorted(p.name for p in tmp.iterdir() if p.name != MANIFEST)
    if checksums and "files" not in manifest:
        manifest["files"] = file_checksums(tmp, (f for f in tmp.rglob("*") if f.is_file() and f != tmp / MANIFEST))
    write_json(tmp / MANIFEST, manifest)


def output_damage(root: str | Path, digests: Mapping[str, str] | None = None) -> list[str] | None:
    """'name: why' for each file whose checksums an output directory's MANIFEST records ("files": ``atomic_dir``'s
    `checksums`) that is missing or differs now; [] when every one is as written; None when it records none (written
    without them, or by an earlier version). `digests`: the sha256 of some of the files by name, just read by the
    caller (``checksum_problems``)."""
    listing = read_json(Path(root) / MANIFEST).get("files")
    return checksum_problems(Path(root), listing, digests) if isinstance(listing, dict) else None


def swap_in(tmp: Path, final: Path, old: Path | None = None) -> None:
    """Make the finished directory `tmp` `final` by renames in one folder: whatever `final` held is moved to `old`
    (default .old-<name>-<place>-<pid>) first and deleted only once `tmp` is in place, so a reader sees the earlier
    output or the new one, never a half or nothing; a failure between the renames puts the earlier one back. A
    symlink at `final` is kept: what it points to is replaced (``written_at``; `tmp` must be on the target's file
    system)."""
    tmp, final = Path(tmp), written_at(final)
    old = Path(old) if old is not None else _temp_name("old", final)
    _remove(old)
    try:
        if os.path.lexists(final):
            os.replace(final, old)
        os.replace(tmp, final)
    except BaseException:
        if os.path.lexists(old) and not os.path.lexists(final):
            os.replace(old, final)
        raise
    _remove(old)


def _remove(path: Path) -> None:
    """Delete a file, link or directory tree; nothing when it is missing. A link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


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
    raw = name.encode()
    if len(raw) <= _TEMP_ROOM:
        return name
    return raw[:_TEMP_ROOM - 9].decode(errors="ignore") + "~" + hashlib.sha256(raw).hexdigest()[:8]


@contextlib.contextmanager
def _named(path: Path, *temporaries: Path) -> Iterator[None]:
    """An OSError on one of `temporaries` names `path`, the output the user chose: the temporary's name is none of
    theirs (an error line would send them looking for it)."""
    try:
        yield
    except OSError as err:
        names = {str(t) for t in temporaries}
        if err.filename is not None and (str(err.filename) in names or str(err.filename2) in names):
            raise OSError(err.errno, err.strerror, str(path)) from err
        raise


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
    place's (another host or container) cannot be checked, and are left."""
    pattern = _temporaries(re.escape(_temp_stem(final.name)))
    for p in final.parent.glob(".*"):
        found = pattern.fullmatch(p.name)
        if found is None:
            continue
        place, pid = found.group(2), int(found.group(3) or found.group(5))
        here = place in (None, process_place())  # None: a name with a pid and no place, taken as this host's
        if here and pid != os.getpid() and not pid_alive(pid):
            _remove(p)


def _sigterm_unwinds(final: Path) -> contextlib.AbstractContextManager:
    """SIGTERM raises Preempted inside the block, saying that `final` is as it was (so the temporary is removed, and a
    second one ends an unwinding that hangs); a block's own stop already installed (the trainer's, prepare_corpus's)
    is left in charge (``signals.sigterm_unclaimed``)."""
    if threading.current_thread() is not threading.main_thread() or not sigterm_unclaimed():
        return contextlib.nullcontext()
    return signals_stop(f"stopped by SIGTERM while writing {final}, which is as it was. Run the same command again.",
                        (signal.SIGTERM,))


def umask_modes(root: Path) -> None:
    """Give `root` and everything under it the permissions the umask grants: transformers writes weights through a
    private (0600) temporary file, and a model on a shared machine must be as readable as the rest."""
    mask = os.umask(0)
    os.umask(mask)
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod((0o777 if p.is_dir() else 0o666) & ~mask)


# ------------------------------------------------------------------------------------------------ output paths
# The rule for every path a user chooses for an output: a missing or empty path is written; an earlier output of the
# same command with the same settings is rebuilt; anything else is refused, naming the path and what holds it,
# unless the user passes the command's overwrite flag. What made an output is its record (``made_by``): an output
# directory carries it in its MANIFEST, the output files of a folder in that folder's FILE_RECORDS.


def made_by(command: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The record of an output: the command, its settings (keyed as its config names them, so a refusal names the
    key to change) and the package version. Settings are stored as JSON gives them back."""
    return {"command": command, "version": __version__,
            "settings": json.loads(json.dumps(dict(settings), default=str))}


def _other_output(recorded: Mapping, record: Mapping) -> str | None:
    """What `recorded` is, when it is not an output `record`'s command would rebuild; None when it is. A record whose
    settings are None stands for any run of its command (a plan's check, before the command reads its settings)."""
    if recorded.get("command") != record["command"]:
        return f"the output of {recorded.get('command') or 'another program'}"
    if record.get("settings") is None:
        return None
    diff = settings_changes(flatten(recorded.get("settings") or {}), flatten(record["settings"]))
    return f"an earlier {record['command']} output with other settings ({diff})" if diff else None


def settings_changes(a: Mapping[str, Any], b: Mapping[str, Any], shown: int = 6) -> str:
    """'key: old -> new; ...' for the flat settings that differ from `a` to `b`, in a line a person reads: a group
    of settings (a.b, a.c, ...) only one side has is one item (`a: 12 settings -> none`), and past `shown` items the
    rest are counted."""
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    items, grouped = [], set()
    for k in keys:
        group = k.split(".", 1)[0]
        members = [m for m in keys if m.startswith(group + ".")]
        gone, new = (all(m in x and m not in y for m in members) for x, y in ((a, b), (b, a)))
        if len(members) > 1 and (gone or new):
            if group not in grouped:
                grouped.add(group)
                items.append(f"{group}: {len(members)} settings -> none" if gone else
                             f"{group}: none -> {len(members)} settings")
            continue
        items.append(f"{k}: {_shown(a.get(k))} -> {_shown(b.get(k))}")
    more = f"; and {len(items) - shown} more" if len(items) > shown else ""
    return "; ".join(items[:shown]) + more


def _shown(value: Any) -> str:
    """A setting's value in a line a person reads: null, true and false as the configs and every command line write
    them, a text in quotes (where it starts and ends), anything else as Python writes it."""
    return {None: "null", True: "true", False: "false"}[value] if value is None or isinstance(value, bool) else \
        repr(value)


def listing(names: list[str]) -> str:
    """Names as an error line shows them: the first four, then how many more."""
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def output_dir_occupant(path: str | Path, record: Mapping[str, Any] | None) -> tuple[str | None, list[str]]:
    """(what holds `path` that `record`'s command may not rebuild as an output directory, or None when it may; the
    names put beside an earlier output of this package there). The clause: "is a regular file", "holds the output of
    convert", ...; None for a missing or empty folder, or the command's own earlier output with these settings. Names
    its manifest's entries do not name (``_added_since``), beside an output of any command or settings, come first:
    no overwrite flag replaces them, so the clause names them ("holds notes.txt beside convert's own output ...").
    `record` None: a caller that writes only new directories (any content is in the way, none is its own)."""
    path = Path(path)
    if not os.path.lexists(path):
        return None, []
    if not path.is_dir():
        return "is a regular file" if path.is_file() else "is not a directory", []
    if not (names := sorted(p.name for p in path.iterdir())):
        return None, []
    manifest = read_json(path / MANIFEST)
    if record is None or not manifest.get("command"):
        return f"is a directory with other content ({listing(names)})", []
    added = _added_since(names, manifest.get("entries"))
    if added:
        return _beside(path, manifest, added), added
    other = _other_output(manifest, record)
    return None if other is None else f"holds {other}", []


def _beside(path: Path, manifest: Mapping[str, Any], added: list[str]) -> str:
    """The clause naming what was put beside an output (`added`: ``_added_since``): the first few names, and how
    many there are where more than one."""
    own = f"{manifest.get('command')}'s own output, which it did not write"
    if len(added) == 1:
        return f"holds {added[0]} beside {own}"
    kinds = "files and folders" if any((path / n).is_dir() for n in added) else "files"
    return f"holds {len(added)} {kinds} beside {own} ({listing(added)})"


def _added_since(names: list[str], entries: Any) -> list[str]:
    """The names in an output directory that its command did not put there (`entries`, its manifest's list; an
    output recorded without one gives none) nor its manifest; an interrupted write's temporary stands for what it
    was writing."""
    if not isinstance(entries, list):
        return []
    own = {*entries, *(_temp_stem(str(e)) for e in entries), MANIFEST}
    return [n for n in names if (temporary_of(n) or n) not in own]


def file_record(path: str | Path) -> Any:
    """What its folder's FILE_RECORDS says wrote the file `path` (a made_by record), or None."""
    path = Path(path)
    return read_json(path.parent / FILE_RECORDS).get(path.name)


def output_file_occupant(path: str | Path, record: Mapping[str, Any]) -> str | None:
    """What holds the file `path` that `record`'s command may not replace (a clause), or None when it may (missing,
    or written by that command with these settings: its folder's FILE_RECORDS)."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    if path.is_dir():
        return "is a directory"
    recorded = file_record(path)
    other = _other_output(recorded, record) if isinstance(recorded, dict) else \
        f"a file {record['command']} did not write"
    return None if other is None else f"is {other}"


def check_writable(path: str | Path, inside: bool = False, key: str | None = None) -> None:
    """OutputPathError where `path` cannot be written into its folder (`inside`: where files cannot be written into
    the folder `path`), or the nearest folder on the way that exists, where the missing ones would be made: a file in
    the way, a read-only file system, no write permission. Checked before the work, which would otherwise end in an
    error naming a temporary after it (a benchmark's grid). `key`: the flag or setting that chose `path` ("--out"),
    named in the advice."""
    choose = f"choose another {key}" if key else "choose another output path"
    long = next((part for part in Path(path).parts if len(part.encode()) > NAME_MAX_BYTES), None)
    if long is not None:
        raise OutputPathError(f"{path}: the name {long[:40]}... is {len(long.encode())} bytes, longer than the file "
                              f"system allows ({NAME_MAX_BYTES}): choose a shorter one.")
    folder = Path(path).absolute() if inside else Path(path).absolute().parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"{folder} is a file, not a folder, so {path} cannot be made: {choose}.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{folder} cannot be written (a read-only file system, or no write permission), so "
                              f"neither can {path}: {choose}, one you can write.")


def check_output_dir(path: str | Path, record: Mapping[str, Any] | None, overwrite: bool = False,
                     flag: str = "overwrite=true", reads: Iterable[str | Path] = (), key: str | None = None) -> None:
    """The output rule for a directory about to be (re)built by `record`'s command (None: by a caller that writes
    only new directories). Raises OutputPathError naming the path, what holds it and `flag`, which replaces only a
    folder that is this package's output; any other (``_no_output``) is refused with it too, and so is an output
    beside which files or folders its manifest does not name were put (the user's notes, another command's report). `reads`: the command's
    inputs (paths; a name that is no path, a hub model's say, is passed over): a directory that is one of them, or
    holds one, is refused even with `flag`, since replacing it would delete what the command reads. `key`: the flag or
    setting that chose `path` (``check_writable``)."""
    for given in reads:
        source = Path(given).resolve() if given and os.path.exists(given) else None
        if source is not None and (source == Path(path).resolve() or Path(path).resolve() in source.parents):
            raise OutputPathError(f"{path} is, or holds, {given}, which this command reads: choose another output "
                                  "path (replacing it would delete the input, overwrite or not).")
    check_writable(path, key=key)
    what, added = output_dir_occupant(path, record)
    if not what:
        return
    choose = f"choose another {key}" if key else "choose another output path"
    never = _no_output(path, record)
    if never:
        raise OutputPathError(f"{path} {never}: {choose} ({flag} replaces only an earlier output of this package, "
                              "one whose manifest.json names the command that wrote it).")
    if added:  # the flag never deletes what the user (or another command) put into an output's folder
        raise OutputPathError(f"{path} {what}: move {'it' if len(added) == 1 else 'them'}"
                              f" elsewhere, or {choose} ({flag} replaces only what its manifest.json names, never what "
                              "was put beside it).")
    if not overwrite:
        raise OutputPathError(f"{path} {what}: {choose}, or pass {flag} to replace it.")


# manifest keys that only this package's output directories carry (``made_by``'s command, ``atomic_dir``'s entries,
# ``saving.model_folder``'s format): a web app's or another tool's manifest.json has none of them
_OWN_MANIFEST = ("command", "entries", "model_format")


def _no_output(path: str | Path, record: Mapping[str, Any] | None) -> str | None:
    """Why the directory `path` is no output that an overwrite flag may replace (a clause), or None where it may be:
    a file system's root, a home folder, a folder that is or holds the current directory or this repository, a git
    checkout, and (for a command that records its outputs: `record`) any folder whose MANIFEST is not this
    package's. `record` None: a caller replacing a folder the package itself chose (a run's model, kept records)."""
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        return None
    if real == Path(real.anchor) or os.path.ismount(real):
        return "is the root of a file system"
    if real == Path(os.path.realpath(Path.home())):
        return "is your home folder"
    for what, held in (("the current directory", Path.cwd().resolve()), ("this repository", repo_root())):
        if held == real or held.is_relative_to(real):
            return f"is, or holds, {what} ({held})"
    if os.path.lexists(real / ".git"):
        return "is a git checkout (it holds .git)"
    if record is not None and not any(key in read_json(real / MANIFEST) for key in _OWN_MANIFEST):
        names = sorted(p.name for p in real.iterdir())
        return f"is a directory with other content ({listing(names)}), no output of this package's"
    return None


def check_output_files(paths: list[str | Path], record: Mapping[str, Any], overwrite: bool = False,
                       flag: str = "--overwrite", key: str | None = None) -> None:
    """The output rule for files about to be written by `record`'s command into their folders (`key`: the flag or
    setting that chose them, ``check_writable``)."""
    choose = f"choose another {key}" if key else "choose another output path"
    for path in map(Path, paths):
        check_writable(path, key=key)  # a file on the way (the folder itself, or one above it) included
        if path.is_dir():  # a file never replaces a directory, overwrite or not
            raise OutputPathError(f"{path} is a directory: {choose}.")
        what = None if overwrite else output_file_occupant(path, record)
        if what:
            raise OutputPathError(f"{path} {what}: {choose}, or pass {flag} to replace it.")


def record_output_files(paths: list[str | Path], record: Mapping[str, Any], replaces_earlier: bool = False) -> None:
    """Record `record` as what wrote each of `paths`, in its folder's FILE_RECORDS (one write per folder).
    ``replaces_earlier``: files that an earlier run of the same command recorded in those folders, and that are not
    among `paths`, are removed with their records."""
    folders: dict[Path, list[str]] = {}
    for path in map(Path, paths):
        folders.setdefault(path.parent, []).append(path.name)
    for folder, names in folders.items():
        records = _file_records(folder)
        stale = [name for name, made in records.items() if isinstance(made, dict) and
                 made.get("command") == record["command"] and name not in names] if replaces_earlier else []
        records = {k: v for k, v in records.items() if k not in stale}
        write_json(folder / FILE_RECORDS, {**records, **{name: dict(record) for name in names}})
        for name in stale:  # after the record: a failed write of it leaves them, still recorded
            if (folder / name).is_file() and not (folder / name).is_symlink():  # a link the user made is theirs
                (folder / name).unlink(missing_ok=True)


def plain_name(name: Any) -> bool:
    """Whether `name`, read from a record file, names an entry directly in the record's own folder: one name, not
    empty, '.' or '..', without '/'. Any other (``../x``, an absolute path) would reach outside the folder, and a
    record file may come from anyone (a shared folder, a tarball, a commit), so it is never trusted as a path."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and os.sep not in name \
        and "\0" not in name


def _file_records(folder: Path) -> dict[str, Any]:
    """`folder`'s FILE_RECORDS, its entries that are not ``plain_name``s left out (with a warning naming the file):
    they are no output of this package's, and deleting what one names as stale would delete outside the folder."""
    records = read_json(folder / FILE_RECORDS)
    foreign = [name for name in records if not plain_name(name)]
    if foreign:
        warn_once(f"{folder / FILE_RECORDS}: ignored {listing([repr(n) for n in foreign])}: not the name of a file in "
                  "its folder (a record this package did not write); they are dropped from it and nothing they name "
                  "is touched")
    return {name: made for name, made in records.items() if name not in foreign}


@contextlib.contextmanager
def output_files(paths: list[str | Path], record: Mapping[str, Any], overwrite: bool = False,
                 flag: str = "--overwrite", replaces_earlier: bool = False, key: str | None = None) -> Iterator[None]:
    """Check `paths` (``check_output_files``) before the block, which writes them, and record those written after.
    ``replaces_earlier``: the files are the whole output of their command in their folders (a comparison's table and
    plots), so any other file an earlier run of the command wrote there is removed, not left beside them as if it
    belonged to this output.

    The files are written as one set: each earlier file at `paths` is kept aside first (a hard link, .old-<name>-...;
    a copy where the file system has no links), so it stays readable (a report rendered in place from its own JSON)
    and the block's atomic writes replace it. When the block or the record fails (a full disk, any exception,
    Ctrl-C), what it wrote at `paths` is removed and the earlier files are put back, so a folder never holds a new
    table beside an earlier report's plots. With ``replaces_earlier`` an earlier file the block did not write again
    is removed too. The kept files go once it is done; ones a killed process (SIGKILL) left are removed by the next
    write of those paths.

    A block that raises PartialOutput (``linformer.errors``) has written a partial output whole on purpose (rows
    measured before an error or a stop, marked partial: the benchmark, cls_probe): what it wrote is kept and recorded
    as the command's output, as when it succeeds, and then its ``cause`` is raised, so the user still sees the error
    or stop. Where recording it fails (a full disk), the earlier files are put back and the cause is still raised,
    the failure a note of it (``add_note``). Any other exception, a Preempted or KeyboardInterrupt included, puts the
    earlier files back."""
    check_output_files(paths, record, overwrite, flag, key)
    aside = _set_aside([written_at(p) for p in paths])
    cut_short = None
    try:
        try:
            yield
        except PartialOutput as partial:
            cut_short = partial.cause
        if replaces_earlier:
            for path in aside:
                if _unchanged(path, aside[path]):
                    path.unlink()
        record_output_files([p for p in map(Path, paths) if p.is_file()], record, replaces_earlier)
    except BaseException as err:
        _put_back([written_at(p) for p in paths], aside)
        if cut_short is None:
            raise
        # the partial output could not be recorded (a full disk): it is not kept, and the error or stop that cut it
        # short stays what the user sees first, this a line after it (``cli.cli_errors`` prints an error's notes)
        why = str(err) or type(err).__name__
        add_note(cut_short, f"also: the partial output was not kept (the earlier files are as they were), since "
                            f"recording it failed: {why}")
    for old, _ in aside.values():
        old.unlink(missing_ok=True)
    if cut_short is not None:
        raise cut_short


def add_note(err: BaseException, note: str) -> None:
    """Add `note` to `err`'s notes (PEP 678: Python's traceback prints them under the error, ``cli.cli_errors``
    after its `error:` or `stopped:` line); set as the attribute, which Python 3.10 has no add_note for."""
    err.__notes__ = [*getattr(err, "__notes__", ()), note]


def _set_aside(paths: list[Path]) -> dict[Path, tuple[Path, tuple]]:
    """``output_files``' earlier files, each kept under its .old- temporary: {path: (the kept file, the path's
    (device, inode, modification time) then)}."""
    aside: dict[Path, tuple[Path, tuple]] = {}
    try:
        for path in paths:
            if path.is_file() and path not in aside:
                remove_stale_temps(path)
                old = _temp_name("old", path)
                _remove(old)
                st = path.stat()
                aside[path] = (old, (st.st_dev, st.st_ino, st.st_mtime_ns))
                with disk_full_names(path):
                    try:
                        os.link(path, old)
                    except OSError:  # a file system without hard links (FAT, some network ones)
                        shutil.copy2(path, old)
    except BaseException:
        _put_back([], aside)
        raise
    return aside


def _unchanged(path: Path, kept: tuple[Path, tuple]) -> bool:
    """Whether `path` is still the file ``_set_aside`` kept (neither replaced nor written in place)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino, st.st_mtime_ns) == kept[1]


def _put_back(paths: list[Path], aside: Mapping[Path, tuple[Path, tuple]]) -> None:
    """Undo a failed ``output_files`` block: remove the files it wrote at `paths`, and put the earlier ones back (a
    file it wrote in place, into the earlier file's own inode, is as it left it)."""
    for path in paths:
        if path not in aside and (path.is_file() or path.is_symlink()):
            path.unlink(missing_ok=True)
    for path, (old, _) in aside.items():
        if os.path.exists(old) and os.path.exists(path) and os.path.samefile(old, path):
            old.unlink()
        elif os.path.exists(old):
            os.replace(old, path)


# ------------------------------------------------------------------------------------------------ cache keys
def file_state(path: str | Path) -> tuple | None:
    """What tells one content of the file `path` from another without reading it: (its real path, device, inode,
    size, modification time in ns); None where it is not a regular file (missing, a folder). A rewritten file has
    another: the atomic writer renames a new inode in, an edit in place moves its size or mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)



def input_states(paths: Iterable[str | Path]) -> dict[str, Any]:
    """The state of each input file a build is about to hash and read (``file_state``), by path; of a folder (a
    tokenizer's), the states of every file in it by name. Taken before the hash, checked after the build by
    ``check_inputs_unchanged``: a path that is no file or folder (a hub name) has None, which stays None."""
    return {str(p): _input_state(p) for p in paths}


def _input_state(path: str | Path) -> Any:
    if os.path.isdir(path):
        return dict(sorted((str(f.relative_to(path)), file_state(f)) for f in Path(path).rglob("*") if f.is_file()))
    return file_state(path)


def check_inputs_unchanged(states: Mapping[str, Any]) -> None:
    """DataError naming the first input file whose state is not the one ``input_states`` took before the build hashed
    it: the build read other bytes than its cache key and manifest record (a source edited, a tokenizer trained again
    over its folder while it ran). Called before the output is swapped in, so that nothing is."""
    for path, before in states.items():
        now = _input_state(path)
        if now != before:
            if isinstance(before, dict) and isinstance(now, dict):  # a folder: the file in it that changed
                path = next(os.path.join(path, name) for name in sorted({*before, *now})
                            if before.get(name) != now.get(name))
            raise DataError(f"{path} changed while it was being read: run again")


class ReadOnce:
    """``read(path, *args)`` of a file, read once for each state of the file (``file_state``) and given again while
    the file keeps it; `args` change how it is read, not what it gives (a chunk size). A path that is not a regular
    file is passed to `read` each time (its own error, or its own answer). ``keep``: the most states kept, the least
    recently used dropped first (None: no bound). ``switched``: read every time except inside ``switched_on()``."""

    def __init__(self, read: Callable[..., Any], keep: int | None = None, switched: bool = False):
        self.read, self.keep, self.switched = read, keep, switched
        self.kept: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
        self.depth = 0  # the switched_on() blocks entered and not left
        self.lock = threading.Lock()  # the kept states, as functools.lru_cache guards its own

    def __call__(self, path: str | Path, *args) -> Any:
        state = file_state(path) if not self.switched or self.depth else None
        if state is None:
            return self.read(path, *args)
        with self.lock:
            if state in self.kept:
                self.kept.move_to_end(state)
                return self.kept[state]
        value = self.read(path, *args)
        with self.lock:
            self.kept[state] = value
            if self.keep is not None and len(self.kept) > self.keep:
                self.kept.popitem(last=False)
        return value

    @contextlib.contextmanager
    def switched_on(self) -> Iterator[None]:
        """Inside it, each file is read once for each of its states; the states read are forgotten when the outermost
        block ends."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth:
                self.kept.clear()


class HashingReader(io.RawIOBase):
    """A binary file that hashes every byte read from it, in order (``digest``, a sha256): a reader that parses or
    decompresses a file takes its sha256 in the same read."""

    def __init__(self, raw, digest=None):
        self.raw, self.digest = raw, digest if digest is not None else hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.raw.readinto(buffer)
        self.digest.update(memoryview(buffer)[:count])
        return count


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    """The sha256 of a file's content, read now; inside ``hashed_once`` read once for each state of the file."""
    return _DIGESTS(path, chunk)


def _read_sha256(path: str | Path, chunk: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


# The digests taken inside ``hashed_once``, by the file's state
_DIGESTS = ReadOnce(_read_sha256, switched=True)


def hashed_once() -> contextlib.AbstractContextManager[None]:
    """Inside it (one run of a plan: its done-checks, repeated as it shows and runs its jobs), ``sha256_file`` reads
    each file once and reuses the digest while the file keeps its state (``file_state``: path, inode, size,
    modification time): the checks of a tokenizer and of a corpus made from the same sources read them once, not on
    every check. A file rewritten meanwhile (the atomic writer renames a new inode in; an edit moves its mtime) is
    read again."""
    return _DIGESTS.switched_on()


def file_checksums(root: Path, files: Iterable[Path]) -> dict[str, dict]:
    """The one checksum listing of a directory's files (a checkpoint's, a corpus's): {path relative to root:
    {"bytes": size, "sha256": hex}}, read back by checksum_problems."""
    return {str(Path(f).relative_to(root)): {"bytes": Path(f).stat().st_size, "sha256": sha256_file(f)}
            for f in sorted(files)}


def checksum_problems(root: Path, listing: Mapping[str, Mapping], digests: Mapping[str, str] | None = None
                      ) -> list[str]:
    """'name: why' for each file of a file_checksums listing that is missing, of another size or of other content
    under root; [] when every file is as listed. `digests` ({name: sha256}) are digests the caller has just read
    of some of the files, used rather than reading them again."""
    problems, real_root = [], Path(os.path.realpath(root))
    for name, want in listing.items():
        if not _inside(name):
            problems.append(f"{name!r}: not a file of this folder (an absolute path, or one through '..'), so its "
                            "listing is not one this package wrote")
        elif not isinstance(want, Mapping) or not isinstance(want.get("bytes"), int):
            problems.append(f"{name}: its listed size and sha256 do not read")
        elif (out := _linked_out(real_root, Path(root) / name)) is not None:
            problems.append(f"{name}: a link to a file outside this folder ({out}), which is not read for its "
                            "listing: put the file itself there in place of the link")
        elif not (f := Path(root) / name).is_file():
            problems.append(f"{name}: missing")
        elif f.stat().st_size != want["bytes"]:
            problems.append(f"{name}: {f.stat().st_size:,} bytes, {want['bytes']:,} written")
        elif ((digests or {}).get(name) or sha256_file(f)) != want["sha256"]:
            problems.append(f"{name}: content differs from what was written (sha256)")
    return problems


def _inside(name: Any) -> bool:
    """Whether `name`, read from a checksum listing, is a path under the listing's folder: relative, each part a
    ``plain_name`` (a file in a subfolder is listed as sub/name). Where it passes through a link, ``_linked_out``
    says whether it stays in the folder."""
    return isinstance(name, str) and not name.startswith("/") and all(map(plain_name, name.split("/")))


def _linked_out(real_root: Path, path: Path) -> Path | None:
    """Where `path`, in the folder whose real path is `real_root`, leads out of it through a link (its real path),
    or None where it stays in (missing, a file, a link within the folder). A link planted in a folder (a tarball's, a
    shared folder's) would have its listing read, and its size said, of any file of the machine; the one link out
    that is followed is a hub snapshot's, snapshots/<revision>/<file> into its cache's blobs/, as loaders read it.
    The folder itself may be a link (an output the user moved to another disk): only what is below it counts."""
    real = Path(os.path.realpath(path))
    if real.is_relative_to(real_root):
        return None
    snapshot = next((p for p in (real_root, *real_root.parents) if p.parent.name == "snapshots"), None)
    if snapshot is not None and real.parent == snapshot.parent.parent / "blobs":  # a subfolder of one too
        return None
    return real


def cache_key(options: Mapping[str, Any], files: list[str | Path] = (), digests: dict[str, str] | None = None) -> str:
    """The one cache key of prepared data: a hash of the options and of the content (sha256) of every input file.

    Content, not mtimes: a file copied or touched keeps its key, a file edited in place gets a new one. `digests`
    ({path: sha256}), given, holds the digests one reading has already taken and gets those it takes: the keys of
    several splits of the same files read each file once.
    """
    digests = {} if digests is None else digests
    for f in files:
        if str(f) not in digests:
            digests[str(f)] = sha256_file(f)
    payload = {"options": dict(options), "files": [digests[str(f)] for f in files]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ readers
def parse_mapping(path: str | Path, json_file: bool | None = None) -> tuple[dict, str | None]:
    """The mapping in a YAML or JSON file (JSON by a .json name) and why it is not one: ({}, None) when the file is
    missing, ({}, why) when it is unparsable, not text, empty or another kind of value (the parser's message on one
    line). Readers that may go on without a record log the why (``read_yaml``/``read_json``); a run's own record
    refuses it (``rundir.RunRecord``)."""
    path = Path(path)
    if not path.is_file():
        return {}, None
    json_file = path.suffix == ".json" if json_file is None else json_file
    try:
        data = json.loads(path.read_text()) if json_file else yaml.safe_load(path.read_text())
    except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as e:
        return {}, " ".join(str(e).split())
    if not isinstance(data, dict):
        return {}, "it is empty" if data is None else f"it holds a {type(data).__name__}, not a mapping"
    return data, None


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """A warning about a damaged file, once per process: a report reads a run's files more than once in a pass, and
    the live dashboard every few seconds, and the same line again says nothing new."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def read_mapping(path: str | Path, json_file: bool | None = None) -> dict:
    """The mapping in a YAML or JSON file (JSON by a .json name, as ``parse_mapping``); {} when it is missing, or
    unparsable or not a mapping (a warning, once)."""
    data, why = parse_mapping(path, json_file)
    if why:
        warn_once(f"{path}: {why}")
    return data


def read_yaml(path: str | Path) -> dict:
    return read_mapping(path, json_file=False)


def read_json(path: str | Path) -> dict:
    return read_mapping(path, json_file=True)


# ------------------------------------------------------------------------------------------------ small helpers
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # control characters (Unicode's Cc): line breaks, tabs, escapes


def table_row(cells: Iterable[Any]) -> str:
    """One row of a Markdown table, each cell's "|" escaped and its control characters written as Python writes
    them (a line break as \\n): a run name or setting holding either would split the row."""
    return "| " + " | ".join(_CONTROL.sub(lambda m: repr(m.group())[1:-1], str(c)).replace("|", "\\|")
                             for c in cells) + " |"


def table_lines(header: Sequence[Any], rows: Iterable[Iterable[Any]] = ()) -> list[str]:
    """The lines of a Markdown table: `header`, its rule, then `rows` (``table_row``: every report's tables)."""
    return [table_row(header), "|" + "---|" * len(header), *map(table_row, rows)]


def flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> {'a.b': value}."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def clone_root() -> Path | None:
    """The clone this package lies in (the directory holding pyproject.toml above it); None for an installed wheel."""
    here = Path(__file__).resolve()
    return next((parent for parent in here.parents
                 if (parent / "pyproject.toml").is_file() and (parent / "linformer").is_dir()), None)


def repo_root() -> Path:
    """The repository root (``clone_root``), else the cwd (a wheel: paths start from the working directory)."""
    return clone_root() or Path.cwd()


def started_script() -> Path | None:
    """The script this process was started as (``python scripts/<name>.py``, torchrun's worker of one included),
    resolved; None for Python code calling the package: a notebook's kernel (its argv is the kernel launcher's), a
    REPL (argv[0] ''), pytest."""
    script = Path(sys.argv[0])
    return script.resolve() if script.suffix == ".py" and script.parent.name == "scripts" else None


def scripts_dir() -> Path:
    """Where the commands' scripts are: beside the script this process was started as (a clone's scripts/, which a
    wheel's user runs over the installed package), else the clone's scripts/ beside this package (``repo_root``; for
    a wheel called from Python, scripts/ of the working directory)."""
    started = started_script()
    return started.parent if started is not None else repo_root() / "scripts"


def script(name: str, start: str | os.PathLike | None = None) -> str:
    """scripts/<name>.py as a command names it for the folder `start` (default: the working directory, where a
    printed command is pasted; a plan's jobs run from ``repo_root``): scripts/<name>.py where `start` holds the
    scripts folder, else its absolute path."""
    folder, start = scripts_dir(), Path.cwd() if start is None else Path(start)
    return f"scripts/{name}.py" if (start / "scripts").resolve() == folder else str(folder / f"{name}.py")


def repo_relative(path: str | os.PathLike) -> str:
    """`path` relative to the repository when it lies under it, else as an absolute path: how a committed record
    names a run or file, so that it reads the same on every checkout (``resolve_path`` reads it back)."""
    p = Path(os.path.expanduser(str(path))).resolve()
    return str(p.relative_to(repo_root())) if p.is_relative_to(repo_root()) else str(p)


def seen_by_git(path: str | os.PathLike) -> bool:
    """Whether `path` (a folder a command writes into) lies inside the package's own clone where git does not ignore
    it: `git status` lists what is written there, and `git add -A` would commit it (checkpoints, data). False outside
    the clone, for the clone's root itself, without a checkout, without git, and for an installed wheel (whose
    working directory may be a git project of the user's own, whose ignore rules are the user's)."""
    import subprocess

    root, path = clone_root(), Path(os.path.expanduser(str(path))).resolve()
    if root is None or not path.is_relative_to(root) or path == root or not (root / ".git").exists():
        return False
    try:  # a trailing "/": the folder may not exist yet, and patterns like `multirun/` match folders only
        checked = subprocess.run(["git", "check-ignore", "-q", f"{path.relative_to(root)}/"], cwd=root,
                                 capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return checked.returncode == 1  # 0: ignored; 128: git could not tell


def resolve_path(path: str | os.PathLike) -> str:
    """Absolute path; a relative one is taken relative to the repository root, so scripts work from any cwd."""
    p = Path(os.path.expanduser(str(path)))
    return str(p if p.is_absolute() else (repo_root() / p).resolve())


@functools.cache
def process_place() -> str:
    """Where this process's id names this process, as 8 hex digits: the host and its PID namespace. Containers on
    one host share its name but not their process ids (each may have a pid 1), so a pid is checked, or compared,
    only against those of the same place."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # no /proc (not Linux): the host alone
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}|{namespace}".encode()).hexdigest()[:8]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

def folder_name(value, key: str, names: str, under: str) -> str:
    """`value` as one folder name: what `key` names (`names`, e.g. "a run directory") inside the folder the project
    keeps such folders in (`under`). The one check of every config value that becomes a folder's name: an empty one,
    "." or ".." or one with a "/" would put the files straight into `under`, or outside it; one with a control
    character (a line break, a tab) would break every line that names it (a report's table, a command to copy)."""
    text = "" if value is None else str(value)
    if not text.strip() or "/" in text or os.sep in text or text in (".", ".."):
        raise ConfigError(f"{key}={value!r} must name {names} (one name, not a path: not empty, without '/', not "
                          f"'..'): it would put the files straight into {under}, or outside it.")
    if _CONTROL.search(text):
        raise ConfigError(f"{key}={value!r} must name {names} without control characters (a line break, a tab): "
                          "every line that names the folder (a report's table row, a command to copy) would break.")
    return text


RESTORE = "Restore the file (from a copy), or start afresh under another run_name (or move {dir} away)."


def read_record(run_dir: str | Path, name: str) -> dict:
    """A file of a run's record (CONFIG, RUN, SUMMARY, RESULTS) that a command continues or builds on (a start,
    a rerun, an export): {} when it is missing; one that is there but does not read is refused in one line naming
    it (``parse_mapping``'s why), never taken for no record: a start would not check its settings against it,
    a report would count the run as unfinished. ``load_run`` (the dashboard, compare_runs) reads leniently. (Here, below the model loaders that read a run's record.)"""
    data, why = parse_mapping(Path(run_dir) / name)
    if why:
        raise RunDirError(f"{Path(run_dir) / name} cannot be read ({why}): what the run in {run_dir} recorded there "
                          f"is lost. {RESTORE.format(dir=run_dir)}")
    return data


# ------------------------------------------------------------------------------------------------ a run's checkpoints
# train/checkpoint.py writes them; here, below the model loaders, so that what a run keeps to write its model again
# from is read one way wherever it is said (``loading.rewrite_advice``, export, resume, prune_checkpoints)
CHECKPOINT_STATE = "trainer_state.json"  # a checkpoint's trainer state: written last but its checksums
_CHECKPOINT_NAME = re.compile(r"^step-(\d{8})$")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS_DIR


def step_of(checkpoint: str | Path) -> int:
    """The step a checkpoint directory (checkpoints/step-NNNNNNNN) was saved at."""
    return int(_CHECKPOINT_NAME.match(Path(checkpoint).name).group(1))


def complete_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoints that finished writing (intact or not), oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _CHECKPOINT_NAME.match(p.name) and (p / CHECKPOINT_STATE).is_file()]
    return sorted(found, key=step_of)


def checkpoints_gone(run_dir: str | Path) -> str:
    """How a run's checkpoints went, as a clause after "its checkpoints": removed by prune_checkpoints.py (when, how
    many: run.json's ``checkpoints_removed``), or gone without a record of it."""
    removed = read_record(run_dir, RUN).get("checkpoints_removed")
    return (f"were removed by prune_checkpoints.py ({removed})" if removed else
            f"are gone ({checkpoint_dir(run_dir)} is missing or empty)")
