"""argparse value types the flag-taking scripts share: a count or a size is checked where argparse reads it, so that a
value no measurement can run with is argparse's one `error: argument --flag: ...` line (linformer.cli.ArgumentParser,
exit 2), not a traceback far from the flag that caused it; a path is read as every command reads one (``path``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from .files.locations import resolve_path


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number of at least `minimum` (a count of examples or blocks, a length, a k)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return whole_number


def _positive(text: str, why: str) -> float:
    """`text` as a positive, finite number, else argparse's error ending in `why`."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # nan fails this too
        raise argparse.ArgumentTypeError(f"{text!r}: {why}")
    return value


def positive_minutes(text: str) -> float:
    """An argparse ``type``: a positive, finite number of minutes (a time limit such as --stop-after)."""
    return _positive(text, "give a positive number of minutes")


def positive_seconds(text: str) -> float:
    """An argparse ``type``: a positive, finite number of seconds (an interval such as the dashboard's --watch)."""
    return _positive(text, "give a positive number of seconds")


def tcp_port(text: str) -> int:
    """An argparse ``type``: a TCP port, 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"{value}: a TCP port is 1 to 65535")
    return value


def path(text: str) -> str:
    """An argparse ``type``: a path as every command reads one (``locations.resolve_path``: "~" expanded, a relative one
    from the repository, as the Hydra commands' paths), so that a script writes and reads the same places from any
    folder, and a quoted "~" never becomes a folder of that name. Not empty: an unset shell variable
    (``--out "$OUT"``) would otherwise name the repository itself."""
    return _resolved(text, "a path")


def folder(text: str) -> Path:
    """An argparse ``type``: a folder path (``path``: not empty, from the repository, "~" expanded)."""
    return Path(_resolved(text, "a folder"))


def given_path(text: str) -> str:
    """An argparse ``type``: a path kept as the user wrote it, for a command that resolves it where it reads it and
    records it as given (fidelity's --corpus); not empty, as ``path``."""
    return _not_empty(text, "a path")


def _resolved(text: str, what: str) -> str:
    return resolve_path(_not_empty(text, what))


def _not_empty(text: str, what: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path: give {what} (an unset variable?)")
    if text == "-":  # the shell tools' name for a stream: taken for a file named "-" it was written or looked for
        raise argparse.ArgumentTypeError(f"- (standard input or output) is no path: give {what} (a pipe or standard "
                                         "input is not read; predict writes to standard output without --output; a "
                                         "file named - is ./-)")
    return text
