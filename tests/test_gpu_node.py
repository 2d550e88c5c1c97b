"""linformer/gpu/node.py: before a GPU target starts, a module its jobs import that is missing, or a wheel's
requirement the node's own version fails (pip --no-deps checks none), is one error line."""

import sys
from types import SimpleNamespace

import pytest

from linformer.errors import ConfigError
from linformer.gpu import node, targets


def _installed(monkeypatch, dists: dict[str, tuple]) -> None:
    """importlib.metadata as node reads it, holding `dists`: name -> (version, requirements[, the folder it is installed
    in: the wheels' /tmp/site unless given])."""
    def lookup(name):
        if name.lower() not in dists:
            raise node.metadata.PackageNotFoundError(name)
        return dists[name.lower()]

    def distribution(name):
        folder = (*lookup(name), "/tmp/site")[2]
        return SimpleNamespace(locate_file=lambda path: folder)

    monkeypatch.setattr(node, "metadata", SimpleNamespace(
        PackageNotFoundError=node.metadata.PackageNotFoundError, distribution=distribution,
        version=lambda name: lookup(name)[0], requires=lambda name: lookup(name)[1]))


def test_a_wheels_requirement_the_nodes_version_fails_is_named_with_both_versions(monkeypatch):
    _installed(monkeypatch, {
        "linformer": ("0.1.0", ["datasets<6,>=3.0", "wandb>=0.19", "onnx; extra == 'dev'"]),
        "datasets": ("5.2.0", ["pyarrow>=24.0.0", "fsspec[http]<=2026.9.0,>=2023.1.0",
                               "tensorflow; sys_platform == 'nowhere'"]),
        "pyarrow": ("24.0.1", []), "fsspec": ("2026.10.0", []), "onnx": ("0.1", [])})
    assert node.unmet_requirement() == "fsspec 2026.10.0 is installed here, and datasets requires fsspec<=2026.9.0,>=2023.1.0"
    _installed(monkeypatch, {"linformer": ("0.1.0", ["datasets<6,>=3.0"]), "datasets": ("5.2.0", ["pyarrow>=24.0.0"]),
                             "pyarrow": ("21.0.0", [])})
    with pytest.raises(ConfigError, match=r"^pyarrow 21.0.0 is installed here, and datasets requires pyarrow>=24.0.0: "):
        node.check_node()
    # wandb not installed (the node list leaves it out), onnx only an extra's, a marker for another platform: met
    _installed(monkeypatch, {"linformer": ("0.1.0", ["datasets<6", "wandb>=0.19", "onnx<0; extra == 'dev'"]),
                             "datasets": ("5.2.0", []), "onnx": ("1.0", [])})
    assert node.unmet_requirement() is None


def test_the_nodes_own_packages_are_checked_as_a_wheel_requires_them_not_for_their_own_pins(monkeypatch):
    venv = "/opt/torch/.venv/lib/python3.12/site-packages"
    _installed(monkeypatch, {"linformer": ("0.1.0", ["torch>=2.4", "datasets<6"]), "datasets": ("5.2.0", []),
                             "torch": ("2.13.0", ["nvidia-cudnn-cu12==9.1.0.70"], venv),
                             "nvidia-cudnn-cu12": ("9.10.2", [], venv)})
    assert node.unmet_requirement() is None  # the image's own torch/cuDNN pins are not the wheels'
    _installed(monkeypatch, {"linformer": ("0.1.0", ["torch>=2.20"]), "torch": ("2.13.0", [], venv)})
    assert node.unmet_requirement() == "torch 2.13.0 is installed here, and linformer requires torch>=2.20"


def test_a_module_the_jobs_import_missing_stops_gpu_py_before_the_device_is_looked_for(tmp_path, monkeypatch,
                                                                                        capsys):
    monkeypatch.setattr("linformer.devices.cuda_device_name", lambda: pytest.fail("the device was looked for"))
    real = node.importlib.util.find_spec
    monkeypatch.setattr(node.importlib.util, "find_spec", lambda name: None if name == "datasets" else real(name))
    fake = {"table3": [[sys.executable, "-c", "pass"]]}
    monkeypatch.setattr(targets, "target_commands", lambda out, *_: fake)
    with pytest.raises(SystemExit) as ended:
        targets.main(["table3", "--work", str(tmp_path / "w"), "--out", str(tmp_path / "back")])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err == ("error: datasets is missing here, and the targets' jobs import it: "
                                             "install the wheels first (docs/gpu/README.md, steps 1 and 3)\n")
    assert not (tmp_path / "w").exists()


def test_a_pre_release_the_node_holds_meets_the_requirements_its_version_meets(monkeypatch):
    """A GPU image's torch is often a pre-release build (an NGC image's 2.5.0a0+...nv24.08): a wheel requiring
    torch>=2.4 is met by it, as pip would install beside it; one requiring more than it is still named."""
    venv = "/opt/torch/.venv/lib/python3.12/site-packages"
    torch = ("2.5.0a0+872d972e41.nv24.08", [], venv)
    _installed(monkeypatch, {"linformer": ("0.1.0", ["torch>=2.4", "datasets<6"]),
                             "datasets": ("5.2.0", ["pyarrow>=15"]), "pyarrow": ("16.0.0rc1", []), "torch": torch})
    assert node.unmet_requirement() is None
    _installed(monkeypatch, {"linformer": ("0.1.0", ["torch>=2.6"]), "torch": torch})
    assert node.unmet_requirement() == ("torch 2.5.0a0+872d972e41.nv24.08 is installed here, and linformer requires "
                                        "torch>=2.6")
