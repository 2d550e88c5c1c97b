"""The one way the package saves a model for its users (a run's ``model/`` and ``best/``, a conversion, an export):
``save_model_dir``. What a user loads from such a directory, through ``from_pretrained`` or a pipeline, must run the
model as the package ran it, so its tokenizer goes with it, saved one way everywhere."""

from __future__ import annotations

import copy
import os

from ..data.streams import TOKEN_TYPES
from .loading import model_length


def save_model_dir(model, tokenizer, directory: str | os.PathLike, **save_kwargs) -> None:
    """``model.save_pretrained(directory, **save_kwargs)`` and, unless None, its tokenizer beside it
    (``save_tokenizer``)."""
    model.save_pretrained(directory, **save_kwargs)
    if tokenizer is not None:
        save_tokenizer(tokenizer, model.config, directory)


def save_tokenizer(tokenizer, config, directory: str | os.PathLike) -> None:
    """Save `tokenizer` for the model of `config`: its ``model_max_length`` is the longest input the model takes
    (``loading.model_length``: a Linformer's n), so that pipelines and ``truncation=True`` cut inputs to what E and F
    take. Set on `tokenizer` itself: a later save of it says the same. Its ``model_input_names`` are the inputs the
    model takes (``input_names_for``), saved from a copy: the run goes on encoding with `tokenizer` as it is."""
    tokenizer.model_max_length = model_length(config)
    names = input_names_for(config, list(tokenizer.model_input_names))
    saved = copy.copy(tokenizer)  # shares the vocabulary; init_kwargs is what tokenizer_config.json records
    saved.model_input_names, saved.init_kwargs = names, {**tokenizer.init_kwargs, "model_input_names": names}
    saved.save_pretrained(directory)


def input_names_for(config, given: list[str]) -> list[str]:
    """The inputs of a tokenizer's `given` (``model_input_names``) that the model of `config` takes: no segment ids
    for a model of one segment row (RoBERTa's layout, type_vocab_size 1), whose embeddings have no row for a pair's
    second text (1), though a BERT tokenizer gives them."""
    one_segment = (getattr(config, "type_vocab_size", None) or 1) <= 1
    return [name for name in given if not (one_segment and name == TOKEN_TYPES)]
