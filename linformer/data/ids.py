"""The token ids of a saved dataset (a prepared corpus, a task cache entry), read in the one pass that checks its
files: each Arrow file is parsed while its sha256 is taken, so that the checksums that find a damaged file and the
range of ids that finds ids no model of a vocabulary takes cost one read of the data, not two."""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..files.hashing import HashingReader

READ_CHUNK = 1 << 22  # bytes a read takes from the file: as hashing.sha256_file hashes it


@dataclass
class TokenIds:
    """What ``read_token_ids`` found: each Arrow file's sha256 by its name under the folder (for
    ``hashing.checksum_problems``), and the smallest and largest id of the column with the file holding each;
    ``unread``: the files that do not parse as Arrow streams (their ids unknown: loading them fails on its own)."""

    digests: dict[str, str] = field(default_factory=dict)
    smallest: tuple[int, str] | None = None
    largest: tuple[int, str] | None = None
    unread: list[str] = field(default_factory=list)

    def outside(self, vocabulary: int) -> tuple[int, str] | None:
        """(id, file) of the id furthest outside 0..vocabulary-1 (the largest above it first), or None when every id
        is inside."""
        if self.largest is not None and self.largest[0] >= vocabulary:
            return self.largest
        if self.smallest is not None and self.smallest[0] < 0:
            return self.smallest
        return None


def read_token_ids(root: str | Path, names: Iterable[str], column: str = "input_ids") -> TokenIds:
    """The sha256 of each .arrow file among `names` (paths under `root`, as a manifest's "files" lists the files it
    was saved with) and the range of the ids in its list column `column`, each file read once (a file without that
    column adds its digest alone; a file that is not there, none: the checksums name it). Only those: another .arrow
    file beside a split (a cache file datasets wrote there) is no file of it, and is neither read nor checked."""
    import pyarrow as pa
    import pyarrow.compute as pc

    root, found = Path(root), TokenIds()
    for name in sorted(n for n in names if n.endswith(".arrow")):
        path = root / name
        if not path.is_file():
            continue
        with open(path, "rb", buffering=0) as raw:
            hashing = HashingReader(raw)
            stream = io.BufferedReader(hashing, READ_CHUNK)
            try:
                for batch in pa.ipc.open_stream(stream):
                    if column not in batch.schema.names:
                        break
                    ids = batch.column(column)
                    ends = pc.min_max(ids.flatten() if pa.types.is_list(ids.type) else ids)
                    low, high = ends["min"].as_py(), ends["max"].as_py()
                    if low is not None and (found.smallest is None or low < found.smallest[0]):
                        found.smallest = (low, name)
                    if high is not None and (found.largest is None or high > found.largest[0]):
                        found.largest = (high, name)
            except (pa.ArrowInvalid, OSError):
                found.unread.append(name)
            while stream.read(READ_CHUNK):  # the rest (a stream's end marker, or what did not parse): in the digest
                pass
        found.digests[name] = hashing.digest.hexdigest()
    return found
