"""make reproduce-pretrained: the plan of both profiles, as its dry run prints it."""

import subprocess
import sys
from pathlib import Path

import pytest

from linformer import pretrained_experiment as exp
from linformer.stages import _check

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(exp.PROFILES))
def test_every_row_is_finetuned_on_both_tasks_from_the_model_its_stage_builds(name):
    p = exp.PROFILES[name]
    stages = exp.plan(p, python="python")
    _check(stages)  # unique names, every need known
    by_name = {s.name: s for s in stages}
    rows = exp.rows(p)
    assert len(rows) == 1 + 2 * len(p.ks) * len(p.sharings) and len(p.ks) >= 2 and "layerwise" in p.sharings
    for row in rows:
        (prepare,) = row.prepare
        assert str(row.model_dir) in " ".join(by_name[prepare].argv) or row.transfer
        for task in ("sst2", "imdb"):
            seeds = p.seeds if (row.transfer or row.k is None) else p.other_seeds
            for seed in seeds:
                s = by_name[f"finetune {exp.run_name(p, task, row, seed)}"]
                assert s.needs == row.prepare and f"model_path={row.model_dir}" in s.argv
                # fixed subsets: every row and seed is evaluated on the same examples (paired comparisons)
                assert "subset_seed=0" in s.argv and f"seed={seed}" in s.argv
    assert len(p.seeds) == 3
    imdb = p.tasks["imdb"]
    assert imdb.max_length == exp.N and (imdb.eval is None or imdb.eval >= 2000)
    # seed 0 of every row comes before any other seed: an interrupted run has a whole table first
    order = [s.name for s in stages if s.name.startswith("finetune")]
    first_other = min(i for i, n in enumerate(order) if not n.endswith("-s0"))
    assert all(n.endswith("-s0") for n in order[:first_other]) and len(order[:first_other]) == 2 * len(rows)


def test_dry_run_prints_the_plan_and_the_time_it_needs():
    proc = subprocess.run([sys.executable, "scripts/reproduce_pretrained.py", "--dry-run", "--profile", "gpu"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "finetune tp-gpu-imdb-k64-layerwise-tr-s2: python scripts/finetune.py task=imdb" in out
    assert "python scripts/transfer.py model_path=minilm" in out and "--layout pretrained --profile gpu" in out
    assert "min with 1 at a time (rough guesses" in out and "resumes: run the same command again" in out
    bad = subprocess.run([sys.executable, "scripts/reproduce_pretrained.py", "--jobs", "0", "--dry-run"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --jobs 0: at least one stage must run at a time"
