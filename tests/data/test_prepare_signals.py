"""prepare_corpus killed while datasets.map tokenizes with num_proc=2: none of its processes may outlive it."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from linformer.files.locations import repo_root

# The script as a user runs it, with each tokenizer batch held back so the kill lands while the workers work.
SLOW_SCRIPT = """
import runpy, sys, time
from linformer.data import corpus
call = corpus._Tokenize.__call__
def slow(self, batch):
    time.sleep(120)
    return call(self, batch)
corpus._Tokenize.__call__ = slow
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


# As SLOW_SCRIPT, but only the first worker to tokenize is held back: the other finishes its share and waits for a
# task holding the pool's task-queue lock, where a signal to the whole group used to kill it (the parent's
# Pool.terminate() then waited on that lock forever).
ONE_SLOW_SCRIPT = SLOW_SCRIPT.replace("    time.sleep(120)\n", """    import os
    try:
        os.close(os.open("slow-worker", os.O_CREAT | os.O_EXCL))
        time.sleep(120)
    except FileExistsError:
        pass
""")


def _children_once_tokenizing(proc: subprocess.Popen, log, want: int = 3, timeout: float = 60) -> list[psutil.Process]:
    """The descendants of `proc` once datasets.map has started its pool (2 workers) and Manager."""
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"prepare_corpus ended early: {log.read_text()[-3000:]}"
        kids = parent.children(recursive=True)
        if len(kids) >= want:
            time.sleep(0.5)  # let every child finish starting
            return parent.children(recursive=True)
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"prepare_corpus never started {want} worker processes")


# the two stops sent to the whole group are slow (make test-all): each takes an interpreter and its workers, and the
# handler they reach is the one the direct SIGTERM exercises in the fast suite
@pytest.mark.parametrize(("sig", "to_group"), [(signal.SIGKILL, False), (signal.SIGTERM, False),
                                               pytest.param(signal.SIGINT, True, marks=pytest.mark.slow),
                                               pytest.param(signal.SIGTERM, True, marks=pytest.mark.slow)],
                         ids=["SIGKILL", "SIGTERM", "Ctrl-C (SIGINT to the process group)",
                              "a scheduler's stop (SIGTERM to the process group)"])
def test_killed_prepare_leaves_no_workers(tmp_path, tok_dir, make_corpus, sig, to_group):
    corpus = make_corpus(tmp_path / "corpus.txt", n_docs=1000)  # > 2 batches of 1000 paragraphs: num_proc=2
    script = repo_root() / "scripts" / "prepare_corpus.py"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", ONE_SLOW_SCRIPT if to_group else SLOW_SCRIPT, str(script), f"data.sources=[{corpus}]", f"tokenizer_dir={tok_dir}",
             f"out_dir={tmp_path}/proc", f"paths.output_dir={tmp_path}/outputs", "data.n=16", "data.num_proc=2"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        )
    kids: list[psutil.Process] = []
    try:
        kids = _children_once_tokenizing(proc, log)
        if to_group:
            time.sleep(3)  # the fast worker's share done: it waits for a task
        if to_group:  # a terminal's Ctrl-C, `kill -- -PGID`: every process of the group, the workers' too
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        code = proc.wait(timeout=15)
        _, alive = psutil.wait_procs(kids, timeout=5)
        assert not alive, f"{len(alive)} of {len(kids)} worker processes outlived prepare_corpus ({sig.name})"
    finally:
        for p in [psutil.Process(proc.pid), *kids] if proc.poll() is None else kids:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
    assert not (tmp_path / "proc").exists()
    if sig != signal.SIGKILL:  # a clean stop: the CLI's `stopped:` line, 128 + the signal, no temp dir left behind
        assert code == 128 + sig, log.read_text()[-3000:]
        assert f"stopped: prepare_corpus stopped by {sig.name}" in log.read_text()
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]  # the workers too end quietly
        assert not list(tmp_path.glob(".tmp-*"))
