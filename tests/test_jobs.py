"""linformer.jobs: dependency order, skipping finished jobs, parallel jobs and clear failures."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from linformer.jobs import Job, JobFailed, in_order_of_use, run_jobs

from .conftest import as_a_script


def _writer(path, sleep=0.0, env_out=None):
    """A job command that sleeps, appends its start/end times to a journal, and writes its `done` file."""
    code = (f"import os,time,sys; t=time.time(); time.sleep({sleep}); "
            f"open({str(path)!r}, 'w').write(os.environ.get('OMP_NUM_THREADS', '-')); "
            f"open({str(path.parent / 'journal')!r}, 'a').write(f'{path.name} {{t}} {{time.time()}}\\n')")
    return [sys.executable, "-c", code]


def _journal(tmp_path):
    rows = [line.split() for line in (tmp_path / "journal").read_text().splitlines()]
    return {name: (float(a), float(b)) for name, a, b in rows}


def test_dependencies_run_first_and_finished_jobs_are_skipped(tmp_path):
    (tmp_path / "a").write_text("old")  # finished in an earlier, interrupted run
    jobs = [Job("a", _writer(tmp_path / "a"), tmp_path / "a"),
              Job("c", _writer(tmp_path / "c"), tmp_path / "c", ("b",)),  # listed before what it needs
              Job("b", _writer(tmp_path / "b", 0.3), tmp_path / "b", ("a",))]
    times = run_jobs(jobs, jobs=1)
    assert set(times) == {"b", "c"} and (tmp_path / "a").read_text() == "old"
    j = _journal(tmp_path)
    assert j["b"][1] <= j["c"][0]


def test_parallel_jobs_overlap_get_their_threads_and_logs(tmp_path):
    logs = tmp_path / "logs"
    jobs = [Job(name, _writer(tmp_path / name, 1.0), tmp_path / name) for name in ("x", "y")]
    run_jobs(jobs, jobs=2, log_dir=logs, cores=4)
    j = _journal(tmp_path)
    assert j["x"][0] < j["y"][1] and j["y"][0] < j["x"][1]  # each started before the other ended
    assert (tmp_path / "x").read_text() == "2"  # 4 cores / 2 jobs
    assert (logs / "x.log").read_text().startswith("$ ")


def test_a_failure_names_the_jobs_and_blocks_its_dependants(tmp_path):
    jobs = [Job("bad step", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "never"),
              Job("after", _writer(tmp_path / "after"), tmp_path / "after", ("bad step",)),
              Job("quiet", [sys.executable, "-c", "pass"], tmp_path / "missing")]
    with pytest.raises(JobFailed) as err:
        run_jobs(jobs, jobs=2, log_dir=tmp_path / "logs")
    msg = str(err.value)
    assert "bad step: exit status 3" in msg and "bad_step.log" in msg
    assert "quiet: exit 0 but" in msg and "not started: after" in msg
    assert not (tmp_path / "after").exists()


def test_a_job_whose_estimate_ends_past_end_by_is_not_started_nor_what_needs_it(tmp_path, capsys):
    """With end_by and the jobs' estimates: a job that by its estimate cannot end by then is not started (stopped at
    the deadline it would leave a checkpoint a fresh machine lacks), nor a job that needs it; the others run, the
    runner ends when nothing else can start, and one NOT_STARTED line names the jobs it left."""
    from linformer.jobs import NOT_STARTED

    estimates = {"prep": 0.01, "short": 0.01, "long": 30.0, "after long": 0.01, "after short": 0.01}
    jobs = [Job("prep", _writer(tmp_path / "prep"), tmp_path / "prep"),
            Job("long", _writer(tmp_path / "long"), tmp_path / "long", ("prep",)),
            Job("short", _writer(tmp_path / "short"), tmp_path / "short", ("prep",)),
            Job("after long", _writer(tmp_path / "after long"), tmp_path / "after long", ("long",)),
            Job("after short", _writer(tmp_path / "after short"), tmp_path / "after short", ("short",))]
    # the clock: the stop 10 minutes from now, far past the short jobs' estimates and well before the long one's end
    times = run_jobs(jobs, jobs=2, log_dir=tmp_path / "logs", end_by=time.monotonic() + 600,
                     minutes=lambda job: estimates[job.name])
    assert set(times) == {"prep", "short", "after short"}
    assert not (tmp_path / "long").exists() and not (tmp_path / "after long").exists()
    assert f"{NOT_STARTED} long, after long\n" in capsys.readouterr().err
    assert set(run_jobs(jobs, jobs=2, log_dir=tmp_path / "logs")) == {"long", "after long"}  # no stop: they run


def test_plan_errors():
    with pytest.raises(ValueError, match="unknown jobs"):
        run_jobs([Job("a", ["true"], Path("/nonexistent"), ("b",))])
    with pytest.raises(ValueError, match="repeat"):
        run_jobs([Job("a", ["true"], Path("/x")),
                    Job("a", ["true"], Path("/y"))])


def test_stopping_the_runner_stops_its_jobs(tmp_path):
    """SIGTERM to the runner reaches each running job (which saves and exits) instead of orphaning it."""
    child = (f"import pathlib,signal,sys,time,os; "
             f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(tmp_path / 'saved')!r}).write_text('1'), "
             f"sys.exit(0))); pathlib.Path({str(tmp_path / 'pid')!r}).write_text(str(os.getpid())); time.sleep(60)")
    runner = (f"import sys; from pathlib import Path; from linformer.jobs import Job, run_jobs\n"
              f"try:\n    run_jobs([Job('long', [sys.executable, '-c', {child!r}], Path({str(tmp_path / 'never')!r}))],"
              f" jobs=2, log_dir=Path({str(tmp_path / 'logs')!r}))\n"
              f"except KeyboardInterrupt:\n    sys.exit(130)\n")
    proc = subprocess.Popen(as_a_script(runner, tmp_path), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180  # the runner imports the package first: a minute and more on a loaded machine
    while not (tmp_path / "pid").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "[stopped] long" in err
    assert (tmp_path / "saved").read_text() == "1"  # the job got SIGTERM and ran its handler
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)


def test_a_stopped_plan_exits_128_plus_the_signal_that_stopped_it(tmp_path, monkeypatch, capsys):
    """A plan stopped by SIGTERM (a scheduler) exits 143, by Ctrl-C 130, as a command the signal stopped does; one
    stopped at its deadline, as by the SIGTERM its jobs got. Every stop was 130, so SIGTERM read as Ctrl-C."""
    import threading

    from linformer.experiments import frontend
    from linformer.jobs import JobsStopped
    from linformer.signals import Interrupted

    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        rc, times = frontend.run([Job("sleep", [sys.executable, "-c", "import time; time.sleep(30)"], None)], 1, tmp_path)
    finally:
        timer.cancel()
    assert (rc, times) == (128 + signal.SIGTERM, {}) and "stopped" in capsys.readouterr().err
    for stop, status in ((KeyboardInterrupt(), 130), (Interrupted(signal.SIGHUP), 129), (JobsStopped({}), 143)):
        monkeypatch.setattr(frontend, "run_jobs", lambda *a, stop=stop, **k: (_ for _ in ()).throw(stop))
        assert frontend.run([], 1, tmp_path) == (status, {})


def test_a_kept_jobs_copies_its_records_and_a_finished_uncopied_run_is_kept_not_run_again(tmp_path):
    import shutil

    def keeper(run, kept):
        def keep():
            if not (run / "result").exists():
                return False
            kept.mkdir(parents=True, exist_ok=True)
            shutil.copy(run / "result", kept / "result")
            return True
        return keep

    runs = {name: (tmp_path / "outputs" / name, tmp_path / "kept" / name) for name in ("fresh", "finished")}
    for run, _ in runs.values():
        run.mkdir(parents=True)
    (runs["finished"][0] / "result").write_text("from before")  # ran to the end, then the runner was stopped
    jobs = [Job(name, _writer(run / "result"), kept / "result", keep=keeper(run, kept))
              for name, (run, kept) in runs.items()]
    times = run_jobs(jobs, jobs=1)
    assert set(times) == {"fresh"}  # the finished run was kept, not run again
    assert (tmp_path / "kept" / "finished" / "result").read_text() == "from before"
    assert (tmp_path / "kept" / "fresh" / "result").is_file()


def test_intermediate_jobs_run_only_for_what_still_needs_them(tmp_path):
    """A fresh clone with every final record kept rebuilds no corpus or model; one missing record rebuilds only
    the chain it needs; an intermediate written meanwhile by a job it needs is not run again."""
    def job(name, needs=(), intermediate=False, writes=()):
        argv = _writer(tmp_path / name)
        if writes:  # also writes another job's product
            argv = [sys.executable, "-c", argv[2] + "".join(f"; open({str(tmp_path / w)!r}, 'w').write('x')"
                                                             for w in writes)]
        return Job(name, argv, tmp_path / name, tuple(needs), intermediate=intermediate)

    plan = [job("corpus", intermediate=True), job("model", ["corpus"], intermediate=True),
            job("teacher", writes=["teacher-weights"]), job("teacher-weights", ["teacher"], intermediate=True),
            job("run1", ["model"]), job("run2", ["model"]), job("distilled", ["teacher-weights"])]
    for done in ("run1", "run2", "teacher", "distilled"):
        (tmp_path / done).write_text("kept")
    assert run_jobs(plan) == {}  # nothing needed
    (tmp_path / "run2").unlink()
    assert set(run_jobs(plan)) == {"corpus", "model", "run2"}
    (tmp_path / "distilled").unlink()
    (tmp_path / "teacher").unlink()
    assert set(run_jobs(plan)) == {"teacher", "distilled"}  # teacher wrote teacher-weights: not run again


def test_in_order_of_use_builds_each_input_just_before_its_first_user():
    def job(name, needs=(), intermediate=False):
        return Job(name, ["true"], Path(name), tuple(needs), intermediate=intermediate)

    plan = [job("corpus", intermediate=True), job("teacher", intermediate=True),
            job("model-a", ["corpus"], intermediate=True), job("model-b", ["corpus"], intermediate=True),
            job("unused", intermediate=True),
            job("teacher-run", ["teacher"]), job("a-run", ["model-a"]), job("b-run", ["model-b"]),
            job("a-run-2", ["model-a"])]
    order = [s.name for s in in_order_of_use(plan)]
    assert order == ["teacher", "teacher-run", "corpus", "model-a", "a-run", "model-b", "b-run", "a-run-2", "unused"]


def test_the_gpu_table2_plan_finishes_a_run_before_building_every_model():
    from linformer.experiments import pretrained as exp

    names = [s.name for s in exp.plan(exp.PROFILES["gpu"])]
    assert names[:3] == ["convert full", "finetune tp-gpu-sst2-full-s0", "finetune tp-gpu-imdb-full-s0"]
    first_transfer = names.index("transfer k128-layerwise-local")  # the targets' rows come first
    assert names[first_transfer - 1] == "corpus"
    assert names[first_transfer + 1] == "finetune tp-gpu-sst2-k128-layerwise-local-tr-s0"
    assert sorted(names) == sorted({*names})  # every job once


def test_a_torn_json_record_is_not_done(tmp_path):
    """A results.json cut short by a kill or a bad copy: the job runs again instead of counting as finished."""
    record = tmp_path / "results.json"
    job = Job("run", [sys.executable, "-c", f"open({str(record)!r}, 'w').write('{{\"a\": 1}}')"], record)
    record.write_text('{"a": 1, "b"')
    assert not job.finished
    run_jobs([job], jobs=1)
    assert job.finished and json.loads(record.read_text()) == {"a": 1}


def test_a_stale_record_runs_again_and_its_replacement_counts(tmp_path):
    """A record that exists but no longer counts (made under an older protocol, or from another start): the job
    runs again, and the runner accepts the new record, which is not stale; without `stale` it would be skipped."""
    record = tmp_path / "results.json"
    record.write_text('{"protocol": 1}')
    write = f"open({str(record)!r}, 'w').write('{{\"protocol\": 2}}')"
    stale = lambda: json.loads(record.read_text())["protocol"] < 2
    job = Job("run", [sys.executable, "-c", write], record, stale=stale)
    assert not job.finished
    assert set(run_jobs([job], jobs=1)) == {"run"}
    assert job.finished and json.loads(record.read_text()) == {"protocol": 2}
    assert run_jobs([job], jobs=1) == {}  # now done: skipped


def test_a_plan_is_refused_before_its_first_jobs_when_a_later_output_is_someone_elses(tmp_path):
    """The output rule over a plan: a folder of the user's where a later job's run would go stops the plan before
    the first job starts (which would otherwise run, and leave a half-done plan)."""
    from linformer.errors import OutputPathError

    marker = tmp_path / "first-ran"
    theirs = tmp_path / "outputs/finetune/r"
    theirs.mkdir(parents=True)
    (theirs / "notes.txt").write_text("mine")
    jobs = [Job("first", [sys.executable, "-c", f"open({str(marker)!r}, 'w')"], marker),
              Job("finetune", [sys.executable, "scripts/finetune.py", "task=sst2", "model_path=x",
                                 f"paths.output_dir={tmp_path / 'outputs'}", "run_name=r"], theirs / "results.json",
                    ("first",))]
    with pytest.raises(OutputPathError, match=f"{theirs} is not a run directory but holds notes.txt: finetune would"):
        run_jobs(jobs, jobs=1, cwd=Path(__file__).resolve().parents[1])
    assert not marker.exists() and (theirs / "notes.txt").read_text() == "mine"


def test_a_job_that_finishes_while_the_runner_stops_is_kept(tmp_path):
    """At the deadline a job that ends with exit 0 in its stop window (its last steps, or a stop it turns into a
    finish) is kept: on a machine given back after the stop its records would otherwise be lost."""
    from linformer.jobs import JobsStopped

    run, kept = tmp_path / "run" / "result", tmp_path / "kept" / "result"
    started = tmp_path / "started"
    finishes_on_stop = (f"import pathlib,signal,sys,time; "
                        f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(run)!r}).write_text('1'), "
                        f"sys.exit(0))); pathlib.Path({str(started)!r}).write_text('1'); time.sleep(60)")
    run.parent.mkdir()

    def keep():
        if not run.exists():
            return False
        kept.parent.mkdir(exist_ok=True)
        kept.write_text(run.read_text())
        return True

    job = Job("finishing", [sys.executable, "-c", finishes_on_stop], kept, keep=keep)
    with pytest.raises(JobsStopped) as stop:
        run_jobs([job], jobs=2, log_dir=tmp_path / "logs", deadline=time.monotonic() + 2.0)
    assert started.exists() and stop.value.exit_codes == {"finishing": 0}
    assert kept.read_text() == "1"  # kept before the runner returned


def test_a_jobs_log_keeps_the_earlier_attempts_lines(tmp_path):
    """A rerun appends to the job's log: what the first attempt printed (a traceback, its speed) stays."""
    says = lambda text: [sys.executable, "-c", f"print({text!r}); raise SystemExit(1)"]
    for text in ("first attempt", "second attempt"):
        with pytest.raises(JobFailed):
            run_jobs([Job("j", says(text), tmp_path / "never")], jobs=2, log_dir=tmp_path / "logs")
    log = (tmp_path / "logs" / "j.log").read_text()
    assert log.index("first attempt") < log.index("second attempt") and log.count("$ ") == 2


def test_a_job_killed_by_a_signal_says_so(tmp_path):
    from linformer.jobs import exit_words

    assert exit_words(2) == "exit status 2"
    assert exit_words(-9) == "killed by SIGKILL (kill -9, or the out-of-memory killer)"
    with pytest.raises(JobFailed, match="j: killed by SIGKILL"):
        run_jobs([Job("j", [sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"], tmp_path / "never")],
                 jobs=2, log_dir=tmp_path / "logs")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_runner_takes_its_jobs_down_with_a_stop(tmp_path):
    """SIGKILL (or the out-of-memory killer) to the runner: each job gets SIGTERM from the kernel and saves and
    exits, instead of running on as an orphan that a rerun collides with."""
    child = (f"import pathlib,signal,sys,time,os; "
             f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(tmp_path / 'saved')!r}).write_text('1'), "
             f"sys.exit(0))); pathlib.Path({str(tmp_path / 'pid')!r}).write_text(str(os.getpid())); time.sleep(60)")
    runner = (f"import sys; from pathlib import Path; from linformer.jobs import Job, run_jobs\n"
              f"run_jobs([Job('long', [sys.executable, '-c', {child!r}], Path({str(tmp_path / 'never')!r}))],"
              f" jobs=2, log_dir=Path({str(tmp_path / 'logs')!r}))\n")
    proc = subprocess.Popen(as_a_script(runner, tmp_path), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 180  # the runner imports the package first: a minute and more on a loaded machine
    while not (tmp_path / "pid").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    while not (tmp_path / "saved").exists():
        assert time.monotonic() < deadline, "the job outlived its runner without a stop"
        time.sleep(0.1)
    pid = int((tmp_path / "pid").read_text())
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _saved_model(folder: Path, weights: bytes) -> None:
    """A model folder as the package writes one (saving.model_folder: the checksums of its files)."""
    from linformer.modeling.saving import model_folder

    with model_folder(folder, overwrite=True) as tmp:
        (tmp / "config.json").write_text("{}")
        (tmp / "model.safetensors").write_bytes(weights)


def test_a_finished_run_whose_model_is_damaged_is_not_done_and_its_job_runs_again(tmp_path, capsys):
    """The plans judged a job done by its summary.json alone, so `make demo` and the reproductions went past a
    pretraining whose model/ was damaged after it finished, to fail in the finetuning that read it. A job is done
    only where a rerun of its command would find its output as written (rundir.output_problem: what
    train.core.already_complete says): else it runs again, and its command redoes the output or names the damage
    and what writes it again; the plan's listing says why it is not done."""
    from linformer.experiments.frontend import show

    run = tmp_path / "pretrain" / "run"
    _saved_model(run / "model", b"weights")
    (run / "run.json").write_text(json.dumps({"stage": "pretrain", "status": "complete"}))
    (run / "summary.json").write_text(json.dumps({"model_dir": str(run / "model")}))
    (run / "checkpoints" / "step-00000004").mkdir(parents=True)  # what the advice exports the model from
    (run / "checkpoints" / "step-00000004" / "trainer_state.json").write_text("{}")
    restore = f"open({str(run / 'model' / 'model.safetensors')!r}, 'wb').write(b'weights')"
    job = Job("pretrain", [sys.executable, "-c", restore], run / "summary.json")
    after = Job("finetune", _writer(tmp_path / "finetune"), tmp_path / "finetune", ("pretrain",))
    assert job.finished
    (run / "model" / "model.safetensors").write_bytes(b"weighTs")  # the same size: only the sha256 tells
    assert not job.finished
    assert job.damage == (f"{run} is complete, but its model {run}/model is damaged (model.safetensors: content "
                          "differs from what was written (sha256)): write it again from the run's final checkpoint: "
                          f"python scripts/export.py {run} --out {run}/model --overwrite.")
    show([job, after], "plan", None, "one after another", 1)
    listed = capsys.readouterr().out.splitlines()
    assert listed[listed.index(next(x for x in listed if x.startswith("[todo] pretrain:"))) + 1] == (
        f"  not done: {job.damage}")
    assert set(run_jobs([job, after], jobs=1)) == {"pretrain", "finetune"}
    assert job.finished and job.damage is None
    shutil.rmtree(run / "model")
    assert "is gone (deleted or moved)" in job.damage and not job.finished


def test_an_output_folder_damaged_since_it_was_written_is_not_done(tmp_path):
    """A corpus or a converted model (an output folder recording its files' checksums) whose file changed: its job
    runs again (prepare_corpus and convert.py then build it again)."""
    out = tmp_path / "converted"
    _saved_model(out, b"weights")
    job = Job("convert", [sys.executable, "-c", "pass"], out / "config.json")
    assert job.finished
    (out / "model.safetensors").write_bytes(b"weight")
    assert not job.finished
    assert job.damage == f"{out} is damaged since it was written (model.safetensors: 6 bytes, 7 written)"


def test_the_plan_s_report_ends_as_the_jobs_do_on_a_signal(monkeypatch, capsys, tmp_path):
    """The report of a plan runs in a process of its own: a SIGTERM while it ran ended the plan unannounced (the
    report's process left running), and a report killed by a signal (SIGKILL, the OOM killer) ended the plan with
    256 - the signal (247); now a `stopped:` line and 128 + the signal, as while the jobs run."""
    from linformer.experiments import frontend

    monkeypatch.setattr(subprocess, "run", lambda argv, **k: subprocess.CompletedProcess(argv, -signal.SIGKILL))
    assert frontend.reproduce([], title="plan", minutes=None, timing="", jobs=1, dry_run=False, report_only=True,
                              report=["--layout", "mini"], log_dir=tmp_path) == 128 + signal.SIGKILL
    assert "error: the report (scripts/table2.py) was killed by SIGKILL" in capsys.readouterr().err

    def terminated(argv, **kwargs):
        assert argv[1] == "scripts/table2.py"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal arrives before this ends
        raise AssertionError("not stopped")

    monkeypatch.setattr(subprocess, "run", terminated)
    assert frontend.write_report(["--layout", "mini"]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err.startswith("stopped: stopped by SIGTERM while writing the report")
    monkeypatch.setattr(subprocess, "run", lambda argv, **k: subprocess.CompletedProcess(argv, 2))
    assert frontend.write_report([]) == 2


def test_a_stopped_or_killed_report_names_the_command_that_writes_it_alone(monkeypatch, capsys):
    """After a plan's jobs are done, its report stopped or killed: "run the same command again" with --rows N ran the
    next N rows (the finished row no longer counts as to-do) before any table; the line names --report-only."""
    from linformer.experiments import frontend
    from linformer.files.locations import repo_root
    from linformer.shell import script_command

    given = ["--profile", "toy", "--under", "/tmp/my runs", "--rows", "1"]
    from tests.conftest import as_command
    as_command(monkeypatch, [str(repo_root() / "scripts" / "reproduce_scratch.py"), *given])
    alone = script_command("reproduce_scratch", *given, "--report-only")
    monkeypatch.setattr(subprocess, "run", lambda argv, **k: subprocess.CompletedProcess(argv, -signal.SIGKILL))
    assert frontend.write_report([]) == 128 + signal.SIGKILL
    err = capsys.readouterr().err
    assert f"write it alone with {alone} (the same command without --report-only would first run" in err
    assert "run the same command again" not in err

    def interrupted(argv, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "run", interrupted)
    assert frontend.write_report([]) == 130
    err = capsys.readouterr().err
    assert err.startswith("stopped: stopped by SIGINT") and f"write it alone with {alone} " in err


def _reproduce(tmp_path, monkeypatch, plan, **kw):
    """frontend.reproduce of `plan` (each job estimated at 30 minutes), its report a stand-in that records its call;
    (the exit status, the reports written)."""
    from linformer.experiments import frontend

    reports = []
    monkeypatch.setattr(frontend, "write_report", lambda report: reports.append(report) or 0)
    rc = frontend.reproduce(plan, title="plan", minutes=lambda job: 30.0, timing="", jobs=1, dry_run=False,
                            report_only=False, report=["--layout", "mini"], log_dir=tmp_path / "logs", **kw)
    return rc, reports


def test_a_local_stop_after_starts_a_long_job_and_stops_it_part_way(tmp_path, monkeypatch, capsys):
    """Locally --stop-after stops a running job (it saves a checkpoint the next run resumes): a job whose estimate
    ends past the stop is started all the same. Only --end-by (gpu.py's: a machine that keeps no checkpoint) leaves
    it unstarted. The not-start rule was always on: a 2-hour job could never run in 1-hour sittings."""
    from linformer.jobs import NOT_STARTED

    long = Job("long", [sys.executable, "-c", f"open({str(tmp_path / 'began')!r}, 'w'); import time; time.sleep(30)"],
               tmp_path / "long")
    rc, reports = _reproduce(tmp_path, monkeypatch, [long], stop_after=0.03)
    err = capsys.readouterr().err
    assert (tmp_path / "began").exists() and NOT_STARTED not in err
    assert rc == 128 + signal.SIGTERM and reports == [] and "stopped: finished jobs are kept" in err


def test_a_runner_that_can_start_no_job_by_end_by_says_so_and_writes_no_report(tmp_path, monkeypatch, capsys):
    """With --end-by, where by its estimate every job left ends past it, nothing runs: one line says nothing was
    started, not "jobs done", and the report (which would find no run) is not written."""
    from linformer.experiments import frontend
    from linformer.jobs import NOT_STARTED

    plan = [Job("a", _writer(tmp_path / "a"), tmp_path / "a"), Job("b", _writer(tmp_path / "b"), tmp_path / "b", ("a",))]
    rc, reports = _reproduce(tmp_path, monkeypatch, plan, end_by=time.time() + 60)
    captured = capsys.readouterr()
    assert (rc, reports) == (0, []) and not (tmp_path / "a").exists()
    assert f"{NOT_STARTED} a, b\n{frontend.NOTHING_BY_END}\n" in captured.err and "jobs done" not in captured.out
    # a job that can end by then runs, and the report follows
    rc, reports = _reproduce(tmp_path, monkeypatch, [Job("c", _writer(tmp_path / "c"), tmp_path / "c")],
                             end_by=time.time() + 3600)
    assert (rc, len(reports)) == (0, 1) and (tmp_path / "c").exists() and "jobs done" in capsys.readouterr().out


def test_a_stop_that_comes_before_the_first_job_says_nothing_was_started(tmp_path, monkeypatch, capsys):
    """A --stop-after that passes while the plan's outputs are checked (a busy machine) ends the run before any job:
    it says that nothing was started, not that finished jobs are kept. The clock jumps past the stop in the check."""
    import linformer.jobs as jobs_module

    real, ahead = time.monotonic, [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: real() + ahead[0])
    monkeypatch.setattr(jobs_module, "check_plan", lambda *a, **k: ahead.__setitem__(0, 600.0))
    rc, reports = _reproduce(tmp_path, monkeypatch, [Job("a", _writer(tmp_path / "a"), tmp_path / "a")], stop_after=5)
    err = capsys.readouterr().err
    assert (rc, reports) == (128 + signal.SIGTERM, []) and not (tmp_path / "a").exists()
    assert "stop came before the first job started" in err and "nothing was started" in err
    assert "finished jobs are kept" not in err
