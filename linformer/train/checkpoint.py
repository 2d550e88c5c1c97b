"""Atomic checkpoints with exact resume.

A checkpoint is ``<run>/checkpoints/step-NNNNNNNN/``: Accelerate's ``save_state`` (model, optimizer, scheduler,
grad scaler, every process's RNG states) plus ``trainer_state.json`` (step, data position, counters). It is written
into ``.tmp-step-NNNNNNNN`` and renamed when complete, so a run killed mid-write never leaves a directory that
looks complete; stale temporaries are removed on the next save.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from accelerate import Accelerator

from ..errors import CheckpointError

STATE_FILE = "trainer_state.json"
_NAME = re.compile(r"^step-(\d{8})$")


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def complete_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _NAME.match(p.name) and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))


def save_checkpoint(accelerator: Accelerator, run_dir: Path, step: int, state: dict, keep_last: int) -> Path:
    """Write a checkpoint atomically on every rank's behalf; keep the newest ``keep_last``."""
    root = checkpoint_dir(run_dir)
    final = root / f"step-{step:08d}"
    tmp = root / f".tmp-step-{step:08d}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        for stale in root.glob(".tmp-step-*"):
            shutil.rmtree(stale, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))  # every rank writes its own RNG state into tmp
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / STATE_FILE).write_text(json.dumps(dict(state, step=step), indent=2))
        if final.exists():  # re-saving the same step (e.g. the final checkpoint after a periodic one)
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in complete_checkpoints(run_dir)[: -max(int(keep_last), 1)]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def resolve_resume(resume: str | None, run_dir: Path) -> Path | None:
    """``auto``: newest complete checkpoint of this run, or None; a path: that checkpoint, or a run's newest."""
    if resume in (None, "", "null", "none", False):
        return None
    if resume == "auto":
        found = complete_checkpoints(run_dir)
        return found[-1] if found else None
    path = Path(str(resume))
    if (path / STATE_FILE).is_file():
        return path
    found = complete_checkpoints(path)
    if found:
        return found[-1]
    raise CheckpointError(
        f"trainer.resume={resume!r}: no complete checkpoint there. Expected a checkpoint directory holding "
        f"{STATE_FILE}, or a run directory with checkpoints/step-NNNNNNNN/{STATE_FILE}."
    )


def load_checkpoint(accelerator: Accelerator, path: Path) -> dict:
    """Restore model, optimizer, scheduler, scaler and RNG states; return the trainer state."""
    accelerator.load_state(str(path))
    return json.loads((Path(path) / STATE_FILE).read_text())
