"""``hydra_main``: a Hydra script's start. The command line is composed and refused (``linformer.configs``) before
Hydra writes anything, and what Hydra made for a start that is refused is removed again."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from .cli import EXIT_USER_ERROR, Ended, cli_errors, process_rank, refuse_undecodable_arguments, said, work_ended
from .configs import (
    added_overrides,
    asks_for_help,
    command_sources,
    compose,
    config_dir,
    config_file,
    config_words,
    how_to_give,
    hydra_command_line,
    names_config_path,
    reads_command_lines,
    refuse_added_keys,
    refuse_bad_interpolations,
    refuse_long_job_names,
    refuse_missing_values,
    refuse_sweep,
    spec_overrides,
    sweep_size,
    sweeps,
    swept_keys,
)
from .errors import ConfigError, OutputPathError, RunDirError, first_line
from .files.atomic import atomic_write
from .files.locations import resolve_path, seen_by_git
from .files.locks import holder_gone, in_use, lock_holder
from .files.runs import LOCK, RUN
from .runname import register_resolvers, sweeping
from .script_help import help_without_configs
from .shell import hydra_override


def hydra_main(config_name: str, resumes: bool = False) -> Callable:
    """``@hydra_main("pretrain")`` over configs/<config_name>.yaml, with the body run under ``cli_errors``. A
    --multirun goes on past a job that fails (its `error:` line, or its traceback, said at once) and ends with a
    line per job and an `error:` line where any failed (``_sweep_end``); a stop (Ctrl-C, SIGTERM) ends it there.
    `resumes`: the command run again goes on from a stopped run's last checkpoint (training), which a stop's line
    says (``cli.stopped_line``); else it starts over."""
    import hydra

    register_resolvers()

    def decorate(fn: Callable) -> Callable:
        start: dict = {}  # when the command started, and the nearest folder on the way to its run dir that existed
        typed: list[str] = []  # the command line as typed (its run dir absolute): Hydra alone parses spec_overrides'
        jobs: list[SweepJob] = []  # a --multirun's jobs, as each ended

        def job(cfg):
            from hydra.core.hydra_config import HydraConfig

            with cli_errors(resumes), _no_refused_run_dir(**start):
                import_modules(cfg)  # in every process and job: before anything reads a name they register
                name = HydraConfig.get().job.config_name  # --config-name's, where given
                refuse_missing_values(cfg, name)  # where the command line had Hydra's flags (--multirun)
                refuse_added_keys(cfg, added_overrides(), name)
                return fn(cfg)

        @functools.wraps(fn)
        def body(cfg):
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            sys.argv[1:] = typed  # parsed: what the job reads of it (run.json's command, a hint's) is as typed
            if HydraConfig.get().mode != RunMode.MULTIRUN:
                return job(cfg)
            return _sweep_job(job, cfg, jobs)

        @functools.wraps(fn)
        def entry():
            try:
                with logging_restored():
                    run()
            finally:  # the command has ended (its last line, an error: or stopped: line included): its status stands
                work_ended()

        def run():
            with cli_errors(resumes, work=False):  # where the configs are is known only now ($LINFORMER_CONFIG_DIR), and may be refused
                configs = None  # a command line's --config-path: Hydra reads that folder in place of the decorator's
                if not names_config_path(sys.argv[1:]):
                    try:
                        configs = str(config_dir())
                    except ConfigError as err:  # a --help says what it can without them
                        if not asks_for_help(sys.argv[1:]):
                            raise
                        print(help_without_configs(Path(sys.argv[0]).stem, str(err)))
                        return
                main = hydra.main(version_base="1.3", config_path=configs, config_name=config_name)(body)
            # The command line composed first, to say a misspelt key or option in one line with a did-you-mean:
            # Hydra's own message is several lines. Read by Hydra's parser, its configs as Hydra finds them
            # (--config-name, --config-path, --config-dir); not where Hydra runs nothing (--help, --cfg, --info, ...).
            # The run directory is worked out here too, so that a refused start can remove what Hydra made for it.
            given = sys.argv[1:]
            args = [_from_repository(a) for a in given]  # a relative hydra.run.dir or sweep.dir: from the clone too
            typed[:] = args
            args = spec_overrides(args)  # task.spec.<field>= sets a TaskSpec field the task config leaves out too
            start.update(started=time.time(), before=None, earlier=None)
            with cli_errors(resumes, work=False):  # a --config-dir or --config-path that names no folder
                refuse_undecodable_arguments(given)
                line = hydra_command_line(args, config_name, fn)
            if line is None and not reads_command_lines() and process_rank() == 0:
                print("note: this Hydra has moved the parser linformer reads a command line with before Hydra starts: "
                      "a misspelt key or option gets Hydra's own message, the other checks run as the job starts.",
                      file=sys.stderr, flush=True)
            runs = line is not None and line.runs
            multirun = runs and line.multirun
            sweep, size, overrides = None, None, None
            with contextlib.ExitStack() as configs:
                if runs:
                    configs.enter_context(command_sources(line.sources))
                    name, overrides = line.config_name, line.overrides
                if runs and not multirun:
                    with cli_errors(resumes, work=False):
                        try:
                            cfg = compose(name, overrides, with_hydra=True)
                        except ConfigError as err:
                            if not any(a.startswith("+") for a in overrides) or "is a key already" in str(err):
                                raise
                        else:
                            multirun = sweeps(cfg)  # a config file's hydra.mode: MULTIRUN: Hydra runs a sweep
                            if not multirun:  # a value left unset first: the run directory's name may need it
                                refuse_missing_values(cfg, name)
                                refuse_bad_interpolations(cfg, name, overrides)
                                start["before"] = _run_dir_before(cfg, overrides=overrides)
                                start["earlier"] = _hydra_record(cfg)
                                _warn_if_git_sees(cfg, "run")
                if multirun:  # the sweep's directories are named before any job starts
                    sweeping(swept_keys(overrides))
                    size = sweep_size(overrides)
                    with cli_errors(resumes, work=False):
                        cfg = refuse_sweep(name, overrides)
                        start["before"] = _run_dir_before(cfg, "sweep", overrides) if cfg is not None else None
                        if cfg is not None:
                            refuse_long_job_names(name, overrides)
                            sweep = _sweep_record(cfg)
                            _warn_if_git_sees(cfg, "sweep")
                sys.argv[1:] = args  # what Hydra parses
                try:
                    if multirun:
                        _swept(main, jobs, resumes, size)
                    else:
                        main()
                finally:
                    sys.argv[1:] = given
            if jobs:
                _sweep_end(jobs, start["started"], sweep, start["before"], overrides)

        return entry

    return decorate


@contextlib.contextmanager
def logging_restored():
    """The process's logging as it was before the block, once it ends: every logger's handlers, level, disabled and
    propagate, the root's included; a logger made inside is left as a new one is (no handlers, NOTSET, enabled,
    propagating). Hydra's job logging configures the root logger for the whole process (its handlers, one on the
    command's log file, and its level), and a logging config of disable_existing_loggers: true disables the others, so
    a script run inside a live interpreter (``%run`` in a notebook, runpy) left the caller's later records going into
    that run's log file. The handlers added inside (on no logger before it) are closed, the log file's descriptor with
    them; one that was there before is put back open, whoever removed it inside (tests/conftest.py restores each test
    with this, and pytest's logging plugin takes its capture handlers off and puts the same ones back each phase)."""
    import logging

    def loggers():
        return [logging.getLogger(), *(lg for lg in logging.Logger.manager.loggerDict.values()
                                       if isinstance(lg, logging.Logger))]

    saved = {id(lg): (lg, list(lg.handlers), lg.level, lg.disabled, lg.propagate) for lg in loggers()}
    try:
        yield
    finally:
        before = {id(h) for _, handlers, *_ in saved.values() for h in handlers}
        for lg in loggers():
            _, handlers, level, disabled, propagate = saved.get(id(lg), (lg, [], logging.NOTSET, False, True))
            for handler in lg.handlers:
                if id(handler) not in before:
                    handler.close()
            lg.handlers[:], lg.disabled, lg.propagate = handlers, disabled, propagate
            lg.setLevel(level)


@dataclasses.dataclass
class SweepJob:
    """How one job of a --multirun ended."""

    number: int
    run_dir: Path
    outcome: str    # ran | already complete | failed | stopped
    line: str = ""  # a failed job's last line (its error: line, or its exception's)
    code: int = 0   # a failed job's exit status


def _sweep_job(job: Callable, cfg, jobs: list[SweepJob]):
    """One job of a --multirun, recorded in `jobs`: a job that fails (an `error:` line, a traceback) does not stop
    the sweep, whose other jobs still run (a rerun of the sweep skips the finished ones); a stop (Ctrl-C, SIGTERM,
    their `stopped:` line) ends the sweep there, as it ends a single run."""
    from hydra.core.hydra_config import HydraConfig

    number, run = int(HydraConfig.get().job.num), hydra_run_dir().resolve()
    before = _run_status(run)
    try:
        result = job(cfg)
    except Ended as end:
        if end.code != EXIT_USER_ERROR:  # a stop: its line said, the sweep ends (_swept)
            jobs.append(SweepJob(number, run, "stopped"))
            raise
        jobs.append(SweepJob(number, run, "failed", end.line, end.code))
        return None
    except Exception as err:  # a traceback: shown now, and the sweep goes on
        traceback.print_exc()
        line = first_line(err, named=True)
        jobs.append(SweepJob(number, run, "failed", line, 1))
        return None
    jobs.append(SweepJob(number, run, "already complete" if before and before == _run_status(run) else "ran"))
    return result


def _swept(main: Callable, jobs: list[SweepJob], resumes: bool, size: int | None) -> None:
    """Hydra's --multirun (`main`), each job in turn (``_sweep_job``), the sweep a block of its own for a stop: a
    Ctrl-C or SIGTERM between two jobs (Hydra's set-up of the next) is the sweep's `stopped:` line, where the
    start-up handling (``cli.stop_while_starting``) said the command was starting; one in a job is the job's. Either
    ends the sweep with 128 + the signal and its table (``_sweep_table``: the jobs done, the one stopped, those not
    started; `size`: how many jobs the sweep makes, where known)."""
    try:
        with cli_errors(resumes, work=False):
            main()
    except Ended as end:
        if end.code != EXIT_USER_ERROR:
            _sweep_table(jobs, size, stopped=True)
        raise


def _sweep_table(jobs: list[SweepJob], size: int | None = None, stopped: bool = False) -> None:
    """A --multirun's table, on stderr: a line per job (ran, already complete, failed with its line, stopped) and,
    where a stop ended it (`stopped`), one per job not started (`size`: the sweep's jobs, where known)."""
    if process_rank() != 0:
        return
    lines = [f"  #{j.number} {j.outcome}: {j.run_dir.name}" + (f": {j.line}" if j.line else "") for j in jobs]
    left = range(len(jobs), size) if stopped and size is not None else range(0)
    lines += [f"  #{number} not started" for number in left]
    counts = {outcome: sum(j.outcome == outcome for j in jobs) for outcome in ("ran", "already complete", "failed",
                                                                               "stopped")}
    counts["not started"] = len(left)
    said = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n)
    total = len(jobs) + len(left)
    if not total:  # stopped before its first job, where the sweep's jobs are not known
        print("sweep stopped before its first job", file=sys.stderr, flush=True)
        return
    where = f", in {jobs[0].run_dir.parent}" if jobs else ""
    print(f"sweep of {total} job{'s' * (total != 1)}{' stopped' * stopped} ({said}){where}:", *lines,
          sep="\n", file=sys.stderr, flush=True)


def _run_status(run: Path) -> tuple[str, int] | None:
    """(the status run.json records in `run`, the file's mtime in ns) where it says complete: unchanged by a job, the
    job found its run complete; else None."""
    try:
        record = run / RUN
        status = json.loads(record.read_text(encoding="utf-8")).get("status")
        return (status, record.stat().st_mtime_ns) if status == "complete" else None
    except (OSError, ValueError, AttributeError):
        return None


def _sweep_record(cfg) -> tuple[Path, bytes | None] | None:
    """(the sweep's multirun.yaml, what an earlier sweep left in it, None for nothing), which Hydra is about to
    replace: a sweep none of whose jobs got to start puts it back (``_sweep_end``)."""
    sweep = _sweep_dir(cfg)
    if sweep is None:
        return None
    record = sweep / "multirun.yaml"
    return record, record.read_bytes() if record.is_file() else None


def _sweep_end(jobs: list[SweepJob], started: float, sweep: tuple[Path, bytes | None] | None,
               before: Path | None, overrides: list[str] | None = None) -> None:
    """A --multirun's last lines: one per job (ran, already complete, failed with its line), then, where a job
    failed, an `error:` line and the exit status of the first failure (2, or 1 after a traceback). A sweep none of
    whose jobs wrote anything leaves the earlier sweep's multirun.yaml as it was (or, where there was none, nothing:
    the folders made for it, down to `before`, go too). Only its own is taken back (the one whose overrides are the
    command line's `overrides`; where those are unknown, one written since it `started`): one that another sweep into
    the same folder wrote meanwhile stays."""
    failed = [j for j in jobs if j.outcome == "failed"]
    if sweep and len(failed) == len(jobs) and not any(
            j.run_dir.is_dir() and _wrote_outputs(j.run_dir, "", started) for j in failed):
        record, earlier = sweep
        with contextlib.suppress(OSError):
            mine = record.is_file() and (_sweep_overrides(record) == _task_overrides(overrides) if overrides
                                         is not None else record.stat().st_mtime >= started)
            if mine and earlier is not None:
                atomic_write(record, earlier)
            elif mine:
                record.unlink()
                if before is not None and record.parent.is_relative_to(before):
                    _remove_made_folders(record.parent, before)
    _sweep_table(jobs)
    if failed and process_rank() == 0:
        numbers = ", ".join(f"#{j.number}" for j in failed)
        print(f"error: {len(failed)} of {len(jobs)} jobs failed ({numbers}): fix what their lines above say and run "
              "the same command again; the finished jobs are skipped.", file=sys.stderr, flush=True)
        said(failed[0].code)
        sys.exit(failed[0].code)


def _sweep_overrides(record: Path) -> list | None:
    """The overrides a sweep's multirun.yaml records (Hydra's ``hydra.overrides.task``), or None where it does not
    read."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(record).hydra.overrides.task)
    except Exception:  # torn, or not Hydra's
        return None


def _task_overrides(overrides: list[str]) -> list[str]:
    """A command line's overrides as Hydra records its task's: those of hydra's own keys and groups left out."""
    return [o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]


def _from_repository(arg: str) -> str:
    """A command line's relative ``hydra.run.dir=`` or ``hydra.sweep.dir=`` made absolute from the repository, as
    every other path a command takes (``locations.resolve_path``): Hydra would take it from the working directory."""
    key, sep, value = arg.partition("=")
    if not sep or key.lstrip("+") not in ("hydra.run.dir", "hydra.sweep.dir") or "${" in value or not value:
        return arg
    plain = value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"" else value
    if Path(os.path.expanduser(plain)).is_absolute():
        return arg
    return hydra_override(key, resolve_path(plain))


def _warn_if_git_sees(cfg, mode: str) -> None:
    """A warning line where the run directory (mode "sweep": a --multirun's sweep directory) of `cfg`, composed with
    its hydra node, lies inside the clone where git does not ignore it (``locations.seen_by_git``): a relative
    hydra.sweep.dir=my_sweep or paths.output_dir=my_runs is taken from the repository, as every path, and only
    outputs/ (and Hydra's multirun/) are ignored there."""
    try:
        folder = Path(str(cfg.hydra[mode].dir))
    except Exception:  # an interpolation only Hydra's run resolves: the run directory is checked by Hydra's run
        return
    if process_rank() == 0 and seen_by_git(folder):
        print(f"warning: the {'sweep' if mode == 'sweep' else 'run'} directory {folder.resolve()} (hydra.{mode}.dir) "
              "is inside the clone where git does not ignore it: `git status` will list its files and `git add -A` "
              "would commit them. A folder under outputs/ is ignored (hydra.sweep.dir=outputs/<name>, "
              "paths.output_dir=outputs/<name>).", file=sys.stderr, flush=True)


def _run_dir_before(cfg, mode: str = "run", overrides: list[str] = ()) -> Path | None:
    """The nearest folder that exists already on the way to where Hydra will put the run of `cfg` (composed with its
    hydra node: the run directory itself when it exists; with mode "sweep", a --multirun's sweep directory); None
    when the config names no such directory. A run directory that climbs out of its folder through a ".." in a name
    (`overrides` name the value) is refused here, before Hydra writes its .hydra/ files there: Hydra's files would
    land in a folder that holds other things (the checkout itself), where a refused start cannot remove them. One
    that cannot be written is refused: a live run's (another user's) naming that run, as the run's lock would."""
    from omegaconf import OmegaConf
    from omegaconf.errors import InterpolationKeyError

    try:
        given = Path(str(cfg.hydra[mode].dir))
    except InterpolationKeyError as err:  # a key it names is gone (~model): Hydra's run would fail on it too
        missing = re.search(r"key '([^']+)'", str(err))
        key = missing.group(1) if missing else "a key"
        group, _, leaf = key.partition(".")
        chosen = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None) if leaf else None
        option = config_file(f"{group}/{chosen}.yaml") if chosen is not None else None
        if option is not None and option.is_file() and leaf not in (OmegaConf.load(option) or {}):
            # the group is selected and its option's file lacks the key (a config of one's own)
            where = config_words(f"{group}/{chosen}.yaml")
            raise ConfigError(f"the run directory (hydra.run.dir) needs {key}, which {where} does not give: "
                              f"{how_to_give(group, chosen, leaf)}, or set run_name=...") from None
        raise ConfigError(f"the run directory (hydra.run.dir) needs {key}, which this command line removes or "
                          f"leaves unset: select its config group again (e.g. {group}=...) rather than "
                          "removing it.") from None
    except Exception:  # an interpolation only Hydra's run resolves: nothing is removed then
        return None
    culprit = next((key for key, _, value in (a.lstrip("+~").partition("=") for a in overrides)
                    if ".." in Path(value).parts and value in str(given) and not key.startswith("hydra.")), None)
    if ".." in given.parts and culprit:  # a hydra.run.dir given with a ".." is the user's own choice
        raise ConfigError(f"{culprit}={OmegaConf.select(cfg, culprit, default='')!r} puts the run directory "
                          f"(hydra.{mode}.dir) at {given}, outside its folder: it must be one folder name (not a "
                          "path: without '/', not '..').")
    run_dir = given.resolve()
    if mode == "run" and run_dir == _sweep_dir(cfg) and not _runs_in_sweep_folder(cfg):  # before Hydra writes into it
        key, value = next(((key, value) for key, _, value in (a.lstrip("+~").partition("=") for a in overrides)
                           if value == run_dir.name and not key.startswith("hydra.")), ("hydra.run.dir", str(given)))
        raise ConfigError(f"{key}={value!r} makes the run directory {run_dir} the sweep folder (hydra.sweep.dir, where "
                          "--multirun puts its jobs): choose another name, or its files would mix with a sweep's.")
    existing = next(p for p in (run_dir, *run_dir.parents) if p.exists())
    if not existing.is_dir():  # Hydra would fail making the run directory, with a traceback
        raise OutputPathError(f"the run directory {run_dir} cannot be made: {existing} is a file, not a folder. "
                              "Choose another paths.output_dir or run_name.")
    if not os.access(existing, os.W_OK | os.X_OK):
        holder = lock_holder(run_dir / LOCK) if existing == run_dir else None
        if holder is not None and not holder_gone(holder):  # another user's live run: who holds it, not the permissions
            raise RunDirError(in_use(run_dir / LOCK, holder, "choose another paths.output_dir or run_name"))
        what = "is not writable" if existing == run_dir else f"cannot be made: {existing} is not writable"
        raise OutputPathError(f"the run directory {run_dir} {what}. Choose another paths.output_dir or run_name.")
    return existing


def _runs_in_sweep_folder(cfg) -> bool:
    """Whether the config puts its single runs in its sweep folder by design (configs/spectrum.yaml: both are its
    out_dir, beside the plots; a sweep's jobs go to subfolders of it): a run there takes no sweep's name."""
    from omegaconf import OmegaConf

    try:
        hydra = OmegaConf.to_container(cfg.hydra, resolve=False)
        return hydra["run"]["dir"] == hydra["sweep"]["dir"]
    except Exception:
        return False


def _sweep_dir(cfg) -> Path | None:
    """The sweep folder of `cfg` (composed with its hydra node), or None where only Hydra's run resolves it."""
    try:
        return Path(str(cfg.hydra.sweep.dir)).resolve()
    except Exception:
        return None


# what Hydra writes into a run directory before the script's body runs
_HYDRA_FILES = (".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml")


def _hydra_record(cfg) -> dict[str, bytes] | None:
    """The .hydra/ files an earlier command left in the run directory of `cfg` (composed with its hydra node), by
    name: Hydra replaces them before the body runs, so a refused start puts them back (_no_refused_run_dir)."""
    try:
        run_dir = Path(str(cfg.hydra.run.dir)).resolve()
    except Exception:  # an interpolation only Hydra's run resolves: nothing to keep
        return None
    earlier = {name: (run_dir / name).read_bytes() for name in _HYDRA_FILES if (run_dir / name).is_file()}
    return earlier or None


def import_modules(cfg) -> None:
    """Import the modules the config's ``imports`` key names (``imports=[my_projection]``), where a projection or a
    task of one's own registers itself (``linformer.modeling.register_projection``, ``linformer.data.tasks.register_task``).
    Each process of a command runs its start (torchrun's and accelerate's ranks, a --multirun's jobs), so each imports
    them. A module is found as Python finds one (PYTHONPATH, installed packages), then in the folder the command was
    started in; one not found is a ConfigError naming it; an error inside it keeps its traceback (it is code)."""
    names = cfg.get("imports") or []
    if isinstance(names, str) or not all(isinstance(name, str) and name for name in names):
        raise ConfigError(f"imports={names!r} must be a list of module names: imports=[my_module].")
    if names and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # last: a file here does not replace an installed module of its name
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is None or not name.startswith(err.name):  # a module it imports is missing: its traceback
                raise
            raise ConfigError(f"imports: no module {name!r} is found here (in {os.getcwd()}, on PYTHONPATH or "
                              "installed): give the module's name as Python imports it, with its folder on "
                              "PYTHONPATH.") from None


@contextlib.contextmanager
def _no_refused_run_dir(started: float | None = None, before: Path | None = None,
                        earlier: dict[str, bytes] | None = None):
    """A start that fails leaves nothing behind of what Hydra made for it: its .hydra/ files and log, and the
    folders Hydra created down to the run directory. Only when nothing else is in it (a run's own files are never
    touched), never the working directory, and never a folder that was there before the command. A run directory
    that held an earlier command's .hydra/ files (`earlier`) gets them back: they describe the outputs beside them."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError, ValueError):
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            hydra = HydraConfig.get()
            run = hydra_run_dir().resolve()
            if earlier and hydra.mode != RunMode.MULTIRUN:
                if not _wrote_outputs(run, hydra.job.name, started):
                    for name, content in earlier.items():
                        atomic_write(run / name, content)
            else:
                sweep = Path(hydra.sweep.dir).resolve() if hydra.mode == RunMode.MULTIRUN else None
                _remove_hydra_leftovers(run, hydra.job.name, started, before, sweep)
        raise


def _wrote_outputs(run: Path, job_name: str, started: float | None) -> bool:
    """Whether this command wrote a file of its own into the run directory (not Hydra's .hydra/ files or log)."""
    hydra = {run / name for name in (*_HYDRA_FILES, f"{job_name}.log")}
    return started is None or any(p.stat().st_mtime >= started for p in run.rglob("*")
                                  if p.is_file() and p not in hydra)


def _remove_hydra_leftovers(run: Path, job_name: str, started: float | None, before: Path | None,
                            sweep: Path | None = None) -> None:
    """`sweep`: a --multirun's sweep directory, above `run` (this job's): the removal stops there, since the sweep's
    other jobs go on (``_sweep_end`` removes the sweep directory where none of them started)."""
    if started is None or run == Path.cwd().resolve():
        return
    made = [run / name for name in (*_HYDRA_FILES, f"{job_name}.log") if (run / name).exists()]
    everything = [p for p in run.rglob("*") if p.is_file() or p.is_symlink()]
    if sorted(everything) != sorted(made) or any(p.stat().st_mtime < started for p in made):
        return  # something else is in it: not a refused start's leftovers
    for path in made:
        path.unlink()
    with contextlib.suppress(OSError):
        (run / ".hydra").rmdir()
    if before is None or not run.is_relative_to(before):
        return
    _remove_made_folders(run, before, sweep)


def _remove_made_folders(folder: Path, before: Path, stop: Path | None = None) -> None:
    """`folder` and those above it, down to `before` (a folder that was there before the command) or `stop`, each
    only when empty (OSError where one is not)."""
    for made in (folder, *folder.parents):
        if made in (before, stop):
            break
        made.rmdir()


def hydra_run_dir() -> Path:
    """The Hydra run directory of this job (outputs/<stage>/<run_name>), the same on every rank."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)
