"""The demo (scripts/demo.py, linformer/experiments/demo.py) replaces its own runs only: a run directory named by run_name= that the demo did not make stays."""

import pytest

from linformer.errors import DataError
from linformer.experiments import demo


def test_the_demo_removes_its_own_runs_and_refuses_anything_else(tmp_path):
    mine = tmp_path / "demo"
    mine.mkdir()
    (mine / "config.yaml").write_text("experiment_name: demo\nrun_name: demo\n")
    demo.remove_demo_run(mine)
    assert not mine.exists()
    demo.remove_demo_run(tmp_path / "absent")  # nothing there: nothing to do

    for name, files in (("notes", {"notes.txt": "mine"}),
                        ("other-run", {"config.yaml": "experiment_name: table2\n", "metrics.jsonl": "{}\n"})):
        victim = tmp_path / name
        victim.mkdir()
        for file, text in files.items():
            (victim / file).write_text(text)
        with pytest.raises(DataError, match=f"{victim} exists and is not a demo run"):
            demo.remove_demo_run(victim)
        assert {p.name: p.read_text() for p in victim.iterdir()} == files
