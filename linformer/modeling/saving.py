"""The one way the package saves a model for its users (a run's ``model/`` and ``best/``, a conversion, an export):
``model_folder`` around ``save_model_dir``. What a user loads from such a directory, through ``from_pretrained`` or a
pipeline, must run the model as the package ran it, so its tokenizer goes with it, saved one way everywhere; and
what takes the folder later (a rerun, a plan, a finetuning that starts from it) must find it as it was written, so
the folder records the checksums of its files."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..data.streams import TOKEN_TYPES
from ..data.tokenizer import limit_to, texts_as_text
from ..files.atomic import atomic_dir, write_json
from ..files.hashing import file_checksums
from ..files.mappings import read_json
from ..files.outputs import MANIFEST
from ..progress import transformers_bars_off
from .card import CARD, SIDECAR
from .loading import model_length

# What save_model_dir writes into a model folder (the weights; a config naming the labels and carrying the model's
# code; the tokenizer capped at n, encoding a special token's text as text) and model_folder records: raised whenever that changes, so that a folder written
# before is told apart (is_current_model_folder) and written again where its run finishes
MODEL_FORMAT = 2


@contextlib.contextmanager
def model_folder(final: str | os.PathLike, record: Mapping[str, Any] | None = None, overwrite: bool = False,
                 flag: str = "overwrite=true", key: str | None = None, chosen: bool = False,
                 replaces: Mapping[str, Any] | None = None) -> Iterator[Path]:
    """``atomic.atomic_dir`` for a model folder (the block saves into the temporary it yields: ``save_model_dir``, a
    card): its MANIFEST records MODEL_FORMAT and the size and sha256 of every file in it but the card's, which
    ``outputs.output_damage`` reads back wherever the folder is taken as done or as a start. The card is left out: it
    is rewritten in place as the model goes on (a transfer's record, a finetuning's results), and no load reads it.
    `chosen`: `final` is a run's own model/; `replaces`: the record of the earlier model there that this one replaces
    as its own although it names other paths (``atomic_dir``)."""
    with atomic_dir(final, record, overwrite, flag, checksums=True, key=key, chosen=chosen, replaces=replaces) as tmp:
        yield tmp
        files = [f for f in tmp.rglob("*") if f.is_file() and f.name not in (MANIFEST, CARD, SIDECAR)]
        write_json(tmp / MANIFEST, {**read_json(tmp / MANIFEST), "model_format": MODEL_FORMAT,
                                    "files": file_checksums(tmp, files)})


def is_current_model_folder(directory: str | os.PathLike) -> bool:
    """Whether `directory` was written by ``model_folder`` in the current MODEL_FORMAT."""
    return read_json(Path(directory) / MANIFEST).get("model_format") == MODEL_FORMAT


def save_model_dir(model, tokenizer, directory: str | os.PathLike, **save_kwargs) -> None:
    """``model.save_pretrained(directory, **save_kwargs)`` and, unless None, its tokenizer beside it
    (``save_tokenizer``). transformers' "Writing model shards" bar is off: every caller (a run's end, an export, a
    conversion) prints its own line for the saved folder, and the bar's carriage returns would land in a log file."""
    with transformers_bars_off():
        model.save_pretrained(directory, **save_kwargs)
    if tokenizer is not None:  # a masked LM predicts tokens: its own fill-mask input holds "<mask>" as its mask
        save_tokenizer(tokenizer, model.config, directory, masks=model.get_output_embeddings() is not None)


def save_tokenizer(tokenizer, config, directory: str | os.PathLike, masks: bool = False) -> None:
    """Save `tokenizer` for the model of `config`: its ``model_max_length`` is the longest input the model takes
    (``loading.model_length``: a Linformer's n), so that pipelines and ``truncation=True`` cut inputs to what E and F
    take, and tokenizer.json truncates there too and pads nothing (``limit_to``). Set on `tokenizer` itself: a later
    save of it says the same. A special token's text in a user's input is encoded as text, as the package encoded
    the model's training text (``texts_as_text``), unless the model `masks`: a masked LM's fill-mask pipeline finds
    the mask in its input by the mask token's text. Its ``model_input_names`` are the inputs the model takes (``input_names_for``), saved
    from a copy: the run goes on encoding with `tokenizer` as it is."""
    limit_to(tokenizer, model_length(config))
    names = input_names_for(config, list(tokenizer.model_input_names))
    saved = copy.copy(tokenizer)  # shares the vocabulary; init_kwargs is what tokenizer_config.json records
    saved.model_input_names, saved.init_kwargs = names, {**tokenizer.init_kwargs, "model_input_names": names}
    texts_as_text(saved, not masks).save_pretrained(directory)


def input_names_for(config, given: list[str]) -> list[str]:
    """The inputs of a tokenizer's `given` (``model_input_names``) that the model of `config` takes: no segment ids
    for a model of one segment row (RoBERTa's layout, type_vocab_size 1), whose embeddings have no row for a pair's
    second text (1), though a BERT tokenizer gives them."""
    one_segment = (getattr(config, "type_vocab_size", None) or 1) <= 1
    return [name for name in given if not (one_segment and name == TOKEN_TYPES)]
