"""The config groups' schemas: every key of ``trainer``, ``optim``, ``logger``, ``transfer``, ``distill`` and the task's
data selection, read and checked once (``<Group>.read``). A key that is not a field is refused with the closest
one; every bad value is a ConfigError naming its key."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import OmegaConf

from ..errors import ConfigError, did_you_mean


def fits_type(value, kind) -> bool:
    """Whether a config value is of an annotated type (int, float, bool, str, list[...], X | None), as YAML gives
    values: a bool is no number, and an int is a float."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return any(fits_type(value, a) for a in args)
    if kind is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(fits_type(v, args[0]) for v in value)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_types(values: Mapping, schema: type, prefix: str) -> None:
    """ConfigError naming `prefix.key` (`key` for top-level keys, prefix "") for the first value that is not of its
    field's annotated type in the dataclass `schema` (unknown keys: refuse_unknown)."""
    hints = typing.get_type_hints(schema)
    for key, value in values.items():
        kind = hints[key]
        if not fits_type(value, kind):
            name = kind.__name__ if isinstance(kind, type) and not typing.get_args(kind) else str(kind)
            key = f"{prefix}.{key}" if prefix else key
            raise ConfigError(f"{key}={value!r} must be {name.replace('typing.', '')}.")


def positive_int(cfg: Mapping, key: str, prefix: str = "trainer", allow_none: bool = False) -> int | None:
    """cfg[key] as an int >= 1 (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = cfg.get(key)
    if value is None and allow_none:
        return None
    name = f"{prefix}.{key}" if prefix else key
    if not fits_type(value, float) or int(value) != value or value < 1:
        raise ConfigError(f"{name}={value!r} must be a whole number of at least 1.")
    return int(value)


def positive_float(cfg: Mapping, key: str, prefix: str = "trainer", allow_none: bool = False) -> float | None:
    """cfg[key] as a finite float > 0 (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = cfg.get(key)
    if value is None and allow_none:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"{prefix}.{key}={value!r} must be a positive number.")
    return number


# Field metadata: operational settings change how a run is operated, not what it computes, so they may differ
# between starts of one run (``rundir.identity`` leaves them out); the others are the run's identity.
_ID, _OP = {"operational": False}, {"operational": True}


COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")  # eager and aot_eager: Dynamo's graph capture alone, for checks


def _compile_backend(value) -> str:
    if value not in COMPILE_BACKENDS:
        raise ConfigError(f"trainer.compile_backend={value!r} is not one of {', '.join(COMPILE_BACKENDS)}.")
    return str(value)


def _flag(t: Mapping, key: str, prefix: str, allow_none: bool = False) -> bool | None:
    """t[key] as true or false (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = t.get(key)
    if value is None and allow_none:
        return None
    if not fits_type(value, bool):
        raise ConfigError(f"{prefix}.{key}={value!r} must be true or false.")
    return value


def _fraction(t: Mapping, key: str, low: float, high: float, closed_low: bool) -> float | None:
    """t[key] in [low, high) (closed_low) or (low, high), or None; else a ConfigError naming trainer.key."""
    value = t.get(key)
    if value is None:
        return None
    number = float(value) if fits_type(value, float) else math.nan
    if not ((low <= number if closed_low else low < number) and number < high):
        bounds = f"{'[' if closed_low else '('}{low:g}, {high:g})"
        raise ConfigError(f"trainer.{key}={value!r} must lie in {bounds}.")
    return number


def refuse_unknown(group: Mapping, schema: type | tuple[str, ...], prefix: str) -> None:
    """ConfigError for the first key of config group `prefix` that is not a field of the dataclass `schema` (or one
    of the keys it lists): a typo or a key no code reads, named with the closest one."""
    known = list(schema) if isinstance(schema, tuple) else [f.name for f in fields(schema)]
    for key in group:
        if key not in known:
            raise ConfigError(f"{prefix}.{key} is not a {prefix} setting{did_you_mean(key, known, prefix + '.')}: "
                              "the config's keys are "
                              f"{', '.join(known)}.")


@dataclass(frozen=True)
class OptimSettings:
    """``cfg.optim`` (configs/optim/): AdamW's betas and eps, and the weight decay of decayed parameters."""

    betas: tuple[float, float]
    eps: float
    weight_decay: float

    @classmethod
    def read(cls, o: Mapping) -> OptimSettings:
        refuse_unknown(o, cls, "optim")
        raw = o.get("betas")
        betas = list(raw) if isinstance(raw, (list, tuple)) or (hasattr(raw, "__iter__") and not isinstance(raw, str)) \
            else [raw]
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1
                                      for b in betas):
            shown = betas if isinstance(raw, (list, tuple)) or hasattr(raw, "__iter__") else raw
            raise ConfigError(f"optim.betas={shown!r} must be two numbers in [0, 1), e.g. [0.9, 0.98].")
        decay = o.get("weight_decay")
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or decay < 0:
            raise ConfigError(f"optim.weight_decay={decay!r} must be a number >= 0.")
        return cls(betas=(float(betas[0]), float(betas[1])), eps=positive_float(o, "eps", "optim"),
                   weight_decay=float(decay))


@dataclass(frozen=True)
class TrainerSettings:
    """Every ``cfg.trainer`` key, validated once: the training core and the tasks read these fields, never the raw
    config. Defaults live in configs/trainer/ (base.yaml and the stage files extending it); a field a stage's
    config does not set is None. A key in ``cfg.trainer`` that is not a field is refused (a typo or a key that
    no code reads)."""

    # what the run computes: its identity
    max_steps: int | None = field(default=None, metadata=_ID)  # None: the task derives it (finetuning: from epochs)
    epochs: int | None = field(default=None, metadata=_ID)           # finetuning, when max_steps is None
    batch_size: int = field(default=None, metadata=_ID)              # per device
    global_batch_size: int | None = field(default=None, metadata=_ID)  # pretraining: batch x processes x grad_accum
    grad_accum: int = field(default=None, metadata=_ID)
    lr: float = field(default=None, metadata=_ID)                    # peak, after warmup
    warmup_steps: int | None = field(default=None, metadata=_ID)  # when set, wins over warmup_ratio (as in HF's)
    warmup_ratio: float | None = field(default=None, metadata=_ID)   # of max_steps
    lr_schedule: str = field(default=None, metadata=_ID)             # linear | polynomial
    lr_end: float = field(default=None, metadata=_ID)
    lr_power: float = field(default=None, metadata=_ID)              # polynomial decay power
    max_grad_norm: float = field(default=None, metadata=_ID)         # inf: no clipping (the norm is still measured)
    mixed_precision: str = field(default=None, metadata=_ID)
    mlm_probability: float | None = field(default=None, metadata=_ID)  # pretraining
    max_length: int | None = field(default=None, metadata=_ID)  # finetuning: tokens per example; None = the model's n
    group_by_length: bool = field(default=False, metadata=_ID)
    # how the run is operated: may change between starts
    eval_every: int | None = field(default=None, metadata=_OP)  # None: the task's default (finetuning: each epoch)
    eval_batches: int | None = field(default=None, metadata=_OP)  # held-out batches per evaluation; None = all
    eval_batch_size: int | None = field(default=None, metadata=_OP)
    eval_at_start: bool = field(default=False, metadata=_OP)
    save_every: int | None = field(default=None, metadata=_OP)   # None: at the end and on a stop signal only
    save_every_minutes: float | None = field(default=None, metadata=_OP)  # also this long after the last; None: off
    save_best: bool = field(default=False, metadata=_OP)
    keep_last: int = field(default=None, metadata=_OP)
    log_every: int = field(default=None, metadata=_OP)
    max_nonfinite_steps: int = field(default=None, metadata=_OP)
    cpu: bool = field(default=False, metadata=_OP)
    peak_tflops: float | None = field(default=None, metadata=_OP)
    compile: bool = field(default=False, metadata=_OP)  # torch.compile the model (the same numbers, faster)
    compile_backend: str = field(default="inductor", metadata=_OP)  # a torch._dynamo backend: inductor | aot_eager | eager
    resume: str | None = field(default=None, metadata=_OP)
    allow_config_change: bool | list[str] = field(default=(), metadata=_OP)
    allow_nonbitwise_resume: bool = field(default=False, metadata=_OP)

    @classmethod
    def read(cls, t: Mapping) -> TrainerSettings:
        refuse_unknown(t, cls, "trainer")
        precision = str(t.get("mixed_precision"))
        if precision not in ("no", "fp16", "bf16"):
            raise ConfigError(f"trainer.mixed_precision={precision!r} is not one of no, fp16, bf16.")
        schedule = t.get("lr_schedule")
        if schedule not in ("linear", "polynomial"):
            raise ConfigError(f"trainer.lr_schedule={schedule!r} is not one of linear, polynomial.")
        clip = t.get("max_grad_norm")
        if clip is not None and (isinstance(clip, bool) or not isinstance(clip, (int, float)) or clip < 0):
            raise ConfigError(f"trainer.max_grad_norm={clip!r} must be a number >= 0 (0 or null: no clipping).")
        warmup = t.get("warmup_steps")
        if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0):
            raise ConfigError(f"trainer.warmup_steps={warmup!r} must be a whole number >= 0 (or null).")
        lr_end = t.get("lr_end")
        if isinstance(lr_end, bool) or not isinstance(lr_end, (int, float)) or lr_end < 0:
            raise ConfigError(f"trainer.lr_end={lr_end!r} must be a number >= 0.")
        allow = t.get("allow_config_change") or []
        if not isinstance(allow, bool):
            allow = [str(k) for k in (OmegaConf.to_container(allow) if OmegaConf.is_config(allow) else allow)]
        resume = t.get("resume")
        return cls(
            max_steps=positive_int(t, "max_steps", allow_none=True),
            epochs=positive_int(t, "epochs", allow_none=True),
            batch_size=positive_int(t, "batch_size"),
            global_batch_size=positive_int(t, "global_batch_size", allow_none=True),
            grad_accum=positive_int(t, "grad_accum"),
            lr=positive_float(t, "lr"),
            warmup_steps=warmup,
            warmup_ratio=_fraction(t, "warmup_ratio", 0.0, 1.0, closed_low=True),
            lr_schedule=schedule,
            lr_end=float(lr_end),
            lr_power=1.0 if schedule == "linear" else positive_float(t, "lr_power"),
            max_grad_norm=float(clip) if clip else math.inf,
            mixed_precision=precision,
            mlm_probability=_fraction(t, "mlm_probability", 0.0, 1.0, closed_low=False),
            max_length=positive_int(t, "max_length", allow_none=True),
            group_by_length=_flag(t, "group_by_length", "trainer") if "group_by_length" in t else False,
            eval_every=positive_int(t, "eval_every", allow_none=True),
            eval_batches=positive_int(t, "eval_batches", allow_none=True),
            eval_batch_size=positive_int(t, "eval_batch_size", allow_none=True),
            eval_at_start=bool(_flag(t, "eval_at_start", "trainer", allow_none=True)),
            save_every=positive_int(t, "save_every", allow_none=True),
            save_every_minutes=positive_float(t, "save_every_minutes", allow_none=True),
            save_best=_flag(t, "save_best", "trainer") if "save_best" in t else False,
            keep_last=positive_int(t, "keep_last"),
            log_every=positive_int(t, "log_every"),
            max_nonfinite_steps=positive_int(t, "max_nonfinite_steps"),
            cpu=_flag(t, "cpu", "trainer"),
            peak_tflops=positive_float(t, "peak_tflops", allow_none=True),
            compile=_flag(t, "compile", "trainer") if "compile" in t else False,
            compile_backend=_compile_backend(t.get("compile_backend", "inductor")),
            resume=None if resume in (None, "", "null", "none", False) else str(resume),
            allow_config_change=allow,
            allow_nonbitwise_resume=_flag(t, "allow_nonbitwise_resume", "trainer"),
        )

    def warmup(self, max_steps: int) -> int:
        """Warmup steps: trainer.warmup_steps when set, else round(trainer.warmup_ratio x max_steps), else 0."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return round(self.warmup_ratio * max_steps) if self.warmup_ratio is not None else 0

    def require(self, key: str, stage: str) -> Any:
        """A field this stage cannot do without: its value, or a ConfigError naming trainer.key."""
        value = getattr(self, key)
        if value is None:
            raise ConfigError(f"trainer.{key} is null: {stage} needs it.")
        return value


# trainer.<field> keys that may differ between starts of one run
OPERATIONAL_TRAINER_KEYS = frozenset(f"trainer.{f.name}" for f in fields(TrainerSettings) if f.metadata["operational"])


TARGETS = ("hidden", "attention")
TRAINED = ("projections", "all")


@dataclass(frozen=True)
class TransferSettings:
    """``cfg.transfer`` (configs/transfer.yaml), read and checked once; the checks that need the corpus's n are the
    task's."""

    train: str                      # projections | all
    target: str                     # hidden | attention
    lr_rest: float | None           # with train=all: every weight but E and F (None otherwise)
    short_fraction: float           # share of training batches cut to a random length
    min_length: int
    eval_short_length: int | None

    @classmethod
    def read(cls, tr: Mapping) -> TransferSettings:
        refuse_unknown(tr, cls, "transfer")
        target, train = str(tr.get("target")), str(tr.get("train"))
        if target not in TARGETS:
            raise ConfigError(f"transfer.target={target!r} is not one of {', '.join(TARGETS)}.")
        if train not in TRAINED:
            raise ConfigError(f"transfer.train={train!r} is not one of {', '.join(TRAINED)}.")
        short = float(tr.get("short_fraction") or 0.0)
        if not 0.0 <= short <= 1.0:
            raise ConfigError(f"transfer.short_fraction={short}: the share of batches cut short, 0..1")
        short_length = positive_int(tr, "eval_short_length", "transfer", allow_none=True)
        if short_length is not None and short_length < 2:
            raise ConfigError(f"transfer.eval_short_length={short_length}: at least 2 ([CLS] ... [SEP])")
        return cls(train=train, target=target,
                   lr_rest=positive_float(tr, "lr_rest", "transfer") if train == "all" else None,
                   short_fraction=short, min_length=positive_int(tr, "min_length", "transfer"),
                   eval_short_length=short_length)


@dataclass(frozen=True)
class DistillSettings:
    """``cfg.distill`` (configs/distill.yaml), read and checked once."""

    temperature: float              # T: softmax(logits / T); the KL is scaled by T^2
    hidden_weight: float            # > 0: each layer's relative error to the teacher's hidden states, weighted
    lr_projections: float | None    # E and F; None = trainer.lr
    min_tokens: int | None = None   # only the train examples longer than this many tokens; None = all
    lengthen_teacher: bool = False  # a student longer than the teacher: lengthen the teacher to it (positions copied)

    @classmethod
    def read(cls, d: Mapping) -> DistillSettings:
        refuse_unknown(d, cls, "distill")
        weight = d.get("hidden_weight") or 0.0
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ConfigError(f"distill.hidden_weight={weight!r}: a weight of 0 (off) or more")
        return cls(temperature=positive_float(d, "temperature", "distill"), hidden_weight=float(weight),
                   lr_projections=positive_float(d, "lr_projections", "distill", allow_none=True),
                   min_tokens=positive_int(d, "min_tokens", "distill", allow_none=True),
                   lengthen_teacher=_flag({"lengthen_teacher": False, **d}, "lengthen_teacher", "distill"))


def config_key(key: str, operational: bool = False) -> dict[str, Any]:
    """A spec field's metadata: the config key it is read from; `operational` keys may differ between starts of one
    run (the others are its identity)."""
    return {"key": key, "operational": operational}


TRACKERS = ("wandb", "tensorboard")


@dataclass(frozen=True)
class LoggerSettings:
    """``cfg.logger`` (configs/logger/): the trackers Accelerate logs to besides metrics.jsonl, and their project."""

    trackers: tuple[str, ...]
    project: str

    @classmethod
    def read(cls, lg: Mapping) -> LoggerSettings:
        refuse_unknown(lg, cls, "logger")
        trackers = tuple(str(t) for t in (lg.get("trackers") or ()))
        unknown = [t for t in trackers if t not in TRACKERS]
        if unknown:
            raise ConfigError(f"logger.trackers: {', '.join(unknown)} is not one of {', '.join(TRACKERS)}.")
        project = lg.get("project")
        if not project:
            raise ConfigError("logger.project is not set: the trackers' project name (configs/logger/).")
        return cls(trackers=trackers, project=str(project))


@dataclass(frozen=True)
class TaskData:
    """Which examples of a task a run reads: ``cfg.task`` (configs/task/) and the subset keys beside it. Also how a
    report rebuilds the eval examples of a finished run from its config.yaml."""

    name: str = field(metadata=config_key("task.name"))
    data_dir: str | None = field(metadata=config_key("task.data_dir", operational=True))  # None: the hub dataset
    max_length: int | None = field(metadata=config_key("task.max_length"))  # the task's own cap on tokens per example
    skip_bad_rows: bool = field(metadata=config_key("task.skip_bad_rows"))
    cache_dir: str | None = field(metadata=config_key("task_cache_dir", operational=True))  # tokenized splits; None = off
    max_train_examples: int | None = field(metadata=config_key("max_train_examples"))  # a seeded random subset; None = all
    max_eval_examples: int | None = field(metadata=config_key("max_eval_examples", operational=True))
    subset_seed: int = field(metadata=config_key("subset_seed"))  # draws the subsets; the run's seed unless set
    # share of the (subset) train rows held out to choose the epoch on, carved with subset_seed; None: no choice
    validation_fraction: float | None = field(default=None, metadata=config_key("validation_fraction"))

    GROUP_KEYS = ("name", "data_dir", "max_length", "skip_bad_rows")

    @classmethod
    def read(cls, cfg: Mapping) -> TaskData:
        from ..data.io import resolve_path

        task = cfg.get("task")
        if task is None:
            raise ConfigError("task is not set: choose one, e.g. task=sst2.")
        refuse_unknown(task, cls.GROUP_KEYS, "task")
        data_dir, cache_dir, subset_seed = task.get("data_dir"), cfg.get("task_cache_dir"), cfg.get("subset_seed")
        if subset_seed is None:
            subset_seed = cfg.get("seed", 0)
        return cls(name=str(task.get("name")),
                   data_dir=str(resolve_path(str(data_dir))) if data_dir else None,
                   max_length=positive_int(task, "max_length", "task", allow_none=True),
                   skip_bad_rows=bool(_flag({"skip_bad_rows": task.get("skip_bad_rows", False)}, "skip_bad_rows",
                                            "task")),
                   cache_dir=str(resolve_path(str(cache_dir))) if cache_dir else None,
                   max_train_examples=positive_int(cfg, "max_train_examples", "", allow_none=True),
                   max_eval_examples=positive_int(cfg, "max_eval_examples", "", allow_none=True),
                   subset_seed=int(subset_seed), validation_fraction=validation_fraction(cfg))


def validation_fraction(cfg: Mapping) -> float | None:
    """cfg.validation_fraction: null, or a share in (0, 0.5) of the train rows (more would leave training the
    smaller part)."""
    value = cfg.get("validation_fraction")
    if value is None:
        return None
    if not fits_type(value, float) or not 0 < value < 0.5:
        raise ConfigError(f"validation_fraction={value!r} must lie in (0, 0.5), or be null (no validation split: "
                          "the run reports its last model).")
    return float(value)
