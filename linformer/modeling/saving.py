"""The one way the package saves a model for its users (a run's ``model/`` and ``best/``, a conversion, an export):
``save_model_dir``. What a user loads from such a directory, through ``from_pretrained`` or a pipeline, must run the
model as the package ran it, so its tokenizer goes with it, saved one way everywhere."""

from __future__ import annotations

import os

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
    take. Set on `tokenizer` itself: a later save of it says the same."""
    tokenizer.model_max_length = model_length(config)
    tokenizer.save_pretrained(directory)
