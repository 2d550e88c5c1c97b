"""Data layer: tokenizer training, corpus packing, MLM collator, task registry and loaders, metrics."""

from .collator import MLMCollator
from .corpus import load_prepared, prepare_corpus
from .metrics import compute_metrics
from .tasks import TASKS, TaskSpec, get_task, load_task
from .tokenizer import tokenizer_hash, train_tokenizer

__all__ = [
    "train_tokenizer",
    "tokenizer_hash",
    "prepare_corpus",
    "load_prepared",
    "MLMCollator",
    "TASKS",
    "TaskSpec",
    "get_task",
    "load_task",
    "compute_metrics",
]
