"""Task metrics: the registry of the metrics a TaskSpec may name (``METRICS``: which packaged `evaluate` module computes
each, with which arguments, and whether more is better), and ``score`` (a task's: ``tasks.compute_metrics``).

The modules (``metric_modules/<module>/<module>.py``, `evaluate.Metric` classes) are imported from this package and
kept in memory: nothing is fetched from the hub and nothing is written under HF_HOME, which `evaluate.load` would
copy each module into (``$HF_HOME/modules``) and where a read-only home would fail a run at its final scoring.
Adding a metric is one entry here (and its module, where no packaged one computes it)."""

from __future__ import annotations

import importlib.util
import math
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..optional import import_needed

METRIC_DIR = Path(__file__).parent / "metric_modules"


@dataclass(frozen=True)
class MetricSpec:
    module: str  # the packaged evaluate module: metric_modules/<module>/<module>.py
    higher_is_better: bool  # which way a run's selection and the reports' "best" read it
    kwargs: Mapping = field(default_factory=dict)  # passed to the module's compute
    binary: bool = False  # scores the positive label (id 1) of a task of exactly two labels

    @property
    def path(self) -> Path:
        return module_file(self.module)


def module_file(module: str) -> Path:
    return METRIC_DIR / module / f"{module}.py"


METRICS: dict[str, MetricSpec] = {
    "accuracy": MetricSpec("accuracy", higher_is_better=True),
    "f1": MetricSpec("f1", higher_is_better=True, binary=True),  # of the positive label, GLUE's QQP and MRPC
    "f1_macro": MetricSpec("f1", higher_is_better=True, kwargs={"average": "macro"}),  # any number of labels
}
# Scores a run logs beside its task's metrics: distillation's share of examples where the student agrees with its
# teacher.
OTHER_SCORES = {"agreement": True}


def higher_is_better(name: str) -> bool | None:
    """Whether more is better for a task metric (or another score a finetuning logs); None for a name that is
    neither."""
    if name in METRICS:
        return METRICS[name].higher_is_better
    return OTHER_SCORES.get(name)


def improves(value: float | None, best: float | None, higher: bool) -> bool:
    """Whether a score `value` beats the best so far (`best`, None before the first), more being better where
    `higher`: the one rule for a run's best evaluation and the reports' best. A non-finite value (a NaN loss, a
    score of non-finite outputs) is never best, and any finite value beats a non-finite best: comparisons with NaN
    are all false, so a NaN taken as best would block every later score. Equals keep the earlier."""
    if value is None or not math.isfinite(value):
        return False
    if best is None or not math.isfinite(best):
        return True
    return value > best if higher else value < best


def check_metrics(names: tuple[str, ...], num_labels: int, where: str) -> None:
    """ConfigError naming `where` for a task's metric list that cannot score it: empty, a name without an entry in
    METRICS, or a metric of two labels for a task of more."""
    if not names:
        raise ConfigError(f"{where}: metrics is empty; name at least one of {sorted(METRICS)}")
    for name in names:
        if name not in METRICS:
            raise ConfigError(f"{where}: unknown metric {name!r}; the metrics: {', '.join(sorted(METRICS))} "
                              "(a new one is an entry in linformer/data/metrics.py METRICS)")
        if METRICS[name].binary and num_labels != 2:
            averaged = [m for m, spec in METRICS.items() if spec.module == METRICS[name].module and not spec.binary]
            raise ConfigError(f"{where}: metric {name!r} scores the positive label of a task of two labels, this "
                              f"task has {num_labels}; use {' or '.join(map(repr, averaged))}")


@cache
def load_metric(module: str):
    """The packaged evaluate module `module`, its predictions kept in memory (nothing written under HF_HOME)."""
    import_main_class = import_needed("evaluate.loading", "scoring a task (its metrics are evaluate modules)",
                                      "evaluate").import_main_class
    path = module_file(module)
    if not path.is_file():
        known = sorted(p.name for p in METRIC_DIR.iterdir() if p.is_dir())
        raise ConfigError(f"no metric module {path}; packaged modules: {known}")
    module_name = f"linformer_metric_{module}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    code = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = code  # import_main_class finds the module by name
    spec.loader.exec_module(code)
    # keep_in_memory: no cache file is ever written; evaluate still makes an (unused) data folder under cache_dir,
    # which goes to a temporary folder of this process's own rather than under HF_HOME
    with tempfile.TemporaryDirectory(prefix="linformer-metric-") as unused:
        return import_main_class(module_name)(keep_in_memory=True, cache_dir=unused)


def load_metrics(names: tuple[str, ...]) -> None:
    """Load the modules of the metrics `names`: a run does it at its start, so that a metric that cannot load fails
    it before any training rather than at its final scoring."""
    for name in names:
        load_metric(METRICS[name].module)


def score(names: tuple[str, ...], predictions, references) -> dict[str, float]:
    """{metric: value} for each of the metrics `names` (entries of METRICS).

    predictions are label ids (or logits of shape [N, num_labels], argmaxed here); references are label ids.
    """
    preds = np.asarray(predictions)
    if preds.ndim == 2:
        preds = preds.argmax(-1)
    refs = np.asarray(references)
    if preds.shape != refs.shape:
        raise ValueError(f"predictions {preds.shape} and references {refs.shape} differ in shape")
    out: dict[str, float] = {}
    for name in names:
        spec = METRICS[name]
        (value,) = load_metric(spec.module).compute(predictions=preds.tolist(), references=refs.tolist(),
                                                    **spec.kwargs).values()
        out[name] = value
    return out
