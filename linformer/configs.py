"""configs/ composed as a script composes it, and the refusals of a command line that Hydra would take with a
traceback, several lines, or not at all: a misspelt key or option, a value left at ???, an added key nothing reads, an
interpolation that does not resolve, a sweep's job name too long for a folder."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import io
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from .errors import ConfigError, did_you_mean, first_line
from .files.locations import scripts_dir
from .files.mappings import flatten
from .files.names import NAME_MAX_BYTES
from .runname import FORCED, register_resolvers
from .shell import hydra_value, script_command, shell_command, shell_word

REPOSITORY_CONFIGS = Path(__file__).resolve().parent.parent / "configs"  # a clone's, beside the package it holds
CONFIG_DIR_VARIABLE = "LINFORMER_CONFIG_DIR"

# Keys runs recorded that no setting reads now, and that trained nothing the remaining keys do not say, with what
# took their place: a run recorded with one is compared, continued and exported on the rest (``without_retired``);
# a command or config that gives one is refused with that (``retired_key``)
RETIRED_KEYS = {
    # linear or polynomial: lr_power decided either way
    "trainer.lr_schedule": "the lr decays polynomially with trainer.lr_power after warmup (1.0, the default, is "
                           "linear)",
    # how many held-out batches an evaluation scored: its successor counts blocks, another unit
    "trainer.eval_batches": "an evaluation scores trainer.eval_blocks blocks, not batches (blocks = batches x "
                            "trainer.eval_batch_size, or x trainer.batch_size where that is unset)",
}


def retired_key(key: str, value=None) -> str:
    """The refusal of a RETIRED_KEYS key given as a setting: what replaced it."""
    given = key if value is None else f"{key}={value}"
    return f"{given} is no setting now: {RETIRED_KEYS[key]}; remove the key."


def without_retired(config: Mapping) -> dict:
    """A run's recorded config (nested, as config.yaml holds it) without its RETIRED_KEYS, as today's settings read
    it."""
    out = dict(config)
    for key in RETIRED_KEYS:
        group, _, leaf = key.partition(".")
        if isinstance(out.get(group), Mapping) and leaf in out[group]:
            out[group] = {k: v for k, v in out[group].items() if k != leaf}
    return out


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
                              f"linformer clone (git clone the repository), or {_unset_advice()}.")
        return folder
    if not REPOSITORY_CONFIGS.is_dir():
        beside = scripts_dir().parent / "configs"  # a clone's script run over a wheel: that clone's configs
        named = (f"set {CONFIG_DIR_VARIABLE}={shell_word(str(beside))} (the configs of the clone whose script runs)"
                 if _holds_linformer_configs(beside) else f"set {CONFIG_DIR_VARIABLE} to a clone's configs/ folder")
        raise ConfigError(f"no configs folder at {REPOSITORY_CONFIGS}: this linformer is installed without its "
                          "repository, whose configs/ every command composes. Install it editable from a clone "
                          f"(pip install -e <clone>), or {named}.")
    return REPOSITORY_CONFIGS


def _unset_advice() -> str:
    """What unsetting $LINFORMER_CONFIG_DIR leads to, in words: the configs/ beside the package where it holds
    linformer's (a clone's), else nothing to fall back on (a wheel carries no configs)."""
    if _holds_linformer_configs(REPOSITORY_CONFIGS):
        return f"unset it to use {REPOSITORY_CONFIGS}, the configs/ of the clone this package is installed from"
    return ("copy a clone's configs/ and point it there: this package is installed without a clone (a wheel), so "
            "unset it finds no configs")


def _holds_linformer_configs(folder: Path) -> bool:
    """Whether `folder` is a linformer configs folder (configs/paths/default.yaml, which every command reads), not
    another distribution's configs/ that a wheel's site-packages may hold."""
    return (folder / "paths" / "default.yaml").is_file()


def _config_dir_words() -> str:
    """Who names config_dir(), in words."""
    given = os.environ.get(CONFIG_DIR_VARIABLE)
    return f"{CONFIG_DIR_VARIABLE}={given}" if given else "the configs/ beside the package"


@dataclasses.dataclass(frozen=True)
class ConfigSources:
    """Where a command's configs come from, as Hydra's search path holds them: the primary folder (config_dir(), or
    the one a command line's --config-path names) and a folder its --config-dir adds after it (one's own configs
    beside the clone's: a file both hold is read from the primary one). `named_by` says who named the primary."""

    primary: Path
    added: Path | None = None
    named_by: str = ""

    def folders(self) -> list[Path]:
        return [self.primary, *([self.added] if self.added else [])]

    def words(self) -> str:
        """The folders, in words, for a refusal."""
        added = f" or {self.added} (--config-dir)" if self.added else ""
        return f"{self.primary} ({self.named_by}){added}"


_COMMAND_SOURCES: contextvars.ContextVar[ConfigSources | None] = contextvars.ContextVar("config_sources",
                                                                                        default=None)


def config_sources() -> ConfigSources:
    """The configs ``compose`` and the refusals read: those of the running command's line (``command_sources``),
    else config_dir() alone."""
    return _COMMAND_SOURCES.get() or ConfigSources(config_dir(), named_by=_config_dir_words())


@contextlib.contextmanager
def command_sources(sources: ConfigSources):
    """`sources` (a Hydra command line's --config-path, --config-dir) read by ``compose`` and every refusal for the
    block: the command's run."""
    token = _COMMAND_SOURCES.set(sources)
    try:
        yield
    finally:
        _COMMAND_SOURCES.reset(token)


def added_config_dir(given: str | None) -> ConfigSources:
    """The configs of a command whose argparse line takes Hydra's --config-dir (``scripts/cls_probe.py``): config_dir(),
    then the folder `given` names (from the working directory, as Hydra takes it); ConfigError where it names none."""
    added = Path(os.path.abspath(given)) if given is not None else None
    if added is not None and not added.is_dir():
        raise ConfigError(f"--config-dir {given}: no folder at {added}.")
    return ConfigSources(config_dir(), added, _config_dir_words())


def config_file(relative: str) -> Path | None:
    """The config file (or group folder) at `relative` (``data/mirror_slice.yaml``, ``data``) that a composition
    finds first: in the primary folder, else the --config-dir one; None where neither holds it."""
    return next((f / relative for f in config_sources().folders() if (f / relative).exists()), None)


def config_words(relative: str) -> str:
    """How a refusal names the config file at `relative`: configs/<relative> in the primary folder, where it is or
    where none holds it; else its path as found."""
    found = config_file(relative)
    return f"configs/{relative}" if found is None or found.is_relative_to(config_sources().primary) else str(found)


@dataclasses.dataclass(frozen=True)
class HydraCommandLine:
    """A Hydra script's command line as Hydra's own parser reads it."""

    config_name: str          # --config-name, else the script's
    overrides: list[str]
    sources: ConfigSources    # --config-path, --config-dir
    runs: bool                # it runs the script (a run or a --multirun): not --help, --cfg, --info, ...
    multirun: bool


def _hydra_internal(module: str, name: str):
    """`name` of Hydra's `module`, one of hydra._internal's (its command-line parser, its search path's making): not
    public API, so a Hydra past the 1.3 that pyproject.toml bounds may move it; None then, and what reads it falls back
    to Hydra's public ways (``hydra_command_line``, ``_initialize``)."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


_PARSER = ("get_args_parser", "compute_search_path_dir", "detect_calling_file_or_module_from_task_function")


def reads_command_lines() -> bool:
    """Whether this Hydra has the parser ``hydra_command_line`` reads a command line with: where it moved it, a
    command's checks before Hydra starts are Hydra's own (its messages), and the refusals run inside the job."""
    return all(_hydra_internal("hydra._internal.utils", name) is not None for name in _PARSER)


def hydra_command_line(args: list[str], config_name: str, task_function: Callable | None = None,
                       script: str | Path | None = None, cwd: str | Path | None = None) -> HydraCommandLine | None:
    """`args` (a Hydra script's command line, its script's config `config_name`) read by Hydra's own parser, the
    configs it composes named as Hydra names them (a relative --config-path from the file of `task_function`, the
    script's, or from the folder of `script`, the file a plan's job runs; --config-dir from the working directory,
    `cwd` where the command runs in another: a plan's job). None where Hydra's run alone can say what it does: a
    command line that does not parse (Hydra's usage line says why), --version, a --config-path of a package (pkg://)
    or, with no script to take it from, a relative one; and where this Hydra lacks the parser
    (``reads_command_lines``). A sweep is a --multirun, or hydra.mode=MULTIRUN in an override or a config file
    (Hydra sweeps on each); a config file's without swept values is seen once the command is composed (``sweeps``),
    where the composition that says so costs nothing more.
    ConfigError where --config-dir or --config-path names no folder."""
    if not reads_command_lines() or (parsed := _parsed(args)) is None:
        return None
    compute_search_path_dir, detect_calling = (_hydra_internal("hydra._internal.utils", name) for name in _PARSER[1:])
    here = Path(cwd if cwd is not None else os.getcwd())
    if parsed.config_path is None:
        primary, named_by = config_dir(), _config_dir_words()
    else:
        calling_file, calling_module = (detect_calling(task_function) if task_function is not None else
                                        (str(here / script), None) if script is not None else (None, None))
        if calling_file is None and calling_module is None and not os.path.isabs(parsed.config_path):
            return None  # relative to a script this call does not know
        where = compute_search_path_dir(calling_file, calling_module, parsed.config_path)
        if where is None or where.startswith("pkg://"):
            return None
        relative = "" if os.path.isabs(parsed.config_path) else ", from the script's folder as Hydra takes it"
        primary, named_by = Path(where), f"--config-path {parsed.config_path}{relative}"
    added = Path(os.path.abspath(here / parsed.config_dir)) if parsed.config_dir is not None else None
    hydra_own = (parsed.help or parsed.hydra_help or parsed.cfg or parsed.info or parsed.shell_completion
                 or parsed.resolve or parsed.experimental_rerun or (parsed.run and parsed.multirun))
    for folder, flag in ((primary, named_by), (added, f"--config-dir {parsed.config_dir}")):
        if folder is not None and not folder.is_dir():
            raise ConfigError(f"{flag}: no folder at {folder}.")
    overrides = list(parsed.overrides)
    name, sources = parsed.config_name or config_name, ConfigSources(primary, added, named_by)
    mode = _mode_override(overrides)
    if not parsed.multirun and not hydra_own and mode is None and swept_keys(overrides):
        with command_sources(sources):  # swept values a config file's hydra: mode: MULTIRUN sweeps (else refused)
            mode = configured_mode(name, overrides)
    return HydraCommandLine(name, overrides, sources, not hydra_own, bool(parsed.multirun) or mode == "MULTIRUN")


def _parsed(args: list[str]):
    """`args` as Hydra's parser reads them (its namespace: .help, .config_dir, .overrides, ...); None where they do
    not parse (a usage error, --version: Hydra's run says it), or this Hydra lacks the parser."""
    get_args_parser = _hydra_internal("hydra._internal.utils", "get_args_parser")
    if get_args_parser is None:
        return None
    parser = get_args_parser()
    parser.exit = parser.error = _unparsed  # argparse's usage error, --help and --version end here, not in sys.exit
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return parser.parse_args(args)
        except _Unparsed:
            return None


class _Unparsed(Exception):
    """Hydra's parser would have ended the process (a usage error, --help, --version): Hydra's own run says it. Its
    own exception rather than SystemExit, so that a stop arriving while it parses (a handler's SystemExit) is not
    taken for it."""


def _unparsed(*args, **kwargs):
    raise _Unparsed


def asks_for_help(args: list[str]) -> bool:
    """Whether a Hydra script's command line `args` asks for its --help (Hydra's parser reads them)."""
    parsed = _parsed(args)
    return parsed is not None and bool(parsed.help)


def names_config_path(args: list[str]) -> bool:
    """Whether a Hydra script's command line `args` names its configs folder, --config-path (-cp): Hydra reads that
    folder, not the one config_dir() names, which need not exist then (a wheel without $LINFORMER_CONFIG_DIR)."""
    parsed = _parsed(args)
    return parsed is not None and parsed.config_path is not None


def _mode_override(overrides: list[str]) -> str | None:
    """The run mode a hydra.mode=... override gives (RUN, MULTIRUN; its last one, as Hydra reads it), or None."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:  # a malformed override: Hydra's run says so
        return None
    modes = [str(o.value()).upper() for o in parsed if o.key_or_group == "hydra.mode" and not o.is_delete()]
    return modes[-1] if modes else None


# The TaskSpec fields a task config's spec block gives (a task of local files: no hub fields); the first four are
# needed, the others have the TaskSpec's defaults (``runconfig.settings.task_spec`` reads the block)
SPEC_KEYS = ("text_fields", "label_field", "label_names", "raw_labels", "metrics", "format", "files", "eval_split",
             "title")


def spec_overrides(overrides: list[str] | tuple[str, ...]) -> list[str]:
    """`overrides` with each ``task.spec.<field>=`` of a TaskSpec field (SPEC_KEYS, and ``task.spec=`` itself) made
    a force-add (``++``): a task config may leave a field out (format, files, eval_split, title take the TaskSpec's
    defaults), and Hydra refuses an override of a key the composed config does not hold, where the field is one the
    task's spec reads. A misspelt field is left as it is: Hydra names it. Only Hydra's parse is to see the ``++``:
    ``as_typed`` gives the overrides back as the user wrote them."""
    def field_of(override: str) -> bool:
        key = override.split("=", 1)[0]
        parts = key.split(".")
        return "=" in override and parts[:2] == ["task", "spec"] and (len(parts) == 2 or parts[2] in SPEC_KEYS)

    made = [f"++{o}" if field_of(o) else o for o in overrides]
    FORCED.update(m for m, o in zip(made, overrides) if m != o)
    return made


def compose(config_name: str, overrides: list[str] | tuple[str, ...] = (), with_hydra: bool = False):
    """configs/<config_name>.yaml composed with `overrides`, as its script composes it (for tests, notebooks and
    plans that need a job's paths). No run directory is made; ``with_hydra`` keeps the ``hydra`` node, whose
    ``run.dir`` is where the script would write its run. Hydra initialised by the caller (a notebook's own
    ``initialize_config_dir``, a running Hydra job) is set aside for the composition and left as it was."""
    from hydra import compose as hydra_compose
    from hydra.errors import HydraException, MissingConfigException

    register_resolvers()
    parse_each_config_once()
    sources = config_sources()
    overrides = spec_overrides(overrides)
    with _own_global_hydra():
        added = _initialize(sources)
        try:
            return hydra_compose(config_name=config_name, overrides=[*overrides, *added],
                                 return_hydra_config=with_hydra)
        except HydraException as err:  # an unknown key or option, a malformed override: the user's to fix
            failure = err
    if isinstance(failure, MissingConfigException) and config_file(f"{config_name}.yaml") is None:
        raise ConfigError(no_config(config_name, sources)) from failure
    # outside Hydra's context: the did-you-mean composes the config again
    raise ConfigError(f"{_one_line(failure, config_name, overrides)} ({config_words(_failed_in(failure, config_name))})"
                      ) from failure


def _failed_in(err: Exception, config_name: str) -> str:
    """The config file (relative: data/mine.yaml) a composition's error is in: the option Hydra's message names (In
    'data/mine': ...: a --config-dir folder's own, or configs/'s), else the command's config."""
    named = re.match(r"In '([^']+)'", str(err))
    relative = f"{named.group(1)}.yaml" if named else ""
    return relative if relative and config_file(relative) is not None else f"{config_name}.yaml"


def _initialize(sources: ConfigSources) -> list[str]:
    """Hydra initialised on `sources`' search path as a script's start makes it (hydra.main: the primary folder,
    then the --config-dir one before the structured configs), as ``hydra.initialize_config_dir`` does for one
    folder. Where this Hydra has moved the internals that make it (``_hydra_internal``), its public
    ``initialize_config_dir`` on the primary folder, the --config-dir one added after it by a hydra.searchpath
    override: the overrides the composition adds (none where nothing moved)."""
    from hydra import initialize_config_dir, version
    from hydra.core.config_search_path import SearchPathQuery

    hydra = _hydra_internal("hydra._internal.hydra", "Hydra")
    create = getattr(hydra, "create_main_hydra2", None)
    search_path = _hydra_internal("hydra._internal.utils", "create_config_search_path")
    if create is None or search_path is None:
        initialize_config_dir(config_dir=str(sources.primary), version_base="1.3")
        return [] if sources.added is None else [f"hydra.searchpath=[{hydra_value(f'file://{sources.added}')}]"]
    version.setbase("1.3")
    search = search_path(str(sources.primary))
    if sources.added is not None:
        search.prepend(provider="command-line", path=f"file://{sources.added}",
                       anchor=SearchPathQuery(provider="schema"))
    create(task_name="app", config_search_path=search)
    return []


def sweeps(cfg) -> bool:
    """Whether a command's composed config (with its hydra node) is a sweep's: hydra.mode MULTIRUN, which a config
    file of one's own may set (Hydra then runs a sweep of one job, in hydra.sweep.dir)."""
    from omegaconf import OmegaConf

    mode = OmegaConf.select(cfg, "hydra.mode", default=None)
    return getattr(mode, "name", mode) == "MULTIRUN"


def configured_mode(config_name: str, overrides: list[str]) -> str | None:
    """The run mode (RUN, MULTIRUN) that configs/<config_name>.yaml composed with `overrides` gives in hydra.mode, as
    Hydra's start reads it to choose between a run and a sweep (Hydra.get_mode: composed as a sweep's, swept values
    allowed): a config file of one's own may set it, as an override may. None where it sets none, where the
    composition fails (Hydra then runs one job, whose composition says why) or this Hydra moved the method."""
    from hydra.core.global_hydra import GlobalHydra

    register_resolvers()
    parse_each_config_once()
    with _own_global_hydra():
        added = _initialize(config_sources())
        get_mode = getattr(GlobalHydra.instance().hydra, "get_mode", None)
        mode = get_mode(config_name=config_name, overrides=[*overrides, *added]) if get_mode is not None else None
    return getattr(mode, "name", None)


def no_config(config_name: str, sources: ConfigSources | None = None) -> str:
    """Why configs/<config_name>.yaml is not found, naming the folders read and who named them."""
    sources = sources or config_sources()
    if not _holds_linformer_configs(sources.primary) and sources.named_by == _config_dir_words():
        fix = (f"it holds no linformer configs: point {CONFIG_DIR_VARIABLE} at a linformer clone's configs/ "
               "folder (or a copy of one)" if os.environ.get(CONFIG_DIR_VARIABLE) else
               f"it is not linformer's (another distribution's configs/?): set {CONFIG_DIR_VARIABLE} to a "
               "linformer clone's configs/ folder")
    else:
        names = sorted({p.stem for f in sources.folders() for p in f.glob("*.yaml")})
        fix = f"the configs there: {', '.join(names) or 'none'}{did_you_mean(config_name, names)}"
    return f"no config {config_name}.yaml in {sources.words()}: {fix}."


# A config file's parse, kept for the process: {(the source's provider, scheme and folder or package, the file's name
# in it, its text): Hydra's ConfigResult of it}. Keyed on the text itself, so an edited file is parsed afresh however
# quickly it was edited (a modification time can stay the same over a rewrite of the same size); configs/ and
# Hydra's own configs hold a few kilobytes in all
_PARSED: dict[tuple[str, str, str, str, str], object] = {}


def parse_each_config_once() -> None:
    """Hydra parses each config file's YAML at each composition that reads it, configs/'s and its own (a dozen or more
    files for a command, most of the time of reading them; a plan's dry run composes each of its jobs from the same
    files): each file's text is parsed once per process from here on, for a folder's files (configs/) and a
    package's (Hydra's), and every reading gets a deep copy of that parse, which Hydra changes as it composes (it
    takes the defaults list out). What Hydra gives is unchanged: a file it cannot read or parse fails as before,
    and is not kept. Idempotent. It reaches into Hydra's sources registry, which is not public API: a Hydra that
    moves it composes as it always did, each file parsed at each reading (only the time is lost)."""
    try:
        from hydra._internal.sources_registry import SourcesRegistry
        from hydra.core.plugins import Plugins

        # Plugins' scan runs the sources' modules anew: the classes it registers are the ones composing uses
        Plugins.instance()
        sources = [SourcesRegistry.instance().resolve(scheme) for scheme in ("file", "pkg")]
    except (ImportError, AttributeError, ValueError):
        return
    for source in sources:
        if not getattr(source.load_config, "parses_once", False):
            source.load_config = _parsing_once(source.load_config)


def _parsing_once(hydra_load):
    """A config source's load_config that parses each text once (``parse_each_config_once``)."""

    def load_config(self, config_path: str):
        import copy
        import dataclasses
        import io

        from hydra.plugins.config_source import ConfigResult, ConfigSource
        from omegaconf import OmegaConf

        name = self._normalize_file_name(config_path)
        read = _config_text(self, name)
        if read is None:  # no such file, not text: Hydra's own error
            return hydra_load(self, config_path)
        text, where = read
        key = (self.provider, self.scheme(), self.path, name, text)
        if key not in _PARSED:  # as Hydra makes it from the same text
            stream = io.StringIO(text)
            stream.name = where  # a YAML error names the file, as Hydra's own reading did
            _PARSED[key] = ConfigResult(config=OmegaConf.load(stream), path=f"{self.scheme()}://{self.path}",
                                        provider=self.provider, header=ConfigSource._get_header_dict(text[:512]))
        kept = _PARSED[key]
        return dataclasses.replace(kept, config=copy.deepcopy(kept.config), header=dict(kept.header))

    load_config.parses_once = True
    return load_config


def _config_text(source, name: str) -> tuple[str, str] | None:
    """(the text, where it is) of config file `name` of a Hydra config source, a folder (file://) or a package
    (pkg://); None where it cannot be read as text."""
    from importlib import resources

    try:
        if source.scheme() == "file":
            path = Path(os.path.realpath(os.path.join(source.path, name)))
        else:
            path = resources.files(source.path).joinpath(name)
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, ValueError, TypeError, ModuleNotFoundError):
        return None


@contextlib.contextmanager
def _own_global_hydra():
    """Hydra's process-wide GlobalHydra taken away for the block and given back after it, the same object: Hydra's
    initialize refuses to run where one is initialised already ("GlobalHydra is already initialized"), and its
    own restore would put back a copy (or, where there was none, remove it)."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.singleton import Singleton

    callers = Singleton._instances.pop(GlobalHydra, None)
    try:
        yield
    finally:
        Singleton._instances.pop(GlobalHydra, None)
        if callers is not None:
            Singleton._instances[GlobalHydra] = callers


def _unquoted_override(overrides) -> str | None:
    """Where Hydra's grammar refused an override (a bare LexerNoViableAltException) whose value it reads only quoted
    (a non-ASCII letter, a space, a comma: ``paths.output_dir=/tmp/dir-ü``), the refusal saying so, with the override
    quoted as it reads it (``hydra_value``) and as a shell passes it on; None for another malformed override."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not value or value[0] in "'\"[{" or hydra_value(value) == value:
            continue
        quoted = f"{key}={hydra_value(value)}"
        try:
            parser.parse_overrides([override])
            continue
        except HydraException:
            pass
        try:
            parser.parse_overrides([quoted])
        except HydraException:
            continue
        return (f"{override}: Hydra's override grammar reads this value only in quotes (it holds a non-ASCII letter, "
                f"a space or another character outside a plain value); write it as {shell_command(quoted)}")
    return None


def _one_line(err: Exception, config_name: str, overrides) -> str:
    """Hydra's composition error as one line with a did-you-mean: a misspelt key names the closest known key, an
    unknown group option the closest option (its list of options kept); never Hydra's hint to add the key with
    '+' (refuse_added_keys refuses it) nor its search path."""
    text = str(err)
    unquoted = _unquoted_override(overrides) if type(err).__name__ == "OverrideParseException" else None
    if unquoted:
        return unquoted
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
        if key.group(1) in RETIRED_KEYS:
            return retired_key(key.group(1))
        known = _known_keys(config_name, others)
        hint = did_you_mean(key.group(1), known) or _same_setting(key.group(1), known)
        return f"{key.group(1)}: no such key{hint}; every setting is in configs/."
    already = re.search(r"Could not append to config. An item is already at '([^']+)'", text)
    if already:
        return f"+{already.group(1)}=...: {already.group(1)} is a key already: set it without the '+'."
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
    if not choice or config_file(f"{group}/{choice}.yaml") is None:
        return None
    return (f"{key}: {config_words(f'{group}/{choice}.yaml')} lacks it: "
            f"{how_to_give(group, choice, field.split('.')[0])}.")


def _shared_settings(group: str) -> dict:
    """configs/<group>/_settings.yaml: the settings every option of the group lists in its defaults ({} for none)."""
    return _own_config(f"{group}/_settings") if config_file(f"{group}/_settings.yaml") else {}


def how_to_give(group: str, choice: str, field: str) -> str:
    """How configs/<group>/<choice>.yaml, an option lacking `field`, comes to give it."""
    if field in _shared_settings(group):
        return (f"list _settings in its defaults after _self_ (configs/{group}/_settings.yaml holds the settings every "
                f"{group} option shares), as configs/{group}/{_an_option(group, choice)}.yaml does")
    return f"add `{field}:` to it (as configs/{group}/ has it in its other options)"


def _an_option(group: str, besides: str) -> str:
    """The first option of configs/<group>/ other than `besides` (a file to copy from)."""
    return next(p.stem for p in sorted(p for f in config_sources().folders() for p in (f / group).glob("*.yaml"))
                if not p.stem.startswith("_") and p.stem != besides)


def _known_keys(config_name: str, overrides: list[str]) -> list[str]:
    """Every dotted key of the composed config (with the other overrides, so a chosen group's keys count)."""
    from omegaconf import OmegaConf

    try:
        cfg = compose(config_name, overrides)
    except ConfigError:
        cfg = compose(config_name)
    return list(flatten(OmegaConf.to_container(cfg, resolve=False)))


MISSING = "???"  # OmegaConf's mark of a value the command line must give


def refuse_missing_values(cfg, config_name: str, how: str = "give it on the command line, {key}=...") -> None:
    """ConfigError naming the first key still at ``???``, with what the config's comment says it takes: otherwise the
    value surfaces as OmegaConf's traceback where the run directory's name needs it, or is read as the path '???'.
    The hydra node's own are Hydra's to fill (a sweep's jobs are checked each as composed, its values set). `how`: how the
    command takes a value, {key} the key (a command that takes no overrides says what it takes)."""
    from omegaconf import OmegaConf

    values = OmegaConf.to_container(cfg, resolve=False)
    values.pop("hydra", None)
    missing = [key for key, value in flatten(values).items() if value == MISSING]
    if not missing:
        return
    key = missing[0]
    where, comment = _mandatory_key_comment(config_name, key)
    what = f": {comment}" if comment else ""
    raise ConfigError(f"{key} is not set{what}; {how.format(key=key)} ({where})")


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
            reason = first_line(err)
            raise ConfigError(f"{key}={value} does not resolve: {reason}") from None
        if "oc.env" in value and "oc.decode" not in value and isinstance(resolved, str):
            defaults = compose(config_name) if defaults is None else defaults
            default = OmegaConf.select(defaults, key, default=None, throw_on_resolution_failure=False)
            if isinstance(default, (bool, int, float)) or (default is None and _reads_as_number(resolved)):
                kind = ("true or false" if isinstance(default, bool) else "a number" if default is not None else
                        "null (a number or a flag when set)")
                decoded = f'{key}="${{oc.decode:{value}}}"'
                raise ConfigError(f"{key}={value} gives the text {resolved!r} where the config holds {kind}: an "
                                  f"environment variable is read as text; write '{decoded}' (quotes and all)")


def _reads_as_number(text: str) -> bool:
    """Whether `text`, written in a config, would be a number or a flag rather than text (64, 1e-4, true)."""
    import yaml

    try:
        return isinstance(yaml.safe_load(text), (bool, int, float))
    except yaml.YAMLError:
        return False


def swept_keys(overrides: list[str]) -> frozenset[str]:
    """The keys (or groups) a --multirun command line sweeps (a,b, range(...), glob(...)); none where it does not
    parse (Hydra's run then says why)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return frozenset()
    return frozenset(o.key_or_group for o in parsed if o.is_sweep_override())


def sweep_size(overrides: list[str]) -> int | None:
    """How many jobs a --multirun command line makes (Hydra's basic sweeper: every combination of the swept values);
    None where it does not parse, or only Hydra's run expands it (a glob over a group's options)."""
    import math

    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        return math.prod(len(list(o.sweep_string_iterator())) for o in parsed if o.is_sweep_override())
    except Exception:  # HydraException for a malformed override; a glob's expansion needs the config's groups
        return None


def refuse_sweep(config_name: str, overrides: list[str]):
    """A --multirun command line's refusals before Hydra writes anything, as a single run's: a misspelt key or
    option (each option a swept group takes), a key added with '+' that nothing reads, a value left at ???, an
    interpolation that does not resolve. Checked on the sweep's first job (every swept key at its first value), and
    on one job per other option of a swept group. Returns the first job's config (with its hydra node), or None
    where the sweep only Hydra's run expands (a glob over a group's options)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        values = {o.input_line: [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else None
                  for o in parsed}
    except HydraException:  # a malformed override: Hydra's run says so
        return None
    except Exception:  # a sweep only Hydra's run expands
        return None
    keys = {o.input_line: o.get_key_element() for o in parsed}
    first = [f"{keys[line]}={found[0]}" if found else line for line, found in values.items()]
    jobs = [first]
    for i, (line, found) in enumerate(values.items()):
        if found and _is_group(keys[line].lstrip("+~")):  # a group: each option must exist
            jobs += [[*first[:i], f"{keys[line]}={value}", *first[i + 1:]] for value in found[1:]]
    for job in jobs:
        cfg = compose(config_name, job, with_hydra=True)
        refuse_added_keys(cfg, [o for o in job if o.startswith("+") and not o.startswith("++")], config_name)
    cfg = compose(config_name, first, with_hydra=True)
    refuse_missing_values(cfg, config_name)
    refuse_bad_interpolations(cfg, config_name, first)
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
    name = max(Path(subdir).parts, key=lambda part: len(os.fsencode(part)), default="")
    if len(os.fsencode(name)) <= NAME_MAX_BYTES:
        return
    named = [o for o in job if o.replace("/", "_") in name]
    longest = f"; the longest override in it is {max(named, key=len)}" if named else ""
    if any(o.startswith("run_name=") for o in job):  # a run_name given: every other override names the job
        shorter = "fewer overrides on the command line"
    else:
        shorter = (f"keys that need not name the folder in hydra.job.config.override_dirname.exclude_keys "
                   f"({config_words(config_name + '.yaml')}), a shorter run_name=...")
    raise ConfigError(f"a job of this sweep would be named {name[:48]}... ({len(os.fsencode(name))} bytes; a name may "
                      f"have {NAME_MAX_BYTES}): its run name and every other override{longest}. Shorten it: put the "
                      f"settings that stay fixed in a config of one's own (configs/experiment/<name>.yaml, "
                      f"experiment=<name>), {shorter}, or shorter values.")


def _longest_value(override) -> str:
    """A swept override (a,b or range(...)) as key=value at its longest value."""
    values = [str(v) for v in override.sweep_string_iterator()]
    return f"{override.get_key_element()}={max(values, key=lambda v: len(os.fsencode(v)))}"


def _mandatory_key_comment(config_name: str, key: str) -> tuple[str, str]:
    """(the config file that leaves `key` at ???, the comment on that line): the script's own config first, then
    the files of the group the key belongs to; (the script's config, '') when no line says it."""
    leaf = re.escape(key.rsplit(".", 1)[-1])
    line = re.compile(rf"^\s*{leaf}:\s*\?\?\?\s*(?:#\s*(.*))?$", re.MULTILINE)
    group = key.split(".")[0]
    options = sorted({p.name for f in config_sources().folders() for p in (f / group).glob("*.yaml")})
    files = [f"{config_name}.yaml", *([f"{group}/{name}" for name in options] if "." in key else [])]
    for relative in files:
        path = config_file(relative)
        found = line.search(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else None
        if found:
            return config_words(relative), (found.group(1) or "").strip()
    return config_words(f"{config_name}.yaml"), ""


def _is_group(name: str) -> bool:
    """Whether `name` is a config group (a folder of options) of the command's configs."""
    found = config_file(name)
    return found is not None and found.is_dir()


def added_overrides() -> list[str]:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    # the command line as written: an override's ${...} is its value's to resolve, not this list's
    task = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    return [o for o in task if o.startswith("+") and not o.startswith("++")]


def data_overrides(also: tuple[str, ...] = ()) -> list[str] | None:
    """The running Hydra command's data= and data.*, paths.* overrides (and those of the keys `also`) as written,
    after the data group it composed
    where its command line names none (pretraining's default group is not the data stages'): what a data stage's
    command (train_tokenizer.py, prepare_corpus.py) takes to make the tokenizer or corpus this command reads, which a
    refusal prints. None outside a Hydra command (a config composed in Python: its overrides are the caller's)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not HydraConfig.initialized():
        return None
    task = OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False)
    given = [o for o in task if o.lstrip("+~").split("=", 1)[0].split(".")[0] in ("data", "paths", *also)]
    group = composed_option("data")
    named = any(o.lstrip("+~").split("=", 1)[0] == "data" for o in given)
    return given if named or group is None else [f"data={group}", *given]


def absent_source(given: list[str]) -> str | None:
    """The first local source (a file, or a glob matching none) of the corpus the data overrides `given` compose
    that is not there; None where each is, for a hub source, or where `given` does not compose (the refusal then
    names the prepare_corpus command, which says what is wrong with them)."""
    import glob

    from omegaconf.errors import OmegaConfBaseException

    try:
        sources = compose("corpus", given).data.sources
    except (ConfigError, OmegaConfBaseException):  # e.g. data=text's sources: ??? (its own error is clearer)
        return None
    for src in (str(s) for s in (sources or ())):
        if not src.startswith("hf:") and not (glob.glob(src) if glob.has_magic(src) else os.path.exists(src)):
            return src
    return None


def composed_mirror(given: list[str]) -> str | None:
    """paths.data_mirror as the data overrides `given` compose it (``$LINFORMER_DATA_MIRROR``, else ../shared/data,
    unless they set it), as the sources ``absent_source`` checks name it; None where they do not compose."""
    from omegaconf.errors import OmegaConfBaseException

    try:
        mirror = compose("corpus", given).paths.data_mirror
    except (ConfigError, OmegaConfBaseException):
        return None
    return str(mirror) if mirror else None


def _own_config(config_name: str) -> dict:
    import yaml

    path = config_file(f"{config_name}.yaml")
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path is not None and path.is_file() else {}


def config_groups(config_name: str) -> list[str]:
    """The config groups configs/<config_name>.yaml's defaults list selects: the only ones its script reads."""
    return list(_default_options(config_name))


def _default_options(config_name: str, seen: frozenset[str] = frozenset()) -> dict[str, str | None]:
    """{group: its default option} of configs/<config_name>.yaml's defaults list, Hydra's own left out; a config the
    list names (one's own built on a command's: ``- pretrain``) gives its groups, a later entry overriding them."""
    options: dict[str, str | None] = {}
    for entry in _own_config(config_name).get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            named = entry.lstrip("/")
            if named not in seen and config_file(f"{named}.yaml") is not None:
                options.update(_default_options(named, seen | {config_name}))
        elif isinstance(entry, dict):
            group, option = next(iter(entry.items()))
            if group.split("@")[0] != "hydra":
                options[group.removeprefix("override ").split("@")[0]] = option
    return options


def value_origin(key: str) -> str | None:
    """Where the running Hydra command's value of the dotted `key` comes from, in words: None where the command line
    gives it, or outside a Hydra command (a config composed in Python: nothing says); else its group's option and
    whether that is the command's default (`data=mirror_slice (configs/data/mirror_slice.yaml), configs/pretrain.yaml's
    default`), so that a refusal does not pass a group's value off as one the user chose."""
    from hydra.core.hydra_config import HydraConfig

    group = key.split(".", 1)[0]
    option = composed_option(group)
    if option is None or command_line_gives(key):
        return None
    config_name = HydraConfig.get().job.config_name
    chosen = ("the command line's choice" if _default_options(config_name).get(group) != option else
              f"{config_words(config_name + '.yaml')}'s default")
    return f"{group}={option} ({config_words(f'{group}/{option}.yaml')}), {chosen}"


def command_line_gives(key: str) -> bool:
    """Whether the running Hydra command's command line sets the dotted `key` (False outside a Hydra command: a
    config composed in Python says nothing of where its values come from)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.initialized() and any(str(o).lstrip("+~").split("=", 1)[0] == key
                                             for o in HydraConfig.get().overrides.task)


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
        if _is_group(group):
            groups = config_groups(config_name)
            if group in groups:
                continue
            launch = (f" (configs/{group}/ holds `accelerate launch --config_file configs/{group}/<file>.yaml` files)"
                      if group == "accelerate" else "")
            own = config_words(f"{config_name}.yaml")
            raise ConfigError(f"{override}: nothing reads it: this command's config ({own}) "
                              f"selects no '{group}' group{launch}; the groups it reads: {', '.join(groups)}")
        if key.startswith("model."):
            # the command builds a model from model.* (a group, or its own block): LinformerConfig names a field it
            # does not have
            if "model" in config_groups(config_name) or "model" in _own_config(config_name):
                continue
            own = config_words(f"{config_name}.yaml")
            raise ConfigError(f"{override}: nothing reads it: this command's config ({own}) "
                              "has no model settings; the model comes whole from model_path (convert or reshape "
                              f"it first: {script_command('convert')} model_path=... model.<field>=...)")
        if spec_overrides([override[1:]]) != [override[1:]]:
            continue  # a TaskSpec field of the task's spec block (runconfig.settings.task_spec reads and checks it)
        values = flatten(OmegaConf.to_container(cfg, resolve=False))
        # a key the config reads only where an option sets it (${oc.select:data.vocab_size,50265}): the key that
        # reads it is the one to give
        readers = [k for k, v in values.items() if k != key and f"oc.select:{key}," in str(v).replace(" ", "")]
        if readers:
            value = override.split("=", 1)[1] if "=" in override else "..."
            raise ConfigError(f"{override}: this command reads {key} only where its {key.split('.')[0]} option sets "
                              f"it, as the default of {readers[0]}: give {readers[0]}={value}")
        known = [k for k in values if k != key]
        raise ConfigError(f"{override}: no code reads the key {key}{did_you_mean(key, known)}. Every setting is in configs/; set a "
                          "known one without the '+'.")
