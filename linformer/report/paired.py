"""Intervals for accuracies measured on one fixed set of eval examples, over seeds and examples together.

Two models scored on the same examples differ far less than two independent intervals suggest: most examples are
right (or wrong) for both. So a variant is compared with the teacher through the per-example differences.
A finetuning seed moves a run's accuracy too (by points, early in training), so the intervals resample the seeds
as well (``seed_example_interval``): each resample draws seeds with replacement, averages them per example, then
draws the examples. With one seed that part adds nothing, and the interval covers examples only: tables say how
many seeds each row has.

A comparison has one pairing (``seed_matched``): each seed of a variant against the teacher's run of the same
seed, and only those. Its difference, its interval (seed pairs and examples resampled together) and its p-value
(McNemar's exact test pooled over the seed pairs) all come from those pairs.
"""

from __future__ import annotations

import math

import numpy as np

REPS = 2000  # bootstrap resamples: the 2.5% and 97.5% quantiles move by well under 0.1 point between seeds
CHUNK = 100  # resamples drawn at once (a 25k-example IMDB resample matrix of 100 rows is 20 MB)


def fmt1(x: float, sign: bool = False) -> str:
    """x to one decimal, halves rounded away from zero as a reader expects: 1,753 of 2,000 is 87.65 and shows as
    87.7. Python's own format rounds the binary value, here 87.64999999999999 (100 x 0.8765), down. x is read
    to 12 significant digits first, which removes that binary noise."""
    from decimal import ROUND_HALF_UP, Decimal

    d = Decimal(f"{float(x):.12g}").quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return f"{d:+}" if sign else f"{d}"


# Fewer eval examples than this get no printed interval: a percentile bootstrap over a handful of 0/1 scores is a
# few coarse steps (over 2 examples, "100.0-100.0" when both are right), not a 95% interval.
MIN_INTERVAL_EXAMPLES = 30


def interval_text(lo: float, hi: float, examples: int, sign: bool = False, brackets: str = "[]", sep: str = ", ") -> str:
    """An interval in points as reports print it, e.g. '[-3.8, +1.3]'; below MIN_INTERVAL_EXAMPLES examples,
    '(no interval: 2 examples)'."""
    if examples < MIN_INTERVAL_EXAMPLES:
        return f"(no interval: {examples} examples)"
    return f"{brackets[0]}{fmt1(lo, sign)}{sep}{fmt1(hi, sign)}{brackets[1]}"


def bootstrap_interval(scores, reps: int = REPS, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of per-example ``scores`` (e.g. correctness 0/1, or its mean over seeds,
    or a difference of two models' correctness), resampling examples with replacement."""
    x = np.asarray(scores, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no examples to resample")
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, reps, CHUNK):
        idx = rng.integers(0, x.size, size=(min(CHUNK, reps - start), x.size))
        means.append(x[idx].mean(1))
    lo, hi = np.quantile(np.concatenate(means), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def seed_example_interval(a, reps: int = REPS, seed: int = 0, level: float = 0.95) -> dict:
    """Mean of ``a`` (seeds x examples: correctness, or a seed-matched pair's per-example differences; or one row of
    it) in points, with a bootstrap interval over seeds and examples together."""
    a = np.atleast_2d(np.asarray(a, dtype=np.float64))
    n = a.shape[1]
    if n == 0:
        raise ValueError("no examples to resample")
    rng = np.random.default_rng(seed)
    values = []
    for start in range(0, reps, CHUNK):
        c = min(CHUNK, reps - start)
        per_example = a[rng.integers(0, a.shape[0], size=(c, a.shape[0]))].mean(1)  # (c, n): a resample of seeds
        idx = rng.integers(0, n, size=(c, n))
        values.append(np.take_along_axis(per_example, idx, 1).mean(1))
    lo, hi = np.quantile(np.concatenate(values), [(1 - level) / 2, (1 + level) / 2])
    return {"mean": 100 * float(a.mean()), "lo": 100 * float(lo), "hi": 100 * float(hi), "seeds": a.shape[0]}


def seed_matched(a_by_seed: dict[int, np.ndarray], b_by_seed: dict[int, np.ndarray], reps: int = REPS,
                 seed: int = 0) -> dict:
    """Model a against model b over the seeds both have, each seed paired with its own: the mean difference in
    points, its interval (``seed_example_interval`` over the per-seed, per-example differences: seed pairs and
    examples resampled together), and one p-value, McNemar's exact test pooled over the pairs (the examples that
    exactly one run of a pair gets right, summed over the pairs: under "equally accurate" each is a fair coin).
    ValueError when no seed is shared."""
    seeds = sorted(set(a_by_seed) & set(b_by_seed))
    if not seeds:
        raise ValueError(f"no seed in common: {sorted(a_by_seed)} against {sorted(b_by_seed)}")
    a = np.stack([np.asarray(a_by_seed[s], dtype=np.float64) for s in seeds])
    b = np.stack([np.asarray(b_by_seed[s], dtype=np.float64) for s in seeds])
    if a.shape != b.shape:
        raise ValueError(f"a paired comparison needs the same examples: {a.shape[1]} vs {b.shape[1]}")
    d = seed_example_interval(a - b, reps=reps, seed=seed)
    return {"diff": d["mean"], "lo": d["lo"], "hi": d["hi"], "seeds": seeds,
            "p": mcnemar_p(a.astype(bool).ravel(), b.astype(bool).ravel())}


def tasks_average(pairs: dict[str, dict], reps: int = REPS, seed: int = 0) -> dict:
    """The mean over tasks of seed-matched differences (`pairs`: task -> {"a": {seed: correct}, "b": {seed: correct}}),
    in points, with one interval and one p-value from those same pairs: each resample draws the seed pairs once for
    every task (a seed is one finetuning seed of both rows on each task) and each task's examples apart; the p-value
    is McNemar's exact test pooled over every task and seed pair. ValueError when the tasks' seeds differ."""
    seeds = {task: sorted(set(pair["a"]) & set(pair["b"])) for task, pair in pairs.items()}
    shared = sorted(set.intersection(*(set(s) for s in seeds.values()))) if seeds else []
    if not shared or any(s != shared for s in seeds.values()):
        raise ValueError(f"an average over tasks needs the same seed pairs on every task; got {seeds}")
    diffs = {task: np.stack([np.asarray(pair["a"][s], np.float64) - np.asarray(pair["b"][s], np.float64)
                             for s in shared]) for task, pair in pairs.items()}
    rng = np.random.default_rng(seed)
    values = []
    for start in range(0, reps, CHUNK):
        c = min(CHUNK, reps - start)
        picked = rng.integers(0, len(shared), size=(c, len(shared)))  # the same seed resample for every task
        total = np.zeros(c)
        for d in diffs.values():
            per_example = d[picked].mean(1)
            total += np.take_along_axis(per_example, rng.integers(0, d.shape[1], size=(c, d.shape[1])), 1).mean(1)
        values.append(total / len(diffs))
    lo, hi = np.quantile(np.concatenate(values), [0.025, 0.975])
    a = np.concatenate([np.asarray(pair["a"][s], bool) for pair in pairs.values() for s in shared])
    b = np.concatenate([np.asarray(pair["b"][s], bool) for pair in pairs.values() for s in shared])
    return {"diff": 100 * float(np.mean([d.mean() for d in diffs.values()])), "lo": 100 * float(lo),
            "hi": 100 * float(hi), "seeds": shared, "p": mcnemar_p(a, b)}


def mcnemar_p(a_correct, b_correct) -> float:
    """Two-sided exact McNemar p-value: under 'equally accurate', the examples only one model gets right split
    like fair coin flips."""
    a, b = np.asarray(a_correct, dtype=bool), np.asarray(b_correct, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    n = only_a + only_b
    if n == 0:
        return 1.0
    # P(X <= min) for X ~ Bin(n, 1/2), summed in log space: exact integer sums take minutes for n in the tens of
    # thousands (an IMDB test split)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2)
             for i in range(min(only_a, only_b) + 1)]
    top = max(terms)
    tail = math.exp(top) * sum(math.exp(t - top) for t in terms)
    return min(1.0, 2 * tail)


def paired_difference(a_scores, b_scores, reps: int = REPS, seed: int = 0) -> dict:
    """Mean of a - b over the same examples (in points) with its paired-bootstrap 95% interval."""
    d = np.asarray(a_scores, dtype=np.float64) - np.asarray(b_scores, dtype=np.float64)
    lo, hi = bootstrap_interval(d, reps, seed)
    return {"diff": 100 * float(d.mean()), "lo": 100 * lo, "hi": 100 * hi}
