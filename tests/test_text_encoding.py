"""Every text file the project reads or writes is read and written as UTF-8, whatever the user's locale: without an
``encoding``, ``open``/``read_text``/``write_text`` use the locale's (ASCII under ``LC_ALL=C PYTHONUTF8=0``), and a
tokenizer.json of raw UTF-8 failed to decode there, so the job runner never counted the tokenizer as built
(jobs.Job.finished). Checked over the source (the package, scripts/ and tools/): ruff's rule for it (PLW1514) is in
preview only, and it misses a call on an attribute (``self.done.read_text()``) whose type it cannot infer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# modules whose `open` is binary unless its mode says "t" (gzip.open(path) reads bytes) or no file's at all
BINARY_OPENERS = {"gzip", "bz2", "lzma"}
NOT_FILE_OPENERS = {"os", "tarfile", "zipfile", "webbrowser", "Image", "safe_open"}


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _text_mode(mode: ast.expr | None, default: str = "r") -> bool:
    """Whether a mode (absent: `default`) opens a text file; a mode computed at run time counts as text."""
    value = default if mode is None else mode.value if isinstance(mode, ast.Constant) else "t"
    return isinstance(value, str) and "b" not in value


def _arg(call: ast.Call, index: int, name: str) -> ast.expr | None:
    return call.args[index] if len(call.args) > index else _kw(call, name)


def unspecified_encoding(call: ast.Call) -> bool:
    """Whether `call` opens, reads or writes a text file, or runs a process in text mode (``text`` or
    ``universal_newlines``: subprocess.run, check_output, Popen or a wrapper passing them on), without naming its
    encoding."""
    if _kw(call, "encoding") is not None:
        return False
    modes = [_kw(call, name) for name in ("text", "universal_newlines")]
    if any(m is not None and not (isinstance(m, ast.Constant) and not m.value) for m in modes):
        return True  # a child's output decoded in the locale's encoding (a computed flag counts as text mode)
    f = call.func
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if name == "read_text":
        return not call.args
    if name == "write_text":
        return len(call.args) < 2
    if (isinstance(f, ast.Name) and name == "open") or (owner, name) in (("io", "open"), ("os", "fdopen")):
        return len(call.args) < 4 and _text_mode(_arg(call, 1, "mode"))
    if name == "open" and owner in BINARY_OPENERS:
        return len(call.args) < 3 and "t" in str(getattr(_arg(call, 1, "mode"), "value", ""))
    if name == "open" and owner not in NOT_FILE_OPENERS:  # Path.open(mode, buffering, encoding)
        return len(call.args) < 3 and _text_mode(_arg(call, 0, "mode"))
    if name == "TextIOWrapper":
        return len(call.args) < 2
    if name in ("NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile"):
        return _text_mode(_arg(call, 0, "mode"), default="w+b")
    return False


def unspecified_encodings(source: str) -> list[int]:
    """The lines of `source` that open, read or write a text file without naming its encoding."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Call) and unspecified_encoding(node))


def test_the_check_sees_each_way_to_open_text_in_the_locale_s_encoding():
    source = """
self.done.read_text()
path.write_text(text)
open(p)
open(p, "a")
log.open("a")
os.fdopen(fd, "w")
io.TextIOWrapper(raw)
gzip.open(p, "rt")
tempfile.NamedTemporaryFile("w")
subprocess.run(cmd, capture_output=True, text=True)
subprocess.Popen(cmd, stdout=PIPE, universal_newlines=True)
self._popen(argv, stdout=PIPE, text=True)
p.read_text(encoding="utf-8")
p.write_text(text, encoding="utf-8")
open(p, "rb")
open(p, encoding="utf-8")
log.open("ab")
log.open("a", encoding="utf-8")
os.open(p, os.O_RDONLY)
gzip.open(p)
tarfile.open(fileobj=b, mode="w:gz")
tempfile.NamedTemporaryFile()
subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
subprocess.run(cmd, capture_output=True, text=False)
subprocess.run(cmd, capture_output=True)
"""
    assert unspecified_encodings(source) == list(range(2, 14))


@pytest.mark.parametrize("folder", ["linformer", "scripts", "tools"])
def test_every_text_file_is_opened_as_utf_8(folder):
    found = [f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / folder).rglob("*.py"))
             for line in unspecified_encodings(path.read_text(encoding="utf-8"))]
    assert found == [], "name the encoding (encoding=\"utf-8\"): the locale's may be ASCII"
