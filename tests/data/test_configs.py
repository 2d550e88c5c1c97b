import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from linformer.configs import compose
from linformer.data.tasks import get_task
from linformer.files.locations import repo_root, resolve_path

CONFIGS = repo_root() / "configs"
DATA_CONFIGS = sorted(p.stem for p in (CONFIGS / "data").glob("*.yaml") if not p.stem.startswith("_"))
TASK_CONFIGS = sorted(p.stem for p in (CONFIGS / "task").glob("*.yaml") if not p.stem.startswith("_"))


def _compose(name, overrides=()):
    return compose(name, overrides)


# the options that leave the text and its name to the command line (data=text: one's own)
GIVEN = {"text": ["data.name=text", "data.sources=[notes/*.txt]"]}


@pytest.mark.parametrize("data", DATA_CONFIGS)
def test_corpus_reads_the_tokenizer_that_train_tokenizer_writes(data):
    """prepare_corpus looks for the tokenizer where train_tokenizer saved it, from the same sources."""
    given = [f"data={data}", *GIVEN.get(data, [])]
    tok = OmegaConf.to_container(_compose("tokenizer", given), resolve=True)
    corpus = OmegaConf.to_container(_compose("corpus", given), resolve=True)
    assert corpus["tokenizer_dir"] == tok["out_dir"]
    assert tok["files"] == corpus["data"]["sources"]
    assert corpus["out_dir"].endswith(f"/processed/{data}")


def test_one_s_own_text_is_one_data_group_read_alike_by_every_stage():
    """The guide's own-text recipe gave train_tokenizer.py, prepare_corpus.py and pretrain.py the same data.* settings,
    but pretrain.py's default group (data=mirror_slice, a 300-document demo slice) is not the data stages'
    (data=mirror): pretraining was refused against the corpus packed whole. data=text on all three reads one text,
    whole, at the default model's n, and asks for the text and its name."""
    from linformer.configs import refuse_missing_values
    from linformer.data.corpus import CORPUS_KEYS
    from linformer.errors import ConfigError

    own = ["data=text", "data.sources=[notes/*.txt]", "data.name=mine"]
    tok, corpus, pre = (OmegaConf.to_container(_compose(name, own), resolve=True)
                        for name in ("tokenizer", "corpus", "pretrain"))
    assert tok["out_dir"] == corpus["tokenizer_dir"] == pre["tokenizer_dir"] == "data/tokenizers/mine"
    assert corpus["out_dir"] == pre["corpus_dir"] == "data/processed/mine" and tok["files"] == ["notes/*.txt"]
    assert {k: corpus["data"][k] for k in CORPUS_KEYS} == {k: pre["data"][k] for k in CORPUS_KEYS}
    assert pre["data"]["max_documents"] is None and tok["max_lines"] is None
    assert pre["data"]["n"] == pre["model"]["max_seq_len"]
    with pytest.raises(ConfigError, match=r"^data.name is not set: a name of its own.*\(configs/data/text.yaml\)"):
        refuse_missing_values(_compose("pretrain", own[:2]), "pretrain")


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
def test_user_errors_are_one_line_and_exit_2(tmp_path, script, extra, monkeypatch, capsys):
    """A missing source is the user's to fix: one `error:` line naming it, exit status 2, no traceback. Each script
    runs in this process as its command line runs it (a Hydra script's line and status from a process of its own:
    tests/test_cli.py's script without its model, and test_prepare_signals' SIGTERM)."""
    from tests.conftest import run_script

    missing = tmp_path / "nowhere" / "corpus.txt.gz"
    args = [f"data.sources=[{missing}]", f"paths.data_dir={tmp_path}/data", f"paths.output_dir={tmp_path}/outputs",
            *extra]
    monkeypatch.chdir(tmp_path)
    code = run_script(script.removesuffix(".py"), args, monkeypatch)
    r = subprocess.CompletedProcess([], code, "", capsys.readouterr().err)
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
