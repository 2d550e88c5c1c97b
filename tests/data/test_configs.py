import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from linformer.cli import compose
from linformer.data.io import repo_root, resolve_path
from linformer.data.tasks import get_task

CONFIGS = repo_root() / "configs"
DATA_CONFIGS = sorted(p.stem for p in (CONFIGS / "data").glob("*.yaml"))
TASK_CONFIGS = sorted(p.stem for p in (CONFIGS / "task").glob("*.yaml"))


def _compose(name, overrides=()):
    return compose(name, overrides)


@pytest.mark.parametrize("data", DATA_CONFIGS)
def test_corpus_reads_the_tokenizer_that_train_tokenizer_writes(data):
    """prepare_corpus looks for the tokenizer where train_tokenizer saved it, from the same sources."""
    tok = OmegaConf.to_container(_compose("tokenizer", [f"data={data}"]), resolve=True)
    corpus = OmegaConf.to_container(_compose("corpus", [f"data={data}"]), resolve=True)
    assert corpus["tokenizer_dir"] == tok["out_dir"]
    assert tok["files"] == corpus["data"]["sources"]
    assert corpus["out_dir"].endswith(f"/processed/{data}")


@pytest.mark.parametrize("task", TASK_CONFIGS)
def test_task_configs_match_the_registry(task):
    """Each task config names a registered task and its mirror folder, and takes the override the malformed-row
    error suggests (task.skip_bad_rows=true, without a +)."""
    c = OmegaConf.to_container(_compose("corpus", [f"+task={task}", "task.skip_bad_rows=true"]), resolve=True)
    spec = get_task(c["task"]["name"])
    assert c["task"]["name"] == task and c["task"]["skip_bad_rows"] is True
    assert c["task"]["data_dir"].endswith(spec.mirror_subdir)


def test_paths_resolve_from_any_cwd(monkeypatch, tmp_path):
    monkeypatch.delenv("LINFORMER_DATA_MIRROR", raising=False)
    c = _compose("corpus", ["data.skip_bad_rows=true"])
    assert c.data.skip_bad_rows is True
    monkeypatch.chdir(tmp_path)
    assert Path(resolve_path(c.paths.data_mirror)) == (repo_root().parent / "shared/data").resolve()
    assert resolve_path(c.paths.data_dir) == str(repo_root() / "data")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path))
    assert _compose("corpus").paths.data_mirror == str(tmp_path)


@pytest.mark.slow  # several fresh processes; make test-all runs it
def test_scripts_end_to_end(tmp_path, corpus_file):
    """Both Hydra entry points on a fixture corpus, run from another cwd."""
    root = repo_root()
    common = [f"data.sources=[{corpus_file}]", f"paths.data_dir={tmp_path}/data",
              f"paths.output_dir={tmp_path}/outputs", "data=mirror_slice"]
    r = subprocess.run([sys.executable, str(root / "scripts/train_tokenizer.py"), *common, "vocab_size=300",
                        "data.tokenizer_max_lines=null", "show_progress=false"],
                       cwd=tmp_path, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "data/tokenizers/mirror_slice/tokenizer.json").is_file()
    r = subprocess.run([sys.executable, str(root / "scripts/prepare_corpus.py"), *common, "data.n=16",
                        "data.num_proc=1"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    from linformer.data.corpus import load_prepared

    dd = load_prepared(str(tmp_path / "data/processed/mirror_slice"), str(tmp_path / "data/tokenizers/mirror_slice"))
    assert len(dd["train"]) > 0 and (tmp_path / "outputs/prepare/mirror_slice/.hydra").is_dir()


@pytest.mark.parametrize("script, extra", [("prepare_corpus.py", []), ("train_tokenizer.py", ["show_progress=false"])])
def test_user_errors_are_one_line_and_exit_2(tmp_path, script, extra):
    """A missing source is the user's to fix: one `error:` line naming it, exit status 2, no traceback."""
    missing = tmp_path / "nowhere" / "corpus.txt.gz"
    r = subprocess.run([sys.executable, str(repo_root() / "scripts" / script), f"data.sources=[{missing}]",
                        f"paths.data_dir={tmp_path}/data", f"paths.output_dir={tmp_path}/outputs", *extra],
                       cwd=tmp_path, capture_output=True, text=True, check=False)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(missing) in errors[0]
    assert not (tmp_path / "data/processed").exists()


@pytest.mark.slow
def test_mirror_slice_scripts(tmp_path, mirror):
    """The real mirror_slice demo pipeline: tokenizer, then packed blocks."""
    root = repo_root()
    over = ["data=mirror_slice", f"paths.data_mirror={mirror}", f"paths.data_dir={tmp_path}/data", f"paths.output_dir={tmp_path}/outputs"]
    for script in ("train_tokenizer.py", "prepare_corpus.py"):
        r = subprocess.run([sys.executable, str(root / "scripts" / script), *over], capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
    from linformer.data.corpus import load_prepared

    dd = load_prepared(str(tmp_path / "data/processed/mirror_slice"), str(tmp_path / "data/tokenizers/mirror_slice"))
    assert len(dd["train"]) > 100 and len(dd["validation"]) > 0 and len(dd["train"][0]["input_ids"]) == 128
