"""The one optimizer step (linformer.train.step), run by the trainer and timed by the throughput benchmark."""

import contextlib

import pytest
import torch

from linformer.train.step import AmpOps, optimizer_step


class _Recorder:
    """An optimizer that keeps the gradients it was asked to step with."""

    def __init__(self, model):
        self.model, self.steps = model, []

    def step(self):
        self.steps.append([p.grad.clone() for p in self.model.parameters()])

    def zero_grad(self, set_to_none=True):
        for p in self.model.parameters():
            p.grad = None


class _Ranks:
    """Accelerator stand-in for `world` ranks that all hold the same micro-batches: reduce sums over them; DDP's
    gradient average over identical ranks leaves each rank's gradient as it is."""

    def __init__(self, world):
        self.num_processes, self.device, self.mixed_precision = world, torch.device("cpu"), "no"

    def reduce(self, tensor, reduction="sum"):
        return tensor * self.num_processes

    def no_sync(self, model):
        return contextlib.nullcontext()

    def backward(self, loss):
        loss.backward()

    def clip_grad_norm_(self, parameters, max_norm):
        return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)


def _mean_squared(model, batch):
    return ((model(batch["x"]) - batch["y"]) ** 2).mean()


def _batches():
    torch.manual_seed(0)
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    return x, y, [{"x": x[:1], "y": y[:1]}, {"x": x[1:], "y": y[1:]}], [1, 3]


@pytest.mark.parametrize("world", [1, 2])
def test_accumulated_micro_batches_give_the_gradient_of_one_batch_of_all_their_items(world):
    """Micro-batches of 1 and 3 items: weighted by their share of the step's global item count, their gradient is
    that of the mean over all 4 items, on any number of ranks (a mean of the two batch means would weigh the first
    item 3x: normalising by the accumulation count instead of the item count is caught here)."""
    x, y, micro, counts = _batches()
    model = torch.nn.Linear(3, 1)
    opt = _Recorder(model)
    loss, grad_norm, finite = optimizer_step(_Ranks(world), model, opt, micro, counts, _mean_squared, 1e9)
    reference = torch.nn.Linear(3, 1)
    reference.load_state_dict(model.state_dict())
    whole = _mean_squared(reference, {"x": x, "y": y})
    whole.backward()
    assert finite and len(opt.steps) == 1
    assert loss.item() == pytest.approx(whole.item(), rel=1e-6)  # the mean over every rank's items
    for got, want in zip(opt.steps[0], (p.grad for p in reference.parameters())):
        torch.testing.assert_close(got, want)
    assert grad_norm.item() == pytest.approx(torch.cat([p.grad.flatten() for p in reference.parameters()]).norm()
                                             .item(), rel=1e-6)


def test_gradients_are_clipped_before_the_step():
    _, _, micro, counts = _batches()
    model = torch.nn.Linear(3, 1)
    opt = _Recorder(model)
    _, grad_norm, _ = optimizer_step(_Ranks(1), model, opt, micro, counts, _mean_squared, 1e-3)
    assert grad_norm.item() > 1e-3  # the norm before clipping is reported
    assert torch.cat([g.flatten() for g in opt.steps[0]]).norm().item() == pytest.approx(1e-3, rel=1e-3)


def test_a_non_finite_loss_skips_the_step_and_clears_the_gradients():
    _, _, micro, counts = _batches()
    model = torch.nn.Linear(3, 1)
    opt = _Recorder(model)
    _, _, finite = optimizer_step(_Ranks(1), model, opt, micro, counts,
                                  lambda m, b: _mean_squared(m, b) * float("nan"), 1.0)
    assert not finite and opt.steps == [] and all(p.grad is None for p in model.parameters())


def test_a_fused_optimizer_skips_a_non_finite_step_on_the_device_without_reading_the_host(monkeypatch):
    """Fused AdamW (the trainer's on CUDA) is handed the non-finite flag and skips inside its kernel: after a NaN
    step the weights, the moments and the step count are those of the finite step before it, and no tensor was
    read on the host during the step (a read there is a GPU sync every step)."""
    _, _, micro, counts = _batches()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    optimizer_step(_Ranks(1), model, opt, micro, counts, _mean_squared, 1.0)
    before = [p.detach().clone() for p in model.parameters()]
    state = {k: v.clone() for k, v in opt.state[model.weight].items()}

    def no_host_read(*args, **kwargs):
        raise AssertionError("a tensor was read on the host inside the step")

    with monkeypatch.context() as m:
        for name in ("__bool__", "item", "tolist"):
            m.setattr(torch.Tensor, name, no_host_read)
        loss, _, finite = optimizer_step(_Ranks(1), model, opt, micro, counts,
                                         lambda m_, b: _mean_squared(m_, b) * float("nan"), 1.0)
    assert not finite and torch.isnan(loss)
    for got, want in zip(model.parameters(), before):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    for key, value in opt.state[model.weight].items():
        torch.testing.assert_close(value, state[key], rtol=0, atol=0)  # step count included
    assert not hasattr(opt, "found_inf")  # the flag is not left for a later step
    optimizer_step(_Ranks(1), model, opt, micro, counts, _mean_squared, 1.0)  # a finite step moves them again
    assert opt.state[model.weight]["step"].item() == 2
    assert not torch.equal(model.weight, before[0])


def test_the_benchmark_s_step_is_the_trainer_s():
    """AmpOps (the benchmark's, fp32 and bf16 on CPU) moves the weights exactly as a hand-written step of the same
    loss does: forward (under autocast for bf16), backward, clipping, AdamW."""
    for precision in ("fp32", "bf16"):
        _, _, micro, counts = _batches()
        torch.manual_seed(1)
        model = torch.nn.Linear(3, 1)
        reference = torch.nn.Linear(3, 1)
        reference.load_state_dict(model.state_dict())
        ops = AmpOps(torch.device("cpu"), precision, torch.optim.AdamW(model.parameters(), lr=0.1))

        def loss_fn(m, b, ops=ops):
            with ops.autocast():
                return _mean_squared(m, b)

        optimizer_step(ops, model, ops.optimizer, micro[1:], counts[1:], loss_fn, 0.5)
        ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.1)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = _mean_squared(reference, micro[1])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(reference.parameters()), 0.5)
        ref_opt.step()
        for got, want in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_the_schedule_warms_up_to_lr_then_decays_to_lr_end(power):
    """train.common.build_scheduler on its own: the lr of every step, which otherwise only the runs' logs show."""
    from linformer.configs import compose
    from linformer.runconfig import TrainerSettings
    from linformer.train.common import build_scheduler

    settings = TrainerSettings.read({**compose("pretrain", []).trainer, "lr": 1e-3, "lr_end": 1e-5,
                                     "lr_power": power})
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=settings.lr)
    scheduler = build_scheduler(optimizer, warmup_steps=4, total_steps=20, settings=settings)
    lrs = []
    for _ in range(20):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[:5] == pytest.approx([0.0, 2.5e-4, 5e-4, 7.5e-4, 1e-3])  # linear warmup over 4 steps to the peak
    decay = [(1e-3 - 1e-5) * (1 - (s - 4) / 16) ** power + 1e-5 for s in range(4, 20)]
    assert lrs[4:] == pytest.approx(decay)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-5)  # lr_end at the last step


@pytest.mark.parametrize("slots", [None, 64])
def test_a_micro_batch_without_an_mlm_target_adds_nothing_to_the_step(slots):
    """An MLM micro-batch that drew no mask has a loss over no target (NaN): it must add 0 to the step's loss and
    gradient, not make the whole step non-finite (NaN x 0 = NaN) and so skip the other micro-batches' update. The
    step is that of the micro-batch with the target alone (also with the compiled path's fixed prediction slots)."""
    from linformer.modeling import LinformerConfig, LinformerForMaskedLM

    torch.manual_seed(0)
    config = LinformerConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_seq_len=16, projected_dim=8, hidden_dropout_prob=0,
                             attention_probs_dropout_prob=0)
    x = torch.randint(5, 100, (2, 16))
    none = torch.full_like(x, -100)
    some = none.clone()
    some[0, 3] = x[0, 3]
    kwargs = {} if slots is None else {"prediction_slots": slots}

    def mlm(model, batch):
        return model(**batch, **kwargs).loss

    models = [LinformerForMaskedLM(config) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    steps = []
    for model, micro, counts in ((models[0], [{"input_ids": x, "labels": some}, {"input_ids": x, "labels": none}],
                                  [1, 0]),
                                 (models[1], [{"input_ids": x, "labels": some}], [1])):
        opt = _Recorder(model)
        loss, _, finite = optimizer_step(_Ranks(1), model, opt, micro, counts, mlm, 1e9)
        assert finite and len(opt.steps) == 1 and torch.isfinite(loss)
        steps.append((loss, opt.steps[0]))
    assert steps[0][0].item() == pytest.approx(steps[1][0].item(), rel=1e-6)
    for got, want in zip(steps[0][1], steps[1][1]):
        torch.testing.assert_close(got, want)
