"""Training on CUDA through Accelerate: pretraining in fp32, fp16 (with a live GradScaler) and bf16, bitwise resume of
a CUDA run (scaler state included), and finetuning a pretrained run on SST-2.

The trainer picks the device through Accelerate (trainer.cpu=false, the default): these tests check it is CUDA, that
the forward really runs in the precision asked for, and that what a checkpoint holds brings a run back exactly."""

import json
import math
import signal

import pytest
import torch
from safetensors.torch import load_file

from linformer.errors import Preempted
from linformer.modeling.flops import peak_flops
from linformer.train import stopping, trainer
from linformer.train.finetune import finetune
from linformer.train.pretrain import pretrain

from ..train.conftest import compose_finetune, compose_pretrain, nan_losses_after, write_sst2_fixture
from .conftest import DEVICE

pytestmark = pytest.mark.gpu

PRECISIONS = ["no", "fp16", "bf16"]
COMPUTE_DTYPE = {"no": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _losses(run_dir):
    return [r["loss"] for r in _rows(run_dir) if "loss" in r]


@pytest.fixture
def trainers(monkeypatch):
    """Every Trainer whose fit() runs in the test, to look at its Accelerator, model, optimizer and scaler after."""
    seen = []
    fit = trainer.Trainer.fit

    def recording_fit(self, *args, **kwargs):
        seen.append(self)
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(trainer.Trainer, "fit", recording_fit)
    return seen


@pytest.fixture
def attention_inputs(monkeypatch):
    """(dtype, device type) of every query the model passes to scaled_dot_product_attention: what the forward really
    computes in, autocast included (the parameters stay fp32 master weights)."""
    seen = set()
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def recording(query, key, value, *args, **kwargs):
        seen.add((query.dtype, query.device.type))
        return sdpa(query, key, value, *args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    return seen


def _stop_after(monkeypatch, steps: int) -> None:
    """The next run stops after `steps` steps as on SIGTERM (checkpoint, then Preempted), without sending a signal:
    StopSignal.agreed is asked once per step."""
    calls = {"n": 0}

    def agreed(self, accelerator, save_due=False):
        calls["n"] += 1
        return (signal.SIGTERM if calls["n"] == steps else None), save_due

    monkeypatch.setattr(stopping.StopSignal, "agreed", agreed)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_pretraining_on_cuda_learns_in_every_precision(tiny_data, tmp_path, trainers, attention_inputs, precision):
    """The real pretrain() on the fixture corpus: Accelerate puts the model on CUDA, the forward computes in the
    precision asked for, losses are finite and fall (the CPU suite's criterion), fp16 trains with a live GradScaler
    whose state the checkpoint holds, and no/bf16 have none."""
    cfg = compose_pretrain(tiny_data, f"trainer.mixed_precision={precision}", "trainer.max_steps=40",
                           "trainer.eval_every=20", "trainer.save_every=20", "model.hidden_dropout_prob=0")
    summary = pretrain(cfg, tmp_path)
    (trainer,) = trainers
    acc, param = trainer.accelerator, next(trainer.model.parameters())
    assert acc.device.type == DEVICE and param.device.type == DEVICE and param.dtype == torch.float32
    assert acc.mixed_precision == precision
    # training and evaluation forwards both ran on the device in the precision asked for (autocast for fp16/bf16)
    assert attention_inputs == {(COMPUTE_DTYPE[precision], DEVICE)}

    losses = _losses(tmp_path)
    assert len(losses) == 40 and all(math.isfinite(x) for x in losses), losses
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5, losses
    assert summary["final_val_loss"] < summary["initial_val_loss"]
    gpu = torch.cuda.get_device_name(acc.device) if acc.device.type == "cuda" else ""
    if any(name in gpu for name in ("H100", "H200", "A100")):  # datasheet peaks in flops.py: MFU is logged
        assert peak_flops(acc.device, precision) is not None
        mfu = [r["mfu"] for r in _rows(tmp_path) if "mfu" in r]
        assert len(mfu) == 40 and all(0 < m < 1 for m in mfu)

    last = tmp_path / "checkpoints" / "step-00000040"
    if precision == "fp16":
        scaler = acc.scaler
        assert isinstance(scaler, torch.amp.GradScaler) and scaler.is_enabled()
        state = scaler.state_dict()
        # it stepped: the growth tracker counts updates without overflow, and an overflow halves the scale
        assert state["_growth_tracker"] > 0 or state["scale"] < 2.0**16, state
        assert torch.load(last / "scaler.pt") == state  # the last checkpoint holds the live scale and tracker
    else:
        assert acc.scaler is None and not (last / "scaler.pt").exists()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_cuda_run_stopped_and_resumed_gives_the_uninterrupted_run_bitwise(tiny_data, tmp_path, monkeypatch,
                                                                             deterministic, precision):
    """16 steps uninterrupted vs stopped after 8 (checkpoint written on the stop) and resumed with trainer.resume=auto:
    the same losses, validation loss and final weights, bit for bit. Dropout is on (the tiny model's 0.1), so the
    CUDA RNG state must come back too; fp16's GradScaler state (scale and growth tracker) must come back exactly.

    CUDA kernels can reduce in a different order from one call to the next (split-key attention backward, cuBLAS
    workspaces), so the test runs under torch.use_deterministic_algorithms with CUBLAS_WORKSPACE_CONFIG=:4096:8
    (conftest): then any difference is the checkpoint's, not the GPU's."""
    steps = [f"trainer.mixed_precision={precision}", "trainer.max_steps=16", "trainer.save_every=4",
             "trainer.eval_every=8"]
    saved_scaler, loaded = {}, {}
    save, resume = trainer.Trainer.save, trainer.Trainer._resume

    def recording_save(self):
        if self.accelerator.scaler is not None:
            saved_scaler[(self.run_dir.name, self.state["step"])] = self.accelerator.scaler.state_dict()
        save(self)

    def recording_resume(self):
        resume(self)
        loaded["step"] = self.state["step"]
        if self.accelerator.scaler is not None:
            loaded["scaler"] = self.accelerator.scaler.state_dict()

    monkeypatch.setattr(trainer.Trainer, "save", recording_save)
    monkeypatch.setattr(trainer.Trainer, "_resume", recording_resume)

    full, cut = tmp_path / "full", tmp_path / "cut"
    pretrain(compose_pretrain(tiny_data, *steps), full)
    with monkeypatch.context() as m:
        _stop_after(m, 8)
        with pytest.raises(Preempted, match="at step 8"):
            pretrain(compose_pretrain(tiny_data, *steps), cut)
    assert json.loads((cut / "run.json").read_text())["status"] == "stopped"
    assert (cut / "checkpoints" / "step-00000008").is_dir() and len(_losses(cut)) == 8

    summary = pretrain(compose_pretrain(tiny_data, *steps), cut)  # trainer.resume=auto is the default
    assert summary["resumed_from_step"] == loaded["step"] == 8
    assert _losses(cut) == _losses(full) and len(_losses(full)) == 16
    assert summary["final_val_loss"] == json.loads((full / "summary.json").read_text())["final_val_loss"]
    a, b = load_file(full / "model" / "model.safetensors"), load_file(cut / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    if precision == "fp16":
        state = saved_scaler[("cut", 8)]
        assert state == saved_scaler[("full", 8)]  # the stopped run checkpointed the scaler it trained with...
        assert torch.load(cut / "checkpoints" / "step-00000008" / "scaler.pt") == state
        assert loaded["scaler"] == state  # ...and the resumed run trains on with it, not a fresh one
        assert state["_growth_tracker"] > 0 or state["scale"] < 2.0**16, state  # not a fresh scaler's state
    else:
        assert not saved_scaler and "scaler" not in loaded


def test_adamw_is_fused_on_cuda(tiny_data, tmp_path, trainers):
    """linformer.train.common.build_optimizer means to use fused AdamW on CUDA (one kernel for every parameter)."""
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=3", "trainer.eval_at_start=false"), tmp_path)
    (trainer,) = trainers
    assert next(trainer.model.parameters()).device.type == DEVICE
    assert trainer.optimizer.optimizer.defaults.get("fused") is True


@pytest.mark.parametrize("precision", ["no", "bf16"])
def test_finetuning_a_pretrained_run_on_cuda(tmp_path, pretrained_run, trainers, attention_inputs, precision):
    """SST-2 fixture (dynamic padding: the Linformer's padded path) from the tiny pretraining run: results.json is
    written and dev accuracy is well above chance (the 40 dev rows are 20/20). On CPU these settings reach 1.0."""
    sst2 = write_sst2_fixture(tmp_path / "sst2")
    cfg = compose_finetune("task=sst2", f"task.data_dir={sst2}", f"model_path={pretrained_run}",
                           f"task_cache_dir={tmp_path / 'task_cache'}", "trainer.epochs=3", "trainer.lr=3e-3",
                           f"trainer.mixed_precision={precision}")
    finetune(cfg, tmp_path / "run")
    (trainer,) = [t for t in trainers if t.task.stage == "finetune"]
    assert trainer.accelerator.device.type == DEVICE and next(trainer.model.parameters()).device.type == DEVICE
    assert attention_inputs == {(COMPUTE_DTYPE[precision], DEVICE)}

    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["task"] == "sst2" and saved["num_eval_examples"] == 40 and len(saved["history"]) == 3
    assert saved["metrics"]["accuracy"] >= 0.8, saved["history"]
    pred = json.loads((tmp_path / "run" / "eval_predictions.json").read_text())
    hits = sum(p == y for p, y in zip(pred["predictions"], pred["labels"]))
    assert hits / 40 == pytest.approx(saved["metrics"]["accuracy"])
    assert (tmp_path / "run" / "best" / "config.json").is_file()


def test_compiled_bf16_pretraining_on_cuda_matches_eager_with_one_graph_per_mode(tiny_data, tmp_path):
    """trainer.compile=true with inductor on CUDA: no graph break, one graph for training and one for evaluation
    (fixed shapes: the prediction slots, no attention mask), and the losses of eager bf16 within bf16 rounding."""
    torch._dynamo.reset()
    common = ("trainer.mixed_precision=bf16", "trainer.max_steps=12", "model.hidden_dropout_prob=0",
              "model.attention_probs_dropout_prob=0")
    pretrain(compose_pretrain(tiny_data, *common), tmp_path / "eager")
    summary = pretrain(compose_pretrain(tiny_data, *common, "trainer.compile=true"), tmp_path / "compiled")
    assert summary["compile"] == {"backend": "inductor", "mode": "default", "graphs": 2, "graph_breaks": 0}
    torch.testing.assert_close(_losses(tmp_path / "compiled"), _losses(tmp_path / "eager"), rtol=2e-2, atol=2e-2)
    assert summary["tokens_per_s_steady"] > 0


def test_cuda_graphs_through_compile_mode_train_as_the_default_mode(tiny_data, tmp_path):
    """trainer.compile_mode=reduce-overhead (CUDA graphs replayed each step, two micro-batches per step): the same
    losses as the default mode within bf16 rounding, one graph per mode, no graph break."""
    torch._dynamo.reset()
    common = ("trainer.mixed_precision=bf16", "trainer.max_steps=12", "trainer.grad_accum=2", "trainer.compile=true",
              "model.hidden_dropout_prob=0", "model.attention_probs_dropout_prob=0")
    pretrain(compose_pretrain(tiny_data, *common), tmp_path / "default")
    torch._dynamo.reset()
    summary = pretrain(compose_pretrain(tiny_data, *common, "trainer.compile_mode=reduce-overhead",
                                        "trainer.sync_every=6"), tmp_path / "graphs")
    assert summary["compile"] == {"backend": "inductor", "mode": "reduce-overhead", "graphs": 2, "graph_breaks": 0}
    torch.testing.assert_close(_losses(tmp_path / "graphs"), _losses(tmp_path / "default"), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("poisoned", [False, True])
def test_a_training_step_on_cuda_never_waits_for_the_device(tiny_data, tmp_path, monkeypatch, poisoned):
    """Between host reads (trainer.sync_every=6) a step only queues work: CUDA's sync debug mode raises at any
    synchronising call inside every step after the first (a loss or flag read on the host, a copy from pageable
    memory). With every loss NaN from the third forward, fused AdamW skips on the device and the read at step 6
    counts them."""
    step, strict = trainer.Trainer._train_step, []

    def no_sync(self, s):
        if s == 0:
            return step(self, s)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return step(self, s)
        finally:
            torch.cuda.set_sync_debug_mode("default")
            strict.append(s)

    monkeypatch.setattr(trainer.Trainer, "_train_step", no_sync)
    if poisoned:
        nan_losses_after(monkeypatch, 2)
    cfg = compose_pretrain(tiny_data, "trainer.mixed_precision=bf16", "trainer.sync_every=6", "trainer.eval_every=100",
                           "trainer.save_every=100", "trainer.max_nonfinite_steps=100", "trainer.grad_accum=2")
    pretrain(cfg, tmp_path)
    assert strict == list(range(1, 12))
    rows = [r for r in _rows(tmp_path) if "loss" in r]
    assert len(rows) == 12 and all(math.isnan(r["loss"]) for r in rows[1:]) is poisoned
