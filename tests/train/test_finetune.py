import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer, RobertaConfig, RobertaForMaskedLM, ViTConfig

from linformer.data.task_loading import load_task
from linformer.errors import CheckpointError, ConfigError, DataError, TrainingDiverged
from linformer.modeling.configuration import SIZE_FIELDS
from linformer.report import by_length
from linformer.report.table2_pretrained import read_runs
from linformer.train.finetune import finetune

from .conftest import compose_finetune, signal_at_step, write_sst2_fixture


@pytest.fixture(scope="module")
def sst2_dir(tmp_path_factory):
    return write_sst2_fixture(tmp_path_factory.mktemp("sst2"))


def _run(tmp_path, sst2_dir, model_path, *overrides):
    cfg = compose_finetune("task=sst2", f"task.data_dir={sst2_dir}", f"model_path={model_path}",
                           f"task_cache_dir={tmp_path / 'task_cache'}", *overrides)
    return finetune(cfg, tmp_path / "run"), tmp_path / "run"


def test_the_trackers_get_the_reported_scores_after_training(tmp_path, sst2_dir, pretrained_run):
    """The reported split is scored once, after training, into results.json: the trackers (TensorBoard here) get it
    too, as eval_<metric> at the last step with the step of the model scored, or the dashboards show no accuracy."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    results, run = _run(tmp_path, sst2_dir, pretrained_run, "validation_fraction=0.2", "logger=tensorboard")
    files = [EventAccumulator(str(p)).Reload() for p in run.rglob("events.out.tfevents.*")]
    (scalars,) = [f for f in files if "eval_accuracy" in f.Tags()["scalars"]]
    assert [(e.step, round(e.value, 6)) for e in scalars.Scalars("eval_accuracy")] == [
        (results["steps"], round(results["metrics"]["accuracy"], 6))]
    assert [e.value for e in scalars.Scalars("eval_step")] == [results["reported"]["step"]]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert not any("eval_accuracy" in r for r in rows)  # metrics.jsonl keeps the training rows


def test_finetune_from_a_pretraining_run(tmp_path, sst2_dir, pretrained_run, monkeypatch):
    from tests.modeling.test_loading import _counting_hashes

    reads = _counting_hashes(monkeypatch)
    _, run = _run(tmp_path, sst2_dir, pretrained_run, "validation_fraction=0.2")
    assert reads[pretrained_run / "model" / "model.safetensors"] == 1  # checked at the start, hashed for the record
    saved = json.loads((run / "results.json").read_text())
    assert saved["task"] == "sst2" and saved["eval_split"] == "dev"
    config = json.loads((pretrained_run / "model" / "config.json").read_text())
    assert {f: saved[f] for f in SIZE_FIELDS} == {f: config[f] for f in SIZE_FIELDS}  # a report's rows tell sizes apart
    assert {"accuracy"} <= saved["metrics"].keys() and 0.0 <= saved["metrics"]["accuracy"] <= 1.0
    assert saved["best_epoch"] in (1, 2) and len(saved["history"]) == 2
    # 200 train rows: 40 carved for validation (stratified, subset_seed = seed 0), 160 trained on
    assert saved["num_train_examples"] == 160 and saved["num_eval_examples"] == 40
    selection = saved["selection"]
    assert (selection["split"], selection["fraction"], selection["seed"], selection["examples"]) == \
        ("validation", 0.2, 0, 40)
    assert len(set(selection["rows"])) == 40 and all(2 <= i < 202 for i in selection["rows"])  # train.tsv lines
    assert selection["step"] == saved["best_step"] == saved["reported"]["step"] and saved["reported"]["split"] == "dev"
    assert saved["eval_duplicates_dropped"] == 0
    assert saved["model_path"] == str(pretrained_run / "model") and saved["seed"] == 0
    assert saved["wall_time_s"] > 0 and saved["attention"] == "linformer" and saved["projected_dim"] == 8
    assert saved["device"].startswith("CPU: ")  # where the run computed, for tables made elsewhere
    assert (saved["length_policy"], saved["exact_short_inputs"], saved["classifier_pooling"]) == ("slice", False, "cls")
    assert saved["pretrain_val_ppl"] is not None and saved["lr"] == 1e-3 and saved["batch_size"] == 16
    assert (saved["local_window"], saved["global_positions"]) == (0, None)  # every architecture field recorded
    # the starting weights by content: the pretraining run's model.safetensors, not a path that may be rebuilt
    from linformer.modeling.loading import weights_sha256

    assert saved["start_weights_sha256"] == weights_sha256(str(pretrained_run / "model")) is not None
    # the tokenized splits went to the task cache, each complete (a second run would load them)
    cached = sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "task_cache").iterdir())
    assert cached == ["sst2-eval", "sst2-train", "sst2-validation"]
    assert all((p / "dataset_info.json").is_file() for p in (tmp_path / "task_cache").iterdir())
    # the saved model names the task's labels (a pipeline says "positive", not "LABEL_1")
    config = json.loads((run / "best" / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["label2id"] == {"negative": 0, "positive": 1}
    assert (run / "best" / "config.json").is_file() and (run / "config.yaml").is_file()
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    # evaluations during training are the validation split's; the reported split is never logged per epoch
    assert any("val_accuracy" in x for x in logged) and not any("eval_accuracy" in x for x in logged)
    # the reported split's outcome per example, in eval order: it reproduces the reported accuracy
    pred = json.loads((run / "eval_predictions.json").read_text())
    assert pred["step"] == saved["best_step"] and len(pred["labels"]) == len(pred["predictions"]) == 40
    assert pred["rows"] == list(range(2, 42))  # each example's line in dev.tsv, subset or not
    hits = sum(p == y for p, y in zip(pred["predictions"], pred["labels"]))
    assert hits / 40 == pytest.approx(saved["metrics"]["accuracy"])


def _falling_validation(monkeypatch):
    """Validation scores that fall every epoch, so the first epoch is chosen and training goes on past it; and a
    count of how often each split is scored."""
    from linformer.train.finetune import FinetuneTask

    scored, real = [], FinetuneTask.score

    def score(self, model, acc, split):
        scored.append(split)
        out = real(self, model, acc, split)
        return {**out, "accuracy": 1.0 / scored.count("validation")} if split == "validation" else out

    monkeypatch.setattr(FinetuneTask, "score", score)
    return scored


def test_the_reported_split_is_scored_once_on_the_model_validation_chose(tmp_path, sst2_dir, pretrained_run,
                                                                         monkeypatch):
    from linformer.modeling.loading import load_classifier
    from linformer.train.export import export_run

    scored = _falling_validation(monkeypatch)
    results, run = _run(tmp_path, sst2_dir, pretrained_run, "validation_fraction=0.2", "trainer.epochs=3")
    assert scored == ["validation"] * 3 + ["eval"]  # three choosing evaluations, one report
    assert results["best_step"] == results["selection"]["step"] == 10 and results["steps"] == 30  # ceil(160 / 16)
    # the kept model is the chosen one, and it is the model behind the predictions: rescored, it gives them again
    model, _ = load_classifier(str(run / "best"), ("negative", "positive"), from_scratch=False)
    tokenizer = AutoTokenizer.from_pretrained(run / "best")
    dev = [line.split("\t") for line in (sst2_dir / "dev.tsv").read_text().splitlines()[1:]]
    model.eval()
    with torch.no_grad():
        enc = tokenizer([text for text, _ in dev], padding=True, truncation=True, max_length=results["max_length"],
                        return_tensors="pt")
        again = model(**enc).logits.argmax(-1).tolist()
    assert again == json.loads((run / "eval_predictions.json").read_text())["predictions"]
    # export's default (the final checkpoint) is not that model: it says so and names the one that is
    with pytest.raises(CheckpointError, match=r"reports the model of step 10.*best"):
        export_run(run)


def test_a_best_model_saved_by_an_earlier_version_is_written_anew_when_the_run_finishes(tmp_path, sst2_dir,
                                                                                         pretrained_run, monkeypatch):
    """A run begun by an earlier version (killed after its validation chose a step) and finished by this one reported
    the best/ the earlier version wrote: labels LABEL_0/1, no checksums. The finish writes it again in the current
    format from the same weights (the model holds them once the chosen step is restored)."""
    from safetensors.torch import load_file

    from linformer.files.outputs import MANIFEST, output_damage
    from linformer.modeling.saving import is_current_model_folder

    _falling_validation(monkeypatch)  # the first epoch's model is chosen, and training goes on past it
    common = ("validation_fraction=0.2", "trainer.epochs=3")
    _run(tmp_path, sst2_dir, pretrained_run, *common, "trainer.max_steps=20")
    best = tmp_path / "run" / "best"
    chosen = load_file(best / "model.safetensors")
    (best / MANIFEST).unlink()  # as an earlier version left it: no record, and the labels unnamed
    config = json.loads((best / "config.json").read_text())
    (best / "config.json").write_text(json.dumps({**config, "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
                                                  "label2id": {"LABEL_0": 0, "LABEL_1": 1}}))
    assert not is_current_model_folder(best)
    results, _ = _run(tmp_path, sst2_dir, pretrained_run, *common, "trainer.max_steps=30",
                      "trainer.allow_config_change=[trainer.max_steps]")
    assert (results["best_step"], results["steps"]) == (10, 30)
    assert is_current_model_folder(best) and output_damage(best) == []
    assert json.loads((best / "config.json").read_text())["id2label"] == {"0": "negative", "1": "positive"}
    again = load_file(best / "model.safetensors")
    assert again.keys() == chosen.keys() and all(torch.equal(again[k], chosen[k]) for k in chosen)


def test_without_a_validation_split_nothing_is_chosen(tmp_path, sst2_dir, pretrained_run, monkeypatch):
    scored = _falling_validation(monkeypatch)
    results, run = _run(tmp_path, sst2_dir, pretrained_run)
    assert scored == ["eval"] and results["history"] == []
    assert results["selection"]["split"] is None and results["best_step"] == results["steps"] == 26
    assert results["num_train_examples"] == 200 and (run / "best" / "config.json").is_file()  # the last model
    assert results["subset_seed"] == results["seed"]  # unset: the run's seed, as recorded, not left to be guessed


@pytest.mark.parametrize("overrides, message", [
    (["validation_fraction=0.5"], r"validation_fraction=0.5 must lie in \(0, 0.5\)"),
    (["validation_fraction=0"], r"validation_fraction=0 must lie in"),
    (["validation_fraction=true"], r"validation_fraction=True must lie in"),
    (["validation_fraction=0.45", "max_train_examples=28"],
     (r"^15 training examples after max_train_examples=28, validation_fraction=0.45, fewer than one batch "
      r"\(trainer.batch_size=16 x 1 process\): lower trainer.batch_size to 15 or less, or train on more rows")),
    # one rule whatever made the set small: a subset alone was trained on in steps of fewer than the batch
    (["max_train_examples=1"], (r"^1 training example after max_train_examples=1, fewer than one batch "
                                r"\(trainer.batch_size=16 x 1 process\): lower trainer.batch_size to 1 or less")),
    (["trainer.eval_every=5"], r"trainer.eval_every=5: evaluations during training are made on a validation split"),
    (["validation_fraction=0.2", "trainer.save_best=false"], r"trainer.save_best=false with validation_fraction=0.2"),
])
def test_protocol_refusals_name_the_key(tmp_path, sst2_dir, pretrained_run, overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        _run(tmp_path, sst2_dir, pretrained_run, *overrides)
    assert "\n" not in str(err.value) and not (tmp_path / "run" / "results.json").exists()


def test_finetune_a_plain_roberta_checkpoint_learns(tmp_path, sst2_dir, pretrained_run):
    """Table 2's baseline row: any HF encoder directory works, and the signal is learnable."""
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(pretrained_run / "model")
    config = RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=66, type_vocab_size=1)
    RobertaForMaskedLM(config).save_pretrained(tmp_path / "roberta")
    tok.model_max_length = 64  # the Linformer run's tokenizer says its n (32); this RoBERTa takes 64 tokens
    tok.save_pretrained(tmp_path / "roberta")
    results, _ = _run(tmp_path, sst2_dir, tmp_path / "roberta", "trainer.epochs=4", "trainer.lr=3e-3")
    assert results["model_type"] == "roberta" and results["max_length"] == 64
    assert results["metrics"]["accuracy"] >= 0.9


@pytest.mark.parametrize("from_scratch", [False, True])
def test_from_scratch_starts_from_fresh_weights_of_the_same_architecture(sst2_dir, pretrained_run, from_scratch):
    from safetensors.torch import load_file

    from linformer.runconfig import FinetuneSpec
    from linformer.train.finetune import FinetuneTask

    cfg = compose_finetune("task=sst2", f"task.data_dir={sst2_dir}", f"model_path={pretrained_run}",
                           f"from_scratch={str(from_scratch).lower()}")
    spec = FinetuneSpec.read(cfg)
    task = FinetuneTask(spec, spec.trainer, 1, 0)  # the model as training would start it
    saved = load_file(pretrained_run / "model" / "model.safetensors")
    mine = dict(task.model.named_parameters())
    encoder = [k for k in saved if k in mine and saved[k].ndim == 2]  # the encoder's matrices, heads aside
    assert encoder and task.model.config.hidden_size == 32  # the pretraining run's architecture either way
    same = [torch.equal(mine[k], saved[k]) for k in encoder]
    assert all(same) if not from_scratch else not any(same)


def test_finetune_from_scratch_records_it(tmp_path, sst2_dir, pretrained_run):
    results, _ = _run(tmp_path, sst2_dir, pretrained_run, "from_scratch=true", "trainer.epochs=1")
    assert results["from_scratch"] is True and results["steps"] == 13  # ceil(200 / 16)
    assert results["start_weights_sha256"] is None  # fresh weights: no file started it


def test_missing_model_path_names_it(tmp_path, sst2_dir):
    with pytest.raises(CheckpointError, match="nowhere"):
        _run(tmp_path, sst2_dir, tmp_path / "nowhere")


def test_incompatible_model_is_refused(tmp_path, sst2_dir, pretrained_run):
    ViTConfig().save_pretrained(tmp_path / "vit")
    AutoTokenizer.from_pretrained(pretrained_run / "model").save_pretrained(tmp_path / "vit")
    with pytest.raises(CheckpointError, match="cannot classify sequences"):
        _run(tmp_path, sst2_dir, tmp_path / "vit")


@pytest.mark.parametrize("damage", ["removed", "cut short"])
def test_a_model_directory_without_its_tokenizer_is_one_error_before_the_weights_load(tmp_path, sst2_dir,
                                                                                      pretrained_run, damage):
    """transformers says "sentencepiece or tiktoken" for a folder without tokenizer files, and a JSONDecodeError for
    a cut one: one error naming the folder or file, before any weights load, and no run starts."""
    model = tmp_path / "model"
    shutil.copytree(pretrained_run / "model", model)
    if damage == "removed":
        for f in model.glob("tokenizer*"):
            f.unlink()
        expected = rf"^{model} has no tokenizer \(tokenizer\.json, .*give model_path a folder that has them\.$"
    else:
        (model / "tokenizer.json").write_text((model / "tokenizer.json").read_text()[:300])
        expected = rf"^{model / 'tokenizer.json'} is damaged: it is not valid JSON .*copy the tokenizer files back"
    with pytest.raises(CheckpointError, match=expected):
        _run(tmp_path, sst2_dir, model)
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_unknown_task_lists_the_valid_ones():
    options = ", ".join(sorted(p.stem for p in (REPO / "configs" / "task").glob("*.yaml") if p.stem[0] != "_"))
    with pytest.raises(ConfigError, match=rf"task=sst3: no such option \(did you mean sst2\?\); the options: {options}"
                       ) as err:
        compose_finetune("task=sst3", "model_path=x")
    assert "\n" not in str(err.value)


def test_a_task_name_without_a_task_spec_is_one_error_naming_task_name():
    """task.name=sst3 (or a configs/task yaml without its TaskSpec) was a KeyError traceback from the run's data
    identity; it is refused where the config is read, before any work."""
    from linformer.data import TASKS
    from linformer.runconfig import FinetuneSpec

    with pytest.raises(ConfigError, match=r"^task.name=sst3: unknown task 'sst3' \(did you mean sst2\?\); valid tasks: "
                                          + ", ".join(sorted(TASKS))) as err:
        FinetuneSpec.read(compose_finetune("task=sst2", "task.name=sst3", "model_path=x"))
    assert "\n" not in str(err.value)


@pytest.fixture
def local_sst2(monkeypatch):
    """SST-2 registered again as a task of local files only (no hub dataset), as a user's own task is."""
    import dataclasses

    from linformer.data import TASKS

    spec = dataclasses.replace(TASKS["sst2"], name="mysst", hub=(), hub_fields=(), mirror_subdir="", title="")
    monkeypatch.setitem(TASKS, "mysst", spec)
    return spec


def test_a_local_only_task_finetuned_from_a_converted_model_gets_its_card(tmp_path, sst2_dir, pretrained_run,
                                                                         local_sst2):
    """The card's model-index named every registered task's hub dataset (spec.hub[0]): a task without one failed the
    run after its training and scoring (IndexError), with no results.json and no card."""
    from linformer import LinformerForMaskedLM
    from linformer.modeling.card import conversion_info, read_card_info, write_model_card

    source = tmp_path / "source"
    shutil.copytree(pretrained_run / "model", source)  # a model with a card, as a converted one has
    write_model_card(source, conversion_info(str(pretrained_run / "model"), LinformerForMaskedLM.from_pretrained(source),
                                             name="source"))
    results, run = _run(tmp_path, sst2_dir, source, "trainer.epochs=1", "task.name=mysst")
    assert results["task"] == "mysst" and (run / "results.json").is_file()
    card = (run / "best" / "README.md").read_text()
    assert "model-index" in card and "type: mysst" in card
    assert read_card_info(run / "best")["results"]["mysst"]["metrics"] == results["metrics"]


def test_a_run_never_writes_into_the_model_it_starts_from(tmp_path, sst2_dir, pretrained_run):
    """The source's card got a results row at the end of the run: a read-only source failed the finished run (no
    results.json, status failed), and any quick run replaced the source card's headline result."""
    from linformer import LinformerForMaskedLM
    from linformer.modeling.card import conversion_info, write_model_card

    source = tmp_path / "source"
    shutil.copytree(pretrained_run / "model", source)  # a model with a card, as a converted one has
    write_model_card(source, conversion_info(str(pretrained_run / "model"), LinformerForMaskedLM.from_pretrained(source),
                                             name="source"))
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in source.iterdir()}
    _, run = _run(tmp_path, sst2_dir, source, "trainer.epochs=1")
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in source.iterdir()} == before
    assert json.loads((run / "run.json").read_text())["status"] == "complete" and (run / "results.json").is_file()


def test_the_task_s_metrics_load_before_any_training(tmp_path, sst2_dir, pretrained_run, monkeypatch):
    """The metric modules were loaded at the final scoring: one that could not load (a read-only HF_HOME, where
    evaluate copied them) failed the run after all its training."""
    from linformer.data import metrics

    def cannot_load(module):
        raise PermissionError(13, "Permission denied", f"metric module {module}")

    monkeypatch.setattr(metrics, "load_metric", cannot_load)
    with pytest.raises(PermissionError, match="metric module accuracy"):
        _run(tmp_path, sst2_dir, pretrained_run, "trainer.epochs=1")
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "best").exists()


REPO = Path(__file__).resolve().parents[2]


def _finetune_cli(sst2_dir, model_path, tmp_path, *overrides, multirun=False):
    args = [sys.executable, str(REPO / "scripts" / "finetune.py"), *(["-m"] if multirun else []), "task=sst2", f"task.data_dir={sst2_dir}",
            f"model_path={model_path}", f"task_cache_dir={tmp_path / 'cache'}", f"paths.output_dir={tmp_path / 'out'}",
            "trainer.epochs=1", "trainer.batch_size=16", *overrides]
    return subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))


def test_lr_sweep_keeps_each_job_apart(tmp_path, sst2_dir, pretrained_run, monkeypatch):
    """The script's main in-process, with its --multirun command line (the script's error line and status as the
    shell sees them: test_cli's test_the_script_without_its_model_is_one_error_line_and_leaves_nothing)."""
    from tests.conftest import as_command, load_script

    monkeypatch.chdir(REPO)
    as_command(monkeypatch, ["scripts/finetune.py", "-m", "task=sst2", f"task.data_dir={sst2_dir}",
                             f"model_path={pretrained_run}", f"task_cache_dir={tmp_path / 'cache'}",
                             f"paths.output_dir={tmp_path / 'out'}", "trainer.epochs=1",
                             "trainer.batch_size=16", "trainer.max_steps=2", "trainer.lr=1e-3,3e-4",
                             "trainer.eval_batch_size=8"])
    load_script("finetune").main()
    found = sorted((tmp_path / "out" / "finetune" / "multirun").glob("*/results.json"))
    assert sorted(json.loads(p.read_text())["lr"] for p in found) == [3e-4, 1e-3]
    assert "eval_batch_size=8" not in found[0].parent.name  # an operational key names no folder


@pytest.mark.slow
def test_a_sweep_goes_on_past_a_failed_job_and_ends_with_a_line_per_job(tmp_path, sst2_dir, pretrained_run):
    """A job that failed (a model that is not there) stopped the rest of the sweep, and a sweep ended without a word
    of which jobs ran; a sweep refused in every job replaced the earlier sweep's multirun.yaml, the only record of
    its command, which no run.json held either."""
    absent = tmp_path / "absent"
    first = _finetune_cli(sst2_dir, f"{absent},{pretrained_run}", tmp_path, "trainer.max_steps=2", multirun=True)
    lines = first.stderr.strip().splitlines()
    assert first.returncode == 2 and lines[-1].startswith("error: 1 of 2 jobs failed (#0)"), first.stderr[-3000:]
    assert lines[-4].startswith("sweep of 2 jobs (1 ran, 1 failed)")
    assert lines[-3].startswith("  #0 failed: ") and ": error: model_path=" in lines[-3] and "#1 ran: " in lines[-2]
    sweep = tmp_path / "out" / "finetune" / "multirun"
    ran = next(sweep.glob("*/run.json"))
    info = json.loads(ran.read_text())
    assert info["status"] == "complete" and "-m" in info["command"] and "finetune.py" in info["command"]
    record = (sweep / "multirun.yaml").read_bytes()

    refused = _finetune_cli(sst2_dir, absent, tmp_path, "seed=0,1", multirun=True)
    assert refused.returncode == 2 and "error: 2 of 2 jobs failed" in refused.stderr
    assert (sweep / "multirun.yaml").read_bytes() == record  # the earlier sweep's record stays

    # an operational key added (and the length given once): the same folder, which says it is complete
    again = _finetune_cli(sst2_dir, pretrained_run, tmp_path, "trainer.max_steps=2", "trainer.eval_batch_size=8",
                          "seed=0,1", multirun=True)
    assert again.returncode == 0 and "#0 already complete: " + ran.parent.name in again.stderr, again.stderr[-3000:]
    assert "#1 ran: " in again.stderr


def test_malformed_row_is_one_error_line_naming_file_and_line(tmp_path, sst2_dir, pretrained_run):
    bad = tmp_path / "bad"
    shutil.copytree(sst2_dir, bad)
    with (bad / "train.tsv").open("a") as f:
        f.write("a sentence without its label\n")
    with pytest.raises(DataError) as err:
        _run(tmp_path, bad, pretrained_run)
    assert "train.tsv:202" in str(err.value) and "task.skip_bad_rows" in str(err.value)


def test_max_length_above_n_is_refused(tmp_path, sst2_dir, pretrained_run):
    with pytest.raises(ConfigError, match="trainer.max_length=64 is above"):
        _run(tmp_path, sst2_dir, pretrained_run, "trainer.max_length=64")  # the tiny model's n is 32


def test_grad_accum_keeps_each_epoch_whole_where_its_batches_do_not_divide(tmp_path, sst2_dir, pretrained_run):
    """36 examples, batch 4 x grad_accum 2 against batch 8: the epoch's fifth micro-batch of 4 used to be joined by
    the next epoch's first, so "2 epochs" trained on 40 examples and its evaluations fell mid-epoch. The epoch's last
    step now takes what is left of it: the same updates as batch 8 (dropout off, so the batches alone decide)."""
    import shutil

    from safetensors.torch import load_file

    model = tmp_path / "no-dropout"
    shutil.copytree(pretrained_run / "model", model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | {"hidden_dropout_prob": 0.0,
                                                             "attention_probs_dropout_prob": 0.0}))
    runs = {}
    for name, batch in {"b8": ["trainer.batch_size=8"], "b4x2": ["trainer.batch_size=4", "trainer.grad_accum=2"]}.items():
        results, runs[name] = _run(tmp_path / name, sst2_dir, model, "max_train_examples=36", "validation_fraction=null",
                                   *batch)
        assert results["steps"] == 10  # 2 epochs of ceil(36 / 8) = 5 steps
    rows = {name: [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
            for name, run in runs.items()}
    assert [r["epoch"] for r in rows["b4x2"] if "loss" in r] == [r["epoch"] for r in rows["b8"] if "loss" in r]
    for a, b in zip(*(([r["loss"] for r in rows[name] if "loss" in r]) for name in ("b8", "b4x2")), strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    first, second = (load_file(runs[name] / "best" / "model.safetensors") for name in ("b8", "b4x2"))
    assert max(float((first[k] - second[k]).abs().max()) for k in first) < 1e-5


# a skipped first step counts and moves the schedule on: torch's warning that its first rate went unused must not
# reach the user
@pytest.mark.filterwarnings("error:Detected call of `lr_scheduler")
def test_nonfinite_loss_in_an_earlier_micro_batch_skips_the_update(tmp_path, sst2_dir, pretrained_run, monkeypatch):
    """With grad_accum=2 a NaN in the first micro-batch of a step must stop the update, not only one in the last."""
    from linformer.modeling import LinformerForSequenceClassification

    forward, calls = LinformerForSequenceClassification.forward, {"n": 0}

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        if self.training:
            calls["n"] += 1
            if calls["n"] % 2 == 1:  # the first micro-batch of every step
                out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(LinformerForSequenceClassification, "forward", poisoned)
    with pytest.raises(TrainingDiverged, match="2 consecutive non-finite losses at step 2"):
        _run(tmp_path, sst2_dir, pretrained_run, "trainer.grad_accum=2", "trainer.batch_size=8",
             "trainer.max_nonfinite_steps=2")


def test_finetune_resumes_exactly_after_sigterm(tmp_path, sst2_dir, pretrained_run, monkeypatch, capsys):
    """Finetuning is checkpointed on SIGTERM (the real signal, through the handler the run installs) and the same
    command run again resumes to the uninterrupted run's losses and accuracy; its wall time counts both attempts.
    Three epochs, stopped in the third. (That a stop ends the command with 128 + the signal and a `stopped:` line is
    test_cli's; a script killed and resumed in processes of its own is test_pretrain's SIGKILL test.)"""
    from linformer.configs import compose
    from linformer.errors import Preempted

    def settings(name):
        return compose("finetune", ["task=sst2", f"task.data_dir={sst2_dir}", f"task_cache_dir={tmp_path / name}",
                                    "trainer.epochs=3", "trainer.batch_size=4", "max_train_examples=40",
                                    "model_path=" + str(pretrained_run)])

    finetune(settings("a"), tmp_path / "a")
    signal_at_step(monkeypatch, 25, signal.SIGTERM)  # the third epoch's middle: 3 epochs x ceil(40 / 4) steps
    with pytest.raises(Preempted) as stop:
        finetune(settings("b"), tmp_path / "b")
    assert stop.value.exit_code == 128 + signal.SIGTERM
    monkeypatch.undo()
    capsys.readouterr()
    finetune(settings("b"), tmp_path / "b")
    assert f"resuming {tmp_path / 'b'} from " in capsys.readouterr().err

    def losses(run):
        return [json.loads(x)["loss"] for x in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]

    a, b = losses(tmp_path / "a"), losses(tmp_path / "b")
    assert len(a) == 30 and a == b
    ra, rb = (json.loads((tmp_path / name / "results.json").read_text()) for name in ("a", "b"))
    assert ra["history"] == rb["history"]
    # the checkpoint written on SIGTERM holds the first attempt's time; the total adds it
    at_stop = min((json.loads(p.read_text()) for p in (tmp_path / "b").glob("checkpoints/*/trainer_state.json")),
                  key=lambda st: st["step"])
    assert at_stop["step"] == 26 and at_stop["wall_time_s"] > 0  # the step the signal landed in, finished
    assert rb["wall_time_s"] > at_stop["wall_time_s"]


def test_min_train_tokens_trains_on_the_long_examples_only(tmp_path, sst2_dir, pretrained_run, caplog):
    """min_train_tokens keeps the train examples longer than that after truncation (a lengthened classifier
    finetuned on the long reviews it was lengthened for), records the cut, and names the key when nothing is left."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(pretrained_run / "model")
    rows = (sst2_dir / "train.tsv").read_text().splitlines()[1:]
    lengths = sorted(len(tok(r.split("\t")[0].strip(), truncation=True, max_length=32)["input_ids"]) for r in rows)
    cut = lengths[len(lengths) // 2]
    results, _ = _run(tmp_path, sst2_dir, pretrained_run, f"min_train_tokens={cut}", "trainer.epochs=1")
    assert results["num_train_examples"] == sum(n > cut for n in lengths) > 0
    assert results["min_train_tokens"] == cut and results["max_length"] == 32  # the model's n: lengths as truncated
    kept = sum(n > cut for n in lengths)  # said, as max_train_examples draws before this filter
    assert f"min_train_tokens={cut} keeps {kept} of the {len(rows)} train examples" in caplog.text
    with pytest.raises(ConfigError, match=rf"^min_train_tokens=500: none of the {len(rows)} train examples"):
        _run(tmp_path / "again", sst2_dir, pretrained_run, "min_train_tokens=500")


@pytest.mark.parametrize("override, key", [("max_train_examples=0", "max_train_examples"),
                                           ("min_train_tokens=0", "min_train_tokens"),
                                           ("trainer.epochs=0", "trainer.epochs"),
                                           ("trainer.eval_batch_size=-1", "trainer.eval_batch_size")])
def test_invalid_finetune_numbers_name_their_key(tmp_path, sst2_dir, pretrained_run, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        _run(tmp_path, sst2_dir, pretrained_run, override)
    assert not (tmp_path / "run" / "config.yaml").exists()


def _roberta_beside(tmp_path, tokenizer_dir, **config):
    """A tiny RoBERTa MLM saved with the tokenizer at tokenizer_dir (which need not fit it)."""
    torch.manual_seed(0)
    RobertaForMaskedLM(RobertaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=66, type_vocab_size=1, **config)).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(tmp_path)
    return tmp_path


def test_a_tokenizer_larger_than_the_vocabulary_is_one_error_line(tmp_path, sst2_dir, pretrained_run):
    """Its ids would index past the word embeddings: the run stops before training, naming the directory and sizes."""
    size = len(AutoTokenizer.from_pretrained(pretrained_run / "model"))
    model = _roberta_beside(tmp_path / "small_vocab", pretrained_run / "model", vocab_size=size - 50)
    with pytest.raises(CheckpointError) as err:
        _run(tmp_path, sst2_dir, model)
    assert str(model) in str(err.value) and f"has {size} tokens but the model's vocab_size is {size - 50}" in str(err.value)
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_tokenizer_of_another_model_is_refused(tmp_path, sst2_dir, pretrained_run):
    """Same size, another pad token id (BERT's 0, not RoBERTa's 1): the tokenizer belongs to another model."""
    size = len(AutoTokenizer.from_pretrained(pretrained_run / "model"))
    model = _roberta_beside(tmp_path / "other_pad", pretrained_run / "model", vocab_size=size, pad_token_id=0)
    with pytest.raises(CheckpointError, match=r"other_pad'.* has pad token id 1, not the model's pad_token_id 0"):
        _run(tmp_path, sst2_dir, model)
    assert not (tmp_path / "run" / "results.json").exists()


def test_eval_runs_longest_first_but_predictions_come_back_in_split_order(tmp_path, pretrained_run, monkeypatch):
    """Evaluation batches are sorted by length; eval_predictions.json must still follow the dev file row by row."""
    rng = __import__("random").Random(1)
    data = tmp_path / "sst2"
    write_sst2_fixture(data, train=64, dev=4)
    rows = [(" ".join(["good" if y else "bad"] * rng.randint(1, 30)) + " . ", y)
            for y in (rng.randint(0, 1) for _ in range(37))]
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    results, run = _run(tmp_path, data, pretrained_run, "trainer.epochs=1", "trainer.eval_batch_size=8",
                        "trainer.group_by_length=true")
    pred = json.loads((run / "eval_predictions.json").read_text())
    assert pred["labels"] == [y for _, y in rows]
    hits = sum(p == y for p, y in zip(pred["predictions"], pred["labels"]))
    assert hits / len(rows) == pytest.approx(results["metrics"]["accuracy"])
    # a report rebuilds the same eval examples from the run's config: their lengths, in the same order
    (finished,) = read_runs([str(run)])
    tok = AutoTokenizer.from_pretrained(pretrained_run / "model")
    cap = results["max_length"]
    assert by_length.eval_lengths(finished).tolist() == [min(cap, len(tok(s.strip())["input_ids"])) for s, _ in rows]
    # records made on another machine name its data_dir: the same task is read under this machine's mirror
    mirror = tmp_path / "mirror"
    (mirror / "glue").mkdir(parents=True)
    data.rename(mirror / "glue" / "sst2")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(mirror))
    assert by_length.eval_lengths(finished).tolist() == [min(cap, len(tok(s.strip())["input_ids"])) for s, _ in rows]
    data = mirror / "glue" / "sst2"
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{1 - y}\n" for s, y in rows))
    with pytest.raises(DataError, match="no longer gives the examples"):
        by_length.eval_lengths(finished)


def test_trainer_max_length_wins_over_the_task_s_default_cap(tmp_path, sst2_dir, pretrained_run):
    """task.max_length is a default: a run that asks for longer inputs (a lengthened model) gets them."""
    results, _ = _run(tmp_path, sst2_dir, pretrained_run, "task.max_length=16", "trainer.max_length=32",
                      "trainer.epochs=1")
    assert results["max_length"] == 32
    results, _ = _run(tmp_path / "b", sst2_dir, pretrained_run, "task.max_length=16", "trainer.epochs=1")
    assert results["max_length"] == 16


def test_a_run_continues_only_on_the_task_data_it_started_on(tmp_path, pretrained_run):
    """A stopped finetuning run resumed after its train.tsv was edited (every label flipped, say) went on without a
    word, one run on two datasets; the data files' contents are part of the run's identity now. A run recorded before
    that key keeps its rerun."""
    from linformer.errors import RunDirError

    data = write_sst2_fixture(tmp_path / "sst2")
    run = tmp_path / "run"
    _run(tmp_path, data, pretrained_run, "trainer.epochs=1")
    config = (run / "config.yaml").read_text()
    assert "task_data_key" in config
    lines = (data / "train.tsv").read_text().splitlines()
    flipped = [lines[0]] + [f"{t}\t{1 - int(y)}" for t, y in (line.rsplit("\t", 1) for line in lines[1:])]
    (data / "train.tsv").write_text("\n".join(flipped) + "\n")
    with pytest.raises(RunDirError, match=r"holds a run with other settings \(task_data_key: '\w+' -> '\w+'\)"):
        _run(tmp_path, data, pretrained_run, "trainer.epochs=2", "trainer.allow_config_change=[trainer.epochs]")
    (run / "config.yaml").write_text("\n".join(x for x in config.splitlines() if not x.startswith("task_data_key")))
    _run(tmp_path, data, pretrained_run, "trainer.epochs=1")  # recorded without the key: the same run, complete


def test_a_run_begun_with_the_carve_by_position_goes_on_with_it_and_a_new_one_carves_by_text(tmp_path, sst2_dir,
                                                                                              pretrained_run):
    """The validation carve is drawn from each row's text now, no longer from its place in the file: a run whose
    checkpoints were saved before the carve was recorded carved by place, and resumed (trained further) it keeps its
    validation rows, and so its train rows and the best model's choice, rather than switch sets in the middle."""
    from linformer.data.task_loading import split_info
    from linformer.train.checkpoint import STATE_FILE, _write_checksums

    tokenizer = AutoTokenizer.from_pretrained(Path(pretrained_run) / "model")

    def carved_rows(carve, subset_seed):
        dd = load_task("sst2", str(sst2_dir), tokenizer, 32, splits=("validation",), validation_fraction=0.2,
                       subset_seed=subset_seed, carve=carve)
        return split_info(dd["validation"])["rows"]

    results, run = _run(tmp_path, sst2_dir, pretrained_run, "validation_fraction=0.2", "trainer.epochs=1")
    text_rows, seed = results["selection"]["rows"], results["subset_seed"]
    assert results["selection"]["carve"] == "text" and text_rows == carved_rows("text", seed)
    assert json.loads((run / "run.json").read_text())["validation_carve"] == "text"
    for ckpt in (run / "checkpoints").iterdir():  # as a version that recorded no carve saved them
        state = json.loads((ckpt / STATE_FILE).read_text())
        (ckpt / STATE_FILE).write_text(json.dumps({k: v for k, v in state.items() if k != "validation_carve"}))
        _write_checksums(ckpt)
    further, _ = _run(tmp_path, sst2_dir, pretrained_run, "validation_fraction=0.2", "trainer.epochs=2",
                      "trainer.allow_config_change=[trainer.epochs]")
    assert further["steps"] == 20 and json.loads((run / "run.json").read_text())["start_step"] == 10  # resumed
    assert further["selection"]["carve"] == "position" and further["selection"]["rows"] == carved_rows("position", seed)
    assert further["selection"]["rows"] != text_rows
    assert json.loads((run / "run.json").read_text())["validation_carve"] == "position"


def test_a_run_s_identity_covers_how_its_task_spec_reads_the_files(sst2_dir, local_sst2, monkeypatch):
    """task_data_key keys the files alone: a run resumed after its TaskSpec put the labels in another order went on
    with the other label ids, one run on two readings of its data. task_spec_key keys the reading (a key of its
    own, so that runs recorded before it, which lack it, still resume)."""
    import dataclasses
    from types import SimpleNamespace

    from linformer.data import TASKS
    from linformer.train.common import data_identity

    spec = SimpleNamespace(corpus=None, task=SimpleNamespace(name="mysst", data_dir=str(sst2_dir)))
    key = data_identity(spec)
    monkeypatch.setitem(TASKS, "mysst", dataclasses.replace(local_sst2, label_names=("positive", "negative"),
                                                            raw_labels=("1", "0")))
    assert data_identity(spec)["task_spec_key"] != key["task_spec_key"]
    assert data_identity(spec)["task_data_key"] == key["task_data_key"]  # the files' key is the files'
    monkeypatch.setitem(TASKS, "mysst", dataclasses.replace(local_sst2, title="My SST", metrics=("f1",)))
    assert data_identity(spec) == key  # how it is named and scored is not what it trains on


def test_a_mistyped_task_data_dir_is_named_before_the_run_s_record_is_compared(sst2_dir, tmp_path):
    """A rerun with task.data_dir=/no/such/dir was refused as "another version of the run format" (its data keys
    missing), with an allow_config_change that only then led to "task directory not found": what the run trains on is
    checked first, naming the folder, or the file of it that is missing."""
    import shutil
    from types import SimpleNamespace

    from linformer.train.common import data_identity

    typo = tmp_path / "no" / "such"
    with pytest.raises(FileNotFoundError, match=rf"^task directory {typo} not found: task sst2 expects"):
        data_identity(SimpleNamespace(corpus=None, task=SimpleNamespace(name="sst2", data_dir=str(typo))))
    partial = tmp_path / "partial"
    shutil.copytree(sst2_dir, partial)
    (partial / "dev.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=rf"^{partial / 'dev.tsv'} not found: task sst2 expects"):
        data_identity(SimpleNamespace(corpus=None, task=SimpleNamespace(name="sst2", data_dir=str(partial))))


def test_a_from_scratch_run_claims_nothing_of_its_source_s_card(tmp_path, sst2_dir, pretrained_run):
    """from_scratch (Table 2's no-pretraining control) trains random weights: its best/ got the source's card,
    'converted from minilm: every weight of the source is copied', and the source's card listed its results."""
    from linformer import LinformerForMaskedLM
    from linformer.modeling.card import conversion_info, read_card_info, write_model_card

    source = tmp_path / "source"
    shutil.copytree(pretrained_run / "model", source)  # a model with a card, as a converted one has
    model = LinformerForMaskedLM.from_pretrained(source)
    write_model_card(source, conversion_info(str(pretrained_run / "model"), model, name="source"))
    _run(tmp_path, sst2_dir, source, "trainer.epochs=1", "from_scratch=true")
    card = read_card_info(tmp_path / "run" / "best")  # a card of its own (every classifier has one), none of the source's
    text = (tmp_path / "run" / "best" / "README.md").read_text()
    assert card["start"] == "random" and card["source"]["weights_sha256"] is None and "transfer" not in text.lower()
    assert "starting from random weights in the shape of" in text and "every weight of the source is copied" not in text
    assert card["finetuning"][0]["task"] == "sst2" and card["results"]["sst2"]["metrics"]
    assert not read_card_info(source).get("results")


def test_a_classifier_finetuned_from_a_model_without_a_card_gets_one_and_names_its_task(tmp_path, sst2_dir,
                                                                                        pretrained_run):
    """A finetuning from a pretraining run's model (no card: it is not a conversion) kept its best/ without a card,
    where a converted model's got one: nothing in the folder said what it scored, on which split, or from which
    weights. Its config.json's finetuning_task was None. Now its card says so, as every classifier's does."""
    from linformer.modeling.card import read_card_info
    from linformer.modeling.loading import weights_sha256

    results, run = _run(tmp_path, sst2_dir, pretrained_run / "model", "trainer.epochs=1")
    card, text = read_card_info(run / "best"), (run / "best" / "README.md").read_text()
    assert card["start"] == "weights" and card["source"]["weights_sha256"] == weights_sha256(pretrained_run / "model")
    row = card["finetuning"][0]
    assert row["task"] == "sst2" and row["start_weights_sha256"] == results["start_weights_sha256"]
    assert row["max_length"] == results["max_length"] and card["results"]["sst2"]["metrics"] == results["metrics"]
    assert card["model"]["max_seq_len"] and card["model"]["projected_dim"] and card["model"]["labels"]
    assert "## Finetuning" in text and "## Results" in text and f"up to {results['max_length']} tokens" in text
    assert json.loads((run / "best" / "config.json").read_text())["finetuning_task"] == "sst2"


def test_a_subset_of_the_reported_split_is_joined_back_to_its_rows_and_not_claimed_as_the_split_s_score(
        tmp_path, sst2_dir, pretrained_run):
    """With max_eval_examples the scored rows are a seeded draw: eval_predictions.json could not be joined back to
    the texts, and the card's model-index claimed the whole split's score."""
    from linformer import LinformerForMaskedLM
    from linformer.modeling.card import conversion_info, write_model_card

    source = tmp_path / "source"
    shutil.copytree(pretrained_run / "model", source)
    write_model_card(source, conversion_info(str(pretrained_run / "model"), LinformerForMaskedLM.from_pretrained(source),
                                             name="source"))
    results, run = _run(tmp_path, sst2_dir, source, "trainer.epochs=1", "max_eval_examples=10")
    pred = json.loads((run / "eval_predictions.json").read_text())
    lines = [line.split("\t") for line in (sst2_dir / "dev.tsv").read_text().splitlines()]
    dev = lines[1:]
    assert len(pred["rows"]) == 10 and [int(lines[i - 1][1]) for i in pred["rows"]] == pred["labels"]  # file lines
    assert results["reported"]["examples"] == 10 and results["reported"]["of"] == len(dev)
    card = (run / "best" / "README.md").read_text()
    assert "model-index" not in card and f"10 of {len(dev)} (a subset)" in card


def test_a_task_with_two_metrics_reports_both(tmp_path, pretrained_run):
    """QQP's summary gave accuracy alone: an F1 of 0 (a classifier that never says duplicate) showed only in
    results.json."""
    header = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
    rows = "".join(f"{i}\t{2 * i}\t{2 * i + 1}\tgood question {i}?\tdull question {i}?\t{i % 2}\n" for i in range(24))
    (tmp_path / "qqp").mkdir()
    (tmp_path / "qqp" / "train.tsv").write_text(header + rows)
    (tmp_path / "qqp" / "dev.tsv").write_text(header + rows.replace("question", "query"))
    cfg = compose_finetune("task=qqp", f"task.data_dir={tmp_path / 'qqp'}", f"model_path={pretrained_run}",
                           "trainer.epochs=1")
    finetune(cfg, tmp_path / "run")
    [line] = json.loads((tmp_path / "run" / "summary.json").read_text())["report"]
    assert line.startswith("accuracy ") and ", f1 " in line and "on 24 qqp dev examples" in line
    assert "scored once on the model of epoch 1 (step " in line


@pytest.mark.parametrize(("epoch", "label"), [(1.0, "1"), (40 / 63, "0.63"), (2.5, "2.50"), (0.004, "0.004"),
                                              (1.998, "1.998"), (1.99999, "1.99999")])
def test_the_summary_names_a_whole_or_a_clearly_fractional_epoch(epoch, label):
    """A max_steps run stopped inside an epoch: "epoch 0.63 (step 40)", not "epoch 0.634921"."""
    from linformer.train.finetune import epoch_label

    assert epoch_label(epoch) == label


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_model_saved_in_half_precision_is_trained_in_float32(tmp_path, sst2_dir, pretrained_run, dtype):
    """transformers loads a checkpoint in the dtype it was saved in: AdamW's small updates to bf16 weights round
    away, so finetuning a bf16-saved model moved about 1% of the encoder's weights (98% from float32)."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

    half = tmp_path / "half"
    AutoModelForMaskedLM.from_pretrained(pretrained_run / "model").to(getattr(torch, dtype)).save_pretrained(half)
    AutoTokenizer.from_pretrained(pretrained_run / "model").save_pretrained(half)
    _run(tmp_path, sst2_dir, half, "trainer.epochs=1", "trainer.lr=1e-4")
    start = AutoModelForMaskedLM.from_pretrained(half).state_dict()
    tuned = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run" / "best").state_dict()
    shared = [k for k in tuned if k in start and k.startswith("roberta.encoder")]
    assert all(tuned[k].dtype == torch.float32 for k in shared)
    moved = sum(int((tuned[k] != start[k].float()).sum()) for k in shared)
    assert moved / sum(tuned[k].numel() for k in shared) > 0.5


def test_a_task_written_only_as_yaml_finetunes_and_its_run_reads_back(tmp_path, pretrained_run, monkeypatch):
    """A task of one's own (other columns, other labels) worked only from Python, register_task in the process
    that ran it: the scripts and the readers of finished runs knew only the package's tasks. A task config's spec
    block registers it where the config is read; the run's config.yaml records it, and a report in a process that
    never saw the task config rebuilds the run's eval examples from that record."""
    from linformer.data import tasks

    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    monkeypatch.setattr(tasks, "TITLES", dict(tasks.TITLES))
    configs = tmp_path / "configs"  # one's own copy of the configs, as an installed package reads them
    shutil.copytree(REPO / "configs", configs)
    example = (configs / "task" / "_example.yaml").read_text()
    (configs / "task" / "hues.yaml").write_text(example.replace("name: colors", "name: hues")
                                                .replace("data_dir: ???", f"data_dir: {tmp_path / 'hues'}"))
    monkeypatch.setenv("LINFORMER_CONFIG_DIR", str(configs))
    colors = ("red", "green", "blue")
    (tmp_path / "hues").mkdir()
    for name, count in (("train.tsv", 48), ("dev.tsv", 12)):
        rows = [(f"a {colors[i % 3]} {colors[i % 3]} thing {name[0]}{i}", i % 3) for i in range(count)]
        (tmp_path / "hues" / name).write_text("text\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    run = tmp_path / "run"
    results = finetune(compose_finetune("task=hues", f"model_path={pretrained_run}", "trainer.epochs=1",
                                        f"task_cache_dir={tmp_path / 'cache'}"), run)
    assert results["task"] == "hues" and set(results["metrics"]) >= {"accuracy", "f1_macro"}
    from linformer.modeling.card import read_card_info

    # the text columns go with the model (predict.py reads them), wherever the task is registered or not
    assert results["text_fields"] == read_card_info(run / "best")["finetuning"][-1]["text_fields"] == ["text"]
    from omegaconf import OmegaConf

    assert OmegaConf.load(run / "config.yaml").task.spec.label_names == list(colors)
    # a report in another process: the package's tasks only, the configs its own
    monkeypatch.setattr(tasks, "TASKS", {k: v for k, v in tasks.TASKS.items() if k != "hues"})
    monkeypatch.delenv("LINFORMER_CONFIG_DIR")
    (finished,) = read_runs([str(run)], tasks=("hues",))
    tok = AutoTokenizer.from_pretrained(pretrained_run / "model")
    lengths = [len(tok(f"a {colors[i % 3]} {colors[i % 3]} thing d{i}")["input_ids"]) for i in range(12)]
    assert by_length.eval_lengths(finished).tolist() == lengths
    assert tasks.get_task("hues").label_names == colors


def test_a_task_registered_from_python_leaves_runs_the_readers_read_in_any_process(tmp_path, sst2_dir,
                                                                                  pretrained_run, monkeypatch):
    """register_task(TaskSpec(...)) then finetune(...), the guide's Python API, left a config.yaml naming the task
    without its spec: export.py and the reports said "unknown task" in any other process. The run records the spec
    as a task config's block does, so export reads it with the registration gone."""
    import dataclasses

    from omegaconf import OmegaConf

    from linformer.data import tasks
    from linformer.train.export import export_run

    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    monkeypatch.setattr(tasks, "TITLES", dict(tasks.TITLES))
    spec = tasks.register_task(dataclasses.replace(tasks.TASKS["sst2"], name="mine", hub=(), hub_fields=(),
                                                   mirror_subdir="", title="Mine"))
    results, run = _run(tmp_path, sst2_dir, pretrained_run, "task.name=mine", "trainer.max_steps=1")
    assert results["task"] == "mine"
    assert OmegaConf.load(run / "config.yaml").task.spec.title == "Mine"
    del tasks.TASKS["mine"]  # another process: export.py RUN
    exported = export_run(run, tmp_path / "exported")
    assert (tmp_path / "exported" / "model.safetensors").is_file() and exported["step"] == 1
    assert tasks.get_task("mine") == spec


def test_a_task_file_without_the_spec_s_columns_is_refused_before_the_model_loads(tmp_path, pretrained_run,
                                                                                   monkeypatch):
    """A wrong column or a header-only file was found after the model had loaded (about 30 s for MiniLM on a loaded
    machine): the task's files' headers are read first."""
    from linformer.train import finetune as finetune_module

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the task's files were checked")

    monkeypatch.setattr(finetune_module, "load_classifier", no_model)
    data = write_sst2_fixture(tmp_path / "data", train=8, dev=2)
    (data / "dev.tsv").write_text("sentence\tlabel\n")
    with pytest.raises(DataError, match=rf"^{data}/dev.tsv: header only, no rows; expected "):
        _run(tmp_path, data, pretrained_run, "trainer.max_steps=1")


def _tiny_classifier(path, tokenizer_dir, n: int):
    """A tiny Linformer classifier of n tokens saved with the tokenizer of `tokenizer_dir` (capped at n)."""
    from linformer import LinformerConfig, LinformerForSequenceClassification

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LinformerConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             intermediate_size=64, max_seq_len=n, projected_dim=4, pad_token_id=tok.pad_token_id)
    LinformerForSequenceClassification(config).save_pretrained(path)
    tok.model_max_length = n
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("n", [12, 13])
def test_a_model_whose_n_is_not_a_multiple_of_8_is_finetuned_batches_never_padded_past_n(tmp_path, sst2_dir,
                                                                                         pretrained_run, n):
    """Rows cut to n were padded to the next multiple of 8, past n, and the Linformer refused the batch."""
    model = _tiny_classifier(tmp_path / "model", pretrained_run / "model", n)
    results, run = _run(tmp_path, sst2_dir, model, "trainer.max_steps=2")
    assert results["max_length"] == n and (run / "best" / "model.safetensors").is_file()
    from linformer.data.streams import TaskCollator

    collate = TaskCollator(AutoTokenizer.from_pretrained(model), n)
    rows = [{"input_ids": [5] * length, "attention_mask": [1] * length, "labels": 0} for length in (n, 3)]
    assert collate(rows)["input_ids"].shape == (2, n)  # the longest row reaches n: not one token more
    assert collate(rows[1:])["input_ids"].shape == (1, 8)  # below n: a multiple of 8 still


@pytest.mark.parametrize("length_policy", ["resample", "slice"])
def test_task_batches_pad_to_a_few_bucketed_lengths_and_score_as_padded_to_their_longest(tiny_data, length_policy):
    """Batches padded to each multiple of 8 up to max_length (128 lengths at 1024) kept a finetune's memory climbing
    (glibc holding the freed tensors of each new shape); lengths now step by 1/8 of their power of two, a few dozen
    in all, and the padding added is masked: the logits are those of the batch padded to its longest row."""
    from linformer import LinformerConfig, LinformerForSequenceClassification
    from linformer.data.streams import TaskCollator, bucketed_length

    assert len({bucketed_length(longest, 1024) for longest in range(1, 1025)}) == 40
    assert [bucketed_length(t, 1024) for t in (3, 60, 150, 600, 1000)] == [8, 64, 160, 640, 1024]
    assert bucketed_length(150, 155) == 155  # never past max_length
    tok = AutoTokenizer.from_pretrained(tiny_data["tokenizer_dir"])
    torch.manual_seed(0)
    config = LinformerConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=64, max_seq_len=256, projected_dim=16, pad_token_id=tok.pad_token_id,
                             length_policy=length_policy, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = LinformerForSequenceClassification(config).eval()
    rows = [{"input_ids": torch.randint(5, len(tok), (length,)).tolist(), "attention_mask": [1] * length,
             "labels": 0} for length in (150, 40, 97)]
    batch = TaskCollator(tok, 256)(rows)
    assert batch["input_ids"].shape == (3, 160)  # was 152, the next multiple of 8
    longest = {k: v[:, :150] for k, v in batch.items() if v.dim() == 2}
    with torch.no_grad():
        torch.testing.assert_close(model(**{k: v for k, v in batch.items() if k != "labels"}).logits,
                                   model(**longest).logits, atol=1e-5, rtol=1e-5)


def _tiny_bert_pair_classifier(path, pairs: dict):
    """A tiny BERT classifier (two segment rows, the second far from the first) and its WordPiece tokenizer, which
    gives a pair's second text segment id 1; its bias splits `pairs` (read with their segment ids) into both labels."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    words = ["good", "bad", "fine", "dull", "question", "answer", "film", "is", "what", "?", "."]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])},
                        model_max_length=40)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        initializer_range=0.5))  # logits far apart: one small step moves no prediction across
    with torch.no_grad():
        model.bert.embeddings.token_type_embeddings.weight[1].normal_(0, 2.0)
        logits = model.eval()(**tok(pairs["question"], pairs["sentence"], padding=True, return_tensors="pt")).logits
        model.classifier.bias[1] -= (logits[:, 1] - logits[:, 0]).median()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_a_pair_task_on_a_bert_model_scores_what_the_saved_model_gives_through_its_tokenizer(tmp_path):
    """QNLI/QQP on a BERT-family model: the segment ids were dropped in training and scoring, so the saved model run
    on model(**tokenizer(a, b)) (as pipelines run it) predicted otherwise than the run reported."""
    from transformers import AutoModelForSequenceClassification

    from linformer.data.task_readers import read_task_split

    header = "index\tquestion\tsentence\tlabel\n"
    pick = ["good", "bad", "fine", "dull", "film", "answer"]
    rows = "".join(f"{i}\twhat {pick[i % 6]} question {pick[i % 5]} ?\t{pick[(i * 7) % 6]} film is "
                   f"{pick[(i * 5) % 6]} {pick[i % 4]} .\t{'entailment' if i % 3 else 'not_entailment'}\n"
                   for i in range(60))
    (tmp_path / "qnli").mkdir()
    (tmp_path / "qnli" / "train.tsv").write_text(header + rows)
    (tmp_path / "qnli" / "dev.tsv").write_text(header + rows.replace("question", "answer"))
    pairs = read_task_split("qnli", str(tmp_path / "qnli"), "eval")[0]
    source = _tiny_bert_pair_classifier(tmp_path / "bert", pairs)
    cfg = compose_finetune("task=qnli", f"task.data_dir={tmp_path / 'qnli'}", f"model_path={source}",
                           "trainer.max_steps=1", "trainer.lr=1e-5", f"task_cache_dir={tmp_path / 'cache'}")
    finetune(cfg, tmp_path / "run")
    predictions = json.loads((tmp_path / "run" / "eval_predictions.json").read_text())["predictions"]
    saved = tmp_path / "run" / "best"
    tok = AutoTokenizer.from_pretrained(saved)
    model = AutoModelForSequenceClassification.from_pretrained(saved).eval()
    inputs = tok(pairs["question"], pairs["sentence"], padding=True, return_tensors="pt")
    assert inputs["token_type_ids"].any()  # the pairs' second texts are segment 1
    assert 0 < sum(predictions) < len(predictions)
    with torch.no_grad():
        assert model(**inputs).logits.argmax(-1).tolist() == predictions


def test_non_finite_logits_are_no_score_and_a_run_reporting_them_fails(tmp_path, sst2_dir, pretrained_run,
                                                                        monkeypatch):
    """A model whose logits are NaN scored class 0 for every example (argmax of NaN): its "accuracy" was class 0's
    share, the run ended complete and kept the model in best/. The reported split's scoring now says how many
    examples gave non-finite logits, and the run fails (TrainingDiverged, recorded), keeping no best/ and writing
    no results.json."""
    from linformer.modeling import LinformerForSequenceClassification

    forward = LinformerForSequenceClassification.forward

    def nan_when_evaluated(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        if not self.training:
            out.logits = out.logits * float("nan")
        return out

    monkeypatch.setattr(LinformerForSequenceClassification, "forward", nan_when_evaluated)
    with pytest.raises(TrainingDiverged, match=r"^40 of the 40 dev examples the run reports gave non-finite logits "
                                                r"on the model of step \d+: the run keeps no model"):
        _run(tmp_path, sst2_dir, pretrained_run)
    run = tmp_path / "run"
    assert not (run / "best").exists() and not (run / "results.json").exists()
    assert json.loads((run / "run.json").read_text())["status"] == "failed"


def test_a_validation_score_of_non_finite_logits_is_never_chosen(tmp_path, sst2_dir, pretrained_run, monkeypatch):
    """Validation evaluations after epochs 1 and 2, the second of non-finite logits: it is NaN, counted, never best,
    and the run reports the model of epoch 1 with a line saying the training diverged after it."""
    from linformer.train.finetune import FinetuneTask

    score, calls = FinetuneTask.score, []

    def second_validation_nan(self, model, acc, split):
        calls.append(split)
        if split == "validation" and calls.count("validation") == 2:
            bias = acc.unwrap_model(model).classifier.out_proj.bias.data
            kept = bias.clone()
            bias.fill_(float("nan"))  # the model of epoch 2 gives NaN logits
            scores = score(self, model, acc, split)
            bias.copy_(kept)
            return scores
        return score(self, model, acc, split)

    monkeypatch.setattr(FinetuneTask, "score", second_validation_nan)
    results, run = _run(tmp_path, sst2_dir, pretrained_run, "validation_fraction=0.2")
    evals = results["history"]
    assert math.isnan(evals[-1]["accuracy"]) and evals[-1]["nonfinite_outputs"] > 0
    assert results["best_step"] == evals[0]["step"] < evals[-1]["step"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["report"][-1] == (f"the last evaluation (step {evals[-1]['step']}) scored val_accuracy nan: the "
                                     f"training diverged after the chosen step {evals[0]['step']}, whose model the "
                                     "run keeps and reports")


def _wordpiece(folder):
    """A BERT-layout WordPiece tokenizer: a pair is [CLS] a [SEP] b [SEP], 3 special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"])}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    return PreTrainedTokenizerFast(tokenizer_object=wp, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


def _length_of(tokenizer, task, requested=None, task_max=None, n=32):
    """FinetuneTask._max_length for a model of n tokens read by `tokenizer`, on `task`."""
    from types import SimpleNamespace

    from linformer.data import get_task
    from linformer.train.finetune import FinetuneTask

    task = SimpleNamespace(config=SimpleNamespace(max_seq_len=n), tokenizer=tokenizer, model_path="/m",
                           task_spec=get_task(task))
    return FinetuneTask._max_length(task, requested, task_max)


def test_a_pair_s_least_length_is_what_the_model_s_tokenizer_adds(tiny_data, tmp_path):
    """The least length of a pair was RoBERTa's 6 for every tokenizer, so trainer.max_length=5 was refused for a BERT
    model whose [CLS] a [SEP] b [SEP] fits it. The config's early check takes the least any tokenizer needs (5);
    once the model's tokenizer is loaded, what it adds (num_special_tokens_to_add) decides, naming the key."""
    roberta = AutoTokenizer.from_pretrained(tiny_data["tokenizer_dir"])
    bert = _wordpiece(tmp_path)
    assert bert.num_special_tokens_to_add(pair=True) == 3 and roberta.num_special_tokens_to_add(pair=True) == 4
    assert _length_of(bert, "qnli", requested=5) == 5
    with pytest.raises(ConfigError, match=r"^trainer.max_length=5: an example of qnli needs room for the 4 special "
                                          r"tokens its tokenizer \(/m\) adds and at least one token of each text "
                                          r"\(6 tokens at least\)$"):
        _length_of(roberta, "qnli", requested=5)
    with pytest.raises(ConfigError, match=r"^task.max_length=5: .*\(6 tokens at least\)$"):
        _length_of(roberta, "qnli", task_max=5)
    assert _length_of(roberta, "sst2", requested=3) == 3 and _length_of(roberta, "qnli", requested=6) == 6


def test_a_task_max_length_above_the_model_s_n_is_said_where_the_command_line_asks_for_it(tiny_data, caplog):
    """task.max_length above the model's n was cut to n without a word: a length the command line asks for is said
    once (logfile.fewer_than_asked's wording); the task config's default (512, above most small models' n) only in
    the log file."""
    import logging

    from hydra.core.hydra_config import HydraConfig

    tokenizer = AutoTokenizer.from_pretrained(tiny_data["tokenizer_dir"])
    caplog.set_level(logging.INFO, "linformer.train.finetune")
    assert _length_of(tokenizer, "sst2", task_max=512) == 32
    assert [r.levelname for r in caplog.records] == ["INFO"]
    caplog.clear()
    from linformer.configs import compose

    HydraConfig.instance().set_config(compose("finetune", ["task=sst2", "model_path=m", "task.max_length=64"],
                                              with_hydra=True))
    try:
        assert _length_of(tokenizer, "sst2", task_max=64) == 32
        assert _length_of(tokenizer, "sst2", task_max=16) == 16  # below n: read as asked, nothing said
    finally:
        HydraConfig.instance().cfg = None
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "task.max_length=64: the model /m holds 32 positions; reading examples up to those 32")]


def test_a_finetuning_run_s_tracker_tags_and_config_name_its_start_model_s_architecture_as_pretraining_does(
        sst2_dir, pretrained_run, tmp_path):
    """A finetune of a full-attention model was tagged projected_dim=32, sharing=headwise (LinformerConfig's defaults,
    which it does not use), a Linformer's projected_dim=8 where pretraining tags k=8; its W&B config and TensorBoard
    hparams held no architecture and no start weights, only model_path's string."""
    from linformer.modeling import LinformerConfig, LinformerForMaskedLM
    from linformer.runconfig import FinetuneSpec
    from linformer.train.common import tracker_config
    from linformer.train.finetune import FinetuneTask

    full = LinformerConfig.from_pretrained(pretrained_run / "model")
    full.attention = "full"
    LinformerForMaskedLM(full).save_pretrained(tmp_path / "full")
    AutoTokenizer.from_pretrained(pretrained_run / "model").save_pretrained(tmp_path / "full")
    linformer = {"attention": "linformer", "k": 8, "sharing": "headwise"}
    for path, arch in ((pretrained_run, linformer), (tmp_path / "full", {"attention": "full"})):
        spec = FinetuneSpec.read(compose_finetune("task=sst2", f"task.data_dir={sst2_dir}", f"model_path={path}"))
        task = FinetuneTask(spec, spec.trainer, 1, 0)
        assert task.tracker_tags == ["task=sst2", *(f"{k}={v}" for k, v in arch.items())]
        config = tracker_config({"model_path": str(path)}, task.tracker_config)
        assert config == {"model_path": str(path), **arch, "start_weights_sha256": task.start_weights_sha256}
        assert len(task.start_weights_sha256) == 64


def test_a_label_no_training_row_has_is_named_in_a_warning(caplog):
    """task=_example run on two-label files keeps its three labels unless told: the third class is never trained,
    which the run must say (one warning naming the label and the keys to set); over a subset of the files the
    label may be in the rows left out, and the warning says that instead of blaming the spec; a task whose rows
    cover every label says nothing."""
    import datasets

    from linformer.data.tasks import TaskSpec
    from linformer.train.finetune import warn_unseen_labels

    spec = TaskSpec("colors", ("text",), "label", ("red", "green", "blue"), ("0", "1", "2"))
    binary = datasets.Dataset.from_dict({"labels": [0, 1, 1, 0]})
    with caplog.at_level("WARNING"):
        assert warn_unseen_labels(spec, binary, "/data/rte", of=4) == ["'blue' (written '2')"]
    assert "'blue' (written '2') is in none of the 4 training rows (of /data/rte)" in caplog.text
    assert "task.spec.label_names" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        warn_unseen_labels(spec, binary, "/data/rte", of=300)
    assert "in none of the 4 training rows this run keeps of the 300 in /data/rte" in caplog.text
    assert "task.spec.label_names" not in caplog.text and "another subset_seed" in caplog.text
    caplog.clear()
    assert warn_unseen_labels(spec, datasets.Dataset.from_dict({"labels": [0, 1, 2]}), "/d") == []
    assert caplog.text == ""


def test_every_run_checks_its_training_rows_labels_from_the_cache_too(tmp_path, sst2_dir, pretrained_run,
                                                                     monkeypatch):
    """The check runs on the rows the run trains on, with the count they were drawn from, in a run that tokenizes
    its splits and in one that reads them from the cache."""
    from linformer.train import finetune as finetune_module

    seen = []
    real = finetune_module.warn_unseen_labels
    monkeypatch.setattr(finetune_module, "warn_unseen_labels",
                        lambda spec, train, data_dir, of=None: seen.append((len(train), of)) or real(spec, train,
                                                                                                     data_dir, of))
    for name in ("first", "cached"):
        _run(tmp_path / name, sst2_dir, pretrained_run, "max_train_examples=36", "validation_fraction=null",
             f"task_cache_dir={tmp_path / 'task_cache'}", "trainer.max_steps=1")
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0][0] == 36 and seen[0][1] > 36


def test_a_run_begun_by_a_version_that_counted_padding_continues_only_when_the_token_count_change_is_allowed(
        tmp_path, sst2_dir, pretrained_run):
    """A finetuning run begun by a version that counted its batches' padding in `tokens` (its run.json's attempts
    record no start_step) and resumed here went on counting real tokens: metrics.jsonl's tokens, the summary's tokens
    and tokens/s mixed two quantities without a word. The resume is refused, naming the allowance; allowed, run.json
    records the change at the step resumed from."""
    from linformer.errors import ConfigError

    first, run = _run(tmp_path, sst2_dir, pretrained_run, "trainer.epochs=1")
    info = json.loads((run / "run.json").read_text())
    older = {k: v for k, v in info.items() if k not in ("start_step", "processes", "environment", "command")}
    (run / "run.json").write_text(json.dumps(older))
    rows = (run / "metrics.jsonl").read_text()
    with pytest.raises(ConfigError, match=rf"begun by an earlier version, which counted the padding .*steps "
                                          rf"1-{first['steps']}\).*trainer.allow_config_change=\[token_count\]"):
        _run(tmp_path, sst2_dir, pretrained_run, "trainer.epochs=2", "trainer.allow_config_change=[trainer.epochs]")
    assert (run / "metrics.jsonl").read_text() == rows and json.loads((run / "run.json").read_text()) == older
    further, _ = _run(tmp_path, sst2_dir, pretrained_run, "trainer.epochs=2",
                      "trainer.allow_config_change=[trainer.epochs,token_count]")
    changes = json.loads((run / "run.json").read_text())["changes"]
    assert {"step": first["steps"], "key": "token_count", "from": "padded", "to": "real"} in changes
    assert further["steps"] == 2 * first["steps"]


def test_the_short_last_step_warning_says_what_each_process_count_really_trains_and_advises_reachable_settings():
    """One process: the last step is the few examples left, and a step of examples that divides the set is named as
    trainer.batch_size x trainer.grad_accum. N processes: the last global micro-batch is filled with rows from the
    start of the epoch's order (EpochOrder.rows), so the step trains on whole micro-batches, the filling rows twice
    (81 on 2 x 8: 1 new and 15 again, docs/guide.md); a divisor is offered only when it is a multiple of the
    processes (81 has none on 2: "a step that divides 81, e.g. 3" was unreachable)."""
    from linformer.data.streams import EpochOrder
    from linformer.train.finetune import short_last_step

    one = short_last_step(81, 8, 1, 1, True)
    assert one.startswith("each epoch's last step trains on 1 example of 81 (10 steps of 8 = trainer.batch_size 8 x "
                          "trainer.grad_accum 1, then the 1 left): a full update")
    assert one.endswith("or a trainer.batch_size x trainer.grad_accum of 3, which divides 81")
    # what the order trains in an epoch's last micro-batch on 2 processes of 8: 1 new row and 15 repeated
    order = EpochOrder(81, 16, seed=0, drop_last=False, world=2)
    last = order.rows(order.batches_per_epoch - 1)
    repeated = len(last) - len(set(last.tolist()) - set(torch.cat([order.rows(g) for g in range(5)]).tolist()))
    two = short_last_step(81, 8, 1, 2, True)
    assert (len(last), repeated) == (16, 15)
    assert (f"trains on the 1 example of 81 not yet trained (5 steps of 16 = trainer.batch_size 8 x trainer.grad_accum"
            f" 1 x 2 processes, then the 1 left) and {repeated} from the start of the epoch's order") in two
    assert f"an update at the scheduled lr from those {len(last)} rows right before" in two
    assert two.endswith("(80 or 96 examples: max_train_examples, less what validation_fraction holds out)")
    assert "212 from the start" in short_last_step(300, 32, 1, 8, True)
    # 66 on 2 x 16: a step of 6 (3 per process) divides it, and 2 processes reach it
    assert short_last_step(66, 16, 1, 2, False).endswith("or a trainer.batch_size x trainer.grad_accum of 3 (6 on 2 "
                                                        "processes), which divides 66")
    # accum 4 on 2 processes: 2 examples left fill one micro-batch of 16, not a whole step of 64
    assert "2 examples of 130 not yet trained" in short_last_step(130, 8, 4, 2, False)
    assert "those 16 rows" in short_last_step(130, 8, 4, 2, False)


def test_an_epoch_whose_last_step_takes_a_few_examples_is_warned_of_naming_the_settings(sst2_dir, pretrained_run,
                                                                                         caplog):
    """An epoch's last step takes what is left (step_batches): 193 examples at 16 x 2 end each epoch with a full
    update from one example, just before the evaluation that chooses best/. The start-up warns, naming the remainder
    and the settings that avoid it (193 is prime: no batch divides it, so none is offered); 192 examples (a multiple
    of the step) are not warned of."""
    from linformer.runconfig import FinetuneSpec
    from linformer.train.finetune import FinetuneTask

    for examples in (193, 192):
        caplog.clear()
        spec = FinetuneSpec.read(compose_finetune("task=sst2", f"task.data_dir={sst2_dir}",
                                                  f"model_path={pretrained_run}", "trainer.grad_accum=2",
                                                  f"max_train_examples={examples}"))
        with caplog.at_level(logging.WARNING, "linformer.train.finetune"):
            task = FinetuneTask(spec, spec.trainer, 1, 0)
        assert len(task.train_set) == examples
        warned = [r.getMessage() for r in caplog.records if "last step" in r.getMessage()]
        if examples == 193:
            assert warned == [(
                "each epoch's last step trains on 1 example of 193 (6 steps of 32 = trainer.batch_size 16 x "
                "trainer.grad_accum 2, then the 1 left): a full update at the scheduled lr from those alone, every "
                "epoch. To avoid it give a training set that divides by 32 (192 or 224 examples: max_train_examples, "
                "less what validation_fraction holds out)")]
        else:
            assert warned == []
