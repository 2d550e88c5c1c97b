"""The one front end of the plans (scripts/reproduce_mini.py, reproduce_pretrained.py, reproduce_scratch.py and
scripts/demo.py): print the plan with what is done and the minutes left (`show`, all a dry run does), run the jobs
left (`run`: the exit status 0, 1 after a failed job's error line, 128 + the signal when stopped), then, for a reproduction,
write the report in a process of its own (`reproduce`)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..argtypes import folder, positive_minutes
from ..data.io import default_data_mirror
from ..data.task_readers import check_task_files
from ..data.workers import dies_with_this_process
from ..errors import ConfigError, LinformerError, stopped_status
from ..files.hashing import hashed_once
from ..files.locations import repo_root, script, started_script
from ..jobs import STOPPED, Job, JobFailed, JobsStopped, NoneStarted, run_jobs, stopped_by, wanted
from ..output_rule import check_plan
from ..rundir import RunLock
from ..shell import script_command, shell_command
from ..signals import child_status, exit_words, interrupt_status, signal_words, sigterm_interrupts

REPO = repo_root()
# the lines of a run that started no job: its stop came before the first (checking the plan's outputs took the time),
# or by its estimate every job left would end past --end-by (run_jobs' NOT_STARTED line, just before, names them)
NOTHING_BY_DEADLINE = ("stopped: the stop came before the first job started (checking the plan took the time): "
                       "nothing was started; run it again with a later --stop-after")
NOTHING_BY_END = ("nothing started: by its estimate every job left would end past --end-by, so no report is written; "
                  "a command with the time for them runs them")


@hashed_once()  # its jobs' done-checks, run as it shows and runs them, read each source text once
def reproduce(plan: list[Job], *, title: str, minutes: Callable[[Job], float] | None, timing: str, jobs: int,
              dry_run: bool, report_only: bool, report: list[str], log_dir: Path,
              after: Callable[[dict[str, float]], None] | None = None, rows: dict[str, set[str]] | None = None,
              stop_after: float | None = None, end_by: float | None = None) -> int:
    """`plan` (its jobs), their report (scripts/table2.py's arguments), `after` (what the plan writes beside it, given
    the wall seconds of the jobs run now) and the exit status: 0, 1 when a job failed (its error line printed),
    128 + the signal when stopped (finished jobs kept). `minutes`: each job's estimate (None: the plan has none); `rows` and
    `stop_after`: as `show` takes them, and the jobs are stopped `stop_after` minutes in (a long job part-way: its
    checkpoint stays for the next run to resume). With `end_by` (seconds since the epoch: the stop of a caller that
    stops this command itself on a machine that keeps no checkpoint, scripts/gpu.py's), a job whose estimate ends past
    it, or past the stop, is not started (``jobs.run_jobs``' end_by); where none could start, a line says so and no
    report is written (status 0: nothing failed)."""
    report_line = f"[report] {script_command('table2', *report)}"
    if report_only:  # the report alone: no job runs, so the plan is not shown
        print(f"{title}\n{report_line}")
        if dry_run:
            return 0
    else:
        show(plan, title, minutes, timing, jobs, [report_line], rows=rows, stop_after=stop_after)
        todo = wanted(plan, {s.name for s in plan if s.finished})
        try:
            check_task_files(tasks_to_run(todo), default_data_mirror())
            if dry_run:  # what the run would refuse first: its outputs (run_jobs checks them before the first job)
                check_plan((s.argv for s in todo), REPO)
        except (FileNotFoundError, LinformerError) as err:
            if not dry_run:
                raise  # before the first job, not at the finetuning that needs the data after its pretraining
            print(f"warning: the run would stop here: {err}", file=sys.stderr)
    if dry_run:
        return 0
    times: dict[str, float] = {}
    if not report_only:
        # one runner per plan: a second would start the same jobs, each refused by its run's lock only after
        # truncating the first runner's log of it
        lock = RunLock(log_dir, otherwise="give this one another --under", tidy=True)  # a refused plan writes nothing
        lock.acquire()
        try:
            t0 = time.perf_counter()
            deadline = None if stop_after is None else time.monotonic() + 60 * stop_after
            # the not-start rule only where the caller asks for it (--end-by): locally a stop ends a long job
            # part-way and the next run resumes it from its checkpoint
            ends = None if end_by is None else min(t for t in (deadline, time.monotonic() + end_by - time.time())
                                                   if t is not None)
            rc, times = run(plan, jobs, log_dir, deadline=deadline, end_by=ends, minutes=minutes)
        finally:
            lock.release()
        if rc or times is None:  # failed or stopped; or no job started, which its line said
            return rc
        times["total (jobs run now)"] = round(time.perf_counter() - t0, 1)
        print(f"jobs done in {(time.perf_counter() - t0) / 60:.1f} min")
    rc = write_report(report)
    if rc == 0 and after is not None:
        after(times)
    return rc


def write_report(report: list[str]) -> int:
    """scripts/table2.py with the arguments `report`, in a process of its own; the exit status: the report's, or 128
    + the signal where a signal killed it (``child_status``) or stopped the plan: a SIGTERM (SIGHUP) stops the plan as
    Ctrl-C does, its report's process with it, with a `stopped:` line, as while its jobs run."""
    try:
        with sigterm_interrupts():
            rc = subprocess.run([sys.executable, script("table2", REPO), *report], cwd=REPO, check=False,
                                **dies_with_this_process()).returncode
    except KeyboardInterrupt as err:
        print(f"stopped: stopped by {signal_words(getattr(err, 'signum', signal.SIGINT))} while writing the report: "
              f"the finished jobs are kept; {report_again()}", file=sys.stderr)
        return interrupt_status(err)
    if rc < 0:
        print(f"error: the report (scripts/table2.py) was {exit_words(rc)}: {report_again()}", file=sys.stderr)
    return child_status(rc)


def report_again() -> str:
    """How to write a stopped or killed report: the command this process was started as with --report-only
    (``locations.started_script``), since the same command without it first runs the jobs it plans then, which
    after a `--rows N` slice are the next N rows not complete (a whole slice of GPU time before any table)."""
    started = started_script()
    if started is None:  # Python called the plan: no command line to repeat
        return "write it alone with the plan's command and --report-only"
    given = sys.argv[1:]
    if "--report-only" in given:
        return f"write it with the same command: {script_command(started.stem, *given)}"
    return (f"write it alone with {script_command(started.stem, *given, '--report-only')} (the same command without "
            "--report-only would first run the jobs left: with --rows N, the next N rows not complete)")


def tasks_to_run(todo: list[Job]) -> list[str]:
    """The tasks that the jobs `todo` (a plan's jobs still to run) finetune on from the data mirror (a job that names
    its own task.data_dir reads it from there, and says so itself)."""
    tasks = [a.split("=", 1)[1] for job in todo if not any(a.startswith("task.data_dir=") for a in job.argv)
             for a in job.argv if a.startswith("task=")]
    return list(dict.fromkeys(tasks))


def show(plan: list[Job], title: str, minutes: Callable[[Job], float] | None, timing: str, jobs: int,
         then: list[str] = (), again: str = "An interrupted run resumes: run the same command again.",
         rows: dict[str, set[str]] | None = None, stop_after: float | None = None) -> None:
    """Print a plan: each job's state (done, to do with its estimate, or not needed) and command line, the lines of
    what follows it (`then`), how many jobs are left and the minutes they take by `schedule`, and what running it
    again does (`again`). With `rows` (a row's name -> the names of its final jobs): the minutes of each row alone
    (`--only ROW` on a fresh machine), whether they fit in `stop_after` minutes, and when a command stopped then ends
    (``jobs.stopped_by``: the stop's wait after it)."""
    todo = wanted(plan, {s.name for s in plan if s.finished})
    print(title)
    for s in plan:
        estimate = f" ~{minutes(s):g} min" if minutes else ""
        state = "done" if s.finished else f"todo{estimate}" if s in todo else "not needed: what needs it is done"
        print(f"[{state}] {s.name}: {shell_command('python', *s.argv[1:])}")
        if s in todo and s.damage:  # its record is there, but not what it records
            print(f"  not done: {s.damage}")
    if then:
        print(*then, sep="\n")
    if minutes and rows:
        print("", *row_lines(todo, minutes, jobs, rows, stop_after), sep="\n")
    left = f"{jobs} at a time ({timing})" if not minutes else \
        f"{_minutes_text(span(todo, minutes, jobs))} with {jobs} at a time, each job after what it needs ({timing})"
    print(f"\n{len(todo)} of {len(plan)} jobs left: {left}. {again}")


def row_lines(todo: list[Job], minutes: Callable[[Job], float], jobs: int, rows: dict[str, set[str]],
              stop_after: float | None) -> list[str]:
    """`show`'s lines on the rows: each row's minutes alone, whether it fits in `stop_after` minutes, and when the
    jobs stopped then have ended (``jobs.stopped_by``)."""
    lines = [_row_line(row, needed(todo, names), minutes, jobs, stop_after) for row, names in rows.items()]
    if stop_after is not None:
        lines.append(f"--stop-after {stop_after:g}: a row fits when its jobs end by then; the jobs running then are "
                     f"stopped and have ended by {stopped_by(stop_after):g} min (the stop's wait for their "
                     "checkpoints): leave the command that long")
    return lines


def _minutes_text(total: float) -> str:
    return "under a minute" if total < 1 else f"about {total:.0f} min"


def _row_line(row: str, todo: list[Job], minutes: Callable[[Job], float], jobs: int, stop_after: float | None) -> str:
    if not todo:
        return f"[row] {row}: done"
    total = span(todo, minutes, jobs)
    fits = "" if stop_after is None else \
        f": {'fits' if total <= stop_after else 'does not fit'} --stop-after {stop_after:g}"
    return f"[row] {row}: {len(todo)} jobs left, about {total:.1f} min alone (--only {row}){fits}"


def needed(todo: list[Job], names: set[str]) -> list[Job]:
    """The jobs of `todo` named in `names` and those they need, directly or through another, in todo's order."""
    by_name = {s.name: s for s in todo}
    want, grow = set(), [n for n in names if n in by_name]
    while grow:
        name = grow.pop()
        if name not in want:
            want.add(name)
            grow += [n for n in by_name[name].needs if n in by_name]
    return [s for s in todo if s.name in want]


def schedule(todo: list[Job], minutes: Callable[[Job], float], jobs: int) -> dict[str, float]:
    """Each job's estimated end (minutes from the start) when the runner runs `todo` as linformer.jobs does: at most
    `jobs` at a time, a job once what it needs (in `todo`; the rest is done) has ended, the ready ones in todo's
    order. Waiting on a pretraining or a transfer counts, so the span is not the minutes' sum over `jobs`."""
    inside = {s.name for s in todo}
    ends: dict[str, float] = {}
    waiting, running, now = list(todo), [], 0.0
    while waiting:
        ready = [s for s in waiting if all(n not in inside or ends.get(n, now + 1) <= now for n in s.needs)]
        for s in ready[: jobs - len(running)]:
            waiting.remove(s)
            ends[s.name] = now + minutes(s)
            running.append(ends[s.name])
        if not running:
            break  # jobs waiting on jobs that cannot run: the runner refuses this plan itself
        now = min(running)
        running = [end for end in running if end > now]
    return ends


def span(todo: list[Job], minutes: Callable[[Job], float], jobs: int) -> float:
    """The estimated minutes from the first job's start to the last one's end (`schedule`)."""
    return max(schedule(todo, minutes, jobs).values(), default=0.0)


def first_end(todo: list[Job], names: set[str], minutes: Callable[[Job], float], jobs: int) -> float:
    """The estimated minutes until the first of the jobs `names` ends when the runner runs them and what they need,
    `jobs` at a time (`schedule`): the first of several runs side by side, not the first in the plan's order."""
    ends = schedule(needed(todo, names), minutes, jobs)
    return min((ends[n] for n in names if n in ends), default=0.0)


def chosen_rows(given: str | None, valid: list[str]) -> list[str] | None:
    """--only ROW[,ROW...] as a list of row names (None without it); ConfigError naming the valid ones."""
    if given is None:
        return None
    names = [name.strip() for name in given.split(",") if name.strip()]
    unknown = [name for name in names if name not in valid]
    if unknown or not names:
        what = f"no row {unknown[0]!r}" if unknown else "no row named"
        raise ConfigError(f"--only {given}: {what}; the rows are {', '.join(valid)}")
    return list(dict.fromkeys(names))


def run(plan: list[Job], jobs: int, log_dir: Path, stopped: str = STOPPED, deadline: float | None = None,
        end_by: float | None = None, minutes: Callable[[Job], float] | None = None
        ) -> tuple[int, dict[str, float] | None]:
    """Run a plan's jobs: (0, wall seconds per job run), or (its status, {}) after a failed job's error line
    (``JobFailed.status``: the failed job's own, 2 where it refused its start, as a sweep ends), or
    (128 + the signal, {}) when stopped, by a signal (Ctrl-C 130, SIGTERM 143) or at `deadline` (time.monotonic(),
    as by the SIGTERM its jobs were stopped with) (its finished jobs kept; `stopped` says what running it again
    does; a deadline that came before the first job started says that nothing was started); `end_by` and `minutes`:
    run_jobs' (a job whose estimate ends past end_by is not started): (0, None) where that left no job started, which
    one line says."""
    try:
        return 0, run_jobs(plan, jobs=jobs, cwd=REPO, log_dir=log_dir, deadline=deadline, end_by=end_by,
                           minutes=minutes)
    except KeyboardInterrupt as err:
        print(stopped, file=sys.stderr)
        return interrupt_status(err), {}
    except JobsStopped as err:
        print(NOTHING_BY_DEADLINE if err.started_none else stopped, file=sys.stderr)
        return stopped_status(signal.SIGTERM), {}
    except NoneStarted:
        print(NOTHING_BY_END, file=sys.stderr)
        return 0, None
    except JobFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return err.status, {}


def plan_arguments(ap, profiles=None, default: str | None = None, profile_help: str = "") -> None:
    """The options every resumable reproduction takes: --profile (when it has profiles), --dry-run, --jobs,
    --report-only, --under."""
    if profiles is not None:
        ap.add_argument("--profile", choices=sorted(profiles), default=default, help=profile_help)
    ap.add_argument("--under", type=folder, default=None, metavar="DIR",
                    help="write data, runs, records and the report under DIR instead of the checkout (a rehearsal)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (with time estimates where the plan has them) and exit")
    ap.add_argument("--jobs", type=int, default=None, help="jobs run at once (default: the plan's or profile's)")
    ap.add_argument("--report-only", action="store_true", help="write the table from the runs finished so far")


def row_arguments(ap, what: str) -> None:
    """The options of a plan made of rows (`what`: how its rows are named): --only and --stop-after."""
    ap.add_argument("--only", default=None, metavar="ROW[,ROW...]",
                    help=f"run only these rows' jobs and what they need ({what}; a dry run lists them)")
    ap.add_argument("--stop-after", type=positive_minutes, default=None, metavar="MIN",
                    help="stop the jobs MIN minutes in (SIGTERM: a running job saves its checkpoint and the next run "
                         "resumes it; finished jobs are kept); a dry run says which rows fit in MIN minutes by the "
                         "estimates")
    ap.add_argument("--end-by", type=float, default=None, metavar="EPOCH_S",
                    help="start no job whose estimate ends past this time (seconds since the epoch), nor past "
                         "--stop-after: the stop of a caller that stops this command itself on a machine that keeps no "
                         "checkpoint (scripts/gpu.py --stop-after)")



def jobs_of(given: int | None, profile_jobs: int) -> int:
    """--jobs, or the profile's; ConfigError below 1."""
    jobs = profile_jobs if given is None else given
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: at least one job must run at a time")
    return jobs
