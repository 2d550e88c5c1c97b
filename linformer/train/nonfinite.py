"""The run's non-finite steps, as the trainer (``trainer.Trainer``) counts them at each host read: the streak of them
in a row that stops the run at trainer.max_nonfinite_steps, the skipped updates the run's record keeps, the
checkpoint a running streak must not rotate out, and the errors that end a diverged run with where to go on from.

The counts live in the trainer's state (saved with every checkpoint, so a resume goes on counting) under three keys:
``nonfinite`` (the non-finite steps in a row up to the last one read), ``skipped_steps`` (all of the run's, whose
updates were skipped) and ``first_skipped_step``. The last two are None where unknown: a run resumed from a
checkpoint saved before they were counted leaves the count to the run's logged non-finite losses.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import TrainingDiverged
from ..files.runs import checkpoint_dir, complete_checkpoints, step_of

log = logging.getLogger(__name__)

STREAK, SKIPPED, FIRST = "nonfinite", "skipped_steps", "first_skipped_step"


def fresh() -> dict[str, Any]:
    """A new run's counts: nothing skipped."""
    return {STREAK: 0, SKIPPED: 0, FIRST: None}


def resumed(state: MutableMapping[str, Any]) -> None:
    """A checkpoint's state saved before skipped updates were counted: how many its steps skipped is unknown, not 0."""
    state.setdefault(SKIPPED, None)
    state.setdefault(FIRST, None)


def count(state: MutableMapping[str, Any], step: int, finite: bool, limit: int) -> bool:
    """Count step `step` (its number once done), read finite or not, and warn of a skipped update; whether the
    streak of non-finite steps in a row has now reached `limit` (trainer.max_nonfinite_steps): the run stops."""
    state[STREAK] = 0 if finite else state[STREAK] + 1
    if not finite and state[SKIPPED] is not None:
        state[SKIPPED] += 1
        if state[FIRST] is None:
            state[FIRST] = step
    if state[STREAK]:
        log.warning("step %d: non-finite loss or gradient (%d in a row); update skipped", step, state[STREAK])
    return state[STREAK] >= limit


def streak_start(state: Mapping[str, Any], counted_to: int) -> int | None:
    """The first step of the streak still running when the steps up to `counted_to` were counted (None: none runs):
    a checkpoint saved now keeps the newest one before it (``checkpoint.save_checkpoint``'s keep_before), since the
    streak's own checkpoints hold the weights it left."""
    n = state[STREAK]
    return counted_to - n + 1 if n else None


def record(state: Mapping[str, Any]) -> dict[str, Any]:
    """The run's record of its skipped updates (summary.json, results.json): how many, and the first's step (both
    null where unknown: readers count the run's logged non-finite losses instead)."""
    return {SKIPPED: state[SKIPPED], FIRST: state[FIRST]}


def restart_advice(run_dir: Path, first_bad: int | None) -> str:
    """What to do after non-finite steps from `first_bad` on (None: no step was): the checkpoints from there on
    hold the weights they left (updates skipped, but the steps before them may have blown the weights up), so a
    lower lr goes on from the last checkpoint before them, or from the start."""
    before = [c for c in complete_checkpoints(run_dir) if first_bad is not None and step_of(c) < first_bad]
    how = (f"continue from the last checkpoint before them ({before[-1]}) with trainer.resume=<that path> and "
           "trainer.allow_config_change=[trainer.lr], or start afresh under another run_name" if before else
           "start afresh under another run_name" + (" (no checkpoint precedes them)" if first_bad else ""))
    return f"Lower trainer.lr, raise the warmup, or use trainer.mixed_precision=bf16, and {how}."


def diverged(state: Mapping[str, Any], step: int, limit: int, run_dir: Path) -> TrainingDiverged:
    """The error of a run whose streak reached `limit` at `step`, once it is checkpointed at the run's current step
    (``state["step"]``: at or after `step`, since a host read comes after the steps it reads)."""
    n, now = state[STREAK], state["step"]
    seen = f" (read at step {now})" if now != step else ""
    return TrainingDiverged(
        f"{n} consecutive non-finite losses at step {step}{seen} (trainer.max_nonfinite_steps={limit}); checkpoint "
        f"of the current weights saved in {checkpoint_dir(run_dir)}. {restart_advice(run_dir, step - n + 1)}")


def outputs_error(state: Mapping[str, Any], what: str, run_dir: Path) -> TrainingDiverged:
    """The error that ends a run whose model gives non-finite outputs at its end (`what`: where they were seen): its
    updates (or some of them) were skipped or blew the weights up, and a run must not end complete with a model
    whose scores are NaN, or class 0 for every example. The final checkpoint (saved at the last step) holds its
    weights; the streak it ended in, or the run's first skipped step, says where to go on from."""
    n, step = state[STREAK], state["step"]
    skipped, first = state[SKIPPED], state[FIRST]
    if n:
        when = f"; it ended {n} non-finite step{'s' * (n != 1)} in a row (from step {step - n + 1})"
    else:
        when = f", the first at step {first}" if skipped else ""
    return TrainingDiverged(
        f"{what}: the run keeps no model and reports no score. "
        f"{'an unknown number' if skipped is None else skipped} of its {step} updates were skipped for a non-finite "
        f"loss or gradient{when}; checkpoint of the last weights in {checkpoint_dir(run_dir)}. "
        f"{restart_advice(run_dir, step - n + 1 if n else first)}")


def check_final_evaluation(evals: Sequence[Mapping[str, Any]], step: int, metric: str,
                           selected_step: Callable[[], int], fail: Callable[[str], BaseException]) -> str | None:
    """A final evaluation (of `evals`, at the run's last `step`) whose main `metric` is non-finite: ``fail``'s
    error raised where the run reports its last model (`selected_step()`, asked only then, is `step`); where it
    reports an earlier one (a validation split's choice, scored finite), the line its summary adds to say the
    training diverged after it. None otherwise."""
    value = evals[-1].get(metric) if evals and evals[-1]["step"] == step else None
    if value is None or math.isfinite(value):
        return None
    chosen = selected_step()
    if chosen == step:
        raise fail(f"the final evaluation (step {step}) scored {metric} {value}")
    return (f"the last evaluation (step {step}) scored {metric} {value}: the training diverged after the chosen "
            f"step {chosen}, whose model the run keeps and reports")
