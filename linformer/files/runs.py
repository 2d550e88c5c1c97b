"""A run directory's file names, its record as a command that continues or builds on it reads it, and its
checkpoints' names. Here, below the model loaders that read a run; the run record itself is ``rundir``."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import RunDirError
from ..shell import script_command
from .locations import resolve_path
from .mappings import parse_mapping

# A run directory's record (what each holds: rundir.py): its files, and the folders of the models it saves
CONFIG = "config.yaml"
RUN = "run.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
RESULTS = "results.json"
PREDICTIONS = "eval_predictions.json"  # finetuning: label and prediction per example of the reported split (scored once)
LOCK = ".lock"
MODEL_DIR = "model"                    # the model a run saves at its end
BEST_DIR = "best"                      # finetuning: the model its validation chose
CHECKPOINTS_DIR = "checkpoints"        # train/checkpoint.py's step-NNNNNNNN folders
WANDB_DIR = "wandb"                    # wandb's own folder, in a run directory
# what a run keeps in its folder: a command that reads the run writes none of them (predict's --output)
RUN_RECORDS = (CONFIG, RUN, METRICS, SUMMARY, RESULTS, PREDICTIONS, LOCK, MODEL_DIR, BEST_DIR, CHECKPOINTS_DIR,
               WANDB_DIR)
# A stage's Hydra sweep folder, beside its single runs (configs/<stage>.yaml: hydra.run.dir <stage>/<name>,
# hydra.sweep.dir <stage>/multirun): no run, tokenizer or corpus may take its name
HYDRA_SWEEP_DIR = "multirun"
# Folders the readers of runs do not search (``rundir.find_runs``), besides hidden ones: a run's own folders
UNSEARCHED_DIRS = (CHECKPOINTS_DIR, WANDB_DIR)


RESTORE = "Restore the file (from a copy), or start afresh under another run_name (or move {dir} away)."


def run_now(recorded: str | Path, beside: str | Path) -> Path:
    """The run directory an output's record names (`recorded`: an export's "run", the absolute path it had then)
    where it is now, for `beside`, the output as it is now: as recorded while a run directory (its CONFIG) is there;
    else, the run and the output having moved together (a clone, an outputs folder, a copy elsewhere), the run of that
    name nearest the output: the folder holding it (an export's default place, <run>/model-step-N), else the recorded
    path's last parts (<stage>/<run>, outputs/<stage>/<run>, ...) under a folder above it, the most of them found.
    The recorded path where none is found (a run deleted, or moved apart from its output)."""
    run = Path(resolve_path(str(recorded)))  # relative: from the repository, as every path a record names
    if (run / CONFIG).is_file():
        return run
    output = Path(beside).resolve()
    if output.parent.name == run.name and (output.parent / CONFIG).is_file():
        return output.parent
    parts = run.parts[1:] if run.is_absolute() else run.parts
    for count in range(len(parts), 1, -1):  # the run's folder and at least the one above it (its stage's)
        for above in output.parents:
            if (above.joinpath(*parts[-count:]) / CONFIG).is_file():
                return above.joinpath(*parts[-count:])
    return run


def read_record(run_dir: str | Path, name: str) -> dict:
    """A file of a run's record (CONFIG, RUN, SUMMARY, RESULTS) that a command continues or builds on (a start,
    a rerun, an export): {} when it is missing; one that is there but does not read is refused in one line naming
    it (``parse_mapping``'s why), never taken for no record: a start would not check its settings against it,
    a report would count the run as unfinished. ``load_run`` (the dashboard, compare_runs) reads leniently. (Here, below the model loaders that read a run's record.)"""
    data, why = parse_mapping(Path(run_dir) / name)
    if why:
        raise RunDirError(f"{Path(run_dir) / name} cannot be read ({why}): what the run in {run_dir} recorded there "
                          f"is lost. {RESTORE.format(dir=run_dir)}")
    return data


def recorded_imports(run_dir: str | Path) -> list[str]:
    """The modules the run's command imported first (its config.yaml's ``imports``: where a projection, sharing
    mode or task of one's own registers itself), [] for none: a command that goes on from the run (its next:
    finetuning, an export) needs them too."""
    names = read_record(run_dir, CONFIG).get("imports") or []
    return [str(name) for name in names] if isinstance(names, list) else []


def export_command(run_dir: str | Path, *words, shown: str | Path | None = None) -> str:
    """scripts/export.py's command for the run `run_dir` (`words` after it: --step, --out; `shown`: how the run is
    named in it, `run_dir` by default), with ``--imports`` of the modules its config.yaml records: export imports no
    module a run folder names unless its caller names it, and the package's advice for a run names them, as the
    run's own next: line does for a finetuning."""
    imports = recorded_imports(run_dir)
    return script_command("export", run_dir if shown is None else shown, *words,
                          *(["--imports", ",".join(imports)] if imports else []))


# train/checkpoint.py writes them; here, below the model loaders, so that what a run keeps to write its model again
# from is read one way wherever it is said (``loading.rewrite_advice``, export, resume, prune_checkpoints)
CHECKPOINT_STATE = "trainer_state.json"  # a checkpoint's trainer state: written last but its checksums
_CHECKPOINT_NAME = re.compile(r"^step-(\d{8})$")


def checkpoint_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS_DIR


def step_of(checkpoint: str | Path) -> int:
    """The step a checkpoint directory (checkpoints/step-NNNNNNNN) was saved at."""
    return int(_CHECKPOINT_NAME.match(Path(checkpoint).name).group(1))


def complete_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoints that finished writing (intact or not), oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if _CHECKPOINT_NAME.match(p.name) and (p / CHECKPOINT_STATE).is_file()]
    return sorted(found, key=step_of)


def already_pruned(run_dir: str | Path) -> str | None:
    """run.json's record of the prune_checkpoints.py that removed a run's checkpoints (when, how many, how much:
    ``checkpoints_removed``), where the run holds none since (a later prune has nothing to do); else None."""
    root = checkpoint_dir(run_dir)
    if root.is_symlink() or (root.is_dir() and any(root.iterdir())):
        return None
    return read_record(run_dir, RUN).get("checkpoints_removed") or None


def checkpoints_gone(run_dir: str | Path) -> str:
    """How a run's checkpoints went, as a clause after "its checkpoints": removed by prune_checkpoints.py (when, how
    many: run.json's ``checkpoints_removed``), or gone without a record of it."""
    removed = read_record(run_dir, RUN).get("checkpoints_removed")
    return (f"were removed by prune_checkpoints.py ({removed})" if removed else
            f"are gone ({checkpoint_dir(run_dir)} is missing or empty)")
