"""Paired intervals: they must be tighter than separate ones for correlated models, and McNemar exact."""

import math

import numpy as np
import pytest

from linformer.report.paired import bootstrap_interval, mcnemar_p, paired_difference


def test_bootstrap_interval_covers_the_mean_with_the_binomial_width():
    rng = np.random.default_rng(0)
    x = rng.random(2000) < 0.8
    lo, hi = bootstrap_interval(x)
    se = math.sqrt(0.8 * 0.2 / 2000)
    assert lo < x.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.15)
    assert bootstrap_interval(x) == (lo, hi)  # seeded: the same table twice


def test_paired_difference_is_tighter_than_two_separate_intervals():
    """Two models that agree on 95% of examples: the paired interval of their difference is several times
    narrower than the sum of their separate half-widths, and it excludes 0 for a real 3-point difference."""
    rng = np.random.default_rng(1)
    a = rng.random(872) < 0.88
    b = a.copy()
    flip = rng.choice(872, 40, replace=False)
    b[flip[:33]] = False  # b loses 33 examples a gets right ...
    b[flip[33:]] = True   # ... and gets 7 others right
    d = paired_difference(b, a)
    assert d["diff"] == pytest.approx(100 * (b.mean() - a.mean()))
    assert d["lo"] < d["diff"] < d["hi"] < 0
    # the unpaired interval of a difference of two independent accuracies: sqrt(w_a^2 + w_b^2) wide
    unpaired = 100 * math.hypot(*(hi - lo for lo, hi in (bootstrap_interval(a), bootstrap_interval(b))))
    assert (d["hi"] - d["lo"]) < unpaired / 2


def test_mcnemar_matches_the_binomial_test():
    a = np.array([1] * 10 + [0] * 2 + [1] * 50, dtype=bool)
    b = np.array([0] * 10 + [1] * 2 + [1] * 50, dtype=bool)
    # 10 vs 2 discordant: two-sided exact p = 2 * P(X <= 2), X ~ Bin(12, 1/2)
    expected = 2 * sum(math.comb(12, i) for i in range(3)) / 2**12
    assert mcnemar_p(a, b) == pytest.approx(expected)
    assert mcnemar_p(b, a) == pytest.approx(expected)
    assert mcnemar_p(a, a) == 1.0
    big = np.zeros(30000, dtype=bool)
    big[:20000] = True  # 20000 vs 0 discordant: no overflow, p ~ 0
    assert mcnemar_p(big, ~big) < 1e-300 or mcnemar_p(big, ~big) == 0.0


def test_mcnemar_agrees_with_scipy_s_exact_binomial_test():
    """An independent reference: scipy's two-sided exact binomial test on the discordant pairs."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.random(300) < 0.85
        b = np.where(rng.random(300) < 0.1, ~a, a)
        only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
        expected = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
        assert mcnemar_p(a, b) == pytest.approx(expected, rel=1e-9)


def test_seed_variance_widens_the_interval_when_the_seeds_disagree():
    """Three seeds that each score 80% on the same 2,000 examples but on different ones, against three seeds whose
    accuracies spread by points: the second interval must be wider than the examples alone make it."""
    from linformer.report.paired import seed_example_interval

    rng = np.random.default_rng(4)
    steady = rng.random((3, 2000)) < 0.8
    spread = np.stack([rng.random(2000) < p for p in (0.74, 0.80, 0.86)])
    a, b = seed_example_interval(steady), seed_example_interval(spread)
    assert a["lo"] < a["mean"] < a["hi"] and b["lo"] < b["mean"] < b["hi"]
    assert (b["hi"] - b["lo"]) > 1.5 * (a["hi"] - a["lo"])
    # one seed per model: the interval is the example bootstrap's
    one = seed_example_interval(spread[:1])
    lo, hi = bootstrap_interval(spread[0])
    assert one["lo"] == pytest.approx(100 * lo, abs=0.3) and one["hi"] == pytest.approx(100 * hi, abs=0.3)


def test_a_comparison_pairs_each_seed_with_its_own():
    """Seed 0 of the teacher is its weakest; a one-seed variant equal to teacher seed 0 example by example must
    differ by 0 with p = 1, not by the gap to the teacher's 3-seed mean."""
    from linformer.report.paired import seed_matched

    rng = np.random.default_rng(5)
    teacher = {s: rng.random(872) < p for s, p in ((0, 0.80), (1, 0.90), (2, 0.90))}
    variant = {0: teacher[0].copy()}
    d = seed_matched(variant, teacher)
    assert d["seeds"] == [0] and d["diff"] == 0.0 and d["p"] == 1.0 and d["lo"] == d["hi"] == 0.0
    # three seed pairs: the mean of the per-seed differences, and one McNemar p pooled over the pairs
    student = {s: np.where(rng.random(872) < 0.05, ~c, c) for s, c in teacher.items()}
    d = seed_matched(student, teacher)
    expected = np.mean([student[s].mean() - teacher[s].mean() for s in range(3)])
    assert d["diff"] == pytest.approx(100 * expected) and d["lo"] < d["diff"] < d["hi"] and d["seeds"] == [0, 1, 2]
    pooled = mcnemar_p(np.concatenate([student[s] for s in range(3)]), np.concatenate([teacher[s] for s in range(3)]))
    assert d["p"] == pooled
    with pytest.raises(ValueError, match="no seed in common"):
        seed_matched({5: teacher[0]}, teacher)
    with pytest.raises(ValueError, match="same examples"):
        seed_matched({0: teacher[0][:100]}, teacher)


def test_one_decimal_rounds_halves_away_from_zero():
    from linformer.report.paired import fmt1

    assert [fmt1(x) for x in (87.65, 87.64, 0.05, 89.25, 100.0)] == ["87.7", "87.6", "0.1", "89.3", "100.0"]
    assert [fmt1(x, sign=True) for x in (-0.25, 0.25, 0.0, -2.45)] == ["-0.3", "+0.3", "+0.0", "-2.5"]
    assert fmt1(100 * 1753 / 2000) == "87.7" and f"{100 * 0.8765:.1f}" == "87.6"  # what the reports printed before


def test_an_interval_on_a_handful_of_examples_is_not_printed_as_one():
    from linformer.report.paired import MIN_INTERVAL_EXAMPLES, interval_text

    lo, hi = bootstrap_interval([1.0, 1.0])
    assert (lo, hi) == (1.0, 1.0)  # two right answers: the bootstrap has nothing to vary
    assert interval_text(100 * lo, 100 * hi, 2) == "(no interval: 2 examples)"
    assert interval_text(-3.84, 1.25, MIN_INTERVAL_EXAMPLES, sign=True) == "[-3.8, +1.3]"
    assert interval_text(85.25, 90.7, 600, brackets="()", sep="-") == "(85.3-90.7)"


def test_the_average_over_tasks_pairs_seeds_and_resamples_them_once_for_every_task():
    from linformer.report.paired import seed_matched, tasks_average

    rng = np.random.default_rng(3)
    pairs = {task: {"a": {s: rng.random(n) < 0.8 for s in (0, 1, 2)}, "b": {s: rng.random(n) < 0.75 for s in (0, 1, 2)}}
             for task, n in (("sst2", 300), ("imdb", 500))}
    avg = tasks_average(pairs)
    each = [seed_matched(p["a"], p["b"])["diff"] for p in pairs.values()]
    assert avg["diff"] == pytest.approx(sum(each) / 2) and avg["seeds"] == [0, 1, 2]
    assert avg["lo"] < avg["diff"] < avg["hi"]
    assert tasks_average(pairs) == avg  # seeded
    # one task alone: the same difference as the seed-matched pair of that task
    assert tasks_average({"sst2": pairs["sst2"]})["diff"] == pytest.approx(each[0])
    # the tasks must have the same seed pairs (an incomplete row has no average)
    del pairs["imdb"]["a"][2]
    with pytest.raises(ValueError, match="same seed pairs on every task"):
        tasks_average(pairs)
