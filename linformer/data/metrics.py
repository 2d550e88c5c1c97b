"""Task metrics through `evaluate`, with the metric modules loaded from this package by path (no hub)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from .tasks import get_task

METRIC_DIR = Path(__file__).parent / "metric_modules"


@cache
def load_metric(name: str):
    import evaluate

    path = METRIC_DIR / name / f"{name}.py"
    if not path.is_file():
        known = sorted(p.name for p in METRIC_DIR.iterdir() if p.is_dir())
        raise ValueError(f"unknown metric {name!r}; packaged metrics: {known}")
    return evaluate.load(str(path))


def compute_metrics(task_name: str, predictions, references) -> dict[str, float]:
    """{'accuracy': ...} for every task, plus {'f1': ...} for qqp (positive label 1 = duplicate).

    predictions are label ids (or logits of shape [N, num_labels], argmaxed here); references are label ids.
    """

    task_spec = get_task(task_name)
    preds = np.asarray(predictions)
    if preds.ndim == 2:
        preds = preds.argmax(-1)
    refs = np.asarray(references)
    if preds.shape != refs.shape:
        raise ValueError(f"predictions {preds.shape} and references {refs.shape} differ in shape")
    out: dict[str, float] = {}
    for m in task_spec.metrics:
        out.update(load_metric(m).compute(predictions=preds.tolist(), references=refs.tolist()))
    return out
