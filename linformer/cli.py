"""The one CLI wrapper of every script: user-fixable errors become one `error: ...` line and exit status 2.

Hydra scripts use ``@hydra_main("pretrain")``; argparse scripts wrap their body in ``with cli_errors():``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import importlib
import json
import logging
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from .errors import ConfigError, LinformerError, OutputPathError, PeerFailed, Preempted, did_you_mean
from .files import BEST_DIR, MODEL_DIR, atomic_write, flatten, resolve_path
from .signals import interrupt_status, sigterm_ignored_at_teardown

REPOSITORY_CONFIGS = Path(__file__).resolve().parent.parent / "configs"  # a clone's, beside the package it holds
CONFIG_DIR_VARIABLE = "LINFORMER_CONFIG_DIR"
EXIT_USER_ERROR = 2


def config_dir() -> Path:
    """The configs folder every script and ``compose`` read: $LINFORMER_CONFIG_DIR where it is set (a relative one
    from the working directory), else the repository's configs/ beside this package, which only a clone (installed
    editable, ``pip install -e <clone>``) has: a wheel carries the package alone. Read at each call, so that a
    notebook may set the variable after the import. ConfigError naming both ways where the folder is missing."""
    given = os.environ.get(CONFIG_DIR_VARIABLE)
    if given:
        folder = Path(os.path.expanduser(given)).resolve()
        if not folder.is_dir():
            raise ConfigError(f"{CONFIG_DIR_VARIABLE}={given} names no folder: point it at the configs/ folder of a "
                              "linformer clone (git clone the repository), or unset it to use the clone this package "
                              "is installed from.")
        return folder
    if not REPOSITORY_CONFIGS.is_dir():
        raise ConfigError(f"no configs folder at {REPOSITORY_CONFIGS}: this linformer is installed without its "
                          "repository, whose configs/ every command composes. Install it editable from a clone "
                          f"(pip install -e <clone>), or set {CONFIG_DIR_VARIABLE} to a clone's configs/ folder.")
    return REPOSITORY_CONFIGS


@contextlib.contextmanager
def cli_errors():
    """Run a script body: user-fixable errors print `error: <message>` on stderr and exit 2, without a traceback.

    A missing file, a path without permission, a read-only file system, a path in the way or a full disk is
    user-fixable too (_USER_OS_ERRORS); every other exception keeps its traceback. Under torchrun or accelerate
    launch the processes speak as one (``quiet_other_ranks``, ``_last_line``).
    """
    quiet_other_ranks()
    streams_never_raise()
    try:
        yield
    except Preempted as stop:
        _last_line(f"stopped: {stop}", stop.exit_code)
    except KeyboardInterrupt as stop:  # Ctrl-C where nothing turns it into a checkpointed stop (start-up, a second)
        _last_line("stopped: interrupted (Ctrl-C). Run the same command again to go on.", exit_status(stop))
    except Exception as err:
        message = _user_message(err)
        if message is None:
            raise
        _last_line(f"error: {message}", EXIT_USER_ERROR, cause=not isinstance(err, PeerFailed))


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


def progress_to_log_file() -> bool:
    """Whether progress goes to a log file (stderr not a terminal: nohup, tee, a job runner, CI). There every stage
    prints plain lines (training's ``core.progress_line``, the tokenizer's and the corpus's own), never a bar: a
    bar's carriage returns and redraws run into one line, or leave blank ones, in a file."""
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):  # a stream without a file, or closed
        return True


@contextlib.contextmanager
def third_party_bars_off(off: bool = True):
    """datasets' bars (map, save_to_disk) and transformers' and the hub's off inside the block where `off` (a log
    file: ``progress_to_log_file``), as they were after it; the caller prints its plain lines instead."""
    import datasets
    from transformers.utils import logging as hf_logging

    was = (not datasets.are_progress_bars_disabled(), hf_logging.is_progress_bar_enabled())
    if off:
        datasets.disable_progress_bars()
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if off and was[0]:
            datasets.enable_progress_bars()
        if off and was[1]:
            hf_logging.enable_progress_bar()


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


PEER_WAIT_S = 10  # how long a process waits for rank 0's last line (or another's cause) before printing its own


def _last_line(line: str, code: int, cause: bool = True) -> NoReturn:
    """Print the line a script ends with (`error: ...`, `stopped: ...`) and exit with `code`.

    Under torchrun (or accelerate launch, built on it) the processes agree through the launcher's store: rank 0
    prints its line; another process prints its own, prefixed with its rank, only where it differs from rank 0's
    (an error of that process alone), and after rank 0's (whose line would otherwise be cut short: the launcher
    stops the others once one exits). A line that is not the cause (``cause=False``: PeerFailed, another process
    failed) is printed only where no process printed one within PEER_WAIT_S."""
    rank, peers = process_rank(), _launch_store()
    if peers is None:
        print(line if rank == 0 else f"[rank {rank}] {line}", file=sys.stderr, flush=True)
        sys.exit(code)
    said = None
    if rank == 0:
        if cause:
            print(line, file=sys.stderr, flush=True)
            peers.set("cause", "1")
        peers.set("rank0", line)
    else:
        said = _wait_for(peers, "rank0")
        if cause and said != line:
            print(f"[rank {rank}] {line}", file=sys.stderr, flush=True)
            peers.set("cause", "1")
    if not cause and _wait_for(peers, "cause") is None:
        print(line if rank == 0 else f"[rank {rank}] {line}", file=sys.stderr, flush=True)
    sys.exit(code)


def _launch_store():
    """The key-value store of this launch (torchrun's, at MASTER_ADDR:MASTER_PORT), keyed for this attempt of it;
    None for one process, or where it cannot be reached (another launcher)."""
    if process_count() <= 1 or "MASTER_ADDR" not in os.environ:
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


def _wait_for(store, key: str) -> str | None:
    """The store's value of `key` once a process set it, or None after PEER_WAIT_S."""
    import datetime

    try:
        store.wait([key], datetime.timedelta(seconds=PEER_WAIT_S))
        return store.get(key).decode()
    except Exception:  # timed out, or the store went away with its launcher
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


NAME_MAX_BYTES = 255  # the longest name of one file or folder that Linux's file systems take
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


def import_needed(module: str, what: str, package: str | None = None):
    """`module`, imported; where it cannot be, a ConfigError saying `what` needs the PyPI package `package` (default:
    the module's top level) and the command that installs it, raised where that feature starts: an optional piece
    that is missing is one error line, not a traceback from deep inside the work."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = package or module.split(".")[0]
        why = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(f"{what} needs the {package} package, which cannot be imported here ({why}): "
                          f"{shell_command('pip', 'install', package)}") from err


def shell_command(*words) -> str:
    """The one form of a command printed for the user to paste (what to run next, the same command to resume):
    every word quoted for a POSIX shell, so that a path with a space or a quote in it stays one word. A word with
    single quotes (``hydra_override``'s) and nothing a shell expands in double quotes is double-quoted: the same
    word, readable."""
    return " ".join(_shell_word(str(word)) for word in words)


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


def _k_tag(k) -> str:
    """Run-name part for k: '32', or '16-32' for one k per layer (a name a shell and a glob take as it is, where the
    list's own text '[16, 32]' holds a glob's character class and a space)."""
    return "-".join(map(str, k)) if isinstance(k, Sequence) and not isinstance(k, str) else str(k)


def _attn_tag(attention, n, k, sharing, projection="linear") -> str:
    """Run-name part for the architecture: full attention has no k and no sharing; a projection other than the
    paper's learned one is named (linformer-n128-k32-headwise-conv)."""
    if str(attention) == "full":
        return f"full-n{n}"
    return f"{attention}-n{n}-k{_k_tag(k)}-{sharing}" + ("" if projection in (None, "linear") else f"-{projection}")


# the folder names a run gives the models it saves (train/core.py, train/export.py): not a model's own name
_GENERIC_MODEL_DIRS = re.compile(rf"({MODEL_DIR}|{BEST_DIR}|{MODEL_DIR}-step-\d+)")


def model_label(path, sep: str = "/") -> str:
    """How a model folder is named shortly (a default run name, a compare table's model, a model card): its folder's
    name, with its run's name and `sep` before it where the folder is one a run saves (`.../<run>/best` ->
    `<run>/best`), so that two runs' saved models are told apart."""
    path = Path(str(path).rstrip("/"))
    if _GENERIC_MODEL_DIRS.fullmatch(path.name) and path.parent.name not in ("", ".", "/"):
        return f"{path.parent.name}{sep}{path.name}"
    return path.name


def model_name_of(path) -> str:
    """How a default run name names a model path: ``model_label`` as one folder's name (`<run>-best`), so that runs
    of two runs' exported models do not share a name (and one does not offer to continue the other)."""
    return model_label(path, "-")


def _suffix(overrides: str | None, task=None) -> str:
    """A sweep job's folder name after its run_name: its other overrides (Hydra's override_dirname, which leaves out
    the keys the default run name holds), with a path's slashes made "_" so that a value like
    init_from=outputs/pretrain/x names one folder, not three. With the job's overrides (`task`, Hydra's
    overrides.task) and a run_name given among them, that name holds none of those keys: every override but the
    name and the paths then names the job, or a swept seed would put every job in one folder."""
    if task is not None and any(str(o).startswith("run_name=") for o in task):
        overrides = ",".join(sorted(str(o) for o in task if not str(o).startswith(("run_name=", "paths.", "hydra."))))
    return f"-{overrides.replace('/', '_')}" if overrides not in (None, "") else ""


def _init_name(init_from, group: str, architecture: str) -> str:
    """A pretraining run's default name before its seed: the model group and its attention for a fresh model; for an
    MLM continuation, the model it continues, with the group's attention where a BERT/RoBERTa encoder is converted
    by it (a saved Linformer keeps its own architecture, which its own name tells)."""
    if init_from in (None, ""):
        return f"{group}-{architecture}"
    config = Path(resolve_path(str(init_from))) / "config.json"
    try:
        linformer = json.loads(config.read_text()).get("model_type") == "linformer"
    except (OSError, ValueError, AttributeError):  # a hub name, or no readable config: the run says so later
        linformer = False
    return f"{model_name_of(init_from)}-mlm" if linformer else f"{model_name_of(init_from)}-{architecture}-mlm"


def register_resolvers() -> None:
    """The resolvers configs/*.yaml use to name runs and paths; needed before Hydra composes (idempotent)."""
    from omegaconf import OmegaConf

    resolvers = {
        "basename": model_name_of,
        "scratch_tag": lambda flag: "-scratch" if flag else "",
        "attn_tag": _attn_tag,
        "k_tag": _k_tag,
        "suffix": _suffix,
        "init_name": _init_name,
        "repo_path": resolve_path,  # Hydra's run dirs: relative to the repository, as every path the code reads
    }
    for name, fn in resolvers.items():
        OmegaConf.register_new_resolver(name, fn, replace=True)


def compose(config_name: str, overrides: list[str] | tuple[str, ...] = (), with_hydra: bool = False):
    """configs/<config_name>.yaml composed with `overrides`, as its script composes it (for tests, notebooks and
    plans that need a job's paths). No run directory is made; ``with_hydra`` keeps the ``hydra`` node, whose
    ``run.dir`` is where the script would write its run."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException

    register_resolvers()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        try:
            return hydra_compose(config_name=config_name, overrides=list(overrides), return_hydra_config=with_hydra)
        except HydraException as err:  # an unknown key or option, a malformed override: the user's to fix
            failure = err
    # outside Hydra's context: the did-you-mean composes the config again
    raise ConfigError(f"{_one_line(failure, config_name, overrides)} (configs/{config_name}.yaml)") from failure


def _one_line(err: Exception, config_name: str, overrides) -> str:
    """Hydra's composition error as one line with a did-you-mean: a misspelt key names the closest known key, an
    unknown group option the closest option (its list of options kept); never Hydra's hint to add the key with
    '+' (refuse_added_keys refuses it) nor its search path."""
    text = str(err)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    key = re.search(r"Could not override '([^']+)'", text)
    if key:
        removed = next((o[1:] for o in overrides if o.startswith("~") and key.group(1).startswith(o[1:] + ".")), None)
        if removed:
            return (f"{key.group(1)}: ~{removed} removes the {removed} group this key belongs to: keep the group "
                    f"({removed}=...) to set its keys.")
        others = [o for o in overrides if not o.startswith(key.group(1) + "=")]
        unlisted = _unlisted_shared_settings(config_name, others, key.group(1))
        if unlisted:
            return unlisted
        known = _known_keys(config_name, others)
        hint = did_you_mean(key.group(1), known) or _same_setting(key.group(1), known)
        return f"{key.group(1)}: no such key{hint}; every setting is in configs/."
    option = re.search(r"Could not find '([^'/]+)/([^']+)'", text)
    available = re.search(r"Available options in '[^']+':\s*(.*?)(?:\s*Config search path|$)", " ".join(lines))
    if option and available:
        choices = [c for c in available.group(1).split() if not c.startswith("_")]  # _x.yaml: a group's shared part
        return (f"{option.group(1)}={option.group(2)}: no such option{did_you_mean(option.group(2), choices)}; "
                f"the options: {', '.join(choices)}.")
    kept = [line for line in lines if not line.startswith(("To append", "Config search path", "provider="))]
    return " ".join(kept) or type(err).__name__


def _same_setting(key: str, known: list[str]) -> str:
    """Where the command's config holds a setting of `key`'s name under another path (data.vocab_size where the data
    group lacks it and the tokenizer's config has vocab_size), the key to give instead; else ''."""
    leaf = key.rsplit(".", 1)[-1]
    same = [k for k in known if k != key and k.rsplit(".", 1)[-1] == leaf]
    return f" (this command takes {leaf} as {' or '.join(k + '=...' for k in same)})" if same else ""


def _unlisted_shared_settings(config_name: str, overrides: list[str], key: str) -> str | None:
    """Why `key` is no key where the group's shared settings (configs/<group>/_settings.yaml) hold it but the chosen
    option's defaults do not list them (a config of one's own), or None."""
    group, _, field = key.partition(".")
    if not field or field.split(".")[0] not in _shared_settings(group):
        return None
    try:
        choice = compose(config_name, overrides, with_hydra=True).hydra.runtime.choices.get(group)
    except ConfigError:
        return None
    if not choice or not (config_dir() / group / f"{choice}.yaml").is_file():
        return None
    return f"{key}: configs/{group}/{choice}.yaml lacks it: {_how_to_give(group, choice, field.split('.')[0])}."


def _shared_settings(group: str) -> dict:
    """configs/<group>/_settings.yaml: the settings every option of the group lists in its defaults ({} for none)."""
    return _own_config(f"{group}/_settings") if (config_dir() / group / "_settings.yaml").is_file() else {}


def _how_to_give(group: str, choice: str, field: str) -> str:
    """How configs/<group>/<choice>.yaml, an option lacking `field`, comes to give it."""
    if field in _shared_settings(group):
        return (f"list _settings in its defaults after _self_ (configs/{group}/_settings.yaml holds the settings every "
                f"{group} option shares), as configs/{group}/{_an_option(group, choice)}.yaml does")
    return f"add `{field}:` to it (as configs/{group}/ has it in its other options)"


def _an_option(group: str, besides: str) -> str:
    """The first option of configs/<group>/ other than `besides` (a file to copy from)."""
    return next(p.stem for p in sorted((config_dir() / group).glob("*.yaml"))
                if not p.stem.startswith("_") and p.stem != besides)


def _known_keys(config_name: str, overrides: list[str]) -> list[str]:
    """Every dotted key of the composed config (with the other overrides, so a chosen group's keys count)."""
    from omegaconf import OmegaConf

    try:
        cfg = compose(config_name, overrides)
    except ConfigError:
        cfg = compose(config_name)
    return list(flatten(OmegaConf.to_container(cfg, resolve=False)))


def hydra_main(config_name: str) -> Callable:
    """``@hydra.main`` over configs/<config_name>.yaml, with the body run under ``cli_errors``."""
    import hydra

    register_resolvers()

    def decorate(fn: Callable) -> Callable:
        start: dict = {}  # when the command started, and the nearest folder on the way to its run dir that existed

        @functools.wraps(fn)
        def body(cfg):
            with cli_errors(), _no_refused_run_dir(**start):
                refuse_missing_values(cfg, config_name)  # where the command line had Hydra's flags (--multirun)
                refuse_added_keys(cfg, _added_overrides(), config_name)
                return fn(cfg)

        @functools.wraps(fn)
        def entry():
            try:
                run()
            finally:  # the command has ended (its last line, an error: or stopped: line included): its status stands
                sigterm_ignored_at_teardown()

        def run():
            with cli_errors():  # where the configs are is known only now ($LINFORMER_CONFIG_DIR), and may be refused
                main = hydra.main(version_base="1.3", config_path=str(config_dir()), config_name=config_name)(body)
            # The command line composed first, to say a misspelt key or option in one line with a did-you-mean:
            # Hydra's own message is several lines. Not for its flags (--multirun, --help, ...) or added keys.
            # The run directory is worked out here too, so that a refused start can remove what Hydra made for it.
            args = sys.argv[1:]
            start.update(started=time.time(), before=None, earlier=None)
            flags = [a for a in args if a.startswith("-")]
            if not flags:
                with cli_errors():
                    try:
                        cfg = compose(config_name, args, with_hydra=True)
                    except ConfigError:
                        if not any(a.startswith("+") for a in args):
                            raise
                    else:  # a value left unset first: the run directory's name may need it
                        refuse_missing_values(cfg, config_name)
                        refuse_bad_interpolations(cfg, config_name, args)
                        start["before"] = _run_dir_before(cfg, overrides=args)
                        start["earlier"] = _hydra_record(cfg)
            elif set(flags) <= {"-m", "--multirun"}:  # the sweep's directories are named before any job starts
                with cli_errors():
                    cfg = _refuse_missing_in_sweep(config_name, [a for a in args if not a.startswith("-")])
                    start["before"] = _run_dir_before(cfg, "sweep", args) if cfg is not None else None
                    if cfg is not None:
                        refuse_long_job_names(config_name, [a for a in args if not a.startswith("-")])
            return main()

        return entry

    return decorate


def _run_dir_before(cfg, mode: str = "run", overrides: list[str] = ()) -> Path | None:
    """The nearest folder that exists already on the way to where Hydra will put the run of `cfg` (composed with its
    hydra node: the run directory itself when it exists; with mode "sweep", a --multirun's sweep directory); None
    when the config names no such directory. A run directory that climbs out of its folder through a ".." in a name
    (`overrides` name the value) is refused here, before Hydra writes its .hydra/ files there: Hydra's files would
    land in a folder that holds other things (the checkout itself), where a refused start cannot remove them."""
    from omegaconf import OmegaConf
    from omegaconf.errors import InterpolationKeyError

    try:
        given = Path(str(cfg.hydra[mode].dir))
    except InterpolationKeyError as err:  # a key it names is gone (~model): Hydra's run would fail on it too
        missing = re.search(r"key '([^']+)'", str(err))
        key = missing.group(1) if missing else "a key"
        group, _, leaf = key.partition(".")
        chosen = OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None) if leaf else None
        option = config_dir() / group / f"{chosen}.yaml"
        if chosen is not None and option.is_file() and leaf not in (OmegaConf.load(option) or {}):
            # the group is selected and its option's file lacks the key (a config of one's own)
            raise ConfigError(f"the run directory (hydra.run.dir) needs {key}, which configs/{group}/{chosen}.yaml "
                              f"does not give: {_how_to_give(group, chosen, leaf)}, or set run_name=...") from None
        raise ConfigError(f"the run directory (hydra.run.dir) needs {key}, which this command line removes or "
                          f"leaves unset: select its config group again (e.g. {group}=...) rather than "
                          "removing it.") from None
    except Exception:  # an interpolation only Hydra's run resolves: nothing is removed then
        return None
    culprit = next((key for key, _, value in (a.lstrip("+~").partition("=") for a in overrides)
                    if ".." in Path(value).parts and value in str(given) and not key.startswith("hydra.")), None)
    if ".." in given.parts and culprit:  # a hydra.run.dir given with a ".." is the user's own choice
        raise ConfigError(f"{culprit}={OmegaConf.select(cfg, culprit, default='')!r} puts the run directory "
                          f"(hydra.{mode}.dir) at {given}, outside its folder: it must be one folder name (not a "
                          "path: without '/', not '..').")
    run_dir = given.resolve()
    existing = next(p for p in (run_dir, *run_dir.parents) if p.exists())
    if not existing.is_dir():  # Hydra would fail making the run directory, with a traceback
        raise OutputPathError(f"the run directory {run_dir} cannot be made: {existing} is a file, not a folder. "
                              "Choose another paths.output_dir or run_name.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"the run directory {run_dir} cannot be made: {existing} is not writable. Choose "
                              "another paths.output_dir or run_name.")
    return existing


# what Hydra writes into a run directory before the script's body runs
_HYDRA_FILES = (".hydra/config.yaml", ".hydra/hydra.yaml", ".hydra/overrides.yaml")


def _hydra_record(cfg) -> dict[str, bytes] | None:
    """The .hydra/ files an earlier command left in the run directory of `cfg` (composed with its hydra node), by
    name: Hydra replaces them before the body runs, so a refused start puts them back (_no_refused_run_dir)."""
    try:
        run_dir = Path(str(cfg.hydra.run.dir)).resolve()
    except Exception:  # an interpolation only Hydra's run resolves: nothing to keep
        return None
    earlier = {name: (run_dir / name).read_bytes() for name in _HYDRA_FILES if (run_dir / name).is_file()}
    return earlier or None


@contextlib.contextmanager
def _no_refused_run_dir(started: float | None = None, before: Path | None = None,
                        earlier: dict[str, bytes] | None = None):
    """A start that fails leaves nothing behind of what Hydra made for it: its .hydra/ files and log, and the
    folders Hydra created down to the run directory. Only when nothing else is in it (a run's own files are never
    touched), never the working directory, and never a folder that was there before the command. A run directory
    that held an earlier command's .hydra/ files (`earlier`) gets them back: they describe the outputs beside them."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError, ValueError):
            from hydra.core.hydra_config import HydraConfig
            from hydra.types import RunMode

            hydra = HydraConfig.get()
            run = hydra_run_dir().resolve()
            if earlier and hydra.mode != RunMode.MULTIRUN:
                if not _wrote_outputs(run, hydra.job.name, started):
                    for name, content in earlier.items():
                        atomic_write(run / name, content)
            else:
                sweep = Path(hydra.sweep.dir).resolve() if hydra.mode == RunMode.MULTIRUN else None
                _remove_hydra_leftovers(run, hydra.job.name, started, before, sweep)
        raise


def _wrote_outputs(run: Path, job_name: str, started: float | None) -> bool:
    """Whether this command wrote a file of its own into the run directory (not Hydra's .hydra/ files or log)."""
    hydra = {run / name for name in (*_HYDRA_FILES, f"{job_name}.log")}
    return started is None or any(p.stat().st_mtime >= started for p in run.rglob("*")
                                  if p.is_file() and p not in hydra)


def _remove_hydra_leftovers(run: Path, job_name: str, started: float | None, before: Path | None,
                            sweep: Path | None = None) -> None:
    """`sweep`: a --multirun's sweep directory, above `run` (this job's): its multirun.yaml goes too when this
    command wrote it and no other job's directory is left beside it."""
    if started is None or run == Path.cwd().resolve():
        return
    made = [run / name for name in (*_HYDRA_FILES, f"{job_name}.log") if (run / name).exists()]
    everything = [p for p in run.rglob("*") if p.is_file() or p.is_symlink()]
    if sorted(everything) != sorted(made) or any(p.stat().st_mtime < started for p in made):
        return  # something else is in it: not a refused start's leftovers
    for path in made:
        path.unlink()
    with contextlib.suppress(OSError):
        (run / ".hydra").rmdir()
    if before is None or not run.is_relative_to(before):
        return
    for folder in (run, *run.parents):  # the folders made for this start, each only when empty
        if folder == before:
            break
        record = folder / "multirun.yaml"
        if folder == sweep and [p.name for p in folder.iterdir()] == [record.name] and \
                record.stat().st_mtime >= started:
            record.unlink()
        folder.rmdir()


MISSING = "???"  # OmegaConf's mark of a value the command line must give


def refuse_missing_values(cfg, config_name: str, swept: frozenset[str] = frozenset()) -> None:
    """ConfigError naming the first key still at ``???``, with what the config's comment says it takes: otherwise the
    value surfaces as OmegaConf's traceback where the run directory's name needs it, or is read as the path '???'.
    The hydra node's own are Hydra's to fill, and the `swept` keys count as set (a sweep sets them)."""
    from omegaconf import OmegaConf

    values = OmegaConf.to_container(cfg, resolve=False)
    values.pop("hydra", None)
    missing = [key for key, value in flatten(values).items() if value == MISSING and key not in swept]
    if not missing:
        return
    key = missing[0]
    where, comment = _mandatory_key_comment(config_name, key)
    what = f": {comment}" if comment else ""
    raise ConfigError(f"{key} is not set{what}; give it on the command line, {key}=... ({where})")


def refuse_bad_interpolations(cfg, config_name: str, overrides: list[str]) -> None:
    """ConfigError for the first command-line value written as an interpolation (``${...}``) that does not resolve
    (a key that is not there, an unset environment variable), or that reads an environment variable as the text
    where the config holds a number or a flag: otherwise a traceback, or "seed='3' must be a whole number"."""
    from omegaconf import OmegaConf
    from omegaconf.errors import InterpolationResolutionError

    defaults = None
    for override in overrides:
        key, sep, value = override.lstrip("+~").partition("=")
        if not sep or "${" not in value:
            continue
        try:
            resolved = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
        except InterpolationResolutionError as err:
            reason = str(err).splitlines()[0]
            raise ConfigError(f"{key}={value} does not resolve: {reason}") from None
        if "oc.env" in value and "oc.decode" not in value and isinstance(resolved, str):
            defaults = compose(config_name) if defaults is None else defaults
            default = OmegaConf.select(defaults, key, default=None, throw_on_resolution_failure=False)
            if isinstance(default, (bool, int, float)):
                kind = "true or false" if isinstance(default, bool) else "a number"
                decoded = f'{key}="${{oc.decode:{value}}}"'
                raise ConfigError(f"{key}={value} gives the text {resolved!r} where the config holds {kind}: an "
                                  f"environment variable is read as text; write '{decoded}' (quotes and all)")


def _refuse_missing_in_sweep(config_name: str, overrides: list[str]):
    """refuse_missing_values for a --multirun command line: composed without its sweeps (a, b or range(...): no
    single config holds them), whose keys then count as set. Returns that config (with its hydra node), or None
    where it does not compose (Hydra's run then says why)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:  # a malformed override
        return None
    swept = frozenset(o.key_or_group for o in parsed if o.is_sweep_override())
    try:
        cfg = compose(config_name, [o.input_line for o in parsed if not o.is_sweep_override()], with_hydra=True)
    except ConfigError:
        return None  # a misspelt key or option
    refuse_missing_values(cfg, config_name, swept)
    refuse_bad_interpolations(cfg, config_name, [o.input_line for o in parsed if not o.is_sweep_override()])
    return cfg


def refuse_long_job_names(config_name: str, overrides: list[str]) -> None:
    """ConfigError where a --multirun job's folder name (hydra.sweep.subdir: its run name and its other overrides)
    would pass NAME_MAX_BYTES, naming the longest override in it and how to shorten it: Hydra would fail making the
    folder with a traceback, after writing the sweep's multirun.yaml. Checked before anything is written, on the job
    whose every swept key takes its longest value: the longest name the sweep makes."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        job = [_longest_value(o) if o.is_sweep_override() else o.input_line
               for o in OverridesParser.create().parse_overrides(overrides)]
        subdir = str(compose(config_name, job, with_hydra=True).hydra.sweep.subdir)
    except Exception:  # a sweep only Hydra's run expands (a glob over a group's options), or an interpolation only
        return         # its run resolves: Hydra's run says what is wrong
    name = max(Path(subdir).parts, key=lambda part: len(part.encode()), default="")
    if len(name.encode()) <= NAME_MAX_BYTES:
        return
    named = [o for o in job if o.replace("/", "_") in name]
    longest = f"; the longest override in it is {max(named, key=len)}" if named else ""
    if any(o.startswith("run_name=") for o in job):  # a run_name given: every other override names the job
        shorter = "fewer overrides on the command line"
    else:
        shorter = (f"keys that need not name the folder in hydra.job.config.override_dirname.exclude_keys "
                   f"(configs/{config_name}.yaml), a shorter run_name=...")
    raise ConfigError(f"a job of this sweep would be named {name[:48]}... ({len(name.encode())} bytes; a name may "
                      f"have {NAME_MAX_BYTES}): its run name and every other override{longest}. Shorten it: put the "
                      f"settings that stay fixed in a config of one's own (configs/experiment/<name>.yaml, "
                      f"experiment=<name>), {shorter}, or shorter values.")


def _longest_value(override) -> str:
    """A swept override (a,b or range(...)) as key=value at its longest value."""
    values = [str(v) for v in override.sweep_string_iterator()]
    return f"{override.get_key_element()}={max(values, key=lambda v: len(v.encode()))}"


def _mandatory_key_comment(config_name: str, key: str) -> tuple[str, str]:
    """(the config file that leaves `key` at ???, the comment on that line): the script's own config first, then
    the files of the group the key belongs to; (the script's config, '') when no line says it."""
    leaf = re.escape(key.rsplit(".", 1)[-1])
    line = re.compile(rf"^\s*{leaf}:\s*\?\?\?\s*(?:#\s*(.*))?$", re.MULTILINE)
    configs = config_dir()
    group = configs / key.split(".")[0]
    files = [configs / f"{config_name}.yaml", *(sorted(group.glob("*.yaml")) if "." in key else [])]
    for path in files:
        found = line.search(path.read_text()) if path.is_file() else None
        if found:
            return str(path.relative_to(configs.parent)), (found.group(1) or "").strip()
    return f"configs/{config_name}.yaml", ""


def _added_overrides() -> list[str]:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    # the command line as written: an override's ${...} is its value's to resolve, not this list's
    task = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    return [o for o in task if o.startswith("+") and not o.startswith("++")]


def _own_config(config_name: str) -> dict:
    import yaml

    return yaml.safe_load((config_dir() / f"{config_name}.yaml").read_text()) or {}


def config_groups(config_name: str) -> list[str]:
    """The config groups configs/<config_name>.yaml's defaults list selects: the only ones its script reads."""
    return list(_default_options(config_name))


def _default_options(config_name: str) -> dict[str, str | None]:
    """{group: its default option} of configs/<config_name>.yaml's defaults list, Hydra's own left out."""
    entries = [next(iter(d.items())) for d in _own_config(config_name).get("defaults") or [] if isinstance(d, dict)]
    return {e.removeprefix("override ").split("@")[0]: option for e, option in entries if e.split("@")[0] != "hydra"}


def value_origin(key: str) -> str | None:
    """Where the running Hydra command's value of the dotted `key` comes from, in words: None where the command line
    gives it, or outside a Hydra command (a config composed in Python: nothing says); else its group's option and
    whether that is the command's default (`data=mirror_slice (configs/data/mirror_slice.yaml), configs/pretrain.yaml's
    default`), so that a refusal does not pass a group's value off as one the user chose."""
    from hydra.core.hydra_config import HydraConfig

    group = key.split(".", 1)[0]
    option = composed_option(group)
    if option is None or any(str(o).lstrip("+~").split("=", 1)[0] == key for o in HydraConfig.get().overrides.task):
        return None
    config_name = HydraConfig.get().job.config_name
    chosen = ("the command line's choice" if _default_options(config_name).get(group) != option else
              f"configs/{config_name}.yaml's default")
    return f"{group}={option} (configs/{group}/{option}.yaml), {chosen}"


def composed_option(group: str) -> str | None:
    """The option of config group `group` the running Hydra command composed (`mirror_slice` for data); None outside
    a Hydra command, or where the command selects none."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.choices.get(group) if HydraConfig.initialized() else None


def refuse_added_keys(cfg, added: list[str], config_name: str) -> None:
    """ConfigError for the first ``+key=value`` override that adds a key: every key the code reads is in configs/,
    so an added one is read by nothing (a typo that would run silently with the default), and so is an added config
    group that the script's config does not select (``+task=sst2`` on pretrain.py; configs/accelerate/ holds
    ``accelerate launch --config_file`` files, not Hydra options). ``model.*`` keys are LinformerConfig's to check
    (it names its fields)."""

    from omegaconf import OmegaConf

    for override in added:
        key = override[1:].split("=", 1)[0]
        group = key.split("@")[0]
        if (config_dir() / group).is_dir():
            groups = config_groups(config_name)
            if group in groups:
                continue
            launch = (f" (configs/{group}/ holds `accelerate launch --config_file configs/{group}/<file>.yaml` files)"
                      if group == "accelerate" else "")
            raise ConfigError(f"{override}: nothing reads it: this command's config (configs/{config_name}.yaml) "
                              f"selects no '{group}' group{launch}; the groups it reads: {', '.join(groups)}")
        if key.startswith("model."):
            # the command builds a model from model.* (a group, or its own block): LinformerConfig names a field it
            # does not have
            if "model" in config_groups(config_name) or "model" in _own_config(config_name):
                continue
            raise ConfigError(f"{override}: nothing reads it: this command's config (configs/{config_name}.yaml) "
                              "has no model settings; the model comes whole from model_path (convert or reshape "
                              "it first: python scripts/convert.py model_path=... model.<field>=...)")
        known = [k for k in flatten(OmegaConf.to_container(cfg, resolve=False)) if k != key]
        raise ConfigError(f"{override}: no code reads the key {key}{did_you_mean(key, known)}. Every setting is in configs/; set a "
                          "known one without the '+'.")


def hydra_run_dir() -> Path:
    """The Hydra run directory of this job (outputs/<stage>/<run_name>), the same on every rank."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)



class ArgumentParser(argparse.ArgumentParser):
    """argparse for the scripts that take flags: a mistake is one `error:` line first (an unknown flag with the
    closest known one), then the usage, exit status 2, as every other user error of the project."""

    def error(self, message: str) -> NoReturn:
        hint = ""
        match = re.match(r"unrecognized arguments: (\S+)", message)
        if match and match.group(1).startswith("-"):
            parsers = [self] + [p for a in self._actions if isinstance(a, argparse._SubParsersAction)
                                for p in a.choices.values()]  # a subcommand's flags are known flags too
            flags = [o for p in parsers for a in p._actions for o in a.option_strings if o.startswith("--")]
            hint = did_you_mean(match.group(1).split("=", 1)[0], flags)
        print(f"error: {message}{hint}", file=sys.stderr)
        self.print_usage(sys.stderr)
        raise SystemExit(2)
