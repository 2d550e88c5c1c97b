"""The front end of the resumable reproductions (scripts/reproduce_mini.py, reproduce_pretrained.py,
reproduce_scratch.py): print the plan with what is done and the minutes left, run the stages left, then write the
report in a process of its own."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ..data.io import repo_root
from ..errors import ConfigError
from ..stages import STOPPED, Stage, StageFailed, run_stages, wanted

REPO = repo_root()


def reproduce(stages: list[Stage], *, title: str, minutes: Callable[[Stage], float] | None, timing: str, jobs: int,
              dry_run: bool, report_only: bool, report: list[str], log_dir: Path,
              after: Callable[[dict[str, float]], None] | None = None) -> int:
    """`stages` (a plan), their report (scripts/table2.py's arguments), `after` (what the plan writes beside it, given
    the wall seconds of the stages run now) and the exit status: 0, 1 when a stage failed (its error line printed),
    130 when stopped (finished stages kept). `minutes`: each stage's estimate (None: the plan has none)."""
    todo = wanted(stages, {s.name for s in stages if s.finished})
    print(title)
    for s in stages:
        estimate = f" ~{minutes(s):g} min" if minutes else ""
        state = "done" if s.finished else f"todo{estimate}" if s in todo else "not needed: what needs it is done"
        print(f"[{state}] {s.name}: {shlex.join(['python', *s.argv[1:]])}")
    print(f"[report] python scripts/table2.py {shlex.join(report)}")
    left = f"about {sum(map(minutes, todo)) / jobs:.0f} min with {jobs} at a time ({timing})" if minutes else \
        f"{jobs} at a time ({timing})"
    print(f"\n{len(todo)} of {len(stages)} stages left: {left}. An interrupted run resumes: run the same command again.")
    if dry_run:
        return 0
    times: dict[str, float] = {}
    if not report_only:
        t0 = time.perf_counter()
        rc, times = run(stages, jobs, log_dir)
        if rc:
            return rc
        times["total (stages run now)"] = round(time.perf_counter() - t0, 1)
        print(f"stages done in {(time.perf_counter() - t0) / 60:.1f} min")
    rc = subprocess.run([sys.executable, "scripts/table2.py", *report], cwd=REPO, check=False).returncode
    if rc == 0 and after is not None:
        after(times)
    return rc


def run(stages: list[Stage], jobs: int, log_dir: Path) -> tuple[int, dict[str, float]]:
    """Run a plan's stages: (0, wall seconds per stage run), or (1, {}) after a failed stage's error line, or
    (130, {}) when stopped (its finished stages kept)."""
    try:
        return 0, run_stages(stages, jobs=jobs, cwd=REPO, log_dir=log_dir)
    except KeyboardInterrupt:
        print(STOPPED, file=sys.stderr)
        return 130, {}
    except StageFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1, {}


def plan_arguments(ap, profiles=None, default: str | None = None, profile_help: str = "") -> None:
    """The options every resumable reproduction takes: --profile (when it has profiles), --dry-run, --jobs,
    --report-only, --under."""
    if profiles is not None:
        ap.add_argument("--profile", choices=sorted(profiles), default=default, help=profile_help)
    ap.add_argument("--under", type=Path, default=None, metavar="DIR",
                    help="write data, runs, records and the report under DIR instead of the checkout (a rehearsal)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan with time estimates and exit")
    ap.add_argument("--jobs", type=int, default=None, help="stages run at once (default: the plan's or profile's)")
    ap.add_argument("--report-only", action="store_true", help="write the table from the runs finished so far")


def jobs_of(given: int | None, profile_jobs: int) -> int:
    """--jobs, or the profile's; ConfigError below 1."""
    jobs = profile_jobs if given is None else given
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: at least one stage must run at a time")
    return jobs
