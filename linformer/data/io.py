"""Small file helpers shared by the data modules: source expansion, gzip-aware reading and checking, paths, and
the hub-offline check."""

from __future__ import annotations

import collections
import contextlib
import functools
import glob
import gzip
import hashlib
import io
import logging
import os
import re
import shlex
import sys
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from ..configs import compose, config_file, no_config
from ..errors import CheckpointError, ConfigError, CorpusError, HubOfflineError, MissingFileError, first_line
from ..files.hashing import HashingReader, file_state, sha256_file
from ..files.locations import clone_root, relative_to, repo_relative, resolve_path
from ..files.mappings import read_json
from ..files.outputs import MANIFEST, listing
from ..logfile import say
from ..progress import progress_to_log_file, transformers_bars_off

log = logging.getLogger(__name__)

TEXT_SUFFIXES = (".txt", ".txt.gz")  # in any case: NOTES.TXT is text too
CORPUS_LAYOUT = "plain text files (.txt or .txt.gz): one paragraph per line, a blank line between documents"
HUB_PREFIX = "hf:"  # a corpus source hf:<name>[:<config>]: a hub dataset's train split, its `text` column
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _paths_config():
    """configs/paths/default.yaml of the configs read now ($LINFORMER_CONFIG_DIR as it is set now, a command's
    --config-path), loaded again where that file or its content changed."""
    path = config_file("paths/default.yaml")
    if path is None:
        raise ConfigError(no_config("paths/default"))
    return _paths_file(str(path), file_state(path))


@functools.lru_cache(maxsize=8)
def _paths_file(path: str, state: tuple | None):
    """The paths file at `path` in one `state` (``hashing.file_state``: its inode, size and mtime)."""
    return OmegaConf.load(path)


def path_root(key: str) -> str:
    """One root of configs/paths/default.yaml (its one home), as the file gives it: data_mirror, data_dir, output_dir,
    results_dir or reports_dir; a relative root is relative to the repository. Every default path in the code
    starts from one of these. Read at each call: data_mirror follows LINFORMER_DATA_MIRROR as it is now."""
    return str(OmegaConf.select(_paths_config(), key, throw_on_missing=True))


def default_data_mirror() -> str:
    """paths.data_mirror, resolved, for the argparse scripts."""
    return resolve_path(path_root("data_mirror"))


# How a run's record names the data mirror, in the configs' own spelling: the mirror's place differs between machines
# (a GPU machine's carried copy, this machine's shared folder), its layout does not
MIRROR_ROOT = "${paths.data_mirror}"


def record_path(path: str | os.PathLike) -> str:
    """How a run's record names a local path, so that runs made on two machines, or in two checkouts, compare alike
    (``rundir.identity``) and a committed record says nothing of the machine that made it: an absolute path under
    the data mirror as ``${paths.data_mirror}/<its path there>``, under the repository relative to it
    (``locations.repo_relative``), under both by the deeper of the two (a mirror carried into the checkout), elsewhere
    as it is. A relative path, which the package reads from the repository, and a hub name are kept as given (over a
    wheel a relative path that names a file or folder is made absolute: no clone anchors it), and
    so is a record's path already in this form (``recorded_paths`` applies this to an older record, absolute).
    ``local_path`` reads it back."""
    text = str(path)
    if not os.path.isabs(text):
        # over a wheel a relative path is the working directory's: a record read from another folder needs it whole
        # (one that names nothing here, a hub name's say, is kept as given)
        return resolve_path(text) if clone_root() is None and os.path.exists(text) else text
    p, mirror = Path(text).resolve(), Path(default_data_mirror()).resolve()
    in_repo = repo_relative(p)
    if not p.is_relative_to(mirror) or (not os.path.isabs(in_repo) and
                                        len(Path(in_repo).parts) < len(p.relative_to(mirror).parts)):
        return in_repo
    rest = p.relative_to(mirror).as_posix()
    return MIRROR_ROOT if rest == "." else f"{MIRROR_ROOT}/{rest}"


def local_path(recorded: str | os.PathLike) -> str:
    """The absolute path on this machine of a path a record names (``record_path``): ``${paths.data_mirror}/...`` in
    this machine's data mirror, a relative one in the repository (``resolve_path``), an absolute one as it is."""
    text = str(recorded)
    if text == MIRROR_ROOT or text.startswith(MIRROR_ROOT + "/"):
        return str(Path(default_data_mirror()) / text[len(MIRROR_ROOT):].lstrip("/"))
    return resolve_path(text)


def returned_path(recorded: str | os.PathLike) -> str:
    """A path a record names (``record_path``) as the run that wrote it returned it to its caller: absolute on this
    machine (``local_path``) where it names a local file or folder, a data mirror's path included; else as recorded
    (a hub name, which a relative path of the repository would otherwise shadow)."""
    text = str(recorded)
    local = local_path(text)
    named_local = os.path.isabs(text) or text == MIRROR_ROOT or text.startswith(MIRROR_ROOT + "/")
    return local if named_local or os.path.exists(local) else text


def in_this_mirror(recorded: str | os.PathLike, recorded_mirror: str | os.PathLike | None) -> str | None:
    """A path a run's record names under the data mirror that same record names (its ``paths.data_mirror``, as a
    record written before ``record_path`` spelt it ``${paths.data_mirror}/...``: ``../shared/data/imdb`` beside
    ``../shared/data``), in this machine's data mirror; None where the record names no mirror or the path lies
    outside it."""
    if not recorded_mirror or str(recorded_mirror).startswith("${"):
        return None
    p, mirror = Path(local_path(str(recorded))), Path(resolve_path(str(recorded_mirror)))
    if not p.is_relative_to(mirror):
        return None
    rest = p.relative_to(mirror).as_posix()
    return local_path(MIRROR_ROOT if rest == "." else f"{MIRROR_ROOT}/{rest}")


def recorded_paths(value):
    """`value` (a run's config, summary or results; a flattened one; a list, a text) with every absolute path in it
    named as ``record_path`` names it: what a run's record holds, and how two records, or a record and a config, are
    compared, so that an older record (absolute paths) matches a newer one made here. A text that is no path, a
    command line with paths in it, passes as it is."""
    if isinstance(value, Mapping):
        return {k: recorded_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [recorded_paths(v) for v in value]
    return record_path(value) if isinstance(value, str) and os.path.isabs(value) else value


def data_mirror_words() -> str:
    """Where the data mirror is by default, for a help text: paths.data_mirror as configs/paths/default.yaml gives
    it, an environment variable with a fallback spelt out ($LINFORMER_DATA_MIRROR, else ../shared/data); the key
    alone where no configs are found (a wheel's --help: the command itself then says what is missing)."""
    try:
        given = str(OmegaConf.to_container(_paths_config(), resolve=False)["data_mirror"])
    except ConfigError:
        return "paths.data_mirror of the configs"
    env = re.fullmatch(r"\$\{oc\.env:(\w+),([^}]*)\}", given)
    return f"paths.data_mirror, i.e. {f'${env[1]}, else {env[2]}' if env else given} ({relative_to()})"


def mirror_note(path: str | os.PathLike) -> str:
    """For a file or folder that is not there: where it lies under the data mirror, the setting that put it there
    (a wrong or unset LINFORMER_DATA_MIRROR is the usual cause, not the file); empty elsewhere, or where no configs
    say where the mirror is."""
    try:
        mirror = Path(default_data_mirror())
    except ConfigError:
        return ""
    if not Path(resolve_path(path)).is_relative_to(mirror):
        return ""
    return (f" (under the data mirror {mirror}: {data_mirror_words()}; point LINFORMER_DATA_MIRROR, or "
            "paths.data_mirror=, at the folder that holds the data)")


def resolve_sources(sources) -> list[str]:
    """Corpus sources (one or a list) as the library reads them: local files and globs resolved against the
    repository (resolve_path), hub sources (hf:<name>[:<config>]) as given."""
    sources = [sources] if isinstance(sources, str) else list(sources or [])
    return [str(s) if is_hub_source(str(s)) else resolve_path(str(s)) for s in sources]


def configured_path(config_name: str, key: str) -> str:
    """The path configs/<config_name>.yaml gives `key` (e.g. finetune's task_cache_dir, from configs/paths), resolved
    against the repository: the argparse scripts' defaults come from the configs, never a literal of their own."""
    return resolve_path(str(OmegaConf.select(compose(config_name), key)))


def expand_sources(sources: list[str] | str) -> list[str]:
    """Expand local files and globs (sorted, deduplicated). Raises MissingFileError naming the layout."""
    if isinstance(sources, str):
        sources = [sources]
    out: list[str] = []
    for src in sources:
        src = str(src)
        if os.path.isdir(src):
            raise CorpusError(f"corpus source {src!r} is a directory: give its text files, e.g. "
                              f"{os.path.join(src, '*.txt')}; expected {CORPUS_LAYOUT}")
        matches = sorted(glob.glob(src)) if glob.has_magic(src) else ([src] if os.path.exists(src) else [])
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise MissingFileError(f"corpus source {src!r} matches no file{mirror_note(src)}; expected {CORPUS_LAYOUT}")
        other = [m for m in matches if not m.lower().endswith(TEXT_SUFFIXES)]
        names = listing([os.path.basename(m) for m in other])
        if other and not glob.has_magic(src):
            raise CorpusError(f"corpus source {src!r} is not .txt or .txt.gz; expected {CORPUS_LAYOUT}")
        if other and len(other) == len(matches):
            raise CorpusError(f"corpus source {src!r} matches no .txt or .txt.gz file (only {names}); expected "
                              f"{CORPUS_LAYOUT}")
        if other:  # a folder's README or notes beside its texts: a glob's other files are not read, and said so
            log.warning("corpus source %r: %d file(s) not .txt or .txt.gz left out: %s", src, len(other), names)
        out += [m for m in matches if m not in other and m not in out]
    return out


def refuse_repeated_texts(sources: list[tuple[str, str]]) -> None:
    """CorpusError for the first text given twice among `sources` ((path or hub source, its content's hash, or the
    hub source again), in order): a file listed twice or matched by overlapping globs, a copy under another name, a
    hub dataset named twice. Its documents would be read twice, and in a corpus one copy could land in the training
    split and the other in validation."""
    first: dict[str, str] = {}  # a text's content -> the first source that holds it
    for source, content in sources:
        if content in first:
            again = "is given twice (listed twice, or by overlapping globs)" if first[content] == source else \
                f"holds the same text as {first[content]} (a copy)"
            raise CorpusError(f"{source} {again}: its documents would be read twice and could land in both the "
                              "training and the validation split. Give each text once in data.sources.")
        first[content] = source


@contextlib.contextmanager
def read_whole(path: str, digest, chunk: int = 1 << 22) -> Iterator[io.BufferedIOBase]:
    """The .txt/.txt.gz file `path` open for reading as ``open_binary`` opens it (a .gz file decompressed), read to
    its end however little of it the block reads: what the block leaves is read when it ends, so that a .gz file is
    decompressed to its end (gzip checks each member's CRC and length only there: a damaged stream read partly, a
    slice of documents, would otherwise pass as text) and `digest` (a hashlib object, ``files.HashingReader``) takes
    every byte of the file as stored, in the same read as the text. A damaged .gz file is a CorpusError naming it,
    where it is read."""
    with open(path, "rb", buffering=0) as raw:
        stored = io.BufferedReader(HashingReader(raw, digest), 1 << 20)
        if not _gzipped(path):
            yield stored
            while stored.read(chunk):
                pass
            return
        if raw.read(len(_GZIP_MAGIC)) != _GZIP_MAGIC:
            raise CorpusError(f"{path}: not a gzip file (it does not start with gzip's bytes 1f 8b): a plain text "
                              "file is named .txt, not .txt.gz; rename it, or compress it with gzip.")
        raw.seek(0)
        try:
            with gzip.GzipFile(fileobj=stored) as text, io.BufferedReader(text, 1 << 20) as f:
                yield f
                while f.read(chunk):
                    pass
            while stored.read(chunk):  # what follows the last member: in the digest
                pass
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise CorpusError(f"{path}: corrupt gzip stream ({err or type(err).__name__}); nothing was built. "
                              "Replace the file with an intact copy.") from err


def _gzipped(path: str) -> bool:
    return path.lower().endswith(".gz")


def open_binary(path: str) -> io.BufferedIOBase:
    if _gzipped(path):
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


def line_bodies(raw: bytes) -> list[bytes]:
    """The lines a binary file's line (as iterating the file gives it: up to and with its LF) holds, without their
    ends: the one rule of what ends a line in text read here. A line ends at an LF, with any CRs just before it
    (CRLF, and a CRLF converted twice, CRCRLF), at the file's end, or at a lone CR (classic Mac OS text, a CR pasted
    into a line), as a universal-newline reader reads it. A line without a lone CR is one body, the line less its
    trailing CRs and LF."""
    body = raw.rstrip(b"\r\n")
    return body.split(b"\r") if b"\r" in body else [body]


_LINE_END_CRS = re.compile(rb"\r+\n")


class _LoneCrs:
    """Whether text given block by block (a call a block) holds a lone CR ending a line (``line_bodies``): a CR
    followed by neither an LF (after any more CRs) nor the text's end (``found``). Only such a text reads as more
    lines than LFs end. At memchr's speed where a block has no CR."""

    def __init__(self):
        self.carry = b""  # the CRs that end the blocks so far: what follows them decides
        self.found = False

    def __call__(self, block: bytes) -> None:
        if self.found or (not self.carry and b"\r" not in block):
            return
        text = self.carry + block
        body = text.rstrip(b"\r")
        self.carry = text[len(body):]
        self.found = b"\r" in _LINE_END_CRS.sub(b"", body)


def count_lines(path: str | os.PathLike, chunk: int = 1 << 22) -> int | None:
    """The lines of the plain (not gzipped) file `path` as ``line_bodies`` ends them, the last one unended included,
    counted at memchr's speed (a GB in about a second from the page cache); None where a lone CR ends a line
    (``_LoneCrs``: LFs alone do not count such a file's lines) or the file cannot be read."""
    crs, lines, last = _LoneCrs(), 0, b"\n"
    try:
        with open(path, "rb", buffering=0) as raw:
            while block := raw.read(chunk):
                lines += block.count(b"\n")
                crs(block)
                last = block[-1:]
    except OSError:
        return None
    if crs.found:
        return None
    return lines + (last != b"\n")  # an unended last line (a CR at the file's end ends none)


def read_source(path: str, chunk: int = 1 << 22) -> tuple[str, int, bool]:
    """The one read of the .txt/.txt.gz file `path` before anything is built from it: (the sha256 of its bytes as
    stored, the bytes of text it holds, whether the text holds a lone CR ending a line: ``_LoneCrs``). A .gz file is
    decompressed to its end in that read (``read_whole``: a damaged one is a CorpusError naming it)."""
    crs, digest, text = _LoneCrs(), hashlib.sha256(), 0
    with read_whole(path, digest, chunk) as f:
        while block := f.read(chunk):
            text += len(block)
            crs(block)
    return digest.hexdigest(), text, crs.found


def checked_lines(path: str, skip_bad_rows: bool, counts: dict, f: io.BufferedIOBase | None = None
                  ) -> Iterator[str]:
    """Every line of the .txt/.txt.gz file `path` (blank ones too, without their line ending), as the corpus and the
    tokenizer read text: a line ends at LF, CRLF or a lone CR (``line_bodies``; lone CRs read as line ends counted in
    counts["cr_line_ends"]), a UTF-8 byte order mark at its start is dropped, bad UTF-8 becomes U+FFFD, counted in
    counts["replaced_chars"]; UTF-16 text is a CorpusError saying so; a line holding a NUL byte (a binary file) is a
    CorpusError naming the file and line, or with `skip_bad_rows` is skipped and counted in counts["skipped_bad_rows"].
    `f`: `path` opened already (``read_whole``), else it is opened here (``open_binary``). The first line replaced is
    counts["first_replaced"] (its number and bytes), the first that is UTF-8 text beyond ASCII counts["utf8_line"]:
    what ``replaced_warning`` advises from."""
    if f is None:
        with open_binary(path) as f:
            yield from checked_lines(path, skip_bad_rows, counts, f)
        return
    lineno = 0  # lines as ``line_bodies`` ends them, as an editor numbers them
    utf8_seen = "utf8_line" in counts
    for i, raw in enumerate(f):
        if i == 0:
            raw = raw.removeprefix(_UTF8_BOM)
            if not _gzipped(path) and (compressed := compressed_advice(
                    path, raw, f"name it {os.path.basename(path)}.gz (a .txt.gz file is decompressed as it is read)")):
                raise CorpusError(f"{path}: {compressed}")
        if utf16 := utf16_advice(path, raw, i + 1, f"UTF-8 ({CORPUS_LAYOUT})"):
            raise CorpusError(f"{path}: {utf16}")
        bodies = line_bodies(raw)
        if len(bodies) > 1:
            counts["cr_line_ends"] = counts.get("cr_line_ends", 0) + len(bodies) - 1
        for body in bodies:
            lineno += 1
            text, replaced = decode_line(body)
            if "\x00" in text:
                if not skip_bad_rows:
                    raise CorpusError(f"{path}:{lineno}: malformed line (NUL byte; binary file?); expected "
                                      f"{CORPUS_LAYOUT} (set data.skip_bad_rows=true to skip such lines)")
                counts["skipped_bad_rows"] += 1
                continue
            if replaced:
                counts["replaced_chars"] += replaced
                counts.setdefault("first_replaced", (lineno, body))
            elif not utf8_seen and not body.isascii():
                counts["utf8_line"], utf8_seen = lineno, True
            yield text


def _utf16(raw: bytes, lineno: int) -> bool:
    """Whether a line read as bytes is UTF-16: the first line starts with its byte order mark, or a line of mostly
    ASCII text has a NUL byte beside every character."""
    if lineno == 1 and raw.startswith(_UTF16_BOMS):
        return True
    if b"\x00" not in raw:  # the common case, found at memchr's speed
        return False
    body = raw.rstrip(b"\r\n\x00")
    return len(body) >= 4 and (body[1::2].count(0) >= len(body) // 2 - 1 or body[0::2].count(0) >= len(body) // 2 - 1)


def utf16_advice(path: str, raw: bytes, lineno: int, expected: str = "UTF-8") -> str | None:
    """Where line `lineno` (from 1) of the file `path`, as bytes `raw`, is UTF-16 text (``_utf16``): what to say of
    the file, that it is, what was `expected`, and the iconv command that converts it to UTF-8 text beside it
    (<name>-utf8.<suffix>, a .gz's suffix dropped). None for any other line: the corpus's and the task readers' word
    on UTF-16."""
    if not _utf16(raw, lineno):
        return None
    return f"UTF-16 text; expected {expected}: convert it, e.g. {iconv_command(path, 'UTF-16')}"


def compressed_advice(path: str, raw: bytes, fix: str) -> str | None:
    """Where `raw`, the first line of the file `path`, begins with gzip's bytes 1f 8b: what to say of it (gzip-compressed
    data read as text, and the reader's `fix`); else None. The corpus's and the task readers' one test of it."""
    return f"gzip-compressed data, not text: {fix}" if raw.startswith(_GZIP_MAGIC) else None


def iconv_command(path: str, encoding: str) -> str:
    """The iconv command that converts the file `path` from `encoding` to UTF-8 text beside it
    (<name>-utf8.<suffix>, a .gz's suffix dropped)."""
    stem, suffix = os.path.splitext(path[:-len(".gz")] if _gzipped(path) else path)
    return f"iconv -f {encoding} -t UTF-8 {shlex.quote(path)} > {shlex.quote(f'{stem}-utf8{suffix}')}"


_C1 = re.compile(rb"[\x80-\x9f]")  # bytes that are control characters in Latin-1, and mostly letters in Windows-1252
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # no text's characters (a tab and line ends are)


def not_utf8_advice(path: str, raw: bytes, lineno: int, utf8_line: int | None) -> str:
    """What to do of the file `path` whose line `lineno`, as bytes `raw`, is not UTF-8: the corpus's and the task
    readers' word on it. Where the line reads as Latin-1 or Windows-1252 text (no control character, and no UTF-8
    character in it besides) and no other line of the file is UTF-8 text beyond ASCII (`utf8_line`: the first that
    is, or None), the iconv command that converts the file from it; else to fix the line: a conversion of the whole
    file would turn the lines that are UTF-8 already into valid UTF-8 mojibake, read without a word after it."""
    try:
        text = raw.decode("cp1252")
    except UnicodeDecodeError:  # a byte Windows-1252 leaves undefined (0x81, 0x8d, ...)
        text = None
    utf8 = any(c > "\x7f" and c != _REPLACEMENT for c in raw.decode("utf-8", errors="replace"))
    if utf8_line is not None:
        return (f"the file mixes encodings: line {utf8_line} is UTF-8 text beyond ASCII, which converting the whole "
                f"file would garble: fix line {lineno} alone, or give the file as UTF-8 text")
    if text is not None and not utf8 and not _CONTROL.search(text):
        encoding = "CP1252" if _C1.search(raw) else "latin1"  # the same characters where no byte is 0x80-0x9f
        return (f"the line reads as {'Windows-1252' if encoding == 'CP1252' else 'Latin-1'} text; convert the file "
                f"to UTF-8, e.g. {iconv_command(path, encoding)}, or fix that line")
    why = "the line holds UTF-8 characters too (a file of mixed encodings, which a conversion would garble)" if utf8 \
        else "nor is the line Latin-1 or Windows-1252 text (a control character, or a byte neither defines: binary data?)"
    return f"{why}: fix that line, or give the file as UTF-8 text"


def replaced_warning(path: str, counts: Mapping) -> str:
    """What a source read by ``checked_lines`` with bytes that are not UTF-8 (``counts``: its counts) is warned of:
    how many became U+FFFD, the first line, and what to do (``not_utf8_advice``: the iconv command where the file
    reads as Latin-1 or Windows-1252 text, as the task readers say it)."""
    lineno, raw = counts["first_replaced"]
    return (f"{path}: {counts['replaced_chars']:,} non-UTF-8 byte sequences read as U+FFFD, and trained on as such; "
            f"the first on line {lineno}: {not_utf8_advice(path, raw, lineno, counts.get('utf8_line'))}")


def replaced_clause(per_source: Mapping[str, int]) -> str:
    """A run's summary's word on the non-UTF-8 bytes its sources held (`per_source`: each source's count of those
    read as U+FFFD), after ``replaced_warning``'s per source: "" where none held any."""
    held = {source: n for source, n in per_source.items() if n}
    if not held:
        return ""
    names = [f"{os.path.basename(s) if not is_hub_source(s) else s} {n:,}" for s, n in held.items()]
    return (f"; {sum(held.values()):,} non-UTF-8 byte sequences read as U+FFFD ({listing(names)}: see the "
            f"warning{'s' if len(held) > 1 else ''} above)")


def first_utf8_line(bodies: Iterator[bytes], lineno: int) -> int | None:
    """The number of the first of the lines `bodies` (numbered on from `lineno`, the line before them) that is UTF-8
    text beyond ASCII, or None."""
    for body in bodies:
        lineno += 1
        if not body.isascii():
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                continue
            return lineno
    return None


def is_hub_source(source: str) -> bool:
    return str(source).startswith(HUB_PREFIX)


def hub_source(source: str) -> tuple[str, str | None]:
    """(name, config) of the corpus source hf:<name>[:<config>]. Nothing is asked of the hub: a prepared corpus compares
    a hub source by this name alone, offline too; the dataset is loaded where it is read (``load_hub_text``)."""
    name, _, config = source[len(HUB_PREFIX):].partition(":")
    return name, config or None


def load_hub_text(source: str):
    """The train split of the hub dataset `source` (hf:<name>[:<config>]), which must have a `text` column: one
    document per row. Offline (``hub_offline``) datasets reads it from its cache or a local folder; a dataset it cannot
    give (not cached offline, no network, no such name, no access) is a HubOfflineError in one line naming the source
    (``hub_load_error``)."""
    import datasets

    name, config = hub_source(source)
    try:
        ds = datasets.load_dataset(name, config, split="train")
    except Exception as err:  # network, auth or unknown name: datasets raises many kinds, each the user's to fix
        raise hub_load_error(source, err, f"give data.sources= local {CORPUS_LAYOUT}") from err
    if "text" not in ds.column_names:
        raise CorpusError(f"hub dataset {source!r} has no 'text' column (columns: {ds.column_names})")
    return ds


def check_hub_sources(sources: list[str]) -> None:
    """Where the hub is off (``hub_offline``), each hub source of `sources` loaded now, from the datasets cache or a
    local folder: one that is not there is refused before a build reads (hashes) any other source, not after."""
    if hub_offline():
        for source in sources:
            if is_hub_source(str(source)):
                load_hub_text(str(source))


def hub_lines(ds) -> Iterator[str]:
    """A hub dataset's rows as corpus lines: each row's paragraphs (its lines), a blank line after each row."""
    for row in ds:
        yield from (row["text"] or "").split("\n")
        yield ""


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set: datasets then downloads nothing, and reads a hub dataset
    from its cache alone."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_load_error(name: str, err: Exception, local: str) -> HubOfflineError:
    """The one error of a hub dataset `name` (with its config) that datasets could not load (`err`): offline, that it
    is not in the datasets cache; else datasets' reason. `local` says which local files to give instead."""
    if hub_offline():
        return HubOfflineError(
            f"hub dataset {name!r} is not in the datasets cache, and HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set, so it "
            f"is not downloaded ({first_line(err)}): {local}, or load it once where the hub is reachable (without "
            "the offline variables) so that it is cached")
    return HubOfflineError(f"hub dataset {name!r} could not be loaded ({first_line(err, named=True)}): check the name "
                           f"and the network, or {local}")


def load_auto(auto_class, name_or_path: str | os.PathLike, **kwargs):
    """``auto_class.from_pretrained(name_or_path, **kwargs)`` (AutoConfig, AutoTokenizer, an AutoModel class) with
    ``trust_remote_code=False``: transformers then neither asks on a terminal whether to run the folder's own code
    nor runs it. A folder that asks for it (an ``auto_map`` naming its own Python files, for a model type
    transformers does not know) is a CheckpointError saying so. Where progress goes to a log file
    (``progress.progress_to_log_file``) transformers' "Loading weights" bar is off: its redraws would run into the file,
    and ``modeling.loading.load_pretrained`` prints a one-line summary of the load instead."""
    try:
        with transformers_bars_off(progress_to_log_file()):
            return auto_class.from_pretrained(name_or_path, trust_remote_code=False, **kwargs)
    except ValueError as err:
        if "trust_remote_code" not in str(err):
            raise
        raise CheckpointError(
            f"{name_or_path} asks to run its own code (its config.json or tokenizer_config.json names Python files "
            f"of its own in auto_map), and linformer does not run a model folder's code: give a model saved by "
            f"linformer or transformers (BERT, RoBERTa, ...), or load this one yourself with trust_remote_code=True "
            f"once you have read its code."
        ) from err


@dataclass
class SourceText:
    """One text a corpus or tokenizer is made from, as ``source_texts`` finds it."""

    given: str  # the source as the user gave it: a path, a glob or hf:<name>[:<config>]
    path: str | None = None
    hub: tuple[str, str | None] | None = None
    sha256: str = ""
    bytes: int = 0
    stats: dict = field(default_factory=dict)
    state: tuple | None = None  # the file's ``hashing.file_state`` when it was hashed (``text_states``)
    text_bytes: int = 0  # the bytes of text it holds (a .gz file's decompressed), where read by ``read_source``
    lone_cr: bool | None = None  # whether it holds a lone CR ending a line (``read_source``); None: not read for it


def source_texts(sources: list[str], read: bool = False, hashed: bool = True) -> list[SourceText]:
    """Each text `sources` give, in order: a file (of a path or glob) with its absolute path and sha256, a hub source
    by its name (nothing asked of the hub: ``check_hub_sources`` loads it where a build needs it); a text given twice is refused (``io.refuse_repeated_texts``).
    What a corpus and a tokenizer record of their sources (``text_records``) and compare (``text_changes``). With
    `read`, each file's sha256, text bytes and lone CR are taken in one read of it (``read_source``, a .gz file
    decompressed and checked), else its sha256 alone (``hashing.sha256_file``); without `hashed`, not even that (its
    sha256 "": the caller takes it in its own read, ``hash_texts`` where it needs it first), but for a file of the
    size of another, which may be a copy of it (refused now, as any)."""
    if isinstance(sources, str):
        sources = [sources]
    if not sources:
        raise CorpusError(f"no corpus sources given; expected {CORPUS_LAYOUT} or hf:<name>[:<config>]")
    out: list[SourceText] = []
    for given in sources:
        given = str(given)
        if is_hub_source(given):
            out.append(SourceText(given=given, hub=hub_source(given)))
        else:
            for p in expand_sources([given]):
                state = file_state(p)  # before the hash: a change after it is another state (``text_states``)
                sha256, text, lone_cr = read_source(p) if read else (sha256_file(p) if hashed else "", 0, None)
                out.append(SourceText(given=given, path=os.path.abspath(p), sha256=sha256, bytes=os.path.getsize(p),
                                      state=state, text_bytes=text, lone_cr=lone_cr))
    sizes = collections.Counter(s.bytes for s in out if s.path is not None)
    hash_texts([s for s in out if s.path is not None and sizes[s.bytes] > 1])
    refuse_repeated_texts([(s.path, s.sha256 or s.path) if s.path is not None else (s.given, s.given) for s in out])
    return out


def hash_texts(srcs: list[SourceText]) -> None:
    """The sha256 of each file of `srcs` that ``source_texts`` left unread (`hashed` false), taken now."""
    for s in srcs:
        if s.path is not None and not s.sha256:
            s.sha256 = sha256_file(s.path)


def text_states(srcs: list[SourceText]) -> dict[str, tuple | None]:
    """The state each file of `srcs` had when ``source_texts`` hashed it, by path, as ``hashing.input_states`` gives
    them: what ``hashing.check_inputs_unchanged`` compares after a build that read them again."""
    return {s.path: s.state for s in srcs if s.path is not None}


def text_records(srcs: list[SourceText]) -> list[dict]:
    """`srcs` as a tokenizer's manifest records them ("sources"): each as given, its path and sha256 (a hub source by
    its name alone); a corpus's records add each one's size and counts."""
    return [{"source": s.given, "path": s.path, "sha256": s.sha256} if s.path else {"source": s.given} for s in srcs]


def moved_output(out_dir: str | os.PathLike, record: Mapping, texts: list[SourceText],
                 placeless: Callable[[Mapping], Mapping], what: str) -> dict | None:
    """The manifest of the output at `out_dir` where `record`'s command made it from the same texts (sha256) as
    `texts` at other paths, with `record`'s settings but for where its inputs were (`placeless`: a command's settings
    without the keys naming the paths of what it reads), as a moved data mirror leaves it; then a note on stderr says
    where it was made from (`what`: "the corpus", ...). None otherwise: another command's, other settings or texts, or
    the same paths (the output rule's own comparison). Such an output is the command's own, as one made with
    `record`'s settings is: rebuilt, with force or without, never refused for its paths (``atomic.atomic_dir``'s
    `replaces`), and as protected as that one (a file put beside it is still refused)."""
    made = read_json(Path(out_dir) / MANIFEST)
    if made.get("command") != record["command"] or "sources" not in made or made.get("settings") == record["settings"]:
        return None
    if placeless(made.get("settings") or {}) != placeless(record["settings"]):
        return None
    hash_texts(texts)
    changed, made_at = text_changes(made["sources"], texts)
    if changed is not None:
        return None
    where = f"from {listing(made_at)}" if made_at else "with its inputs at other paths"
    say(f"note: {what} {out_dir} was made {where}; the same texts (sha256) are given at other paths, so it is "
        "replaced as one made with these settings is.", stream=sys.stderr)
    return made


def text_changes(recorded: list[Mapping], now: list[SourceText]) -> tuple[str | None, list[str]]:
    """How the texts `now` (``source_texts``) differ from the `recorded` ones (a manifest's "sources"), by content
    (sha256; a hub source by its name), in words: None when they are the same texts in the same order. And where the
    recorded texts were (their paths), when the same texts are now at other paths; [] when at the same ones."""
    ours = [s.sha256 if s.path else s.given for s in now]
    theirs = [r.get("sha256") if r.get("path") else r.get("source") for r in recorded]
    where = [s.path or s.given for s in now]
    made_at = [str(r.get("path") or r.get("source")) for r in recorded]
    if ours != theirs:
        gone = [at for at, h in zip(made_at, theirs) if h not in ours]
        new = [w for w, h in zip(where, ours) if h not in theirs]
        changed = [w for w in new if w in gone]  # edited in place: one path, other text
        new, gone = [w for w in new if w not in changed], [at for at in gone if at not in changed]
        return "; ".join([*(["changed since: " + ", ".join(changed)] if changed else []),
                          *(["texts it was not made from: " + ", ".join(new)] if new else []),
                          *(["without texts it was made from: " + ", ".join(gone)] if gone else [])]) or \
            "its texts in another order", []
    return None, made_at if made_at != where else []
