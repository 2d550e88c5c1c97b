"""The reproduction scripts' command line: a bad --jobs is one error line and exit 2, before any job starts."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["reproduce_mini", "reproduce_pretrained"])
def test_bad_jobs_is_one_error_line(capsys, script):
    sys.path.insert(0, str(REPO / "scripts"))
    main = __import__(script).main
    with pytest.raises(SystemExit) as stop:
        main(["--jobs", "0", "--dry-run"])
    out = capsys.readouterr()
    assert stop.value.code == 2 and out.out == ""
    assert out.err == "error: --jobs 0: at least one job must run at a time\n"


def test_a_plan_s_time_left_under_a_minute_is_not_printed_as_0_min(tmp_path, capsys):
    from linformer.experiments.frontend import show
    from linformer.jobs import Job

    plan = [Job("a", ["python", "x.py"], tmp_path / "a.json"), Job("b", ["python", "y.py"], tmp_path / "b.json")]
    show(plan, "plan", lambda job: 0.4, "measured", 1)
    assert "2 of 2 jobs left: under a minute with 1 at a time (measured)." in capsys.readouterr().out
    show(plan, "plan", lambda job: 2.6, "measured", 2)
    assert "2 of 2 jobs left: about 3 min with 2 at a time (measured)." in capsys.readouterr().out
