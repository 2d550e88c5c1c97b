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
