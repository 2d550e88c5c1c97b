import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from linformer.data.io import repo_root, resolve_path

CONFIGS = repo_root() / "configs"


def _compose(name, overrides=()):
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


@pytest.mark.parametrize("data", ["mirror", "mirror_slice"])
@pytest.mark.parametrize("name", ["tokenizer", "corpus"])
def test_data_configs_compose(name, data):
    cfg = _compose(name, [f"data={data}"])
    c = OmegaConf.to_container(cfg, resolve=True)
    assert c["data"]["name"] == data and c["data"]["skip_bad_rows"] is False
    assert all(s.endswith(".txt.gz") for s in c["data"]["sources"])
    if name == "corpus":
        assert c["out_dir"] == f"data/processed/{data}" and c["tokenizer_dir"].startswith("data/tokenizers/")
    else:
        assert c["out_dir"].startswith("data/tokenizers/") and c["vocab_size"] == (8000 if data == "mirror_slice" else 50265)


@pytest.mark.parametrize("task", ["sst2", "imdb", "qnli", "qqp"])
def test_task_configs_compose(task):
    c = OmegaConf.to_container(_compose("corpus", [f"+task={task}"]), resolve=True)["task"]
    from linformer.data.tasks import get_task

    spec = get_task(task)
    assert c["name"] == task and c["num_labels"] == spec.num_labels and tuple(c["metrics"]) == spec.metrics
    assert c["eval_split"] == spec.eval_split and c["data_dir"].endswith(spec.mirror_subdir)


def test_paths_resolve_from_any_cwd(monkeypatch, tmp_path):
    monkeypatch.delenv("LINFORMER_DATA_MIRROR", raising=False)
    c = _compose("corpus", ["data.skip_bad_rows=true"])
    assert c.data.skip_bad_rows is True
    monkeypatch.chdir(tmp_path)
    assert Path(resolve_path(c.paths.data_mirror)) == (repo_root().parent / "shared/data").resolve()
    assert resolve_path(c.paths.data_dir) == str(repo_root() / "data")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path))
    assert _compose("corpus").paths.data_mirror == str(tmp_path)


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


@pytest.mark.slow
def test_mirror_slice_scripts(tmp_path, mirror):
    """The real mirror_slice demo pipeline (~1 min on 2 cores): tokenizer, then packed blocks."""
    root = repo_root()
    over = ["data=mirror_slice", f"paths.data_mirror={mirror}", f"paths.data_dir={tmp_path}/data", f"paths.output_dir={tmp_path}/outputs"]
    for script in ("train_tokenizer.py", "prepare_corpus.py"):
        r = subprocess.run([sys.executable, str(root / "scripts" / script), *over], capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
    from linformer.data.corpus import load_prepared

    dd = load_prepared(str(tmp_path / "data/processed/mirror_slice"), str(tmp_path / "data/tokenizers/mirror_slice"))
    assert len(dd["train"]) > 100 and len(dd["validation"]) > 0 and len(dd["train"][0]["input_ids"]) == 128
