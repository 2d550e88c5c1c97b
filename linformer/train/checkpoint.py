"""Atomic, verified checkpoints with exact resume.

A checkpoint is ``<run>/checkpoints/step-NNNNNNNN/``: Accelerate's ``save_state`` (model, optimizer, scheduler,
grad scaler, every process's RNG state), ``trainer_state.json`` (step, counters, evaluations) and
``checksums.json`` (every file's size and sha256), written last. The directory is built as ``.tmp-step-...`` and
renamed when complete, so a run killed mid-write never leaves a directory that looks complete.

Resume verifies the checksums of the newest checkpoint and falls back to the newest intact one, naming the damaged
file. RNG states decide bitwise resume (dropout masks), so a damaged one in the only usable checkpoint is an error
unless ``trainer.allow_nonbitwise_resume=true``. An RNG state counts as damaged when its checksum differs, and also
when it is missing or cannot be loaded, checksums or not: Accelerate's ``load_state`` catches any failure to load
one and goes on without it (it raises for every other piece: weights, optimizer, scheduler, scaler, custom objects),
so only this check keeps such a resume from being silently not bitwise.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import random
import re
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import load as accelerate_load
from safetensors import safe_open
from safetensors.torch import load_file

from ..errors import CheckpointError, MissingFileError, PeerFailed, RunDirError, first_line
from ..files.atomic import swap_in, umask_modes, write_json, written_at
from ..files.hashing import checksum_problems, file_checksums
from ..files.mappings import read_json
from ..files.outputs import output_damage

# a run's checkpoints as every reader finds them: files/runs.py, below the model loaders
from ..files.runs import (
    BEST_DIR,
    CHECKPOINT_STATE,
    MODEL_DIR,
    RESULTS,
    RUN,
    SUMMARY,
    checkpoint_dir,
    checkpoints_gone,
    complete_checkpoints,
    export_command,
    read_record,
    step_of,
)
from ..files.storage import disk_full_names
from ..files.temporaries import remove_stale_temps
from ..modeling.loading import rewrite_advice, unpickling_refusal, unpickling_why
from ..rundir import RunLock, RunRecord, model_problem

log = logging.getLogger(__name__)

STATE_FILE = CHECKPOINT_STATE
WEIGHTS = "model.safetensors"  # Accelerate's save_state name for the (single, unsharded) model's weights
CHECKSUMS = "checksums.json"  # hashing.file_checksums of the checkpoint's files
_RNG = re.compile(r"^random_states_\d+\.pkl$")


def resumed_state(resume: str | None, run_dir: Path) -> dict | None:
    """The trainer state (its draws: ``TrainingTask.draws``) of the checkpoint a start with trainer.resume=`resume`
    continues, read before the task is built (a draw that decides its data: finetuning's validation carve); None
    where the start is afresh. The newest checkpoint's whose state reads: every checkpoint of a run draws alike, and
    the trainer checks the one it loads (``resolve_resume``)."""
    if resume is None:
        return None
    path = Path(str(run_dir if resume == "auto" else resume))
    found = [path] if (path / STATE_FILE).is_file() else complete_checkpoints(path)
    return next((state for state in (read_json(p / STATE_FILE) for p in reversed(found)) if state), None)


def checkpointed_step(record: RunRecord) -> int | None:
    """The step of the newest checkpoint the run's record says it wrote: run.json's ``checkpoint_step``, else (a
    record without it) the last step of a complete run, whose final step is always checkpointed; None where the run
    never wrote one."""
    info = record.info()
    step = info.get("checkpoint_step")
    if step is None and info.get("status") == "complete":
        step = record.summary().get("steps")
    return step if isinstance(step, int) and step > 0 else None


def lost_checkpoints(record: RunRecord) -> str | None:
    """Why a run cannot be continued, where its record says it checkpointed step N and no checkpoint is left (its
    checkpoints/ deleted, or removed by scripts/prune_checkpoints.py): training it would start again at step 0. None
    where a checkpoint is left, or the run never wrote one."""
    step = checkpointed_step(record)
    if step is None or complete_checkpoints(record.dir):
        return None
    gone = checkpoints_gone(record.dir)
    saved = next((name for name in (MODEL_DIR, BEST_DIR) if (record.dir / name).is_dir()), None)
    reuse = (f", or start a new run from its {saved}/ (init_from={record.dir / saved} to pretrain on, "
             f"model_path={record.dir / saved} to finetune)" if saved else "")
    return (f"{record.dir} reached step {step} but its checkpoints {gone}: nothing is left to continue it from, and it "
            f"would start over at step 0. Start over under another run_name (or delete {record.dir} first){reuse}.")



def prune_checkpoints(run_dir: str | Path) -> tuple[int, int]:
    """Remove a complete run's checkpoints/ (what a finished run keeps beyond its model: ``trainer.keep_last`` full
    checkpoints with optimizer state), recording it in run.json's ``checkpoints_removed``, so that a later start of
    the run says they were removed (``lost_checkpoints``). Returns (checkpoints removed, bytes freed).

    Refused in one line, removing nothing: a folder that is no run, a run not complete (its checkpoints continue it),
    one a live process holds, one whose checkpoints/ is a symlink (to what may be another's), and one whose model
    (model/, best/) is gone, damaged or was never kept (trainer.save_best=false), or, saved without checksums, cannot
    be checked against a checkpoint (``unchecked_model_problem``): its checkpoints are then what scripts/export.py
    writes it from."""
    run_dir = Path(run_dir)
    info = read_record(run_dir, RUN)  # one that does not read is refused, naming it
    if not info:
        raise RunDirError(f"{run_dir} is not a run directory (no {RUN}): nothing pruned")
    if info.get("status") != "complete":
        raise RunDirError(f"{run_dir} {_not_complete(run_dir, info)}, not complete: its checkpoints are what "
                          "continues it (trainer.resume=auto). Prune a run once it is complete.")
    problem = model_problem(run_dir)
    if problem or not read_record(run_dir, SUMMARY).get("model_dir"):
        raise RunDirError(problem or f"{run_dir} kept no model (trainer.save_best=false): its checkpoints are what "
                                     "scripts/export.py writes it from. Export it first: "
                                     + export_command(run_dir))
    problem = unchecked_model_problem(run_dir)
    if problem:
        raise RunDirError(problem)
    root = checkpoint_dir(run_dir)
    if root.is_symlink():  # rmtree refuses a link, and what it points to is not the run's folder to delete
        raise RunDirError(f"{root} is a symlink (to {os.readlink(root)}), not a folder of the run: nothing pruned; "
                          "delete the checkpoints where they are, if they are this run's")
    record = RunRecord(run_dir, str(info.get("stage")))
    record.lock.acquire()  # a live process on the run is refused, naming it
    try:
        found = complete_checkpoints(run_dir)
        freed = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0
        if root.is_dir():
            shutil.rmtree(root)
        if found or freed:
            steps = f"step {step_of(found[0])}" + (f" to {step_of(found[-1])}" if len(found) > 1 else "") if found \
                else "no complete checkpoint"
            info = read_record(run_dir, RUN)
            info["checkpoints_removed"] = (f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {len(found)} checkpoint"
                                           f"{'s' * (len(found) != 1)} ({steps}), {freed / 1e6:,.1f} MB")
            write_json(run_dir / RUN, info)
        return len(found), freed
    finally:
        record.release()


def _not_complete(run_dir: Path, info: dict) -> str:
    """What a run not complete is, as prune says it: run.json's status, except that one saying `running` is told
    live from dead by its lock (``RunLock.holder``), as every reader of runs does (``rundir.run_status``): a run
    killed, or stopped by a version that left `running` behind, is stopped, not running."""
    status = info.get("status")
    if status != "running":
        return f"is {status or 'not recorded'}"
    holder = RunLock(run_dir).holder()
    if holder is not None:
        return f"is running (process {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')})"
    return ("is stopped (its run.json says running, but no process holds it: it was killed, or stopped by an "
            "earlier version)")


def unchecked_model_problem(run_dir: Path) -> str | None:
    """Why prune must keep a complete run whose model (summary.json's model_dir) records no checksums (saved by an
    earlier version: ``model_problem`` has nothing to check it by), while checkpoints that could write it again are
    there; None when it has checksums, no checkpoint is left, or its weights equal a checkpoint's (each tensor, so
    that a byte of the weights flipped since is found). The model is damaged where it does not read, or where its
    own step's checkpoint (a pretraining's final step, a finetuning's best_step) holds other weights; where no
    checkpoint of its step is left, it cannot be checked, and the run is kept, saying so."""
    summary = read_record(run_dir, SUMMARY)
    model = run_dir / Path(str(summary["model_dir"])).name
    found = complete_checkpoints(run_dir)
    if output_damage(model) is not None or not found:
        return None
    try:
        weights = _read_weights(model)
    except Exception as err:  # safetensors' own error for a torn header, OSError: the model does not read
        return (f"{run_dir} is complete, but its model {model} is damaged ({first_line(err, named=True)[:200]}): "
                f"{rewrite_advice(model)}.")
    if any(_holds_weights(checkpoint, weights) for checkpoint in reversed(found)):
        return None
    step = read_record(run_dir, RESULTS).get("best_step") if summary.get("stage") == "finetune" \
        else summary.get("steps")
    own = next((c for c in found if step_of(c) == step), None)
    if own is not None:
        return (f"{run_dir} is complete, but its model {model} is damaged (its weights differ from those of its "
                f"step {step} checkpoint, {own}): {rewrite_advice(model)}.")
    steps = ", ".join(str(step_of(c)) for c in found)
    return (f"{run_dir}: its model {model} records no checksums (saved by an earlier version) and no checkpoint left "
            f"holds its weights (its step is {step if isinstance(step, int) else 'not recorded'}; the checkpoints "
            f"kept are of step {steps}), so nothing checks that it is intact, and its checkpoints may be all that "
            "writes a model of the run again: nothing pruned. Having checked the model yourself (a finetuning or "
            f"predict.py from it), delete {checkpoint_dir(run_dir)} by hand, or keep it.")


def _read_weights(model: Path) -> dict[str, torch.Tensor]:
    """The tensors of the model folder `model`'s safetensors files, by name; an error where one does not read."""
    files = sorted(model.glob("*.safetensors"))
    if not files:
        raise MissingFileError(f"no *.safetensors file in {model}")
    weights: dict[str, torch.Tensor] = {}
    for file in files:
        weights.update(load_file(file))
    return weights


def _holds_weights(checkpoint: Path, weights: dict[str, torch.Tensor]) -> bool:
    """Whether the checkpoint's weights hold every tensor of `weights`, equal (a checkpoint that does not read
    holds none)."""
    try:
        with safe_open(checkpoint / WEIGHTS, "pt") as saved:
            names = set(saved.keys())
            return set(weights) <= names and all(torch.equal(saved.get_tensor(k), v) for k, v in weights.items())
    except Exception:  # a damaged checkpoint: safetensors' own error, OSError
        return False


def _write_checksums(path: Path) -> None:
    files = [f for f in path.rglob("*") if f.is_file() and f.name != CHECKSUMS]
    (path / CHECKSUMS).write_text(json.dumps({"files": file_checksums(path, files)}, indent=1), encoding="utf-8")


def damaged_files(path: Path) -> list[str]:
    """Files of a checkpoint that are missing or differ from its checksums, and RNG states that cannot be loaded
    ('name: why'); [] when intact.

    A checkpoint without checksums is checked for its trainer state and its RNG states only."""
    path = Path(path)
    problems = _checksum_problems(path)
    named = {p.split(":")[0] for p in problems}
    return problems + [p for p in _rng_problems(path) if p.split(":")[0] not in named]


def _checksum_problems(path: Path) -> list[str]:
    if not (path / CHECKSUMS).is_file():
        return [] if (path / STATE_FILE).is_file() else [f"{STATE_FILE}: missing"]
    try:
        files = json.loads((path / CHECKSUMS).read_text(encoding="utf-8"))["files"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return [f"{CHECKSUMS}: unreadable"]
    if not isinstance(files, dict):
        return [f"{CHECKSUMS}: unreadable"]
    return checksum_problems(path, files)


def _rng_problems(path: Path) -> list[str]:
    """The RNG states Accelerate's load_state would go on without ('name: why'): each saving process's
    random_states_<rank>.pkl that is missing, and any that cannot be loaded."""
    names = {f.name for f in path.iterdir() if _RNG.match(f.name)} if path.is_dir() else set()
    names |= {f"random_states_{rank}.pkl" for rank in range(_saved_processes(path))}
    problems = ((name, _unloadable(path / name)) for name in sorted(names))
    return [f"{name}: {why}" for name, why in problems if why]


def _saved_processes(path: Path) -> int:
    """How many processes saved the checkpoint (each its own RNG state): its trainer state's count, else 1."""
    try:
        processes = json.loads((path / STATE_FILE).read_text(encoding="utf-8")).get("processes")
    except (OSError, ValueError, AttributeError):
        return 1
    return processes if isinstance(processes, int) and processes > 0 else 1


def _unloadable(rng_file: Path) -> str | None:
    """Why Accelerate could not restore `rng_file` (missing, unreadable, not an RNG state), or None: the same
    loader (torch's weights_only unpickler, which refuses code), the states set on fresh generators, not the
    process's own."""
    if not rng_file.is_file():
        return "missing"
    try:
        with warnings.catch_warnings():  # torch's remarks on a file it then refuses: the refusal says it
            warnings.simplefilter("ignore")
            states = accelerate_load(rng_file)
        random.Random().setstate(states["random_state"])
        np.random.RandomState().set_state(states["numpy_random_seed"])
        torch.Generator().set_state(states["torch_manual_seed"])
    except Exception as err:  # whatever Accelerate would have caught
        refused = unpickling_why(err)  # a pickle of objects, said without torch's advice to load it unrestricted
        if refused:
            return refused
        return f"cannot be loaded ({first_line(err, named=True)[:200]})"
    return None


@contextlib.contextmanager
def _quiet_accelerate():
    """Accelerate logs each file it saves, and warns that tied weights (the MLM decoder shares the embedding) are
    stored once: expected here, and noise in a run's output."""
    names = ("accelerate", "accelerate.checkpointing", "accelerate.accelerator", "accelerate.utils.other")
    levels = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)


def save_checkpoint(accelerator: Accelerator, run_dir: Path, step: int, state: dict, keep_last: int,
                    keep_before: int | None = None) -> Path:
    """Write a checkpoint atomically on every rank's behalf; keep the newest ``keep_last``, and with `keep_before`
    (the first step of a non-finite streak still running) also the newest checkpoint before that step: the streak's
    own checkpoints hold the weights it left, and rotating them in would delete the one a lower lr goes on from.

    A full disk raises DiskFullError naming the checkpoint; the earlier checkpoints are untouched."""
    root = checkpoint_dir(run_dir)
    final = root / f"step-{step:08d}"
    # built beside where it lands (atomic.written_at): a step the user linked to another disk is built on that disk,
    # so that swap_in's renames never cross file systems (EXDEV)
    tmp = written_at(final).parent / f".tmp-step-{step:08d}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        for stale in [*root.glob(".tmp-step-*"), *root.glob(".old-step-*"), tmp]:  # left by a killed process
            shutil.rmtree(stale, ignore_errors=True)
        remove_stale_temps(written_at(final))  # a killed swap-in's .old- beside a linked step's target
    accelerator.wait_for_everyone()
    with disk_full_names(final), _quiet_accelerate():
        # every rank writes its own RNG state into tmp: rank 0 goes on (or removes tmp) once all of them are done
        _agreed(accelerator, root, step, lambda: accelerator.save_state(str(tmp)), tmp)
        _agreed(accelerator, root, step, lambda: _finish_main(accelerator, tmp, final, step, state), tmp)
    if accelerator.is_main_process:
        kept = complete_checkpoints(run_dir)
        before = [c for c in kept if keep_before is not None and step_of(c) < keep_before]
        for old in kept[: -max(int(keep_last), 1)]:
            if not (before and old == before[-1]):
                _rotate_out(old)
    accelerator.wait_for_everyone()
    return final


def _rotate_out(old: Path) -> None:
    """Remove the checkpoint `old` that keep_last rotates out. One that is a symlink loses the link alone: what it
    points to may be another run's checkpoint, and deleting through a link is never this run's to do (an info line
    names the target, left where it is). One that cannot be removed (permissions, a busy file system) is said in a
    warning naming it, not passed over: it would stay beside the kept ones on every later save."""
    if old.is_symlink():
        target = os.readlink(old)
        old.unlink()
        log.info("rotated out checkpoint %s, a symlink: removed the link only, not what it points to (%s), which is "
                 "left as it is; delete it there if it is this run's", old, target)
        return
    try:
        shutil.rmtree(old)
    except OSError as err:
        log.warning("could not remove checkpoint %s, which keep_last rotates out (%s: %s): it stays beside the kept "
                    "ones and takes their space; remove it by hand", old, err.filename or old, err.strerror or err)


def _finish_main(accelerator: Accelerator, tmp: Path, final: Path, step: int, state: dict) -> None:
    """Rank 0's part once every rank's files are in `tmp`: the trainer state and checksums, then the swap-in."""
    if accelerator.is_main_process:
        (tmp / STATE_FILE).write_text(json.dumps(dict(state, step=step), indent=2), encoding="utf-8")
        _write_checksums(tmp)
        umask_modes(tmp)
        swap_in(tmp, final)  # re-saving the same step (the final checkpoint after a periodic one) replaces it whole


def _agreed(accelerator: Accelerator, root: Path, step: int, part, tmp: Path) -> None:
    """Run this rank's `part` of a checkpoint's writing, then learn whether every rank's succeeded (a collective:
    no rank goes on, and rank 0 removes nothing, while another still writes). A rank that failed raises its own
    error; the others raise PeerFailed, which leaves the cause to the rank that has it (linformer.cli). Either way
    `tmp` is removed, so no half checkpoint is left. A signal or Ctrl-C ends the process where it stands, as before."""
    error = None
    try:
        part()
    except Exception as err:
        error = err
    except BaseException:
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if every_rank_succeeded(accelerator, error is None):
        return
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    if error is not None:
        raise error
    raise PeerFailed(f"another process failed while writing the checkpoint of step {step} in {root} (its error says "
                     "why); this process stops with it. The earlier checkpoints are intact.")


def every_rank_succeeded(accelerator: Accelerator, ok: bool) -> bool:
    """Whether `ok` holds on every rank (a collective; `ok` itself for one process). The max of a failure flag:
    Accelerate's ``reduce`` knows "sum", "mean" and "max" alone and sums for any other name ("min" among them), so
    a minimum of success flags would read one rank's failure among several as success."""
    if accelerator.num_processes == 1:
        return ok
    failed = torch.tensor([int(not ok)], device=accelerator.device)
    return not bool(accelerator.reduce(failed, "max").item())


def newest_intact(candidates: list[Path], matters=lambda name: True) -> tuple[Path | None, dict[Path, list[str]]]:
    """The newest of `candidates` (oldest first) none of whose damaged files `matters` (file name -> bool), or None;
    with the damaged files ('name: why') of each newer candidate passed over, newest first."""
    passed_over = {}
    for path in reversed(candidates):
        problems = [p for p in damaged_files(path) if matters(p.split(":")[0])]
        if not problems:
            return path, passed_over
        passed_over[path] = problems
    return None, passed_over


def _pick(candidates: list[Path], allow_nonbitwise: bool) -> tuple[Path, bool]:
    """The newest intact checkpoint; (path, rng_ok). Damage is logged naming the file; see the module doc."""
    path, damaged = newest_intact(candidates)
    for bad, problems in damaged.items():
        log.warning("checkpoint %s is damaged (%s); trying the previous one", bad, "; ".join(problems))
    if path is not None:
        return path, True
    rng_only = next(((p, probs) for p, probs in damaged.items() if all(_RNG.match(x.split(":")[0]) for x in probs)),
                    None)
    if rng_only is not None:
        path, problems = rng_only
        if allow_nonbitwise:
            log.warning("resuming from %s without its RNG state (%s): dropout will differ from an uninterrupted run",
                        path, "; ".join(problems))
            return path, False
        raise CheckpointError(
            f"checkpoint {path} has a damaged RNG state ({'; '.join(problems)}) and no intact checkpoint precedes "
            "it: set trainer.allow_nonbitwise_resume=true to resume without it (not bitwise), or start over."
        )
    raise CheckpointError(
        f"no intact checkpoint in {candidates[-1].parent}: " + "; ".join(
            f"{p.name}: {', '.join(probs)}" for p, probs in damaged.items())
        + ". Start over with trainer.resume=null and another run_name, or restore the files."
    )


def resolve_resume(resume: str | None, run_dir: Path, allow_nonbitwise: bool = False) -> tuple[Path | None, bool]:
    """(checkpoint, rng_ok). ``auto``: the newest intact checkpoint of this run, or None; a path: that checkpoint,
    or a run directory's newest intact one; None (TrainerSettings.resume, which reads every 'off' spelling): none."""
    if resume is None:
        return None, True
    if resume == "auto":
        found = complete_checkpoints(run_dir)
        return _pick(found, allow_nonbitwise) if found else (None, True)
    path = Path(str(resume))
    if (path / STATE_FILE).is_file():
        return _pick([path], allow_nonbitwise)
    found = complete_checkpoints(path)
    if found:
        return _pick(found, allow_nonbitwise)
    raise CheckpointError(
        f"trainer.resume={resume!r}: no complete checkpoint there. Expected a checkpoint directory holding "
        f"{STATE_FILE}, or a run directory with checkpoints/step-NNNNNNNN/{STATE_FILE}."
    )


# The optimizer's hyperparameters a run's settings give (optim.*, trainer.lr through initial_lr): a checkpoint's
# states are the trained ones, these are the run's choice
_SETTINGS_KEYS = ("weight_decay", "betas", "eps", "initial_lr")


@contextlib.contextmanager
def keeping_settings(optimizer, scheduler) -> Iterator[None]:
    """Around a checkpoint's load: the optimizer's hyperparameters and the schedule's peak learning rates as this
    run's settings built them are put back after the checkpoint's states load, and the learning rate is recomputed
    from them at the checkpoint's step. So a change the run allows on resume (trainer.allow_config_change: a lower
    trainer.lr for a run that diverges, another weight decay) trains from that step on, where the checkpoint's
    saved values would otherwise win; with the settings unchanged the values are the same (the same expression the
    schedule evaluates at each step), and the resume stays bitwise."""
    schedule = getattr(scheduler, "scheduler", scheduler)  # Accelerate's wrapper holds the LambdaLR
    kept = [{key: group[key] for key in _SETTINGS_KEYS if key in group} for group in optimizer.param_groups]
    base = list(getattr(schedule, "base_lrs", []))
    yield
    for group, values in zip(optimizer.param_groups, kept):
        group.update(values)
    if base and hasattr(schedule, "lr_lambdas"):
        schedule.base_lrs = base
        lrs = [lr * factor(schedule.last_epoch) for lr, factor in zip(base, schedule.lr_lambdas)]
        for group, lr in zip(optimizer.param_groups, lrs):
            group["lr"] = lr
        schedule._last_lr = lrs  # what get_last_lr() reads: the lr the next step logs


def _refuse_two_head_biases(path: Path) -> None:
    """CheckpointError for a checkpoint of an untied MLM head saved by older code, which had two biases (one never
    read): its optimizer holds one parameter more than this model's, and Accelerate's load fails on the weights'
    names or the optimizer's groups. Its model is whole: export it and start a new run from it."""
    from safetensors import SafetensorError, safe_open

    from ..modeling.task_models import two_head_biases

    try:
        with safe_open(str(path / WEIGHTS), "pt") as saved:
            names = set(saved.keys())
    except (SafetensorError, OSError):  # none, or damaged: the load names it
        return
    if two_head_biases(names):
        run_dir = path.parent.parent
        raise CheckpointError(
            f"checkpoint {path} cannot be resumed: it was saved before an untied MLM head's two biases were one "
            "parameter (it holds lm_head.bias, never read, beside lm_head.decoder.bias), and its optimizer state does "
            "not fit this model. Export its model ("
            + export_command(run_dir, "--step", step_of(path))
            + ") and start a new run from it with init_from=<the exported folder>.")


@contextlib.contextmanager
def _keeping_rng(accelerator: Accelerator) -> Iterator[None]:
    """Around a load without the checkpoint's RNG states (damaged ones, resumed with leave not to be bitwise): the
    process's generators as they were before, whatever of a state Accelerate set before failing on the rest of it
    (it loads random_states_<rank>.pkl and sets Python's, NumPy's, torch's and CUDA's generators in turn, catching
    any failure), and its step count, which the same file carries."""
    cuda = torch.cuda.is_available()
    states = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
              torch.cuda.get_rng_state_all() if cuda else None, accelerator.step)
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if cuda:
            torch.cuda.set_rng_state_all(states[3])
        accelerator.step = states[4]


def load_checkpoint(accelerator: Accelerator, path: Path, rng_ok: bool = True) -> dict:
    """Restore model, optimizer, scheduler, scaler and (when ``rng_ok``) RNG states; return the trainer state.
    Nothing in ``path`` is written: the checkpoint may be another's, or on a read-only copy."""
    path = Path(path)
    _refuse_two_head_biases(path)
    try:
        with _quiet_accelerate(), contextlib.nullcontext() if rng_ok else _keeping_rng(accelerator):
            accelerator.load_state(str(path))
    except pickle.UnpicklingError as err:  # torch's weights-only loader refused a file (one with code, say)
        pickled = sorted(f for f in path.iterdir() if f.suffix in (".bin", ".pt", ".pkl"))
        # each checked as Accelerate loaded it (its allowed classes: an RNG state's NumPy arrays)
        why = unpickling_refusal(err, pickled, load=lambda f: accelerate_load(f, map_location="cpu"))
        raise CheckpointError(f"checkpoint {path}: {why}") from None
    except Exception as err:  # a checkpoint without checksums can still hold a truncated file
        raise CheckpointError(f"checkpoint {path} could not be loaded ({type(err).__name__}: {err}).") from err
    return json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
