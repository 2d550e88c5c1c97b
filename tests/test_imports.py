"""The package's modules import each other without cycles, counting imports inside functions: a cycle hidden by
a function-level import still ties the two modules' designs together."""

import ast
from pathlib import Path

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
# mechanisms everything shares (errors, signal handling, atomic files, the CLI wrapper); the job runner sits with
# the plans it runs, above the output rule it applies to every plan before the first job starts.
# errors and values live in modeling/ because the model's code, which a saved model carries (modeling/auto.py),
# imports nothing outside it; they import nothing of the package, so they stay in the lowest layer.
LOWEST_IN_MODELING = {"modeling.errors", "modeling.values"}
LAYERS = [
    {"errors", "version", *LOWEST_IN_MODELING},
    {"signals", "files", "plots", "cli", "shell", "runname", "configs", "hydra_start", "argtypes", "devices", "logfile"},
    {"data"},
    {"modeling"},
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
