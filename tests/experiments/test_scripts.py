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
    assert "2 of 2 jobs left: under a minute with 1 at a time, each job after what it needs (measured)." in \
        capsys.readouterr().out
    show(plan, "plan", lambda job: 2.6, "measured", 2)
    assert "2 of 2 jobs left: about 3 min with 2 at a time, each job after what it needs (measured)." in \
        capsys.readouterr().out


def test_a_plan_s_minutes_follow_what_each_job_waits_for_and_say_which_rows_fit(tmp_path, capsys):
    """The estimate was the minutes' sum over the jobs at a time: 4 finetunes waiting on one 3-minute pretraining
    read as 1.75 min with 4 at a time, not 4. Each row's own minutes (--only ROW on a fresh machine) say whether
    it fits --stop-after."""
    from linformer.experiments.frontend import schedule, show
    from linformer.jobs import STOP_WAIT_S, Job

    def job(name, needs=()):
        return Job(name, ["python", f"{name}.py"], tmp_path / f"{name}.json", tuple(needs))

    plan = [job("pretrain a"), *(job(f"finetune a{i}", ["pretrain a"]) for i in range(4)),
            job("pretrain b"), *(job(f"finetune b{i}", ["pretrain b"]) for i in range(2))]
    minutes = {"pretrain a": 3.0, "pretrain b": 1.0}
    ends = schedule(plan, lambda s: minutes.get(s.name, 1.0), 4)
    # both pretrainings start at once; b's runs start when it ends, a's four wait for it
    assert ends["pretrain b"] == 1.0 and ends["finetune b0"] == ends["finetune b1"] == 2.0
    assert [ends[f"finetune a{i}"] for i in range(4)] == [4.0, 4.0, 4.0, 4.0]
    rows = {"a": {f"finetune a{i}" for i in range(4)}, "b": {"finetune b0", "finetune b1"}}
    show(plan, "plan", lambda s: minutes.get(s.name, 1.0), "measured", 4, rows=rows, stop_after=3.5)
    out = capsys.readouterr().out
    assert "8 of 8 jobs left: about 4 min with 4 at a time" in out
    assert "[row] a: 5 jobs left, about 4.0 min alone (--only a): does not fit --stop-after 3.5" in out
    assert "[row] b: 3 jobs left, about 2.0 min alone (--only b): fits --stop-after 3.5" in out
    # the stop's wait (jobs.STOP_WAIT_S) comes after the stop: the command ends by then, as gpu.py's --limit counts
    assert f"are stopped and have ended by {3.5 + STOP_WAIT_S / 60:g} min (the stop's wait" in out


@pytest.mark.parametrize("script", ["reproduce_pretrained", "reproduce_scratch"])
def test_an_unknown_row_for_only_is_one_error_line_naming_the_rows(capsys, script):
    sys.path.insert(0, str(REPO / "scripts"))
    main = __import__(script).main
    with pytest.raises(SystemExit) as stop:
        main(["--profile", "gpu", "--only", "full,k128", "--dry-run"])
    out = capsys.readouterr()
    assert stop.value.code == 2 and out.out == ""
    assert out.err.startswith("error: --only full,k128: no row 'k128'; the rows are full, ") and \
        out.err.count("\n") == 1


def test_a_plan_whose_finetuning_data_is_missing_stops_before_its_first_job(tmp_path, monkeypatch, capsys):
    """QNLI's train.tsv cannot be had here: the plan said nothing, pretrained for its rows, then failed at the first
    QNLI finetuning. The tasks its jobs still to run read are checked first (a dry run warns)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import reproduce_scratch

    from linformer.experiments import frontend

    mirror = tmp_path / "mirror"
    for rel in ("glue/sst2/train.tsv", "glue/sst2/dev.tsv", "imdb/train.csv", "imdb/test.csv"):
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_text("x\n")
    monkeypatch.setattr(frontend, "default_data_mirror", lambda: str(mirror))
    under = tmp_path / "under"
    args = ["--tasks", "sst2,imdb,qnli", "--under", str(under)]
    assert reproduce_scratch.main([*args, "--dry-run"]) == 0
    assert f"warning: the run would stop here: task directory {mirror}/glue/qnli not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        reproduce_scratch.main(args)
    assert stop.value.code == 2 and f"error: task directory {mirror}/glue/qnli not found" in capsys.readouterr().err
    assert not under.exists()  # no job started
    plan = reproduce_scratch.exp.plan(reproduce_scratch.exp.PROFILES["toy"], under=under)
    assert frontend.tasks_to_run(frontend.wanted(plan, set())) == ["sst2", "imdb"]


def test_a_dry_run_says_where_the_run_would_be_refused(tmp_path, capsys):
    """--under a file passed a dry run, and the real run was refused: the dry run now makes the run's output check."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import reproduce_scratch

    (tmp_path / "afile").write_text("x")
    assert reproduce_scratch.main(["--dry-run", "--under", str(tmp_path / "afile")]) == 0
    assert f"warning: the run would stop here: {tmp_path / 'afile'} is a file, not a folder" in capsys.readouterr().err


def test_an_empty_task_list_is_refused_not_read_as_the_default(capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import reproduce_scratch

    with pytest.raises(SystemExit) as stop:
        reproduce_scratch.main(["--dry-run", "--tasks", ""])
    assert stop.value.code == 2 and "has no recipe for ''" in capsys.readouterr().err


def test_a_dry_run_of_the_report_alone_shows_the_report_not_the_plan(capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import reproduce_scratch

    assert reproduce_scratch.main(["--dry-run", "--report-only"]) == 0
    out = capsys.readouterr().out
    assert "[report] python scripts/table2.py" in out and "[todo" not in out and "jobs left" not in out


def test_the_report_alone_shows_the_report_not_the_plan_before_its_error(tmp_path, capsys):
    """--report-only with no finished runs printed the whole plan and 'An interrupted run resumes' before its error,
    as if jobs were about to run."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import reproduce_scratch

    rc = reproduce_scratch.main(["--report-only", "--under", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc != 0 and "[report] python scripts/table2.py" in out and "[todo" not in out and "resumes" not in out


def test_a_second_runner_of_one_plan_is_refused_before_any_job(tmp_path, monkeypatch, capsys):
    """A second runner of the same plan started the jobs the first was running, each refused by its run's lock only
    after truncating the first runner's log of it. The plan's runner holds a lock of its own."""
    sys.path.insert(0, str(REPO / "scripts"))
    import reproduce_scratch

    from linformer.experiments import Places, frontend
    from linformer.rundir import RunLock

    mirror = tmp_path / "mirror"
    for rel in ("glue/sst2/train.tsv", "glue/sst2/dev.tsv", "imdb/train.csv", "imdb/test.csv"):
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_text("x\n")
    monkeypatch.setattr(frontend, "default_data_mirror", lambda: str(mirror))
    monkeypatch.setattr(frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    under = tmp_path / "under"
    logs = REPO / Places.of(under).outputs("reproduce_scratch_toy_logs")
    first = RunLock(logs, tidy=True)
    first.acquire()  # the first runner: this (live) process
    try:
        with pytest.raises(SystemExit) as stop:
            reproduce_scratch.main(["--under", str(under)])
    finally:
        first.release()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"error: {logs} is in use by process" in err and "another --under" in err
    assert not logs.exists()  # the first runner's lock released with the folder made for it, nothing written
