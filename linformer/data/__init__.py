"""Data layer: tokenizer training, corpus packing, MLM collator, task registry and loaders, metrics. Each name is
imported from its module when first asked for (``linformer.lazy``): a light module of the package (``data.io``,
``data.tasks``) is imported without the collator's torch."""

from typing import TYPE_CHECKING

from ..lazy import lazy_names

_LAZY = {
    "MLMCollator": ".collator",
    "load_prepared": ".corpus",
    "prepare_corpus": ".corpus",
    "load_task": ".task_loading",
    "TASKS": ".tasks",
    "TaskSpec": ".tasks",
    "compute_metrics": ".tasks",
    "get_task": ".tasks",
    "tokenizer_hash": ".tokenizer",
    "train_tokenizer": ".tokenizer",
}

__all__ = [
    "TASKS",
    "MLMCollator",
    "TaskSpec",
    "compute_metrics",
    "get_task",
    "load_prepared",
    "load_task",
    "prepare_corpus",
    "tokenizer_hash",
    "train_tokenizer",
]

# A type checker reads the names from their modules (the real classes and functions, and a misspelt name is an
# error); at run time they stay lazy. tests/test_imports.py checks that this block, _LAZY and __all__ agree.
if TYPE_CHECKING:
    from .collator import MLMCollator
    from .corpus import load_prepared, prepare_corpus
    from .task_loading import load_task
    from .tasks import TASKS, TaskSpec, compute_metrics, get_task
    from .tokenizer import tokenizer_hash, train_tokenizer
else:
    __getattr__, __dir__ = lazy_names(__name__, _LAZY)
