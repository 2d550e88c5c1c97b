"""Run identity, locking, preemption and damaged checkpoints, met as a user meets them: scripts/pretrain.py runs."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from linformer.errors import ConfigError, DiskFullError
from linformer.signals import signal_words
from linformer.train.pretrain import pretrain

from .conftest import compose_pretrain
from .test_pretrain import _losses, _script_args

ENV = dict(os.environ, OMP_NUM_THREADS="1")


def _run(tiny_data, run_dir, *overrides, check=None):
    result = subprocess.run(_script_args(tiny_data, run_dir, *overrides), env=ENV, capture_output=True, text=True)
    if check is not None:
        assert result.returncode == check, result.stderr[-3000:]
    return result


def _one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    line = next(x for x in result.stderr.splitlines() if x.startswith("error: "))
    for needle in needles:
        assert needle in line, line
    return line


def _snapshot(run_dir):
    return {p.relative_to(run_dir): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def test_finished_run_rerun_with_another_lr_is_refused_and_nothing_changes(tiny_data, tmp_path):
    """In-process (the error line itself: test_invalid_number_from_the_cli_is_one_error_line)."""
    from linformer.errors import RunDirError

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    before = _snapshot(run)
    with pytest.raises(RunDirError, match=r"trainer.lr: 0.003 -> 0.001.*allow_config_change=\[trainer.lr\]"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.lr=1e-3"), run)
    assert _snapshot(run) == before  # config.yaml still holds the lr it was trained with


def test_each_row_logs_the_lr_its_update_used(tiny_data, tmp_path):
    """The rows logged the schedule's rate after their step: the next step's, so the first row hid that a warmup's
    first update runs at 0 (transformers' schedule) and the last row read 0 for an update made at a positive rate."""
    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=3", "trainer.warmup_steps=1", "trainer.log_every=1",
                              "trainer.lr=1e-3"), run)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["lr"] for r in rows if "lr" in r] == pytest.approx([0.0, 1e-3, 5e-4])


def test_a_finished_run_whose_model_is_gone_says_so_and_export_writes_it_again(tiny_data, tmp_path, capsys):
    """A finished pretraining whose model/ was deleted said "already complete: nothing to do", and what needed its
    model failed later; the rerun names the loss and the export that writes the same model again from the final
    checkpoint, at <run>/model."""
    import shutil

    import torch
    from safetensors.torch import load

    from linformer.errors import CheckpointError
    from linformer.modeling.loading import resolve_model_path
    from linformer.train.export import export_run

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    weights = (run / "model" / "model.safetensors").read_bytes()
    shutil.rmtree(run / "model")
    with pytest.raises(CheckpointError, match=rf"^{run} is complete, but its model {run}/model is gone .* final "
                                              rf"checkpoint: python scripts/export.py {run}\.$"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    with pytest.raises(CheckpointError, match=r"is a complete run whose model/ is gone: write it again"):
        resolve_model_path(str(run))
    assert export_run(run)["out"] == run / "model"
    again, first = load((run / "model" / "model.safetensors").read_bytes()), load(weights)
    assert again.keys() == first.keys() and all(torch.equal(again[k], first[k]) for k in first)
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    assert "already complete (4 steps, the same run settings)" in capsys.readouterr().out


def test_a_finished_run_whose_model_is_damaged_says_so_and_export_writes_it_again(tiny_data, tmp_path, capsys):
    """A finished pretraining whose model/ weights were cut short said "already complete: nothing to do" (exit 0), and
    what needed its model failed later, far from the cause; model/ records its files' checksums, and the rerun names
    the damage and the export that writes the same model over it."""
    from linformer.errors import CheckpointError
    from linformer.modeling.loading import resolve_model_path
    from linformer.train.export import export_run

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    weights = run / "model" / "model.safetensors"
    intact, size = weights.read_bytes(), weights.stat().st_size
    weights.write_bytes(intact[:1000])
    with pytest.raises(CheckpointError, match=rf"^{run} is complete, but its model {run}/model is damaged \("
                                              rf"model.safetensors: 1,000 bytes, {size:,} written\): write it again "
                                              rf"from the run's final checkpoint: python scripts/export.py {run} --out "
                                              rf"{run}/model --overwrite\.$"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    # a command that starts from it (finetuning's model_path, pretraining's init_from) says the same
    with pytest.raises(CheckpointError, match=rf"^model_path='{run}': the weights of the model {run}/model differ "
                                              rf"from what the package recorded when it wrote them \(model.safetensors: "
                                              rf"1,000 bytes, {size:,} written\): if the change is yours .* remove "
                                              rf"{run}/model/manifest.json to take the folder as it is; else restore "
                                              rf"them: write "
                                              rf"it again from the run's final checkpoint: python scripts/export.py "
                                              rf"{run} --out {run}/model --overwrite\.$"):
        resolve_model_path(str(run))
    assert export_run(run, run / "model", overwrite=True)["final"]  # the command the error gives
    assert weights.read_bytes() == intact
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    assert "already complete (4 steps, the same run settings)" in capsys.readouterr().out


def test_finished_run_rerun_with_the_same_settings_says_complete(tiny_data, tmp_path, capsys):
    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    before = _snapshot(run)
    capsys.readouterr()
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.eval_every=2"), run)  # operational key
    out = capsys.readouterr().out  # a result: stdout, as docs/guide.md "What goes where" says
    assert "already complete (4 steps, the same run settings)" in out
    # what it did not apply is named: the finished run keeps what made its results
    assert "Not applied to the finished run: trainer.eval_every: " in out and "-> 2." in out
    assert _snapshot(run) == before
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    assert "Not applied" not in capsys.readouterr().err


def test_a_sigterm_while_a_rerun_says_already_complete_leaves_it_complete(tiny_data, tmp_path, capsys, monkeypatch):
    """A SIGTERM landing as a rerun of a complete run checks its model and says "already complete" ended it with
    `stopped:` and exit 143, as if a run had been cut short: the run stays complete, the rerun says so and returns."""
    import linformer.train.core as core

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    check = core.model_problem

    def signalled(run_dir):
        os.kill(os.getpid(), signal.SIGTERM)  # the real signal, through the handler the run installs
        return check(run_dir)

    monkeypatch.setattr(core, "model_problem", signalled)
    capsys.readouterr()
    assert pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)["steps"] == 4
    assert "already complete (4 steps, the same run settings)" in capsys.readouterr().out
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_a_run_whose_checkpoints_are_gone_is_refused_never_retrained_from_step_0(tiny_data, tmp_path, capsys):
    """A complete run whose checkpoints/ was deleted said "raise trainer.max_steps ... to train it further", and doing
    so retrained it from step 0 over its model/; a stopped one restarted at 0 without a word. Both are refused in one
    line naming the loss and the choices; the "train it further" advice is given only where a checkpoint is left."""
    from linformer.errors import CheckpointError

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    assert json.loads((run / "run.json").read_text())["checkpoint_step"] == 4
    shutil.rmtree(run / "checkpoints")
    capsys.readouterr()
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)  # complete: nothing to do, and no false advice
    out = capsys.readouterr().out
    assert "already complete" in out and "to train it further" not in out
    assert "reached step 4 but its checkpoints are gone" in out
    before = _snapshot(run)
    further = ("trainer.max_steps=6", "trainer.allow_config_change=[trainer.max_steps]")
    with pytest.raises(CheckpointError, match=r"reached step 4 but its checkpoints are gone.*another run_name.*"
                                              r"init_from=.*model"):
        pretrain(compose_pretrain(tiny_data, *further), run)
    assert _snapshot(run) == before  # model/, metrics and record as they were
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(info, status="stopped")))  # a stopped run, pruned by hand
    with pytest.raises(CheckpointError, match="reached step 4 but its checkpoints are gone"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)


def test_pruning_a_complete_run_frees_its_checkpoints_and_a_later_start_says_they_were_removed(tiny_data, tmp_path):
    """No documented way freed a finished run's checkpoints (keep_last full ones, ~8x the model), so users deleted
    checkpoints/ by hand; prune_checkpoints removes them from a complete run with its model intact, records it, and
    refuses a run its checkpoints still continue."""
    from linformer.errors import CheckpointError, RunDirError
    from linformer.train.checkpoint import prune_checkpoints

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=8"), run)
    stopped = tmp_path / "stopped"
    shutil.copytree(run, stopped)
    info = json.loads((stopped / "run.json").read_text())
    (stopped / "run.json").write_text(json.dumps(dict(info, status="stopped")))
    with pytest.raises(RunDirError, match="is stopped, not complete: its checkpoints are what continues it"):
        prune_checkpoints(stopped)
    assert (stopped / "checkpoints").is_dir()
    count, freed = prune_checkpoints(run)
    assert count == 2 and freed > 0 and not (run / "checkpoints").exists() and (run / "model").is_dir()
    assert json.loads((run / "run.json").read_text())["checkpoints_removed"].endswith(
        f"2 checkpoints (step 4 to 8), {freed / 1e6:,.1f} MB")
    with pytest.raises(CheckpointError, match="reached step 8 but its checkpoints were removed by prune_checkpoints"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=9", "trainer.allow_config_change=[trainer.max_steps]"),
                 run)


def test_refused_start_on_a_new_directory_writes_no_record(tiny_data, tmp_path, monkeypatch, capsys):
    """In-process (the error line as the shell sees it: test_invalid_number_from_the_cli_is_one_error_line)."""
    from tests.conftest import as_command, load_script

    run = tmp_path / "run"
    as_command(monkeypatch, _script_args(tiny_data, run, f"corpus_dir={tmp_path / 'no_corpus'}")[1:])
    with pytest.raises(SystemExit) as stop:
        load_script("pretrain").main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err, err[-3000:]
    assert "no_corpus" in next(x for x in err.splitlines() if x.startswith("error: "))
    assert not (run / "config.yaml").exists() and not (run / "run.json").exists() and not (run / ".lock").exists()
    assert not (run / ".hydra").exists()


def _default_sighup():
    """A script started from a terminal meets SIGHUP with its default action; pytest itself may run under nohup
    (SIGHUP ignored, which children inherit and the run keeps, by design)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start_and_wait(tiny_data, run, *overrides, rows=3):
    proc = subprocess.Popen(_script_args(tiny_data, run, *overrides), env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sighup)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (run / "metrics.jsonl").is_file() and len(_losses(run)) >= rows:
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"the run did not get going: {proc.stderr.read()[-2000:]}")


@pytest.mark.slow  # several fresh processes; make test-all runs it
def test_a_second_live_process_is_refused_and_a_stale_lock_taken_over(tiny_data, tmp_path):
    run = tmp_path / "run"
    # far more steps than the first process can take while the second starts, so that the second meets a live run,
    # not a finished one; it is killed below
    slow = ["trainer.max_steps=100000", "trainer.save_every=2", "trainer.eval_every=1000"]
    first = _start_and_wait(tiny_data, run, *slow)
    try:
        _one_line_error(_run(tiny_data, run, *slow, "seed=1"), "in use by process", str(first.pid))
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert (run / ".lock").is_file()  # left behind by the killed process
    newest = max(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("step-*"))
    done = _run(tiny_data, run, f"trainer.max_steps={newest + 2}", "trainer.save_every=2", "trainer.eval_every=1000",
                "trainer.allow_config_change=[trainer.max_steps]", check=0)
    assert "stale lock" in done.stderr and not (run / ".lock").exists()
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "complete" and info["changes"][0]["key"] == "trainer.max_steps"


def test_a_run_directory_made_read_only_is_the_error_not_the_lock_s_clean_up(tiny_data, tmp_path, monkeypatch,
                                                                            caplog):
    """A run directory made read-only before the run's end: the error named .lock, whose removal in the clean-up
    failed too and replaced the error that ended the run, not the folder the model could not be written into. The
    clean-up's own failures are warning lines. (Root ignores permissions: the refusals are simulated.)"""
    from pathlib import Path

    from linformer.errors import OutputPathError
    from linformer.files import atomic
    from linformer.train.trainer import Trainer

    run, readonly = tmp_path / "run", []
    real_save, real_access, real_unlink = Trainer.save_model, os.access, Path.unlink

    def save_read_only(self, final):
        readonly.append(True)
        return real_save(self, final)

    def refused(path):
        if readonly and Path(path).parent == run:
            raise PermissionError(13, "Permission denied", str(path))

    def unlink(self, *args, **kwargs):
        refused(self)
        return real_unlink(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "save_model", save_read_only)
    monkeypatch.setattr(os, "access", lambda path, mode: not (readonly and Path(path) == run) and real_access(path, mode))
    monkeypatch.setattr(atomic, "open", lambda path, *a, **k: refused(path) or open(path, *a, **k),  # noqa: SIM115
                        raising=False)  # atomic_write's temporaries
    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(OutputPathError, match=rf"^{run} cannot be written .* so neither can {run}/model"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    assert f"{run} cannot record how the run ended (" in caplog.text
    assert f"the lock {run / '.lock'} cannot be removed (Permission denied)" in caplog.text


def test_unfinished_run_resumed_with_another_batch_size_is_refused_unless_allowed(tiny_data, tmp_path):
    """In-process (the error line itself: test_invalid_number_from_the_cli_is_one_error_line; a killed process's
    stale lock taken over: test_resume_after_sigkill_is_bitwise). Unfinished as a killed run leaves it: status
    running, checkpoints, no summary."""
    from linformer.errors import RunDirError

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=2"), run)
    (run / "run.json").write_text((run / "run.json").read_text().replace('"complete"', '"running"'))
    (run / "summary.json").unlink()
    before = _snapshot(run)
    with pytest.raises(RunDirError, match=r"trainer.batch_size: 8 -> 4"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.batch_size=4"), run)
    assert _snapshot(run) == before  # config.yaml still holds batch_size 8


# SIGINT and SIGHUP are slow (make test-all): they reach the handler SIGTERM exercises, each in an interpreter of its own
@pytest.mark.parametrize("sig", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow),
                                 pytest.param(signal.SIGHUP, marks=pytest.mark.slow)])
def test_sigterm_and_sigint_checkpoint_the_current_step_and_say_how_to_resume(tiny_data, tmp_path, sig):
    """SIGHUP (a closed terminal, an ssh drop, tmux kill-server) ended the run where it stood: no checkpoint, no
    stopped: line, run.json left "running". It stops as SIGTERM does."""
    run = tmp_path / "run"
    steps = ["trainer.max_steps=400", "trainer.save_every=1000", "trainer.eval_every=1000"]
    proc = _start_and_wait(tiny_data, run, *steps, rows=5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err[-2000:]
    last = _losses(run)
    (ckpt,) = (run / "checkpoints").iterdir()  # save_every=1000: the only checkpoint is the one the signal wrote
    assert int(ckpt.name.split("-")[1]) == len(last)  # no step lost
    assert "Resume with the same command" in err and "Traceback" not in err
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "stopped" and info["reason"].startswith(f"{signal_words(sig)} at step {len(last)}: ")


def _kill_after_checkpoints(tiny_data, run, steps):
    proc = _start_and_wait(tiny_data, run, *steps, rows=9)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return sorted((run / "checkpoints").glob("step-*"))


STEPS = ["trainer.max_steps=40", "trainer.save_every=4", "trainer.eval_every=20", "model.hidden_dropout_prob=0.1"]


@pytest.mark.slow  # several fresh processes; make test-all runs it
def test_truncated_file_in_the_newest_checkpoint_falls_back_to_the_previous(tiny_data, tmp_path):
    full, run = tmp_path / "full", tmp_path / "run"
    _run(tiny_data, full, *STEPS, check=0)
    ckpts = _kill_after_checkpoints(tiny_data, run, STEPS)
    assert len(ckpts) >= 2
    model_file = ckpts[-1] / "model.safetensors"
    model_file.write_bytes(model_file.read_bytes()[:1000])
    result = _run(tiny_data, run, *STEPS, check=0)
    assert "model.safetensors" in result.stderr and ckpts[-1].name in result.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from_step"] == int(ckpts[-2].name.split("-")[1])
    assert _losses(run) == _losses(full)  # still bitwise: the previous checkpoint is complete


@pytest.mark.slow  # several fresh processes; make test-all runs it
def test_damaged_rng_state_is_an_error_unless_allowed(tiny_data, tmp_path):
    run = tmp_path / "run"
    ckpts = _kill_after_checkpoints(tiny_data, run, STEPS)
    for c in ckpts:  # every checkpoint's RNG state damaged: no bitwise resume is possible
        (c / "random_states_0.pkl").write_bytes(b"garbage")
    _one_line_error(_run(tiny_data, run, *STEPS), "random_states_0.pkl", "trainer.allow_nonbitwise_resume=true")
    result = _run(tiny_data, run, *STEPS, "trainer.allow_nonbitwise_resume=true", check=0)
    assert "without its RNG state" in result.stderr


@pytest.mark.slow  # a kill and a resume in fresh processes; the logic is tested in-process in tests/test_rundir.py
def test_torn_metrics_line_is_dropped_on_resume(tiny_data, tmp_path):
    run = tmp_path / "run"
    _kill_after_checkpoints(tiny_data, run, STEPS)
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 99, "loss": 1.')  # killed mid-line
    _run(tiny_data, run, *STEPS, check=0)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]  # every line parses
    assert [r["step"] for r in rows if "loss" in r] == list(range(1, 41))


def test_disk_full_names_the_directory_and_keeps_the_previous_checkpoint(tiny_data, tmp_path, monkeypatch):
    from accelerate import Accelerator

    save_state, calls = Accelerator.save_state, {"n": 0}

    def fills_up(self, output_dir=None, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # torch's serializer reports a full disk as a RuntimeError without errno
            raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing "
                               "file data/3: file write failed")
        return save_state(self, output_dir, **kwargs)

    monkeypatch.setattr(Accelerator, "save_state", fills_up)
    monkeypatch.setattr("linformer.files.storage.FULL_BELOW", float("inf"))  # its words, with no space left
    with pytest.raises(DiskFullError, match=r"no space left on device while writing .*checkpoints"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=12", "trainer.save_every=4"), tmp_path)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-00000004"]  # no temporary left
    from linformer.train.checkpoint import damaged_files

    assert damaged_files(tmp_path / "checkpoints" / "step-00000004") == []


def test_save_every_minutes_checkpoints_between_the_steps_a_kill_would_otherwise_lose(tiny_data, tmp_path, monkeypatch):
    """A run killed without a signal (the kernel's out-of-memory killer sends SIGKILL) keeps what the last
    checkpoint holds: with save_every_minutes the trainer writes one whenever that much time has passed, with no
    step-based checkpoint asked for."""
    from linformer.train import trainer

    clock = iter(range(0, 10_000, 25))  # each reading of the clock 25 s after the previous one
    monkeypatch.setattr(trainer, "_clock", lambda: float(next(clock)))
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "trainer.save_every=null", "trainer.keep_last=10",
                              "trainer.save_every_minutes=1", "trainer.eval_every=1000"), tmp_path / "run")
    saved = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert len(saved) > 1 and saved[-1] == "step-00000006"  # some before the end, none asked for by step
    off = tmp_path / "off"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "trainer.save_every=null",
                              "trainer.save_every_minutes=null", "trainer.eval_every=1000"), off)
    assert [p.name for p in (off / "checkpoints").iterdir()] == ["step-00000006"]


@pytest.mark.parametrize("override, key", [
    ("trainer.batch_size=-2", "trainer.batch_size"),
    ("trainer.batch_size=0", "trainer.batch_size"),
    ("trainer.eval_every=0", "trainer.eval_every"),
    ("trainer.lr=0", "trainer.lr"),
    ("trainer.max_steps=-5", "trainer.max_steps"),
    ("trainer.grad_accum=0", "trainer.grad_accum"),
    ("trainer.save_every=0", "trainer.save_every"),
    ("trainer.save_every_minutes=0", "trainer.save_every_minutes"),
    ("trainer.mlm_probability=1.5", "trainer.mlm_probability"),
])
def test_invalid_numbers_name_their_key(tiny_data, tmp_path, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        pretrain(compose_pretrain(tiny_data, override), tmp_path)
    assert not (tmp_path / "config.yaml").exists()


def test_invalid_number_from_the_cli_is_one_error_line(tiny_data, tmp_path, monkeypatch, capsys):
    """scripts/pretrain.py run in this process as its command line runs it."""
    from tests.conftest import run_script

    code = run_script("pretrain", _script_args(tiny_data, tmp_path / "run", "trainer.batch_size=-1")[2:], monkeypatch)
    _one_line_error(subprocess.CompletedProcess([], code, "", capsys.readouterr().err), "trainer.batch_size=-1")


def test_empty_validation_split_hint_names_the_corpus_setting(tiny_data, tmp_path):
    with pytest.raises(ConfigError, match="validation split.*data.val_fraction"):
        pretrain(compose_pretrain(tiny_data, "trainer.batch_size=200"), tmp_path)


def test_full_attention_run_name_has_no_k(tiny_data):
    cfg = compose_pretrain(tiny_data, "model.attention=full", "model.projected_dim=64")
    assert cfg.run_name == "tiny-full-n32-s0"
    assert compose_pretrain(tiny_data).run_name == "tiny-linformer-n32-k8-headwise-s0"


def test_a_plus_typo_key_is_refused_not_saved(tiny_data, tmp_path):
    with pytest.raises(ConfigError, match="projected_dimm"):
        pretrain(compose_pretrain(tiny_data, "+model.projected_dimm=8"), tmp_path)
    assert not (tmp_path / "model").exists()


def test_resuming_on_another_corpus_is_refused_though_its_path_may_move(tiny_data, tmp_path, capsys):
    """corpus_dir is a path (operational); what the corpus holds is the run's identity (its cache key)."""
    import shutil

    from linformer.data import prepare_corpus
    from linformer.errors import RunDirError

    from .conftest import _synthetic_corpus

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), run)
    moved = tmp_path / "moved"
    shutil.copytree(tiny_data["corpus_dir"], moved)
    capsys.readouterr()
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", f"corpus_dir={moved}"), run)  # the same corpus
    assert "is already complete" in capsys.readouterr().out
    other = tmp_path / "other"
    prepare_corpus([str(_synthetic_corpus(tmp_path / "other.txt", docs=60, seed=1))], tiny_data["tokenizer_dir"],
                   str(other), n=32, val_fraction=0.1, num_proc=1)
    with pytest.raises(RunDirError, match="corpus_cache_key"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", f"corpus_dir={other}"), run)


def test_a_run_recorded_in_an_older_format_is_refused_naming_the_missing_key(tmp_path):
    """A record without a key this version records (the corpus's cache key) is another format: refused in one line
    that says so and how to continue, not silently taken as the same run."""
    from linformer.errors import RunDirError
    from linformer.rundir import RunRecord, identity_diff

    old = {"model": {"n": 8}, "corpus_dir": "a"}
    now = {**old, "corpus_cache_key": "k1"}
    assert identity_diff(old, now) == {"corpus_cache_key": (None, "k1")}
    record = RunRecord(tmp_path / "run", "pretrain")
    (tmp_path / "run").mkdir()
    record.claim(old)
    record.start(old, 0)
    record.lock.release()
    with pytest.raises(RunDirError, match=r"another version of the run format: it lacks corpus_cache_key, which "
                                          r"this version records.*allow_config_change=\[corpus_cache_key\]"):
        RunRecord(tmp_path / "run", "pretrain").claim(now)
    assert RunRecord(tmp_path / "run", "pretrain").claim(now, allow_change=["corpus_cache_key"]) == "continue"


def test_a_changed_k_cannot_be_allowed_the_run_must_start_afresh(tiny_data, tmp_path):
    """A shape key: the checkpoint's E/F have the old k, so allow_config_change cannot help and is not suggested."""
    from linformer.errors import RunDirError

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=2"), run)
    for extra in ([], ["trainer.allow_config_change=[model.projected_dim]"], ["trainer.allow_config_change=true"]):
        with pytest.raises(RunDirError, match=r"another architecture \(model.projected_dim: 8 -> 16\).*start afresh "
                                              r"under another run_name") as err:
            pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "model.projected_dim=16", *extra), run)
        assert "allow_config_change" not in str(err.value)


def test_another_run_s_checkpoint_continues_a_run_only_with_its_settings_and_is_recorded(tiny_data, tmp_path):
    """trainer.resume=<another run's checkpoint>: its steps so far were trained with that run's settings, so a
    difference is refused as a rerun in its own directory would be (or allowed, and recorded); a step above
    max_steps is refused (it used to report the other run's steps as done); run.json names the checkpoint."""
    source = tmp_path / "source"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=4"), source)
    ckpt = source / "checkpoints" / "step-00000004"
    resume = f"trainer.resume={ckpt}"
    with pytest.raises(ConfigError, match=r"that checkpoint's run .* was trained with other settings \(seed: 0 -> 5; "
                                          r"trainer.max_steps: 4 -> 6\)"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "seed=5", resume), tmp_path / "other")
    with pytest.raises(ConfigError, match=r"^trainer.max_steps=3 is below the step of the checkpoint"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=3", resume, "trainer.allow_config_change=true"),
                 tmp_path / "short")
    longer = tmp_path / "longer"
    summary = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", resume,
                                        "trainer.allow_config_change=[trainer.max_steps]"), longer)
    info = json.loads((longer / "run.json").read_text())
    assert summary["resumed_from_step"] == 4 and summary["steps"] == 6 and info["status"] == "complete"
    assert info["resumed_from"] == str(ckpt.resolve())
    assert info["changes"] == [{"step": 4, "key": "trainer.max_steps", "from": 4, "to": 6}]


def test_an_allowed_lr_change_on_resume_trains_with_the_new_lr(tiny_data, tmp_path):
    """trainer.allow_config_change=[trainer.lr] was recorded but the checkpoint's saved schedule and optimizer kept
    the old peak: the run trained on at the old lr while its record said the new one. Now the steps after the resume
    follow the new peak on the schedule of the new max_steps, as a run started with those settings would from there."""
    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=4", "trainer.warmup_steps=1",
                              "trainer.log_every=1"), run)
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=8", "trainer.save_every=4", "trainer.warmup_steps=1",
                              "trainer.log_every=1", "trainer.lr=1e-4",
                              "trainer.allow_config_change=[trainer.max_steps,trainer.lr]"), run)
    fresh = tmp_path / "fresh"  # the schedule a run with the new settings follows from the start
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=8", "trainer.warmup_steps=1", "trainer.log_every=1",
                              "trainer.lr=1e-4"), fresh)

    def lrs(d):
        rows = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]
        return {r["step"]: r["lr"] for r in rows if "lr" in r}

    resumed, planned = lrs(run), lrs(fresh)
    assert [resumed[s] for s in range(5, 9)] == pytest.approx([planned[s] for s in range(5, 9)], rel=1e-12)
    assert max(resumed[s] for s in range(5, 9)) <= 1e-4 < resumed[3]  # the first attempt's, at the old peak


@pytest.mark.parametrize("when", ["start-up", "final evaluation"])
def test_sigterm_outside_the_steps_ends_the_run_as_stopped_not_killed(tiny_data, tmp_path, monkeypatch, when):
    """The step-boundary stop covers the loop only: a SIGTERM at start-up (the first evaluation) or in the final
    scoring and saving (there, a second one) killed the process where it stood, run.json saying `running` and the
    lock left behind."""
    import signal as signals

    from linformer.errors import Preempted
    from linformer.train.pretrain import PretrainTask
    from linformer.train.trainer import Trainer

    target = "_evaluate" if when == "start-up" else "finish"
    owner = Trainer if target == "_evaluate" else PretrainTask
    real = getattr(owner, target)

    def signalled(self, *args, **kwargs):
        for _ in range(1 if target == "_evaluate" else 2):  # after the last update the first one lets it finish
            os.kill(os.getpid(), signals.SIGTERM)  # the real signal, through the handler the run installs
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, target, signalled)
    run = tmp_path / "run"
    with pytest.raises(Preempted, match=r"^stopped by SIGTERM outside the training steps") as stop:
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.eval_at_start=true"), run)
    assert stop.value.exit_code == 128 + signals.SIGTERM
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "stopped" and "outside the training steps" in info["reason"]
    assert not (run / ".lock").exists() and signals.getsignal(signals.SIGTERM) is signals.SIG_DFL
    monkeypatch.undo()
    summary = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.eval_at_start=true"), run)
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    if when == "final evaluation":  # resumed at its last step: no step timed now, so no speed (it said 0.0)
        assert summary["resumed_from_step"] == 4 and summary["tokens_per_s"] is None


def test_a_checkpoint_continues_on_the_global_batch_it_was_trained_at(tiny_data, tmp_path):
    """A torchrun run resumed with python (or the reverse) kept its per-device batch and silently halved (doubled)
    the global one: blocks re-read or skipped, the schedule's steps changed. Now refused, naming the launcher and
    the keys; allowed (processes), it is recorded."""
    from linformer.train.checkpoint import STATE_FILE, _write_checksums

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=2"), run)
    for ckpt in (run / "checkpoints").iterdir():  # as torchrun's 2 processes would have saved them
        state = json.loads((ckpt / STATE_FILE).read_text())
        assert (state["global_batch"], state["processes"]) == (8, 1)  # trainer.batch_size 8, one process
        (ckpt / STATE_FILE).write_text(json.dumps({**state, "global_batch": 16, "processes": 2}))
        shutil.copy(ckpt / "random_states_0.pkl", ckpt / "random_states_1.pkl")  # each process saves its own
        _write_checksums(ckpt)
    longer = ("trainer.max_steps=6", "trainer.save_every=2")
    with pytest.raises(ConfigError, match=r"trained at 16 sequences per step over every process; this start gives 8 "
                                          r"\(trainer.batch_size=8 x trainer.grad_accum=1 x 1 process\).*32 rows "
                                          r"would be read twice.*torchrun --nproc_per_node 2") as refused:
        pretrain(compose_pretrain(tiny_data, *longer, "trainer.allow_config_change=[trainer.max_steps]"), run)
    # the overrides it gives keep the global batch, and the next start takes them as given
    advice = re.search(r"keep its global batch here by adding (.+?)\.$", str(refused.value)).group(1)
    kept = tmp_path / "kept"
    shutil.copytree(run, kept)
    pretrain(compose_pretrain(tiny_data, *longer, *shlex.split(advice)), kept)
    info = json.loads((kept / "run.json").read_text())
    assert info["status"] == "complete" and (info["start_step"], info["processes"]) == (4, 1)
    assert {"step": 4, "key": "trainer.batch_size", "from": 8, "to": 16} in info["changes"]
    summary = json.loads((kept / "summary.json").read_text())  # what the steps computed over, beside the config
    assert {k: summary[k] for k in ("batch_size", "grad_accum", "processes", "global_batch", "mixed_precision")} == {
        "batch_size": 16, "grad_accum": 1, "processes": 1, "global_batch": 16, "mixed_precision": "no"}
    # allowing the change of processes does not move where the data order reads: step 4 at 8 per step would read
    # rows 32-63 of the epoch again, which the checkpoint's 4 steps of 16 read
    with pytest.raises(ConfigError, match=r"its 4 steps of 16 read 64 of epoch 0's .* rows; 8 per step reads step 4's "
                                          r"from row 32 of epoch 0's: 32 rows would be read twice"):
        pretrain(compose_pretrain(tiny_data, *longer, "trainer.allow_config_change=[trainer.max_steps,processes]"),
                 run)


@pytest.mark.parametrize("when", ["last step", "final evaluation"])
def test_a_sigterm_after_the_last_update_lets_the_run_finish_complete(tiny_data, tmp_path, monkeypatch, capsys,
                                                                       caplog, when):
    """A SIGTERM that arrives once the training is done (in its last step, or in the final scoring and saving) threw
    the finished training away: the run was stopped, its results never written, though a job runner waits minutes
    for a stopped job. Now it finishes, complete, and says so on one line."""
    import signal as signals

    from linformer.train.pretrain import PretrainTask
    from linformer.train.trainer import Trainer

    target, owner = ("_train_step", Trainer) if when == "last step" else ("finish", PretrainTask)
    real = getattr(owner, target)

    def signalled(self, *args, **kwargs):
        if target == "finish" or args[0] == 3:  # step index 3 of max_steps=4: the last update
            os.kill(os.getpid(), signals.SIGTERM)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, target, signalled)
    run = tmp_path / "run"
    with caplog.at_level("WARNING"):
        summary = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=1000"), run)
    assert summary["steps"] == 4 and (run / "summary.json").is_file()
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    # said once: in the last step through the log (which earlier tests may also route to stderr), after it on stderr
    said = caplog.text if when == "last step" else capsys.readouterr().err
    assert said.count("SIGTERM after the last update: finishing the final evaluation and saving") == 1
    assert signals.getsignal(signals.SIGTERM) is signals.SIG_DFL


@pytest.mark.parametrize("signals_sent", [1, 2])
def test_a_sigterm_once_the_run_is_complete_on_disk_does_not_stop_it(tiny_data, tmp_path, monkeypatch, capsys,
                                                                      signals_sent):
    """SIGTERMs landing after run.json says complete (the summary being printed) ended the run with `stopped:` and
    exit 143 from the second on, as if it were cut short, though a rerun finds it complete. Once the run is complete
    on disk a signal changes neither, as for a rerun that finds it complete: it returns its results."""
    import signal as signals

    import linformer.train.trainer as trainer

    real = trainer.print_summary
    run = tmp_path / "run"

    def signalled(*args, **kwargs):
        assert json.loads((run / "run.json").read_text())["status"] == "complete"
        for _ in range(signals_sent):
            os.kill(os.getpid(), signals.SIGTERM)  # the real signal, through the handlers the run installs
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "print_summary", signalled)
    summary = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.save_every=1000"), run)
    assert summary["steps"] == 4 and json.loads((run / "run.json").read_text())["status"] == "complete"
    assert "SIGTERM" not in capsys.readouterr().err
    assert signals.getsignal(signals.SIGTERM) is signals.SIG_DFL


def test_a_resumed_run_logs_the_lr_column_of_an_uninterrupted_one(tiny_data, tmp_path, monkeypatch, caplog):
    """Every row's lr is the rate its update used, on a fresh start and after a resume alike: a run stopped mid-warmup
    and resumed logs the uninterrupted run's lr column. A run begun by older code logged the rate after each step (the
    next update's), and one resumed by this code logged two conventions around the resume step: its earlier rows are
    rewritten on resume, with a warning."""
    import logging
    import shutil
    import signal as signals

    from linformer.errors import Preempted
    from linformer.train.trainer import Trainer

    steps = ["trainer.max_steps=8", "trainer.warmup_steps=4", "trainer.save_every=100", "trainer.log_every=1",
             "trainer.eval_every=100"]
    whole, stopped, older = tmp_path / "whole", tmp_path / "stopped", tmp_path / "older"
    pretrain(compose_pretrain(tiny_data, *steps), whole)
    real = Trainer._train_step

    def stops_at_step_3(self, step):
        if step == 2:  # the real signal, through the handler: the run stops after this step (step 3), checkpointed
            os.kill(os.getpid(), signals.SIGTERM)
        return real(self, step)

    monkeypatch.setattr(Trainer, "_train_step", stops_at_step_3)
    with pytest.raises(Preempted):
        pretrain(compose_pretrain(tiny_data, *steps), stopped)
    monkeypatch.undo()

    def rows(d):
        return [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]

    def lrs(d):
        return [(r["step"], r["lr"]) for r in rows(d) if "lr" in r]

    shutil.copytree(stopped, older)  # its rows as older code logged them: each the rate after its step
    after = dict(lrs(whole))
    (older / "metrics.jsonl").write_text("".join(json.dumps({**r, "lr": after[r["step"] + 1]} if "lr" in r else r) + "\n"
                                                 for r in rows(older)))
    assert lrs(older) != lrs(stopped)
    for run in (stopped, older):
        with caplog.at_level(logging.WARNING, logger="linformer.train.trainer"):
            summary = pretrain(compose_pretrain(tiny_data, *steps), run)
        assert summary["resumed_from_step"] == 3 and lrs(run) == lrs(whole), run
        said = [r.getMessage() for r in caplog.records if "rate after each step" in r.getMessage()]
        assert len(said) == (run == older) and (not said or "rows up to step 3" in said[0])
        caplog.clear()


def test_sighup_is_handled_wherever_sigterm_is_unless_nohup_ignores_it(monkeypatch):
    """Every handler installed for SIGTERM serves SIGHUP too, the terminal's streams left first (a write to a closed
    terminal fails); under nohup (SIGHUP ignored) it stays ignored."""
    from linformer import signals

    got, left = [], []
    monkeypatch.setattr(signals, "_leave_terminal", lambda: left.append(True))
    outer = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as from a terminal, whether or not pytest runs under nohup
    try:
        with signals.handling((signal.SIGTERM,), lambda signum, frame: got.append(signum)):
            os.kill(os.getpid(), signal.SIGHUP)
        assert got == [signal.SIGHUP] and left == [True] and signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with signals.handling((signal.SIGTERM,), lambda signum, frame: got.append(signum)):
            os.kill(os.getpid(), signal.SIGHUP)
        assert got == [signal.SIGHUP] and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, outer)


def test_a_finished_sweep_job_named_by_its_length_does_not_offer_to_train_further(pretrained_run, tmp_path, capsys):
    """A sweep over trainer.max_steps names each job's folder by it: "raise trainer.max_steps with
    trainer.allow_config_change" would start a new run from step 0 in another folder, not train this one further."""
    from linformer.files.mappings import read_yaml
    from linformer.rundir import RunRecord
    from linformer.train.core import already_complete

    for name, said in (("tiny-s0-trainer.max_steps=6", "Its folder is named by trainer.max_steps"),
                       ("tiny-s0", "raise trainer.max_steps with trainer.allow_config_change")):
        run = shutil.copytree(pretrained_run, tmp_path / name)
        already_complete(RunRecord(run, "pretrain"), read_yaml(run / "config.yaml"))
        assert said in capsys.readouterr().out


def test_a_start_refused_in_python_leaves_no_folder_it_made(tiny_data, tmp_path):
    """The script's refused start leaves nothing (Hydra's folders removed); through the Python API the lock's
    folders stayed, empty, down to the run directory, for compare_runs over the stage folder to meet. A folder that
    was there before the start stays."""
    run = tmp_path / "stage" / "new" / "run"
    from linformer.errors import CorpusError

    with pytest.raises(CorpusError, match="not a complete prepared corpus"):
        pretrain(compose_pretrain(tiny_data, f"corpus_dir={tmp_path / 'nope'}"), run)
    assert list(tmp_path.iterdir()) == []


def test_a_finished_run_called_again_returns_what_its_first_call_did_worded_for_the_caller_now(tiny_data, tmp_path,
                                                                                               monkeypatch):
    """The same call again on a finished run returned its record: paths relative to the repository (a notebook
    elsewhere loading summary["model_dir"] got it read as a hub name, OSError) and the next: line of whoever ran it
    first (a command line for a Python caller). It returns what the first call did: absolute paths, and next:
    worded for this caller; a finetuning's results name its start model absolute too."""
    from linformer.files import locations
    from linformer.files.locations import COMMAND_MARK
    from linformer.train.finetune import finetune
    from tests.conftest import as_command

    from .conftest import compose_finetune, write_sst2_fixture

    repo = tmp_path / "repo"
    monkeypatch.setattr(locations, "repo_root", lambda: repo)  # the runs lie in the repository: records name them relative
    pre, fine = repo / "outputs" / "pre", repo / "outputs" / "fine"
    cfg = compose_pretrain(tiny_data, "trainer.max_steps=2", "trainer.warmup_steps=1")
    finetune_cfg = compose_finetune("task=sst2", f"task.data_dir={write_sst2_fixture(tmp_path / 'sst2')}",
                                    f"model_path={pre}", f"task_cache_dir={tmp_path / 'cache'}",
                                    "trainer.max_steps=2", "trainer.warmup_steps=1")
    (repo / "scripts").mkdir(parents=True)
    for name in ("pretrain", "finetune"):  # the scripts its next: lines name, beside the one started
        (repo / "scripts" / f"{name}.py").write_text("")
    as_command(monkeypatch, [repo / "scripts" / "pretrain.py"])  # the first run: the command
    first = pretrain(cfg, pre)
    assert json.loads((pre / "summary.json").read_text())["model_dir"] == "outputs/pre/model"  # the record's form
    first_results = finetune(finetune_cfg, fine)
    assert json.loads((fine / "results.json").read_text())["model_path"] == "outputs/pre/model"

    monkeypatch.delattr(sys.modules["__main__"], COMMAND_MARK)  # now a notebook, elsewhere
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/site-packages/ipykernel_launcher.py", "-f", "kernel.json"])
    monkeypatch.chdir(tmp_path)
    again = pretrain(cfg, pre)
    assert again["run_dir"] == first["run_dir"] == str(pre)
    assert again["model_dir"] == first["model_dir"] == str(pre / "model")
    assert first["next"].startswith("python ") and again["next"].startswith("finetune(FinetuneSpec.read(compose(")
    assert {k: v for k, v in again.items() if k != "next"} == json.loads(json.dumps(
        {k: v for k, v in first.items() if k != "next"}))
    results = finetune(finetune_cfg, fine)
    assert results["model_path"] == first_results["model_path"] == str(pre / "model")
    assert results == json.loads(json.dumps(first_results))
