"""Finetuning tasks: a registry (TASKS) and `load_task`, which returns tokenized train/eval splits.

Sources, in order: `data_dir` (a local task directory: GLUE tsv files, the mirror's IMDB CSVs, or the original
aclImdb folders) or, with `data_dir=None`, the Hugging Face hub (fails fast offline). Rows are not padded;
batches are padded dynamically by ``streams.TaskCollator``.

Adding a GLUE task is one TaskSpec entry (and its configs/task/<name>.yaml), e.g. MRPC:
    TaskSpec("mrpc", ("#1 String", "#2 String"), "Quality", ("not_equivalent", "equivalent"), ("0", "1"),
             ("accuracy", "f1"), hub=("glue", "mrpc"), hub_fields=("sentence1", "sentence2"), mirror_subdir="glue/mrpc")
A task of local files only leaves `hub` out; one of more than two labels scores F1 as "f1_macro" (``metrics.METRICS``).
A task of one's own, outside the package, is a task config's ``spec`` block (configs/task/_example.yaml), which
``runconfig.TaskData.read`` registers wherever a config is read, or ``register_task(TaskSpec(...))`` in the process.
A TaskSpec is checked where it is defined: a mistake in it is a ConfigError naming the task, not a run that fails later.
"""

from __future__ import annotations

import codecs
import collections
import csv
import dataclasses
import io
import json
import logging
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError, HubOfflineError, LinformerError, TaskDataError, did_you_mean
from ..files import atomic_dir, cache_key, folder_name, made_by, output_damage
from .io import hub_offline, hub_offline_error
from .metrics import check_metrics, score
from .streams import TOKEN_TYPES
from .tokenizer import loaded_identity

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskSpec:
    """A classification task: how its local files are read (columns, label values in label-id order, reader), where
    else its data is (the hub, the data mirror), and how it is scored (``metrics.METRICS`` entries; the first one
    chooses the epoch). Checked where it is defined (``__post_init__``)."""

    name: str
    text_fields: tuple[str, ...]  # columns holding the text (one = single sentence, two = pair), local files
    label_field: str  # label column in the local files
    label_names: tuple[str, ...]  # human-readable, index = label id
    raw_labels: tuple[str, ...]  # label values as written in the local files, index = label id
    metrics: tuple[str, ...] = ("accuracy",)
    format: str = "glue_tsv"  # one of FORMATS: glue_tsv | imdb
    files: dict = field(default_factory=lambda: {"train": "train.tsv", "eval": "dev.tsv"})
    eval_split: str = "dev"  # which original split `eval` is: GLUE dev; IMDB has none, so its test split
    hub: tuple = ()  # (path, config) for datasets.load_dataset; () for a task of local files only
    hub_fields: tuple[str, ...] = ()  # text columns on the hub (label column is "label")
    hub_splits: dict = field(default_factory=lambda: {"train": "train", "eval": "validation"})
    mirror_subdir: str = ""  # task directory under paths.data_mirror
    title: str = ""  # as tables name it (the paper's spelling)

    def __post_init__(self):
        """TaskSpecError naming the task and the field of a spec that cannot be read or scored as it says."""
        field_name, reason = self._problem() or (None, None)
        if field_name:
            raise TaskSpecError(self.name, field_name, reason)

    def _problem(self) -> tuple[str, str] | None:
        """(the field at fault, the rest of the message after its name), or None for a spec that checks."""
        if not 1 <= len(self.text_fields) <= 2:
            return "text_fields", f"={self.text_fields!r} must name one text column, or two (a pair)"
        if len(self.label_names) != len(self.raw_labels) or len(self.raw_labels) < 2:
            return "label_names", (f" {list(self.label_names)} and raw_labels {list(self.raw_labels)} must name the "
                                   "same labels (at least two), in the same order: index = label id")
        if len(set(self.raw_labels)) != len(self.raw_labels):
            return "raw_labels", f" {list(self.raw_labels)} repeats a label"
        if self.format not in FORMATS:
            return "format", (f"={self.format!r} is not a reader{did_you_mean(self.format, FORMATS)}; the readers: "
                              f"{', '.join(FORMATS)}")
        if self.format == "imdb" and (tuple(self.text_fields), self.label_field) != (("text",), "label"):
            return "format", (f"={self.format!r} reads the columns text and label; text_fields={self.text_fields!r}, "
                              f"label_field={self.label_field!r} need another reader")
        for mapping, name in ((self.files, "files"), (self.hub_splits, "hub_splits")):
            if set(mapping) != {"train", "eval"}:
                return name, f"={mapping!r} must have the keys train and eval"
        if self.hub and (len(self.hub) != 2 or not self.hub[0] or len(self.hub_fields) != len(self.text_fields)):
            return "hub", (f"={self.hub!r} must be (path, config) with hub_fields naming its "
                           f"{len(self.text_fields)} text column(s), or () for a task of local files only")
        try:
            check_metrics(tuple(self.metrics), self.num_labels, "metrics")
        except ConfigError as err:
            return "metrics", str(err).removeprefix("metrics")
        return None

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def hub_name(self) -> str:
        return "/".join(p for p in self.hub if p)

    def elsewhere(self) -> str:
        """Where else the task's data can come from, for a message about files that are not there."""
        if not self.hub:
            return f" (task {self.name} has no hub dataset: task.data_dir must name its files)"
        return f"; or task.data_dir=null to read {self.hub_name} from the Hugging Face hub"

    @property
    def text_cleaning(self) -> str | None:
        """The function (dotted name) that cleans this task's text before it is tokenized, or None: what a user must
        apply to raw text for the model to read what its run trained and scored on (``TEXT_CLEANING``)."""
        clean = TEXT_CLEANING.get(self.format)
        return f"{clean.__module__}.{clean.__name__}" if clean else None

    def reading(self) -> dict:
        """The fields that decide a split's rows and label ids (every field but those only naming or scoring them):
        tokenized splits cached under another reading are not this spec's."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("metrics", "title", "mirror_subdir", "eval_split")}

    def layout(self) -> str:
        if self.format == "imdb":
            return ("<data_dir>/train.csv and <data_dir>/test.csv (columns id,label,rating,text), or the aclImdb "
                    "layout <data_dir>/{train,test}/{pos,neg}/*.txt")
        cols = " ".join((*self.text_fields, self.label_field))
        return (f"<data_dir>/{self.files['train']} and <data_dir>/{self.files['eval']}: GLUE tsv, tab-separated, "
                f"no quoting, a header naming at least: {cols}")


FORMATS = ("glue_tsv", "imdb")  # the readers of local task files (READERS)


class TaskSpecError(ConfigError):
    """A TaskSpec field that cannot be read or scored as it says: ``field`` names it, ``reason`` is the rest of the
    message after the field's name (its value and why), so a config that gives the field can name its own key."""

    def __init__(self, task: str, field_name: str, reason: str):
        super().__init__(f"TaskSpec {task!r}: {field_name}{reason}")
        self.field, self.reason = field_name, reason


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in [
        TaskSpec("sst2", ("sentence",), "label", ("negative", "positive"), ("0", "1"),
                 hub=("glue", "sst2"), hub_fields=("sentence",), mirror_subdir="glue/sst2", title="SST-2"),
        TaskSpec("qnli", ("question", "sentence"), "label", ("entailment", "not_entailment"),
                 ("entailment", "not_entailment"),
                 hub=("glue", "qnli"), hub_fields=("question", "sentence"), mirror_subdir="glue/qnli", title="QNLI"),
        TaskSpec("qqp", ("question1", "question2"), "is_duplicate", ("not_duplicate", "duplicate"), ("0", "1"),
                 metrics=("accuracy", "f1"),
                 hub=("glue", "qqp"), hub_fields=("question1", "question2"), mirror_subdir="glue/qqp", title="QQP"),
        TaskSpec("imdb", ("text",), "label", ("neg", "pos"), ("0", "1"), format="imdb",
                 files={"train": "train.csv", "eval": "test.csv"}, eval_split="test",
                 hub=("imdb", None), hub_fields=("text",), hub_splits={"train": "train", "eval": "test"},
                 mirror_subdir="imdb", title="IMDB"),
    ]
}
# The paper's Table 2 columns, in its order (every task above, once): reports print their columns in this order.
PAPER_ORDER = ("sst2", "imdb", "qnli", "qqp")
# The tasks whose train and eval splits the data mirror holds (its QNLI has no train split, and it has no QQP): what the
# reproductions finetune on by default.
MIRROR_TASKS = ("sst2", "imdb")
TITLES = {name: spec.title for name, spec in TASKS.items()}  # the tables' column names


class UnknownTaskError(ConfigError, KeyError):
    """A task name that is not in TASKS (a KeyError too, as a registry lookup is)."""

    __str__ = BaseException.__str__  # the message as written, not KeyError's repr of it


BUILT_IN = frozenset(TASKS)  # the tasks the package defines; the others are registered by a process


def get_task(name: str) -> TaskSpec:
    if name not in TASKS:
        raise UnknownTaskError(f"task.name={name}: unknown task {name!r}{did_you_mean(name, TASKS)}; valid tasks: "
                               f"{', '.join(sorted(TASKS))} (a task of one's own: a task.spec block in its "
                               "configs/task/<name>.yaml, as configs/task/_example.yaml shows, or "
                               "linformer.data.tasks.register_task(TaskSpec(...)) in the Python process that runs it; "
                               "docs/guide.md, Tasks)")
    return TASKS[name]


def register_task(spec: TaskSpec, name_key: str = "TaskSpec.name") -> TaskSpec:
    """Add a task of one's own (other columns, other labels) to TASKS for this process, without an edit inside the
    package: ``finetune``, ``distill`` and the readers of their runs then find it by its name (task.name). A task
    config's ``task.spec`` block is registered by this when the config is read (``runconfig.TaskData.read``).
    Registering the same spec again is a no-op; ConfigError naming `name_key` (where the name was given) for a name
    that is not one name (its runs' folders start with it) or that another task has."""
    if not isinstance(spec, TaskSpec):
        raise ConfigError(f"register_task takes a TaskSpec, not {type(spec).__name__}")
    folder_name(spec.name, name_key, "a task", "paths.output_dir/finetune/ (its runs' names start with it)")
    known = TASKS.get(spec.name, spec)
    if known != spec:
        other = [f.name for f in dataclasses.fields(TaskSpec) if getattr(known, f.name) != getattr(spec, f.name)]
        whose = "the package's own task" if spec.name in BUILT_IN else "a task registered already"
        raise ConfigError(f"{name_key}={spec.name!r} is {whose}, with other {', '.join(other)}: give yours a name of "
                          "its own")
    TASKS[spec.name] = spec
    TITLES[spec.name] = spec.title or spec.name
    return spec


def labels_match(named, label_names) -> bool:
    """Whether a classifier whose config names its labels `named` (id2label's values, by id) classifies a task's
    `label_names`: the same names in the same order, any case; transformers' generic LABEL_<i> names match any task
    of as many labels."""
    named = [str(name) for name in named]
    if len(named) != len(label_names):
        return False
    if all(re.fullmatch(r"LABEL_\d+", name) for name in named):
        return True
    return [name.lower() for name in named] == [name.lower() for name in label_names]


def tasks_with_labels(named) -> list[str]:
    """The names of the tasks (``TASKS``) a classifier of labels `named` classifies (``labels_match``)."""
    return [name for name, spec in TASKS.items() if labels_match(named, spec.label_names)]


def compute_metrics(name: str, predictions, references) -> dict[str, float]:
    """{metric: value} for each metric the task `name` names (``TaskSpec.metrics``: accuracy for every task, and F1
    of the positive label 1 = duplicate for QQP). predictions are label ids (or logits of shape [N, num_labels],
    argmaxed); references are label ids."""
    return score(get_task(name).metrics, predictions, references)


_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def clean_imdb(text: str) -> str:
    """IMDB reviews carry HTML line breaks (`<br /><br />`): replace each run of them, with the whitespace around it,
    by one space. Split at the tags rather than matched with the whitespace: a pattern that starts with whitespace is
    tried at every space of the text, which takes ten times as long over IMDB."""
    return " ".join(part for part in (piece.strip() for piece in _BR.split(text)) if part)


# format -> what cleans its text before tokenizing: a file format's markup, not language. It stays with the task's
# reading, not in the saved tokenizer's normalizer: there it would change the tokenizer's identity (task caches, the
# same-tokenizer checks of distillation) and apply one dataset's markup rule to every text the model reads; model
# cards and results name it (``TaskSpec.text_cleaning``) so that users apply it to raw text
TEXT_CLEANING: dict[str, Callable[[str], str]] = {"imdb": clean_imdb}


def _missing(path: Path | str, task_spec: TaskSpec, elsewhere: str | None = None) -> FileNotFoundError:
    """A task's file or folder that is not there: what the task expects, and where else it can come from."""
    return FileNotFoundError(f"{path} not found: task {task_spec.name} expects {task_spec.layout()}"
                             f"{task_spec.elsewhere() if elsewhere is None else elsewhere}")


def check_task_files(names, mirror: str | Path) -> None:
    """FileNotFoundError naming the first train or eval file of the tasks `names` that is not under the data mirror
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
    if skip_bad_rows:
        return None
    raise TaskDataError(f"{where}: label {raw!r} is not in the {task_spec.name} label set {list(task_spec.raw_labels)}"
                        "; set task.skip_bad_rows=true to skip and count such rows")


def _row_fits(row: list[str], header: list[str], where: str, skip_bad_rows: bool) -> bool:
    """False for a row to skip (counted by the caller); a malformed row raises unless skip_bad_rows."""
    if len(row) == len(header):
        return True
    if not skip_bad_rows:
        raise TaskDataError(
            f"{where}: malformed row: {len(row)} fields, expected {len(header)} ({header}); "
            "set task.skip_bad_rows=true to skip and count such rows"
        )
    return False


def _texts_fit(texts: Mapping[str, str], where: str, skip_bad_rows: bool) -> bool:
    """False for a row to skip (counted by the caller) whose text field (column: its text, as read and cleaned) is
    empty: the model would train or be scored on no text at all under a label. It raises unless skip_bad_rows."""
    empty = [column for column, text in texts.items() if not text]
    if not empty:
        return True
    if not skip_bad_rows:
        raise TaskDataError(f"{where}: empty text in column {empty[0]}: write the row's text, or set "
                            "task.skip_bad_rows=true to skip and count such rows")
    return False


def _utf8_lines(path: Path) -> Iterator[str]:
    """The lines of `path` as text (a byte-order mark read away): a byte that is not UTF-8 is one TaskDataError naming
    the file and line, where a replacement character would have been trained on without a word."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            yield _decoded(raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw, f"{path}:{number}")


def _decoded(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TaskDataError(f"{where}: not UTF-8 text (byte {raw[err.start]:#04x}): convert the file to UTF-8 (for "
                            "example iconv -f latin1 -t utf-8 FILE > NEW), or fix that line") from None


def _read_glue_tsv(path: Path, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    if not path.is_file():
        raise _missing(path, task_spec)
    reader = csv.reader(_utf8_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
    return _glue_rows(path, reader, task_spec, skip_bad_rows)


def _glue_rows(path: Path, reader, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    cols: dict[str, list] = {f: [] for f in task_spec.text_fields}
    cols["labels"] = []
    skipped = 0
    header = next(reader, None)
    if header is None:
        raise TaskDataError(f"{path}: empty file; expected {task_spec.layout()}")
    header = [h.strip() for h in header]
    needed = [*list(task_spec.text_fields), task_spec.label_field]
    missing = [c for c in needed if c not in header]
    if missing:
        raise TaskDataError(f"{path}:1: header {header} lacks columns {missing}; expected {task_spec.layout()}")
    idx = [header.index(c) for c in task_spec.text_fields]
    lab = header.index(task_spec.label_field)
    for row in reader:
        where = f"{path}:{reader.line_num}"
        if not _row_fits(row, header, where, skip_bad_rows):
            skipped += 1
            continue
        label = _label_id(row[lab], task_spec, where, skip_bad_rows)
        texts = {f_: row[i].strip() for f_, i in zip(task_spec.text_fields, idx)}
        if label is None or not _texts_fit(texts, where, skip_bad_rows):
            skipped += 1
            continue
        for f_, text in texts.items():
            cols[f_].append(text)
        cols["labels"].append(label)
    return cols, skipped


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


def _csv_rows(feed: _LineFeed, path: Path) -> Iterator[tuple[list[str], int, int, Callable[[], None]]]:
    """(row, its first line, its last line, give back) for each row of a csv file's lines. A quote left open on one
    line takes the lines after it into that row, up to the next quote: ``give back`` hands a skipped row's lines
    after its first to the rows after it, which they are. A file that ends inside a quoted field (cut short by a
    copy) is a TaskDataError naming `path` and the line: csv would return the cut row as a whole one."""
    reader = csv.reader(feed)
    while True:
        feed.taken = []
        try:
            row = next(reader)
        except StopIteration:
            return
        lines = feed.taken
        text = "".join(line for _, line in lines)
        # only a row cut at the file's end (its last line without a newline) or one over several lines can end
        # inside its quotes: the strict parse is spared the rest
        if (not text.endswith("\n") or len(lines) > 1) and _ends_inside_quotes(text):
            raise TaskDataError(f"{path}:{lines[0][0]}: the file ends inside the quoted field this row opens (cut "
                                "short?): copy the file again")
        yield row, lines[0][0], lines[-1][0], lambda lines=lines: feed.back.extendleft(reversed(lines[1:]))


def _ends_inside_quotes(text: str) -> bool:
    """Whether csv text ends inside a quoted field (strict csv's "unexpected end of data")."""
    if '"' not in text:
        return False
    try:
        for _ in csv.reader(io.StringIO(text), strict=True):
            pass
    except csv.Error as err:
        return "unexpected end of data" in str(err)
    return False


def _aclimdb(data_dir: Path, split_file: str) -> Path | None:
    """The split's folder in the aclImdb layout (<data_dir>/train/{pos,neg}/*.txt), where there is one."""
    folder = data_dir / Path(split_file).stem
    return folder if (folder / "pos").is_dir() and (folder / "neg").is_dir() else None


def _imdb_rows(csv_path: Path, feed: _LineFeed, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    cols: dict[str, list] = {"text": [], "labels": []}
    skipped = 0
    rows = _csv_rows(feed, csv_path)
    header = next(rows, [[]])[0]
    if "text" not in header or "label" not in header:
        raise TaskDataError(f"{csv_path}:1: header {header} lacks text/label; expected {task_spec.layout()}")
    ti, li = header.index("text"), header.index("label")
    for row, first, last, give_back in rows:
        # a quote left open takes the lines after it into one field: a wrong count of fields shows it, and so do
        # lines taken in that read as rows of their own (a right count then, their labels lost without a word)
        swallowed = last > first and len(row) == len(header) and _rows_inside(row[ti], len(header))
        where = f"{csv_path}:{first}" + (f" (the row runs to line {last}: a quote left open on line {first}?)"
                                         if last > first and (len(row) != len(header) or swallowed) else "")
        if swallowed:
            if not skip_bad_rows:
                raise TaskDataError(f"{where}: its text takes in lines that read as rows of their own; close the "
                                    "quote, or set task.skip_bad_rows=true to skip and count such rows")
            skipped += 1
            give_back()
            continue
        if not _row_fits(row, header, where, skip_bad_rows):
            skipped += 1
            give_back()  # the lines an open quote took in are rows of their own
            continue
        label = _label_id(row[li], task_spec, where, skip_bad_rows)
        text = clean_imdb(row[ti])
        if label is None or not _texts_fit({"text": text}, where, skip_bad_rows):
            skipped += 1
            continue
        cols["text"].append(text)
        cols["labels"].append(label)
    return cols, skipped


def _rows_inside(text: str, width: int) -> bool:
    """Whether a field's later lines parse as csv rows of `width` fields: rows an open quote took in."""
    return any(len(fields) == width for fields in csv.reader(text.splitlines()[1:]))


def _read_imdb(data_dir: Path, split_file: str, task_spec: TaskSpec, skip_bad_rows: bool) -> tuple[dict, int]:
    csv_path = data_dir / split_file
    folder = _aclimdb(data_dir, split_file)
    cols: dict[str, list] = {"text": [], "labels": []}
    skipped = 0
    if csv_path.is_file():
        cols, skipped = _imdb_rows(csv_path, _LineFeed(_utf8_lines(csv_path)), task_spec, skip_bad_rows)
    elif folder is not None:
        for label, sub in ((0, "neg"), (1, "pos")):
            for p in sorted((folder / sub).glob("*.txt")):
                cols["text"].append(clean_imdb(_decoded(p.read_bytes().removeprefix(codecs.BOM_UTF8), str(p))))
                cols["labels"].append(label)
    else:
        raise _missing(csv_path, task_spec)
    return cols, skipped


def _read_hub(task_spec: TaskSpec, split: str) -> dict:
    if not task_spec.hub:
        raise ConfigError(f"task.data_dir=null: task {task_spec.name} has no hub dataset; set task.data_dir to the "
                          f"folder of its files ({task_spec.layout()})")
    name = task_spec.hub_name
    if hub_offline():
        raise hub_offline_error(name)
    import datasets

    try:
        ds = datasets.load_dataset(*task_spec.hub, split=task_spec.hub_splits[split])
    except Exception as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise HubOfflineError(f"could not load hub dataset {name!r} for task {task_spec.name} ({why}): set "
                              f"task.data_dir to local files ({task_spec.layout()}), or check the network") from e
    cols = {f: list(ds[h]) for f, h in zip(task_spec.text_fields, task_spec.hub_fields)}
    clean = TEXT_CLEANING.get(task_spec.format)
    if clean is not None:
        cols["text"] = [clean(t) for t in cols["text"]]
    cols["labels"] = list(ds["label"])
    return cols


def read_task_split(name: str, data_dir: str | None, split: str, skip_bad_rows: bool = False) -> tuple[dict, int]:
    """Raw columns {text fields..., labels} of split 'train' or 'eval', and the number of skipped bad rows."""
    task_spec = get_task(name)
    if split not in ("train", "eval"):
        raise ValueError(f"split {split!r}: expected 'train' or 'eval'")
    if data_dir is None:
        return _read_hub(task_spec, split), 0
    d = Path(data_dir)
    check_task_dir(name, d, (split,))
    return READERS[task_spec.format](d, task_spec.files[split], task_spec, skip_bad_rows)


def check_task_dir(name: str, data_dir: str | Path, splits: tuple[str, ...] = ("train", "eval"),
                   elsewhere: str | None = None) -> None:
    """FileNotFoundError naming a task directory `data_dir` (task.data_dir) that is not there, else the first file
    of `splits` it lacks: what a run trains on is checked before anything is compared with its record (a mistyped
    folder is named as such, not taken for other data). `elsewhere` ends the message where the command takes the
    data otherwise than finetuning's task.data_dir (default: ``TaskSpec.elsewhere``)."""
    task_spec = get_task(name)
    d = Path(data_dir)
    if not d.is_dir():
        raise _missing(f"task directory {d}", task_spec, elsewhere)
    for split in splits:
        path = d / task_spec.files[split]
        if not path.is_file() and not (task_spec.format == "imdb" and _aclimdb(d, task_spec.files[split])):
            raise _missing(path, task_spec, elsewhere)


# format -> reader of a split's file in a task directory: (data_dir, file, spec, skip_bad_rows) -> (columns, skipped)
READERS: dict[str, Callable[[Path, str, TaskSpec, bool], tuple[dict, int]]] = {
    "glue_tsv": lambda data_dir, split_file, spec, skip: _read_glue_tsv(data_dir / split_file, spec, skip),
    "imdb": _read_imdb,
}


def encoded_columns(tokenizer) -> list[str]:
    """The token columns a split is encoded into: input_ids and attention_mask, and token_type_ids where the tokenizer
    gives them (its ``model_input_names``: BERT's do, a pair's second text marked 1; RoBERTa's do not). Which of them
    feed a model is the run's choice (``streams.example_columns``)."""
    given = getattr(tokenizer, "model_input_names", ())
    return ["input_ids", "attention_mask"] + ([TOKEN_TYPES] if TOKEN_TYPES in given else [])


class _Encode:
    def __init__(self, tokenizer, fields: tuple[str, ...], max_length: int):
        self.tokenizer, self.fields, self.max_length = tokenizer, fields, max_length
        self.columns = encoded_columns(tokenizer)

    def __call__(self, batch: dict) -> dict:
        texts = [batch[f] for f in self.fields]
        enc = self.tokenizer(*texts, truncation=True, max_length=self.max_length)
        return {c: enc[c] for c in self.columns}


CACHE_VERSION = 5  # bump when the reading or encoding code changes (a TaskSpec's own fields are in the key)
LIMIT_KEYS = {"train": "max_train_examples", "eval": "max_eval_examples"}  # the finetuning config's names


def _source_files(task_spec: TaskSpec, data_dir: Path, split: str) -> list[Path]:
    f = data_dir / task_spec.files[split]
    if task_spec.format == "imdb" and not f.is_file():  # aclImdb folders
        return sorted((data_dir / Path(task_spec.files[split]).stem).glob("*/*.txt"))
    return [f]


def task_files(name: str, data_dir: str | Path, splits: tuple[str, ...] = ("train", "eval")) -> list[Path]:
    """The files a task's `splits` are read from under `data_dir` (those that exist)."""
    spec = get_task(name)
    return [p for split in splits for p in _source_files(spec, Path(data_dir), split) if p.is_file()]


def split_limits(max_examples: Mapping[str, int | None] | int | None, splits: tuple[str, ...]) -> dict:
    """{split: number of rows to keep or None}, from one number for every split or a {split: number} mapping.
    Zero or negative raises ConfigError naming the finetuning key (max_train_examples / max_eval_examples)."""
    if isinstance(max_examples, Mapping):
        unknown = set(max_examples) - set(LIMIT_KEYS)
        if unknown:
            raise ConfigError(f"max_examples has unknown splits {sorted(unknown)}; expected {sorted(LIMIT_KEYS)}")
        limits = {split: max_examples.get(split) for split in splits}
    else:
        limits = dict.fromkeys(splits, max_examples)
    for split, n in limits.items():
        if n is not None and (isinstance(n, bool) or int(n) < 1):
            raise ConfigError(f"{LIMIT_KEYS[split]}={n}: must be a positive number of rows, or null for every row")
    return {split: None if n is None else int(n) for split, n in limits.items()}


def stratified_pick(labels, n: int, seed: int) -> np.ndarray:
    """Indices of `n` of the rows with `labels`, drawn with `seed`, in a seeded random order. Stratified: each label
    keeps its share of the rows (rounded by largest remainder), so the draw's class balance is the rows' and does
    not move with the seed."""
    labels = np.asarray(labels)
    rows = len(labels)
    classes, counts = np.unique(labels, return_counts=True)
    exact = counts * n / rows
    quota = np.floor(exact).astype(int)
    quota[np.argsort(quota - exact, kind="stable")[: n - int(quota.sum())]] += 1
    order = np.random.default_rng(seed).permutation(rows)
    rank = np.empty(rows, dtype=int)  # each row's place among its class in the seeded order
    for c in classes:
        members = order[labels[order] == c]
        rank[members] = np.arange(len(members))
    return order[rank[order] < quota[np.searchsorted(classes, labels[order])]]


def subset_rows(cols: dict, n: int | None, seed: int) -> dict:
    """`n` rows drawn with `seed` (``stratified_pick``: a function of the seed, n and the rows read), before anything
    is tokenized. Every row in file order when `n` is None or covers them."""
    if n is None or n >= len(cols["labels"]):
        return cols
    return _take(cols, stratified_pick(cols["labels"], n, seed))


def _take(cols: dict, keep) -> dict:
    return {k: [v[i] for i in keep] for k, v in cols.items()}


def validation_size(fraction: float, rows: int) -> int:
    """Rows a validation carve of `fraction` takes from `rows` training rows (at least one)."""
    return max(1, round(fraction * rows))


def carve_validation(cols: dict, fraction: float, seed: int) -> tuple[dict, dict]:
    """(train, validation): a stratified `fraction` of the rows (``stratified_pick`` with `seed`) held out to choose
    epochs and checkpoints on, the rest kept for training in their order. A pure function of the rows, the fraction
    and the seed: every row and seed of an experiment that shares them shares the carve."""
    held = stratified_pick(cols["labels"], validation_size(fraction, len(cols["labels"])), seed)
    rest = np.setdiff1d(np.arange(len(cols["labels"])), held)  # sorted: the file's order
    return _take(cols, rest), _take(cols, np.sort(held))


def text_key(cols: dict, fields: tuple[str, ...], i: int) -> tuple[str, ...]:
    return tuple(" ".join(str(cols[f][i]).split()) for f in fields)  # whitespace runs do not make a text new


def shared_texts(cols: dict, others: dict, fields: tuple[str, ...]) -> np.ndarray:
    """Per row of `cols`, whether its text (every text field, whitespace runs folded) is also a row of `others`."""
    seen = {text_key(others, fields, i) for i in range(len(others["labels"]))}
    return np.array([text_key(cols, fields, i) in seen for i in range(len(cols["labels"]))], dtype=bool)


def drop_eval_duplicates(train: dict, eval_cols: dict, fields: tuple[str, ...]) -> tuple[dict, int]:
    """The train rows whose text (every text field, whitespace runs folded) is not also an eval row's, and how many
    were dropped: a model must not train on the examples its reported split scores (IMDB's train and test splits
    share over a hundred reviews)."""
    keep = np.flatnonzero(~shared_texts(train, eval_cols, fields))
    return (_take(train, keep) if len(keep) < len(train["labels"]) else train), len(train["labels"]) - len(keep)


def longer_than(split, tokens: int, count: int, where: str):
    """The examples of a tokenized split longer than ``tokens``: ``count`` of them drawn at random (seed 0; 0 or more
    than there are: all), in the split's order, and how many there are. ``where`` names the option at fault when
    there are none."""
    lengths = np.array([len(x) for x in split["input_ids"]])
    long = np.flatnonzero(lengths > tokens)
    if not len(long):
        raise ConfigError(f"{where}: no example of the split is longer than {tokens} tokens")
    chosen = long
    if count and count < len(long):
        chosen = np.sort(np.random.default_rng(0).choice(long, count, replace=False))
    return split.select(chosen.tolist()), len(long)


@dataclass(frozen=True)
class SplitOptions:
    """How a run selects the rows of a task's splits (the finetuning config's data keys)."""

    skip_bad_rows: bool = False
    max_examples: Mapping[str, int | None] | int | None = None  # one number for every split, or {"train": n, "eval": m}
    subset_seed: int = 0            # draws the max_examples subsets and the validation carve
    validation_fraction: float | None = None  # of the (subset) train rows, held out as the "validation" split

    def limit(self, split: str) -> int | None:
        """Rows to draw from `split`'s source (validation comes out of train's)."""
        return split_limits(self.max_examples, ("train", "eval"))["eval" if split == "eval" else "train"]


def split_cache_key(name: str, data_dir: str | None, split: str, tokenizer, max_length: int, options: SplitOptions,
                    digests: dict[str, str] | None = None) -> str | None:
    """The ``files.cache_key`` of a tokenized split: the task's reading of its files (``TaskSpec.reading``: columns,
    label order, reader), source file contents (train and validation also depend on the
    eval files, whose duplicates they drop), the tokenizer as loaded (``loaded_identity``: its truncation_side too), max_length and the reading
    options (the seed only where it draws), and the columns it is encoded into (``encoded_columns``). None (no
    caching) for hub data or a slow tokenizer. `digests`: the file digests of the call's other splits
    (``files.cache_key``), so that a task file is read once a call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if data_dir is None or backend is None:
        return None
    files = task_files(name, data_dir, ("eval",) if split == "eval" else ("train", "eval"))
    if not files:
        return None  # reading will raise the layout error
    limit = options.limit(split)
    carved = split != "eval" and options.validation_fraction is not None
    key = {"version": CACHE_VERSION, "task": get_task(name).reading(), "split": split, "max_length": max_length,
           "tokenizer": loaded_identity(tokenizer), "columns": encoded_columns(tokenizer),
           "skip_bad_rows": options.skip_bad_rows,
           "max_examples": limit, "validation_fraction": options.validation_fraction if split != "eval" else None,
           "subset_seed": options.subset_seed if limit is not None or carved else None}
    return cache_key(key, files, digests)


def split_info(ds) -> dict:
    """What ``load_task`` recorded of how a tokenized split's rows were chosen: {"task", "split", "original_split",
    "skipped_bad_rows" (task.skip_bad_rows), "eval_duplicates_dropped" (train and validation), "rows" (validation: the carved rows' indices in the train
    source; eval: the subset's indices in its source, when max_eval_examples took one; after bad rows are skipped),
    "of" (eval: the rows of its source)}."""
    return json.loads(ds.info.description or "{}")


def _read_rows(name: str, data_dir: str | None, split: str, options: SplitOptions) -> tuple[dict, dict]:
    """The raw columns of `split` (train, validation or eval) as the options select them, and what to record of it.

    train and validation: the train source without the rows whose text is also an eval row's, then the max_examples
    subset, then the validation carve (``carve_validation``) of what remains."""
    task_spec = get_task(name)
    source = "eval" if split == "eval" else "train"
    cols, skipped = read_task_split(name, data_dir, source, options.skip_bad_rows)
    if skipped:
        log.warning("task %s/%s: skipped %d malformed rows", name, source, skipped)
    if not cols["labels"]:
        raise TaskDataError(f"task {name} split {source} in {data_dir}: no rows")
    info = {"task": name, "split": split, "original_split": task_spec.eval_split if split == "eval" else "train",
            "skipped_bad_rows": skipped}
    cols = {**cols, "_row": list(range(len(cols["labels"])))}  # each row's index in its source, carried along
    if split == "eval":  # its size, and the rows a subset kept: predictions join back to them
        info["of"] = len(cols["labels"])
        cols = subset_rows(cols, options.limit("eval"), options.subset_seed)
        if len(cols["labels"]) < info["of"]:
            info["rows"] = [int(i) for i in cols["_row"]]
        return {k: v for k, v in cols.items() if k != "_row"}, info
    cols, info["eval_duplicates_dropped"] = drop_eval_duplicates(
        cols, read_task_split(name, data_dir, "eval", options.skip_bad_rows)[0], task_spec.text_fields)
    if not cols["labels"]:
        raise TaskDataError(f"task {name} in {data_dir}: every train row is also an eval row ("
                            f"{info['eval_duplicates_dropped']} dropped): nothing is left to train on")
    cols = subset_rows(cols, options.limit("train"), options.subset_seed)
    if options.validation_fraction is not None:
        train, held = carve_validation(cols, options.validation_fraction, options.subset_seed)
        cols = held if split == "validation" else train
        if split == "validation":
            info["rows"] = [int(i) for i in cols["_row"]]
    return {k: v for k, v in cols.items() if k != "_row"}, info


def _encode_split(name: str, data_dir: str | None, split: str, tokenizer, max_length: int, options: SplitOptions):
    import datasets

    task_spec = get_task(name)
    cols, info = _read_rows(name, data_dir, split, options)
    ds = datasets.Dataset.from_dict(cols)
    ds = ds.map(_Encode(tokenizer, task_spec.text_fields, max_length), batched=True, batch_size=1000,
                remove_columns=list(task_spec.text_fields), desc=f"tokenize {name}/{split}")
    ds.info.description = json.dumps(info)
    return ds


class _SavedMeanwhile(Exception):
    """Another process saved the same split while this one tokenized it."""


def _complete(target: Path) -> bool:
    return (target / "dataset_info.json").is_file()


def _save(ds, target: Path):
    """Save `ds` as `target` (``atomic_dir``) and load it back memory-mapped, like a cached load. When another
    process saved the same split meanwhile, its copy is kept: replacing it would delete files it has mapped."""
    import datasets

    try:
        if _complete(target):
            raise _SavedMeanwhile
        with atomic_dir(target, made_by("task_cache", {"entry": target.name}), checksums=True) as tmp:
            ds.save_to_disk(str(tmp))
            if _complete(target):
                raise _SavedMeanwhile
    except _SavedMeanwhile:
        log.info("task cache %s was saved by another process meanwhile; using that copy", target)
    return datasets.load_from_disk(str(target))


def load_task(
    name: str,
    data_dir: str | None,
    tokenizer,
    max_length: int,
    skip_bad_rows: bool = False,
    splits: tuple[str, ...] = ("train", "eval"),
    max_examples: Mapping[str, int | None] | int | None = None,
    cache_dir: str | None = None,
    subset_seed: int = 0,
    validation_fraction: float | None = None,
):
    """Tokenized `datasets.DatasetDict` with the requested splits (`train`, `validation`, `eval`), each holding
    input_ids, attention_mask, labels, and token_type_ids where the tokenizer gives them (``encoded_columns``)
    (unpadded; pairs as `<s> a </s></s> b </s>`, or BERT's `[CLS] a [SEP] b [SEP]`, truncated to max_length).

    `eval` is the GLUE dev split, and IMDB's test split (IMDB has no dev split; the paper reports test): the split
    a table reports. `train` never holds a row whose text is also an eval row's (``drop_eval_duplicates``).
    `max_examples` (one number for every split, or {"train": n, "eval": m}; None = every row) keeps a random
    stratified subset of that many rows drawn with `subset_seed` (``subset_rows``) before tokenizing, so a small run
    tokenizes only what it uses. `validation_fraction` carves that share of the (subset) train rows into
    `validation` with `subset_seed` (``carve_validation``): the split a run chooses epochs and checkpoints on.
    ``split_info`` tells what was dropped and carved. IMDB train is sorted by label: shuffle it when training (a
    subset is already shuffled).

    With `cache_dir`, each tokenized split is saved there (`<task>-<split>-<key>`, see split_cache_key) and later
    calls with the same file contents, tokenizer and options load it instead of reading and tokenizing again.
    """
    import datasets

    options = SplitOptions(skip_bad_rows, max_examples, subset_seed, validation_fraction)
    split_limits(max_examples, ("train", "eval"))  # a bad limit is refused before anything is read
    if "validation" in splits and validation_fraction is None:
        raise ConfigError("the validation split is carved from train: set validation_fraction")
    out, digests = {}, {}  # each task file hashed once for every split's key
    for split in splits:
        args = (name, data_dir, split, tokenizer, max_length, options)
        key = split_cache_key(*args, digests) if cache_dir else None
        target = Path(cache_dir) / f"{name}-{split}-{key}" if key else None
        if target is not None and _complete(target):
            log.info("task %s/%s: tokenized split from the cache %s", name, split, target)
            try:
                out[split] = _load_cached(target)
                continue
            except Exception as err:  # the checksums', pyarrow's and datasets' errors for a file cut short or damaged
                why = str(err) if isinstance(err, _CacheDamaged) else \
                    f"is damaged ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
                log.warning("task cache %s %s: tokenizing the split again to replace it", target, why)
                shutil.rmtree(target, ignore_errors=True)
                if target.exists():  # another user's: it stays damaged, and this run keeps its own split
                    log.warning("task cache %s cannot be removed (its owner's?): this run's split is not cached",
                                target)
                    target = None
        ds = _encode_split(*args)
        out[split] = _cached(ds, target) if target is not None else ds
    return datasets.DatasetDict(out)


class _CacheDamaged(Exception):
    """A cache entry whose files are not, or cannot be checked to be, the ones it was saved with (what it is, as a
    clause after its path)."""


def _load_cached(target: Path):
    """The tokenized split cached at `target`, its files checked against the checksums its manifest records first, as
    a prepared corpus's are: a changed byte reads without an error, and would train on other token ids. An entry
    saved without checksums (by an earlier version) cannot be checked, and is tokenized again."""
    import datasets

    damage = output_damage(target)
    if damage is None:
        raise _CacheDamaged("was saved without checksums of its files (by an earlier version)")
    if damage:
        raise _CacheDamaged(f"is damaged ({'; '.join(damage)})")
    return datasets.load_from_disk(str(target))


def _cached(ds, target: Path):
    """``_save``, or `ds` itself where the cache cannot be written (read-only, another user's, full): a cache only
    spares the next run the tokenizing, so this one goes on."""
    try:
        return _save(ds, target)
    except (LinformerError, PermissionError, OSError) as err:
        log.warning("task cache %s cannot be written (%s): this run's split is not cached (task_cache_dir=null "
                    "skips the cache, task_cache_dir=<dir> moves it)", target, str(err).splitlines()[0])
        return ds
