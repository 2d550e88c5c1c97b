"""Wheels for an offline install: python scripts/wheelhouse.py [--dest wheelhouse] [--python-version 3.12] ...

Downloads every dependency of the project except torch, with all their dependencies, for a target Python and
platform (default CPython 3.12, manylinux x86_64 with glibc >= 2.28), plus the project built as a wheel, into one
folder. On a node without network, in an environment that already has torch:

    pip install --no-index --find-links wheelhouse linformer

Torch is left out because a cluster's torch is built for its CUDA; the other wheels are resolved as if torch
--torch-version were installed (a stand-in wheel that is never saved). A dependency published only as an sdist is
built here when it gives a pure-Python wheel (antlr4-python3-runtime, under hydra-core); one that would need
compiling for the target is an error. pip evaluates dependencies' environment markers against the Python that runs
it, not the target, so the result is checked against the target's markers and whatever is missing is fetched.

Runs on any Python >= 3.8 with pip (packaging is taken from pip when it is not installed); imports nothing of the
project. Exits 2 with one `error:` line when a dependency cannot be had for the target.
"""

import argparse
import email.parser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.tags import compatible_tags, cpython_tags
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import Version
except ImportError:  # pip vendors packaging
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.tags import compatible_tags, cpython_tags
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename
    from pip._vendor.packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "linformer"
EXCLUDED = "torch"  # the node's own (CUDA) build
STUB_LOCAL = "wheelhousestub"  # local version label of the stand-in torch wheel
# What the project's wheel is built from (pyproject: packages linformer*, readme README.md).
PROJECT_FILES = ("pyproject.toml", "README.md", "linformer")


class WheelhouseError(Exception):
    """A problem the user can fix (a dependency without a wheel for the target, a bad option)."""


def platform_tags(platform):
    """pip's --platform values for one target: a manylinux_2_Y tag expands to every older glibc it can run.

    pip takes each --platform literally (it expands only manylinux2014/2010), so a wheel tagged manylinux_2_24
    would not be found for manylinux_2_28 without this.
    """
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
    if not m:
        for alias, minor in legacy.items():
            if platform.startswith(alias + "_"):
                return platform_tags(f"manylinux_2_{minor}_{platform[len(alias) + 1:]}")
        return [platform]
    major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
    if major != 2:
        return [platform]
    lowest = 5 if arch in ("x86_64", "i686") else 17
    tags = [f"manylinux_2_{y}_{arch}" for y in range(minor, lowest - 1, -1)]
    tags += [f"{alias}_{arch}" for alias, y in legacy.items() if y <= minor and (y == 17 or lowest == 5)]
    return tags


def marker_env(python_version, platform):
    """The environment-marker values of the target (PEP 508), for checking dependencies against it."""
    py = ".".join(python_version.split(".")[:2])
    env = {"python_version": py, "python_full_version": f"{py}.0", "implementation_name": "cpython",
           "implementation_version": f"{py}.0", "platform_python_implementation": "CPython", "extra": ""}
    if "linux" in platform:
        arch = re.sub(r"^(manylinux_\d+_\d+|musllinux_\d+_\d+|manylinux\d+|linux)_", "", platform)
        env.update(sys_platform="linux", os_name="posix", platform_system="Linux", platform_machine=arch)
    elif platform.startswith("macosx"):
        env.update(sys_platform="darwin", os_name="posix", platform_system="Darwin",
                   platform_machine=platform.rsplit("_", 1)[-1].replace("universal2", "arm64"))
    elif platform.startswith("win"):
        env.update(sys_platform="win32", os_name="nt", platform_system="Windows",
                   platform_machine={"win_amd64": "AMD64", "win_arm64": "ARM64"}.get(platform, "x86"))
    return env


def target_tags(python_version, platforms):
    """Every wheel tag a CPython of that version on those platforms installs."""
    version = tuple(int(p) for p in python_version.split(".")[:2])
    interpreter = f"cp{version[0]}{version[1]}"
    return set(cpython_tags(version, platforms=platforms)) | set(
        compatible_tags(version, interpreter=interpreter, platforms=platforms))


def wheel_metadata(path):
    """(name, version, Requires-Dist list) of a wheel file."""
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        msg = email.parser.HeaderParser().parsestr(z.read(meta).decode("utf-8"))
    return canonicalize_name(msg["Name"]), Version(msg["Version"]), msg.get_all("Requires-Dist") or []


def walk_requirements(folder, roots, env, tags, provided=(EXCLUDED,), node=None):
    """Follow the requirements reached from roots under the target's markers through the target wheels in folder.

    Returns (missing, used): the requirements no wheel satisfies, and the names whose wheel an install takes. A name
    in `provided` is the node's own (not followed); so is a requirement that `node` ({name: Version, or None for
    any version}, the node's installed packages) satisfies, whose dependencies are then the node's business too.
    """
    node = node or {}
    wheels = {}
    for path in sorted(Path(folder).glob("*.whl")):
        if set(parse_wheel_filename(path.name)[3]) & tags:
            name, version, requires = wheel_metadata(path)
            wheels.setdefault(name, []).append((version, requires))
    missing, used, seen, todo = [], set(), set(), list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in provided:
            continue
        if name in node and (node[name] is None or req.specifier.contains(node[name], prereleases=True)):
            continue
        found = [(v, r) for v, r in wheels.get(name, []) if req.specifier.contains(v, prereleases=True)]
        if not found:
            if str(req) not in {str(m) for m in missing}:
                missing.append(req)
            continue
        used.add(name)
        _, requires = max(found, key=lambda vr: vr[0])  # pip would take the newest
        for extra in ["", *sorted(req.extras)]:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for spec in requires:
                dep = Requirement(spec)
                if dep.marker is None:
                    if not extra:
                        todo.append(dep)
                elif dep.marker.evaluate({**env, "extra": extra}):
                    todo.append(dep)
    return missing, used


def missing_requirements(folder, roots, env, tags, provided=(EXCLUDED,)):
    """The requirements, reached from roots under the target's markers, that no target wheel in folder satisfies."""
    return walk_requirements(folder, roots, env, tags, provided)[0]


def read_node_packages(path):
    """{canonical name: Version, or None for a bare name} from a node's `pip list --format=freeze` (or pip freeze)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise WheelhouseError(f"--node-packages {path}: {err.strerror or err}") from err
    packages = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # blank, comments, `-e` and option lines
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*(\S+)|@\s*\S.*)?", line)
        try:
            version = Version(m.group(2)) if m and m.group(2) else None
        except ValueError:  # packaging's InvalidVersion
            m = None
        if not m:
            raise WheelhouseError(f"{path}:{number}: {raw.strip()!r} is not a package line of `pip list --format=freeze`"
                                  " (name==version, or a bare name for any version)")
        packages[canonicalize_name(m.group(1))] = version
    return packages


MANIFEST = ".wheelhouse.json"  # in --dest: the wheels this script put there (its to replace or leave out)


def own_wheels(dest):
    """The names of the wheels in dest that a wheelhouse run wrote (its manifest, where they still exist)."""
    try:
        listed = set(json.loads((Path(dest) / MANIFEST).read_text(encoding="utf-8")).get("wheels", []))
    except (OSError, ValueError, AttributeError):
        listed = set()
    return {w.name for w in Path(dest).glob("*.whl")} & listed


def write_manifest(dest, names):
    tmp = Path(dest) / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"wheels": sorted(names)}, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, Path(dest) / MANIFEST)


def drop_node_packages(folder, roots, env, tags, node, provided=(EXCLUDED,), ours=None):
    """Delete the target wheels in folder that an install on the node would not take (the node has a version that
    satisfies every requirement on them, or they are reached only through such packages); returns those deleted.
    ours: the names of the wheels a wheelhouse run wrote (None: every wheel); no other is deleted."""
    _, used = walk_requirements(folder, roots, env, tags, provided, node)
    dropped = []
    for path in sorted(Path(folder).glob("*.whl")):
        if ours is not None and path.name not in ours:
            continue  # someone else's wheel: never deleted
        if set(parse_wheel_filename(path.name)[3]) & tags and wheel_metadata(path)[0] not in used:
            path.unlink()
            dropped.append(path)
    return dropped


def write_stub_wheel(folder, version):
    """A metadata-only torch wheel that stands in for the node's torch while pip resolves."""
    full = f"{version}+{STUB_LOCAL}"
    path = Path(folder) / f"{EXCLUDED}-{full}-py3-none-any.whl"
    info = f"{EXCLUDED}-{full}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {EXCLUDED}\nVersion: {full}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: wheelhouse.py\nRoot-Is-Purelib: true\n"
                                    "Tag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return full


def pip(python, *args):
    """Runs pip with python; returns (exit code, combined output)."""
    cmd = [python, "-m", "pip", *args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          encoding="utf-8", errors="replace")
    return proc.returncode, proc.stdout


def build_project_wheel(python, dest, work, foreign=frozenset()):
    """The project as a wheel in dest, built from a copy of its sources (no build/ or egg-info in the tree); refused
    when dest holds a wheel of that name that no wheelhouse run wrote (`foreign`)."""
    src = Path(work) / "src"
    src.mkdir()
    for name in PROJECT_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = Path(work) / "project"
    rc, log = pip(python, "wheel", "--no-deps", "-q", "-w", str(out), str(src))
    built = sorted(out.glob("*.whl"))
    if rc or not built:
        raise WheelhouseError(f"building the {PROJECT} wheel failed: {last_error(log)}")
    if built[0].name in foreign:
        raise WheelhouseError(f"{Path(dest) / built[0].name} is a wheel this script did not write: it replaces only its "
                              "own wheels (--dest). Choose another --dest, or move that wheel away.")
    shutil.copy2(built[0], Path(dest) / built[0].name)
    return Path(dest) / built[0].name


def last_error(log):
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    return (errors or lines or ["(no output)"])[-1]


def unavailable_requirements(out):
    """The requirements pip's failed download says it found no distribution of for the target."""
    found = re.findall(r"No matching distribution found for (\S+)", out)
    m = re.search(r"no matching distributions available for your environment:\n((?:[ \t]+\S+\n?)+)", out)
    for name in m.group(1).split() if m else []:
        spec = re.search(rf"depends on ({re.escape(name)}[^\s,;]*)", out, re.IGNORECASE)
        found.append(spec.group(1) if spec else name)
    return list(dict.fromkeys(found))


def conflict_requirements(out):
    """The requirements in pip's conflict explanation ('hydra-core 1.3.8 depends on X'), the first spec of each name.

    pip before 24 does not say which of them has no distribution at all; each is then probed.
    """
    specs = {}
    for spec in re.findall(r"depends on ([^\s;]+)", out):
        try:
            specs.setdefault(canonicalize_name(Requirement(spec).name), spec)
        except ValueError:  # packaging's InvalidRequirement
            continue
    return [spec for name, spec in specs.items() if name != EXCLUDED]


def has_target_wheel(python, spec, target_args, work):
    """Whether spec has a wheel for the target (metadata only where the index serves it; nothing is kept)."""
    rc, out = pip(python, "install", "--dry-run", "--no-deps", "--ignore-installed", "--target",
                  tempfile.mkdtemp(dir=work), *target_args, spec)
    return rc == 0 or "No matching distribution found" not in out


def build_pure_wheel(python, requirement, dest, work):
    """Builds requirement from its sdist here; keeps it only if the wheel is pure Python (runs on any target).

    Only for a package published without wheels: one with wheels for other Pythons or platforms is compiled code.
    """
    rc, log = pip(python, "install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:",
                  "--target", tempfile.mkdtemp(dir=work), requirement)
    if rc == 0:
        return None, "it has wheels only for other Pythons or platforms (compiled code: build it on the target)"
    out = Path(tempfile.mkdtemp(dir=work))
    rc, log = pip(python, "wheel", "--no-deps", "--use-pep517", "-q", "-w", str(out), requirement)
    built = sorted(out.glob("*.whl"))
    if rc or not built:
        return None, f"building it from its sdist here failed: {last_error(log)}"
    wheel = built[0]
    if not all(t.abi == "none" and t.platform == "any" for t in parse_wheel_filename(wheel.name)[3]):
        return None, f"its sdist builds {wheel.name} here, which is not pure Python (build it on the target)"
    shutil.copy2(wheel, Path(dest) / wheel.name)
    return wheel.name, None


def make_wheelhouse(dest, python_version="3.12", platforms=("manylinux_2_28_x86_64",), extras=(),
                    torch_version="2.13.0", with_torch=False, python=sys.executable, log=print, node_packages=None):
    """Fills dest; returns a summary dict (wheels, megabytes, target, built sdists, seconds, wheels left out).

    node_packages: a file listing what the node already has (`pip list --format=freeze` there); the wheels an
    install on that node would not take are left out."""
    start = time.time()
    node = read_node_packages(node_packages) if node_packages else None
    if not re.fullmatch(r"3\.\d+", python_version):
        raise WheelhouseError(f"--python-version must look like 3.12, not {python_version!r}")
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise WheelhouseError(f"--dest {dest} is a file, not a folder for the wheels: choose another path.")
    dest.mkdir(parents=True, exist_ok=True)
    ours = own_wheels(dest)
    foreign = {w.name for w in dest.glob("*.whl")} - ours  # the user's: never replaced nor deleted
    tags_for_pip = [t for p in platforms for t in platform_tags(p)]
    env = marker_env(python_version, platforms[0])
    tags = target_tags(python_version, tags_for_pip)
    target = f"cp{python_version.replace('.', '')} {'+'.join(platforms)}"
    provided = () if with_torch else (EXCLUDED,)  # the node's own torch is not resolved into the wheelhouse
    built_here = []
    with tempfile.TemporaryDirectory() as work:
        log(f"wheelhouse: building the {PROJECT} wheel")
        project_wheel = build_project_wheel(python, dest, work, foreign)
        stub_dir = Path(work) / "stub"
        stub_dir.mkdir()
        pinned = f"{torch_version}+{STUB_LOCAL}" if not with_torch else torch_version
        if not with_torch:
            write_stub_wheel(stub_dir, torch_version)
        constraints = Path(work) / "constraints.txt"
        constraints.write_text(f"{EXCLUDED}=={pinned}\n", encoding="utf-8")
        extra = f"[{','.join(extras)}]" if extras else ""
        roots = [Requirement(f"{PROJECT}{extra}")]
        todo = [f"{project_wheel}{extra}"]
        target_args = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
                       *[a for t in tags_for_pip for a in ("--platform", t)],
                       "--find-links", str(stub_dir), "--find-links", str(dest), "-c", str(constraints)]
        for _ in range(20):
            log(f"wheelhouse: downloading {' '.join(Path(r).name for r in todo)} and dependencies for {target}")
            rc, out = pip(python, "download", "--dest", str(dest), *target_args, *todo)
            for stub in dest.glob(f"{EXCLUDED}-*+{STUB_LOCAL}-*.whl"):
                stub.unlink()
            if rc:
                done = {n for n, _ in built_here}
                unavailable = unavailable_requirements(out) or [
                    spec for spec in conflict_requirements(out) if not has_target_wheel(python, spec, target_args, work)]
                unavailable = [r for r in unavailable if canonicalize_name(Requirement(r).name) not in done]
                if not unavailable:
                    raise WheelhouseError(f"pip cannot resolve the dependencies for {target}: {last_error(out)}")
                for spec in unavailable:
                    wheel, why = build_pure_wheel(python, spec, dest, work)
                    if wheel is None:
                        raise WheelhouseError(f"{spec} has no wheel for {target}; {why}")
                    log(f"wheelhouse: {spec} has no wheel for the target; built {wheel} from its sdist (pure Python)")
                    built_here.append((canonicalize_name(Requirement(spec).name), wheel))
                continue
            missing = missing_requirements(dest, roots, env, tags, provided)
            if not missing:
                break
            # pip judged these dependencies' markers by the Python that runs it, not the target's: ask for them bare
            todo = [f"{r.name}{'[' + ','.join(sorted(r.extras)) + ']' if r.extras else ''}{r.specifier}"
                    for r in missing]
        else:
            raise WheelhouseError(f"still missing for {target} after 20 rounds: {', '.join(todo)}")
    ours = {w.name for w in dest.glob("*.whl")} - foreign  # what it downloaded or built, now or in an earlier run
    write_manifest(dest, ours)
    left_out = drop_node_packages(dest, roots, env, tags, node, provided, ours) if node is not None else []
    write_manifest(dest, ours - {w.name for w in left_out})
    wheels = sorted(dest.glob("*.whl"))
    megabytes = sum(w.stat().st_size for w in wheels) / 1e6
    return {"wheels": len(wheels), "megabytes": megabytes, "target": target, "dest": str(dest),
            "built_from_sdist": [w for _, w in built_here], "seconds": time.time() - start,
            "torch": torch_version, "with_torch": with_torch, "left_out": len(left_out)}


# What the GPU scripts import of the package's dependencies, by import name, in the order the package's import reaches
# them (omegaconf: the package reads configs through it; hydra: linformer.configs.compose's). Each is looked
# for before the package is imported, which spends seconds in torch and transformers first; one left out is still
# reported, by the import.
NODE_SITE = "/tmp/site"  # where a node that has the rest takes the wheels (--no-deps --target; docs/gpu/README.md)
NEEDED_MODULES = ("torch", "numpy", "yaml", "transformers", "safetensors", "accelerate", "scipy", "tokenizers",
                  "omegaconf", "hydra")


def package_main(module: str):
    """`module`'s main, for a GPU node's script (scripts/gpu.py, gpu_carry.py): where the package's dependencies are
    not installed yet (the wheels this script makes), one `error:` line naming the missing one and exit 2, at once,
    not an import traceback. Here, as this module imports nothing of the project."""
    import importlib
    import importlib.util

    try:
        missing = next((name for name in NEEDED_MODULES if importlib.util.find_spec(name) is None), None)
        if missing is not None:
            raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)
        return importlib.import_module(module).main
    except ModuleNotFoundError as err:
        print(f"error: {err.name} is missing here: install the wheels first (docs/gpu/README.md, steps 1 and 3)",
              file=sys.stderr)
        sys.exit(2)


def a_path(text):
    """An argparse type: a path, not empty (an unset variable would name the working folder, or drop the option).
    linformer.argtypes has the project's; this script imports nothing of the project."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path: give a path (an unset variable?)")
    return text


def main(argv=None):
    here = Path(__file__).resolve()  # its example names it where it is, so that it pastes from the working directory
    named = "scripts/wheelhouse.py" if (Path.cwd() / "scripts" / here.name).resolve() == here else str(here)
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]  # None under python -OO
                                .replace("python scripts/wheelhouse.py", f"python {named}"))
    p.add_argument("--dest", type=a_path, default="wheelhouse", help="output folder (default: wheelhouse)")
    p.add_argument("--python-version", default="3.12", help="target CPython X.Y (default: 3.12)")
    p.add_argument("--platform", action="append", default=None,
                   help="target platform tag, repeatable (default: manylinux_2_28_x86_64, i.e. glibc >= 2.28; "
                        "a manylinux_2_Y tag includes every older glibc)")
    p.add_argument("--extras", default="", help="project extras to include, comma-separated (e.g. pretrained)")
    p.add_argument("--torch-version", default="2.13.0",
                   help="resolve as if this torch were installed on the node (default: 2.13.0)")
    p.add_argument("--with-torch", action="store_true",
                   help="also download torch==--torch-version and its dependencies (on Linux: the CUDA wheels, GBs) "
                        "for a node that has no torch")
    p.add_argument("--node-packages", type=a_path, metavar="FILE",
                   help="what the node already has (`pip list --format=freeze` there; a bare name stands for any "
                        "version): leave out the wheels an install there would not take")
    args = p.parse_args(argv)
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    try:
        s = make_wheelhouse(args.dest, args.python_version, args.platform or ["manylinux_2_28_x86_64"], extras,
                            args.torch_version, args.with_torch, node_packages=args.node_packages)
    except WheelhouseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.node_packages:  # the wheels only: pip's resolution there would want what the list left out (wandb)
        install = (shlex.join(["python3", "-m", "pip", "install", "--no-index", "--no-deps", "--target", NODE_SITE])
                   + f" {shlex.quote(s['dest'])}/*.whl, then PYTHONPATH=<the checkout>:{NODE_SITE} "
                     "(docs/gpu/README.md, step 3)")
    else:
        project = f"{PROJECT}[{','.join(extras)}]" if extras else PROJECT
        install = shlex.join(["pip", "install", "--no-index", "--find-links", s["dest"], project])  # pasted as printed
    print(f"wheelhouse: {s['wheels']} wheels, {s['megabytes']:.1f} MB in {s['dest']} for {s['target']} "
          f"({'with torch ' if s['with_torch'] else 'torch excluded, resolved against torch '}{s['torch']}; "
          f"{s['seconds']:.0f} s"
          + (f"; {s['left_out']} left out, the node has them ({args.node_packages})" if args.node_packages else "")
          + "); on the node: " + install)
    return 0


if __name__ == "__main__":
    sys.exit(main())
