"""How a command handles a signal, so that it unwinds (temporaries removed, children stopped) instead of ending where
it stands. Every mode installs and restores its handlers through ``handling``:

- stop now, ``signals_stop``: SIGTERM/SIGINT raise Preempted with a message saying how to resume (corpus preparation,
  an atomic write), until the block says its outcome is decided (a rerun of a complete run: it stays complete);
- stop as on Ctrl-C, ``sigterm_interrupts``: SIGTERM raises KeyboardInterrupt, so a command that already handles
  Ctrl-C (the job runner, the dashboard) handles both alike;
- stop at the next step, ``linformer.train.stopping.StopSignal``: the trainer records the signal and stops at a step
  boundary, so a step is never cut in half and every rank stops at the same step;
- finish first, ``signals_finish``: the first SIGTERM is noted and the block goes on (a run's final evaluation and
  saving after its last update, short beside a job runner's wait for it), a second one stops it;
- decided: ``signals_stop`` and ``signals_finish`` hand their block a ``decided`` function; once the command's outcome
  is on disk (a run recorded complete, found complete), a SIGTERM to the block's end is ignored, so that the command
  ends as its record says, never with ``stopped:``;
- ended, ``sigterm_ignored_at_teardown``: once a command has ended, a SIGTERM (or SIGHUP) in the interpreter's
  teardown is ignored, so the process exits with the status the command ended with.

SIGHUP (the terminal closed: an ssh connection dropped, a tmux server killed) is handled wherever SIGTERM is, as
SIGTERM is (``handling``): it is the most common way a run is stopped without being asked to.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from .errors import PartialOutput, Preempted, stopped_status


def signal_words(signum: int) -> str:
    """How a message names a signal: SIGINT as the user's interrupt (Ctrl-C), any other by its name (SIGTERM: a
    scheduler's, or the launcher's stop)."""
    name = signal.Signals(signum).name
    return {signal.SIGINT: f"{name} (Ctrl-C)", signal.SIGHUP: f"{name} (its terminal closed)"}.get(signum, name)


@contextlib.contextmanager
def handling(signals: tuple[int, ...], handler) -> Iterator[bool]:
    """`handler` for each of `signals` inside the block, the previous handlers back after it; with SIGTERM, SIGHUP
    too (``_hung_up``). Only the main thread can install handlers: elsewhere nothing changes (yields False)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    handlers = {sig: handler for sig in signals}
    # under nohup SIGHUP is ignored, as the user asked: it stays so
    if signal.SIGTERM in handlers and signal.SIGHUP not in handlers and signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:
        handlers[signal.SIGHUP] = _hung_up(handler)
    previous = {sig: signal.signal(sig, fn) for sig, fn in handlers.items()}
    try:
        yield True
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _hung_up(handler):
    """`handler` for SIGHUP, the process's terminal streams pointed at /dev/null first: a write to a terminal that is
    gone fails (EIO), and a progress bar's or a log line's would end the checkpointed stop the signal asks for."""
    def hung_up(signum, frame):
        _leave_terminal()
        return handler(signum, frame)

    return hung_up


def _leave_terminal() -> None:
    """Stdin, stdout and stderr that are a terminal read and write /dev/null from now on (a file or a pipe stays)."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, fd)
                os.close(null)


_COMMAND: list[bool] = []  # non-empty while a command's body runs (``command``)


@contextlib.contextmanager
def command() -> Iterator[None]:
    """The block is a command's body (``cli.cli_errors``): the process is the command's, which a second signal while
    a stop unwinds may end at once (``signals_stop``)."""
    _COMMAND.append(True)
    try:
        yield
    finally:
        _COMMAND.pop()


def in_command() -> bool:
    """Whether a command's body is running (``command``)."""
    return bool(_COMMAND)


@contextlib.contextmanager
def signals_stop(message: str, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)
                 ) -> Iterator[Callable[[], None]]:
    """Each of ``signals`` inside the block raises Preempted(message) in the main thread, ``{signal}`` in the message
    replaced by its name. An exception raised while unwinding from it (a pool timing out, a worker's broken pipe) is
    reported as that Preempted. A second signal while the block unwinds ends a command's process at once (inside
    ``command``), for an unwinding that cannot finish (a worker pool whose workers a stop killed mid-operation): the
    children this process forked die with it (``linformer.data.workers``) and the temporaries it leaves are removed by
    the next run (``temporaries.remove_stale_temps``). Outside a command (the package called from a notebook, whose
    kernel is the user's) it raises KeyboardInterrupt instead.

    The block gets a function, ``decided``: called once the command's outcome stands whatever comes (a run found
    complete: there is nothing to stop), a signal from then on to the block's end is ignored, so the command ends as
    it says instead of ``stopped:`` (the lock's release and the last line are all that is left)."""
    received: list[int] = []
    decided: list[bool] = []

    def stop(signum, _frame):
        if decided:
            return
        name = signal_words(signum)
        if received and not _COMMAND:  # the package in a process of the caller's (a notebook): it goes on
            raise KeyboardInterrupt(f"{name} again while stopping")
        if received:
            print(f"stopped: {name} again while stopping: exiting now; the next run removes what this one left.",
                  file=sys.stderr, flush=True)
            os._exit(stopped_status(signum))
        received.append(signum)
        raise Preempted(message.replace("{signal}", name), signum)

    with handling(signals, stop):
        try:
            yield lambda: decided.append(True)
        except BaseException as err:
            # a PartialOutput carries the stop (or error) itself, for output_files to raise once its files are kept
            if received and not isinstance(err, (Preempted, KeyboardInterrupt, PartialOutput)):
                raise Preempted(message.replace("{signal}", signal_words(received[0])), received[0]) from err
            raise


@contextlib.contextmanager
def signals_finish(note: str, message: str, received: bool = False) -> Iterator[Callable[[], None]]:
    """Inside the block the first SIGTERM prints `note` on one line and the block goes on; a second one (or the first
    when `received`: one came before the block) raises Preempted(message), ``{signal}`` replaced by its name in both.
    SIGINT is left to its handler (Ctrl-C stops at once). The block gets ``decided``, as ``signals_stop``'s: once
    called (the outcome is on disk), a SIGTERM to the block's end is ignored."""
    got = [signal.SIGTERM] if received else []
    decided: list[bool] = []

    def finish(signum, _frame):
        if decided:
            return
        name = signal_words(signum)
        if got:
            raise Preempted(message.replace("{signal}", name), signum)
        got.append(signum)
        print(note.replace("{signal}", name), file=sys.stderr, flush=True)

    with handling((signal.SIGTERM,), finish):
        yield lambda: decided.append(True)


def sigterm_ignored_at_teardown() -> None:
    """Ignore SIGTERM (and SIGHUP, taken as it) from the interpreter's teardown on: called once a command has ended
    (its outputs written, its last line printed). The teardown can take seconds (threads joined, modules' clean-up,
    native libraries freed), and a SIGTERM there ended the process as killed by it (-15, no line) though the command
    had ended as it said; the process now ends with the status the command ended with. Ignored rather than handled:
    the teardown's last stage resets a handler written in Python to the default, and a hung teardown still ends on
    SIGKILL. Set as the teardown begins (threading's exit hook, before threads are joined; else atexit), not here:
    a caller in the same process (a test running the script) goes on with its signals as they were."""
    register = getattr(threading, "_register_atexit", None) or atexit.register
    try:
        register(_ignore_sigterm)
    except RuntimeError:  # the teardown has begun already
        _ignore_sigterm()


def _ignore_sigterm() -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)


def exit_words(rc: int) -> str:
    """A child process's exit status (subprocess's returncode) in words: a negative one is the signal that killed it."""
    if rc >= 0:
        return f"exit status {rc}"
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    why = " (kill -9, or the out-of-memory killer)" if -rc == signal.SIGKILL else ""
    return f"killed by {name}{why}"


def child_status(rc: int) -> int:
    """The exit status a command ends with where a child process's ended it: the child's own, or, for a child a
    signal killed (a negative returncode), 128 + the signal, as a shell reports it (sys.exit(-15) ends with 241)."""
    return stopped_status(-rc) if rc < 0 else rc


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt raised by another signal than SIGINT (``sigterm_interrupts``), which it keeps."""

    def __init__(self, signum: int):
        super().__init__(signal_words(signum))
        self.signum = signum


def interrupt_status(err: KeyboardInterrupt) -> int:
    """The exit status of a command `err` stopped: 128 + its signal (SIGINT for a plain Ctrl-C)."""
    return stopped_status(getattr(err, "signum", signal.SIGINT))


@contextlib.contextmanager
def sigterm_interrupts(command_wide: bool = False):
    """Within the block, SIGTERM (and SIGHUP, ``handling``) raises KeyboardInterrupt, as Ctrl-C does: an Interrupted
    that keeps the signal, for the exit status (``interrupt_status``). `command_wide`: the whole command's handling
    (``cli.cli_errors``), which a block's own stop inside it takes over (``sigterm_unclaimed``)."""
    def interrupt(signum, frame):
        raise Interrupted(signum)

    interrupt.command_wide = command_wide
    with handling((signal.SIGTERM,), interrupt):
        yield


def sigterm_unclaimed() -> bool:
    """Whether SIGTERM is left to its default action or to a whole command's handling (``command_wide``: cli_errors',
    a script's start-up), so that a block may install its own stop (``atomic.atomic_dir``'s); a stop of a block's own
    (the trainer's, prepare_corpus's) stays in charge."""
    handler = signal.getsignal(signal.SIGTERM)
    return handler is signal.SIG_DFL or getattr(handler, "command_wide", False)
