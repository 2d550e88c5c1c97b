"""The commands the committed results record (docs/results/*.md: a fenced block's `python scripts/...` lines and each
"Command: python scripts/..." line) still parse with today's scripts: argparse's parse_args for an argparse
script, Hydra's composition of the overrides for a Hydra one. Nothing is run: a result whose recorded command no
longer parses is one a reader cannot regenerate by pasting it."""

import argparse
import re
import shlex
from pathlib import Path

import pytest

from linformer.configs import compose

from ..conftest import load_script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
SCRIPT = re.compile(r"python3? (scripts/\w+\.py)\b")


def recorded_commands() -> list[tuple[str, str]]:
    """(file name, command) for every script command a results file records."""
    found = []
    for path in sorted(RESULTS.glob("*.md")):
        text = path.read_text()
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                if SCRIPT.match(line.strip()):
                    found.append((path.name, line.strip()))
        found += [(path.name, c) for c in re.findall(r"Command: `(python3? scripts/[^`]+)`", text)]
    return found


class _Parsed(Exception):
    """Raised in place of running the script once its arguments parsed."""


def parses(command: str, monkeypatch) -> None:
    words = shlex.split(command, comments=True)
    script = SCRIPT.match(command).group(1)
    source = (ROOT / script).read_text()
    hydra = re.search(r'@hydra_main\("(\w+)"\)', source)
    args = words[2:]
    if hydra:
        name = hydra.group(1)
        if args[:1] == ["--config-name"]:
            name, args = args[1], args[2:]
        compose(name, args)  # a malformed override or an unknown key is a ConfigError
        return
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, argv=None, namespace=None):
        parse(self, argv, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr("sys.argv", [script, *args])
    module = load_script(Path(script).stem)
    with pytest.raises(_Parsed):
        module.main(args)


def test_the_results_record_commands_of_each_measurement_script():
    scripts = {SCRIPT.match(c).group(1) for _, c in recorded_commands()}
    assert {"scripts/benchmark.py", "scripts/fidelity.py", "scripts/length_policy.py", "scripts/long_inputs.py",
            "scripts/cls_probe.py", "scripts/model_checks.py", "scripts/analyze_spectrum.py"} <= scripts


@pytest.mark.parametrize("name, command", recorded_commands(), ids=lambda x: x[:60])
def test_a_recorded_command_parses_with_today_s_script(name, command, monkeypatch, capsys):
    try:
        parses(command, monkeypatch)
    except SystemExit:  # argparse's refusal, printed
        pytest.fail(f"docs/results/{name}: {command}\n{capsys.readouterr().err}")


@pytest.mark.parametrize("script, argv, named", [
    ("fidelity", ["=", "--corpus", "c", "--self-reference"], "models is empty"),
    ("length_policy", ["--source", "nothere/model"], "--source='nothere/model'")])
def test_a_script_s_model_error_names_its_own_argument(script, argv, named, tmp_path, capsys, monkeypatch):
    """fidelity's positional `models` and length_policy's --source were called model_path, a key neither takes."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        load_script(script).main([*argv, "--out", str(tmp_path / "r")])
    (line,) = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and line.startswith(f"error: {named}") and "model_path" not in line, line


def test_every_figure_the_docs_show_is_a_result_with_its_command():
    """docs/guide.md showed dashboard.png, a TensorBoard screenshot no command makes again: every figure the README
    and the guide show is a file under docs/results that its README names (with the command that draws it)."""
    listed = (RESULTS / "README.md").read_text()
    for doc in (ROOT / "README.md", ROOT / "docs" / "guide.md"):
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", doc.read_text()):
            figure = (doc.parent / target).resolve()
            assert figure.is_file(), f"{doc.name} shows {target}, which is not there"
            assert figure.is_relative_to(RESULTS), f"{doc.name} shows {target}, which is no result with a command"
            assert figure.relative_to(RESULTS).as_posix() in listed, f"{target} is not named in docs/results/README.md"
