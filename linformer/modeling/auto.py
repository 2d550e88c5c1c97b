"""Register the Linformer classes with the Auto API, so ``AutoModel*.from_pretrained(dir)`` works after
``import linformer``, and so that every saved model carries the model's code beside its weights: with it
``AutoModel*.from_pretrained(dir_or_hub_name, trust_remote_code=True)`` works where this package is not installed
(transformers copies the class's module and every module its ``from .x import`` lines name; those modules import
nothing else of the package).

The package itself never runs a folder's code: ``load_auto`` is how it reads every model, config and tokenizer it is
handed. Its own models need none (``linformer`` is registered here), nor do BERT and RoBERTa."""

import importlib

import transformers

from .configuration import LinformerConfig
from .model import SERVED_CLASSES


def register() -> None:
    """Idempotent: safe to call more than once (e.g. from several imports or processes)."""
    transformers.AutoConfig.register(LinformerConfig.model_type, LinformerConfig, exist_ok=True)
    LinformerConfig.register_for_auto_class()
    for auto, where in SERVED_CLASSES.items():
        if auto != "AutoConfig":
            module, name = where.split(".")
            cls = getattr(importlib.import_module(f".{module}", __package__), name)
            getattr(transformers, auto).register(LinformerConfig, cls, exist_ok=True)
            cls.register_for_auto_class(auto)  # save_pretrained then saves the model's code beside its weights


