"""Model loading for finetuning: path resolution, the errors a user can fix, and the quiet load report."""

import logging
from pathlib import Path

import pytest

from linformer import LinformerForMaskedLM
from linformer.errors import CheckpointError, HubOfflineError, RunDirError
from linformer.modeling.loading import load_classifier, max_tokens, resolve_model_path

from .conftest import tiny_config


@pytest.fixture
def mlm_dir(tmp_path):
    LinformerForMaskedLM(tiny_config()).save_pretrained(tmp_path / "run" / "model")
    return tmp_path / "run"


def test_run_directory_resolves_to_its_model(mlm_dir):
    assert resolve_model_path(str(mlm_dir)) == str(mlm_dir / "model")
    assert resolve_model_path(str(mlm_dir / "model")) == str(mlm_dir / "model")


def _counting_hashes(monkeypatch) -> dict:
    """Patches loading's sha256_file (and the checksum check's) to count the reads of each file, by path."""
    from linformer.files import hashing
    from linformer.modeling import loading

    real, reads = hashing.sha256_file, {}

    def counting(path, *args, **kwargs):
        reads[Path(path)] = reads.get(Path(path), 0) + 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(hashing, "sha256_file", counting)
    monkeypatch.setattr(loading, "sha256_file", counting)
    return reads


def test_a_model_folder_s_weights_are_read_once_a_command(tmp_path, monkeypatch):
    """The start check hashes the weights against the folder's manifest; the run's record hashes them again
    (weights_sha256), and a command resolves its folder more than once: each of those read every weight file (0.5 s
    a GB). The checked path carries its digests on, and is resolved again as it is; a path given afresh is checked
    afresh, so a same-size rewrite is never taken for the weights checked before."""
    from linformer.modeling.loading import weights_sha256
    from linformer.modeling.saving import model_folder

    with model_folder(tmp_path / "model") as tmp:
        LinformerForMaskedLM(tiny_config()).save_pretrained(tmp)
    reads = _counting_hashes(monkeypatch)
    path = resolve_model_path(str(tmp_path / "model"))
    assert resolve_model_path(path) is path and weights_sha256(path) == weights_sha256(str(path)) is not None
    weights = tmp_path / "model" / "model.safetensors"
    assert reads == {weights: 2}  # the check, and the plain path's hash the test asked for
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # same size, other content
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model.safetensors: content differs from what was written"):
        resolve_model_path(str(tmp_path / "model"))


def test_hub_name_offline_says_to_give_a_local_directory(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(HubOfflineError, match="not-a-cached-model.*local directory"):
        resolve_model_path("not-a-cached-model")


@pytest.mark.parametrize("name", ["", "./nowhere", "a/b/c"])
def test_path_without_a_model_is_a_checkpoint_error(tmp_path, name):
    with pytest.raises(CheckpointError, match="model_path"):
        resolve_model_path(name)
    with pytest.raises(CheckpointError, match="holds no model"):
        resolve_model_path(str(tmp_path))  # exists, but no config.json


def test_a_finetuning_run_directory_points_to_its_best_model(tmp_path):
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match=rf"is a finetuning run directory, not a model: give {tmp_path}/best "):
        resolve_model_path(str(tmp_path))


def test_a_run_stopped_before_its_model_points_to_export(tmp_path):
    (tmp_path / "checkpoints" / "step-00000004").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-00000004" / "trainer_state.json").write_text("{}")  # written last: complete
    (tmp_path / "config.yaml").write_text("seed: 0\n")
    with pytest.raises(CheckpointError, match=rf"is a run that has not saved its model/ .* python scripts/export.py "
                                              rf"{tmp_path}\.$"):
        resolve_model_path(str(tmp_path))


def test_a_damaged_run_json_of_a_run_given_as_model_path_is_one_line_naming_it(tmp_path):
    """The loaders read a run's record as rundir does: a run.json that does not read is refused, not taken for none."""
    (tmp_path / "run.json").write_text('{"stage": "finetune"')
    with pytest.raises(RunDirError, match=rf"{tmp_path}/run.json cannot be read"):
        resolve_model_path(str(tmp_path))


@pytest.mark.parametrize("online", [False, True])
@pytest.mark.parametrize("name", ["a b", "a--b", "x" * 97, "-a"])
def test_a_name_that_is_neither_a_folder_nor_a_hub_id_is_a_checkpoint_error(monkeypatch, online, name):
    """huggingface_hub refused these with a traceback wherever the name was first read (the teacher's load)."""
    from linformer.modeling.loading import resolve_tokenizer_dir

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", not online)
    with pytest.raises(CheckpointError, match=r"^teacher_path=.* is neither a folder here nor a hub name \(") as err:
        resolve_model_path(name, key="teacher_path")
    assert "user/model" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(CheckpointError, match=r"^tokenizer_dir=.* is neither a folder here nor a hub name"):
        resolve_tokenizer_dir(name)


def test_missing_weights_is_a_checkpoint_error(mlm_dir):
    (mlm_dir / "model" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="could not be loaded"):
        load_classifier(str(mlm_dir / "model"), label_names=["no", "yes"], from_scratch=False)


def test_a_truncated_weights_file_is_a_checkpoint_error(mlm_dir):
    """A copy cut short (an interrupted download): safetensors' own error becomes one CheckpointError line."""
    weights = mlm_dir / "model" / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    with pytest.raises(CheckpointError, match=r"model_path=.*: its weights cannot be read, the file is damaged"):
        load_classifier(str(mlm_dir / "model"), label_names=["no", "yes"], from_scratch=False)


def test_load_report_becomes_one_info_line(mlm_dir, caplog):
    caplog.set_level(logging.DEBUG)
    model, config = load_classifier(str(mlm_dir / "model"), label_names=["a", "b", "c"], from_scratch=False)
    assert config.num_labels == 3 and model.classifier.out_proj.out_features == 3
    assert config.id2label == {0: "a", 1: "b", 2: "c"} and config.label2id == {"a": 0, "b": 1, "c": 2}
    assert not any("LOAD REPORT" in r.getMessage() for r in caplog.records)
    (summary,) = [r for r in caplog.records if r.levelno == logging.INFO and r.name.endswith("loading")]
    assert "4 weights initialised fresh (classifier.dense, classifier.out_proj)" in summary.getMessage()


@pytest.mark.parametrize("log_file", [True, False])
def test_a_log_file_gets_no_loading_weights_bar(mlm_dir, monkeypatch, capfd, log_file):
    """transformers draws its "Loading weights" bar on stderr; where stderr is a log file its redraws would run into
    the file, and the load's one-line summary says the same: the bar is off there, on a terminal as before."""
    from transformers.utils import logging as hf_logging

    from linformer.data import io

    monkeypatch.setattr(io, "progress_to_log_file", lambda: log_file)
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.enable_progress_bar()
    try:
        load_classifier(str(mlm_dir / "model"), label_names=["a", "b"], from_scratch=False)
        assert hf_logging.is_progress_bar_enabled()  # as it was after the load
    finally:
        if not was:
            hf_logging.disable_progress_bar()
    err = capfd.readouterr().err
    assert ("Loading weights" in err) is (not log_file)
    if log_file:
        assert "\r" not in err


@pytest.mark.parametrize("damage, said", [
    ('{"model_type": "linf', r"model_path='.*': .*/config\.json cannot be read by transformers \(.+\): copy it again"),
    ("[1, 2]", r"model_path='.*': .*/config\.json cannot be read by transformers"),
    ({"sharing": "foo"}, r"^.*/config\.json: sharing='foo' is not one of")])
def test_a_damaged_config_json_is_named_as_itself_before_the_tokenizer_reads_it(mlm_dir, caplog, damage, said):
    """A config.json cut short was reported as a damaged tokenizer (the tokenizer's loading reads it first), with
    advice to train the tokenizer again; a field out of range came after transformers' warning of a model of type
    ``. The model folder's config.json is read when the folder is resolved, its error naming the file."""
    import json

    config = mlm_dir / "model" / "config.json"
    text = json.dumps({**json.loads(config.read_text()), **damage}) if isinstance(damage, dict) else damage
    config.write_text(text)
    with pytest.raises(CheckpointError, match=said):
        resolve_model_path(str(mlm_dir))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_weights_of_another_shape_are_one_line_with_the_report_s_gist(mlm_dir, capsys, caplog):
    """transformers' 20-line LOAD REPORT table followed the error line."""
    import json

    config = mlm_dir / "model" / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "intermediate_size": 48}))
    with pytest.raises(CheckpointError) as err:
        load_classifier(str(mlm_dir / "model"), label_names=["no", "yes"], from_scratch=False)
    line = str(err.value)
    assert "\n" not in line and "LOAD REPORT" not in line
    assert "its weights do not have the shapes its config.json gives (" in line
    assert "intermediate.dense.weight: checkpoint [" in line and "], model [48, " in line
    assert "LOAD REPORT" not in capsys.readouterr().err + caplog.text


def test_a_config_json_of_another_model_type_over_the_weights_is_refused_not_trained_fresh(mlm_dir, caplog):
    """model_type=bert over a Linformer's weights loaded every encoder weight fresh after one INFO line, and the run
    trained from random weights under the folder's name."""
    import json

    config = mlm_dir / "model" / "config.json"
    bert = {**json.loads(config.read_text()), "model_type": "bert", "architectures": ["BertForMaskedLM"]}
    config.write_text(json.dumps(bert))
    with pytest.raises(CheckpointError, match=r"model_path='.*': \d+ of the \d+ weights of its "
                                              r"BertForSequenceClassification would start fresh \(bert\..* not in its "
                                              r"weights; the checkpoint holds .* instead\): its config.json "
                                              r"\(model_type='bert'\) describes another model than its weights"):
        load_classifier(str(mlm_dir / "model"), label_names=["no", "yes"], from_scratch=False)
    assert "initialised fresh" not in caplog.text  # the refusal is the one line


@pytest.mark.parametrize("layers", [1, 3], ids=["fewer-layers", "more-layers"])
def test_a_config_json_that_does_not_describe_its_weights_is_refused_not_trained(mlm_dir, caplog, layers):
    """A config.json giving a layer fewer than the weights beside it loaded with the last layer dropped, one giving a
    layer more with that layer at random (a third of the encoder: under the "most weights fresh" refusal), and
    finetuning trained either under the folder's name. The conversion's check (check_weights_described), one line."""
    import json

    from transformers import AutoModelForMaskedLM

    from linformer.modeling.loading import load_pretrained

    config = mlm_dir / "model" / "config.json"  # the weights hold 2 layers
    config.write_text(json.dumps({**json.loads(config.read_text()), "num_hidden_layers": layers}))
    said = (f"{config} does not describe the weights beside it (it gives num_hidden_layers={layers}, the weights "
            "hold 2 layers): give the folder the config.json its weights were saved with.")
    with pytest.raises(CheckpointError) as err:
        load_classifier(str(mlm_dir / "model"), label_names=["no", "yes"], from_scratch=False)
    assert str(err.value) == said
    with pytest.raises(CheckpointError) as err:  # read under full attention (the spectrum report): the same
        load_pretrained(AutoModelForMaskedLM, str(mlm_dir / "model"), attention="full")
    assert str(err.value) == said
    assert "initialised fresh" not in caplog.text  # the refusal is the one line


def test_what_starts_fresh_or_stays_behind_by_design_still_loads(mlm_dir):
    """A classifier's pooler and head start fresh, the MLM head stays behind, E and F are left unread under full
    attention, and weights without E and F give them their fresh start: none of it is a config.json that does not
    describe its weights."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForMaskedLM

    from linformer.modeling.loading import load_pretrained

    model = str(mlm_dir / "model")
    assert load_pretrained(AutoModelForMaskedLM, model, attention="full").config.attention == "full"
    weights = mlm_dir / "model" / "model.safetensors"
    kept = {k: v for k, v in load_file(weights).items() if k.rsplit(".", 2)[-2] not in ("E", "F")}
    save_file(kept, weights, metadata={"format": "pt"})
    classifier, _ = load_classifier(model, label_names=["no", "yes"], from_scratch=False)
    assert classifier.roberta.encoder.layer[1].attention.self.E is not None


def test_max_tokens_is_n_capped_by_requests(mlm_dir):
    config = tiny_config()  # n = 16

    class Tok:
        model_max_length = 10**30  # "no limit", as tokenizers without one report

    assert max_tokens(config, Tok, None, None) == 16
    assert max_tokens(config, Tok, 12, 14) == 12
    Tok.model_max_length = 8
    assert max_tokens(config, Tok, None, None) == 8


def test_a_hub_that_cannot_be_reached_is_one_error_not_a_traceback(monkeypatch):
    """Without HF_HUB_OFFLINE on a machine without network, the hub's retries ended in an OSError traceback (the
    tokenizer) or a ConnectionError (a task's hub dataset); and outputs/typo, whose folder outputs/ is here, was
    taken for the hub user 'outputs'."""
    import datasets
    import transformers

    from linformer.data import io, task_readers
    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError, HubOfflineError
    from linformer.modeling.loading import resolve_model_path

    def unreachable(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", unreachable)
    with pytest.raises(HubOfflineError, match=r"^model_path='user/model' is not a folder here, and its tokenizer "
                                              r"could not be read from the hub \(We couldn't connect"):
        load_tokenizer("user/model", "model_path")
    monkeypatch.setattr(io, "hub_offline", lambda: False)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("no route")))
    with pytest.raises(HubOfflineError, match=r"hub dataset 'glue/sst2' could not be loaded \(ConnectionError: no "
                                              r"route\): check the name and the network, or set task.data_dir to "
                                              r"local files of task sst2"):
        task_readers.read_task_split("sst2", None, "train")
    with pytest.raises(CheckpointError, match=r"^model_path='outputs/no-such-run-here' .* holds no model"):
        resolve_model_path("outputs/no-such-run-here")


class _Payload:
    """A pickle that runs code when unpickled (torch's weights-only loader refuses it)."""

    def __reduce__(self):
        return (print, ("payload ran",))


@pytest.mark.parametrize("content", ["code", "garbage"])
def test_a_pickled_weights_file_that_is_not_weights_is_refused_in_one_line(tmp_path, content, capsys):
    """A folder whose pytorch_model.bin builds objects (code) came out as torch's traceback, ending in its advice to
    load the file with weights_only=False, which would run the code: one line naming the file, never that advice."""
    import torch
    from transformers import AutoModelForMaskedLM

    from linformer.modeling.loading import load_pretrained

    LinformerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    if content == "code":
        torch.save({"x": _Payload()}, tmp_path / "pytorch_model.bin")
    else:
        (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x02not a pickle of tensors")
    with pytest.raises(CheckpointError) as err:
        load_pretrained(AutoModelForMaskedLM, str(tmp_path))
    said = str(err.value)
    why = "holds more than weights (pickled objects" if content == "code" else "cannot be read as weights (damaged"
    assert said.startswith(f"model_path='{tmp_path}': {tmp_path / 'pytorch_model.bin'} {why}")
    assert "weights_only" not in said and "\n" not in said
    assert "payload ran" not in capsys.readouterr().out


@pytest.mark.parametrize("key", ["init_from", "teacher_path", "student_path", "model_dir"])
def test_a_refused_weights_file_is_named_by_the_key_that_gave_it(tmp_path, key, capsys):
    """Every refusal began "model_path=" whatever gave the folder (pretrain's init_from, distill's teacher_path and
    student_path, predict's model_dir): a distill user could not tell from the key which of the two was refused."""
    import torch
    from transformers import AutoModelForMaskedLM

    from linformer.modeling.loading import load_classifier, load_pretrained

    LinformerForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    torch.save({"x": _Payload()}, tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as err:
        if key == "student_path":  # distill's student is a classifier on its labels
            load_classifier(str(tmp_path), ("negative", "positive"), False, "sst2", key=key)
        else:
            load_pretrained(AutoModelForMaskedLM, str(tmp_path), key)
    assert str(err.value).startswith(f"{key}='{tmp_path}': {tmp_path / 'pytorch_model.bin'} holds more than weights")
    assert "payload ran" not in capsys.readouterr().out
