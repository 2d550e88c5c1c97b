"""Table 2's rows: which row a finetuning run belongs to, and its name (the paper layout and the from-scratch table
share them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import DataError
from ..rundir import is_full_attention

SHARING_LABEL = {"headwise": "", "kv": ", shared kv", "layerwise": ", shared kv, layer", "none": ", per-head E, F"}


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


def row_key(r: dict) -> tuple:
    """(attention, n, k, sharing, pretrained). A model without k (full attention, a RoBERTa checkpoint) is full
    attention, with k and sharing None; a model without max_seq_len (RoBERTa) has the n it was finetuned at."""
    full = is_full_attention(r)
    n = int(r.get("max_seq_len") or r["max_length"])
    return ("full" if full else "linformer", n, None if full else int(r["projected_dim"]),
            None if full else r.get("sharing"), not bool(r.get("from_scratch", False)))


def row_name(key: tuple) -> str:
    attention, n, k, sharing, pretrained = key
    name = "Full attention (RoBERTa)" if attention == "full" else f"Linformer, {k}{SHARING_LABEL.get(sharing, f', {sharing}')}"
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


def reported_subset(r: dict) -> tuple[int, int] | None:
    """(examples scored, examples in the reported split) where a run scored a subset of its reported split
    (max_eval_examples; results.json's ``reported``), else None: its score is not the split's."""
    reported = r.get("reported") or {}
    examples, of = reported.get("examples"), reported.get("of")
    return (int(examples), int(of)) if examples is not None and of is not None and examples < of else None


SUBSET_KEYS = ("max_train_examples", "max_eval_examples", "validation_fraction")  # what subset_seed draws


def subset_draw(config: dict) -> int | None:
    """The seed that drew a finetuning run's example subsets (its config's subset_seed, else its seed: the default),
    or None where it drew none (no key of SUBSET_KEYS set). Runs of other draws trained and scored on other rows."""
    if not any(config.get(key) for key in SUBSET_KEYS):
        return None
    return config.get("subset_seed") if config.get("subset_seed") is not None else config.get("seed")


def draws_note(draws: Iterable[int | None]) -> str:
    """Words for runs of one group or cell whose subsets were drawn by `draws` (subset_draw), where they differ:
    '' when every run drew the same rows (or none)."""
    seeds = {d for d in draws if d is not None}
    if len(seeds) < 2:
        return ""
    return (f"{len(seeds)} different draws of the examples (subset_seed unset follows seed; "
            "give subset_seed=<fixed> to score every seed on one subset)")
