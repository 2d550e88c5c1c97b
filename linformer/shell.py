"""The one form of a command printed for the user to paste, and of a value on a Hydra command line."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from .files.locations import script


def shell_command(*words) -> str:
    """The one form of a command printed for the user to paste (what to run next, the same command to resume):
    every word quoted for a POSIX shell, so that a path with a space or a quote in it stays one word. A word with
    single quotes (``hydra_override``'s) and nothing a shell expands in double quotes is double-quoted: the same
    word, readable."""
    return " ".join(_shell_word(str(word)) for word in words)


def shell_word(word: str) -> str:
    """One word quoted for a POSIX shell as ``shell_command`` quotes each."""
    return _shell_word(str(word))


def shell_assignment(name: str, value: str) -> str:
    """``NAME=value`` before a command (``shell_command``'s quoting, of the value alone: a quoted whole word would be
    the command's name to the shell, not a variable)."""
    return f"{name}={_shell_word(str(value))}"


def script_command(name: str, *words) -> str:
    """``python scripts/<name>.py words...`` to paste in the working directory (``shell_command``), the script named
    where it is (``locations.script``): a wheel's user runs a clone's scripts from a folder of their own."""
    return shell_command("python", script(name), *words)


def scripts_named_here(text: str) -> str:
    """`text` (a script's docstring, its --help) with each ``python scripts/<name>.py`` naming the script where it is
    (``locations.script``), so that its example command pastes in the working directory."""
    return _SCRIPT_COMMAND.sub(lambda m: f"python{m[1]}{script(m[2])}", text)


# the space kept as it is: a --help's text wrapped by argparse may break the command after "python"
_SCRIPT_COMMAND = re.compile(r"python(\s+)scripts/(\w+)\.py\b")


def imports_words(imports) -> list[str]:
    """``imports=[a,b]`` for a command printed to paste after one that imported modules of the user's own (their
    projection, sharing mode or task is named in what it made), none for none."""
    return [hydra_override("imports", list(imports))] if imports else []


def _shell_word(word: str) -> str:
    quoted = shlex.quote(word)
    if quoted != word and "'" in word and not set(word) & set('"$`\\!'):
        return f'"{word}"'
    return quoted


_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_\-+./:@%~]+")  # what Hydra's override grammar reads unquoted, and more


def hydra_override(key: str, value) -> str:
    """``key=value`` as Hydra's override grammar reads it back (``hydra_value``)."""
    return f"{key}={hydra_value(value)}"


def hydra_value(value) -> str:
    """A value as Hydra's override grammar reads it back: a list as [a,b], None as null, a flag as true/false; a
    text with a space, a quote, a comma or a non-ASCII letter (a path like "my runs/ü") single-quoted, its quotes
    escaped; a plain one as it is."""
    if isinstance(value, Sequence) and not isinstance(value, str):  # a list, or a composed config's ListConfig
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    text = str(value)
    if _PLAIN_VALUE.fullmatch(text):
        return text
    escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)  # backslashes before a quote doubled
    escaped = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped)        # and before the closing one
    return f"'{escaped}'"
