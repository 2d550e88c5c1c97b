"""The one training core. Pretraining, finetuning, attention transfer and distillation plug into it through a
``TrainingTask`` (``train.task``).

The task supplies what is its own: the rank's slice of global micro-batch g (a pure function of the seed and g, so
resume needs only the step), the loss, and the evaluation. The core owns the rest:

- claiming the run directory (lock, identity check, "already complete") and recording it (``linformer.rundir``),
  here (``run_training``);
- the optimizer step (``step.optimizer_step``, which the throughput benchmark times too): gradient accumulation with
  the loss normalised by the step's global item count, clipping, and one non-finite guard over the whole step;
- host reads: a step's loss, gradient norm and finiteness stay on the device until the next read, every
  ``trainer.sync_every`` steps and before any evaluation or checkpoint, so that the GPU never waits for the host in
  between; the reads log each step's row, count non-finite steps and measure tokens/s over the steps read
  (``trainer.Trainer``);
- checkpoints and exact resume; SIGTERM/SIGINT write a checkpoint (every rank agrees on the stop) and stop
  (``stopping``);
- metrics.jsonl and trackers, the progress bar, and the closing summary (``summary``).
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list

from .. import errors
from ..cli import (
    OUTPUT_CLOSED,
    exit_status,
    launched_together,
    output_closed,
    peer_cause,
    process_count,
    process_rank,
    stopped_for_a_peer,
)
from ..data.io import recorded_paths, returned_path
from ..errors import CheckpointError, ConfigError, LinformerError, PeerFailed, Preempted, first_line
from ..files.locations import resolve_path
from ..files.mappings import flatten
from ..logfile import say
from ..rng import seed_all, seeded
from ..runconfig import RunSpec, TrainerSettings
from ..rundir import RunRecord, identity, model_problem
from ..runname import LENGTH_KEYS
from ..signals import signals_stop
from . import checkpoint as ckpt
from .common import (
    build_accelerator,
    build_optimizer,
    build_scheduler,
    data_identity,
    finish_trackers,
    param_groups,
)
from .stopping import OUTSIDE_STEPS
from .summary import next_line
from .task import TrainingTask
from .trainer import Trainer

log = logging.getLogger(__name__)


@dataclass
class RunStart:
    """The outcome of claiming a run directory, the same on every rank."""

    status: str                      # new | continue | complete
    error: str | None = None
    error_type: str | None = None


@contextlib.contextmanager
def claimed_run(accelerator: Accelerator, record: RunRecord, config: Mapping, settings: TrainerSettings
                ) -> Iterator[RunStart]:
    """Claim the run directory on rank 0 (lock + identity check; nothing else is written) and share the outcome.

    A refusal is raised on every rank, so distributed runs stop together. The lock is released on exit."""
    start = RunStart("new")
    if accelerator.is_main_process:
        try:
            start.status = record.claim(config, settings.allow_config_change)
        except LinformerError as err:
            start.error, start.error_type = str(err), type(err).__name__
    if accelerator.num_processes > 1:
        start = broadcast_object_list([start])[0]
    if start.error:
        raise getattr(errors, start.error_type, LinformerError)(start.error)
    try:
        yield start
    except BaseException as err:  # an end after the start before the last step: the record says which
        if accelerator.is_main_process:
            _record_end(record, _as_recorded(err, accelerator.num_processes))
        raise
    finally:
        if accelerator.is_main_process:
            record.release()


def _record_end(record: RunRecord, err: BaseException) -> None:
    """Record how `err` ended this attempt: stopped by a signal (checkpointed, or a second Ctrl-C), or failed. An
    attempt that ended before it recorded its start (a refused resume) leaves the record as the earlier attempt
    left it: its own end (stopped, failed), or `running` where it recorded none (killed, or a version that did not
    record a stop), which the next start counts as killed. A closed output (``cli.output_closed``: `2>&1 | head`)
    ends the command as SIGPIPE would, by design: a stop, as a Ctrl-C's, not a failure. A record that cannot be written (a run directory made
    read-only, a full disk) is a warning line: `err` is the error the user is told, not this one raised over it."""
    try:
        if record.started and record.info().get("status") == "running":
            if isinstance(err, (Preempted, KeyboardInterrupt)):
                record.stop(err)
            elif output_closed(err):
                record.stop(err, OUTPUT_CLOSED)
            elif isinstance(err, Exception):
                record.fail(err)
    except Exception as failed:
        log.warning("%s cannot record how the run ended (%s)", record.dir, first_line(failed))


def run_training(spec: RunSpec, run_dir: str | Path,
                 make_task: Callable[[Accelerator, TrainerSettings], TrainingTask]) -> dict[str, Any]:
    """What every loop does around its task: claim the run directory, build the task, optimizer and schedule,
    and fit, as `spec` (read and checked at the entry) says. `make_task` builds the task once the start is accepted; it sets the task's `model`, `tokenizer`,
    `settings` (its adjusted copy: the per-device batch, the run's max_steps), `tracker_tags`, and `prepare` (extra objects such as an eval
    DataLoader that Accelerate must wrap; the task receives them back in the same order as `prepared`)."""
    settings, optim, stage = spec.trainer, spec.optim, spec.stage
    # a relative run directory from the repository, as every path of a spec and the scripts' run directories:
    # the summary's paths and its next: command then name the run from any working directory
    run_dir = Path(resolve_path(run_dir))
    accelerator = build_accelerator(settings, spec.logger, run_dir)
    record = RunRecord(run_dir, stage)
    config = spec.config | data_identity(spec)
    # SIGTERM outside the steps (start-up, the first evaluation, the final scoring and saving), where StopSignal's
    # step-boundary stop does not apply, ends the run as stopped, not killed where it stands (a scheduler's stop)
    with peers_lost_as_failures(accelerator.num_processes), signals_stop(OUTSIDE_STEPS, (signal.SIGTERM,)) as decided, \
            claimed_run(accelerator, record, config, settings) as start, float32_default(), seeded(spec.seed):
        if start.status == "complete":  # it stays so: a SIGTERM now changes neither the message nor the exit
            decided()
            return already_complete(record, config)
        task = make_task(accelerator, settings)
        settings = task.settings
        train_in_float32(task.model)
        if settings.compile:  # in place: the model keeps its class, parameter names and checkpoints
            task.model.compile(backend=settings.compile_backend, dynamic=task.compile_dynamic,
                               mode=settings.compile_mode)
        if settings.max_steps is None:
            raise ConfigError(f"trainer.max_steps is null: {stage} needs a number of steps.")
        decay = optim.weight_decay  # configs/optim/adamw.yaml (finetuning's config overrides it)
        groups = task.param_groups(decay) or param_groups(task.model, decay)
        optimizer = build_optimizer(groups, settings.lr, optim, accelerator.device)
        scheduler = build_scheduler(optimizer, settings.warmup(settings.max_steps), settings.max_steps, settings)
        model, optimizer, scheduler, *task.prepared = accelerator.prepare(task.model, optimizer, scheduler,
                                                                          *task.prepare)
        if accelerator.process_index:  # each process its own dropout masks, as one process draws new ones per
            # micro-batch: the weights are built (and synced) from the seed's first draws, and the data order and MLM
            # masks come from generators of the run's own (seed, step), the same in every process; the first process
            # keeps its stream, so that one process's run is unchanged
            seed_all(spec.seed + accelerator.process_index)
        trainer = Trainer(accelerator, model, optimizer, scheduler, task, settings, record, spec, config,
                          tokenizer=task.tokenizer, tracker_tags=task.tracker_tags, decided=decided)
        try:
            return trainer.fit(eval_at_start=settings.eval_at_start)
        except BaseException as err:  # the trackers record how the run ended, not the finish of a run at exit
            finish_trackers(accelerator, exit_status(peer_failure(err, accelerator.num_processes) or err))
            raise


@contextlib.contextmanager
def float32_default() -> Iterator[None]:
    """torch's default dtype float32 for the run, the caller's restored after: a process that set another (a
    notebook's torch.set_default_dtype(torch.float64)) would otherwise build and train the model, and draw the masks,
    in it, unrecorded and unlike the same run in a fresh process. trainer.mixed_precision sets the compute."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextlib.contextmanager
def peers_lost_as_failures(processes: int) -> Iterator[None]:
    """Raise a collective's failure because another process ended (``peer_failure``) as PeerFailed, anywhere in the
    run: the claim's broadcast, the task's build (rank 0 tokenizes while the others wait: ``main_process_first``),
    the steps, the final save."""
    try:
        yield
    except BaseException as err:
        peer = peer_failure(err, processes)
        if peer is None:
            raise
        raise peer from err


def peer_failure(err: BaseException, processes: int) -> PeerFailed | None:
    """A PeerFailed for `err` where it is a collective's failure because another process of the run ended (it
    failed where this one waited for it: rank 0 writing the model alone, say): gloo's "Connection closed by peer",
    or torch.distributed's own error class (NCCL). That process prints the cause; this one's traceback would bury
    it. It gives that process's line, which that process put in the launcher's store before it left the collectives
    (``cli.tell_peers``), or, where there is none, says that it ended without one (``peer_named``). None for anything
    else."""
    if processes <= 1:
        return None
    lost = ("Connection closed by peer", "Connection reset by peer")
    if not (isinstance(err, getattr(torch.distributed, "DistError", ())) or
            (isinstance(err, RuntimeError) and any(text in str(err) for text in lost))):
        return None
    return peer_named(PeerFailed("another process of this run ended while this one waited for it (its error says "
                                 "why); this process stops with it. The run keeps its last checkpoint."), wait=False)


def peer_named(err: PeerFailed, wait: bool = True) -> PeerFailed:
    """`err` with the line of the process that ended the run (``cli.peer_cause``), which only that process printed,
    or, where none came from it, saying that it ended without one (killed: SIGKILL, the OOM killer). `wait`: that
    process may still be giving its line (it failed where every process agreed, a checkpoint's writing), else it
    gave it before this one could learn it failed (it left the collectives). `err` itself without a launcher's store
    to hear it through."""
    if not launched_together():
        return err
    said = peer_cause(wait)
    if said is not None:
        return PeerFailed(f"{said} (the process that failed; this one stopped with it)")
    rank, processes = process_rank(), process_count()
    other = f"process {1 - rank}" if processes == 2 else "another process"
    return PeerFailed(f"{other} ended without a word: killed? (SIGKILL, the OOM killer: see the system's log); "
                      "this one stopped with it. The run keeps its last checkpoint.")


def _as_recorded(err: BaseException, processes: int) -> BaseException:
    """`err` as run.json gives it: a lost peer's failure (``peer_failure``), or another process's failure where
    every process agreed (``peer_named``), with that process's line."""
    peer = peer_failure(err, processes)
    if peer is None and isinstance(err, (Preempted, KeyboardInterrupt)) and stopped_for_a_peer(err):
        # the launcher's SIGTERM once another process failed, before this one met the failure in a collective
        peer = peer_named(PeerFailed("another process of this run failed; this one stopped with it."), wait=False)
    if peer is None and isinstance(err, PeerFailed):
        return peer_named(err)
    return peer or err


def train_in_float32(model: torch.nn.Module) -> None:
    """Cast a model loaded in half precision (a checkpoint saved in bf16 or fp16, which transformers loads as it is)
    up to float32 in place: AdamW's small updates vanish when rounded to half precision, so the encoder would barely
    move. trainer.mixed_precision is what computes in half precision, over float32 weights."""
    half = {p.dtype for p in model.parameters() if p.dtype in (torch.float16, torch.bfloat16)}
    if half:
        log.info("the model's weights are %s: training them in float32 (trainer.mixed_precision sets the compute)",
                 ", ".join(sorted(str(d) for d in half)))
        model.float()


def already_complete(record: RunRecord, config: Mapping) -> dict[str, Any]:
    """A rerun of a finished run with the same settings: say so, and which operational settings given now differ
    from its own (a finished run applies none: its max_eval_examples, say, stays what scored it), and return what it
    recorded."""
    problem = model_problem(record.dir)
    if problem:
        raise CheckpointError(problem)
    summary = record.summary()
    # paths as a record names them (``data.io.recorded_paths``), on both sides: an older record's absolute ones and a
    # newer one's relative ones are no change
    recorded, given = (recorded_paths(flatten(c)) for c in (record.config(), config))
    defining = identity(config)
    differ = [f"{k}: {recorded.get(k)!r} -> {given.get(k)!r}" for k in sorted(set(recorded) | set(given))
              if recorded.get(k) != given.get(k) and k not in defining]
    unapplied = f" Not applied to the finished run: {'; '.join(differ)}." if differ else ""
    lost = ckpt.lost_checkpoints(record)
    named = [key for key in LENGTH_KEYS if f"{key}=" in record.dir.name]  # a sweep over its length named the folder
    further = (f" It cannot be trained further: {lost}" if lost else
               f" Its folder is named by {named[0]} (a sweep over it): a longer run goes to a folder of its own, "
               "from step 0." if named else
               " Choose another run_name to train again, or raise trainer.max_steps with "
               "trainer.allow_config_change=[trainer.max_steps] to train it further.")
    say(f"{record.dir} is already complete ({summary.get('steps', '?')} steps, the same run settings): nothing to "
        f"do.{unapplied}{further}")  # a result, as a run's summary is: stdout
    return returned(record)


# What a run's summary and results name by a local path, as the run resolved it: its model folder, the model it
# started from (a finetuning's; a transfer's source), a distillation's teacher; the run's folder is the record's.
RETURNED_PATHS = ("model_dir", "model_path", "teacher_path", "source")


def returned(record: RunRecord) -> dict[str, Any]:
    """What the finished run at `record` returns to a caller now, as the same run returned it fresh
    (``Trainer._finish``): its results (a task's) else its summary, their paths absolute on this machine
    (``data.io.returned_path``; the record names them relative to the repository or the data mirror, which a
    caller elsewhere would read as a hub name) and its next: worded for this caller (``summary.next_line``), not
    the one that ran it first (a command line for a notebook's call, or the other way round)."""
    summary, results = record.summary(), record.results()
    summary = {k: returned_path(v) if k in RETURNED_PATHS and isinstance(v, str) else v for k, v in summary.items()}
    summary["run_dir"] = str(record.dir)
    if "next" in summary:
        summary["next"] = next_line(summary.get("stage"), record.dir, summary.get("model_dir"))
    if not results:
        return summary
    return {k: returned_path(v) if k in RETURNED_PATHS and isinstance(v, str) else v for k, v in results.items()}
