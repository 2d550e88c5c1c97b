"""Small file helpers shared by the data modules: source expansion, gzip-aware reading and checking, paths, and
the hub-offline check."""

from __future__ import annotations

import functools
import glob
import gzip
import io
import os
import zlib
from collections.abc import Iterator

from omegaconf import OmegaConf

from ..cli import CONFIG_DIR, compose
from ..errors import CorpusError, HubOfflineError
from ..files import repo_root as repo_root  # their home is files (cli needs them too); read from here as well
from ..files import resolve_path as resolve_path

TEXT_SUFFIXES = (".txt", ".txt.gz")
CORPUS_LAYOUT = "plain text files (.txt or .txt.gz): one paragraph per line, a blank line between documents"


@functools.cache
def _paths_config():
    return OmegaConf.load(CONFIG_DIR / "paths" / "default.yaml")


def path_root(key: str) -> str:
    """One root of configs/paths/default.yaml (its one home), as the file gives it: data_mirror, data_dir, output_dir,
    results_dir or reports_dir; a relative root is relative to the repository. Every default path in the code
    starts from one of these. Read at each call: data_mirror follows LINFORMER_DATA_MIRROR as it is now."""
    return str(OmegaConf.select(_paths_config(), key, throw_on_missing=True))


def default_data_mirror() -> str:
    """paths.data_mirror, resolved, for the argparse scripts."""
    return resolve_path(path_root("data_mirror"))


def configured_path(config_name: str, key: str) -> str:
    """The path configs/<config_name>.yaml gives `key` (e.g. finetune's task_cache_dir, from configs/paths), resolved
    against the repository: the argparse scripts' defaults come from the configs, never a literal of their own."""
    return resolve_path(str(OmegaConf.select(compose(config_name), key)))


def expand_sources(sources: list[str] | str) -> list[str]:
    """Expand local files and globs (sorted, deduplicated). Raises FileNotFoundError naming the layout."""
    if isinstance(sources, str):
        sources = [sources]
    out: list[str] = []
    for src in sources:
        src = str(src)
        matches = sorted(glob.glob(src)) if glob.has_magic(src) else ([src] if os.path.exists(src) else [])
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise FileNotFoundError(f"corpus source {src!r} matches no file; expected {CORPUS_LAYOUT}")
        for m in matches:
            if not m.endswith(TEXT_SUFFIXES):
                raise CorpusError(f"corpus source {m!r} is not .txt or .txt.gz; expected {CORPUS_LAYOUT}")
            if m not in out:
                out.append(m)
    return out


def verify_gzip(path: str, chunk: int = 1 << 24) -> None:
    """Decompress a .gz file to its end once: gzip checks every member's CRC and length only there, so a damaged
    stream read partly (a slice of documents) would otherwise pass as text. Raises CorpusError naming the file."""
    with open(path, "rb") as raw:
        try:
            with gzip.GzipFile(fileobj=raw) as f:
                while f.read(chunk):
                    pass
        except (OSError, EOFError, zlib.error) as err:
            raise CorpusError(f"{path}: corrupt gzip stream ({err or type(err).__name__}); nothing was built. "
                              "Replace the file with an intact copy.") from err


def verify_sources(paths: list[str]) -> None:
    """verify_gzip on every .gz file of `paths` (plain text needs no check)."""
    for p in paths:
        if p.endswith(".gz"):
            verify_gzip(p)


def open_binary(path: str) -> io.BufferedIOBase:
    if path.endswith(".gz"):
        return io.BufferedReader(gzip.open(path, "rb"), buffer_size=1 << 20)
    return open(path, "rb", buffering=1 << 20)


_REPLACEMENT = "\ufffd"
_REPLACEMENT_BYTES = _REPLACEMENT.encode("utf-8")


def decode_line(raw: bytes) -> tuple[str, int]:
    """Decode one line as UTF-8; bad bytes become U+FFFD. Returns (text, number of replacements made)."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        return text, text.count(_REPLACEMENT) - raw.count(_REPLACEMENT_BYTES)


def checked_lines(path: str, skip_bad_rows: bool, counts: dict) -> Iterator[str]:
    """Every line of the .txt/.txt.gz file `path` (blank ones too, without their line ending), as the corpus and the
    tokenizer read text: bad UTF-8 becomes U+FFFD, counted in counts["replaced_chars"]; a line holding a NUL byte
    (a binary file) is a CorpusError naming the file and line, or with `skip_bad_rows` is skipped and counted in
    counts["skipped_bad_rows"]."""
    with open_binary(path) as f:
        for lineno, raw in enumerate(f, start=1):
            text, replaced = decode_line(raw.rstrip(b"\r\n"))
            if "\x00" in text:
                if not skip_bad_rows:
                    raise CorpusError(f"{path}:{lineno}: malformed line (NUL byte; binary file?); expected "
                                      f"{CORPUS_LAYOUT} (set data.skip_bad_rows=true to skip such lines)")
                counts["skipped_bad_rows"] += 1
                continue
            counts["replaced_chars"] += replaced
            yield text


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set: a hub dataset then fails before any download."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_offline_error(name: str) -> HubOfflineError:
    return HubOfflineError(
        f"hub dataset {name!r} requested but the hub is unreachable here (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE "
        "is set). Use local files instead, e.g. the mirror under paths.data_mirror, or unset the offline "
        "variables on a machine with network access."
    )
