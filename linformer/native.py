"""What the libraries' native code (Rust, C++) does out of Python's reach: it writes to file descriptor 2 itself
(``fd2_filtered``: a line kept out of a command's output), and a Rust library panics (``is_panic``).

A panic of a Rust library bound with pyo3 (tokenizers, safetensors) reaches Python as ``pyo3_runtime.PanicException``,
a BaseException, which ``except Exception`` lets through, after Rust's panic hook has written its own report to fd 2
("thread '...' panicked at ...", a page of backtrace where RUST_BACKTRACE is set). Where the package turns a panic
into an error line (``data.tokenizer``: a tokenizer.json written by hand that the tokenizers library does not check),
``panic_reports_dropped`` keeps that report off the screen, so the error is one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def fd2_filtered(kept: Callable[[bytes], bytes]) -> Iterator[None]:
    """Inside the block, file descriptor 2 writes to a temporary file; at its end (an exception included) fd 2 is
    restored and `kept` of what was written meanwhile is written to it again, in order, after the block. Where the
    redirection cannot be set up (no fd 2, no writable temporary folder), the block runs unfiltered. The temporary
    file is opened by the os module alone (a caller's patched ``open`` does not see it) and unlinked at once."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    held = saved = None
    try:
        held, name = tempfile.mkstemp(prefix="linformer-fd2-")
        os.unlink(name)
        saved = os.dup(2)
        os.dup2(held, 2)
    except OSError:
        for fd in (held, saved):
            if fd is not None:
                os.close(fd)
        held = None
    if held is None:  # outside the except: an error of the block is not chained to the OSError
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        chunks = []
        os.lseek(held, 0, os.SEEK_SET)
        while chunk := os.read(held, 1 << 16):
            chunks.append(chunk)
        os.close(held)
        out = kept(b"".join(chunks))
        with contextlib.suppress(OSError):  # a stderr whose reader has gone loses these lines as it would have
            while out:
                out = out[os.write(2, out):]


def is_panic(err: BaseException) -> bool:
    """Whether `err` is a Rust library's panic (pyo3's ``PanicException``: each library has a class of its own, none
    importable, so it is known by its name)."""
    return type(err).__name__ == "PanicException" and type(err).__module__ == "pyo3_runtime"


# The first line of Rust's panic hook's report, after the blank line it starts with: "thread '<unnamed>' (8027) panicked at src/models/bpe/model.rs:267:23:"
_PANIC_REPORT = re.compile(rb"\n?^thread '[^'\n]*'[^\n]* panicked at ", re.M)


def _without_panic_report(written: bytes) -> bytes:
    """`written` up to the panic hook's report: the panic ends the block, so the report runs to its end."""
    found = _PANIC_REPORT.search(written)
    return written if found is None else written[:found.start()]


def panic_reports_dropped() -> contextlib.AbstractContextManager[None]:
    """``fd2_filtered`` dropping the report Rust's panic hook writes when a call in the block panics (``is_panic``),
    for the caller to say in one line instead; what else is written there comes out after the block."""
    return fd2_filtered(_without_panic_report)
