"""The over-tasks average's interval is the 95% interval the tables print for every other comparison."""

import numpy as np

from linformer.report.paired import seed_matched, tasks_average


def test_the_average_over_one_task_is_that_tasks_seed_matched_comparison():
    """Over one task the average is that task's seed-matched comparison: the same mean, the same 95% interval and the
    same p-value (one design, ``combined``; a 90% interval would be about 18% narrower)."""
    rng = np.random.default_rng(3)
    a = {s: rng.random(400) < 0.8 for s in (0, 1, 2)}
    b = {s: rng.random(400) < 0.75 for s in (0, 1, 2)}
    one = seed_matched(a, b)
    average = tasks_average({"sst2": {"a": a, "b": b}})
    for key in ("diff", "lo", "hi", "p"):
        assert np.isclose(average[key], one[key], rtol=1e-12, atol=0), key
    assert average["seeds"] == one["seeds"] == [0, 1, 2]
    assert one["lo"] < one["diff"] < one["hi"] and 0 < one["p"] < 1
