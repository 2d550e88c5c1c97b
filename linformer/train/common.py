"""Accelerate plumbing of the training core: accelerator, trackers, optimizer and schedule."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState, PartialState
from accelerate.utils import DistributedType, is_tensorboard_available, is_wandb_available
from packaging.version import Version
from transformers import get_polynomial_decay_schedule_with_warmup

from ..data.corpus import read_manifest, unprepared_corpus
from ..data.task_readers import check_task_dir, hub_fingerprints, task_files
from ..data.tasks import get_task
from ..data.tokenizer import TOKENIZER_FILES
from ..errors import ConfigError, first_line
from ..files.hashing import cache_key, short_digest
from ..files.mappings import flatten, read_yaml
from ..modeling.convert import is_projection_weight
from ..modeling.loading import resolve_tokenizer_dir
from ..modeling.values import projects_keys
from ..runconfig.settings import LoggerSettings, OptimSettings, TrainerSettings, check_warmup
from ..rundir import HYDRA_SWEEP_RECORD
from ..shell import shell_command

log = logging.getLogger(__name__)


def build_accelerator(settings: TrainerSettings, logger: LoggerSettings, run_dir: Path) -> Accelerator:
    """An Accelerator for one CPU, one GPU, torchrun/accelerate multi-process, in no/fp16/bf16 precision.

    Gradient accumulation is done by the training core (the loss is normalised by the step's global number
    of targets), so Accelerate's own accumulation stays at 1.
    """
    precision = settings.mixed_precision
    cpu = settings.cpu or not torch.cuda.is_available()
    if precision == "fp16" and cpu:
        # On CPU Accelerate accepts fp16 silently and trains in fp32: say so instead.
        raise ConfigError("trainer.mixed_precision=fp16 needs a CUDA device; on CPU use trainer.mixed_precision=bf16.")
    if precision == "bf16" and cpu and not native_cpu_bf16():
        log.warning("this CPU has no native bf16 (oneDNN reports none): trainer.mixed_precision=bf16 is emulated and "
                    "runs slower than fp32 here; trainer.mixed_precision=no is faster on this machine")
    check_launcher_precision(precision, cpu)
    check_trackers(logger)
    trackers = list(logger.trackers)
    fit_accelerate_state(precision, cpu)
    accelerator = Accelerator(
        cpu=cpu,
        mixed_precision=precision,
        log_with=trackers or None,
        project_dir=str(run_dir),
        # Schedules count optimizer steps. By default Accelerate steps a prepared scheduler once per process per
        # step, which decays the learning rate num_processes times too fast for our per-step schedules.
        step_scheduler_with_optimizer=False,
        # DDP without find_unused_parameters: a model that leaves E and F out of a forward (exact_short_inputs) gives
        # them a zero gradient itself (modeling.attention.with_zero_gradients), where finding them would walk the
        # autograd graph every step and draw torch's warning on every run whose first batch uses them all
    )
    return accelerator


def fit_accelerate_state(precision: str, cpu: bool) -> None:
    """Clear the one state Accelerate keeps per process where an earlier run in this process (a notebook's) left it
    with another precision or device: Accelerate refuses a second mixed_precision in it, and would keep the earlier
    run's device. Only a single process's state is cleared (as transformers' TrainingArguments does); a launcher's
    distributed state is left alone, its processes are set up once."""
    if not PartialState._shared_state:
        return
    state = PartialState()
    if state.distributed_type != DistributedType.NO:
        return
    same_precision = AcceleratorState._shared_state.get("_mixed_precision", precision) == precision
    if same_precision and (state.device.type == "cpu") == cpu:
        return
    reset_accelerate_state()


def reset_accelerate_state() -> None:
    """Clear Accelerate's per-process state (its PartialState, AcceleratorState and GradientState singletons): the
    next Accelerator is built afresh, with the precision and device it is given.

    Accelerate has no public way to do this. Its ``_reset_state`` methods are private ("is used internally and should
    not be called", accelerate 1.x), yet they are what Accelerate's own test base class (``AccelerateTestCase``) and
    transformers' ``TrainingArguments`` call for the same purpose. The package calls them here only;
    tests/train/test_common.py fails, naming the installed accelerate's version, where they are gone."""
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def check_launcher_precision(precision: str, cpu: bool) -> None:
    """Warn where the launcher asks for another precision than trainer.mixed_precision, which the run uses:
    `accelerate launch --mixed_precision X` and an Accelerate config's `mixed_precision` reach the run only as
    ACCELERATE_MIXED_PRECISION, which the trainer's setting overrides. A launcher's "no" is its default, not a
    choice: not warned about."""
    launcher = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if launcher in ("no", precision):
        return
    agree = "trainer.mixed_precision=bf16 (fp16 needs a CUDA device)" if launcher == "fp16" and cpu else \
        f"trainer.mixed_precision={launcher}"
    log.warning("the launcher asks for mixed precision %s (accelerate launch --mixed_precision, or its config's "
                "mixed_precision) but trainer.mixed_precision=%s decides, so this run computes in %s; add %s to "
                "train as the launcher says", launcher, precision, "fp32" if precision == "no" else precision, agree)


# A tracker's package: Accelerate's own test of it (where that fails it drops the tracker with a warning and the run
# goes on without it) and the command that installs it
TRACKER_PACKAGES = {"wandb": (is_wandb_available, "pip install wandb"),
                    "tensorboard": (is_tensorboard_available, "pip install tensorboard")}


def check_trackers(logger: LoggerSettings) -> None:
    """ConfigError, before the run starts, for a tracker whose package is not installed: Accelerate would leave it
    out, and the user would find no tracker's files after the run."""
    for name in logger.trackers:
        available, install = TRACKER_PACKAGES[name]
        if not available():
            raise ConfigError(f"logger.trackers has {name}, which needs the {name} package, not installed here: "
                              f"{install} (or choose another logger: logger=none keeps metrics.jsonl only).")


def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX-512 BF16 or AMX); elsewhere bf16 autocast is emulated."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def wandb_mode() -> str | None:
    """The mode wandb.init gets: offline unless the user is logged in; None (wandb's own choice) where the user set
    WANDB_MODE. Passed to the run, not written into the process's environment."""
    if "WANDB_MODE" in os.environ:
        return None
    netrc = Path.home() / ".netrc"
    logged_in = bool(os.environ.get("WANDB_API_KEY")) or (
        netrc.exists() and "api.wandb.ai" in netrc.read_text(encoding="utf-8"))
    return "online" if logged_in else "offline"


def init_trackers(accelerator: Accelerator, logger: LoggerSettings, run_dir: Path, run_name: str, config: dict,
                  job_type: str, group: str | None, tags: list[str], created: str | None = None,
                  resumed_step: int | None = None) -> None:
    """Accelerate's trackers for the run. W&B gets one id per run directory (its path and `created`, run.json's
    creation time), resumed on every start of the run: a stopped and resumed run is one W&B run, not one per start,
    and `wandb sync` uploads it so. A run resumed from the checkpoint of `resumed_step` logs the steps after it again
    (those an attempt killed past its checkpoint had logged): TensorBoard's writer purges the earlier attempts' events
    past it (SummaryWriter's purge_step, a restart event TensorBoard reads), as metrics.jsonl drops their rows. W&B is
    not rewound: a resumed W&B run goes on after the last step it holds, ignoring lower steps with a warning, so there
    the killed attempt's values stand for the steps logged again."""
    if not logger.trackers:
        return
    name, group = tracker_names(run_dir, run_name, group)
    wandb_kwargs = {"name": name, "dir": str(run_dir), "job_type": job_type, "group": group, "tags": tags,
                    "id": wandb_run_id(run_dir, created), "resume": "allow"}
    if "wandb" in logger.trackers and (mode := wandb_mode()) is not None:
        wandb_kwargs["mode"] = mode
    if "wandb" in logger.trackers:
        wandb_kwargs |= wandb_console()
        if wandb_ignores_resume(wandb_kwargs.get("mode")):
            del wandb_kwargs["resume"]
    # events at steps >= purge_step, an earlier attempt's past the checkpoint, are dropped by TensorBoard
    tensorboard_kwargs = {} if resumed_step is None else {"purge_step": resumed_step + 1}
    init_kwargs = {"wandb": wandb_kwargs, "tensorboard": tensorboard_kwargs}
    try:
        accelerator.init_trackers(logger.project, init_kwargs=init_kwargs)
        store_tracker_config(accelerator, _flatten(config))
    except Exception as err:
        if (failed := tracker_failed(err)) is None:
            raise
        raise failed from err
    if "wandb" in logger.trackers and "settings" in wandb_kwargs and accelerator.is_main_process:
        run = accelerator.get_tracker("wandb", unwrap=True)
        where = f"offline in {run.settings.sync_dir} ({_sync_words(Path(run.settings.sync_dir), run.id)})" \
            if run.offline else run.url
        print(f"wandb: logging to {where}", file=sys.stderr, flush=True)


def _sync_words(sync_dir: Path, run_id: str) -> str:
    """How to upload an offline W&B run, this start's folder `sync_dir` (wandb's offline-run-<YYYYMMDD_HHMMSS>-<id>,
    "-1" after it for a second start in one second). A resumed run has one such folder per start beside it, all with
    the run's id: the command names them all, in the order they started (their names' order), as the `wandb sync` of
    wandb before 0.30 uploads its paths one after another in the order given (0.31's sorts one run's files by their
    start itself)."""
    start = re.compile(rf"offline-run-\d{{8}}_\d{{6}}-{re.escape(run_id)}(?:-\d+)?")
    starts = sorted({d for d in sync_dir.parent.glob("offline-run-*") if start.fullmatch(d.name)} | {sync_dir},
                    key=lambda d: d.name)
    if len(starts) == 1:
        return f"upload it with `{shell_command('wandb', 'sync', sync_dir)}`"
    return (f"upload it, its {len(starts)} starts in the order they started, with "
            f"`{shell_command('wandb', 'sync', *starts)}`")


def store_tracker_config(accelerator: Accelerator, values: dict[str, Any]) -> None:
    """The run's config to each tracker, as Accelerate's init_trackers(config=) would, but TensorBoard's into the
    run's own event file: Accelerate's TensorBoardTracker stores it with SummaryWriter.add_hparams, which writes it
    into a sub-run of its own (a folder named by the time, with no metrics) on every start, so one run folder read as
    several TensorBoard runs, its HPARAMS session with empty metric columns. Here the run's writer writes the hparams
    plugin's session start (``torch.utils.tensorboard.summary.hparams``) beside the run's scalars, and no experiment
    summary, so the HPARAMS tab makes its metric columns of the run's tags' last values (as the dashboard's mirror
    does)."""
    if not accelerator.is_main_process:  # the trackers write on the main process only
        return
    for tracker in accelerator.trackers:  # `tracker`: how tracker_failed finds the tracker an error came through
        if tracker.name == "tensorboard":
            from torch.utils.tensorboard.summary import hparams

            _, session_start, _ = hparams(values, {})
            tracker.writer.file_writer.add_summary(session_start)
            tracker.writer.flush()
        else:
            tracker.store_init_configuration(values)


def tracker_failed(err: Exception) -> ConfigError | None:
    """The one line for a tracker that failed to start, where its package's traceback ended the run (tensorboard
    before 2.18 under numpy 2 at its first write, the run's hparams): the tracker and its package's installed
    version. The tracker is the one whose code the error came through (Accelerate builds and starts them, and
    store_tracker_config configures them, one after another). None, the error raised as it is, for one that another
    release would not mend: one that came through no tracker's code (ours, Accelerate's), or the machine's (OSError:
    a full disk or a log folder it cannot write, which the CLI's line names; MemoryError)."""
    from accelerate.tracking import GeneralTracker

    if isinstance(err, (OSError, MemoryError)):
        return None
    came_through = [found.name for frame, _ in traceback.walk_tb(err.__traceback__)
                    for found in (frame.f_locals.get("self"), frame.f_locals.get("tracker"))  # store_tracker_config's
                    if isinstance(found, GeneralTracker)]
    if not came_through:
        return None
    name = came_through[0]
    return ConfigError(f"logger.trackers: {name} failed to start ({_installed(name)}): {first_line(err, named=True)}. "
                       "Install a release of it that works with the others here (pyproject.toml's bounds), or choose "
                       "another logger (logger=none keeps metrics.jsonl only).")


def _installed(package: str) -> str:
    """"<package> <version>" as installed, for a message."""
    try:
        return f"{package} {importlib.metadata.version(package)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{package}, its version unknown"


def wandb_console() -> dict[str, Any]:
    """wandb.init's settings for its console: silent, its banner and its end-of-run history and summary (about 30
    lines a run, most of a short run's log) left out, init_trackers printing the one line of where the run is logged
    instead; none where the user set WANDB_SILENT or WANDB_QUIET (WANDB_SILENT=false: all of wandb's output)."""
    if "WANDB_SILENT" in os.environ or "WANDB_QUIET" in os.environ:
        return {}
    import wandb

    return {"settings": wandb.Settings(silent=True)}


def wandb_ignores_resume(mode: str | None) -> bool:
    """Whether wandb.init ignores `resume`, and prints a warning that says so beside the run's one line of where it is
    logged (silent or not): wandb before 0.31 in an offline run (`mode`: the run's, None for WANDB_MODE's)."""
    import wandb

    offline = (mode or os.environ.get("WANDB_MODE")) in ("offline", "dryrun")
    return offline and Version(wandb.__version__) < Version("0.31")


WANDB_GROUP_CHARS = 128  # the longest group name W&B takes


def tracker_names(run_dir: Path, run_name: str, group: str | None) -> tuple[str, str | None]:
    """(display name, group) of the run on W&B. A sweep's job (a folder beside Hydra's multirun.yaml) is named by its
    folder, run_name and the overrides that name it, so that the runs of two sweeps that share a run_name are told
    apart; without experiment_name (`group`) it is grouped by its sweep: the sweep folder and the settings the sweep
    varies (the overrides of multirun.yaml that give several values), cut to WANDB_GROUP_CHARS with a hash of the
    whole. Any other run: run_name and experiment_name."""
    run_dir = Path(run_dir)
    record = run_dir.parent / HYDRA_SWEEP_RECORD
    if not record.is_file():
        return run_name, group
    if group is None:
        hydra = read_yaml(record).get("hydra")
        overrides = ((hydra or {}).get("overrides") or {}).get("task") if isinstance(hydra, dict) else None
        overrides = [str(o) for o in overrides] if isinstance(overrides, list) else []  # else: the folder alone
        swept = [o for o in overrides if "," in o.split("=", 1)[-1] or "(" in o.split("=", 1)[-1]]
        group = " ".join([f"{run_dir.parent.parent.name}/{run_dir.parent.name}:", *swept]).rstrip(":")
        if len(group) > WANDB_GROUP_CHARS:
            group = group[:WANDB_GROUP_CHARS - 11] + " " + short_digest(group, 10)
    return run_dir.name, group


def finish_trackers(accelerator: Accelerator, exit_code: int) -> None:
    """End the run's trackers with the exit status the process ends with: W&B records it as the run's end (0:
    finished, any other: failed; ``wandb.Run.finish(exit_code)``), where Accelerate's end_training finishes every
    tracker without one, which W&B records as 0 for a failed or stopped run too. Once finished, the trackers are
    dropped, so that end_training, or a second end, finishes nothing again."""
    for tracker in accelerator.trackers:
        if tracker.name == "wandb":
            tracker.run.finish(exit_code=exit_code)
        else:
            tracker.finish()
    accelerator.trackers = []


# A model group's keys that only a model projecting keys has (E and F's k, sharing and how they are built): a
# full-attention run's config holds their defaults, which its trackers' config leaves out
PROJECTION_KEYS = ("projected_dim", "sharing", "projection", "projection_init")


def model_architecture(config) -> dict[str, Any]:
    """A model's architecture as the trackers name it, the same in every stage (its W&B tags and config, its
    TensorBoard hparams; the dashboard's columns have the same names): its attention, and k (projected_dim) and
    sharing only where it projects keys (``values.projects_keys``). A full-attention model's config still holds a k
    and a sharing (LinformerConfig's defaults) it does not use. `config`: a model's config (a plain encoder's, with
    no attention, is full attention)."""
    attention = getattr(config, "attention", None)
    if not projects_keys(attention):
        return {"attention": attention or "full"}
    return {"attention": attention, "k": config.projected_dim, "sharing": config.sharing}


def architecture_tags(config) -> list[str]:
    """``model_architecture`` as tags: ['attention=linformer', 'k=32', 'sharing=headwise'], ['attention=full']."""
    return [f"{key}={value}" for key, value in model_architecture(config).items()]


def tracker_config(config: Mapping, extra: Mapping) -> dict[str, Any]:
    """What the trackers' config gets: the run's config and `extra` (the batch record, the task's
    ``tracker_config``: its model's architecture, a finetuning run's start). Where `extra`'s architecture projects no
    keys (an attention, no k) the model group's PROJECTION_KEYS are left out: a full-attention run was listed as
    model/projected_dim 32, model/sharing headwise."""
    out = dict(config)
    if "attention" in extra and "k" not in extra and isinstance(out.get("model"), Mapping):
        out["model"] = {k: v for k, v in out["model"].items() if k not in PROJECTION_KEYS}
    return out | dict(extra)


def wandb_run_id(run_dir: Path, created: str | None) -> str:
    """16 hex digits naming the run directory's run (a directory deleted and reused gets another `created`)."""
    return short_digest(f"{Path(run_dir).resolve()}|{created}")


def _flatten(config: Mapping) -> dict[str, Any]:
    """Nested config -> {'a/b': value} with scalar values, as TensorBoard hparams need."""
    scalar = (int, float, str, bool)
    return {k.replace(".", "/"): v if isinstance(v, scalar) or v is None else str(v) for k, v in flatten(config).items()}


def absent_tokenizer(tokenizer_dir: str | None) -> str | None:
    """The folder `tokenizer_dir` names where it holds no tokenizer (a fresh clone's, before train_tokenizer), else
    None: a packaged model's name or a hub name is read where it is used, and said there."""
    if tokenizer_dir is None:
        return None
    folder = Path(resolve_tokenizer_dir(tokenizer_dir, check=False))
    return str(folder) if folder.is_absolute() and not any((folder / f).is_file() for f in TOKENIZER_FILES) else None


def data_identity(spec) -> dict[str, str]:
    """What a run trains on, beyond its config's paths (which are operational: data may move): the prepared
    corpus's cache key (its sources' contents, tokenizer and packing) as ``corpus_cache_key``, and a task's data
    files' contents as ``task_data_key`` and how its TaskSpec reads them (``TaskSpec.reading``: columns, label order,
    reader) as ``task_spec_key`` (a resume on edited files or an edited TaskSpec would mix two datasets, or two label
    orders, in one run). A task directory or file, or a prepared corpus, that is not there is named here
    (``check_task_dir``, ``unprepared_corpus``), before the record is compared: a resume would otherwise read the
    missing key as a change of the run's settings or format. Hub data (task.data_dir null) is keyed by its splits'
    datasets fingerprints (``hub_fingerprints``: its revision, a local folder's files) in place of files' contents."""
    out = {}
    corpus = spec.corpus
    if corpus:
        manifest = read_manifest(corpus)
        if manifest is None:
            raise unprepared_corpus(corpus, absent_tokenizer(getattr(spec, "tokenizer_dir", None)))
        if manifest.get("cache_key"):
            out["corpus_cache_key"] = manifest["cache_key"]
    task = getattr(spec, "task", None)
    if task is not None and task.data_dir is None:
        out["task_data_key"] = cache_key({"task": task.name, "hub": hub_fingerprints(task.name)})
        out["task_spec_key"] = cache_key(get_task(task.name).reading())
    elif task is not None:
        check_task_dir(task.name, task.data_dir)
        files = task_files(task.name, task.data_dir)
        if files:
            out["task_data_key"] = cache_key({"task": task.name}, files)
            out["task_spec_key"] = cache_key(get_task(task.name).reading())
    return out


def param_groups(model: torch.nn.Module, weight_decay: float, leave_out=()) -> list[dict]:
    """Decay matrices; no decay on biases, LayerNorm weights (RoBERTa) and anything one-dimensional. Frozen
    parameters and those in ``leave_out`` are in neither group.

    The Linformer's E and F (n x k matrices) are decayed here like every other matrix: pretraining and finetuning
    learn them with the rest of the model, as the paper's fairseq recipe trains every weight, and the keys and
    values they pool can grow back against the decay with the layers around them. Transfer and distillation
    group them otherwise (``projection_param_groups``). Runs and committed results were trained so."""
    decay, no_decay, skip = [], [], {id(p) for p in leave_out}
    for name, p in model.named_parameters():
        if not p.requires_grad or id(p) in skip:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def projection_param_groups(model: torch.nn.Module, weight_decay: float, lr_projections: float | None = None,
                            lr_rest: float | None = None) -> list[dict]:
    """Two learning rates for a converted Linformer: E and F in a group of their own (no weight decay) at
    ``lr_projections``, every other trainable weight grouped as ``param_groups`` does at ``lr_rest`` (None: the
    optimizer's lr). Empty groups are left out.

    E and F are not decayed here, unlike ``param_groups``: transfer and distillation fit them to a teacher from
    their initialisation (``projection_init``), often with every other weight frozen (transfer.train=projections),
    so nothing else can make up for a decay that pulls them towards 0: it would shrink the pooled keys and values
    (the attention's temperature) rather than fit the teacher. Transfer and distillation results were trained so."""
    proj = [p for n, p in model.named_parameters() if p.requires_grad and is_projection_weight(n)]
    rest = [g for g in param_groups(model, weight_decay, leave_out=proj) if g["params"]]
    groups = [{"params": proj, "weight_decay": 0.0, **({"lr": lr_projections} if lr_projections else {})}] * bool(proj)
    return groups + [g | ({"lr": lr_rest} if lr_rest else {}) for g in rest]


def build_optimizer(groups: list[dict], lr: float, optim: OptimSettings, device: torch.device) -> torch.optim.Optimizer:
    """AdamW over the parameter groups (a task's own, e.g. two learning rates, or ``param_groups``).

    On CUDA (`device`, where the model will train: it is built before Accelerate moves it there) AdamW is the fused
    implementation, one kernel for every parameter instead of a loop of small ones."""
    return torch.optim.AdamW(groups, lr=float(lr), betas=optim.betas, eps=optim.eps,
                             **({"fused": True} if device.type == "cuda" else {}))


def build_scheduler(optimizer, warmup_steps: int, total_steps: int, settings: TrainerSettings):
    """Linear warmup to trainer.lr, then polynomial decay with trainer.lr_power (1: linear) to trainer.lr_end."""
    check_warmup(warmup_steps, total_steps)
    return get_polynomial_decay_schedule_with_warmup(
        optimizer,
        num_warmup_steps=int(warmup_steps),
        num_training_steps=max(int(total_steps), 1),
        lr_end=settings.lr_end,
        power=settings.lr_power,
    )
