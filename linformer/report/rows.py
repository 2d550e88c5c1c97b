"""Table 2's rows: which row a finetuning run belongs to, and its name (the paper layout and the from-scratch table
share them)."""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ..errors import DataError
from ..files.hashing import ReadOnce
from ..files.mappings import read_json
from ..files.runs import BEST_DIR, METRICS, RESULTS
from ..modeling.configuration import (
    EXACT_KEY_FIELDS,
    OVERLAP_LABELS,
    RECORDED_FIELDS,
    SIZE_FIELDS,
    LinformerConfig,
    exact_keys_label,
)
from ..modeling.values import projects_keys
from ..rundir import find_runs, is_full_attention, iter_metrics, named_paths

# Row labels a report's JSON may hold, each with the label that names that row (none inside the label that replaces
# it, so relabelling twice changes nothing): ", no double count" misnames the mask rule for the projected columns the
# exact keys cover, as a few tokens per query still count twice under it (under the reduced rule none does); "paper's
# slice" does not say what it slices, and it and "E's first T rows (the paper's)" credit the paper with a policy it does
# not state (fairseq's Linformer slices E)
# fairseq's length policy as a row names it: an input of T < n tokens is projected by the first T of E's n rows
FAIRSEQ_SLICE = "E's first T rows (fairseq's)"

RETIRED_LABELS = {", no double count": OVERLAP_LABELS["mask"], "paper's slice": FAIRSEQ_SLICE,
                  "E's first T rows (the paper's)": FAIRSEQ_SLICE}


def relabelled(record):
    """A report's JSON record with every retired label (RETIRED_LABELS), in keys and strings, replaced by today's;
    numbers untouched."""
    if isinstance(record, dict):
        return {relabelled(k): relabelled(v) for k, v in record.items()}
    if isinstance(record, list):
        return [relabelled(v) for v in record]
    if isinstance(record, str):
        for old, new in RETIRED_LABELS.items():
            record = record.replace(old, new)
    return record


SHARING_LABEL = {"headwise": "", "kv": ", shared kv", "layerwise": ", shared kv, layer", "none": ", per-head E, F"}


def run_devices(runs: list[dict]) -> str:
    """Where the runs were made, from their results (e.g. "NVIDIA H200 (6 runs)"); a run that records none (an
    earlier version's) counted as "not recorded"."""
    counts = Counter(r.get("device") or "not recorded" for r in runs)
    return ", ".join(f"{name} ({n} run{'s' if n > 1 else ''})" for name, n in counts.most_common())


def made_on(runs_on: str | None, report_on: str) -> str:
    """A report's line on machines: where its runs were made (as their records say, ``run_devices``) and, apart,
    where the report was rendered, which records that name no device must not stand in for."""
    return f"Runs made on: {runs_on or 'not recorded'}. This report made on: {report_on}."


def finished_runs(patterns: list[str]) -> list[Path]:
    """The folders at or under command-line paths or globs (``named_paths``) that hold a finished finetuning run's
    results.json, sorted, without duplicates: run directories, a run's kept records (results.json beside its config
    and predictions, no metrics.jsonl), folders of either, or results.json files. Every Table 2 layout reads its runs
    from these."""
    return find_runs(named_paths(patterns), marker=RESULTS)


def check_result(r: dict, path: str | Path, also: tuple[str, ...] = ()) -> None:
    """DataError naming `path` and the first key a table reads that results.json `r` lacks: the task and its reported
    accuracy, then `also` (a layout's own keys). A hand-made record, or one of another version, is refused in one
    line, never a KeyError mid-table."""
    metrics = r.get("metrics")
    needed = {"task": r.get("task") is not None,
              "metrics": isinstance(metrics, dict),
              "metrics.accuracy": isinstance(metrics, dict) and isinstance(metrics.get("accuracy"), (int, float)),
              **{key: r.get(key) is not None for key in also}}
    missing = next((key for key, there in needed.items() if not there), None)
    if missing:
        raise DataError(f"{path} has no {missing} (a finished finetuning run's results.json records it): a hand-made "
                        "or damaged record, or another version's. Restore it, or leave its run out of the paths.")


# The fields the paper's Table 2 names a row by; every other recorded field is the paper's at LinformerConfig's
# default, and a row whose run differs in one says so in its name (``variant_label``).
NAMED_FIELDS = ("attention", "max_seq_len", "projected_dim", "sharing")
# (classifier_pooling: RoBERTa's head reads <s> itself, what None picks for it and what a run records)
PAPER_FIELDS = {f.name: f.default for f in dataclasses.fields(LinformerConfig) if f.name in RECORDED_FIELDS} | \
    {"classifier_pooling": "cls"}


def _hashable(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def k_of(r: dict) -> int | tuple[int, ...]:
    """A Linformer run's k: an int, or a tuple of one k per layer (the paper's non-uniform k)."""
    k = r["projected_dim"]
    return tuple(int(x) for x in k) if isinstance(k, (list, tuple)) else int(k)


def with_size(r: dict) -> dict:
    """results.json `r` with the encoder's size (``SIZE_FIELDS``): as recorded, else (a record written before it
    was) as the run's kept model says in ``<run>/best/config.json``, else left out: unknown."""
    if all(r.get(f) is not None for f in SIZE_FIELDS) or not r.get("_dir"):
        return r
    saved = _saved_size(str(Path(r["_dir"]) / BEST_DIR / "config.json"))
    return {**r, **{f: v for f, v in saved.items() if r.get(f) is None}}


def _saved_size(config_json: str) -> dict:
    """The size fields a kept model's config.json gives, read once for each state of the file (a table asks for
    every row key of every run, many times over); none where the run keeps no model."""
    return dict(_SIZES(config_json))


def _read_size(config_json: str) -> tuple[tuple[str, int], ...]:
    if not os.path.isfile(config_json):  # ReadOnce passes a path that is no regular file on, uncached
        return ()
    config = read_json(config_json)
    return tuple((f, config[f]) for f in SIZE_FIELDS if isinstance(config.get(f), int))


_SIZES = ReadOnce(_read_size, keep=4096)


def variant_of(r: dict) -> tuple[tuple[str, object], ...]:
    """(field, value) for each architecture field results.json `r` records (``RECORDED_FIELDS``) that is not the
    paper's. A Linformer's attention field a record lacks (one written before the field) is the default, which its
    run used; full attention records only its head's (it has no projection). The encoder's size comes from the run's
    kept model where the record lacks it (``with_size``); unknown, it tells no row apart."""
    r = with_size(r)
    full = is_full_attention(r)
    values = {f: _hashable(r[f] if r.get(f) is not None else PAPER_FIELDS[f])
              for f in RECORDED_FIELDS if f not in NAMED_FIELDS
              and not ((full or f in SIZE_FIELDS) and r.get(f) is None)}
    return tuple((f, v) for f, v in values.items() if v != _hashable(PAPER_FIELDS[f]))


def variant_label(variant: tuple[tuple[str, object], ...]) -> str:
    """What a row's architecture does other than the paper's, as its name says it: ', conv, resample, window 128,
    global [0, -1]' ('' for the paper's own)."""
    fields = dict(variant)
    words = {"projection": str(fields.get("projection")), "length_policy": str(fields.get("length_policy")),
             "mask_empty_windows": "window mask", "exact_short_inputs": "exact <= k",
             "classifier_pooling": f"{fields.get('classifier_pooling')} pooling",
             "hidden_size": f"D={fields.get('hidden_size')}",
             "num_hidden_layers": _count(fields.get("num_hidden_layers"), "layer"),
             "num_attention_heads": _count(fields.get("num_attention_heads"), "head"),
             "intermediate_size": f"FFN {fields.get('intermediate_size')}"}
    parts = [words.get(f, f"{f} {v}") for f, v in variant if f not in EXACT_KEY_FIELDS]
    if any(f in EXACT_KEY_FIELDS for f in fields):
        parts.append(exact_keys_label(fields.get("local_window") or 0, fields.get("global_positions"),
                                      bool(fields.get("landmark_pooling")), fields.get("overlap_columns", "keep")))
    return "".join(f", {p}" for p in parts)


def _count(n, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def k_label(k: int | tuple[int, ...] | None) -> str:
    """A row's k: '128', or '16/32 per layer' for one k per layer."""
    return "/".join(map(str, k)) + " per layer" if isinstance(k, tuple) else str(k)


def row_key(r: dict) -> tuple:
    """(attention, n, k, sharing, pretrained, variant): every architecture field the run records (``variant_of``:
    runs of another projection, length policy or exact keys are another row, never seeds of one). A model without
    k (full attention, a RoBERTa checkpoint) is full attention, with k and sharing None; a model without max_seq_len
    (RoBERTa) has the n it was finetuned at. k is a tuple for one k per layer."""
    full = is_full_attention(r)
    n = int(r.get("max_seq_len") or r["max_length"])
    return ("full" if full else "linformer", n, None if full else k_of(r),
            None if full else r.get("sharing"), not bool(r.get("from_scratch", False)), variant_of(r))


def row_order(key: tuple) -> tuple:
    """Rows in the paper's order: by n, full attention first, then k (a per-layer k by its largest), sharing as
    the paper lists it, pretrained before not, the paper's architecture before a variant."""
    attention, n, k, sharing, pretrained, variant = key
    k_sort = (max(k), k) if isinstance(k, tuple) else (k or 0, ())
    return (n, projects_keys(attention), k_sort, list(SHARING_LABEL).index(sharing) if sharing in SHARING_LABEL else 9,
            not pretrained, len(variant), repr(variant))


def row_name(key: tuple) -> str:
    attention, n, k, sharing, pretrained, variant = key
    name = "Full attention (RoBERTa)" if not projects_keys(attention) else \
        f"Linformer, {k_label(k)}{SHARING_LABEL.get(sharing, f', {sharing}')}"
    name += variant_label(variant)  # full attention's too: its size (and head) tell rows apart as well
    return f"{name}, n={n}" + ("" if pretrained else ", no pretraining")


def check_profile_runs(runs: Iterable[str], profile: str, profile_of: Callable[[str], str | None],
                       command: str, others_allowed: bool = False) -> bool:
    """Refuse a reproduction's table (``--layout pretrained|scratch``) over runs of another profile, or over a mix of
    the profile's runs and runs of no profile: the table states the profile's recipe and plan for every row, which
    would be untrue of them. ``others_allowed``: runs of no profile alone make a table without the profile's recipe.
    Returns whether the runs are the profile's (False: none is any profile's)."""
    by_profile: dict[str | None, list[str]] = defaultdict(list)
    for run in runs:
        by_profile[profile_of(run)].append(run)
    if set(by_profile) <= {profile} or (others_allowed and set(by_profile) == {None}):
        return profile in by_profile
    theirs = sorted(name for name in by_profile if name not in (None, profile))
    foreign = sorted(run for name, found in by_profile.items() if name != profile for run in found)
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    fix = (f"pass --profile {theirs[0]}" if len(theirs) == 1 and profile not in by_profile
           else f"give only the {profile!r} profile's runs (the {command} runs named after it)")
    raise DataError(f"{len(foreign)} of the runs are not the {profile!r} profile's ({shown}"
                    + (f": the {', '.join(map(repr, theirs))} profile's" if theirs else "")
                    + f"): the table would state that profile's recipe for them; {fix}.")


def one_run_per_seed(runs: Iterable[dict], key: Callable[[dict], tuple], what: Callable[[dict], str]) -> None:
    """Refuse two runs of one seed where a table pools runs by seed (`key`: the run's row, task and seed, and
    whatever else tells runs of one cell apart, an lr grid's lr say): averaging both and counting one seed would
    weigh that seed twice and state fewer runs than the cell holds. One line naming both runs (their ``_dir``) and
    `what` the cell is."""
    seen: dict[tuple, dict] = {}
    for r in runs:
        k = key(r)
        if k in seen:
            raise DataError(f"{seen[k].get('_dir')} and {r.get('_dir')} are both seed {r.get('seed')} of {what(r)}: "
                            "a table counts each seed once. Give the runs of one of them only (the other's folder "
                            "left out of the paths), or finetune the other with another seed=.")
        seen[k] = r


def skipped_updates(results: Mapping, logged_nonfinite: Callable[[], int]) -> int:
    """The updates a run skipped for a non-finite loss or gradient: results.json's ``skipped_steps``, or for a run
    that recorded none (recorded before the count, or resumed from a checkpoint saved before it: null) its logged
    non-finite losses, `logged_nonfinite()` (called only then: a step whose update was skipped logs its loss)."""
    recorded = results.get("skipped_steps")
    return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else logged_nonfinite()


def logged_nonfinite_losses(run_dir: str | Path) -> int:
    """The rows of a run's metrics.jsonl whose loss is inf or NaN (``skipped_updates``'s count for an older run)."""
    return sum(isinstance(loss := row.get("loss"), (int, float)) and not math.isfinite(loss)
               for row in iter_metrics(Path(run_dir) / METRICS))


# what a report's "N updates skipped" mark means, said under the table that shows one
SKIPPED_NOTE = ("`N updates skipped`: N updates were skipped for a non-finite loss or gradient (results.json's "
                "skipped_steps, or the run's logged non-finite losses where it recorded none): the score is of a "
                "model trained with fewer updates than its steps say.")


def reported_subset(r: dict) -> tuple[int, int | None] | None:
    """(examples scored, examples in the reported split) where a run scored a subset of its reported split
    (max_eval_examples), else None: its score is not the split's. results.json's ``reported`` says both; for a run
    recorded before it, its num_eval_examples at its config's max_eval_examples (``_max_eval_examples``, which the
    table's reader adds) is a subset, of a split whose size it did not record (None): a limit above the split's size
    scores fewer examples than it."""
    reported = r.get("reported") or {}
    examples, of = reported.get("examples"), reported.get("of")
    if examples is not None and of is not None:
        return (int(examples), int(of)) if examples < of else None
    scored, limit = r.get("num_eval_examples"), r.get("_max_eval_examples")
    return (int(scored), None) if scored is not None and limit is not None and scored >= limit else None


SUBSET_KEYS = ("max_train_examples", "max_eval_examples", "validation_fraction")  # what subset_seed draws


def subset_draw(config: dict, results: dict | None = None) -> int | None:
    """The seed that drew a finetuning run's example subsets, or None where it drew none (no key of SUBSET_KEYS set):
    what its results.json records (``subset_seed``), else, for a run recorded before it, what its config gives (its
    subset_seed, else its seed: the default). Runs of other draws trained and scored on other rows."""
    if not any(config.get(key) for key in SUBSET_KEYS):
        return None
    if (results or {}).get("subset_seed") is not None:
        return results["subset_seed"]
    return config.get("subset_seed") if config.get("subset_seed") is not None else config.get("seed")


def draws_note(draws: Iterable[int | None]) -> str:
    """Words for runs of one group or cell whose subsets were drawn by `draws` (subset_draw), where they differ:
    '' when every run drew the same rows (or none)."""
    seeds = {d for d in draws if d is not None}
    if len(seeds) < 2:
        return ""
    return (f"{len(seeds)} different draws of the examples (subset_seed unset follows seed; "
            "give subset_seed=<fixed> to score every seed on one subset)")


def check_one_architecture(groups: dict[tuple, list[dict]], name: Callable[[tuple], str]) -> None:
    """Refuse a cell (`groups`: key -> the runs a table pools) whose runs both record an architecture field
    (``RECORDED_FIELDS``) with different values: the table would average two models as seeds of one. (A record
    without the field, one written before it, cannot say.) One line naming the field, two of the runs and the cell."""
    for key, runs in groups.items():
        runs = [with_size(r) for r in runs]
        for r in runs[1:]:
            field = next((f for f in RECORDED_FIELDS if runs[0].get(f) is not None and r.get(f) is not None
                          and _hashable(runs[0][f]) != _hashable(r[f])), None)
            if field is not None:
                raise DataError(f"{runs[0].get('_dir')} and {r.get('_dir')} differ in {field} ({runs[0][field]!r} and "
                                f"{r[field]!r}) but fall in one cell ({name(key)}): the table would average two "
                                "models as seeds of one. Give the runs of one of them only.")
