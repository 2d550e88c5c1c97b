"""Experiment plans: the stages of ``make demo`` (``demo``), ``make reproduce-mini`` (``mini``), ``make
reproduce-pretrained`` (``pretrained``) and their targets. Each stage is a real CLI line run by
``linformer.stages``; where it writes is read from the configs the stage's script composes (``run_dir``), so a
renamed key or directory moves the plans' done-paths with it instead of leaving them checking elsewhere."""

from __future__ import annotations

import functools
from pathlib import Path

from ..errors import ConfigError

_MARKER = "RUN-NAME-OF-A-PLAN"


@functools.cache
def _run_dir_pattern(config: str, overrides: tuple[str, ...] = ()) -> str:
    from ..cli import compose

    run_dir = str(compose(config, [*overrides, f"run_name={_MARKER}"], with_hydra=True).hydra.run.dir)
    if _MARKER not in run_dir:
        raise ConfigError(f"hydra.run.dir of configs/{config}.yaml ({run_dir}) does not follow run_name: the "
                          "experiment plans name their runs' directories through it")
    return run_dir


def run_dir(config: str, run_name: str, overrides: tuple[str, ...] = ()) -> Path:
    """Where scripts/<config>.py writes the run named `run_name` (relative to the repository, as the config says),
    with the plan's `overrides` (e.g. paths.output_dir=...) given to every stage."""
    return Path(_run_dir_pattern(config, tuple(overrides)).replace(_MARKER, run_name))
