"""The non-finite step accounting (linformer/train/nonfinite.py) in-process: the streak and its limit, the skipped
updates' record, the checkpoint a running streak keeps, and the errors' words."""

import math

import pytest

from linformer.errors import TrainingDiverged
from linformer.train import nonfinite


def _read(state, flags, limit, first_step=1):
    """Count steps first_step.. read finite (True) or not; the step at which the limit was reached (None: never)."""
    for step, finite in enumerate(flags, start=first_step):
        if nonfinite.count(state, step, finite, limit):
            return step
    return None


def test_the_run_stops_when_the_streak_reaches_the_limit_not_before():
    state = nonfinite.fresh()
    # two in a row, a finite step (the streak starts over), then three in a row: the limit of 3 at step 7
    assert _read(state, [True, False, False, True, False, False, False], limit=3) == 7
    assert state["nonfinite"] == 3
    assert nonfinite.record(state) == {"skipped_steps": 5, "first_skipped_step": 2}


def test_a_limit_of_one_stops_at_the_first_non_finite_step():
    state = nonfinite.fresh()
    assert _read(state, [True, True, False], limit=1) == 3


def test_finite_steps_count_nothing():
    state = nonfinite.fresh()
    assert _read(state, [True] * 5, limit=1) is None
    assert (state["nonfinite"], nonfinite.record(state)) == (0, {"skipped_steps": 0, "first_skipped_step": None})


def test_a_resume_from_a_checkpoint_that_counted_no_skips_keeps_them_unknown():
    state = {"step": 4, "nonfinite": 1}  # a checkpoint saved before skipped updates were counted
    nonfinite.resumed(state)
    assert _read(state, [False, True], limit=5, first_step=5) is None
    assert nonfinite.record(state) == {"skipped_steps": None, "first_skipped_step": None}
    # the streak still counts (it stops runs), and a counted checkpoint's counts are left as they are
    counted = {**nonfinite.fresh(), "skipped_steps": 2, "first_skipped_step": 3}
    nonfinite.resumed(counted)
    assert nonfinite.record(counted) == {"skipped_steps": 2, "first_skipped_step": 3}


def test_the_streak_starts_where_its_first_step_was():
    state = nonfinite.fresh()
    assert nonfinite.streak_start(state, 4) is None
    _read(state, [True, True, False, False, False], limit=10)
    assert nonfinite.streak_start(state, 5) == 3


def _checkpoints(run_dir, *steps):
    for step in steps:
        path = run_dir / "checkpoints" / f"step-{step:08d}"
        path.mkdir(parents=True)
        (path / "trainer_state.json").write_text("{}")


def test_restart_advice_names_the_last_checkpoint_strictly_before_the_first_bad_step(tmp_path):
    _checkpoints(tmp_path, 2, 4, 6)
    assert f"({tmp_path / 'checkpoints' / 'step-00000004'})" in nonfinite.restart_advice(tmp_path, 5)
    # the checkpoint at the first bad step holds the weights that step left: not named
    assert f"({tmp_path / 'checkpoints' / 'step-00000002'})" in nonfinite.restart_advice(tmp_path, 4)
    assert nonfinite.restart_advice(tmp_path, 2).endswith(
        "start afresh under another run_name (no checkpoint precedes them).")
    assert nonfinite.restart_advice(tmp_path, None).endswith("and start afresh under another run_name.")


def test_a_running_streak_keeps_the_checkpoint_before_it_through_rotation(tmp_path):
    """A checkpoint every 2 steps, only the newest kept, non-finite from step 5: the saves at 6, 8 and 10 keep
    step 4 (saved before the streak) beside the newest, and the error names it; a finite step ends the keeping."""
    from accelerate import Accelerator

    from linformer.files.runs import complete_checkpoints
    from linformer.train.checkpoint import save_checkpoint
    from linformer.train.common import reset_accelerate_state

    accelerator = Accelerator(cpu=True)
    try:
        state = nonfinite.fresh()
        for step in range(1, 11):
            nonfinite.count(state, step, step < 5, limit=100)
            if step % 2 == 0:
                save_checkpoint(accelerator, tmp_path, step, state, keep_last=1,
                                keep_before=nonfinite.streak_start(state, step))
        assert [p.name for p in complete_checkpoints(tmp_path)] == ["step-00000004", "step-00000010"]
        state["step"] = 10
        error = nonfinite.diverged(state, 10, 6, tmp_path)
        assert str(error).startswith("6 consecutive non-finite losses at step 10 (trainer.max_nonfinite_steps=6)")
        assert f"continue from the last checkpoint before them ({tmp_path / 'checkpoints' / 'step-00000004'})" \
            in str(error)
        nonfinite.count(state, 11, True, limit=100)
        save_checkpoint(accelerator, tmp_path, 12, state, keep_last=1, keep_before=nonfinite.streak_start(state, 12))
        assert [p.name for p in complete_checkpoints(tmp_path)] == ["step-00000012"]
    finally:
        reset_accelerate_state()


def test_the_divergence_error_says_when_the_streak_was_read_late(tmp_path):
    state = {**nonfinite.fresh(), "nonfinite": 2, "step": 6}
    message = str(nonfinite.diverged(state, 4, 2, tmp_path))
    assert message.startswith("2 consecutive non-finite losses at step 4 (read at step 6) "
                              "(trainer.max_nonfinite_steps=2); checkpoint of the current weights saved in ")


@pytest.mark.parametrize(("counts", "says"), [
    ({"nonfinite": 1, "skipped_steps": 1, "first_skipped_step": 8},
     ("1 of its 8 updates were skipped for a non-finite loss or gradient; it ended 1 non-finite step in a row "
      "(from step 8)")),
    ({"nonfinite": 0, "skipped_steps": 2, "first_skipped_step": 3},
     "2 of its 8 updates were skipped for a non-finite loss or gradient, the first at step 3;"),
    ({"nonfinite": 0, "skipped_steps": None, "first_skipped_step": None},
     "an unknown number of its 8 updates were skipped for a non-finite loss or gradient;"),
])
def test_the_outputs_error_says_what_was_skipped(tmp_path, counts, says):
    error = nonfinite.outputs_error({**counts, "step": 8}, "the final evaluation scored nan", tmp_path)
    assert isinstance(error, TrainingDiverged)
    assert str(error).startswith("the final evaluation scored nan: the run keeps no model and reports no score. ")
    assert says in str(error)


class _Failed(Exception):
    pass


def _check(evals, step=8, chosen=8):
    asked = []

    def selected():
        asked.append(True)
        return chosen

    return nonfinite.check_final_evaluation(evals, step, "val_loss", selected, _Failed), asked


def test_a_finite_or_missing_final_evaluation_passes_without_asking_for_the_chosen_step():
    for evals in ([], [{"step": 8, "val_loss": 1.5}], [{"step": 4, "val_loss": math.nan}], [{"step": 8}]):
        assert _check(evals) == (None, [])


def test_a_non_finite_final_evaluation_fails_the_run_that_reports_its_last_model():
    with pytest.raises(_Failed, match=r"^the final evaluation \(step 8\) scored val_loss nan$"):
        _check([{"step": 8, "val_loss": math.nan}])
    with pytest.raises(_Failed, match="scored val_loss inf"):
        _check([{"step": 8, "val_loss": math.inf}])


def test_a_non_finite_final_evaluation_after_an_earlier_chosen_step_is_reported_not_raised():
    line, asked = _check([{"step": 4, "val_loss": 1.0}, {"step": 8, "val_loss": math.nan}], chosen=4)
    assert asked and line == ("the last evaluation (step 8) scored val_loss nan: the training diverged after the "
                              "chosen step 4, whose model the run keeps and reports")
