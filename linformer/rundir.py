"""The run record: what a run directory holds, and the only code that reads or writes it.

``outputs/<stage>/<run_name>/`` holds:

- ``config.yaml``: the resolved config of the run. Its identity keys (everything but the operational keys in
  ``OPERATIONAL_KEYS``: model, data, optimisation, seed) define the run; a start whose identity differs is refused.
- ``run.json``: stage, status (``running`` / ``complete``), start and end times, and every config change a user
  allowed on resume (``trainer.allow_config_change``).
- ``metrics.jsonl``: one JSON object per logged step (``step``, ``time`` in seconds since the start, then the
  metrics the stage logs: loss, lr, grad_norm, eval_* ...).
- ``summary.json`` (every stage), ``results.json`` (finetuning), ``model/``, ``best/``, ``checkpoints/``.
- ``.lock`` while a process trains in it.

Every file is written through ``atomic_write`` / ``atomic_dir``: a reader sees the old or the new file, never half.
This module also holds the one cache-key scheme of prepared data (``cache_key``) and the rule for every output path a
user chooses (converted models, tokenizers, corpora, benchmark and report files): what made an output is recorded
(``made_by``), and only an earlier output of the same command with the same settings is replaced without asking.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import DiskFullError, OutputPathError, RunDirError
from .train.settings import OPERATIONAL_TRAINER_KEYS

log = logging.getLogger(__name__)

CONFIG = "config.yaml"
RUN = "run.json"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
RESULTS = "results.json"
PREDICTIONS = "eval_predictions.json"  # finetuning: the best evaluation's label and prediction per eval example
LOCK = ".lock"
MANIFEST = "manifest.json"                # an output directory's record (``made_by``) and its command's own facts
FILE_RECORDS = ".linformer-outputs.json"  # a folder's output files: {file name: made_by record}

# Config keys that change how a run is operated, not what it computes: they may differ between starts of a run.
# The trainer's are marked on their fields (train.settings.TrainerSettings).
OPERATIONAL_KEYS = frozenset({
    "logger", "paths", "hydra", "run_name", "experiment_name", "tokenizer_dir", "corpus_dir", "task_cache_dir",
    "max_eval_examples", "task.data_dir",
}) | OPERATIONAL_TRAINER_KEYS


# ------------------------------------------------------------------------------------------------ atomic writes
# What writers that do not raise OSError say when the disk fills: torch's zip serializer ("file write failed",
# "unexpected pos N vs M" when a short write shifts the archive) and safetensors (a Rust io error, StorageFull).
_DISK_FULL_TEXT = ("No space left", "file write failed", "unexpected pos", "StorageFull", "Disk quota exceeded")


def is_disk_full(err: BaseException) -> bool:
    """ENOSPC or EDQUOT, or a serializer's error that says the same without an errno (torch, safetensors)."""
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(err, Exception) and any(text in str(err) for text in _DISK_FULL_TEXT)


@contextlib.contextmanager
def disk_full_names(directory: str | Path) -> Iterator[None]:
    """A full disk inside this block raises DiskFullError naming `directory`."""
    try:
        yield
    except Exception as err:
        if not is_disk_full(err):
            raise
        free = shutil.disk_usage(Path(directory).parent if not Path(directory).exists() else directory).free
        raise DiskFullError(
            f"no space left on device while writing {directory} ({free / 2**20:.0f} MiB free); earlier files are "
            "intact. Free some space and run the same command again."
        ) from err


def atomic_write(path: str | Path, data: str | bytes) -> None:
    """Write `path` whole or not at all: a temporary file in the same directory, fsynced, then renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with disk_full_names(path.parent):
            with open(tmp, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: str | Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2) + "\n")


def write_yaml(path: str | Path, data: Any) -> None:
    atomic_write(path, yaml.safe_dump(data, sort_keys=False))


@contextlib.contextmanager
def atomic_dir(final: str | Path, record: Mapping[str, Any] | None = None, overwrite: bool = False) -> Iterator[Path]:
    """Yield a hidden temporary directory next to `final`; when the block succeeds it becomes `final` in one rename.

    `final` is replaced only where ``check_output_dir`` allows it (missing, empty, or an earlier output with this
    `record`), checked before the block and again before the swap, unless `overwrite`; a refusal leaves it as it
    was. `record` (``made_by``) goes into ``final/manifest.json``, over what the block wrote there. Only the
    temporary and, after the swap, the output it replaced are deleted. The temporary goes on any exception and on
    SIGTERM; one left by a killed process (SIGKILL) goes on the next call for the same path. Every file gets the
    umask's permissions (``umask_modes``).
    """
    final = Path(final)
    check_output_dir(final, record, overwrite)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(final)
    tmp, old = (final.with_name(f".{kind}-{final.name}-{os.getpid()}") for kind in ("tmp", "old"))
    _remove(tmp)
    tmp.mkdir()
    try:
        with disk_full_names(final.parent), _sigterm_unwinds(final):
            yield tmp
            if record is not None:
                write_json(tmp / MANIFEST, {**record, **read_json(tmp / MANIFEST)})
            umask_modes(tmp)
            check_output_dir(final, record, overwrite)  # another process may have written it meanwhile
            if os.path.lexists(final):
                os.replace(final, old)
            os.replace(tmp, final)
    except BaseException:
        _remove(tmp)
        if os.path.lexists(old) and not os.path.lexists(final):  # failed between the two renames
            os.replace(old, final)
        raise
    _remove(old)


def _remove(path: Path) -> None:
    """Delete a file, link or directory tree; nothing when it is missing. A link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def remove_stale_temps(final: Path) -> None:
    """Remove ``atomic_dir``'s temporaries (.tmp-/.old-<name>-<pid>) next to `final` whose process is gone."""
    for p in [*final.parent.glob(f".tmp-{final.name}-*"), *final.parent.glob(f".old-{final.name}-*")]:
        try:
            pid = int(p.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            _remove(p)


def _sigterm_unwinds(final: Path) -> contextlib.AbstractContextManager:
    """SIGTERM raises Preempted inside the block where it would otherwise end the process without unwinding (so the
    temporary is removed); a handler already installed (the trainer's, prepare_corpus's) is left in charge."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return contextlib.nullcontext()
    from .data.workers import signals_stop  # linformer.data imports this module

    return signals_stop(f"stopped by SIGTERM while writing {final}, which is as it was. Run the same command again.",
                        (signal.SIGTERM,))


def umask_modes(root: Path) -> None:
    """Give `root` and everything under it the permissions the umask grants: transformers writes weights through a
    private (0600) temporary file, and a model on a shared machine must be as readable as the rest."""
    mask = os.umask(0)
    os.umask(mask)
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod((0o777 if p.is_dir() else 0o666) & ~mask)


# ------------------------------------------------------------------------------------------------ output paths
# The rule for every path a user chooses for an output: a missing or empty path is written; an earlier output of the
# same command with the same settings is rebuilt; anything else is refused, naming the path and what holds it,
# unless the user passes the command's overwrite flag. What made an output is its record (``made_by``): an output
# directory carries it in its MANIFEST, the output files of a folder in that folder's FILE_RECORDS.


def made_by(command: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The record of an output: the command, its settings (keyed as its config names them, so a refusal names the
    key to change) and the package version. Settings are stored as JSON gives them back."""
    from . import __version__  # at call time: the package imports this module before it sets its version

    return {"command": command, "version": __version__,
            "settings": json.loads(json.dumps(dict(settings), default=str))}


def _other_output(recorded: Mapping, record: Mapping) -> str | None:
    """What `recorded` is, when it is not an output `record`'s command would rebuild; None when it is."""
    if recorded.get("command") != record["command"]:
        return f"the output of {recorded.get('command') or 'another program'}"
    a, b = flatten(recorded.get("settings") or {}), flatten(record["settings"])
    diff = "; ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
    return f"an earlier {record['command']} output with other settings ({diff})" if diff else None


def _listing(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def check_output_dir(path: str | Path, record: Mapping[str, Any] | None, overwrite: bool = False,
                     flag: str = "overwrite=true") -> None:
    """The output rule for a directory about to be (re)built by `record`'s command (None: by a caller that writes
    only new directories). Raises OutputPathError naming the path, what holds it and `flag`."""
    path = Path(path)
    if overwrite or not os.path.lexists(path):
        return
    if not path.is_dir():
        what = "is a regular file" if path.is_file() else "is not a directory"
    elif not (names := sorted(p.name for p in path.iterdir())):
        return
    elif record is not None and read_json(path / MANIFEST).get("command"):
        other = _other_output(read_json(path / MANIFEST), record)
        if other is None:
            return
        what = f"holds {other}"
    else:
        what = f"is a directory with other content ({_listing(names)})"
    raise OutputPathError(f"{path} {what}: choose another output path, or pass {flag} to replace it.")


def check_output_files(paths: list[str | Path], record: Mapping[str, Any], overwrite: bool = False,
                       flag: str = "--overwrite") -> None:
    """The output rule for files about to be written by `record`'s command into their folders."""
    for path in map(Path, paths):
        if os.path.lexists(path.parent) and not path.parent.is_dir():
            raise OutputPathError(f"{path.parent} is a regular file, not a folder for {path.name}: choose another "
                                  "output path.")
        if not os.path.lexists(path):
            continue
        if path.is_dir():  # a file never replaces a directory, overwrite or not
            raise OutputPathError(f"{path} is a directory: choose another output path.")
        if overwrite:
            continue
        recorded = read_json(path.parent / FILE_RECORDS).get(path.name)
        other = _other_output(recorded, record) if isinstance(recorded, dict) else \
            f"a file {record['command']} did not write"
        if other is not None:
            raise OutputPathError(f"{path} is {other}: choose another output path, or pass {flag} to replace it.")


def record_output_files(paths: list[str | Path], record: Mapping[str, Any]) -> None:
    """Record `record` as what wrote each of `paths`, in its folder's FILE_RECORDS."""
    folders: dict[Path, list[str]] = {}
    for path in map(Path, paths):
        folders.setdefault(path.parent, []).append(path.name)
    for folder, names in folders.items():
        records = read_json(folder / FILE_RECORDS)
        write_json(folder / FILE_RECORDS, {**records, **{name: dict(record) for name in names}})


@contextlib.contextmanager
def output_files(paths: list[str | Path], record: Mapping[str, Any], overwrite: bool = False,
                 flag: str = "--overwrite") -> Iterator[None]:
    """Check `paths` (``check_output_files``) before the block, which writes them, and record those written after."""
    check_output_files(paths, record, overwrite, flag)
    yield
    record_output_files([p for p in map(Path, paths) if p.is_file()], record)


# ------------------------------------------------------------------------------------------------ cache keys
def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def cache_key(options: Mapping[str, Any], files: list[str | Path] = ()) -> str:
    """The one cache key of prepared data: a hash of the options and of the content (sha256) of every input file.

    Content, not mtimes: a file copied or touched keeps its key, a file edited in place gets a new one.
    """
    payload = {"options": dict(options), "files": [sha256_file(f) for f in files]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ metrics
def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl. A torn line (a run still writing, or killed mid-write) and blank lines are
    skipped with a warning."""
    rows = []
    path = Path(path)
    if not path.is_file():
        return rows
    for i, line in enumerate(path.read_text(errors="replace").splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            log.warning("%s:%d is not JSON (a run still writing, or killed mid-line); skipped", path, i + 1)
            continue
        if isinstance(row, dict) and "step" in row:
            rows.append(row)
    return rows


class MetricsWriter:
    """Appends rows to metrics.jsonl. On resume the rows after the checkpoint's step, and any torn line, are
    dropped first (with a warning for a torn line), so the steps logged again replace rather than duplicate."""

    def __init__(self, run_dir: str | Path, resume_step: int | None):
        self.path = Path(run_dir) / METRICS
        self.start = time.time()
        if resume_step is None:
            atomic_write(self.path, "")
        elif self.path.exists():
            kept = [r for r in read_metrics(self.path) if int(r["step"]) <= resume_step]
            atomic_write(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def log(self, step: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {"step": int(step), "time": round(time.time() - self.start, 3)}
        row.update({k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                    for k, v in metrics.items() if v is not None})
        with disk_full_names(self.path.parent), self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        return row


# ------------------------------------------------------------------------------------------------ identity
def flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> {'a.b': value}."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def identity(config: Mapping) -> dict[str, Any]:
    """The settings that define a run: the flattened config without the operational keys."""

    def operational(key: str) -> bool:
        return any(key == k or key.startswith(k + ".") for k in OPERATIONAL_KEYS)

    return {k: v for k, v in flatten(config).items() if not operational(k)}


# Model keys that change a weight's shape (or which weights exist): a run cannot continue across them.
SHAPE_KEYS = frozenset({"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                        "max_seq_len", "projected_dim", "sharing", "projection", "attention", "type_vocab_size",
                        "max_position_embeddings"})


def is_shape_key(key: str) -> bool:
    return key.startswith("model.") and key.split(".", 1)[1] in SHAPE_KEYS


# Identity keys the run record gained later: a run recorded without one is not told apart by it.
RECORDED_SINCE = frozenset({"corpus_cache_key"})
# Identity keys a stage once recorded though none of its code read them (transfer inherited pretraining's masking
# rate): a run requested without one is not told apart by it.
RECORDED_UNREAD = frozenset({"trainer.mlm_probability"})


def identity_diff(recorded: Mapping, requested: Mapping) -> dict[str, tuple[Any, Any]]:
    """{key: (recorded value, requested value)} for every identity key that differs (missing = None)."""
    a, b = identity(recorded), identity(requested)
    keys = sorted((set(a) | set(b)) - (RECORDED_SINCE - set(a)) - (RECORDED_UNREAD - set(b)))
    return {k: (a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)}


# ------------------------------------------------------------------------------------------------ lock
def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """``<run>/.lock``: one live process per run directory. A lock left by a dead process on this host is taken
    over; one held by a live process (or by another host, which cannot be checked) refuses the start."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / LOCK
        self.held = False

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:  # being written by its creator this instant, or torn: look again
                    time.sleep(0.05)
                    holder = self._holder() or {}
                pid, host = holder.get("pid"), holder.get("host")
                if host == me["host"] and isinstance(pid, int) and not pid_alive(pid):
                    log.warning("taking over the stale lock of process %d (no longer running) in %s", pid,
                                self.path.parent)
                    self.path.unlink(missing_ok=True)
                    continue
                raise RunDirError(
                    f"{self.path.parent} is in use by process {pid} on {host} (since {holder.get('since')}): wait for "
                    f"it to finish, or choose another run_name. If that process is gone, delete {self.path}."
                ) from None
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(me))
            self.held = True
            return
        raise RunDirError(f"could not take the lock {self.path}: another process keeps taking it.")

    def _holder(self) -> dict | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    def release(self) -> None:
        if self.held:
            holder = self._holder() or {}
            if holder.get("pid") == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False


# ------------------------------------------------------------------------------------------------ the record
def _read_mapping(path: Path, parse, error: type[Exception]) -> dict:
    """The mapping in a YAML or JSON file; {} when it is missing, unparsable (logged) or not a mapping."""
    if not path.is_file():
        return {}
    try:
        data = parse(path.read_text())
    except error as e:
        log.warning("%s: %s", path, e)
        return {}
    return data if isinstance(data, dict) else {}


def read_yaml(path: str | Path) -> dict:
    return _read_mapping(Path(path), yaml.safe_load, yaml.YAMLError)


def read_json(path: str | Path) -> dict:
    return _read_mapping(Path(path), json.loads, json.JSONDecodeError)


class RunRecord:
    """Read and write one run directory. Training claims it (lock + identity check) before writing anything."""

    def __init__(self, run_dir: str | Path, stage: str):
        self.dir = Path(run_dir)
        self.stage = stage
        self.lock = RunLock(self.dir)
        self.allowed_changes: dict[str, tuple[Any, Any]] = {}  # set by claim(); recorded by start()

    # readers
    def config(self) -> dict:
        return read_yaml(self.dir / CONFIG)

    def info(self) -> dict:
        return read_json(self.dir / RUN)

    def summary(self) -> dict:
        return read_json(self.dir / SUMMARY)

    def results(self) -> dict:
        return read_json(self.dir / RESULTS)

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
            recorded = self.config()
            if not recorded:
                return "new"
            diff = identity_diff(recorded, config)
            shaped = {k: v for k, v in diff.items() if is_shape_key(k)}
            if shaped:  # its checkpoint's tensors have the recorded shapes: nothing can continue from them
                changes = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in shaped.items())
                raise RunDirError(
                    f"{self.dir} holds a run of another architecture ({changes}), whose weights cannot take the new "
                    "shape: start afresh under another run_name."
                )
            allowed = set(diff) if allow_change is True else set(allow_change or [])
            refused = {k: v for k, v in diff.items() if k not in allowed}
            if refused:
                changes = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in refused.items())
                keys = ",".join(refused)
                raise RunDirError(
                    f"{self.dir} holds a run with other settings ({changes}). Choose another run_name, or continue "
                    f"this run with these settings by adding trainer.allow_config_change=[{keys}]."
                )
            self.allowed_changes = {k: v for k, v in diff.items() if k in allowed}
            return "complete" if self.is_complete() and not self.allowed_changes else "continue"
        except BaseException:
            self.lock.release()
            raise

    def start(self, config: Mapping, step: int) -> None:
        """Record the config and status `running` (after set-up succeeded, so a failed start changes nothing)."""
        info = self.info() or {"stage": self.stage, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "changes": []}
        for key, (old, new) in self.allowed_changes.items():
            info["changes"].append({"step": step, "key": key, "from": old, "to": new})
            log.warning("%s changes at step %d: %r -> %r (trainer.allow_config_change)", key, step, old, new)
        info.update(status="running", started=time.strftime("%Y-%m-%d %H:%M:%S"))
        write_yaml(self.dir / CONFIG, dict(config))
        write_json(self.dir / RUN, info)

    def finish(self, summary: Mapping, results: Mapping | None = None) -> None:
        if results is not None:
            write_json(self.dir / RESULTS, dict(results))
        write_json(self.dir / SUMMARY, dict(summary))
        info = self.info()
        info.update(status="complete", finished=time.strftime("%Y-%m-%d %H:%M:%S"))
        write_json(self.dir / RUN, info)

    def release(self) -> None:
        self.lock.release()


# ------------------------------------------------------------------------------------------------ reading runs
def find_runs(paths: list[str | Path]) -> list[Path]:
    """Run directories at or under each path (a run dir itself, or a folder of them), sorted, without duplicates.

    Hidden directories (outputs/.dashboard), checkpoints and wandb folders are not searched."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if (p / METRICS).is_file():
            found.add(p.resolve())
            continue
        if p.is_dir():
            for m in p.rglob(METRICS):
                rel = m.relative_to(p).parts[:-1]
                if any(part.startswith(".") or part in ("checkpoints", "wandb") for part in rel):
                    continue
                found.add(m.parent.resolve())
    return sorted(found)


def _model_label(path: str | None) -> str | None:
    """A finetuned model's origin, shortly: .../pretrain/demo/model -> demo/model."""
    if not path:
        return None
    p = Path(str(path))
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


@dataclass
class Run:
    """A run directory as reports see it."""

    path: Path
    name: str                        # run_name from the config, else the directory name
    stage: str                       # pretrain / finetune / benchmark / the parent directory's name
    config: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)   # summary.json and/or results.json
    rows: list[dict] = field(default_factory=list)
    status: str | None = None        # running / complete (run.json), None for runs without one

    @property
    def key_config(self) -> dict[str, Any]:
        """attention, k, sharing, model, n, task, experiment: what tells runs apart in a comparison.

        k and sharing are None for full attention, which has neither."""
        model = self.config.get("model") if isinstance(self.config.get("model"), dict) else {}
        task = self.config.get("task") if isinstance(self.config.get("task"), dict) else {}
        r = self.results
        # The saved architecture: this run's model/, else the model a finetune started from (where it still is).
        origin = r.get("model_path") or self.config.get("model_path")
        candidates = [self.path / "model"] + ([Path(str(origin)), Path(str(origin)) / "model"] if origin else [])
        saved = next((read_json(c / "config.json") for c in candidates if (c / "config.json").is_file()), {})

        def pick(*values):
            return next((v for v in values if v is not None), None)

        attention = pick(r.get("attention"), model.get("attention"), saved.get("attention"))
        linformer = attention != "full"
        return {
            "attention": attention,
            "k": pick(r.get("projected_dim"), model.get("projected_dim"), saved.get("projected_dim")) if linformer
            else None,
            "sharing": pick(r.get("sharing"), model.get("sharing"), saved.get("sharing")) if linformer else None,
            "model": pick(model.get("name"), _model_label(pick(r.get("model_path"), self.config.get("model_path")))),
            "n": pick(r.get("max_seq_len"), model.get("max_seq_len"), saved.get("max_seq_len")),
            "task": pick(r.get("task"), task.get("name")) if self.stage != "pretrain" else None,
            "experiment": self.config.get("experiment_name"),
        }


def load_run(path: str | Path, root: str | Path | None = None) -> Run:
    """A run directory's config, results and metrics. `stage` is the first directory under `root` (outputs/)."""
    path = Path(path).resolve()
    config = read_yaml(path / CONFIG)
    results = {**read_json(path / SUMMARY), **read_json(path / RESULTS)}
    info = read_json(path / RUN)
    stage = info.get("stage") or path.parent.name
    if root is not None:
        with contextlib.suppress(ValueError, IndexError):
            stage = path.relative_to(Path(root).resolve()).parts[0]
    name = str(config.get("run_name") or path.name)
    return Run(path=path, name=name, stage=stage, config=config, results=results, rows=read_metrics(path / METRICS),
               status=info.get("status"))
