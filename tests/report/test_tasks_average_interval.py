"""The over-tasks average's interval is the 95% interval the tables print for every other comparison."""

import numpy as np

from linformer.report.paired import seed_matched, tasks_average


def test_the_average_over_one_task_has_that_tasks_seed_matched_95_percent_interval():
    """Over one task the average is that task's seed-matched comparison, so its interval is the same 95% one, up to
    the bootstrap's noise (about 3% of the width at 10,000 resamples; a 90% interval is about 18% narrower)."""
    rng = np.random.default_rng(3)
    a = {s: rng.random(400) < 0.8 for s in (0, 1, 2)}
    b = {s: rng.random(400) < 0.75 for s in (0, 1, 2)}
    one = seed_matched(a, b, reps=10_000, seed=1)
    average = tasks_average({"sst2": {"a": a, "b": b}}, reps=10_000, seed=0)
    width = one["hi"] - one["lo"]
    assert average["diff"] == one["diff"]
    assert abs(average["lo"] - one["lo"]) < 0.08 * width and abs(average["hi"] - one["hi"]) < 0.08 * width
