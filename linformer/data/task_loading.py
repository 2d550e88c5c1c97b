"""``load_task``: a task's splits read, chosen and tokenized, and the cache of tokenized splits (one folder per split,
keyed by the files' contents, the tokenizer and the options). Rows are not padded; batches are padded dynamically by
``streams.TaskCollator``."""

from __future__ import annotations

import functools
import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError, LinformerError, TaskDataError, first_line
from ..files.atomic import atomic_dir
from ..files.hashing import cache_key, check_inputs_unchanged, input_states
from ..files.mappings import read_json
from ..files.outputs import MANIFEST, made_by, output_damage
from ..logfile import fewer_than_asked
from ..progress import progress_said, progress_to_log_file, third_party_bars_off
from .ids import read_token_ids
from .streams import TOKEN_TYPES
from .task_readers import ROW, SKIP_SETTING, hub_fingerprints, read_task_split, row_place, task_files
from .task_splits import (
    CARVE,
    LIMIT_KEYS,
    SplitOptions,
    carve_validation,
    drop_eval_duplicates,
    split_limits,
    subset_rows,
)
from .tasks import get_task
from .tokenizer import encoded_prefix, encoded_prefixes, loaded_identity

log = logging.getLogger(__name__)


def encoded_columns(tokenizer) -> list[str]:
    """The token columns a split is encoded into: input_ids and attention_mask, and token_type_ids where the tokenizer
    gives them (its ``model_input_names``: BERT's do, a pair's second text marked 1; RoBERTa's do not). Which of them
    feed a model is the run's choice (``streams.example_columns``)."""
    given = getattr(tokenizer, "model_input_names", ())
    return ["input_ids", "attention_mask"] + ([TOKEN_TYPES] if TOKEN_TYPES in given else [])


def prefix_chars(tokenizer, max_length: int) -> int | None:
    """The characters of a text that the first `max_length` tokens take at most where each is a vocabulary entry
    (its longest entry's characters each, byte-level BPE's of a byte each; WordPiece's "##" counted), and the
    characters of a word WordPiece reads at all (``max_input_chars_per_word``), with a margin: where a text is cut
    before it is encoded (``tokenizer.encoded_prefix``, which takes more where the text's tokens are fewer). None
    (no cut) for a slow tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    longest = max(map(len, backend.get_vocab()))
    word = getattr(backend.model, "max_input_chars_per_word", 0)
    return max_length * longest + word + 256


class Encode:
    """A batch of rows encoded: each text as text (split_special_tokens: a "<s>" or "[SEP]" written in a review is not
    a separator, as the corpus encodes it, ``tokenizer.texts_as_text``), and a row of whose text field the tokenizer
    leaves no token (zero-width or control characters alone, which BERT's deletes) is a bad row: a TaskDataError
    naming its place (`place`: its ROW -> ``row_place``), or left out with `skip_bad_rows` (its caller counts it)."""

    def __init__(self, tokenizer, fields: tuple[str, ...], max_length: int, place, skip_bad_rows: bool,
                 skip: str = SKIP_SETTING):
        self.tokenizer, self.fields, self.max_length = tokenizer, fields, max_length
        self.columns = encoded_columns(tokenizer)
        self.place, self.skip_bad_rows, self.skip = place, skip_bad_rows, skip  # skip: what skips a row, as its error says it
        self.chars = prefix_chars(tokenizer, max_length)

    def __call__(self, batch: dict) -> dict:
        # a text longer than `chars` is encoded from a prefix that holds the tokens truncation keeps (max_length at
        # most): a book in one row costs what its first tokens cost; a pair's prefixes keep which whole text has more
        # tokens, on which "longest_first" truncation's split of an odd budget depends
        rows = [self.cut(row) for row in zip(*(batch[f] for f in self.fields))]
        texts = [[row[i] for row in rows] for i in range(len(self.fields))]
        enc = self.tokenizer(*texts, truncation=True, max_length=self.max_length, split_special_tokens=True)
        keep = [i for i in range(len(batch[ROW])) if self._has_text(enc, i, batch[ROW][i])]
        labels = {"labels": [batch["labels"][i] for i in keep]} if "labels" in batch else {}  # none to predict
        return {**labels, **{c: [enc[c][i] for i in keep] for c in self.columns}, ROW: [batch[ROW][i] for i in keep]}

    def cut(self, row: tuple[str, ...]) -> tuple[str, ...]:
        """The row's texts as they are encoded: a text longer than `chars` as a prefix holding more tokens than the row
        keeps (a pair's keeping which text has more), the rest whole."""
        if self.chars is None or max(map(len, row)) <= self.chars:
            return row
        if len(row) == 1:
            return (encoded_prefix(self.tokenizer, row[0], self.max_length, self.chars),)
        return encoded_prefixes(self.tokenizer, row, self.max_length, self.chars)

    def _has_text(self, enc, i: int, row: int) -> bool:
        if not getattr(enc, "encodings", None):  # a slow tokenizer tells no text's tokens apart
            return True
        empty = set(range(len(self.fields))) - {s for s in enc.sequence_ids(i) if s is not None}
        if not empty:
            return True
        if self.skip_bad_rows:
            return False
        raise TaskDataError(f"{self.place(row)}: no token left of the text in column {self.fields[min(empty)]} once "
                            "tokenized (characters the tokenizer deletes: zero-width or control characters alone): "
                            f"write the row's text, or {self.skip} to skip and count such rows")


# bump when the reading or encoding code changes what a file that read before gives (a TaskSpec's own fields are in
# the key): 7, a special token's text encoded as text, a row of no token a bad row, each row's place in its file
# recorded; 8, a text holding a NUL byte a bad row, a header naming a column twice refused, a blank line no bad row
# (task.skip_bad_rows counted it); 9, eval duplicates compared without folding away combining marks, compatibility
# forms or joiners (``task_splits.duplicate_key``)
CACHE_VERSION = 9


def split_cache_key(name: str, data_dir: str | None, split: str, tokenizer, max_length: int, options: SplitOptions,
                    digests: dict[str, str] | None = None) -> str | None:
    """The ``hashing.cache_key`` of a tokenized split: the task's reading of its files (``TaskSpec.reading``: columns,
    label order, reader), source file contents (train and validation also depend on the eval files, whose duplicates
    they drop), the tokenizer as loaded (``loaded_identity``: its truncation_side too), max_length and the reading
    options (the seed only where it draws, the carve's rule only where it carves), and the columns it is encoded into
    (``encoded_columns``); hub data (`data_dir` None) by its splits' datasets fingerprints (``hub_fingerprints``) in
    place of the files. None (no caching) for a slow tokenizer. `digests`: the file digests of the call's other splits
    (``hashing.cache_key``), so that a task file is read once a call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    sources = ("eval",) if split == "eval" else ("train", "eval")
    hub = hub_fingerprints(name, sources) if data_dir is None else None
    files = [] if data_dir is None else task_files(name, data_dir, sources)
    if not files and hub is None:
        return None  # reading will raise the layout error
    limit = options.limit(split)
    carved = split != "eval" and options.validation_fraction is not None
    key = {"version": CACHE_VERSION, "task": get_task(name).reading(), "split": split, "max_length": max_length,
           "tokenizer": loaded_identity(tokenizer), "columns": encoded_columns(tokenizer),
           "skip_bad_rows": options.skip_bad_rows,
           "max_examples": limit, "validation_fraction": options.validation_fraction if split != "eval" else None,
           "subset_seed": options.subset_seed if limit is not None or carved else None,
           **({"carve": options.carve} if carved else {}),  # only where it carves: the other entries keep their keys
           **({"hub": hub} if hub is not None else {})}
    return cache_key(key, files, digests)


def split_info(ds) -> dict:
    """What ``load_task`` recorded of how a tokenized split's rows were chosen: {"task", "split", "original_split",
    "skipped_bad_rows" (task.skip_bad_rows: as read, and rows of no token once tokenized), "eval_duplicates_dropped"
    (train and validation), "carve" (train and validation, where carved: ``task_splits.CARVES``), "rows" (eval and
    validation: each example's row in its source file, in the split's order, ``task_readers.row_place``: the line of
    a tsv or csv row, as an error names it; an aclImdb review's place in its neg/ then pos/ listing; a hub row's
    index), "of" (the rows a max_*_examples subset is drawn from: eval, its source's; train and validation, the train
    source's left after the eval duplicates are dropped)}."""
    return json.loads(ds.info.description or "{}")


def _read_rows(name: str, data_dir: str | None, split: str, options: SplitOptions) -> tuple[dict, dict]:
    """The raw columns of `split` (train, validation or eval) as the options select them, and what to record of it.

    train and validation: the train source without the rows whose text is also an eval row's, then the max_examples
    subset, then the validation carve (``carve_validation``) of what remains."""
    task_spec = get_task(name)
    source = "eval" if split == "eval" else "train"
    cols, skipped = read_task_split(name, data_dir, source, options.skip_bad_rows)
    if skipped:
        log.warning("task %s/%s: skipped %d bad rows (malformed, a label outside the set, or no text; "
                    "task.skip_bad_rows)", name, source, skipped)
    if not cols["labels"]:
        raise TaskDataError(f"task {name} split {source} in {data_dir}: no rows")
    info = {"task": name, "split": split, "original_split": task_spec.eval_split if split == "eval" else "train",
            "skipped_bad_rows": skipped}
    if split == "eval":  # its size, and the rows a subset kept
        info["of"] = len(cols["labels"])
        return subset_rows(cols, options.limit("eval"), options.subset_seed), info
    cols, info["eval_duplicates_dropped"] = drop_eval_duplicates(
        cols, read_task_split(name, data_dir, "eval", options.skip_bad_rows)[0], task_spec.text_fields)
    if not cols["labels"]:
        where = data_dir if data_dir is not None else f"hub dataset {task_spec.hub_name!r}"
        raise TaskDataError(f"task {name} in {where}: every train row is also an eval row ("
                            f"{info['eval_duplicates_dropped']} dropped): nothing is left to train on")
    info["of"] = len(cols["labels"])
    cols = subset_rows(cols, options.limit("train"), options.subset_seed)
    if options.validation_fraction is not None:
        train, held = carve_validation(cols, options.validation_fraction, options.subset_seed,
                                       task_spec.text_fields, options.carve)
        cols, info["carve"] = (held if split == "validation" else train), options.carve
    return cols, info


def _encode_split(name: str, data_dir: str | None, split: str, tokenizer, max_length: int, options: SplitOptions,
                  lines: bool = False):
    """The split read, chosen and tokenized; where `lines` (a log file) a plain line says so (datasets' bar is off)."""
    import datasets

    task_spec = get_task(name)
    cols, info = _read_rows(name, data_dir, split, options)
    if lines:
        progress_said(f"task {name}/{split}: tokenizing {len(cols['labels']):,} rows")
    source = "eval" if split == "eval" else "train"
    ds = datasets.Dataset.from_dict(cols)
    place = functools.partial(row_place, name, data_dir, source)
    ds = ds.map(Encode(tokenizer, task_spec.text_fields, max_length, place, options.skip_bad_rows), batched=True,
                batch_size=1000, remove_columns=ds.column_names, desc=f"tokenize {name}/{split}")
    tokenless = len(cols["labels"]) - len(ds)
    if tokenless:
        info["skipped_bad_rows"] += tokenless
        log.warning("task %s/%s: skipped %d rows that tokenize to no token (task.skip_bad_rows)", name, split, tokenless)
        if not len(ds) and split != "validation":
            raise TaskDataError(f"task {name} split {split} in {data_dir}: every row is a bad row, skipped "
                                "(task.skip_bad_rows)")
    held = ROW in ds.column_names  # a map of no rows returns no columns
    if split != "train":  # the rows of the examples a run scores: its predictions join back to them
        info["rows"] = [int(i) for i in ds[ROW]] if held else []
    if held:
        ds = ds.remove_columns(ROW)
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
        with atomic_dir(target, made_by("task_cache", {"entry": target.name}), checksums=True,
                        key="task_cache_dir=") as tmp:
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
    carve: str = CARVE,
):
    """Tokenized `datasets.DatasetDict` with the requested splits (`train`, `validation`, `eval`), each holding
    input_ids, attention_mask, labels, and token_type_ids where the tokenizer gives them (``encoded_columns``)
    (unpadded; pairs as `<s> a </s></s> b </s>`, or BERT's `[CLS] a [SEP] b [SEP]`, truncated to max_length).

    `eval` is the GLUE dev split, and IMDB's test split (IMDB has no dev split; the paper reports test): the split
    a table reports. `train` never holds a row whose text is also an eval row's (``drop_eval_duplicates``).
    `max_examples` (one number for every split, or {"train": n, "eval": m}; None = every row) keeps a random
    stratified subset of that many rows drawn with `subset_seed` (``subset_rows``) before tokenizing, so a small run
    tokenizes only what it uses. `validation_fraction` carves that share of the (subset) train rows into
    `validation` with `subset_seed` (``carve_validation``, by `carve`: ``task_splits.CARVES``): the split a run
    chooses epochs and checkpoints on.
    ``split_info`` tells what was dropped and carved. IMDB train is sorted by label: shuffle it when training (a
    subset is already shuffled).

    With `cache_dir`, each tokenized split is saved there (`<task>-<split>-<key>`, see split_cache_key) and later
    calls with the same file contents, tokenizer and options load it instead of reading and tokenizing again.
    """
    import datasets

    options = SplitOptions(skip_bad_rows, max_examples, subset_seed, validation_fraction, carve)
    split_limits(max_examples, ("train", "eval"))  # a bad limit is refused before anything is read
    if "validation" in splits and validation_fraction is None:
        raise ConfigError("the validation split is carved from train: set validation_fraction")
    out, digests = {}, {}  # each task file hashed once for every split's key
    # their states before they are hashed: a split is cached under its key only where they kept them while it was read
    inputs = input_states(task_files(name, data_dir)) if cache_dir and data_dir is not None else {}
    lines = progress_to_log_file()  # a log file gets plain lines, not datasets' bars (tokenize, save, load)
    with third_party_bars_off(lines):
        for split in splits:
            out[split] = _split(name, data_dir, split, tokenizer, max_length, options, cache_dir, digests, lines,
                                inputs)
    _say_short_subsets(name, out, options)
    _say_eval_duplicates(name, out)
    return datasets.DatasetDict(out)


def _say_eval_duplicates(name: str, out: Mapping) -> None:
    """The train rows dropped as copies of eval rows (``drop_eval_duplicates``), said once, from what the train or
    validation split records (``split_info``), so a split from the cache says it as a split tokenized now."""
    split = next((s for s in out if s != "eval"), None)
    dropped = split_info(out[split]).get("eval_duplicates_dropped") if split is not None else None
    if dropped:
        log.info("task %s/train: dropped %d rows whose text is also an eval row's (eval_duplicates_dropped)",
                 name, dropped)


def _say_short_subsets(name: str, out: Mapping, options: SplitOptions) -> None:
    """A max_train_examples / max_eval_examples above the rows there are keeps them all: said once a key, from what
    each split records (``split_info``'s "of"), so a split from the cache says it as a split tokenized now."""
    for source, key in LIMIT_KEYS.items():
        limit = options.limit(source)
        split = next((s for s in out if (s == "eval") == (source == "eval")), None)  # validation is train's too
        held = split_info(out[split]).get("of") if split is not None else None
        if limit is not None and held is not None and held < limit:
            where = f"{name}'s {'eval' if source == 'eval' else 'train'} split" + \
                ("" if source == "eval" else " (without the rows whose text is also an eval row's)")
            fewer_than_asked(log, f"{key}={limit}", where, held, "rows", "using")


def _split(name: str, data_dir: str | None, split: str, tokenizer, max_length: int, options: SplitOptions,
           cache_dir: str | None, digests: dict[str, str], lines: bool, inputs: Mapping | None = None):
    """One tokenized split of ``load_task``: from the cache where it holds it, else tokenized (and cached, where its
    files kept the states `inputs` gives, ``hashing.input_states``, since they were hashed for its key)."""
    args = (name, data_dir, split, tokenizer, max_length, options)
    key = split_cache_key(*args, digests) if cache_dir else None
    target = Path(cache_dir) / f"{name}-{split}-{key}" if key else None
    if target is not None and _complete(target):
        log.info("task %s/%s: tokenized split from the cache %s", name, split, target)
        try:
            return _load_cached(target, len(tokenizer))
        except Exception as err:  # the checksums', pyarrow's and datasets' errors for a file cut short or damaged
            why = str(err) if isinstance(err, _CacheDamaged) else \
                f"is damaged ({first_line(err, named=True)})"
            log.warning("task cache %s %s: tokenizing the split again to replace it", target, why)
            shutil.rmtree(target, ignore_errors=True)
            if target.exists():  # another user's: it stays damaged, and this run keeps its own split
                log.warning("task cache %s cannot be removed (its owner's?): this run's split is not cached", target)
                target = None
    ds = _encode_split(*args, lines=lines)
    # a split of no rows (a carve that takes the one train row) is not cached: datasets cannot load one back (an
    # IndexError), and what an empty split means is for its caller to say, as without a cache
    if target is None or not len(ds):
        return ds
    check_inputs_unchanged(inputs or {})
    return _cached(ds, target)


class _CacheDamaged(Exception):
    """A cache entry whose files are not, or cannot be checked to be, the ones it was saved with (what it is, as a
    clause after its path)."""


def _load_cached(target: Path, vocabulary: int):
    """The tokenized split cached at `target`, its files checked against the checksums its manifest records first, as
    a prepared corpus's are: a changed byte reads without an error, and would train on other token ids. An entry
    saved without checksums (by an earlier version) cannot be checked, and is tokenized again; so is one holding an id
    outside the `vocabulary` of the tokenizer it is keyed by (its files and checksums rewritten: a model would index
    past its embeddings), found in the same read of its files (``ids.read_token_ids``)."""
    import datasets

    listed = read_json(target / MANIFEST).get("files")
    ids = read_token_ids(target, listed if isinstance(listed, dict) else ())
    damage = output_damage(target, ids.digests)
    if damage is None:
        raise _CacheDamaged("was saved without checksums of its files (by an earlier version)")
    if damage:
        raise _CacheDamaged(f"is damaged ({'; '.join(damage)})")
    outside = ids.outside(vocabulary)
    if outside is not None:
        raise _CacheDamaged(f"holds token id {outside[0]:,} (in {outside[1]}), outside the vocabulary of the "
                            f"tokenizer it is keyed by ({vocabulary:,} tokens, ids 0-{vocabulary - 1:,})")
    return datasets.load_from_disk(str(target))


def _cached(ds, target: Path):
    """``_save``, or `ds` itself where the cache cannot be written (read-only, another user's, full): a cache only
    spares the next run the tokenizing, so this one goes on."""
    try:
        return _save(ds, target)
    except (LinformerError, PermissionError, OSError) as err:
        log.warning("task cache %s cannot be written (%s): this run's split is not cached (task_cache_dir=null "
                    "skips the cache, task_cache_dir=<dir> moves it)", target,
                    getattr(err, "cause", None) or first_line(err))  # not a full disk's "run again"
        return ds
