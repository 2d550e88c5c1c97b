"""Experiment plans: the stages of ``make demo`` (``demo``), ``make reproduce-mini`` (``mini``), ``make
reproduce-pretrained`` (``pretrained``) and their targets. Each stage is a real CLI line run by
``linformer.stages``; where it writes is read from the configs the stage's script composes (``run_dir``), so a
renamed key or directory moves the plans' done-paths with it instead of leaving them checking elsewhere."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ..cli import compose
from ..errors import ConfigError

_MARKER = "RUN-NAME-OF-A-PLAN"


@functools.cache
def _run_dir_pattern(config: str, overrides: tuple[str, ...] = ()) -> str:

    run_dir = str(compose(config, [*overrides, f"run_name={_MARKER}"], with_hydra=True).hydra.run.dir)
    if _MARKER not in run_dir:
        raise ConfigError(f"hydra.run.dir of configs/{config}.yaml ({run_dir}) does not follow run_name: the "
                          "experiment plans name their runs' directories through it")
    return run_dir


def run_dir(config: str, run_name: str, overrides: tuple[str, ...] = ()) -> Path:
    """Where scripts/<config>.py writes the run named `run_name` (relative to the repository, as the config says),
    with the plan's `overrides` (e.g. paths.output_dir=...) given to every stage."""
    return Path(_run_dir_pattern(config, tuple(overrides)).replace(_MARKER, run_name))


@dataclass(frozen=True)
class Places:
    """Where a plan's stages write: the repository's data/ and outputs/ and its records folder (paths relative to the
    repository, as the commands and the records name them), or all of them under one folder (`under`: a rehearsal
    that leaves the checkout alone). Files are looked up at REPO / path, which an absolute path ignores."""

    overrides: tuple[str, ...] = ()
    under: Path | None = None
    records: Path | None = None

    @classmethod
    def of(cls, under: Path | None = None, records: Path | None = None) -> Places:
        if under is None:
            return cls((), None, records)
        under = Path(under).resolve()
        return cls((f"paths.data_dir={under / 'data'}", f"paths.output_dir={under / 'outputs'}"), under,
                   under / records.name if records is not None else None)

    def run(self, config: str, name: str) -> Path:
        """scripts/<config>.py's run directory for run_name `name`."""
        return run_dir(config, name, self.overrides)

    def path(self, relative: str | Path) -> Path:
        """A path under data/, outputs/ or docs/ of the checkout, or its place under `under`."""
        return Path(relative) if self.under is None else self.under / relative


CHECKOUT = Places()  # the plans' default: data/, outputs/ and docs/results/ of the checkout
