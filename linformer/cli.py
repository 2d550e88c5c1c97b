"""The one CLI wrapper of every script: user-fixable errors become one `error: ...` line and exit status 2.

Hydra scripts use ``@hydra_main("pretrain")`` (``linformer.hydra_start``); argparse scripts wrap their body in
``with cli_errors():`` and parse with this module's ``ArgumentParser``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import os
import re
import signal
import sys
import threading
from typing import NoReturn

from .configs import compose  # noqa: F401  (linformer.cli.compose: the name README.md and docs/guide.md give)
from .data.workers import launcher_gone
from .errors import ConfigError, LinformerError, PeerFailed, Preempted, did_you_mean, first_line, stopped_status
from .files.locations import script_home, started_script
from .files.names import NAME_MAX_BYTES
from .shell import scripts_named_here
from .signals import (
    Interrupted,
    command,
    in_command,
    interrupt_status,
    signal_words,
    sigterm_ignored_at_teardown,
    sigterm_interrupts,
)

EXIT_USER_ERROR = 2


@contextlib.contextmanager
def cli_errors(resumes: bool = False, work: bool = True):
    """Run a script body: user-fixable errors print `error: <message>` on stderr and exit 2, without a traceback.

    A missing file, a path without permission, a read-only file system, a path in the way or a full disk is
    user-fixable too (_USER_OS_ERRORS); every other exception keeps its traceback. Ctrl-C and SIGTERM (SIGHUP, taken
    as it), where nothing inside turns them into a stop of its own (a run's checkpointed stop), are one `stopped:`
    line and 128 + the signal (``stopped_line``); a standard output whose reader went away (``| head``) ends it
    quietly, with SIGPIPE's 141 (``_output_closed``); `resumes`: the command run again goes on where it stopped (a
    run's last checkpoint), else it starts over. Under torchrun or accelerate launch the processes speak as one
    (``quiet_other_ranks``, ``_last_line``). `work`: the block is the command's work, which starts with the model's
    classes registered (``models_registered``) and whose end is the work's (``work_ended``); False for a block
    around it (a Hydra script's reading of its command line, a sweep's run of its jobs).
    """
    quiet_other_ranks()
    streams_never_raise()
    _said.clear()  # a command starts: a line before it was not the process's last
    try:
        with command(), sigterm_interrupts(command_wide=True):
            if work:
                models_registered()
            yield
    except Preempted as stop:  # a SIGTERM after another process failed is the launcher's: that one says why
        _last_line(f"stopped: {stop}", stop.exit_code, cause=not stopped_for_a_peer(stop), notes=_notes(stop))
    except KeyboardInterrupt as stop:  # start-up, a report's work, a second Ctrl-C
        _last_line(stopped_line(stop, resumes), exit_status(stop), cause=not stopped_for_a_peer(stop),
                   notes=_notes(stop))
    except Exception as err:
        if output_closed(err):
            _output_closed()
        message = _user_message(err)
        if message is None:  # its traceback follows; the others learn its first line (run.json records it)
            rank = process_rank()
            tell_peers(f"{'' if rank == 0 else f'[rank {rank}] '}{first_line(err, named=True)}")
            raise
        _last_line(f"error: {message}", EXIT_USER_ERROR, cause=not isinstance(err, PeerFailed), notes=_notes(err))
    finally:
        if work:
            work_ended()


_ended: list[bool] = []  # set once a command's work has ended (``work_ended``)


def work_ended() -> None:
    """The command's work is over (its body ended, by its last line or not): a signal outside a body from now on
    interrupts the command's ending, not its start, and ``stop_while_starting``'s line says so; and the interpreter's
    teardown ignores SIGTERM, so that the process exits with the status the command ended with
    (``signals.sigterm_ignored_at_teardown``)."""
    if not _ended:
        _ended.append(True)
        sigterm_ignored_at_teardown()


def _notes(err: BaseException) -> list[str]:
    """`err`'s notes (PEP 678, ``atomic.add_note``: what else failed while it unwound, a full disk recording a partial
    output), each printed on a line after its last line, as Python's traceback prints them under the error."""
    return [str(note) for note in getattr(err, "__notes__", ()) or ()]


def models_registered() -> None:
    """linformer.modeling imported: its import registers the model with transformers' Auto classes, which a command's
    loads need, the data layer's too (``AutoTokenizer`` on a model folder reads its config's model_type). The
    package's import does it, except in a script's process, where it waits for the command's body (``cli_errors``):
    a --help or a usage error answers without torch and transformers, which take seconds to import (10-20 s under
    load). By name: the modeling package sits above this module (its code uses the CLI's helpers)."""
    importlib.import_module(f"{__package__}.modeling")


def stop_while_starting() -> None:
    """From now on, Ctrl-C and SIGTERM (and SIGHUP, taken as it) outside a command's body (``cli_errors``) end the
    process with one `stopped:` line and 128 + the signal, not a traceback: a script's start-up imports torch and
    transformers for seconds, when a user who sees a mistyped command presses Ctrl-C, and has done nothing a stop
    must undo. Inside the body its own handling comes first (cli_errors': SIGTERM raises KeyboardInterrupt, as
    Ctrl-C does, which this handler raises there too). After the body (``work_ended``) the line says the command was
    ending; after the command's last line (its `error:` or `stopped:` line) it ends the process at once with that
    line's status, saying nothing more (``exit_as_said``). Set by the package's import in a script's process
    (``run_from_a_script``); in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        return
    _said.clear()

    def stop(signum, _frame):
        if in_command():
            raise KeyboardInterrupt if signum == signal.SIGINT else Interrupted(signum)
        if _said:  # its last line is out: a second line would contradict it (``exit_as_said``)
            exit_as_said()
        if signum == signal.SIGTERM and peer_failed():  # the launcher's, for a process that failed and said so
            _ended_as(Ended(stopped_status(signum), ""))
        when = "as the command was ending, after its work" if _ended else "while the command was starting"
        line = f"stopped: interrupted by {signal_words(signum)} {when}."
        if process_rank() == 0:  # under torchrun every process starts alike: one line says it
            with contextlib.suppress(OSError):  # a terminal that closed (SIGHUP)
                print(line, file=sys.stderr, flush=True)
        _ended_as(Ended(stopped_status(signum), line))

    stop.command_wide = True  # a block's own stop may take SIGTERM over (signals.sigterm_unclaimed)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if not (signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN):  # nohup's stays
            signal.signal(signum, stop)


_said: list[int] = []  # the exit status of the process's last line, once printed (``_ended_as``)


def _ended_as(end: Ended) -> NoReturn:
    """Raise `end`, the exit of a command that printed its last line; where no command encloses it (a sweep's job's
    line is not the sweep's last), the process's last line is out from now on (``exit_as_said``)."""
    if not in_command():
        said(end.code)
    raise end


def said(code: int) -> None:
    """The process printed its last line and ends with `code` (``exit_as_said``): a sweep's `error:` line, which it
    prints itself."""
    _said[:] = [code]


def exit_as_said() -> NoReturn:
    """End the process now with the status of the last line it printed (``said``), which said how the command
    ended: its outputs and run.json were written, its trackers finished, before that line. A signal from then on
    (torchrun's SIGTERM to every process once one ended: a peer killed, or this one's error) added a `stopped:` line
    contradicting it and turned the status into 128 + the signal, after the seconds of the interpreter's teardown
    the launcher waits for. Streams flushed first: os._exit writes nothing buffered."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed terminal (SIGHUP), a stream replaced by a test
            stream.flush()
    os._exit(_said[-1])


def stopped_line(stop: KeyboardInterrupt, resumes: bool) -> str:
    """The last line of a command a signal stopped (a KeyboardInterrupt: Ctrl-C, or ``signals.Interrupted``), naming
    the signal and what running the same command again does: go on where it stopped, or start over."""
    again = "Run the same command again to go on." if resumes else "Run the same command again: it starts over."
    return f"stopped: interrupted by {signal_words(getattr(stop, 'signum', signal.SIGINT))}. {again}"


def closed_pipe(stream) -> bool:
    """Whether `stream` writes to a pipe whose reader has gone (``| head`` read the lines it wanted and exited): its
    next write would raise BrokenPipeError, so the work that writes it can stop now. poll() reports POLLERR on such a
    pipe's end. False for a file, a terminal, a stream with no file descriptor, or where poll() is missing."""
    import select

    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):  # io.BytesIO, a closed stream
        return False
    if not hasattr(select, "poll"):
        return False
    poller = select.poll()
    poller.register(fd, 0)  # no event asked for: POLLERR and POLLHUP are reported anyway
    return any(events & select.POLLERR for _, events in poller.poll(0))


OUTPUT_CLOSED = "its output was closed (the program reading it, | head or a tee, ended)"


def output_closed(err: BaseException) -> bool:
    """Whether `err` is the write to a standard output or error whose reader went away (``closed_pipe``): the end of
    the command asked for (``_output_closed``), as SIGPIPE would end it, not a failure of its work."""
    return isinstance(err, BrokenPipeError) and (closed_pipe(sys.stdout) or closed_pipe(sys.stderr))


def _output_closed() -> NoReturn:
    """The end of a command whose standard output's reader went away (``| head``): quietly, with the status the
    shell gives a process SIGPIPE ends, 128 + 13 (``yes | head -1``'s), as a pipeline's reader expects: the lines it
    wanted were written. Standard output (and standard error where its reader went too: ``2>&1 | head``) then writes
    to /dev/null: the interpreter's last flush would raise again."""
    closed = [s for s in (sys.stderr,) if closed_pipe(s)]
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, *closed):
            os.dup2(devnull, stream.fileno())
        os.close(devnull)
    raise Ended(stopped_status(signal.SIGPIPE), "stopped: standard output was closed")


ESCAPED = "linformer-escaped"  # the codecs error handler of streams_never_raise
_escaped: list[str] = []  # the encodings that could not show a character this process printed


def streams_never_raise() -> None:
    """Stdout and stderr whose encoding cannot show every character (PYTHONIOENCODING=ascii, a cp1252 console, some
    CI) write those as \\x.. escapes instead of raising UnicodeEncodeError: a data, file or run name with a non-ASCII
    letter in a command's last line would otherwise end, with a traceback and exit status 1, a command whose work is
    done. An escaped command does not paste as it is, so the process's last line says so (``_say_escaped``)."""
    import atexit
    import codecs

    try:
        codecs.lookup_error(ESCAPED)
    except LookupError:
        codecs.register_error(ESCAPED, _escape)
        atexit.register(_say_escaped)
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        if hasattr(stream, "reconfigure") and not codecs.lookup(encoding).name.startswith("utf"):
            stream.reconfigure(errors=ESCAPED)


def _escape(err: UnicodeEncodeError) -> tuple[str, int]:
    if err.encoding not in _escaped:
        _escaped.append(err.encoding)
    return err.object[err.start:err.end].encode("ascii", "backslashreplace").decode("ascii"), err.end


def refuse_undecodable_arguments(args: list[str]) -> None:
    """ConfigError naming the first of `args` that holds bytes this process's locale could not decode (a non-ASCII
    path under LC_ALL=C with UTF-8 mode off: Python keeps them as surrogates). Python's own file calls take such a
    path, but the tokenizers library takes paths as UTF-8 text only, so a run would end at its first tokenizer save
    or load (a pretraining run after all its steps): refused before any work."""
    for arg in args:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("ascii", "backslashreplace")
            raise ConfigError(f"{shown}: this locale ({sys.getfilesystemencoding()} file names: LC_ALL/LANG without "
                              "UTF-8, and Python's UTF-8 mode off) cannot decode this argument, and the tokenizers "
                              "library takes a path only as UTF-8 text. Run with PYTHONUTF8=1 (or a UTF-8 locale, "
                              "LC_ALL=C.UTF-8).") from None


def _say_escaped() -> None:
    if _escaped:
        print(f"note: this terminal's encoding ({', '.join(_escaped)}) cannot show some characters above, printed as "
              "\\x.. escapes: a command holding them does not paste as it is. Run with PYTHONIOENCODING=utf-8 (or a "
              "UTF-8 locale) to see them.", file=sys.stderr, flush=True)


def process_rank() -> int:
    """This process's rank among the processes torchrun or accelerate launch started (RANK); 0 for one process."""
    return int(os.environ.get("RANK") or 0)


def process_count() -> int:
    """How many processes torchrun or accelerate launch started (WORLD_SIZE); 1 for one process."""
    return int(os.environ.get("WORLD_SIZE") or 1)


_quieted: list[int] = []  # the rank quiet_other_ranks set up, once per process


def quiet_other_ranks() -> None:
    """Every process of a launch runs the same code on the same settings, so each would log every line and draw every
    progress bar: the main process (rank 0) logs them, the others only errors, prefixed with their rank, and no bar
    (datasets' tokenize and map, transformers' weight loading, the hub's). Set once per process, where every script
    starts (cli_errors); it holds over Hydra's logging set-up, which replaces handlers, not these."""
    rank = process_rank()
    if rank == 0 or _quieted:
        return
    _quieted.append(rank)
    logging.disable(logging.WARNING)  # INFO and WARNING: rank 0 says them
    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()  # the hub's too
    make_record = logging.getLogRecordFactory()

    def ranked(*args, **kwargs) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        record.msg = f"[rank {rank}] {record.msg}"
        return record

    logging.setLogRecordFactory(ranked)


class Ended(SystemExit):
    """The exit of a command that printed its last line (`error: ...`, `stopped: ...`), which it carries: a sweep's
    summary names each failed job's."""

    def __init__(self, code: int, line: str):
        super().__init__(code)
        self.line = line


PEER_WAIT_S = 10  # how long a process waits for rank 0's last line (or another's cause) before printing its own
_POLL_S = 0.05  # the store is asked this often while waiting: its own timed wait logs a C++ warning when it expires


def _last_line(line: str, code: int, cause: bool = True, notes: list[str] = ()) -> NoReturn:
    """Print the line a script ends with (`error: ...`, `stopped: ...`), then its error's `notes` each on a line of its
    own, and exit with `code` (``Ended`` carries the line alone: a sweep's summary gives one line to each job).

    Under torchrun (or accelerate launch, built on it) the processes agree through the launcher's store: rank 0
    prints its line; another process prints its own, prefixed with its rank, only where it differs from rank 0's
    (an error of that process alone), and after rank 0's (whose line would otherwise be cut short: the launcher
    stops the others once one exits). A process with a cause of its own puts its line in the store (``peer_cause``:
    rank 0 records it in run.json) and leaves the run's collectives at once (``_release_peers``), so that a process
    waiting in one learns now, not when this one exits, that it failed. A line that is not the cause
    (``cause=False``: PeerFailed, another process failed) is printed only where no process gave one within
    PEER_WAIT_S."""
    rank, peers = process_rank(), _launch_store()
    shown, line = line, "\n".join([line, *notes])
    if peers is None:
        print(line if rank == 0 else f"[rank {rank}] {line}", file=sys.stderr, flush=True)
        _ended_as(Ended(code, shown))
    if not in_command():  # the launcher's SIGTERM while this process waits for another's line ends it quietly, with
        said(code)        # this status (``exit_as_said``): it is no stop of this command's
    if cause:
        if rank == 0:
            print(line, file=sys.stderr, flush=True)
            tell_peers(shown)
            peers.set("rank0", line)
        else:
            tell_peers(f"[rank {rank}] {shown}")
            if _wait_for(peers, "rank0") != line:
                print(f"[rank {rank}] {line}", file=sys.stderr, flush=True)
            peers.set("shown", "1")
        _ended_as(Ended(code, shown))
    if rank == 0:
        peers.set("rank0", line)
    if peer_cause() is None:
        print(line if rank == 0 else f"[rank {rank}] {line}", file=sys.stderr, flush=True)
    elif rank == 0:  # the process with the cause prints it after this one's line: this one waits until it has
        _wait_for(peers, "shown")
    _ended_as(Ended(code, shown))


def tell_peers(line: str) -> None:
    """Under torchrun, give the other processes this process's cause of the run's end (its last line, or an
    unexpected error's first line, prefixed with its rank where it is not rank 0) and leave the run's collectives,
    so that a process waiting in one raises PeerFailed now, and rank 0 records this line in run.json. Nothing for one
    process."""
    peers = _launch_store()
    if peers is None:
        return
    _told.append(line)
    peers.set("cause", line)
    _release_peers()


_told: list[str] = []  # this process's own cause, once it gave it (``tell_peers``)


def peer_failed() -> bool:
    """Whether another process of this launch ended the run by a failure and gave its line (``tell_peers``): an
    `error:` line or an unexpected error's first line, not a `stopped:` one. Then the launcher's SIGTERM, which it
    sends every process once one ended, is no stop of this one's: it stops without a line of its own. Read now,
    not waited for."""
    if _told:
        return False
    peers = _launch_store()
    cause = None if peers is None else _wait_for(peers, "cause", 0)
    return cause is not None and re.match(r"(\[rank \d+\] )?stopped:", cause) is None


def stopped_for_a_peer(stop: BaseException) -> bool:
    """Whether `stop` (a Preempted or KeyboardInterrupt) is the launcher's SIGTERM after another process failed
    (``peer_failed``)."""
    signum = stop.exit_code - 128 if isinstance(stop, Preempted) else getattr(stop, "signum", None)
    return signum == signal.SIGTERM and peer_failed()


def _release_peers() -> None:
    """Leave torch.distributed's process group: a collective another process waits in then fails at once (gloo's
    "Connection closed by peer"), where it would otherwise wait until this process exits, which waits for that one's
    line (``_last_line``)."""
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


_causes: list[str | None] = []  # peer_cause's answer, once found: a process asks for it twice (record, last line)


def peer_cause(wait: bool = True) -> str | None:
    """The line the process that ended the run gave (``tell_peers``), waited for up to PEER_WAIT_S (`wait`), else
    read as it is now (a process that left the collectives gave its line before); None where none came (a process
    killed, SIGKILL or the OOM killer, says nothing) or where there is no launcher's store. The answer holds for the
    rest of the process."""
    if not _causes:
        peers = _launch_store()
        if peers is None:
            return None
        _causes.append(_wait_for(peers, "cause", PEER_WAIT_S if wait else 0))
    return _causes[0]


def launched_together() -> bool:
    """Whether this process can hear the others' causes (``peer_cause``): a launcher's store is reachable."""
    return _launch_store() is not None


def _launch_store():
    """The key-value store of this launch (torchrun's, at MASTER_ADDR:MASTER_PORT), keyed for this attempt of it;
    None for one process, or where it cannot be reached (another launcher), or where the launcher that holds it died
    (``launcher_gone``: each connection would wait PEER_WAIT_S for it, logging c10d's timeouts with their stacks)."""
    if process_count() <= 1 or "MASTER_ADDR" not in os.environ or launcher_gone():
        return None
    try:
        import datetime

        import torch.distributed as dist

        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=datetime.timedelta(seconds=PEER_WAIT_S))
        attempt = f"{os.environ.get('TORCHELASTIC_RUN_ID', '')}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', 0)}"
        return dist.PrefixStore(f"linformer/last_line/{attempt}/", store)
    except Exception:  # no store there: every process prints its own line
        return None


def _wait_for(store, key: str, seconds: float | None = None) -> str | None:
    """The store's value of `key` as soon as a process set it, or None after `seconds` (PEER_WAIT_S). The store is
    polled: its own timed wait prints c10d's "waitForInput ... timeout" warnings when it expires, an expected end
    here."""
    import time

    deadline = time.monotonic() + (PEER_WAIT_S if seconds is None else seconds)
    try:
        while not store.check([key]):
            if time.monotonic() >= deadline:
                return None
            time.sleep(_POLL_S)
        return store.get(key).decode()
    except Exception:  # the store went away with its launcher
        return None


def _user_message(err: BaseException) -> str | None:
    """The one line a user-fixable error prints (cli_errors), or None for an error that keeps its traceback."""
    if isinstance(err, (LinformerError, FileNotFoundError)):
        return str(err)
    if isinstance(err, PermissionError):
        return f"permission denied: {err.filename or err}: choose an output path you can write, or fix its permissions."
    if isinstance(err, OSError) and err.errno in _USER_OS_ERRORS:
        return _USER_OS_ERRORS[err.errno].format(path=err.filename or "a file")
    return None


def exit_status(err: BaseException) -> int:
    """The exit status a script ends with when `err` ends it: cli_errors's (a stop 128 + its signal, a user-fixable
    error EXIT_USER_ERROR), else 1, as Python exits after a traceback. The trackers record a run's end with it."""
    if isinstance(err, Preempted):
        return err.exit_code
    if isinstance(err, KeyboardInterrupt):
        return interrupt_status(err)
    if isinstance(err, SystemExit):
        return err.code if isinstance(err.code, int) else int(err.code is not None)
    return EXIT_USER_ERROR if _user_message(err) is not None else 1


# OS errors on paths the user chose: one line naming the path, not a traceback
_USER_OS_ERRORS = {
    errno.ENOSPC: "no space left on device writing {path}: free some space and run the same command again.",
    errno.EDQUOT: "disk quota exceeded writing {path}: free some space in your quota and run the same command again.",
    errno.EFBIG: "{path} would be larger than its file system or the file-size limit (ulimit -f) allows: write to a "
                 "file system that takes large files, or raise the limit, and run the same command again.",
    errno.EROFS: "{path} is on a read-only file system: choose an output path you can write.",
    errno.EEXIST: "{path} already exists and is in the way: move it, or choose another path.",
    errno.ENOTDIR: "{path}: part of this path is a file, not a folder: choose another path.",
    errno.EISDIR: "{path} is a folder where a file was expected: choose another path.",
    errno.ENAMETOOLONG: f"{{path}}: a name in this path is longer than the file system allows ({NAME_MAX_BYTES} "
                        "bytes): choose a shorter one (run_name, or what the default name is made of).",
}


def run_from_a_script() -> bool:
    """Whether this process is one of the commands (``scripts/<name>.py``, torchrun's worker of one included), so
    that running its command line again resumes the run; not Python code calling the stage's function itself: a
    notebook's kernel (its argv is the kernel launcher's, ipykernel_launcher.py -f ...), a REPL (argv[0] ''), a
    user's own script in a scripts/ folder of theirs (a command marks itself: ``locations.started_script``)."""
    return started_script() is not None


def names_script(name: str) -> bool:
    """Whether advice may name scripts/<name>.py as a command to paste: this process is a command
    (``run_from_a_script``) and <name>.py is found beside it or in the clone's scripts/ (``locations.script_home``);
    a command's script copied into a folder of its own over a wheel has no such script to name, so its advice is
    the Python API's, as Python code calling the package gets."""
    return run_from_a_script() and script_home(name) is not None


class ArgumentParser(argparse.ArgumentParser):
    """argparse for the scripts that take flags: a mistake is one `error:` line first (an unknown flag with the
    closest known one), then the usage, exit status 2, as every other user error of the project."""

    given: list[str] = []

    def format_help(self) -> str:  # its example commands name the scripts where they are (a clone's over a wheel)
        return scripts_named_here(super().format_help())

    def parse_known_args(self, args=None, namespace=None):
        self.given = list(sys.argv[1:] if args is None else args)  # for error's hints
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        hint = ""
        match = re.match(r"unrecognized arguments: (\S+)", message)
        if match and match.group(1).startswith("-"):
            parsers = [self] + [p for a in self._actions if isinstance(a, argparse._SubParsersAction)
                                for p in a.choices.values()]  # a subcommand's flags are known flags too
            flags = [o for p in parsers for a in p._actions for o in a.option_strings if o.startswith("--")]
            hint = did_you_mean(match.group(1).split("=", 1)[0], flags)
        elif "arguments are required" in message:  # a path starting with "-" was read as a flag
            known = {o for a in self._actions for o in a.option_strings}
            dashed = next((a for a in self.given if a.startswith("-") and a.split("=", 1)[0] not in known), None)
            if dashed is not None:
                hint = f" ({dashed} is read as a flag: a path starting with '-' is given as ./{dashed})"
        print(f"error: {message}{hint}", file=sys.stderr)
        self.print_usage(sys.stderr)
        raise SystemExit(2)
