"""The run record: what a run directory holds, the code that writes its files, and its readers.

``outputs/<stage>/<run_name>/`` holds:

- ``config.yaml``: the resolved config of the run. Its identity keys (everything but the operational keys in
  ``OPERATIONAL_KEYS``: model, data, optimisation, seed) define the run; a start whose identity differs is refused.
- ``run.json``: stage, status (``running`` / ``complete``, ``stopped`` by a signal with its message's first line, or
  ``failed`` with the error's first line), start and end times, every config change a user allowed on resume
  (``trainer.allow_config_change``), ``command``: the command line that started it (each attempt's own, kept in
  ``attempts``), and ``resumed_from``: another run's checkpoint it continued; what decides its
  numbers besides the config: ``environment`` (``run_environment``: code version and commit, library versions,
  torch's threads, the device; each attempt's own, kept in ``attempts``), and the task's draws (``batch_seeding``,
  ``validation_seed``: ``data.streams``; finetuning's ``validation_carve``: ``data.task_splits.CARVES``).
- ``metrics.jsonl``: one JSON object per logged step (``step``, ``time`` in seconds of the run's attempts so far: a
  resumed run's go on from the step it resumed at, so time never runs backwards; then the metrics the stage logs:
  loss, lr, grad_norm, eval_* ...).
- ``summary.json`` (every stage), ``results.json`` (finetuning), ``model/``, ``best/``, ``checkpoints/``.
- ``.lock`` while a process trains in it.

config.yaml, run.json, summary.json and results.json are written whole (``atomic.atomic_write``): a reader sees the old
or the new file, never half. metrics.jsonl is appended a row at a time, so a reader may meet a last row still being
written (``metric_lines``: its whole_lines stops before it, the other readers warn about it); the ``.lock`` is created
exclusively (``RunLock``). The models and checkpoints are the trainer's (train/trainer.py, train/checkpoint.py), each
written whole. This module holds the record itself (identity, lock, metrics, status) and its readers: a command that
builds on a run reads a file of it through ``read_record`` (a damaged one is refused in one line); a report over many
runs (the dashboard, compare_runs) through ``read_shown`` and ``load_run``: a damaged file is one warning, and the run
is shown without it, marked damaged where the report shows it; a figure or table made from the runs through
``load_run(strict=True)`` (``read_record``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import glob
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGINT
from typing import Any, TypeVar

from .configs import CONFIG_DIR_VARIABLE, RETIRED_KEYS, without_retired
from .data.io import local_path, record_path, recorded_paths
from .errors import ConfigError, DataError, RunDirError, did_you_mean, first_line
from .files.atomic import atomic_write, write_json, write_json_when_full, write_yaml
from .files.hashing import tree_sha256
from .files.locations import clone_root, resolve_path, started_script
from .files.locks import (
    file_owner,
    holder_gone,
    holder_record,
    in_use,
    lock_holder,
    remove_stale_lock,
    settled_holder,
)
from .files.mappings import flatten, parse_mapping, read_json, read_yaml, warn_once
from .files.outputs import listing, output_damage, settings_changes
from .files.processes import process_place

# the record's names: files/runs.py, below this module and the model loaders that read a run
from .files.runs import (
    CONFIG,
    HYDRA_SWEEP_DIR,
    LOCK,
    METRICS,
    MODEL_DIR,
    RESTORE,
    RESULTS,
    RUN,
    SUMMARY,
    UNSEARCHED_DIRS,
    read_record,
)
from .files.storage import disk_full_names
from .modeling.values import projects_keys
from .runname import model_label
from .signals import Interrupted, signal_words

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------ metrics
def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl (``iter_metrics``)."""
    return list(iter_metrics(path))


def iter_metrics(path: str | Path, start: int = 0) -> Iterator[dict[str, Any]]:
    """The rows of a metrics.jsonl from byte offset `start` (a line's start), one at a time: a reader that keeps
    what it needs of each holds one row, not the file (a 250k-step run logs ~70 MB)."""
    for row, _, _ in metric_lines(path, start):
        yield row


def metric_lines(path: str | Path, start: int = 0, whole_lines: bool = False
                 ) -> Iterator[tuple[dict[str, Any], int, str]]:
    """(row, the byte offset after its line, the line) for each row of a metrics.jsonl from byte offset `start` (a
    line's start), its step an int (``_metrics_row``). A line that is no such row (a torn line: a run still writing,
    or killed mid-write; a hand-edited or another logger's row) is skipped, and blank lines; the skipped ones are
    one warning per file when the reading ends, with their count and the first's line (once: ``mappings.warn_once``),
    never a line each (a damaged file has thousands). With `whole_lines` the reading stops at a line without its
    newline, a row still being written, to be read from there later (the dashboard's incremental mirror)."""
    path = Path(path)
    if not path.is_file():
        return
    offset = start
    skipped, first = 0, ""
    try:
        with path.open("rb") as f:
            f.seek(start)
            for i, raw in enumerate(f):
                if whole_lines and not raw.endswith(b"\n"):
                    return
                offset += len(raw)
                line = raw.decode(errors="replace").strip()
                if not line:
                    continue
                row, why = _metrics_row(line)
                if row is None:
                    skipped += 1
                    first = first or f"line {i + 1}{f' after byte {start}' if start else ''}: {why}"
                    continue
                yield row, offset, line
    finally:
        if skipped:
            warn_once(f"{path}: {skipped} line{'s' * (skipped != 1)} skipped, not a metrics row (the first, {first})")


def _metrics_row(line: str) -> tuple[dict[str, Any] | None, str]:
    """(the row, "") of a metrics.jsonl line: a JSON object whose step is an integer (a float of one, as another
    logger may write it, made an int); else (None, why): every reader takes int(row["step"]) as given."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None, "not JSON: a run still writing, or killed mid-line"
    if not isinstance(row, dict) or "step" not in row:
        return None, "not a JSON object with a step"
    step = row["step"]
    if isinstance(step, float) and step.is_integer():
        row["step"] = step = int(step)
    if not isinstance(step, int) or isinstance(step, bool):
        return None, f"its step {json.dumps(step)[:40]} is not an integer"
    return row, ""


class MetricsWriter:
    """Appends rows to metrics.jsonl. On resume the rows after the checkpoint's step, and any torn line, are
    dropped first (with a warning for a torn line), so the steps logged again replace rather than duplicate."""

    def __init__(self, run_dir: str | Path, resume_step: int | None):
        self.path = Path(run_dir) / METRICS
        self.start = time.time()
        self.before = 0.0  # seconds the earlier attempts spent up to the step resumed from: `time` goes on from there
        if resume_step is None:
            atomic_write(self.path, "")
        elif self.path.exists():
            kept = [r for r in read_metrics(self.path) if int(r["step"]) <= resume_step]
            self.rewrite(kept)
            self.before = max((float(r["time"]) for r in kept if isinstance(r.get("time"), (int, float))), default=0.0)

    def rewrite(self, rows: list[Mapping[str, Any]]) -> None:
        """The file holds `rows` (what earlier attempts logged, as a resume keeps or revises them)."""
        atomic_write(self.path, "".join(json.dumps(r) + "\n" for r in rows))

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {"step": int(step), "time": round(self.before + time.time() - self.start, 3)}
        row.update({k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                    for k, v in metrics.items() if v is not None})
        line = memoryview((json.dumps(row) + "\n").encode())
        with disk_full_names(self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                end = os.fstat(fd).st_size
                try:
                    while line:
                        line = line[os.write(fd, line):]
                except BaseException:
                    os.ftruncate(fd, end)  # a row cut short (a full disk) would read as a torn last line
                    raise
            finally:
                os.close(fd)
        return row


# ------------------------------------------------------------------------------------------------ identity
def identity(config: Mapping) -> dict[str, Any]:
    """The settings that define a run: the flattened config without the operational keys, its paths as a record
    names them (``data.io.recorded_paths``): a run made in another checkout, or on another machine with its own data
    mirror, is the same run, and so is one recorded with absolute paths before records named them so."""
    from .runconfig.runs import OPERATIONAL_KEYS  # the specs import the model's modules (torch): not at import

    def operational(key: str) -> bool:
        return any(key == k or key.startswith(k + ".") for k in OPERATIONAL_KEYS)

    return recorded_paths({k: v for k, v in flatten(config).items() if not operational(k) and k not in RETIRED_KEYS})


def refused_changes(diff: Mapping[str, tuple], allow_change: bool | list[str] | None) -> dict[str, tuple]:
    """The changes of `diff` (identity_diff) that trainer.allow_config_change does not allow: none when it is true,
    those it does not name when it is a list."""
    allowed = set(diff) if allow_change is True else set(allow_change or [])
    return {k: v for k, v in diff.items() if k not in allowed}


CHANGEABLE_FACTS = ("processes", "token_count")  # what allow_config_change may name beside config keys (the training core checks it)


def _check_allowed_keys(allow_change: bool | list[str] | None, recorded: Mapping, requested: Mapping) -> None:
    """ConfigError for a key trainer.allow_config_change names that neither config has: a misspelt key would
    otherwise leave the change it meant refused with advice to allow what was allowed."""
    if not isinstance(allow_change, list):
        return
    known = [*flatten(recorded), *flatten(requested), *CHANGEABLE_FACTS]
    unknown = [k for k in allow_change if k not in known]
    if unknown:
        raise ConfigError(f"trainer.allow_config_change names {unknown[0]!r}, which is no key of this run's config"
                          f"{did_you_mean(unknown[0], known)}")


def describe_changes(changes: Mapping[str, tuple]) -> str:
    """'key: old -> new; ...' for an error line (``outputs.settings_changes``; a missing value is None)."""
    return settings_changes({k: old for k, (old, _) in changes.items() if old is not None},
                            {k: new for k, (_, new) in changes.items() if new is not None})


# The keys naming the weights a run starts or learns from (finetuning's and transfer's model_path, pretraining's
# init_from, distillation's teacher): the steps a run has taken came from them, so no run continues across a change
START_KEYS = ("model_path", "init_from", "teacher_path")


def start_changes(diff: Mapping[str, tuple]) -> dict[str, tuple]:
    """The changes of `diff` (identity_diff) to the weights a run started from (START_KEYS): never allowed."""
    return {k: v for k, v in diff.items() if k in START_KEYS}


def is_shape_key(key: str) -> bool:
    """A model key that changes a weight's shape (SHAPE_FIELDS): a run cannot continue across it."""
    from .modeling.configuration import SHAPE_FIELDS  # the model's modules import torch: only a run's check needs it
    return key.startswith("model.") and key.split(".", 1)[1] in SHAPE_FIELDS


def identity_diff(recorded: Mapping, requested: Mapping) -> dict[str, tuple[Any, Any]]:
    """{key: (recorded value, requested value)} for every identity key that differs (missing = None). A model field
    one config lacks (recorded before the model groups listed it) and the other sets to LinformerConfig's default
    is the same model, not a change, whichever side lacks it (compare_runs sets an older run beside a newer one
    either way round); a key recorded only since LATER_KEYS is missing from the recorded side."""
    a, b = identity(recorded), identity(requested)

    def same(k: str) -> bool:
        missing = a if k not in a else b if k not in b else None
        if missing is None:
            return False
        other = b if missing is a else a
        return _is_model_default(k, other.get(k)) or (missing is a and _later(k))

    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and not same(k)}


# Identity keys that runs recorded before them lack: such a run is compared on the rest, not refused for the gap
LATER_KEYS = ("task_data_key", "task_spec_key")
# A task registered from Python: runs recorded before its spec was recorded lack task.spec (task_spec_key, where the
# run has it, still compares how the files are read)
LATER_PREFIXES = ("task.spec.",)


def _later(key: str) -> bool:
    return key in LATER_KEYS or key.startswith(LATER_PREFIXES)


def _is_model_default(key: str, value: Any) -> bool:
    if not key.startswith("model."):
        return False
    from .modeling.configuration import LinformerConfig

    field = {f.name: f for f in dataclasses.fields(LinformerConfig)}.get(key.split(".", 1)[1])
    if field is None:
        return False
    default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    return value == default


def _format_note(recorded: Mapping, requested: Mapping, keys) -> str:
    """Where the differing keys are missing from one side: the record was written by another version of the run
    format (it lacks keys this version records, or holds keys it no longer reads)."""
    a, b = identity(recorded), identity(requested)
    lacks, extra = [k for k in keys if k not in a], [k for k in keys if k not in b]
    parts = ([f"it lacks {', '.join(lacks)}, which this version records"] if lacks else []) + \
            ([f"it holds {', '.join(extra)}, which this version no longer reads"] if extra else [])
    return f" The record is of another version of the run format: {'; '.join(parts)}." if parts else ""


# ------------------------------------------------------------------------------------------------ lock
class RunLock:
    """``<run>/.lock``: one live process per run directory. A lock left by a dead process on this host is taken
    over; one held by a live process (or by another host, which cannot be checked) refuses the start."""

    def __init__(self, run_dir: str | Path, otherwise: str = "choose another run_name", tidy: bool = False):
        self.path = Path(run_dir) / LOCK
        self.held = False
        self.otherwise = otherwise  # what a refused start can do instead of waiting
        self.tidy = tidy  # on release, remove the folders made to hold the lock that are still empty
        self.made: list[Path] = []

    def acquire(self) -> None:
        self.made = [p for p in [self.path.parent, *self.path.parent.parents] if not p.exists()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = holder_record()
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = settled_holder(self._holder)  # one being written by its creator this instant: read again
                if holder_gone(holder):
                    self._remove_stale(holder)
                    continue
                raise RunDirError(in_use(self.path, holder, self.otherwise)) from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(me))
            self.held = True
            return
        raise RunDirError(f"could not take the lock {self.path}: another process keeps taking it.")

    def _remove_stale(self, holder: dict) -> None:
        """Remove the lock a process that is gone (`holder`, as read from it) left, said once it is gone; where
        another start took it over meanwhile, nothing (``locks.remove_stale_lock``: the next try meets that start's
        lock). One that cannot be removed (another user's, in a shared folder whose sticky bit lets only its owner
        delete it) is refused in one line naming the lock and its owner, not taken over."""
        pid = holder.get("pid")
        try:
            if not remove_stale_lock(self.path, holder):
                return
        except OSError as err:
            try:
                owner = f"belongs to user {file_owner(self.path)}"
            except OSError:
                owner = "is there"
            raise RunDirError(
                f"the stale lock {self.path} (of process {pid}, no longer running) {owner} and cannot be removed "
                f"({err.strerror or err}): ask its owner or an admin to delete it, or {self.otherwise}.") from None
        log.warning("took over the stale lock of process %s (no longer running) in %s", pid, self.path.parent)

    def holder_gone(self) -> bool:
        """Whether no live process holds the run: no lock, or one left by a process of this host that is gone (a
        lock of another host cannot be checked: not gone)."""
        return not self.path.exists() or holder_gone(self._holder() or {})

    def holder(self) -> dict | None:
        """The live process holding the run, as its lock records it ({pid, host, place, since}); None where no
        live process holds it."""
        holder = self._holder()
        return holder if holder is not None and not holder_gone(holder) else None

    def _holder(self) -> dict | None:
        return lock_holder(self.path)

    def release(self) -> None:
        """Remove the lock (a clean-up, which runs after an error too). A lock that cannot be removed (its folder
        made read-only) is a warning line, not an error raised over the one that ended the run: the next start
        takes it over, its process being gone."""
        if self.held:
            holder = self._holder() or {}
            if holder.get("pid") == os.getpid() and holder.get("place", process_place()) == process_place():
                try:
                    self.path.unlink(missing_ok=True)
                except OSError as err:
                    log.warning("the lock %s cannot be removed (%s): the next start takes it over", self.path,
                                err.strerror or err)
                for folder in self.made if self.tidy else ():
                    with contextlib.suppress(OSError):  # not empty: what was written there stays
                        folder.rmdir()
            self.held = False


# ------------------------------------------------------------------------------------------------ the record
def not_a_run(path: str | Path) -> list[str]:
    """The names a folder holds when it is not a run directory (no config.yaml or run.json, but files: someone's
    folder, which a run never writes into); [] for a run's directory, an empty one, or none. A record that does not
    read is still a run's: the run's start refuses it, naming the file (``read_record``), where "not a run directory"
    would send the user to move the run's own files away."""
    path = Path(path)
    if not path.is_dir() or (path / CONFIG).is_file() or (path / RUN).is_file():
        return []
    return sorted(p.name for p in path.iterdir() if p.name != LOCK)


# run.json's fields of an attempt's end, by status (finish, fail, stop), and of its start (the step it started at, the
# processes and environment it ran on): moved into `attempts` when the run starts again
_ENDED = ("finished", "failed", "error", "stopped", "reason")
_BEGUN = ("start_step", "processes", "environment", "command")
# Environment variables that change a run's numbers (torch's CPU threads: bitwise results hold on one; cuBLAS's
# workspace: deterministic GPU kernels), recorded where set and repeated in the command to resume
NUMERIC_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG")
# Environment variables that choose a run's inputs (the configs it composes, the raw data it reads): the command it
# records and prints to resume repeats them where set, so that pasted into another shell it reads the same files
INPUT_ENV = (CONFIG_DIR_VARIABLE, "LINFORMER_DATA_MIRROR")


def numeric_env() -> dict[str, str]:
    """The NUMERIC_ENV variables this process was started with (those set)."""
    return {name: os.environ[name] for name in NUMERIC_ENV if name in os.environ}


def command_env() -> dict[str, str]:
    """The variables a run's command repeats before it (those set): NUMERIC_ENV, then INPUT_ENV."""
    return {**numeric_env(), **{name: os.environ[name] for name in INPUT_ENV if os.environ.get(name)}}


def _git_revision(root: Path) -> dict[str, Any]:
    """The commit of the git checkout at `root` and whether it had uncommitted changes; None each where there is no
    checkout or git cannot tell (git missing, the checkout unreadable)."""
    import subprocess

    if not (root / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30,
                                  check=True, encoding="utf-8", errors="replace").stdout

        commit = git("rev-parse", "HEAD").strip() or None
        return {"commit": commit, "dirty": bool(git("status", "--porcelain", "--untracked-files=no").strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def code_revision() -> dict[str, Any]:
    """What names the code that ran: the package's version; where the package is a clone's (an editable install),
    that checkout's commit and whether it had uncommitted changes (``dirty``), else (a wheel: the version is the
    same for every commit it was built from) None for both and, where the command was a clone's script, that
    clone's ``scripts_commit`` and ``scripts_dirty``; and either way ``package_sha256``, the package's own code by
    content (``files.hashing.tree_sha256`` of its .py files: the same for a wheel built from the same sources)."""
    from .version import __version__

    package = Path(__file__).resolve().parent
    root = clone_root()
    revision: dict[str, Any] = {"linformer": __version__, **(_git_revision(root) if root else
                                                               {"commit": None, "dirty": None})}
    started = started_script()
    if root is None and started is not None and (started.parent.parent / ".git").exists():
        scripts = _git_revision(started.parent.parent)
        revision.update(scripts_commit=scripts["commit"], scripts_dirty=scripts["dirty"])
    revision["package_sha256"] = tree_sha256(package.parent, (f"{package.name}/**/*.py",))
    return revision


def run_environment(device) -> dict[str, Any]:
    """What a run's numbers depend on besides its config (run.json's ``environment``): the code
    (``code_revision``), the machine and libraries as the benchmarks record them (``bench.common.
    machine_description``: device, CPU, torch's threads, torch, transformers, python), and the variables its command repeats (``command_env``) where set."""
    from .bench.common import machine_description

    machine = machine_description(device)
    for key in ("competing_processes", "load_average"):  # a benchmark's own measurement conditions
        machine.pop(key, None)
    return {**code_revision(), **machine, "env": command_env()}


class RunRecord:
    """Read and write one run directory. Training claims it (lock + identity check) before writing anything."""

    def __init__(self, run_dir: str | Path, stage: str):
        self.dir = Path(run_dir)
        self.stage = stage
        self.lock = RunLock(self.dir, tidy=True)  # a start refused or stopped before it wrote leaves no folder
        self.allowed_changes: dict[str, tuple[Any, Any]] = {}  # set by claim(); recorded by start()
        self.resumed_from: str | None = None  # another run's checkpoint this run continues; recorded by start()
        self.started = False  # this attempt recorded its start (start()): only then is the run's end its to record

    # readers: the run's own record (``read_record``: a file of it that does not read is refused)
    def _own(self, name: str) -> dict:
        return read_record(self.dir, name)

    def config(self) -> dict:
        return self._own(CONFIG)

    def info(self) -> dict:
        return self._own(RUN)

    def summary(self) -> dict:
        return self._own(SUMMARY)

    def results(self) -> dict:
        return self._own(RESULTS)

    def metrics(self) -> list[dict[str, Any]]:
        return read_metrics(self.dir / METRICS)

    def is_complete(self) -> bool:
        return self.info().get("status") == "complete"

    # the start
    def claim(self, config: Mapping, allow_change: bool | list[str] | None = None) -> str:
        """Take the lock and check the recorded identity against `config`; write nothing else.

        Returns "new" (nothing recorded), "continue" (same identity, unfinished) or "complete" (same identity,
        finished). Differing identity keys are refused, naming each, unless `allow_change` is true or lists them.
        """
        self.lock.acquire()
        try:
            recorded, info = self.config(), self.info()  # either refused here when it does not read
            _check_allowed_keys(allow_change, recorded, config)  # a new run's too: a key it names is checked now
            if not recorded and not info:
                foreign = not_a_run(self.dir)
                if foreign:  # someone's folder, not a run: a run writes only into a new directory or its own
                    raise RunDirError(f"{self.dir} is not a run directory (it has no {CONFIG} or {RUN}) but holds "
                                      f"{listing(foreign)}: a run writes only into a new directory or its own. Choose another "
                                      "run_name (or paths.output_dir), or move those files away.")
                warn_unfinished_twin(self.dir, config)
                return "new"
            if not recorded:  # a run.json without its settings: nothing to check a continuation against
                raise RunDirError(f"{self.dir / CONFIG} is missing, but {self.dir} holds a run ({RUN}): its settings "
                                  f"cannot be checked against these. {RESTORE.format(dir=self.dir)}")
            diff = identity_diff(recorded, config)
            shaped = {k: v for k, v in diff.items() if is_shape_key(k)}
            if shaped:  # its checkpoint's tensors have the recorded shapes: nothing can continue from them
                changes = describe_changes(shaped)
                raise RunDirError(
                    f"{self.dir} holds a run of another architecture ({changes}), whose weights cannot take the new "
                    "shape: start afresh under another run_name."
                )
            started = start_changes(diff)
            if started:  # its steps so far were trained from those weights: a record of the new ones would be untrue
                raise RunDirError(
                    f"{self.dir} holds a run that started from other weights ({describe_changes(started)}): its steps "
                    "so far were trained from those, so it cannot continue from these. Start afresh under another "
                    "run_name.")
            refused = refused_changes(diff, allow_change)
            if refused:
                changes, keys = describe_changes(refused), ",".join(refused)
                raise RunDirError(
                    f"{self.dir} holds a run with other settings ({changes}).{_format_note(recorded, config, refused)}"
                    f" Choose another run_name, or continue this run with these settings by adding "
                    f"trainer.allow_config_change=[{keys}]."
                )
            self.allowed_changes = {k: v for k, v in diff.items() if k not in refused}
            return "complete" if self.is_complete() and not self.allowed_changes else "continue"
        except BaseException:
            self.lock.release()
            raise

    def start(self, config: Mapping, step: int, processes: int = 1, environment: Mapping | None = None,
              draws: Mapping | None = None, command: str | None = None) -> None:
        """Record the config and status `running` (after set-up succeeded, so a failed start changes nothing), with
        the step this attempt starts at, the processes and ``environment`` (``run_environment``) it runs on: the
        steps from it to the next attempt's `start_step` ran so; the ``command`` that started it (a sweep's job: the
        sweep's command line; its own values are in config.yaml); and the task's ``draws`` (its batch seeding and
        validation seed, finetuning's validation carve: kept for the whole run)."""
        if not self.info() and (self.dir / CONFIG).is_file():  # an earlier attempt's record, without its run.json
            log.warning("%s is missing: the run goes on from its files, but what it recorded of the "
                        "earlier attempts (created, attempts, changes) is gone; a new record starts with this one",
                        self.dir / RUN)
        info = self.info() or {"stage": self.stage, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "changes": []}
        begun = {key: info.pop(key) for key in _BEGUN if key in info}
        ended = {key: info.pop(key) for key in _ENDED if key in info}
        # an earlier attempt's end (a crash, a stop) goes into the history, not beside this one's status; one still
        # `running` whose lock was taken over (claim) was killed before it could record an end
        previous = KILLED if info.get("status") == "running" else info.get("status")
        if ended or previous == KILLED:
            attempt = {"status": previous, "started": info.get("started"), **begun, **ended}
            if (last := self._last_logged_step()) is not None:
                attempt["last_logged_step"] = last
                if last > step:  # step 0: no checkpoint was there, the steps are run from the start
                    log.warning("the %s attempt started %s had logged step %d: steps %d-%d (%d) are run again from %s",
                                previous, info.get("started"), last, step + 1, last, last - step,
                                f"the checkpoint of step {step}" if step else "the start (it left no checkpoint)")
            info.setdefault("attempts", []).append(attempt)
        for key, (old, new) in self.allowed_changes.items():
            info["changes"].append({"step": step, "key": key, "from": old, "to": new})
            log.warning("%s changes at step %d: %r -> %r (trainer.allow_config_change)", key, step, old, new)
        info.update(status="running", started=time.strftime("%Y-%m-%d %H:%M:%S"), start_step=step, processes=processes,
                    **dict(draws or {}))
        if environment is not None:
            info["environment"] = dict(environment)
        if command is not None:
            info["command"] = command
        if self.resumed_from:
            info["resumed_from"] = record_path(self.resumed_from)  # the weights its steps up to `step` come from
        write_yaml(self.dir / CONFIG, recorded_paths(dict(config)))  # its paths as they read on every machine
        write_json(self.dir / RUN, info)
        self.started = True

    def _last_logged_step(self) -> int | None:
        """The last step in metrics.jsonl as the earlier attempt left it (read before this attempt's MetricsWriter
        drops the rows past its checkpoint): how far that attempt got, to its last logged row (trainer.log_every)."""
        return max((int(row["step"]) for row in iter_metrics(self.dir / METRICS) if "step" in row), default=None)

    def checkpointed(self, step: int) -> None:
        """Record the step of the newest checkpoint written (``checkpoint_step``): a run whose checkpoints are gone
        later is then refused rather than trained again from step 0 (``train.checkpoint.lost_checkpoints``)."""
        info = self.info()
        info["checkpoint_step"] = int(step)
        info.pop("checkpoints_removed", None)
        write_json(self.dir / RUN, info)

    def finish(self, summary: Mapping, results: Mapping | None = None) -> None:
        """Record the run's summary (and a task run's results), their paths as they read on every machine
        (``data.io.recorded_paths``), and status `complete`."""
        if results is not None:
            write_json(self.dir / RESULTS, recorded_paths(dict(results)))
        write_json(self.dir / SUMMARY, recorded_paths(dict(summary)))
        info = self.info()
        info.update(status="complete", finished=time.strftime("%Y-%m-%d %H:%M:%S"))
        write_json_when_full(self.dir / RUN, info)

    def fail(self, err: BaseException) -> None:
        """Record status `failed` with the error's class and first line: a run that crashed mid-way must not read
        `running` (a rerun with the same settings continues it from its last checkpoint)."""
        self._end("failed", "error", first_line(err, named=True))

    def stop(self, err: BaseException, reason: str | None = None) -> None:
        """Record status `stopped`: a signal (SIGTERM, Ctrl-C) ended the run before its last step; the stop's first
        line says which and where ("SIGINT (Ctrl-C) at step 17: checkpoint saved in ..."; a rerun continues it from
        its last checkpoint; a second Ctrl-C in the steps: ``train.stopping.AGAIN``). A Ctrl-C outside the steps (at
        start-up, in an evaluation or a save) is a KeyboardInterrupt of no words of its own, and a SIGTERM taken as one
        (``signals.Interrupted``) names its signal only: recorded as the command's ``stopped:`` line says them
        ("interrupted by SIGINT (Ctrl-C)"). `reason`: what stopped it where `err` is no signal's (its output closed)."""
        line = reason or ("" if isinstance(err, Interrupted) or not str(err).strip() else first_line(err))
        self._end("stopped", "reason", line or f"interrupted by {signal_words(getattr(err, 'signum', SIGINT))}")

    def _end(self, status: str, why: str, line: str) -> None:
        """Record how the run ended, on a full disk too (``write_json_when_full``: run.json left `running` would be
        read as a run killed before it could record its end, SIGKILL or the OOM killer, not the full disk it was)."""
        info = self.info()
        info.update({"status": status, status: time.strftime("%Y-%m-%d %H:%M:%S"), why: _shortened(line)})
        write_json_when_full(self.dir / RUN, info)

    def release(self) -> None:
        self.lock.release()


def warn_unfinished_twin(run_dir: Path, config: Mapping) -> None:
    """One warning line where a run beside the new run `run_dir` (in its stage's folder) is unfinished and has its
    settings under another run_name (a default run name that changed between versions, say): the new run starts
    over beside it, and run_name= of that one would resume it instead. One that a live process holds (its lock:
    another person's run, say) is named as running, with that process, not as a run to stop and resume."""
    for other in sorted(p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir):
        info = read_json(other / RUN)
        status = info.get("status")
        if status in (None, "complete") or identity_diff(read_yaml(other / CONFIG) or {"?": None}, config):
            continue
        holder = RunLock(other).holder() if status == "running" else None
        if holder is not None:
            log.warning("%s is a run of these settings under run_name=%s, running now in process %s on %s since %s: "
                        "this run does the same work again in %s; stop this one to leave it to that run",
                        other, other.name, holder.get("pid"), holder.get("host"), holder.get("since"), run_dir.name)
        else:
            log.warning("%s is an unfinished run (%s) of these settings under run_name=%s: this run starts over in "
                        "%s; stop it and pass run_name=%s to resume that one instead", other,
                        run_status(other, info), other.name, run_dir.name, other.name)
        return


RECORD_FILES = (CONFIG, RUN, SUMMARY, RESULTS)  # the files of a run's record that name paths


def copy_record(source: str | Path, target: str | Path) -> None:
    """Copy a file of a run to `target`: one of its record (RECORD_FILES) with its paths as a record names them
    (``data.io.recorded_paths``), so that kept records (a plan's, a GPU machine's brought back) name no path of the
    machine that made them, and a run recorded before records did so is kept as a newer one is; any other file
    (metrics.jsonl, predictions) as it is."""
    source, target = Path(source), Path(target)
    if source.name not in RECORD_FILES:
        shutil.copy2(source, target)
        return
    record = recorded_paths(read_record(source.parent, source.name))
    (write_yaml if source.name == CONFIG else write_json)(target, record)


def model_problem(run_dir: Path) -> str | None:
    """Why the finished run `run_dir` cannot stand as done: its summary.json does not read (``read_record``'s line),
    or the model its summary names (model_dir) is gone, or damaged since it was saved (the checksums its folder records: ``outputs.output_damage``), with how it comes back
    (``loading.rewrite_advice``); None when it is as saved, or the run names none. What a rerun of the run says
    (``train.core.already_complete``), and what a plan asks of a job done (``output_problem``)."""
    try:
        summary = read_record(run_dir, SUMMARY)
    except RunDirError as damaged:  # what the run saved is unknown: it cannot stand as done
        return str(damaged)
    if not summary.get("model_dir"):
        return None
    model = run_dir / Path(str(summary["model_dir"])).name
    gone = not model.is_dir()
    damage = None if gone else output_damage(model)  # None: saved without checksums, nothing to check
    if not gone and not damage:
        return None
    from .modeling.loading import rewrite_advice

    what = "is gone (deleted or moved)" if gone else f"is damaged ({'; '.join(damage)})"
    return f"{run_dir} is complete, but its model {model} {what}: {rewrite_advice(model, gone)}."


def output_problem(done: Path) -> str | None:
    """Why the output whose record a plan's job finds at `done` (a run's summary.json or results.json, an output
    folder's file) cannot stand as done: a finished run's model gone or damaged (``model_problem``), or a file of the
    output folder holding `done` damaged since it was written (``outputs.output_damage``); None when neither."""
    folder = Path(done).parent
    if (folder / RUN).is_file():
        return model_problem(folder)
    damage = output_damage(folder)
    return f"{folder} is damaged since it was written ({'; '.join(damage)})" if damage else None


REASON_CHARS = 2000  # run.json's error or reason at most: a message's first line, whole unless it runs on


def _shortened(line: str, limit: int = REASON_CHARS) -> str:
    """`line` whole where it fits in `limit` characters, else cut after its last sentence (or, without one, word)
    that fits, marked " [...]": never mid-word, and the start (the step, the error's class) always kept."""
    if len(line) <= limit:
        return line
    head = line[:limit]
    cut = max(head.rfind(". "), head.rfind("; "))
    cut = cut + 1 if cut > 0 else head.rfind(" ")
    return (head[:cut] if cut > 0 else head).rstrip() + " [...]"


# ------------------------------------------------------------------------------------------------ reading runs
def named_paths(patterns: list[str], argument: str = "runs") -> list[Path]:
    """The paths that command-line `patterns` (the command's `argument`) name: a path that exists as itself (the
    shell has expanded a glob already, and a name may hold glob characters: a run named ``k[16, 32]``), else the glob
    expanded (``**`` recursive, each pattern's matches sorted); a relative one from the repository, "~" expanded
    (``resolve_path``, as every command's paths). A pattern that names nothing is a DataError naming it: a mistyped
    run or an unmatched glob would otherwise leave its runs out of a report without a word. An empty one is a
    ConfigError naming `argument`: an unset shell variable (``"$RUN"``) would otherwise name the repository, and
    every run in it (the ``argtypes.path`` rule)."""
    paths: list[Path] = []
    for pattern in map(str, patterns):
        if not pattern.strip():
            raise ConfigError(f"{argument}: an empty path ({pattern!r}) names no run: give run directories, folders "
                              "of them or globs (an unset variable?)")
        where = resolve_path(pattern)
        found = [where] if os.path.lexists(where) else sorted(glob.glob(where, recursive=True))
        if not found:
            shown = pattern if where == pattern else f"{pattern} ({where})"
            raise DataError(f"{shown} matches no file or folder" if glob.has_magic(pattern) else
                            f"{shown} does not exist")
        paths += map(Path, found)
    return paths


def find_runs(paths: list[str | Path], strict: bool = False, marker: str = METRICS) -> list[Path]:
    """Run directories at or under each path (a run dir itself, or a folder of them), sorted, without duplicates.

    A run's metrics.jsonl (`marker`; results.json finds kept records too, which have none) stands for its run;
    Hydra's record of a sweep (multirun.yaml, beside the sweep's runs) is skipped. Hidden directories
    (outputs/.dashboard), checkpoints and wandb folders are not searched. With `strict`
    (paths a user named), a path that does not exist or holds no run is a DataError naming it: a mistyped name, or a glob the
    shell left unexpanded, would otherwise leave that run out of a report without a word."""
    found: set[Path] = set()
    for p in map(Path, paths):
        here: set[Path] = set()
        if p.name == HYDRA_SWEEP_RECORD and p.is_file():  # beside a sweep's runs, where a glob over them finds it
            continue
        if p.name == marker and p.is_file():  # a run's metrics named for its run
            p = p.parent
        if (p / marker).is_file():
            here.add(p.resolve())
        elif p.is_dir():
            for m in p.rglob(marker):
                rel = m.relative_to(p).parts[:-1]
                if any(part.startswith(".") or part in UNSEARCHED_DIRS for part in rel):
                    continue
                here.add(m.parent.resolve())
        if strict:
            left = abandoned_starts(p, marker)
            if not here:
                raise DataError(f"{p} does not exist" if not p.exists() else f"{p} {ABANDONED}" if left == [p] else
                                f"{p} holds no run (no {marker} at or under it)"
                                + "".join(f"; {folder} {ABANDONED}" for folder in left[:1]))
            for folder in left:
                print(f"warning: {folder} {ABANDONED}", file=sys.stderr)
        found |= here
    return sorted(found)


ABANDONED = ("holds no run, only the lock of a process that is gone: a run killed as it started (SIGKILL, the "
             "out-of-memory killer) before it wrote anything. Its command run again takes the folder over; else "
             "delete it.")


def abandoned_starts(path: Path, marker: str = METRICS) -> list[Path]:
    """The folders at or under `path` (hidden ones, checkpoints and wandb folders not searched) that hold nothing but
    a run's lock left by a process of this host that is gone: a run killed before it wrote anything (while it
    tokenized its task), which no report lists, being no run; a run starting now holds its lock alive, and is left
    out."""
    if not path.is_dir():
        return []
    left = []
    for lock in [path / LOCK] if (path / LOCK).is_file() else path.rglob(LOCK):
        rel = lock.relative_to(path).parts[:-1]
        if any(part.startswith(".") or part in UNSEARCHED_DIRS for part in rel) or (lock.parent / marker).exists():
            continue
        if [e.name for e in lock.parent.iterdir()] == [LOCK] and holder_gone(lock_holder(lock) or {}):
            left.append(lock.parent)
    return sorted(left)


# Hydra's record of a multirun, in the sweep's folder beside its runs (outputs/<stage>/multirun/multirun.yaml)
HYDRA_SWEEP_RECORD = "multirun.yaml"


def _model_label(path: str | None) -> str | None:
    """A finetuned model's origin, shortly (``model_label``: .../pretrain/demo/model -> demo/model)."""
    return model_label(path) if path else None


def _started_from(model_path) -> str | None:
    """A config's model_path as finetuning reads it (relative to the repository; a run folder's model/ where it
    holds one), for a run whose results.json does not record the resolved path yet; a hub name as it is."""
    if not model_path:
        return None
    p = Path(local_path(str(model_path)))
    return str(p / MODEL_DIR) if (p / MODEL_DIR / "config.json").is_file() else str(model_path)


def is_full_attention(results: Mapping) -> bool:
    """Whether a finetuning run's results.json describes full attention: attention "full" or unrecorded (a plain
    Hugging Face encoder), or no k. Every report tells its rows apart from there."""
    return not projects_keys(results.get("attention")) or results.get("projected_dim") is None


def chosen_on_reported(results: Mapping) -> bool:
    """Whether a finetuning run's reported model was chosen on the split it reports: recorded before the protocol
    (no ``selection``), it kept its best evaluation on that split, and that was not its last step. No table may
    use it, and a plan runs it again."""
    return "selection" not in results and results.get("best_step") not in (None, results.get("steps"))


def reported_scores(results: Mapping) -> dict[str, float]:
    """A finished finetuning or distillation run's reported scores: results.json's numeric, finite metrics (its
    reported split, scored once after training); {} for a run that reports none."""
    return {k: float(v) for k, v in (results.get("metrics") or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


# metrics.jsonl's fractions as the charts show them (the trackers' and the dashboard's): in percent, under a name
# that says so, as the run summary and compare_runs give them; metrics.jsonl and summary.json keep the fraction that
# their readers (compare_runs, the reports) take
CHARTED_PERCENT = {"mfu": "mfu_percent"}


def charted(row: Mapping) -> dict:
    """A metrics row as the trackers and the dashboard chart it: CHARTED_PERCENT's fractions in percent, renamed."""
    return {CHARTED_PERCENT.get(k, k): v * 100 if k in CHARTED_PERCENT and isinstance(v, (int, float)) else v
            for k, v in row.items()}


def reported_scalars(results: Mapping) -> dict[str, float]:
    """``reported_scores`` as the trackers and the dashboard log them: eval_<metric>, with eval_step the step of the
    model scored; {} for a run that reports none."""
    scores = {f"eval_{k}": v for k, v in reported_scores(results).items()}
    step = (results.get("reported") or {}).get("step")
    return scores | {"eval_step": float(step)} if scores and isinstance(step, int) else scores


def selection_scores(results: Mapping) -> dict[str, float]:
    """{val_<metric>: value} that chose a finished finetuning run's reported model: results.json's selection where a
    validation split held out of the training data chose it (its best value, at the step it names); {} where nothing
    was chosen (no validation_fraction, or a distillation's last model)."""
    selection = results.get("selection") or {}
    metric = selection.get("metric") or str(selection.get("rule") or "").removeprefix("best ")
    value = selection.get("value")
    if (selection.get("split") != "validation" or not isinstance(value, (int, float)) or isinstance(value, bool)
            or not metric.startswith("val_")):
        return {}
    return {metric: float(value)}


# A run whose record says running while no process holds it: it ended without recording how (SIGKILL, the OOM
# killer, a machine's reboot); the same command continues it from its last checkpoint
KILLED = "killed"
# A run whose run.json is there but does not read: how it ended, or whether it did, is unknown
DAMAGED = "damaged"


@dataclass
class Run:
    """A run directory as reports see it."""

    path: Path
    name: str                        # the run directory's name (a sweep's jobs: run_name and their settings)
    stage: str | None                # pretrain / finetune / transfer / distill (``run_stage``); None where unknown
    config: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)   # summary.json and/or results.json
    rows: list[dict] = field(default_factory=list)
    status: str | None = None        # running / complete / stopped / failed (run.json) / KILLED / DAMAGED, or None
    why: str | None = None           # a failed run's error or a stopped run's reason (run.json), its first line
    damaged: list[str] = field(default_factory=list)  # the files of its record that do not read (``read_shown``)
    info: dict = field(default_factory=dict)      # run.json: what every run records from its start, finished or not

    @property
    def device(self) -> str | None:
        """What the run computed on, in words: summary.json's (a finished run's), else its run.json environment's
        (any run that started: the GPU's name, or "CPU: <model>", as the summary words it)."""
        env = self.info.get("environment") if isinstance(self.info.get("environment"), dict) else {}
        if self.results.get("device"):
            return str(self.results["device"])
        if env.get("gpu"):
            return str(env["gpu"])
        return f"CPU: {env['cpu']}" if env.get("device") == "cpu" and env.get("cpu") else None

    @property
    def status_line(self) -> str:
        """The run's status in words, with why it ended where run.json says: 'failed (TrainingDiverged: ...)'."""
        status = self.status or "not recorded"
        return f"{status} ({self.why})" if self.why and self.status in ("failed", "stopped") else status

    @property
    def config_read(self) -> bool:
        """Whether its config.yaml read (or is missing): a comparison of settings leaves out a run whose config.yaml
        is damaged, whose empty config would differ from every other run's in every setting."""
        return CONFIG not in self.damaged

    @property
    def damage_line(self) -> str | None:
        """'config.yaml, run.json cannot be read': the files of its record the run is shown without; None for none."""
        return f"{', '.join(self.damaged)} cannot be read" if self.damaged else None

    @property
    def key_config(self) -> dict[str, Any]:
        """attention, k, sharing, model, n, task, experiment, lr, batch_size, global_batch_size, grad_accum,
        global_batch, processes, seed: what tells runs apart in a comparison.

        k and sharing are None for full attention, which has neither."""
        model = self.config.get("model") if isinstance(self.config.get("model"), dict) else {}
        task = self.config.get("task") if isinstance(self.config.get("task"), dict) else {}
        trainer = self.config.get("trainer") if isinstance(self.config.get("trainer"), dict) else {}
        r, info = self.results, self.info
        # The saved architecture: this run's model/, else the model a finetune started from (where it still is),
        # read alike for a finished run (results.json's resolved model_path) and any other (config.yaml's, as
        # finetuning resolves it)
        origin = r.get("model_path") or _started_from(self.config.get("model_path"))
        here = Path(local_path(str(origin))) if origin else None  # a record names it relative to the repository
        candidates = [self.path / MODEL_DIR] + ([here, here / MODEL_DIR] if here else [])
        saved = next((read_json(c / "config.json") for c in candidates if (c / "config.json").is_file()), {})

        def pick(*values):
            return next((v for v in values if v is not None), None)

        attention = pick(r.get("attention"), model.get("attention"), saved.get("attention"))
        linformer = attention is None or projects_keys(attention)
        return {
            "attention": attention,
            "k": pick(r.get("projected_dim"), model.get("projected_dim"), saved.get("projected_dim")) if linformer
            else None,
            "sharing": pick(r.get("sharing"), model.get("sharing"), saved.get("sharing")) if linformer else None,
            "model": pick(model.get("name"), _model_label(origin)),
            "n": pick(r.get("max_seq_len"), model.get("max_seq_len"), saved.get("max_seq_len")),
            "task": pick(r.get("task"), task.get("name")) if self.stage != "pretrain" else None,
            "experiment": self.config.get("experiment_name"),
            "lr": trainer.get("lr"),
            "batch_size": pick(r.get("batch_size"), trainer.get("batch_size")),  # per device, as it ran
            "global_batch_size": trainer.get("global_batch_size"),
            "grad_accum": trainer.get("grad_accum"),
            "global_batch": self.global_batch,
            "processes": pick(r.get("processes"), info.get("processes")),
            "seed": self.config.get("seed"),
        }

    @property
    def global_batch(self) -> int | None:
        """Sequences (examples) per optimizer step over every process: summary.json's, else worked out from the
        config and the processes the summary names (runs recorded before it held the global batch); None where
        nothing says."""
        trainer = self.config.get("trainer") if isinstance(self.config.get("trainer"), dict) else {}
        if isinstance(self.results.get("global_batch"), int):
            return self.results["global_batch"]
        if trainer.get("global_batch_size"):
            return int(trainer["global_batch_size"])
        batch, processes = trainer.get("batch_size"), self.results.get("processes") or self.info.get("processes")
        if isinstance(batch, int) and isinstance(processes, int):
            return batch * int(trainer.get("grad_accum") or 1) * processes
        return None


def run_stage(path: Path, info: Mapping, results: Mapping, config: Mapping) -> str | None:
    """A run's stage: its record's (run.json, else summary.json); for a run recorded without either, its folder in
    the outputs layout (outputs/<stage>/<run>, outputs/<stage>/multirun/<run>); None for a folder that holds no
    record of a run (a metrics.jsonl alone), whose folder names nothing."""
    recorded = info.get("stage") or results.get("stage")
    if recorded or not config:
        return recorded or None
    parent = path.parent
    return (parent.parent if parent.name == HYDRA_SWEEP_DIR else parent).name or None


def run_status(path: Path, info: Mapping) -> str | None:
    """run.json's status, KILLED where it says running while no process holds the run; None without one."""
    status = info.get("status")
    if status == "running" and RunLock(path).holder_gone():  # SIGKILL, the OOM killer, a reboot: nothing recorded it
        return KILLED
    return status


T = TypeVar("T")


def read_recorded_config(run_dir: str | Path, read: Callable[[Mapping], T], stage: str | None = None) -> T:
    """`read` (a spec's or a group's reader) of the run's own config.yaml (``read_record``), as today's settings read
    it: its retired keys dropped (``configs.without_retired``), as its identity drops them; with the run's `stage`,
    the operational keys it lacks taken from today's configs (``with_todays_operational``: a run recorded before
    logger.project existed); and a setting refused named with the file it came from, the run's record, not the
    user's command."""
    path = Path(run_dir) / CONFIG
    config = without_retired(read_record(run_dir, CONFIG))
    try:
        return read(with_todays_operational(config, stage) if stage else config)
    except ConfigError as err:
        raise ConfigError(f"{path} (the run's recorded config): {err}") from err


def with_todays_operational(config: Mapping, stage: str) -> dict:
    """A run's recorded config with each operational key it lacks (``identity``'s OPERATIONAL_KEYS: logging,
    evaluation, checkpointing, paths) as today's configs/<stage>.yaml gives it: a run recorded by an earlier version,
    before a setting that today's specs require existed, is read by them (export rebuilds its model). What the run
    computed, its identity, is only ever read as recorded: a default of today's is not what an older run trained
    with. Without today's configs (a package installed without its clone) the record as it is."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from .configs import compose
    from .runconfig.runs import OPERATIONAL_KEYS  # the specs import the model's modules (torch): not at import

    try:
        today = compose(stage)
    except ConfigError:
        return dict(config)
    recorded = flatten(config)
    out = copy.deepcopy(dict(config))  # a copy to fill, its nested groups too
    for key in flatten(OmegaConf.to_container(today, resolve=False)):
        parts = key.split(".")
        if key in recorded or key in RETIRED_KEYS or any(".".join(parts[:i]) in recorded for i in range(1, len(parts))):
            continue  # recorded, or below a key the record gives a value that is not a group
        if not any(key == k or key.startswith(k + ".") for k in OPERATIONAL_KEYS):
            continue
        try:
            value = OmegaConf.to_container(OmegaConf.create({"v": OmegaConf.select(today, key, throw_on_missing=True)}),
                                           resolve=True)["v"]
        except (OmegaConfBaseException, ConfigError):  # ??? or an interpolation of a key the stage leaves unset
            continue
        group = out
        for part in parts[:-1]:
            group = group.setdefault(part, {})
        group[parts[-1]] = value
    return out


def read_shown(run_dir: str | Path, name: str) -> tuple[dict, str | None]:
    """A file of a run's record (CONFIG, RUN, SUMMARY, RESULTS) as a report over many runs reads it (the dashboard,
    compare_runs): (its mapping, None), {} where it is missing; where it is there but does not read, ({}, why) and
    one warning naming it, once per process: the report goes on with every other run, and shows this one without
    the file, marked damaged (``Run.damaged``, the status DAMAGED for run.json), never as a run that recorded less."""
    data, why = parse_mapping(Path(run_dir) / name)
    if why:
        warn_once(f"{Path(run_dir) / name} cannot be read ({why}): the run is shown without it, marked damaged. "
                  f"{RESTORE.format(dir=run_dir)}")
    return data, why


def shown_status(path: Path) -> str | None:
    """``run_status`` from run.json as a report over many runs reads it (``read_shown``): DAMAGED where it does not
    read."""
    info, why = read_shown(path, RUN)
    return DAMAGED if why else run_status(path, info)


def load_run(path: str | Path, rows: bool = True, strict: bool = False) -> Run:
    """A run directory's config, results, metrics (without `rows`: none, for a reader that streams them with
    ``iter_metrics``), stage and status. A file of its record that does not read is a warning, and the run is shown
    without it, marked damaged (``read_shown``: the dashboard, compare_runs: every other run still shows), or with
    `strict` refused (``read_record``: a figure or table made from the run)."""
    path = Path(path).resolve()
    damaged: list[str] = []

    def read(name: str) -> dict:
        if strict:
            return read_record(path, name)
        data, why = read_shown(path, name)
        damaged.extend([name] if why else [])
        return data

    config = read(CONFIG)
    results = {**read(SUMMARY), **read(RESULTS)}
    info = read(RUN)
    name = path.name  # as the user sees it on disk, and as the dashboard's mirror names it: not run_name, which a
    # run directory given to the Python API (finetune(spec, run_dir)) need not match
    why = info.get("error") or info.get("reason")
    status = DAMAGED if RUN in damaged else run_status(path, info)
    return Run(path=path, name=name, stage=run_stage(path, info, results, config), config=config, results=results,
               rows=read_metrics(path / METRICS) if rows else [], status=status, why=why, damaged=damaged,
               info=info)
