"""Corpus preparation: read text, tokenize with `datasets.map`, pack into blocks of exactly n tokens.

Packing is RoBERTa FULL-SENTENCES: the paragraphs of a document are joined by the newline token, the documents
of a split are joined by `</s>` into one stream, and the stream is cut into bodies of n - 2 tokens, each
written as `<s> body </s>`. No padding: the last partial body (< n - 2 tokens) of each split is dropped and
counted in the manifest, so `content_tokens = blocks * (n - 2) + dropped_tail_tokens` per split.

The validation split holds whole documents, chosen by a seeded hash of each document's own text, so it is the
same on every run and machine, and an edit of the sources moves only the documents it changes (and, the split
being cut at a share of the tokens, the few at its edge). Output: `datasets.DatasetDict.save_to_disk` layout plus manifest.json,
built in a hidden temp directory next to `out_dir` (``atomic.atomic_dir``) and renamed into place only when
complete. Every .gz source is decompressed to its end once before anything is built, so a damaged file fails
the run, naming the file, even where `max_documents` would stop reading before the damage.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from ..configs import absent_source, command_line_gives, composed_mirror, composed_option, data_overrides, value_origin
from ..errors import ConfigError, CorpusError, DiskFullError
from ..files.atomic import atomic_dir, write_json, written_at
from ..files.hashing import cache_key, check_inputs_unchanged, file_checksums, file_state, input_states
from ..files.locations import resolve_path
from ..files.locks import building_alone, remove_dead_builds
from ..files.mappings import read_json
from ..files.outputs import MANIFEST, check_output_dir, made_by, output_damage
from ..files.storage import free_bytes, mib
from ..files.temporaries import remove_stale_temps
from ..logfile import say
from ..progress import progress_said, progress_to_log_file, said_every, third_party_bars_off
from ..shell import hydra_value, script_command
from ..signals import signals_stop
from .ids import TokenIds, read_token_ids
from .io import (
    CORPUS_LAYOUT,
    SourceText,
    check_hub_sources,
    checked_lines,
    load_hub_text,
    local_path,
    moved_output,
    record_path,
    replaced_clause,
    replaced_warning,
    resolve_sources,
    source_texts,
    text_changes,
    text_states,
)
from .tokenizer import (
    brief_differences,
    check_sequence_room,
    encoding_of,
    load_tokenizer,
    piece_ends,
    tokenizer_hash,
)
from .unigram import corpus_perplexities
from .workers import children_die_with_parent

log = logging.getLogger(__name__)

FORMAT_VERSION = 3  # in every cache key: raised whenever the same sources and settings would give other blocks
# (3: the validation documents chosen by their own text's hash, not by their source file's and their index)
# A paragraph longer than this (characters) is tokenized in pieces: a tokenizer holds about 150 bytes per character
# of the text it encodes, so one 20 MB line would take 3 GB in each worker, and a map batch of pieces at most
# batch_size x 8192 characters.
PIECE_CHARS = 8192
# Seconds between the lines a log file gets while the paragraphs are tokenized, where a terminal gets datasets' bar:
# at a few hundred thousand tokens a second in one process, a large corpus tokenizes for hours.
TOKENIZE_SAID_EVERY_S = 60.0

# The bytes a build's temporary holds at its peak per byte of text: the text once (paragraphs.arrow) and its token
# ids three times at 4 bytes each (tokenized, packed, saved), 1 + 12 x (tokens per byte of text). A byte-level BPE of
# the data groups' vocabularies (8,000 to 50,265 tokens) gives 0.26 to 0.22 tokens a byte of English text: 4.1 to
# 3.6; a full mirror build (50,265) peaked at 3.7 bytes per byte of text, its corpus 0.9. 4.5 leaves a margin above
# both. A smaller vocabulary needs more (1,000 tokens: 0.39 tokens a byte, about 6).
SPACE_PER_TEXT_BYTE = 4.5

STOPPED = "prepare_corpus stopped by {signal} before it finished; nothing was written. Run the same command again."


def _load_hub(src: SourceText):
    ds = load_hub_text(src.given)
    src.sha256 = f"fingerprint:{ds._fingerprint}"
    return ds


def paragraph_pieces(text: str, limit: int | None = None) -> Iterator[str]:
    """`text` in pieces of at most `limit` characters whose encodings, joined, are the text's: each cut is just before
    a space that a non-space character follows (``tokenizer.piece_ends``). A stretch of `limit` characters (default
    PIECE_CHARS) with no such space (not prose) is cut at `limit`."""
    start = 0
    for end in piece_ends(text, 0, limit or PIECE_CHARS):
        yield text[start:end]
        start = end


class _ParagraphWriter:
    """Streams (text, doc, cont) rows into an Arrow IPC file that `datasets.Dataset.from_file` reads; `cont` marks a
    piece that continues the row before it (the same paragraph, joined with no newline)."""

    def __init__(self, path: Path, batch: int = 20000):
        import pyarrow as pa

        self.pa = pa
        self.schema = pa.schema([("text", pa.string()), ("doc", pa.int64()), ("cont", pa.bool_())])
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = pa.ipc.new_stream(self.sink, self.schema)
        self.texts: list[str] = []
        self.docs: list[int] = []
        self.conts: list[bool] = []
        self.batch = batch
        self.rows = 0

    def add(self, text: str, doc: int) -> None:
        """One paragraph of document `doc`, as one row or, when long, as pieces (``paragraph_pieces``)."""
        for i, piece in enumerate(paragraph_pieces(text)):
            self.texts.append(piece)
            self.docs.append(doc)
            self.conts.append(i > 0)
            if len(self.texts) >= self.batch:
                self.flush()

    def flush(self) -> None:
        if self.texts:
            pa = self.pa
            columns = [pa.array(self.texts, pa.string()), pa.array(self.docs, pa.int64()), pa.array(self.conts)]
            self.writer.write_batch(pa.record_batch(columns, schema=self.schema))
            self.rows += len(self.texts)
            self.texts, self.docs, self.conts = [], [], []

    def close(self) -> None:
        self.flush()
        self.writer.close()
        self.sink.close()


class _DocumentKeys:
    """Each document's key as its paragraphs are read: the sha256 of its own text (its paragraphs, each ended by a
    newline), so that the validation split it decides (``_choose_validation``) moves only the documents an edit of
    the sources changes, wherever they are."""

    def __init__(self):
        self.keys: list[str] = []
        self._text = None

    def __len__(self) -> int:
        return len(self.keys)

    def start(self) -> None:
        self.end()
        self.keys.append("")
        self._text = hashlib.sha256()

    def add(self, paragraph: str) -> None:
        self._text.update(paragraph.encode("utf-8", "surrogatepass") + b"\n")

    def end(self) -> None:
        if self._text is not None:
            self.keys[-1], self._text = self._text.hexdigest(), None


def _read_sources(
    srcs: list[SourceText], writer: _ParagraphWriter, skip_bad_rows: bool, max_documents: int | None = None
) -> tuple[list[str], dict]:
    """Write every paragraph with its global document index. Returns (each document's key, ``_DocumentKeys``; totals)."""
    doc_keys = _DocumentKeys()
    totals = {"lines": 0, "replaced_chars": 0, "skipped_bad_rows": 0}
    limit = max_documents if max_documents is not None else float("inf")
    for src in srcs:
        if len(doc_keys) >= limit:
            break
        n_docs0, lines, replaced, bad, cr = len(doc_keys), 0, 0, 0, 0
        if src.path is not None:
            in_doc = False
            counts = {"replaced_chars": 0, "skipped_bad_rows": 0, "cr_line_ends": 0}
            for text in checked_lines(src.path, skip_bad_rows, counts):
                if not text.strip():
                    in_doc = False
                    continue
                if not in_doc:
                    if len(doc_keys) >= limit:
                        break
                    doc_keys.start()
                    in_doc = True
                doc_keys.add(text)
                writer.add(text, len(doc_keys) - 1)
                lines += 1
            replaced, bad, cr = counts["replaced_chars"], counts["skipped_bad_rows"], counts["cr_line_ends"]
        else:
            ds = _load_hub(src)
            for row in ds:
                paras = [p for p in (row["text"] or "").split("\n") if p.strip()]
                if not paras:
                    continue
                if len(doc_keys) >= limit:
                    break
                doc_keys.start()
                for p in paras:
                    doc_keys.add(p)
                    writer.add(p, len(doc_keys) - 1)
                    lines += 1
        doc_keys.end()
        src.stats = {"documents": len(doc_keys) - n_docs0, "lines": lines, "replaced_chars": replaced,
                     "skipped_bad_rows": bad, **({"cr_line_ends": cr} if cr else {})}
        totals["lines"] += lines
        totals["replaced_chars"] += replaced
        totals["skipped_bad_rows"] += bad
        if replaced:
            log.warning("%s", replaced_warning(src.path, counts))
    writer.close()
    return doc_keys.keys, totals


class _Tokenize:
    """Picklable batched tokenizer for `datasets.map` (each worker loads the tokenizer once). Where `counts` is a path,
    each batch appends its rows and tokens to that file (``_TokenizeCounts``, whatever process it runs in)."""

    def __init__(self, tokenizer_dir: str, counts: str | None = None):
        self.tokenizer_dir = tokenizer_dir
        self.counts = counts
        self._tok = None

    def __getstate__(self):
        return {"tokenizer_dir": self.tokenizer_dir, "counts": self.counts, "_tok": None}

    def __call__(self, batch: dict) -> dict:
        if self._tok is None:
            self._tok = raw_tokenizer(load_tokenizer(self.tokenizer_dir))
        ids = [e.ids for e in self._tok.encode_batch_fast(batch["text"], add_special_tokens=False)]
        if self.counts is not None:
            # one short append (O_APPEND: whole, never interleaved with another worker's) per batch of batch_size rows
            fd = os.open(self.counts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, b"%d %d\n" % (len(ids), sum(map(len, ids))))
            finally:
                os.close(fd)
        return {"ids": ids}


class _TokenizeCounts:
    """The progress of the tokenizing of `total` rows, from the "<rows> <tokens>" lines its batches append to `path`
    (``_Tokenize``): the main process reads them, as datasets' bar counts what its workers send back."""

    def __init__(self, path: Path, total: int):
        self.path, self.total = path, total
        self.rows = self.tokens = self._read = 0
        self._start = time.perf_counter()

    def line(self) -> str:
        """What is done so far, e.g. ``corpus: tokenized 300,000 of 684,299 paragraphs (44%), 19,800,000 tokens
        (290,000 tokens/s)``."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read)
                new = f.read()
        except FileNotFoundError:  # no batch done yet
            new = b""
        new = new[:new.rfind(b"\n") + 1]  # a line still being written is read the next time
        self._read += len(new)
        for record in new.splitlines():
            rows, tokens = record.split()
            self.rows += int(rows)
            self.tokens += int(tokens)
        rate = self.tokens / max(time.perf_counter() - self._start, 1e-9)
        return (f"corpus: tokenized {self.rows:,} of {self.total:,} paragraphs ({self.rows / max(self.total, 1):.0%}), "
                f"{self.tokens:,} tokens ({rate:,.0f} tokens/s)")


def raw_tokenizer(tok):
    """The fast tokenizer's backend as corpus text is encoded with it: without the padding and truncation a saved
    tokenizer.json may switch on (sentence-transformers models pad every text to 128), since a corpus is tokenized
    whole, then packed; and with its special tokens' text encoded as text (RoBERTa's raw-text encoding; transformers'
    split_special_tokens): a "<s>" or "<mask>" in a web page is not a separator or a mask, whose ids only the packer
    and the collator place."""
    backend = copy.deepcopy(tok.backend_tokenizer)
    backend.no_padding()
    backend.no_truncation()
    backend.encode_special_tokens = True
    return backend


def _structure_ids(tok, tokenizer_dir: str) -> tuple[int | None, int, int, int]:
    """(newline, block start, block end, document separator) ids of a tokenizer.

    Byte-level BPE (ours, RoBERTa's) has <s>, </s> and a newline token. WordPiece (BERT) has [CLS] and [SEP] and
    drops newlines as whitespace: its paragraphs are then joined with nothing between them, as BERT's own
    pretraining text was."""
    nl_ids = raw_tokenizer(tok).encode("\n", add_special_tokens=False).ids
    if len(nl_ids) > 1:
        raise CorpusError(f"tokenizer {tokenizer_dir} encodes a newline as {len(nl_ids)} tokens {nl_ids}, not one")
    bos = tok.bos_token_id if tok.bos_token_id is not None else tok.cls_token_id
    eos = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
    if bos is None or eos is None:
        raise CorpusError(f"tokenizer {tokenizer_dir} has neither <s>/</s> nor [CLS]/[SEP] to frame a block")
    sep = tok.sep_token_id if tok.sep_token_id is not None else eos
    return (nl_ids[0] if nl_ids else None), bos, eos, sep


class _Packer:
    """Cuts one split's token stream into `<s> body </s>` blocks of exactly n and writes them as Arrow."""

    def __init__(self, path: Path, n: int, bos: int, eos: int, sep: int, nl: int | None, flush_blocks: int = 2048):
        import pyarrow as pa

        self.pa, self.path, self.n, self.body = pa, path, n, n - 2
        self.bos, self.eos, self.sep, self.nl = bos, eos, sep, nl
        self.schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = pa.ipc.new_stream(self.sink, self.schema)
        self.pending: list[np.ndarray] = []
        self.pending_len = 0
        self.out: list[np.ndarray] = []
        self.out_blocks = 0
        self.flush_blocks = flush_blocks
        self.last_doc = -1
        self.docs = 0
        self.blocks = 0
        self.content_tokens = 0

    def add(self, ids: np.ndarray, doc: int, cont: bool = False) -> None:
        """A row's ids: a new document's, the next paragraph of this one's (after a newline), or with `cont` the rest
        of this one's last paragraph."""
        if doc == self.last_doc:
            if self.nl is not None and not cont:
                self._push(np.array([self.nl], dtype=np.int32))
        else:
            if self.last_doc >= 0:
                self._push(np.array([self.sep], dtype=np.int32))
            self.last_doc = doc
            self.docs += 1
        self._push(ids)

    def _push(self, arr: np.ndarray) -> None:
        if not len(arr):
            return
        self.pending.append(arr)
        self.pending_len += len(arr)
        self.content_tokens += len(arr)
        if self.pending_len >= self.body * 64:
            self._cut()

    def _cut(self) -> None:
        stream = np.concatenate(self.pending) if len(self.pending) > 1 else self.pending[0]
        k = len(stream) // self.body
        if k:
            blocks = np.empty((k, self.n), dtype=np.int32)
            blocks[:, 0] = self.bos
            blocks[:, -1] = self.eos
            blocks[:, 1:-1] = stream[: k * self.body].reshape(k, self.body)
            self.out.append(blocks)
            self.out_blocks += k
            self.blocks += k
        rest = stream[k * self.body:]
        self.pending = [rest] if len(rest) else []
        self.pending_len = len(rest)
        if self.out_blocks >= self.flush_blocks:
            self._write()

    def _write(self) -> None:
        if not self.out:
            return
        pa = self.pa
        blocks = np.concatenate(self.out)
        offsets = np.arange(0, blocks.size + 1, self.n, dtype=np.int32)
        arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(blocks.reshape(-1)))
        self.writer.write_batch(pa.record_batch([arr], schema=self.schema))
        self.out, self.out_blocks = [], 0

    def close(self) -> dict:
        if self.pending:
            self._cut()
        self._write()
        self.writer.close()
        self.sink.close()
        return {
            "documents": self.docs,
            "blocks": self.blocks,
            "tokens": self.blocks * self.n,
            "content_tokens": self.content_tokens,
            "dropped_tail_tokens": self.content_tokens - self.blocks * self.body,
        }


def _choose_validation(doc_keys: list[str], doc_tokens: np.ndarray, val_fraction: float, n: int, seed: int) -> np.ndarray:
    """Boolean mask of validation documents: whole documents in seeded-hash order until the validation stream
    holds val_fraction of the tokens (and at least one block's worth), never taking every document."""
    is_val = np.zeros(len(doc_keys), dtype=bool)
    if val_fraction <= 0 or len(doc_keys) < 2:
        return is_val
    order = sorted(range(len(doc_keys)), key=lambda i: hashlib.sha256(f"{seed}:{doc_keys[i]}".encode()).digest())
    total = int(doc_tokens.sum())
    target = max(math.ceil(val_fraction * total), n - 2)
    got = 0
    for i in order[:-1]:
        if got >= target:
            break
        is_val[i] = True
        got += int(doc_tokens[i]) + (1 if got else 0)
    return is_val


def _no_validation(val_fraction: float, documents: int, n: int, max_documents: int | None = None) -> str:
    """Why a corpus got no validation block: pretraining would be refused for it. The cause is data.max_documents
    where it cut the documents, else the layout."""
    said = (f"data.val_fraction={val_fraction} made no validation block of n={n}: the validation split takes whole "
            "documents and never all of them, and ")
    if _cut_by(max_documents, documents):
        return said + (f"data.max_documents={max_documents} keeps {documents:,} document{'s' * (documents > 1)}"
                       f"{'' if documents == 1 else ', those it may take too short for a block'}: raise "
                       "data.max_documents, or set data.val_fraction=0")
    read_as = ("1 document (it has no blank line between paragraphs)" if documents == 1 else
               f"{documents:,} documents, those it may take too short for a block")
    return said + f"the corpus reads as {read_as}. Separate its documents by blank lines ({CORPUS_LAYOUT})"


def _cut_by(max_documents: int | None, documents: int) -> bool:
    """Whether data.max_documents, not the sources, set how many documents the corpus holds."""
    return max_documents is not None and documents >= max_documents


def _no_training_block(splits: dict, n: int, documents: int, max_documents: int | None) -> str:
    """Why a corpus made no training block: n longer than the whole corpus, or than half of it with a validation
    split (each split needs a block of its own), data.max_documents's cut, or else the layout (too few documents
    for the validation split to leave the rest a block)."""
    train, took = splits["train"]["content_tokens"], splits["validation"]["content_tokens"]
    total = train + took
    said = (f"corpus too small: {train:,} training tokens make no block of n={n} (each block holds n - 2 = {n - 2} "
            "corpus tokens)")
    cut = (f"data.max_documents={max_documents} keeps {documents:,} documents: raise it, or "
           if _cut_by(max_documents, documents) else "")
    if total < n - 2:
        return (f"{said}: data.n={n} is longer than the whole corpus ({total:,} tokens in {documents:,} documents). "
                f"{cut or 'Give more text, or '}lower data.n")
    if took and total < 2 * (n - 2):
        return (f"{said}: the validation split took {took:,} of the corpus's {total:,} tokens, and at data.n={n} the "
                f"corpus holds no block for each split. {cut or 'Give more text, or '}lower data.n (to about half the "
                "corpus at most), or set data.val_fraction=0")
    if not took:
        return said
    if cut:
        return f"{said}; the validation split took {took:,} tokens in whole documents, and {cut}lower data.n"
    return (f"{said}; the validation split took {took:,} tokens in whole documents, and the corpus reads as "
            f"{documents:,} documents. Separate its documents by blank lines ({CORPUS_LAYOUT})")


def validation_share(manifest: Mapping) -> float:
    """The share of a prepared corpus's packed tokens in its validation split."""
    blocks = {name: split["blocks"] for name, split in manifest["splits"].items()}
    return blocks["validation"] / max(1, sum(blocks.values()))


def _cache_key(srcs: list[SourceText], tok_hash: str, n: int, val_fraction: float, seed: int, skip_bad_rows: bool,
               max_documents: int | None) -> str:
    options = {"format_version": FORMAT_VERSION, "tokenizer_hash": tok_hash, "n": n, "val_fraction": val_fraction,
               "seed": seed, "skip_bad_rows": skip_bad_rows, "max_documents": max_documents}
    # A lone CR ends a line (``io.line_bodies``), where the reader of format_version 3 took it as text: such a text
    # gives other blocks than it gave then, so its key says so. The key of every other text, which reads as it did,
    # is the one its corpora recorded (raising FORMAT_VERSION would refuse them all). `srcs` were read for it, and
    # hashed in the same read (``io.source_texts``'s `read`).
    if any(s.lone_cr for s in srcs):
        options["lone_cr_line_ends"] = True
    return cache_key(options, [s.path for s in srcs], {s.path: s.sha256 for s in srcs})


# The data.* keys a prepared corpus is made from, as prepare_corpus records them (its manifest's settings.data)
CORPUS_KEYS = ("sources", "n", "val_fraction", "seed", "skip_bad_rows", "max_documents")


def _comparable(key: str, value):
    """A data.* value as a comparison sees it: sources as the library reads them (resolve_sources)."""
    return resolve_sources(value) if key == "sources" else value


def check_corpus_settings(out_dir: str, data: Mapping, tokenizer_dir: str | None = None, group: str | None = None,
                          named: bool = True) -> None:
    """CorpusError where the corpus at `out_dir`, or the tokenizer at `tokenizer_dir`, was made from other data.*
    settings or text than `data` (a training run's data group) gives: the run would train on other text or another
    vocabulary than its config records. Pretraining runs it at its start, a plan's corpus job as its done check
    (``jobs.corpus_check``). Checked: each CORPUS_KEYS value; the sources by content, the sha256 of every file they
    give now against the manifest's (a glob matching another file, a file edited), so that sources moved elsewhere
    with the same bytes are the same corpus (a note names where it was made); the tokenizer's training settings
    (``check_tokenizer_settings``); a corpus an earlier version prepared from a text with lone CRs
    (``_check_line_end_rule``). Hashing the sources costs a read of them as stored (a .gz file not decompressed) once
    per start (a manifest that records no lone CRs: its text read in the same read, a .gz file decompressed, once:
    ``_record_lone_crs`` writes the answer into it). Only where `out_dir` is the data group's own corpus (its folder is named data.name): a corpus_dir given
    as a path names its corpus itself; unless not `named` (a plan's corpus job, whose command writes `out_dir` from
    `data`, whatever its name). Nothing to compare without a complete manifest (load_prepared says so).
    `group`: the data group's option, for the commands a refusal prints (``_data_option``)."""
    manifest = read_manifest(out_dir)
    if manifest is None or (named and Path(out_dir).name != str(data.get("name"))):
        return
    made = (manifest.get("settings") or {}).get("data") or {}
    for key in CORPUS_KEYS:
        if key == "sources" or key not in data or key not in made:
            continue
        ours, theirs = _comparable(key, data[key]), _comparable(key, made[key])
        if ours != theirs:
            raise CorpusError(_settings_refusal(out_dir, data, key, ours, theirs, group))
    if "sources" in data:
        _check_source_texts(out_dir, data, manifest, group)
    if tokenizer_dir is not None:
        check_tokenizer_settings(tokenizer_dir, data, group)


def _settings_refusal(out_dir: str, data: Mapping, key: str, ours, theirs, group: str | None = None) -> str:
    fix = _prepare_command(data, group)
    origin = value_origin(f"data.{key}")
    given = (f"; this command's {hydra_value(ours)} is not its command line's but {origin}: give it the data "
             "group and data.* settings the corpus was prepared with, or prepare the corpus again from this "
             f"command's ({fix})") if origin else f": prepare it from these settings ({fix})"
    return (f"data.{key}={hydra_value(ours)}, but the corpus {out_dir} (data.name={data['name']}) was prepared with "
            f"data.{key}={hydra_value(theirs)}{given}, or choose the data.name of a corpus prepared from them")


def _data_option(group: str | None) -> list[str]:
    """The data=<option> argument of a command a refusal prints: `group` (a plan's, composed outside Hydra), else the
    running command's (``configs.composed_option``). Without it a data.* key of another group's (vocab_size) is no key of
    the default group's, and the command fails as printed."""
    group = group or composed_option("data")
    return [f"data={group}"] if group else []


def _prepare_command(data: Mapping, group: str | None = None) -> str:
    """The prepare_corpus command that prepares data.name's corpus from `data`, over what is there."""
    return script_command("prepare_corpus", *_data_option(group),
                         f"data.name={data['name']}", f"data.tokenizer={data.get('tokenizer')}",
                         *(f"data.{k}={hydra_value(_comparable(k, data[k]))}" for k in CORPUS_KEYS if k in data),
                         "overwrite=true")


def _check_source_texts(out_dir: str, data: Mapping, manifest: Mapping, group: str | None = None) -> None:
    """CorpusError where data.sources give other texts (by sha256; a hub source by its name) than the corpus was
    prepared from; a note on stderr where they are the same texts at other paths."""
    recorded = manifest.get("sources") or []
    # a manifest that records each file's lone CRs was made by a build that keyed them, or was checked for them once
    # (``_record_lone_crs``); another is checked for them (``_check_line_end_rule``), read in the one read that
    # hashes the files. A hub source is not read for them: the rule is a file's (``io.checked_lines``), and a hub
    # dataset's rows are cut into paragraphs at LF alone (``_read_sources``) by every version, so its blocks do not
    # depend on it
    marked = all("lone_cr" in r for r in recorded if r.get("path"))
    try:
        now = source_texts(resolve_sources(data["sources"]), read=not marked)
    except (FileNotFoundError, CorpusError) as err:
        made_at = ", ".join(str(r.get("path") or r.get("source")) for r in recorded)
        raise CorpusError(f"data.sources: {err}; the corpus {out_dir} was prepared from {made_at}") from err
    what, made_at = text_changes(recorded, now)
    if what:
        raise CorpusError(f"data.sources={hydra_value(resolve_sources(data['sources']))} give other text than the "
                          f"corpus {out_dir} (data.name={data['name']}) was prepared from (by content, sha256: "
                          f"{what}): prepare it again ({_prepare_command(data, group)}), or choose the data.name of a corpus "
                          "prepared from them")
    if not marked:
        _check_line_end_rule(out_dir, manifest, now, data, group)
        _record_lone_crs(out_dir, manifest, now)
    if made_at:
        say(f"note: the corpus {out_dir} was prepared from {', '.join(made_at)}; data.sources give the "
            "same texts (sha256) at other paths, so it is read as prepared.", stream=sys.stderr)


def _check_line_end_rule(out_dir: str, manifest: Mapping, now: list[SourceText], data: Mapping,
                         group: str | None = None) -> None:
    """CorpusError where a source of the corpus at `out_dir` holds a lone CR (`now`: its texts, read for it) and its
    manifest's cache key is not the one this version gives (``_cache_key``, from the settings, tokenizer and texts
    it records): a build older than the rule that a lone CR ends a line read it as text, so its blocks are not the
    ones the text gives now. The texts are the same (sha256), so only the rule can make the keys differ. A corpus
    with a hub source has no key to tell by, and is left as it is."""
    lone = [s.path for s in now if s.lone_cr]
    if not lone or any(s.hub for s in now) or manifest.get("cache_key") is None:
        return
    made = (manifest.get("settings") or {}).get("data") or {}
    key = _cache_key(now, manifest.get("tokenizer_hash"), made.get("n"), made.get("val_fraction"), made.get("seed"),
                     made.get("skip_bad_rows"), made.get("max_documents"))
    if key != manifest["cache_key"]:
        raise CorpusError(f"the corpus {out_dir} was prepared by an earlier version, which read the lone CRs (classic "
                          f"Mac OS line ends) of {lone[0]} as text, where a lone CR ends a line now: its blocks are "
                          f"not the ones its text gives. Run prepare_corpus again: {_prepare_command(data, group)}")


def _record_lone_crs(out_dir: str, manifest: Mapping, now: list[SourceText]) -> None:
    """Write into the manifest of the corpus at `out_dir` whether each of its files holds a lone CR (`now`, read for
    ``_check_line_end_rule``, which passed), as this version's builds record it: later starts then hash its sources
    alone, not decompress them again. Only where every file still has the state it had when it was read (its
    sha256, compared with the manifest's, is of the bytes the answer is about) and the manifest is still the one
    read (a rebuild meanwhile is left as it is). A manifest that cannot be written (a read-only or shared corpus)
    is left as it was: its sources are read for lone CRs at each start, as before."""
    if any(s.path is not None and file_state(s.path) != s.state for s in now):
        return
    sources = [{**r, "lone_cr": s.lone_cr} if s.path is not None else dict(r)
               for r, s in zip(manifest.get("sources") or [], now)]
    if read_manifest(out_dir) != manifest:
        return
    try:
        write_json(Path(out_dir) / MANIFEST, {**manifest, "sources": sources})
    except (OSError, DiskFullError) as err:
        log.info("%s: could not record its sources' lone CRs (%s); they are read for them at each start",
                 Path(out_dir) / MANIFEST, err)


# The tokenizer's settings a data group gives (its data.* key -> train_tokenizer's recorded setting)
TOKENIZER_KEYS = {"vocab_size": "vocab_size", "tokenizer_max_lines": "max_lines"}


def check_tokenizer_settings(tokenizer_dir: str, data: Mapping, group: str | None = None) -> None:
    """CorpusError naming the first data.* key (TOKENIZER_KEYS) whose value in `data` differs from the one the
    tokenizer at `tokenizer_dir` was trained with (its manifest.json's settings): a run would record one vocabulary
    and train another. A tokenizer that train_tokenizer did not write (a converted model's) has nothing to compare.
    `group`: the data group's option, for the command the refusal prints (``_data_option``)."""
    made = read_json(Path(tokenizer_dir) / MANIFEST)
    if made.get("command") != "train_tokenizer":
        return
    settings = made.get("settings") or {}
    for key, setting in TOKENIZER_KEYS.items():
        if key in data and setting in settings and data[key] != settings[setting]:
            fix = script_command("train_tokenizer", *_data_option(group),
                                f"data.name={data.get('name')}", f"data.tokenizer={data.get('tokenizer')}",
                                *(f"data.{k}={hydra_value(data[k])}" for k in ("sources", *TOKENIZER_KEYS) if k in data),
                                "overwrite=true")
            raise CorpusError(f"data.{key}={hydra_value(data[key])}, but the tokenizer {tokenizer_dir} was trained "
                              f"with {setting}={hydra_value(settings[setting])}: give data.{key}="
                              f"{hydra_value(settings[setting])}, or train it again from these settings ({fix}) and "
                              "prepare its corpus again")


def unprepared_corpus(out_dir: str, absent_tokenizer: str | None = None) -> CorpusError:
    """The error of a run whose corpus `out_dir` is not there, or not complete (``read_manifest`` is None): in a
    command, naming the prepare_corpus command of its data settings (``configs.data_overrides``), one to paste, and
    before it the train_tokenizer command where the run's tokenizer is not there either (`absent_tokenizer`, its
    folder: prepare_corpus would refuse for it, two refused starts where one line can name both). Where the corpus's sources are not here: the
    data mirror's setting where they are under it (a clone away from ../shared/data), and the GPU nodes' carry."""
    given = data_overrides(also=("tokenizer_dir",))  # prepare_corpus takes the run's tokenizer_dir= as it is
    if given is None:
        how = ("with the data= and paths overrides of this run: prepare_corpus(**CorpusSpec.read(compose('corpus', "
               "[...])).arguments()), or `" + script_command("prepare_corpus") + " ...` in a shell")
    else:
        absent = absent_source(given)
        if absent is not None:
            mirror = composed_mirror(given)
            where = (f"give the folder that holds the data mirror as paths.data_mirror= or $LINFORMER_DATA_MIRROR "
                     f"(now {mirror}) and prepare it, `{script_command('prepare_corpus', *given, 'paths.data_mirror=DIR')}`;"
                     " on a GPU node, " if mirror and _under(absent, mirror) else "")
            return CorpusError(
                f"{out_dir} is not a complete prepared corpus (no complete {MANIFEST}), and its source {absent} is "
                f"not here to prepare it from: {where}carry the corpus with the command, its sources packed here "
                f"(`{script_command('gpu_carry', 'pack', 'TARGET', '--dest', '.carry')}`, TARGET the gpu.py target "
                f"that runs this) or the prepared {out_dir} itself (docs/gpu/README.md)")
        at = [f"out_dir={out_dir}"] if command_line_gives("corpus_dir") else []
        how = f"`{script_command('prepare_corpus', *given, *at)}`"
        if absent_tokenizer is not None:
            # train_tokenizer takes the data settings (its folder: out_dir=, where this command names one)
            train = [o for o in given if o.lstrip("+~").split("=", 1)[0] != "tokenizer_dir"]
            tok_at = [f"out_dir={absent_tokenizer}"] if command_line_gives("tokenizer_dir") else []
            how = (f"after its tokenizer {absent_tokenizer}, which is not there either: "
                   f"`{script_command('train_tokenizer', *train, *tok_at)}`, then {how}")
    return CorpusError(f"{out_dir} is not a complete prepared corpus (no complete {MANIFEST}): prepare it first, "
                       f"{how}")


def _under(path: str, folder: str) -> bool:
    return Path(os.path.abspath(path)).is_relative_to(os.path.abspath(folder))


def read_manifest(out_dir: str) -> dict | None:
    """The manifest of a complete prepared corpus, or None when `out_dir` is absent or incomplete."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        return None
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return None
    return m if m.get("complete") else None


def prepare_corpus(
    sources: list[str],
    tokenizer_dir: str,
    out_dir: str,
    n: int,
    val_fraction: float = 0.01,
    num_proc: int = 2,
    seed: int = 0,
    skip_bad_rows: bool = False,
    batch_size: int = 1000,
    force: bool = False,
    max_documents: int | None = None,
    overwrite: bool = False,
) -> dict:
    """Tokenize and pack `sources` into blocks of exactly `n` tokens under `out_dir`; returns the manifest.

    sources: local .txt/.txt.gz files or globs (one paragraph per line, blank line between documents), or
    `hf:<name>[:<config>]` hub datasets with a `text` column (one document per row; fails fast offline).
    With the same sources (by content), tokenizer (by hash) and settings, an existing complete `out_dir` is
    reused as is unless `force` (local sources only: hub sources are always re-read). Otherwise `out_dir` follows
    the output rule (``outputs.check_output_dir``): a corpus prepared with the same settings is rebuilt, one prepared
    from the same texts and tokenizer at other paths too (``_moved``), anything else there is refused unless
    `overwrite`. `max_documents` keeps the first that many documents (a slice for demos).
    SIGTERM stops the run with Preempted, leaving nothing behind.
    """
    check_sequence_room(n, "data.n", "a block")
    if not 0 <= val_fraction < 1:
        raise ConfigError(f"data.val_fraction={val_fraction} must be in [0, 1)")
    if max_documents is not None and max_documents < 1:
        raise ConfigError(f"data.max_documents={max_documents} must be a positive number of documents, or null")
    out = Path(out_dir)
    # at every run, a reuse too: a killed build's temporary is the corpus's size, whichever corpus of the folder it built
    if out.parent.is_dir():
        remove_stale_temps(out)  # this output's, whatever version named them
    for left in remove_dead_builds(out.parent):
        log.info("removed %s, left by a build that was killed", left)
    inputs = input_states([tokenizer_dir])  # before it is hashed, as each source's is (``text_states``)
    tok_hash = tokenizer_hash(tokenizer_dir)  # first: a damaged tokenizer is named before the sources are read
    # each source read once before the build: its sha256, its text's size and lone CRs (the cache key's), a .gz
    # file decompressed and checked to its end
    check_hub_sources(sources)
    srcs = source_texts(sources, read=True)
    inputs |= text_states(srcs)
    has_hub = any(s.hub for s in srcs)
    key = None if has_hub else _cache_key(srcs, tok_hash, n, val_fraction, seed, skip_bad_rows, max_documents)
    old = None if force or key is None else _reusable(out, key)
    if old is not None:
        return _with_context_free(out, old, tokenizer_dir)
    settings = {"n": n, "val_fraction": val_fraction, "seed": seed, "skip_bad_rows": skip_bad_rows,
                "max_documents": max_documents}
    # keyed as configs/corpus.yaml names them; what the sources and tokenizer hold is in the cache key
    used = os.path.abspath(tokenizer_dir) if os.path.exists(tokenizer_dir) else tokenizer_dir  # a hub name as given
    record = made_by("prepare_corpus", {"data": {"sources": [s.given for s in srcs], **settings},
                                        "tokenizer_dir": used})
    moved = _moved(out, record, srcs, tok_hash)
    with building_alone(out):  # a second build of this output meanwhile: refused, not run twice
        check_output_dir(out, moved or record, overwrite, reads=[*(s.path for s in srcs if s.path), tokenizer_dir],
                         key="out_dir=")
        needs = _say_space(out, sum(s.text_bytes for s in srcs), max_documents, any(s.hub for s in srcs))
        with signals_stop(STOPPED), atomic_dir(out, record, overwrite, replaces=moved, needs=needs, key="out_dir=") as tmp:
            _build(srcs, tokenizer_dir, tmp, settings, num_proc, batch_size, key, tok_hash, record)
            # the blocks hold what was read since the hash (the tokenizer loaded by every worker): the same bytes only
            # where no input changed meanwhile; else nothing is swapped in
            check_inputs_unchanged(inputs)
    manifest = read_manifest(str(out))  # as written, atomic_dir's additions (its entries) included
    tr, va = manifest["splits"]["train"], manifest["splits"]["validation"]
    share = validation_share(manifest)
    # whole documents: a few large ones can put far more than val_fraction out of training (one block of slack)
    if share > 2 * val_fraction and va["blocks"] > 1:
        log.warning("the validation split holds %.1f%% of the blocks where data.val_fraction=%s asked for %.1f%%: it "
                    "takes whole documents, and this corpus has %d, some of them large. Separate its documents by "
                    "blank lines (%s), or lower data.val_fraction", 100 * share, val_fraction, 100 * val_fraction,
                    manifest["documents"], CORPUS_LAYOUT)
    # the summary last: the line a user reads at the end of the output is the result
    say(f"corpus: {manifest['documents']:,} documents, {manifest['paragraph_tokens']:,} tokens; train "
        f"{tr['blocks']:,} blocks, validation {va['blocks']:,} blocks ({share:.1%}) of n={n}; tokenize "
        f"{manifest['timing_s']['tokenize']:.1f} s ({manifest['tokens_per_s']:,} tokens/s, "
        f"num_proc={manifest['num_proc']}), total {manifest['timing_s']['total']:.1f} s -> {out}"
        f"{replaced_clause({s['source']: s.get('replaced_chars', 0) for s in manifest['sources']})}", logger=log)
    return manifest


def _say_space(out: Path, text: int, max_documents: int | None, hub: bool) -> int | None:
    """Say the space a build of `text` bytes of local text (``SPACE_PER_TEXT_BYTE``) needs beside `out`, as an
    estimate, and the space free there (a warning where it is less); returns the estimate in bytes (None: no local
    text, nothing to estimate from)."""
    if not text:
        return None
    needs, free = math.ceil(SPACE_PER_TEXT_BYTE * text), free_bytes(written_at(out).parent)
    less = ["less with data.max_documents"] if max_documents is not None else []
    more = ["and more for the hub sources"] if hub else []
    short = free < needs
    # a log record (stderr, and the command's log file), not a result: stdout holds the summary alone
    log.log(logging.WARNING if short else logging.INFO,
            f"the build needs about {mib(needs)} free beside {out} at its peak (an estimate: {SPACE_PER_TEXT_BYTE}x the "
            f"{mib(text)} of text{''.join(', ' + w for w in less + more)}); {mib(free)} free there"
            + (": free some space first" if short else ""))
    return needs


def _moved(out: Path, record: Mapping, srcs: list[SourceText], tok_hash: str) -> dict | None:
    """``io.moved_output`` for a corpus: the one at `out` prepared with these settings from the same texts and the same
    tokenizer (its hash), any of them at other paths (a data mirror or data folder moved), is this command's own."""
    if read_json(out / MANIFEST).get("tokenizer_hash") != tok_hash:
        return None
    return moved_output(out, record, srcs, _placeless, "the corpus")


def _placeless(settings: Mapping) -> dict:
    """A corpus's settings without where its sources and tokenizer were."""
    return {**settings, "data": {k: v for k, v in (settings.get("data") or {}).items() if k != "sources"},
            "tokenizer_dir": None}


def _reusable(out: Path, key: str) -> dict | None:
    """The manifest of a complete corpus at `out` prepared with the same cache key (sources, tokenizer, settings);
    None when there is none or its files are damaged (then it is prepared again)."""
    old = read_manifest(str(out))
    if not old or old.get("cache_key") != key:
        return None
    try:
        check_corpus_files(out, old, again="preparing it again.")
    except CorpusError as err:
        say(f"corpus: {err}", logging.WARNING, log)
        return None
    say(f"corpus: reusing {out} (same sources, tokenizer and settings; cache key {key})", logger=log)
    return old


def _with_context_free(out: Path, manifest: dict, tokenizer_dir: str) -> dict:
    """`manifest`, with the context-free perplexity (``unigram.context_free_perplexity``) that a manifest of an earlier
    prepare_corpus lacks computed from the corpus's splits and written into it (its data files are unchanged: their
    checksums hold). Where the manifest cannot be written (a read-only or another user's data folder, a full disk)
    the corpus is reused as it is, the figure kept in memory: pretraining computes it the same way when it is missing."""
    if "context_free_val_ppl" in manifest or manifest.get("unigram_val_ppl") is None:
        return manifest
    import datasets

    tok = load_tokenizer(tokenizer_dir)
    dd = datasets.load_from_disk(str(out))
    _, context_free = corpus_perplexities(dd, tok)
    manifest = {**manifest, "context_free_val_ppl": round(context_free, 4)}
    try:
        write_json(out / MANIFEST, manifest)
    except (OSError, DiskFullError) as err:  # write_json's: an OSError (EROFS, EACCES), a DiskFullError (storage)
        log.info("corpus: the context-free perplexity (%.1f) its manifest predates is not added to %s, which cannot "
                 "be written (%s); the corpus is reused as it is", context_free, out / MANIFEST,
                 getattr(err, "strerror", None) or err)
        return manifest
    say(f"corpus: added the context-free perplexity ({context_free:,.1f}) its manifest predates to {out / MANIFEST}",
        logger=log)
    return manifest


def _manifest(record: dict, key: str | None, tok, tok_hash: str, ids: tuple[int, int, int, int], srcs: list[SourceText],
              n_docs: int, totals: dict, total_tokens: int, splits: dict, baselines: tuple[float, float], timing: dict,
              nproc: int, tmp: Path) -> dict:
    """manifest.json's content (timing: seconds per step): what made the corpus, its sources, counts and splits, timings, and every data
    file's size and sha256 (load_prepared finds a damaged or cut-short corpus with them before training)."""
    bos, eos, sep, nl = ids
    return {
        **record,  # command, version and settings (n, val_fraction, seed, ..., tokenizer_dir)
        "complete": True,
        "format_version": FORMAT_VERSION,
        "cache_key": key,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "block_layout": "<s> body(n-2) </s>; paragraphs joined by newline, documents by </s>",
        "tokenizer_hash": tok_hash,
        "encoding": encoding_of(tok),
        "special_ids": {"bos": bos, "eos": eos, "sep": sep, "newline": nl, "pad": tok.pad_token_id},
        "sources": [
            {"source": s.given, "path": s.path, "sha256": s.sha256, "bytes": s.bytes,
             **({"lone_cr": s.lone_cr} if s.path else {}), **s.stats} for s in srcs
        ],
        "documents": n_docs,
        "paragraphs": totals["lines"],
        "paragraph_tokens": total_tokens,
        "replaced_chars": totals["replaced_chars"],
        "skipped_bad_rows": totals["skipped_bad_rows"],
        "splits": splits,
        # the perplexities of token frequencies alone and of the best model that reads no context (unigram.py):
        # the plateau pretraining runs on this corpus are judged against
        **{name: None if math.isnan(ppl) else round(ppl, 4)
           for name, ppl in zip(("unigram_val_ppl", "context_free_val_ppl"), baselines)},
        "timing_s": {step: round(seconds, 2) for step, seconds in timing.items()},
        "tokens_per_s": round(total_tokens / max(timing["tokenize"], 1e-9)),
        "num_proc": nproc,
        # every file of the DatasetDict, its JSON (dataset_dict.json, state.json) as well as its .arrow data
        "files": file_checksums(tmp, (f for f in tmp.rglob("*") if f.is_file() and f.name != MANIFEST)),
    }


def _build(srcs: list[SourceText], tokenizer_dir: str, tmp: Path, settings: dict, num_proc: int, batch_size: int,
           key: str | None, tok_hash: str, record: dict) -> dict:
    """Read, tokenize and pack into `tmp` (the DatasetDict and manifest.json); returns the manifest."""
    import datasets
    import pyarrow.compute as pc

    t_start = time.perf_counter()
    n, val_fraction, seed = settings["n"], settings["val_fraction"], settings["seed"]
    tok = load_tokenizer(tokenizer_dir)
    nl, bos, eos, sep = _structure_ids(tok, tokenizer_dir)
    work = tmp / "_work"
    work.mkdir()

    # 1. read paragraphs (single pass, streaming to Arrow)
    t0 = time.perf_counter()
    writer = _ParagraphWriter(work / "paragraphs.arrow")
    doc_keys, totals = _read_sources(srcs, writer, settings["skip_bad_rows"], settings["max_documents"])
    if not doc_keys:
        raise CorpusError(f"empty corpus: no non-blank line in {[s.given for s in srcs]}; expected {CORPUS_LAYOUT}")
    if settings["max_documents"] is not None and len(doc_keys) < settings["max_documents"]:
        log.warning("data.max_documents=%d, but the sources hold %d documents: the corpus is all of them, a smaller "
                    "one than the setting says (a cut-down copy of the sources?)", settings["max_documents"],
                    len(doc_keys))
    if val_fraction > 0 and len(doc_keys) < 2:  # known before tokenizing: validation never takes every document
        raise CorpusError(_no_validation(val_fraction, 1, n, settings["max_documents"]))
    t_read = time.perf_counter() - t0

    # 2. tokenize with datasets.map (batched, num_proc workers that die with this process; cache files in tmp)
    t0 = time.perf_counter()
    paras = datasets.Dataset.from_file(str(work / "paragraphs.arrow"))
    nproc = max(1, min(num_proc, len(paras) // batch_size or 1))
    lines = progress_to_log_file()  # plain lines, not datasets' bars (``progress.progress_to_log_file``)
    _progress_line(lines, f"tokenizing {len(paras):,} paragraphs (num_proc={nproc})")
    # a log file's lines in place of the bar: each batch counted in a file (from whatever process tokenizes it) and
    # said by this one every TOKENIZE_SAID_EVERY_S
    counts = _TokenizeCounts(work / "tokenized.counts", len(paras))
    said = said_every(TOKENIZE_SAID_EVERY_S, counts.line) if lines else nullcontext()
    with third_party_bars_off(lines), said:
        tokd = _tokenize(paras, tokenizer_dir, work, nproc, batch_size, key, str(counts.path) if lines else None)
    t_tok = time.perf_counter() - t0

    # 3. choose validation documents, then pack each split
    t0 = time.perf_counter()
    lens = pc.list_value_length(tokd.data.column("ids")).to_numpy(zero_copy_only=False).astype(np.int64)
    n_docs = len(doc_keys)
    splits = _pack(tokd, lens, doc_keys, work, n, val_fraction, seed, (bos, eos, sep, nl))
    if splits["train"]["blocks"] == 0:
        raise CorpusError(_no_training_block(splits, n, n_docs, settings["max_documents"]))
    if val_fraction > 0 and splits["validation"]["blocks"] == 0:
        raise CorpusError(_no_validation(val_fraction, n_docs, n, settings["max_documents"]))
    # save_to_disk writes each split's fingerprint into its state.json: one from the cache key makes two prepares of
    # one corpus the same bytes (datasets draws a random one for a table read from a file; a hub corpus has no key)
    dd = datasets.DatasetDict({name: datasets.Dataset(datasets.Dataset.from_file(str(work / f"{name}.arrow")).data,
                                                      fingerprint=f"{name}-{key}" if key else None)
                               for name in splits})
    # an empty split still gets one (empty) shard, else load_from_disk cannot read it back
    _progress_line(lines, "saving " + ", ".join(f"{name} {len(split):,} blocks" for name, split in dd.items()))
    with third_party_bars_off(lines):
        dd.save_to_disk(str(tmp), num_shards={k: 1 for k, v in dd.items() if len(v) == 0} or None)
    # once per corpus, not at every pretraining start: the plateau its runs are reported against
    baselines = corpus_perplexities(dd, tok)
    del dd, tokd, paras
    t_pack = time.perf_counter() - t0
    shutil.rmtree(work)

    timing = {"read": t_read, "tokenize": t_tok, "pack": t_pack, "total": time.perf_counter() - t_start}
    manifest = _manifest(record, key, tok, tok_hash, (bos, eos, sep, nl), srcs, n_docs, totals, int(lens.sum()),
                         splits, baselines, timing, nproc, tmp)
    write_json(tmp / MANIFEST, manifest)
    return manifest


def _progress_line(lines: bool, what: str) -> None:
    if lines:
        progress_said(f"corpus: {what}")


def _tokenize(paras, tokenizer_dir: str, work: Path, nproc: int, batch_size: int, key: str | None,
              counts: str | None = None):
    """The paragraphs as token ids (columns doc, ids), by ``datasets.map`` in ``nproc`` workers that die with this
    process, cached in ``work``; each batch's rows and tokens appended to the file `counts` where given
    (``_TokenizeCounts``)."""
    import datasets

    features = datasets.Features({"doc": datasets.Value("int64"), "cont": datasets.Value("bool"),
                                  "ids": datasets.Sequence(datasets.Value("int32"))})
    with children_die_with_parent():
        return paras.map(
            _Tokenize(str(tokenizer_dir), counts),
            batched=True,
            batch_size=batch_size,
            num_proc=nproc if nproc > 1 else None,
            remove_columns=["text"],
            features=features,
            cache_file_name=str(work / "tokens.arrow"),
            new_fingerprint=f"tok-{key or os.getpid()}",
            desc="tokenize",
        )


def _pack(tokd, lens: np.ndarray, doc_keys: list, work: Path, n: int, val_fraction: float, seed: int,
          structure: tuple[int, int, int, int]) -> dict[str, dict]:
    """Choose the validation documents, then pack each split's paragraphs into n-token blocks in ``work``
    (<name>.arrow); returns each split's counts. ``structure``: the bos, eos, sep and newline ids."""
    docs_col = tokd.data.column("doc").to_numpy()
    starts = ~tokd.data.column("cont").to_numpy(zero_copy_only=False)  # rows that begin a paragraph
    n_docs = len(doc_keys)
    para_per_doc = np.bincount(docs_col[starts], minlength=n_docs)
    doc_tokens = np.bincount(docs_col, weights=lens, minlength=n_docs).astype(np.int64) + np.maximum(para_per_doc - 1, 0)
    is_val = _choose_validation(doc_keys, doc_tokens, val_fraction, n, seed)
    packers = {name: _Packer(work / f"{name}.arrow", n, *structure) for name in ("train", "validation")}
    for tbl in tokd.with_format("arrow").iter(batch_size=20000):
        ids_col = tbl.column("ids").combine_chunks()
        offsets = ids_col.offsets.to_numpy()
        values = ids_col.values.to_numpy()
        docs = tbl.column("doc").to_numpy()
        conts = tbl.column("cont").to_numpy(zero_copy_only=False)
        for j in range(len(docs)):
            d = int(docs[j])
            packers["validation" if is_val[d] else "train"].add(values[offsets[j]:offsets[j + 1]], d, bool(conts[j]))
    return {name: p.close() for name, p in packers.items()}


def vocabulary_sha256(tok) -> str:
    """The vocabulary and special ids of a tokenizer: what a corpus's manifest recorded of its tokenizer before it
    recorded ``encoding_of`` (such a corpus is checked by it alone)."""
    payload = json.dumps([sorted(tok.get_vocab().items()), tok.all_special_ids])
    return hashlib.sha256(payload.encode()).hexdigest()


def check_corpus_tokenizer(out_dir: str, tokenizer_dir: str) -> None:
    """CorpusError unless ``tokenizer_dir``'s tokenizer gives a text the ids the corpus was tokenized with: the same
    files, or another tokenizer whose ``encoding_of`` is the one the manifest recorded (a converted model re-saves
    its source's tokenizer); the error names what differs. Compared with what the manifest recorded, not with the
    files at the recorded path, which may have been trained again since. A corpus whose manifest recorded only the
    vocabulary (vocabulary_sha256) is checked by the vocabulary alone."""
    manifest = read_manifest(out_dir)
    if manifest is None:
        raise CorpusError(f"{out_dir} is not a complete prepared corpus (no complete {MANIFEST})")
    if tokenizer_hash(tokenizer_dir) == manifest["tokenizer_hash"]:
        return
    used = manifest.get("settings", {}).get("tokenizer_dir")
    ours = load_tokenizer(tokenizer_dir)
    again = f"(it was prepared with {used}): {_mismatch_fix(out_dir, tokenizer_dir, used)}"
    if manifest.get("encoding") is not None:
        differences = brief_differences(manifest["encoding"], encoding_of(ours))
        if differences:
            raise CorpusError(f"tokenizer/corpus mismatch: {tokenizer_dir} encodes text otherwise than the tokenizer "
                              f"corpus {out_dir} was tokenized with ({'; '.join(differences)}) {again}")
        return
    if vocabulary_sha256(ours) != _recorded_vocabulary(manifest, out_dir, tokenizer_dir):
        raise CorpusError(
            f"tokenizer/corpus mismatch: corpus {out_dir} was tokenized with a vocabulary that differs from "
            f"{tokenizer_dir}'s now ({len(ours):,} tokens; it was prepared with {used}, which has changed or differs "
            f"since): {_mismatch_fix(out_dir, tokenizer_dir, used)}")


def _mismatch_fix(out_dir: str, tokenizer_dir: str, used: str | None) -> str:
    """What a command does whose tokenizer is not the one corpus `out_dir` was tokenized with (`used`): where it is
    that tokenizer's folder, trained again since, prepare the corpus again; where it is another tokenizer, a corpus
    of its own under a data.name of its own (the prepare_corpus command with this command's data settings, and the
    two settings this command then takes): preparing `out_dir` again would be refused as another output, or with
    overwrite=true replace the corpus the other tokenizer's runs read."""
    given = data_overrides(also=("tokenizer_dir",))
    if used is not None and os.path.realpath(used) == os.path.realpath(tokenizer_dir):
        return f"prepare the corpus again with tokenizer_dir={hydra_value(tokenizer_dir)}"
    typed = next((o.split("=", 1)[1] for o in given or () if o.split("=", 1)[0] == "tokenizer_dir"), None)
    tokenizer = typed if typed is not None else hydra_value(tokenizer_dir)  # a typed value as typed: Hydra's syntax
    name = re.sub(r"[^\w.-]+", "_", f"{Path(out_dir).name}_{Path(tokenizer.strip(chr(39))).name}")
    own = [f"data.name={name}", f"tokenizer_dir={tokenizer}"]
    rest = [o for o in given or () if o.lstrip("+~").split("=", 1)[0] not in ("data.name", "tokenizer_dir")]
    here = own
    if command_line_gives("corpus_dir"):  # the corpus is where the command says, not under data.name
        folder = hydra_value(str(Path(out_dir).parent / name))
        own, here = [*own, f"out_dir={folder}"], [f"corpus_dir={folder}", own[1]]
    return (f"give it a corpus of its own, `{script_command('prepare_corpus', *rest, *own)}`, then "
            f"{' '.join(here)} here too")


def _recorded_vocabulary(manifest: Mapping, out_dir: str, tokenizer_dir: str) -> str | None:
    """The vocabulary_sha256 a corpus was tokenized with: its manifest's, or for a corpus recorded before the
    manifest held it, that of the tokenizer at the path it names, unless that is `tokenizer_dir` itself, whose files
    have changed since (their hash differs): None then, which no vocabulary matches."""
    if manifest.get("vocabulary_sha256") is not None:
        return manifest["vocabulary_sha256"]
    used = manifest.get("settings", {}).get("tokenizer_dir")
    if used is None or os.path.realpath(used) == os.path.realpath(tokenizer_dir):
        return None
    try:
        return vocabulary_sha256(load_tokenizer(used))
    except (OSError, ValueError, TypeError) as err:
        raise CorpusError(f"corpus {out_dir} was prepared with tokenizer {used}, which cannot be read to compare "
                          f"with {tokenizer_dir}: {err}") from err


def load_prepared(out_dir: str, tokenizer_dir: str | None = None, vocabulary: int | None = None):
    """The prepared corpus as a DatasetDict with splits train and validation (column input_ids, n ids per row).

    With `tokenizer_dir`, its tokenizer must give the ids the corpus was tokenized with (check_corpus_tokenizer).
    With `vocabulary` (the tokens of the model that trains on it), every id must be below it: the ids are read in
    the pass that checks the files' checksums (``check_corpus_files``), so a corpus of another tokenizer's ids (its
    manifest saying otherwise, or its files rewritten) is refused before training, not an IndexError in it.
    """
    import datasets

    manifest = read_manifest(out_dir)
    if manifest is None:
        raise unprepared_corpus(out_dir)
    ids = check_corpus_files(out_dir, manifest, read_ids=vocabulary is not None)
    if tokenizer_dir is not None:
        check_corpus_tokenizer(out_dir, tokenizer_dir)
    outside = ids.outside(vocabulary) if ids is not None else None
    if outside is not None:
        whose = f", tokenizer {tokenizer_dir}" if tokenizer_dir is not None else ""
        raise CorpusError(f"prepared corpus {out_dir} holds token id {outside[0]:,} (in {outside[1]}), outside the "
                          f"model's vocabulary ({vocabulary:,} tokens, ids 0-{vocabulary - 1:,}{whose}): its blocks "
                          f"were tokenized otherwise than its manifest says; prepare it again: "
                          f"{prepare_again(out_dir, manifest)}")
    try:
        return datasets.load_from_disk(str(out_dir))
    except (ValueError, OSError, KeyError) as err:  # a file its checksums do not cover (a manifest of before they did)
        why = " ".join(str(err).split()) or type(err).__name__
        raise CorpusError(f"prepared corpus {out_dir} cannot be read ({why}); prepare it again: "
                          f"{prepare_again(out_dir, manifest)}") from err


def _tokenizer_now(out_dir: str, recorded: str) -> str:
    """The tokenizer folder a corpus's manifest records (`recorded`) where it is still there; else the folder
    of that name where this checkout keeps tokenizers: beside the corpus's own data folder
    (<paths.data_dir>/tokenizers/<name>, as tokenizer_dir's default puts it, for a corpus at
    <paths.data_dir>/processed/<name>), else data/tokenizers/<name> of the repository. The command then names the
    tokenizer the user has, or would train, now, not a folder of a checkout that moved."""
    if Path(local_path(recorded)).is_dir():
        return recorded
    corpus = Path(resolve_path(str(out_dir)))
    data_dir = corpus.parent.parent if corpus.parent.name == "processed" else Path(resolve_path("data"))
    return record_path(data_dir / "tokenizers" / Path(recorded).name)


# what a corpus's manifest holds besides its output record, which readers rely on (the checksums that find a damaged
# corpus; the perplexity of token frequencies alone, which pretraining compares against)
RECORDED = ("files", "unigram_val_ppl")


def check_corpus_files(out_dir: str, manifest: dict, again: str | None = None, read_ids: bool = False
                       ) -> TokenIds | None:
    """CorpusError for a corpus its readers cannot take as this version packs it: blocks of another FORMAT_VERSION
    (the same sources and settings give other ids now), a manifest written by an earlier prepare_corpus that lacks
    what readers rely on (RECORDED), or the first data file whose size or sha256 is not what prepare_corpus
    recorded. Each ends with `again`, what the caller does about it (prepare_corpus: it prepares it again itself),
    else the command that prepares it again. With `read_ids`, the blocks' ids are read in the same pass as their
    sha256 (``ids.read_token_ids``, the .arrow files the manifest lists) and returned."""
    again = again or f"prepare it again: {prepare_again(out_dir, manifest)}"
    made = manifest.get("format_version")
    if made != FORMAT_VERSION:
        raise CorpusError(f"prepared corpus {out_dir} holds blocks of format_version {made} ({MANIFEST}), and this "
                          f"version packs and reads format_version {FORMAT_VERSION}: the same sources and settings give "
                          f"other blocks now; {again}")
    missing = [key for key in RECORDED if key not in manifest]
    if missing:
        raise CorpusError(f"prepared corpus {out_dir} was prepared by an earlier version (its {MANIFEST} has no "
                          f"{', '.join(missing)}): {again}")
    ids = read_token_ids(out_dir, manifest["files"]) if read_ids else None
    problems = output_damage(out_dir, ids.digests if ids else None)  # RECORDED holds "files": a list, never None
    if problems:
        raise CorpusError(f"prepared corpus {out_dir} is damaged: {Path(out_dir) / problems[0]} since it was prepared; "
                          f"{again}")
    return ids


def prepare_again(out_dir: str, manifest: Mapping) -> str:
    """The prepare_corpus command that rebuilds the corpus at `out_dir` from what its manifest records (sources,
    data.* settings, tokenizer), over it (overwrite=true: a manifest of an earlier version may record its settings
    otherwise than this one, which the output rule would take for another output). A recorded tokenizer that is no
    longer there (a manifest of an earlier version names it by its absolute path, and the checkout or its data moved
    since) is named where this checkout keeps it (``_tokenizer_now``)."""
    settings = manifest.get("settings") or {}
    data = settings.get("data") or {}
    tokenizer = settings.get("tokenizer_dir")
    tokenizer = _tokenizer_now(out_dir, str(tokenizer)) if tokenizer else None
    return script_command("prepare_corpus", f"data.name={hydra_value(Path(out_dir).name)}",
                         *(f"data.{key}={hydra_value(data[key])}" for key in CORPUS_KEYS if key in data),
                         *([f"tokenizer_dir={hydra_value(tokenizer)}"] if tokenizer else []),
                         f"out_dir={hydra_value(str(out_dir))}", "overwrite=true")
