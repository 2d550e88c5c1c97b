import json

import pytest
import torch
from transformers import AutoTokenizer, RobertaConfig, RobertaForMaskedLM, ViTConfig

from linformer.errors import CheckpointError
from linformer.train.finetune import finetune

from .conftest import compose_finetune, write_sst2_fixture


@pytest.fixture(scope="module")
def sst2_dir(tmp_path_factory):
    return write_sst2_fixture(tmp_path_factory.mktemp("sst2"))


def _run(tmp_path, sst2_dir, model_path, *overrides):
    cfg = compose_finetune("task=sst2", f"task.data_dir={sst2_dir}", f"model_path={model_path}",
                           f"task_cache_dir={tmp_path / 'task_cache'}", *overrides)
    return finetune(cfg, tmp_path / "run"), tmp_path / "run"


def test_finetune_from_a_pretraining_run(tmp_path, sst2_dir, pretrained_run):
    _, run = _run(tmp_path, sst2_dir, pretrained_run)
    saved = json.loads((run / "results.json").read_text())
    assert saved["task"] == "sst2" and saved["eval_split"] == "dev"
    assert {"accuracy"} <= saved["metrics"].keys() and 0.0 <= saved["metrics"]["accuracy"] <= 1.0
    assert saved["best_epoch"] in (1, 2) and len(saved["history"]) == 2
    assert saved["num_train_examples"] == 200 and saved["num_eval_examples"] == 40
    assert saved["model_path"] == str(pretrained_run / "model") and saved["seed"] == 0
    assert saved["wall_time_s"] > 0 and saved["attention"] == "linformer" and saved["projected_dim"] == 8
    assert saved["pretrain_val_ppl"] is not None and saved["lr"] == 1e-3 and saved["batch_size"] == 16
    # the tokenized splits went to the task cache, each complete (a second run would load them)
    cached = sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "task_cache").iterdir())
    assert cached == ["sst2-eval", "sst2-train"]
    assert all((p / "dataset_info.json").is_file() for p in (tmp_path / "task_cache").iterdir())
    assert (run / "best" / "config.json").is_file() and (run / "config.yaml").is_file()
    assert any("eval_accuracy" in json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines())


def test_finetune_a_plain_roberta_checkpoint_learns(tmp_path, sst2_dir, pretrained_run):
    """Table 2's baseline row: any HF encoder directory works, and the signal is learnable."""
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(pretrained_run / "model")
    config = RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=66, type_vocab_size=1)
    RobertaForMaskedLM(config).save_pretrained(tmp_path / "roberta")
    tok.save_pretrained(tmp_path / "roberta")
    results, _ = _run(tmp_path, sst2_dir, tmp_path / "roberta", "trainer.epochs=4", "trainer.lr=3e-3")
    assert results["model_type"] == "roberta" and results["max_length"] == 64
    assert results["metrics"]["accuracy"] >= 0.9


def test_finetune_from_scratch(tmp_path, sst2_dir, pretrained_run):
    results, _ = _run(tmp_path, sst2_dir, pretrained_run, "from_scratch=true", "trainer.epochs=1")
    assert results["from_scratch"] is True and results["steps"] == 13  # ceil(200 / 16)


def test_missing_model_path_names_it(tmp_path, sst2_dir):
    with pytest.raises(CheckpointError, match="nowhere"):
        _run(tmp_path, sst2_dir, tmp_path / "nowhere")


def test_incompatible_model_is_refused(tmp_path, sst2_dir, pretrained_run):
    ViTConfig().save_pretrained(tmp_path / "vit")
    AutoTokenizer.from_pretrained(pretrained_run / "model").save_pretrained(tmp_path / "vit")
    with pytest.raises(CheckpointError, match="cannot classify sequences"):
        _run(tmp_path, sst2_dir, tmp_path / "vit")


def test_unknown_task_lists_the_valid_ones():
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException, match="sst2"):
        compose_finetune("task=sst3", "model_path=x")
