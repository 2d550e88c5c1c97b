"""The rule for output paths a user chooses (converted models, tokenizers, corpora, benchmark and report files): what
made an output is recorded (``made_by``), and only an earlier output of the same command with the same settings is
replaced without asking. The checks; ``atomic`` writes under them."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import OutputPathError
from ..version import __version__
from .hashing import checksum_problems
from .locations import repo_root
from .mappings import flatten, read_json
from .names import NAME_MAX_BYTES
from .runs import BEST_DIR, CONFIG, MODEL_DIR
from .temporaries import _temp_stem, temporary_of

MANIFEST = "manifest.json"                # an output directory's record (``made_by``) and its command's own facts
FILE_RECORDS = ".linformer-outputs.json"  # a folder's output files: {file name: made_by record}


def output_damage(root: str | Path, digests: Mapping[str, str] | None = None) -> list[str] | None:
    """'name: why' for each file whose checksums an output directory's MANIFEST records ("files": ``atomic_dir``'s
    `checksums`) that is missing or differs now; [] when every one is as written; None when it records none (written
    without them, or by an earlier version). `digests`: the sha256 of some of the files by name, just read by the
    caller (``checksum_problems``)."""
    listing = read_json(Path(root) / MANIFEST).get("files")
    return checksum_problems(Path(root), listing, digests) if isinstance(listing, dict) else None


# The rule for every path a user chooses for an output: a missing or empty path is written; an earlier output of the
# same command with the same settings is rebuilt; anything else is refused, naming the path and what holds it,
# unless the user passes the command's overwrite flag. What made an output is its record (``made_by``): an output
# directory carries it in its MANIFEST, the output files of a folder in that folder's FILE_RECORDS.


def made_by(command: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The record of an output: the command, its settings (keyed as its config names them, so a refusal names the
    key to change) and the package version. Settings are stored as JSON gives them back."""
    return {"command": command, "version": __version__,
            "settings": json.loads(json.dumps(dict(settings), default=str))}


def _other_output(recorded: Mapping, record: Mapping) -> str | None:
    """What `recorded` is, when it is not an output `record`'s command would rebuild; None when it is. A record whose
    settings are None stands for any run of its command (a plan's check, before the command reads its settings)."""
    if recorded.get("command") != record["command"]:
        return f"the output of {recorded.get('command') or 'another program'}"
    if record.get("settings") is None:
        return None
    diff = settings_changes(flatten(recorded.get("settings") or {}), flatten(record["settings"]))
    return f"an earlier {record['command']} output with other settings ({diff})" if diff else None


def settings_changes(a: Mapping[str, Any], b: Mapping[str, Any], shown: int = 6) -> str:
    """'key: old -> new; ...' for the flat settings that differ from `a` to `b`, in a line a person reads: a group
    of settings (a.b, a.c, ...) only one side has is one item (`a: 12 settings -> none`), and past `shown` items the
    rest are counted."""
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    items, grouped = [], set()
    for k in keys:
        group = k.split(".", 1)[0]
        members = [m for m in keys if m.startswith(group + ".")]
        gone, new = (all(m in x and m not in y for m in members) for x, y in ((a, b), (b, a)))
        if len(members) > 1 and (gone or new):
            if group not in grouped:
                grouped.add(group)
                items.append(f"{group}: {len(members)} settings -> none" if gone else
                             f"{group}: none -> {len(members)} settings")
            continue
        items.append(f"{k}: {_shown(a.get(k))} -> {_shown(b.get(k))}")
    more = f"; and {len(items) - shown} more" if len(items) > shown else ""
    return "; ".join(items[:shown]) + more


def _shown(value: Any) -> str:
    """A setting's value in a line a person reads: null, true and false as the configs and every command line write
    them, a text in quotes (where it starts and ends), anything else as Python writes it."""
    return {None: "null", True: "true", False: "false"}[value] if value is None or isinstance(value, bool) else \
        repr(value)


def listing(names: list[str]) -> str:
    """Names as an error line shows them: the first four, then how many more."""
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def output_dir_occupant(path: str | Path, record: Mapping[str, Any] | None) -> tuple[str | None, list[str]]:
    """(what holds `path` that `record`'s command may not rebuild as an output directory, or None when it may; the
    names put beside an earlier output of this package there). The clause: "is a regular file", "holds the output of
    convert", ...; None for a missing or empty folder, or the command's own earlier output with these settings. Names
    its manifest's entries do not name (``_added_since``), beside an output of any command or settings, come first:
    no overwrite flag replaces them, so the clause names them ("holds notes.txt beside convert's own output ...").
    `record` None: a caller that writes only new directories (any content is in the way, none is its own)."""
    path = Path(path)
    if not os.path.lexists(path):
        return None, []
    if not path.is_dir():
        return "is a regular file" if path.is_file() else "is not a directory", []
    if not (names := sorted(p.name for p in path.iterdir())):
        return None, []
    manifest = read_json(path / MANIFEST)
    if record is not None and not manifest.get("command") and isinstance(manifest.get("entries"), list):
        # a model a run's trainer saved (its manifest names its files, no command): what was put beside them is the
        # user's, which a command replacing that model (export --out <run>/model --overwrite) may not delete
        added = _added_since(names, manifest["entries"])
        if added:
            return _beside(path, manifest, added), added
    if record is None or not manifest.get("command"):
        return f"is a directory with other content ({listing(names)})", []
    added = _added_since(names, manifest.get("entries"))
    if added:
        return _beside(path, manifest, added), added
    other = _other_output(manifest, record)
    return None if other is None else f"holds {other}", []


def _beside(path: Path, manifest: Mapping[str, Any], added: list[str]) -> str:
    """The clause naming what was put beside an output (`added`: ``_added_since``): the first few names, and how
    many there are where more than one."""
    own = f"{manifest.get('command') or 'the run'}'s own output, which it did not write"
    if len(added) == 1:
        return f"holds {added[0]} beside {own}"
    kinds = "files and folders" if any((path / n).is_dir() for n in added) else "files"
    return f"holds {len(added)} {kinds} beside {own} ({listing(added)})"


def _added_since(names: list[str], entries: Any) -> list[str]:
    """The names in an output directory that its command did not put there (`entries`, its manifest's list; an
    output recorded without one gives none) nor its manifest; an interrupted write's temporary stands for what it
    was writing."""
    if not isinstance(entries, list):
        return []
    own = {*entries, *(_temp_stem(str(e)) for e in entries), MANIFEST}
    return [n for n in names if (temporary_of(n) or n) not in own]


def file_record(path: str | Path) -> Any:
    """What its folder's FILE_RECORDS says wrote the file `path` (a made_by record), or None."""
    path = Path(path)
    return read_json(path.parent / FILE_RECORDS).get(path.name)


def output_file_occupant(path: str | Path, record: Mapping[str, Any]) -> str | None:
    """What holds the file `path` that `record`'s command may not replace (a clause), or None when it may (missing,
    or written by that command with these settings: its folder's FILE_RECORDS)."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    if path.is_dir():
        return "is a directory"
    recorded = file_record(path)
    other = _other_output(recorded, record) if isinstance(recorded, dict) else \
        f"a file {record['command']} did not write"
    return None if other is None else f"is {other}"


def check_writable(path: str | Path, inside: bool = False, key: str | None = None) -> None:
    """OutputPathError where `path` cannot be written into its folder (`inside`: where files cannot be written into
    the folder `path`), or the nearest folder on the way that exists, where the missing ones would be made: a file in
    the way, a read-only file system, no write permission. Checked before the work, which would otherwise end in an
    error naming a temporary after it (a benchmark's grid). `key`: the flag or setting that chose `path` ("--out"),
    named in the advice."""
    choose = f"choose another {key}" if key else "choose another output path"
    # os.fsencode: the bytes the file system gets; a name Python decoded from them (argv under an ASCII locale) holds
    # surrogates for bytes it could not decode, which str.encode() refuses
    long = next((part for part in Path(path).parts if len(os.fsencode(part)) > NAME_MAX_BYTES), None)
    if long is not None:
        raise OutputPathError(f"{path}: the name {long[:40]}... is {len(os.fsencode(long))} bytes, longer than the file "
                              f"system allows ({NAME_MAX_BYTES}): choose a shorter one.")
    folder = Path(path).absolute() if inside else Path(path).absolute().parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"{folder} is a file, not a folder, so {path} cannot be made: {choose}.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{folder} cannot be written (a read-only file system, or no write permission), so "
                              f"neither can {path}: {choose}, one you can write.")


def check_not_read(path: str | Path, reads: Iterable[str | Path | None], key: str | None = None,
                   directory: bool = False) -> None:
    """OutputPathError where the output `path` is one of `reads` (what the command reads: files or folders; a name
    that is no path, a hub model's, is passed over), or, for an output file, lies inside one (a file of the model
    folder it loads), or, for an output `directory` (replaced whole), holds one: refused even with an overwrite flag,
    since writing it would destroy what the command reads. A new directory inside a folder read (a run's model/)
    replaces none of its files. `key`: the flag or setting that chose `path`."""
    out = Path(path).resolve()
    for given in reads:
        source = Path(given).resolve() if given and os.path.exists(given) else None
        if source is None:
            continue
        where = "is" if source == out else "holds" if directory and out in source.parents else \
            "is inside" if not directory and source in out.parents else None
        if where:
            choose = f"choose another {key}" if key else "choose another output path"
            raise OutputPathError(f"{path} {where} {given}, which this command reads: {choose} (writing it would "
                                  "destroy the input, overwrite or not).")


def check_output_dir(path: str | Path, record: Mapping[str, Any] | None, overwrite: bool = False,
                     flag: str = "overwrite=true", reads: Iterable[str | Path] = (), key: str | None = None) -> None:
    """The output rule for a directory about to be (re)built by `record`'s command (None: by a caller that writes
    only new directories). Raises OutputPathError naming the path, what holds it and `flag`, which replaces only a
    folder that is this package's output; any other (``_no_output``) is refused with it too, and so is an output
    beside which files or folders its manifest does not name were put (the user's notes, another command's report). `reads`: the command's
    inputs (paths; a name that is no path, a hub model's say, is passed over): a directory that is one of them, or
    holds one, is refused even with `flag`, since replacing it would delete what the command reads. `key`: the flag or
    setting that chose `path` (``check_writable``)."""
    check_not_read(path, reads, key, directory=True)
    check_writable(path, key=key)
    choose = f"choose another {key}" if key else "choose another output path"
    # where it is not there yet too: a run whose model/ is gone (or a finetuning's, which keeps best/) would take a
    # model written there for its own (finetuning, predict and export from the run load it)
    other_run = _a_runs_model(path, record)
    if other_run:
        raise OutputPathError(f"{path} {other_run}: {choose} ({flag} never replaces another run's model: that run "
                              "would say it is complete, with the other model in its place).")
    what, added = output_dir_occupant(path, record)
    if not what:
        return
    never = _no_output(path, record)
    if never:
        raise OutputPathError(f"{path} {never}: {choose} ({flag} replaces only an earlier output of this package, "
                              "one whose manifest.json names the command that wrote it).")
    if added:  # the flag never deletes what the user (or another command) put into an output's folder
        raise OutputPathError(f"{path} {what}: move {'it' if len(added) == 1 else 'them'}"
                              f" elsewhere, or {choose} ({flag} replaces only what its manifest.json names, never what "
                              "was put beside it).")
    if not overwrite:
        raise OutputPathError(f"{path} {what}: {choose}, or pass {flag} to replace it.")


# manifest keys that only this package's output directories carry (``made_by``'s command, ``atomic_dir``'s entries,
# ``saving.model_folder``'s format): a web app's or another tool's manifest.json has none of them
_OWN_MANIFEST = ("command", "entries", "model_format")


def _no_output(path: str | Path, record: Mapping[str, Any] | None) -> str | None:
    """Why the directory `path` is no output that an overwrite flag may replace (a clause), or None where it may be:
    a file system's root, a home folder, a folder that is or holds the current directory or this repository, a git
    checkout, and (for a command that records its outputs: `record`) any folder whose MANIFEST is not this
    package's. `record` None: a caller replacing a folder the package itself chose (a run's model, kept records)."""
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        return None
    if real == Path(real.anchor) or os.path.ismount(real):
        return "is the root of a file system"
    if real == Path(os.path.realpath(Path.home())):
        return "is your home folder"
    for what, held in (("the current directory", Path.cwd().resolve()), ("this repository", repo_root())):
        if held == real or held.is_relative_to(real):
            return f"is, or holds, {what} ({held})"
    if os.path.lexists(real / ".git"):
        return "is a git checkout (it holds .git)"
    if record is not None and not any(key in read_json(real / MANIFEST) for key in _OWN_MANIFEST):
        names = sorted(p.name for p in real.iterdir())
        return f"is a directory with other content ({listing(names)}), no output of this package's"
    return None


def _a_runs_model(path: str | Path, record: Mapping[str, Any] | None) -> str | None:
    """Why `path` is a run's model that `record`'s command may not replace (a clause), or None: a run's model/ or
    best/ (the folder beside its config.yaml), unless `record` is an export of that run (its settings' run). Replaced,
    the run would still say it is complete, its manifest's checksums rewritten to the other model's, and a command
    started from it would train another model under its name. `record` None: the run's own trainer choosing it."""
    if record is None:
        return None
    real = Path(os.path.realpath(path))
    # the folder itself, or one inside it: the run's next export --overwrite of its own model would delete it
    model = next((p for p in (real, *real.parents) if p.name in (MODEL_DIR, BEST_DIR) and (p.parent / CONFIG).is_file()),
                 None)
    if model is None:
        return None
    run = (record.get("settings") or {}).get("run")
    if model == real and run and Path(os.path.realpath(str(run))) == model.parent:
        return None
    where = "is" if model == real else "is inside"
    return f"{where} the {model.name}/ of the run {model.parent}, which that run's records describe"


def check_output_files(paths: list[str | Path], record: Mapping[str, Any], overwrite: bool = False,
                       flag: str = "--overwrite", key: str | None = None, reads: Iterable[str | Path] = ()) -> None:
    """The output rule for files about to be written by `record`'s command into their folders (`key`: the flag or
    setting that chose them, ``check_writable``). `reads`: the command's inputs, files or folders; a file that is
    one or lies inside one is refused even with `flag` (``check_not_read``)."""
    choose = f"choose another {key}" if key else "choose another output path"
    reads = list(reads)
    for path in map(Path, paths):
        check_not_read(path, reads, key)
        check_writable(path, key=key)  # a file on the way (the folder itself, or one above it) included
        if path.is_dir():  # a file never replaces a directory, overwrite or not
            raise OutputPathError(f"{path} is a directory: {choose}.")
        what = None if overwrite else output_file_occupant(path, record)
        if what:
            raise OutputPathError(f"{path} {what}: {choose}, or pass {flag} to replace it.")
