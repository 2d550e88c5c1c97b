"""What a GPU node must hold before a target starts there: every module the targets' jobs import, and installed
versions that the installed packages' requirements accept. The wheels go in with `pip install --no-deps --target`
(docs/gpu/README.md, step 3), which checks no requirement against the node's own packages (a datasets wheel needing
pyarrow>=24 beside an older pyarrow), so a conflict would show only as a job's traceback after the machine's start;
checked here from the installed metadata (importlib.metadata, packaging), without pip."""

from __future__ import annotations

import importlib.util
from importlib import metadata

from ..errors import ConfigError

PROJECT = "linformer"
# What the targets' jobs import beyond what gpu.py's own start needs (scripts/wheelhouse.py, NEEDED_MODULES): the
# corpora's and the tasks' readers (datasets over pyarrow and fsspec, multiprocess and dill for its workers), the
# metrics (evaluate, scikit-learn), the reports (pandas, matplotlib, scipy)
JOB_MODULES = ("datasets", "pyarrow", "fsspec", "multiprocess", "dill", "evaluate", "sklearn", "pandas", "matplotlib",
               "scipy", "hydra", "omegaconf", "transformers", "tokenizers", "safetensors")
STEPS = "docs/gpu/README.md, steps 1 and 3"


def unmet_requirement(project: str = PROJECT) -> str | None:
    """The first requirement, among `project`'s and those of the distributions installed beside it (the wheels: their
    environment markers as this Python reads them, no extras), that the installed version of what it names does not
    meet, in words; None where all are met. A distribution not installed is left to the module check (the node list
    leaves wandb out). The node's own packages (installed elsewhere: torch, its CUDA libraries) are checked as what a
    wheel requires, never for their own requirements among themselves: an image's own pins are not this project's to
    refuse a lending over."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    home = _site(project)
    seen, todo = set(), [project]
    while todo:
        name = todo.pop()
        if canonicalize_name(name) in seen:
            continue
        seen.add(canonicalize_name(name))
        if name != project and _site(name) != home:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            need = Requirement(text)
            if need.marker is not None and not need.marker.evaluate({"extra": ""}):
                continue
            try:
                version = metadata.version(need.name)
            except metadata.PackageNotFoundError:
                continue
            if not need.specifier.contains(version, prereleases=True):
                return f"{need.name} {version} is installed here, and {name} requires {need.name}{need.specifier}"
            todo.append(need.name)
    return None


def _site(name: str) -> str | None:
    """The folder `name`'s distribution is installed in (a site-packages, the wheels' --target); None where it is not
    installed."""
    try:
        return str(metadata.distribution(name).locate_file(""))
    except metadata.PackageNotFoundError:
        return None


def check_node() -> None:
    """ConfigError in one line naming the first module the targets' jobs import that is missing here, or the first
    requirement an installed version does not meet."""
    missing = next((name for name in JOB_MODULES if importlib.util.find_spec(name) is None), None)
    if missing is not None:
        raise ConfigError(f"{missing} is missing here, and the targets' jobs import it: install the wheels first "
                          f"({STEPS})")
    unmet = unmet_requirement()
    if unmet is not None:
        raise ConfigError(f"{unmet}: add a wheel of a version it accepts to the wheelhouse (name the node's version in "
                          f"docs/gpu/node_packages.txt, then {STEPS})")
