"""Intervals for accuracies measured on one fixed set of eval examples.

Two models scored on the same examples differ far less than two independent intervals suggest: most examples are
right (or wrong) for both. So a variant is compared with the teacher through the per-example differences (a paired
bootstrap over examples, and McNemar's exact test on the examples where exactly one of them is right).
"""

from __future__ import annotations

import math

import numpy as np

REPS = 2000  # bootstrap resamples: the 2.5% and 97.5% quantiles move by well under 0.1 point between seeds
CHUNK = 100  # resamples drawn at once (a 25k-example IMDB resample matrix of 100 rows is 20 MB)


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


def mcnemar_p(a_correct, b_correct) -> float:
    """Two-sided exact McNemar p-value: under 'equally accurate', the examples only one model gets right split
    like fair coin flips."""
    a, b = np.asarray(a_correct, dtype=bool), np.asarray(b_correct, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1))  # exact integers: no overflow for large n
    return min(1.0, 2 * tail / 2**n)


def paired_difference(a_scores, b_scores, reps: int = REPS, seed: int = 0) -> dict:
    """Mean of a - b over the same examples (in points) with its paired-bootstrap 95% interval."""
    d = np.asarray(a_scores, dtype=np.float64) - np.asarray(b_scores, dtype=np.float64)
    lo, hi = bootstrap_interval(d, reps, seed)
    return {"diff": 100 * float(d.mean()), "lo": 100 * lo, "hi": 100 * hi}
