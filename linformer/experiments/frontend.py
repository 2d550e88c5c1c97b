"""The one front end of the plans (scripts/reproduce_mini.py, reproduce_pretrained.py, reproduce_scratch.py and
scripts/demo.py): print the plan with what is done and the minutes left (`show`, all a dry run does), run the jobs
left (`run`: the exit status 0, 1 after a failed job's error line, 130 when stopped), then, for a reproduction,
write the report in a process of its own (`reproduce`)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..argtypes import folder
from ..cli import shell_command
from ..data.io import default_data_mirror, repo_root
from ..data.tasks import check_task_files
from ..errors import ConfigError, LinformerError
from ..jobs import STOPPED, Job, JobFailed, run_jobs, wanted
from ..output_rule import check_plan
from ..rundir import RunLock

REPO = repo_root()


def reproduce(plan: list[Job], *, title: str, minutes: Callable[[Job], float] | None, timing: str, jobs: int,
              dry_run: bool, report_only: bool, report: list[str], log_dir: Path,
              after: Callable[[dict[str, float]], None] | None = None) -> int:
    """`plan` (its jobs), their report (scripts/table2.py's arguments), `after` (what the plan writes beside it, given
    the wall seconds of the jobs run now) and the exit status: 0, 1 when a job failed (its error line printed),
    130 when stopped (finished jobs kept). `minutes`: each job's estimate (None: the plan has none)."""
    report_line = f"[report] {shell_command('python', 'scripts/table2.py', *report)}"
    if report_only:  # the report alone: no job runs, so the plan is not shown
        print(f"{title}\n{report_line}")
        if dry_run:
            return 0
    else:
        show(plan, title, minutes, timing, jobs, [report_line])
        todo = wanted(plan, {s.name for s in plan if s.finished})
        try:
            check_task_files(tasks_to_run(todo), default_data_mirror())
            if dry_run:  # what the run would refuse first: its outputs (run_jobs checks them before the first job)
                check_plan(s.argv for s in todo)
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
            rc, times = run(plan, jobs, log_dir)
        finally:
            lock.release()
        if rc:
            return rc
        times["total (jobs run now)"] = round(time.perf_counter() - t0, 1)
        print(f"jobs done in {(time.perf_counter() - t0) / 60:.1f} min")
    rc = subprocess.run([sys.executable, "scripts/table2.py", *report], cwd=REPO, check=False).returncode
    if rc == 0 and after is not None:
        after(times)
    return rc


def tasks_to_run(todo: list[Job]) -> list[str]:
    """The tasks that the jobs `todo` (a plan's jobs still to run) finetune on from the data mirror (a job that names
    its own task.data_dir reads it from there, and says so itself)."""
    tasks = [a.split("=", 1)[1] for job in todo if not any(a.startswith("task.data_dir=") for a in job.argv)
             for a in job.argv if a.startswith("task=")]
    return list(dict.fromkeys(tasks))


def show(plan: list[Job], title: str, minutes: Callable[[Job], float] | None, timing: str, jobs: int,
         then: list[str] = (), again: str = "An interrupted run resumes: run the same command again.") -> None:
    """Print a plan: each job's state (done, to do with its estimate, or not needed) and command line, the lines of
    what follows it (`then`), how many jobs are left, and what running it again does (`again`)."""
    todo = wanted(plan, {s.name for s in plan if s.finished})
    print(title)
    for s in plan:
        estimate = f" ~{minutes(s):g} min" if minutes else ""
        state = "done" if s.finished else f"todo{estimate}" if s in todo else "not needed: what needs it is done"
        print(f"[{state}] {s.name}: {shell_command('python', *s.argv[1:])}")
    if then:
        print(*then, sep="\n")
    total = sum(map(minutes, todo)) / jobs if minutes else None
    left = f"{jobs} at a time ({timing})" if total is None else \
        f"{'under a minute' if total < 1 else f'about {total:.0f} min'} with {jobs} at a time ({timing})"
    print(f"\n{len(todo)} of {len(plan)} jobs left: {left}. {again}")


def run(plan: list[Job], jobs: int, log_dir: Path, stopped: str = STOPPED) -> tuple[int, dict[str, float]]:
    """Run a plan's jobs: (0, wall seconds per job run), or (1, {}) after a failed job's error line, or
    (130, {}) when stopped (its finished jobs kept; `stopped` says what running it again does)."""
    try:
        return 0, run_jobs(plan, jobs=jobs, cwd=REPO, log_dir=log_dir)
    except KeyboardInterrupt:
        print(stopped, file=sys.stderr)
        return 130, {}
    except JobFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1, {}


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


def jobs_of(given: int | None, profile_jobs: int) -> int:
    """--jobs, or the profile's; ConfigError below 1."""
    jobs = profile_jobs if given is None else given
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: at least one job must run at a time")
    return jobs
