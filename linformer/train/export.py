"""A run's checkpoint as a model directory: ``export_run(run_dir)``, for finetuning and pretraining runs.

A finetuning run keeps a loadable model only where ``trainer.save_best=true`` (``<run>/best``), a pretraining run only
once it finishes (``<run>/model``); every run keeps its checkpoints (``<run>/checkpoints/step-NNNNNNNN``), whose
``model.safetensors`` is Accelerate's copy of the model's weights. Export rebuilds the model the run trained, exactly
as the run built it from its config.yaml (finetuning: the classifier of model_path and task; pretraining: the MLM
model of the model group, tokenizer and init_from), loads a checkpoint's weights into it strictly and saves it with
``save_pretrained`` beside the tokenizer. A finetuning source's card (conversion, transfer) comes along, with the run's
result when the exported step is the one it reports.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ..data import get_task
from ..data.tokenizer import load_tokenizer
from ..errors import CheckpointError, ConfigError, RunDirError
from ..files.locations import relative_to, resolve_path
from ..files.mappings import read_json
from ..files.outputs import MANIFEST, check_output_dir, made_by
from ..files.runs import (
    BEST_DIR,
    CONFIG,
    MODEL_DIR,
    RESULTS,
    RUN,
    SUMMARY,
    checkpoint_dir,
    checkpoints_gone,
    complete_checkpoints,
    read_record,
    recorded_imports,
    run_now,
    step_of,
)
from ..hydra_start import import_modules
from ..modeling.card import finetuned_card, start_card, write_model_card
from ..modeling.loading import load_classifier, resolve_model_path, resolve_tokenizer_dir
from ..modeling.saving import model_folder, save_model_dir
from ..rng import rng_kept
from ..runconfig import FinetuneSpec, PretrainSpec
from ..rundir import RunRecord, read_recorded_config
from .checkpoint import STATE_FILE, WEIGHTS, checkpointed_step, newest_intact
from .pretrain import build_model
from .stopping import run_from_a_script

SPECS = {spec.stage: spec for spec in (FinetuneSpec, PretrainSpec)}


def _asked(option: str, keyword: str) -> str:
    """An argument as its caller gives it: scripts/export.py's `option` ("--step 7") where the script runs, else
    export_run's `keyword` ("step=7"), in the words of the errors below."""
    return option if run_from_a_script() else keyword


def export_run(run_dir: str | Path, out: str | Path | None = None, step: int | None = None,
               overwrite: bool = False, imports: Sequence[str] = ()) -> dict:
    """Save the model of finetuning or pretraining run `run_dir` at checkpoint `step` (None: its newest intact one)
    into `out` (None: ``<run>/model`` for a finetuning run's final step, ``<run>/model-step-NNNNNNNN`` otherwise).
    Returns {"out", "step", "checkpoint", "metrics", "final"} (metrics: the run's reported ones when they belong to
    that step; final: the step is the run's last). Relative paths are taken from the repository, as the script takes
    them. `imports`: the modules to import first (where the run's own projection, sharing mode or task registers),
    as the caller names them: the ones the run's config.yaml records are never imported from it (``_imports``)."""
    run_dir = Path(resolve_path(run_dir))
    spec = _spec(run_dir, imports)
    results = read_record(run_dir, RESULTS)
    reported = results.get("best_step")
    checkpoint = _checkpoint(run_dir, step)
    chosen = (results.get("selection") or {}).get("split") is not None
    if step is None and chosen and reported != results.get("steps"):
        raise CheckpointError(f"{run_dir} reports the model of step {reported} (chosen on its validation split), kept "
                              f"in {run_dir / BEST_DIR}; its newest checkpoint is another model. Use that directory, or "
                              f"export a checkpoint by its step ({_asked('--step N', 'step=N')}).")
    step = read_json(checkpoint / STATE_FILE)["step"]
    final = read_record(run_dir, SUMMARY).get("steps") == step
    if isinstance(spec, PretrainSpec) and final and out is None and (run_dir / MODEL_DIR).is_dir():
        raise RunDirError(f"step {step} is the run's final step: its model is {run_dir / MODEL_DIR} already "
                          f"({_asked('--out DIR', 'out=DIR')} exports it again).")
    # a finetuning's final model is <run>/model (best/ holds the chosen one); a pretraining's, where it is gone
    keep_name = final and (isinstance(spec, FinetuneSpec) or not (run_dir / MODEL_DIR).exists())
    out = Path(resolve_path(out)) if out is not None else run_dir / (MODEL_DIR if keep_name else f"{MODEL_DIR}-step-{step:08d}")
    record = made_by("export", {"run": str(run_dir.resolve()), "step": step})
    # the run's own model/ as an earlier version saved it, without manifest.json, is the run's to replace (with the
    # flag), as its trainer replaces it: prune's advice to write a damaged one again is this export
    chosen = out.resolve() == (run_dir / MODEL_DIR).resolve() and out.is_dir() and not (out / MANIFEST).exists()
    moved = _moved_export(out, record, run_dir)
    # before the model is rebuilt; neither the run nor the model it started from may be what --out replaces
    flag = _asked("--overwrite", "overwrite=True")
    check_output_dir(out, None if chosen else moved or record, overwrite, flag,
                     reads=[run_dir, getattr(spec, "model_path", None)], key=_asked("--out", "out="))

    with rng_kept():  # the rebuilt model's fresh weights, replaced next, leave the caller's generators as they were
        model, tokenizer, model_path = _rebuild(spec)
    _load_weights(model, checkpoint / WEIGHTS)
    metrics = results.get("metrics") if reported == step else None
    with model_folder(out, record, overwrite, flag=flag, key=_asked("--out", "out="), chosen=chosen,
                      replaces=moved) as tmp:
        save_model_dir(model, tokenizer, tmp)  # the tokenizer as the run's model/ has it (model_max_length = n)
        if model_path:  # the start's card (conversion, transfer) with this run's finetuning, and its result where it is this step's
            card = start_card(model_path, model, spec.from_scratch)
            run = {"task": spec.task.name, **results}  # a run stopped before its end has no results.json yet
            write_model_card(tmp, finetuned_card(card, spec.run_name, type(model).__name__, run, run_dir, step),
                             folder=out.name)
    return {"out": out, "step": step, "checkpoint": checkpoint, "metrics": metrics, "final": final}


def _moved_export(out: Path, record: dict, run_dir: Path) -> dict | None:
    """The manifest of the model at `out` where it is this run's export of the same step made before the run moved
    (it names the run's path then: ``files.runs.run_now`` finds the run from where the model is now); then a note on
    stderr says so. Such a model is this export's own, written again without the overwrite flag, as one recording
    the run's path now is (``atomic.atomic_dir``'s `replaces`). None otherwise."""
    made = read_json(out / MANIFEST) if out.is_dir() else {}
    settings = made.get("settings") or {}
    if made.get("command") != record["command"] or settings == record["settings"] or \
            settings.get("step") != record["settings"]["step"]:
        return None
    if run_now(str(settings.get("run")), out).resolve() != run_dir.resolve():
        return None
    print(f"note: {out} was exported from step {settings.get('step')} of {settings.get('run')}, the run now at "
          f"{run_dir}: it is written again as its export.", file=sys.stderr, flush=True)
    return made


def _imports(run_dir: Path, imports: Sequence[str]) -> None:
    """Import `imports`, the modules the caller named, where they cover those the run's config.yaml records
    (``recorded_imports``); a recorded one not named is a ConfigError naming it and the flag that imports it. A run
    folder is read, never run: its config.yaml is not checksummed, and a shared or edited one naming a module (one
    beside it in the folder the command starts in, say) would run that module's code on whoever exports it."""
    missing = [name for name in recorded_imports(run_dir) if name not in imports]
    if missing:
        words = ",".join(missing)
        raise ConfigError(f"{run_dir / CONFIG} records imports={missing!r} (modules of your own, where its model's "
                          "projection, sharing mode or task registers): export imports no module a run folder names; "
                          f"give {_asked(f'--imports {words}', f'imports={missing!r}')} to import "
                          f"{'it' if len(missing) == 1 else 'them'}, once you trust the code.")
    import_modules({"imports": list(imports)})


def _spec(run_dir: Path, imports: Sequence[str] = ()) -> FinetuneSpec | PretrainSpec:
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} {'is a file' if run_dir.exists() else 'does not exist'}: give a finetuning or "
                          "pretraining run's directory, outputs/finetune/<run_name> or outputs/pretrain/<run_name> "
                          f"({relative_to()}).")
    if not (run_dir / CONFIG).is_file():
        raise RunDirError(f"{run_dir} is not a run directory (no {CONFIG}): give a finetuning or pretraining run's "
                          "directory, outputs/finetune/<run_name> or outputs/pretrain/<run_name>.")
    stage = read_record(run_dir, RUN).get("stage")
    if stage not in SPECS:
        raise RunDirError(f"{run_dir} is a {stage or 'unrecorded'} run: export takes finetuning and pretraining runs "
                          "(transfer and distillation save their model in <run>/model).")
    # the modules the caller names, where the projection or sharing mode the run's model names is registered
    _imports(run_dir, imports)
    return read_recorded_config(run_dir, SPECS[stage].read, stage)


def _rebuild(spec: FinetuneSpec | PretrainSpec):
    """(model, tokenizer, the source model's path or None): the model the run built, before any training."""
    if isinstance(spec, FinetuneSpec):
        model_path = resolve_model_path(spec.model_path)
        tokenizer = load_tokenizer(model_path, "model_path")
        model, _ = load_classifier(model_path, get_task(spec.task.name).label_names, True, spec.task.name)
        return model, tokenizer, model_path

    tokenizer = load_tokenizer(resolve_tokenizer_dir(spec.tokenizer_dir))
    model = build_model(spec, tokenizer)
    model.config.sparse_prediction = False  # as the run's own model: HF's full-vocabulary logits
    return model, tokenizer, None


def _checkpoint(run_dir: Path, step: int | None) -> Path:
    """The checkpoint of `step`, or the newest whose weights are intact; RNG and optimizer files do not matter. Newer
    ones passed over for damage are named in one warning line, as a resume names them: an export of an older step
    would otherwise read as the run having stopped there."""
    found = complete_checkpoints(run_dir)
    if not found:
        raise CheckpointError(_nothing_to_export(run_dir, step))
    if step is not None:
        found = [p for p in found if p.name == f"step-{step:08d}"]
        if not found:
            have = ", ".join(str(int(p.name[5:])) for p in complete_checkpoints(run_dir)) or "none"
            raise CheckpointError(f"{_asked(f'--step {step}', f'step={step}')}: {checkpoint_dir(run_dir)} has no "
                                  f"checkpoint of that step (steps: {have}).")
    path, damaged = newest_intact(found, matters=lambda name: name in (WEIGHTS, STATE_FILE))
    if path is None:
        raise CheckpointError("no checkpoint with intact weights: " + "; ".join(
            f"{p.name}: {', '.join(probs)}" for p, probs in damaged.items()) + ".")
    if damaged:
        which = " and ".join(f"step {step_of(p)} ({', '.join(probs)})" for p, probs in damaged.items())
        print(f"warning: {checkpoint_dir(run_dir)} holds a newer checkpoint than step {step_of(path)}, damaged: "
              f"{which}; exporting step {step_of(path)}, the newest intact one.", file=sys.stderr, flush=True)
    return path


def _nothing_to_export(run_dir: Path, step: int | None) -> str:
    """Why `run_dir` has no checkpoint to export (never written, removed by prune_checkpoints.py, deleted), what it
    keeps instead, and what writes a checkpoint again: training, since a checkpoint is written by nothing else."""
    record = RunRecord(run_dir, "")
    asked = f"{_asked(f'--step {step}', f'step={step}')}: " if step is not None else ""
    if checkpointed_step(record) is None:
        return (f"{asked}{checkpoint_dir(run_dir)} holds no complete checkpoint: the run wrote none yet (it "
                "checkpoints every trainer.save_every steps, when stopped and at its end): nothing to export.")
    kept = {"model": "the model of its final step", "best": "the model its validation chose"}
    kept = [f"{what} is {run_dir / name}" for name, what in kept.items() if (run_dir / name).is_dir()]
    instead = (f" It keeps its models: {'; '.join(kept)}." if kept else " It keeps no model either.")
    return (f"{asked}{run_dir} has no checkpoint to export: its checkpoints {checkpoints_gone(run_dir)}.{instead} A "
            "checkpoint is written only by training: run the run's command (its settings are its config.yaml) again "
            "under another run_name.")


def _load_weights(model, path: Path) -> None:
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file, load_model

    from ..modeling.task_models import two_head_biases

    try:
        with safe_open(str(path), "pt") as saved:
            names = set(saved.keys())
        if two_head_biases(names):  # an untied head of older code: the model's one bias gets the one it read
            tensors = load_file(str(path))
            tensors["lm_head.bias"] = tensors["lm_head.decoder.bias"]
            missing, unexpected = model.load_state_dict(tensors, strict=False)
        else:
            missing, unexpected = load_model(model, str(path), strict=False)
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{path}: the weights cannot be read ({err}).") from err
    if missing or unexpected:  # the run's config.yaml builds another model than the one it trained
        raise CheckpointError(f"{path} does not fit the classifier its run's {CONFIG} builds: missing "
                              f"{', '.join(missing) or 'none'}; unexpected {', '.join(unexpected) or 'none'}.")
