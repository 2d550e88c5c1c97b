"""The declared lower bounds, checked: a venv with every dependency of pyproject.toml (and its dev extra) at its
lower bound, and the tests that would fail first where a bound is false (the package's imports, a saved model loaded
through trust_remote_code without the package, the trackers). Slow and needs a package registry: minutes of
downloads and installs, then about 5 minutes of tests on 2 cores. `make check-lowest` runs it; CI does not.

The pins are read from pyproject.toml (`lowest_pins`), not from a second list. Dependencies without a lower bound
(numpy, pandas, huggingface-hub, ...) get what the resolver picks with the pinned ones. torch is the exception where
its lower bound cannot be had here: no CPU wheel of it on this machine (PyPI's Linux wheels are CUDA builds), so the
local CPU wheel is installed instead and the output says so; the torch bound is then not checked by this run.

    python tools/check_lowest.py [--venv .venv-lowest] [--wheels /opt/wheels] [--log outputs/check_lowest.log]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pip's copy of the same parser
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("dev",)  # the extras whose bounds are pinned with the dependencies' (the tests need them)
TESTS = ["tests/test_imports.py", "tests/modeling/test_remote_code.py",
         "tests/train/test_pretrain.py -k wandb or tensorboard or tracker"]


def lowest_pins(pyproject: Path, extras=EXTRAS) -> dict[str, str]:
    """{canonical name: lowest version} for every requirement of the project's dependencies and `extras` that has a
    lower bound (>=, ==, ~=; the highest of several), from pyproject.toml. A requirement without one is left out:
    the resolver chooses it."""
    project = tomllib.loads(Path(pyproject).read_text(encoding="utf-8"))["project"]
    requirements = [*project.get("dependencies", [])]
    for extra in extras:
        requirements += project.get("optional-dependencies", {}).get(extra, [])
    pins = {}
    for line in requirements:
        requirement = Requirement(line)
        lows = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if lows:
            name = canonicalize_name(requirement.name)
            pins[name] = str(max([*lows, *([Version(pins[name])] if name in pins else [])]))
    return pins


def constraints(pins: dict[str, str]) -> str:
    """A pip constraints file pinning each of `pins` (name==version), one a line."""
    return "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def local_torch(wheels: Path, version: str) -> tuple[Path | None, bool]:
    """(the local CPU torch wheel for this Python, whether it is of `version`): the one of `version` where it is
    there, else the newest there; (None, False) where there is none."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = {}
    for wheel in Path(wheels).glob(f"torch-*+cpu-{tag}-*.whl"):
        match = re.match(r"torch-([^+-]+)\+cpu-", wheel.name)
        if match:
            found[Version(match.group(1))] = wheel
    if not found:
        return None, False
    if Version(version) in found:
        return found[Version(version)], True
    return found[max(found)], False


def run(command: list[str], log, env=None) -> int:
    """`command`'s output to the terminal and the log; its exit status."""
    print("$", shlex.join(command), file=log, flush=True)
    print("$", shlex.join(command), flush=True)
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               encoding="utf-8", errors="replace")
    for line in process.stdout:
        sys.stdout.write(line)
        log.write(line)
    return process.wait()


def say(message: str, log) -> None:
    print(message, flush=True)
    print(message, file=log, flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])  # None under python -OO
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-lowest", help="the venv to build or reuse")
    parser.add_argument("--wheels", type=Path, default=Path("/opt/wheels"), help="where a local CPU torch wheel is")
    parser.add_argument("--log", type=Path, default=ROOT / "outputs" / "check_lowest.log")
    args = parser.parse_args(argv)
    pins = lowest_pins(ROOT / "pyproject.toml")
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with open(args.log, "w", encoding="utf-8") as log:
        say(f"check-lowest: {len(pins)} lower bounds from pyproject.toml: "
            + ", ".join(f"{n} {v}" for n, v in sorted(pins.items())), log)
        python = args.venv / "bin" / "python"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(args.venv)], check=True)
        wheel, exact = local_torch(args.wheels, pins["torch"])
        if wheel is not None and not exact:
            say(f"check-lowest: torch {pins['torch']} (the lower bound) cannot be had here, no CPU wheel of it in "
                f"{args.wheels}: torch from {wheel.name} instead; this run does not check the torch bound", log)
            pins["torch"] = re.match(r"torch-([^+-]+)", wheel.name).group(1)
        elif wheel is None:
            say(f"check-lowest: no local CPU torch wheel in {args.wheels}: torch {pins['torch']} from the index", log)
        pins_file = args.venv / "lowest-constraints.txt"
        pins_file.write_text(constraints(pins), encoding="utf-8")
        requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
        say(f"check-lowest: python {sys.version.split()[0]} (pyproject: requires-python {requires}); constraints in "
            f"{pins_file}", log)
        pip = [str(python), "-m", "pip", "install", "-q", "-c", str(pins_file)]
        status = (run([*pip, str(wheel) if wheel else f"torch=={pins['torch']}"], log)
                  or run([*pip, "-e", f".[{','.join(EXTRAS)}]"], log))
        if status:
            say(f"check-lowest: the lower bounds do not install together (pip exit {status})", log)
            return status
        run([str(python), "-m", "pip", "list", "--format=freeze"], log)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline",
               "PYTHONPATH": str(ROOT)}
        failed = []
        for test in TESTS:
            path, _, select = test.partition(" -k ")
            if run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", path,
                    *(["-k", select] if select else [])], log, env):
                failed.append(test)
        say(f"check-lowest: {'failed: ' + '; '.join(failed) if failed else 'every test passed'} (log: {args.log})",
            log)
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
