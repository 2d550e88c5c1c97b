"""Which checkpoint resume and export choose when files are damaged: in-process, on checkpoint directories written
with the trainer's own checksums (the CLI's side is in test_run_record.py and test_export.py)."""

import logging

import pytest

from linformer.errors import CheckpointError
from linformer.train.checkpoint import STATE_FILE, _write_checksums, newest_intact, resolve_resume


def _checkpoints(run_dir, steps=(4, 8)):
    for step in steps:
        path = run_dir / "checkpoints" / f"step-{step:08d}"
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(bytes(range(256)) * 4)
        (path / "random_states_0.pkl").write_bytes(b"rng" * 10)
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
