"""How runs and models are named: the resolvers configs/*.yaml name run directories with, and a model folder's short
label."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

from .files.locations import resolve_path
from .files.runs import BEST_DIR, MODEL_DIR
from .modeling.values import ATTENTION_MODES, projects_keys
from .script_help import config_groups, script_purpose


def _k_tag(k) -> str:
    """Run-name part for k: '32', or '16-32' for one k per layer (a name a shell and a glob take as it is, where the
    list's own text '[16, 32]' holds a glob's character class and a space)."""
    return "-".join(map(str, k)) if isinstance(k, Sequence) and not isinstance(k, str) else str(k)


def _attn_tag(attention, n, k, sharing, projection="linear") -> str:
    """Run-name part for the architecture: full attention has no k and no sharing; a projection other than the
    paper's learned one is named (linformer-n128-k32-headwise-conv)."""
    # an unknown mode is named as given here (a run name is read before the model): the model's config refuses it
    if attention in ATTENTION_MODES and not projects_keys(attention):
        return f"{attention}-n{n}"
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
    """A sweep job's folder name after its name, for the commands without a run record (corpus, tokenizer,
    benchmark, spectrum): Hydra's override_dirname (the config's exclude_keys left out), a path's slashes made "_" so
    that a value like init_from=outputs/pretrain/x names one folder, not three.

    Their exclude_keys are their own, not ``_job_suffix``'s operational keys: those are the training runs' (their
    specs' field marks), and one of them, tokenizer_dir, is where a run finds its tokenizer but chooses the tokenizer
    a corpus is prepared with; nor have these commands a run_name that names keys, or a length."""
    return f"-{overrides.replace('/', '_')}" if overrides not in (None, "") else ""


# Keys that say how a run is operated, not what it computes (runconfig.OPERATIONAL_KEYS, which the run specs'
# field marks give: that package sits above this module, and hands them over as it is imported, which _job_suffix
# asks for where no code has yet)
_NOT_NAMING: set[str] = set()
# How long a run trains: not in a sweep job's folder name unless the sweep varies it, so that a finished job's
# "raise trainer.max_steps" and a stopped one's "resume with the same command" find the same folder
LENGTH_KEYS = ("trainer.max_steps", "trainer.epochs")
_swept: set[str] = set()  # the keys the running --multirun command line sweeps (hydra_start.hydra_main sets them)


def name_no_runs(keys) -> None:
    """`keys` (and the keys under them) never name a sweep job's folder: they may change between starts of a run."""
    _NOT_NAMING.update(keys)


def sweeping(keys) -> None:
    """The keys this process's --multirun command line sweeps: a length key names the job's folders only then."""
    _swept.clear()
    _swept.update(keys)


def _under(key: str, keys) -> bool:
    return any(key == k or key.startswith(k + ".") for k in keys)


def _job_suffix(task, _root_) -> str:
    """A run's sweep job's folder name after its run_name: its overrides (Hydra's overrides.task) that the run name
    does not already say and that change what the run computes, sorted, as Hydra's override_dirname writes them (a
    path's slashes made "_"). Left out: the keys the config's run_name reads (a group where it reads the group's
    keys; the experiment where the name is the default one, which names it, or an experiment's own), the
    operational keys (``name_no_runs``) and the length keys unless swept. A run_name given on the command line reads
    nothing, so every other override names the job."""
    if not _NOT_NAMING:  # handed down as the run specs are imported: not at `import linformer`, which stays light
        importlib.import_module(f"{__package__}.runconfig")
    task = as_typed(task)  # a task.spec.<field>= as typed, not as the force-add Hydra parsed
    raw = str(_root_._get_node("run_name")._value())
    read = set(re.findall(r"\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)(?=[},])", raw))
    given = any(str(o).startswith("run_name=") for o in task)
    if not given:
        read.add("experiment")
    kept = []
    for override in (str(o) for o in task):
        key = override.lstrip("+~").split("=", 1)[0].split("@", 1)[0]
        if (_under(key, _NOT_NAMING) or key == "run_name" or any(_under(key, [r]) or r.startswith(key + ".")
                                                                   for r in read)
                or (key in LENGTH_KEYS and key not in _swept)):
            continue
        kept.append(override)
    return f"-{','.join(sorted(kept)).replace('/', '_')}" if kept else ""


def _experiment_tag(_root_) -> str:
    """A default run name's end: `-<experiment>` where the command chose experiment=<name> (a path's "/" as "_"),
    so that two experiments' runs of the same task, model and seed get folders of their own."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if "hydra" in _root_:  # a config composed with its hydra node
        choice = OmegaConf.select(_root_, "hydra.runtime.choices.experiment", default=None)
    else:  # a running Hydra job's config (its hydra node is HydraConfig's)
        choice = HydraConfig.get().runtime.choices.get("experiment") if HydraConfig.initialized() else None
    return f"-{str(choice).replace('/', '_')}" if choice else ""


def _init_name(init_from, group: str, architecture: str) -> str:
    """A pretraining run's default name before its seed: the model group and its attention for a fresh model; for an
    MLM continuation, the model it continues, with the group's attention where a BERT/RoBERTa encoder is converted
    by it (a saved Linformer keeps its own architecture, which its own name tells)."""
    if init_from in (None, ""):
        return f"{group}-{architecture}"
    config = Path(resolve_path(str(init_from))) / "config.json"
    try:
        linformer = json.loads(config.read_text(encoding="utf-8")).get("model_type") == "linformer"
    except (OSError, ValueError, AttributeError):  # a hub name, or no readable config: the run says so later
        linformer = False
    return f"{model_name_of(init_from)}-mlm" if linformer else f"{model_name_of(init_from)}-{architecture}-mlm"


def _device_type(device: str) -> str:
    from .devices import device_type  # torch, imported where a config asks for it, not by every config read

    return device_type(device)


# The force-adds ``configs.spec_overrides`` made of this process's typed task.spec.<field>= overrides: Hydra's parse
# alone sees them; what names a run (a sweep job's folder, ``_job_suffix``) reads them back as typed (``as_typed``)
FORCED: set[str] = set()


def as_typed(overrides) -> list[str]:
    """`overrides` (Hydra's ``hydra.overrides.task``) with each force-add ``configs.spec_overrides`` made written back as it
    was typed (``task.spec.format=csv``), so that a sweep job's folder name and what a run records are the command
    line's: a sweep begun before task.spec.<field>= was rewritten finds its folders again. One the user typed with
    its ``++`` keeps it (unless the same process also rewrote that very override from its plain form)."""
    return [o[2:] if o in FORCED else o for o in (str(o) for o in overrides)]


def register_resolvers() -> None:
    """The resolvers configs/*.yaml use to name runs and paths; needed before Hydra composes (idempotent)."""
    from omegaconf import OmegaConf

    resolvers = {
        "basename": model_name_of,
        "scratch_tag": lambda flag: "-scratch" if flag else "",
        "attn_tag": _attn_tag,
        "k_tag": _k_tag,
        "suffix": _suffix,
        "job_suffix": _job_suffix,
        "experiment_tag": _experiment_tag,
        "init_name": _init_name,
        "device_type": _device_type,  # configs/benchmark.yaml: the CPU's cap on n where device=auto finds no GPU
        "repo_path": resolve_path,  # Hydra's run dirs: relative to the repository, as every path the code reads
        "script_purpose": script_purpose,  # --help (configs/hydra/help/script.yaml)
        "help_config_groups": config_groups,
    }
    for name, fn in resolvers.items():
        OmegaConf.register_new_resolver(name, fn, replace=True)
