"""Validation perplexity against updates for pretraining runs (the paper's Figure 3)."""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from ..rundir import load_run
from .compare import plot_metric

PLATEAU_LABEL = "no context, own input token only"  # the plateau's line (data.unigram.context_free_perplexity)


def plot_pretrain_curves(runs: dict[str, str | Path], out_png: str | Path, title: str = "",
                         plateau_ppl: float | None = None, ratio_to: str | None = None) -> Path:
    """runs: label -> pretraining run dir. Log-scale validation perplexity against updates, one line per run
    (dashed for full attention), and a grey line at the plateau when given: the perplexity of the best model that
    reads no context (``data.unigram.context_free_perplexity``);
    `ratio_to`, a label, adds a panel of each run's perplexity as percent above that run's (``plot_metric``)."""
    loaded = [load_run(d, rows=False) for d in runs.values()]  # each series streamed as it is drawn (series)
    reference = None if plateau_ppl is None else (PLATEAU_LABEL, plateau_ppl)
    out = plot_metric(loaded, "val_ppl", out_png, log_y=True, labels=list(runs),
                      title=title or "MLM validation perplexity (cf. Linformer Figure 3)", reference=reference,
                      ratio_to=None if ratio_to is None else loaded[list(runs).index(ratio_to)])
    if out is None:
        raise DataError(f"no validation perplexity (val_ppl) in the metrics.jsonl of {', '.join(map(str, runs.values()))}")
    return out
