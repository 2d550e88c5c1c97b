"""What a file holds, by its state and its content: its state without reading it (``file_state``; a build's inputs
checked unchanged after it), ``ReadOnce`` (the one cache of what a file gives while it is unchanged), its sha256,
the checksum listing of a folder, and the one cache-key scheme of prepared data."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import json
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError
from .names import plain_name


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


def tree_sha256(root: Path, patterns: Iterable[str]) -> str:
    """One sha256 over the relative path and bytes of each file under `root` that a glob of `patterns` matches: code
    named by its content, wherever it lies (a wheel's copy, a checkout sent without .git), the same for the same
    files."""
    files = sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    digest = hashlib.sha256()
    for path in files:
        digest.update(os.fsencode(f"{path.relative_to(root).as_posix()}\0{sha256_file(path)}\n"))
    return digest.hexdigest()


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
    # its own JSON text, not short_digest's canonical form: non-ASCII escaped, any other value as its str (a Path),
    # the form every prepared cache's key was taken in
    return short_digest(json.dumps(payload, sort_keys=True, default=str))


def short_digest(value: Any, length: int = 16) -> str:
    """The first `length` hex digits of a sha256, the package's one short name of a content (a cache key, a
    tokenizer's identity, a W&B run id; 8 in a temporary's cut name and a process's place, 10 in a W&B group's cut
    name: each kept, as names already on disk and on W&B carry them): of `value`'s bytes, of its UTF-8 where it is
    text, else of its canonical JSON (keys sorted, non-ASCII characters as themselves, UTF-8), so that equal mappings
    name the same whatever their order."""
    # surrogateescape: a path Python decoded from bytes it could not (argv under an ASCII locale) has its bytes back
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    elif not isinstance(value, bytes):
        value = json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogateescape")
    return hashlib.sha256(value).hexdigest()[:length]
