"""Run a pipeline of CLI jobs (tokenizer, corpus, pretrain, finetune, ...) with dependencies, several at once.

Why several at once: on a small CPU box two torch jobs with one thread each get more done than one job with
two threads, because the tiny models' matrix products are too small to keep two threads busy. Two 2-thread jobs
on 2 cores would instead spin against each other and run many times slower, so each job gets cores // jobs
threads through OMP_NUM_THREADS.

A job whose `done` file exists is skipped, so an interrupted pipeline resumes where it stopped; unless the output it
records is damaged (``rundir.output_problem``: what a rerun of the job's command finds itself) or refused by the check
its readers run (a corpus of an older format: ``corpus_check``), so that the job runs again and its command redoes
the output or names the damage and what writes it again. With jobs > 1
each job writes its output to `<log_dir>/<job>.log` (the console gets one line per start and end); with
jobs == 1 the job prints to the console as usual; with a `stream` every line goes to the console and that one file
(the GPU targets, whose log comes back from the machine and whose console is what the caller sees).

The reproductions (scripts/reproduce_*.py), the demo and the GPU targets (scripts/gpu.py, with a `deadline` for
a machine whose commands have a time limit) all run their commands through run_jobs.

Stopping the runner (SIGTERM, or Ctrl-C) stops its jobs too: each running job gets SIGTERM (the training
scripts save a checkpoint on it) and up to ``STOP_WAIT_S`` seconds to exit before it is killed; a job that
finishes in that time is kept like any other. Left running, a job would finish behind the runner's back and
collide with the next run's copy of itself: a runner that dies without stopping them (SIGKILL, the out-of-memory
killer) has the kernel send each job SIGTERM (Linux), so it saves and exits as on a stop.

With an `end_by` time and each job's estimated `minutes`, a job whose estimate ends past `end_by` is not started,
nor what needs it (one NOT_STARTED line names them): a job stopped at a machine's deadline leaves a checkpoint that
a fresh machine does not have, and the stop's wait, spent saving it, is time the next command could have used. Only
a caller on such a machine gives `end_by` (scripts/gpu.py, through the runners' --end-by); a local `deadline` stops a
long job part-way, its checkpoint kept for the next run to resume.

A job's log is appended to, never truncated: a rerun's lines follow the earlier attempt's.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .data.workers import dies_with_this_process
from .errors import DataError, LinformerError
from .files.mappings import read_json
from .output_rule import check_plan
from .rundir import output_problem
from .shell import shell_command
from .signals import child_status, exit_words, sigterm_interrupts


@dataclass
class Job:
    name: str
    argv: list[str]            # the command, e.g. [python, scripts/pretrain.py, overrides...]
    done: Path | None          # exists once the job has finished (its summary or results file); None: a command
    #                            that runs every time and is finished when it exits 0 (a test run, a benchmark)
    needs: tuple[str, ...] = field(default_factory=tuple)  # names of jobs that must finish first
    # Writes `done` from what the command left, when `done` is a copy kept elsewhere (a finished run's small records
    # committed with the results): called after the command exits 0, and before starting it, so that a run that
    # finished but was not yet kept is kept instead of run again. Returns whether it kept anything.
    keep: Callable[[], bool] | None = None
    # An intermediate product (a corpus, a converted model, a teacher's weights): run only while a job that needs
    # it is still to run, so a fresh clone whose final records are all kept rebuilds none of them.
    intermediate: bool = False
    # Whether the record at `done` no longer counts (made under an older protocol, or from weights its row no longer
    # starts from): the job then runs again, and its new record, which replaces it, must count. Read whenever
    # `finished` is.
    stale: Callable[[], bool] | None = None
    # The check the jobs that need the output run on it as they read it (``corpus_check``: what pretraining refuses of
    # a prepared corpus), raising a LinformerError: an output it refuses is not done, so the job runs again and its
    # command rebuilds the output (or refuses it) before a job that needs it starts.
    check: Callable[[Path], None] | None = None

    @property
    def finished(self) -> bool:
        """`done` exists, for a JSON record reads as JSON (a record torn by a kill or a bad copy is not done, so the
        job runs again rather than a report reading the damaged file), is not stale, and the output it records is
        not damaged (``damage``)."""
        if self.done is None:
            return False
        if not self.done.is_file():
            return self.done.exists() and not self._stale()
        if self.done.suffix == ".json":
            try:
                json.loads(self.done.read_text(encoding="utf-8"))
            except (ValueError, OSError):
                return False
        return not self._stale() and self.damage is None

    @property
    def damage(self) -> str | None:
        """Why the output whose record `done` is cannot stand as done (``rundir.output_problem``: a finished run's
        model gone or damaged, a file of an output folder changed since it was written; what its `check` refuses), or
        None."""
        if self.done is None or not self.done.exists():
            return None
        problem = output_problem(self.done)
        if problem is None and self.check is not None:
            try:
                self.check(self.done)
            except LinformerError as err:
                problem = str(err)
        return problem

    def _stale(self) -> bool:
        return self.stale is not None and self.stale()


class JobFailed(RuntimeError):
    def __init__(self, message: str, exit_codes: dict[str, int] | None = None):
        super().__init__(message)
        self.exit_codes = exit_codes or {}  # job -> exit status, in the order the jobs ended

    @property
    def status(self) -> int:
        """The exit status a command whose job failed ends with, as a --multirun sweep ends (``hydra_start``): the
        first failed job's own (2 after its `error:` line, 1 after a traceback, 128 + the signal that killed it), or
        1 where none exited non-zero (a job that exited 0 without writing its output, jobs that cannot start)."""
        return child_status(next((code for code in self.exit_codes.values() if code != 0), 1))


class JobsStopped(RuntimeError):
    """The deadline passed: the running jobs were stopped (SIGTERM) and nothing else started."""

    def __init__(self, exit_codes: dict[str, int]):
        super().__init__(f"stopped at the deadline; ended: {exit_codes}")
        self.exit_codes = exit_codes  # every job started, by the end it had (none: the deadline came before any)

    @property
    def started_none(self) -> bool:
        """The deadline came before the first job started (checking the plan's outputs took the time)."""
        return not self.exit_codes


class NoneStarted(RuntimeError):
    """With `end_by`: by its estimate every job left would end past it, so none was started (the NOT_STARTED line,
    printed first, names them); what needs the jobs' outputs (a report) has nothing to read."""

    def __init__(self, names: list[str]):
        super().__init__(f"no job started: by its estimate each would end past the stop: {', '.join(names)}")
        self.names = names


STOP_WAIT_S = 120  # a stopped job's time to save its checkpoint and exit
# The line run_jobs prints (stderr) naming the jobs it did not start, their estimates ending past `end_by`;
# scripts/gpu.py reads it from a target's log for its summary
NOT_STARTED = "not started (by its estimate each would end past the stop):"


def stopped_by(stop_after: float) -> float:
    """Minutes from the start, at most, until jobs stopped `stop_after` minutes in have ended: the stop's wait
    (STOP_WAIT_S) for them to save their checkpoints and exit comes after it. Only what ended by `stop_after` is
    finished work; the wait is time a command must leave for it."""
    return stop_after + STOP_WAIT_S / 60
STOPPED = "stopped: finished jobs are kept; run the same command again to resume"


@dataclass
class _Running:
    job: Job
    proc: subprocess.Popen
    t0: float
    log: Path | None                   # the job's own log file (jobs > 1 without a stream)
    reader: threading.Thread | None     # copies its output into the stream


def _kept(job: Job) -> bool:
    """After `job` exited 0: keep its records (Job.keep), and whether it finished."""
    if job.keep is not None:
        job.keep()
    return job.done is None or job.finished


def _stop(running: dict[str, _Running]) -> set[str]:
    """SIGTERM every running job, wait up to STOP_WAIT_S for them all, kill what is left. Returns the jobs that
    finished meanwhile (exit 0 and their records kept): the work of a stopped runner is not lost."""
    for r in running.values():
        if r.proc.poll() is None:
            r.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    finished = set()
    for name, r in running.items():
        try:
            r.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait()
            print(f"[killed] {name}: still running {STOP_WAIT_S} s after SIGTERM", file=sys.stderr, flush=True)
            continue
        finally:
            if r.reader is not None:
                r.reader.join()
        if r.proc.returncode == 0 and _kept(r.job):
            finished.add(name)
            print(f"[done]  {name}: finished while the runner was stopping (kept)", file=sys.stderr, flush=True)
        else:
            print(f"[stopped] {name} ({exit_words(r.proc.returncode)})", file=sys.stderr, flush=True)
    return finished


def corpus_check(done: Path, data: Mapping | None = None, tokenizer_dir: str | None = None, group: str | None = None
                 ) -> None:
    """A Job's `check` for a prepared corpus whose record `done` is its manifest.json: what pretraining's
    ``load_prepared`` checks before it reads one (``data.corpus.check_corpus_files``: this version's format_version,
    the manifest's records, the files' checksums) and, given the plan's `data` group (and the tokenizer's folder),
    what pretraining checks of it at its start (``data.corpus.check_corpus_settings``: the settings, the sources'
    texts by content, the tokenizer's settings) and as it reads it (``data.corpus.check_corpus_tokenizer``: the
    tokenizer at `tokenizer_dir` gives the ids the corpus holds). Its job prepares it again where it fails
    (prepare_corpus rebuilds an outdated or damaged corpus itself, and refuses one of other settings naming them).
    `group`: the data group's option, for the commands a refusal prints."""
    from .data.corpus import check_corpus_files, check_corpus_settings, check_corpus_tokenizer

    check_corpus_files(str(done.parent), read_json(done), again="its job prepares it again.")
    if data is not None:  # the job's own output, whatever its folder's name (a corpus named for its tokenizer and n)
        check_corpus_settings(str(done.parent), data, tokenizer_dir, group, named=False)
    if tokenizer_dir is not None:
        try:
            check_corpus_tokenizer(str(done.parent), tokenizer_dir)
        except FileNotFoundError as err:  # no tokenizer there yet: its job trains it, then this one packs again
            raise DataError(f"the tokenizer the corpus {done.parent} is read with is not there ({err})") from err


def tokenizer_check(done: Path, files: list[str], settings: Mapping, data: Mapping | None = None,
                    group: str | None = None) -> None:
    """A Job's `check` for a tokenizer whose record `done` is its tokenizer.json: trained with the settings its `data`
    group gives, as pretraining checks it (``data.corpus.check_tokenizer_settings``, which prints the command that
    trains it again; `group`: the group's option, for that command), and as its job's train_tokenizer trains it now
    (``data.tokenizer.trained_otherwise``: every setting its manifest records, the texts by content, at any paths).
    Where it fails its job runs again: train_tokenizer refuses a tokenizer of other settings or texts naming them,
    rather than a corpus being packed with it."""
    from .data.corpus import check_tokenizer_settings
    from .data.tokenizer import trained_otherwise

    if data is not None:
        check_tokenizer_settings(str(done.parent), data, group)
    why = trained_otherwise(done.parent, files, settings)
    if why is not None:
        raise DataError(f"the tokenizer {done.parent} is not the one its job trains ({why})")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")


def _check(plan: list[Job]) -> None:
    names = [s.name for s in plan]
    if len(set(names)) != len(names):
        raise ValueError(f"job names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    for s in plan:
        missing = [n for n in s.needs if n not in names]
        if missing:
            raise ValueError(f"job {s.name!r} needs unknown jobs {missing}")


def wanted(plan: list[Job], finished: set[str]) -> list[Job]:
    """The unfinished jobs to run, in order: every one but the intermediate jobs that no unfinished job needs
    (directly, or through another wanted intermediate)."""
    want = {s.name for s in plan if s.name not in finished and not s.intermediate}
    grew = True
    while grew:
        needed = {n for s in plan if s.name in want for n in s.needs}
        more = {s.name for s in plan if s.intermediate and s.name in needed and s.name not in finished} - want
        want |= more
        grew = bool(more)
    return [s for s in plan if s.name in want]


def in_order_of_use(plan: list[Job]) -> list[Job]:
    """The jobs that are not intermediate in their order, each intermediate one moved to just before the first
    job that needs it (after what it needs in turn). A runner of one job at a time then builds a corpus or a model
    only when the next final job needs it, so a run stopped early has finished final jobs, not only their
    inputs; intermediate jobs that nothing needs come last."""
    by_name = {s.name: s for s in plan}
    out: list[Job] = []
    placed: set[str] = set()

    def place(job: Job) -> None:
        if job.name in placed:
            return
        placed.add(job.name)
        for name in job.needs:
            if name in by_name:
                place(by_name[name])
        out.append(job)

    for job in plan:
        if not job.intermediate:
            place(job)
    for job in plan:
        place(job)
    return out


def run_jobs(plan: list[Job], jobs: int = 1, cwd: Path | None = None, log_dir: Path | None = None,
               cores: int | None = None, stream: TextIO | None = None, deadline: float | None = None,
               end_by: float | None = None, minutes: Callable[[Job], float] | None = None) -> dict[str, float]:
    """Run every job whose `done` file is missing, at most `jobs` at a time, a job only after its `needs`.

    Output: with `stream` (an open text file), every job's output is copied line by line to the console and to it,
    each line prefixed with "[job] " when jobs > 1; else with jobs > 1 each job writes `<log_dir>/<job>.log`;
    else the jobs print to the console.

    Returns wall seconds per job run. On a failure the running jobs finish, nothing new starts, and
    JobFailed names the job, its command and its log. A job that exits 0 without writing `done` fails too.
    At `deadline` (time.monotonic()) the running jobs are stopped as on SIGTERM and JobsStopped is raised. With
    `end_by` (time.monotonic()) and `minutes` (a job's estimate), a job whose estimated end passes `end_by` is not
    started, nor a job that needs it: the runner ends when nothing else can run, and a NOT_STARTED line names them;
    where that leaves no job started at all, NoneStarted is raised after it. `end_by` is for a caller whose stop ends
    the machine too (scripts/gpu.py): a local `deadline` alone stops the running jobs, which resume on the next run.
    """
    _check(plan)
    jobs = max(1, int(jobs))
    if jobs > 1 and log_dir is None and stream is None:
        raise ValueError("log_dir or stream is required when jobs > 1 (each job's output must go somewhere)")
    runner = _Runner(plan, jobs, cwd, log_dir, max(1, (cores or os.cpu_count() or 1) // jobs), stream, deadline)
    if end_by is not None and minutes is not None:
        runner.end_by, runner.minutes = end_by, minutes
    check_plan((s.argv for s in runner.todo), cwd)  # every output before the first job starts (the output rule)
    with sigterm_interrupts():
        try:
            runner.loop()
        except KeyboardInterrupt:
            _stop(runner.running)  # a job that finishes meanwhile is kept: the next run skips it
            raise
    if runner.failures:
        left = f"; not started: {', '.join(s.name for s in runner.todo)}" if runner.todo else ""
        raise JobFailed("job(s) failed:\n" + "\n".join(runner.failures) + left +
                          "\nFix the cause and run the same command again: finished jobs are skipped.",
                          runner.exit_codes)
    if runner.not_started:
        print(f"{NOT_STARTED} {', '.join(runner.not_started)}", file=sys.stderr, flush=True)
        if not runner.exit_codes:  # not one job started
            raise NoneStarted(runner.not_started)
    return runner.times


class _Runner:
    """run_jobs' state: the jobs to run, those running, the finished ones, wall times, exit codes and
    failures."""

    def __init__(self, plan: list[Job], jobs: int, cwd: Path | None, log_dir: Path | None, threads: int,
                 stream: TextIO | None, deadline: float | None):
        self.jobs, self.cwd, self.log_dir, self.threads = jobs, cwd, log_dir, threads
        self.stream, self.deadline, self.lock = stream, deadline, threading.Lock()
        # a damaged output is not kept: its copy would record what the job must write again
        self.finished = {s.name for s in plan if s.finished or (s.keep is not None and s.damage is None and s.keep()
                                                                and s.finished)}
        self.todo = wanted(plan, self.finished)
        self.running: dict[str, _Running] = {}
        self.times: dict[str, float] = {}
        self.exit_codes: dict[str, int] = {}
        self.failures: list[str] = []
        self.end_by: float | None = None  # run_jobs' end_by and minutes: no job starts that would end past it
        self.minutes: Callable[[Job], float] | None = None
        self.not_started: list[str] = []
        self.env = os.environ | ({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
                                 if jobs > 1 else {})

    def _write(self, text: str) -> None:
        """One piece of the stream, to the console and the stream file, whole (one job's line at a time)."""
        with self.lock:
            print(text, end="", file=sys.stderr, flush=True)
            self.stream.write(text)
            self.stream.flush()

    def _pump(self, proc: subprocess.Popen, prefix: str) -> None:
        for line in proc.stdout:
            self._write(prefix + line)

    def _popen(self, argv: list[str], **kw) -> subprocess.Popen:
        """A job's process, which gets SIGTERM from the kernel if this runner dies without stopping it (Linux)."""
        return subprocess.Popen(argv, cwd=self.cwd, env=self.env, **kw, **dies_with_this_process(signal.SIGTERM))

    def start(self, s: Job) -> None:
        line = shell_command(*s.argv)
        log, reader = None, None
        if self.stream is not None:
            prefix = f"[{s.name}] " if self.jobs > 1 else ""
            self._write(f"{prefix}$ {line}\n")
            proc = self._popen(s.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               encoding="utf-8", errors="replace")
            reader = threading.Thread(target=self._pump, args=(proc, prefix), daemon=True)
            reader.start()
        elif self.jobs > 1:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = self.log_dir / f"{_slug(s.name)}.log"
            with log.open("a", encoding="utf-8") as fh:  # after an earlier attempt's lines: what it did stays readable
                fh.write(f"$ {line}  # started {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            out = log.open("a", encoding="utf-8")
            print(f"[start] {s.name} ({self.threads} thread{'s' * (self.threads > 1)}; log {log}): {line}",
                  file=sys.stderr, flush=True)
            proc = self._popen(s.argv, stdout=out, stderr=subprocess.STDOUT)
            out.close()
        else:
            print(f"\n==> {s.name}: {line}", file=sys.stderr, flush=True)
            proc = self._popen(s.argv)
        self.running[s.name] = _Running(s, proc, time.perf_counter(), log, reader)

    def loop(self) -> None:
        while self.todo or self.running:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                self.stop_at_deadline()
            ready = [s for s in self.todo if all(n in self.finished for n in s.needs)] if not self.failures else []
            already = [s for s in ready if s.finished]  # written meanwhile by a job it needs
            for s in already:
                self.todo.remove(s)
                self.finished.add(s.name)
            if already:
                continue
            if self.end_by is not None and self.leave_late(ready):
                continue
            for s in ready[: self.jobs - len(self.running)]:
                self.todo.remove(s)
                self.start(s)
            if not self.running:
                if self.failures:
                    return
                blocked = ", ".join(s.name for s in self.todo)
                raise JobFailed(f"jobs wait on jobs that cannot finish: {blocked}")
            time.sleep(0.2)
            self.collect()

    def leave_late(self, ready: list[Job]) -> bool:
        """Take out of `todo` the ready jobs whose estimate ends past end_by, and every job that needs one of them
        (they are not started); whether any was taken."""
        now = time.monotonic()
        late = {s.name for s in ready if now + 60 * self.minutes(s) > self.end_by}
        if not late:
            return False
        grow = True
        while grow:  # what needs a job not started cannot start either
            grow = [s for s in self.todo if s.name not in late and any(n in late for n in s.needs)]
            late |= {s.name for s in grow}
        self.not_started += [s.name for s in self.todo if s.name in late]
        self.todo = [s for s in self.todo if s.name not in late]
        return True

    def stop_at_deadline(self) -> None:
        self.finished |= _stop(self.running)
        self.exit_codes |= {name: r.proc.returncode for name, r in self.running.items()}
        self.running.clear()
        raise JobsStopped(self.exit_codes)

    def collect(self) -> None:
        """Record the jobs that have exited: finished, or failed (with why and where its log is)."""
        for name, r in list(self.running.items()):
            rc = r.proc.poll()
            if rc is None:
                continue
            if r.reader is not None:
                r.reader.join()  # its last lines are in the stream before its end is reported
            s = r.job
            del self.running[name]
            self.times[name] = round(time.perf_counter() - r.t0, 1)
            self.exit_codes[name] = rc
            where = f" (log: {r.log})" if r.log else ""
            if rc != 0 or not _kept(s):
                why = exit_words(rc) if rc != 0 else f"exit 0 but {s.done} was not written"
                self.failures.append(f"{name}: {why}{where}\n  command: {shell_command(*s.argv)}")
                print(f"[failed] {name}: {why}{where}", file=sys.stderr, flush=True)
            else:
                self.finished.add(name)
                if self.jobs > 1 and self.stream is None:
                    print(f"[done]  {name} in {self.times[name]:.0f} s", file=sys.stderr, flush=True)
