"""The one atomic writer: a reader sees the old file or folder or the new one, never half. ``atomic_write`` and
``atomic_stream`` write a file, ``atomic_dir`` an output directory and ``output_files`` a set of files as one, both under
the output rule (``outputs``: what made an output is recorded, and only an earlier output of the same command with
the same settings is replaced without asking). A symlink at the path is written through. Run directories build on
this module (``rundir``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..errors import DiskFullError, PartialOutput
from ..signals import signals_stop, sigterm_unclaimed
from .hashing import file_checksums
from .locks import flocked
from .mappings import read_json, warn_once
from .names import plain_name
from .outputs import FILE_RECORDS, MANIFEST, check_output_dir, check_output_files, listing
from .storage import disk_full_names
from .temporaries import _remove, _temp_name, remove_stale_temps


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
    raises, `path` is as it was. A file already at `path` keeps its permissions (a run record the user made private
    stays so); a new one gets the umask's."""
    shown, path = Path(path), written_at(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    tmp = _temp_name("tmp", path)
    try:
        with _named(shown, tmp), disk_full_names(shown):
            with open(tmp, "wb") as f:
                yield f
                # the permission bits only (never a setuid or setgid bit of whatever file was there); a file system
                # without chmod (some FUSE and CIFS mounts) keeps the new file's mode: the write goes through
                with contextlib.suppress(OSError):
                    os.fchmod(f.fileno(), os.stat(path).st_mode & 0o777)
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
               needs: int | None = None, chosen: bool = False) -> Iterator[Path]:
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
    `chosen`: `final` is a folder the package itself chose (a run's model/), replaceable with `flag` whatever its
    manifest says (an earlier version wrote none), as ``check_output_dir`` takes a record of None; `record` is still
    written.
    """
    shown, final = Path(final), written_at(final)
    check = None if chosen else replaces or record
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


def record_output_files(paths: list[str | Path], record: Mapping[str, Any], replaces_earlier: bool = False) -> None:
    """Record `record` as what wrote each of `paths`, in its folder's FILE_RECORDS (one write per folder).
    ``replaces_earlier``: files that an earlier run of the same command recorded in those folders, and that are not
    among `paths`, are removed with their records."""
    folders: dict[Path, list[str]] = {}
    for path in map(Path, paths):
        folders.setdefault(path.parent, []).append(path.name)
    for folder, names in folders.items():
        # two commands recording into one folder at once: each merges the other's entries. Without flock (some NFS
        # and FUSE mounts) two at the same instant may lose an entry, and the command that lost it is refused as "a
        # file ... did not write" when run again (--overwrite replaces it).
        with flocked(folder / (FILE_RECORDS + ".lock")):
            records = _file_records(folder)
            stale = [name for name, made in records.items() if isinstance(made, dict) and
                     made.get("command") == record["command"] and name not in names] if replaces_earlier else []
            records = {k: v for k, v in records.items() if k not in stale}
            write_json(folder / FILE_RECORDS, {**records, **{name: dict(record) for name in names}})
            for name in stale:  # after the record: a failed write of it leaves them, still recorded
                if (folder / name).is_file() and not (folder / name).is_symlink():  # a link the user made is theirs
                    (folder / name).unlink(missing_ok=True)


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
                 flag: str = "--overwrite", replaces_earlier: bool = False, key: str | None = None,
                 reads: Iterable[str | Path] = ()) -> Iterator[None]:
    """Check `paths` (``check_output_files``) before the block, which writes them, and record those written after.
    ``replaces_earlier``: the files are the whole output of their command in their folders (a comparison's table and
    plots), so any other file an earlier run of the command wrote there is removed, not left beside them as if it
    belonged to this output. `reads`: the command's inputs, which no path may be or lie inside, overwrite or not.

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
    check_output_files(paths, record, overwrite, flag, key, reads)
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
