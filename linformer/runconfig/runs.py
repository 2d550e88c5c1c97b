"""Run specs: a stage's composed config read and checked once, at its entry (``PretrainSpec.read(cfg)`` and the
others). Below the entry nothing reads the raw config: the training core, the tasks, the accelerator and the
schedule get these frozen dataclasses.

Each field's metadata names the config key it is read from and whether that key is part of the run's identity (what
the run computes) or operational (how it is run: paths, logging, the evaluation subset). ``OPERATIONAL_KEYS``, which
the run record's identity leaves out, derives from these marks and the trainer's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from ..configs import refuse_missing_values
from ..data.io import local_path
from ..errors import ConfigError
from ..files.names import folder_name
from ..modeling.configuration import LinformerConfig, check_model_fields, check_projection, check_sharing
from ..runname import name_no_runs
from .settings import (
    OPERATIONAL_TRAINER_KEYS,
    DistillSettings,
    LoggerSettings,
    OptimSettings,
    TaskData,
    TrainerSettings,
    TransferSettings,
    check_corpus_names,
    config_key,
    positive_int,
    seed_value,
    with_task_spec,
)


def plain_config(cfg, config_name: str | None = None) -> dict[str, Any]:
    """The resolved config as plain containers (what config.yaml records). A composed config (of
    configs/<config_name>.yaml) with a value still at ??? is refused first, naming that key, as its script refuses it:
    resolving would fail with OmegaConf's traceback at the first key whose interpolation reads it (run_name)."""
    from omegaconf import OmegaConf

    if not OmegaConf.is_config(cfg):
        return dict(cfg)
    if config_name is not None:
        refuse_missing_values(cfg, config_name)
    return OmegaConf.to_container(cfg, resolve=True)


def _path(cfg: Mapping, key: str) -> str:
    value = cfg.get(key)
    if value in (None, ""):
        raise ConfigError(f"{key} is not set.")
    return local_path(str(value))  # a run's record may name a path in the data mirror (record_path)


def _optional(cfg: Mapping, key: str) -> str | None:
    value = cfg.get(key)
    return None if value in (None, "") else str(value)


# The class a spec is read as (``PretrainSpec.read`` is a PretrainSpec): typing.Self needs Python 3.11, and
# typing_extensions is not among the package's dependencies.
_Spec = TypeVar("_Spec", bound="RunSpec")
_TaskSpec = TypeVar("_TaskSpec", bound="TaskRunSpec")


@dataclass(frozen=True)
class RunSpec:
    """What every stage's run has: its seed, names, and the trainer, optimizer and logger groups."""

    stage: ClassVar[str] = "train"

    config: dict[str, Any] = field(repr=False)  # the resolved config, as config.yaml records it
    seed: int = field(metadata=config_key("seed"))
    run_name: str = field(metadata=config_key("run_name", operational=True))
    experiment_name: str | None = field(metadata=config_key("experiment_name", operational=True))  # the trackers' group
    trainer: TrainerSettings = field(metadata=config_key("trainer"))  # its fields mark themselves (OPERATIONAL_TRAINER_KEYS)
    optim: OptimSettings = field(metadata=config_key("optim"))
    logger: LoggerSettings = field(metadata=config_key("logger", operational=True))

    @classmethod
    def read(cls: type[_Spec], cfg) -> _Spec:
        """The spec of `cfg` (a composed config or a mapping of the same shape), every group checked."""
        plain = plain_config(cfg, cls.stage)
        if plain.get("init_from") is None:  # a run continued from a saved model does not apply the model group
            _check_projection(plain)
        return cls(config=plain, **cls._common(plain), **cls._own(plain))

    @classmethod
    def of(cls: type[_Spec], spec_or_cfg) -> _Spec:
        """A spec passed through; a composed config (the Python API's convenience) read into one."""
        return spec_or_cfg if isinstance(spec_or_cfg, cls) else cls.read(spec_or_cfg)

    @classmethod
    def _common(cls, cfg: Mapping) -> dict[str, Any]:
        # the groups first: a misspelt key in a partial mapping is named, not the run_name it lacks
        groups = {"trainer": TrainerSettings.read(cfg.get("trainer") or {}),
                  "optim": OptimSettings.read(cfg.get("optim") or {}),
                  "logger": LoggerSettings.read(cfg.get("logger") or {})}
        run_name = folder_name(cfg.get("run_name"), "run_name", "a run directory", f"paths.output_dir/{cls.stage}/",
                               stage=cls.stage, run=True)
        return {"seed": seed_value(cfg), "run_name": run_name,
                "experiment_name": _optional(cfg, "experiment_name"), **groups}

    @classmethod
    def _own(cls, cfg: Mapping) -> dict[str, Any]:
        return {}

    @property
    def corpus(self) -> str | None:
        """The prepared corpus the run trains on, if it trains on one (its cache key joins the run's identity)."""
        return getattr(self, "corpus_dir", None)


def _model_group(cfg: Mapping) -> dict[str, Any]:
    """``cfg.model`` without its display name: LinformerConfig's fields (a key that is not one is refused here, with
    the closest field; the values are checked when the model is built)."""
    fields = {k: v for k, v in dict(cfg.get("model") or {}).items() if k != "name"}
    check_model_fields(fields)
    return fields


@dataclass(frozen=True)
class PretrainSpec(RunSpec):
    stage: ClassVar[str] = "pretrain"

    model: dict[str, Any] = field(metadata=config_key("model"))
    model_name: str = field(metadata=config_key("model.name"))
    tokenizer_dir: str = field(metadata=config_key("tokenizer_dir", operational=True))
    corpus_dir: str = field(metadata=config_key("corpus_dir", operational=True))
    init_from: str | None = field(metadata=config_key("init_from"))  # MLM continuation from a converted or pretrained model
    # a fresh model's embedding rows: the tokenizer's vocabulary rounded up to this multiple (None: not padded)
    pad_vocab_to_multiple_of: int | None = field(default=None, metadata=config_key("pad_vocab_to_multiple_of"))

    @classmethod
    def _own(cls, cfg: Mapping) -> dict[str, Any]:
        multiple = positive_int(cfg, "pad_vocab_to_multiple_of", "", allow_none=True)
        if not cfg.get("model"):  # a fresh model's shape comes from its group: none would silently build the defaults
            raise ConfigError("model: no model config group is selected (~model removes it): choose one of "
                              "configs/model/ (model=tiny, model=small, ...).")
        model = _model_group(cfg)
        check_corpus_names(cfg.get("data") or {})  # corpus_dir and tokenizer_dir default to folders they name
        if cfg.get("init_from") is None:  # a fresh model: its values are checked before the corpus is loaded
            model_config(model)
        return {"model": model, "model_name": str((cfg.get("model") or {}).get("name", "")),
                "tokenizer_dir": str(cfg.get("tokenizer_dir")), "corpus_dir": _path(cfg, "corpus_dir"),
                "init_from": _optional(cfg, "init_from"), "pad_vocab_to_multiple_of": multiple}


def _check_projection(cfg: Mapping) -> None:
    """The model group's projection and sharing mode checked before the trainer's and the optimizer's numbers: one of
    the user's own that is not registered is fixed with a module to import, which a refusal of a number would
    otherwise hide until the run after."""
    model = cfg.get("model")
    for key, check in (("projection", check_projection), ("sharing", check_sharing)):
        if isinstance(model, Mapping) and key in model:
            try:
                check(model[key])
            except ConfigError as err:
                raise ConfigError(f"model: {err}") from None


def model_config(fields: Mapping) -> LinformerConfig:
    """A fresh model's LinformerConfig from the model group's fields, or a ConfigError naming the first model.* value
    it refuses (k = 0, an unknown sharing, heads that do not divide the width). PretrainSpec checks the group with it
    at the run's start (otherwise only once the tokenizer and corpus are loaded), and ``pretrain.build_model`` builds
    with it once the tokenizer's fields are added."""
    try:
        return LinformerConfig(**fields)
    except ConfigError as err:
        raise ConfigError(f"model: {err}") from None


@dataclass(frozen=True)
class TaskRunSpec(RunSpec):
    """A run on a labelled task's examples (finetuning, distillation)."""

    task: TaskData = field(metadata=config_key("task"))  # its fields mark their own keys

    @classmethod
    def read(cls: type[_TaskSpec], cfg) -> _TaskSpec:
        """As ``RunSpec.read``, the config recording the task's spec where it was registered from Python
        (``with_task_spec``): a task config's spec block and ``register_task`` leave the same record."""
        spec = super().read(with_task_spec(plain_config(cfg, cls.stage)))
        if spec.trainer.max_steps is None and spec.trainer.epochs is None:  # before the model and the data load
            raise ConfigError(f"trainer.epochs and trainer.max_steps are null: {cls.stage} needs one of them (its "
                              "number of epochs, or of steps).")
        return spec

    @classmethod
    def _own(cls, cfg: Mapping) -> dict[str, Any]:
        return {"task": TaskData.read(cfg)}


@dataclass(frozen=True)
class FinetuneSpec(TaskRunSpec):
    stage: ClassVar[str] = "finetune"

    model_path: str = field(metadata=config_key("model_path"))
    from_scratch: bool = field(metadata=config_key("from_scratch"))  # the same architecture with random weights
    # only the train examples longer than this many tokens (after truncation): finetuning a lengthened model on the
    # inputs it was lengthened for; None = all
    min_train_tokens: int | None = field(default=None, metadata=config_key("min_train_tokens"))

    @classmethod
    def _own(cls, cfg: Mapping) -> dict[str, Any]:
        if cfg.get("model_path") in (None, "", "???"):
            raise ConfigError("model_path is not set: a pretraining run, a model directory or a hub name.")
        scratch = cfg.get("from_scratch", False)
        if not isinstance(scratch, bool):
            raise ConfigError(f"from_scratch={scratch!r} must be true or false.")
        return super()._own(cfg) | {"model_path": str(cfg["model_path"]), "from_scratch": scratch,
                                    "min_train_tokens": positive_int(cfg, "min_train_tokens", "", allow_none=True)}


@dataclass(frozen=True)
class DistillSpec(TaskRunSpec):
    stage: ClassVar[str] = "distill"

    teacher_path: str = field(metadata=config_key("teacher_path"))
    student_path: str | None = field(metadata=config_key("student_path"))
    model: dict[str, Any] = field(metadata=config_key("model"))  # the student converted from the teacher (without student_path)
    distill: DistillSettings = field(metadata=config_key("distill"))

    @classmethod
    def _own(cls, cfg: Mapping) -> dict[str, Any]:
        return super()._own(cfg) | {"teacher_path": str(cfg.get("teacher_path")),
                                    "student_path": _optional(cfg, "student_path"), "model": _model_group(cfg),
                                    "distill": DistillSettings.read(cfg.get("distill") or {})}


@dataclass(frozen=True)
class TransferSpec(RunSpec):
    stage: ClassVar[str] = "transfer"

    model_path: str = field(metadata=config_key("model_path"))
    model: dict[str, Any] = field(metadata=config_key("model"))  # the student's Linformer settings; the rest is the source's
    transfer: TransferSettings = field(metadata=config_key("transfer"))
    corpus_dir: str = field(metadata=config_key("corpus_dir", operational=True))

    @classmethod
    def _own(cls, cfg: Mapping) -> dict[str, Any]:
        return {"model_path": str(cfg.get("model_path")), "model": _model_group(cfg),
                "transfer": TransferSettings.read(cfg.get("transfer") or {}), "corpus_dir": _path(cfg, "corpus_dir")}


SPECS = (PretrainSpec, FinetuneSpec, DistillSpec, TransferSpec)
# Keys no spec reads, which only place things: the paths group (resolved into the paths above) and Hydra's own, and
# where code is found: the modules a command imports first (``hydra_start.import_modules``), whose projection or task
# the model's and the task's keys name.
PLACEMENT_KEYS = frozenset({"paths", "hydra", "imports"})


def _operational_keys() -> frozenset[str]:
    keys = {f.metadata["key"] for spec in SPECS for f in fields(spec) if f.metadata.get("operational")}
    keys |= {f.metadata["key"] for f in fields(TaskData) if f.metadata["operational"]}
    return frozenset(keys) | PLACEMENT_KEYS | OPERATIONAL_TRAINER_KEYS


# Config keys that change how a run is operated, not what it computes: they may differ between starts of a run
OPERATIONAL_KEYS = _operational_keys()
name_no_runs(OPERATIONAL_KEYS)  # nor a sweep job's folder (runname sits below the specs, so they hand the keys down)


@dataclass(frozen=True)
class ConvertSpec:
    """``scripts/convert.py`` (configs/convert.yaml): an encoder converted with the model group's Linformer fields."""

    model_path: str
    out_dir: str
    model: dict[str, Any]  # LinformerConfig fields; null ones are left out (the converted models' defaults)
    seed: int              # the fresh weights (a missing MLM head)
    overwrite: bool

    @classmethod
    def read(cls, cfg) -> ConvertSpec:
        plain = plain_config(cfg, "convert")
        overwrite = plain.get("overwrite", False)
        if not isinstance(overwrite, bool):
            raise ConfigError(f"overwrite={overwrite!r} must be true or false.")
        return cls(model_path=str(plain.get("model_path")), out_dir=_path(plain, "out_dir"),
                   model={k: v for k, v in _model_group(plain).items() if v is not None},
                   seed=seed_value(plain), overwrite=overwrite)
