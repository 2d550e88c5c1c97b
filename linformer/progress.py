"""The one home of a command's progress on long work (docs/guide.md, "What goes where": progress is on stderr).

On a terminal, long work draws a bar (``progress_bar``); where stderr is a log file (``progress_to_log_file``: nohup,
tee, a job runner, CI) it draws none, whose carriage returns and redraws run into one line, or leave blank ones, in a
file, and the work prints plain lines instead (``progress_said``; ``said_every`` where the loop is another library's), with the third-party bars of the same work off
(``third_party_bars_off``). Only the main process of a launch shows either (``cli.quiet_other_ranks``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from time import monotonic
from typing import TypeVar


def progress_to_log_file() -> bool:
    """Whether progress goes to a log file (stderr not a terminal: nohup, tee, a job runner, CI). There every stage
    prints plain lines (training's ``train.summary.progress_line``, the tokenizer's, the corpus's and a task's
    tokenizing, through ``progress_said``), never a bar."""
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):  # a stream without a file, or closed
        return True


# The size taken for a terminal that reports 0 columns or lines (a pty no one sized: `docker exec -t` or `kubectl
# exec -t` before the client's resize, `ssh -t` or `script` run from a script), as shutil's fallback: columns, lines
FALLBACK_SIZE = (80, 24)


def _reported_size(stream) -> os.terminal_size | None:
    """The size the terminal `stream` writes to reports (0 x 0 where no one sized it), None where it is no terminal
    (a file, a pipe, a stream without a file descriptor, a closed one)."""
    try:
        return os.get_terminal_size(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return None


def _environ_size(name: str) -> int:
    """COLUMNS or LINES where set to a positive whole number (the user's word, as shutil reads it), else 0."""
    try:
        return max(int(os.environ.get(name, "")), 0)
    except ValueError:
        return 0


def terminal_size(stream) -> os.terminal_size | None:
    """The size to lay out output for on the terminal `stream` writes to (None where it is no terminal): COLUMNS and
    LINES where set, else what the terminal reports, and for a dimension it reports as 0 FALLBACK_SIZE's."""
    reported = _reported_size(stream)
    if reported is None:
        return None
    return os.terminal_size((_environ_size("COLUMNS") or reported.columns or FALLBACK_SIZE[0],
                             _environ_size("LINES") or reported.lines or FALLBACK_SIZE[1]))


def progress_bar(show: bool | None = None, **options):
    """A tqdm bar on stderr, as wide as the terminal; `show`: None draws it where stderr is a terminal, not a log file
    (``progress_to_log_file``), the rule of every command; False never; True wherever stderr goes (a caller that
    decided already, or that asks for it). `options` are tqdm's (total, initial, desc, unit). Close it (or use it as
    a context manager) however the work ends, so that a line after it starts on a line of its own.

    It follows the terminal's width as it changes (tqdm's dynamic_ncols), except on a terminal that reports 0
    columns or lines when the bar starts: tqdm would take those as -1 and draw nothing at all (blank lines for a whole
    run), so such a bar keeps ``terminal_size``'s (FALLBACK_SIZE, or COLUMNS and LINES where set)."""
    from tqdm.auto import tqdm

    reported = _reported_size(sys.stderr)
    if reported is None or min(reported) > 0:
        sizing: dict = {"dynamic_ncols": True}
    else:
        size = terminal_size(sys.stderr)
        # one column short of the width, as tqdm's own measure leaves it: a line as wide as the terminal wraps
        sizing = {"ncols": size.columns - 1, "nrows": size.lines}
    return tqdm(file=sys.stderr, disable=progress_to_log_file() if show is None else not show, **sizing, **options)


def progress_said(line: str) -> None:
    """A plain progress line where a bar would be on a terminal: on stderr, flushed, as the bar; not from the other
    processes of a launch, as their log records (``cli.quiet_other_ranks``). Not in the command's log file
    (``logfile.say``'s): that holds what the command made and warned of, the same whether stderr was a terminal."""
    if logging.root.manager.disable >= logging.INFO:
        return
    print(line, file=sys.stderr, flush=True)


T = TypeVar("T")
# How often a log file gets a plain line of work over many items (``progress_over``), in seconds
SAID_EVERY_S = 30.0


def progress_over(items: Sequence[T], desc: str, unit: str, delay: float = 1.0, leave: bool = True,
                  every_s: float = SAID_EVERY_S) -> Iterator[T]:
    """Each of `items`, with the progress of the work over them: on a terminal a bar (``progress_bar``), drawn once
    the work has taken `delay` seconds (a quick pass draws none), left on screen after it where `leave`; in a log
    file (``progress_to_log_file``) a plain line ``<desc>: 120 of 400 <unit> (95 s)`` every `every_s` seconds,
    none for a pass quicker than that."""
    if not progress_to_log_file():
        with progress_bar(total=len(items), desc=desc, unit=f" {unit}", delay=delay, leave=leave) as bar:
            for item in items:
                yield item
                bar.update()
        return
    start = last = monotonic()
    for n, item in enumerate(items, 1):
        yield item
        now = monotonic()
        if now - last >= every_s and n < len(items):
            progress_said(f"{desc}: {n:,} of {len(items):,} {unit} ({now - start:.0f} s)")
            last = now


@contextlib.contextmanager
def every(seconds: float, action: Callable[[], None], name: str) -> Iterator[None]:
    """In the block, `action()` every `seconds` from a thread of this process (named `name`), for work whose loop is
    another's (a library's, a child process's); the thread ends with the block, however the block ends, after the
    call under way."""
    ended = threading.Event()

    def act_each() -> None:
        while not ended.wait(seconds):
            action()

    thread = threading.Thread(target=act_each, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        ended.set()
        thread.join()


def said_every(seconds: float, line: Callable[[], str]):
    """In the block, ``progress_said(line())`` every `seconds` (``every``): the plain lines of work whose loop is
    another library's (``datasets.map``, its worker processes too), which a log file gets in place of its bar. `line`
    reads what the work has done so far."""
    return every(seconds, lambda: progress_said(line()), "progress lines")


@contextlib.contextmanager
def transformers_bars_off(off: bool = True):
    """transformers' bars (weight loading, "Writing model shards") and the hub's off inside the block where `off`, as
    they were after it: where progress goes to a log file (``progress_to_log_file``), where a caller prints its own
    line for the same work (a load's one-line summary), or where the run draws its own bar."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if off:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if off and was:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def third_party_bars_off(off: bool = True):
    """datasets' bars (map, save_to_disk) and transformers' and the hub's off inside the block where `off` (a log
    file: ``progress_to_log_file``), as they were after it; the caller prints its plain lines instead."""
    import datasets

    was = not datasets.are_progress_bars_disabled()
    if off:
        datasets.disable_progress_bars()
    try:
        with transformers_bars_off(off):
            yield
    finally:
        if off and was:
            datasets.enable_progress_bars()
