"""The readers of a task's files: GLUE tsv, csv, the mirror's IMDB CSVs or the original aclImdb folders, or, with
`data_dir=None`, the Hugging Face hub (offline: the datasets cache alone). A malformed row is a TaskDataError naming
the file and line, or is skipped and counted with skip_bad_rows; a malformed file (not UTF-8 text, a header naming a
column twice, a quote never closed) is a TaskDataError naming the file and line."""

from __future__ import annotations

import codecs
import collections
import csv
import dataclasses
import io
import json
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from ..errors import ConfigError, MissingFileError, TaskDataError
from .io import (
    compressed_advice,
    first_utf8_line,
    hub_load_error,
    line_bodies,
    mirror_note,
    not_utf8_advice,
    utf16_advice,
)
from .tasks import BUILT_IN, TEXT_CLEANING, TaskSpec, clean_imdb, get_task, labels_match

# csv's own cap on a field, 131,072 characters, would refuse a long document (the inputs a Linformer is for): a field
# is held whole in memory whatever the cap, so the cap is the largest csv takes on every platform (a C long of 32
# bits), raised for each read of a row alone (``_next_row``)
_FIELD_LIMIT = 2**31 - 1
_NUL, _CR = 0, ord("\r")  # bytes as ints: `in` finds an int at memchr's speed, a bytes object ten times slower


def _missing(path: Path | str, task_spec: TaskSpec, elsewhere: str | None = None,
             what: str = "") -> MissingFileError:
    """A task's file or folder (`what` names it) that is not there: the setting that put it under the data mirror,
    what the task expects, and where else it can come from."""
    return MissingFileError(f"{what}{path} not found{mirror_note(path)}: task {task_spec.name} expects "
                             f"{task_spec.layout()}"
                             f"{task_spec.elsewhere() if elsewhere is None else elsewhere}")


def check_task_files(names, mirror: str | Path) -> None:
    """MissingFileError naming the first train or eval file of the tasks `names` that is not under the data mirror
    (where finetuning reads them by default): a plan checks them before its first job, not at the finetuning that
    needs them after its pretraining."""
    for name in names:
        check_task_dir(name, Path(mirror) / get_task(name).mirror_subdir)


def _label_id(raw: str, task_spec: TaskSpec, where: str, skip_bad_rows: bool = False) -> int | None:
    """The label's id; a label outside the task's set is a malformed row: an error, or None (skip it) with
    skip_bad_rows."""
    raw = raw.strip()
    if raw in task_spec.raw_labels:
        return task_spec.raw_labels.index(raw)
    if raw.isascii() and raw.isdigit() and int(raw) < task_spec.num_labels and \
            not any(label.isdigit() for label in task_spec.raw_labels):
        # a file written from the hub's columns (ClassLabel ids) where the task's files write names: every row is
        # such, so skipping them would leave none (where its labels are numbers, "0" is no id but a wrong label)
        ids = ", ".join(f"{i} = {name}" for i, name in enumerate(task_spec.raw_labels))
        raise TaskDataError(f"{where}: label {raw!r} is a label id: the file writes label ids where task "
                            f"{task_spec.name}'s files write the labels {list(task_spec.raw_labels)}; write each id's "
                            f"label instead ({ids})")
    if skip_bad_rows:
        return None
    raise TaskDataError(f"{where}: label {raw!r} is not in the {task_spec.name} label set {list(task_spec.raw_labels)}"
                        "; set task.skip_bad_rows=true to skip and count such rows")


# how finetuning is told to skip bad rows, as the readers' errors say it; a command of its own says its flag
# ("pass --skip-bad-rows")
SKIP_SETTING = "set task.skip_bad_rows=true"


def _row_fits(row: list[str], header: list[str], where: str, skip_bad_rows: bool, skip: str = SKIP_SETTING) -> bool:
    """False for a row to skip (counted by the caller); a malformed row raises unless skip_bad_rows (`skip`: the
    instruction that skips it, as the error says it)."""
    if len(row) == len(header):
        return True
    if not skip_bad_rows:
        raise TaskDataError(
            f"{where}: malformed row: {len(row)} fields, expected {len(header)} ({header}); "
            f"{skip} to skip and count such rows"
        )
    return False


# The column of each row's place in its split's source (``row_place``), carried through the choosing of rows so that
# an error, and a prediction, name the row in its file
ROW = "_row"


def _columns(fields: Iterable[str]) -> dict[str, list]:
    return {**{f: [] for f in fields}, "labels": [], ROW: []}


def _add_row(cols: dict[str, list], texts: Mapping[str, str], label: int, row: int) -> None:
    """Append a row that fits (``_row_fits``, ``_texts_fit``) to the columns being read: its texts, its label and its
    place in the source (``row_place``: a file's line, as the readers' errors name it)."""
    for column, text in texts.items():
        cols[column].append(text)
    cols["labels"].append(label)
    cols[ROW].append(row)


# a code point of UTF-16's surrogate halves: in a Python string one is a lone half (a pair is read as the character
# it encodes), which no UTF-8 text holds and the tokenizers refuse with a TypeError; JSON's escapes ("\ud800") give one
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(text: str) -> str | None:
    """The first lone surrogate of `text` as JSON escapes it (\\ud800), or None: an ASCII text is spared the scan."""
    found = None if text.isascii() else _SURROGATE.search(text)
    return None if found is None else f"\\u{ord(found.group()):04x}"


def _texts_fit(texts: Mapping[str | None, str], where: str, skip_bad_rows: bool, skip: str = SKIP_SETTING) -> bool:
    """False for a row to skip (counted by the caller) whose text field (column: its text, as read and cleaned) is
    empty, where the model would train or be scored on no text at all under a label, holds a NUL byte, which no
    text holds (a binary file's bytes, as the corpus refuses them), or a lone surrogate (``_lone_surrogate``: a JSON
    line's escape of half a character, which the tokenizer cannot encode). It raises unless skip_bad_rows. An aclImdb
    review is a row of its own file (`where` the file, its one text under the column None)."""
    for text in texts.values():
        if not text or "\x00" in text or _lone_surrogate(text):
            break
    else:
        return True
    empty = [column for column, text in texts.items() if not text]
    binary = [column for column, text in texts.items() if "\x00" in text]
    if not skip_bad_rows:
        if empty:
            what = f"empty text in column {empty[0]}: write the row's text" if empty[0] is not None else \
                "empty review (no text, or whitespace and line breaks only): write its text, or delete the file"
        elif binary:
            what = (f"a NUL byte in column {binary[0]}" if binary[0] is not None else "a NUL byte in the review") + \
                " (a binary file?): remove it"
        else:
            column, half = next((c, h) for c, text in texts.items() if (h := _lone_surrogate(text)))
            what = (f"a lone surrogate {half} " + (f"in column {column}" if column is not None else "in the review") +
                    " (half of a character's UTF-16 pair, no character alone): write the whole pair, or remove it")
        raise TaskDataError(f"{where}: {what}, or {skip} to skip and count such rows")
    return False


def _utf8_lines(path: Path) -> Iterator[str]:
    """The lines of `path` as text, each with its line end (``_line_pieces``: LF, CRLF or a lone CR), a byte order
    mark read away: UTF-16 text is one TaskDataError saying so and how to convert it, as the corpus's reader says it;
    a byte that is not UTF-8 is one naming the file and line, where a replacement character would have been trained
    on without a word (``_not_utf8``)."""
    number = offset = 0  # offset: the bytes of the file before the line
    utf8_line = None  # the first line that is UTF-8 text beyond ASCII: a conversion of the file would garble it
    with open(path, "rb") as f:
        for raw in f:
            if number == 0:
                offset = len(raw)
                raw = raw.removeprefix(codecs.BOM_UTF8)
                offset -= len(raw)
                stem = str(path)[:-3] if str(path).lower().endswith(".gz") else f"{path.with_suffix('')}-text{path.suffix}"
                if compressed := compressed_advice(str(path), raw, "decompress it first, e.g. gzip -dc "
                                                   f"{shlex.quote(str(path))} > {shlex.quote(stem)}"):
                    raise TaskDataError(f"{path}: {compressed}")
            # UTF-16 text has a NUL byte on each line (but its first, a BOM's): a NUL byte's test spares the rest
            if (number == 0 or _NUL in raw) and (utf16 := utf16_advice(str(path), raw, number + 1, "UTF-8 text")):
                raise TaskDataError(f"{path}: {utf16}")
            pieces = _line_pieces(raw) if _CR in raw else (raw,)  # no CR: the common case
            for i, piece in enumerate(pieces):
                number += 1
                try:
                    text = piece.decode("utf-8")
                except UnicodeDecodeError as err:
                    later = (body for rest in (pieces[i + 1:], f) for line in rest for body in line_bodies(line))
                    raise _not_utf8(err, piece, path, number, offset,
                                    utf8_line or first_utf8_line(later, number)) from None
                if utf8_line is None and not piece.isascii():
                    utf8_line = number
                yield text
                offset += len(piece)


def _line_pieces(raw: bytes) -> list[bytes]:
    """The lines a binary file's line (up to and with its LF) holds, as ``io.line_bodies`` ends them (the corpus's
    rule: at an LF with any CRs before it, at the file's end, or at a lone CR), each with its end as written: csv
    keeps a quoted field's line breaks. A file without a lone CR ends its lines at its LFs alone."""
    *lines, last = line_bodies(raw)
    return [line + b"\r" for line in lines] + [last + raw[len(raw.rstrip(b"\r\n")):]]


def _not_utf8(err: UnicodeDecodeError, raw: bytes, path: Path, number: int, offset: int,
              utf8_line: int | None) -> TaskDataError:
    """The TaskDataError for line `number` of the file `path`, `raw` its bytes from byte `offset` of the file, that
    is not UTF-8 (`err`): naming the line, the byte and its offset, and the conversion that reads the file as it was
    written, where one does (``io.not_utf8_advice``; `utf8_line`: the first other line of the file that is UTF-8
    text beyond ASCII, which a conversion would garble)."""
    return TaskDataError(f"{path}:{number}: not UTF-8 text (byte {raw[err.start]:#04x} at byte offset "
                         f"{offset + err.start:,} of the file, from 0): "
                         f"{not_utf8_advice(str(path), raw, number, utf8_line)}")


def _next_row(reader) -> list[str] | None:
    """The next row of the csv `reader` (None at its end), read with the field cap this module reads with
    (``_FIELD_LIMIT``): csv's cap is one setting of the whole process, so it is raised for this read alone and put
    back after it, an error's too, and a caller's own csv reading keeps its own cap."""
    before = csv.field_size_limit(_FIELD_LIMIT)
    try:
        return next(reader, None)
    finally:
        csv.field_size_limit(before)


def _csv_reader(lines: Iterable[str], **dialect) -> Iterator[list[str]]:
    """The rows csv reads from `lines`, each read with this module's field cap (``_next_row``)."""
    reader = csv.reader(lines, **dialect)
    while (row := _next_row(reader)) is not None:
        yield row


def _csv_error(err: csv.Error, where: str) -> TaskDataError:
    return TaskDataError(f"{where}: not read as csv ({err}): fix the row")


def _tsv_rows(path: Path) -> Iterator[tuple[list[str], int]]:
    """(row, its line) for each row of a GLUE tsv file (tab-separated, no quoting), a blank line left out: empty, or
    of whitespace alone (tabs too), as the corpus reads a blank line (``str.isspace``)."""
    reader = csv.reader(_utf8_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        while (row := _next_row(reader)) is not None:
            if row and not "\t".join(row).isspace():
                yield row, reader.line_num
    except csv.Error as err:
        raise _csv_error(err, f"{path}:{reader.line_num}") from None


def _tsv_fields(path: Path) -> Iterator[list[str]]:
    return (row for row, _ in _tsv_rows(path))


def _read_glue_tsv(data_dir: Path, split_file: str, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    path = data_dir / split_file
    if not path.is_file():
        raise _missing(path, task_spec)
    return _glue_rows(path, _tsv_rows(path), task_spec, skip_bad_rows)


def _glue_rows(path: Path, rows: Iterator[tuple[list[str], int]], task_spec: TaskSpec,
               skip_bad_rows: bool) -> tuple[dict, int]:
    cols = _columns(task_spec.text_fields)
    skipped = 0
    header = _header(path, next(rows, [None])[0], task_spec)
    idx = [header.index(c) for c in task_spec.text_fields]
    lab = header.index(task_spec.label_field)
    for row, line in rows:
        where = f"{path}:{line}"
        if not _row_fits(row, header, where, skip_bad_rows):
            skipped += 1
            continue
        label = _label_id(row[lab], task_spec, where, skip_bad_rows)
        texts = {f_: row[i].strip() for f_, i in zip(task_spec.text_fields, idx)}
        if label is None or not _texts_fit(texts, where, skip_bad_rows):
            skipped += 1
            continue
        _add_row(cols, texts, label, line)
    return _some_rows(path, cols, skipped, task_spec)


def _header(path: Path, header: list[str] | None, task_spec: TaskSpec) -> list[str]:
    """The header row of a task file, stripped: TaskDataError for an empty file, one that lacks a column the spec
    reads (naming the spec's key that names it, for a task of one's own), or one that names such a column twice
    (which of the two holds it is not known)."""
    if header is None:
        raise TaskDataError(f"{path}: empty file; expected {task_spec.layout()}")
    header = [h.strip() for h in header]
    keys = {**{c: "text_fields" for c in task_spec.text_fields}, task_spec.label_field: "label_field"}
    twice = [c for c in keys if header.count(c) > 1]
    if twice:
        raise TaskDataError(f"{path}:1: header {header} names column {twice[0]!r} {header.count(twice[0])} times, "
                            "and which one to read is not known: rename or delete the others")
    missing = [c for c in keys if c not in header]
    if not missing:
        return header
    fix = ""
    if task_spec.name not in BUILT_IN:  # a task of one's own: the file's header, or its spec, is what to fix
        named = ", ".join(dict.fromkeys(
            f"task.spec.{keys[c]}={list(task_spec.text_fields) if keys[c] == 'text_fields' else c}" for c in missing))
        fix = f" (named by {named}: name the file's columns there)"
    raise TaskDataError(f"{path}:1: header {header} lacks columns {missing}{fix}; expected {task_spec.layout()}")


def _some_rows(path: Path, cols: dict, skipped: int, task_spec: TaskSpec) -> tuple[dict, int]:
    """(cols, skipped), or TaskDataError naming `path` where no row is left to read: a header alone, or every row
    skipped as bad (task.skip_bad_rows)."""
    if cols["labels"]:
        return cols, skipped
    what = f"all {skipped} rows are bad rows, skipped (task.skip_bad_rows)" if skipped else "header only, no rows"
    raise TaskDataError(f"{path}: {what}; expected {task_spec.layout()}")


class _LineFeed:
    """The lines a csv reader reads, numbered, with a way to give some back (read again by the next row)."""

    def __init__(self, f):
        self.f, self.number = f, 0
        self.back: collections.deque[tuple[int, str]] = collections.deque()
        self.taken: list[tuple[int, str]] = []  # the lines the current row was read from

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if self.back:
            number, line = self.back.popleft()
        else:
            line, self.number = next(self.f), self.number + 1
            number = self.number
        self.taken.append((number, line))
        return line


class _CsvRow(NamedTuple):
    """A row of a csv file as ``_csv_rows`` reads it."""

    fields: list[str]
    first: int  # the line it starts on
    last: int  # the line it ends on: a quoted field's line breaks take in the lines after its first
    unclosed: int | None  # the line of a quote it opens and never closes (the file ends inside it), else None
    astray: bool  # a quoted field of it closes astray: its quote is followed by neither a comma nor the line's end
    give_back: Callable[[], None]  # hands its lines after its first to the rows after it (a row skipped as bad)


def _csv_rows(feed: _LineFeed, path: Path) -> Iterator[_CsvRow]:
    """The rows of a csv file's lines, a blank line (empty, or whitespace alone) left out. A quote left open on one
    line takes the lines after it into that row, up to the next quote, or to the file's end (``unclosed``: csv would
    return the row as a whole one): ``give_back`` hands a skipped row's lines after its first to the rows after it,
    which they are."""
    reader = csv.reader(feed)
    while True:
        feed.taken = []
        try:
            row = _next_row(reader)
        except csv.Error as err:
            raise _csv_error(err, f"{path}:{feed.taken[0][0] if feed.taken else feed.number}") from None
        if row is None:
            return
        lines = feed.taken
        if not row:
            continue
        text = "".join(line for _, line in lines)
        if len(lines) == 1 and text.isspace():  # a line of whitespace alone is blank, as the corpus reads it
            continue
        # only a row cut at the file's end (its last line without a line end) or one over several lines can end
        # inside its quotes, or take in lines up to a quote that closes astray: the scan is spared the rest
        opened, astray = _quote_faults(text) if len(lines) > 1 or not text.endswith(("\n", "\r")) else (None, False)
        yield _CsvRow(row, lines[0][0], lines[-1][0], None if opened is None else _line_at(lines, opened), astray,
                      lambda lines=lines: feed.back.extendleft(reversed(lines[1:])))


# csv's quoting (its default dialect): a quote opens a quoted field only where a field starts; inside one, a quote
# closes it unless another follows (a doubled quote is a quote of the text)
_FIELD_QUOTE = re.compile(r'(?<![^,\r\n])"')
_QUOTED_REST = re.compile(r'[^"]*(?:""[^"]*)*"(?!")')


def _quote_faults(text: str) -> tuple[int | None, bool]:
    """(where in a csv row's text (it starts a row) a quote opens that never closes, or None where none does; whether
    a quoted field closes astray, its closing quote followed by neither a comma nor a line end). csv, as pandas does,
    reads on past such a quote as text of the field; a valid file's quoted field never closes so (strict csv refuses
    it), a stray quote's usually does: at the opening quote of a quoted field on a later line."""
    at, astray = 0, False
    while (opened := _FIELD_QUOTE.search(text, at)) is not None:
        closed = _QUOTED_REST.match(text, opened.end())
        if closed is None:
            return opened.start(), astray
        at = closed.end()
        astray = astray or text[at:at + 1] not in ("", ",", "\r", "\n")
    return None, astray


def _line_at(lines: list[tuple[int, str]], offset: int) -> int:
    """The number of the line (of `lines`: (number, text)) that holds character `offset` of their text joined."""
    for number, line in lines:
        if offset < len(line):
            return number
        offset -= len(line)
    return lines[-1][0]


def _csv_file_rows(path: Path) -> Iterator[_CsvRow]:
    """``_csv_rows`` over the lines of the csv file `path`."""
    return _csv_rows(_LineFeed(_utf8_lines(path)), path)


def _aclimdb(data_dir: Path, split_file: str) -> Path | None:
    """The split's folder in the aclImdb layout (<data_dir>/train/{pos,neg}/*.txt), where there is one."""
    folder = data_dir / Path(split_file).stem
    return folder if (folder / "pos").is_dir() and (folder / "neg").is_dir() else None


def _csv_task_rows(csv_path: Path, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    """The rows of a csv task file (comma-separated, quoted fields may hold commas, quotes and line breaks): the
    spec's text and label columns, each text cleaned by its format's ``TEXT_CLEANING`` (IMDB's HTML line breaks),
    else stripped only."""
    clean = TEXT_CLEANING.get(task_spec.format, str.strip)
    cols = _columns(task_spec.text_fields)
    skipped = 0
    rows = _csv_file_rows(csv_path)
    header = _header(csv_path, next(rows, [None])[0], task_spec)
    idx = [header.index(c) for c in task_spec.text_fields]
    li = header.index(task_spec.label_field)
    for row, first, where in _fitting_csv_rows(csv_path, rows, header, idx, skip_bad_rows):
        if row is None:
            skipped += 1
            continue
        label = _label_id(row[li], task_spec, where, skip_bad_rows)
        texts = {f: clean(row[i]) for f, i in zip(task_spec.text_fields, idx)}
        if label is None or not _texts_fit(texts, where, skip_bad_rows):
            skipped += 1
            continue
        _add_row(cols, texts, label, first)
    return _some_rows(csv_path, cols, skipped, task_spec)


def _fitting_csv_rows(csv_path: Path, rows: Iterator[_CsvRow], header: list[str], idx: list[int], skip_bad_rows: bool,
                      skip: str = SKIP_SETTING) -> Iterator[tuple[list[str] | None, int, str]]:
    """(fields, first line, where) of each row of `rows` (a csv file's after its `header`) of its fields, fields None
    for a row skipped as bad (skip_bad_rows; else a TaskDataError naming its line, `skip` the setting or flag that
    skips it): a quote never closed, a text column (`idx`) that took in lines reading as rows of their own up to a
    quote closing astray, a wrong count of fields. A skipped row's lines after its first are read again as the rows
    they are."""
    width = len(header)
    for row, first, last, unclosed, astray, give_back in rows:
        if unclosed is not None:
            if not skip_bad_rows:
                runs = f" (it takes in lines {unclosed}-{last})" if last > unclosed else ""
                raise TaskDataError(f"{csv_path}:{unclosed}: the quote opened on line {unclosed} is never closed: the "
                                    f"file ends inside it{runs}; close the quote, or delete it if it is a stray one "
                                    f"(or copy the file again if the copy was cut short), or {skip} to skip and "
                                    "count such rows")
            give_back()
            yield None, first, f"{csv_path}:{first}"
            continue
        # a quote left open takes the lines after it into one field: a wrong count of fields shows it, and so do
        # lines taken in that read as rows of their own up to a quote that closes astray (a right count then, their
        # labels lost without a word); a quoted text whose quote closes where a field ends is read as written, as
        # csv and pandas read it, whatever its lines look like
        swallowed = (last > first and astray and len(row) == width
                     and any(_rows_inside(row[i], width) for i in idx))
        where = f"{csv_path}:{first}" + (f" (the row runs to line {last}: a quote left open on line {first}?)"
                                         if last > first and (len(row) != width or swallowed) else "")
        if swallowed:
            if not skip_bad_rows:
                raise TaskDataError(f"{where}: its text takes in lines that read as rows of their own; close the "
                                    f"quote, or {skip} to skip and count such rows")
            give_back()
            yield None, first, where
            continue
        if not _row_fits(row, header, where, skip_bad_rows, skip):
            give_back()  # the lines an open quote took in are rows of their own
            yield None, first, where
            continue
        yield row, first, where


def _rows_inside(text: str, width: int) -> bool:
    """Whether a field's later lines parse as csv rows of `width` fields: rows an open quote took in, where its
    quote closes astray (``_quote_faults``)."""
    lines = io.StringIO(text, newline="").readlines()[1:]  # split as the file's lines are (``_line_pieces``)
    return any(len(fields) == width for fields in _csv_reader(lines))


def _read_imdb(data_dir: Path, split_file: str, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    csv_path = data_dir / split_file
    folder = _aclimdb(data_dir, split_file)
    cols = _columns(("text",))
    skipped = 0
    if csv_path.is_file():
        cols, skipped = _csv_task_rows(csv_path, task_spec, skip_bad_rows)
    elif folder is not None:
        for number, (label, p) in enumerate(_aclimdb_reviews(folder)):
            lines = list(_utf8_lines(p))
            binary = next((line for line, text in enumerate(lines, 1) if "\x00" in text), None)
            text = clean_imdb("".join(lines))
            # as a csv row's text cell: an empty review, or one holding a NUL byte (named by its line), is bad
            if not _texts_fit({None: text}, f"{p}:{binary}" if binary else str(p), skip_bad_rows):
                skipped += 1
                continue
            _add_row(cols, {"text": text}, label, number)
    else:
        raise _missing(csv_path, task_spec)
    return cols, skipped


def _aclimdb_reviews(folder: Path) -> list[tuple[int, Path]]:
    """(label, file) of each review of an aclImdb split folder, neg/ then pos/, each in name order: a review's row
    is its place in this list."""
    return [(label, p) for label, sub in ((0, "neg"), (1, "pos")) for p in _reviews((folder / sub).iterdir())]


def row_place(name: str, data_dir: str | None, split: str, row: int) -> str:
    """Where row `row` (``ROW``) of task `name`'s `split` (train or eval) is, as the readers' errors name it: the
    file and line of a tsv or csv row, an aclImdb review's file, a hub dataset's row."""
    task_spec = get_task(name)
    if data_dir is None:
        return f"{_hub_split(task_spec, split)} row {row}"
    path = Path(data_dir) / task_spec.files[split]
    folder = _aclimdb(Path(data_dir), task_spec.files[split]) if task_spec.format == "imdb" else None
    if not path.is_file() and folder is not None:
        return str(_aclimdb_reviews(folder)[row][1])
    return f"{path}:{row}"


def _read_csv(data_dir: Path, split_file: str, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    """A split's csv file of a task of one's own (format csv): the spec's columns, its text as written."""
    path = data_dir / split_file
    if not path.is_file():
        raise _missing(path, task_spec)
    return _csv_task_rows(path, task_spec, skip_bad_rows)


# the label column of a hub dataset (TaskSpec.hub_fields name its text columns)
HUB_LABEL = "label"


def _hub_split(task_spec: TaskSpec, split: str) -> str:
    """Split `split` (train or eval) of the task's hub dataset, as the errors about it name it."""
    return f"hub dataset {task_spec.hub_name!r} split {task_spec.hub_splits[split]}"


def _load_hub(task_spec: TaskSpec, split: str):
    """Split `split` (train or eval) of the task's hub dataset, with the spec's columns (hub_fields and label). Offline
    (``io.hub_offline``) datasets reads it from its cache alone; one it cannot give is a HubOfflineError in one line
    (``io.hub_load_error``) saying which local files to give instead; a column it lacks is a TaskDataError naming
    those it has."""
    if not task_spec.hub:
        raise ConfigError(f"task.data_dir=null: task {task_spec.name} has no hub dataset; set task.data_dir to the "
                          f"folder of its files ({task_spec.layout()})")
    import datasets

    try:
        ds = datasets.load_dataset(*task_spec.hub, split=task_spec.hub_splits[split])
    except Exception as e:  # network, auth, unknown name, not cached offline: datasets raises many kinds
        raise hub_load_error(task_spec.hub_name, e, f"set task.data_dir to local files of task {task_spec.name} "
                                                    f"({task_spec.layout()})") from e
    where = _hub_split(task_spec, split)
    lacks = [c for c in (*task_spec.hub_fields, HUB_LABEL) if c not in ds.column_names]
    if lacks:
        raise TaskDataError(f"{where} lacks the columns {lacks} (its columns: {ds.column_names}): task "
                            f"{task_spec.name} reads its texts from hub_fields {list(task_spec.hub_fields)} and its "
                            f"labels from {HUB_LABEL!r}")
    return ds


def _hub_label_ids(ds, task_spec: TaskSpec, where: str) -> Callable[[object], int | None]:
    """How a label of hub dataset `ds` (`where` names it) becomes the spec's label id: the dataset's ClassLabel ids
    as they are where its names are label_names in the same order, mapped by name where in another order; a
    TaskDataError where they name other labels. A value that is not an int id in range(num_labels) (a test split's -1,
    a string) gives None: a bad row."""
    feature = ds.features[HUB_LABEL]
    ids = range(task_spec.num_labels)
    names = list(getattr(feature, "names", None) or [])
    if names and labels_match(names, task_spec.label_names):
        return lambda v: v if type(v) is int and v in ids else None
    if names and sorted(n.lower() for n in names) == sorted(n.lower() for n in task_spec.label_names):
        to_spec = [[n.lower() for n in task_spec.label_names].index(n.lower()) for n in names]
        return lambda v: to_spec[v] if type(v) is int and v in ids else None
    if names:
        raise TaskDataError(f"{where}: its label column names the labels {names}, task {task_spec.name}'s label_names "
                            f"are {list(task_spec.label_names)}: give the spec the dataset's label names")
    return lambda v: v if type(v) is int and v in ids else None


def hub_fingerprints(name: str, splits: tuple[str, ...] = ("train", "eval")) -> dict[str, str]:
    """The datasets fingerprint of each of `splits` of task `name`'s hub dataset (``_load_hub``), by split: what keys
    hub data as a file's sha256 keys a local file (it changes with the dataset's revision, or a local folder's files)."""
    task_spec = get_task(name)
    return {split: _load_hub(task_spec, split)._fingerprint for split in splits}


def _read_hub(task_spec: TaskSpec, split: str, skip_bad_rows: bool = False) -> tuple[dict, int]:
    ds = _load_hub(task_spec, split)
    where = _hub_split(task_spec, split)
    label_id = _hub_label_ids(ds, task_spec, where)
    texts = {f: list(ds[h]) for f, h in zip(task_spec.text_fields, task_spec.hub_fields)}
    clean = TEXT_CLEANING.get(task_spec.format)
    if clean is not None:
        texts["text"] = [clean(t) for t in texts["text"]]
    cols = _columns(texts)
    skipped = 0
    for i, raw in enumerate(ds[HUB_LABEL]):  # an empty text is a bad row here too (GLUE's QQP has a few)
        row = {f: texts[f][i] or "" for f in texts}  # as the hub gives them: a text's spaces are its own
        label = label_id(raw)
        if label is None:
            if not skip_bad_rows:
                unlabelled = " (a split without labels, as GLUE's test splits are, cannot be trained or scored on)"
                raise TaskDataError(f"{where} row {i}: label {raw!r} is not a label id of task {task_spec.name} (an "
                                    f"int in 0..{task_spec.num_labels - 1}: {list(task_spec.label_names)})"
                                    f"{unlabelled if raw == -1 else ''}; {SKIP_SETTING} to skip and count such rows")
            skipped += 1
            continue
        if not _texts_fit({f: text.strip() for f, text in row.items()}, f"{where} row {i}", skip_bad_rows):
            skipped += 1
            continue
        _add_row(cols, row, label, i)
    if not cols["labels"]:
        raise TaskDataError(f"{where}: all {skipped} rows are bad rows, skipped (task.skip_bad_rows)" if skipped
                            else f"{where}: no rows")
    return cols, skipped


def read_task_split(name: str, data_dir: str | None, split: str, skip_bad_rows: bool = False) -> tuple[dict, int]:
    """Raw columns {text fields..., labels, ROW} of split 'train' or 'eval' (ROW: each row's place in its source,
    ``row_place``), and the number of skipped bad rows."""
    task_spec = get_task(name)
    if split not in ("train", "eval"):
        raise ValueError(f"split {split!r}: expected 'train' or 'eval'")
    if data_dir is None:
        return _read_hub(task_spec, split, skip_bad_rows)
    d = Path(data_dir)
    check_task_dir(name, d, (split,))
    return READERS[task_spec.format].read(d, task_spec.files[split], task_spec, skip_bad_rows)


def check_task_dir(name: str, data_dir: str | Path, splits: tuple[str, ...] = ("train", "eval"),
                   elsewhere: str | None = None) -> None:
    """MissingFileError naming a task directory `data_dir` (task.data_dir) that is not there, else the first file
    of `splits` it lacks: what a run trains on is checked before anything is compared with its record (a mistyped
    folder is named as such, not taken for other data). `elsewhere` ends the message where the command takes the
    data otherwise than finetuning's task.data_dir (default: ``TaskSpec.elsewhere``)."""
    task_spec = get_task(name)
    d = Path(data_dir)
    if not d.is_dir():
        raise _missing(d, task_spec, elsewhere, what="task directory ")
    for split in splits:
        path = d / task_spec.files[split]
        if not path.is_file() and not (task_spec.format == "imdb" and _aclimdb(d, task_spec.files[split])):
            raise _missing(path, task_spec, elsewhere)


def check_task_data(name: str, data_dir: str | Path | None, splits: tuple[str, ...] = ("train", "eval")) -> None:
    """What a task's files must have before a run loads its model: each split's file there (``check_task_dir``), not
    empty, a header with the spec's columns, and a row after it; a TaskDataError naming the file (and the spec's key
    for a column it lacks) otherwise. Only the header and the first row are read (milliseconds): the rows themselves
    (labels, fields, texts) are checked as the split is read, and a run whose tokenized split is cached reads none.
    Hub data (`data_dir` None) is loaded (``_load_hub``: offline from the datasets cache alone, where one not cached is
    refused now; else downloaded once, and read from the cache after) and its columns checked; aclImdb folders are
    checked as they are read."""
    task_spec = get_task(name)
    if data_dir is None:
        for split in splits:
            _hub_label_ids(_load_hub(task_spec, split), task_spec, _hub_split(task_spec, split))
        return
    check_task_dir(name, data_dir, splits)
    for split in splits:
        path = Path(data_dir) / task_spec.files[split]
        if not path.is_file():  # an aclImdb folder
            continue
        rows = iter(READERS[task_spec.format].rows(path))
        _header(path, next(rows, None), task_spec)
        if next(rows, None) is None:
            _some_rows(path, {"labels": []}, 0, task_spec)


@dataclasses.dataclass(frozen=True)
class TaskFormat:
    """How the files of one format (TaskSpec.format) are read. read: (data_dir, a split's file name, spec,
    skip_bad_rows) -> (columns, skipped rows), the whole split; rows: a file's path -> its rows as lists of fields,
    the header first, read lazily: ``check_task_data`` takes the header and the first row from it before a run loads
    its model."""

    read: Callable[[Path, str, TaskSpec, bool], tuple[dict, int]]
    rows: Callable[[Path], Iterable[list[str]]]


def _csv_fields(path: Path) -> Iterator[list[str]]:
    return (row.fields for row in _csv_file_rows(path))


# format -> how its files are read and checked before a run: a format's reading is registered here only (its name
# also goes in tasks.FORMATS, which a TaskSpec is checked against where it is defined)
READERS: dict[str, TaskFormat] = {
    "glue_tsv": TaskFormat(_read_glue_tsv, _tsv_fields),
    "csv": TaskFormat(_read_csv, _csv_fields),
    "imdb": TaskFormat(_read_imdb, _csv_fields),  # its aclImdb folders are checked as they are read
}


def _reviews(paths: Iterable[Path]) -> list[Path]:
    """The aclImdb review files among `paths`, sorted: named .txt in any case (7_3.TXT too, as the corpus reads
    NOTES.TXT)."""
    return sorted(p for p in paths if p.suffix.lower() == ".txt")


def _source_files(task_spec: TaskSpec, data_dir: Path, split: str) -> list[Path]:
    f = data_dir / task_spec.files[split]
    if task_spec.format == "imdb" and not f.is_file():  # aclImdb folders: the reviews read, not unsup/'s
        folder = _aclimdb(data_dir, task_spec.files[split])
        return [p for _, p in _aclimdb_reviews(folder)] if folder is not None else []
    return [f]


def task_files(name: str, data_dir: str | Path, splits: tuple[str, ...] = ("train", "eval")) -> list[Path]:
    """The files a task's `splits` are read from under `data_dir` (those that exist)."""
    spec = get_task(name)
    return [p for split in splits for p in _source_files(spec, Path(data_dir), split) if p.is_file()]


# ------------------------------------------------------------------------------------------------ texts to classify
TEXT_SUFFIXES = (".tsv", ".csv", ".jsonl")  # any other suffix: plain text, one text a line


def text_rows(path: str | Path, columns: tuple[str, ...], clean: Callable[[str], str], skip_bad_rows: bool,
              skip: str, columns_flag: str) -> Iterator[tuple[int, dict[str, str] | None]]:
    """(line, {column: text}) of each row of a file of texts to classify, read lazily, as the task readers read and
    number rows (a row's line is its first line in the file, as their errors name it): .tsv (GLUE's, no quoting) and
    .csv (quoted fields) with a header naming `columns`, .jsonl (an object a line holding `columns` as strings), any
    other file plain text, one text a line (`columns` one). Each text is `clean`ed (a task's ``TEXT_CLEANING``, else
    stripped); a blank line (empty, or whitespace alone) is left out, as the task readers leave it. A bad row (a
    wrong count of fields, an empty text, a line that is not such an object) is (line, None) with skip_bad_rows, else
    a TaskDataError naming the file and line (`skip`: the flag that skips it; `columns_flag`: the one that names the
    columns)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".csv"):
        yield from _delimited_text_rows(path, columns, clean, skip_bad_rows, skip, columns_flag)
    elif suffix == ".jsonl":
        yield from _jsonl_text_rows(path, columns, clean, skip_bad_rows, skip, columns_flag)
    else:
        if len(columns) != 1:
            raise ConfigError(f"{path}: a plain text file holds one text a line, and the model reads pairs of texts "
                              f"({', '.join(columns)}): give them as a .tsv, .csv or .jsonl file with those columns")
        for number, line in enumerate(_utf8_lines(path), 1):
            if line.strip():  # a line of whitespace alone is blank, as the corpus reads it
                text = {columns[0]: clean(line.rstrip("\r\n"))}
                yield number, text if _texts_fit(text, f"{path}:{number}", skip_bad_rows, skip) else None


def _delimited_text_rows(path: Path, columns: tuple[str, ...], clean: Callable[[str], str], skip_bad_rows: bool,
                         skip: str, columns_flag: str) -> Iterator[tuple[int, dict[str, str] | None]]:
    if path.suffix.lower() == ".tsv":
        rows = ((row, line, f"{path}:{line}") for row, line in _tsv_rows(path))
        header = next(rows, (None,))[0]
    else:
        csv_rows = _csv_file_rows(path)
        header = next(csv_rows, [None])[0]
    if header is None:
        raise TaskDataError(f"{path}: empty file; expected a header naming the text columns {list(columns)}")
    header = [h.strip() for h in header]
    missing = [c for c in columns if c not in header]
    twice = [c for c in columns if header.count(c) > 1]
    if missing or twice:
        why = f"lacks columns {missing}" if missing else f"names column {twice[0]!r} {header.count(twice[0])} times"
        raise TaskDataError(f"{path}:1: header {header} {why}: name the file's text columns with {columns_flag}")
    idx = [header.index(c) for c in columns]
    if path.suffix.lower() == ".csv":  # a csv row's checks, a wrong count of fields among them
        rows = _fitting_csv_rows(path, csv_rows, header, idx, skip_bad_rows, skip)
    for row, line, where in rows:
        if row is None or not _row_fits(row, header, where, skip_bad_rows, skip):
            yield line, None
            continue
        texts = {c: clean(row[i]) for c, i in zip(columns, idx)}
        yield line, texts if _texts_fit(texts, where, skip_bad_rows, skip) else None


def _jsonl_text_rows(path: Path, columns: tuple[str, ...], clean: Callable[[str], str], skip_bad_rows: bool,
                     skip: str, columns_flag: str) -> Iterator[tuple[int, dict[str, str] | None]]:
    for number, line in enumerate(_utf8_lines(path), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except ValueError as err:
            obj, why = None, f"not a JSON object ({err})"
        else:
            why = None if isinstance(obj, dict) else f"not a JSON object but {type(obj).__name__}"
        if why is None:
            missing = [c for c in columns if not isinstance(obj.get(c), str)]
            if missing:
                why = (f"no text (a string) under {missing[0]!r} (its keys: {sorted(obj)}); name the keys of the "
                       f"texts with {columns_flag}")
        if why is not None:
            if not skip_bad_rows:
                raise TaskDataError(f"{where}: {why}; fix the line, or {skip} to skip and count such rows")
            yield number, None
            continue
        texts = {c: clean(obj[c]) for c in columns}
        yield number, texts if _texts_fit(texts, where, skip_bad_rows, skip) else None
