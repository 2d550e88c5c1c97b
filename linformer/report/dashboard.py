"""The offline dashboard: mirror every run's metrics.jsonl into TensorBoard event files, then serve TensorBoard.

Most runs log only metrics.jsonl (`logger=none` is the default), so the dashboard does not depend on the run's
tracker: `mirror_all` writes `<logdir>/<stage>/<run>/` event files from each `outputs/<stage>/<run>/metrics.jsonl`.
Mirroring is incremental and idempotent: a small state file remembers the byte offset of metrics.jsonl mirrored
so far, its last line, and the file's size and mtime at that pass; a file whose size and mtime did not change is not
opened, and only the complete lines past the offset are read and appended to the run's metrics event file
(TensorBoard reads what a file gains). A metrics.jsonl whose mirrored rows changed (a run started over, or resumed from an
earlier checkpoint: its last mirrored line no longer ends at the offset) is mirrored again from scratch. A pass
stopped (Ctrl-C, SIGTERM) or failing half-way removes the run's mirror; the state says a pass is writing before its
first event does, so one killed outright (SIGKILL) leaves a state from which the next pass mirrors that run again from
scratch: never a second copy of its points, nor a mirror cut short. `serve` re-mirrors every few seconds while
TensorBoard runs, so live runs update in the browser; `mirror_once` mirrors once. Both stop on Ctrl-C, SIGTERM or
SIGHUP as every command does, with a `stopped:` line and 128 + the signal (130, 143, 129), TensorBoard with them;
a dashboard killed outright (SIGKILL, the out-of-memory killer) has the kernel send its TensorBoard SIGTERM (Linux),
which frees the port.

Tags group the metrics as TensorBoard's sections: train/{loss,ppl,lr,grad_norm,epoch,tokens},
perf/{tokens_per_s,mfu_percent} (MFU in percent, as the run summary gives it; metrics.jsonl's mfu is a fraction:
rundir.charted), val/{loss,ppl,accuracy} and eval/{accuracy,f1}; anything else keeps its own name. The same tag means the same thing in every run, so runs of different stages and experiments overlay on one chart. A finished
finetuning or distillation run's reported scores (results.json, scored once after training) are mirrored where the
trainer logs them to its trackers (as eval_<metric> and eval_step there): eval/<metric> at the run's last step,
eval/step the step of the model scored; where a validation split held out of the training data chose the reported
model (results.json's selection), the value that chose it is val/<metric>_chosen at the step chosen (val/<metric> is
the last value logged, as the HPARAMS tab shows each tag's last value). The HPARAMS tab lists them beside each run's
stage, status (run.json: running, complete, failed, stopped, killed), attention, k, sharing, lr, batch and seed, and
the settings in which the mirrored runs of its stage differ (``compare.differing_settings``: data.max_train_examples,
validation_fraction, trainer.epochs, ... as compare_runs' table names them; blank where a run leaves one unset),
which the run's `config` text also gives. A run's stage is its record's (run.json), never the folder under --outputs,
so the runs of one stage overlay whatever folder is served. That summary (the config text and the HPARAMS session)
is a small event file of its own beside the metrics event file, named to sort before it: a run whose status changes
(it ends, or starts again), or whose differing settings change (a sweep's run added or removed), gets a new summary
file in place of the old, its metrics event file and offset kept, so the summary on disk is never a stale one and a
change costs one small file a run, not every row again. TensorBoard is started with --reload_multifile=true: its
legacy loader (--load_fast=false) otherwise follows only a run's last file by name; its data server reads every
file. A TensorBoard already serving keeps the HPARAMS session it read first for a run (it reads a run's session
summary once, whatever file replaces it); one started afterwards (the dashboard started again) shows the new.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..cli import run_from_a_script
from ..data.workers import dies_with_this_process
from ..errors import ConfigError, DataError
from ..files.atomic import atomic_write, write_json
from ..files.hashing import file_state
from ..files.mappings import read_json
from ..files.outputs import MANIFEST, check_output_dir, made_by
from ..files.runs import METRICS, MODEL_DIR, RESULTS
from ..files.tables import table_lines
from ..optional import import_needed
from ..progress import progress_over
from ..rundir import (
    RECORD_FILES,
    Run,
    charted,
    find_runs,
    identity,
    load_run,
    metric_lines,
    read_shown,
    reported_scalars,
    selection_scores,
    shown_status,
)
from ..signals import child_status, exit_words, signals_stop
from .compare import differing_settings

log = logging.getLogger(__name__)

STATE = ".mirror.json"
VERSION = 8   # of the tag scheme and state file: a mirror written with another version is rewritten from scratch
# A run's mirror is two event files of one stem: <stem>.metrics, appended to pass after pass, and
# <stem>.config-<n>, its summary, replaced whole when the run's status or differing settings change
METRICS_SUFFIX, SUMMARY_SUFFIX = "metrics", "config"
SUMMARY_STAGING = ".summary.staging"  # a new summary is written whole here, out of TensorBoard's view, then renamed
TRAIN_KEYS = {"loss", "ppl", "lr", "grad_norm", "epoch", "tokens"}
PERF_KEYS = {"tokens_per_s", "tokens_per_s_avg", "mfu_percent"}
# Identity keys whose values Run.key_config shows already, under its own names: a run's summary lists them once
SHOWN_BY_KEY_CONFIG = {"trainer.lr": "lr", "seed": "seed", "trainer.batch_size": "batch_size",
                       "trainer.global_batch_size": "global_batch_size", "trainer.grad_accum": "grad_accum"}
CHOSEN = "_chosen"  # the tag of the validation value that chose a run's model: val/<metric> + CHOSEN


def tag_for(key: str, stage: str | None = "pretrain") -> str:
    """metrics.jsonl key -> TensorBoard tag (section/name).

    Training metrics of other stages get their stage as section (finetune/loss): a classification loss is not
    an MLM loss, and on one chart with it would only squash both. Those of a run of no known stage keep their own
    name."""
    for prefix in ("val", "eval"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1:]}"
    if key in TRAIN_KEYS:
        if stage == "pretrain":
            return f"train/{key}"
        return f"{stage}/{key}" if stage else key
    if key in PERF_KEYS:
        return f"perf/{key}"
    return key


def _scalars(row: dict, stage: str) -> dict[str, float]:
    return {
        tag_for(k, stage): float(v)
        for k, v in charted(row).items()
        if k not in ("step", "time") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _settings(run: Run, settings: Sequence[str]) -> dict:
    """The run's values of `settings` (identity keys: ``differing_settings`` of the mirrored runs) that its key_config
    does not show already; a key the run leaves unset (None) or lacks (another stage's) is left out."""
    values = identity(run.config)
    return {k: values[k] for k in settings if k not in SHOWN_BY_KEY_CONFIG and values.get(k) is not None}


def _shown_config(run: Run, settings: Sequence[str] = ()) -> dict:
    """key_config and the run's values of `settings`, None left out, where `model` is the config's model name
    ("tiny") alone: a run that names none (a finetune, a transfer) shows the model it started from as `start` (its
    run's name: .../<run>/model -> <run>) and, where recorded, the first 12 hex digits of the start weights'
    sha256, so that one HPARAMS column never mixes config names with paths."""
    values = {k: v for k, v in {**run.key_config, **_settings(run, settings)}.items() if v is not None}
    model = run.config.get("model") if isinstance(run.config.get("model"), dict) else {}
    if model.get("name") is None and "model" in values:
        values["start"] = str(values.pop("model")).removesuffix(f"/{MODEL_DIR}")
    if run.results.get("start_weights_sha256"):
        values["start_weights_sha256"] = str(run.results["start_weights_sha256"])[:12]
    return values


def _config_markdown(run: Run, settings: Sequence[str] = ()) -> str:
    rows = [("stage", run.stage or "not recorded"), ("status", run.status_line),
            *([("record", f"{run.damage_line}: shown without them")] if run.damaged else []),
            *_shown_config(run, settings).items(), ("run dir", run.path)]
    return "\n".join(table_lines(["key", "value"], rows))


def _write_hparams(records, run: Run, walltime: float, settings: Sequence[str] = ()) -> None:
    """A session-start summary so the HPARAMS tab lists stage, status, attention, k, sharing, lr, ... and the run's
    values of `settings` per run (best effort). TensorBoard's HPARAMS tab, given no experiment summary, makes its
    columns of every key any run's session names, and its metric columns of each tag's last value."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from torch.utils.tensorboard.summary import hparams
    except ImportError:  # pragma: no cover
        return
    hp = {"stage": run.stage or "", "status": run.status or "",
          **{k: (v if isinstance(v, (int, float, str, bool)) else str(v))
             for k, v in _shown_config(run, settings).items()}}
    try:
        _, ssi, _ = hparams(hp, {})
        _write_event(records, Event(wall_time=walltime, summary=ssi))
    except Exception as e:
        log.debug("hparams for %s skipped: %s", run.path, e)


def mirror_run(run_dir: str | Path, out_dir: str | Path, settings: Sequence[str] = ()) -> int:
    """Mirror the rows of run_dir/metrics.jsonl not yet mirrored into the run's event file under out_dir; its
    summary (the config text, the HPARAMS session, in a small event file of its own) names its values of `settings`
    too (identity keys, as ``mirror_all`` gives the settings in which the mirrored runs differ).

    Only the bytes appended since the last pass are read (the state's `offset`); a file whose size and mtime did
    not change is not opened. A run whose status or differing settings changed gets a new summary file; its rows
    are not written again. Returns the number of rows written (0 when nothing changed: calling it again is a
    no-op)."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    src = run_dir / METRICS
    state_path = out_dir / STATE
    state = read_json(state_path)
    status = shown_status(run_dir.resolve())
    if state.get("writing"):  # a pass cut short after some of its events: which of them are written is unknown
        log.info("the mirror of %s was interrupted: mirroring it again", run_dir)
        state = _forget(out_dir)
    if state and not _continues(state, src):
        log.info("%s was rewritten, moved or mirrored by another version: mirroring it again", src)
        state = _forget(out_dir)
    settings = list(settings)
    run: Run | None = None if state else load_run(run_dir, rows=False)  # once, on a run's first mirror
    stage = state["stage"] if state else run.stage
    reported = reported_tags(run_dir, stage)
    if state.get("reported") and state["reported"] != reported:  # results.json rewritten: no stale point left
        log.info("%s changed: mirroring %s again", run_dir / RESULTS, run_dir)
        state = _forget(out_dir)
    add_reported = reported is not None and state.get("reported") != reported
    # the run ended or started again, or a sweep's run was added or removed: its summary must say so
    new_summary = not state or state.get("status") != status or state.get("settings") != settings
    seen = _file_stamp(src)
    if state and state.get("seen") == seen and not add_reported and not new_summary:  # nothing changed
        return 0
    if not state:
        state = {"version": VERSION, "source": str(src.resolve()), "stage": stage,
                 "base_walltime": _base_walltime(src), "events": _event_file_name(), "offset": 0, "rows": 0}
    _drop_unnamed_events(out_dir, state)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if new_summary:
            state = _replace_summary(out_dir, state, run or load_run(run_dir, rows=False), status, settings)
        if state.get("seen") == seen and not add_reported:  # only the summary changed: the rows are as mirrored
            return 0
        write_json(state_path, {**state, "writing": True})  # before the first row's event: see the module doc
        written, offset, last = _append_events(src, out_dir, state, reported if add_reported else None)
        write_json(state_path, {**state, "rows": int(state["rows"]) + written, "offset": offset, "last": last,
                                "seen": seen, "reported": reported})
    except BaseException:  # a stop (Ctrl-C, SIGTERM) or a failure mid-pass: no half-written mirror is left
        _forget(out_dir)
        raise
    return written + int(add_reported)


def _replace_summary(out_dir: Path, state: dict, run: Run, status: str, settings: list[str]) -> dict:
    """Write the run's summary (the config text and the HPARAMS session, naming `status` and its values of
    `settings`) as a new small event file beside its metrics' one, record it in the state, and remove the summary it
    replaces; returns the new state. The metrics' event file and its offset are kept: a changed summary costs one
    small file, not every row again.

    The file is written whole under a name TensorBoard does not read (``atomic_write``), then renamed into view: a
    TensorBoard reading the folder meanwhile never sees half of it. A pass cut short after the rename leaves a
    summary file the state does not name, which the next pass removes (``_drop_unnamed_events``), never two."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer.record_writer import RecordWriter
    from torch.utils.tensorboard.summary import text

    base, buffer = float(state["base_walltime"]), io.BytesIO()
    records = RecordWriter(buffer)
    _write_event(records, Event(wall_time=time.time(), file_version="brain.Event:2"))
    _write_event(records, Event(wall_time=base, step=0, summary=text("config", _config_markdown(run, settings))))
    _write_hparams(records, run, base, settings)
    count = int(state.get("summaries", 0)) + 1
    name = _summary_file_name(state["events"], count)
    atomic_write(out_dir / SUMMARY_STAGING, buffer.getvalue())
    os.replace(out_dir / SUMMARY_STAGING, out_dir / name)
    old = state.get("summary")
    state = {**state, "summary": name, "summaries": count, "status": status, "settings": settings}
    write_json(out_dir / STATE, state)
    if old:
        (out_dir / old).unlink(missing_ok=True)
    return state


def _append_events(src: Path, out_dir: Path, state: dict, reported: dict | None) -> tuple[int, int, str | None]:
    """Append one pass's events to the run's metrics event file: to a new file its header; then a point per
    complete row past the state's offset, and `reported` (``reported_tags``) where given. Returns (rows read, the
    offset after them, the last of them)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    base, stage = float(state["base_walltime"]), state["stage"]
    written, offset, last = 0, int(state["offset"]), state.get("last")
    # one event file per mirror of the run, appended to pass after pass (TensorBoard reads what a file gains)
    with (out_dir / state["events"]).open("ab") as f:
        records = RecordWriter(f)
        if not os.fstat(f.fileno()).st_size:
            _write_event(records, Event(wall_time=time.time(), file_version="brain.Event:2"))
        for row, end, line in _appended(src, offset):
            offset, last = end, line
            values = [Summary.Value(tag=tag, simple_value=value) for tag, value in _scalars(row, stage).items()
                      if not math.isnan(value)]
            if values:
                _write_event(records, Event(wall_time=base + _seconds(row.get("time")), step=row["step"],
                                            summary=Summary(value=values)))
            written += 1
        if reported is not None:
            for scalars, step in ((reported["scalars"], reported["step"]), (reported["chosen"], reported["chosen_step"])):
                values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scalars.items()]
                if values:
                    _write_event(records, Event(wall_time=base + reported["time"], step=step,
                                                summary=Summary(value=values)))
        f.flush()
    return written, offset, last


def _seconds(time_: object) -> float:
    """A row's `time` (seconds since the run started), 0 where it is no number (a hand-edited or another logger's
    row): a point is drawn at its step whatever its time says."""
    return float(time_) if isinstance(time_, (int, float)) and not isinstance(time_, bool) else 0.0


def _write_event(records, event) -> None:
    """One Event proto (tensorboard's) as one record of an event file (a RecordWriter over it)."""
    records.write(event.SerializeToString())


def _event_file_name() -> str:
    """A new metrics event file's name: TensorBoard reads the files whose names hold "tfevents", in the order of their
    names (``_summary_file_name``)."""
    return f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{METRICS_SUFFIX}"


def _summary_file_name(events: str, count: int) -> str:
    """The name of a run's `count`-th summary event file beside its metrics event file `events`: the same stem, so
    that every summary sorts before the metrics file. TensorBoard's legacy loader (--load_fast=false, and where its
    data server does not run) follows only the last file by name unless --reload_multifile is given, and a summary
    sorting after the metrics file would stop it reading the rows appended to that file."""
    return f"{events.removesuffix(METRICS_SUFFIX)}{SUMMARY_SUFFIX}-{count}"


def _file_stamp(src: Path) -> list[int] | None:
    """[size, mtime in ns] of `src`: a file with the same stamp as at the last pass holds nothing new. Not
    ``hashing.file_state``: the stamp is kept in the mirror's state file for later processes, and the metrics file
    grows in place, read on from a byte offset, so its inode tells nothing a pass reads by."""
    try:
        stat = src.stat()
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def _appended(src: Path, offset: int) -> Iterator[tuple[dict, int, str]]:
    """(row, the byte offset after its line, the line) for each complete line of `src` from byte `offset`: a line
    without its newline is a row still being written, read on a later pass (``rundir.metric_lines``)."""
    return metric_lines(src, offset, whole_lines=True)


def _base_walltime(src: Path) -> float:
    """The wall time of step 0: the file's last change minus the time of its last row, so TensorBoard's "relative"
    axis shows seconds since the run started (`time` adds up a resumed run's attempts). The file's tail is read,
    not the file."""
    if not src.is_file():
        return time.time()
    size = src.stat().st_size
    with src.open("rb") as f:
        f.seek(max(0, size - 65536))
        tail = f.read().decode(errors="replace").splitlines()
    last_time = 0.0
    for line in reversed(tail):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("time"), (int, float)):
            last_time = float(row["time"])
            break
    return src.stat().st_mtime - last_time


def _drop_unnamed_events(out_dir: Path, state: dict) -> None:
    """Remove the event files of the run's mirror folder that its state does not name: all of them where it has no
    state (a pass of an earlier version cut short before it wrote one: a first mirror writes every row, and beside
    them these would be a second copy), a summary a pass cut short renamed into place without recording it, and a
    summary's staging copy."""
    named = {state.get("events"), state.get("summary")} if (out_dir / STATE).is_file() else set()
    for f in [*out_dir.glob("events.out.tfevents.*"), out_dir / SUMMARY_STAGING]:
        if f.name not in named:
            f.unlink(missing_ok=True)


def _forget(out_dir: Path) -> dict:
    """Remove a run's mirror, to be written again from scratch; returns the empty state. The state goes first: a
    removal cut short leaves event files without one, which the next pass removes (``_drop_unnamed_events``),
    never a state whose events are gone."""
    with contextlib.suppress(OSError):  # a state that is no file (a folder in its place) goes with the rest
        (out_dir / STATE).unlink(missing_ok=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {}


def reported_tags(run_dir: Path, stage: str | None) -> dict | None:
    """What the run reports (results.json's metrics, scored once after training) where the trainer logs it to its
    trackers (eval_<metric>, eval_step), in the dashboard's sections: {"scalars": {eval/<metric>: value, eval/step:
    the step of the model scored}, "step": the run's last step, "time": its seconds, "chosen": {val/<metric>_chosen:
    the validation value that chose the model (``rundir.selection_scores``)} or {}, "chosen_step": the step it
    chose}; None before the run has finished or for a run that reports no scores."""
    results, _ = read_shown(run_dir, RESULTS)
    scores = reported_scalars(results)
    if not scores or not isinstance(results.get("steps"), int):
        return None
    chosen_step = (results.get("selection") or {}).get("step")
    chosen = selection_scores(results) if isinstance(chosen_step, int) else {}
    return {"scalars": {tag_for(k, stage): v for k, v in scores.items()}, "step": results["steps"],
            "time": float(results.get("wall_time_s") or 0.0),
            "chosen": {tag_for(k, stage) + CHOSEN: v for k, v in chosen.items()}, "chosen_step": chosen_step}


def _continues(state: dict, src: Path) -> bool:
    """Whether `src` extends what `state` mirrored: same file, same tag scheme, and the last mirrored line still
    ending at the mirrored offset (a run that started over or resumed from an earlier checkpoint rewrites
    metrics.jsonl). Reads that one line, not the file."""
    if state.get("version") != VERSION or state.get("source") != str(src.resolve()):
        return False
    offset, last = int(state.get("offset", 0)), state.get("last")
    if offset == 0 or last is None:
        return True
    try:
        with src.open("rb") as f:
            tail = last.encode() + b"\n"
            f.seek(max(0, offset - len(tail)))
            return f.read(len(tail)).endswith(tail) and f.tell() == offset
    except OSError:
        return False


def claim_logdir(outputs: str | Path, logdir: str | Path | None = None, overwrite: bool = False) -> Path:
    """The event-file folder for the runs under `outputs` (default <outputs>/.dashboard), under the output rule: a new
    or empty folder, one this dashboard mirrors `outputs` into (its MANIFEST), or one holding only mirrored event
    files (an earlier version's, without a MANIFEST); anything else is refused naming it, unless `overwrite`."""
    # the event files need tensorboard: said before the folder is claimed, so that a refusal leaves nothing behind
    import_needed("torch.utils.tensorboard", "the dashboard (its TensorBoard event files)", "tensorboard")
    logdir = Path(logdir) if logdir is not None else Path(outputs) / ".dashboard"
    record = made_by("dashboard", {"outputs": str(Path(outputs).resolve())})
    recorded = read_json(logdir / MANIFEST)
    if recorded == record:  # already ours: the live dashboard re-mirrors every few seconds
        return logdir
    if recorded.get("command") == "dashboard" and _inside(logdir, outputs):
        # a mirror kept inside the outputs it mirrors (<outputs>/.dashboard) moved or was copied with them: the
        # outputs path it records is where they were; its runs are keyed by their paths under outputs, which a move
        # keeps, so it is this dashboard's and goes on
        write_json(logdir / MANIFEST, record)
        return logdir
    if not _only_mirrors(logdir):
        check_output_dir(logdir, record, overwrite, flag="--overwrite", reads=[outputs],
                         key="--logdir" if run_from_a_script() else "logdir=")
    logdir.mkdir(parents=True, exist_ok=True)
    write_json(logdir / MANIFEST, record)
    return logdir


def _inside(logdir: Path, outputs: str | Path) -> bool:
    """Whether `logdir` is the dashboard's own folder of `outputs` (<outputs>/.dashboard), which moves with them."""
    return logdir.name == ".dashboard" and logdir.resolve().parent == Path(outputs).resolve()


def _only_mirrors(logdir: Path) -> bool:
    files = [p for p in logdir.rglob("*") if not p.is_dir()] if logdir.is_dir() else []
    return bool(files) and all(p.name == STATE or p.name.startswith("events.out.tfevents.") for p in files)


def mirror_all(outputs: str | Path, logdir: str | Path | None = None, strict: bool = False,
               overwrite: bool = False) -> dict[str, int]:
    """Mirror every run under `outputs` into `logdir` (``claim_logdir``), keyed by path under outputs.

    Returns {relative run path: rows written this call}. A run that cannot be mirrored is a warning (the live
    dashboard keeps serving the others), or with `strict` a DataError naming them once the others are mirrored."""
    outputs = Path(outputs)
    logdir = claim_logdir(outputs, logdir, overwrite)
    written, failed = {}, []
    run_dirs = list(find_runs([outputs]))
    settings = differing_settings(_loaded(run_dirs))
    # the bar goes when the pass ends: the live dashboard passes every few seconds, and a quick pass draws none
    for run_dir in progress_over(run_dirs, "dashboard: mirroring", "runs", leave=False):
        rel = run_dir.relative_to(outputs.resolve())
        try:
            written[str(rel)] = mirror_run(run_dir, logdir / rel, settings)
        except (OSError, ValueError) as e:   # one unreadable run must not take the dashboard down
            log.warning("%s: not mirrored: %s", run_dir, e)
            failed.append(f"{run_dir} ({e})")
    _drop_vanished(logdir, set(written) | {f.split(" (", 1)[0] for f in failed})
    if strict and failed:
        raise DataError(f"{len(failed)} of {len(failed) + len(written)} runs not mirrored into {logdir}: "
                        f"{'; '.join(failed[:3])}")
    return written


# A run's record files: a pass loads a run again (``_loaded``) only where one of them changed since the last pass
_compared: dict[Path, tuple[list, Run]] = {}  # run dir -> (its RECORD_FILES' file_state, the run loaded from them)


def _loaded(run_dirs: list[Path]) -> list[Run]:
    """The runs (``load_run`` without rows) whose settings a pass compares, each read again only where its record
    changed since the last pass in this process (the live dashboard passes every few seconds; parsing every run's
    config.yaml each time took seconds for a hundred runs); one that cannot be read is left out (its mirror says
    why)."""
    kept: dict[Path, tuple[list, Run]] = {}
    for run_dir in run_dirs:
        stamps = [file_state(run_dir / name) for name in RECORD_FILES]
        known = _compared.get(run_dir)
        if known is None or known[0] != stamps:
            try:
                known = (stamps, load_run(run_dir, rows=False))
            except (OSError, ValueError):
                continue
        kept[run_dir] = known
    _compared.clear()
    _compared.update(kept)
    return [run for _, run in kept.values()]


MIRROR_STOPPED = ("stopped by {signal} while mirroring: each run's mirror is whole, or removed and mirrored again from "
                  "scratch by the next pass. Run the same command again to go on.")
SERVE_STOPPED = ("stopped by {signal}: TensorBoard is stopped; each run's mirror is whole, or removed and mirrored "
                 "again by the next pass. Run the same command again to serve the runs.")


def mirror_once(outputs: str | Path, logdir: str | Path | None = None, overwrite: bool = False) -> dict[str, int]:
    """``mirror_all`` with `strict`, as --mirror-only runs it: SIGTERM and Ctrl-C raise Preempted (a `stopped:` line,
    exit 128 + the signal), like every other command's stop."""
    with signals_stop(MIRROR_STOPPED):
        return mirror_all(outputs, logdir, strict=True, overwrite=overwrite)


def warn_if_no_runs(outputs: str | Path, written: Mapping[str, int]) -> None:
    """A warning line when `outputs` holds no run: a mistyped --outputs would otherwise mirror nothing, or serve an
    empty TensorBoard, without a word."""
    if not written:
        print(f"warning: {outputs} holds no run yet (no {METRICS} at or under it): is --outputs the folder of the "
              "runs (paths.output_dir, outputs/ by default)?", file=sys.stderr, flush=True)


def _drop_vanished(logdir: Path, mirrored: set[str]) -> None:
    """Remove the mirror of every run whose directory is gone (deleted from outputs/): TensorBoard would list it on."""
    for state_path in list(logdir.rglob(STATE)):
        mirror = state_path.parent
        source = Path(str(read_json(state_path).get("source") or ""))
        if str(mirror.relative_to(logdir)) not in mirrored and source.name and not source.exists():
            log.info("%s is gone: its mirror %s is removed", source.parent, mirror)
            shutil.rmtree(mirror, ignore_errors=True)


UP_WITHIN_S = 120  # how long TensorBoard may take to answer before the dashboard warns


def wait_until_up(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> float:
    """Seconds until `url` answers 200; raises TimeoutError (or RuntimeError if `proc` exited) otherwise."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"tensorboard ended ({exit_words(proc.returncode)}) before serving {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def tensorboard_command(logdir: str | Path, host: str, port: int, extra: list[str] | None = None) -> list[str]:
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", host, "--port", str(port),
            "--reload_interval", "5", *MULTIFILE, *(extra or [])]


# TensorBoard's legacy loader (--load_fast=false, or where its data server does not run) reads only a run's last
# event file by name (directory_watcher.DirectoryWatcher); with these flags it polls each of a run's files
# (directory_loader.DirectoryLoader), a replaced summary included, while the file's newest event is under a day old
MULTIFILE = ("--reload_multifile", "true")


def serve(outputs: str | Path, logdir: str | Path | None = None, host: str = "127.0.0.1",
          port: int = 6006, watch_every: float = 10.0, extra: list[str] | None = None, overwrite: bool = False) -> int:
    """Start TensorBoard, mirror the runs while it comes up, report how long it took, re-mirror every `watch_every` s
    until TensorBoard exits, or a signal stops the dashboard. Returns TensorBoard's exit code (128 + the signal where
    one killed it). Ctrl-C and SIGTERM (kill, a CI runner) raise Preempted, as every other command's stop: TensorBoard
    is stopped with the dashboard, never orphaned, and the command ends with a `stopped:` line and 128 + the signal
    (``signals_stop``)."""
    with signals_stop(SERVE_STOPPED):
        return _serve(outputs, logdir, host, port, watch_every, extra, overwrite)


def check_port_free(host: str, port: int) -> None:
    """ConfigError naming --port (or --host) when TensorBoard could not listen there: said before the runs are
    mirrored, in one line, instead of TensorBoard's own lines after it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise ConfigError(f"--host {host}: not an address of this machine ({err.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: a port in TIME_WAIT is free
        try:
            probe.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise ConfigError(f"--port {port}: another program listens on {host}:{port} (a dashboard already "
                                  "running?); choose another port (make dashboard PORT=...)") from None
            raise ConfigError(f"--host {host} --port {port}: cannot listen there ({err.strerror})") from None


def _serve(outputs, logdir, host, port, watch_every, extra, overwrite) -> int:
    """TensorBoard first, then the first mirror: with many runs that pass takes a while, and the user watches the
    runs appear in the served page (it reloads every 5 s) rather than wait with no page and no word."""
    check_port_free(host, port)
    t0 = time.monotonic()
    logdir = claim_logdir(outputs, logdir, overwrite)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    # SIGTERM from the kernel when this process dies, SIGKILL included: TensorBoard would otherwise keep the port, and
    # serve a mirror nobody refreshes, after its dashboard is gone
    proc = subprocess.Popen(tensorboard_command(logdir, host, port, extra), env=env, **dies_with_this_process())
    url = f"http://{host}:{port}/"
    try:
        print(f"dashboard starting at {url}; mirroring the runs under {outputs} into {logdir} (each run appears "
              "as it is mirrored)", flush=True)
        written = mirror_all(outputs, logdir)
        warn_if_no_runs(outputs, written)
        print(f"mirrored {len(written)} runs ({sum(written.values())} new rows) in {time.monotonic() - t0:.1f} s",
              flush=True)
        try:
            wait_until_up(url + "data/runs", timeout=UP_WITHIN_S, proc=proc)
            print(f"dashboard up at {url} after {time.monotonic() - t0:.1f} s (Ctrl-C stops it)", flush=True)
        except RuntimeError as e:  # TensorBoard ended before it served: the command failed
            print(f"error: {e}", file=sys.stderr, flush=True)
            return child_status(proc.returncode) or 1
        except TimeoutError as e:  # still running, and may yet answer (a slow first load): the mirror goes on
            print(f"warning: {e}: TensorBoard is still starting or stuck; the runs are still mirrored (Ctrl-C "
                  "stops it)", file=sys.stderr, flush=True)
        while proc.poll() is None:
            try:
                proc.wait(timeout=watch_every)
            except subprocess.TimeoutExpired:
                mirror_all(outputs, logdir)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
    if proc.returncode:
        print(f"error: tensorboard ended while serving ({exit_words(proc.returncode)})", file=sys.stderr, flush=True)
    return child_status(proc.returncode)
