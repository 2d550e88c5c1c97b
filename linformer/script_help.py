"""What a Hydra script's --help says (configs/hydra/help/script.yaml): its purpose and an example command, from the
script's docstring (their one home), and the config groups its config selects with their options. Hydra's own
template listed every group under configs/ to every script, the shared parts (``data: _settings``) among the
options and groups the script does not read (``task`` on pretraining) with them. Also the one reader of a module's
docstring for a description (``description``): ``python -OO`` drops every ``__doc__``."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from .files.locations import script, script_home
from .shell import scripts_named_here


def module_doc(doc: str | None, file: str | os.PathLike) -> str:
    """A module's docstring: `doc` (its ``__doc__``), or where Python dropped it (``python -OO``, PYTHONOPTIMIZE=2)
    the one its source `file` holds; "" where neither has one."""
    if doc is None:
        try:
            doc = ast.get_docstring(ast.parse(Path(file).read_text(encoding="utf-8")), clean=False)
        except (OSError, SyntaxError, ValueError):
            doc = None
    return doc or ""


def description(doc: str | None, file: str | os.PathLike, paragraph: bool = False) -> str:
    """What a command's --help and a plan's title say it does: the first line (`paragraph`: the first paragraph) of
    its module's docstring (``module_doc``: also under ``python -OO``)."""
    text = module_doc(doc, file)
    return text.split("\n\n")[0] if paragraph else (text.splitlines() or [""])[0]


def script_purpose(name: str) -> str:
    """scripts/<name>.py's docstring, read where a command names it (``locations.script_home``: beside the script
    that runs, a clone's over a wheel too, else the clone's scripts/): what it does and an example command; the
    script's path where it has none."""
    home = script_home(name)
    try:
        doc = None if home is None else ast.get_docstring(ast.parse((home / f"{name}.py").read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        doc = None
    return scripts_named_here(doc) if doc else script(name)


def config_groups() -> str:
    """One line per config group the running command's config selects: its options (those named ``_*`` are parts
    the options share, not options) and the one chosen, e.g. ``model: base, mini, small, tiny (now: tiny)``. Empty
    outside a Hydra command (a composed config resolved whole, hydra node and all: ``compose(..., with_hydra=True)``)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return ""
    runtime = HydraConfig.get().runtime
    folders = [Path(s.path) for s in runtime.config_sources if s.schema == "file"]
    lines = []
    for group in sorted(g for g in runtime.choices if g != "hydra" and not g.startswith("hydra/")):
        options = sorted({p.relative_to(folder / group).with_suffix("").as_posix()
                          for folder in folders for p in (folder / group).rglob("*.yaml")
                          if not any(part.startswith("_") for part in p.relative_to(folder / group).parts)})
        if options:
            chosen = runtime.choices[group]
            lines.append(f"{group}: {', '.join(options)} ({f'now: {chosen}' if chosen else 'none chosen'})")
    return "\n".join(lines) or "none: set the keys below"


def help_without_configs(name: str, why: str) -> str:
    """scripts/<name>.py's --help where no configs folder is found (`why`: the refusal naming where it looked): what
    the script does and its example command, and that its groups and keys are the configs folder's to list."""
    return (f"{script_purpose(name)}\n\n== Configuration groups (group=option) ==\nnot listed: the groups, their "
            f"options and every key are read from the configs folder, and none was found: {why}")
