"""A finetuned sequence classifier's prediction for every row of a file (scripts/predict.py): the rows read as the
task readers read them (``task_readers.text_rows``: tsv, csv, jsonl or plain text, each row numbered by its line),
tokenized with the model folder's own tokenizer as finetuning tokenized them (``task_loading.Encode``: special tokens'
text as text, truncation to the length it was finetuned at, else the model's n), run in batches sorted by length, and written one JSON line a row in the
file's order as they are made: a file of any size in flat memory."""

from __future__ import annotations

import errno
import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import IO

import torch

from ..cli import closed_pipe
from ..data import tasks as _tasks
from ..data.io import count_lines
from ..data.streams import TOKEN_TYPES, TaskCollator, example_columns
from ..data.task_loading import Encode
from ..data.task_readers import ROW, text_rows
from ..data.tasks import TEXT_CLEANING, TaskSpec, cleaning_named, task_label_names
from ..data.tokenizer import check_sequence_room, load_tokenizer
from ..devices import resolve_device
from ..errors import ConfigError, MissingFileError, TaskDataError
from ..files.locations import resolve_path
from ..files.mappings import read_json
from ..files.runs import BEST_DIR, CONFIG, RESULTS, RUN_RECORDS
from ..modeling.card import SIDECAR, read_card_info
from ..modeling.convert import classifier_config
from ..modeling.loading import check_tokenizer_fits, load_pretrained, max_tokens, resolve_model_path, weights_sha256
from ..progress import progress_bar
from ..runconfig.settings import task_spec
from ..rundir import read_recorded_config

SKIP_FLAG = "--skip-bad-rows"
SKIP_HINT = f"pass {SKIP_FLAG}"  # a bad row's error: the flag that skips it (finetuning's says its config key)
COLUMNS_FLAG = "--text-columns"
# the largest file whose lines are counted for the progress bar's total: a second or a few of reading, where its rows
# take hours to predict; a larger one's bar counts lines without a total
COUNTED_BYTES = 1 << 30
# batches of rows read, sorted by length and run at a time: the memory a file of any size takes. The first chunk is one
# batch and each next one twice as many up to it, so the first lines come out after one batch's work (``| head``)
CHUNK_BATCHES = 32
STDIN_HINT = "a pipe or standard input is not read: give a file (write the stream to one first)"


@dataclass
class Classifier:
    """A sequence classifier ready to predict: the model, its tokenizer, and how a row's texts reach it."""

    path: str
    model: torch.nn.Module
    tokenizer: object
    columns: tuple[str, ...]     # the texts a row gives it, by column (a pair: two)
    clean: Callable[[str], str]  # what finetuning did to a text before tokenizing it (the task's TEXT_CLEANING)
    max_length: int              # tokens: a longer input is cut to it, as finetuning cut it (``input_length``)
    task: str | None             # the task it was finetuned on, where the model folder records it
    labels: list[str] = field(default_factory=list)  # config.id2label, by label id
    length_from: str = "the model's n"  # where max_length comes from, as the summary says it


@dataclass
class Recorded:
    """What a model folder records of the finetuning (or distillation) that made it, and where."""

    task: str | None = None
    max_length: int | None = None  # tokens: the length its inputs were cut to
    where: str | None = None       # the record read: its card's, or its run's results.json
    text_fields: tuple[str, ...] | None = None  # the task's text columns, where the record names them
    text_cleaning: str | None = None  # what cleaned its text (``TaskSpec.text_cleaning``), where the record names it
    run_config: Path | None = None  # the config.yaml of the run that made it, which records a task of one's own


def recorded_training(model_dir: str | Path) -> Recorded:
    """The task, its text columns and input length a model folder was finetuned (or distilled) on, where it records
    them: its card's last finetuning (a converted or transferred model's) or its distillation, else the results.json
    of the run whose best/ or model/ it is (finetuning writes max_length and text_fields to both); and the config.yaml
    of that run (a run's best/ or model/, or the run the card's record names, where it is here), whose task.spec
    block gives a task of one's own that an older record does not spell out."""
    card, model_dir = read_card_info(model_dir), Path(model_dir)
    if card.get("finetuning"):
        record, where = card["finetuning"][-1], f"{model_dir / SIDECAR}, its last finetuning"
    elif card.get("distillation"):
        record, where = card["distillation"], f"{model_dir / SIDECAR}, its distillation"
    elif model_dir.name in (BEST_DIR, "model"):
        record, where = read_json(model_dir.parent / RESULTS), str(model_dir.parent / RESULTS)
    else:
        return Recorded()
    length, fields = record.get("max_length"), record.get("text_fields")
    runs = [model_dir.parent] if model_dir.name in (BEST_DIR, "model") else []
    if isinstance(record.get("run_dir"), str):  # a card names its run relative to the repository, or by its name
        runs.append(Path(resolve_path(record["run_dir"])))
    run_config = next((run / CONFIG for run in runs if (run / CONFIG).is_file()), None)
    return Recorded(record.get("task"), length if isinstance(length, int) and length > 0 else None, where,
                    tuple(map(str, fields)) if isinstance(fields, list) and fields else None,
                    record.get("text_cleaning"), run_config)


def recorded_task(recorded: Recorded, columns_from: str | None = None) -> TaskSpec | None:
    """The TaskSpec of the task a model records (``recorded_training``): the task.spec block of its run's
    config.yaml where that run was of this task (a task of one's own, registered in the process that ran it and
    perhaps in no other), else the task registered under its name (the package's own), else None (no task
    recorded, or one whose spec is recorded nowhere here). A recorded block that does not read as today's TaskSpec
    (a record of another version: a reader or key since renamed) is a ConfigError naming the file, unless the
    texts' columns come from elsewhere (`columns_from`: the flag that gives them, or the record that names them):
    then the spec is wanted only for label names and text cleaning, and it is a warning and None."""
    if recorded.task is None:
        return None
    if recorded.run_config is not None:
        def spec_block(cfg: Mapping) -> TaskSpec | None:
            task = cfg.get("task")
            if not isinstance(task, Mapping) or str(task.get("name")) != recorded.task or task.get("spec") is None:
                return None
            return task_spec(recorded.task, task["spec"])

        try:
            spec = read_recorded_config(recorded.run_config.parent, spec_block)
        except ConfigError as err:
            if columns_from is None:
                raise
            cleaned = (f"{recorded.where} records ({recorded.text_cleaning})"
                       if cleaning_named(recorded.text_cleaning) else "the readers clean it (stripped)")
            print(f"warning: {err}. Not needed to predict: the texts are read from {columns_from}, the labels named "
                  f"as the model's config names them, and the text cleaned as {cleaned}", file=sys.stderr)
            return None
        if spec is not None:
            return spec
    return _tasks.TASKS.get(recorded.task)


def input_length(recorded: Recorded, n: int, given: int | None, key: str, texts: int, tokenizer,
                 path: str) -> tuple[int, str]:
    """The tokens a row is cut to, and where that comes from: `given` (the flag `key`; above the model's `n` is a
    ConfigError), else the length the model was finetuned at where it records it (a classifier finetuned at 128
    tokens saw no longer input), else its n."""
    if given is not None:
        if given > n:
            raise ConfigError(f"{key} {given} is above what the model {path} takes ({n} tokens): give {n} or less")
        check_sequence_room(given, key, "a row", texts, tokenizer, f"({path})")
        return given, key
    if recorded.max_length is not None:
        return min(recorded.max_length, n), f"the length it was finetuned at: max_length in {recorded.where}"
    return n, "the model's n"


def what_predict_reads(model_dir: str, input_path: str) -> list[str]:
    """What predict reads or leaves to its run, which its --output may neither be nor lie inside, overwrite or not:
    the --input file, the model folder `model_dir` resolves to (a run's model/ or best/, checked), and the records of
    the run above it (``RUN_RECORDS``: its config.yaml and results.json say how the model was finetuned,
    ``recorded_training``; its run.json, metrics and checkpoints are the run's, which a prune or resume reads); a new
    file beside them in the run's folder (its predictions) replaces nothing."""
    model = str(resolve_model_path(model_dir, "model_dir"))
    run = Path(model).parent
    return [input_path, model, *([str(run / name) for name in RUN_RECORDS] if (run / CONFIG).is_file() else [])]


def load_classifier_dir(given: str, text_columns: tuple[str, ...] | None = None, device: str = "auto",
                        device_key: str = "device", max_length: int | None = None,
                        length_key: str = "max_length") -> Classifier:
    """The sequence classifier at `given` (a model folder or hub name), its tokenizer, and the texts a row gives it:
    `text_columns`, else the columns of the task the model records (``recorded_training``: its record's
    text_fields, else its run's recorded spec or the registered task, ``recorded_task``), else, for a model that
    records no task, one column "text" (a task whose columns nothing records is a ConfigError: a pair model fed one
    column would score half of each row);
    each row cut to `max_length` tokens (the flag `length_key`), else to the length it was finetuned at, else to its
    n (``input_length``). ConfigError for a model that is not a sequence classifier (``classifier_config``), or
    columns that are not as many as the texts the model was finetuned on. `device`: where it runs ("auto": a GPU
    where one is visible; ``devices.resolve_device``, a ConfigError naming `device_key`)."""
    from transformers import AutoModelForSequenceClassification

    where = resolve_device(device, device_key)
    path, config = classifier_config(given, "model_dir")
    recorded = recorded_training(path)
    given = f"{COLUMNS_FLAG} {','.join(text_columns)}" if text_columns else None
    task = recorded.task
    spec = recorded_task(recorded, given or (f"the text_fields of {recorded.where}" if recorded.text_fields else None))
    fields = recorded.text_fields or (spec.text_fields if spec else None)
    if text_columns and fields and len(text_columns) != len(fields):
        raise ConfigError(f"{COLUMNS_FLAG} {','.join(text_columns)}: the model was finetuned on {task}, whose rows "
                          f"are {len(fields)} text(s) ({', '.join(fields)}): name as many")
    if not text_columns and task and not fields:  # one column would feed a pair model half of each row
        raise ConfigError(f"{path}: the model was finetuned on {task}, whose text columns {recorded.where} does not "
                          f"give and no config.yaml of its run here records (task.spec.text_fields): name the file's "
                          f"text columns with {COLUMNS_FLAG} (a pair task's two)")
    columns = tuple(text_columns or fields or ("text",))
    tokenizer = load_tokenizer(path, "model_dir")
    check_tokenizer_fits(tokenizer, config, path)
    length, length_from = input_length(recorded, max_tokens(config, tokenizer, None, None), max_length, length_key,
                                       len(columns), tokenizer, path)
    model = load_pretrained(AutoModelForSequenceClassification, path, "model_dir", config=config).eval().to(where)
    clean = _cleaning(recorded, spec)
    labels = task_label_names([config.id2label[i] for i in range(config.num_labels)], spec)
    return Classifier(path, model, tokenizer, columns, clean, length, task, labels, length_from)


def _cleaning(recorded: Recorded, spec: TaskSpec | None) -> Callable[[str], str]:
    """What finetuning did to a text before tokenizing it: the cleaning the record names, else the task's (its
    format's ``TEXT_CLEANING``), else none (the text stripped, as the readers strip it)."""
    named = cleaning_named(recorded.text_cleaning)
    if named is not None:
        return named
    return TEXT_CLEANING.get(spec.format, str.strip) if spec else str.strip


@dataclass
class Summary:
    """What a prediction of a file did, for its last lines."""

    rows: int = 0       # predicted
    skipped: int = 0    # bad rows left out (--skip-bad-rows)
    truncated: int = 0  # rows longer than the classifier's max_length, cut to it
    seconds: float = 0.0

    def lines(self, source: str, classifier: Classifier, weights: str | None, out: str | None) -> list[str]:
        rate = self.rows / self.seconds if self.seconds > 0 else float("inf")
        done = f"predicted {self.rows:,} rows of {source} in {self.seconds:.1f} s ({rate:,.1f} rows/s)"
        bad = (f"bad rows skipped: {self.skipped:,}; truncated to {classifier.max_length} tokens "
               f"({classifier.length_from}): {self.truncated:,}")
        model = (f"model: {classifier.path} (task {classifier.task or 'not recorded'}; texts from "
                 f"{', '.join(classifier.columns)}); weights_sha256 {weights}")
        return [done + (f" to {out}" if out else ""), bad, model]


def _chunks(rows: Iterable[tuple[int, dict | None]], batch_size: int,
            summary: Summary) -> Iterator[list[tuple[int, dict]]]:
    """The good rows (a bad one, None, counted as skipped) in chunks of one batch first, then each twice as many rows
    as the one before, up to ``CHUNK_BATCHES`` batches."""
    chunk, size = [], batch_size
    for line, texts in rows:
        if texts is None:
            summary.skipped += 1
            continue
        chunk.append((line, texts))
        if len(chunk) == size:
            yield chunk
            chunk, size = [], min(2 * size, batch_size * CHUNK_BATCHES)
    if chunk:
        yield chunk


def _predict_chunk(classifier: Classifier, encode: Encode, fed: list[str], chunk: list[tuple[int, dict]],
                   batch_size: int, summary: Summary, out: IO) -> Iterator[tuple[list[dict], int]]:
    """A chunk of rows run in batches of similar length, each once `out` is still read (``_still_read``): after each
    batch, the output lines now ready in the chunk's order (those of the rows up to the first not yet run) and how
    many rows the batch ran."""
    batch = {ROW: [line for line, _ in chunk], **{c: [texts[c] for _, texts in chunk] for c in classifier.columns}}
    enc = encode(batch)  # raises for a row of no token (or leaves it out, skip_bad_rows)
    summary.skipped += len(chunk) - len(enc[ROW])
    summary.truncated += _truncated(classifier, encode, batch, enc)
    n = len(enc[ROW])
    order = sorted(range(n), key=lambda i: len(enc["input_ids"][i]))
    collate = TaskCollator(classifier.tokenizer, classifier.max_length)
    device = next(classifier.model.parameters()).device
    probs, written = [None] * n, 0
    for start in range(0, n, batch_size):
        _still_read(out)
        idx = order[start:start + batch_size]
        inputs = collate([{c: enc[c][i] for c in fed} for i in idx])
        with torch.no_grad():
            logits = classifier.model(**{k: v.to(device) for k, v in inputs.items()}).logits.float()
        for i, p in zip(idx, torch.softmax(logits, -1).cpu().tolist()):
            probs[i] = p
        ready = []
        while written < n and probs[written] is not None:
            p = probs[written]
            best = max(range(len(p)), key=p.__getitem__)
            ready.append({"row": enc[ROW][written], "label": classifier.labels[best], "score": p[best],
                          "probs": dict(zip(classifier.labels, p))})
            written += 1
        yield ready, len(idx)


def _still_read(out: IO[bytes]) -> None:
    """BrokenPipeError where `out` is a pipe whose reader has gone (``cli.closed_pipe``: ``| head`` took its lines):
    the rows left would be predicted for no one, a batch's work at most where this is asked before each."""
    if closed_pipe(out):
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _truncated(classifier: Classifier, encode: Encode, batch: dict, enc: dict) -> int:
    """How many of the encoded rows max_length cut: those of max_length tokens that encode to one more given room,
    encoded as `encode` encodes them (a long text from its prefix: a text that needs one holds more tokens than the
    row keeps, and a book in one row is not tokenized whole to count it)."""
    at_limit = {row for row, ids in zip(enc[ROW], enc["input_ids"]) if len(ids) >= classifier.max_length}
    if not at_limit:
        return 0
    idx = [i for i, row in enumerate(batch[ROW]) if row in at_limit]
    rows = [encode.cut(tuple(batch[c][i] for c in classifier.columns)) for i in idx]
    longer = classifier.tokenizer(*[list(texts) for texts in zip(*rows)], truncation=True,
                                  max_length=classifier.max_length + 1, split_special_tokens=True)["input_ids"]
    return sum(len(ids) > classifier.max_length for ids in longer)


def check_source(source: str | Path, key: str | None = None) -> None:
    """MissingFileError where `source` (given as the flag `key`) is no file; ConfigError where it is a pipe, standard
    input or a device (``-``'s /dev/stdin, a shell's ``<(...)``): predict reads a file, not a stream."""
    named = f"{key} {source}" if key else str(source)
    if Path(source).is_file():
        return
    if Path(source).exists() and not Path(source).is_dir():
        raise ConfigError(f"{named}: {STDIN_HINT}")
    raise MissingFileError(f"{named}: no such file to predict")


def _writer(out: IO) -> Callable[[str], object]:
    """How `out` takes text: a text stream (``open(path, "w")``, sys.stdout) as str, a binary one (``open(path,
    "wb")``, sys.stdout.buffer, io.BytesIO) as UTF-8 bytes. A ConfigError, before any row is predicted, for
    something not open for writing."""
    try:
        writable = callable(getattr(out, "write", None)) and (not hasattr(out, "writable") or out.writable())
    except ValueError:  # a closed file
        writable = False
    if not writable:
        raise ConfigError(f"predict_file's out {out!r} is not a stream open for writing: give a binary one "
                          "(open(path, 'wb'), sys.stdout.buffer, io.BytesIO) or a text one (open(path, 'w'))")
    if isinstance(out, io.TextIOBase):
        return out.write
    return lambda text: out.write(text.encode())


def predict_file(classifier: Classifier, source: str | Path, out: IO, batch_size: int = 32,
                 skip_bad_rows: bool = False, progress: bool | None = None) -> Summary:
    """Write a JSON line {"row", "label", "score", "probs"} to `out` (a binary or text stream, ``_writer``) for each
    row of the file `source` (``check_source``: not a pipe), in its order, as they are made: the first after one
    batch's work. A bad row is a TaskDataError naming the file and line, or is skipped and
    counted with `skip_bad_rows`; a file of no row to predict is one too. BrokenPipeError, before the next batch's work,
    where `out` is a pipe whose reader has gone (``| head``). `progress`: a bar on stderr (``progress.progress_bar``'s `show`; None: where
    stderr is a terminal), in the file's lines, of the lines it holds (``COUNTED_BYTES``), moved after each batch."""
    check_source(source)
    write = _writer(out)
    summary = Summary()
    encode = Encode(classifier.tokenizer, classifier.columns, classifier.max_length,
                    lambda line: f"{source}:{line}", skip_bad_rows, SKIP_HINT)
    given = [TOKEN_TYPES] if TOKEN_TYPES in encode.columns else []
    fed = [c for c in example_columns(SimpleNamespace(column_names=given),
                                      [getattr(classifier.model.config, "type_vocab_size", None)]) if c != "labels"]
    rows = text_rows(source, classifier.columns, classifier.clean, skip_bad_rows, SKIP_HINT, COLUMNS_FLAG)
    start = time.perf_counter()
    with progress_bar(progress, desc="predict", unit=" lines") as bar:
        if not bar.disable and Path(source).stat().st_size <= COUNTED_BYTES:  # the file's lines: how far it is
            bar.total = count_lines(source)
            bar.refresh()
        for chunk in _chunks(rows, batch_size, summary):
            for lines, ran in _predict_chunk(classifier, encode, fed, chunk, batch_size, summary, out):
                if lines:
                    write("".join(json.dumps(line) + "\n" for line in lines))
                    out.flush()  # a reader of standard output gets each line as it is made
                summary.rows += len(lines)
                bar.update(ran)  # a line a row run: at most the lines up to the chunk's last row
            bar.update(chunk[-1][0] - bar.n)  # the file read up to the chunk's last row's line
        if bar.total:
            bar.update(bar.total - bar.n)  # the lines after the last row: blank, a header, bad rows skipped
    summary.seconds = time.perf_counter() - start
    if not summary.rows:
        what = f"all {summary.skipped} rows are bad rows, skipped ({SKIP_FLAG})" if summary.skipped else "no rows"
        raise TaskDataError(f"{source}: {what}: nothing to predict")
    return summary


def model_weights(classifier: Classifier) -> str | None:
    """The model's weights as runs record their start weights (``weights_sha256``)."""
    return weights_sha256(classifier.path)


__all__ = ["Classifier", "Recorded", "Summary", "check_source", "input_length", "load_classifier_dir", "model_weights", "predict_file",
           "recorded_task", "recorded_training"]
