"""Intervals and p-values for accuracies measured on one fixed set of eval examples, over seeds and examples.

Two models scored on the same examples differ far less than two independent intervals suggest: most examples are
right (or wrong) for both. So a variant is compared with the teacher through the per-example differences.
A finetuning seed moves a run's accuracy too (by points, early in training), and a table has only a few seeds, so
the mean of a seeds x examples table is read as a crossed design with two random factors (``combined``): its
variance is the spread of the per-seed means (the seed effect, with each run's own noise) plus what the examples
add beyond that noise, both from the table's mean squares (the two-way analysis of variance without replication),
and its interval is a t interval with Satterthwaite's degrees of freedom: near the seeds' count less one for a
difference, where the seeds' spread dominates, and near the examples' count for an accuracy, where the examples'
does. A bootstrap of seeds and then examples counts each run's own noise twice, and over 3 seeds it has only 10
distinct draws of the seeds, too few to give their spread its due.
With one seed the seeds' part cannot be measured: the interval covers the examples only, and tables say so.

A comparison has one pairing (``seed_matched``): each seed of a variant against the teacher's run of the same
seed, and only those. Its difference, its interval and its p-value (the t test of "no difference" that the interval
inverts: p < 0.05 exactly when the 95% interval leaves out 0) all come from those pairs.
"""

from __future__ import annotations

import math

import numpy as np

LEVEL = 0.95  # the level of every printed interval
# resamples of one run's examples (``bootstrap_interval``): between bootstrap seeds an end of a 95% interval moves
# by about 0.05 point (sd), so its first decimal can differ by one
REPS = 2000
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
    return f"{brackets[0]}{_end(lo, sign)}{sep}{_end(hi, sign)}{brackets[1]}"


def _end(x: float, sign: bool) -> str:
    """An interval's end to one decimal, or, where that would read 0.0 for an end that is not 0, to its first
    significant digit: -0.033 prints as -0.03, so a reader sees that the interval leaves 0 out."""
    text = fmt1(x, sign)
    if float(text) != 0 or x == 0:
        return text
    return f"{x:+.1g}" if sign else f"{x:.1g}"


# A cell's mark where its seeds give less than a 95% interval over seeds and examples claims (``seeds_note``,
# ``comparison_notes``): one seed measures no seed variance, so its interval covers the examples alone; two measure
# it with one degree of freedom, and where seeds spread the interval is narrower than 95% (by simulation:
# docs/results/paired_calibration.md).
ONE_SEED = "one seed: examples only, no seed variance"
ONE_SEED_PAIR = "one seed pair: examples only, no seed variance"
NO_P = ", no p"  # after ONE_SEED_PAIR where a cell would print one (``comparison_text``)
TWO_SEEDS = "two seeds: interval narrow where seeds spread"
TWO_SEED_PAIRS = "two seed pairs: interval narrow where seeds spread"  # and its p, which inverts it, too small

P_FLOOR = 1e-4  # smaller p-values print as "p<0.0001": the t distribution's far tail is no more than a model there


def p_text(p: float) -> str:
    """A p-value as reports print it: 'p=0.035', 'p=0.00012', and 'p<0.0001' below P_FLOOR."""
    return f"p<{P_FLOOR:g}" if p < P_FLOOR else f"p={p:.2g}"


def pairing_prose(column: str, reference: str) -> str:
    """What a table's comparison cells mean (``comparison_text``), for its prose: `column` names them ("vs teacher"),
    `reference` is what rows are compared with there ("the teacher", "full attention")."""
    return (f"\"{column}\" pairs each seed of a row with {reference}'s run of the same seed, on the same examples, and "
            "only those: the mean of the per-seed differences, its 95% interval over seeds and examples (a t interval "
            "for a seeds x examples design: linformer/report/paired.py), and p, the two-sided test of \"no "
            "difference\" that the interval inverts (p < 0.05 exactly where the interval leaves out 0). Where the "
            "seeds' results spread, that test has about as many degrees of freedom as seed pairs less one, so with "
            "3 pairs a difference needs to be large against that spread to reach p < 0.05. A cell paired on fewer "
            f"seeds than its row or {reference} has names the seeds it paired. \"{ONE_SEED_PAIR}{NO_P}\" marks a "
            f"comparison of one seed pair, and \"{ONE_SEED}\" an accuracy of one seed: the interval covers the "
            "examples only, not how much another seed would move the result, so it is too narrow by that much, and "
            "such a comparison prints no p (over the examples alone it falls below 0.05 far more often than 5% of the "
            "time where there is no difference: docs/results/paired_calibration.md). "
            f"\"{TWO_SEEDS}\" and \"{TWO_SEED_PAIRS}\" mark cells of two: one degree of freedom for the seeds' "
            "spread, and where seeds spread their interval covers less than 95% and their p falls below 0.05 more "
            "often than 5% of the time under no difference (with 3, slightly).")


def comparison_text(d: dict, examples: int, reference: str, reference_seeds: int, own_seeds: int = 0) -> str:
    """A seed-matched comparison (``seed_matched``, ``tasks_average``) as a table cell prints it, e.g.
    '-0.9 [-1.7, -0.03], p=0.035', followed by what it rests on where that is less than a reader assumes: the
    seeds it paired where the `reference` has more (`reference_seeds`) or the row has more (`own_seeds`), for two
    seed pairs that its interval runs narrow where seeds spread, and for one seed pair that its interval leaves out
    the seed-to-seed variance: such a cell prints no p (``one_seed_p``)."""
    notes = comparison_notes(d, reference, reference_seeds, own_seeds)
    text = f"{fmt1(d['diff'], True)} {interval_text(d['lo'], d['hi'], examples, True)}"
    if len(d["seeds"]) > 1:  # one pair's p is over the examples alone: miscalibrated as soon as seeds matter
        text += f", {p_text(d['p'])}"
    return text + (f" ({'; '.join(notes)})" if notes else "")


def comparison_notes(d: dict, reference: str, reference_seeds: int, own_seeds: int = 0) -> list[str]:
    """What a seed-matched comparison rests on where that is less than a reader assumes (``comparison_text``'s
    notes, in a table or beside a figure's point): the seeds it paired, where either side has more, and for one
    seed pair that its interval leaves out the seed-to-seed variance (and so it prints no p), for two that its
    interval runs narrow where the seeds spread."""
    notes = []
    paired = f"seed{'s' if len(d['seeds']) > 1 else ''} {', '.join(map(str, d['seeds']))} only"
    if len(d["seeds"]) < reference_seeds:
        notes.append(f"{reference} {paired}")
    elif len(d["seeds"]) < own_seeds:
        notes.append(f"{paired}, as {reference} has")
    if len(d["seeds"]) == 1:
        notes.append(ONE_SEED_PAIR + NO_P)
    elif len(d["seeds"]) == 2:
        notes.append(TWO_SEED_PAIRS)
    return notes


def seeds_note(seeds: int) -> str | None:
    """What an accuracy cell of `seeds` seeds rests on where that is less than its 95% interval claims: one seed
    measures no seed variance, two measure it roughly (``combined``); None for three or more."""
    return {1: ONE_SEED, 2: TWO_SEEDS}.get(seeds)


def one_seed_p(d: dict) -> dict:
    """A seed-matched comparison (``seed_matched``, ``tasks_average``) as a report's JSON keeps it: with one seed
    pair its p is None, as the table prints none (that p tests the examples alone, and falls below 0.05 far more
    often than 5% of the time under no difference once seeds move a run's accuracy), and ``seed_variance`` says
    whether the interval holds the seeds' part."""
    one = len(d["seeds"]) == 1
    return {**d, "p": None if one else d["p"], "seed_variance": not one}


def target_verdict(point: float, lo: float, bound: float) -> str:
    """A target "at least `bound`" judged on a 95% interval whose lower end is `lo`: "met" where that end is at or
    above it (shown at the 95% level), "not shown" where only the point estimate is, "missed" where the point
    estimate is below it. Reviewers read "met" as shown; a point estimate inside a tolerance its interval crosses
    is not."""
    return "met" if lo >= bound else "not shown" if point >= bound else "missed"


def bootstrap_interval(scores, reps: int = REPS, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of per-example ``scores`` (e.g. correctness 0/1, or a difference of two
    models' correctness), resampling examples with replacement: an interval over the examples of single runs, which
    measures nothing of the seed-to-seed spread (the long-input report's, whose rows are one model each; a table of
    seeds uses ``seed_example_interval``)."""
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


def seed_example_interval(a, level: float = LEVEL) -> dict:
    """Mean of ``a`` (seeds x examples: correctness, or a seed-matched pair's per-example differences; or one row of
    it) in points, with its interval over seeds and examples and the p of "its mean is 0" (``combined``)."""
    return combined([np.atleast_2d(np.asarray(a, dtype=np.float64))], level=level)


def combined(tables: list[np.ndarray], level: float = LEVEL) -> dict:
    """The unweighted mean over ``tables`` (each seeds x examples, the same seeds in the same order in each: one
    task's table apiece) of each table's mean, in points, with its interval and p-value.

    Variance of the mean of one table of S seeds and n examples, examples and seeds both drawn at random:
    var(example effect)/n + var(seed effect)/S + var(noise)/(nS). The variance of the per-seed means over S
    estimates the last two terms; the examples' mean square less the residual one (the noise), over nS, the first,
    floored at 0. Over several tables the per-seed means are averaged across the tables first, so a seed that helps
    on every task counts as one seed. Returns mean, lo, hi, p (two-sided, of "the mean is 0"), df
    (Satterthwaite's), seeds (how many) and seed_variance (False where one seed cannot measure it: the variance is
    then the examples' alone)."""
    from scipy import stats

    tables = [np.asarray(t, dtype=np.float64) for t in tables]
    seeds = tables[0].shape[0]
    if any(t.shape[0] != seeds for t in tables):
        raise ValueError(f"tables with different seed counts: {[t.shape[0] for t in tables]}")
    if any(t.shape[1] == 0 for t in tables):
        raise ValueError("no examples to measure")
    w = 1 / len(tables)
    mean = w * sum(float(t.mean()) for t in tables)
    examples, noise = [], []  # (a share of the variance, its degrees of freedom, its sign)
    for t in tables:
        n = t.shape[1]
        per_example = t.mean(0)
        ms_examples = seeds * float(np.sum((per_example - per_example.mean()) ** 2)) / max(n - 1, 1)
        examples.append((w * w * ms_examples / (n * seeds), n - 1, 1))
        if seeds > 1:
            resid = t - per_example - t.mean(1, keepdims=True) + t.mean()
            ms_noise = float(np.sum(resid ** 2)) / max((n - 1) * (seeds - 1), 1)
            noise.append((w * w * ms_noise / (n * seeds), (n - 1) * (seeds - 1), -1))
    if seeds == 1:
        parts = examples
    else:
        # the per-seed means vary by the seed effect and by the runs' noise: the noise part is there, and the
        # examples' part counts only what it holds beyond that noise (floored at 0)
        parts = [(float(np.var(w * sum(t.mean(1) for t in tables), ddof=1)) / seeds, seeds - 1, 1)]
        if sum(v for v, _, _ in examples) > sum(v for v, _, _ in noise):
            parts += [*examples, *noise]
    var = sum(sign * v for v, _, sign in parts)
    spread = sum(v * v / df for v, df, _ in parts if df > 0)
    # no fewer than the seeds' own: a small difference of two large parts (examples less noise) would otherwise
    # drive Satterthwaite's count toward 0 and the interval to any width
    df = max(var * var / spread, seeds - 1, 1) if spread > 0 else math.inf
    if var > 0:
        se = math.sqrt(var)
        half = float(stats.t.ppf((1 + level) / 2, df)) * se
        p = float(2 * stats.t.sf(abs(mean) / se, df))
    else:  # every seed and example alike: the mean is exact
        half, p = 0.0, 1.0 if mean == 0 else 0.0
    return {"mean": 100 * mean, "lo": 100 * (mean - half), "hi": 100 * (mean + half), "p": p, "df": df,
            "seeds": seeds, "seed_variance": seeds > 1}


def seed_matched(a_by_seed: dict[int, np.ndarray], b_by_seed: dict[int, np.ndarray]) -> dict:
    """Model a against model b over the seeds both have, each seed paired with its own: the mean difference in
    points, its interval and its p-value (``seed_example_interval`` over the per-seed, per-example differences;
    with one pair, over the examples only: seed_variance False). ValueError when no seed is shared."""
    seeds = sorted(set(a_by_seed) & set(b_by_seed))
    if not seeds:
        raise ValueError(f"no seed in common: {sorted(a_by_seed)} against {sorted(b_by_seed)}")
    a = np.stack([np.asarray(a_by_seed[s], dtype=np.float64) for s in seeds])
    b = np.stack([np.asarray(b_by_seed[s], dtype=np.float64) for s in seeds])
    if a.shape != b.shape:
        raise ValueError(f"a paired comparison needs the same examples: {a.shape[1]} vs {b.shape[1]}")
    d = seed_example_interval(a - b)
    return {"diff": d["mean"], "lo": d["lo"], "hi": d["hi"], "p": d["p"], "seeds": seeds,
            "seed_variance": d["seed_variance"]}


def tasks_average(pairs: dict[str, dict]) -> dict:
    """The mean over tasks of seed-matched differences (`pairs`: task -> {"a": {seed: correct}, "b": {seed: correct}}),
    in points, every task weighing the same, with one interval and one p-value for that same mean (``combined``: a
    seed is one finetuning seed of both rows on each task). ValueError when the tasks' seeds differ."""
    seeds = {task: sorted(set(pair["a"]) & set(pair["b"])) for task, pair in pairs.items()}
    shared = sorted(set.intersection(*(set(s) for s in seeds.values()))) if seeds else []
    if not shared or any(s != shared for s in seeds.values()):
        raise ValueError(f"an average over tasks needs the same seed pairs on every task; got {seeds}")
    d = combined([np.stack([np.asarray(pair["a"][s], np.float64) - np.asarray(pair["b"][s], np.float64)
                            for s in shared]) for pair in pairs.values()])
    return {"diff": d["mean"], "lo": d["lo"], "hi": d["hi"], "p": d["p"], "seeds": shared,
            "seed_variance": d["seed_variance"]}


def paired_difference(a_scores, b_scores, reps: int = REPS, seed: int = 0) -> dict:
    """Mean of a - b over the same examples (in points) with its paired-bootstrap 95% interval, over the examples of
    two single runs (``bootstrap_interval``; seed-matched tables use ``seed_matched``)."""
    d = np.asarray(a_scores, dtype=np.float64) - np.asarray(b_scores, dtype=np.float64)
    lo, hi = bootstrap_interval(d, reps, seed)
    return {"diff": 100 * float(d.mean()), "lo": 100 * lo, "hi": 100 * hi}
