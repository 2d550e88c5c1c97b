"""The dashboard in a real browser: `scripts/dashboard.py` over two runs this test writes, loaded by headless
Chromium (Debian's `chromium`; `.ci/run` installs it). Select with `-m browser`; skipped without Chromium.

Bounded waits everywhere, and the server's whole process group is killed at the end.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import matplotlib.image
import pytest

from linformer.report.dashboard import wait_until_up

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars"]

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except OSError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"{what} not seen within {timeout:.0f} s (last: {last!r})")


def chromium(args: list[str], profile: Path, timeout: float = 90) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"chromium did not finish within {timeout} s: {err[-2000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture
def dashboard(tmp_path, make_run):
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does this)")
    pytest.importorskip("tensorboard")
    outputs = tmp_path / "outputs"
    make_run(outputs, "pretrain", "alpha-k32",
             [{"step": s, "time": s, "loss": 9.0 - 0.5 * s, "lr": 1e-3 * s} for s in range(1, 11)])
    make_run(outputs, "pretrain", "beta-full",
             [{"step": s, "time": s, "loss": 9.0 - 0.3 * s, "lr": 1e-3 * s} for s in range(1, 11)],
             model={"name": "tiny", "attention": "full", "projected_dim": 32, "sharing": "none", "max_seq_len": 128})
    port = _free_port()
    log = (tmp_path / "dashboard.log").open("w")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(REPO / "scripts/dashboard.py"), "--outputs", str(outputs),
                             "--port", str(port), "--watch", "2"],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            up = wait_until_up(base + "/data/runs", timeout=120, proc=proc)
        except (TimeoutError, RuntimeError) as e:
            pytest.fail(f"{e}\n{(tmp_path / 'dashboard.log').read_text()[-3000:]}")
        print(f"dashboard answered after {up:.1f} s ({time.monotonic() - start:.1f} s since launch)")
        yield base, tmp_path
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        log.close()


def test_both_runs_in_the_browser(dashboard):
    base, tmp = dashboard
    want = {"pretrain/alpha-k32", "pretrain/beta-full"}
    # TensorBoard's data API: both runs, each with the train/loss scalars.
    runs = _wait_for(lambda: want <= set(_get_json(base + "/data/runs")) and _get_json(base + "/data/runs"),
                     90, "both runs in /data/runs")
    assert want <= set(runs)
    tags = _wait_for(lambda: (t := _get_json(base + "/data/plugin/scalars/tags"))
                     and all("train/loss" in t.get(r, {}) for r in want) and t, 60, "train/loss for both runs")
    assert all("train/loss" in tags[r] for r in want)
    # The page itself, rendered by Chromium: the Time Series dashboard lists both runs in its DOM (the Scalars
    # dashboard draws them inside shadow roots, which --dump-dom does not serialise).
    dom = chromium(["--virtual-time-budget=20000", "--dump-dom", base + "/?darkMode=false#timeseries"],
                   tmp / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "TensorBoard" in dom.stdout, dom.stdout[:2000]
    assert {r for r in want if r in dom.stdout} == want, "the rendered page does not list both runs"
    shot = tmp / "dashboard.png"
    res = chromium(["--window-size=1400,900", "--virtual-time-budget=20000", f"--screenshot={shot}",
                    base + "/?darkMode=false#scalars&_smoothingWeight=0"], tmp / "profile-shot")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    img = matplotlib.image.imread(shot)[..., :3]
    assert img.shape[:2] == (900, 1400)
    # a rendered page, not a blank one: the header bar, the run list and the charts are far from white
    assert (img.min(axis=-1) < 0.8).sum() > 5000
    print(f"screenshot: {shot}")
