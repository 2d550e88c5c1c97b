"""The mini reproduction's plan (--dry-run) and the pretraining-curve plot, without training anything."""

import json
import subprocess
import sys
from pathlib import Path

from linformer.report.compare import series
from linformer.report.curves import plot_pretrain_curves
from linformer.rundir import load_run

from .conftest import line_colours

REPO = Path(__file__).resolve().parents[2]


def test_dry_run_prints_the_plan():
    r = subprocess.run([sys.executable, "scripts/reproduce_mini.py", "--dry-run"], cwd=REPO, capture_output=True,
                       text=True, check=True)
    lines = [line for line in r.stdout.splitlines() if line.startswith("[")]
    pre = [line for line in lines if "scripts/pretrain.py" in line]
    fin = [line for line in lines if "scripts/finetune.py" in line]
    assert len(pre) == 7 and len(fin) == 32 and sum("from_scratch=true" in line for line in fin) == 4
    assert sum("trainer.lr=0.0003" in line for line in fin) == sum("trainer.lr=0.001" in line for line in fin) == 16
    assert all("experiment=table2_mini" in line and "seed=0" in line for line in pre + fin)
    assert sum("model.projected_dim=32 model.sharing=" in line for line in pre) == 3
    (full,) = [line for line in pre if "model.attention=full" in line]
    assert "projected_dim" not in full and "sharing" not in full   # full attention has no k
    assert any("scripts/table2.py" in line for line in lines)


def test_bad_jobs_is_one_error_line():
    r = subprocess.run([sys.executable, "scripts/reproduce_mini.py", "--jobs", "0", "--dry-run"], cwd=REPO,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "error: --jobs 0: at least one stage must run at a time\n"


def test_plan_names_are_unique():
    sys.path.insert(0, str(REPO / "scripts"))
    import reproduce_mini

    plan = reproduce_mini.plan()
    assert len({s.name for s in plan}) == len(plan) == 2 + 7 + 32
    by_name = {s.name: s for s in plan}
    # every finetune waits for the pretraining run it loads (the scratch baseline reads mini-full's config)
    for s in plan:
        if s.name.startswith("finetune"):
            (need,) = s.needs
            model_path = next(a for a in s.argv if a.startswith("model_path="))
            assert by_name[need].name.startswith("pretrain") and f"run_name={model_path.rsplit('/', 1)[1]}" in by_name[need].argv


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
