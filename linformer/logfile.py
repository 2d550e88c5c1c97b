"""The one place a command's summary lines are printed: what it built, reused, trained or measured, and what to run
next, on stdout (everything else a command says, its progress, log records, warnings, stops and errors, is on
stderr: docs/guide.md, "What goes where"), and in its log file too.

A command that keeps a log file in its output folder (train_tokenizer, prepare_corpus, benchmark:
configs/hydra/log_file.yaml, ``<command>.log``, a FileHandler on the root logger) has its log records there; the
lines it prints are not records, so ``say`` writes each to every log file as a record too, not to the console again.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("linformer")


def say(line: str, level: int = logging.INFO, logger: logging.Logger | None = None, stream=None) -> None:
    """Print `line` (one or more lines) to stdout, or to stderr from WARNING up (a warning is not a result) or where
    `stream` says so (a progress line or a note: not a result either), and write it, as a record of `logger` at
    `level`, to every log file the root logger writes (none outside a command's Hydra logging: a test, a library
    call)."""
    if stream is None:
        stream = sys.stderr if level >= logging.WARNING else sys.stdout
    print(line, file=stream, flush=True)
    logger = logger or log
    if logging.root.manager.disable >= level:  # another process of a launch: rank 0 writes it (cli.quiet_other_ranks)
        return
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler) and level >= h.level]
    if files:
        record = logger.makeRecord(logger.name, level, "(summary)", 0, line, (), None)
        for handler in files:
            handler.handle(record)


def fewer_than_asked(logger: logging.Logger, asked: str, where: str, held: int, unit: str, doing: str) -> None:
    """A count the user set above what there is, cut to what there is, said in one wording: "<asked>: <where> holds
    <held> <unit>; <doing> those <held>" (asked: the key or flag with its value, as the user wrote it)."""
    logger.warning("%s: %s holds %s %s; %s those %s", asked, where, f"{held:,}", unit, doing, f"{held:,}")
