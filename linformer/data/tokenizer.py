"""Train a RoBERTa-style byte-level BPE tokenizer and save it as a Hugging Face tokenizer directory.

`<s>`, `<pad>`, `</s>`, `<unk>` get ids 0, 1, 2, 3 (RoBERTa's order), `<mask>` is added with lstrip (so
"a <mask>" masks the word including its leading space), and the RoBERTa post-processor adds `<s> ... </s>`
and `<s> a </s></s> b </s>` for pairs. The directory is written by a transformers tokenizer's
`save_pretrained` and is read back with `AutoTokenizer.from_pretrained(out_dir)`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..configs import command_line_gives, data_overrides
from ..errors import (
    CheckpointError,
    ConfigError,
    CorpusError,
    HubOfflineError,
    LinformerError,
    MissingFileError,
    first_line,
)
from ..files.atomic import atomic_dir
from ..files.hashing import check_inputs_unchanged, short_digest
from ..files.locks import building_alone, remove_dead_builds
from ..files.mappings import read_json
from ..files.outputs import MANIFEST, check_output_dir, listing, made_by
from ..logfile import say
from ..modeling.values import ceil_div
from ..native import is_panic, panic_reports_dropped
from ..progress import progress_said, progress_to_log_file
from ..shell import script_command
from ..signals import signals_stop
from .io import (
    check_hub_sources,
    checked_lines,
    hub_lines,
    is_hub_source,
    load_hub_text,
    moved_output,
    read_whole,
    replaced_clause,
    replaced_warning,
    source_texts,
    text_changes,
    text_records,
    text_states,
)
from .workers import children_die_with_parent

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
SMALLEST_VOCAB = 256 + len(SPECIAL_TOKENS)  # a byte-level BPE holds every byte before its first merge
# the BPE trainer reserves memory by the vocabulary asked for, and aborts the process (no Python error) far above
# this; the largest vocabularies in use (XLM-R's) are a quarter of it
LARGEST_VOCAB = 2**20


def sequence_room(texts: int = 1, tokenizer=None) -> int:
    """The fewest tokens a sequence of `texts` texts (one, or two: a pair) takes with at least one token of each:
    the special tokens `tokenizer` adds (``num_special_tokens_to_add``) and one token a text. Without a tokenizer (a
    config read before its model's is loaded), the fewest of the tokenizers read here: ``<s> x </s>`` or ``[CLS] x
    [SEP]``, 3; a pair as BERT's ``[CLS] a [SEP] b [SEP]``, 5 (RoBERTa's ``<s> a </s></s> b </s>`` takes 6, said
    once the tokenizer is loaded). Below it a tokenizer cannot truncate: it leaves the text whole, or nothing but the
    special tokens."""
    if tokenizer is not None:
        return tokenizer.num_special_tokens_to_add(pair=texts == 2) + texts
    return 3 if texts == 1 else 5


def check_sequence_room(tokens: int, key: str, what: str, texts: int = 1, tokenizer=None, where: str = "") -> None:
    """ConfigError unless `tokens` (the setting `key`: a corpus's block, a task's examples) hold ``sequence_room``:
    the least any tokenizer takes, or with `tokenizer` (at `where`) what it adds."""
    need = sequence_room(texts, tokenizer)
    if tokens >= need:
        return
    if tokenizer is not None:
        room = (f"the {need - texts} special tokens its tokenizer{' ' + where if where else ''} adds and at least one "
                f"token{' of each text' if texts == 2 else ''}")
    else:
        room = ("<s>, at least one token and </s>" if texts == 1 else
                "<s>, at least one token of each text, a separator between them and </s>")
    raise ConfigError(f"{key}={tokens}: {what} needs room for {room} ({need} tokens at least)")


# The longest pre-token (characters: a word, a run of punctuation, digits or spaces, as the byte-level pre-tokenizer
# cuts a line) the BPE trainer is given whole. Its time grows with the square of a word's length (an 80,000-character
# run of '=' takes seconds, a 500 KB one hours), and no useful merge is that long (the longest tokens of large
# vocabularies are a few dozen characters), so a longer one is given to it in pieces of this length.
LONGEST_PRETOKEN = 256
# What the pre-tokenizer's regex takes as \s (Unicode White_Space; Python's \s also holds \x1c-\x1f, which it does not)
_WHITE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# A pre-token longer than LONGEST_PRETOKEN is a run of that many characters that are all white or none
_LONG_RUN = re.compile(f"[^{_WHITE}]{{{LONGEST_PRETOKEN},}}|[{_WHITE}]{{{LONGEST_PRETOKEN},}}")


@functools.cache
def _byte_level():
    from tokenizers import pre_tokenizers

    return pre_tokenizers.ByteLevel(add_prefix_space=False)


def _trainer_pieces(line: str, stats: dict) -> list[str]:
    """`line` as the BPE trainer is given it: whole, or where the byte-level pre-tokenizer makes a pre-token of it
    longer than LONGEST_PRETOKEN, as its text before and after that pre-token and the pre-token in pieces of
    LONGEST_PRETOKEN characters (each string the trainer is given is pre-tokenized on its own). ``stats["cut"]``
    counts the pre-tokens cut, ``stats["longest_cut"]`` the longest's length. Only what the trainer counts changes:
    the tokenizer encodes such a run as it encodes any text, with the merges learnt."""
    if len(line) <= LONGEST_PRETOKEN or not _LONG_RUN.search(line):  # every line of ordinary text
        return [line]
    pieces, start = [], 0
    for _, (a, b) in _byte_level().pre_tokenize_str(line):  # character offsets into `line`
        if b - a > LONGEST_PRETOKEN:
            stats["cut"] += 1
            stats["longest_cut"] = max(stats["longest_cut"], b - a)
            pieces += [line[start:a]] if a > start else []
            pieces += [line[i:min(i + LONGEST_PRETOKEN, b)] for i in range(a, b, LONGEST_PRETOKEN)]
            start = b
    return [*pieces, line[start:]] if start < len(line) else pieces


# a stop (SIGTERM, Ctrl-C) ends the training, which a rerun starts over: it keeps nothing of a stopped one
STOPPED = ("train_tokenizer stopped by {signal} before it finished; nothing was written. Run the same command again: "
           "it trains from the start.")


@contextlib.contextmanager
def _source_lines(source: str, skip_bad_rows: bool, counts: dict, digests: dict) -> Iterator[Iterator[str]]:
    """The lines of one corpus source, a file or a hub dataset, read as prepare_corpus reads them. A file is read
    once, to its end whatever the block takes of its lines (``io.read_whole``: a .gz file decompressed and checked
    to its end), and its sha256 taken in that read goes into ``digests[source]``."""
    if is_hub_source(source):
        yield _hub_lines(source)
        return
    digest = hashlib.sha256()
    with read_whole(source, digest) as f:
        yield checked_lines(source, skip_bad_rows, counts, f)
    digests[source] = digest.hexdigest()


def _hub_lines(source: str) -> Iterator[str]:
    """A hub dataset's lines, loaded only when the first is taken (a source whose share is none is not loaded)."""
    yield from hub_lines(load_hub_text(source))


def _source_size(source: str) -> str:
    """A source's size on disk in words ("201.3 MiB, gzip"), or that it is a hub dataset."""
    if is_hub_source(source):
        return "a hub dataset"
    return f"{Path(source).stat().st_size / 2**20:,.1f} MiB{', gzip' if source.endswith('.gz') else ''}"


def _share(max_lines: int, taken: int, i: int, sources: int) -> int:
    """The lines source `i` of `sources` may take when `taken` are taken: an equal share of what is left, or, where
    there are fewer lines than sources, its part of an even spread (the cumulative ceil(max_lines x (i+1) / sources):
    one line from every (sources / max_lines)-th source, the first included), so that a sample of 100 lines from
    3,000 files is not the first 100 files'."""
    if max_lines >= sources:
        return ceil_div(max_lines - taken, sources - i)
    return max(0, ceil_div(max_lines * (i + 1), sources) - taken)


def _iter_line_batches(sources: list[str], max_lines: int | None, stats: dict, skip_bad_rows: bool = False,
                       batch: int = 1000, progress_lines: bool = False) -> Iterator[list[str]]:
    """Non-empty lines of every source (a file or hf:<name>[:<config>]), in batches (the Rust trainer pre-tokenizes a
    batch in parallel), read as prepare_corpus reads them (``io.checked_lines``: a binary file is refused the same
    way). With `max_lines`, a sample spread over the sources: each takes its first lines up to an equal share of
    what is left, so a source shorter than its share leaves the rest to those after it (fewer lines than sources: one
    line each from sources spaced evenly through the list, ``_share``). ``stats["per_source"]``
    counts the lines taken from each. A pre-token longer than LONGEST_PRETOKEN is given in pieces
    (``_trainer_pieces``), counted in ``stats["cut"]``. Each file is read once, to its end (a sample too), and
    ``stats["sha256"]`` gets its sha256 from that read (``_source_lines``)."""
    buf: list[str] = []
    for i, source in enumerate(sources):
        share = None if max_lines is None else _share(max_lines, stats["lines"], i, len(sources))
        taken = 0
        counts = {"replaced_chars": 0, "skipped_bad_rows": 0, "cr_line_ends": 0}
        if progress_lines and share != 0:  # a whole source takes a minute or more (the mirror's books): said first
            progress_said(f"tokenizer: reading {source} ({_source_size(source)}"
                          f"{'' if share is None else f', up to {share:,} lines'}; {i + 1} of {len(sources)} sources)")
        with _source_lines(source, skip_bad_rows, counts, stats.setdefault("sha256", {})) as lines:
            for line in lines if share != 0 else ():
                if not line.strip():
                    continue
                buf += _trainer_pieces(line, stats)
                taken += 1
                stats["chars"] += len(line)
                if len(buf) >= batch:
                    yield buf
                    buf = []
                if share is not None and taken >= share:
                    break
        stats["lines"] += taken
        stats["per_source"][source] = taken
        if progress_lines:
            progress_said(f"tokenizer: read {source} ({taken:,} lines; {i + 1} of {len(sources)} sources)")
        if counts["replaced_chars"]:
            log.warning("%s", replaced_warning(source, counts))
            stats.setdefault("replaced", {})[source] = counts["replaced_chars"]
    if buf:
        yield buf
    if progress_lines:
        progress_said(f"tokenizer: learning the merges from {stats['lines']:,} lines")


def train_tokenizer(
    files: list[str],
    out_dir: str,
    vocab_size: int = 50265,
    min_frequency: int = 2,
    max_lines: int | None = None,
    show_progress: bool = True,
    overwrite: bool = False,
    skip_bad_rows: bool = False,
) -> str:
    """Train a byte-level BPE on `files` (.txt or .txt.gz, globs allowed) and save it to `out_dir`.

    `files` may also name hub datasets (hf:<name>[:<config>], their `text` column, as prepare_corpus reads them).
    `max_lines` trains on a sample of that many non-empty lines, spread over the sources (an equal share of each,
    from its start; a sample is enough for the merges of a large corpus). Returns `out_dir`. The save is atomic
    (``atomic.atomic_dir``) and checked by an encode/decode round trip before it replaces `out_dir`, which follows the
    output rule (``outputs.check_output_dir``): an earlier tokenizer trained with the same settings is replaced, one
    trained from the same texts at other paths too (``io.moved_output``), anything else there is refused unless
    `overwrite`. The training runs in a child process (``_in_child``): Ctrl-C
    or SIGTERM stops it at once (``signals.signals_stop``: a `stopped:` line, 128 + the signal), and nothing is
    written; a rerun trains from the start.
    Each file is read once, by the training, which takes its sha256 and checks a .gz file to its end in that read (a
    sample's too): a damaged one raises CorpusError before the merges are learnt. The text is read as prepare_corpus
    reads it (``io.checked_lines``: a line with a NUL byte is a CorpusError unless `skip_bad_rows`). A vocabulary that comes
    out smaller than `vocab_size` (too little text, or `min_frequency` too high) is said in a warning line.
    """

    for key, value in (("vocab_size", vocab_size), ("min_frequency", min_frequency), ("max_lines", max_lines)):
        if not (value is None and key == "max_lines") and \
                (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"{key}={value!r} must be a whole number of at least 1.")
    if vocab_size > LARGEST_VOCAB:
        raise ConfigError(f"vocab_size={vocab_size:,} is above {LARGEST_VOCAB:,}: the BPE trainer reserves memory "
                          "by the size asked for and would abort the process; the largest vocabularies in use hold "
                          "about 250,000 tokens.")
    if vocab_size < SMALLEST_VOCAB:  # the trainer would quietly give SMALLEST_VOCAB tokens
        raise ConfigError(f"vocab_size={vocab_size} is below the smallest byte-level BPE vocabulary, {SMALLEST_VOCAB} "
                          f"(256 bytes and {len(SPECIAL_TOKENS)} special tokens): ask for at least {SMALLEST_VOCAB}.")

    with signals_stop(STOPPED):  # SIGTERM as Ctrl-C: hashing or training stops at once, nothing is written
        settings = {"files": list(files), "vocab_size": vocab_size, "min_frequency": min_frequency, "max_lines": max_lines}
        # recorded only when set: without it a binary line stops the run, so the tokenizers trained before it was a
        # setting are the ones trained with it false
        record = made_by("train_tokenizer", settings | ({"skip_bad_rows": True} if skip_bad_rows else {}))

        # each file is read once, by the training (its sha256 and a .gz file's check to its end in that read), unless
        # a check before it needs its sha256: a file of another's size (a copy?) or an output of these settings but
        # for the texts' paths at out_dir (``io.moved_output``)
        check_hub_sources(files)  # offline, a hub source not in the datasets cache is refused before any is read
        texts = source_texts(files, hashed=False)
        # a killed build's temporary and lock, whichever tokenizer of the folder it built (its own output's are removed
        # by its next build, the others' by none)
        for left in remove_dead_builds(Path(out_dir).parent):
            log.info("removed %s, left by a build that was killed", left)
        sources = [s.path or s.given for s in texts]
        # the same texts at other paths (another data mirror) are the same tokenizer's: replaced as its own settings' are
        moved = moved_output(out_dir, record, texts, _placeless, "the tokenizer")
        with building_alone(out_dir):  # a second build of this output meanwhile: refused, not run twice
            check_output_dir(out_dir, moved or record, overwrite, reads=sources, key="out_dir=")  # before training, which can take minutes
            t0 = time.perf_counter()
            # a log file gets a plain line per source read (``progress.progress_to_log_file``), not the Rust trainer's bar
            lines = show_progress and progress_to_log_file()
            trained, stats = _in_child(_train_bpe, sources, max_lines, skip_bad_rows, vocab_size, min_frequency,
                                       show_progress and not lines, lines)
            for text in texts:
                if text.path is not None:  # the training's read: the bytes it trained on
                    text.sha256 = stats["sha256"][text.path]
            record["sources"] = text_records(texts)
            hf_tok = _roberta_tokenizer(trained)
            seconds = time.perf_counter() - t0
            if stats["lines"] == 0:
                raise CorpusError(f"empty corpus: no non-empty line in {sources}")

            out = Path(out_dir)
            with atomic_dir(out, record, overwrite, replaces=moved, key="out_dir=") as tmp:
                hf_tok.save_pretrained(str(tmp))
                probe = "Hello world, this is a tokenizer round trip."
                loaded = load_tokenizer(str(tmp), "out_dir")
                enc = loaded(probe)["input_ids"]
                if enc[0] != 0 or enc[-1] != 2 or loaded.decode(enc, skip_special_tokens=True) != probe:
                    raise RuntimeError(f"saved tokenizer does not round-trip: {enc[:10]}")
                check_inputs_unchanged(text_states(texts))  # trained on the texts its manifest's sha256 are of
    lines_per_s, mb_per_s = round(stats["lines"] / max(seconds, 1e-9)), stats["chars"] / 1e6 / max(seconds, 1e-9)
    say(f"tokenizer: {stats['lines']:,} lines ({_read_from(stats['per_source'])}), {stats['chars'] / 1e6:.1f} M "
        f"chars in {seconds:.1f} s "
        f"({lines_per_s:,} lines/s, {round(mb_per_s, 2)} M chars/s), vocab {len(loaded)} -> {out}"
        f"{replaced_clause(stats.get('replaced', {}))}", logger=log)
    if stats["cut"]:
        say(f"note: {stats['cut']:,} run(s) of text without a break (pre-tokens over {LONGEST_PRETOKEN} characters, "
            f"the longest {stats['longest_cut']:,}: a '=====' rule, base64, a long repeat) were given to the BPE "
            f"trainer in pieces of {LONGEST_PRETOKEN} characters: its time grows with the square of a word's length, "
            "and no merge is that long. The tokenizer encodes such runs as any text.", logging.WARNING, log)
    if len(loaded) < vocab_size:
        say(f"warning: the vocabulary came out at {len(loaded)} tokens, not the vocab_size={vocab_size} asked: no "
            f"further pair of tokens occurs min_frequency={min_frequency} times in the {stats['lines']:,} lines "
            "read. Lower min_frequency or train on more text (files, max_lines) for the full vocabulary.",
            logging.WARNING, log)
    return str(out)


def trained_texts_differ(tokenizer_dir: str | Path, files: list[str]) -> str | None:
    """How the texts `files` give differ from those the tokenizer train_tokenizer saved at `tokenizer_dir` was trained
    from, in words (by content, sha256, as a corpus compares its sources: ``io.text_changes``); None when they
    are the same texts, at any paths. A tokenizer recorded without its texts' sha256 is compared by its files' paths.
    Sources that cannot be read differ (the command that reads them says why)."""

    made = read_json(Path(tokenizer_dir) / MANIFEST)
    if "sources" not in made:
        recorded = list(map(str, (made.get("settings") or {}).get("files") or []))
        return None if sorted(recorded) == sorted(map(str, files)) else f"files {listing(recorded)}"
    try:
        texts = source_texts(files)
    except (FileNotFoundError, LinformerError) as err:
        return str(err)
    return text_changes(made["sources"], texts)[0]


# The settings a tokenizer's manifest records besides its files, each with the value it has where it is not recorded
# (skip_bad_rows is recorded only when set)
TRAINED_SETTINGS = {"vocab_size": None, "min_frequency": None, "max_lines": None, "skip_bad_rows": False}


def trained_otherwise(tokenizer_dir: str | Path, files: list[str], settings: Mapping) -> str | None:
    """How the tokenizer at `tokenizer_dir` differs from the one ``train_tokenizer(files, **settings)`` trains now, in
    words: not train_tokenizer's, a setting its manifest records (TRAINED_SETTINGS), or its texts
    (``trained_texts_differ``, by content); None when it is that tokenizer, its texts at any paths."""
    made = read_json(Path(tokenizer_dir) / MANIFEST)
    if made.get("command") != "train_tokenizer":
        return f"{Path(tokenizer_dir) / MANIFEST} does not say train_tokenizer trained it"
    recorded = made.get("settings") or {}
    changed = [f"{key}={recorded.get(key, default)!r}, not {settings[key]!r}" for key, default in TRAINED_SETTINGS.items()
               if key in settings and recorded.get(key, default) != settings[key]]
    if changed:
        return f"trained with {', '.join(changed)}"
    return trained_texts_differ(tokenizer_dir, files)


def _placeless(settings: Mapping) -> dict:
    """A tokenizer's settings without where its texts were (``io.moved_output``)."""
    return {k: v for k, v in settings.items() if k != "files"}


def _read_from(per_source: dict[str, int]) -> str:
    """Where a tokenizer's lines came from, for its output line: each source's name and count."""
    return "from " + listing([f"{Path(s).name if not is_hub_source(s) else s} {n:,}" for s, n in per_source.items()])


def _train_bpe(sources: list[str], max_lines: int | None, skip_bad_rows: bool, vocab_size: int, min_frequency: int,
               show_progress: bool, progress_lines: bool = False) -> tuple[str, dict]:
    """A byte-level BPE trained on the lines of `sources` (``_iter_line_batches``), as the Rust tokenizer's JSON, and
    the counts of what was read (lines, chars, per_source); `show_progress` draws the trainer's bar, `progress_lines`
    prints a plain line as each source is read and as the merges are learned (a log file). The special tokens are only added to the vocabulary: a
    "<s>" in the text is trained on as text, as prepare_corpus encodes it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    stats = {"lines": 0, "chars": 0, "per_source": {}, "cut": 0, "longest_cut": 0}
    tok.train_from_iterator(_iter_line_batches(sources, max_lines, stats, skip_bad_rows, progress_lines=progress_lines),
                            trainer=trainer)
    return tok.to_str(), stats


def _roberta_tokenizer(trained: str):
    """A RobertaTokenizer from a trained byte-level BPE's JSON, the special tokens at ids 0-3 (<s>, <pad>, </s>,
    <unk>) and <mask> stripping the space before it, as RoBERTa's."""
    from transformers import AddedToken, RobertaTokenizer

    model = json.loads(trained)["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    hf_tok = RobertaTokenizer(
        vocab=model["vocab"],
        merges=merges,
        mask_token=AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True),
    )
    ids = [hf_tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS[:4]]
    if ids != [0, 1, 2, 3]:
        raise RuntimeError(f"special token ids are {ids}, expected [0, 1, 2, 3]")
    return hf_tok


def _in_child(work, *args, poll_s: float = 0.2):
    """``work(*args)`` in a forked child process while this one waits in short polls; its result, or its exception,
    is handed back. Python runs a signal handler only between bytecodes of the main thread, so Ctrl-C during a long
    call into native code (the Rust BPE trainer: minutes to an hour on a large corpus) would wait for the call to
    end; here it stops the child at once, and nothing is left running (the child also dies with this process:
    ``workers.children_die_with_parent``, which leaves Ctrl-C to this process)."""
    import multiprocess

    ctx = multiprocess.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    with children_die_with_parent():
        child = ctx.Process(target=_child_main, args=(send, work, args), name="bpe-training", daemon=True)
        child.start()
    send.close()
    try:
        while not receive.poll(poll_s):
            if not child.is_alive() and not receive.poll():
                raise RuntimeError(f"the tokenizer's training process ended without a result (exit code "
                                   f"{child.exitcode}); see its messages above")
        ok, value = receive.recv()
    finally:
        if child.is_alive():
            child.kill()
        child.join()
    if not ok:
        raise value
    return value


def _child_main(send, work, args) -> None:
    try:
        outcome = (True, work(*args))
    except BaseException as err:  # handed to the parent, which raises it
        outcome = (False, err)
    send.send(outcome)


# The files a tokenizer directory may hold (byte-level BPE, WordPiece, SentencePiece): one of them makes a folder a
# tokenizer to load (here, and in modeling/loading.py's resolve_tokenizer_dir)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model")
# Those that hold the vocabulary: without one, transformers builds a tokenizer of the special tokens alone (5 tokens)
_VOCABULARY_FILES = tuple(name for name in TOKENIZER_FILES if name != "tokenizer_config.json")
# The JSON files of a saved tokenizer that transformers parses, and the keys its tokenizer.json must have (the Rust
# tokenizer's model, and the added tokens transformers reads from it itself)
_TOKENIZER_JSON = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "vocab.json")
_TOKENIZER_KEYS = ("model", "added_tokens")


def _recover() -> str:
    """How a damaged tokenizer is made whole again, for its errors."""
    return ("copy the tokenizer files back from an intact copy (the tokenizer directory the model was trained with), "
            f"or train it again ({script_command('train_tokenizer')} with the settings it was trained with)")


def load_tokenizer(name_or_dir: str, key: str = "tokenizer_dir"):
    """``AutoTokenizer.from_pretrained(name_or_dir)``, never running the folder's own code (``load_auto``), encoding a
    special token's text in its input as text (``texts_as_text``): the one way the package loads a tokenizer. A local folder without tokenizer files is a CheckpointError naming the folder
    and ``key``; a load that fails, or gives the special tokens alone (transformers' quiet fallback), one naming the
    damaged file (``check_tokenizer_dir``, parsed only then) or the folder and ``key``; a tokenizer class that does not
    load the folder's tokenizer.json as it is saved there, one naming the file and key that chose the class
    (``_check_rebuilt``); a hub name goes to the hub as given."""
    folder = Path(name_or_dir)
    if not folder.is_dir():
        from transformers import AutoTokenizer

        from .io import load_auto

        unusable = (f"{key}={name_or_dir!r}: the hub's tokenizer cannot be used here, the tokenizers library "
                    "panics {doing} it ({why}): give a local model directory with a tokenizer that loads.")
        try:
            with panic_reports_dropped():
                loaded = load_auto(AutoTokenizer, str(name_or_dir))
        except OSError as err:  # the hub's own retries failed (no network), or it has no such repo
            why = first_line(err)
            raise HubOfflineError(f"{key}={name_or_dir!r} is not a folder here, and its tokenizer could not be read "
                                  f"from the hub ({why}): give a local model directory, or check the name and the "
                                  "network.") from err
        except BaseException as err:
            if not is_panic(err):
                raise
            raise CheckpointError(unusable.format(doing="reading", why=first_line(err))) from err
        _check_encodes(loaded, lambda why: unusable.format(doing="encoding a text with", why=why))
        return texts_as_text(loaded)
    return texts_as_text(_load_folder(folder, key))


def word_cut(text: str, start: int, limit: int) -> int | None:
    """Where to cut `text` at most `limit` characters after `start` so that the encodings of the parts, joined, are
    the text's: just before a space that a non-space character follows (after `start`), where the byte-level BPE,
    WordPiece and Metaspace pre-tokenizers start a word anyway (elsewhere in a run of whitespace, BPE would split the
    run otherwise; a space that ends the text has no character after it). None where that stretch has no such space
    (not prose)."""
    cut = text.rfind(" ", start + 1, start + limit + 1)
    while cut > start and (cut + 1 == len(text) or text[cut + 1].isspace()):
        cut = text.rfind(" ", start + 1, cut)
    return cut if cut > start else None


def piece_ends(text: str, start: int, limit: int) -> Iterator[int]:
    """Where each piece of `text` after `start` ends, a piece of at most `limit` characters cut at ``word_cut``
    (a stretch with no such space at `limit`), the last at the text's end: the pieces whose encodings, joined, are
    the text's (``corpus.paragraph_pieces``)."""
    while len(text) - start > limit:
        start = word_cut(text, start, limit) or start + limit
        yield start
    if start < len(text):
        yield len(text)


def _tokens(tokenizer, text: str) -> int:
    """The tokens of `text` alone, special tokens aside, as task encoding reads it (split_special_tokens)."""
    return len(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def _prefix_end(tokenizer, text: str, tokens: int, chars: int) -> tuple[int, int | None]:
    """``encoded_prefix``'s prefix as its end, with its tokens (None where it is the whole text, not tokenized)."""
    while len(text) > chars:
        cut = word_cut(text, 0, chars)
        have = _tokens(tokenizer, text[:cut or chars])
        if have >= tokens + (0 if cut else 64):
            return cut or chars, have
        chars *= 2
    return len(text), None


def encoded_prefix(tokenizer, text: str, tokens: int, chars: int) -> str:
    """The shortest prefix of `text` tried whose first `tokens` tokens (special tokens aside) are the whole text's,
    so that truncating a long text (a book in one row) costs time and memory in the tokens kept, not in the text's
    length: the text cut at ``word_cut`` within `chars` characters (from a bound in the vocabulary's longest entry:
    ``Encode``), kept where its encoding holds `tokens` tokens, else a cut twice as far (the whitespace and the
    characters the tokenizer deletes take no token, a word WordPiece finds no piece of is one [UNK] however long).
    A stretch with no such space (one unbroken run of characters) is cut at `chars` and kept where its encoding holds
    64 tokens more than `tokens`: a cut inside a word changes only the tokens at the word's end."""
    return text[:_prefix_end(tokenizer, text, tokens, chars)[0]]


def encoded_prefixes(tokenizer, pair: tuple[str, str], tokens: int, chars: int) -> tuple[str, str]:
    """``encoded_prefix`` of each text of a pair (a text of `chars` characters or fewer whole), that of the text
    whose whole has more tokens extended a piece at a time until it has more too (the second's, until it has as
    many), because "longest_first" truncation gives the odd token of an odd budget to the longer text (the second
    at a tie): the ids are the whole pair's. The whole texts' tokens are compared in pieces (``piece_ends``: their
    encodings joined are the text's where the tokenizer starts a word at a space, ``word_cut``), each counted alone,
    as far as the shorter whole's end: time in the shorter text, memory in a piece; the pair is given prefixes of
    about the other's tokens and a piece at most (its truncation builds overflowing windows in the product of the
    two lengths), a text whole only where it has about as few tokens. A stretch of `chars` characters with no space
    to cut before (not prose) is counted in pieces cut inside a word: near the whole's count, not exact."""
    ends, have = [], []
    for text in pair:
        end, n = _prefix_end(tokenizer, text, tokens, chars) if len(text) > chars else (len(text), None)
        ends.append(end)
        have.append(_tokens(tokenizer, text[:end]) if n is None else n)

    def more(i: int, end: int) -> Iterator[tuple[int, int]]:  # text i's pieces after `end`: (end, tokens) each
        for cut in piece_ends(pair[i], end, chars):
            yield cut, _tokens(tokenizer, pair[i][end:cut])
            end = cut

    counted, rest = list(have), [more(0, ends[0]), more(1, ends[1])]
    while True:  # count on the text behind (the first at a tie) until one that is behind has no more
        behind = 0 if counted[0] <= counted[1] else 1
        step = next(rest[behind], None)
        if step is None:
            break
        counted[behind] += step[1]
    longer, other = 1 - behind, behind  # longer: the first only where its whole has more tokens than the second's
    extra = more(longer, ends[longer])
    while have[longer] < have[other] + (longer == 0):
        step = next(extra, None)
        if step is None:
            break
        ends[longer], have[longer] = step[0], have[longer] + step[1]
    return pair[0][:ends[0]], pair[1][:ends[1]]


def texts_as_text(tokenizer, as_text: bool = True):
    """`tokenizer`, encoding a special token's text in the input as text (transformers' split_special_tokens, an init
    setting ``save_pretrained`` writes to tokenizer_config.json): a "<s>" (HTML strikethrough), "</s>", "<mask>" or
    "[SEP]" in a review is not a separator, a mask or padding, as the corpus encodes it (``corpus.raw_tokenizer``);
    a model the package saves keeps it for a user's pipeline or tokenizer call (``saving.save_tokenizer``; a masked
    LM's is saved with `as_text` False, for its fill-mask input's "<mask>"). The package's own task encoding asks
    for it in each call (``task_loading``), whatever tokenizer it is given."""
    tokenizer.split_special_tokens = as_text
    if isinstance(getattr(tokenizer, "init_kwargs", None), dict):
        tokenizer.init_kwargs["split_special_tokens"] = as_text
    return tokenizer


def _load_folder(folder: Path, key: str, saved: Mapping | None = None):
    """``load_tokenizer`` of a local folder; `saved`: its tokenizer.json's mapping where the caller parsed it."""
    from transformers import AutoTokenizer

    from .io import load_auto

    _check_tokenizer_files(folder, key)
    config = folder / "tokenizer_config.json"
    if config.is_file():  # a few hundred bytes; transformers would load an unknown class as a generic tokenizer
        _check_tokenizer_class(config, _tokenizer_json(config))
    try:
        with panic_reports_dropped():
            loaded = load_auto(AutoTokenizer, str(folder))
    except LinformerError:  # says what is wrong: a folder asking to run its own code is not damaged
        raise
    except BaseException as err:
        # the Rust tokenizer's own parse errors are plain Exceptions, or its panics on a file written by hand;
        # anything more specific is not the files' fault (nor Ctrl-C, nor an exit)
        if not (is_panic(err) or type(err) is Exception or isinstance(err, (ValueError, KeyError, TypeError, OSError))):
            raise
        check_tokenizer_dir(folder, key)  # names the damaged file where its parse does
        if _loads_as_saved(folder):  # intact files: the class named for them is another kind of tokenizer
            raise CheckpointError(f"{_class_choice(folder)} cannot load the {folder / 'tokenizer.json'} beside it "
                                  f"({first_line(err)}): it is another kind of tokenizer. {_RIGHT_CLASS}") from err
        raise CheckpointError(f"{folder} ({key}): its tokenizer cannot be loaded, a file of it is damaged "
                              f"({first_line(err)}): {_recover()}.") from err
    if len(loaded.get_vocab()) <= len(loaded.added_tokens_decoder):
        # transformers' quiet fallback, a tokenizer of the special tokens alone, from files it could not read: only
        # then are they parsed here (a load reads tokenizer.json once), to name the damaged one
        check_tokenizer_dir(folder, key)
        raise CheckpointError(f"{folder} ({key}): its tokenizer loads with no vocabulary beyond its "
                              f"{len(loaded.added_tokens_decoder)} special tokens, a file of it is damaged: {_recover()}.")
    _check_rebuilt(folder, loaded, saved)
    where = folder / "tokenizer.json" if (folder / "tokenizer.json").is_file() else folder
    _check_encodes(loaded, lambda why: f"{where} is damaged: the tokenizers library panics encoding a text with it "
                                       f"({why}): {_recover()}.")
    return loaded


def _check_encodes(loaded, refusal) -> None:
    """CheckpointError(`refusal(why)`) where the loaded fast tokenizer's Rust code panics (``native.is_panic``)
    encoding a text and a pair with special tokens: a tokenizer.json written by hand that the tokenizers library reads
    without a word (a TemplateProcessing naming a special token it does not list) is refused at its load, not a
    traceback in a corpus's packing or a run's first batch. Microseconds. An ordinary error is left to the real call,
    which raises it in its own words."""
    if not _is_fast(loaded):
        return
    with panic_reports_dropped():
        for texts in (("a b",), ("a b", "c")):  # a text, a pair: each has a template of its own
            try:
                loaded.backend_tokenizer.encode(*texts, add_special_tokens=True)
            except Exception:  # not a panic: the call that meets it says it
                continue
            except BaseException as err:
                if not is_panic(err):
                    raise
                raise CheckpointError(refusal(first_line(err))) from err


# What a refusal of a tokenizer class says to do
_RIGHT_CLASS = ("Set tokenizer_class in its tokenizer_config.json to the class the tokenizer was saved with "
                "(RobertaTokenizer for one train_tokenizer trained), or to TokenizersBackend, which reads "
                "tokenizer.json as it is.")


def _check_rebuilt(folder: Path, loaded, saved: Mapping | None = None) -> None:
    """CheckpointError naming the file and key that chose the class (``_class_choice``) where `loaded`, the folder's
    tokenizer as transformers loads it, is not the tokenizer its tokenizer.json holds: transformers 5 rebuilds the
    tokenizer from the vocabulary with the class's own normalizer, pre-tokenizer and post-processor, so a class of
    another kind (BertTokenizer beside a byte-level BPE) quietly gives other ids. Alike (``_alike``): the same kinds
    of component, vocabulary, merges and added tokens, differing at most in the switches tokenizer_config.json's
    settings set (do_lower_case, add_prefix_space). A folder without tokenizer.json has nothing to compare. The file
    is parsed here once more (`saved`: already parsed); where its JSON is written as an older tokenizers library
    wrote it, it is compared as the library reads it now."""
    path = folder / "tokenizer.json"
    if not path.is_file() or not _is_fast(loaded):
        return
    text = None
    if saved is None:
        text = path.read_text(encoding="utf-8")
        saved = json.loads(text)
    ours = json.loads(loaded.backend_tokenizer.to_str())
    differ = [part for part in ENCODING_PARTS if not _alike(saved.get(part), ours.get(part), part)]
    if differ:  # as the tokenizers library reads the file now (an older file's keys and layout are converted)
        saved = json.loads(_rust_tokenizer(path, text or path.read_text(encoding="utf-8")).to_str())
        differ = [part for part in ENCODING_PARTS if not _alike(saved.get(part), ours.get(part), part)]
    if differ:
        words = [_rebuilt_part(part, saved.get(part), ours.get(part)) for part in differ]
        raise CheckpointError(f"{_class_choice(folder)} loads {path} as {type(loaded).__name__}, which rebuilds it "
                              f"otherwise than it is saved ({'; '.join(words)}) and may give a text other ids. "
                              f"{_RIGHT_CLASS}")


# Settings of a tokenizer's components that tokenizer_config.json may switch (Metaspace's prepend_scheme follows
# add_prefix_space): their values may differ between a tokenizer.json and the tokenizer loaded from it
_SWITCHES = ("prepend_scheme",)
# Settings whose unset value (null) works as one value of theirs, giving the same ids: a BPE's empty prefix or suffix
# adds nothing to a piece, and a dropout of 0 drops no merge (a tokenizer built with the tokenizers library saves null
# where transformers' rebuilt one has "" and 0.0). Another value, or null against "##", changes the ids.
_UNSET_AS = {"continuing_subword_prefix": "", "end_of_word_suffix": "", "dropout": 0.0}


def _alike(a, b, key: str = "") -> bool:
    """Whether the part `b` of a loaded tokenizer's serialisation is `a`, its tokenizer.json's, but for switches:
    true, false or unset (or a _SWITCHES value), which tokenizer_config.json's settings may change; merges written
    as "a b" or [a, b] alike; unset and the value that means the same (_UNSET_AS) alike."""
    if key == "merges" and isinstance(a, list) and isinstance(b, list):
        return [m.split(" ", 1) if isinstance(m, str) else list(m) for m in a] == \
            [m.split(" ", 1) if isinstance(m, str) else list(m) for m in b]
    if key == "vocab":
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_alike(a.get(k), b.get(k), k) for k in a.keys() | b.keys())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_alike(x, y, key) for x, y in zip(a, b))
    switch = (None, True, False)
    if key in _UNSET_AS and None in (a, b):
        a, b = (_UNSET_AS[key] if v is None else v for v in (a, b))
    return a == b or (a in switch and b in switch) or (key in _SWITCHES and {type(a), type(b)} <= {str, type(None)})


def _rebuilt_part(part: str, saved, loaded, width: int | None = None) -> str:
    """How a part of a loaded tokenizer differs from its tokenizer.json's, in words: its kind where that differs
    (model WordPiece against BPE), else ``part_differences``' words, cut short; with `width`, words longer than it
    are the part's name alone ("added_tokens differ")."""
    kinds = [(value or {}).get("type", "none") if isinstance(value, dict) or value is None else None
             for value in (saved, loaded)]
    if None not in kinds and kinds[0] != kinds[1]:
        return f"{part} {kinds[1]} against {kinds[0]}"
    if isinstance(saved, dict) and isinstance(loaded, dict):  # the settings that differ, not those alike (_alike)
        differ = [k for k in saved.keys() | loaded.keys() if not _alike(saved.get(k), loaded.get(k), k)]
        saved, loaded = ({k: v for k, v in d.items() if k in differ} for d in (saved, loaded))
    words = part_differences({part: saved}, {part: loaded})[0]
    if width is not None:
        sizes = re.sub(r", sha256 [0-9a-f]+", "", words)  # recorded vocabularies of other sizes: the sizes say it
        words = sizes if sizes.count(" against ") == 1 and len(set(sizes.split(": ", 1)[-1].split(" against "))) == 2 \
            else words
        return words if len(words) <= width else f"{part} differ" + ("" if part.endswith("s") else "s")
    return words if len(words) <= 160 else words[:157] + "..."


def brief_differences(a: dict, b: dict, width: int = 60) -> list[str]:
    """``part_differences`` short enough for one error line: each part that differs by its kind where that differs
    (pre_tokenizer BertPreTokenizer against ByteLevel), else by its words where they fit in `width` characters, else
    by its name (a whole tokenizer of another family differs in every part)."""
    return [_rebuilt_part(part, a.get(part), b.get(part), width) for part in dict.fromkeys([*a, *b])
            if a.get(part) != b.get(part)]


def _loads_as_saved(folder: Path) -> bool:
    """Whether transformers loads the folder's tokenizer.json as it is, without a class of its own (TokenizersBackend):
    then its files are intact and a load that failed failed for its class."""
    if not (folder / "tokenizer.json").is_file():
        return False
    from transformers import TokenizersBackend

    try:
        with panic_reports_dropped():
            TokenizersBackend.from_pretrained(str(folder))
    except BaseException as err:  # the tokenizers library's errors are plain Exceptions, or panics
        if isinstance(err, Exception) or is_panic(err):
            return False
        raise
    return True


def _class_choice(folder: Path) -> str:
    """The file and key that chose the tokenizer class transformers loads `folder` with, in words: tokenizer_config.json's
    tokenizer_class, else config.json's, else config.json's model_type; else the folder."""
    for name, key in (("tokenizer_config.json", "tokenizer_class"), ("config.json", "tokenizer_class"),
                      ("config.json", "model_type")):
        value = read_json(folder / name).get(key)
        if value:
            return f"{folder / name}: {key} {value!r}"
    return f"{folder}: the tokenizer class transformers chooses"


def check_tokenizer_dir(folder: str | Path, key: str = "tokenizer_dir") -> dict | None:
    """CheckpointError unless the local `folder` holds a tokenizer whose JSON files parse: it names the folder when it
    holds no tokenizer file, else the first damaged file, and says how to recover. Returns its tokenizer.json's
    mapping (None without one), parsed once."""
    folder = Path(folder)
    _check_tokenizer_files(folder, key)
    parsed = {name: _tokenizer_json(folder / name) for name in _TOKENIZER_JSON if (folder / name).is_file()}
    _check_tokenizer_class(folder / "tokenizer_config.json", parsed.get("tokenizer_config.json") or {})
    return parsed.get("tokenizer.json")


def _check_tokenizer_files(folder: Path, key: str) -> None:
    """CheckpointError naming the folder where it holds no tokenizer file, or none of its vocabulary's."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(
            f"{folder} has no tokenizer ({', '.join(TOKENIZER_FILES)}): copy into it the files of the tokenizer the "
            "model was trained with (its pretraining run's tokenizer_dir, e.g. data/tokenizers/<name>/), or give "
            f"{key} a folder that has them."
        )
    if not any((folder / name).is_file() for name in _VOCABULARY_FILES):
        raise CheckpointError(f"{folder} holds an incomplete tokenizer: none of {', '.join(_VOCABULARY_FILES)}, which "
                              f"hold its vocabulary: {_recover()}.")


def _check_tokenizer_class(path: Path, config: Mapping) -> None:
    """CheckpointError naming `path` and its key where tokenizer_config.json's ``tokenizer_class`` names no class
    transformers knows: transformers would load the folder as a generic tokenizer without a word (its special tokens'
    handling, its pair layout not the named one's). Absent or null is transformers' own choice from the files; a
    class of the folder's own code (``auto_map``) is ``io.load_auto``'s refusal."""
    name = config.get("tokenizer_class")
    if name is None or "auto_map" in config:
        return
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    if not isinstance(name, str) or tokenizer_class_from_name(name) is None:
        raise CheckpointError(f"{path}: tokenizer_class {name!r} is not a tokenizer class transformers knows (such as "
                              "RobertaTokenizer or BertTokenizer, the class of the tokenizer the folder holds): correct "
                              "it, remove the key (transformers then chooses from the files), or "
                              f"{_recover()}.")


def _tokenizer_json(path: Path) -> dict:
    """The mapping in a saved tokenizer's JSON file `path`, or a CheckpointError naming the file as damaged."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is damaged: it is not valid JSON ({first_line(err)}; "
                              f"{path.stat().st_size} bytes): {_recover()}.") from err
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} is damaged: it holds a JSON {type(data).__name__}, not the mapping every saved "
                              f"tokenizer's files hold: {_recover()}.")
    if path.name != "tokenizer.json":
        return data
    missing = [key for key in _TOKENIZER_KEYS if key not in data]
    if missing:
        raise CheckpointError(f"{path} is damaged: it lacks {', '.join(missing)}, which every saved tokenizer has: "
                              f"{_recover()}.")
    _rust_tokenizer(path, text)  # transformers would quietly build a tokenizer of the special tokens alone from one
    return data                  # the library cannot read


def _rust_tokenizer(path: Path, text: str):
    """The tokenizers library's Tokenizer of `text`, the tokenizer.json `path`'s, or a CheckpointError naming the
    file as damaged: where the library cannot read it (a plain Exception) or panics on it (``native.is_panic``, for a
    file written by hand: a "##" continuing_subword_prefix on a byte-level BPE), one line, without Rust's report."""
    from tokenizers import Tokenizer

    try:
        with panic_reports_dropped():
            return Tokenizer.from_str(text)
    except BaseException as err:
        if not isinstance(err, Exception) and not is_panic(err):
            raise
        why = f"it panics: {first_line(err)}" if is_panic(err) else first_line(err)
        raise CheckpointError(f"{path} is damaged: the tokenizers library cannot read it ({why}): "
                              f"{_recover()}.") from err


def tokenizer_hash(tokenizer_dir: str) -> str:
    """``loaded_identity`` of the tokenizer saved in `tokenizer_dir` (a damaged file is a CheckpointError naming it),
    as ``load_tokenizer`` loads it, with tokenizer_config.json's settings; for a hub name, the hub's tokenizer."""
    folder = Path(tokenizer_dir)
    if _hub_name(str(tokenizer_dir)):
        return _loaded_identity(load_tokenizer(str(tokenizer_dir)), str(tokenizer_dir))
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        given = data_overrides()  # in a command: the tokenizer its data settings name, trained by this one
        at = [f"out_dir={folder}"] if command_line_gives("tokenizer_dir") else []
        train = (f"`{script_command('train_tokenizer')}` with this run's data= and data.* settings" if given is None
                 else f"`{script_command('train_tokenizer', *given, *at)}`")
        raise MissingFileError(
            f"{folder / 'tokenizer.json'} not found: expected a tokenizer directory written by train_tokenizer "
            f"(tokenizer.json + tokenizer_config.json); run {train} first"
        )
    # a corpus or run hashes it first: every file of it is checked then, not later
    saved = check_tokenizer_dir(folder)
    return _loaded_identity(_load_folder(folder, "tokenizer_dir", saved), str(folder), saved)


def _hub_name(name: str) -> bool:
    """Whether `name` is a hub repo rather than a folder: no such path here, not absolute (the settings readers make
    every local path absolute, ``loading.resolve_tokenizer_dir``), and a valid repo id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if Path(name).exists() or Path(name).is_absolute() or name.startswith((".", "~")):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _loaded_identity(loaded, where: str, saved: Mapping | None = None) -> str:
    """``loaded_identity`` of a loaded fast tokenizer; CheckpointError naming `where` for a slow one."""
    if not getattr(loaded, "is_fast", False):
        raise CheckpointError(f"{where} holds a tokenizer transformers loads only as a slow (Python) tokenizer "
                              f"({type(loaded).__name__}): give a folder with a tokenizer.json, or train one "
                              f"({script_command('train_tokenizer')})")
    return loaded_identity(loaded, saved)


# What a loaded tokenizer's encode call (``tokenizer(text, truncation=True, max_length=...)``) reads besides its Rust
# tokenizer (``backend_tokenizer``): which end truncation cuts; tokenizer_config.json may set it. Each with the value
# it has where nothing sets it. Not split_special_tokens: the package's encoding always asks for it (``texts_as_text``)
CALL_SETTINGS = {"truncation_side": "right"}


def loaded_identity(tokenizer, saved: Mapping | None = None) -> str:
    """The one identity of a fast tokenizer as loaded (``load_tokenizer``, which applies tokenizer_config.json's
    settings, do_lower_case or add_prefix_space, to the Rust tokenizer): every cache key and check of what ids a
    tokenizer gives reads it. ``_identity`` of its Rust tokenizer, or of `saved` (its tokenizer.json's
    mapping) where the loaded ENCODING_PARTS are the file's; and the CALL_SETTINGS that differ from their default.
    Both so that a tokenizer whose tokenizer_config.json changes nothing keeps the key the corpora and task caches
    made with it recorded, when the hash read tokenizer.json alone."""
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    if saved is not None and all(saved.get(part) == data.get(part) for part in ENCODING_PARTS):
        data = dict(saved)
    calls = {key: getattr(tokenizer, key, default) for key, default in CALL_SETTINGS.items()
             if getattr(tokenizer, key, default) != default}
    return _identity({**data, "call_settings": calls} if calls else data)


def limit_to(tokenizer, length: int) -> None:
    """`tokenizer` as saved for a model that takes at most `length` tokens, in both of its files:
    ``model_max_length`` (tokenizer_config.json, what transformers cuts at with truncation=True) and, for a fast
    tokenizer, the Rust tokenizer's own state (tokenizer.json, which the tokenizers library applies to every
    ``encode`` as it is): truncation at `length` and no padding, whatever the source's tokenizer.json said (a
    sentence-transformers checkpoint's truncation and fixed padding at 128, say). transformers sets that state per
    call, so its own calls are unchanged; the hash reads it as unset (``_identity``)."""
    tokenizer.model_max_length = length
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        backend.no_padding()
        backend.enable_truncation(max_length=length)


# The parts of a tokenizer's serialisation that decide the ids a text gets (the decoder only turns ids back into text;
# truncation and padding are per-call state, ``_identity``)
ENCODING_PARTS = ("normalizer", "pre_tokenizer", "model", "added_tokens", "post_processor")


def encoding_differences(a, b) -> list[str]:
    """How tokenizer `b` would give a text other ids than `a`, in words (`b`'s setting against `a`'s), one item per
    part (ENCODING_PARTS) that differs: [] when they encode every text alike. The rest of the serialisation is not
    compared: the truncation state ``limit_to`` saves is each model's own n (a student lengthened past its teacher
    records a longer one), and the decoder only turns ids back into text. A slow (Python) tokenizer has no
    serialisation: its vocabulary alone is compared."""
    if not (_is_fast(a) and _is_fast(b)):
        return [] if a.get_vocab() == b.get_vocab() else [_vocabulary_difference(a.get_vocab(), b.get_vocab())]
    return part_differences(_encoding_parts(a), _encoding_parts(b))


def encoding_of(tokenizer) -> dict:
    """What decides the ids `tokenizer` gives a text, small enough to record (a corpus's manifest): its
    ENCODING_PARTS, the model's vocabulary and merges each as its size and sha256; for a slow tokenizer, which has no
    serialisation, its vocabulary alone. Two tokenizers encode alike when ``part_differences`` of theirs is []."""
    if not _is_fast(tokenizer):
        return {"vocabulary": _digest(sorted(tokenizer.get_vocab().items()))}
    parts = _encoding_parts(tokenizer)
    if isinstance(parts["model"], dict):
        parts["model"] = {k: _digest(v) if k in ("vocab", "merges") else v for k, v in parts["model"].items()}
    return parts


def _encoding_parts(tokenizer) -> dict:
    """A fast tokenizer's ENCODING_PARTS as its serialisation gives them."""
    data = json.loads(tokenizer.backend_tokenizer.to_str())
    return {part: data.get(part) for part in ENCODING_PARTS}


def part_differences(a: dict, b: dict) -> list[str]:
    """The parts (ENCODING_PARTS, or ``encoding_of``'s record) in which `b` differs from `a`, in words."""
    return [_part_difference(part, a.get(part), b.get(part)) for part in dict.fromkeys([*a, *b])
            if a.get(part) != b.get(part)]


def _is_fast(tokenizer) -> bool:
    return getattr(tokenizer, "is_fast", False)


def _digest(value) -> str:
    """A large part of a tokenizer (its vocabulary, merges) as recorded: its size and sha256 (first 16 hex)."""
    return f"{len(value)} entries, sha256 {short_digest(value)}"


def _part_difference(part: str, a, b) -> str:
    """One part's difference in words: the vocabulary's count, or the settings that differ (`b`'s value first)."""
    if part == "model" and isinstance(a, dict) and isinstance(b, dict) and a.get("vocab") != b.get("vocab"):
        if isinstance(a.get("vocab"), str) or isinstance(b.get("vocab"), str):  # a recorded digest
            return f"the vocabulary: {b.get('vocab')} against {a.get('vocab')}"
        return _vocabulary_difference(_vocab(a), _vocab(b))
    if part == "vocabulary":
        return f"the vocabulary: {b} against {a}"
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        return f"{part} " + ", ".join(f"{k} {_short(b.get(k))} against {_short(a.get(k))}" for k in keys)
    if part == "added_tokens" and isinstance(a, list) and isinstance(b, list):
        only = [t.get("content") for t in b if t not in a] + [t.get("content") for t in a if t not in b]
        return f"added tokens {', '.join(map(repr, dict.fromkeys(only)))} differ"
    return f"{part} {_short(b)} against {_short(a)}"


def _vocab(model: dict) -> dict:
    """A serialised model's vocabulary as token -> id (a Unigram model lists [token, score] pairs by id)."""
    vocab = model.get("vocab") or {}
    return vocab if isinstance(vocab, dict) else {entry[0]: i for i, entry in enumerate(vocab)}


def _vocabulary_difference(a: dict, b: dict) -> str:
    differ = sum(b.get(token) != i for token, i in a.items()) + len(b.keys() - a.keys())
    return f"the vocabulary: {len(b)} tokens against {len(a)}, {differ} differing"


def _short(value, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[:width - 3] + "..."


def _identity(data: dict) -> str:
    """The one hash of a tokenizer: sha256 (first 16 hex) of its serialisation (tokenizer.json's mapping, or a loaded
    tokenizer's ``backend_tokenizer.to_str()``) as canonical JSON, its truncation and padding state read as unset
    (null, as train_tokenizer saves them): every call with truncation=True rewrites that state, and the same
    tokenizer must hash the same before and after it has encoded. For a tokenizer saved with them unset (as
    train_tokenizer saves it) this is the hash of its tokenizer.json as it stands, the one its corpora and runs record."""
    return short_digest({**data, "truncation": None, "padding": None})
