"""2 processes (torchrun, gloo on CPU) and 1 process with the same global batch give the same losses."""

import os
import shutil
import subprocess
import sys

import pytest
import torch

from .test_pretrain import _losses, _script_args

pytestmark = pytest.mark.multiprocess


def test_ddp_two_processes_match_one(tiny_data, tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun, "torchrun is installed with torch"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    common = ["trainer.cpu=true", "trainer.max_steps=8", "trainer.grad_accum=2", "trainer.global_batch_size=16",
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


def test_sigterm_to_one_rank_stops_every_rank_at_the_same_step(tiny_data, tmp_path):
    """A scheduler may signal one process only: the ranks agree on the stop, checkpoint together and exit (no
    deadlock in the next collective), and the run resumes to the end."""
    import json
    import signal
    import time

    import psutil

    from .test_pretrain import _losses

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = tmp_path / "run"

    def command(*overrides):
        args = _script_args(tiny_data, run, "trainer.cpu=true", "trainer.save_every=1000", "trainer.eval_every=1000",
                            *overrides)
        return [torchrun, "--nproc_per_node", "2", "--master_port", "29534", *args[1:]]

    proc = subprocess.Popen(command("trainer.max_steps=400"), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not ((run / "metrics.jsonl").is_file() and len(_losses(run)) >= 5):
        time.sleep(0.05)
    workers = [p for p in psutil.Process(proc.pid).children(recursive=True) if "pretrain.py" in " ".join(p.cmdline())]
    rank1 = next(p for p in workers if p.environ().get("RANK") == "1")
    rank1.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    (ckpt,) = (run / "checkpoints").iterdir()
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= {p.name for p in ckpt.iterdir()}, err[-3000:]
    states = [torch.load(ckpt / f"random_states_{rank}.pkl", weights_only=False)["torch_manual_seed"] for rank in (0, 1)]
    assert not torch.equal(*states)  # each rank draws its own dropout masks
    assert int(ckpt.name.split("-")[1]) == len(_losses(run))  # rank 0 stopped at the step rank 1 did
    assert "SIGTERM at step" in err
    resumed = subprocess.run(command(f"trainer.max_steps={len(_losses(run)) + 3}",
                                     "trainer.allow_config_change=[trainer.max_steps]"),
                             env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads((run / "run.json").read_text())["status"] == "complete"


def test_a_two_process_finetune_draws_each_progress_bar_once(pretrained_run, tmp_path):
    """On a fresh task cache rank 0 tokenizes; every rank loads the model: datasets' and transformers' bars were drawn
    by each rank. Rank 0 draws them, once (stderr is a pipe here, a log file: tokenizing says so in a plain line, and
    the weights' loading bar is not drawn into it at all)."""
    from .conftest import write_sst2_fixture
    from .test_pretrain import REPO

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    sst2 = write_sst2_fixture(tmp_path / "sst2")
    args = [str(REPO / "scripts" / "finetune.py"), "task=sst2", f"task.data_dir={sst2}", f"model_path={pretrained_run}",
            f"task_cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'out'}", "trainer.epochs=1",
            "trainer.batch_size=8", "trainer.cpu=true"]
    result = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", "29535", *args],
                            env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stderr.replace("\r", "\n").splitlines()
    for bar, drawn in (("task sst2/train: tokenizing ", 1), ("Loading weights", 0)):
        assert sum(line.startswith(bar) for line in lines) == drawn, (bar, result.stderr[-3000:])


def test_a_two_process_finetune_of_a_model_that_leaves_its_projections_out(tiny_data, tmp_path):
    """exact_short_inputs=true (a converted model's default) attends exactly over a batch of at most k tokens, without
    E and F: Accelerate's DDP (no find_unused_parameters) failed on the second step, waiting for their gradients.
    Every row here is at most 14 tokens long, k = 16; the model gives E and F a zero gradient instead."""
    from linformer.train.pretrain import pretrain

    from .conftest import compose_pretrain
    from .test_pretrain import REPO

    model = tmp_path / "pretrained"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=3", "trainer.eval_every=1000", "trainer.save_every=1000",
                              "model.exact_short_inputs=true", "model.projected_dim=16"), model)
    sst2 = tmp_path / "sst2"
    sst2.mkdir()
    good, bad = ["good", "great", "lovely", "fine"], ["bad", "awful", "dull", "poor"]
    rows = [f"{a} {b}\t{label}" for label, words in enumerate((bad, good)) for a in words for b in words]
    (sst2 / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[2:-2]) + "\n")
    (sst2 / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:2] + rows[-2:]) + "\n")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    args = [str(REPO / "scripts" / "finetune.py"), "task=sst2", f"task.data_dir={sst2}", f"model_path={model}",
            f"task_cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'out'}", "trainer.max_steps=3",
            "trainer.batch_size=8", "trainer.cpu=true", "run_name=short"]
    result = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", "29536", *args],
                            env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"processes": 2' in (tmp_path / "out" / "finetune" / "short" / "summary.json").read_text()


_FAILING_RANK_1 = '''import os, runpy, signal, sys, time
from linformer import cli
from linformer.errors import ConfigError
from linformer.train.trainer import Trainer
if os.environ.get("RANK") == "1":
    real = Trainer._train_step
    def step(self, s):
        if s == 3 and os.environ.get("KILLED"):
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9, the OOM killer: no line
        if s == 3:
            raise ConfigError("injected: a bad shard on rank 1")
        return real(self, s)
    Trainer._train_step = step
sys.argv = sys.argv[1:]
cli.stop_while_starting()  # as the package's import does in a script's own process (not this wrapper's)
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:  # rank 0's end after its line, before the interpreter's teardown, as slow as it can be (seconds): torchrun's
    if os.environ.get("KILLED") and os.environ.get("RANK") == "0":  # SIGTERM for the killed peer lands in it
        time.sleep(5)
'''


def test_a_failure_of_rank_1_alone_is_its_one_line_at_once_and_run_json_gives_it(tiny_data, tmp_path):
    """Rank 1 failed alone while rank 0 waited in the step's collective: rank 1 waited 10 s for rank 0's line under
    c10d's "waitForInput ... timeout" warnings, and run.json (rank 0's) said only that another process failed.
    Rank 1 killed (kill -9): rank 0's `error:` line was followed, on torchrun's SIGTERM to it, by a `stopped:` line
    contradicting it, and rank 0 exited 143 seconds later; it now exits at once with its line's status, 2."""
    import json
    import re

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    wrapper = tmp_path / "failing.py"
    wrapper.write_text(_FAILING_RANK_1)
    for killed in (False, True):
        run = tmp_path / ("killed" if killed else "failed") / "run"
        args = _script_args(tiny_data, run, "trainer.cpu=true", "trainer.max_steps=20", "trainer.eval_every=1000")
        result = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", "29537", str(wrapper), *args[1:]],
                                env=dict(os.environ, OMP_NUM_THREADS="1", KILLED="1" if killed else ""),
                                capture_output=True, text=True, timeout=300)
        assert result.returncode != 0
        lines = [line for line in result.stderr.splitlines() if re.search(r"error:|stopped:|waitForInput", line)]
        said = ("error: process 1 ended without a word: killed?" if killed else
                "[rank 1] error: injected: a bad shard on rank 1")
        assert len(lines) == 1 and lines[0].startswith(said), result.stderr[-3000:]
        info = json.loads((run / "run.json").read_text())
        assert info["status"] == "failed" and said.removeprefix("error: ") in info["error"]
    # torchrun's report: rank 0 ended with its error's status, not 143 (SIGTERM's)
    assert re.search(r"rank\s*: 0 \(local_rank: 0\)\s*exitcode\s*: 2 ", result.stderr), result.stderr[-3000:]


_CRASHING_RANK_1 = '''import os, runpy, sys
import accelerate
from linformer import cli
from linformer.train.trainer import Trainer
if os.environ.get("RANK") == "1" and os.environ.get("FAIL_IN") == "save":
    real_save, saves = accelerate.Accelerator.save_state, []
    def save_state(self, *args, **kwargs):  # its second checkpoint (step 4): a disk error on this rank alone
        saves.append(1)
        if len(saves) == 2:
            raise RuntimeError("injected: a write failed on rank 1")
        return real_save(self, *args, **kwargs)
    accelerate.Accelerator.save_state = save_state
if os.environ.get("RANK") == "1" and os.environ.get("FAIL_IN") == "step":
    real_step = Trainer._train_step
    def step(self, s):
        if s == 3:
            raise RuntimeError("injected: a step failed on rank 1")
        return real_step(self, s)
    Trainer._train_step = step
sys.argv = sys.argv[1:]
cli.stop_while_starting()  # as the package's import does in a script's own process (not this wrapper's)
runpy.run_path(sys.argv[0], run_name="__main__")
'''


@pytest.mark.parametrize("where", ["save", "step"])
def test_an_unexpected_error_of_rank_1_stops_the_run_failed_and_rank_0_quiet(tiny_data, tmp_path, where):
    """Rank 1 raised a RuntimeError (not a LinformerError). In a checkpoint's writing, the ranks' agreement asked
    Accelerate's reduce for a "min", which it sums: rank 0 went on, the run ended complete with exit 0 and a step-4
    checkpoint short of rank 1's file. In a step, rank 0 (waiting for rank 1's line) took torchrun's SIGTERM as its
    own stop: `stopped: interrupted by SIGTERM while the command was starting.` and 143. Now the run fails with rank
    1's traceback, run.json names it, rank 0 adds no line, and no checkpoint of step 4 is kept."""
    import json
    import re

    from linformer.files.runs import complete_checkpoints

    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    wrapper = tmp_path / "crashing.py"
    wrapper.write_text(_CRASHING_RANK_1)
    run = tmp_path / "run"
    args = _script_args(tiny_data, run, "trainer.cpu=true", "trainer.max_steps=6", "trainer.eval_every=1000",
                        "trainer.save_every=2")
    result = subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", "29538", str(wrapper), *args[1:]],
                            env=dict(os.environ, OMP_NUM_THREADS="1", FAIL_IN=where), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0, result.stderr[-3000:]
    assert f"RuntimeError: injected: a {'write' if where == 'save' else 'step'} failed on rank 1" in result.stderr
    assert not [line for line in result.stderr.splitlines() if re.search(r"error:|stopped:", line)], \
        result.stderr[-3000:]
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and "[rank 1] RuntimeError: injected" in info["error"], info
    assert [p.name for p in complete_checkpoints(run)] == ["step-00000002"]
    assert not re.search(r"rank\s*: 0 \(local_rank: 0\)\s*exitcode\s*: 143 ", result.stderr), result.stderr[-3000:]
