"""Shared test set-up: offline hubs and trackers, deterministic torch, tiny model configs."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Tests never reach a hub: loaders must take their local-file paths.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")

# Nor do they write into the user's Hugging Face caches: a trust_remote_code load copies the model's code into
# transformers_modules/<folder name> (one folder per test's model, one more per code version), an evaluate module its
# files and locks, datasets its cache. Each test process gets caches of its own, set before any of those libraries
# is imported (each reads them once, at its import), inherited by the commands the tests start, and removed at its
# exit. Set over what the environment says: a developer's own cache variables name the real caches.
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="linformer-tests-hf-")
os.environ.update({name: os.path.join(os.environ["HF_HOME"], folder) for name, folder in (
    ("HF_HUB_CACHE", "hub"), ("HF_MODULES_CACHE", "modules"), ("HF_DATASETS_CACHE", "datasets"),
    ("HF_EVALUATE_CACHE", "evaluate"), ("HF_METRICS_CACHE", "metrics"))})

import pytest
import torch

HF_CACHES = Path(os.environ["HF_HOME"])  # this test process's, removed at its exit
atexit.register(shutil.rmtree, HF_CACHES, True)

# Under pytest-xdist (make test: -n auto) the workers share the cores: one worker does not take them all.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


def pytest_collection_modifyitems(config, items):
    """GPU tests are skipped, not failed, where CUDA is absent (CI never has a GPU)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # the marker, not any keyword (a parameter id "gpu")
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _each_composition_once():
    """Hydra's compose takes a third of a second (seconds on a loaded machine), and the tests ask for the same
    composition again and again (a plan's jobs in every dry run, the tiny pretraining config): each one is made once
    per test process, and every call gets a copy of its own to change. The key is all that a composition reads: the
    config name, the overrides, whether the hydra node is kept, the working directory and Hydra's job name (both
    recorded in that node), and the config sources with a digest of each file's text (a test that writes or edits a
    config composes afresh, even where the file keeps its size and modification time). Interpolations
    (${oc.env:...}) stay unresolved in the copy, read at access as before. A failed composition is not kept: each
    call fails anew."""
    import copy
    import hashlib

    import hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import JobRuntime

    real, made = hydra.compose, {}

    def files(sources) -> tuple:
        found = []
        for source in sources:
            found.append((source.provider, source.scheme(), source.path))
            if source.scheme() == "file":
                found.extend((str(p), hashlib.sha256(p.read_bytes()).digest())
                             for p in sorted(Path(source.path).rglob("*")) if p.is_file())
        return tuple(found)

    def values_apart(config_name, overrides):
        """(the overrides that choose the defaults, the value overrides Hydra applies after composing them, all of
        them parsed) as Hydra's own loader tells them apart (a key that is no config group, or a dict value); None
        where an override is Hydra's own, a sweep, a deletion or a package's, which the memo leaves to Hydra."""
        loader = GlobalHydra.instance().config_loader()
        parse = getattr(loader, "_parse_overrides_and_create_caching_repo", None)
        if parse is None:
            return None
        parsed, repo = parse(config_name, list(overrides))
        if any(o.is_hydra_override() or o.is_sweep_override() or o.is_delete() or o.package is not None
               for o in parsed):
            return None
        values = [o for o in parsed if isinstance(o.value(), dict) or not repo.group_exists(o.key_or_group)]
        return [o.input_line for o in parsed if all(o is not v for v in values)], values, parsed

    def compose(config_name=None, overrides=None, return_hydra_config=False, strict=None):
        if strict is not None or not GlobalHydra().is_initialized():  # Hydra's own answer (a deprecated flag, an
            return real(config_name, overrides, return_hydra_config, strict)  # assertion before an initialize)
        key = (config_name, tuple(overrides or ()), return_hydra_config, os.getcwd(), JobRuntime().conf.get("name"),
               files(GlobalHydra.instance().config_loader().get_sources()))
        if key in made:
            return copy.deepcopy(made[key])
        if overrides:
            # Hydra composes the defaults the group overrides choose, then applies the value overrides to the
            # result (ConfigLoaderImpl._apply_overrides_to_config, in struct mode) and records every override in
            # the hydra node (hydra.overrides.task, hydra.job.override_dirname): the same steps, the composition
            # kept, so that `seed=3` after `seed=2` costs a copy, not a composition. Anything this path raises is
            # left to Hydra's own composition, which then raises its own error.
            try:
                apart = values_apart(config_name, overrides)
                if apart is not None and apart[1]:
                    from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname

                    cfg = compose(config_name, apart[0], return_hydra_config)
                    ConfigLoaderImpl._apply_overrides_to_config(apart[1], cfg)
                    if return_hydra_config:
                        parsed, dirname = apart[2], cfg.hydra.job.config.override_dirname
                        cfg.hydra.overrides.task = [o.input_line for o in parsed]
                        cfg.hydra.job.override_dirname = get_overrides_dirname(
                            overrides=parsed, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep,
                            exclude_keys=dirname.exclude_keys)
                    return cfg
            except Exception:
                pass
        cfg = real(config_name, overrides, return_hydra_config)
        made[key] = copy.deepcopy(cfg)
        return cfg

    compose.__wrapped__ = real  # Hydra's own, for the test that the memo gives what it gives
    hydra.compose = compose
    yield
    hydra.compose = real


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _process_state_restored():
    """What a script's main, run in-process, sets for the whole process is set back after the test: Hydra's job
    logging (configs/hydra/job_logging) gives the root logger a handler on the sys.stderr of the moment, pytest's
    capture, which is closed once the test ends (a later test's log line then printed a "Logging error" traceback
    into its own output), so every logger is put back as the commands put it back (``hydra_start.logging_restored``);
    a run sets torch's threads; a Hydra command sets HydraConfig, which the package reads as "the running command"
    (``configs.data_overrides``: a later test's refusal printed the earlier command's data=mine)."""
    from hydra.core.hydra_config import HydraConfig

    from linformer.hydra_start import logging_restored

    threads, running = torch.get_num_threads(), HydraConfig.instance().cfg
    with logging_restored():
        yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    HydraConfig.instance().cfg = running


@pytest.fixture
def forbid_loading(monkeypatch):
    """A function that makes every weight load of a conversion (a source encoder, a saved Linformer), and each
    further (object, name) it is given, fail from then on: for tests that a check comes before anything loads."""
    import linformer.modeling.convert as convert

    def loaded(*args, **kwargs):
        raise AssertionError("loaded before the settings were checked")

    def forbid(*more):
        for obj, name in ((convert, "_load_source"), (convert, "load_pretrained"), *more):
            monkeypatch.setattr(obj, name, loaded)

    return forbid


@pytest.fixture
def registries():
    """The projection and sharing registries restored after the test (in place: modules hold them by reference)."""
    from linformer.modeling import attention, configuration

    names, builders = list(configuration.PROJECTIONS), dict(attention.PROJECTION_BUILDERS)
    sharing = dict(configuration.SHARING)
    yield
    configuration.PROJECTIONS[:] = names
    attention.PROJECTION_BUILDERS.clear()
    attention.PROJECTION_BUILDERS.update(builders)
    configuration.SHARING.clear()
    configuration.SHARING.update(sharing)


def load_script(name: str, folder: str = "scripts"):
    """<folder>/<name>.py (scripts/ or tools/) as a module, so a test calls its functions or main(argv) in-process."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / folder / f"{name}.py"
    if str(path.parent) not in sys.path:  # as `python scripts/<name>.py` has it: a script imports its siblings
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(script: str, argv: list[str], monkeypatch) -> int:
    """scripts/<script>.py run in this process as `python scripts/<script>.py argv...` runs it, its `if __name__ ==
    "__main__"` block included: its exit status (what it printed is the caller's capsys). A fresh process costs
    seconds of imports; one per CLI-only behaviour (a signal, the interpreter's own exit) is enough."""
    import runpy
    import sys

    scripts = Path(__file__).resolve().parents[1] / "scripts"
    monkeypatch.setattr(sys, "argv", [str(scripts / f"{script}.py"), *argv])
    # as `python scripts/<script>.py` has it: scripts/ first on the path (gpu.py imports its sibling wheelhouse)
    monkeypatch.syspath_prepend(str(scripts))
    try:
        runpy.run_path(str(scripts / f"{script}.py"), run_name="__main__")
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    return 0


def as_a_script(code: str, folder: Path) -> list[str]:
    """The command line of a Python child running `code` as a command's process runs: from a file in a scripts/
    folder under `folder` that says it is one of the package's commands (``locations.COMMAND_MARK``, as each of
    scripts/*.py does; ``cli.run_from_a_script``), so that the package's import leaves torch and transformers
    (seconds of each child's start, 10-20 s under load) to a command's body, and sets a command's start-up
    handling of Ctrl-C and SIGTERM (``cli.stop_while_starting``). `python -c` would import linformer.modeling with
    the package, as a notebook's import does."""
    import sys

    from linformer.files.locations import COMMAND_MARK

    script = folder / "scripts" / "child.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"{COMMAND_MARK} = True\n{code}")
    return [sys.executable, str(script)]


class RecordingTokenizer:
    """`tok`, recording in the list `given` every text each call is given (a long-text test's check that no call
    was given a whole text); what Encode reads of a tokenizer is `tok`'s."""

    def __init__(self, tok, given: list[str]):
        self.tok, self.given = tok, given
        self.model_input_names, self.backend_tokenizer = tok.model_input_names, tok.backend_tokenizer

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def __call__(self, *texts, **kwargs):
        self.given.extend(t for col in texts for t in ([col] if isinstance(col, str) else col))
        return self.tok(*texts, **kwargs)


def as_command(monkeypatch, argv: list[str | Path]) -> None:
    """This process as one of the package's commands sees itself (``locations.started_script``): `argv` its command
    line (argv[0] the script), and the main module marked as each of scripts/*.py marks it before its imports."""
    import sys

    from linformer.files.locations import COMMAND_MARK

    monkeypatch.setattr(sys, "argv", [str(a) for a in argv])
    monkeypatch.setattr(sys.modules["__main__"], COMMAND_MARK, True, raising=False)


def hydra_scripts() -> dict[str, str]:
    """{script stem: its config name} for every scripts/*.py decorated with @hydra_main("<config>", ...)."""
    import re

    scripts = Path(__file__).resolve().parents[1] / "scripts"
    found = {p.stem: re.search(r'@hydra_main\("(\w+)"', p.read_text()) for p in sorted(scripts.glob("*.py"))}
    return {stem: match.group(1) for stem, match in found.items() if match}


def stray_arrow(folder: str | Path, token_id: int) -> Path:
    """A copy of the .arrow file in `folder` (one split's) holding `token_id`, written beside it as cache-stray.arrow
    and listed nowhere: a file datasets' .map writes beside a split it loaded, no file of the split."""
    folder = Path(folder)
    [arrow] = sorted(folder.glob("*.arrow"))
    stray = folder / "cache-stray.arrow"
    _write_with_token_id(arrow, stray, token_id)
    return stray


def _write_with_token_id(arrow: Path, to: Path, token_id: int) -> None:
    """Write `arrow`'s table to `to` with `token_id` over the second id of its first row."""
    import pyarrow as pa

    with pa.memory_map(str(arrow)) as source:
        table = pa.ipc.open_stream(source).read_all()
    rows = table.column("input_ids").to_pylist()
    rows[0][1] = token_id
    table = table.set_column(table.schema.get_field_index("input_ids"), table.schema.field("input_ids"),
                             pa.array(rows, table.schema.field("input_ids").type))
    with pa.OSFile(str(to), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def put_token_id(folder: str | Path, token_id: int, split: str = "") -> Path:
    """Write `token_id` over the second id of the first row of the .arrow file under `folder` (`split`: its
    subfolder), and record the file's new size and sha256 in the folder's manifest.json, as a file rewritten by
    another tokenizer's ids whose listing was rewritten with it would read; returns the file."""
    import json

    from linformer.files.hashing import file_checksums

    folder = Path(folder)
    [arrow] = sorted((folder / split).glob("*.arrow"))
    written = arrow.with_name(arrow.name + ".new")
    _write_with_token_id(arrow, written, token_id)
    os.replace(written, arrow)  # a new inode: a split still mapped from the old file keeps reading it
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"].update(file_checksums(folder, [arrow]))
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return arrow
