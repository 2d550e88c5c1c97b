"""Data layer: tokenizer training, corpus packing, MLM collator, task registry and loaders, metrics."""

from .collator import MLMCollator
from .corpus import load_prepared, prepare_corpus
from .task_loading import load_task
from .tasks import TASKS, TaskSpec, compute_metrics, get_task
from .tokenizer import tokenizer_hash, train_tokenizer

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
