"""The config groups' schemas: every key of ``trainer``, ``optim``, ``logger``, ``transfer``, ``distill`` and the task's
data selection, read and checked once (``<Group>.read``). A key that is not a field is refused with the closest
one; every bad value is a ConfigError naming its key."""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import OmegaConf

from ..configs import RETIRED_KEYS, SPEC_KEYS, retired_key
from ..data import tasks as _tasks
from ..data.io import local_path
from ..data.tasks import BUILT_IN, TaskSpec, TaskSpecError, get_task, register_task
from ..data.tokenizer import check_sequence_room
from ..errors import ConfigError, did_you_mean
from ..files.locations import resolve_path
from ..files.names import folder_name
from ..modeling.values import fits_type, type_words


def check_types(values: Mapping, schema: type, prefix: str) -> None:
    """ConfigError naming `prefix.key` (`key` for top-level keys, prefix "") for the first value that is not of its
    field's annotated type in the dataclass `schema` (unknown keys: refuse_unknown)."""
    hints = typing.get_type_hints(schema)
    for key, value in values.items():
        kind = hints[key]
        if not fits_type(value, kind):
            key = f"{prefix}.{key}" if prefix else key
            raise ConfigError(f"{key}={value!r} must be {type_words(kind)}.")


def positive_int(cfg: Mapping, key: str, prefix: str = "trainer", allow_none: bool = False,
                 minimum: int = 1) -> int | None:
    """cfg[key] as an int >= `minimum` (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = cfg.get(key)
    if value is None and allow_none:
        return None
    name = f"{prefix}.{key}" if prefix else key
    if not fits_type(value, float) or not math.isfinite(value) or int(value) != value or value < minimum:
        raise ConfigError(f"{name}={value!r} must be a whole number of at least {minimum}.")
    return int(value)




def check_corpus_names(data: Mapping, prepares: bool = False) -> None:
    """The data group's names (configs/data/) where it gives them, as folder names: data.name its corpus's, under
    paths.data_dir/processed/, data.tokenizer its tokenizer's, under paths.data_dir/tokenizers/. `prepares`: the
    command is prepare_corpus, whose Hydra folder data.name names too (paths.output_dir/prepare/), beside its sweep
    folder; a command that only reads the corpus (pretraining, the tokenizer's) writes nothing there."""
    for key, names, under, stage in (("name", "a corpus folder", "paths.data_dir/processed/",
                                      "prepare" if prepares else None),
                                     ("tokenizer", "a tokenizer folder", "paths.data_dir/tokenizers/", None)):
        if key in data:
            folder_name(data[key], f"data.{key}", names, under, stage=stage)


SEEDS = 2**32  # numpy's and torch's seeds are whole numbers below this


def seed_value(cfg: Mapping, key: str = "seed", prefix: str = "") -> int:
    """cfg[key] as a seed (0 when the key is absent), the one check of every seed a config gives: a whole number in
    0..2**32-1, else a ConfigError naming `prefix.key`."""
    value = cfg.get(key, 0)
    if not fits_type(value, int) or not 0 <= value < SEEDS:
        name = f"{prefix}.{key}" if prefix else key
        raise ConfigError(f"{name}={value!r} must be a whole number in 0..{SEEDS - 1} (numpy's and torch's seeds).")
    return value


def positive_float(cfg: Mapping, key: str, prefix: str = "trainer", allow_none: bool = False) -> float | None:
    """cfg[key] as a finite float > 0 (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = cfg.get(key)
    if value is None and allow_none:
        return None
    number = float(value) if fits_type(value, float) else math.nan  # true is no number, nor is the text "1e-3"
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"{prefix}.{key}={value!r} must be a positive number.")
    return number


# Field metadata: operational settings change how a run is operated, not what it computes, so they may differ
# between starts of one run (``rundir.identity`` leaves them out); the others are the run's identity.
_ID, _OP = {"operational": False}, {"operational": True}


COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")  # eager and aot_eager: Dynamo's graph capture alone, for checks
# torch.compile's modes: reduce-overhead replays CUDA graphs (launch cost gone, on CUDA only), max-autotune also
# searches GEMM and Triton configurations at the first compile
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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
        if f"{prefix}.{key}" in RETIRED_KEYS:
            raise ConfigError(retired_key(f"{prefix}.{key}", group[key]))
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
        iterable = hasattr(raw, "__iter__") and not isinstance(raw, str)
        betas = list(raw) if iterable else [raw]
        if len(betas) != 2 or not all(fits_type(b, float) and 0 <= b < 1 for b in betas):
            shown = betas if iterable else raw
            raise ConfigError(f"optim.betas={shown!r} must be two numbers in [0, 1), e.g. [0.9, 0.98].")
        decay = o.get("weight_decay")
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or decay < 0:
            raise ConfigError(f"optim.weight_decay={decay!r} must be a number >= 0.")
        return cls(betas=(float(betas[0]), float(betas[1])), eps=positive_float(o, "eps", "optim"),
                   weight_decay=float(decay))


def _setting(default=None, *, operational: bool = False, read=None):
    """A settings field: part of the run's identity or operational (may change between starts), and how its value is
    read when not by its annotation (``read_by_annotation``): ``read(group, key)``, a ConfigError naming the key."""
    return field(default=default, metadata={**(_OP if operational else _ID), **({"read": read} if read else {})})


def read_by_annotation(kind, key: str, group: Mapping, prefix: str):
    """A config value read as its field's annotation says: int / float (>= 1, > 0: positive_int, positive_float; a
    ``| None`` allows null) or bool (true or false)."""
    args = set(typing.get_args(kind))
    allow_none = type(None) in args
    base = next(iter(args - {type(None)}), kind) if args else kind
    if base is int:
        return positive_int(group, key, prefix, allow_none)
    if base is float:
        return positive_float(group, key, prefix, allow_none)
    if base is bool:
        return _flag(group, key, prefix, allow_none)
    raise TypeError(f"{prefix}.{key}: give its field a read= for the annotation {kind}")


def read_fields(cls, group: Mapping, prefix: str) -> dict[str, Any]:
    """Every field of the settings dataclass `cls` from config group `prefix`: an unknown key refused; a key the group
    leaves out takes its field's default when it has one; every other value read by its field's ``read`` or its
    annotation. Adding a setting is its YAML default and its field, nothing else."""
    refuse_unknown(group, cls, prefix)
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):
        if f.name not in group and f.default is not None:
            values[f.name] = f.default
        elif "read" in f.metadata:
            values[f.name] = f.metadata["read"](group, f.name)
        else:
            values[f.name] = read_by_annotation(hints[f.name], f.name, group, prefix)
    return values


def _choice(*options: str, allow_none: bool = False):
    def read(group: Mapping, key: str) -> str | None:
        value = group.get(key)
        if value is None and allow_none:
            return None
        if value not in options:
            raise ConfigError(f"trainer.{key}={value!r} is not one of {', '.join(options)}"
                              f"{' (or null)' if allow_none else ''}.")
        return str(value)
    return read


def _nonnegative(group: Mapping, key: str) -> float:
    value = group.get(key)
    if not (fits_type(value, float) and value >= 0):
        raise ConfigError(f"trainer.{key}={value!r} must be a number >= 0.")
    return float(value)


def _clip(group: Mapping, key: str) -> float:
    value = group.get(key)
    if value is not None and not (fits_type(value, float) and value >= 0):
        raise ConfigError(f"trainer.{key}={value!r} must be a number >= 0 (0 or null: no clipping).")
    return float(value) if value else math.inf


def _resume(group: Mapping, key: str) -> str | None:
    value = group.get(key)
    return None if value in (None, "", "null", "none", False) else str(value)


def _allowed_changes(group: Mapping, key: str) -> bool | list[str]:
    """true, or the keys a resumed run may change (one key alone is a list of one)."""
    allow = group.get(key) or []
    if isinstance(allow, bool):
        return allow
    if isinstance(allow, str):
        return [allow]
    keys = OmegaConf.to_container(allow) if OmegaConf.is_config(allow) else allow
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ConfigError(f"trainer.{key}={allow!r} must be true or a list of config keys, e.g. "
                          f"trainer.{key}=[trainer.lr,trainer.max_steps]")
    return keys


@dataclass(frozen=True)
class TrainerSettings:
    """Every ``cfg.trainer`` key, validated once: the training core and the tasks read these fields, never the raw
    config. Defaults live in configs/trainer/ (base.yaml and the stage files extending it); a field a stage's
    config does not set is None. A key in ``cfg.trainer`` that is not a field is refused (a typo or a key that
    no code reads). Each field says how it is read (``read_fields``): a new key is its YAML default and its field."""

    # what the run computes: its identity
    max_steps: int | None = _setting()  # None: the task derives it (finetuning: from epochs)
    epochs: int | None = _setting()           # finetuning, when max_steps is None
    batch_size: int = _setting()              # per device
    global_batch_size: int | None = _setting()  # pretraining: batch x processes x grad_accum
    grad_accum: int = _setting()
    lr: float = _setting()                    # peak, after warmup
    # when set, wins over warmup_ratio (as in HF's)
    warmup_steps: int | None = _setting(read=lambda t, k: positive_int(t, k, allow_none=True, minimum=0))
    warmup_ratio: float | None = _setting(read=lambda t, k: _fraction(t, k, 0.0, 1.0, closed_low=True))  # of max_steps
    lr_end: float = _setting(read=_nonnegative)
    lr_power: float = _setting()              # the decay's power after warmup (1.0: linear)
    max_grad_norm: float = _setting(read=_clip)  # inf: no clipping (the norm is still measured)
    mixed_precision: str = _setting(read=_choice("no", "fp16", "bf16"))
    mlm_probability: float | None = _setting(read=lambda t, k: _fraction(t, k, 0.0, 1.0, closed_low=False))  # pretraining
    max_length: int | None = _setting()  # finetuning: tokens per example; None = the model's n
    group_by_length: bool = _setting(False)
    # how the run is operated: may change between starts
    eval_every: int | None = _setting(operational=True)  # None: the task's default (finetuning: each epoch)
    eval_blocks: int | None = _setting(operational=True)  # held-out blocks scored per evaluation; None = all
    eval_batch_size: int | None = _setting(operational=True)
    eval_at_start: bool = _setting(False, operational=True, read=lambda t, k: bool(_flag(t, k, "trainer", True)))
    save_every: int | None = _setting(operational=True)   # None: at the end and on a stop signal only
    save_every_minutes: float | None = _setting(operational=True)  # also this long after the last; None: off
    save_best: bool = _setting(False, operational=True)
    keep_last: int = _setting(operational=True)
    log_every: int = _setting(operational=True)
    sync_every: int = _setting(1, operational=True)  # steps between host reads of the loss (the GPU runs on between)
    max_nonfinite_steps: int = _setting(operational=True)
    cpu: bool = _setting(False, operational=True)
    peak_tflops: float | None = _setting(operational=True)
    compile: bool = _setting(False, operational=True)  # torch.compile the model (the same numbers, faster)
    # a torch._dynamo backend: inductor | aot_eager | eager
    compile_backend: str = _setting("inductor", operational=True, read=_choice(*COMPILE_BACKENDS))
    compile_mode: str | None = _setting(operational=True, read=_choice(*COMPILE_MODES, allow_none=True))
    resume: str | None = _setting(operational=True, read=_resume)
    allow_config_change: bool | list[str] = _setting(operational=True, read=_allowed_changes)
    allow_nonbitwise_resume: bool = _setting(False, operational=True)

    @classmethod
    def read(cls, t: Mapping) -> TrainerSettings:
        values = read_fields(cls, t, "trainer")
        if values["compile_mode"] is not None and not (values["compile"] and values["compile_backend"] == "inductor"):
            why = ("without trainer.compile=true nothing is compiled" if not values["compile"] else
                   f"trainer.compile_backend={values['compile_backend']} ignores it: modes are inductor's")
            raise ConfigError(f"trainer.compile_mode={values['compile_mode']}: {why}.")
        if values["lr"] is not None and values["lr_end"] >= values["lr"]:
            raise ConfigError(f"trainer.lr_end={values['lr_end']} must be below trainer.lr={values['lr']}: the "
                              "schedule decays from lr to lr_end after the warmup.")
        return cls(**values)

    def __post_init__(self):
        if self.max_steps is not None:  # known from the config (pretraining): said before a plan or a run starts
            check_warmup(self.warmup(self.max_steps), self.max_steps)

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


def check_warmup(warmup_steps: int, total_steps: int) -> None:
    """The warmup must end before the run does: a ConfigError naming both keys."""
    if int(warmup_steps) >= max(int(total_steps), 1):
        raise ConfigError(
            f"the warmup ({warmup_steps} steps, trainer.warmup_steps or trainer.warmup_ratio) must be shorter than "
            f"the run ({total_steps} steps, trainer.max_steps): lower the warmup or train longer."
        )


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
        given = lg.get("trackers") or ()
        trackers = (given,) if isinstance(given, str) else tuple(str(t) for t in given)  # one name: a list of one
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

    GROUP_KEYS = ("name", "data_dir", "max_length", "skip_bad_rows", "spec")

    @classmethod
    def read(cls, cfg: Mapping) -> TaskData:
        task = cfg.get("task")
        if task is None:
            raise ConfigError("task is not set: choose one, e.g. task=sst2.")
        refuse_unknown(task, cls.GROUP_KEYS, "task")
        if task.get("spec") is not None:  # a task of one's own, recorded with every run of it: registered at each read
            register_task(task_spec(str(task.get("name")), task["spec"]), "task.name", replace=True)
        # a name without a TaskSpec: a ConfigError naming task.name, before any work
        texts = len(get_task(str(task.get("name"))).text_fields)
        max_length = positive_int(task, "max_length", "task", allow_none=True)
        # both caps on an example's tokens (trainer.max_length wins) leave room for the special tokens and some text
        for key, tokens in (("task.max_length", max_length), ("trainer.max_length", (cfg.get("trainer") or {}).get(
                "max_length"))):
            if fits_type(tokens, int):
                check_sequence_room(tokens, key, f"an example of {task.get('name')}", texts)
        data_dir, cache_dir = task.get("data_dir"), cfg.get("task_cache_dir")
        subset_seed = seed_value(cfg, "subset_seed" if cfg.get("subset_seed") is not None else "seed")
        return cls(name=str(task.get("name")),
                   data_dir=local_path(str(data_dir)) if data_dir else None,  # a run's record may name its mirror
                   max_length=max_length,
                   skip_bad_rows=bool(_flag({"skip_bad_rows": task.get("skip_bad_rows", False)}, "skip_bad_rows",
                                            "task")),
                   cache_dir=str(resolve_path(str(cache_dir))) if cache_dir else None,
                   max_train_examples=positive_int(cfg, "max_train_examples", "", allow_none=True),
                   max_eval_examples=positive_int(cfg, "max_eval_examples", "", allow_none=True),
                   subset_seed=subset_seed, validation_fraction=validation_fraction(cfg))


_SPEC_LISTS = ("text_fields", "label_names", "raw_labels", "metrics")


def spec_block(spec: TaskSpec) -> dict[str, Any]:
    """A TaskSpec as a task config's ``task.spec`` block writes it (SPEC_KEYS, plain lists and mappings): what
    ``task_spec`` reads back into the same spec."""
    def plain(value):
        return list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value

    return {key: plain(getattr(spec, key)) for key in SPEC_KEYS}


def with_task_spec(cfg: dict[str, Any]) -> dict[str, Any]:
    """`cfg` (a plain config) with the ``task.spec`` block of its task where the task is one of one's own registered
    in this process (``register_task`` from Python) and the config gives no block: the run's config.yaml then
    records its task as a task config's block does, and every reader of the run (export, reports, a resume) gets the
    task from the run, in any process. A spec a block cannot write (one with hub fields) is left out, and its runs
    are read where that spec is registered."""
    task = cfg.get("task")
    if not isinstance(task, Mapping) or task.get("spec") is not None:
        return cfg
    name = str(task.get("name"))
    spec = _tasks.TASKS.get(name)
    if spec is None or name in BUILT_IN:
        return cfg
    block = spec_block(spec)
    if task_spec(name, block) != spec:
        return cfg
    return {**cfg, "task": {**task, "spec": block}}


def task_spec(name: str, block) -> TaskSpec:
    """The TaskSpec of a task config's ``task.spec`` block (configs/task/_example.yaml): a task of one's own in YAML,
    named by task.name (a block for one of the package's own tasks: that task, which it must repeat). ConfigError
    naming task.spec.<field> for a field missing, unknown or of the wrong kind, and for each of the TaskSpec's own
    checks."""
    if not isinstance(block, Mapping):
        raise ConfigError(f"task.spec={block!r} must be a mapping of TaskSpec fields: {', '.join(SPEC_KEYS)}.")
    refuse_unknown(block, SPEC_KEYS, "task.spec")
    if name in BUILT_IN:  # one field given (task.spec.format=csv on the command line): the others are the package's
        block = {**spec_block(get_task(name)), **{k: v for k, v in block.items() if v is not None}}
    missing = [key for key in SPEC_KEYS[:4] if block.get(key) is None]
    if missing:
        raise ConfigError(f"task.spec.{missing[0]} is not set: a task's spec names its text column(s) (text_fields), "
                          "its label column (label_field), its labels (label_names) and how the files write them "
                          "(raw_labels), as configs/task/_example.yaml shows.")
    try:
        spec = TaskSpec(name, **{key: _spec_value(block[key], key) for key in block if block[key] is not None})
    except TaskSpecError as err:
        raise ConfigError(f"task.spec.{err.field}{err.reason}") from None
    if name not in BUILT_IN:
        return spec
    own = get_task(name)  # the package's: its spec block may only repeat it (it has the hub fields besides)
    other = [key for key in SPEC_KEYS if getattr(spec, key) != getattr(own, key)]
    if other:
        raise ConfigError(f"task.spec: task.name={name} is the package's own task, and the spec changes its "
                          f"{', '.join(other)}: give a task of one's own a name of its own")
    return own


def _spec_value(value, key: str):
    """A spec block's value as TaskSpec takes it: the lists as tuples of names (one name: a list of one; numbers, as
    raw labels written 0 and 1 are, as their text), files as {split: file name}; ConfigError naming task.spec.key."""
    def name(item) -> str | None:
        return str(item) if isinstance(item, (str, int, float)) and not isinstance(item, bool) else None

    if key == "files":
        files = {str(k): name(v) for k, v in value.items()} if isinstance(value, Mapping) else {}
        if not files or None in files.values():
            raise ConfigError(f"task.spec.files={value!r} must map train and eval to file names under task.data_dir.")
        return files
    if key in _SPEC_LISTS:
        items = [value] if isinstance(value, str) else list(value) if isinstance(value, Sequence) else [None]
        names = tuple(name(item) for item in items)
        if None in names:
            raise ConfigError(f"task.spec.{key}={value!r} must be a list of names (quote true, false and null).")
        return names
    if not isinstance(value, str):
        raise ConfigError(f"task.spec.{key}={value!r} must be a text.")
    return value


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
