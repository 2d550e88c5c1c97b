"""Attention transfer on a tiny BERT built here (WordPiece tokenizer, packed corpus of its tokens)."""

import json
import sys
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerFast

from linformer.configs import compose
from linformer.data import prepare_corpus
from linformer.errors import ConfigError
from linformer.modeling import LinformerModel
from linformer.modeling.card import read_card_info
from linformer.modeling.loading import weights_sha256
from linformer.train.transfer import transfer

from ..conftest import load_script
from .conftest import _synthetic_corpus

REPO = Path(__file__).resolve().parents[2]
N = 32


@pytest.fixture(scope="module")
def bert_source(tmp_path_factory):
    """A tiny random BERT with its own WordPiece tokenizer, and the corpus packed into N-token blocks with it."""
    root = tmp_path_factory.mktemp("bert_source")
    text = _synthetic_corpus(root / "corpus.txt")
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.train([str(text)], trainers.WordPieceTrainer(vocab_size=200, special_tokens=[
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tok = PreTrainedTokenizerFast(tokenizer_object=wp, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]")
    src = root / "bert"
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=N, pad_token_id=0))
    with torch.no_grad():  # sharp attention, as a trained encoder has: a random one attends almost uniformly,
        for layer in bert.encoder.layer:  # which mean-pooling E/F already match
            layer.attention.self.query.weight.mul_(40)
            layer.attention.self.key.weight.mul_(40)
    bert.save_pretrained(src)
    tok.save_pretrained(src)
    prepare_corpus([str(text)], str(src), str(root / "blocks"), n=N, val_fraction=0.1, num_proc=1)
    return {"source": str(src), "corpus": str(root / "blocks")}


def _compose(bert_source, *overrides):
    base = [f"model_path={bert_source['source']}", f"corpus_dir={bert_source['corpus']}", f"model.max_seq_len={N}",
            "model.projected_dim=8", "model.sharing=headwise", "trainer.max_steps=40", "trainer.batch_size=8",
            "trainer.lr=1e-2", "trainer.warmup_steps=2", "trainer.eval_every=20", "trainer.save_every=20",
            "trainer.eval_blocks=16",
            # the paper's Linformer, not the converted default: on blocks this short the window would hold every key
            "model.local_window=0", "model.global_positions=[]"]
    return compose("transfer", base + list(overrides))


@pytest.mark.parametrize("target, gain", [("hidden", 0.97), ("attention", 0.95)])
def test_transfer_of_the_projections_lowers_the_held_out_error(bert_source, tmp_path, target, gain):
    """A layer's output is mostly its residual input, so its error moves less than the attention output's."""
    summary = transfer(_compose(bert_source, f"transfer.target={target}"), tmp_path)
    assert summary["start_weights_sha256"] == weights_sha256(str(bert_source["source"])) is not None
    before, after = summary["rel_err_before"], summary["rel_err_after"]
    assert len(before) == len(after) == 2 and min(before) > 0
    assert sum(after) < gain * sum(before), (before, after)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["step"] == 0 and {"val_rel_err_0", "val_rel_err_1"} <= rows[0].keys()
    model = LinformerModel.from_pretrained(tmp_path / "model")
    source = BertModel.from_pretrained(bert_source["source"])
    assert model.config.hidden_dropout_prob == source.config.hidden_dropout_prob  # finetunes with its dropout
    # only E and F moved: every other weight is still the source's
    same = source.state_dict()
    for name, value in model.state_dict().items():
        if ".E." not in name and ".F." not in name and name in same:
            assert torch.equal(value, same[name]), name


def test_transfer_of_all_weights_keeps_the_teacher_fixed(bert_source, tmp_path, monkeypatch):
    from linformer.train.transfer import TransferTask

    tasks = []
    original = TransferTask.finish
    monkeypatch.setattr(TransferTask, "finish", lambda self, trainer: (tasks.append(self), original(self, trainer))[1])
    summary = transfer(_compose(bert_source, "transfer.train=all", "transfer.lr_rest=1e-3",
                                "transfer.target=attention"), tmp_path)
    assert min(summary["rel_err_before"]) > 0  # the teacher is the source with full attention, not the student
    assert sum(summary["rel_err_after"]) < 0.92 * sum(summary["rel_err_before"])
    source = BertModel.from_pretrained(bert_source["source"])
    # after every update of the student, the teacher still holds the source's weights, each one
    (task,) = tasks
    teacher = {n.removeprefix("roberta."): v for n, v in task.teacher.state_dict().items()}
    shared = [n for n in source.state_dict() if n in teacher and "position_ids" not in n]
    assert len(shared) > 20 and all(torch.equal(teacher[n], source.state_dict()[n]) for n in shared)
    model = LinformerModel.from_pretrained(tmp_path / "model")
    moved = [n for n, v in model.state_dict().items() if ".E." not in n and ".F." not in n
             and n in source.state_dict() and not torch.equal(v, source.state_dict()[n])]
    assert moved  # the other weights adapted


def test_bad_transfer_settings_name_their_key(bert_source, tmp_path):
    with pytest.raises(ConfigError, match="transfer.target='logits'"):
        transfer(_compose(bert_source, "transfer.target=logits"), tmp_path)
    with pytest.raises(ConfigError, match="data.n=16"):
        transfer(_compose(bert_source, "model.max_seq_len=16"), tmp_path / "short")


def test_a_bad_model_setting_names_its_group_before_the_source_loads(bert_source, tmp_path, forbid_loading):
    forbid_loading()
    with pytest.raises(ConfigError, match=r"^model: sharing='bogus' is not one of"):
        transfer(_compose(bert_source, "model.sharing=bogus"), tmp_path)


def test_a_transfer_resumed_with_another_source_is_refused(bert_source, tmp_path):
    import shutil

    from linformer.errors import RunDirError

    run = tmp_path / "run"
    short = ["trainer.max_steps=4", "trainer.warmup_steps=1", "trainer.batch_size=4", "trainer.eval_blocks=4"]
    transfer(_compose(bert_source, *short), run)
    other = tmp_path / "bert_copy"
    shutil.copytree(bert_source["source"], other)
    with pytest.raises(RunDirError) as err:
        transfer(_compose(bert_source, *short, f"model_path={other}"), run)
    assert "model_path" in str(err.value) and "bert_copy" in str(err.value)


def test_the_card_records_the_transfer_and_then_the_finetuning(bert_source, tmp_path):
    from linformer.train.finetune import finetune

    from .conftest import compose_finetune, write_sst2_fixture

    transfer(_compose(bert_source, "trainer.max_steps=4", "trainer.warmup_steps=1"), tmp_path / "t")
    info = read_card_info(tmp_path / "t" / "model")
    assert info["transfer"]["steps"] == 4 and len(info["transfer"]["rel_err_after"]) == 2
    assert info["transfer"]["max_seq_len"] == info["model"]["max_seq_len"]  # the n E and F were fitted at
    assert info["model"]["projected_dim"] == 8 and "Linformer" in (tmp_path / "t" / "model" / "README.md").read_text()
    sst2 = write_sst2_fixture(tmp_path / "sst2", train=32, dev=16)
    finetune(compose_finetune("task=sst2", f"task.data_dir={sst2}", f"model_path={tmp_path / 't'}",
                              "trainer.epochs=1", "task_cache_dir=null"), tmp_path / "ft")
    tuned = read_card_info(tmp_path / "ft" / "best")  # the transfer's history, then this finetuning and its score
    assert tuned["transfer"] == info["transfer"] and [f["task"] for f in tuned["finetuning"]] == ["sst2"]
    assert "accuracy" in tuned["results"]["sst2"]["metrics"]
    assert read_card_info(tmp_path / "t" / "model") == info  # the model it started from is only read


def test_transfer_with_short_batches_reports_the_short_error(bert_source, tmp_path):

    # the paper's slice: inputs of 8 tokens are projected (by default they would attend exactly, error 0)
    summary = transfer(_compose(bert_source, "transfer.short_fraction=1.0", "transfer.min_length=4",
                                "transfer.eval_short_length=8", "model.length_policy=slice",
                                "model.exact_short_inputs=false"), tmp_path)
    assert len(summary["rel_err_short_before"]) == len(summary["rel_err_short_after"]) == 2
    assert summary["rel_err_short_before"] != summary["rel_err_before"]  # a different measurement
    assert sum(summary["rel_err_short_after"]) < sum(summary["rel_err_short_before"])
    assert any("cut to 8 tokens" in line for line in summary["report"])
    info = read_card_info(tmp_path / "model")["transfer"]
    assert info["short_fraction"] == 1.0 and info["eval_short_length"] == 8
    assert "after, 8 tokens" in (tmp_path / "model" / "README.md").read_text()
    with pytest.raises(ConfigError, match="transfer.short_fraction=1.5"):
        transfer(_compose(bert_source, "transfer.short_fraction=1.5"), tmp_path / "bad")


def test_short_batches_skip_lengths_that_attend_exactly(bert_source, tmp_path):
    """With exact_short_inputs (the converted default) an input of at most k tokens has no projection to fit, and a
    batch cut that short would give E/F no gradient: the cuts start above k."""
    summary = transfer(_compose(bert_source, "transfer.short_fraction=1.0", "transfer.min_length=4",
                                "transfer.train=projections", "trainer.max_steps=12", "trainer.eval_every=12",
                                "trainer.save_every=12"), tmp_path)
    assert summary["steps"] == 12 and all(0 < e < 1 for e in summary["rel_err_after"])


def test_identity_projection_with_masked_empty_windows_is_full_attention_at_every_length(bert_source):
    """k = n with E = I: the Linformer is exactly full attention on any input length when the empty windows are
    masked, and diluted by the n - L empty columns when they are not. fidelity.relative_errors measures both."""
    from linformer.report.fidelity import cut, relative_errors

    blocks = torch.tensor([[2, *range(10, 10 + N - 2), 3]] * 2)  # [CLS] ... [SEP], ids within the vocabulary
    for mask, short_error in ((True, lambda e: e < 1e-5), (False, lambda e: e > 1e-3)):
        model = LinformerModel.from_pretrained_encoder(bert_source["source"], projected_dim=N, sharing="kv",
                                                       length_policy="slice", exact_short_inputs=False,
                                                       mask_empty_windows=mask, local_window=0,
                                                       global_positions=[]).eval()
        with torch.no_grad():
            for layer in model.encoder.layer:
                layer.attention.self.E.weight.copy_(torch.eye(N))
        assert max(relative_errors(model, blocks)) < 1e-5  # L = n: no empty column either way
        for length in (5, 17):
            assert short_error(max(relative_errors(model, cut(blocks, length)))), (mask, length)


def test_fidelity_script_reports_each_layer_by_length(bert_source, tmp_path, capsys, monkeypatch):
    """The script's main in-process, and one refusal as its command line gives it (exit status 2, the error line)."""
    from linformer.modeling.convert import convert_encoder
    from tests.conftest import load_script, run_script

    convert_encoder(bert_source["source"], tmp_path / "lin", projected_dim=8, sharing="layerwise")
    convert_encoder(bert_source["source"], tmp_path / "full", attention="full")
    cmd = [sys.executable, "scripts/fidelity.py", f"k=8={tmp_path / 'lin'}", "--corpus", bert_source["corpus"],
           "--source", bert_source["source"], "--lengths", "16", str(N), "--blocks", "2", "--out", str(tmp_path / "fid")]
    fidelity_main = load_script("fidelity").main
    assert fidelity_main(cmd[2:]) == 0
    report = json.loads((tmp_path / "fid.json").read_text())
    assert report["reference"] == f"{bert_source['source']} with full attention"
    errors = report["errors"]["k=8"]
    # 16 and 32 tokens, above k = 8: projected (8 tokens would attend exactly, error 0)
    assert sorted(errors, key=int) == ["16", str(N)] and all(len(e) == 2 and min(e) > 0 for e in errors.values())
    assert "| 16 |" in (tmp_path / "fid.md").read_text() and (tmp_path / "fid.png").stat().st_size > 0
    capsys.readouterr()
    code = run_script("fidelity", [f"full={tmp_path / 'full'}", *cmd[3:-1], str(tmp_path / "fid2")], monkeypatch)
    assert code == 2 and "attention='full': nothing to compare" in capsys.readouterr().err
    # other models at the path of an earlier report: refused, the report kept
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        fidelity_main([f"k=8={tmp_path / 'full'}", *cmd[3:]])
    assert stop.value.code == 2 and "earlier fidelity output with other settings (models:" in capsys.readouterr().err
    assert json.loads((tmp_path / "fid.json").read_text())["errors"]["k=8"] == errors


def test_fidelity_measures_against_the_source_not_the_model_s_own_weights(bert_source, tmp_path):
    """A model whose attention is exact (k = n, E = I) but whose other weights moved away from the source, as a
    transferred model's do: against itself in full attention it looks perfect; against the source it is not."""
    from linformer.report.fidelity import measure

    model = LinformerModel.from_pretrained_encoder(bert_source["source"], projected_dim=N, sharing="kv",
                                                   length_policy="slice", exact_short_inputs=False, local_window=0,
                                                   global_positions=[])
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.E.weight.copy_(torch.eye(N))
        model.encoder.layer[0].output.dense.weight.mul_(1.5)  # trained away from the source
    model.save_pretrained(tmp_path / "moved")
    AutoTokenizer.from_pretrained(bert_source["source"]).save_pretrained(tmp_path / "moved")
    models = {"moved": str(tmp_path / "moved")}
    itself = measure(models, bert_source["corpus"], [N], blocks=2)[0]["moved"][N]
    source = measure(models, bert_source["corpus"], [N], blocks=2, source=bert_source["source"])[0]["moved"][N]
    assert max(itself) < 1e-5 and min(source) > 1e-3


def test_fidelity_refuses_lengths_above_n_and_a_corpus_of_another_vocabulary(bert_source, tmp_path):
    from linformer.errors import CorpusError
    from linformer.modeling.convert import convert_encoder
    from linformer.report.fidelity import measure

    convert_encoder(bert_source["source"], tmp_path / "lin", projected_dim=8, sharing="layerwise")
    with pytest.raises(ConfigError, match=f"--lengths {2 * N} is longer than .* allows \\(n={N}\\)"):
        measure({"k=8": str(tmp_path / "lin")}, bert_source["corpus"], [8, 2 * N], blocks=2)
    other = AutoTokenizer.from_pretrained(bert_source["source"])
    other.add_tokens(["zzzunseen"])  # one more token: another vocabulary, another hash
    other.save_pretrained(tmp_path / "lin")
    with pytest.raises(CorpusError, match=r"encodes text otherwise than the tokenizer .* \(added tokens 'zzzunseen' "
                                          r"differ\)"):
        measure({"k=8": str(tmp_path / "lin")}, bert_source["corpus"], [8], blocks=2)


def test_fidelity_refuses_a_source_of_another_width_naming_it(bert_source, tmp_path, capsys):
    """A model converted from another encoder than --source: its hidden states cannot be compared layer by layer
    (they used to fail inside the comparison with a tensor size mismatch)."""
    from linformer.modeling.convert import convert_encoder

    convert_encoder(bert_source["source"], tmp_path / "lin", projected_dim=8, sharing="layerwise")
    wide = BertConfig.from_pretrained(bert_source["source"])
    wide.hidden_size, wide.intermediate_size = 48, 96
    BertModel(wide).save_pretrained(tmp_path / "wide")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        load_script("fidelity").main([f"k=8={tmp_path / 'lin'}", "--corpus", bert_source["corpus"], "--source",
                                      str(tmp_path / "wide"), "--lengths", "16", "--blocks", "2",
                                      "--out", str(tmp_path / "fid")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1:] == [  # after transformers' progress bar of the model's load
        (f"error: --source {tmp_path / 'wide'}: {tmp_path / 'lin'} was not converted from it, they differ in "
         "hidden_size 32 against 48: give the encoder it was converted from, or --self-reference")]
    assert not list(tmp_path.glob("fid.*"))


def test_fidelity_refuses_a_label_given_twice(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        load_script("fidelity").main(["a=one", "a=two", "--corpus", str(tmp_path), "--self-reference",
                                      "--out", str(tmp_path / "fid")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: the label 'a' is given twice (a=one and a=two): give each model its own label"]


def test_fidelity_says_and_records_how_many_blocks_it_measured(bert_source, tmp_path, capsys):
    from linformer.data import load_prepared
    from linformer.modeling.convert import convert_encoder

    held_out = len(load_prepared(bert_source["corpus"], None)["validation"])
    convert_encoder(bert_source["source"], tmp_path / "lin", projected_dim=8, sharing="layerwise")
    capsys.readouterr()
    assert load_script("fidelity").main([f"k=8={tmp_path / 'lin'}", "--corpus", bert_source["corpus"],
                                         "--self-reference", "--lengths", "16", "--blocks", "100000",
                                         "--out", str(tmp_path / "fid")]) == 0
    assert (f"--blocks 100000: {bert_source['corpus']} holds {held_out} validation blocks; measured on those"
            in capsys.readouterr().out)
    saved = json.loads((tmp_path / "fid.json").read_text())
    assert saved["blocks"] == held_out and saved["machine"].startswith("Machine: CPU")  # where it was measured
    assert f"on {held_out} held-out corpus blocks cut to each length" in (tmp_path / "fid.md").read_text()
    assert saved["machine"] in (tmp_path / "fid.md").read_text()


@pytest.mark.parametrize("start", ["converted", "source"])
def test_mlm_continuation_from_a_converted_model_or_its_source(bert_source, tmp_path, start, caplog):
    """scripts/pretrain.py init_from=: a converted Linformer directory keeps its architecture; a BERT source is
    converted with model.*; either way the MLM head the source lacks starts fresh and the loss is finite."""
    import logging

    from linformer.modeling.convert import convert_encoder
    from linformer.train.pretrain import pretrain

    converted = convert_encoder(bert_source["source"], tmp_path / "lin", projected_dim=8, sharing="layerwise")
    init = converted if start == "converted" else bert_source["source"]
    cfg = compose("pretrain", [
            f"init_from={init}", f"tokenizer_dir={converted}", f"corpus_dir={bert_source['corpus']}",
            f"model.max_seq_len={N}", "model.projected_dim=8", "model.sharing=layerwise", "trainer.batch_size=4",
            "trainer.max_steps=3", "trainer.warmup_steps=1", "trainer.eval_every=3", "trainer.eval_blocks=4",
            "trainer.save_every=3"])
    caplog.set_level(logging.INFO)
    summary = pretrain(cfg, tmp_path / "run")
    assert summary["final_val_loss"] > 0 and summary["final_val_loss"] < 20
    assert summary["start_weights_sha256"] == weights_sha256(str(init)) is not None  # what it started from
    model = LinformerModel.from_pretrained(tmp_path / "run" / "model")
    assert (model.config.attention, model.config.projected_dim, model.config.length_policy) == \
        ("linformer", 8, "resample")
    text = caplog.text
    assert ("is a Linformer: it keeps its own architecture (linformer k=8, layerwise" in text) if start == "converted" else \
        ("starting fresh: lm_head" in text)


def test_a_projections_transfer_continues_with_every_weight_in_lolcats_order(bert_source, tmp_path):
    """Phase 2 starts from phase 1's E and F (its error at step 0 is phase 1's last), its teacher is still the
    source, and the card records both phases; a start that would not have the source as teacher is refused."""

    phase = ["transfer.target=attention", "trainer.max_steps=20", "trainer.eval_every=10"]
    first = transfer(_compose(bert_source, *phase), tmp_path / "e_f")
    second = transfer(_compose(bert_source, *phase, f"model_path={tmp_path / 'e_f'}", "transfer.train=all",
                               "trainer.lr=1e-3", "transfer.lr_rest=1e-4"), tmp_path / "all")
    assert second["rel_err_before"] == pytest.approx(first["rel_err_after"], rel=1e-5)
    assert sum(second["rel_err_after"]) < sum(second["rel_err_before"])
    card = read_card_info(tmp_path / "all" / "model")
    assert card["source"] == read_card_info(tmp_path / "e_f" / "model")["source"]  # the source, not the intermediate
    assert card["source"]["name"] == "bert"  # by its folder's name, as the first phase's card names it
    assert card["transfer"]["train"] == "all" and card["transfer"]["continued"]["train"] == "projections"
    assert card["transfer"]["continued"]["rel_err_after"] == first["rel_err_after"]
    with pytest.raises(ConfigError, match=r"transferred with transfer.train=all: its weights are no longer the source"):
        transfer(_compose(bert_source, f"model_path={tmp_path / 'all'}", "transfer.train=all"), tmp_path / "third")
    with pytest.raises(ConfigError, match=r"model.projected_dim=4 but model_path=.* projected_dim=8"):
        transfer(_compose(bert_source, f"model_path={tmp_path / 'e_f'}", "model.projected_dim=4"), tmp_path / "k4")


@pytest.mark.parametrize("landmarks", [False, True])
def test_a_transfer_with_local_and_global_keys_builds_and_records_them(bert_source, tmp_path, landmarks):
    """The new attention is transferred like the plain Linformer: its config and card hold the window, the globals
    and the landmark pooling."""
    summary = transfer(_compose(bert_source, "model.local_window=8", "model.global_positions=[0,-1]",
                                f"model.landmark_pooling={str(landmarks).lower()}", "model.sharing=layerwise",
                                "trainer.max_steps=4", "trainer.eval_every=4", "trainer.save_every=4"), tmp_path)
    model = LinformerModel.from_pretrained(tmp_path / "model")
    assert (model.config.local_window, model.config.global_positions) == (8, [0, -1])
    assert model.config.landmark_pooling is landmarks
    assert read_card_info(tmp_path / "model")["model"]["landmark_pooling"] is landmarks
    assert all(x > 0 for x in summary["rel_err_after"])


def test_fidelity_counts_layers_from_one_as_the_spectrum_reports_do():
    from linformer.report.fidelity import to_markdown

    md = to_markdown({"m": {16: [0.1, 0.2]}}, "cmd", None)
    assert "| tokens | layer 1 | layer 2 |" in md and "| 16 | 0.100 | 0.200 |" in md
