"""scripts/wheelhouse.py: the offline install for cluster nodes without network (torch excluded).

The fast tests check the pieces on synthetic wheels; the slow one builds a real wheelhouse for this machine's
Python, installs torch into a fresh venv as the Makefile does, then the project from the wheelhouse with no index
and no network, and imports it.
"""

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("wheelhouse", REPO / "scripts" / "wheelhouse.py")
wh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wh)


def _wheel(folder, name, version, requires=(), tag="py3-none-any"):
    path = Path(folder) / f"{name}-{version}-{tag}.whl"
    info = f"{name}-{version}.dist-info"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}")
    return path


def test_manylinux_tag_covers_every_older_glibc():
    tags = wh.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and tags[-3:] == ["manylinux2014_x86_64", "manylinux2010_x86_64",
                                                                "manylinux1_x86_64"]
    assert "manylinux_2_24_x86_64" in tags and "manylinux_2_5_x86_64" in tags and "manylinux_2_29_x86_64" not in tags
    assert wh.platform_tags("manylinux2014_aarch64")[-2:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert wh.platform_tags("macosx_11_0_arm64") == ["macosx_11_0_arm64"]


def test_missing_requirements_follow_the_targets_markers(tmp_path):
    env = wh.marker_env("3.12", "manylinux_2_28_x86_64")
    tags = wh.target_tags("3.12", wh.platform_tags("manylinux_2_28_x86_64"))
    _wheel(tmp_path, "app", "1.0", ["torch>=2", "lib[fast]>=1", 'old; python_version < "3.12"',
                                     'new; python_version >= "3.12"', 'win; sys_platform == "win32"',
                                     'dev; extra == "dev"'])
    _wheel(tmp_path, "lib", "1.5", ['speedup; extra == "fast"'])
    _wheel(tmp_path, "new", "1.0", tag="cp311-cp311-manylinux_2_17_x86_64")  # another Python's wheel: not it
    roots = [wh.Requirement("app")]
    missing = sorted(r.name for r in wh.missing_requirements(tmp_path, roots, env, tags))
    assert missing == ["new", "speedup"]  # torch is the node's; old and win are not for this target; no dev extra
    _wheel(tmp_path, "new", "2.0", tag="cp312-cp312-manylinux_2_24_x86_64")
    _wheel(tmp_path, "speedup", "0.1", tag="cp312-abi3-manylinux2014_x86_64")
    assert wh.missing_requirements(tmp_path, roots, env, tags) == []
    assert [r.name for r in wh.missing_requirements(tmp_path, [wh.Requirement("lib>=2")], env, tags)] == ["lib"]


def test_a_nodes_own_packages_are_left_out_where_they_satisfy_every_requirement(tmp_path):
    env = wh.marker_env("3.12", "manylinux_2_28_x86_64")
    tags = wh.target_tags("3.12", wh.platform_tags("manylinux_2_28_x86_64"))
    _wheel(tmp_path, "app", "1.0", ["torch>=2", "lib>=1.2", "cfg>=2", "tool"])
    _wheel(tmp_path, "lib", "1.5", ["sub"])  # sub is reached only through lib
    _wheel(tmp_path, "sub", "0.3")
    _wheel(tmp_path, "cfg", "2.1")
    _wheel(tmp_path, "tool", "1.0")
    _wheel(tmp_path, "other", "1.0", tag="cp311-cp311-manylinux_2_17_x86_64")  # another target's: never touched
    node_file = tmp_path / "node.txt"
    node_file.write_text("# pip list --format=freeze\nlib==1.3\ncfg==1.9\nTool\n-e git+https://x/y#egg=z\n"
                         "torch==2.11.0+cu130\n")
    node = wh.read_node_packages(node_file)
    assert node == {"lib": wh.Version("1.3"), "cfg": wh.Version("1.9"), "tool": None, "torch": wh.Version("2.11.0+cu130")}
    dropped = wh.drop_node_packages(tmp_path, [wh.Requirement("app")], env, tags, node)
    # lib 1.3 satisfies >=1.2 (and takes sub with it); cfg 1.9 does not satisfy >=2; a bare name is any version
    assert sorted(p.name.split("-")[0] for p in dropped) == ["lib", "sub", "tool"]
    assert sorted(p.name.split("-")[0] for p in tmp_path.glob("*.whl")) == ["app", "cfg", "other"]


def test_wheels_the_script_did_not_write_are_never_deleted_nor_replaced(tmp_path, monkeypatch):
    """Leaving out the node's packages deletes only wheels a wheelhouse run wrote (its manifest); the user's unrelated
    wheel stays even when the node has it. A user's wheel with the project wheel's name is refused, not replaced."""
    env = wh.marker_env("3.12", "manylinux_2_28_x86_64")
    tags = wh.target_tags("3.12", wh.platform_tags("manylinux_2_28_x86_64"))
    _wheel(tmp_path, "app", "1.0", ["lib"])
    _wheel(tmp_path, "lib", "1.5")
    mine = _wheel(tmp_path, "mytool", "1.0")  # the user's, unrelated
    wh.write_manifest(tmp_path, {"app-1.0-py3-none-any.whl", "lib-1.5-py3-none-any.whl"})
    assert wh.own_wheels(tmp_path) == {"app-1.0-py3-none-any.whl", "lib-1.5-py3-none-any.whl"}
    node = {"lib": None, "mytool": None}
    dropped = wh.drop_node_packages(tmp_path, [wh.Requirement("app")], env, tags, node, ours=wh.own_wheels(tmp_path))
    assert [p.name for p in dropped] == ["lib-1.5-py3-none-any.whl"] and mine.is_file()

    work = tmp_path / "work"
    work.mkdir()
    built = work / "project" / "linformer-0.1.0-py3-none-any.whl"
    monkeypatch.setattr(wh, "pip", lambda *a: (built.parent.mkdir(parents=True, exist_ok=True),
                                               built.write_bytes(b"new"), (0, ""))[-1])
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / built.name).write_bytes(b"the user's")
    with pytest.raises(wh.WheelhouseError, match=f"{dest / built.name} is a wheel this script did not write"):
        wh.build_project_wheel(sys.executable, dest, work, foreign={built.name})
    assert (dest / built.name).read_bytes() == b"the user's"


def test_a_bad_node_packages_line_is_one_error_naming_the_file_and_line(tmp_path):
    node_file = tmp_path / "node.txt"
    node_file.write_text("numpy==2.1.0\nnot a package line\n")
    with pytest.raises(wh.WheelhouseError, match=r"node\.txt:2: 'not a package line' is not a package line"):
        wh.read_node_packages(node_file)
    node_file.write_text("numpy==two\n")
    with pytest.raises(wh.WheelhouseError, match=r"node\.txt:1: 'numpy==two'"):
        wh.read_node_packages(node_file)
    with pytest.raises(wh.WheelhouseError, match=r"--node-packages .*absent\.txt: No such file"):
        wh.read_node_packages(tmp_path / "absent.txt")


def test_unavailable_requirements_are_read_from_pips_failure():
    conflict = ("ERROR: Cannot install linformer because these package versions have conflicting dependencies.\n\n"
                "The conflict is caused by:\n    hydra-core 1.3.8 depends on antlr4-python3-runtime==4.9.*\n\n"
                "Additionally, some packages in these conflicts have no matching distributions available for your "
                "environment:\n    antlr4-python3-runtime\n\nTo fix this you could try to:\n")
    assert wh.unavailable_requirements(conflict) == ["antlr4-python3-runtime==4.9.*"]
    plain = ("ERROR: Could not find a version that satisfies the requirement tokenizers<0.24,>=0.21 (from linformer)\n"
             "ERROR: No matching distribution found for tokenizers<0.24,>=0.21 (from linformer)\n")
    assert wh.unavailable_requirements(plain) == ["tokenizers<0.24,>=0.21"]
    assert wh.unavailable_requirements("ERROR: ResolutionImpossible\n") == []


def test_stub_torch_satisfies_the_projects_range(tmp_path):
    version = wh.write_stub_wheel(tmp_path, "2.13.0")
    (path,) = tmp_path.glob("*.whl")
    name, parsed, requires = wh.wheel_metadata(path)
    assert (name, str(parsed), requires) == ("torch", version, [])
    assert wh.Requirement("torch>=2.4,<2.14").specifier.contains(parsed)


def test_bad_python_version_is_one_error_line(tmp_path):
    r = subprocess.run([sys.executable, "scripts/wheelhouse.py", "--dest", str(tmp_path), "--python-version", "312"],
                       cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "error: --python-version must look like 3.12, not '312'\n"


def test_a_dest_that_is_a_file_is_one_error_line(tmp_path):
    """It used to end in a FileExistsError traceback."""
    (tmp_path / "notes").write_text("mine")
    with pytest.raises(wh.WheelhouseError, match="--dest .*notes is a file, not a folder for the wheels"):
        wh.make_wheelhouse(tmp_path / "notes")
    assert (tmp_path / "notes").read_text() == "mine"


def test_the_install_line_pastes_whole_for_a_dest_with_a_space(tmp_path, monkeypatch, capsys):
    """The pip line it prints for the node is quoted for the shell: the wheelhouse path and the extras stay one word."""
    import shlex

    dest = tmp_path / "my wheels"
    summary = {"wheels": 3, "megabytes": 1.0, "target": "cp312 manylinux_2_28_x86_64", "dest": str(dest),
               "built_from_sdist": [], "seconds": 1.0, "torch": "2.13.0", "with_torch": False, "left_out": 0}
    monkeypatch.setattr(wh, "make_wheelhouse", lambda *args, **kwargs: summary)
    assert wh.main(["--dest", str(dest), "--extras", "pretrained,bench"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert shlex.split(line.split("on the node: ", 1)[1]) == [
        "pip", "install", "--no-index", "--find-links", str(dest), f"{wh.PROJECT}[pretrained,bench]"]


def _offline_env():
    """pip and Python with no index, no find-links but the wheelhouse, no config file, no hub."""
    # no PIP_* settings, and no PYTHONPATH: the venv must import the project it installed, not a checkout on the path
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", WANDB_MODE="offline")
    return env


def _no_network():
    """`unshare -n` (a network namespace with no interfaces) where this machine allows it."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True, check=False).returncode == 0:
        return [unshare, "-n"]
    return []


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_offline_install_from_the_wheelhouse(tmp_path):
    libc, glibc = platform.libc_ver()
    if libc != "glibc" or sys.platform != "linux":
        pytest.skip("builds a manylinux wheelhouse for this machine: needs Linux with glibc")
    major, minor = glibc.split(".")[:2]
    target = f"manylinux_{major}_{minor}_{platform.machine()}"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    house, venv = tmp_path / "wheelhouse", tmp_path / "venv"
    times = {}

    t = time.time()
    r = subprocess.run([sys.executable, "scripts/wheelhouse.py", "--dest", str(house), "--python-version", python,
                        "--platform", target], cwd=REPO, capture_output=True, text=True, timeout=1200, check=False)
    times["wheelhouse"] = time.time() - t
    assert r.returncode == 0, r.stderr + r.stdout[-3000:]
    summary = r.stdout.strip().splitlines()[-1]
    tag = f"cp{python.replace('.', '')} {target}"
    assert re.match(rf"wheelhouse: \d+ wheels, [\d.]+ MB in {re.escape(str(house))} for {tag} ", summary), summary
    wheels = sorted(p.name for p in house.glob("*.whl"))
    assert not any(w.startswith("torch-") for w in wheels), "torch must stay out of the wheelhouse"
    assert any(w.startswith("linformer-") for w in wheels) and any(w.startswith("hydra_core-") for w in wheels)

    t = time.time()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    # torch as `make install` puts it there (the node's own torch stands for it): the pinned build, else the range
    for spec in ("torch==2.13.0", "torch>=2.4,<2.14"):
        r = subprocess.run([py, "-m", "pip", "install", "-q", spec], capture_output=True, text=True, timeout=900,
                           check=False)
        if r.returncode == 0:
            break
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    times["venv+torch"] = time.time() - t

    offline, env = _no_network(), _offline_env()
    t = time.time()
    r = subprocess.run([*offline, py, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(house),
                        "linformer"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    times["offline install"] = time.time() - t
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    t = time.time()
    code = ("import linformer, hydra, datasets, evaluate, accelerate, transformers; "
            "print(linformer.__file__, linformer.LinformerConfig().model_type)")
    r = subprocess.run([*offline, py, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    times["import"] = time.time() - t
    assert r.returncode == 0, r.stderr[-3000:]
    assert str(venv) in r.stdout, r.stdout  # the installed wheel, not the checkout
    mb = sum(p.stat().st_size for p in house.glob("*.whl")) / 1e6
    print(f"\n{summary}\nwheelhouse check: {len(wheels)} wheels, {mb:.1f} MB; network cut: {bool(offline)}; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))


def test_with_node_packages_the_install_line_is_the_wheels_alone_into_a_target(tmp_path, monkeypatch, capsys):
    """A wheelhouse cut to what a node lacks is installed without pip's resolution: that would want every package the
    node list named but the node has not (wandb, listed so that it is left out). The printed line is the one that
    works there, docs/gpu/README.md's step 3."""
    dest = tmp_path / "my wheels"
    summary = {"wheels": 8, "megabytes": 1.9, "target": "cp312 manylinux_2_28_x86_64", "dest": str(dest),
               "built_from_sdist": [], "seconds": 1.0, "torch": "2.13.0", "with_torch": False, "left_out": 88}
    monkeypatch.setattr(wh, "make_wheelhouse", lambda *args, **kwargs: summary)
    (tmp_path / "node.txt").write_text("torch==2.13.0\nwandb\n")
    assert wh.main(["--dest", str(dest), "--node-packages", str(tmp_path / "node.txt")]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1].split("on the node: ", 1)[1]
    assert line.startswith(f"python3 -m pip install --no-index --no-deps --target {wh.NODE_SITE} '{dest}'/*.whl, ")
    assert "--find-links" not in line and f"PYTHONPATH=<the checkout>:{wh.NODE_SITE}" in line
    readme = (Path(__file__).resolve().parents[1] / "docs/gpu/README.md").read_text()
    assert f"pip install -q --no-index --no-deps --target {wh.NODE_SITE} .whl/*.whl" in readme
