"""What may name a file or folder: a config value that becomes a folder's name, a name read from a record file."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from .runs import HYDRA_SWEEP_DIR, UNSEARCHED_DIRS
from .tables import _CONTROL

NAME_MAX_BYTES = 255  # the longest name of one file or folder that Linux's file systems take


def plain_name(name: Any) -> bool:
    """Whether `name`, read from a record file, names an entry directly in the record's own folder: one name, not
    empty, '.' or '..', without '/'. Any other (``../x``, an absolute path) would reach outside the folder, and a
    record file may come from anyone (a shared folder, a tarball, a commit), so it is never trusted as a path."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and os.sep not in name \
        and "\0" not in name


def folder_name(value, key: str, names: str, under: str, stage: str | None = None, run: bool = False,
                outputs: str = "paths.output_dir") -> str:
    """`value` as one folder name: what `key` names (`names`, e.g. "a run directory") inside the folder the project
    keeps such folders in (`under`). The one check of every config value that becomes a folder's name: an empty one,
    "." or ".." or one with a "/" would put the files straight into `under`, or outside it; one with a control
    character (a line break, a tab) would break every line that names it (a report's table, a command to copy).
    `stage`: the value also names the command's Hydra folder, <outputs>/<stage>/<value>, beside the stage's
    sweep folder (HYDRA_SWEEP_DIR), whose name it may not take: the two commands' files would mix, and every reader
    would take the sweep for a run. `run`: the folder holds a run, which may not take a name that the readers of
    runs (``rundir.find_runs``: compare_runs, the dashboard, table2) do not search: a hidden one, or one of a run's
    own folders (checkpoints, wandb). `outputs`: what holds the stages' Hydra folders, as the user sets it (the key,
    or the folder where the command's config fixes it)."""
    text = "" if value is None else str(value)
    if not text.strip() or "/" in text or os.sep in text or text in (".", ".."):
        raise ConfigError(f"{key}={value!r} must name {names} (one name, not a path: not empty, without '/', not "
                          f"'..'): it would put the files straight into {under}, or outside it.")
    if _CONTROL.search(text):
        raise ConfigError(f"{key}={value!r} must name {names} without control characters (a line break, a tab): "
                          "every line that names the folder (a report's table row, a command to copy) would break.")
    if stage is not None and text == HYDRA_SWEEP_DIR:
        raise ConfigError(f"{key}={value!r} is the name of the {stage} sweep folder ({outputs}/{stage}/"
                          f"{HYDRA_SWEEP_DIR}, where --multirun puts its jobs): choose another name, or its files "
                          "would mix with a sweep's.")
    if run and (text.startswith(".") or text in UNSEARCHED_DIRS):
        raise ConfigError(f"{key}={value!r} must name {names} that the readers of runs search (not hidden, not "
                          f"{' or '.join(UNSEARCHED_DIRS)}): compare_runs, the dashboard and table2 would pass over "
                          f"its run. Choose another name; a run already in such a folder (made before this check) "
                          f"resumes after its folder is renamed in {under}: run_name=<the new name>.")
    return text
