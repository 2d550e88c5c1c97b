"""The pretrained-encoder Table 2 on synthetic run directories: rows, paired differences, targets, the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from linformer.report import by_length
from linformer.report import table2_pretrained as tp

REPO = Path(__file__).resolve().parents[2]


def _model(tmp_path, name, k=None, sharing=None, transfer=False):
    d = tmp_path / "models" / name
    d.mkdir(parents=True)
    info = {"transfer": {"steps": 10, "tokens": 20480, "train": "all", "target": "hidden",
                         "rel_err_before": [0.2, 0.6], "rel_err_after": [0.1, 0.3]} if transfer else None}
    (d / "linformer_card.json").write_text(json.dumps(info))
    return d


def _run(tmp_path, name, model, task, seed, correct, k=None, sharing=None, labels=None):
    d = tmp_path / "runs" / name
    d.mkdir(parents=True)
    (d / "metrics.jsonl").write_text("")
    labels = np.zeros(len(correct), dtype=int) if labels is None else labels
    preds = np.where(correct, labels, 1 - labels)
    results = {"task": task, "seed": seed, "model_path": str(model), "metrics": {"accuracy": float(np.mean(correct))},
               "attention": "full" if k is None else "linformer", "projected_dim": k, "sharing": sharing,
               "num_train_examples": 100}
    (d / "results.json").write_text(json.dumps(results))
    (d / "eval_predictions.json").write_text(json.dumps({"labels": labels.tolist(), "predictions": preds.tolist()}))


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(0)
    n = 1000
    teacher = {s: rng.random(n) < 0.90 for s in (0, 1)}
    full = _model(tmp_path, "full")
    plain = _model(tmp_path, "k8", 8, "layerwise")
    moved = _model(tmp_path, "k8-tr", 8, "layerwise", transfer=True)
    for s, c in teacher.items():
        _run(tmp_path, f"imdb-full-s{s}", full, "imdb", s, c)
        worse = c.copy()
        worse[np.flatnonzero(c)[:60]] = False  # 6 points below the teacher
        _run(tmp_path, f"imdb-k8-s{s}", plain, "imdb", s, worse, 8, "layerwise")
        close = c.copy()
        close[np.flatnonzero(c)[:20]] = False  # 2 points below: closes 4 of the 6 points
        _run(tmp_path, f"imdb-k8-tr-s{s}", moved, "imdb", s, close, 8, "layerwise")
    _run(tmp_path, "sst2-full-s0", full, "sst2", 0, rng.random(200) < 0.92)
    return tmp_path


def test_rows_paired_differences_and_targets(runs):
    rows = tp.build_rows(tp.read_runs([str(runs / "runs")]))
    assert [r["name"] for r in rows] == ["full attention (teacher)", "linformer k=8, layerwise",
                                        "linformer k=8, layerwise + transfer"]
    teacher, plain, moved = rows
    assert teacher["tasks"]["imdb"]["seeds"].keys() == {0, 1} and "vs_teacher" not in teacher["tasks"]["imdb"]
    d = plain["tasks"]["imdb"]["vs_teacher"]
    assert d["diff"] == pytest.approx(-6.0) and d["hi"] < 0 and d["mcnemar_p"] < 1e-10
    assert moved["tasks"]["imdb"]["vs_teacher"]["diff"] == pytest.approx(-2.0)
    assert moved["transfer_info"]["rel_err_after"] == [0.1, 0.3]
    text = "\n".join(tp.targets(rows))
    assert "Teacher SST-2 >= 89: met" in text
    assert "linformer k=8, layerwise + transfer, IMDB within 1 of the teacher: missed (-2.0)" in text
    assert "transfer closes 67% of the 6.0-point gap (met" in text


def test_runs_on_other_eval_examples_are_refused(runs, tmp_path):
    model = tmp_path / "models" / "full"
    _run(tmp_path, "imdb-full-s5", model, "imdb", 5, np.ones(999, dtype=bool))
    with pytest.raises(tp.DataError, match="evaluated on other examples"):
        tp.build_rows(tp.read_runs([str(runs / "runs")]))


def test_cli_writes_markdown_and_json(runs, tmp_path):
    out = tmp_path / "table"
    proc = subprocess.run([sys.executable, "scripts/table2.py", str(runs / "runs" / "*"), "--layout", "pretrained",
                           "--no-measure", "--no-by-length", "--out", str(out), "--command",
                           "make reproduce-pretrained"],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    md = (out.with_suffix(".md")).read_text()
    assert "| linformer k=8, layerwise | - | - | 84.3" in md or "linformer k=8, layerwise |" in md
    assert "-6.0 [" in md and "## Targets" in md
    data = json.loads(out.with_suffix(".json").read_text())
    assert [r["transfer"] for r in data["rows"]] == [False, False, True]
    empty = subprocess.run([sys.executable, "scripts/table2.py", str(tmp_path / "nothing"), "--layout", "pretrained",
                            "--no-measure", "--out", str(out)], cwd=REPO, capture_output=True, text=True)
    assert empty.returncode == 2 and empty.stderr.startswith("error: no finished finetuning runs")


def test_by_length_finds_where_a_variant_loses():
    """A variant wrong only on the longest quarter of the examples loses there and nowhere else."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(5, 500, 800)
    teacher = (rng.random(800) < 0.85).astype(float)
    longest = lengths > np.quantile(lengths, 0.75)
    variant = np.where(longest & (rng.random(800) < 0.4), 0.0, teacher)
    res = by_length.by_length(lengths, teacher, {"v": variant, "same": teacher})
    assert len(res["buckets"]) == 4 and sum(res["examples"]) == 800
    assert res["buckets"][0].startswith("1-") and res["buckets"][-1].endswith(f"-{lengths.max()}")
    diffs = [d["diff"] for d in res["rows"]["v"]]
    assert diffs[:3] == [0.0, 0.0, 0.0] and diffs[3] < -20 and res["rows"]["v"][3]["hi"] < 0
    assert all(d["diff"] == 0.0 for d in res["rows"]["same"])
    assert res["teacher_acc"][3] == pytest.approx(100 * teacher[longest].mean())
