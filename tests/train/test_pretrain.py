import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from linformer.errors import CheckpointError, ConfigError
from linformer.modeling.attention import PoolProjection, Projection, register_projection
from linformer.train.pretrain import pretrain

from .conftest import PRETRAIN_OVERRIDES, compose_pretrain, nan_losses_after, signal_at_step

REPO = Path(__file__).resolve().parents[2]


def _losses(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if "loss" in r]


def test_loss_falls_and_the_run_dir_is_complete(tiny_data, tmp_path):
    cfg = compose_pretrain(tiny_data, "trainer.max_steps=40", "trainer.eval_every=20", "model.hidden_dropout_prob=0")
    summary = pretrain(cfg, tmp_path)
    losses = _losses(tmp_path)
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5, losses
    assert (tmp_path / "config.yaml").is_file()
    assert summary["final_val_loss"] is not None and summary["tokens_per_s"] > 0
    assert "start_weights_sha256" in summary and summary["start_weights_sha256"] is None  # fresh: its seed
    assert 1 < summary["unigram_val_ppl"] < len(AutoTokenizer.from_pretrained(tiny_data["tokenizer_dir"]))
    assert 1 < summary["context_free_val_ppl"] < summary["unigram_val_ppl"]
    assert (f"(token frequencies alone: {summary['unigram_val_ppl']:,.1f}; no context, its own input token only: "
            f"{summary['context_free_val_ppl']:,.1f})") in summary["report"][0]
    # computed once, when the corpus was prepared: its manifest holds the same figures as the prepared splits give
    from linformer.data import load_prepared
    from linformer.data.corpus import read_manifest
    from linformer.data.unigram import context_free_perplexity, unigram_perplexity

    tok = AutoTokenizer.from_pretrained(tiny_data["tokenizer_dir"])
    splits = load_prepared(tiny_data["corpus_dir"])
    manifest = read_manifest(tiny_data["corpus_dir"])
    for name, of in (("unigram_val_ppl", unigram_perplexity), ("context_free_val_ppl", context_free_perplexity)):
        assert summary[name] == manifest[name] == pytest.approx(
            of(splits["train"], splits["validation"], len(tok), tok.all_special_ids), abs=1e-4)
    model = AutoModelForMaskedLM.from_pretrained(tmp_path / "model")
    tok = AutoTokenizer.from_pretrained(tmp_path / "model")
    assert model.config.max_seq_len == 32 and model.config.tokenizer_vocab_size == len(tok)
    assert model.config.vocab_size % 64 == 0 and 0 < model.config.vocab_size - len(tok) < 64  # padded rows
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 0 and "val_ppl" in rows[0] and summary["initial_val_loss"] > summary["final_val_loss"]
    assert {"loss", "lr", "tokens_per_s", "tokens_per_s_avg", "mfu", "grad_norm"} <= rows[1].keys()
    assert any("val_ppl" in r for r in rows)
    ckpts = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert ckpts == ["step-00000032", "step-00000036", "step-00000040"]  # keep_last=3


def _script_args(tiny_data, run_dir, *overrides):
    """scripts/pretrain.py with the tiny test config; hydra.run.dir pinned to run_dir."""
    return [sys.executable, str(REPO / "scripts" / "pretrain.py"), *PRETRAIN_OVERRIDES,
            f"tokenizer_dir={tiny_data['tokenizer_dir']}", f"corpus_dir={tiny_data['corpus_dir']}",
            f"hydra.run.dir={run_dir}", *overrides]


def test_resume_after_sigkill_is_bitwise(tiny_data, tmp_path):
    """A run killed with SIGKILL and resumed with trainer.resume=auto gives the uninterrupted run's losses exactly.
    The uninterrupted run is trained in-process, on one thread as the processes are."""
    steps = ["trainer.max_steps=60", "trainer.save_every=5", "trainer.eval_every=30"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    full = tmp_path / "full"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pretrain(compose_pretrain(tiny_data, *steps), full)
    finally:
        torch.set_num_threads(threads)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_script_args(tiny_data, killed, *steps), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        ckpts = list((killed / "checkpoints").glob("step-*")) if (killed / "checkpoints").exists() else []
        if ckpts and len(_losses(killed)) >= 12:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    interrupted_at = len(_losses(killed))
    assert 0 < interrupted_at < 60, "the run finished before it could be killed"

    newest = max(int(p.name.split("-")[1]) for p in (killed / "checkpoints").glob("step-*"))
    # resumed in this process, on one thread as the killed process ran (the kill is what needs a process of its own)
    torch.set_num_threads(1)
    try:
        pretrain(compose_pretrain(tiny_data, *steps, "trainer.resume=auto"), killed)
    finally:
        torch.set_num_threads(threads)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["resumed_from_step"] == newest > 0  # it continued from the checkpoint, not from scratch
    steps_logged = [json.loads(x)["step"] for x in (killed / "metrics.jsonl").read_text().splitlines()]
    assert steps_logged == sorted(steps_logged) and len(set(steps_logged)) == len(steps_logged)  # no duplicates
    assert _losses(killed) == _losses(full)


def test_a_process_default_dtype_does_not_reach_the_run_and_is_restored_after(tiny_data, tmp_path):
    """A notebook's torch.set_default_dtype(torch.float64) built and trained a float64 model, saved float64
    weights and other numbers than the same run in a fresh process, unrecorded. The run is built and trained in
    float32 whatever the process default, which it leaves as it found it."""
    from safetensors.torch import load_file

    steps = ["trainer.max_steps=3", "trainer.warmup_steps=1"]
    pretrain(compose_pretrain(tiny_data, *steps), tmp_path / "f32")
    torch.set_default_dtype(torch.float64)
    try:
        pretrain(compose_pretrain(tiny_data, *steps), tmp_path / "f64")
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
    assert {w.dtype for w in load_file(tmp_path / "f64" / "model" / "model.safetensors").values()} == {torch.float32}
    assert _losses(tmp_path / "f64") == _losses(tmp_path / "f32")


def test_a_run_leaves_the_process_s_global_generators_as_it_found_them(tiny_data, tmp_path):
    """Every run left Python's, numpy's and torch's global generators seeded with its seed, so a notebook's later
    draws repeated after every run. The run's own numbers come from its seed; the caller's draws go on after it."""
    import random

    import numpy as np

    random.seed(123)
    np.random.seed(123)
    torch.manual_seed(123)
    before = random.getstate(), np.random.get_state()[1].copy(), torch.random.get_rng_state()
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=3", "trainer.warmup_steps=1"), tmp_path)
    assert random.getstate() == before[0] and (np.random.get_state()[1] == before[1]).all()
    assert torch.equal(torch.random.get_rng_state(), before[2]) and torch.initial_seed() == 123


def test_fresh_start_over_old_checkpoints_is_refused(tiny_data, tmp_path):
    """An unfinished run (checkpoints, no summary) restarted with trainer.resume=null is refused, not overwritten."""
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4"), tmp_path)
    (tmp_path / "run.json").write_text((tmp_path / "run.json").read_text().replace('"complete"', '"running"'))
    with pytest.raises(CheckpointError, match="trainer.resume=auto"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.resume=null"), tmp_path)


def test_resume_from_a_path_without_checkpoint_names_it(tiny_data, tmp_path):
    cfg = compose_pretrain(tiny_data, f"trainer.resume={tmp_path / 'nowhere'}")
    with pytest.raises(CheckpointError, match="nowhere"):
        pretrain(cfg, tmp_path / "run")


def test_global_batch_that_does_not_divide_names_the_key(tiny_data, tmp_path):
    cfg = compose_pretrain(tiny_data, "trainer.global_batch_size=9", "trainer.grad_accum=2")
    with pytest.raises(ConfigError, match="trainer.global_batch_size=9"):
        pretrain(cfg, tmp_path)


@pytest.mark.parametrize("override, key", [("+model.vocab_size=10", "model.vocab_size=10"),
                                           ("+model.pad_token_id=3", "model.pad_token_id=3")])
def test_a_model_setting_the_tokenizer_decides_is_refused_not_replaced(tiny_data, tmp_path, override, key):
    with pytest.raises(ConfigError, match=rf"^{key}: a fresh model takes the tokenizer's"):
        pretrain(compose_pretrain(tiny_data, override), tmp_path / "run")
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_an_init_from_that_holds_no_model_is_named_by_its_key(tiny_data, tmp_path):
    """pretrain has no model_path: the error named it for the init_from the user typed."""
    with pytest.raises(CheckpointError, match=rf"^init_from='{tmp_path}/nowhere' \(.*\) holds no model"):
        pretrain(compose_pretrain(tiny_data, f"init_from={tmp_path / 'nowhere'}"), tmp_path / "run")


@pytest.mark.parametrize("n", [16, 64])
def test_blocks_of_another_length_than_n_are_refused_for_a_fresh_model(tiny_data, tmp_path, n):
    """Blocks shorter than n would train only E and F's first rows: another model than the one named."""
    with pytest.raises(ConfigError, match=rf"the corpus blocks have 32 tokens but model.max_seq_len is {n}"):
        pretrain(compose_pretrain(tiny_data, f"model.max_seq_len={n}", "model.projected_dim=4"), tmp_path / "run")
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_fp16_on_cpu_is_refused(tiny_data, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("fp16 is valid on CUDA")
    with pytest.raises(ConfigError, match="bf16"):
        pretrain(compose_pretrain(tiny_data, "trainer.mixed_precision=fp16"), tmp_path)


def test_nonfinite_losses_skip_updates_then_stop_with_a_checkpoint(tiny_data, tmp_path, monkeypatch):
    """From step 3 every loss is NaN: updates are skipped, and after 2 in a row the run stops, checkpointed."""
    from linformer.errors import TrainingDiverged

    nan_losses_after(monkeypatch, 2)
    cfg = compose_pretrain(tiny_data, "trainer.max_nonfinite_steps=2", "trainer.eval_at_start=false",
                           "trainer.eval_every=100", "trainer.save_every=2")
    with pytest.raises(TrainingDiverged, match="2 consecutive non-finite losses at step 4") as diverged:
        pretrain(cfg, tmp_path)
    # where a lower lr goes on from: the checkpoint before the streak (step 2), not the one just saved (step 4)
    assert (f"continue from the last checkpoint before them ({tmp_path / 'checkpoints' / 'step-00000002'}) with "
            "trainer.resume=<that path> and trainer.allow_config_change=[trainer.lr]") in str(diverged.value)
    assert (tmp_path / "checkpoints" / "step-00000004" / "trainer_state.json").is_file()
    state = json.loads((tmp_path / "checkpoints" / "step-00000004" / "trainer_state.json").read_text())
    assert state["nonfinite"] == 2
    # the record says the run failed and why, never "running"
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["status"] == "failed" and info["error"].startswith("TrainingDiverged: 2 consecutive non-finite")


def test_a_run_that_ends_in_a_non_finite_streak_fails_and_keeps_no_model(tiny_data, tmp_path, capsys):
    """trainer.lr=1e30: from step 3 every update is skipped (6 in a row, under trainer.max_nonfinite_steps=10) and
    the final evaluation's val_loss is NaN. The run ended complete with model/, "perplexity X -> inf", advice to
    train for more steps and a next: line; it fails now, saying how many updates were skipped and from where."""
    from linformer.errors import TrainingDiverged

    cfg = compose_pretrain(tiny_data, "trainer.max_steps=8", "trainer.lr=1e30", "trainer.eval_every=4")
    with pytest.raises(TrainingDiverged, match=r"^the final evaluation \(step 8\) scored val_loss nan: the run keeps "
                                               r"no model and reports no score\. 6 of its 8 updates were skipped for a "
                                               r"non-finite loss or gradient; it ended 6 non-finite steps in a row "
                                               r"\(from step 3\)"):
        pretrain(cfg, tmp_path)
    assert not (tmp_path / "model").exists() and not (tmp_path / "summary.json").exists()
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "failed"
    said = capsys.readouterr()
    assert "next:" not in said.out + said.err


def test_skipped_updates_are_counted_in_the_summary(tiny_data, tmp_path, monkeypatch, capsys):
    """Steps 3 and 4 are non-finite and skipped, then training goes on: the run completes, and its summary (file
    and printed lines) says 2 of its updates were skipped, the first at step 3. Nothing recorded them."""
    from linformer.modeling import LinformerForMaskedLM

    forward, seen = LinformerForMaskedLM.forward, {"n": 0}

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        if self.training:
            seen["n"] += 1
            if seen["n"] in (3, 4):
                out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(LinformerForMaskedLM, "forward", poisoned)
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6"), tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["skipped_steps"], summary["first_skipped_step"]) == (2, 3)
    assert ("2 of the 6 updates were skipped for a non-finite loss or gradient (the first at step 3)"
            in capsys.readouterr().out)


def test_a_non_finite_streak_keeps_the_checkpoint_before_it(tiny_data, tmp_path, monkeypatch):
    """Losses NaN from step 11, a checkpoint every 2 steps, 3 kept: the streak's own checkpoints (12-20) rotated out
    step 10, the last one before it, and the error then said none precedes the streak. Step 10 is kept while the
    streak runs, and the error names it."""
    from linformer.errors import TrainingDiverged

    nan_losses_after(monkeypatch, 10)
    cfg = compose_pretrain(tiny_data, "trainer.max_steps=40", "trainer.save_every=2", "trainer.keep_last=3",
                           "trainer.eval_at_start=false", "trainer.eval_every=100")
    with pytest.raises(TrainingDiverged, match="10 consecutive non-finite losses at step 20") as diverged:
        pretrain(cfg, tmp_path)
    before = tmp_path / "checkpoints" / "step-00000010"
    assert f"continue from the last checkpoint before them ({before})" in str(diverged.value)
    assert [p.name for p in sorted((tmp_path / "checkpoints").iterdir())] == [
        "step-00000010", "step-00000016", "step-00000018", "step-00000020"]


def test_a_streak_read_late_keeps_the_checkpoint_before_its_first_step(tiny_data, tmp_path, monkeypatch):
    """Losses NaN from step 7, a checkpoint (and so a host read) every 4 steps, only the newest kept, a limit of 3:
    the read at step 12 finds the limit reached at step 9. Its save kept the newest checkpoint before step 10 (the
    current step less the streak counted up to step 9), step 8, a step of the streak, and rotated out step 4, the
    one before it: the error then said no checkpoint precedes the streak. Step 4 is kept, and named."""
    from linformer.errors import TrainingDiverged

    nan_losses_after(monkeypatch, 6)
    cfg = compose_pretrain(tiny_data, "trainer.max_steps=16", "trainer.max_nonfinite_steps=3", "trainer.save_every=4",
                           "trainer.keep_last=1", "trainer.sync_every=100", "trainer.eval_at_start=false",
                           "trainer.eval_every=100")
    with pytest.raises(TrainingDiverged, match=r"3 consecutive non-finite losses at step 9 \(read at step 12\)") as \
            diverged:
        pretrain(cfg, tmp_path)
    before = tmp_path / "checkpoints" / "step-00000004"
    assert f"continue from the last checkpoint before them ({before})" in str(diverged.value)
    assert [p.name for p in sorted((tmp_path / "checkpoints").iterdir())] == ["step-00000004", "step-00000012"]


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_host_reads_every_sync_every_steps_log_the_same_run(tiny_data, tmp_path, monkeypatch):
    """trainer.sync_every=5 reads the device at steps 5 and 10 and before every evaluation (6, 12) and checkpoint (4, 8,
    12): 6 reads for 12 steps, not 12, and every step's row (loss, lr, gradient norm, epoch, tokens), every
    evaluation and the final weights are those of reading every step."""
    from linformer.train.trainer import Trainer

    reads = []
    read = Trainer._read_steps

    def counted(self, bar):
        reads.append(self.state["step"])
        return read(self, bar)

    monkeypatch.setattr(Trainer, "_read_steps", counted)
    runs = {}
    for every in (1, 5):
        reads.clear()
        runs[every] = tmp_path / f"every{every}"
        pretrain(compose_pretrain(tiny_data, f"trainer.sync_every={every}"), runs[every])
        if every == 5:
            assert reads == [4, 5, 6, 8, 10, 12]
        else:
            assert reads == list(range(1, 13))
    timing = {"tokens_per_s", "tokens_per_s_avg", "mfu", "time"}
    rows = {every: [{k: v for k, v in r.items() if k not in timing} for r in _rows(d)] for every, d in runs.items()}
    assert rows[5] == rows[1] and len([r for r in rows[5] if "loss" in r]) == 12
    assert all(r["tokens_per_s"] > 0 for r in _rows(runs[5]) if "loss" in r)
    # steps read together share the rate measured over them
    rates = {r["step"]: r["tokens_per_s"] for r in _rows(runs[5]) if "loss" in r}
    assert rates[9] == rates[10] and rates[11] == rates[12]
    weights = [AutoModelForMaskedLM.from_pretrained(d / "model").state_dict() for d in runs.values()]
    for name, value in weights[0].items():
        torch.testing.assert_close(weights[1][name], value, rtol=0, atol=0)


def test_nonfinite_steps_read_late_still_stop_the_run_naming_the_step(tiny_data, tmp_path, monkeypatch):
    """With trainer.sync_every=6 the NaN losses from step 3 are read at step 6: the run stops there, saying the limit
    was reached at step 4; the rows before it are logged and no update was applied after step 2."""
    from safetensors.torch import load_file

    from linformer.errors import TrainingDiverged

    common = ("trainer.eval_at_start=false", "trainer.eval_every=100", "trainer.keep_last=10")
    clean = tmp_path / "clean"
    pretrain(compose_pretrain(tiny_data, *common, "trainer.save_every=2"), clean)
    nan_losses_after(monkeypatch, 2)
    cfg = compose_pretrain(tiny_data, *common, "trainer.max_nonfinite_steps=2", "trainer.save_every=100",
                           "trainer.sync_every=6")
    with pytest.raises(TrainingDiverged, match=r"2 consecutive non-finite losses at step 4 \(read at step 6\)"):
        pretrain(cfg, tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints" / "step-00000006"
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert state["nonfinite"] == 2 and state["step"] == 6
    assert [r["step"] for r in _rows(tmp_path / "run")] == [1, 2, 3]
    # steps 3-6 were skipped: the weights are those the clean run had after step 2 (and not after step 4)
    got = load_file(ckpt / "model.safetensors")
    for step, same in ((2, True), (4, False)):
        want = load_file(clean / "checkpoints" / f"step-{step:08d}" / "model.safetensors")
        assert all(torch.equal(got[k], v) for k, v in want.items()) is same


def test_tensorboard_tracker_logs_every_step_s_loss_as_metrics_jsonl_has_it(tiny_data, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    pretrain(compose_pretrain(tiny_data, "logger=tensorboard", "trainer.max_steps=3"), tmp_path)
    files = [EventAccumulator(str(p)).Reload() for p in tmp_path.rglob("events.out.tfevents.*")]
    (scalars,) = [f for f in files if "loss" in f.Tags()["scalars"]]
    logged = {e.step: e.value for e in scalars.Scalars("loss")}
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # MFU charted in percent, as the summary says it, under a name that says so (metrics.jsonl: a fraction)
    mfu = {r["step"]: 100 * r["mfu"] for r in rows if "mfu" in r}
    assert "mfu" not in scalars.Tags()["scalars"] and mfu
    assert all(abs(e.value - mfu[e.step]) < 1e-4 * mfu[e.step] for e in scalars.Scalars("mfu_percent"))
    rows = {r["step"]: r["loss"] for r in rows if "loss" in r}  # always written, whatever the trackers
    assert sorted(logged) == sorted(rows) == [1, 2, 3]
    assert all(abs(logged[step] - rows[step]) < 1e-6 for step in rows)


def test_a_tracker_that_fails_to_start_is_one_error_naming_it_and_its_version(tiny_data, tmp_path, monkeypatch):
    """tensorboard 2.15-2.17 under numpy 2 raised AttributeError in its first write (the run's hparams), through
    Accelerate, and the run ended in that traceback: now a ConfigError (the CLI's one `error:` line) names the
    tracker and its installed version."""
    import importlib.metadata

    def old_tensorboard(hparam_dict, metric_dict):
        raise AttributeError("`np.string_` was removed in the NumPy 2.0 release. Use `np.bytes_` instead.")

    # the run's hparams, the tracker's first write (common.store_tracker_config)
    monkeypatch.setattr("torch.utils.tensorboard.summary.hparams", old_tensorboard)
    with pytest.raises(ConfigError) as raised:
        pretrain(compose_pretrain(tiny_data, "logger=tensorboard", "trainer.max_steps=3"), tmp_path)
    message = str(raised.value)
    assert message.startswith(f"logger.trackers: tensorboard failed to start (tensorboard "
                              f"{importlib.metadata.version('tensorboard')}): AttributeError: `np.string_` was removed")
    assert "\n" not in message and "logger=none" in message


def test_wandb_tracker_gets_the_run_its_config_and_every_step_offline(tiny_data, tmp_path, monkeypatch):
    """What reaches wandb (through Accelerate): the run's name, group, job type and config, and each step's loss as
    metrics.jsonl has it; offline, the run is kept on disk for `wandb sync`."""
    import wandb

    seen = {"init": None, "log": []}
    real_init = wandb.init

    def spy_init(*args, **kwargs):
        run = real_init(*args, **kwargs)
        seen["init"], seen["run"], real_log = kwargs, run, run.log
        run.log = lambda values, step=None, **kw: (seen["log"].append((step, dict(values))),
                                                   real_log(values, step=step, **kw))[1]
        return run

    monkeypatch.setattr(wandb, "init", spy_init)
    # not logged in and no WANDB_MODE: the run is told offline, and the environment is left as it was
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc
    cfg = compose_pretrain(tiny_data, "logger=wandb", "trainer.max_steps=3", "experiment_name=grp")
    pretrain(cfg, tmp_path)
    init = seen["init"]
    assert init["name"] == cfg.run_name and init["group"] == "grp" and init["job_type"] == "pretrain"
    assert init["mode"] == "offline" and "WANDB_MODE" not in os.environ
    config = dict(seen["run"].config)  # Accelerate stores it after init
    assert config["trainer/lr"] == cfg.trainer.lr and config["model/projected_dim"] == 8
    logged = {step: values["loss"] for step, values in seen["log"] if "loss" in values}
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert logged == {r["step"]: r["loss"] for r in rows if "loss" in r} and sorted(logged) == [1, 2, 3]
    assert list((tmp_path / "wandb").glob("offline-run-*"))
    # the run continued (a stop and a resume, here a longer max_steps): the same W&B run, resumed, not a second one
    pretrain(compose_pretrain(tiny_data, "logger=wandb", "trainer.max_steps=5", "experiment_name=grp",
                              "trainer.allow_config_change=[trainer.max_steps]"), tmp_path)
    from linformer.train.common import wandb_ignores_resume

    again = seen["init"]
    assert again["id"] == init["id"] and len(init["id"]) == 16
    assert again.get("resume") == (None if wandb_ignores_resume("offline") else "allow")  # it would warn, and ignore it
    # offline-run-<YYYYMMDD_HHMMSS>-<id>, with -1 after it when both starts fall in one second
    ids = {re.match(r"offline-run-\d{8}_\d{6}-([^-]+)", d.name).group(1) for d in (tmp_path / "wandb").glob("offline-run-*")}
    assert ids == {init["id"]}


def test_wandb_says_where_it_logs_in_one_line(tiny_data, tmp_path, monkeypatch, capfd):
    """logger=wandb printed wandb's banner, its run history's sparklines and its sync footer, 34 of a 10-step run's
    42 lines: now one line says where the run is logged, and WANDB_SILENT=false gives all of wandb's output back."""
    from linformer.train.common import wandb_console

    # the run is told offline (not logged in, no WANDB_MODE): wandb's settings singleton keeps the environment of the
    # process's first wandb run, which an earlier test may have started without WANDB_MODE
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc
    monkeypatch.delenv("WANDB_SILENT", raising=False)
    monkeypatch.delenv("WANDB_QUIET", raising=False)
    pretrain(compose_pretrain(tiny_data, "logger=wandb", "trainer.max_steps=3"), tmp_path)
    said = capfd.readouterr()
    (line,) = [x for x in (said.out + said.err).splitlines() if x.startswith("wandb")]
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    assert line == f"wandb: logging to offline in {folder} (upload it with `wandb sync {folder}`)"
    # continued (as a resume does): a second folder with the run's id, and its line names both, the first start first
    # (older wandb uploads them in the order given); another run's folder beside them is not this run's
    (tmp_path / "wandb" / "offline-run-20000101_000000-0123456789abcdef").mkdir()
    pretrain(compose_pretrain(tiny_data, "logger=wandb", "trainer.max_steps=5",
                              "trainer.allow_config_change=[trainer.max_steps]"), tmp_path)
    said = capfd.readouterr()
    (line,) = [x for x in (said.out + said.err).splitlines() if x.startswith("wandb")]
    (second,) = set((tmp_path / "wandb").glob("offline-run-*")) - {folder, tmp_path / "wandb" /
                                                                   "offline-run-20000101_000000-0123456789abcdef"}
    assert line == (f"wandb: logging to offline in {second} (upload it, its 2 starts in the order they started, with "
                    f"`wandb sync {folder} {second}`)")
    monkeypatch.setenv("WANDB_SILENT", "false")
    assert wandb_console() == {}


@pytest.mark.parametrize("end", ["diverged", "sigterm", "complete"])
def test_wandb_records_the_run_s_exit_status(tiny_data, tmp_path, monkeypatch, end):
    """A failed run (TrainingDiverged: exit 2) and a stopped one (SIGTERM: 143) were recorded with exit code 0, so
    `wandb sync` showed them finished."""
    import wandb

    from linformer.errors import Preempted, TrainingDiverged

    codes, real_init = [], wandb.init

    def spy_init(*args, **kwargs):
        run = real_init(*args, **kwargs)
        real_finish = run.finish
        run.finish = lambda exit_code=None: (codes.append(exit_code), real_finish(exit_code=exit_code))[1]
        return run

    monkeypatch.setattr(wandb, "init", spy_init)
    monkeypatch.delenv("WANDB_MODE", raising=False)  # the run is told offline (not logged in), whatever ran before
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    overrides = ["logger=wandb", "trainer.max_steps=6", "trainer.eval_at_start=false", "trainer.eval_every=100"]
    if end == "diverged":
        nan_losses_after(monkeypatch, 2)
        with pytest.raises(TrainingDiverged):
            pretrain(compose_pretrain(tiny_data, *overrides, "trainer.max_nonfinite_steps=2"), tmp_path)
    elif end == "sigterm":
        signal_at_step(monkeypatch, 2, signal.SIGTERM)
        with pytest.raises(Preempted):
            pretrain(compose_pretrain(tiny_data, *overrides), tmp_path)
    else:
        pretrain(compose_pretrain(tiny_data, *overrides), tmp_path)
    assert codes == [{"diverged": 2, "sigterm": 128 + signal.SIGTERM, "complete": 0}[end]]


def test_a_stopped_run_ends_a_loop_that_goes_on_past_failed_runs(tiny_data, tmp_path, monkeypatch):
    """Ctrl-C during training raised Preempted, an Exception: a notebook's loop over settings that goes on past a
    failed run (`except Exception`) took the stop for a failure and started the next run. A stop escapes it, as
    KeyboardInterrupt does."""
    from linformer.errors import Preempted

    signal_at_step(monkeypatch, 2, signal.SIGINT)
    started, failed = [], []
    with pytest.raises(Preempted, match="SIGINT") as stop:
        for lr in ("1e-3", "5e-4"):
            started.append(lr)
            try:
                pretrain(compose_pretrain(tiny_data, f"trainer.lr={lr}", "trainer.max_steps=4"), tmp_path / lr)
            except Exception as err:
                failed.append(err)
    assert started == ["1e-3"] and not failed and stop.value.exit_code == 130


def test_a_one_update_run_is_not_told_to_train_further(tiny_data, tmp_path):
    """The scratch rows' shape job (experiments.scratch.SHAPE: one update) makes a starting point, not a model to
    judge: its summary ended with pretraining's plateau advice, "train it for more steps". A longer run on the plateau
    still gets it, on a corpus whose manifest predates the context-free perplexity too (computed from its splits)."""
    import json
    import shutil

    from linformer.data.unigram import on_plateau
    from linformer.experiments.scratch import SHAPE

    shape = [f"{key}={value}" for key, value in SHAPE.items()]
    one = pretrain(compose_pretrain(tiny_data, *shape), tmp_path / "one")
    assert one["steps"] == 1 and not any("more steps" in line for line in one["report"]), one["report"]
    older = shutil.copytree(tiny_data["corpus_dir"], tmp_path / "older")
    manifest = json.loads((older / "manifest.json").read_text())
    (older / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "context_free_val_ppl"}))
    two = pretrain(compose_pretrain(tiny_data, *shape, "trainer.max_steps=2", f"corpus_dir={older}"), tmp_path / "two")
    assert two["context_free_val_ppl"] == pytest.approx(manifest["context_free_val_ppl"], abs=1e-3)
    assert on_plateau(two["final_val_ppl"], two["context_free_val_ppl"])  # the advice applies
    assert any("train it for more steps" in line for line in two["report"]), two["report"]


def test_warmup_longer_than_the_run_names_the_keys(tiny_data, tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.warmup_steps.*trainer.max_steps"):
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=2"), tmp_path)


def test_max_grad_norm_zero_means_no_clipping(tiny_data, tmp_path):
    """fairseq's --clip-norm 0: the run must still learn (a max_norm of 0 would zero every gradient)."""
    pretrain(compose_pretrain(tiny_data, "trainer.max_grad_norm=0", "trainer.max_steps=6"), tmp_path)
    losses = _losses(tmp_path)
    assert losses[-1] < losses[0]
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if "grad_norm" in x]
    assert all(r["grad_norm"] > 0 for r in rows)


def test_eval_blocks_above_the_split_are_capped_and_said_once(caplog):
    import datasets

    from linformer.train.pretrain import BlockStream

    blocks = datasets.Dataset.from_dict({"input_ids": [[0, 5, 6, 2]] * 7})
    stream = BlockStream(blocks, 2, 1, 0, 0, lambda rows: {"input_ids": torch.tensor([r["input_ids"] for r in rows])},
                         "validation")
    with caplog.at_level("WARNING"):
        assert sum(len(b["input_ids"]) for b in stream.held_out(10, "cpu")) == 7  # the odd one too
        assert sum(len(b["input_ids"]) for b in stream.held_out(10, "cpu")) == 7
        assert sum(len(b["input_ids"]) for b in stream.held_out(3, "cpu")) == 3
    (record,) = caplog.records
    assert "trainer.eval_blocks=10, but the validation split holds 7 blocks" in record.getMessage()


def test_the_next_step_is_worded_for_the_caller_and_pastes_whole_for_a_run_directory_with_a_space(
        tiny_data, tmp_path, capsys, monkeypatch):
    """next: is quoted as the resume hint is, and worded for the caller as it is (stopping.run_from_a_script): from
    Python (a notebook) the call of finetune with the overrides in it, docs/guide.md's "From Python" (it said
    `python scripts/finetune.py ...`, a command for a shell); after a script the finetuning command, the run
    directory one word."""
    import ast
    import shlex

    from linformer.configs import compose

    run = tmp_path / "my runs" / "pretrain's ü"
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/site-packages/ipykernel_launcher.py", "-f", "kernel.json"])
    summary = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=2", "trainer.warmup_steps=1",
                                        "trainer.eval_every=2", "trainer.save_every=2"), run)
    call = ast.parse(summary["next"], mode="eval").body  # finetune(FinetuneSpec.read(compose(...)), run_dir)
    assert ast.unparse(call.func) == "finetune" and ast.unparse(call.args[1]) == "run_dir"
    read = call.args[0]
    assert ast.unparse(read.func) == "FinetuneSpec.read"
    composed = read.args[0]
    assert ast.unparse(composed.func) == "compose" and ast.literal_eval(composed.args[0]) == "finetune"
    overrides = ast.literal_eval(composed.args[1])
    assert overrides[0] == "task=sst2"
    assert compose("finetune", overrides).model_path == str(run)  # Hydra reads the path back whole
    assert summary["next"].startswith('finetune(FinetuneSpec.read(compose("finetune", ["task=sst2", "model_path=')
    printed = [line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("next: ")]
    assert printed == [f"next: {summary['next']}"]

    from linformer.train.summary import finetune_next  # the same words where a script ran it
    from tests.conftest import as_command
    as_command(monkeypatch, [str(REPO / "scripts" / "pretrain.py")])
    words = shlex.split(finetune_next(run))
    assert words[:3] == ["python", "scripts/finetune.py", "task=sst2"]
    assert compose("finetune", words[2:]).model_path == str(run)  # Hydra reads the pasted path back whole


def test_mfu_in_a_multi_process_run_is_against_every_process_s_peak(tiny_data):
    """tokens/s counts every process's tokens, so the peak is every process's: against one device's peak a run on 8
    GPUs reported 8x its MFU (2x under torchrun --nproc_per_node 2 here)."""
    import torch

    from linformer.runconfig import PretrainSpec
    from linformer.train.pretrain import PretrainTask

    spec = PretrainSpec.of(compose_pretrain(tiny_data, "trainer.peak_tflops=0.5"))
    one, two = (PretrainTask(spec, spec.trainer, world, 0, torch.device("cpu")) for world in (1, 2))
    assert one.peak_flops == 0.5e12 and two.peak_flops == 2 * one.peak_flops


def _scored(per_device, world, limit, count=150):
    """{block: its labels} over every rank's batches of an evaluation scoring `limit` of `count` blocks."""
    from linformer.train.pretrain import BlockStream

    rows = {}
    for rank in range(world):
        stream = BlockStream(_blocks(count), per_device, world, rank, 1, _Draws(), "validation")
        for batch in stream.held_out(limit, "cpu"):
            assert 0 < len(batch["input_ids"]) <= per_device
            if (batch["labels"] == -100).all():  # a process's turn in a short last batch that holds none of its places
                continue
            rows.update({int(ids[0]): tuple(labels.tolist()) for ids, labels in zip(batch["input_ids"],
                                                                                    batch["labels"])})
    return rows


@pytest.mark.parametrize("per_device, world", [(8, 1), (2, 1), (3, 1), (2, 2), (5, 3), (48, 2)])
def test_an_evaluation_scores_one_set_of_blocks_and_masks_however_the_batch_is_split(per_device, world):
    """trainer.eval_batches counted global micro-batches: the blocks scored, and their masks (drawn over a whole
    batch), changed with the batch size, the processes (and with trainer.global_batch_size, grad_accum), and the
    blocks past the last whole batch were never scored. trainer.eval_blocks scores that many blocks of one order,
    masked by places (chunks of HELD_OUT_CHUNK, whatever the batches that cross them): every split of the batch
    scores the same blocks with the same masks, and a block's masks do not change with how many are scored."""
    from linformer.data.streams import HELD_OUT_CHUNK

    everything = _scored(1, 1, None)  # one block a batch: each block's own place, nothing shared with another
    assert len(everything) == 150 > 2 * HELD_OUT_CHUNK  # whole chunks and a short last one
    for limit in (None, 13, 70, 500):
        scored = _scored(per_device, world, limit)
        assert len(scored) == min(limit or 150, 150) and scored == {k: everything[k] for k in scored}
    assert set(_scored(per_device, world, 70)) == set(list(everything)[:70])  # the first 70 of one order


@pytest.mark.parametrize("per_device, world, limit", [(8, 2, 17), (5, 3, 13), (2, 2, 1), (48, 2, None)])
def test_every_process_runs_as_many_validation_forwards(per_device, world, limit):
    """A process holding no place of the short last batch skipped its forward: under FSDP, which gathers the
    parameters in every forward, the others then waited for it for ever. It runs one on a batch with no target."""
    from linformer.train.pretrain import BlockStream

    counts = [len(list(BlockStream(_blocks(150), per_device, world, rank, 1, _Draws(), "validation")
                        .held_out(limit, "cpu"))) for rank in range(world)]
    assert len(set(counts)) == 1, counts


def test_an_evaluation_masks_its_blocks_in_a_few_collator_calls_not_one_per_block():
    """Validation masked each block alone (one collator call, one generator per block): 138 calls per evaluation on
    the demo's split where whole batches took 8, and as many per-row mask draws. A process now masks each chunk of
    places it scores once, however small its batches; a run begun scoring whole batches still scores those."""
    from linformer.data.streams import HELD_OUT_CHUNK, SCORING_BATCHES
    from linformer.train.pretrain import BlockStream

    class Counted(_Draws):
        calls = 0

        def __call__(self, rows):
            Counted.calls += 1
            return super().__call__(rows)

    for per_device, world, limit, calls in [(2, 1, None, 3), (16, 1, 138, 3), (1, 1, 13, 1), (4, 2, 70, 2)]:
        Counted.calls = 0
        for rank in range(world):
            stream = BlockStream(_blocks(150), per_device, world, rank, 1, Counted(), "validation")
            assert sum(len(b["input_ids"]) for b in stream.held_out(limit, "cpu")) > 0
        assert Counted.calls == world * -(-min(limit or 150, 150) // HELD_OUT_CHUNK) == world * calls
    # a run whose checkpoints record no scoring scores its whole batches, as it did
    old = BlockStream(_blocks(), 8, 1, 0, 1, _Draws(), "validation")
    assert [b["labels"].tolist() for b in old.held_out(13, "cpu", SCORING_BATCHES)] == \
        [old.micro_batch(g)["labels"].tolist() for g in range(2)]


def test_validation_batches_without_a_masked_token_are_refused_not_scored_perplexity_1(tiny_data, tmp_path):
    """With no masked token in the evaluated batches the validation loss was 0.0 (perplexity 1.0), which read as a
    perfect model and hid the plateau warning; the masks are fixed, so every evaluation would say the same."""
    cfg = compose_pretrain(tiny_data, "trainer.mlm_probability=1e-9", "trainer.eval_blocks=8")
    with pytest.raises(ConfigError, match=r"trainer.eval_blocks=8\) hold no masked token"):
        pretrain(cfg, tmp_path)


def test_a_global_batch_that_replaces_the_batch_size_says_so(caplog):
    """config.yaml keeps trainer.batch_size beside trainer.global_batch_size: the run says which one it follows."""
    from linformer.runconfig import TrainerSettings
    from linformer.train.pretrain import _per_device_batch

    settings = TrainerSettings(batch_size=16, global_batch_size=64, grad_accum=2, lr=1e-3)
    with caplog.at_level("WARNING", logger="linformer.train.pretrain"):
        assert _per_device_batch(settings, world=2) == 16
        assert "not used" not in caplog.text
        assert _per_device_batch(settings, world=1) == 32
    assert "trainer.global_batch_size=64 sets the batch per device to 32" in caplog.text
    assert "trainer.batch_size=16 is not used" in caplog.text


def test_data_settings_other_than_the_corpus_are_refused_before_the_run(tiny_data, tmp_path):
    """data.sources (and the other keys a corpus is made from) that are not what data.name's corpus was prepared
    with: one error naming the key, both values and the command to prepare it, before any run file is written."""
    from linformer.data.corpus import check_corpus_settings
    from linformer.errors import CorpusError

    corpus = Path(tiny_data["corpus_dir"])
    text = corpus.parent / "corpus.txt"
    same = [f"data.name={corpus.name}", f"data.sources=[{text}]", "data.n=32", "data.val_fraction=0.1",
            "data.max_documents=null"]
    check_corpus_settings(str(corpus), compose_pretrain(tiny_data, *same).data)  # what made it: accepted
    other = tmp_path / "mine.txt"
    other.write_text("Another text.\n")
    with pytest.raises(CorpusError, match=rf"data.sources=\[{other}\] give other text than the corpus {corpus} .*not "
                                          rf"made from: {other}; without texts it was made from: {text}\): "
                                          r"prepare it again \(.*prepare_corpus.py data.name=corpus"):
        pretrain(compose_pretrain(tiny_data, *same, f"data.sources=[{other}]"), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(CorpusError, match=rf"data.val_fraction=0.5, but .* data.val_fraction=0.1: .*'data.sources=\[{text}\]' "
                                          r"data.n=32 data.val_fraction=0.5 .* overwrite=true\)"):
        check_corpus_settings(str(corpus), compose_pretrain(tiny_data, *same, "data.val_fraction=0.5").data)
    # a corpus_dir given as a path names its corpus itself: the data group's defaults are not compared with it
    check_corpus_settings(str(corpus), compose_pretrain(tiny_data).data)


def test_a_corpus_setting_that_comes_from_the_data_group_is_named_so_in_the_refusal(tiny_data):
    """The own-text recipe's pretrain.py, on its default data=mirror_slice, was refused for data.max_documents=300
    against a corpus packed whole, with the advice to pack it again with data.max_documents=300: a slice the user
    never set, proposed as theirs. The refusal names where the value comes from (as under the script's Hydra)."""
    from hydra.core.hydra_config import HydraConfig

    from linformer.data.corpus import check_corpus_settings
    from linformer.errors import CorpusError

    corpus = Path(tiny_data["corpus_dir"])
    same = [f"data.name={corpus.name}", f"data.sources=[{corpus.parent / 'corpus.txt'}]", "data.n=32",
            "data.val_fraction=0.1"]
    cfg = compose_pretrain(tiny_data, *same, with_hydra=True)
    HydraConfig.instance().set_config(cfg)
    try:
        with pytest.raises(CorpusError, match=r"^data.max_documents=300, but the corpus .* was prepared with "
                                              r"data.max_documents=null; this command's 300 is not its command line's "
                                              r"but data=mirror_slice \(configs/data/mirror_slice.yaml\), "
                                              r"configs/pretrain.yaml's default: give it the data group .* \(python "
                                              r"scripts/prepare_corpus.py data=mirror_slice data.name=corpus "):
            check_corpus_settings(str(corpus), cfg.data)
        cfg = compose_pretrain(tiny_data, *same, "data.max_documents=300", with_hydra=True)
        HydraConfig.instance().set_config(cfg)
        with pytest.raises(CorpusError, match=r"prepared with data.max_documents=null: prepare it from these settings "
                                              r"\(python scripts/prepare_corpus.py data=mirror_slice "):
            check_corpus_settings(str(corpus), cfg.data)  # a value the command line gives is the user's own
    finally:
        HydraConfig.instance().cfg = None


@pytest.mark.parametrize("terminal", [False, True])
def test_a_log_file_gets_a_plain_line_every_log_every_steps_and_at_each_evaluation(tiny_data, tmp_path, capsys,
                                                                                 monkeypatch, terminal):
    """Where stderr is not a terminal (nohup, tee, a job runner) the bar's carriage returns ran every redraw into one
    line, and the validation perplexity was printed nowhere: plain lines there; a terminal keeps the bar alone."""
    from linformer.train import trainer

    monkeypatch.setattr(trainer, "progress_to_log_file", lambda: not terminal)
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "trainer.warmup_steps=1", "trainer.log_every=2",
                              "trainer.eval_every=3", "trainer.save_every=6"), tmp_path / "run")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("pretrain step ")]
    if terminal:
        assert lines == []
        return
    assert [int(re.match(r"pretrain step (\d+)/6: ", line)[1]) for line in lines] == [0, 2, 3, 4, 6]
    assert "val_ppl" in lines[0] and " loss " not in lines[0]  # before training: the evaluation alone
    assert "val_ppl" not in lines[1] and re.search(r"loss \d+\.\d{4}, lr \d\.\d\de-\d\d", lines[1])
    assert all("val_ppl" in lines[i] for i in (2, 4))
    assert all(re.search(r"[\d,]+ tokens/s \(avg [\d,]+\)", line) for line in lines[1:])


class _Undeclared(Projection):
    """Mean pooling under a name of its own, declaring no FLOPs."""

    def __init__(self, n: int, k: int):
        super().__init__()
        self.pool = PoolProjection(n, k, "mean")

    def forward(self, x, mask):
        return self.pool(x, mask)


def test_a_projection_declaring_no_flops_trains_without_an_mfu_saying_why(tiny_data, tmp_path, registries, caplog):
    """FLOPs counted a registered projection as parameter-free pooling, so its MFU was wrong without a word: one that
    declares none (Projection.projected_flops) trains, and its rows and summary give no MFU, with a warning naming it."""
    register_projection("plain_mean_pool", lambda config, k, heads: _Undeclared(config.max_seq_len, k))
    with caplog.at_level("WARNING", logger="linformer.train.pretrain"):
        summary = pretrain(compose_pretrain(tiny_data, "model.projection=plain_mean_pool", "trainer.max_steps=3",
                                            "trainer.eval_every=3", "trainer.save_every=3"), tmp_path)
    assert summary.get("mfu") is None and not any("mfu" in r for r in _rows(tmp_path))
    assert any("projection='plain_mean_pool' (_Undeclared) declares no FLOPs" in r.getMessage()
               and "no MFU" in r.getMessage() for r in caplog.records)


def test_a_step_line_gives_the_rate_since_start_beside_the_window_s():
    """A step's tokens/s is over the steps since the last host read; beside it the average since the run started, so
    that a fast window after slow first steps is not read as the run's speed. A row without the average (a run
    logged before it was kept) gives the window's alone."""
    from linformer.train.summary import progress_line

    row = {"loss": 6.81234, "lr": 4.44e-4, "tokens_per_s": 7071.4, "tokens_per_s_avg": 1100.2, "val_loss": 6.9}
    assert progress_line("pretrain", 100, 300, row) == (
        "pretrain step 100/300: loss 6.8123, lr 4.44e-04, 7,071 tokens/s (avg 1,100), val_loss 6.9")
    assert progress_line("pretrain", 100, 300, {"loss": 1.0, "tokens_per_s": 7071.4}) == (
        "pretrain step 100/300: loss 1.0000, 7,071 tokens/s")


class _Draws:
    """A collator that draws a value per position from the generator the stream seeds (as MLM masks are drawn)."""

    generator = None

    def __call__(self, rows):
        ids = torch.tensor([r["input_ids"] for r in rows])
        return {"input_ids": ids, "labels": torch.randint(0, 1000, ids.shape, generator=self.generator)}


def _blocks(count: int = 40):
    import datasets

    return datasets.Dataset.from_dict({"input_ids": [[i, i + 1, i + 2] for i in range(count)]})


def test_a_grad_accum_1_stream_draws_the_rows_and_masks_it_always_has():
    """Runs at grad_accum = 1 (every committed result, every resumable run) keep their batches bit for bit."""
    from linformer.train.pretrain import BlockStream

    one = BlockStream(_blocks(), 4, 1, 0, 3, _Draws(), "train")
    batches = [one.micro_batch(g) for g in (0, 1, 7)]
    assert [b["input_ids"][:, 0].tolist() for b in batches] == [[24, 5, 30, 31], [28, 23, 20, 6], [36, 9, 3, 18]]
    assert [b["labels"][0].tolist() for b in batches] == [[319, 405, 230], [455, 201, 555], [983, 100, 424]]
    rank1 = BlockStream(_blocks(), 4, 2, 1, 3, _Draws(), "train")
    assert [rank1.micro_batch(g)["labels"][0].tolist() for g in (0, 1, 7)] == \
        [[114, 851, 911], [558, 925, 733], [905, 983, 156]]


@pytest.mark.parametrize("per_device,world,accum", [(4, 1, 2), (2, 1, 4), (2, 2, 2), (4, 2, 1)])
def test_a_step_s_rows_and_masks_do_not_depend_on_how_its_global_batch_is_split(per_device, world, accum):
    from linformer.train.pretrain import BlockStream

    whole = BlockStream(_blocks(), 8, 1, 0, 3, _Draws(), "train")
    split = [BlockStream(_blocks(), per_device, world, rank, 3, _Draws(), "train", accum) for rank in range(world)]
    assert split[0].batches_per_epoch == whole.batches_per_epoch * accum
    for step in range(7):  # past an epoch's end (5 global batches of 8)
        parts = [s.micro_batch(step * accum + m) for m in range(accum) for s in split]
        for key in ("input_ids", "labels"):
            assert torch.equal(torch.cat([p[key] for p in parts]), whole.micro_batch(step)[key])


def test_a_checkpoint_saved_before_draws_were_recorded_keeps_its_micro_batch_seeding_and_validation_seed():
    from linformer.data.streams import SCORING_BATCHES, SCORING_BLOCKS, SEEDING_MICRO, SEEDING_STEP, recorded_draws
    from linformer.train.pretrain import BlockStream

    assert recorded_draws({}, 5) == (SEEDING_MICRO, 6, SCORING_BATCHES)
    assert recorded_draws({"batch_seeding": SEEDING_STEP, "validation_seed": 1, "validation_scoring": SCORING_BLOCKS},
                          5) == (SEEDING_STEP, 1, SCORING_BLOCKS)
    with pytest.raises(ConfigError, match="batch seeding 'later'"):
        recorded_draws({"batch_seeding": "later"}, 5)
    old = BlockStream(_blocks(), 4, 1, 0, 3, _Draws(), "train")  # how grad_accum=2 drew: per micro-batch
    kept = BlockStream(_blocks(), 4, 1, 0, 3, _Draws(), "train", 2).replaced(seeding=SEEDING_MICRO)
    assert all(torch.equal(kept.micro_batch(g)["labels"], old.micro_batch(g)["labels"]) for g in range(12))
    assert kept.replaced(seed=6).seed == 6


def test_batch_8x1_4x2_and_2x4_train_the_same_weights(tiny_data, tmp_path):
    """Gradient accumulation is the same math as a larger batch (up to float rounding): the same masks, and the
    loss a mean over the global batch's masked tokens."""
    from safetensors.torch import load_file

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        weights = []
        for batch, accum in [(8, 1), (4, 2), (2, 4)]:
            cfg = compose_pretrain(tiny_data, "trainer.max_steps=3", "trainer.eval_every=100", "trainer.save_every=100",
                                   "model.hidden_dropout_prob=0", "model.attention_probs_dropout_prob=0",
                                   f"trainer.batch_size={batch}", f"trainer.grad_accum={accum}")
            pretrain(cfg, tmp_path / f"b{batch}")
            weights.append(load_file(tmp_path / f"b{batch}" / "model" / "model.safetensors"))
            state = json.loads((tmp_path / f"b{batch}" / "run.json").read_text())
            assert state["batch_seeding"] == "step" and state["validation_seed"] == 1
    finally:
        torch.set_num_threads(threads)
    for other in weights[1:]:
        for name, tensor in weights[0].items():
            torch.testing.assert_close(other[name], tensor, rtol=0, atol=2e-6)


def test_a_run_checkpointed_before_draws_were_recorded_resumes_with_its_own(tiny_data, tmp_path, monkeypatch):
    """A checkpoint whose state records no draws (an earlier version's) goes on drawing per micro-batch and
    validating on seed + 1, and run.json says so; a new run records per step and the fixed validation seed."""
    from linformer.train.pretrain import PretrainTask

    overrides = ["seed=3", "trainer.grad_accum=2", "trainer.batch_size=4", "trainer.max_steps=2",
                 "trainer.warmup_steps=1", "trainer.save_every=2", "trainer.eval_every=100"]
    with monkeypatch.context() as patch:
        patch.setattr(PretrainTask, "draws", lambda self: {})
        pretrain(compose_pretrain(tiny_data, *overrides), tmp_path / "old")
    checkpoint = tmp_path / "old" / "checkpoints" / "step-00000002"
    pretrain(compose_pretrain(tiny_data, *overrides, f"trainer.resume={checkpoint}"), tmp_path / "resumed")
    resumed = json.loads((tmp_path / "resumed" / "run.json").read_text())
    assert (resumed["batch_seeding"], resumed["validation_seed"]) == ("micro-batch", 4)
    pretrain(compose_pretrain(tiny_data, *overrides), tmp_path / "new")
    new = json.loads((tmp_path / "new" / "run.json").read_text())
    assert (new["batch_seeding"], new["validation_seed"]) == ("step", 1)
    assert new["environment"]["linformer"] and new["environment"]["torch"] == torch.__version__


@pytest.mark.parametrize("earlier, said", [("failed", "failed"), ("running", "killed")])
def test_a_run_whose_earlier_attempt_left_no_checkpoint_starts_over_from_step_0(tiny_data, tmp_path, monkeypatch,
                                                                                 capsys, earlier, said):
    """An attempt that ended (failed, stopped, killed: run.json says running) before its first checkpoint leaves
    nothing to resume: the next start (trainer.resume=auto) says it starts over from step 0, and does, with the
    uninterrupted run's losses and no row of the earlier attempt left in metrics.jsonl."""
    from linformer.modeling import LinformerForMaskedLM

    steps = ["trainer.max_steps=6", "trainer.save_every=100", "trainer.eval_every=100", "trainer.eval_at_start=false"]
    fresh = pretrain(compose_pretrain(tiny_data, *steps), tmp_path / "fresh")
    forward, calls = LinformerForMaskedLM.forward, {"n": 0}

    def failing(self, *args, **kwargs):
        calls["n"] += self.training
        if calls["n"] > 3:
            raise RuntimeError("a failure before the first checkpoint")
        return forward(self, *args, **kwargs)

    run = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(LinformerForMaskedLM, "forward", failing)
        with pytest.raises(RuntimeError, match="before the first checkpoint"):
            pretrain(compose_pretrain(tiny_data, *steps), run)
    assert [r["step"] for r in _rows(run)] and not list(run.glob("checkpoints/step-*"))
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "status": earlier}))
    capsys.readouterr()
    summary = pretrain(compose_pretrain(tiny_data, *steps, "trainer.resume=auto"), run)
    assert (f"{run}: its earlier attempt ({said}) left no checkpoint (trainer.save_every): this attempt starts over "
            "from step 0") in capsys.readouterr().err
    assert summary.get("resumed_from_step") is None
    assert [r["step"] for r in _rows(run) if "loss" in r] == [1, 2, 3, 4, 5, 6]
    assert _losses(run) == _losses(tmp_path / "fresh") and summary["final_val_loss"] == fresh["final_val_loss"]


def test_a_run_that_scored_whole_batches_goes_on_so_and_its_eval_batches_is_not_a_change(tiny_data, tmp_path):
    """A run begun by a version that scored its validation in whole batches (trainer.eval_batches, recorded in its
    config.yaml; checkpoints without validation_scoring) is trained further: its record compares without the
    retired key, and its evaluations go on scoring whole batches, so its curve stays one measure."""
    import yaml

    from linformer.train.checkpoint import STATE_FILE, _write_checksums

    run = tmp_path / "run"
    first = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.eval_blocks=12"), run)
    assert first["validation"] == {"blocks": 12, "of": first["validation"]["of"], "scoring": "blocks"}
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["trainer"] = {**{k: v for k, v in config["trainer"].items() if k != "eval_blocks"}, "eval_batches": 2}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    for ckpt in (run / "checkpoints").iterdir():  # as that version saved them
        state = json.loads((ckpt / STATE_FILE).read_text())
        (ckpt / STATE_FILE).write_text(json.dumps({k: v for k, v in state.items() if k != "validation_scoring"}))
        _write_checksums(ckpt)
    further = pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "trainer.eval_blocks=12",
                                        "trainer.allow_config_change=[trainer.max_steps]"), run)
    assert further["steps"] == 6 and further["validation"]["scoring"] == "batches"


def test_a_checkpoint_saved_before_skipped_updates_were_counted_leaves_the_count_unknown(tiny_data, tmp_path,
                                                                                         monkeypatch):
    """A checkpoint whose state has no skipped-updates count (an earlier version's), of a run whose step 2 was
    non-finite: the resumed run recorded skipped_steps 0, and compare_runs believed it. The count is unknown
    (null), so compare_runs counts the run's logged non-finite losses."""
    from linformer.modeling import LinformerForMaskedLM
    from linformer.report.rows import logged_nonfinite_losses, skipped_updates
    from linformer.rundir import load_run
    from linformer.train import checkpoint as ckpt

    forward, seen = LinformerForMaskedLM.forward, {"n": 0}

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        if self.training:
            seen["n"] += 1
            if seen["n"] == 2:
                out.loss = out.loss * float("nan")
        return out

    steps = ["trainer.save_every=2", "trainer.eval_every=100", "trainer.warmup_steps=1"]
    with monkeypatch.context() as patch:
        patch.setattr(LinformerForMaskedLM, "forward", poisoned)
        pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=2"), tmp_path)
    load = ckpt.load_checkpoint

    def old_state(*args, **kwargs):
        state = load(*args, **kwargs)
        del state["skipped_steps"], state["first_skipped_step"]
        return state

    monkeypatch.setattr(ckpt, "load_checkpoint", old_state)
    summary = pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=4", "trainer.resume=auto",
                                       "trainer.allow_config_change=[trainer.max_steps]"), tmp_path)
    assert summary["resumed_from_step"] == 2
    recorded = json.loads((tmp_path / "summary.json").read_text())
    assert (recorded["skipped_steps"], recorded["first_skipped_step"]) == (None, None)
    assert skipped_updates(load_run(tmp_path).results or recorded, lambda: logged_nonfinite_losses(tmp_path)) == 1


@pytest.mark.parametrize("earlier", ["running", "stopped"])
def test_a_refused_resume_leaves_the_earlier_attempt_s_record_as_it_was(tiny_data, tmp_path, earlier):
    """A run an earlier version left `running` after a SIGTERM (it recorded no stop), then a resume refused before
    the attempt started (here: max_steps below the checkpoint's step): the refusal rewrote run.json to `failed` with
    its error, where a run left `stopped` kept its status. Neither is rewritten: the attempt never started."""
    from linformer.errors import ConfigError

    steps = ["trainer.save_every=3", "trainer.eval_every=100", "trainer.warmup_steps=1"]
    pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=3"), tmp_path)
    info = json.loads((tmp_path / "run.json").read_text())
    info.update(status=earlier)
    (tmp_path / "run.json").write_text(json.dumps(info))
    with pytest.raises(ConfigError, match="trainer.max_steps=2 is below the step of the checkpoint"):
        pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=2", "trainer.resume=auto",
                                  "trainer.allow_config_change=[trainer.max_steps]"), tmp_path)
    assert json.loads((tmp_path / "run.json").read_text()) == info


def test_a_resume_whose_corpus_is_missing_names_the_corpus_not_a_format_change(tiny_data, tmp_path):
    """A run continued with a corpus_dir that holds no prepared corpus was refused as a run of other settings whose
    record is of another version of the run format (corpus_cache_key: '...' -> None), with advice to allow the change,
    which waived the data check. The missing corpus is named, before the record is compared."""
    from linformer.errors import CorpusError

    steps = ["trainer.save_every=2", "trainer.eval_every=100", "trainer.warmup_steps=1", "trainer.max_steps=2"]
    pretrain(compose_pretrain(tiny_data, *steps), tmp_path / "run")
    before = (tmp_path / "run" / "run.json").read_text()
    with pytest.raises(CorpusError, match=rf"^{tmp_path / 'moved'} is not a complete prepared corpus"):
        pretrain(compose_pretrain(tiny_data, *steps, f"corpus_dir={tmp_path / 'moved'}"), tmp_path / "run")
    assert (tmp_path / "run" / "run.json").read_text() == before


def test_a_corpus_of_ids_beyond_the_tokenizer_s_vocabulary_is_refused_before_the_run(tiny_data, tmp_path):
    """A corpus whose blocks hold another tokenizer's ids (its files and listing rewritten, its manifest naming this
    tokenizer) was an IndexError traceback in the embedding lookup of the first step; it is refused before the run
    starts, naming the corpus's file, the id and the vocabulary's size."""
    import shutil

    from linformer.errors import CorpusError

    from ..conftest import put_token_id

    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_data["corpus_dir"], corpus)
    arrow = put_token_id(corpus, 5000, "train")
    vocabulary = len(AutoTokenizer.from_pretrained(tiny_data["tokenizer_dir"]))
    with pytest.raises(CorpusError, match=rf"^prepared corpus {corpus} holds token id 5,000 \(in "
                                          rf"train/{arrow.name}\), outside the model's vocabulary \({vocabulary} "
                                          rf"tokens, ids 0-{vocabulary - 1}, tokenizer "):
        pretrain(compose_pretrain({**tiny_data, "corpus_dir": str(corpus)}), tmp_path / "run")
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_a_tokenizer_trained_again_while_the_run_loads_it_is_refused(tiny_data, tmp_path, monkeypatch):
    """The run loads its tokenizer, then hashes its folder against the corpus's manifest: a tokenizer written again
    in between (here the same bytes by a new inode, which no hash can tell; a retrained one of the corpus's hash
    alike) passed, and the run trained with the one loaded. Its files' states are taken before the load and checked
    after the hash (``hashing.check_inputs_unchanged``, as prepare_corpus does)."""
    import shutil

    from linformer.errors import DataError
    from linformer.train import pretrain as pretrain_mod

    tok = tmp_path / "tok"
    shutil.copytree(tiny_data["tokenizer_dir"], tok)
    loaded = pretrain_mod.load_tokenizer

    def load_then_rewritten(path, *args):
        tokenizer = loaded(path, *args)
        target = tok / "tokenizer.json"
        shutil.copyfile(target, tmp_path / "again.json")
        os.replace(tmp_path / "again.json", target)
        return tokenizer

    monkeypatch.setattr(pretrain_mod, "load_tokenizer", load_then_rewritten)
    with pytest.raises(DataError, match=rf"^{tok / 'tokenizer.json'} changed while it was being read: run again$"):
        pretrain(compose_pretrain({**tiny_data, "tokenizer_dir": str(tok)}), tmp_path / "run")


def test_a_checkpoint_of_an_untied_head_with_two_biases_is_refused_naming_the_export_that_continues_it(
        tiny_data, tmp_path, monkeypatch):
    """Older code gave an untied MLM head two biases (lm_head.bias, never read, beside lm_head.decoder.bias), in its
    checkpoints' weights and optimizer: resuming one failed in Accelerate's words (a state dict's unexpected key), and
    exporting it was refused as not fitting its run's config. Now the resume is one line naming the checkpoint and
    the export it suggests, which writes the model with the bias the head read, and a new run starts from it."""
    from safetensors.torch import load_file

    from linformer.modeling import LinformerForMaskedLM, task_models
    from linformer.train.export import export_run

    untied = ("model.tie_word_embeddings=false", "trainer.max_steps=4", "trainer.save_every=4")
    run = tmp_path / "run"
    with monkeypatch.context() as older:  # the head as it was: no tie between its two bias names
        older.setattr(task_models, "_UNTIED_BIAS", {})
        pretrain(compose_pretrain(tiny_data, *untied), run)
    checkpoint = run / "checkpoints" / "step-00000004"
    saved = load_file(str(checkpoint / "model.safetensors"))
    assert not torch.equal(saved["lm_head.bias"], saved["lm_head.decoder.bias"])  # the one read was trained
    with pytest.raises(CheckpointError) as refused:
        pretrain(compose_pretrain(tiny_data, *untied, "trainer.max_steps=6", "trainer.resume=auto",
                                  "trainer.allow_config_change=[trainer.max_steps]"), run)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"checkpoint {checkpoint} cannot be resumed")
    assert f"export.py {run} --step 4" in message and "init_from=" in message
    done = export_run(run, tmp_path / "exported", step=4)
    model = LinformerForMaskedLM.from_pretrained(done["out"])
    assert torch.equal(model.lm_head.decoder.bias, saved["lm_head.decoder.bias"])
    assert model.lm_head.bias is model.lm_head.decoder.bias
    pretrain(compose_pretrain(tiny_data, f"init_from={done['out']}", "trainer.max_steps=3"), tmp_path / "new")


def test_a_tokenizer_other_than_the_corpus_s_is_told_to_give_itself_a_corpus_of_its_own(tiny_data, tmp_path,
                                                                                       monkeypatch, capsys):
    """One line naming what differs, no JSON dumps (MiniLM's tokenizer on the BPE corpus printed 1,700 characters),
    and a fix that prepare_corpus takes: the corpus of its own where this command reads it (here its corpus_dir=),
    the command's data group and the tokenizer as typed. It said to prepare the same corpus again with the other
    tokenizer, which prepare_corpus refused as another output (overwrite=true would replace it for its own runs)."""
    from linformer.configs import compose
    from linformer.data import train_tokenizer
    from tests.conftest import run_script

    from .conftest import _synthetic_corpus

    text = _synthetic_corpus(tmp_path / "text.txt", docs=20)
    other = train_tokenizer([str(text)], str(tmp_path / "other"), vocab_size=280, min_frequency=1, show_progress=False)
    argv = [a for a in _script_args(tiny_data, tmp_path / "run")[2:] if not a.startswith("tokenizer_dir=")]
    assert run_script("pretrain", [*argv, f"tokenizer_dir={other}"], monkeypatch) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert "{" not in line and "sha256" not in line, line  # no serialised part, no digest
    assert "(the vocabulary: 280 entries against 300 entries) " in line
    prepare, here = re.fullmatch(r".*give it a corpus of its own, `python \S+prepare_corpus\.py (.*)`, then (.*) here "
                                 r"too", line).groups()
    own = str(Path(tiny_data["corpus_dir"]).parent / "corpus_other")
    assert prepare.split() == ["data=mirror_slice", "data.name=corpus_other", f"tokenizer_dir={other}",
                               f"out_dir={own}"]
    assert compose("corpus", prepare.split()).out_dir == own
    assert compose_pretrain(tiny_data, *here.split()).corpus_dir == own


def _refusal(tiny_data, tmp_path, monkeypatch, capsys, *overrides):
    """The error line of scripts/pretrain.py on the tiny config, its corpus_dir (and tokenizer_dir) replaced."""
    from tests.conftest import run_script

    keys = {o.split("=", 1)[0] for o in overrides}
    argv = [a for a in _script_args(tiny_data, tmp_path / "run")[2:] if a.split("=", 1)[0] not in keys]
    assert run_script("pretrain", [*argv, *overrides], monkeypatch) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    return line


def test_a_corpus_whose_mirror_is_elsewhere_is_told_where_the_mirror_is_set(tiny_data, tmp_path, monkeypatch,
                                                                            capsys):
    """A clone away from ../shared/data was told only to carry the corpus to a GPU node (gpu_carry pack)."""
    mirror = tmp_path / "no_mirror"
    line = _refusal(tiny_data, tmp_path, monkeypatch, capsys, f"corpus_dir={tmp_path / 'corpus'}",
                    f"paths.data_mirror={mirror}")
    assert f"and its source {mirror}/pretrain/" in line
    assert (f"give the folder that holds the data mirror as paths.data_mirror= or $LINFORMER_DATA_MIRROR (now {mirror})"
            in line)
    assert "prepare_corpus.py data=mirror_slice" in line and "paths.data_mirror=DIR`; on a GPU node, carry" in line


def test_a_missing_corpus_and_tokenizer_are_named_in_one_refusal(tiny_data, tmp_path, monkeypatch, capsys):
    """pretrain named the missing corpus; its prepare_corpus command then named the missing tokenizer: two refused
    starts (20 s each on shared cores) before the two commands that set a fresh clone up."""
    from linformer.configs import compose

    mirror = tmp_path / "mirror"
    (mirror / "pretrain" / "wikipedia").mkdir(parents=True)
    (mirror / "pretrain" / "wikipedia" / "enwiki_extracted.txt.gz").write_bytes(b"")  # there: nothing read here
    corpus, tokenizer = tmp_path / "corpus", tmp_path / "tokenizer"
    line = _refusal(tiny_data, tmp_path, monkeypatch, capsys, f"corpus_dir={corpus}", f"tokenizer_dir={tokenizer}",
                    f"paths.data_mirror={mirror}")
    train, prepare = re.fullmatch(r".*after its tokenizer \S+, which is not there either: `python \S+train_tokenizer\.py "
                                  r"(.*)`, then `python \S+prepare_corpus\.py (.*)`", line).groups()
    assert train.split() == ["data=mirror_slice", f"paths.data_mirror={mirror}", f"out_dir={tokenizer}"]
    assert compose("tokenizer", train.split()).out_dir == str(tokenizer)  # both paste: every key is theirs
    assert compose("corpus", prepare.split()).tokenizer_dir == str(tokenizer)
    assert prepare.split() == ["data=mirror_slice", f"tokenizer_dir={tokenizer}", f"paths.data_mirror={mirror}",
                               f"out_dir={corpus}"]


def test_a_run_that_continues_another_s_checkpoint_names_it_and_the_span_of_its_speed(tiny_data, tmp_path, capsys):
    """trainer.resume=<another run's checkpoint>: the summary's steps, tokens, time and initial perplexity are the
    source run's totals, which the run's own metrics.jsonl does not hold; its summary names the run and step it
    continued (summary.json's continued_from, kept through a later resume of its own), and its speeds name the
    steps they cover (steady_steps, tokens_per_s_steps: this attempt's, not the run's)."""
    from linformer.files.locations import repo_relative

    steps = ["trainer.save_every=2", "trainer.eval_every=100", "trainer.warmup_steps=1"]
    source, continued = tmp_path / "source", tmp_path / "continued"
    pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=4"), source)
    capsys.readouterr()
    summary = pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=4",
                                        f"trainer.resume={source}/checkpoints/step-00000002"), continued)
    said = capsys.readouterr().out
    recorded = json.loads((continued / "summary.json").read_text())
    assert recorded["continued_from"] == summary["continued_from"] == [{"run": repo_relative(source), "step": 2}]
    assert f"continued {repo_relative(source)} from its step 2: the steps, tokens, time and evaluations" in said
    assert "(it holds steps 3-4)" in said
    assert [json.loads(x)["step"] for x in (continued / "metrics.jsonl").read_text().splitlines()] == [3, 4]
    assert recorded["tokens_per_s_steps"] == [3, 4] and recorded["steady_steps"] == [4, 4]
    assert "tokens/s (step 4, the later half of this attempt's, which resumed at step 2)" in said

    summary = pretrain(compose_pretrain(tiny_data, *steps, "trainer.max_steps=6", "trainer.resume=auto",
                                        "trainer.allow_config_change=[trainer.max_steps]"), continued)
    assert summary["continued_from"] == [{"run": repo_relative(source), "step": 2}]
    assert summary["tokens_per_s_steps"] == [5, 6] and summary["steady_steps"] == [6, 6]
    assert f"continued {repo_relative(source)} from its step 2" in capsys.readouterr().out
