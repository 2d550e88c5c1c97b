"""The run record in-process: claim (lock + identity), start and finish, the lock's owner rules, metrics on resume.
The CLI's side of the same contract (the error line, the exit status, signals) is tested in tests/train."""

import json
import os
import socket
import subprocess
import sys

import pytest
import yaml

from linformer import rundir
from linformer.errors import ConfigError, RunDirError
from linformer.files.runs import LOCK
from linformer.rundir import MetricsWriter, RunLock, RunRecord, read_metrics

CONFIG = {"seed": 0, "model": {"hidden_size": 32, "projected_dim": 8},
          "trainer": {"lr": 0.001, "batch_size": 8, "eval_every": 10, "resume": "auto"}, "run_name": "r"}


def _with(**changes):
    """CONFIG with dotted keys changed: _with(**{"trainer.lr": 0.002})."""
    config = json.loads(json.dumps(CONFIG))
    for key, value in changes.items():
        group, name = key.split(".")
        config[group][name] = value
    return config


def _finished(run_dir):
    record = RunRecord(run_dir, "pretrain")
    assert record.claim(CONFIG) == "new"
    record.start(CONFIG, step=0)
    record.finish({"steps": 3})
    record.release()
    return run_dir


def test_a_model_field_recorded_off_its_default_and_asked_at_it_now_is_a_change(tmp_path):
    """A run recorded with mask_empty_windows=true, resumed with the default false, would go on under another model:
    refused, naming the key (so for every LinformerConfig field). Only a field the record lacks (written before the
    model group listed it) is read as its default, and resumes."""
    import dataclasses

    from linformer import LinformerConfig
    from linformer.rundir import identity_diff

    for field in dataclasses.fields(LinformerConfig):
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        key = f"model.{field.name}"
        assert identity_diff({"model": {field.name: "recorded"}}, {"model": {field.name: default}}) == {
            key: ("recorded", default)}
        assert identity_diff({"model": {}}, {"model": {field.name: default}}) == {}
    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(_with(**{"model.mask_empty_windows": True}))
    record.start(_with(**{"model.mask_empty_windows": True}), step=0)
    record.release()
    with pytest.raises(RunDirError, match="model.mask_empty_windows"):
        RunRecord(run, "pretrain").claim(_with(**{"model.mask_empty_windows": False}))
    older = RunRecord(tmp_path / "older", "pretrain")
    older.claim(CONFIG)
    older.start(CONFIG, step=0)
    older.release()
    assert RunRecord(tmp_path / "older", "pretrain").claim(_with(**{"model.mask_empty_windows": False})) == "continue"


def test_a_run_whose_run_json_was_deleted_says_its_history_is_gone(tmp_path, caplog):
    """The run went on with a new record (a new `created`, no earlier attempts) without a word."""
    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    record.release()
    assert "is missing" not in caplog.text  # a new run has no history to lose
    (run / "run.json").unlink()
    record = RunRecord(run, "pretrain")
    assert record.claim(CONFIG) == "continue"
    record.start(CONFIG, step=5)
    record.release()
    said = (f"{run / 'run.json'} is missing: the run goes on from its files, but what it recorded of "
            "the earlier attempts (created, attempts, changes) is gone")
    assert said in caplog.text


@pytest.mark.parametrize("name, text", [("config.yaml", "trainer: ["), ("config.yaml", "- a list"),
                                        ("run.json", '{"status": "stop'), ("summary.json", "")])
def test_a_run_whose_record_does_not_read_is_refused_naming_the_file_not_taken_for_no_record(tmp_path, name, text):
    """A damaged config.yaml read as none turned the settings check off: a rerun with another lr continued the run
    and rewrote config.yaml as if it had held from the start. Each file of the record (a damaged summary.json of a
    finished run too) is refused in one line naming it, and nothing is written."""
    run = _finished(tmp_path / "run")
    (run / name).write_text(text)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    record = RunRecord(run, "pretrain")
    with pytest.raises(RunDirError, match=rf"^{run / name} cannot be read \(.+\): what the run in {run} recorded "
                                          r"there is lost\. Restore the file \(from a copy\), or start afresh"):
        record.claim(_with(**{"trainer.lr": 0.01})) if name != "summary.json" else record.summary()
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # the lock let go, nothing rewritten


def test_a_run_whose_config_yaml_is_gone_is_refused_not_started_anew_over_its_files(tmp_path):
    run = _finished(tmp_path / "run")
    (run / "config.yaml").unlink()
    with pytest.raises(RunDirError, match=rf"{run / 'config.yaml'} is missing, but {run} holds a run \(run.json\)"):
        RunRecord(run, "pretrain").claim(CONFIG)
    assert not (run / LOCK).exists()


def test_a_new_directory_is_claimed_and_only_the_lock_is_written_until_start(tmp_path):
    record = RunRecord(tmp_path / "run", "pretrain")
    assert record.claim(CONFIG) == "new"
    assert [p.name for p in (tmp_path / "run").iterdir()] == [LOCK]
    record.release()
    assert not (tmp_path / "run").exists()  # made for the lock, left empty: removed with it


def test_a_folder_of_someone_elses_is_refused_before_anything_is_written(tmp_path):
    """A run_name that names a user's folder (their summary.json and model/config.json, no run record): refused
    naming it, the lock let go, every file as it was. An empty folder is a new run's."""
    user = tmp_path / "mine"
    (user / "model").mkdir(parents=True)
    files = {"summary.json": '{"mine": 1}', "model/config.json": '{"hidden_size": 1}'}
    for rel, text in files.items():
        (user / rel).write_text(text)
    record = RunRecord(user, "pretrain")
    with pytest.raises(RunDirError, match=rf"{user} is not a run directory .* holds model, summary.json"):
        record.claim(CONFIG)
    assert sorted(str(p.relative_to(user)) for p in user.rglob("*")) == ["model", "model/config.json", "summary.json"]
    assert {rel: (user / rel).read_text() for rel in files} == files
    (tmp_path / "empty").mkdir()
    empty = RunRecord(tmp_path / "empty", "pretrain")
    assert empty.claim(CONFIG) == "new"
    empty.release()


def test_a_new_run_beside_an_unfinished_one_of_its_settings_names_it_and_the_run_name_that_resumes_it(tmp_path,
                                                                                                       caplog):
    """A default run_name that changed between versions started the same command over in a new folder, without a
    word about the unfinished run of the same settings beside it. A finished run, or one of other settings, is not
    named."""
    stopped = RunRecord(tmp_path / "tiny-linformer-n128-k32-headwise-s0", "pretrain")
    stopped.claim(CONFIG)
    stopped.start(CONFIG, step=0)
    stopped.stop(KeyboardInterrupt("stopped at step 20"))
    stopped.release()
    _finished(tmp_path / "done")
    other = RunRecord(tmp_path / "other-lr", "pretrain")
    other.claim(_with(**{"trainer.lr": 0.002}))
    other.start(_with(**{"trainer.lr": 0.002}), step=0)
    other.release()
    renamed = {**CONFIG, "run_name": "full120-model-mlm-s0"}
    caplog.clear()
    with caplog.at_level("WARNING", logger="linformer.rundir"):
        record = RunRecord(tmp_path / "full120-model-mlm-s0", "pretrain")
        assert record.claim(renamed) == "new"
        record.release()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [(f"{stopped.dir} is an unfinished run (stopped) of these settings under "
                         "run_name=tiny-linformer-n128-k32-headwise-s0: this run starts over in full120-model-mlm-s0; "
                         "stop it and pass run_name=tiny-linformer-n128-k32-headwise-s0 to resume that one instead")]
    caplog.clear()
    with caplog.at_level("WARNING", logger="linformer.rundir"):
        record = RunRecord(tmp_path / "lr3", "pretrain")
        assert record.claim(_with(**{"trainer.lr": 0.003})) == "new"
        record.release()
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_a_run_of_the_same_settings_that_another_process_runs_now_is_named_as_running_not_to_resume(tmp_path,
                                                                                                   caplog):
    """Another process's live run of the same settings (a colleague's) was called "an unfinished run (running)" to
    "stop and resume": advice to kill a live job. Its lock names the process running it; a run whose process is gone
    (status running, its lock stale) is called killed."""
    live = RunRecord(tmp_path / "theirs", "pretrain")
    live.claim(CONFIG)
    live.start(CONFIG, step=0)  # held by this process: a live holder
    since = json.loads((live.dir / LOCK).read_text())["since"]
    try:
        with caplog.at_level("WARNING", logger="linformer.rundir"):
            record = RunRecord(tmp_path / "mine", "pretrain")
            assert record.claim({**CONFIG, "run_name": "mine"}) == "new"
            record.release()
    finally:
        live.lock.held = False  # the lock stays, as a killed process leaves it
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [(f"{live.dir} is a run of these settings under run_name=theirs, running now in process "
                         f"{os.getpid()} on {socket.gethostname()} since {since}: this run does the same work again "
                         "in mine; stop this one to leave it to that run")]
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _lock_of(live.dir, gone.pid)
    caplog.clear()
    with caplog.at_level("WARNING", logger="linformer.rundir"):
        record = RunRecord(tmp_path / "mine2", "pretrain")
        assert record.claim({**CONFIG, "run_name": "mine2"}) == "new"
        record.release()
    assert next(r.getMessage() for r in caplog.records if r.levelname == "WARNING").startswith(
        f"{live.dir} is an unfinished run (killed) of these settings under run_name=theirs")


def test_the_same_settings_find_the_run_complete_and_operational_changes_do_not_count(tmp_path):
    run = _finished(tmp_path / "run")
    record = RunRecord(run, "pretrain")
    assert record.claim(_with(**{"trainer.eval_every": 99, "trainer.resume": None})) == "complete"
    record.release()


def test_another_identity_is_refused_naming_the_key_and_the_lock_is_let_go(tmp_path):
    run = _finished(tmp_path / "run")
    with pytest.raises(RunDirError, match=r"trainer.lr: 0.001 -> 0.002.*allow_config_change=\[trainer.lr\]"):
        RunRecord(run, "pretrain").claim(_with(**{"trainer.lr": 0.002}))
    assert not (run / LOCK).exists()  # a refused start leaves no lock behind
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_an_allowed_change_continues_the_run_and_is_recorded_at_its_step(tmp_path):
    run = _finished(tmp_path / "run")
    record = RunRecord(run, "pretrain")
    changed = _with(**{"trainer.lr": 0.002})
    assert record.claim(changed, allow_change=["trainer.lr"]) == "continue"
    record.start(changed, step=3)
    record.release()
    assert json.loads((run / "run.json").read_text())["changes"] == [
        {"step": 3, "key": "trainer.lr", "from": 0.001, "to": 0.002}]


def test_a_misspelt_allowed_key_is_named_not_left_to_refuse_the_change_it_meant(tmp_path):
    """allow_config_change=[trainer.lrr] left the lr change refused with advice to allow trainer.lr."""
    run = _finished(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"names 'trainer.lrr', which is no key .*did you mean trainer.lr\?"):
        RunRecord(run, "pretrain").claim(_with(**{"trainer.lr": 0.002}), allow_change=["trainer.lrr"])
    assert not (run / LOCK).exists()
    new = RunRecord(tmp_path / "new", "pretrain")  # a new run's key too: trainer.allow_config_change=foo was taken
    with pytest.raises(ConfigError, match=r"names 'foo', which is no key of this run's config"):
        new.claim(CONFIG, allow_change=["foo"])
    assert not (tmp_path / "new" / LOCK).exists()
    record = RunRecord(run, "pretrain")  # the processes a run ran on are not a config key, and may be named
    assert record.claim(_with(), allow_change=["processes"]) == "complete"
    record.release()


@pytest.mark.parametrize("value, read", [("trainer.lr", ["trainer.lr"]), (True, True), (["a", "b"], ["a", "b"]),
                                         (1, None), ({"trainer": "lr"}, None), ([1], None)])
def test_allow_config_change_is_true_or_keys(value, read):
    """A number was a TypeError traceback, and one key alone was split into its letters."""
    from omegaconf import OmegaConf

    from linformer.runconfig.settings import _allowed_changes

    group = OmegaConf.create({"allow_config_change": value})
    if read is None:
        with pytest.raises(ConfigError, match=r"must be true or a list of config keys"):
            _allowed_changes(group, "allow_config_change")
    else:
        assert _allowed_changes(group, "allow_config_change") == read


def test_a_shape_change_cannot_be_allowed(tmp_path):
    run = _finished(tmp_path / "run")
    with pytest.raises(RunDirError, match=r"model.projected_dim: 8 -> 16.*start afresh"):
        RunRecord(run, "pretrain").claim(_with(**{"model.projected_dim": 16}), allow_change=True)


@pytest.mark.parametrize("key", ["model_path", "init_from", "teacher_path"])
def test_the_weights_a_run_started_from_cannot_be_changed_even_when_allowed(tmp_path, key):
    """The run's steps so far came from those weights: continuing from others made results.json claim start weights
    (and a start hash, which reports pair rows by) that the model was not trained from."""
    run = tmp_path / "run"
    record = RunRecord(run, "finetune")
    record.claim({**CONFIG, key: "outputs/pretrain/a/model-step-00000100"})
    record.start({**CONFIG, key: "outputs/pretrain/a/model-step-00000100"}, step=0)
    record.release()
    with pytest.raises(RunDirError, match=rf"started from other weights \({key}: .*a/model-step.* -> .*b/model-step"):
        RunRecord(run, "finetune").claim({**CONFIG, key: "outputs/pretrain/b/model-step-00000100"}, allow_change=True)


def test_a_restarted_run_keeps_an_earlier_attempt_s_end_in_its_history_not_beside_its_status(tmp_path):
    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    record.fail(RuntimeError("Connection reset by peer"))
    record.release()
    again = RunRecord(run, "pretrain")
    assert again.claim(CONFIG) == "continue"
    again.start(CONFIG, step=50)
    again.finish({"steps": 60})
    again.release()
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete" and "failed" not in info and "error" not in info
    [attempt] = info["attempts"]
    assert attempt["status"] == "failed" and attempt["error"] == "RuntimeError: Connection reset by peer"


def test_an_attempt_killed_before_it_recorded_an_end_is_in_the_history_as_killed(tmp_path):
    """A SIGKILL leaves run.json `running`; the attempt that resumes it recorded nothing of that one."""
    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    record.lock.path.unlink()  # what a killed process leaves: status running, and its lock (taken over as stale)
    again = RunRecord(run, "pretrain")
    assert again.claim(CONFIG) == "continue"
    again.start(CONFIG, step=20)
    again.release()
    [attempt] = json.loads((run / "run.json").read_text())["attempts"]
    assert attempt["status"] == "killed" and attempt["started"]


def test_a_killed_attempt_records_how_far_it_got_and_the_start_says_which_steps_run_again(tmp_path, caplog):
    """A SIGKILL at step 716 of a run checkpointed at 534: the next start records the attempt's last logged step
    (metrics.jsonl still has it: the resumed MetricsWriter drops those rows after) and says 182 steps run again."""
    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    metrics = MetricsWriter(run, None)
    for step in (100, 500, 700, 716):
        metrics.log(step, {"loss": 1.0})
    record.lock.path.unlink()
    again = RunRecord(run, "pretrain")
    again.claim(CONFIG)
    again.start(CONFIG, step=534)
    again.release()
    [attempt] = json.loads((run / "run.json").read_text())["attempts"]
    assert (attempt["status"], attempt["start_step"], attempt["last_logged_step"]) == ("killed", 0, 716)
    assert "had logged step 716: steps 535-716 (182) are run again from the checkpoint of step 534" in caplog.text



def test_a_killed_attempt_without_a_checkpoint_says_its_steps_run_again_from_the_start(tmp_path, caplog):
    """A SIGKILL at step 21 before the first checkpoint: the next attempt starts at step 0, and there is no
    checkpoint of step 0 to name."""
    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    MetricsWriter(run, None).log(21, {"loss": 1.0})
    record.lock.path.unlink()
    again = RunRecord(run, "pretrain")
    again.claim(CONFIG)
    again.start(CONFIG, step=0)
    again.release()
    assert "steps 1-21 (21) are run again from the start (it left no checkpoint)" in caplog.text
    assert "checkpoint of step 0" not in caplog.text

def _lock_of(run_dir, pid, host=None, place=None):
    run_dir.mkdir(parents=True, exist_ok=True)
    holder = {"pid": pid, "host": host or socket.gethostname(), "since": "then", **({"place": place} if place else {})}
    (run_dir / LOCK).write_text(json.dumps(holder))


def test_a_live_holder_refuses_the_start_naming_its_process(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _lock_of(tmp_path / "run", live.pid)
        with pytest.raises(RunDirError, match=f"in use by process {live.pid}"):
            RunLock(tmp_path / "run").acquire()
    finally:
        live.kill()
        live.wait()


def test_a_dead_holder_s_lock_is_taken_over_and_another_host_s_is_not(tmp_path, caplog):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _lock_of(tmp_path / "run", gone.pid)
    lock = RunLock(tmp_path / "run")
    lock.acquire()
    assert json.loads((tmp_path / "run" / LOCK).read_text())["pid"] != gone.pid
    assert "stale lock" in caplog.text
    lock.release()
    _lock_of(tmp_path / "other", gone.pid, host="elsewhere")  # its process cannot be checked from here
    with pytest.raises(RunDirError, match="on elsewhere"):
        RunLock(tmp_path / "other").acquire()


def test_two_starts_that_read_one_dead_holder_at_once_do_not_both_take_the_run(tmp_path, monkeypatch):
    """Two starts that both read the same dead holder each removed the lock and made their own: the second removed
    the lock the first had just made, and both held the run (two processes training into one folder). Forced here:
    each start, once it has read the dead holder, waits for the other to read it too, and the second goes on only
    once the first has taken the lock. Exactly one acquires; the other is refused naming the first."""
    import threading

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _lock_of(tmp_path / "run", gone.pid)
    both_read, first_done = threading.Barrier(2, timeout=10), threading.Event()
    read_once, real = set(), RunLock._holder

    def read_then_wait(self):
        holder, name = real(self), threading.current_thread().name
        if name in ("first", "second") and name not in read_once:
            read_once.add(name)
            both_read.wait()  # both have read the dead holder before either takes the lock over
            if name == "second":
                first_done.wait(10)
        return holder

    monkeypatch.setattr(RunLock, "_holder", read_then_wait)
    locks, outcome = {"first": RunLock(tmp_path / "run"), "second": RunLock(tmp_path / "run")}, {}

    def start(name):
        try:
            locks[name].acquire()
            outcome[name] = "acquired"
        except RunDirError as err:
            outcome[name] = str(err)
        finally:
            if name == "first":
                first_done.set()

    threads = [threading.Thread(target=start, args=(name,), name=name) for name in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert outcome["first"] == "acquired"
    assert outcome["second"].startswith(f"{tmp_path / 'run'} is in use by process {os.getpid()}"), outcome
    assert json.loads((tmp_path / "run" / LOCK).read_text())["pid"] == os.getpid()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [LOCK]  # nothing beside the lock
    locks["first"].release()


def test_another_user_s_stale_lock_that_cannot_be_removed_is_one_line_naming_it_and_its_owner(tmp_path, caplog,
                                                                                                monkeypatch):
    """A dead process's lock in a shared (sticky) folder, owned by another user: the start said it was "taking over
    the stale lock", then failed with a bare permission error. No takeover is said for one that fails; the refusal
    names the lock, its owner and what to do. (The unlink refused as the sticky bit refuses it.)"""
    import pathlib

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _lock_of(tmp_path / "run", gone.pid)
    lock_file, unlink = tmp_path / "run" / LOCK, pathlib.Path.unlink

    def refused(path, *args, **kwargs):
        if path == lock_file:
            raise PermissionError(1, "Operation not permitted", str(path))
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "unlink", refused)
    monkeypatch.setattr(rundir, "file_owner", lambda path: "alice")
    with caplog.at_level("WARNING", logger="linformer.rundir"), pytest.raises(RunDirError) as refusal:
        RunLock(tmp_path / "run").acquire()
    assert str(refusal.value) == (f"the stale lock {lock_file} (of process {gone.pid}, no longer running) belongs to "
                                  "user alice and cannot be removed (Operation not permitted): ask its owner or an "
                                  "admin to delete it, or choose another run_name.")
    assert "stale lock" not in caplog.text
    assert json.loads(lock_file.read_text())["pid"] == gone.pid  # left as it was


def test_a_lock_held_from_another_container_of_this_host_is_not_taken_over(tmp_path):
    """A container with the host's name but its own PID namespace read a live holder's pid as gone, took the lock
    over, and both processes trained into one run. A holder of another place cannot be checked: it refuses."""
    from linformer.files.processes import process_place

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _lock_of(tmp_path / "run", gone.pid, place="0badc0de")
    with pytest.raises(RunDirError, match="is in use by process"):
        RunLock(tmp_path / "run").acquire()
    assert not RunLock(tmp_path / "run").holder_gone()  # compare_runs does not call such a run killed
    _lock_of(tmp_path / "mine", gone.pid, place=process_place())  # this place's dead holder: taken over
    lock = RunLock(tmp_path / "mine")
    lock.acquire()
    lock.release()


def test_a_resumed_run_drops_later_rows_and_a_torn_line_from_its_metrics(tmp_path):
    writer = MetricsWriter(tmp_path, resume_step=None)
    for step in range(1, 6):
        writer.log(step, {"loss": 1.0 / step})
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write('{"step": 6, "loss": 0.')  # killed mid-line
    MetricsWriter(tmp_path, resume_step=3).log(4, {"loss": 0.5})
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and rows[-1]["loss"] == 0.5


def test_a_resumed_run_s_time_goes_on_from_the_step_it_resumed_at(tmp_path, monkeypatch):
    """Each attempt's `time` started again at 0: the dashboard's wall time of a resumed run ran backwards."""
    import linformer.rundir as rundir

    clock = iter([1000.0, 1010.0, 1020.0, 1030.0, 5000.0, 5004.0])  # the second attempt starts much later
    monkeypatch.setattr(rundir.time, "time", lambda: next(clock))
    writer = MetricsWriter(tmp_path, resume_step=None)
    for step in (1, 2, 3):
        writer.log(step, {"loss": 1.0})
    MetricsWriter(tmp_path, resume_step=2).log(3, {"loss": 0.5})  # resumed from step 2's checkpoint
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["time"]) for r in rows] == [(1, 10.0), (2, 20.0), (3, 24.0)]


def test_a_stop_s_reason_is_its_whole_line_naming_the_user_s_interrupt(tmp_path):
    """A stop's reason names the step and the checkpoint however long the paths are: no cut mid-word, no class name
    ("Preempted") for a Ctrl-C, which is named as one."""
    from linformer.errors import Preempted
    from linformer.signals import signal_words

    record = RunRecord(tmp_path / "run", "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    line = (f"{signal_words(2)} at step 17: checkpoint saved in {'/deep' * 80}/checkpoints. Resume with the same command "
            f"(torchrun --nproc_per_node=2 scripts/pretrain.py run_name=pi); trainer.resume=auto continues from step 17.")
    record.stop(Preempted(line, 2))
    assert json.loads((tmp_path / "run" / "run.json").read_text())["reason"] == line
    assert line.startswith("SIGINT (Ctrl-C) at step 17: ")
    record.release()


def test_a_first_ctrl_c_outside_the_steps_is_recorded_as_its_stop_line_and_only_a_second_says_again(tmp_path):
    """A Ctrl-C at start-up or in the opening evaluation (a KeyboardInterrupt of no words: there is no StopSignal
    yet) is recorded as the command's stopped: line says it, not as a second Ctrl-C keeping a checkpoint that may
    not exist; the second Ctrl-C in the steps (StopSignal's) says "again"."""
    import signal

    import pytest

    from linformer.signals import Interrupted
    from linformer.train.stopping import StopSignal

    record = RunRecord(tmp_path / "run", "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)

    def reason() -> str:
        return json.loads((tmp_path / "run" / "run.json").read_text())["reason"]

    record.stop(KeyboardInterrupt())
    assert reason() == "interrupted by SIGINT (Ctrl-C)"
    record.stop(Interrupted(signal.SIGTERM))
    assert reason() == "interrupted by SIGTERM"
    stop = StopSignal()
    stop._handle(signal.SIGINT, None)  # the first, in the steps: a checkpoint at the step's end
    with pytest.raises(KeyboardInterrupt) as second:
        stop._handle(signal.SIGINT, None)
    record.stop(second.value)
    assert reason().startswith("SIGINT (Ctrl-C) again")
    record.release()


def test_an_overlong_reason_is_shortened_after_a_sentence_never_mid_word():
    from linformer.rundir import _shortened

    line = "SIGTERM at step 17: checkpoint saved. " + "Then a word " * 300
    short = _shortened(line, limit=100)
    assert short == "SIGTERM at step 17: checkpoint saved. [...]"
    assert _shortened("x" * 50 + " " + "y" * 80, limit=100) == "x" * 50 + " [...]"


def test_each_attempt_records_the_step_it_started_at_and_its_processes(tmp_path):
    """A run resumed on another number of processes (allowed) says which steps ran on how many."""
    from linformer.errors import Preempted

    run = tmp_path / "run"
    record = RunRecord(run, "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0, processes=2)
    record.stop(Preempted("SIGTERM at step 27: checkpoint saved", 15))
    record.release()
    again = RunRecord(run, "pretrain")
    again.claim(CONFIG)
    again.start(CONFIG, step=27, processes=1)
    again.finish({"steps": 60})
    again.release()
    info = json.loads((run / "run.json").read_text())
    [attempt] = info["attempts"]
    assert (attempt["start_step"], attempt["processes"], attempt["status"]) == (0, 2, "stopped")
    assert (info["start_step"], info["processes"], info["status"]) == (27, 1, "complete")


@pytest.mark.parametrize("name", ["run.json", "summary.json"])
def test_a_record_that_does_not_read_is_named_by_prune_and_the_plans_not_taken_for_no_run_or_no_model(tmp_path,
                                                                                                      name):
    """prune_checkpoints read run.json and summary.json leniently: a damaged run.json said "not a run directory (no
    readable run.json)", a damaged summary.json "kept no model (trainer.save_best=false)"; and a plan took a run
    folder whose config.yaml and run.json did not read for someone's folder ("not a run directory but holds ..."):
    each names the file that does not read, as the run's own start does (``read_record``)."""
    from linformer.output_rule import RUN, foreign
    from linformer.rundir import model_problem, not_a_run
    from linformer.train.checkpoint import prune_checkpoints

    run = _finished(tmp_path / "run")
    (run / "checkpoints" / "step-00000004").mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"steps": 4, "model_dir": "model"}))
    (run / "model").mkdir()
    (run / name).write_text("{")
    said = rf"^{run / name} cannot be read \(.+\): what the run in {run} recorded there is lost"
    with pytest.raises(RunDirError, match=said):
        prune_checkpoints(run)
    assert (run / "checkpoints" / "step-00000004").is_dir()
    if name == "summary.json":
        assert model_problem(run).startswith(f"{run / name} cannot be read")
    (run / "config.yaml").write_text("a: [")
    (run / "run.json").write_text("{")
    assert not_a_run(run) == [] and foreign(run, RUN, "pretrain") is None


def test_a_metrics_row_the_disk_refuses_leaves_no_torn_line(tmp_path, monkeypatch):
    import errno
    import os

    from linformer.errors import DiskFullError

    writer = MetricsWriter(tmp_path, resume_step=None)
    writer.log(1, {"loss": 1.0})
    real = os.write

    def full_midway(fd, data):
        real(fd, bytes(data[:5]))  # part of the row lands, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_midway)
    with pytest.raises(DiskFullError, match=f"while writing {tmp_path / 'metrics.jsonl'} "):
        writer.log(2, {"loss": 0.5})
    monkeypatch.undo()
    assert (tmp_path / "metrics.jsonl").read_text().endswith("}\n")
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1]


def test_a_model_field_one_side_lacks_is_its_default_whichever_side_lacks_it():
    """compare_runs sets a newer run first and an older one (recorded before the model groups listed a field) after
    it: identity_diff read the older side's missing field as a difference (13 model settings shown as "null" beside
    their defaults). A field missing on either side and at its default on the other is the same model; one off its
    default is still a difference, on either side."""
    import dataclasses

    from linformer import LinformerConfig
    from linformer.rundir import identity_diff

    for field in dataclasses.fields(LinformerConfig):
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        key = f"model.{field.name}"
        assert identity_diff({"model": {field.name: default}}, {"model": {}}) == {}
        assert identity_diff({"model": {field.name: "other"}}, {"model": {}}) == {key: ("other", None)}
        assert identity_diff({"model": {}}, {"model": {field.name: "other"}}) == {key: (None, "other")}


def test_a_run_s_end_is_recorded_on_a_full_disk_where_run_json_has_room_in_place(tmp_path, monkeypatch):
    """The disk full at a run's end: run.json's atomic rewrite (a temporary) is refused, which left it `running`, read
    as a run killed (SIGKILL, the OOM killer) rather than the full disk it was. It is rewritten in place within the
    blocks it holds; a record that does not fit there is refused as before, the file untouched."""
    import errno
    import os

    from linformer.errors import DiskFullError
    from linformer.files import atomic, storage
    from linformer.rundir import load_run

    record = RunRecord(tmp_path / "run", "pretrain")
    record.claim(CONFIG)
    record.start(CONFIG, step=0)
    before = (tmp_path / "run" / "run.json").read_text()

    def full(path, data):
        with storage.disk_full_names(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(atomic, "atomic_write", full)
    record.fail(DiskFullError("no space left on device while writing run/metrics.jsonl"))
    record.release()
    run = load_run(tmp_path / "run")
    assert (run.status, run.why) == ("failed", "DiskFullError: no space left on device while writing run/metrics.jsonl")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["start_step"] == 0
    ended = (tmp_path / "run" / "run.json").read_text()
    assert len(ended) >= len(before)
    with pytest.raises(DiskFullError):
        atomic.write_json_when_full(tmp_path / "run" / "run.json", {"big": "x" * 2 * os.stat(tmp_path).st_blksize})
    assert (tmp_path / "run" / "run.json").read_text() == ended


def _clone(root, monkeypatch):
    """A checkout at `root` with its data mirror at `root`/../mirror-<name> (another machine's layout)."""
    from linformer.files import locations

    root.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(locations, "repo_root", lambda: root.resolve())
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(root.parent / f"mirror-{root.name}"))
    return root, root.parent / f"mirror-{root.name}"


def _paths_config(root, mirror):
    """A finetuning config naming its model in the checkout, its task data and corpus texts in the data mirror."""
    return {**CONFIG, "model_path": str(root / "outputs" / "pretrain" / "demo"),
            "data": {"sources": [str(mirror / "pretrain" / "books.txt.gz")]},
            "task": {"name": "sst2", "data_dir": str(mirror / "glue" / "sst2")},
            "paths": {"data_mirror": str(mirror), "output_dir": str(root / "outputs")}}


def test_a_run_made_in_one_checkout_is_the_same_run_compared_from_another(tmp_path, monkeypatch):
    """config.yaml, summary.json and results.json named every path of the machine that made the run (/work/main/...,
    its data mirror /work/main/.carry): a run brought back from the GPU machine, or made in another clone, differed
    from the same settings here in model_path and data.sources, and committed records named that machine's folders.
    The record names them relative to the repository or the data mirror; a run recorded before, with absolute
    paths, is still the same run as one recorded now."""
    from linformer.rundir import identity_diff, load_run

    root, mirror = _clone(tmp_path / "a" / "repo", monkeypatch)
    run = tmp_path / "runs" / "demo"
    record = RunRecord(run, "finetune")
    assert record.claim(_paths_config(root, mirror)) == "new"
    record.start(_paths_config(root, mirror), step=0)
    record.finish({"run_dir": str(root / "outputs" / "finetune" / "demo"), "model_dir": str(root / "o" / "best")},
                  {"model_path": str(root / "outputs" / "pretrain" / "demo" / "model"), "teacher_path": "/elsewhere"})
    record.release()
    written = "".join((run / name).read_text() for name in ("config.yaml", "summary.json", "results.json", "run.json"))
    assert str(tmp_path) not in written
    recorded = load_run(run).config
    assert recorded["model_path"] == "outputs/pretrain/demo"
    assert recorded["task"]["data_dir"] == "${paths.data_mirror}/glue/sst2"
    assert recorded["data"]["sources"] == ["${paths.data_mirror}/pretrain/books.txt.gz"]
    assert json.loads((run / "results.json").read_text())["teacher_path"] == "/elsewhere"  # outside both: as it was
    assert json.loads((run / "summary.json").read_text())["model_dir"] == "o/best"

    root_b, mirror_b = _clone(tmp_path / "b" / "repo", monkeypatch)  # compared from another clone and mirror
    here = _paths_config(root_b, mirror_b)
    assert identity_diff(recorded, here) == {}
    from linformer.data.io import local_path  # read back in this clone's data mirror

    assert local_path(recorded["task"]["data_dir"]) == str(mirror_b / "glue" / "sst2")
    again = RunRecord(run, "finetune")
    assert again.claim(here) == "complete"
    again.release()
    other = _paths_config(root_b, mirror_b) | {"model_path": str(root_b / "outputs" / "pretrain" / "other")}
    assert identity_diff(recorded, other) == {"model_path": ("outputs/pretrain/demo", "outputs/pretrain/other")}

    old = tmp_path / "runs" / "old"  # recorded before records named paths so: absolute, of this checkout
    old.mkdir()
    (old / "config.yaml").write_text(yaml.safe_dump(here))
    assert identity_diff(load_run(old).config, recorded) == {} and identity_diff(recorded, load_run(old).config) == {}


def test_kept_and_brought_back_records_name_no_path_of_the_machine_that_made_them(tmp_path, monkeypatch):
    """gpu/targets.py copy_back (a GPU machine's runs brought back into docs/results) and the plans' kept records
    copied config.yaml and summary.json as they were: a run recorded with absolute paths is kept as a new one is."""
    from linformer.gpu import targets

    root, mirror = _clone(tmp_path / "gpu" / "repo", monkeypatch)
    run = root / "outputs" / "pretrain" / "fig3-k64"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(_paths_config(root, mirror)))
    (run / "summary.json").write_text(json.dumps({"run_dir": str(run), "model_dir": str(run / "model"), "steps": 3}))
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    monkeypatch.setattr(targets, "REPO", root)
    back = tmp_path / "back"
    assert targets.copy_back(("outputs/pretrain/fig3-k64/*",), back) == [
        f"outputs/pretrain/fig3-k64/{name}" for name in ("config.yaml", "metrics.jsonl", "summary.json")]
    kept = back / "outputs" / "pretrain" / "fig3-k64"
    for name in ("config.yaml", "summary.json", "metrics.jsonl"):
        text = (kept / name).read_text()
        assert str(tmp_path) not in text and "/tmp/" not in text, name
    assert json.loads((kept / "summary.json").read_text()) == {"run_dir": "outputs/pretrain/fig3-k64",
                                                               "model_dir": "outputs/pretrain/fig3-k64/model",
                                                               "steps": 3}
    assert yaml.safe_load((kept / "config.yaml").read_text())["paths"] == {"data_mirror": "${paths.data_mirror}",
                                                                           "output_dir": "outputs"}
    from linformer.rundir import copy_record

    copy_record(run / "metrics.jsonl", tmp_path / "m.jsonl")  # not a record that names paths: copied as it is
    assert (tmp_path / "m.jsonl").read_bytes() == (run / "metrics.jsonl").read_bytes()


def test_a_path_under_the_checkout_and_the_data_mirror_is_recorded_from_the_deeper_of_the_two(tmp_path, monkeypatch):
    """A data mirror carried into the checkout (a GPU machine's .carry) names its files from the mirror, as every
    other machine's mirror does; a checkout inside the data mirror names its own files from the repository."""
    from linformer.data.io import local_path, record_path

    root, _ = _clone(tmp_path / "repo", monkeypatch)
    carried = root / ".carry"
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(carried))
    assert record_path(carried / "glue" / "sst2") == "${paths.data_mirror}/glue/sst2"
    assert local_path(record_path(carried / "glue" / "sst2")) == str((carried / "glue" / "sst2").resolve())
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path))
    assert record_path(root / "outputs" / "pretrain" / "demo") == "outputs/pretrain/demo"


def test_a_run_whose_output_was_closed_is_recorded_stopped_not_failed(tmp_path, monkeypatch):
    """`pretrain.py ... 2>&1 | head -1`: the closed pipe ends the command as SIGPIPE would (cli._output_closed), by
    design, and run.json said `failed: BrokenPipeError`, where a Ctrl-C's stop says `stopped` and resumable."""
    import os
    import sys

    from linformer.train.core import _record_end

    read, write = os.pipe()
    os.close(read)  # `head` took its line and exited
    with os.fdopen(write, "w", encoding="utf-8") as pipe:
        monkeypatch.setattr(sys, "stderr", pipe)
        record = RunRecord(tmp_path / "run", "pretrain")
        assert record.claim(CONFIG) == "new"
        record.start(CONFIG, step=0)
        _record_end(record, BrokenPipeError(32, "Broken pipe"))
        info = record.info()
        assert info["status"] == "stopped" and "output was closed" in info["reason"] and "error" not in info
        record.release()
        monkeypatch.undo()
    other = RunRecord(tmp_path / "other", "pretrain")  # a broken pipe of the work's own (a socket) still fails it
    assert other.claim(CONFIG) == "new"
    other.start(CONFIG, step=0)
    _record_end(other, BrokenPipeError(32, "Broken pipe"))
    assert other.info()["status"] == "failed"
    other.release()


def test_a_damaged_metrics_file_is_one_warning_with_its_count_not_one_per_line(tmp_path, caplog):
    """20 KB of garbage in a metrics.jsonl printed 80 warnings, one per bad line (a long file thousands, hiding the
    other warnings): one per file now, with how many lines were skipped and the first of them."""
    import random

    path = tmp_path / "metrics.jsonl"
    rows = "".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in (1, 2))
    garbage = "".join(f"{random.Random(i).getrandbits(64):x}{{\n" for i in range(300))
    path.write_text(rows + garbage + '{"step": null, "loss": 2.0}\n' + json.dumps({"step": 3, "loss": 0.5}) + "\n")
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3]
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [(f"{path}: 301 lines skipped, not a metrics row (the first, line 3: not JSON: a run still "
                     "writing, or killed mid-line)")]


def test_a_folder_left_holding_only_a_dead_process_s_lock_is_named_by_the_reports_and_taken_over_by_its_start(
        tmp_path, capsys):
    """A finetuning killed by SIGKILL while it tokenized its task left outputs/finetune/<run>/ holding only .lock,
    which compare_runs.py and prune_checkpoints.py passed over without a word (being no run): a folder named or
    searched that holds nothing but the lock of a process that is gone is now a warning line (an error where it is
    the folder named); one a live process holds (a run starting) is not; and the run's next start takes it over."""
    from linformer.errors import DataError
    from linformer.files.locks import holder_record
    from linformer.rundir import ABANDONED, find_runs

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    outputs = tmp_path / "outputs"
    killed, starting, run = outputs / "finetune" / "killed", outputs / "finetune" / "starting", outputs / "pretrain" / "r"
    for folder, pid in ((killed, int(done.stdout)), (starting, os.getpid())):
        folder.mkdir(parents=True)
        (folder / LOCK).write_text(json.dumps(dict(holder_record(), pid=pid)))
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    assert find_runs([outputs], strict=True) == [run.resolve()]
    assert capsys.readouterr().err.splitlines() == [f"warning: {killed} {ABANDONED}"]
    with pytest.raises(DataError, match=f"^{killed} holds no run, only the lock of a process that is gone"):
        find_runs([killed], strict=True)
    with pytest.raises(DataError, match=f"holds no run \\(no metrics.jsonl at or under it\\); {killed} holds no run"):
        find_runs([outputs / "finetune"], strict=True)
    assert find_runs([outputs]) == [run.resolve()] and capsys.readouterr().err == ""  # a dashboard's pass: silent
    lock = RunLock(killed)
    lock.acquire()
    assert json.loads((killed / LOCK).read_text())["pid"] == os.getpid()
    lock.release()


def test_a_run_over_a_wheel_records_the_code_that_ran_it(tmp_path, monkeypatch):
    """Over a wheel, run.json recorded the version alone (commit null), the same for wheels built from any commit.
    It records the package's code by content (two copies that differ in one file differ), and the commit of the
    clone whose script started the command."""
    from linformer.files.hashing import tree_sha256

    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    (clone / "scripts" / "pretrain.py").write_text("print()\n")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run([*git, "add", "scripts"], check=True)
    subprocess.run([*git, "commit", "-qm", "s"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    package = tmp_path / "site-packages" / "linformer"
    (package / "files").mkdir(parents=True)
    (package / "rundir.py").write_text("a = 1\n")
    (package / "files" / "locations.py").write_text("b = 2\n")
    monkeypatch.setattr(rundir, "__file__", str(package / "rundir.py"))
    monkeypatch.setattr(rundir, "clone_root", lambda: None)  # a wheel
    monkeypatch.setattr(rundir, "started_script", lambda: clone / "scripts" / "pretrain.py")
    first = rundir.code_revision()
    assert first["commit"] is None and (first["scripts_commit"], first["scripts_dirty"]) == (head, False)
    assert first["package_sha256"] == tree_sha256(package.parent, ("linformer/**/*.py",))
    (package / "files" / "locations.py").write_text("b = 3\n")  # another wheel, the same version
    assert rundir.code_revision()["package_sha256"] != first["package_sha256"]
    monkeypatch.setattr(rundir, "started_script", lambda: None)  # Python calling the package: no script's clone
    assert "scripts_commit" not in rundir.code_revision()
