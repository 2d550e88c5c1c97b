"""Which rows of a task a run takes: a stratified subset (``subset_rows``), the validation carve
(``carve_validation``), and no train row whose text is also an eval row's (``drop_eval_duplicates``). Each a pure
function of the rows, the numbers and the seed."""

from __future__ import annotations

import functools
import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

LIMIT_KEYS = {"train": "max_train_examples", "eval": "max_eval_examples"}  # the finetuning config's names


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
    return _stratified_first(labels, n, np.random.default_rng(seed).permutation(len(labels)))


def _stratified_first(labels, n: int, order: np.ndarray) -> np.ndarray:
    """The first rows of `order` (a permutation of the rows), `n` in all, each label taking its share of them
    (rounded by largest remainder), in that order."""
    labels = np.asarray(labels)
    rows = len(labels)
    classes, counts = np.unique(labels, return_counts=True)
    exact = counts * n / rows
    quota = np.floor(exact).astype(int)
    quota[np.argsort(quota - exact, kind="stable")[: n - int(quota.sum())]] += 1
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


# How the validation carve chooses its rows. "text": by each row's text (``text_order``), so that an edit of the
# train file moves at most the edited rows (and, the class's quota being whole rows, one row at its boundary);
# "position": by a seeded permutation of the rows' places in the file, where one row added or removed reshuffles the
# whole carve. Runs begun before "text" carved by position, and their checkpoints record no carve: a resume of one
# goes on with it (``finetune.FinetuneTask``).
CARVES = ("text", "position")
CARVE = "text"  # a new run's
CARVE_BEFORE_RECORDED = "position"  # a checkpoint's that records none


def carve_validation(cols: dict, fraction: float, seed: int, fields: tuple[str, ...],
                     by: str = CARVE) -> tuple[dict, dict]:
    """(train, validation): a stratified `fraction` of the rows held out to choose epochs and checkpoints on, the rest
    kept for training in their order. Each label gives its share of the rows that come first in the carve's order
    (`by`, CARVES: ``text_order`` of the rows' `fields` with `seed`, or ``stratified_pick``'s seeded permutation). A
    pure function of the rows, the fraction and the seed: every row and seed of an experiment that shares them shares
    the carve."""
    if by not in CARVES:
        raise ConfigError(f"validation carve {by!r} is not one of {list(CARVES)}: continue the run with the version "
                          "that began it")
    n = validation_size(fraction, len(cols["labels"]))
    held = (_stratified_first(cols["labels"], n, text_order(cols, fields, seed)) if by == "text" else
            stratified_pick(cols["labels"], n, seed))
    rest = np.setdiff1d(np.arange(len(cols["labels"])), held)  # sorted: the file's order
    return _take(cols, rest), _take(cols, np.sort(held))


def text_order(cols: dict, fields: tuple[str, ...], seed: int) -> np.ndarray:
    """The rows in the order of a seeded hash of each one's text (``text_key``: every text field, whitespace runs
    folded), rows of one text in file order: where a row comes depends on its own text and the seed alone, not on
    the rows around it or its place in the file."""
    salt = f"{seed}\x1e".encode()
    scores = np.fromiter((int.from_bytes(hashlib.blake2b(salt + "\x1f".join(text_key(cols, fields, i)).encode(),
                                                         digest_size=8).digest(), "little")
                          for i in range(len(cols["labels"]))), dtype=np.uint64, count=len(cols["labels"]))
    return np.argsort(scores, kind="stable")


def text_key(cols: dict, fields: tuple[str, ...], i: int) -> tuple[str, ...]:
    """A row's texts with whitespace runs folded: the order the validation carve sorts rows in. Deliberately looser
    than ``duplicate_key``'s fold, which decides what counts as a copy of an eval text: changing this one would move
    every recorded carve (their ids are in committed records), so the two stay apart."""
    return tuple(" ".join(str(cols[f][i]).split()) for f in fields)  # whitespace runs do not make a text new


# What a text loses before it is compared with another for a duplicate: the characters that neither spell nor show
# (soft hyphen, zero-width space, word joiner, byte order mark, bidi marks, embeddings, overrides and isolates), and
# control characters other than whitespace. Not a combining mark (a Thai tone mark, a Hindi vowel sign, Hebrew
# points, an accent: letters of their words, "ไม้"/"ไม่", "año"/"ano"), a compatibility form ("①" is not "1", "x²" not
# "x2") or a joiner (ZWJ/ZWNJ spell Indic and Persian words and emoji sequences), which can tell meanings apart
_INVISIBLE = frozenset("\u00ad\u061c\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069"
                       "\ufeff")


def duplicate_key(cols: dict, fields: tuple[str, ...], i: int) -> tuple[str, ...]:
    """A row's texts as compared for a duplicate: in Unicode's canonical form (NFC: a letter written with its accent
    apart, NFD, is the same letter), without invisible and control characters (_INVISIBLE), lowercased, whitespace
    runs folded: an eval sentence written in NFD, with a zero-width space, or in capitals is still the eval sentence.
    Nothing that can tell two meanings apart is folded: combining marks, compatibility forms and punctuation count,
    and case is lowered, not folded (casefold makes "Maße" "masse")."""
    return tuple(_fold(str(cols[f][i])) for f in fields)


def _fold(text: str) -> str:
    """``duplicate_key``'s fold of one text. A tab or line break is kept: it still parts words."""
    if not text.isascii():  # NFC leaves ASCII as it is (most texts)
        text = unicodedata.normalize("NFC", text)
    # the characters other than printable ASCII and whitespace, by bytes.translate (one C pass over the UTF-8 bytes,
    # where a non-ASCII character's bytes are all above 0x7F), each judged once a process: a fraction of the time of
    # a scan character by character, and no table of every code point
    others = text.encode("utf-8", "surrogatepass").translate(None, _PLAIN_ASCII)
    for c in set(others.decode("utf-8", "surrogatepass")):
        if _deleted(c):
            text = text.replace(c, "")
    return " ".join(text.lower().split())


@functools.cache
def _deleted(c: str) -> bool:
    """Whether ``duplicate_key`` deletes the character `c`: invisible (_INVISIBLE), or a control character other than
    whitespace."""
    return c in _INVISIBLE or (unicodedata.category(c) == "Cc" and not c.isspace())


_PLAIN_ASCII = bytes(b for b in range(0x80) if not _deleted(chr(b)))  # no fold deletes these: printable, whitespace


def shared_texts(cols: dict, others: dict, fields: tuple[str, ...]) -> np.ndarray:
    """Per row of `cols`, whether its text (every text field, as ``duplicate_key`` compares it) is also a row of
    `others`."""
    seen = {duplicate_key(others, fields, i) for i in range(len(others["labels"]))}
    return np.array([duplicate_key(cols, fields, i) in seen for i in range(len(cols["labels"]))], dtype=bool)


def drop_eval_duplicates(train: dict, eval_cols: dict, fields: tuple[str, ...]) -> tuple[dict, int]:
    """The train rows whose text (every text field, as ``duplicate_key`` compares it) is not also an eval row's, and
    how many were dropped: a model must not train on the examples its reported split scores (IMDB's train and test
    splits share over a hundred reviews)."""
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
    carve: str = CARVE  # how the validation rows are chosen (CARVES)

    def limit(self, split: str) -> int | None:
        """Rows to draw from `split`'s source (validation comes out of train's)."""
        return split_limits(self.max_examples, ("train", "eval"))["eval" if split == "eval" else "train"]
