"""A command's summary lines in its log file too: what it built, reused, trained or measured.

A command under Hydra's default logging (train_tokenizer, prepare_corpus, benchmark) keeps a log file in its output
folder (``<command>.log``: a FileHandler on the root logger), which holds log records alone: the lines the command
prints, the summary of what it did among them, reached the terminal only, and the file read afterwards said nothing of
what was built. ``say`` prints such a line and writes it to every log file as a record, not to the console again.
"""

from __future__ import annotations

import logging

log = logging.getLogger("linformer")


def say(line: str, level: int = logging.INFO, logger: logging.Logger | None = None) -> None:
    """Print `line` to stdout and write it, as a record of `logger` at `level`, to every log file the root logger
    writes (none outside a command's Hydra logging: a test, a library call)."""
    print(line, flush=True)
    logger = logger or log
    if logging.root.manager.disable >= level:  # another process of a launch: rank 0 writes it (cli.quiet_other_ranks)
        return
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler) and level >= h.level]
    if files:
        record = logger.makeRecord(logger.name, level, "(summary)", 0, line, (), None)
        for handler in files:
            handler.handle(record)
