"""The two ways a command turns a signal into an exception, so that it unwinds (temporaries removed, children
stopped) instead of ending where it stands.

- ``signals_stop``: SIGTERM/SIGINT raise Preempted with a message saying how to resume (corpus preparation, an atomic
  write);
- ``sigterm_interrupts``: SIGTERM raises KeyboardInterrupt, so a command that already handles Ctrl-C (the stage
  runner, the dashboard) handles both alike.

The trainer defers its signals to the next step boundary instead (``linformer.train.core.StopSignal``): a step is
never cut in half, and every rank stops at the same step.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from .errors import Preempted


@contextlib.contextmanager
def signals_stop(message: str, signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> Iterator[None]:
    """Each of ``signals`` inside the block raises Preempted(message) in the main thread, ``{signal}`` in the message
    replaced by its name (later ones are ignored while the block unwinds). An exception raised while unwinding from
    it (a pool timing out, a worker's broken pipe) is reported as that Preempted."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def stop(signum, _frame):
        if not received:
            received.append(signum)
            raise Preempted(message.replace("{signal}", signal.Signals(signum).name), signum)

    previous = {sig: signal.signal(sig, stop) for sig in signals}
    try:
        yield
    except BaseException as err:
        if received and not isinstance(err, Preempted):
            raise Preempted(message.replace("{signal}", signal.Signals(received[0]).name), received[0]) from err
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def sigterm_interrupts():
    """Within the block, SIGTERM raises KeyboardInterrupt, as Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
