"""Where the repository and the commands' scripts are, and how a path is read (a relative one from the repository
root) and written into a record (relative to the repository where it lies under it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def clone_root() -> Path | None:
    """The clone this package is (its linformer/ folder, with the clone's pyproject.toml beside it: an editable
    install); None for an installed copy (a wheel, ``pip install <clone>``), even one whose site-packages lie in a
    clone (``<clone>/.venv``): that copy's code is not the clone's, nor its paths."""
    package = Path(__file__).resolve().parents[1]
    root = package.parent
    return root if package.name == "linformer" and (root / "pyproject.toml").is_file() else None


def repo_root() -> Path:
    """The repository root (``clone_root``), else the cwd (a wheel: paths start from the working directory)."""
    return clone_root() or Path.cwd()


COMMAND_MARK = "__linformer_command__"  # what each of scripts/*.py sets to True before it imports the package


def started_script() -> Path | None:
    """The script of the package's command this process was started as (``python scripts/<name>.py``, torchrun's
    worker of one included), resolved; None for Python code calling the package: a notebook's kernel (its argv is the
    kernel launcher's), a REPL (argv[0] ''), pytest, and a user's own script, wherever it lies (a research project's
    scripts/analyze.py), which keeps its own Ctrl-C and gets the Python API's words. A command says it is one: its
    script sets ``__linformer_command__ = True`` (``COMMAND_MARK``) before it imports the package, which reads it on
    the main module (a folder's name cannot tell: scripts/ is every project's). Resolved before it is looked at:
    started from inside scripts/ (``python pretrain.py``, ``./pretrain.py``) argv[0] names no folder, and a symlink
    to a script (``~/bin/pretrain``) another one."""
    if getattr(sys.modules.get("__main__"), COMMAND_MARK, False) is not True or not sys.argv or not sys.argv[0]:
        return None
    script = Path(sys.argv[0]).resolve()
    return script if script.suffix == ".py" else None


def scripts_dir() -> Path:
    """Where the commands' scripts are: beside the script this process was started as (a clone's scripts/, which a
    wheel's user runs over the installed package), else the clone's scripts/ beside this package (``repo_root``; for
    a wheel called from Python, scripts/ of the working directory)."""
    started = started_script()
    return started.parent if started is not None else repo_root() / "scripts"


def script_home(name: str) -> Path | None:
    """The folder holding <name>.py, resolved, for a command to name: ``scripts_dir``, else the clone's scripts/
    beside this package (``repo_root``), the first that holds it; None where neither does. A command's script copied
    into a folder of the user's (its mark travels with it) has no sibling there: scripts_dir is that folder, and the
    commands it names are the clone's, or, over a wheel, none (``cli.names_script``: the Python API's words)."""
    for folder in dict.fromkeys((scripts_dir(), repo_root() / "scripts")):
        if (folder / f"{name}.py").is_file():
            return folder.resolve()
    return None


def script(name: str, start: str | os.PathLike | None = None) -> str:
    """scripts/<name>.py as a command names it for the folder `start` (default: the working directory, where a
    printed command is pasted; a plan's jobs run from ``repo_root``): scripts/<name>.py where `start` holds the
    folder it is in (``script_home``), else its absolute path; scripts/<name>.py, as the docs name it, where no folder
    known here holds it."""
    folder, start = script_home(name), Path.cwd() if start is None else Path(start)
    if folder is None or (start / "scripts").resolve() == folder:
        return f"scripts/{name}.py"
    return str(folder / f"{name}.py")


def repo_relative(path: str | os.PathLike) -> str:
    """`path` relative to the repository when it lies under it, else as an absolute path: how a committed record
    names a run or file, so that it reads the same on every checkout (``resolve_path`` reads it back). Over a wheel
    (no clone) absolute: relative to the working directory, it would name nothing from another folder."""
    p, root = Path(os.path.expanduser(str(path))).resolve(), repo_root()
    return str(p.relative_to(root)) if clone_root() is not None and p.is_relative_to(root) else str(p)


def seen_by_git(path: str | os.PathLike) -> bool:
    """Whether `path` (a folder a command writes into) lies inside the package's own clone where git does not ignore
    it: `git status` lists what is written there, and `git add -A` would commit it (checkpoints, data). False outside
    the clone, for the clone's root itself, without a checkout, without git, and for an installed wheel (whose
    working directory may be a git project of the user's own, whose ignore rules are the user's)."""
    import subprocess

    root, path = clone_root(), Path(os.path.expanduser(str(path))).resolve()
    if root is None or not path.is_relative_to(root) or path == root or not (root / ".git").exists():
        return False
    try:  # a trailing "/": the folder may not exist yet, and patterns like `multirun/` match folders only
        checked = subprocess.run(["git", "check-ignore", "-q", f"{path.relative_to(root)}/"], cwd=root,
                                 capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return checked.returncode == 1  # 0: ignored; 128: git could not tell


def relative_to() -> str:
    """How ``resolve_path`` reads a relative path, in words, for the help texts and messages that say so: "relative
    to the repository" (a clone), else "relative to the working directory" (a wheel)."""
    return "relative to the repository" if clone_root() is not None else "relative to the working directory"


def resolve_path(path: str | os.PathLike) -> str:
    """Absolute path; a relative one is taken relative to the repository root (a wheel: the working directory), so
    scripts work from any cwd."""
    p = Path(os.path.expanduser(str(path)))
    return str(p if p.is_absolute() else (repo_root() / p).resolve())
