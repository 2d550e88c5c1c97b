"""Finetuning tasks: the registry (TASKS) of TaskSpecs, their metrics and their text cleaning. Their files are read
by ``task_readers``, their splits chosen by ``task_splits``, and ``task_loading.load_task`` returns them tokenized.

Adding a GLUE task to the package is one TaskSpec entry in TASKS and its configs/task/<name>.yaml (name: <name>,
data_dir, max_length, skip_bad_rows, as configs/task/sst2.yaml), e.g. MRPC:
    TaskSpec("mrpc", ("#1 String", "#2 String"), "Quality", ("not_equivalent", "equivalent"), ("0", "1"),
             ("accuracy", "f1"), hub=("glue", "mrpc"), hub_fields=("sentence1", "sentence2"), mirror_subdir="glue/mrpc")
Nothing else: PAPER_ORDER lists the paper's Table 2 columns only (a task outside them is left out of Table 2's
reports, which say so), and MIRROR_TASKS only the tasks whose train and eval splits the data mirror holds (the
reproductions' default tasks); TITLES and BUILT_IN follow TASKS.
A task of local files only leaves `hub` out; one of more than two labels scores F1 as "f1_macro" (``metrics.METRICS``).
A task of one's own, outside the package, is a task config's ``spec`` block (configs/task/_example.yaml), which
``runconfig.TaskData.read`` registers wherever a config is read, or ``register_task(TaskSpec(...))`` in the process.
A TaskSpec is checked where it is defined: a mistake in it is a ConfigError naming the task, not a run that fails later.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ConfigError, did_you_mean
from ..files.names import folder_name
from .io import hub_offline
from .metrics import check_metrics, score


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
    format: str = "glue_tsv"  # one of FORMATS: glue_tsv | csv | imdb
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
        for name in ("label_names", "raw_labels"):  # two label ids of one name: a table could not tell them apart
            values = list(getattr(self, name))
            twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
            if twice is not None:
                return name, f" {values} repeats a label ({twice!r} is given twice); give each label once"
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
        if hub_offline():  # the hub would be refused too, unless datasets has it cached
            return (f"; task.data_dir=null reads {self.hub_name} from the datasets cache alone here "
                    "(HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set)")
        return f"; or task.data_dir=null to read {self.hub_name} from the Hugging Face hub"

    @property
    def text_cleaning(self) -> str | None:
        """The function (dotted name) that cleans this task's text before it is tokenized, or None: what a user must
        apply to raw text for the model to read what its run trained and scored on (``TEXT_CLEANING``)."""
        clean = TEXT_CLEANING.get(self.format)
        return cleaning_name(clean) if clean else None

    def reading(self) -> dict:
        """The fields that decide a split's rows and label ids (every field but those only naming or scoring them):
        tokenized splits cached under another reading are not this spec's."""
        return {k: v for k, v in dataclasses.asdict(self).items()
                if k not in ("metrics", "title", "mirror_subdir", "eval_split")}

    def layout(self) -> str:
        """The files a task reads and the columns it needs of them, for a message about files that do not fit."""
        files = f"<data_dir>/{self.files['train']} and <data_dir>/{self.files['eval']}"
        cols = " ".join((*self.text_fields, self.label_field))
        if self.format == "imdb":
            return (f"{files} (csv, a header naming at least: {cols}; the text's HTML line breaks cleaned), or the "
                    "aclImdb layout <data_dir>/{train,test}/{pos,neg}/*.txt")
        if self.format == "csv":
            return f"{files}: csv, comma-separated, fields quoted as needed, a header naming at least: {cols}"
        return f"{files}: GLUE tsv, tab-separated, no quoting, a header naming at least: {cols}"


# the readers of local task files (task_readers.READERS): GLUE's tsv, a plain csv (the spec's columns, the text as
# written), and IMDB's csv or aclImdb folders (text and label only, its HTML line breaks cleaned: TEXT_CLEANING)
FORMATS = ("glue_tsv", "csv", "imdb")


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
# The paper's Table 2 columns, in its order, each a task above (a task outside the paper's table is in TASKS alone):
# Table 2's reports print these columns in this order.
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


def register_task(spec: TaskSpec, name_key: str = "TaskSpec.name", replace: bool = False) -> TaskSpec:
    """Add a task of one's own (other columns, other labels) to TASKS for this process, without an edit inside the
    package: ``finetune``, ``distill`` and the readers of their runs then find it by its name (task.name). A task
    config's ``task.spec`` block is registered by this when the config is read (``runconfig.TaskData.read``, with
    `replace`: a task config edited and read again in one process, a notebook, is read as it is now).
    Registering the same spec again is a no-op (a module or notebook cell run again). Another spec under a name of
    one's own already registered is a ConfigError naming the fields that differ, unless `replace`: otherwise two
    definitions of one task in a process would leave the later one in force without a word, and the readers of the
    earlier one's runs in that process would read its data with the later spec. The runs of an earlier spec record
    theirs (task.spec in config.yaml), and their identity (``task_spec_key``) refuses a resume under the other one.
    ConfigError naming `name_key` (where the name was given) for a name that is not one name (its runs' folders
    start with it) or that is one of the package's own tasks with another spec (never replaced)."""
    if not isinstance(spec, TaskSpec):
        raise ConfigError(f"register_task takes a TaskSpec, not {type(spec).__name__}")
    folder_name(spec.name, name_key, "a task", "paths.output_dir/finetune/ (its runs' names start with it)")
    known = TASKS.get(spec.name, spec)
    if known != spec:
        other = ", ".join(f.name for f in dataclasses.fields(TaskSpec) if getattr(known, f.name) != getattr(spec, f.name))
        if spec.name in BUILT_IN:
            raise ConfigError(f"{name_key}={spec.name!r} is the package's own task, with other {other}: give yours a "
                              "name of its own")
        if not replace:
            raise ConfigError(f"{name_key}={spec.name!r} is registered already in this process, with other {other}: "
                              "register_task(spec, replace=True) replaces it, or give yours a name of its own")
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
    if _generic(named):
        return True
    return [name.lower() for name in named] == [name.lower() for name in label_names]


def task_label_names(named, spec: TaskSpec | None) -> list[str]:
    """The names of a classifier's labels (id2label's values `named`, by id) as they are shown: the task `spec`'s
    label_names where `named` are transformers' generic LABEL_<i> (a model finetuned by an earlier version, whose
    config did not name them) and the task has as many; else `named` as they are."""
    named = [str(name) for name in named]
    return list(spec.label_names) if _generic(named) and spec and len(spec.label_names) == len(named) else named


def _generic(named: list[str]) -> bool:
    """Whether label names are transformers' defaults (LABEL_<i>), which a config holds where nothing named them."""
    return all(re.fullmatch(r"LABEL_\d+", name) for name in named)


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


def cleaning_name(clean: Callable[[str], str]) -> str:
    """How a record names a text-cleaning function: its dotted name (``linformer.data.tasks.clean_imdb``)."""
    return f"{clean.__module__}.{clean.__name__}"


def cleaning_named(name: str | None) -> Callable[[str], str] | None:
    """The TEXT_CLEANING function a record names (``cleaning_name``), or None where it names none of them."""
    return next((clean for clean in TEXT_CLEANING.values() if cleaning_name(clean) == name), None)
