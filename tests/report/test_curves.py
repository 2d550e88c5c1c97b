"""The pretraining-curve plot of the mini reproduction, on synthetic runs."""

import json
from pathlib import Path

from linformer.report.compare import series
from linformer.report.curves import plot_pretrain_curves
from linformer.rundir import load_run

from .conftest import line_colours


def _pretrain_run(d: Path, base: float) -> Path:
    d.mkdir()
    rows = [{"step": s, "loss": 3.0} | ({"val_ppl": base / (1 + s / 100)} if s % 50 == 0 else {}) for s in range(0, 201, 10)]
    d.joinpath("metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_pretrain_curves_plot(tmp_path):
    runs = {label: _pretrain_run(tmp_path / label, base) for label, base in (("full", 50.0), ("k32-kv", 60.0))}
    out = plot_pretrain_curves(runs, tmp_path / "curves.png")
    assert series(load_run(runs["full"]), "val_ppl")[0] == [0, 50, 100, 150, 200]
    assert all(n > 100 for n in line_colours(out, (840, 504), 2))   # both runs drew their line


def test_pretrain_curves_skip_a_torn_last_line(tmp_path):
    """A run killed mid-write (or still writing) leaves half a line at the end of metrics.jsonl."""
    runs = {"k32": _pretrain_run(tmp_path / "k32", 60.0)}
    with (runs["k32"] / "metrics.jsonl").open("a") as f:
        f.write('{"step": 210, "val_p')
    out = plot_pretrain_curves(runs, tmp_path / "curves.png")
    assert line_colours(out, (840, 504), 1)[0] > 100
