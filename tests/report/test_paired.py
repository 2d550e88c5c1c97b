"""Paired intervals: tighter than separate ones for correlated models; over seeds, a p that agrees with its interval
and holds its level when seeds vary."""

import math

import numpy as np
import pytest

from linformer.report.paired import bootstrap_interval, paired_difference, seed_example_interval, seed_matched


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


def test_seed_variance_widens_the_interval_when_the_seeds_disagree():
    """Three seeds that each score 80% on the same 2,000 examples but on different ones, against three seeds whose
    accuracies spread by points: the second interval must be wider than the examples alone make it."""
    rng = np.random.default_rng(4)
    steady = rng.random((3, 2000)) < 0.8
    spread = np.stack([rng.random(2000) < p for p in (0.74, 0.80, 0.86)])
    a, b = seed_example_interval(steady), seed_example_interval(spread)
    assert a["lo"] < a["mean"] < a["hi"] and b["lo"] < b["mean"] < b["hi"]
    assert (b["hi"] - b["lo"]) > 1.5 * (a["hi"] - a["lo"])
    # one seed per model: the interval is the examples' alone, as an example bootstrap gives it
    one = seed_example_interval(spread[:1])
    lo, hi = bootstrap_interval(spread[0])
    assert one["lo"] == pytest.approx(100 * lo, abs=0.3) and one["hi"] == pytest.approx(100 * hi, abs=0.3)


def test_a_comparison_pairs_each_seed_with_its_own():
    """Seed 0 of the teacher is its weakest; a one-seed variant equal to teacher seed 0 example by example must
    differ by 0 with p = 1, not by the gap to the teacher's 3-seed mean."""
    rng = np.random.default_rng(5)
    teacher = {s: rng.random(872) < p for s, p in ((0, 0.80), (1, 0.90), (2, 0.90))}
    d = seed_matched({0: teacher[0].copy()}, teacher)
    assert d["seeds"] == [0] and d["diff"] == 0.0 and d["p"] == 1.0 and d["lo"] == d["hi"] == 0.0
    assert not d["seed_variance"]  # one pair cannot measure how much another seed moves the result
    # three seed pairs: the mean of the per-seed differences
    student = {s: np.where(rng.random(872) < 0.05, ~c, c) for s, c in teacher.items()}
    d = seed_matched(student, teacher)
    expected = np.mean([student[s].mean() - teacher[s].mean() for s in range(3)])
    assert d["diff"] == pytest.approx(100 * expected) and d["lo"] < d["diff"] < d["hi"] and d["seeds"] == [0, 1, 2]
    assert d["seed_variance"]
    with pytest.raises(ValueError, match="no seed in common"):
        seed_matched({5: teacher[0]}, teacher)
    with pytest.raises(ValueError, match="same examples"):
        seed_matched({0: teacher[0][:100]}, teacher)


def _two_procedures(rng, seeds: int, shift: float = 0.0, tau: float = 0.3, n: int = 872):
    """Seeds x examples correctness of two procedures on the same examples: 86% of examples always right, 6% always
    wrong, 8% ambiguous (logit N(0, 1)); each run moved by its own seed effect N(0, tau^2) on the logit (tau 0.3:
    a run's accuracy moves by about 0.65 points from seed to seed, as the committed SST-2 runs' do), and the first
    procedure's logits by `shift`."""
    kind = rng.random(n)
    logit = np.where(kind < 0.08, rng.standard_normal(n), np.where(kind < 0.14, -8.0, 8.0))

    def runs(s):
        z = logit + s + tau * rng.standard_normal((seeds, 1))
        return rng.random((seeds, n)) < 1 / (1 + np.exp(-z))

    return runs(shift), runs(0.0)


def test_a_true_null_is_rejected_near_its_rate_when_seeds_vary():
    """Two runs of one procedure (no difference), 3 seed pairs, seeds moving accuracy as in the committed runs:
    p < 0.05 in about 5% of draws (6% over 2,000; see docs/results/README.md). A p that counts every example of
    every seed as a coin flip (McNemar's pooled over the pairs) rejects about 17% of them."""
    rng = np.random.default_rng(8)
    draws = [_two_procedures(rng, 3) for _ in range(300)]
    rejected = np.mean([seed_matched(dict(enumerate(a)), dict(enumerate(b)))["p"] < 0.05 for a, b in draws])
    assert 0.01 <= rejected <= 0.10


def test_the_p_value_tests_what_the_interval_estimates():
    """p < 0.05 exactly where the 95% interval leaves out 0, near that edge too (a committed cell once read
    "-0.9 [-1.7, -0.0], p=0.0035": its p came from another test than its interval)."""
    rng = np.random.default_rng(9)
    agree = []
    for _ in range(60):
        a, b = _two_procedures(rng, 3, shift=-0.6)
        d = seed_matched(dict(enumerate(a)), dict(enumerate(b)))
        agree.append(((d["p"] < 0.05) == (d["hi"] < 0 or d["lo"] > 0), d["p"] < 0.05))
    assert all(ok for ok, _ in agree)
    assert {rejects for _, rejects in agree} == {True, False}  # both sides of the edge were drawn


def test_the_interval_covers_the_true_difference_near_its_level():
    """The procedure 0.8 points worse, no seed-to-seed spread: the 95% interval covers the true difference about 95%
    of the time. Resampling the seeds and then the examples counted each run's noise twice: 99%."""
    rng = np.random.default_rng(10)
    big = _two_procedures(np.random.default_rng(0), 1, shift=-0.5, tau=0.0, n=400_000)
    truth = 100 * (big[0].mean() - big[1].mean())
    covered = []
    for _ in range(300):
        a, b = _two_procedures(rng, 3, shift=-0.5, tau=0.0)
        d = seed_matched(dict(enumerate(a)), dict(enumerate(b)))
        covered.append(d["lo"] <= truth <= d["hi"])
    assert 0.88 <= np.mean(covered) <= 0.985


def test_a_cell_says_what_its_comparison_rests_on():
    from linformer.report.paired import comparison_text

    d = {"diff": -0.9, "lo": -1.7, "hi": -0.033, "p": 0.04, "seeds": [0, 1, 2]}
    assert comparison_text(d, 872, "teacher", 3) == "-0.9 [-1.7, -0.03], p=0.04"  # an end near 0 shows its side
    one = {**d, "seeds": [0], "p": 3e-320}
    # one pair's p tests the examples alone (it rejects far more than 5% of true nulls once seeds matter): none printed
    assert comparison_text(one, 872, "teacher", 3) == \
        "-0.9 [-1.7, -0.03] (teacher seed 0 only; one seed pair: examples only, no seed variance, no p)"
    assert comparison_text(one, 872, "full attention", 1).endswith(
        "(one seed pair: examples only, no seed variance, no p)")
    # two pairs: one degree of freedom for the seeds' spread, and the cell says its interval runs narrow
    assert comparison_text({**d, "seeds": [0, 1]}, 872, "teacher", 3).endswith(
        ", p=0.04 (teacher seeds 0, 1 only; two seed pairs: interval narrow where seeds spread)")
    assert comparison_text({**d, "seeds": [0, 1]}, 872, "full attention", 2, 3).endswith(
        "(seeds 0, 1 only, as full attention has; two seed pairs: interval narrow where seeds spread)")


def test_a_one_seed_comparison_keeps_no_p_and_a_target_is_met_only_on_its_interval():
    """A one-seed comparison's p (over the examples alone) reached the JSON, and targets were "met" on the point
    estimate while the 95% interval crossed the tolerance (SST-2 +0.0 [-0.6, +0.6] "within 0.5: met")."""
    from linformer.report.paired import one_seed_p, target_verdict

    d = {"diff": -0.9, "lo": -1.7, "hi": -0.03, "p": 0.04, "seeds": [0]}
    assert one_seed_p(d) == {**d, "p": None, "seed_variance": False}
    assert one_seed_p({**d, "seeds": [0, 1, 2]}) == {**d, "seeds": [0, 1, 2], "seed_variance": True}
    assert target_verdict(0.0, -0.6, -0.5) == "not shown"
    assert target_verdict(0.1, -0.3, -0.5) == "met"
    assert target_verdict(-0.5, -0.9, -0.5) == "not shown"  # the bound itself is within
    assert target_verdict(-0.9, -1.5, -0.5) == "missed"
    assert target_verdict(90.8, 89.4, 90.0) == "not shown"


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


def test_the_average_over_tasks_pairs_seeds_and_tests_the_same_mean():
    from linformer.report.paired import tasks_average

    rng = np.random.default_rng(3)
    pairs = {task: {"a": {s: rng.random(n) < 0.8 for s in (0, 1, 2)}, "b": {s: rng.random(n) < 0.75 for s in (0, 1, 2)}}
             for task, n in (("sst2", 300), ("imdb", 500))}
    avg = tasks_average(pairs)
    each = [seed_matched(p["a"], p["b"])["diff"] for p in pairs.values()]
    assert avg["diff"] == pytest.approx(sum(each) / 2) and avg["seeds"] == [0, 1, 2]
    assert avg["lo"] < avg["diff"] < avg["hi"]
    # one task alone: the same difference, interval and p as the seed-matched pair of that task
    alone = tasks_average({"sst2": pairs["sst2"]})
    one = seed_matched(pairs["sst2"]["a"], pairs["sst2"]["b"])
    assert [alone[k] for k in ("diff", "lo", "hi", "p")] == pytest.approx([one[k] for k in ("diff", "lo", "hi", "p")])
    # the tasks must have the same seed pairs (an incomplete row has no average)
    del pairs["imdb"]["a"][2]
    with pytest.raises(ValueError, match="same seed pairs on every task"):
        tasks_average(pairs)


def test_the_average_s_p_weighs_the_tasks_as_its_difference_does():
    """A row 4.3 points worse on a small task and 0.4 better on a ten times larger one: the unweighted mean over
    tasks is about -2 points, and its p says so. Pooled over examples, the discordant examples split evenly
    (39 against 39), and McNemar's p was 1."""
    from linformer.report.paired import tasks_average

    rng = np.random.default_rng(12)
    small, large = rng.random(300) < 0.9, rng.random(3000) < 0.9
    pairs = {"sst2": {"a": {}, "b": {}}, "imdb": {"a": {}, "b": {}}}
    for s, k in enumerate((12, 13, 14)):
        lose = small.copy()
        lose[np.flatnonzero(small)[:k]] = False  # the row misses k examples the teacher gets right
        gain = large.copy()
        gain[np.flatnonzero(~large)[:k]] = True  # and gets k right that the teacher misses
        pairs["sst2"]["a"][s], pairs["sst2"]["b"][s] = lose, small
        pairs["imdb"]["a"][s], pairs["imdb"]["b"][s] = gain, large
    avg = tasks_average(pairs)
    assert avg["diff"] == pytest.approx((-100 * 13 / 300 + 100 * 13 / 3000) / 2)
    assert avg["hi"] < 0 and avg["p"] < 0.05
