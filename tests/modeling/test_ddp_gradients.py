"""A forward that leaves E and F out (exact_short_inputs, a batch of at most k tokens) under torch.distributed: every
parameter still gets a gradient, so DistributedDataParallel without find_unused_parameters takes the next step, and
one process trains as it did. A gloo group of one process, in this process (tests/train/test_ddp.py runs two)."""

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from linformer import LinformerForSequenceClassification
from linformer.modeling.convert import is_projection_weight

from .conftest import tiny_config


@pytest.fixture
def gloo_group(tmp_path):
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _model(**overrides):
    torch.manual_seed(0)
    return LinformerForSequenceClassification(tiny_config(exact_short_inputs=True, num_labels=2, **overrides))


def _gradients(model, T):
    """The loss of a (2, T) batch and every parameter's gradient (None where it got none)."""
    g = torch.Generator().manual_seed(T)
    out = model(input_ids=torch.randint(4, 60, (2, T), generator=g), labels=torch.tensor([0, 1]))
    out.loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return out.loss.detach(), grads


SETTINGS = [dict(sharing=s) for s in ("none", "headwise", "kv", "layerwise")] + [
    dict(sharing="layerwise", local_window=4, global_positions=[0], length_policy="resample", overlap_columns="mask")]


@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_a_short_batch_gives_e_and_f_zero_gradients_under_torch_distributed_and_none_in_one_process(
        settings, tmp_path):
    model = _model(**settings)
    alone_loss, alone = _gradients(model, T=4)  # k = 4: the whole batch attends exactly
    assert [name for name, g in alone.items() if g is None] == [name for name in alone if is_projection_weight(name)]
    assert any(g is None for g in alone.values())
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        loss, grads = _gradients(model, T=4)
        with torch.no_grad():  # no gradient asked for: the forward is as in one process
            model(input_ids=torch.ones(1, 4, dtype=torch.long))
    finally:
        dist.destroy_process_group()
    assert torch.equal(loss, alone_loss)
    for name, g in grads.items():
        if alone[name] is None:
            assert torch.equal(g, torch.zeros_like(g)), name
        else:
            assert torch.equal(g, alone[name]), name


def test_ddp_without_find_unused_parameters_trains_on_short_batches(gloo_group):
    """DDP's default failed on the step after a short batch ('Expected to have finished reduction in the prior
    iteration'); with gradient checkpointing (transformers' Trainer passes find_unused_parameters=False) too."""
    for checkpointing in (None, {"use_reentrant": False}, {"use_reentrant": True}):
        model = _model(sharing="none")
        if checkpointing is not None:
            getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)(checkpointing)
        model.train()
        ddp = DistributedDataParallel(model)
        for T in (4, 4, 12, 4):
            _gradients(ddp, T)


def test_a_ddp_that_finds_unused_parameters_leaves_their_gradient_none(gloo_group):
    """Then DDP keeps a gradient None where no process used the parameter, as one process does: nothing is added."""
    model = _model(sharing="kv")
    _, grads = _gradients(DistributedDataParallel(model, find_unused_parameters=True), T=4)
    assert {name for name, g in grads.items() if g is None} == {n for n in grads if is_projection_weight(n)}
