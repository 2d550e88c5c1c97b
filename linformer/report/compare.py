"""Compare run directories: a markdown table of final and best metrics, and PNG plots of metrics vs step (or vs
tokens seen: by default where runs of one stage differ in tokens per step, which the table then also compares at
equal tokens; a rate, tokens/s or MFU, by step still). Runs of different tokenizers get a panel each in a plot of a
per-token metric (a perplexity, a loss), whose title says they do not compare.

"final" is a metric's last logged value; "best" is its maximum for the task metrics where more is better (their
direction is the metric registry's, ``data.metrics.METRICS``, as finetuning's selection reads it), throughput and MFU,
and its minimum otherwise (losses, perplexities, gradient norms), with the step where it happened.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import plots
from ..cli import run_from_a_script
from ..data.io import recorded_paths
from ..data.metrics import METRICS, improves
from ..data.metrics import higher_is_better as score_higher_is_better
from ..errors import ConfigError, DataError
from ..files.atomic import atomic_write, output_files, save_figure
from ..files.locations import resolve_path
from ..files.mappings import flatten
from ..files.outputs import made_by
from ..files.runs import METRICS as METRICS_FILE
from ..modeling.values import projects_keys
from ..optional import import_needed
from ..progress import progress_over
from ..rundir import (
    Run,
    find_runs,
    identity,
    identity_diff,
    iter_metrics,
    load_run,
    named_paths,
    reported_scores,
    selection_scores,
)
from .rows import SKIPPED_NOTE, draws_note, skipped_updates, subset_draw
from .sweeps import (
    COLUMN_NAMES,
    CONFIG_COLUMNS,
    NULL,
    by_groups,
    grouped,
    parse_where,
    select,
    shown,
    where_words,
)
from .terminal import Blocks, Grid, markdown, terminal_text

# The prefixes of a task metric's logged name: the split it was scored on (val_accuracy, eval_f1).
SPLIT_PREFIXES = ("val_", "eval_")
# The training core's own metrics where more is better; every other one that is not a task metric is a loss, a
# perplexity or a norm.
THROUGHPUT = ("tokens_per_s", "tokens_per_s_avg", "mfu")
# How a global batch is split (per device, or fixed by trainer.global_batch_size): runs of one global batch computed
# the same steps whatever their processes, so these are no difference between them (Run.global_batch)
SPLIT_KEYS = frozenset({"trainer.batch_size", "trainer.global_batch_size"})
# The settings that set how many tokens a step trains on (global batch x n; processes, the other factor, is no
# setting): runs that differ in them have seen different tokens at one step. figure3 lets its panels differ in them
# only with n (its LENGTH_KEYS), and compare_runs compares such runs at equal tokens too (``tokens_per_step_note``)
TOKENS_PER_STEP_KEYS = frozenset({"data.n", "model.max_seq_len", "trainer.batch_size", "trainer.global_batch_size",
                                  "trainer.grad_accum"})
# The stages that train on blocks of n tokens, whose tokens per step the settings fix (a finetuning step's tokens
# are its examples' lengths)
BLOCK_STAGES = ("pretrain", "transfer")
# The identity keys the config columns show already (Run.key_config: k and sharing only where the attention has them)
SHOWN_KEYS = frozenset({"model.name", "model.attention", "model.projected_dim", "model.sharing", "model.max_seq_len",
                        "data.n", "task.name", "model_path"})
# Identity keys that hash what other settings say (a task's data files and spec): a column only where runs of one
# task differ in them (another data file under one task name), not where they restate the task column
HASH_KEYS = {"task_data_key": "task.name", "task_spec_key": "task.name"}


def higher_is_better(metric: str) -> bool:
    """Whether a logged metric's best is its maximum: a task metric (``val_<name>``, ``eval_<name>``) by its
    registry entry, throughput and MFU; otherwise its minimum."""
    if metric in THROUGHPUT:
        return True
    name = next((metric.removeprefix(p) for p in SPLIT_PREFIXES if metric.startswith(p)), metric)
    return bool(score_higher_is_better(name))


def series(run: Run, metric: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric, in logged order, skipping rows without it: from the rows the run holds, or,
    loaded without them (``load_run(rows=False)``), from its metrics.jsonl one row at a time (``iter_metrics``), so
    that only the series is held, not the file."""
    steps, values = [], []
    for row in run.rows or iter_metrics(run.path / METRICS_FILE):
        v = _number(row.get(metric))
        if v is not None:
            steps.append(int(row["step"]))
            values.append(v)
    return steps, values


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# Points per run and metric a plot keeps (a figure is ~840 px wide): the series is thinned evenly as it is read,
# its last and best points always kept, so that reading a run holds this much of it, not its every row
PLOT_POINTS = 1000


class Tracked:
    """One metric of one run, fed its rows in logged order: its final value and its best (``higher_is_better``;
    the first of equals; the final where no value is finite), with the steps, and with `plotted` a series thinned to
    at most 2 x PLOT_POINTS points (every `stride`-th value, the stride doubled as the series grows)."""

    def __init__(self, metric: str, plotted: bool = False):
        self.higher, self.plotted = higher_is_better(metric), plotted
        # (row index, step, value, tokens seen at that step: None where the rows do not say)
        self.final: tuple[int, int, float, float | None] | None = None
        self.best: tuple[int, int, float, float | None] | None = None
        self.points: list[tuple[int, int, float, float | None]] = []
        self.seen, self.stride = 0, 1
        self.nonfinite = 0  # values that were inf or NaN (a step whose update was skipped logs its loss first)

    def add(self, index: int, step: int, value: float, tokens: float | None = None) -> None:
        point = (index, step, value, tokens)
        self.final = point
        self.nonfinite += not math.isfinite(value)
        if improves(value, self.best[2] if self.best else None, self.higher):
            self.best = point
        if self.plotted and self.seen % self.stride == 0:
            self.points.append(point)
            if len(self.points) > 2 * PLOT_POINTS:
                self.points, self.stride = self.points[::2], self.stride * 2
        self.seen += 1

    def summary(self) -> dict[str, Any]:
        best = self.best or self.final
        return {"final": self.final[2], "final_step": self.final[1], "best": best[2], "best_step": best[1],
                **({"nonfinite": self.nonfinite} if self.nonfinite else {})}

    def series(self, x: str = "step") -> tuple[list[float], list[float]]:
        """(x, values) of the kept points, x the step or (`x` "tokens") the tokens seen, where the rows say them."""
        kept = sorted({*self.points, self.final, *([self.best] if self.best else [])}, key=lambda p: p[0])
        if x == "tokens":
            kept = [p for p in kept if p[3] is not None]
            return [p[3] for p in kept], [p[2] for p in kept]
        return [p[1] for p in kept], [p[2] for p in kept]


@dataclass
class Digest:
    """What a comparison keeps of a run's metrics.jsonl, read once row by row (``digest``): the numeric keys it
    logged, its last step, the tokens seen (the training rows' `tokens`, the run's total after each step) at the last
    step that logged them, and a Tracked per metric asked for that it logged."""

    logged: set[str] = field(default_factory=set)
    last_step: int = 0
    tracked: dict[str, Tracked] = field(default_factory=dict)
    nonfinite_losses: int = 0  # training rows whose loss is inf or NaN: their updates were skipped
    tokens: tuple[int, float] | None = None  # (step, tokens seen after it) of the last row that logged tokens

    def tokens_at(self, step: int, row: dict) -> float | None:
        """The tokens seen at a row's step: its own `tokens`; none before the first step (the evaluation at step 0);
        a row without them (an evaluation logged apart) those of its step's training row; else None."""
        own = _number(row.get("tokens"))
        if own is not None:
            self.tokens = (step, own)
            return own
        if step == 0:
            return 0.0
        return self.tokens[1] if self.tokens and self.tokens[0] == step else None

    @property
    def tokens_per_step(self) -> float | None:
        """Tokens seen per step over the run (its last logged tokens over their step); None where none are logged."""
        return self.tokens[1] / self.tokens[0] if self.tokens and self.tokens[0] > 0 else None

    def add(self, index: int, row: dict, wanted: set[str], plotted: set[str]) -> None:
        step = int(row["step"])
        self.last_step = max(self.last_step, step)
        tokens = self.tokens_at(step, row)
        for key, raw in row.items():
            value = _number(raw)
            if value is None or key in ("step", "time"):
                continue
            self.logged.add(key)
            self.nonfinite_losses += key == "loss" and not math.isfinite(value)
            if key in wanted:
                if key not in self.tracked:
                    self.tracked[key] = Tracked(key, key in plotted)
                self.tracked[key].add(index, step, value, tokens)

    def summary(self, metrics: list[str]) -> dict[str, Any]:
        return {m: self.tracked[m].summary() for m in metrics if m in self.tracked}

    def series(self, metric: str, x: str = "step") -> tuple[list[float], list[float]]:
        return self.tracked[metric].series(x) if metric in self.tracked else ([], [])


def digest(rows: Iterable[dict], wanted: Iterable[str], plotted: Iterable[str] = ()) -> Digest:
    """A Digest of `rows` for the metrics `wanted`, of which `plotted` keep a thinned series."""
    out, wanted, plotted = Digest(), set(wanted), set(plotted)
    for index, row in enumerate(rows):
        out.add(index, row, wanted, plotted)
    return out


def summarize_run(run: Run, metrics: list[str]) -> dict[str, Any]:
    """{metric: {"final", "final_step", "best", "best_step"}} for the metrics the run logged."""
    return digest(run.rows, metrics).summary(metrics)


PERCENT = frozenset({"mfu"})  # fractions the table and the plots give as percent


def _percent(v: float) -> str:
    return f"{v:.1%}" if math.isfinite(v) else str(v)


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.4g}" if abs(v) < 100 else f"{v:.1f}"
    return f"{v:.4g}"


def logged_metrics(digests: Iterable[Digest]) -> set[str]:
    """The numeric metrics.jsonl keys (besides step and time) that any of the runs logged."""
    return {k for d in digests for k in d.logged}


def default_metrics() -> list[str]:
    """Shown when the user names no metrics, in this order, where any run has them: every registered task metric
    (``data.metrics.METRICS``) on either split."""
    return ["val_ppl", "val_loss", "loss", *(f"{p}{m}" for p in SPLIT_PREFIXES for m in METRICS), "tokens_per_s", "mfu"]


def available_metrics(digests: Iterable[Digest]) -> list[str]:
    keys = logged_metrics(digests)
    return [m for m in default_metrics() if m in keys]


def differing_settings(runs: list[Run]) -> list[str]:
    """The identity keys (``rundir.identity_diff``) in which runs of one stage differ, beyond what the config columns
    show (SHOWN_KEYS; the split of the global batch, SPLIT_KEYS, where the stage's runs share one), in first-seen
    order: what else tells the runs compared apart (lr, seed, batch, steps, data). A run whose config.yaml is damaged
    (``Run.config_read``; shown marked damaged) is left out: its empty config would differ in every setting."""
    runs = [r for r in runs if r.config_read]
    keys: dict[str, None] = {}
    for stage in dict.fromkeys(r.stage for r in runs):
        first, *others = staged = [r for r in runs if r.stage == stage]
        batches = {r.global_batch for r in staged}
        shown = SHOWN_KEYS | (SPLIT_KEYS if len(batches) == 1 and None not in batches else frozenset())
        for run in others:
            keys |= dict.fromkeys(k for k in identity_diff(first.config, run.config) if k not in shown)
    return [k for k in keys if k not in HASH_KEYS or _hash_tells_apart(runs, k)]


def _hash_tells_apart(runs: list[Run], key: str) -> bool:
    """Whether runs that share the setting a hash key restates (HASH_KEYS) differ in the hash."""
    seen: dict[str, set[str]] = {}
    for run in runs:
        seen.setdefault(_setting(run, HASH_KEYS[key]), set()).add(_setting(run, key))
    return any(len(hashes) > 1 for hashes in seen.values())


def _setting(run: Run, key: str) -> str:
    value = identity(run.config).get(key)
    return "" if value is None else str(value)


def tokens_per_step_note(runs: list[Run], digests: list[Digest]) -> dict[str, str]:
    """{stage: words} for each stage (BLOCK_STAGES) whose runs differ in the tokens they train on per step
    (``Digest.tokens_per_step``, as metrics.jsonl logs them): how much, and the settings that make it
    (TOKENS_PER_STEP_KEYS by ``rundir.identity_diff``, as figure3 names them; the processes where those differ).
    At one step such runs have not seen the same tokens."""
    notes = {}
    for stage in dict.fromkeys(r.stage for r in runs if r.stage in BLOCK_STAGES):
        staged = [(r, d) for r, d in zip(runs, digests) if r.stage == stage and d.tokens_per_step]
        per_step = sorted({round(d.tokens_per_step) for _, d in staged})
        if len(per_step) < 2:
            continue
        read = [r for r, _ in staged if r.config_read]  # a damaged config.yaml says no setting
        keys = sorted({k for r in read[1:] for k in identity_diff(read[0].config, r.config)
                       if k in TOKENS_PER_STEP_KEYS})
        settings = [f"{k} ({', '.join(sorted({_setting(r, k) or NULL for r in read}))})" for k in keys]
        processes = {r.key_config.get("processes") for r, _ in staged}
        if len(processes) > 1:
            settings.append(f"processes ({', '.join(sorted(map(str, processes)))})")
        notes[stage] = (f"the {stage} runs train on {per_step[0]:,} to {per_step[-1]:,} tokens per step "
                        f"({per_step[-1] / per_step[0]:.3g}x), by {', '.join(settings) or 'settings not recorded'}: "
                        "at one step they have not seen the same tokens")
    return notes


# What names the tokenizer a pretraining run's ids come from (config.yaml: its name, its folder, the vocabulary it was
# trained to), and the metrics per token of that vocabulary: under another tokenizer a token is another unit of text
TOKENIZER_KEYS = ("data.tokenizer", "tokenizer_dir", "data.vocab_size")
PER_TOKEN = ("val_ppl", "ppl", "val_loss", "loss")


def tokenizer_note(runs: list[Run], metrics: list[str]) -> str:
    """Words for the table's note where runs of one stage (BLOCK_STAGES) that show a per-token metric (PER_TOKEN)
    differ in their tokenizer (TOKENIZER_KEYS, paths as records name them): their perplexities and losses are per token
    of different vocabularies and do not compare; "" otherwise. A note, not a refusal: their other columns (speed,
    MFU, the settings) compare, and a comparison of tokenizers is one a user may want side by side."""
    shown = [m for m in metrics if m in PER_TOKEN]
    if not shown:
        return ""
    out = []
    for stage in dict.fromkeys(r.stage for r in runs if r.stage in BLOCK_STAGES):
        differ = tokenizer_differences([r for r in runs if r.stage == stage])
        if differ:
            out.append(f" Not comparable: the {stage} runs differ in their tokenizer ({differ}), so their "
                       f"{', '.join(shown)} are per token of different vocabularies and do not compare across "
                       "tokenizers; compare them only among runs of one tokenizer.")
    return "".join(out)


def tokenizer_differences(runs: list[Run]) -> str:
    """The tokenizer keys (TOKENIZER_KEYS, paths as records name them) in which `runs` differ, with their values,
    e.g. "data.tokenizer (a, b); data.vocab_size (16000, 8000)"; "" where they share one tokenizer. A run whose
    config.yaml is damaged (``Run.config_read``) names no tokenizer: it is left out."""
    values = {k: sorted({_tokenizer_value(r, k) for r in runs if r.config_read})
              for k in TOKENIZER_KEYS}
    return "; ".join(f"{k} ({', '.join(v)})" for k, v in values.items() if len(v) > 1)


def value_at_tokens(digest_: Digest, metric: str, tokens: float) -> float | None:
    """`metric` at `tokens` seen: its value there, else interpolated linearly in tokens between the kept points either
    side (a perplexity in its log, as its loss would be); None where the run did not log it on both sides."""
    xs, values = digest_.series(metric, "tokens")
    pairs = [(x, v) for x, v in zip(xs, values) if math.isfinite(v)]
    before = [p for p in pairs if p[0] <= tokens]
    after = [p for p in pairs if p[0] >= tokens]
    if not before or not after:
        return None
    (x0, v0), (x1, v1) = before[-1], after[0]
    if x1 == x0:
        return v0
    log = metric.endswith("ppl") and v0 > 0 and v1 > 0
    a, b = (math.log(v0), math.log(v1)) if log else (v0, v1)
    out = a + (b - a) * (tokens - x0) / (x1 - x0)
    return math.exp(out) if log else out


def equal_tokens_table(runs: list[Run], metrics: list[str], digests: list[Digest], notes: dict[str, str],
                       labels: list[str]) -> Blocks:
    """For each stage of `notes` (``tokens_per_step_note``): its runs at the most tokens every one of them saw, each
    metric's value there (``value_at_tokens``), ranked by the first metric that two or more runs have there, best
    first; never by a per-token metric (PER_TOKEN) where the runs differ in their tokenizer (its values are shown,
    unranked: per token of different vocabularies, as ``tokenizer_note`` says). No blocks where no stage's runs differ
    in tokens per step."""
    out: Blocks = []
    for stage, words in notes.items():
        staged = [(r, d, label) for r, d, label in zip(runs, digests, labels) if r.stage == stage and d.tokens]
        tokens = min(d.tokens[1] for _, d, _ in staged)
        at = [(r, d, label, {m: value_at_tokens(d, m, tokens) for m in metrics}) for r, d, label in staged]
        differ = tokenizer_differences([r for r, *_ in staged])
        unranked = [m for m in metrics if m in PER_TOKEN] if differ else []
        ranked = next((m for m in metrics if m not in unranked and sum(v[m] is not None for *_, v in at) >= 2), None)
        if ranked:
            sign = -1 if higher_is_better(ranked) else 1
            at.sort(key=lambda x: (x[3][ranked] is None, sign * (x[3][ranked] or 0)))
        grid = Grid(["run", "tokens per step", "step at these tokens", *metrics])
        for _, d, label, values in at:
            fmt = [(_percent if m in PERCENT else _fmt) for m in metrics]
            grid.rows.append([label, f"{d.tokens_per_step:,.0f}", f"{tokens / d.tokens_per_step:,.4g}",
                              *("" if values[m] is None else f(values[m]) for m, f in zip(metrics, fmt))])
        out += [f"\n## At equal tokens ({stage} runs)\n\n{words[0].upper()}{words[1:]}. Here each metric is its "
                f"value at {tokens:,.0f} tokens seen, the most every one of them reached, interpolated linearly in "
                "tokens between the logged values either side (a perplexity in its log, as its loss) where no "
                "row is at these tokens; blank where a run logged none on one side"
                + (f"; ranked by {ranked}, best first" if ranked else "")
                + (f"; not ranked by {', '.join(unranked)}: the runs differ in their tokenizer ({differ}), so "
                   "these are per token of different vocabularies" if unranked else "")
                + ".\n\n", grid, "\n"]
    return out


def markdown_table(runs: list[Run], metrics: list[str], digests: list[Digest]) -> Blocks:
    """The main table (``markdown`` writes it), one row per run: its name, key config, the settings that differ among the runs, steps (and the tokens seen,
    where runs of one stage differ in tokens per step: ``tokens_per_step_note``), then `final / best (@step)` per
    metric (each run's Digest, in the order of `runs`)."""
    config_cols = [c for c in CONFIG_COLUMNS
                   if any((r.stage if c == "stage" else r.key_config.get(c)) is not None for r in runs)]
    settings = differing_settings(runs)
    steady = [c for c in STEADY_COLUMNS if any(r.results.get(c) is not None for r in runs)]
    reported = list(dict.fromkeys(m for r in runs for m in reported_scores(r.results)))  # first-seen order
    per_step = tokens_per_step_note(runs, digests)
    header = ["run", *(COLUMN_NAMES.get(c, c) for c in config_cols), *settings, "steps",
              *(["tokens seen"] if per_step else []), *metrics,
              *(f"reported {m}" for m in reported),
              *(STEADY_COLUMNS[c] for c in steady)]
    grid = Grid(header, settings=frozenset(range(1, 1 + len(config_cols) + len(settings))))
    nonfinite = flagged = False
    for r, label, d in zip(runs, run_labels(runs), digests):
        kc = r.key_config
        cells = [label]
        for c in config_cols:
            v = r.stage if c == "stage" else kc.get(c)
            cells.append("" if v is None else str(v))
        cells += [_setting(r, k) for k in settings]
        steps = str(d.last_step)
        cells.append(steps if r.status in (None, "complete") else f"{steps} ({r.status})")  # not a finished run's
        if per_step:
            cells.append(f"{d.tokens[1]:,.0f}" if d.tokens else "")
        summary = d.summary(metrics)
        for m in metrics:
            s = summary.get(m)
            if s is None:
                cells.append("")
                continue
            fmt = _percent if m in PERCENT else _fmt
            if s["best_step"] == s["final_step"] and s["best"] == s["final"]:
                cell = f"{fmt(s['final'])} (best)"
            else:
                cell = f"{fmt(s['final'])} / {fmt(s['best'])} (@{s['best_step']})"
            nonfinite = nonfinite or bool(s.get("nonfinite"))
            cells.append(cell + (f"; {s['nonfinite']} non-finite" if s.get("nonfinite") else ""))
        scores, where = reported_scores(r.results), _reported_where(r)
        skipped = skipped_updates(r.results, lambda d=d: d.nonfinite_losses)
        where += f"; {skipped} updates skipped" if skipped else ""
        flagged = flagged or bool(skipped and scores)
        cells += [f"{_fmt(scores[m])} ({where})" if m in scores else "" for m in reported]
        cells += [_steady_cell(c, r.results.get(c)) for c in steady]
        grid.rows.append(cells)
    maxed = [m for m in metrics if higher_is_better(m)]
    # first: it decides whether the per-token columns may be read against each other at all
    not_comparable = tokenizer_note(runs, metrics).lstrip()
    note = ((not_comparable + " " if not_comparable else "")
            + "Cells: final value / best value (@step of the best); `(best)` where the final value is the best. "
            + (f"Best = max for {', '.join(maxed)}; min otherwise." if maxed else "Best = min."))
    if nonfinite:
        note += (" `N non-finite`: values logged as inf or NaN (a step whose update was skipped logs its loss "
                 "first); best is over the finite ones, and the plots draw them as crosses at the top edge.")
    if settings:
        note += f" {', '.join(settings)}: the settings in which runs of one stage differ (config.yaml)."
    for words in per_step.values():
        note += (f" Not at equal tokens: {words}; `tokens seen` is each run's at its last step, and the runs are "
                 "compared at equal tokens below.")
    if reported:
        note += (" Reported columns (results.json): the run's reported split, scored once after training on the "
                 "model of the step named.")
    if flagged:
        note += " " + SKIPPED_NOTE
    if steady:
        note += (" Steady columns (summary.json): the median step of the second half of the steps of the run's last "
                 "attempt (its steady_steps; the run's own where it never resumed; the first steps hold compilation "
                 "and warm-up), and its MFU.")
    damaged = [f"{label} ({r.damage_line})" for r, label in zip(runs, run_labels(runs)) if r.damaged]
    if damaged:
        note += f" Damaged records, each run shown without the files named: {'; '.join(damaged)}."
    return [grid, "\n\n" + note + "\n\n" + machines_line(runs) + "\n",
            *equal_tokens_table(runs, metrics, digests, per_step, run_labels(runs))]


def machines_line(runs: list[Run]) -> str:
    """Where the runs computed (``Run.device``: summary.json's, else run.json's environment), with how many ran on
    each: times, tokens/s and MFU are figures of a machine."""
    made = Counter(r.device or "not recorded (no summary.json device or run.json environment)" for r in runs)
    return "Machines: " + "; ".join(f"{device} ({count} run{'s' * (count != 1)})" for device, count in made.items()) + "."


STEADY_COLUMNS = {"tokens_per_s_steady": "steady tokens/s", "mfu": "steady MFU"}


def seed_groups(runs: list[Run]) -> list[list[Run]]:
    """The runs that differ in their seed alone (the same identity but `seed`, and the same start weights), two or
    more of them reporting scores, in first-seen order: a sweep of seeds (`finetune.py -m ... seed=1,2,3`)."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        if not reported_scores(run.results):
            continue
        recipe = {k: v for k, v in identity(run.config).items() if k != "seed"}
        key = json.dumps([run.stage, recipe, run.results.get("start_weights_sha256")], sort_keys=True, default=str)
        groups.setdefault(key, []).append(run)
    return [g for g in groups.values() if len({r.config.get("seed") for r in g}) >= 2]


def _runs_of_seeds(runs: list[Run]) -> str:
    """'3 seeds', or where some seed ran more than once (two folders of one command), '4 runs of 3 seeds': mean, sd
    and range are then over the runs, not the seeds."""
    seeds = len({json.dumps(r.config.get("seed")) for r in runs})
    return f"{seeds} seeds" if seeds == len(runs) else f"{len(runs)} runs of {seeds} seeds"


def chosen_scores(run: Run) -> dict[str, float]:
    """{val_<metric>: value} that chose the run's reported model (``rundir.selection_scores``); {} where nothing was
    chosen. The score a sweep's settings may be chosen on: the reported split's may not."""
    return selection_scores(run.results)


def swept_settings(groups: list[list[Run]]) -> list[str]:
    """The settings in which seed groups differ (``differing_settings`` of one run per group, seed aside, in the
    order the main table gives them): what a sweep varied besides its seeds (trainer.lr, ...)."""
    return sorted(k for k in differing_settings([g[0] for g in groups]) if k != "seed")


def _mean_cell(values: list[float], runs: list[Run], fmt: Callable[[float], str] = _fmt) -> str:
    if not values:
        return ""
    sd = statistics.stdev(values) if len(values) > 1 else float("nan")
    return (f"{fmt(statistics.mean(values))} +- {fmt(sd)} ({fmt(min(values))}-{fmt(max(values))}, "
            f"{_runs_of_seeds(runs)})")


def seeds_table(groups: list[list[Run]], labels: dict[int, str] | None = None) -> Blocks:
    """One row per seed group: its runs (`labels`, by id of the run: the main table's labels, else run names), the
    settings the groups differ in (``swept_settings``), the seeds, the mean +- sample standard deviation over the
    seeds, with its range, of the validation value that chose each run's model (``chosen_scores``), then of each
    reported metric."""
    if not groups:
        return []
    labels = labels or {}
    swept = swept_settings(groups)
    chosen = list(dict.fromkeys(m for g in groups for r in g for m in chosen_scores(r)))
    metrics = list(dict.fromkeys(m for g in groups for r in g for m in reported_scores(r.results)))
    header = ["runs", *swept, "seeds", *(f"chosen {m}: mean +- sd (min-max)" for m in chosen),
              *(f"reported {m}: mean +- sd (min-max)" for m in metrics)]
    grid = Grid(header, settings=frozenset(range(1, 1 + len(swept))))
    for g in groups:
        names = [labels.get(id(r), r.name) for r in g]
        note = draws_note(subset_draw(r.config, r.results) for r in g)
        cells = ["; ".join(names[:3]) + (f" (+{len(names) - 3})" if len(names) > 3 else ""),
                 *(_setting(g[0], k) for k in swept),
                 ", ".join(str(r.config.get("seed")) for r in g) + (f": {note}" if note else "")]
        for scores_of, names_ in ((chosen_scores, chosen), (lambda r: reported_scores(r.results), metrics)):
            scores = [(r, scores_of(r)) for r in g]
            for m in names_:
                cells.append(_mean_cell([s[m] for _, s in scores if m in s], [r for r, s in scores if m in s]))
        grid.rows.append(cells)
    if chosen:
        choose = (f"Choose among the rows on the chosen columns ({', '.join(chosen)}: the validation split held "
                  "out of the training data, at the step that chose each run's model); never on the reported ones, "
                  "which score the split a result is reported on.")
    else:
        choose = ("No run held out a validation split (validation_fraction): nothing here may choose among the rows; "
                  "the reported columns score the split a result is reported on.")
    swept_words = f" {', '.join(swept)}: the settings in which the groups differ." if swept else ""
    return [("\n## Across seeds\n\nRuns that differ in their seed alone (same settings and start weights; where "
            "subset_seed is unset the seed also draws their train and scored examples, and the seeds cell says so); "
            "sd: the sample standard deviation over the runs, one per seed where a cell counts no more runs than seeds."
            f"{swept_words} {choose}\n\n"), grid, "\n"]


def grouped_table(runs: list[Run], digests: list[Digest], metrics: list[str], keys: list[str]) -> Blocks:
    """The "Across seeds" table by `keys` (``compare_runs``' `group_by`): a row per stage and value of `keys`
    (``sweeps.grouped``, in the order of `runs`: ``sweeps.by_groups``), with its runs and seeds, the steps they ran,
    and the mean +- sample sd (min-max) over its runs of each metric's final value (metrics.jsonl's last), of the
    validation value that chose each run's model (``chosen_scores``) and of each reported score: pooled over every
    other setting in which its runs differ, which the note names. A run whose config.yaml is damaged
    (``Run.config_read``) records no setting: it is left out, and the note says so."""
    of_run = {id(r): d for r, d in zip(runs, digests)}
    groups, pooled = grouped(runs, keys, differing_settings([r for r in runs if r.config_read]))
    read = [r for g in groups.values() for r in g]
    stages = len({r.stage for r in read}) > 1 and "stage" not in keys
    chosen = list(dict.fromkeys(m for r in read for m in chosen_scores(r)))
    reported = list(dict.fromkeys(m for r in read for m in reported_scores(r.results)))
    grid = Grid([*(["stage"] if stages else []), *keys, "runs", "seeds", "steps",
                 *(f"final {m}" for m in metrics), *(f"chosen {m}" for m in chosen),
                 *(f"reported {m}" for m in reported)],
                settings=frozenset(range(int(stages), int(stages) + len(keys))))
    for (stage, *values), group in groups.items():
        steps = sorted({of_run[id(r)].last_step for r in group})
        cells = [*([str(stage)] if stages else []), *values, str(len(group)),
                 ", ".join(dict.fromkeys(shown(r.config.get("seed")) for r in group)),
                 str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"]
        for m in metrics:
            finals = [(r, of_run[id(r)].summary([m]).get(m, {}).get("final")) for r in group]
            finite = [(r, v) for r, v in finals if v is not None and math.isfinite(v)]
            cell = _mean_cell([v for _, v in finite], [r for r, _ in finite], _percent if m in PERCENT else _fmt)
            bad = sum(v is not None and not math.isfinite(v) for _, v in finals)
            cells.append(cell + (f"; {bad} non-finite left out" if bad else ""))
        for scores_of, names in ((chosen_scores, chosen), (lambda r: reported_scores(r.results), reported)):
            scores = [(r, scores_of(r)) for r in group]
            cells += [_mean_cell([s[m] for _, s in scores if m in s], [r for r, s in scores if m in s])
                      for m in names]
        grid.rows.append(cells)
    damaged = len(runs) - len(read)
    scores = (["chosen: the validation value that chose each run's model, the column to choose settings on"]
              if chosen else []) + (["reported: the reported split's score, never to choose on"] if reported else [])
    words = (f"\n## Across seeds, by {', '.join(keys)}\n\nA row per {', '.join(keys)}"
             + (" and stage" if stages else "") + ": its runs, pooled over "
             + (f"every other setting in which they differ ({', '.join(pooled)})" if pooled else "nothing (they "
                "differ in no other setting)")
             + "; each cell the mean +- sd (min-max): the mean, the sample standard deviation and the range over the "
             "row's runs. final: each run's last logged value, at the steps the steps column gives"
             + "".join(f"; {s}" for s in scores) + "."
             + (f" Left out: {damaged} run{'s' * (damaged != 1)} whose config.yaml is damaged (no settings to group "
                "by)." if damaged else "") + "\n\n")
    return [words, grid, "\n"]


def sweep_plots(groups: list[list[Run]]) -> list[tuple[str, str]]:
    """(chosen metric, swept setting) for each plot ``plot_sweep`` draws of the seed groups: each validation metric
    that chose their models (``chosen_scores``) against each swept setting (``swept_settings``) whose values are
    numbers, two or more of them (trainer.lr)."""
    swept = swept_settings(groups)
    chosen = list(dict.fromkeys(m for g in groups for r in g for m in chosen_scores(r)))
    numeric = [k for k in swept if len({_setting(g[0], k) for g in groups}) > 1
               and all(_number(identity(g[0].config).get(k)) is not None for g in groups)]
    return [(m, k) for m in chosen for k in numeric]


def sweep_plot_name(metric: str, key: str) -> str:
    return f"chosen_{metric}_by_{key}.png"


def plot_sweep(groups: list[list[Run]], metric: str, key: str, path: str | Path) -> Path:
    """One PNG: the validation value that chose each run's model (``chosen_scores``) against the swept setting `key`:
    a dot per run, the mean over its seeds joined by a line through the groups that agree in every other setting
    they differ in (and task), each such line its own colour; a log axis where the values span 10x or more."""
    swept = [k for k in swept_settings(groups) if k != key]
    tasks = {g[0].key_config.get("task") for g in groups}
    lines: dict[str, list[tuple[float, list[float]]]] = {}
    for g in groups:
        values = [chosen_scores(r)[metric] for r in g if metric in chosen_scores(r)]
        if not values:
            continue
        words = [f"{k.rsplit('.', 1)[-1]}={_setting(g[0], k) or NULL}" for k in swept]
        if len(tasks) > 1:
            words.insert(0, str(g[0].key_config.get("task")))
        lines.setdefault(", ".join(words), []).append((float(identity(g[0].config)[key]), values))
    fig, axes = plots.figure()
    ax = axes[0][0]
    for colour, (label, points) in zip(plots.colours(len(lines)), lines.items()):
        points.sort()
        ax.plot([x for x, _ in points], [statistics.mean(v) for _, v in points], color=colour, marker="o",
                linewidth=1.4, label=f"{label}: mean over seeds" if label else "mean over seeds")
        ax.plot([x for x, v in points for _ in v], [y for _, v in points for y in v], color=colour, marker=".",
                linestyle="none", alpha=0.5)
    xs = [x for points in lines.values() for x, _ in points]
    if min(xs) > 0 and max(xs) >= 10 * min(xs):
        ax.set_xscale("log")
    ax.set_xlabel(key + (" (log scale)" if ax.get_xscale() == "log" else ""))
    ax.set_ylabel(f"chosen {metric}")
    ax.grid(alpha=0.3)
    plots.title(fig, f"{metric} that chose each run's model, by {key} (dots: seeds)", fontsize=11)
    plots.legend_below(fig)
    return save_figure(fig, path)


def _reported_where(run: Run) -> str:
    reported = run.results.get("reported") or {}
    split = reported.get("split") or run.results.get("eval_split") or "eval"
    return f"{split}, step {reported['step']}" if isinstance(reported.get("step"), int) else split


def _steady_cell(column: str, value) -> str:
    if not isinstance(value, (int, float)):
        return ""
    return _percent(float(value)) if column in PERCENT else _fmt(float(value))


def run_labels(runs: list[Run]) -> list[str]:
    """Short labels that tell the runs apart: the run name; where runs share one, their stage where that differs,
    then the settings in which they differ (`lr=0.001`, ``differing_settings``: a sweep's runs share their run_name),
    and where nothing in their settings does (copies of one run), the shortest end of their paths that does."""
    labels = [r.name for r in runs]
    for step in (_by_stage, _by_settings, _by_path):
        for label in {x for x in labels if labels.count(x) > 1}:
            same = [i for i, x in enumerate(labels) if x == label]
            for i, new in zip(same, step([runs[i] for i in same], label)):
                labels[i] = new
    return labels


def _by_stage(runs: list[Run], label: str) -> list[str]:
    return [f"{r.stage}/{label}" if len({r.stage for r in runs}) > 1 else label for r in runs]


def _by_settings(runs: list[Run], label: str) -> list[str]:
    keys = sorted(differing_settings(runs))  # one order for every group of runs sharing a name
    short = {k: k.rsplit(".", 1)[-1] for k in keys}
    short = {k: k if list(short.values()).count(v) > 1 else v for k, v in short.items()}
    return [f"{label} ({', '.join(f'{short[k]}={_setting(r, k) or NULL}' for k in keys)})" if keys else label
            for r in runs]




def _by_path(runs: list[Run], label: str) -> list[str]:
    for depth in range(1, max(len(r.path.parts) for r in runs) + 1):
        tails = ["/".join(r.path.parts[-depth:]) for r in runs]
        if len(set(tails)) == len(tails):
            return tails
    return [str(r.path) for r in runs]


# How a metric is named on a plot's axis and title, and the factor its values are drawn at (a fraction as percent,
# as the table prints it); a metric not listed is drawn under its logged name
METRIC_WORDS = {"loss": ("training loss", 1), "val_loss": ("validation loss", 1),
                "val_ppl": ("validation perplexity", 1), "mfu": ("MFU (%)", 100),
                "tokens_per_s": ("tokens per second", 1), "grad_norm": ("gradient norm", 1)}


def metric_words(metric: str) -> tuple[str, float]:
    """(the words for `metric` on a plot, the factor its values are drawn at)."""
    return METRIC_WORDS.get(metric, (metric, 1))


def plot_metric(runs: list[Run], metric: str, path: str | Path, log_y: bool | None = None,
                labels: list[str] | None = None, title: str | None = None,
                reference: tuple[str, float] | None = None,
                series_of: Callable[[Run, str], tuple[list[int], list[float]]] = series,
                ratio_to: Run | None = None, x_label: str = "step") -> Path | None:
    """One PNG: `metric` against step, one line (or marker series, for sparse eval rows) per run, a panel per stage
    (an MLM loss and a classification loss never share an axis); each run its own colour and marker, the same in
    every plot of the runs; full-attention runs dashed; `reference` (label, value) a horizontal grey line; the legend below the
    panels. A non-finite value is a cross at the top edge of its panel (the line joins the finite ones around it);
    runs that did not log `metric` are named in the legend; a throughput's (THROUGHPUT) first logged step, compilation
    and warm-up, is left out of each run's line, as the legend says; a log scale that a value <= 0 rules out is said on the
    axis. `ratio_to`, a run among `runs`, adds a panel under the first: each run's values over that run's at the same
    steps, which shows gaps of a percent that the curves' span hides. `labels` default to ``run_labels``;
    `series_of` gives a run's (steps, values) (default: ``series``), or its (x, values) on another axis that
    `x_label` names (the tokens seen). A per-token metric (PER_TOKEN) of runs of one stage that differ in their
    tokenizer is drawn in a panel per tokenizer (``panel_keys``), each naming its own, and the title says these do
    not compare; `title` None: the metric by the axis, and the machines the runs computed on (``machines_words``).
    An axis of one x value (a single logged point) is centred on it; steps and tokens are whole numbers on the axis.
    Returns None (and writes nothing) when no run logged `metric`."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    words, factor = metric_words(metric)
    colours, labels = run_colours(runs), labels or run_labels(runs)
    if len(set(map(str, colours))) < len(runs):  # a colour per panel: the legend names each entry's panel
        labels = [f"{r.stage}: {label}" for r, label in zip(runs, labels)]
    marker = dict(zip(map(id, runs), plots.markers(len(runs))))  # a run's marker besides its colour
    data = [(colour, r, label, *series_of(r, metric)) for colour, r, label in zip(colours, runs, labels)]
    missing = [d[2] for d in data if not d[3]]
    data = [d for d in data if d[3]]
    if not data:
        return None
    # a throughput's first logged step is the process's compilation and warm-up (an MFU near 0), not the run's
    # speed: left out of every run's line, and the legend says so
    warm_up = metric in THROUGHPUT and any(len(d[3]) > 1 for d in data)
    if warm_up:
        data = [(*d[:3], d[3][1:], d[4][1:]) if len(d[3]) > 1 else d for d in data]
    if log_y is None:
        log_y = metric.endswith("ppl")
    panel_of = dict(zip(map(id, runs), panel_keys(runs, metric)))
    panels = list(dict.fromkeys(panel_of[id(d[1])] for d in data))
    split = any(tokenizer for _, tokenizer in panels)  # runs of different tokenizers apart: they do not compare
    width = 7.0 if len(panels) == 1 else 4.6 * len(panels)
    ratio = ratio_to is not None and len(panels) == 1 and any(d[1] is ratio_to for d in data)
    fig, axes = plots.figure(len(panels), 2 if ratio else 1, size=(width, 6.4 if ratio else 4.2),
                             **({"height_ratios": [3, 2], "sharex": True} if ratio else {}))
    nonfinite = 0
    for n, (ax, panel) in enumerate(zip(axes[0], panels)):
        stage, tokenizer = panel
        for colour, run, label, steps, values in (d for d in data if panel_of[id(d[1])] == panel):
            finite = [(s, v * factor) for s, v in zip(steps, values) if math.isfinite(v)]
            style = plots.FULL_STYLE if not projects_keys(run.key_config["attention"]) else "-"
            # a marker at every point of a sparse series, at about 8 of a dense one
            ax.plot([s for s, _ in finite], [v for _, v in finite], marker=marker[id(run)],
                    markevery=1 if len(steps) <= 20 else max(1, len(finite) // 8), markersize=4, linewidth=1.4,
                    label=label, color=colour, linestyle=style)
            bad = [s for s, v in zip(steps, values) if not math.isfinite(v)]
            nonfinite += len(bad)
            if bad:  # (an empty unclipped line would still stretch the layout's bounds)
                ax.plot(bad, [0.97] * len(bad), transform=ax.get_xaxis_transform(), marker="x", markersize=6,
                        linestyle="none", color=colour, clip_on=False)
        if reference is not None:
            value = reference[1] * factor
            ax.axhline(value, color="grey", linestyle=":", linewidth=1.2,
                       label=f"{reference[0]} ({value:,.0f}{'%' if metric in PERCENT else ''})" if n == 0 else None)
        ax.set_xlabel(x_label)
        xs = {x for d in data if panel_of[id(d[1])] == panel for x in d[3]}
        if len(xs) == 1:  # matplotlib's own limits around one point read "-0.04 ... 0.04 step"
            (x,) = xs
            pad = max(0.5, 0.05 * abs(x))
            ax.set_xlim(x - pad, x + pad)
            ax.set_xticks([x])
        else:  # no fractional steps or tokens; otherwise the ticks matplotlib picks by default (its AutoLocator's)
            ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=True))
        shown = [v for d in data if panel_of[id(d[1])] == panel for v in d[4] if math.isfinite(v)]
        if log_y and all(v > 0 for v in shown):
            ax.set_yscale("log")
            ax.set_ylabel(f"{words} (log scale)")
        else:
            ax.set_ylabel(f"{words} (linear scale: a value <= 0)" if log_y else words)
            plots.plain_ticks(ax.yaxis)
        plots.plain_ticks(ax.xaxis)
        if len(panels) > 1:
            plots.title(ax, f"{stage or 'stage not recorded'} runs" + (f", tokenizer {tokenizer}" if tokenizer else ""),
                        fontsize=10)
        ax.grid(alpha=0.3)
    if ratio:
        _ratio_panel(axes[1][0], data, ratio_to, axes[0][0], x_label)
    if not title:
        title = f"{words} by {x_label.split(' (')[0]}; {machines_words([d[1] for d in data])}"
    if split:
        title += (f". Not comparable across tokenizers: a panel per tokenizer, as the {words} of each is per token of "
                  "its own vocabulary")
    plots.title(fig, title, fontsize=11)
    handles, names = [], []
    for ax in fig.axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            handles.append(handle)
            names.append(name)
    if nonfinite:
        handles.append(Line2D([], [], marker="x", color="black", linestyle="none"))
        names.append(f"a non-finite value ({nonfinite}), drawn at the top edge")
    if warm_up:
        handles.append(Line2D([], [], linestyle="none"))
        names.append("not drawn: each run's first step (compilation and warm-up)")
    if missing:
        handles.append(Line2D([], [], linestyle="none"))
        names.append(f"no {metric} logged{'' if x_label == 'step' else ' with tokens seen'}: {', '.join(missing)}")
    plots.legend_below(fig, handles, names, more="more runs")
    return save_figure(fig, path)


def panel_keys(runs: list[Run], metric: str) -> list[tuple[str | None, str]]:
    """(stage, tokenizer) of each run's panel in a plot of `metric`: a panel per stage, and where `metric` is per token
    (PER_TOKEN) and runs of a stage (BLOCK_STAGES) differ in their tokenizer (``tokenizer_differences``, the note the
    table gives), a panel per tokenizer, named by the settings that differ ("data.tokenizer=a, data.vocab_size=8000";
    "not recorded" for a run whose config.yaml is damaged); the tokenizer "" otherwise."""
    out = []
    for run in runs:
        staged = [r for r in runs if r.stage == run.stage]
        differ = metric in PER_TOKEN and run.stage in BLOCK_STAGES and tokenizer_differences(staged)
        keys = [k for k in TOKENIZER_KEYS if differ and len({_tokenizer_value(r, k) for r in staged
                                                              if r.config_read}) > 1]
        words = (", ".join(f"{k}={_tokenizer_value(run, k)}" for k in keys) if run.config_read else "not recorded")
        out.append((run.stage, words if keys else ""))
    return out


def _tokenizer_value(run: Run, key: str) -> str:
    return str(recorded_paths(flatten(run.config).get(key)))


def machines_words(runs: list[Run]) -> str:
    """The machines `runs` computed on (``Run.device``), for a plot's title: "machine: NAME", "machines: A (2 runs),
    B (1 run)", or "machine not recorded" (never left unsaid: a speed or an MFU is a machine's)."""
    made = Counter(r.device for r in runs)
    if len(made) == 1:
        (device,) = made
        return f"machine: {device}" if device else "machine not recorded"
    return "machines: " + ", ".join(f"{device or 'not recorded'} ({count} run{'s' * (count != 1)})"
                                    for device, count in made.items())


# a run's model shape in its config.yaml, by bench.throughput.BASE_SHAPE's names
SHAPE_KEYS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
              "ffn": "intermediate_size"}


def mfu_target(runs: list[Run]) -> tuple[str, float] | None:
    """The trainer's MFU target (bench.throughput.TRAINER_TARGET_MFU, set for the base model at n = 512) as the MFU
    plot's reference line, where a run of `runs` trains that model at that n; None otherwise (the target judges no
    other run). The plot's runs are the trainer's own, not the benchmark step (TARGET_MFU)."""
    from ..bench.throughput import BASE_SHAPE, TRAINER_TARGET_MFU

    def judged(run: Run) -> bool:
        model = run.config.get("model") if isinstance(run.config.get("model"), dict) else {}
        return run.key_config.get("n") == 512 and all(model.get(SHAPE_KEYS[key]) == value
                                                       for key, value in BASE_SHAPE.items())

    return ("trainer target, base model at n = 512", TRAINER_TARGET_MFU) if any(map(judged, runs)) else None


def run_colours(runs: list[Run]) -> list:
    """A colour per run, none repeated among a panel's runs (its stage's) and the same in every plot of `runs`: up to
    20 runs, one of plots.colours for each; beyond, each stage's runs spread over the whole ramp on their own (one
    ramp over all runs gave a panel of a few runs neighbouring, near-identical colours)."""
    if len(runs) <= 20:
        return plots.colours(len(runs))
    stages = [r.stage for r in runs]
    of_stage = {stage: iter(plots.colours(stages.count(stage))) for stage in dict.fromkeys(stages)}
    return [next(of_stage[stage]) for stage in stages]


def _ratio_panel(ax, data: list, reference: Run, above, x_label: str = "step") -> None:
    """Each run's values over `reference`'s at the steps (x) both logged, as percent above it."""
    ref = next(d for d in data if d[1] is reference)
    at = {s: v for s, v in zip(ref[3], ref[4]) if math.isfinite(v) and v != 0}
    for colour, run, _, steps, values in data:
        if run is reference:
            continue
        kept = [(s, 100 * (v / at[s] - 1)) for s, v in zip(steps, values) if s in at and math.isfinite(v)]
        ax.plot([s for s, _ in kept], [r for _, r in kept], color=colour, linewidth=1.4,
                marker="o" if len(kept) <= 20 else None, markersize=3)
    ax.axhline(0, color=ref[0], linestyle=plots.FULL_STYLE, linewidth=1.2)
    ax.set_ylabel(f"% above {ref[2]}")
    ax.set_xlabel(x_label)
    ax.grid(alpha=0.3)
    above.set_xlabel("")
    late = [v for line in ax.get_lines()[:-1] for s, v in zip(*line.get_data()) if s >= max(at) / 4]
    if late:  # the range of the last three quarters: the first steps' gaps are tens of percent and hide the end's
        pad = max(0.5, 0.15 * (max(late) - min(late)))
        ax.set_ylim(min(0, min(late)) - pad, max(0, max(late)) + pad)


def plot_axis(metric: str, x: str | None, differ: bool) -> str:
    """The x axis of `metric`'s plot: `x` where given; else the tokens seen where runs of one stage differ in tokens
    per step (`differ`), but the step for a rate (THROUGHPUT): tokens/s or MFU at a step is the same figure however
    many tokens the step held, and on a tokens axis a run of twice the tokens per step looked twice as long."""
    return x or ("tokens" if differ and metric not in THROUGHPUT else "step")


def axis_label(metric: str, x: str | None, differ: bool) -> str:
    """The x axis's words (``plot_axis``): where the runs differ in tokens per step, why the axis is the tokens, or
    that at a step they have not seen the same tokens where the step was asked for a metric that is no rate."""
    if plot_axis(metric, x, differ) == "tokens":
        return "tokens seen" + (" (the runs differ in tokens per step)" if x is None else "")
    if differ and metric not in THROUGHPUT:
        return "step (the runs differ in tokens per step: at one step they have not seen the same tokens)"
    return "step"


def _drawable(asked: list[str] | None, metrics: list[str]) -> list[str]:
    """The metrics to plot: those asked (--plot), which need matplotlib (a ConfigError naming it before anything is
    written); else the table's, where matplotlib is installed (the table needs none: without it, no plots and a
    warning saying how to get them)."""
    if asked:
        import_needed("matplotlib", "--plot", "matplotlib")
        return list(asked)
    try:
        import_needed("matplotlib", "plotting the runs' metrics", "matplotlib")
    except ConfigError as err:
        print(f"warning: {err} (the table is written without them)", file=sys.stderr)
        return []
    return metrics


def compare_runs(paths: list[str | Path], out_dir: str | Path, metrics: list[str] | None = None,
                 plot_metrics: list[str] | None = None, overwrite: bool = False,
                 command: str | None = None, x: str | None = None, where: list[str] | None = None,
                 group_by: list[str] | None = None, width: int | None = None) -> dict[str, Any]:
    """Write out_dir/runs.md (the table, after a line with `command`, the command line that made it, when given)
    and out_dir/<metric>.png for each plotted metric, and where seed groups differ in a numeric setting (an lr
    sweep), out_dir/chosen_<val metric>_by_<setting>.png (``plot_sweep``).

    `paths` are run directories or folders holding them (outputs/pretrain). A file there that an earlier
    compare_runs did not write is refused unless `overwrite` (``outputs.check_output_files``). Returns
    {"runs", "table", "markdown": path, "plots": [paths], "seed_groups": [[runs]], "summary": {run path:
    summarize_run}, "printed": the table for a terminal `width` characters wide}; the table ends with the runs that
    differ in their seed alone (``seeds_table``).

    A sweep's runs narrowed and grouped (``report.sweeps``): `where`, "KEY=VALUE" items, keeps the runs of those
    values (runs.md says how many of those found), a key given twice either value; `group_by`, keys (one item may
    give several, "k,sharing"), orders the runs by their values (numbers numerically) and replaces the "Across seeds"
    table by one of the mean +- sd over each value's runs (``grouped_table``); KEY a setting as the table
    names it (k, sharing, trainer.lr, seed): one that no run records is a ConfigError naming it and the settings
    there are. "printed" (``terminal.terminal_text``) is the table as runs.md holds it where `width` is None or 0 or
    where it fits; else without the settings that are the same in every row, long values shortened and columns left
    out, with a note saying which.

    The plots' x axis is `x`: "step", "tokens" (the tokens seen, metrics.jsonl's `tokens`), or None: the tokens where
    runs of one stage differ in tokens per step (``tokens_per_step_note``; the table then compares them at equal
    tokens as well), except for a rate (tokens/s, MFU: ``plot_axis``), else the step; the axis label says which, and
    why where it was chosen or where a step axis compares runs of different tokens per step."""
    if x not in (None, "step", "tokens"):
        raise ConfigError(f"x={x!r}: give step or tokens (or nothing: tokens where the runs differ in tokens per step)")
    script = run_from_a_script()
    runs = [load_run(p, rows=False) for p in find_runs(named_paths(paths), strict=True)]
    if not runs:
        raise DataError(f"no run directories (with metrics.jsonl) in {', '.join(map(str, paths))}")
    found, conditions = len(runs), parse_where(where or [], "--where" if script else "where")
    if conditions:
        runs = select(runs, conditions, "--where" if script else "where")
    keys = list(dict.fromkeys(k.strip() for item in group_by or [] for k in str(item).split(",") if k.strip()))
    if group_by is not None and not keys:
        raise ConfigError(f"{'--group-by' if script else 'group_by'}: give a setting to group by, as the table "
                          "names it (k, sharing, trainer.lr)")
    if keys:
        runs = by_groups(runs, keys, "--group-by" if script else "group_by")
    # each metrics.jsonl read once, row by row, keeping only the metrics the table and plots can show
    wanted = list(metrics or default_metrics())
    plotted = list(plot_metrics) if plot_metrics else wanted
    # every metric keeps its thinned series: the table reads it at equal tokens (``value_at_tokens``)
    digests = [digest(iter_metrics(r.path / METRICS_FILE), {*wanted, *plotted}, {*wanted, *plotted})
               for r in progress_over(runs, "compare_runs: reading", "runs")]
    logged = logged_metrics(digests)
    for flag, asked in (("--metrics", metrics), ("--plot", plot_metrics)):
        missing = [m for m in asked or [] if m not in logged]
        if missing:
            raise DataError(f"{flag}: no run logged {', '.join(missing)}; the runs logged {', '.join(sorted(logged))}")
    metrics = list(metrics) if metrics else available_metrics(digests)
    plot_metrics = _drawable(plot_metrics, metrics)
    out_dir = Path(resolve_path(out_dir))  # a relative one from the repository, as the runs' paths
    groups = seed_groups(runs)
    blocks = ([where_words(conditions, len(runs), found)] if conditions else []) + markdown_table(runs, metrics, digests)
    blocks += (grouped_table(runs, digests, metrics, keys) if keys
               else seeds_table(groups, dict(zip(map(id, runs), run_labels(runs)))))
    table = markdown(blocks)
    md = out_dir / "runs.md"
    swept = sweep_plots(groups) if plot_metrics else []  # drawn where matplotlib is (_drawable)
    of_run = {id(r): d for r, d in zip(runs, digests)}
    differ = bool(tokens_per_step_note(runs, digests))
    # no settings: a comparison's folder takes the next comparison, of any runs; the command line is its record
    record = {**made_by("compare_runs", {}), **({"command_line": command} if command else {})}
    with output_files([md, *(out_dir / f"{m}.png" for m in plot_metrics),
                       *(out_dir / sweep_plot_name(m, k) for m, k in swept)], record, overwrite, replaces_earlier=True,
                      key="--out" if script else "out_dir=", reads=[r.path for r in runs]):
        atomic_write(md, (f"Command: `{command}`\n\n" if command else "") + table)
        plots = [p for m in plot_metrics
                 if (p := plot_metric(runs, m, out_dir / f"{m}.png", reference=mfu_target(runs) if m == "mfu" else None,
                                      series_of=lambda r, metric: of_run[id(r)].series(metric,
                                                                                       plot_axis(metric, x, differ)),
                                      x_label=axis_label(m, x, differ))) is not None]
        plots += [plot_sweep(groups, m, k, out_dir / sweep_plot_name(m, k)) for m, k in swept]
    return {"runs": runs, "table": table, "markdown": md, "plots": plots, "seed_groups": groups,
            "summary": {str(r.path): d.summary(metrics) for r, d in zip(runs, digests)},
            "printed": terminal_text(blocks, width)}
