"""A process torchrun started stops when its launcher dies, SIGKILL included (``data.workers.die_with_launcher``)."""

import importlib
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import linformer
from linformer import cli
from linformer.data import workers

from .conftest import as_a_script

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
TORCHRUN_ENV = {"TORCHELASTIC_RUN_ID": "none", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1"}


@pytest.fixture
def prctl(monkeypatch):
    """The calls the package makes to prctl, recorded instead of made (this test process keeps its own)."""
    calls = []
    monkeypatch.setattr(workers, "_PRCTL", lambda *args: calls.append(args) or 0)
    monkeypatch.setattr(workers, "_launcher", [])
    return calls


@pytest.mark.parametrize("launched", [True, False])
def test_a_rank_asks_at_the_package_import_for_sigterm_when_its_launcher_dies(prctl, monkeypatch, launched):
    """torchrun starts each rank in a session of its own: a torchrun killed by SIGKILL (or the out-of-memory killer)
    left both ranks training, holding the run's lock. The package's import, a rank's first, asks the kernel for
    SIGTERM (a checkpointed stop) when the parent dies; a process torchrun did not start asks for nothing (a run
    started from a shell goes on after the shell, under nohup)."""
    for name, value in TORCHRUN_ENV.items():
        if launched:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)
    importlib.reload(linformer)
    assert prctl == ([(workers.PR_SET_PDEATHSIG, signal.SIGTERM)] if launched else [])
    assert workers._launcher == ([os.getppid()] if launched else [])
    assert not workers.launcher_gone()
    importlib.reload(linformer)  # once per process
    assert len(prctl) == int(launched)


def test_a_rank_whose_launcher_died_does_not_wait_for_its_store(prctl, monkeypatch):
    """The ranks share their last line through the launcher's store: once the launcher was gone each connection waited
    PEER_WAIT_S for it (seconds per line, with c10d's timeout stacks), so the stop the launcher's death asks for took
    20 s. With the launcher gone there is no store to ask."""
    import torch.distributed as dist

    connected = []
    monkeypatch.setattr(dist, "TCPStore", lambda *a, **k: connected.append(a) or pytest.fail("connected"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "1")
    monkeypatch.setattr(workers, "_launcher", [os.getppid() + 100_000])  # a parent that is not this one's any more
    assert workers.launcher_gone()
    assert cli._launch_store() is None and not cli.launched_together()
    assert connected == []


@LINUX
def test_a_rank_whose_launcher_is_killed_gets_sigterm(tmp_path):
    """The launcher (here a stand-in that starts its rank as torchrun does: its environment, a session of its own)
    killed by SIGKILL: the rank gets SIGTERM from the kernel, which stops a run with a checkpoint."""
    rank = as_a_script(
        "import os, pathlib, signal, sys, time\n"
        "import linformer\n"  # the rank's start-up
        f"out = pathlib.Path({str(tmp_path)!r})\n"
        "signal.signal(signal.SIGTERM, lambda *a: (out.joinpath('stopped').write_text('1'), sys.exit(0)))\n"
        "out.joinpath('pid').write_text(str(os.getpid()))\n"
        "time.sleep(120)\n", tmp_path)
    launcher = (f"import os, subprocess, sys, time; env = dict(os.environ, **{TORCHRUN_ENV!r})\n"
                f"subprocess.Popen({rank!r}, env=env, start_new_session=True); time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", launcher])
    _kill_once_the_rank_runs(proc, tmp_path, seconds=120)


@LINUX
@pytest.mark.multiprocess
def test_torchrun_killed_takes_its_rank_with_it(tmp_path):
    """The same through torchrun itself: SIGKILL to torchrun, and its rank stops on the kernel's SIGTERM."""
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    rank = as_a_script(
        "import os, pathlib, signal, sys, time\n"
        "import linformer\n"
        f"out = pathlib.Path({str(tmp_path)!r})\n"
        "signal.signal(signal.SIGTERM, lambda *a: (out.joinpath('stopped').write_text('1'), sys.exit(0)))\n"
        "out.joinpath('pid').write_text(str(os.getpid()))\n"
        "time.sleep(300)\n", tmp_path)
    proc = subprocess.Popen([torchrun, "--nproc_per_node", "1", "--master_port", "29541", *rank[1:]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _kill_once_the_rank_runs(proc, tmp_path, seconds=300)  # torchrun imports torch: a minute and more when loaded


def _kill_once_the_rank_runs(launcher: subprocess.Popen, tmp_path, seconds: float) -> None:
    """SIGKILL `launcher` once its rank has written its pid, then wait for the rank's SIGTERM handler to write
    `stopped` (the rank itself is killed if it never does, so no test leaves it behind)."""
    deadline = time.monotonic() + seconds
    try:
        while not (tmp_path / "pid").exists():
            assert time.monotonic() < deadline and launcher.poll() is None
            time.sleep(0.05)
    finally:
        launcher.kill()
        launcher.wait()
    pid = int((tmp_path / "pid").read_text())
    try:
        while not (tmp_path / "stopped").exists():
            assert time.monotonic() < deadline, "the rank outlived its launcher without a stop"
            time.sleep(0.05)
    finally:
        if not (tmp_path / "stopped").exists():
            os.kill(pid, signal.SIGKILL)
