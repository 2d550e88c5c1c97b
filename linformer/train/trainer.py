"""The Trainer: the loop of optimizer steps, host reads, evaluations, checkpoints and exact resume over a
``TrainingTask``, which ``core.run_training`` builds and fits."""

from __future__ import annotations

import itertools
import logging
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from ..cli import exit_status
from ..data.metrics import improves
from ..data.streams import reading_moved
from ..devices import device_name
from ..errors import CheckpointError, ConfigError, Preempted, TrainingDiverged
from ..files.locations import repo_relative
from ..modeling.saving import is_current_model_folder, model_folder, save_model_dir
from ..progress import progress_bar, progress_said, progress_to_log_file
from ..runconfig import RunSpec, TrainerSettings
from ..rundir import (
    MetricsWriter,
    RunRecord,
    charted,
    describe_changes,
    identity_diff,
    read_metrics,
    refused_changes,
    reported_scalars,
    run_environment,
    start_changes,
)
from ..shell import hydra_override, shell_command
from ..signals import signal_words, signals_finish
from . import checkpoint as ckpt
from . import nonfinite
from .common import finish_trackers, init_trackers, tracker_config
from .compiling import CompileCounts
from .step import optimizer_step
from .stopping import FINISHING, OUTSIDE_STEPS, StopSignal, command_line, how_to_resume
from .summary import print_summary, progress_line
from .task import TrainingTask

log = logging.getLogger(__name__)


@dataclass
class StepRecord:
    """One optimizer step as the host knows it before reading the device: its values stay on the device."""

    step: int                        # the step number once done (1 for the first)
    values: torch.Tensor             # [loss, grad norm, finite] on the device
    tokens: int                      # this rank's real tokens of the step (the host read sums every rank's)
    lr: float                        # the lr this step's update used (what the row logs)
    epoch: float


_clock = time.monotonic  # seconds, for trainer.save_every_minutes


def prefetches(device: torch.device) -> bool:
    """Whether the trainer builds the next step's batches in a background thread (on a GPU: the host is free)."""
    return device.type == "cuda"


class Trainer:
    def __init__(self, accelerator: Accelerator, model, optimizer, scheduler, task: TrainingTask,
                 settings: TrainerSettings, record: RunRecord, spec: RunSpec, config: Mapping, tokenizer=None,
                 tracker_tags: list[str] | None = None, decided: Callable[[], None] | None = None):
        self.accelerator, self.model, self.optimizer, self.scheduler = accelerator, model, optimizer, scheduler
        self.task, self.settings, self.record, self.tokenizer = task, settings, record, tokenizer
        self.spec, self.config = spec, config  # config: what the run record stores (the spec's, with its data's key)
        self.tracker_tags = list(tracker_tags or [])
        # told once run.json says complete (the caller's signals_stop's ``decided``): a signal no longer stops the run
        self._decided = [decided] if decided is not None else []
        # the non-finite steps' counts (``nonfinite``) are saved with it
        self.state: dict[str, Any] = {"step": 0, "tokens": 0, **nonfinite.fresh(), "evals": [], "best": None}
        self.eval_every = settings.eval_every or task.default_eval_every
        self.metrics: MetricsWriter | None = None
        self._t0 = time.perf_counter()  # this process's start of fit()
        # this process's (step, tokens/s) of each step it took, for the steady-state summary
        self._step_rates: list[tuple[int, float]] = []
        self._pending: list[StepRecord] = []  # steps done since the last host read
        self._window_start = time.perf_counter()  # when the steps of the next host read began
        # tokens and seconds of every host read's window since this process started: the rate since start beside the
        # window's (evaluation and checkpoints left out of both)
        self._read_tokens, self._read_s = 0, 0.0
        self._last_save = _clock()  # when the last checkpoint was written (trainer.save_every_minutes)
        # On a GPU the next step's batches are built on the host while the device runs this step (the data is a
        # pure function of the step, so prefetching changes no value). On a CPU the thread would take a core.
        self._prefetcher = ThreadPoolExecutor(1) if prefetches(accelerator.device) else None
        self._next: tuple[int, Future] | None = None
        self._compile_start = CompileCounts.now()
        self._wall_before = 0.0  # seconds the processes before a resume spent on this run (from its checkpoint)
        # the logged lr is trainer.lr's schedule: the first group that starts there (a task's other groups, such as
        # distillation's E/F, follow the same schedule from their own lr)
        starts = [g.get("initial_lr", g["lr"]) for g in optimizer.param_groups]
        self._lr_group = next((i for i, lr in enumerate(starts) if math.isclose(lr, settings.lr)), 0)

    @property
    def run_dir(self) -> Path:
        return self.record.dir

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    # ------------------------------------------------------------------------------------------- the run
    def fit(self, eval_at_start: bool = False) -> dict[str, Any]:
        """Train to max_steps (resuming where a checkpoint says), then write the model, summary and record."""
        self._t0 = time.perf_counter()
        self._resume()
        # saved with every checkpoint: a resume compares them (_check_global_batch) or keeps them (keep_draws)
        self.state["global_batch"], self.state["processes"] = self.global_batch(), self.accelerator.num_processes
        self.state.update(self.task.draws())
        if self.is_main:
            self.record.start(self.config, self.state["step"], self.accelerator.num_processes,
                              run_environment(self.accelerator.device), self.task.draws(), command_line())
            self.metrics = MetricsWriter(self.run_dir, self.state.get("resumed_from_step"))
            if self.state.get("resumed_from_step"):
                self._relog_rates_used()
        # the trackers' config carries what the summary records of the batch (processes, global batch) beside it, and
        # the task's (its model's architecture, a finetuning run's start)
        init_trackers(self.accelerator, self.spec.logger, self.run_dir, self.spec.run_name,
                      tracker_config(self.config, {**self._batch_record(), **self.task.tracker_config}),
                      self.task.stage, self.spec.experiment_name, self.tracker_tags,
                      created=self.record.info().get("created") if self.is_main else None,
                      resumed_step=self.state.get("resumed_from_step"))
        # A log file (stderr not a terminal: nohup, tee, a job runner, CI) gets plain lines instead of the bar, whose
        # carriage returns would run every redraw into one line there
        self._log_lines = self.is_main and progress_to_log_file()
        if self.state["step"] == 0 and eval_at_start:
            self._progress_line(0, self._evaluate(0, {}))  # the log file's first line: where training starts
        t_loop, tokens_before = time.perf_counter(), self.state["tokens"]
        with StopSignal() as stop:
            self._loop(stop)
        # the training is done: a SIGTERM now lets the final evaluation and saving finish (a job runner waits for
        # them), so the run ends complete; a second one stops it
        with signals_finish(FINISHING, OUTSIDE_STEPS, received=stop.signum is not None) as finished:
            self._decided.append(finished)
            return self._finish(t_loop, tokens_before)

    def _finish(self, t_loop: float, tokens_before: int) -> dict[str, Any]:
        """After the last update: the task's final evaluation and saving, the summary and the run record."""
        loop_s, wall = time.perf_counter() - t_loop, self._wall_time()
        diverged_after = nonfinite.check_final_evaluation(
            self.state["evals"], self.state["step"], self.task.main_metric, lambda: self.task.selected_step(self),
            self.nonfinite_outputs)
        summary, results = self.task.finish(self)
        if diverged_after:
            summary["report"] = [*summary.get("report", []), diverged_after]
        if results is not None:
            self._log_reported(results)
        summary = {"stage": self.task.stage, "run_dir": str(self.run_dir), **summary,
                   "steps": self.state["step"], "tokens": self.state["tokens"],
                   # updates skipped for a non-finite loss or gradient (fp16: also the grad scaler's overflows)
                   **nonfinite.record(self.state),
                   # this attempt's average over its steps (tokens_per_s_steps, the first and last); None where
                   # this start took no step (resumed at its last): its speed is unknown, not 0
                   **self._attempt_speed(loop_s, tokens_before),
                   **self._speed_summary(),
                   "wall_time_s": round(wall, 2), **self._batch_record(),
                   "resumed_from_step": self.state.get("resumed_from_step"),
                   # the runs whose checkpoints this one continued (trainer.resume=<another run's>), each with the
                   # step it took over at: the totals above include their steps
                   "continued_from": self.state.get("continued_from")}
        if results is not None:
            results.update(wall_time_s=summary["wall_time_s"], device=summary["device"], **nonfinite.record(self.state),
                           **self._batch_record())
        if self.is_main:
            self.record.finish(summary, results)
        for decide in self._decided:  # complete on disk: a SIGTERM from here on changes neither line nor exit status
            decide()
        self._close()
        if self.is_main:
            print_summary(summary, results)
        return results if results is not None else summary

    def _loop(self, stop: StopSignal) -> None:
        step = last_read = self.state["step"]
        settings = self.settings
        # closed however the loop ends, so that an error's line starts on a line of its own, not after the bar
        with progress_bar(self.is_main and not self._log_lines, total=settings.max_steps, initial=step,
                          desc=self.task.stage) as bar:
            self.model.train()
            self._window_start = time.perf_counter()
            while step < settings.max_steps:
                self._pending.append(self._train_step(step))
                step = self.state["step"] = step + 1
                bar.update(1)
                evaluate = bool(self.eval_every and step % self.eval_every == 0) or step == settings.max_steps
                save = bool(settings.save_every and step % settings.save_every == 0) or step == settings.max_steps
                if not (evaluate or save or step % settings.sync_every == 0):
                    continue  # the device runs on: nothing of this step is read yet
                row = self._read_steps(bar)
                if evaluate:
                    self._settle()
                    row = {**row, **self._evaluate(step, row)}
                else:
                    self._log(step, row)
                logged = step // settings.log_every > last_read // settings.log_every
                if logged:
                    bar.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{row['lr']:.2e}")
                if logged or evaluate:
                    self._progress_line(step, row)
                last_read = step
                # signals and the minutes-based checkpoint are looked at on host reads (every rank at the same step)
                signum, save_due = stop.agreed(self.accelerator, self._save_due())
                if signum is not None and step == settings.max_steps:  # the training is done: fit finishes the run
                    log.warning(FINISHING.replace("{signal}", signal_words(signum)))
                elif signum is not None:
                    self.save()
                    bar.close()
                    stopped = Preempted(
                        f"{signal_words(signum)} at step {step}: checkpoint saved in "
                        f"{ckpt.checkpoint_dir(self.run_dir)}. {how_to_resume(self.spec.stage, self.run_dir)}; "
                        f"trainer.resume=auto continues from step {step}.", signum)
                    self._close(stopped.exit_code)
                    raise stopped
                if save or save_due:
                    self.save()
                self._window_start = time.perf_counter()  # evaluation and checkpoints are not training time

    def _host_batches(self, step: int) -> tuple[list[dict[str, torch.Tensor]], list[int]]:
        """The step's micro-batches (on the host) and the items each one's loss is a mean over. On a GPU they are
        pinned: a copy from pageable memory waits for the device's queue to drain, pinned ones are copied without
        waiting (``optimizer_step`` copies non-blocking)."""
        micro = [self.task.micro_batch(g) for g in self.task.step_batches(step, self.settings.grad_accum)]
        if self.accelerator.device.type == "cuda":
            micro = [{k: v.pin_memory() for k, v in batch.items()} for batch in micro]
        return micro, [self.task.count(b) for b in micro]

    def _step_batches(self, step: int) -> tuple[list[dict[str, torch.Tensor]], list[int]]:
        """This step's batches (prefetched if they were), and the next step's started in the background."""
        pending, self._next = self._next, None
        batches = pending[1].result() if pending is not None and pending[0] == step else self._host_batches(step)
        if self._prefetcher is not None and step + 1 < self.settings.max_steps:
            self._next = (step + 1, self._prefetcher.submit(self._host_batches, step + 1))
        return batches

    def _settle(self) -> None:
        """Wait for a prefetch in flight: evaluation and checkpoints must not run beside the task's data code."""
        if self._next is not None:
            self._next[1].result()

    def _train_step(self, step: int) -> StepRecord:
        """One optimizer step over grad_accum micro-batches, queued on the device: nothing is read back here."""
        micro, counts = self._step_batches(step)
        lr = self.scheduler.get_last_lr()[self._lr_group]  # the rate this update uses, before the schedule moves on
        loss, grad_norm, finite = optimizer_step(self.accelerator, self.model, self.optimizer, micro, counts,
                                                 self.task.loss, self.settings.max_grad_norm)
        if step == 0:
            with warnings.catch_warnings():
                # a step skipped for a non-finite loss still counts and the schedule moves on with it; when it is
                # the first, torch warns that the schedule's first learning rate went unused, which is the intent
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before")
                self.scheduler.step()
        else:
            self.scheduler.step()
        tokens = sum(self.task.tokens(b) for b in micro)  # counted on the host: the device is not waited for
        values = torch.stack([loss.detach().float(), grad_norm.detach().float(), finite.float()])
        return StepRecord(step + 1, values, tokens, lr, self.task.epoch_of(step + 1))

    def _schedule_rate(self, steps: int) -> float | None:
        """The logged group's learning rate after `steps` scheduler steps, as the schedule computes it (None for a
        schedule not of factors, which a resume cannot recompute)."""
        schedule = getattr(self.scheduler, "scheduler", self.scheduler)  # Accelerate's wrapper holds the LambdaLR
        if not hasattr(schedule, "lr_lambdas"):
            return None
        return schedule.base_lrs[self._lr_group] * schedule.lr_lambdas[self._lr_group](steps)

    def _relog_rates_used(self) -> None:
        """On resume, metrics.jsonl's rows that hold the schedule's rate after their step (the next update's: the
        other convention, which runs begun by older versions of the package wrote) are rewritten to the rate their
        update used, what each row logs (``_train_step``): a resumed run's lr column is then one quantity, as the
        uninterrupted run's. Told by the schedule: every kept row's lr is the rate after its step, and not every one
        the rate before it. Rows that follow neither (a schedule changed on an earlier resume) stay as they are."""
        rows = read_metrics(self.metrics.path)
        logged = [r for r in rows if isinstance(r.get("lr"), (int, float))]
        if not logged or self._schedule_rate(0) is None:
            return

        def follows(shift: int) -> bool:
            return all(math.isclose(r["lr"], self._schedule_rate(r["step"] - shift), rel_tol=1e-9, abs_tol=1e-15)
                       for r in logged)

        if follows(0) and not follows(1):
            for row in logged:
                row["lr"] = self._schedule_rate(row["step"] - 1)
            self.metrics.rewrite(rows)
            log.warning("%s: the lr of the rows up to step %d was the rate after each step; rewritten to the rate "
                        "each step's update used, as the rows from here on log", self.metrics.path, logged[-1]["step"])

    def _global_tokens(self, pending: Sequence[StepRecord]) -> list[int]:
        """Each pending step's real tokens over every process: one sum over the ranks per host read (every rank
        reads at the same steps), since each rank pads its own batch and draws its own examples."""
        local = [p.tokens for p in pending]
        if self.accelerator.num_processes == 1:
            return local
        counts = torch.tensor(local, dtype=torch.long, device=self.accelerator.device)
        return [int(x) for x in self.accelerator.reduce(counts, "sum").tolist()]

    def _read_steps(self, bar) -> dict[str, Any]:
        """The host read of the steps since the last one (one sync for all of them): logs each step's row but the
        last, which it returns (the loop logs it, with the evaluation's scores when one is due), counts non-finite
        steps in a row, and stops the run when trainer.max_nonfinite_steps are reached. tokens/s is over the steps
        read: the device's time for them, which no single step's host time measures when nothing waits;
        tokens_per_s_avg is over every read since this process started (its first steps' warm-up included)."""
        pending, self._pending = self._pending, []
        values = torch.stack([p.values for p in pending]).tolist()
        tokens = self._global_tokens(pending)
        window_s = max(time.perf_counter() - self._window_start, 1e-9)
        rate = sum(tokens) / window_s
        self._read_tokens, self._read_s = self._read_tokens + sum(tokens), self._read_s + window_s
        average = self._read_tokens / self._read_s
        totals = list(itertools.accumulate(tokens, initial=self.state["tokens"]))[1:]  # the run's after each step
        self.state["tokens"] = totals[-1]  # all read steps are done: a checkpoint from here on holds them
        rows = []
        for record, (loss, grad_norm, finite), total in zip(pending, values, totals):
            self._step_rates.append((record.step, rate))
            rows.append({**self._step_row(record, loss, grad_norm, rate, total), "tokens_per_s_avg": average})
            if nonfinite.count(self.state, record.step, bool(finite), self.settings.max_nonfinite_steps):
                self._diverged(record.step, bar)
            if record is not pending[-1]:
                self._log(record.step, rows[-1])
        return rows[-1]

    def _step_row(self, record: StepRecord, loss: float, grad_norm: float, tokens_per_s: float,
                  total_tokens: int) -> dict[str, Any]:
        row = {"loss": loss, **self.task.step_metrics(loss), "lr": record.lr, "grad_norm": grad_norm,
               "tokens_per_s": tokens_per_s, "epoch": record.epoch, "tokens": total_tokens}
        if self.task.flops_per_token and self.task.peak_flops:
            row["mfu"] = self.task.flops_per_token * tokens_per_s / self.task.peak_flops
        if self.settings.compile:
            counts = CompileCounts.now().since(self._compile_start)
            row["compiled_graphs"], row["graph_breaks"] = counts.graphs, counts.graph_breaks
        return row

    def _speed_summary(self) -> dict[str, Any]:
        """Steady-state speed: the median tokens/s of the second half of this process's steps (the first steps
        hold compilation and allocator warm-up; after a resume, of this attempt's steps alone: an earlier attempt's
        may have run on another machine or beside other work), with `steady_steps`, the first and last step of that
        half; its MFU, and what torch.compile compiled."""
        later = self._step_rates[len(self._step_rates) // 2:]
        out: dict[str, Any] = {}
        if later:
            median = statistics.median(rate for _, rate in later)
            out["tokens_per_s_steady"], out["steady_steps"] = median, [later[0][0], later[-1][0]]
            if self.task.flops_per_token and self.task.peak_flops:
                out["mfu"] = self.task.flops_per_token * median / self.task.peak_flops
                out["mfu_peak_tflops"] = self.task.peak_flops / 1e12
        out["device"] = device_name(self.accelerator.device)
        if self.settings.compile:
            counts = CompileCounts.now().since(self._compile_start)
            out["compile"] = {"backend": self.settings.compile_backend,
                              "mode": self.settings.compile_mode or "default", "graphs": counts.graphs,
                              "graph_breaks": counts.graph_breaks}
        return out

    def _attempt_speed(self, loop_s: float, tokens_before: int) -> dict[str, Any]:
        """tokens/s of this attempt's training loop (evaluations and checkpoints included), and the steps it took:
        after a resume, those from the checkpoint's step on, not the run's."""
        if not (loop_s > 0 and self.state["tokens"] > tokens_before):
            return {"tokens_per_s": None, "tokens_per_s_steps": None}
        first = (self.state.get("resumed_from_step") or 0) + 1
        return {"tokens_per_s": (self.state["tokens"] - tokens_before) / loop_s,
                "tokens_per_s_steps": [first, self.state["step"]]}

    def _diverged(self, step: int, bar) -> None:
        """trainer.max_nonfinite_steps in a row, the last at `step`: checkpoint (the run's current step, at or after
        it: the host read comes after the steps it reads) and stop."""
        self.save(counted_to=step)
        bar.close()
        diverged = nonfinite.diverged(self.state, step, self.settings.max_nonfinite_steps, self.run_dir)
        self._close(exit_status(diverged))
        raise diverged

    def nonfinite_outputs(self, what: str) -> TrainingDiverged:
        """The error that ends a run whose model gives non-finite outputs at its end (`what`: where they were seen;
        ``nonfinite.outputs_error``), raised by the caller once the trackers and process group are closed."""
        diverged = nonfinite.outputs_error(self.state, what, self.run_dir)
        self._close(exit_status(diverged))
        return diverged

    def _progress_line(self, step: int, row: Mapping[str, Any]) -> None:
        if self._log_lines:
            progress_said(progress_line(self.task.stage, step, self.settings.max_steps, row))

    def _evaluate(self, step: int, row: dict[str, Any]) -> dict[str, float]:
        """The task's evaluation at `step` (its scores, returned), logged with the step's `row`; the best step kept."""
        scores = self.task.evaluate(self.model, self.accelerator)
        evaluation = {"step": step, "epoch": self.task.epoch_of(step), **scores}
        self.state["evals"].append(evaluation)
        value = scores.get(self.task.main_metric)
        best = self.state["best"]
        # without select_best every evaluation is the latest model's (the run reports its last model, however it
        # scored); with it, ``improves``: a non-finite score is never best and never blocks a finite one
        if value is not None and step > 0 and (
            not self.task.select_best
            or improves(value, best["value"] if best else None, self.task.greater_is_better)
        ):
            self.state["best"] = {"step": step, "value": value}
            self.task.on_best(self, step)
        self._log(step, {**row, **scores})
        return scores

    def _log_reported(self, results: Mapping[str, Any]) -> None:
        """The reported split's scores (results.json's metrics: scored once, after training) to the trackers, as
        eval_<metric> at the run's last step (where the scoring happened, as Hugging Face's Trainer logs its final
        evaluation) with eval_step the step of the model scored, so that wandb and TensorBoard show what the run
        reports. metrics.jsonl keeps the training rows and the evaluations during training."""
        scores = reported_scalars(results)
        if scores and self.is_main:
            self.accelerator.log(scores, step=self.state["step"])

    def _log(self, step: int, row: Mapping[str, Any]) -> None:
        if self.is_main:
            written = self.metrics.log(step, row)
            self.accelerator.log(charted({k: v for k, v in written.items() if isinstance(v, (int, float))}), step=step)

    # ------------------------------------------------------------------------------------------- state
    def _wall_time(self) -> float:
        """Seconds spent on this run so far, over every process that worked on it."""
        return self._wall_before + time.perf_counter() - self._t0

    def _save_due(self) -> bool:
        """Whether trainer.save_every_minutes have passed since the last checkpoint (or the loop's start): a run
        killed without a signal (out of memory, a lost node) then loses at most that much."""
        minutes = self.settings.save_every_minutes
        return minutes is not None and _clock() - self._last_save >= 60 * minutes

    def save(self, counted_to: int | None = None) -> None:
        """Checkpoint the run at its current step. `counted_to`: the step the non-finite steps were counted up to,
        where that is not the current step (a host read stopped at a streak's limit before its last step)."""
        self._last_save = _clock()
        self._settle()
        self.state["wall_time_s"] = self._wall_time()
        # while a non-finite streak runs, the checkpoint before its first step is kept: it is where the error that
        # ends the streak tells a lower lr to go on from
        counted = self.state["step"] if counted_to is None else counted_to
        ckpt.save_checkpoint(self.accelerator, self.run_dir, self.state["step"], self.state, self.settings.keep_last,
                             keep_before=nonfinite.streak_start(self.state, counted))
        if self.is_main:
            self.record.checkpointed(self.state["step"])

    def _resume(self) -> None:
        path, rng_ok = ckpt.resolve_resume(self.settings.resume, self.run_dir, self.settings.allow_nonbitwise_resume)
        if path is None:
            lost = ckpt.lost_checkpoints(self.record)
            if lost:  # its record says it trained N steps: starting at 0 would replace them without a word
                raise CheckpointError(lost)
            if ckpt.complete_checkpoints(self.run_dir):
                raise CheckpointError(
                    f"{self.run_dir} holds checkpoints of an earlier run but trainer.resume={self.settings.resume}: continue "
                    "it with trainer.resume=auto, or choose another run_name (or delete the directory) to start over."
                )
            earlier = self.record.info().get("status") if self.is_main else None
            if earlier in ("running", "stopped", "failed"):  # running: killed (its lock was taken over)
                ended = "killed" if earlier == "running" else earlier
                print(f"{self.run_dir}: its earlier attempt ({ended}) left no checkpoint (trainer.save_every): this "
                      "attempt starts over from step 0", file=sys.stderr)
            return
        source = path.parent.parent  # checkpoints/step-NNNNNNNN in its run directory
        foreign = source.resolve() != self.run_dir.resolve()
        if foreign:
            self._check_foreign(path, source)
        with ckpt.keeping_settings(self.optimizer, self.scheduler):
            self.state = ckpt.load_checkpoint(self.accelerator, path, rng_ok)
        nonfinite.resumed(self.state)
        step = self.state["step"]
        if step > self.settings.max_steps:
            raise ConfigError(f"trainer.max_steps={self.settings.max_steps} is below the step of the checkpoint the run "
                              f"continues ({path}, step {step}): give trainer.max_steps above {step}.")
        self._check_global_batch()
        self._check_token_count(step)
        self.task.keep_draws(self.state)
        self.state["resumed_from_step"] = step
        self._wall_before = self.state.get("wall_time_s", 0.0)
        if foreign:  # the run's record names the weights its first steps come from
            self.record.resumed_from = str(path.resolve())
            # its steps, tokens, time and evaluations up to `step` are that run's, which this run's files do not
            # hold: the summary names it (kept in the state: a later resume of this run still continued it)
            self.state["continued_from"] = [*self.state.get("continued_from", []),
                                            {"run": repo_relative(source), "step": step}]
        if self.is_main:
            where = path if foreign else path.name
            print(f"resuming {self.run_dir} from {where} (step {step} of {self.settings.max_steps})", file=sys.stderr)

    def _batch_record(self) -> dict[str, Any]:
        """What a step computed over, as the run's last attempt ran it (summary.json, results.json): the per-device
        batch (trainer.global_batch_size's share where that is set), the processes, their product with
        grad_accum (the global batch: runs of one global batch took the same steps), and the precision."""
        return {"batch_size": self.settings.batch_size, "grad_accum": self.settings.grad_accum,
                "processes": self.accelerator.num_processes, "global_batch": self.global_batch(),
                "mixed_precision": self.settings.mixed_precision}

    def global_batch(self) -> int:
        """Sequences per optimizer step over every process: the data order's unit (a step reads rows g*B..(g+1)*B
        of the epoch's permutation) and what the schedule's steps mean."""
        return self.settings.batch_size * self.settings.grad_accum * self.accelerator.num_processes

    def _check_global_batch(self) -> None:
        """A checkpoint continues with the global batch it was trained at. Step s reads the data order from row
        s x the global batch (``streams.reading_moved``), so another one continues elsewhere than the checkpoint
        stopped: another number of processes with the same per-device batch (a resume with python after torchrun,
        say), or an allowed change of trainer.batch_size, trainer.grad_accum or trainer.global_batch_size. Refused
        wherever it would skip or re-read rows, naming how many, whatever trainer.allow_config_change says. Where both
        read from the same place (an epoch's start) a config change stands as the run's claim allowed it, and another
        number of processes is refused unless allowed (``processes``), then recorded. Checkpoints saved before the
        state recorded the global batch are not checked."""
        before, now = self.state.get("global_batch"), self.global_batch()
        if before is None or before == now:
            return
        ran_on, world = self.state.get("processes"), self.accelerator.num_processes
        given = (f"{self.run_dir}'s checkpoint was trained at {before} sequences per step over every process; this "
                 f"start gives {now} (trainer.batch_size={self.settings.batch_size} x trainer.grad_accum="
                 f"{self.settings.grad_accum} x {world} process{'es' * (world != 1)})")
        launcher = (f"Start it with the number of processes it ran on ({ran_on}: torchrun --nproc_per_node {ran_on})"
                    f"{self._same_global_batch(before)}")
        order = getattr(getattr(self.task, "train_stream", None), "order", None)  # a task reading an EpochOrder
        moved = None if order is None else reading_moved(order, self.state.get("step", 0), before, now)
        if moved is not None:
            if ran_on == world:  # a change of the batch settings, not of the launcher
                keep = self._global_batch_overrides(before)
                launcher = (f"Keep its global batch by adding {keep}" if keep else
                            f"Resume it at the global batch it was trained at ({before})")
            raise ConfigError(f"{given}, which cannot continue where it stopped: {moved}. {launcher}.")
        if ran_on == world:  # a config change, which the run's claim checked against trainer.allow_config_change
            return
        allow = self.settings.allow_config_change
        if not (allow is True or "processes" in (allow or [])):
            raise ConfigError(
                f"{given}: the data order and the schedule's steps would change. {launcher}, or add "
                "trainer.allow_config_change=[processes] to change the global batch from this step on (run.json "
                "records it).")
        self.record.allowed_changes = {**self.record.allowed_changes, "processes": (ran_on, world),
                                       "global batch": (before, now)}

    def _check_token_count(self, step: int) -> None:
        """A run of padded batches begun by a version that counted their padding in `tokens` (and tokens/s): its
        metrics.jsonl rows and its checkpoint's count up to `step` are padded tokens, and this version counts real
        ones, so continued, the run's tokens column and its summary's tokens and tokens/s would mix two quantities.
        Told by run.json: an attempt of those versions recorded no `start_step` (recorded since, with the real
        count). Refused unless allowed (``token_count``), then recorded in run.json's changes at `step`."""
        info = self.record.info()
        attempts = [*info.get("attempts", []), *([info] if "started" in info else [])]
        if not self.task.pads or not any("start_step" not in a for a in attempts):
            return
        allow = self.settings.allow_config_change
        if not (allow is True or "token_count" in (allow or [])):
            raise ConfigError(
                f"{self.run_dir} was begun by an earlier version, which counted the padding of its batches in "
                f"`tokens` (metrics.jsonl and its checkpoint, steps 1-{step}); this version counts real tokens, so "
                "continued, its tokens and tokens/s would mix the two. Add trainer.allow_config_change=[token_count] "
                f"to continue it so (run.json records the change at step {step}), or finetune again under another "
                "run_name for one count.")
        self.record.allowed_changes = {**self.record.allowed_changes, "token_count": ("padded", "real")}

    def _same_global_batch(self, before: int) -> str:
        """", or keep its global batch here by adding <overrides>" (_global_batch_overrides), or "" where none."""
        keep = self._global_batch_overrides(before)
        return f", or keep its global batch here by adding {keep}" if keep else ""

    def _global_batch_overrides(self, before: int) -> str:
        """The overrides that give the checkpoint's global batch on this start's processes and accumulation, where it
        divides (else ""): trainer.global_batch_size where the run sets that, else the per-device trainer.batch_size;
        a changed one is a config change, so they allow it too."""
        per_device = self.settings.grad_accum * self.accelerator.num_processes
        if before % per_device:
            return ""
        key, value = (("trainer.global_batch_size", before) if self.settings.global_batch_size is not None else
                      ("trainer.batch_size", before // per_device))
        allow = self.settings.allow_config_change
        keys = [*(allow if isinstance(allow, list) else []), key]
        return shell_command(hydra_override(key, value),
                             hydra_override("trainer.allow_config_change", list(dict.fromkeys(keys))))

    def _check_foreign(self, path: Path, source: Path) -> None:
        """A checkpoint of another run (trainer.resume=<its path>) continues this one only with that run's settings,
        as a rerun in its own directory would: its steps so far were trained with them. A change the user allows
        (trainer.allow_config_change) is recorded in run.json, as for a rerun."""
        recorded = RunRecord(source, self.task.stage).config()
        if not recorded:  # a checkpoint copied out of its run: nothing to compare
            return
        diff = identity_diff(recorded, self.config)
        started = start_changes(diff)
        if started:
            raise ConfigError(f"trainer.resume={self.settings.resume}: that checkpoint's run ({source}) started from "
                              f"other weights ({describe_changes(started)}): its steps were trained from those. Give "
                              "the weights it started from, or start afresh without trainer.resume.")
        refused = refused_changes(diff, self.settings.allow_config_change)
        if refused:
            raise ConfigError(
                f"trainer.resume={self.settings.resume}: that checkpoint's run ({source}) was trained with other "
                f"settings ({describe_changes(refused)}). Continue it with its settings, or add "
                f"trainer.allow_config_change=[{','.join(refused)}] to change them from its step on (run.json records "
                "the change).")
        self.record.allowed_changes = {**self.record.allowed_changes, **diff}

    def save_model(self, final: Path) -> None:
        """save_pretrained model (and tokenizer) into `final` atomically; rank 0 writes.

        The full state dict is gathered on every rank first: under FSDP or DeepSpeed ZeRO-3 each rank holds a shard.
        """
        acc = self.accelerator
        acc.wait_for_everyone()
        state_dict = acc.get_state_dict(self.model)
        if self.is_main:  # the run directory is this run's (RunRecord.claim): its earlier model is ours to replace
            with model_folder(final, overwrite=True) as tmp:
                save_model_dir(acc.unwrap_model(self.model), self.tokenizer, tmp, state_dict=state_dict)
        acc.wait_for_everyone()

    def renew_model(self, final: Path) -> None:
        """Save the model into `final` again (``save_model``) where that folder, which holds the weights the model
        holds now, predates the current format (``saving.is_current_model_folder``): a run begun by an earlier version
        and finished by this one would otherwise report a folder written the earlier way (labels LABEL_0/1, no model
        code or card, no checksums). The folder is shared by every process (each reads it back), so all agree."""
        if final.is_dir() and not is_current_model_folder(final):
            log.info("%s was saved by an earlier version: writing it again in the current format", final)
            self.save_model(final)

    def _close(self, exit_code: int = 0) -> None:
        """End trackers with the process's exit status and tear down the process group: without it gloo runs can
        abort at exit."""
        if self._prefetcher is not None:
            self._prefetcher.shutdown(wait=True, cancel_futures=True)
        self.accelerator.wait_for_everyone()
        finish_trackers(self.accelerator, exit_code)
        self.accelerator.end_training()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
