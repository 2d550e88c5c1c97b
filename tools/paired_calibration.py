"""A maintainer's check of the comparison cells' statistics (linformer/report/paired.py) by simulation: how often
their p falls below 0.05 when two procedures are equally accurate, and how often their 95% interval covers the true
difference, with seed-to-seed spread as the committed runs show it.

Usage: python tools/paired_calibration.py [--sims N] [--out FILE.md]

The model: each eval example has a difficulty (86% always right, 6% always wrong, 8% ambiguous with logit N(0, 1));
each finetuning run gets its own seed effect N(0, tau^2) on the logit, so P(correct) = sigmoid(difficulty + seed
effect + shift). At tau = 0.3 a run's SST-2 accuracy (872 examples, about 90%) moves by about 0.65 points from seed
to seed and two seeds disagree on about 30 examples, as the committed runs' seeds do (0.5-0.9 points, 29-44
examples): that is the realistic setting. Beside each p, for comparison, McNemar's exact test pooled over the seed
pairs (what the cells printed before).
"""

from __future__ import annotations

import argparse
import sys
import zlib
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from linformer.report.paired import seed_matched, tasks_average
from linformer.script_help import description

SETTINGS = [  # (name, examples per task, seed pairs, tau, logit shift of the row)
    ("no difference, no seed spread", (872,), 3, 0.0, 0.0),
    ("no difference, tau 0.15", (872,), 3, 0.15, 0.0),
    ("no difference, tau 0.3", (872,), 3, 0.3, 0.0),
    ("no difference, tau 0.5", (872,), 3, 0.5, 0.0),
    ("no difference, tau 0.3, 2,000 examples", (2000,), 3, 0.3, 0.0),
    ("no difference, tau 0.3, 5 pairs", (872,), 5, 0.3, 0.0),
    ("no difference, tau 0.3, 1 pair", (872,), 1, 0.3, 0.0),
    ("no difference, no seed spread, 1 pair", (872,), 1, 0.0, 0.0),
    ("row 0.8 points worse, no seed spread", (872,), 3, 0.0, -0.5),
    ("row 0.8 points worse, tau 0.3", (872,), 3, 0.3, -0.5),
    ("average over 2 tasks, no difference, tau 0.3", (872, 2000), 3, 0.3, 0.0),
]


def _difficulty(rng, n: int) -> np.ndarray:
    kind = rng.random(n)
    return np.where(kind < 0.08, rng.standard_normal(n), np.where(kind < 0.14, -8.0, 8.0))


def _runs(rng, logit: np.ndarray, seeds: int, tau: float, shift: float) -> np.ndarray:
    z = logit + shift + tau * rng.standard_normal((seeds, 1))
    return rng.random((seeds, logit.size)) < 1 / (1 + np.exp(-z))


def true_difference(tau: float, shift: float, n: int = 2_000_000) -> float:
    """The procedures' difference in points over the population of examples and seeds."""
    rng = np.random.default_rng(123)
    logit = _difficulty(rng, n)
    a, b = (logit + shift + tau * rng.standard_normal(n), logit + tau * rng.standard_normal(n))
    return 100 * float(np.mean(1 / (1 + np.exp(-a)) - 1 / (1 + np.exp(-b))))


def simulate(name: str, sizes: tuple[int, ...], seeds: int, tau: float, shift: float, sims: int) -> dict:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    truth = true_difference(tau, shift) if shift else 0.0
    rejected = covered = pooled_rejected = 0
    for _ in range(sims):
        pairs = {}
        for i, n in enumerate(sizes):
            logit = _difficulty(rng, n)
            pairs[i] = {"a": dict(enumerate(_runs(rng, logit, seeds, tau, shift))),
                        "b": dict(enumerate(_runs(rng, logit, seeds, tau, 0.0)))}
        d = tasks_average(pairs) if len(sizes) > 1 else seed_matched(pairs[0]["a"], pairs[0]["b"])
        rejected += d["p"] < 0.05
        covered += d["lo"] <= truth <= d["hi"]
        a = np.concatenate([p["a"][s] for p in pairs.values() for s in range(seeds)])
        b = np.concatenate([p["b"][s] for p in pairs.values() for s in range(seeds)])
        only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
        pooled_rejected += (binomtest(only_a, only_a + only_b).pvalue if only_a + only_b else 1.0) < 0.05
    return {"name": name, "truth": truth, "p": rejected / sims, "covered": covered / sims,
            "pooled": pooled_rejected / sims}


def main() -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, __file__, paragraph=True))
    ap.add_argument("--sims", type=int, default=2000, help="draws per setting")
    ap.add_argument("--out", type=Path, help="also write the table as markdown")
    args = ap.parse_args()
    se = lambda r: (r * (1 - r) / args.sims) ** 0.5
    head = (f"| setting ({args.sims} draws each) | true difference (points) | p < 0.05 | interval covers it | "
            "pooled McNemar p < 0.05 |")
    lines = [head, "|---|---|---|---|---|"]
    for setting in SETTINGS:
        r = simulate(*setting, sims=args.sims)
        lines.append(f"| {r['name']} | {r['truth']:+.2f} | {100 * r['p']:.1f}% (se {100 * se(r['p']):.1f}) | "
                     f"{100 * r['covered']:.1f}% (se {100 * se(r['covered']):.1f}) | {100 * r['pooled']:.1f}% |")
        print(lines[-1], flush=True)
    if args.out:
        args.out.write_text("# Calibration of the comparison cells' p and interval\n\nCommand: `python "
                            f"tools/paired_calibration.py --sims {args.sims} --out {args.out}`\n\n"
                            + "\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
