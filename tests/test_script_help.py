"""Each Hydra script's --help (configs/hydra/help/script.yaml, linformer/script_help.py): Hydra's generic
"<script> is powered by Hydra" with no word of what the script does, and every group under configs/ listed to every
script, the shared parts (``data: _settings``, ``task: _example``) among the options and groups the script does not
read (``task`` on pretraining) with them. Composed as Hydra's --help composes it, the template filled as Hydra fills
it (``Hydra.get_help``)."""

import ast
import re
import string
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig

from linformer.configs import compose

from .conftest import hydra_scripts

REPO = Path(__file__).resolve().parents[1]
HYDRA_SCRIPTS = hydra_scripts()


def help_text(script: str) -> str:
    cfg = compose(HYDRA_SCRIPTS[script], [f"hydra.job.name={script}"], with_hydra=True)
    HydraConfig.instance().set_config(cfg)
    try:
        return string.Template(cfg.hydra.help.template).substitute(
            FLAGS_HELP="", HYDRA_CONFIG_GROUPS="", APP_CONFIG_GROUPS="", CONFIG="<the config>\n")
    finally:
        HydraConfig.instance().cfg = None


@pytest.mark.parametrize("script", sorted(HYDRA_SCRIPTS))
def test_a_hydra_script_s_help_starts_with_what_it_does_and_lists_only_its_own_groups(script):
    text = help_text(script)
    doc = ast.get_docstring(ast.parse((REPO / "scripts" / f"{script}.py").read_text()))
    assert text.startswith(doc + "\n") and f"python scripts/{script}.py" in doc  # what it does, and an example
    groups = text.split("== Configuration groups (group=option) ==\n")[1].split("\n\n")[0].splitlines()
    assert all(not re.search(r"(^|[ /])_", line) for line in groups), groups
    assert "powered by Hydra" not in text and "accelerate" not in text


def test_pretraining_s_help_lists_the_groups_it_reads_with_the_chosen_option():
    groups = help_text("pretrain").split("== Configuration groups (group=option) ==\n")[1].split("\n\n")[0]
    assert "model: base, mini, small, tiny (now: tiny)" in groups.splitlines()
    assert "data: books, mirror, mirror_mini, mirror_slice, text, wiki, wiki_scratch (now: mirror_slice)" in groups
    assert "table2/n512_k128_kv" in groups and "(none chosen)" in groups  # experiment=, whose options are in folders
    assert not any(line.startswith("task:") for line in groups.splitlines())


def test_a_config_resolved_whole_outside_a_hydra_command_resolves_its_help_too():
    """A plan reads a job's config with its hydra node resolved (runconfig.plain_config): the groups' listing, which
    needs Hydra's runtime, failed it with "HydraConfig was not set"."""
    from omegaconf import OmegaConf

    resolved = OmegaConf.to_container(compose("pretrain", ["hydra.job.name=pretrain"], with_hydra=True), resolve=True)
    assert resolved["hydra"]["help"]["header"].startswith("MLM pretraining: python scripts/pretrain.py")


def _argparse_scripts() -> list[str]:
    return sorted(p.stem for p in (REPO / "scripts").glob("*.py") if p.stem not in HYDRA_SCRIPTS)


@pytest.mark.parametrize("script", _argparse_scripts())
def test_a_script_s_help_works_under_python_oo(script, monkeypatch, capsys):
    """``python -OO`` (PYTHONOPTIMIZE=2) drops docstrings: 16 scripts built their parser from
    ``__doc__.splitlines()[0]`` and crashed at start, --help included. Each script run as -OO compiles it, its
    package module's (scripts/gpu.py's linformer.gpu.targets) with its __doc__ None."""
    import importlib
    import sys

    path = REPO / "scripts" / f"{script}.py"
    package = {"gpu": "linformer.gpu.targets", "gpu_carry": "linformer.gpu.carry"}.get(script)
    if package:
        monkeypatch.setattr(importlib.import_module(package), "__doc__", None)
    monkeypatch.syspath_prepend(str(path.parent))
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    code = compile(path.read_text(encoding="utf-8"), str(path), "exec", optimize=2)
    with pytest.raises(SystemExit) as end:
        exec(code, {"__name__": "__main__", "__file__": str(path), "__doc__": None})  # as -OO runs it
    out = capsys.readouterr().out
    assert end.value.code == 0 and out.startswith("usage:")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    if "description(__doc__" in path.read_text(encoding="utf-8"):
        assert doc.splitlines()[0].split()[0] in out  # its description, from the source


def test_a_module_s_description_is_read_from_its_source_where_python_dropped_it():
    from linformer.experiments import mini, pretrained, scratch
    from linformer.script_help import description, module_doc

    for module in (mini, pretrained, scratch):
        assert module_doc(None, module.__file__) == module.__doc__  # a plan's title under -OO
        assert description(None, module.__file__, paragraph=True) == module.__doc__.split("\n\n")[0]
    assert description(None, REPO / "scripts" / "demo.py").startswith("`make demo`: the whole pipeline")
    assert module_doc(None, REPO / "no-such.py") == "" and description(None, REPO / "no-such.py") == ""


def test_no_code_reads_a_docstring_that_python_oo_drops():
    """Every ``__doc__`` the package, scripts/ and tools/ read goes through module_doc/description or allows None."""
    found = []
    for folder in ("linformer", "scripts", "tools"):
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            allowed = {id(call.args[0]) for call in ast.walk(tree) if isinstance(call, ast.Call) and call.args
                       and getattr(call.func, "id", None) in ("module_doc", "description")}
            allowed |= {id(op.values[0]) for op in ast.walk(tree) if isinstance(op, ast.BoolOp)
                        and isinstance(op.op, ast.Or)}
            found += [f"{path.relative_to(REPO)}:{n.lineno}" for n in ast.walk(tree)
                      if isinstance(n, ast.Name) and n.id == "__doc__" and id(n) not in allowed]
    assert found == []


@pytest.mark.parametrize("script", _argparse_scripts())
def test_a_script_s_help_over_a_wheel_says_where_its_paths_start_and_names_itself_where_it_is(script, tmp_path,
                                                                                                 monkeypatch, capsys):
    """Over a wheel relative paths start from the working directory (``locations.resolve_path``), but the help
    texts said "relative to the repository"; and model_checks' description, wrapped by argparse after "python",
    printed `python scripts/model_checks.py`, which does not paste from another folder. The words come from the
    resolver, and every example command names the script where it is."""
    import runpy
    import sys

    from linformer.files import locations

    monkeypatch.setattr(locations, "__file__", str(tmp_path / "site-packages" / "linformer" / "files" / "l.py"))
    monkeypatch.chdir(tmp_path)
    path = REPO / "scripts" / f"{script}.py"
    monkeypatch.syspath_prepend(str(path.parent))
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])
    with pytest.raises(SystemExit) as end:
        runpy.run_path(str(path), run_name="__main__")
    out = " ".join(capsys.readouterr().out.split())
    assert end.value.code == 0 and "relative to the repository" not in out
    assert "python scripts/" not in out


def test_the_data_mirror_s_words_over_a_wheel_say_where_a_relative_mirror_starts(tmp_path, monkeypatch):
    """`train_tokenizer.py data=mirror` without a mirror said "../shared/data (relative to the repository)" over a
    wheel, which had resolved it from the working directory."""
    from linformer.data.io import data_mirror_words
    from linformer.files import locations

    monkeypatch.setenv("LINFORMER_CONFIG_DIR", str(REPO / "configs"))
    monkeypatch.setattr(locations, "__file__", str(tmp_path / "site-packages" / "linformer" / "files" / "l.py"))
    assert data_mirror_words().endswith("../shared/data (relative to the working directory)")
