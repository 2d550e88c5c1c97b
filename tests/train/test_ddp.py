"""2 processes (torchrun, gloo on CPU) and 1 process with the same global batch give the same losses."""

import os
import shutil
import subprocess
import sys

import pytest

from .test_pretrain import _losses, _script_args

pytestmark = pytest.mark.multiprocess


def test_ddp_two_processes_match_one(tiny_data, tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun, "torchrun is installed with torch"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    common = ["trainer.cpu=true", "trainer.max_steps=8", "trainer.grad_accum=2", "+trainer.global_batch_size=16",
              "model.hidden_dropout_prob=0", "model.attention_probs_dropout_prob=0"]
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run(_script_args(tiny_data, one, *common), check=True, env=env, capture_output=True)
    args = _script_args(tiny_data, two, *common)
    result = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", "29533", *args[1:]],
                            env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = (two / "summary.json").read_text()
    assert '"processes": 2' in summary
    a, b = _losses(one), _losses(two)
    assert len(a) == len(b) == 8
    assert a == pytest.approx(b, rel=1e-5, abs=1e-6)
