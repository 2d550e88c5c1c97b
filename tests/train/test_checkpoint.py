"""Which checkpoint resume and export choose when files are damaged: in-process, on checkpoint directories written
with the trainer's own checksums (the CLI's side is in test_run_record.py and test_export.py)."""

import logging
import os
from pathlib import Path

import pytest

from linformer.errors import CheckpointError
from linformer.train.checkpoint import STATE_FILE, _write_checksums, newest_intact, resolve_resume


def _rng_state(path):
    """An RNG state as Accelerate's save_state writes it (the CPU's generators)."""
    import random

    import numpy as np
    import torch

    torch.save({"random_state": random.getstate(), "numpy_random_seed": np.random.get_state(),
                "torch_manual_seed": torch.get_rng_state()}, path)


def _checkpoints(run_dir, steps=(4, 8)):
    for step in steps:
        path = run_dir / "checkpoints" / f"step-{step:08d}"
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(bytes(range(256)) * 4)
        _rng_state(path / "random_states_0.pkl")
        (path / STATE_FILE).write_text(f'{{"step": {step}}}')
        _write_checksums(path)
    return [run_dir / "checkpoints" / f"step-{s:08d}" for s in steps]


def _damage(path, name):
    (path / name).write_bytes(b"torn")


def test_newest_intact_passes_over_damage_only_where_it_matters(tmp_path):
    old, new = _checkpoints(tmp_path)
    _damage(new, "random_states_0.pkl")
    path, passed_over = newest_intact([old, new])
    assert path == old and list(passed_over) == [new] and passed_over[new][0].startswith("random_states_0.pkl")
    assert newest_intact([old, new], matters=lambda name: name == "model.safetensors") == (new, {})
    _damage(old, "model.safetensors")
    assert newest_intact([old, new])[0] is None


def test_resume_falls_back_then_needs_leave_to_drop_the_rng_state(tmp_path, caplog):
    old, new = _checkpoints(tmp_path)
    _damage(new, "random_states_0.pkl")
    with caplog.at_level(logging.WARNING):
        assert resolve_resume("auto", tmp_path) == (old, True)
    assert f"checkpoint {new} is damaged (random_states_0.pkl" in caplog.text
    _damage(old, "random_states_0.pkl")  # every RNG state damaged: the newest is usable only without it
    with pytest.raises(CheckpointError, match=rf"checkpoint {new} has a damaged RNG state"):
        resolve_resume("auto", tmp_path)
    assert resolve_resume("auto", tmp_path, allow_nonbitwise=True) == (new, False)
    _damage(new, "model.safetensors")  # now only the older one is rng-only damaged
    assert resolve_resume("auto", tmp_path, allow_nonbitwise=True) == (old, False)
    _damage(old, "model.safetensors")
    with pytest.raises(CheckpointError, match=r"no intact checkpoint .*step-00000008: .*model.safetensors.*; "
                                              r"step-00000004: .*model.safetensors"):
        resolve_resume("auto", tmp_path, allow_nonbitwise=True)


class _Payload:
    """A pickle that runs code when unpickled (torch's weights_only loader refuses it)."""

    def __reduce__(self):
        return (print, ("payload ran",))


@pytest.mark.parametrize("rng", ["truncated", "code", "missing rank 1"])
def test_an_rng_state_that_cannot_be_loaded_is_damaged_checksums_or_not(tmp_path, rng, capsys):
    """Accelerate's load_state catches any failure to load an RNG state and goes on without it: a checkpoint without
    checksums whose RNG state was truncated (or a checksummed one whose state is not an RNG state) resumed silently,
    not bitwise."""
    import pickle

    (path,) = _checkpoints(tmp_path, steps=(4,))
    (path / "checksums.json").unlink()  # a checkpoint without checksums: only its states vouch for it
    if rng == "truncated":
        name = "random_states_0.pkl"
        (path / name).write_bytes((path / name).read_bytes()[:40])
    elif rng == "code":
        name = "random_states_0.pkl"
        (path / name).write_bytes(pickle.dumps(_Payload()))
        _write_checksums(path)  # its checksum matches: the state itself is what is wrong
    else:  # two processes saved it, and the second one's state is gone
        name = "random_states_1.pkl"
        (path / STATE_FILE).write_text('{"step": 4, "processes": 2}')
    with pytest.raises(CheckpointError, match=rf"checkpoint {path} has a damaged RNG state \({name}: "):
        resolve_resume("auto", tmp_path)
    assert resolve_resume("auto", tmp_path, allow_nonbitwise=True) == (path, False)
    assert "payload ran" not in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ save and load
@pytest.fixture
def accelerated():
    """A real Accelerator (CPU) with a small model and optimizer registered: what the trainer checkpoints."""
    import torch
    from accelerate import Accelerator

    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer = accelerator.prepare(model, optimizer)
    yield accelerator, model, optimizer
    from linformer.train.common import reset_accelerate_state

    reset_accelerate_state()


def _step(model, optimizer):
    import torch

    loss = model(torch.randn(3, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


@pytest.mark.parametrize("keep_last", [1, 2, 3])
def test_save_keeps_exactly_the_newest_keep_last(accelerated, tmp_path, keep_last):
    from linformer.files.runs import complete_checkpoints
    from linformer.train.checkpoint import save_checkpoint

    accelerator = accelerated[0]
    for step in range(1, 6):
        save_checkpoint(accelerator, tmp_path, step, {"epoch": 0}, keep_last)
    assert [p.name for p in complete_checkpoints(tmp_path)] == [f"step-{s:08d}" for s in range(6 - keep_last, 6)]
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_rotation_unlinks_a_linked_step_never_what_it_points_to_and_says_what_it_cannot_remove(
        accelerated, tmp_path, monkeypatch, caplog):
    """A step-N that is a symlink (to another disk, or another run's checkpoint) rotated out by keep_last: the link
    goes and its target stays whole, said in the log; rmtree(ignore_errors) failed on the link silently, so it stayed
    beside keep_last for ever. A checkpoint rmtree cannot remove is a warning naming it, not passed over."""
    import shutil

    from linformer.files.runs import complete_checkpoints
    from linformer.train.checkpoint import save_checkpoint

    run, other = tmp_path / "run", tmp_path / "other"
    target = save_checkpoint(accelerated[0], other, 1, {"epoch": 0}, keep_last=2)
    linked = run / "checkpoints" / target.name
    linked.parent.mkdir(parents=True)
    linked.symlink_to(target)
    before = sorted(p.name for p in target.iterdir())
    with caplog.at_level(logging.INFO, logger="linformer.train.checkpoint"):
        for step in (2, 3):
            save_checkpoint(accelerated[0], run, step, {"epoch": 0}, keep_last=2)
    assert [p.name for p in complete_checkpoints(run)] == ["step-00000002", "step-00000003"]
    assert not os.path.lexists(linked) and sorted(p.name for p in target.iterdir()) == before
    assert any("symlink" in r.getMessage() and str(target) in r.getMessage() for r in caplog.records)

    stuck, rmtree = run / "checkpoints" / "step-00000002", shutil.rmtree

    def refused(path, *args, **kwargs):  # as root, no permission stops a test's rmtree
        if Path(path) == stuck:
            raise PermissionError(13, "Permission denied", str(stuck / "model.safetensors"))
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", refused)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="linformer.train.checkpoint"):
        save_checkpoint(accelerated[0], run, 4, {"epoch": 0}, keep_last=2)
    assert stuck.is_dir()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and str(stuck) in r.getMessage()]


def test_a_step_linked_to_another_file_system_is_rebuilt_there_and_the_link_kept(accelerated, tmp_path,
                                                                                 monkeypatch):
    """checkpoints/step-N moved to another disk and linked back: saving step N again (the final checkpoint after a
    periodic one) builds it on that disk, where the rename lands; a temporary in checkpoints/ failed with EXDEV."""
    import errno
    import json

    from linformer.files.runs import complete_checkpoints
    from linformer.train.checkpoint import save_checkpoint

    run, disk = tmp_path / "run", tmp_path / "disk"
    disk.mkdir()
    step = save_checkpoint(accelerated[0], run, 2, {"epoch": 0}, keep_last=2)
    step.rename(disk / step.name)
    step.symlink_to(disk / step.name)
    rename = os.replace

    def one_file_system_each(src, dst):  # disk/ as another file system: a rename between them fails, as on Linux
        if (disk in Path(src).parents) != (disk in Path(dst).parents):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src), None, str(dst))
        rename(src, dst)

    monkeypatch.setattr(os, "replace", one_file_system_each)
    save_checkpoint(accelerated[0], run, 2, {"epoch": 7}, keep_last=2)
    assert step.is_symlink() and complete_checkpoints(run) == [step]
    assert json.loads((disk / step.name / STATE_FILE).read_text())["epoch"] == 7
    assert [p.name for p in disk.iterdir()] == [step.name] and not list(step.parent.glob(".*"))


def test_load_restores_weights_optimizer_and_every_rng_state(accelerated, tmp_path):
    """Bitwise resume: after a load, the next random draws (dropout masks, shuffles) are those the run would have
    drawn, and the weights and optimizer moments are the saved ones."""
    import random

    import numpy as np
    import torch

    from linformer.train.checkpoint import load_checkpoint, save_checkpoint

    accelerator, model, optimizer = accelerated
    _step(model, optimizer)
    path = save_checkpoint(accelerator, tmp_path, 1, {"epoch": 3}, keep_last=2)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    moments = optimizer.state_dict()["state"][0]["exp_avg"].clone()
    expected = (torch.rand(5), np.random.rand(3), random.random())
    _step(model, optimizer)  # the run goes on, and its random state moves
    torch.rand(100), np.random.rand(100), random.random()
    state = load_checkpoint(accelerator, path)
    assert state == {"epoch": 3, "step": 1}
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())
    assert torch.equal(optimizer.state_dict()["state"][0]["exp_avg"], moments)
    got = (torch.rand(5), np.random.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2] == expected[2]


def _aged(path):
    """`path`'s listing, each entry's mtime and ctime, after setting every mtime in the past (a write now shows,
    whatever the clock's granularity): what loading may not change in a checkpoint folder (another's, or a read-only
    copy, which permissions do not protect from root). A rename sets the folder's mtime and the file's ctime."""
    import os

    for p in (path, *path.iterdir()):
        os.utime(p, ns=(10**9, 10**9))
    return _listing(path)


def _listing(path):
    return sorted((p.name, p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in (path, *path.iterdir()))


@pytest.mark.parametrize("rng_file", ["intact", "damaged", "half an RNG state"])
def test_load_without_the_rng_state_leaves_it_and_writes_nothing_in_the_checkpoint(accelerated, tmp_path, rng_file):
    """Resuming with trainer.allow_nonbitwise_resume=true renamed the RNG states inside the checkpoint being read (and
    back), so a read-only copy failed, calling the input an output path. The load leaves the checkpoint as it is and
    the process's generators as they were, whatever of the file Accelerate could set (Python's generator of a state
    whose NumPy part is damaged)."""
    import random

    import numpy as np
    import torch

    from linformer.train.checkpoint import load_checkpoint, save_checkpoint

    accelerator = accelerated[0]
    path = save_checkpoint(accelerator, tmp_path, 1, {}, keep_last=1)
    if rng_file == "damaged":
        _damage(path, "random_states_0.pkl")
    elif rng_file == "half an RNG state":
        torch.save({"random_state": random.Random(7).getstate(), "numpy_random_seed": "torn", "step": 99},
                   path / "random_states_0.pkl")
    before = _aged(path)
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    expected = (torch.rand(5), np.random.rand(3), random.random())
    torch.manual_seed(123), np.random.seed(123), random.seed(123)
    load_checkpoint(accelerator, path, rng_ok=False)
    got = (torch.rand(5), np.random.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2] == expected[2]
    assert accelerator.step == 0
    assert _listing(path) == before


def _accelerate_reduction(reduction):
    """How Accelerate's ``reduce`` combines the ranks' tensors (accelerate.utils.operations.reduce): the maximum for
    "max", else their sum, whatever the name ("min", "none" and "mean" included; "mean" then divides)."""
    import torch

    return torch.maximum if reduction == "max" else torch.add


class _Sent:
    """An accelerator of 2 processes that keeps the tensor its rank gives a reduction (what the other rank sends)."""

    import torch

    num_processes, device = 2, torch.device("cpu")

    def reduce(self, tensor, reduction):
        self.sent = tensor.clone()
        return tensor


class _RankZeroOfTwo:
    """The accelerator as rank 0 of 2 sees it: the real one writes the files, `reduce` combines this rank's tensor
    with the one the other rank sends for its outcome (1: its part succeeded), as Accelerate does, and notes whether
    the temporary checkpoint was still there to write into."""

    num_processes, is_main_process = 2, True

    def __init__(self, accelerator, root, other_ok=(1, 1)):
        self.accelerator, self.root, self.other_ok, self.tmp_there = accelerator, root, list(other_ok), []

    def __getattr__(self, name):
        return getattr(self.accelerator, name)

    def reduce(self, tensor, reduction):
        from linformer.train.checkpoint import every_rank_succeeded

        self.tmp_there.append(bool(list((self.root / "checkpoints").glob(".tmp-step-*"))))
        other = _Sent()
        every_rank_succeeded(other, bool(self.other_ok.pop(0)))
        return _accelerate_reduction(reduction)(tensor, other.sent)


@pytest.mark.parametrize("outcomes", [(True, True), (True, False), (False, True), (False, False)])
def test_every_rank_succeeded_only_where_each_rank_did(outcomes):
    """A rank's failure among 2 read as success: the agreement asked Accelerate for a "min", which it sums."""
    from linformer.train.checkpoint import every_rank_succeeded

    class _Rank(_Sent):
        def reduce(self, tensor, reduction):
            other = _Sent()
            every_rank_succeeded(other, outcomes[1])
            return _accelerate_reduction(reduction)(tensor, other.sent)

    assert every_rank_succeeded(_Rank(), outcomes[0]) is all(outcomes)


def test_a_rank_that_fails_a_checkpoint_removes_nothing_before_the_others_are_done(accelerated, tmp_path,
                                                                                   monkeypatch):
    """Rank 0's write fails (a full disk): the other ranks may still be writing their RNG states into the temporary
    checkpoint, so rank 0 agrees with them first, then removes it and raises its own error."""
    import errno

    from linformer.errors import DiskFullError
    from linformer.train import checkpoint

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(checkpoint, "_write_checksums", full)
    ranks = _RankZeroOfTwo(accelerated[0], tmp_path)
    with pytest.raises(DiskFullError):
        checkpoint.save_checkpoint(ranks, tmp_path, 4, {}, keep_last=2)
    assert ranks.tmp_there == [True, True]  # still there when the ranks agreed on each part
    assert not list((tmp_path / "checkpoints").iterdir())


def test_another_rank_s_failure_stops_this_one_with_peer_failed_and_no_half_checkpoint(accelerated, tmp_path):
    from linformer.errors import PeerFailed
    from linformer.files.runs import complete_checkpoints
    from linformer.train.checkpoint import save_checkpoint

    save_checkpoint(accelerated[0], tmp_path, 2, {}, keep_last=2)
    with pytest.raises(PeerFailed, match="another process failed while writing the checkpoint of step 4"):
        save_checkpoint(_RankZeroOfTwo(accelerated[0], tmp_path, other_ok=[0]), tmp_path, 4, {}, keep_last=2)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-00000002"]
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["step-00000002"]


@pytest.mark.parametrize("name", ["optimizer.bin", "random_states_0.pkl"])
def test_a_checkpoint_file_holding_code_is_refused_in_one_line_that_never_advises_loading_it(accelerated, tmp_path,
                                                                                              name, capsys):
    """Torch's weights-only loader refuses a pickle that builds objects; its message, which the refusal passed on,
    advises loading the file with weights_only=False, which would run the code. The refusal names the file."""
    import torch

    from linformer.train.checkpoint import damaged_files, load_checkpoint, save_checkpoint

    path = save_checkpoint(accelerated[0], tmp_path, 1, {}, keep_last=1)
    torch.save({"state": _Payload()}, path / name)
    _write_checksums(path)  # its checksum matches: the file itself is what is wrong
    why = "holds more than weights (pickled objects, which could run code as they load): refused, nothing in it ran"
    if name.startswith("random_states"):
        (problem,) = damaged_files(path)
        said = problem
        assert problem.startswith(f"{name}: {why}")
    else:
        with pytest.raises(CheckpointError) as err:
            load_checkpoint(accelerated[0], path)
        said = str(err.value)
        assert said.startswith(f"checkpoint {path}: {path / name} {why}")
    assert "weights_only" not in said and "\n" not in said
    assert "payload ran" not in capsys.readouterr().out


def test_a_refused_checkpoint_file_is_the_one_at_fault_not_the_rng_state_before_it(accelerated, tmp_path, capsys):
    """The refusal named the first .bin/.pt/.pkl that a plain weights-only load refuses: a genuine
    random_states_0.pkl (NumPy's state, allowed only by Accelerate's list) always is, so a scheduler.bin holding code,
    sorted after it, was blamed on the good RNG file. Each file is checked as Accelerate loads it."""
    import torch

    from linformer.train.checkpoint import load_checkpoint, save_checkpoint

    accelerator, _, optimizer = accelerated
    accelerator.prepare(torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0))
    path = save_checkpoint(accelerator, tmp_path, 1, {}, keep_last=1)
    torch.save({"state": _Payload()}, path / "scheduler.bin")
    _write_checksums(path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(accelerator, path)
    assert str(err.value).startswith(f"checkpoint {path}: {path / 'scheduler.bin'} holds more than weights")
    assert "payload ran" not in capsys.readouterr().out
