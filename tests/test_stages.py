"""linformer.stages: dependency order, skipping finished stages, parallel jobs and clear failures."""

import sys
from pathlib import Path

import pytest

from linformer.stages import Stage, StageFailed, run_stages


def _writer(path, sleep=0.0, env_out=None):
    """A stage command that sleeps, appends its start/end times to a journal, and writes its `done` file."""
    code = (f"import os,time,sys; t=time.time(); time.sleep({sleep}); "
            f"open({str(path)!r}, 'w').write(os.environ.get('OMP_NUM_THREADS', '-')); "
            f"open({str(path.parent / 'journal')!r}, 'a').write(f'{path.name} {{t}} {{time.time()}}\\n')")
    return [sys.executable, "-c", code]


def _journal(tmp_path):
    rows = [line.split() for line in (tmp_path / "journal").read_text().splitlines()]
    return {name: (float(a), float(b)) for name, a, b in rows}


def test_dependencies_run_first_and_finished_stages_are_skipped(tmp_path):
    (tmp_path / "a").write_text("old")  # finished in an earlier, interrupted run
    stages = [Stage("a", _writer(tmp_path / "a"), tmp_path / "a"),
              Stage("c", _writer(tmp_path / "c"), tmp_path / "c", ("b",)),  # listed before what it needs
              Stage("b", _writer(tmp_path / "b", 0.3), tmp_path / "b", ("a",))]
    times = run_stages(stages, jobs=1)
    assert set(times) == {"b", "c"} and (tmp_path / "a").read_text() == "old"
    j = _journal(tmp_path)
    assert j["b"][1] <= j["c"][0]


def test_parallel_jobs_overlap_get_their_threads_and_logs(tmp_path):
    logs = tmp_path / "logs"
    stages = [Stage(name, _writer(tmp_path / name, 1.0), tmp_path / name) for name in ("x", "y")]
    run_stages(stages, jobs=2, log_dir=logs, cores=4)
    j = _journal(tmp_path)
    assert j["x"][0] < j["y"][1] and j["y"][0] < j["x"][1]  # each started before the other ended
    assert (tmp_path / "x").read_text() == "2"  # 4 cores / 2 jobs
    assert (logs / "x.log").read_text().startswith("$ ")


def test_a_failure_names_the_stage_and_blocks_its_dependants(tmp_path):
    stages = [Stage("bad step", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "never"),
              Stage("after", _writer(tmp_path / "after"), tmp_path / "after", ("bad step",)),
              Stage("quiet", [sys.executable, "-c", "pass"], tmp_path / "missing")]
    with pytest.raises(StageFailed) as err:
        run_stages(stages, jobs=2, log_dir=tmp_path / "logs")
    msg = str(err.value)
    assert "bad step: exit status 3" in msg and "bad_step.log" in msg
    assert "quiet: exit 0 but" in msg and "not started: after" in msg
    assert not (tmp_path / "after").exists()


def test_plan_errors():
    with pytest.raises(ValueError, match="unknown stages"):
        run_stages([Stage("a", ["true"], Path("/nonexistent"), ("b",))])
    with pytest.raises(ValueError, match="repeat"):
        run_stages([Stage("a", ["true"], Path("/x")),
                    Stage("a", ["true"], Path("/y"))])
