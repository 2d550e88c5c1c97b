"""Mirroring metrics.jsonl into TensorBoard event files: right scalars, incremental, idempotent."""

import json
import signal
import sys

import pytest

from linformer.report.dashboard import mirror_all, mirror_run, tag_for

from ..conftest import load_script
from .conftest import write_run


def _scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tags():
    assert [tag_for(k) for k in ("loss", "val_ppl", "eval_accuracy", "tokens_per_s", "latency_ms")] == [
        "train/loss", "val/ppl", "eval/accuracy", "perf/tokens_per_s", "latency_ms"]
    assert [tag_for(k, "finetune") for k in ("loss", "lr", "eval_f1")] == ["finetune/loss", "finetune/lr", "eval/f1"]


def test_mfu_is_charted_in_percent_under_a_name_that_says_so(tmp_path, make_run):
    """perf/mfu charted metrics.jsonl's fraction (0.128) where the run summary and compare_runs say 12.8%: the chart
    is in percent too, and its tag says so; metrics.jsonl keeps the fraction its readers take."""
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": 1, "time": 1.0, "loss": 9.0, "mfu": 0.128}])
    out = tmp_path / "tb" / "pretrain" / "a"
    mirror_run(run, out)
    s = _scalars(out)
    assert "perf/mfu" not in s and [(step, round(v, 4)) for step, v in s["perf/mfu_percent"]] == [(1, 12.8)]
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["mfu"] == 0.128


def test_mirror_incremental_and_idempotent(tmp_path, make_run):
    rows = [{"step": s, "time": 0.5 * s, "loss": 10.0 - s, "lr": 0.1} for s in range(1, 4)]
    run = make_run(tmp_path / "outputs", "pretrain", "a", rows)
    out = tmp_path / "tb" / "pretrain" / "a"
    assert mirror_run(run, out) == 3
    assert mirror_run(run, out) == 0                       # nothing new: nothing written
    files = sorted(out.glob("events.out.tfevents.*"))
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 4, "time": 2.0, "loss": 6.0, "val_loss": 5.5}) + "\n")
        f.write('{"step": 5, "time": 2.5, "lo')           # a line still being written
    assert mirror_run(run, out) == 1
    assert mirror_run(run, out) == 0
    assert len(files) == 2 and sorted(out.glob("events.out.tfevents.*")) == files  # appended to, not one per pass
    s = _scalars(out)
    assert s["train/loss"] == [(1, 9.0), (2, 8.0), (3, 7.0), (4, 6.0)]
    assert s["val/loss"] == [(4, 5.5)]
    with (run / "metrics.jsonl").open("a") as f:
        f.write('ss": 5.0}\n')                            # the torn line completes
    assert mirror_run(run, out) == 1
    assert _scalars(out)["train/loss"][-1] == (5, 5.0)


def test_a_pass_reads_only_what_was_appended_and_skips_an_unchanged_file(tmp_path, make_run, monkeypatch):
    """Every pass read every run's whole metrics.jsonl (a 250k-row run: ~20 s a pass, idle) and wrote a new event
    file per pass for a running run: an unchanged file is not opened, a grown one is read from the mirrored offset,
    and its rows go into the run's one event file."""
    import linformer.report.dashboard as dashboard

    rows = [{"step": s, "time": s, "loss": 1.0 / s} for s in range(1, 101)]
    run = make_run(tmp_path / "outputs", "pretrain", "a", rows)
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 100
    real, reads = dashboard._appended, []

    def spy(src, offset):
        reads.append(offset)
        return real(src, offset)

    monkeypatch.setattr(dashboard, "_appended", spy)
    assert mirror_run(run, out) == 0 and reads == []  # same size and mtime: not read
    size = (run / "metrics.jsonl").stat().st_size
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 101, "time": 101, "loss": 0.5}) + "\n")
    assert mirror_run(run, out) == 1 and reads == [size]
    assert len(list(out.glob("events.out.tfevents.*"))) == 2  # its summary's and its metrics' event files
    assert [s for s, _ in _scalars(out)["train/loss"]] == list(range(1, 102))


def test_a_finished_run_s_reported_scores_are_mirrored_once_as_the_trainer_logs_them(tmp_path, make_run):
    """results.json's scores (the reported split, scored once after training) go where the trainer's trackers put
    them: eval/<metric> at the run's last step, eval/step the step of the model scored; rewritten, no stale point."""
    rows = [{"step": s, "time": s, "loss": 1.0 / s} for s in range(1, 5)]
    run = make_run(tmp_path / "outputs", "finetune", "a", rows, task="sst2")
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 4 and "eval/accuracy" not in _scalars(out)  # still running
    results = {"metrics": {"accuracy": 0.875, "note": "x"}, "reported": {"split": "dev", "step": 2}, "steps": 4,
               "wall_time_s": 4.5}
    (run / "results.json").write_text(json.dumps(results))
    assert mirror_run(run, out) == 1
    assert mirror_run(run, out) == 0
    s = _scalars(out)
    assert s["eval/accuracy"] == [(4, 0.875)] and s["eval/step"] == [(4, 2.0)] and len(s["finetune/loss"]) == 4
    (run / "results.json").write_text(json.dumps({**results, "metrics": {"accuracy": 0.75}}))
    assert mirror_run(run, out) == 5  # mirrored again from scratch
    assert _scalars(out)["eval/accuracy"] == [(4, 0.75)]


def test_rewritten_file_is_mirrored_again(tmp_path, make_run):
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": s, "time": s, "loss": 1.0} for s in range(5)])
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 5
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "time": 1, "loss": 2.0}) + "\n")
    assert mirror_run(run, out) == 1
    assert _scalars(out)["train/loss"] == [(1, 2.0)]


def test_resumed_run_is_mirrored_again(tmp_path, make_run):
    """A resume from step 3 rewrites steps 4 and 5 and adds 6; the file grows, but what was mirrored changed."""
    rows = [{"step": s, "time": s, "loss": 10.0 - s} for s in range(1, 6)]
    run = make_run(tmp_path / "outputs", "pretrain", "a", rows)
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 5
    resumed = rows[:3] + [{"step": s, "time": s, "loss": 1.0 / s} for s in (4, 5, 6)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in resumed))
    assert mirror_run(run, out) == 6
    loss = _scalars(out)["train/loss"]
    assert [s for s, _ in loss] == [1, 2, 3, 4, 5, 6]
    assert [v for _, v in loss] == pytest.approx([9.0, 8.0, 7.0, 1 / 4, 1 / 5, 1 / 6])


def test_nan_row_is_not_mirrored_again(tmp_path, make_run):
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": 1, "time": 1, "loss": float("nan")}])
    assert mirror_run(run, tmp_path / "tb") == 1
    assert mirror_run(run, tmp_path / "tb") == 0


def test_mirror_all_layout(tmp_path, make_run):
    outputs = tmp_path / "outputs"
    make_run(outputs, "pretrain", "a", [{"step": 1, "time": 1, "loss": 1.0}])
    make_run(outputs, "finetune", "b", [{"step": 1, "time": 1, "eval_accuracy": 0.5, "loss": 0.7}], task="sst2")
    (outputs / "benchmark" / "grid" / "n512").mkdir(parents=True)
    (outputs / "benchmark" / "grid" / "n512" / "metrics.jsonl").write_text('{"step": 0, "tokens_per_s": 5}\n')
    assert mirror_all(outputs) == {"benchmark/grid/n512": 1, "finetune/b": 1, "pretrain/a": 1}
    assert mirror_all(outputs) == {"benchmark/grid/n512": 0, "finetune/b": 0, "pretrain/a": 0}
    ft = _scalars(outputs / ".dashboard" / "finetune" / "b")
    assert ft["eval/accuracy"] == [(1, 0.5)] and ft["finetune/loss"] == [(1, pytest.approx(0.7))] and "train/loss" not in ft
    assert _scalars(outputs / ".dashboard" / "benchmark" / "grid" / "n512")["perf/tokens_per_s"] == [(0, 5.0)]


def test_a_run_deleted_from_outputs_leaves_the_dashboard(tmp_path, make_run):
    """The mirror only added: a deleted failed experiment stayed in TensorBoard's run list."""
    import shutil

    outputs = tmp_path / "outputs"
    for name in ("kept", "deleted"):
        make_run(outputs, "pretrain", name, [{"step": 1, "time": 1, "loss": 1.0}])
    mirror_all(outputs)
    assert (outputs / ".dashboard" / "pretrain" / "deleted").is_dir()
    shutil.rmtree(outputs / "pretrain" / "deleted")
    assert mirror_all(outputs) == {"pretrain/kept": 0}
    assert not (outputs / ".dashboard" / "pretrain" / "deleted").exists()
    assert (outputs / ".dashboard" / "pretrain" / "kept").is_dir()


def test_old_tag_scheme_is_rewritten(tmp_path, make_run):
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": 1, "time": 1, "loss": 1.0}])
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 1
    state = json.loads((out / ".mirror.json").read_text())
    (out / ".mirror.json").write_text(json.dumps({**state, "version": 1}))
    assert mirror_run(run, out) == 1 and mirror_run(run, out) == 0
    assert _scalars(out)["train/loss"] == [(1, 1.0)]


def test_the_logdir_follows_the_output_rule(tmp_path, make_run):
    from linformer.errors import DataError, OutputPathError
    from linformer.report.dashboard import claim_logdir

    outputs = tmp_path / "outputs"
    make_run(outputs, "pretrain", "a", [{"step": 1, "time": 1, "loss": 1.0}])
    users = tmp_path / "mine"
    users.mkdir()
    (users / "notes.txt").write_text("mine")
    with pytest.raises(OutputPathError, match=f"{users} is a directory with other content"):
        mirror_all(outputs, users)
    assert [p.name for p in users.iterdir()] == ["notes.txt"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputPathError, match="is a regular file"):
        mirror_all(outputs, tmp_path / "afile")
    # its own folder, and one holding only mirrored event files (written before the manifest existed), are its own
    board = tmp_path / "board"
    assert mirror_all(outputs, board) == {"pretrain/a": 1}
    (board / "manifest.json").unlink()
    assert claim_logdir(outputs, board) == board
    # a mirror of other runs is not replaced without --overwrite
    with pytest.raises(OutputPathError, match="other settings"):
        mirror_all(tmp_path, board)
    # a run that cannot be mirrored fails a strict mirror (the --mirror-only command), after the others are mirrored
    bad = make_run(outputs, "pretrain", "b", [{"step": 1, "time": 1, "loss": 1.0}])
    (board / "pretrain" / "b").mkdir(parents=True)
    (board / "pretrain" / "b" / ".mirror.json").mkdir()  # its state file cannot be read
    with pytest.raises(DataError, match=rf"1 of 2 runs not mirrored into {board}: {bad}"):
        mirror_all(outputs, board, strict=True)


def test_the_outputs_own_mirror_is_its_own_after_the_outputs_folder_moved(tmp_path, make_run):
    """<outputs>/.dashboard records the outputs' absolute path: once the folder was moved (or copied), the dashboard
    refused its own mirror as "an earlier dashboard output with other settings". A mirror inside the outputs it
    mirrors moves with them: it goes on, no run's events doubled; a mirror elsewhere of other outputs is still
    refused."""
    import shutil

    from linformer.errors import OutputPathError

    outputs = tmp_path / "old" / "outputs"
    make_run(outputs, "pretrain", "a", [{"step": 1, "time": 1, "loss": 1.0}])
    assert mirror_all(outputs) == {"pretrain/a": 1}
    moved = tmp_path / "new" / "outputs"
    moved.parent.mkdir()
    shutil.move(outputs, moved)
    assert mirror_all(moved) == {"pretrain/a": 1}  # its runs' files moved: mirrored once more, in place of before
    assert len(list((moved / ".dashboard" / "pretrain" / "a").glob("events.out.tfevents.*"))) == 2
    assert json.loads((moved / ".dashboard" / "manifest.json").read_text())["settings"]["outputs"] == str(moved)
    with pytest.raises(OutputPathError, match="other settings"):
        mirror_all(tmp_path / "new", moved / ".dashboard")


def test_a_port_in_use_is_one_error_before_anything_is_mirrored(tmp_path):
    """TensorBoard printed its own bind error after the runs were mirrored, then ours; now one line naming --port,
    before the logdir is touched."""
    import socket

    from linformer.errors import ConfigError
    from linformer.report.dashboard import check_port_free, serve

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"^--port {port}: another program listens on 127.0.0.1:{port}"):
            serve(tmp_path, tmp_path / "tb", port=port)
        assert not (tmp_path / "tb").exists()
    check_port_free("127.0.0.1", port)  # free again once the listener closed


def test_tensorboard_starts_before_the_first_mirror(tmp_path, make_run, monkeypatch, capsys):
    """With many runs the first mirror takes a while: TensorBoard is started first, and the line says the runs are
    being mirrored, rather than no page and no word until every run is mirrored."""
    import subprocess

    from linformer.report import dashboard

    make_run(tmp_path / "outputs", "pretrain", "a", [{"step": 1, "loss": 2.0}])
    events = []

    class FakeTensorBoard:
        returncode = 0

        def __init__(self, command, env, **kwargs):
            events.append("tensorboard")

        def poll(self):
            return 0 if "mirror" in events else None

        def wait(self, timeout=None):
            return 0

    real_mirror = dashboard.mirror_all
    monkeypatch.setattr(subprocess, "Popen", FakeTensorBoard)
    monkeypatch.setattr(dashboard, "wait_until_up", lambda *a, **k: 0.0)
    monkeypatch.setattr(dashboard, "mirror_all", lambda *a, **k: events.append("mirror") or real_mirror(*a, **k))
    assert dashboard.serve(tmp_path / "outputs", tmp_path / "tb", port=0) == 0
    assert events == ["tensorboard", "mirror"]
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("dashboard starting at http://127.0.0.1:0/; mirroring the runs under ")
    assert said[1].startswith("mirrored 1 runs (")


@pytest.mark.parametrize("child, status, line", [
    ("import sys; sys.exit(0)", 1, "error: tensorboard ended (exit status 0) before serving"),  # it failed: not 0
    ("import sys; sys.exit(3)", 3, "error: tensorboard ended (exit status 3) before serving"),
    ("import os; os.kill(os.getpid(), 9)", 137, "error: tensorboard ended (killed by SIGKILL"),  # 128 + 9, not 247
    ("import time; time.sleep(2)", 0, "warning: http://127.0.0.1:"),  # not up yet, still running: a warning
])
def test_tensorboard_not_up_is_a_failure_only_when_it_ended(tmp_path, monkeypatch, capsys, child, status, line):
    """An `error:` line for TensorBoard not answering was followed by exit 0: one that ended before serving is the
    command's failure (non-zero), one still starting after the wait a warning while the mirror goes on."""
    assert _serve_with_child(child, tmp_path, monkeypatch) == status
    err = capsys.readouterr().err
    assert line in err and (status != 0) == ("error:" in err)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_tensorboard_asks_for_sigterm_when_its_dashboard_dies(tmp_path, monkeypatch):
    """A dashboard killed by SIGKILL left TensorBoard serving on its port (a new dashboard there was refused) a mirror
    nobody refreshed: TensorBoard's process asks the kernel for SIGTERM when the dashboard dies, as the plan runner's
    jobs do. Its child reports the signal it was given (prctl's PR_GET_PDEATHSIG)."""
    report = tmp_path / "signal"
    child = ("import ctypes, pathlib; got = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(got)); "
             f"pathlib.Path({str(report)!r}).write_text(str(got.value))")
    _serve_with_child(child, tmp_path, monkeypatch)  # it ends: an `error:` line
    assert report.read_text() == str(int(signal.SIGTERM))


@pytest.mark.parametrize("argv, line", [
    (["/somewhere/runs", "--mirror-only"],
     "error: unrecognized arguments: /somewhere/runs (the folder of runs is --outputs DIR)"),
    (["--mirror-only", "--load_fast=false"],
     "error: --load_fast=false: flags for tensorboard, which --mirror-only does not start"),
])
def test_arguments_the_dashboard_would_drop_are_one_error_line(argv, line, tmp_path, capsys):
    """They went to tensorboard's flags, which --mirror-only never starts: the run said nothing and mirrored the
    default folder."""
    with pytest.raises(SystemExit) as stop:
        load_script("dashboard").main([*argv, "--outputs", str(tmp_path), "--logdir", str(tmp_path / "events")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == line
    assert not (tmp_path / "events").exists()


def _text_and_hparams(logdir):
    """The `config` text and the HPARAMS session's values of a mirrored run."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    text = acc.Tensors("config/text_summary")[-1].tensor_proto.string_val[0].decode()
    data = plugin_data_pb2.HParamsPluginData.FromString(acc.PluginTagToContent("hparams")["_hparams_/session_start_info"])
    hparams = {k: v.string_value or v.number_value for k, v in data.session_start_info.hparams.items()}
    return text, hparams


def _record(run, **info):
    (run / "run.json").write_text(json.dumps({"stage": "pretrain", **info}))


def test_the_stage_is_the_run_s_not_the_folder_under_outputs(tmp_path, make_run):
    """Served from outputs/pretrain, each run's folder was taken for its stage: tags interrupted/loss,
    multirun/loss..., one section per run, nothing overlaid."""
    outputs = tmp_path / "outputs"
    rows = [{"step": 1, "time": 1, "loss": 1.0}]
    for name in ("interrupted", "multirun/sweep-lr=1"):
        _record(make_run(outputs, "pretrain", name, rows), status="complete")
    ft = make_run(outputs, "finetune", "multirun/sst2-s1", rows, task="sst2")
    (ft / "run.json").write_text(json.dumps({"stage": "finetune", "status": "complete"}))
    assert mirror_all(outputs / "pretrain") == {"interrupted": 1, "multirun/sweep-lr=1": 1}
    for rel in ("interrupted", "multirun/sweep-lr=1"):
        assert list(_scalars(outputs / "pretrain" / ".dashboard" / rel)) == ["train/loss"]
    mirror_all(outputs)
    assert list(_scalars(outputs / ".dashboard" / "finetune" / "multirun" / "sst2-s1")) == ["finetune/loss"]


def test_the_run_s_status_and_settings_are_in_its_summary_and_follow_the_run(tmp_path, make_run):
    """A failed, stopped or killed run looked like a finished one (no status), and lr, seed and batch were not
    shown; when the run ends, or starts again, its summary follows."""
    import yaml

    run = make_run(tmp_path / "outputs", "pretrain", "bad-lr", [{"step": 1, "time": 1, "loss": 1.0}])
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "trainer": {"lr": 1e30, "batch_size": 8}}))
    _record(run, status="running")  # no process holds it: killed
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 1
    text, hparams = _text_and_hparams(out)
    assert "| status | killed |" in text and "| lr | 1e+30 |" in text and "| seed | 0 |" in text
    assert hparams["status"] == "killed" and hparams["lr"] == 1e30 and hparams["batch_size"] == 8
    _record(run, status="failed", error="TrainingDiverged: 2 consecutive non-finite losses at step 4")
    assert mirror_run(run, out) == 0  # no new row: its summary is replaced, with its new status
    text, hparams = _text_and_hparams(out)
    assert "| status | failed (TrainingDiverged: 2 consecutive non-finite losses at step 4) |" in text
    assert hparams["status"] == "failed" and _scalars(out)["train/loss"] == [(1, 1.0)]
    assert mirror_run(run, out) == 0


def test_mirroring_a_folder_without_runs_warns(tmp_path, capsys):
    """--mirror-only on an empty (or mistyped) folder said "0 runs, 0 new rows" and nothing else."""
    (tmp_path / "empty").mkdir()
    code = load_script("dashboard").main(["--mirror-only", "--outputs", str(tmp_path / "empty"),
                                          "--logdir", str(tmp_path / "events")])
    out = capsys.readouterr()
    assert code == 0 and out.out.strip() == "0 runs, 0 new rows"
    assert out.err.splitlines() == [(f"warning: {tmp_path / 'empty'} holds no run yet (no metrics.jsonl at or under "
                                     "it): is --outputs the folder of the runs (paths.output_dir, outputs/ by default)?")]


def test_without_tensorboard_the_dashboard_is_one_error_line_and_leaves_no_logdir(tmp_path, make_run, monkeypatch,
                                                                                   capsys):
    """Mirroring failed with a traceback from inside the mirror, leaving the logdir's manifest.json behind."""
    import sys

    make_run(tmp_path / "out", "pretrain", "r", [{"step": 1, "time": 1.0, "loss": 2.0}])
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as where tensorboard is not installed
    with pytest.raises(SystemExit) as stop:
        load_script("dashboard").main(["--mirror-only", "--outputs", str(tmp_path / "out"),
                                       "--logdir", str(tmp_path / "events")])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and err.startswith("error: the dashboard (its TensorBoard event files) needs the "
                                                    "tensorboard package") and "\n" not in err
    assert err.endswith(": pip install tensorboard") and not (tmp_path / "events").exists()


def _points(logdir):
    """Every (tag, step) of the scalars in the event files under `logdir`, as written: a point written twice is
    listed twice (TensorBoard's accumulator would fold or purge some of them)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    points = []
    for f in sorted(logdir.rglob("events.out.tfevents.*")):
        for event in EventFileLoader(str(f)).Load():
            points += [(v.tag, event.step) for v in event.summary.value if v.tag.startswith("train/")]
    return sorted(points)


@pytest.mark.parametrize("first", [True, False], ids=["first pass", "later pass"])
def test_a_pass_cut_short_is_mirrored_again_not_twice(tmp_path, make_run, monkeypatch, first):
    """Ctrl-C (or a kill) in a pass flushed the events written so far but skipped the state: the next pass wrote
    every row again beside them, two points per step in TensorBoard."""
    import linformer.report.dashboard as dashboard

    rows = [{"step": s, "time": s, "loss": 1.0 / s, "lr": 0.1} for s in range(1, 21)]
    run = make_run(tmp_path / "outputs", "pretrain", "a", rows[:10] if not first else rows)
    out = tmp_path / "tb"
    if not first:
        assert mirror_run(run, out) == 10
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    real, calls = dashboard._write_event, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(dashboard, "_write_event", interrupted)
    with pytest.raises(KeyboardInterrupt):
        mirror_run(run, out)
    assert not out.exists()  # the mirror cut short is removed, not left half-written for TensorBoard to show
    monkeypatch.setattr(dashboard, "_write_event", real)
    assert mirror_run(run, out) == 20 and mirror_run(run, out) == 0
    want = sorted((tag, s) for s in range(1, 21) for tag in ("train/loss", "train/lr"))
    assert _points(out) == want


def test_event_files_without_a_state_are_not_kept_beside_a_first_mirror(tmp_path, make_run):
    """A folder whose state is missing (a pass of an earlier version cut short) held events a first pass doubled."""
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": s, "time": s, "loss": 1.0} for s in (1, 2)])
    out = tmp_path / "tb"
    mirror_run(run, out)
    (out / ".mirror.json").unlink()
    assert mirror_run(run, out) == 2
    assert _points(out) == [("train/loss", 1), ("train/loss", 2)]


def test_sigterm_stops_a_mirror_with_a_stopped_line(tmp_path, make_run, monkeypatch, capsys):
    """SIGTERM ended --mirror-only with -15 and no word, where every other command says `stopped:` (exit 143)."""
    import os
    import signal

    import linformer.report.dashboard as dashboard

    outputs = tmp_path / "outputs"
    make_run(outputs, "pretrain", "a", [{"step": 1, "time": 1, "loss": 1.0}])
    def terminated(*_):
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "SIGTERM would end the process unwound"
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(dashboard, "mirror_run", terminated)
    with pytest.raises(SystemExit) as stop:
        load_script("dashboard").main(["--mirror-only", "--outputs", str(outputs), "--logdir", str(tmp_path / "e")])
    assert stop.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err.strip().startswith("stopped: stopped by SIGTERM while mirroring")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_damaged_record_is_one_warning_line_once_not_one_per_reading(tmp_path, make_run, caplog):
    """Each warning of a damaged record was printed twice per pass (the mirror reads a run's files more than once),
    and a YAML error ran over eight lines."""
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": 1, "time": 0.5, "loss": 9.0}])
    (run / "config.yaml").write_text("a: [b\n")
    (run / "results.json").write_text("{")
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 2, "ti\n{"step": 3, "time": 1.5, "loss": 8.0}\n')
    mirror_run(run, tmp_path / "tb" / "a")
    mirror_run(run, tmp_path / "tb" / "a")
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert sorted(said) == sorted(set(said)) and len(said) == 3, said
    assert all("\n" not in line for line in said)


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_served_dashboard_as_every_command_with_its_tensorboard(tmp_path, make_run, monkeypatch,
                                                                                   capsys, signum):
    """Ctrl-C ended the served dashboard with 241 (TensorBoard's -15 passed on as the command's status), SIGTERM with
    0, and neither said `stopped:`: now 128 + the signal and a `stopped:` line, TensorBoard stopped, and the run whose
    pass the signal cut short has no mirror left half-written."""
    import os
    import signal
    import socket
    import subprocess
    import sys

    import linformer.report.dashboard as dashboard

    signum = getattr(signal, signum)
    # what a terminal gives the command (a job started with & by a non-interactive shell has SIGINT ignored, and the
    # command keeps what it finds)
    default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
    before = signal.signal(signum, default)
    outputs, board = tmp_path / "outputs", tmp_path / "tb"
    rows = [{"step": s, "time": s, "loss": 1.0} for s in range(1, 5)]
    run = make_run(outputs, "pretrain", "a", rows)
    children = []

    class TensorBoard(subprocess.Popen):
        def __init__(self, command, env, **kwargs):
            super().__init__([sys.executable, "-c", "import time; time.sleep(60)"])
            children.append(self)

    real_event, events = dashboard._write_event, []

    def write_event(*args):  # the second pass, half-way through its rows: Ctrl-C (or a kill)
        events.append(1)
        if (run / "metrics.jsonl").stat().st_size > 200 and len(events) == 2:
            os.kill(os.getpid(), signum)
        return real_event(*args)

    def up(*_args, **_kwargs):  # TensorBoard is up: the run gains rows for the next pass
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows * 3))
        events.clear()
        return 0.0

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(subprocess, "Popen", TensorBoard)
    monkeypatch.setattr(dashboard, "wait_until_up", up)
    monkeypatch.setattr(dashboard, "_write_event", write_event)
    try:
        with pytest.raises(SystemExit) as stop:
            load_script("dashboard").main(["--outputs", str(outputs), "--logdir", str(board), "--port", str(port),
                                           "--watch", "0.05"])
        after = signal.getsignal(signum)
    finally:
        signal.signal(signum, before)
    assert stop.value.code == 128 + signum
    name = signal.Signals(signum).name
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"stopped: stopped by {name}")
    assert children[0].poll() is not None, "TensorBoard was left running"
    assert not (board / "pretrain" / "a").exists()  # the mirror the stop cut short is removed, not half there
    assert after is default  # the command gives back the handler it found


def test_a_damaged_record_among_many_runs_is_shown_marked_damaged_in_the_dashboard_as_in_compare_runs(
        tmp_path, make_run, caplog):
    """A run whose run.json or results.json did not read showed in the dashboard as a run that recorded none (status
    "not recorded", no reported score: an unfinished run), and compare_runs' table took it for a finished one; each
    read them its own way. Both read them as rundir does (``read_shown``): the other runs as ever, this one with its
    curves, marked damaged, naming the files, with one warning each."""
    from linformer.report.compare import compare_runs

    outputs = tmp_path / "outputs"
    good = make_run(outputs, "finetune", "good", [{"step": 1, "time": 1, "loss": 1.0}], task="sst2",
                    results={"steps": 1, "metrics": {"accuracy": 0.5}, "reported": {"step": 1}})
    _record(good, status="complete", stage="finetune")
    bad = make_run(outputs, "finetune", "bad", [{"step": 1, "time": 1, "loss": 2.0}], task="sst2")
    (bad / "run.json").write_text('{"status": "compl')
    (bad / "results.json").write_text("{")
    written = mirror_all(outputs, tmp_path / "tb", strict=True)
    assert written == {"finetune/bad": 1, "finetune/good": 2}
    text, hparams = _text_and_hparams(tmp_path / "tb" / "finetune" / "bad")
    assert "| status | damaged |" in text and "| record | results.json, run.json cannot be read: shown without them |" \
        in text
    assert hparams["status"] == "damaged"
    assert _scalars(tmp_path / "tb" / "finetune" / "bad")["finetune/loss"] == [(1, 2.0)]
    assert _text_and_hparams(tmp_path / "tb" / "finetune" / "good")[1]["status"] == "complete"
    table = compare_runs([outputs], tmp_path / "cmp")["table"]
    assert "| 1 (damaged) |" in table
    assert "Damaged records, each run shown without the files named: bad (results.json, run.json cannot be read)." \
        in table
    said = sorted({r.getMessage() for r in caplog.records if r.levelname == "WARNING"})
    assert [line.split(" cannot be read (")[0] for line in said] == [str(bad / "results.json"), str(bad / "run.json")]
    assert all(line.endswith(f"the run is shown without it, marked damaged. Restore the file (from a copy), or start "
                             f"afresh under another run_name (or move {bad} away).") for line in said)


def _finetune_run(outputs, name, chosen, last, **settings):
    """A finished finetuning run of a sweep: lr 1e-4 and seed 0 like every other, its own `settings` (top-level
    keys, or trainer.<key>), its validation value at the chosen step (2) and at its last (4)."""
    import yaml

    rows = [{"step": s, "time": s, "loss": 1.0 / s} for s in range(1, 5)]
    rows[1]["val_accuracy"], rows[3]["val_accuracy"] = chosen, last
    results = {"metrics": {"accuracy": 0.8}, "reported": {"split": "dev", "step": 2}, "steps": 4,
               "selection": {"split": "validation", "step": 2, "rule": "best val_accuracy", "metric": "val_accuracy",
                             "value": chosen}}
    run = write_run(outputs, "finetune", name, rows, task="sst2", results=results)
    config = yaml.safe_load((run / "config.yaml").read_text())
    trainer = {"lr": 1e-4, **{k.split(".", 1)[1]: v for k, v in settings.items() if k.startswith("trainer.")}}
    config |= {"trainer": trainer, **{k: v for k, v in settings.items() if not k.startswith("trainer.")}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "run.json").write_text(json.dumps({"stage": "finetune", "status": "complete"}))
    return run


def test_hparams_name_what_two_sweeps_varied_and_the_value_that_chose_each_model(tmp_path):
    """Two sweeps' runs of one lr and seed that differ in max_train_examples, validation_fraction, trainer.epochs
    and subset_seed looked the same in the HPARAMS tab (its fixed keys), which showed val/accuracy's last value, not
    the one that chose the model: each run's summary names the settings the mirrored runs differ in, and
    val/accuracy_chosen is the chosen value; a run added or removed re-mirrors the others' summaries."""
    outputs = tmp_path / "outputs"
    common = {"validation_fraction": 0.1, "trainer.epochs": 2}
    _finetune_run(outputs, "multirun/a", 0.875, 0.75, max_train_examples=100, subset_seed=0, **common)
    _finetune_run(outputs, "multirun2/a", 0.625, 0.5, max_train_examples=200, subset_seed=1, **common)
    mirror_all(outputs)
    tb = outputs / ".dashboard" / "finetune"
    text, a = _text_and_hparams(tb / "multirun" / "a")
    _, b = _text_and_hparams(tb / "multirun2" / "a")
    assert (a["max_train_examples"], a["subset_seed"], b["max_train_examples"], b["subset_seed"]) == (100, 0, 200, 1)
    assert a["lr"] == b["lr"] == 1e-4 and "trainer.lr" not in a and "seed" in a  # shown once, under key_config's name
    assert "validation_fraction" not in a and "trainer.epochs" not in a  # the same in both: no column
    assert "| max_train_examples | 100 |" in text
    s = _scalars(tb / "multirun" / "a")
    assert s["val/accuracy"][-1] == (4, 0.75) and s["val/accuracy_chosen"] == [(2, 0.875)]
    assert _scalars(tb / "multirun2" / "a")["val/accuracy_chosen"] == [(2, 0.625)]
    assert mirror_all(outputs) == {"finetune/multirun/a": 0, "finetune/multirun2/a": 0}  # nothing new

    third = _finetune_run(outputs, "multirun3/a", 0.5, 0.5, max_train_examples=100, subset_seed=0,
                          validation_fraction=0.2, **{"trainer.epochs": 3})
    # the new run's rows and scores; the others' summaries only
    assert mirror_all(outputs) == {"finetune/multirun/a": 0, "finetune/multirun2/a": 0, "finetune/multirun3/a": 5}
    _, a = _text_and_hparams(tb / "multirun" / "a")
    _, c = _text_and_hparams(tb / "multirun3" / "a")
    assert (a["validation_fraction"], a["trainer.epochs"], c["validation_fraction"], c["trainer.epochs"]) == (
        0.1, 2, 0.2, 3)
    assert len(list((tb / "multirun" / "a").glob("events.out.tfevents.*"))) == 2
    import shutil

    shutil.rmtree(third)
    assert mirror_all(outputs) == {"finetune/multirun/a": 0, "finetune/multirun2/a": 0}
    assert "validation_fraction" not in _text_and_hparams(tb / "multirun" / "a")[1]


def test_hparams_model_is_a_config_name_and_a_finetune_s_start_is_a_column_of_its_own(tmp_path):
    """HPARAMS' `model` column read "tiny" for a pretraining run and "tiny-full-n128-s0/model" for a finetune of it:
    a finetuning run, which names no model config, shows the pretraining run it started from as `start` and the
    start weights' sha256 shortly, and no `model`."""
    import yaml

    outputs = tmp_path / "outputs"
    pretrain = write_run(outputs, "pretrain", "tiny-full-n128-s0", [{"step": 1, "time": 1.0, "loss": 2.0}])
    (pretrain / "run.json").write_text(json.dumps({"stage": "pretrain", "status": "complete"}))
    finetune = _finetune_run(outputs, "sst2-tiny-full-n128-s0", 0.75, 0.75)
    config = {k: v for k, v in yaml.safe_load((finetune / "config.yaml").read_text()).items() if k != "model"}
    (finetune / "config.yaml").write_text(yaml.safe_dump({**config, "model_path": str(pretrain)}))
    results = json.loads((finetune / "results.json").read_text())
    (finetune / "results.json").write_text(json.dumps({**results, "model_path": str(pretrain / "model"),
                                                       "start_weights_sha256": "ab12" * 16}))
    mirror_all(outputs)
    tb = outputs / ".dashboard"
    _, pretrained = _text_and_hparams(tb / "pretrain" / "tiny-full-n128-s0")
    text, finetuned = _text_and_hparams(tb / "finetune" / "sst2-tiny-full-n128-s0")
    assert pretrained["model"] == "tiny" and "start" not in pretrained
    assert "model" not in finetuned
    assert finetuned["start"] == "tiny-full-n128-s0" and finetuned["start_weights_sha256"] == "ab12ab12ab12"
    assert "| start | tiny-full-n128-s0 |" in text


def test_a_logdir_that_cannot_be_written_names_the_flag_that_chose_it(tmp_path, monkeypatch):

    from linformer.errors import OutputPathError
    from linformer.files import outputs
    from linformer.report.dashboard import claim_logdir

    (tmp_path / "outputs").mkdir()
    monkeypatch.setattr(outputs.os, "access", lambda *a: False)  # a read-only outputs folder (root may write anywhere)
    from tests.conftest import as_command
    as_command(monkeypatch, ["scripts/dashboard.py"])
    with pytest.raises(OutputPathError, match=r"neither can .*\.dashboard: choose another --logdir, one you can write"):
        claim_logdir(tmp_path / "outputs")


@pytest.mark.parametrize("argv, line", [
    (["--watch", "0"], "error: argument --watch: '0': give a positive number of seconds"),
    (["--watch", "inf"], "error: argument --watch: 'inf': give a positive number of seconds"),
    (["--port", "70000"], "error: argument --port: 70000: a TCP port is 1 to 65535"),
    (["--port", "x"], "error: argument --port: 'x' is not a whole number"),
])
def test_a_bad_watch_or_port_is_refused_where_argparse_reads_it(argv, line, tmp_path, capsys):
    """--watch and --port were read as any float and int and checked by hand in the script's body, after the
    configs were read (an infinite --watch passed); argtypes checks them where argparse reads them."""
    with pytest.raises(SystemExit) as stop:
        load_script("dashboard").main(["--outputs", str(tmp_path), "--mirror-only", *argv])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == line
    assert list(tmp_path.iterdir()) == []


def test_a_damaged_config_leaves_the_other_runs_summaries_as_they_were(tmp_path, make_run):
    """One run whose config.yaml did not read made every identity key a setting the runs differ in: each good run's
    summary listed data.*, trainer.max_steps, ... (29 settings at sweep scale, not 2). It is left out of them."""
    import yaml

    outputs = tmp_path / "outputs"
    for i, lr in enumerate((1e-3, 2e-3)):
        run = make_run(outputs, "pretrain", f"lr{i}", [{"step": 1, "time": 1, "loss": 1.0}])
        config = yaml.safe_load((run / "config.yaml").read_text())
        config |= {"trainer": {"lr": lr, "max_steps": 10, "warmup_steps": 2}, "data": {"tokenizer": "t"}}
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        _record(run, status="complete")
    bad = make_run(outputs, "pretrain", "0bad", [{"step": 1, "time": 1, "loss": 2.0}])
    (bad / "config.yaml").write_text("model: {name: tiny\n  projected_dim: [")
    _record(bad, status="complete")
    mirror_all(outputs, tmp_path / "tb", strict=True)
    _, hparams = _text_and_hparams(tmp_path / "tb" / "pretrain" / "lr1")
    assert hparams["lr"] == 2e-3 and not [k for k in hparams if k.startswith(("data.", "trainer."))], hparams
    text, _ = _text_and_hparams(tmp_path / "tb" / "pretrain" / "0bad")
    assert "| record | config.yaml cannot be read: shown without them |" in text


def test_a_row_whose_step_is_no_integer_is_skipped_and_the_other_runs_mirrored(tmp_path, make_run):
    """`"step": null` ended --mirror-only in a TypeError (mirror_all catches OSError and ValueError): one such run
    stopped the whole mirror. Such rows are skipped, as a torn line is."""
    outputs = tmp_path / "outputs"
    make_run(outputs, "pretrain", "good", [{"step": 1, "time": 1, "loss": 1.0}])
    make_run(outputs, "pretrain", "odd", [{"step": None, "loss": 2.0}, {"step": "abc", "loss": "x"},
                                          {"step": 2, "time": [1], "loss": 3.0}])
    assert mirror_all(outputs, tmp_path / "tb", strict=True) == {"pretrain/good": 1, "pretrain/odd": 1}
    assert _scalars(tmp_path / "tb" / "pretrain" / "odd")["train/loss"] == [(2, 3.0)]


def test_mirroring_many_runs_says_how_far_it_is_in_a_log_file(tmp_path, make_run, monkeypatch, capsys):
    """The first mirror of 300 runs said nothing for 4+ minutes. Where stderr is a log file it says a plain line
    every 30 s (a terminal gets a bar, gone when the pass ends: the live dashboard passes every few seconds)."""
    from linformer import progress

    outputs = tmp_path / "outputs"
    for name in ("a", "b", "c"):
        make_run(outputs, "pretrain", name, [{"step": 1, "time": 1, "loss": 1.0}])
    ticks = iter(range(10_000))
    monkeypatch.setattr(progress, "monotonic", lambda: 31.0 * next(ticks))
    mirror_all(outputs, tmp_path / "tb", strict=True)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dashboard: mirroring")]
    assert said == ["dashboard: mirroring: 1 of 3 runs (31 s)", "dashboard: mirroring: 2 of 3 runs (62 s)"]


def _files_and_state(out):
    """{event file name: its bytes} of a run's mirror folder, and its state."""
    return ({f.name: f.read_bytes() for f in out.glob("events.out.tfevents.*")},
            json.loads((out / ".mirror.json").read_text()))


def _summary_only_replaced(before, after):
    """Whether a pass replaced the run's summary event file and nothing else: the metrics event file byte for byte,
    the offset and rows mirrored as they were, one summary file, under a new name."""
    (files, state), (files2, state2) = before, after
    metrics = state["events"]
    return (state2["events"] == metrics and files2[metrics] == files[metrics]
            and (state2["offset"], state2["rows"]) == (state["offset"], state["rows"])
            and set(files2) == {metrics, state2["summary"]} and state2["summary"] != state["summary"]
            and state2["summary"] < metrics)  # sorts first: a latest-file loader goes on following the metrics


def _each_point_once(out, rows, loss="train/loss"):
    """Whether the event files in `out` hold each of the run's `rows` loss points once, and no point twice."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    points = [(v.tag, event.step) for f in out.glob("events.out.tfevents.*") for event in EventFileLoader(str(f)).Load()
              for v in event.summary.value]
    return len(points) == len(set(points)) and sorted(s for tag, s in points if tag == loss) == list(range(1, rows + 1))


def test_a_settings_change_replaces_only_each_run_s_summary_not_its_rows(tmp_path):
    """A sweep's run added or removed changed the settings the runs differ in, and every run's whole mirror was
    forgotten and written again (6 million rows, 6 minutes for 300 runs): only each run's small summary file is
    replaced; its metrics event file and offset are kept, and TensorBoard reads each row once and the new summary."""
    import shutil

    outputs = tmp_path / "outputs"
    _finetune_run(outputs, "multirun/a", 0.875, 0.75, max_train_examples=100, validation_fraction=0.1)
    _finetune_run(outputs, "multirun2/a", 0.625, 0.5, max_train_examples=200, validation_fraction=0.1)
    mirror_all(outputs)
    out = outputs / ".dashboard" / "finetune" / "multirun" / "a"
    before = _files_and_state(out)
    third = _finetune_run(outputs, "multirun3/a", 0.5, 0.5, max_train_examples=100, validation_fraction=0.2)
    assert mirror_all(outputs)["finetune/multirun/a"] == 0
    after = _files_and_state(out)
    assert _summary_only_replaced(before, after)
    text, hparams = _text_and_hparams(out)
    assert "| validation_fraction | 0.1 |" in text and hparams["validation_fraction"] == 0.1
    assert _each_point_once(out, 4, "finetune/loss") and _scalars(out)["eval/accuracy"] == [(4, pytest.approx(0.8))]
    shutil.rmtree(third)
    assert mirror_all(outputs)["finetune/multirun/a"] == 0
    assert _summary_only_replaced(after, _files_and_state(out))
    assert "validation_fraction" not in _text_and_hparams(out)[1] and _each_point_once(out, 4, "finetune/loss")


def test_a_status_change_replaces_only_the_run_s_summary_and_later_rows_are_appended(tmp_path, make_run):
    """A run that ended (or started again) was mirrored again from scratch for its new status: its summary file is
    replaced, its rows kept, and the rows it gains after are appended to the same metrics event file."""
    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": s, "time": s, "loss": 1.0} for s in (1, 2, 3)])
    _record(run, status="running")  # no process holds it: killed
    out = tmp_path / "tb"
    assert mirror_run(run, out) == 3
    before = _files_and_state(out)
    _record(run, status="complete")
    assert mirror_run(run, out) == 0 and mirror_run(run, out) == 0
    after = _files_and_state(out)
    assert _summary_only_replaced(before, after)
    assert _text_and_hparams(out)[1]["status"] == "complete" and _each_point_once(out, 3)
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 4, "time": 4, "loss": 1.0}) + "\n")
    _record(run, status="failed")
    assert mirror_run(run, out) == 1
    files, state = _files_and_state(out)
    assert files[state["events"]].startswith(after[0][state["events"]]) and set(files) == {state["events"],
                                                                                         state["summary"]}
    assert _text_and_hparams(out)[1]["status"].startswith("failed") and _each_point_once(out, 4)


@pytest.mark.parametrize("multifile", [True, False], ids=["as the dashboard starts it", "a latest-file loader"])
def test_a_serving_tensorboard_reads_rows_appended_after_a_new_summary_file(tmp_path, make_run, multifile):
    """TensorBoard's legacy loader follows only a run's last event file by name: a new summary file named after the
    metrics file would hide every row appended later. The summary sorts first, and the dashboard starts TensorBoard
    with --reload_multifile, whose loader also reads the new summary."""
    from tensorboard import program
    from tensorboard.backend.event_processing import data_ingester
    from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer
    from tensorboard.plugins.core import core_plugin
    from tensorboard.util import tensor_util

    from linformer.report.dashboard import tensorboard_command

    run = make_run(tmp_path / "outputs", "pretrain", "a", [{"step": s, "time": s, "loss": 1.0} for s in (1, 2)])
    _record(run, status="running")
    out = tmp_path / "tb" / "a"
    mirror_run(run, out)
    board = program.TensorBoard(plugins=[core_plugin.CorePluginLoader(include_debug_info=False)])
    board.configure(argv=[None, *tensorboard_command(tmp_path / "tb", "127.0.0.1", 6006)[3:]])
    active = data_ingester._get_event_file_active_filter(board.flags) if multifile else None
    served = EventMultiplexer(size_guidance={"scalars": 0, "tensors": 0}, event_file_active_filter=active)
    served.AddRunsFromDirectory(str(tmp_path / "tb"))
    served.Reload()
    _record(run, status="complete")
    with (run / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"step": 3, "time": 3, "loss": 0.5}) + "\n")
    assert mirror_run(run, out) == 1
    served.Reload()
    loss = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in served.Tensors("a", "train/loss")]
    assert loss == [(1, 1.0), (2, 1.0), (3, 0.5)]
    config = served.Tensors("a", "config/text_summary")[-1].tensor_proto.string_val[0].decode()
    assert ("| status | complete |" in config) == multifile


def _serve_with_child(child: str, tmp_path, monkeypatch) -> int:
    """dashboard.serve on a free port with `child` (Python source) started in TensorBoard's place, waited for 0.5 s;
    returns serve's exit status."""
    import socket
    import sys

    from linformer.report import dashboard

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(dashboard, "tensorboard_command", lambda *a, **k: [sys.executable, "-c", child])
    monkeypatch.setattr(dashboard, "UP_WITHIN_S", 0.5)
    (tmp_path / "runs").mkdir()
    return dashboard.serve(tmp_path / "runs", tmp_path / "tb", port=port, watch_every=0.2)
