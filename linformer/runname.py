"""How runs and models are named: the resolvers configs/*.yaml name run directories with, and a model folder's short
label."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from .files import BEST_DIR, MODEL_DIR, resolve_path


def _k_tag(k) -> str:
    """Run-name part for k: '32', or '16-32' for one k per layer (a name a shell and a glob take as it is, where the
    list's own text '[16, 32]' holds a glob's character class and a space)."""
    return "-".join(map(str, k)) if isinstance(k, Sequence) and not isinstance(k, str) else str(k)


def _attn_tag(attention, n, k, sharing, projection="linear") -> str:
    """Run-name part for the architecture: full attention has no k and no sharing; a projection other than the
    paper's learned one is named (linformer-n128-k32-headwise-conv)."""
    if str(attention) == "full":
        return f"full-n{n}"
    return f"{attention}-n{n}-k{_k_tag(k)}-{sharing}" + ("" if projection in (None, "linear") else f"-{projection}")


# the folder names a run gives the models it saves (train/trainer.py, train/export.py): not a model's own name
_GENERIC_MODEL_DIRS = re.compile(rf"({MODEL_DIR}|{BEST_DIR}|{MODEL_DIR}-step-\d+)")


def model_label(path, sep: str = "/") -> str:
    """How a model folder is named shortly (a default run name, a compare table's model, a model card): its folder's
    name, with its run's name and `sep` before it where the folder is one a run saves (`.../<run>/best` ->
    `<run>/best`), so that two runs' saved models are told apart."""
    path = Path(str(path).rstrip("/"))
    if _GENERIC_MODEL_DIRS.fullmatch(path.name) and path.parent.name not in ("", ".", "/"):
        return f"{path.parent.name}{sep}{path.name}"
    return path.name


def model_name_of(path) -> str:
    """How a default run name names a model path: ``model_label`` as one folder's name (`<run>-best`), so that runs
    of two runs' exported models do not share a name (and one does not offer to continue the other)."""
    return model_label(path, "-")


def _suffix(overrides: str | None, task=None) -> str:
    """A sweep job's folder name after its run_name: its other overrides (Hydra's override_dirname, which leaves out
    the keys the default run name holds), with a path's slashes made "_" so that a value like
    init_from=outputs/pretrain/x names one folder, not three. With the job's overrides (`task`, Hydra's
    overrides.task) and a run_name given among them, that name holds none of those keys: every override but the
    name and the paths then names the job, or a swept seed would put every job in one folder."""
    if task is not None and any(str(o).startswith("run_name=") for o in task):
        overrides = ",".join(sorted(str(o) for o in task if not str(o).startswith(("run_name=", "paths.", "hydra."))))
    return f"-{overrides.replace('/', '_')}" if overrides not in (None, "") else ""


def _init_name(init_from, group: str, architecture: str) -> str:
    """A pretraining run's default name before its seed: the model group and its attention for a fresh model; for an
    MLM continuation, the model it continues, with the group's attention where a BERT/RoBERTa encoder is converted
    by it (a saved Linformer keeps its own architecture, which its own name tells)."""
    if init_from in (None, ""):
        return f"{group}-{architecture}"
    config = Path(resolve_path(str(init_from))) / "config.json"
    try:
        linformer = json.loads(config.read_text()).get("model_type") == "linformer"
    except (OSError, ValueError, AttributeError):  # a hub name, or no readable config: the run says so later
        linformer = False
    return f"{model_name_of(init_from)}-mlm" if linformer else f"{model_name_of(init_from)}-{architecture}-mlm"


def register_resolvers() -> None:
    """The resolvers configs/*.yaml use to name runs and paths; needed before Hydra composes (idempotent)."""
    from omegaconf import OmegaConf

    resolvers = {
        "basename": model_name_of,
        "scratch_tag": lambda flag: "-scratch" if flag else "",
        "attn_tag": _attn_tag,
        "k_tag": _k_tag,
        "suffix": _suffix,
        "init_name": _init_name,
        "repo_path": resolve_path,  # Hydra's run dirs: relative to the repository, as every path the code reads
    }
    for name, fn in resolvers.items():
        OmegaConf.register_new_resolver(name, fn, replace=True)
