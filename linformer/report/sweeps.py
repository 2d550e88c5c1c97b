"""Narrowing and grouping a sweep's runs for ``compare_runs``: `where` (``--where KEY=VALUE``) keeps the runs of a
setting's value, `group_by` (``--group-by KEY``) gives the mean +- sd of each value's runs. KEY is a setting as the
table names it: a column (`k`, `sharing`, `stage`, ...) or a key of the runs' config.yaml (`model.sharing`,
`trainer.lr`, `seed`), and a value is compared as the run records it, a number numerically (3e-4 is 0.0003).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError, did_you_mean
from ..rundir import Run, identity

# The comparison table's config columns (Run.key_config's keys), first in each row
CONFIG_COLUMNS = ["stage", "model", "attention", "n", "k", "sharing", "task", "experiment", "global_batch",
                  "processes"]
# How a config column is headed where its key_config name is not what it holds (experiment: config.experiment_name,
# the trackers' group, not the experiment= config group)
COLUMN_NAMES = {"experiment": "experiment_name"}
# The config columns by the names the table's header gives them
COLUMNS = {COLUMN_NAMES.get(c, c): c for c in CONFIG_COLUMNS}
NULL = "null"  # an unset setting in a label or a value, as a command line sets it


def settings(run: Run) -> dict[str, Any]:
    """{setting: value} of a run as the table gives them: its config columns (``Run.key_config``: no k for full
    attention) by their names in the header, then its config.yaml's keys (``rundir.identity``); read once per run, as
    key_config reads its model's files."""
    key_config = run.key_config
    columns = {name: run.stage if c == "stage" else key_config.get(c) for name, c in COLUMNS.items()}
    return {**identity(run.config), **columns}


def setting_names(values: list[dict[str, Any]]) -> list[str]:
    """The settings a `where` or `group_by` may name, of the runs' ``settings``: the table's config columns any run
    has, then every key of their config.yaml, sorted."""
    columns = [name for name in COLUMNS if any(v[name] is not None for v in values)]
    return columns + sorted({k for v in values for k in v} - set(COLUMNS))


def matches(recorded: Any, given: str) -> bool:
    """Whether a recorded value is the value `given` on a command line: numbers numerically (3e-4 is 0.0003), an
    unset one by "null" (as the labels name it), true and false in either case, any other by its text."""
    if recorded is None:
        return given.lower() in (NULL, "none")
    if isinstance(recorded, bool):
        return given.lower() == str(recorded).lower()
    number, wanted = _as_number(recorded), _as_number(given)
    if number is not None and wanted is not None:
        return math.isclose(number, wanted, rel_tol=1e-9, abs_tol=0.0)
    return str(recorded) == given


def _as_number(value: Any) -> float | None:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def shown(value: Any) -> str:
    return NULL if value is None else str(value)


def parse_where(items: Iterable[str], flag: str) -> list[tuple[str, str]]:
    """(key, value) of each KEY=VALUE; a ConfigError naming `flag` for one without its "=" or its key."""
    out = []
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} {item!r}: give KEY=VALUE, a setting as the table names it and its value "
                              "(model.sharing=kv, trainer.lr=3e-4, k=128)")
        out.append((key.strip(), value.strip()))
    return out


def check_keys(values: list[dict[str, Any]], keys: Iterable[str], flag: str) -> None:
    """A ConfigError naming `flag` for a key none of the runs' ``settings`` hold, with the closest and the settings
    there are."""
    names = setting_names(values)
    for key in keys:
        if key not in names:
            raise ConfigError(f"{flag} {key}: no run records a setting {key}{did_you_mean(key, names)}; the runs' "
                              f"settings: {', '.join(names)}")


def select(runs: list[Run], where: list[tuple[str, str]], flag: str) -> list[Run]:
    """The runs whose every key of `where` matches (``matches``) one of the values given for it (a key given twice
    keeps the runs of either value). A ConfigError naming `flag` where a key is no setting of the runs
    (``check_keys``) or where no run is left, naming the values the runs have."""
    of_run = {id(r): settings(r) for r in runs}
    check_keys(list(of_run.values()), [k for k, _ in where], flag)
    wanted: dict[str, list[str]] = {}
    for key, value in where:
        wanted.setdefault(key, []).append(value)
    kept = runs
    for key, values in wanted.items():
        left = [r for r in kept if any(matches(of_run[id(r)].get(key), v) for v in values)]
        if not left:
            had = sorted({shown(of_run[id(r)].get(key)) for r in kept})
            asked = " or ".join(f"{key}={v}" for v in values)
            among = " among the runs of the earlier conditions" if kept is not runs else ""
            raise ConfigError(f"{flag} {asked}: no run has it{among}; their {key}: {', '.join(had)}")
        kept = left
    return kept


def where_words(where: list[tuple[str, str]], kept: int, found: int) -> str:
    """runs.md's line on the runs that `where` kept."""
    wanted: dict[str, list[str]] = {}
    for key, value in where:
        wanted.setdefault(key, []).append(value)
    words = " and ".join(f"{key} {' or '.join(values)}" for key, values in wanted.items())
    return f"Runs where {words}: {kept} of the {found} found.\n\n"


def _order(value: Any) -> tuple:
    """A sort key that puts numbers in numeric order (k 32, 64, 128, not "128", "32"), then text, then unset."""
    number = None if isinstance(value, bool) else _as_number(value)
    if number is not None:
        return (0, number, "")
    return (1 if value is not None else 2, 0.0, str(value))


def by_groups(runs: list[Run], keys: list[str], flag: str) -> list[Run]:
    """`runs` in the order of their values of `keys` (``_order``), stage by stage as first seen, ties kept; a
    ConfigError naming `flag` for a key no run records (``check_keys``)."""
    of_run = {id(r): settings(r) for r in runs}
    check_keys(list(of_run.values()), keys, flag)
    stages = list(dict.fromkeys(r.stage for r in runs))
    return sorted(runs, key=lambda r: (stages.index(r.stage), *(_order(of_run[id(r)].get(k)) for k in keys)))


def grouped(runs: list[Run], keys: list[str], also: list[str]) -> tuple[dict[tuple, list[Run]], list[str]]:
    """The runs whose config.yaml was read (``Run.config_read``: a damaged one records no setting) by stage and
    value of `keys` ({(stage, value, ...): runs}, in the order of `runs`), and the settings among the config columns
    and `also` (config keys: those the table gives a column) in which the runs of some group differ: what each group
    pools."""
    read = [r for r in runs if r.config_read]
    of_run = {id(r): settings(r) for r in read}
    groups: dict[tuple, list[Run]] = {}
    for run in read:
        groups.setdefault((run.stage, *(shown(of_run[id(run)].get(k)) for k in keys)), []).append(run)
    names = [k for k in dict.fromkeys([*COLUMNS, *also]) if k != "stage" and k not in keys]
    pooled = [k for k in names if any(len({shown(of_run[id(r)].get(k)) for r in g}) > 1 for g in groups.values())]
    return groups, pooled
