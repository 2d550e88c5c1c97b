"""Train a RoBERTa-style byte-level BPE tokenizer and save it as a Hugging Face tokenizer directory.

`<s>`, `<pad>`, `</s>`, `<unk>` get ids 0, 1, 2, 3 (RoBERTa's order), `<mask>` is added with lstrip (so
"a <mask>" masks the word including its leading space), and the RoBERTa post-processor adds `<s> ... </s>`
and `<s> a </s></s> b </s>` for pairs. The directory is written by a transformers tokenizer's
`save_pretrained` and is read back with `AutoTokenizer.from_pretrained(out_dir)`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError, CorpusError
from ..files import atomic_dir, check_output_dir, made_by
from .io import expand_sources, open_text, verify_sources

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
SMALLEST_VOCAB = 256 + len(SPECIAL_TOKENS)  # a byte-level BPE holds every byte before its first merge


def _iter_line_batches(files: list[str], max_lines: int | None, stats: dict, batch: int = 1000) -> Iterator[list[str]]:
    """Non-empty lines of every file, in batches (the Rust trainer pre-tokenizes a batch in parallel)."""
    buf: list[str] = []
    for path in files:
        with open_text(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                buf.append(line)
                stats["lines"] += 1
                stats["chars"] += len(line)
                if len(buf) >= batch:
                    yield buf
                    buf = []
                if max_lines is not None and stats["lines"] >= max_lines:
                    if buf:
                        yield buf
                    return
    if buf:
        yield buf


def train_tokenizer(
    files: list[str],
    out_dir: str,
    vocab_size: int = 50265,
    min_frequency: int = 2,
    max_lines: int | None = None,
    show_progress: bool = True,
    overwrite: bool = False,
) -> str:
    """Train a byte-level BPE on `files` (.txt or .txt.gz, globs allowed) and save it to `out_dir`.

    `max_lines` trains on the first that many non-empty lines only (a sample is enough for the merges of a
    large corpus). Returns `out_dir`. The save is atomic (``files.atomic_dir``) and checked by an encode/decode
    round trip before it replaces `out_dir`, which follows the output rule (``files.check_output_dir``): an earlier
    tokenizer trained with the same settings is replaced, anything else there is refused unless `overwrite`.
    A damaged .gz file raises CorpusError before training.
    """
    from transformers import AutoTokenizer

    for key, value in (("vocab_size", vocab_size), ("min_frequency", min_frequency), ("max_lines", max_lines)):
        if not (value is None and key == "max_lines") and \
                (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"{key}={value!r} must be a whole number of at least 1.")
    if vocab_size < SMALLEST_VOCAB:  # the trainer would quietly give SMALLEST_VOCAB tokens
        raise ConfigError(f"vocab_size={vocab_size} is below the smallest byte-level BPE vocabulary, {SMALLEST_VOCAB} "
                          f"(256 bytes and {len(SPECIAL_TOKENS)} special tokens): ask for at least {SMALLEST_VOCAB}.")

    record = made_by("train_tokenizer", {"files": list(files), "vocab_size": vocab_size,
                                         "min_frequency": min_frequency, "max_lines": max_lines})
    check_output_dir(out_dir, record, overwrite)  # before training, which can take minutes
    paths = expand_sources(files)
    verify_sources(paths)
    stats = {"lines": 0, "chars": 0}
    t0 = time.perf_counter()
    hf_tok = _train_bpe(_iter_line_batches(paths, max_lines, stats), vocab_size, min_frequency, show_progress)
    seconds = time.perf_counter() - t0
    if stats["lines"] == 0:
        raise CorpusError(f"empty corpus: no non-empty line in {paths}")

    out = Path(out_dir)
    with atomic_dir(out, record, overwrite) as tmp:
        hf_tok.save_pretrained(str(tmp))
        probe = "Hello world, this is a tokenizer round trip."
        loaded = AutoTokenizer.from_pretrained(str(tmp))
        enc = loaded(probe)["input_ids"]
        if enc[0] != 0 or enc[-1] != 2 or loaded.decode(enc, skip_special_tokens=True) != probe:
            raise RuntimeError(f"saved tokenizer does not round-trip: {enc[:10]}")
    lines_per_s, mb_per_s = round(stats["lines"] / max(seconds, 1e-9)), stats["chars"] / 1e6 / max(seconds, 1e-9)
    log.info("trained tokenizer %s: %s", out, {**stats, "seconds": round(seconds, 2), "vocab_size": len(loaded),
                                                "hash": tokenizer_hash(str(out))})
    print(
        f"tokenizer: {stats['lines']:,} lines, {stats['chars'] / 1e6:.1f} M chars in {seconds:.1f} s "
        f"({lines_per_s:,} lines/s, {round(mb_per_s, 2)} M chars/s), vocab {len(loaded)} -> {out}"
    )
    return str(out)


def _train_bpe(batches, vocab_size: int, min_frequency: int, show_progress: bool):
    """A RobertaTokenizer from a byte-level BPE trained on the text `batches` (lists of lines), the special tokens
    at ids 0-3 (<s>, <pad>, </s>, <unk>) and <mask> stripping the space before it, as RoBERTa's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AddedToken, RobertaTokenizer

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
    tok.train_from_iterator(batches, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
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


def tokenizer_hash(tokenizer_dir: str) -> str:
    """``tokenizer_identity`` of the tokenizer saved in `tokenizer_dir` (its tokenizer.json)."""
    path = Path(tokenizer_dir) / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: expected a tokenizer directory written by train_tokenizer "
            "(tokenizer.json + tokenizer_config.json); run `python scripts/train_tokenizer.py data=<corpus>` first"
        )
    return tokenizer_identity(path.read_text(encoding="utf-8"))


def tokenizer_identity(serialised: str) -> str:
    """The one hash of a tokenizer: sha256 (first 16 hex) of its serialisation (tokenizer.json, or a loaded
    tokenizer's ``backend_tokenizer.to_str()``) as canonical JSON, its truncation and padding state read as unset
    (null, as train_tokenizer saves them): every call with truncation=True rewrites that state, and the same
    tokenizer must hash the same before and after it has encoded. A tokenizer saved with them unset keeps the hash
    its corpora and runs recorded before this function was shared."""
    data = json.loads(serialised)
    data.update(truncation=None, padding=None)
    canon = json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(canon).hexdigest()[:16]
