"""tools/check_lowest.py: the declared lower bounds as the pins of the lowest-bounds venv (`make check-lowest`)."""

from pathlib import Path

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    return load_script("check_lowest", "tools")


def test_every_lower_bound_of_pyproject_and_its_dev_extra_is_pinned_and_nothing_else(tmp_path):
    tool = _tool()
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["torch>=2.8,<2.14", "Hydra_Core>=1.3.2,<1.4", '
                         '"numpy", "pyyaml>=6,<7", "exact==1.2", "compatible~=0.4.3", "two>=1.0,>=1.1"]\n'
                         '[project.optional-dependencies]\ndev = ["pytest>=8", "ruff"]\nother = ["x>=1"]\n')
    pins = tool.lowest_pins(pyproject)
    assert pins == {"torch": "2.8", "hydra-core": "1.3.2", "pyyaml": "6", "exact": "1.2", "compatible": "0.4.3",
                    "two": "1.1", "pytest": "8"}
    assert tool.constraints({"torch": "2.8", "hydra-core": "1.3.2"}) == "hydra-core==1.3.2\ntorch==2.8\n"


def test_the_project_s_own_bounds_are_read_from_its_pyproject():
    """Every bounded dependency of pyproject.toml is pinned at its bound (the file itself, not a second list)."""
    pins = _tool().lowest_pins(ROOT / "pyproject.toml")
    assert {"torch", "transformers", "tokenizers", "safetensors", "tensorboard", "wandb", "pytest"} <= set(pins)
    assert "numpy" not in pins


def test_the_local_torch_wheel_is_the_bound_s_where_there_and_else_the_newest(tmp_path):
    import sys

    tool = _tool()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for version in ("2.9.0", "2.13.0"):
        (tmp_path / f"torch-{version}+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    assert tool.local_torch(tmp_path, "2.9") == (tmp_path / f"torch-2.9.0+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl",
                                                 True)
    assert tool.local_torch(tmp_path, "2.8") == (tmp_path / f"torch-2.13.0+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl",
                                                 False)
    assert tool.local_torch(tmp_path / "none", "2.8") == (None, False)
