"""Distilling a finetuned full-attention classifier into a Linformer (scripts/distill.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    RobertaConfig,
    RobertaForMaskedLM,
)

from linformer.configs import compose
from linformer.errors import ConfigError
from linformer.files.mappings import read_json
from linformer.modeling import LinformerForSequenceClassification
from linformer.modeling.convert import convert_encoder
from linformer.modeling.reference import full_attention
from linformer.runconfig import DistillSpec
from linformer.train.distill import DistillTask, distill, student_from_teacher
from linformer.train.finetune import finetune

from .conftest import compose_finetune, write_sst2_fixture

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def teachers(tmp_path_factory, pretrained_run):
    """Two finetuned full-attention SST-2 teachers on the fixture data: a RoBERTa classifier (the HF family) and
    the same RoBERTa converted to a Linformer in full mode, then finetuned (model_type linformer)."""
    root = tmp_path_factory.mktemp("teachers")
    sst2 = write_sst2_fixture(root / "sst2")
    tok = AutoTokenizer.from_pretrained(pretrained_run / "model")
    torch.manual_seed(0)
    RobertaForMaskedLM(RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=66, type_vocab_size=1)
                       ).save_pretrained(root / "roberta")
    tok.save_pretrained(root / "roberta")
    convert_encoder(root / "roberta", root / "linformer-full", attention="full")
    out = {"sst2": sst2, "cache": root / "cache"}
    for name in ("roberta", "linformer-full"):
        cfg = compose_finetune("task=sst2", f"task.data_dir={sst2}", f"model_path={root / name}",
                               f"task_cache_dir={root / 'cache'}", "trainer.epochs=4", "trainer.lr=3e-3")
        results = finetune(cfg, root / f"ft-{name}")
        assert results["metrics"]["accuracy"] >= 0.9  # a teacher worth distilling
        out[name] = root / f"ft-{name}" / "best"
    return out


def _compose(teachers, teacher: str, *overrides):
    base = ["task=sst2", f"task.data_dir={teachers['sst2']}", f"teacher_path={teachers[teacher]}",
            f"task_cache_dir={teachers['cache']}", "model.projected_dim=4", "trainer.batch_size=16",
            "trainer.lr=1e-3", "trainer.epochs=2", "trainer.log_every=1", "distill.lr_projections=1e-2",
            # the paper's Linformer, not the converted default: on inputs this short the window would hold every key
            "model.local_window=0", "model.global_positions=[]"]
    return compose("distill", base + list(overrides))


def _batch(teachers, texts=("good good , the film is good .", "dull , the film is dull and so dull .")):
    tok = AutoTokenizer.from_pretrained(teachers["roberta"])
    return dict(tok(list(texts), padding=True, return_tensors="pt"))


@pytest.mark.parametrize("teacher", ["roberta", "linformer-full"])
def test_the_student_is_the_teacher_with_projected_attention(teachers, teacher):
    """Every weight but E and F (the classifier too) comes from the teacher: in full mode it is the teacher."""
    default = student_from_teacher(str(teachers[teacher]), {"projected_dim": 4, "sharing": "layerwise"}).config
    assert default.length_policy == "resample" and default.exact_short_inputs  # the converted default, exact keys too
    assert default.local_window == min(128, default.max_seq_len) and default.global_positions == [0, -1]
    student = student_from_teacher(str(teachers[teacher]), {"projected_dim": 4, "sharing": "layerwise",
                                                            "local_window": 0, "global_positions": []}).eval()
    reference = AutoModelForSequenceClassification.from_pretrained(teachers[teacher]).eval()
    assert student.config.attention == "linformer" and student.config.projected_dim == 4
    batch = _batch(teachers)
    with torch.no_grad():
        with full_attention(student):
            full = student(**batch).logits
        projected = student(**batch).logits
        expected = reference(**batch).logits
    torch.testing.assert_close(full, expected, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(projected, expected, atol=1e-4)  # inputs above k = 4 tokens are compressed


@pytest.mark.parametrize("teacher", ["roberta", "linformer-full"])
def test_distillation_fits_the_student_to_the_teacher(tmp_path, teachers, teacher):
    results = distill(_compose(teachers, teacher, "validation_fraction=0.2"), tmp_path / "run")
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) == 20 and sum(losses[-5:]) < 0.5 * sum(losses[:5])  # 2 epochs of 160 / 16 steps
    evals = [r for r in rows if "val_agreement" in r]
    assert [r["step"] for r in evals] == [0, 10, 20]  # on the validation carve: before distillation, every epoch
    assert not any("eval_agreement" in r for r in rows)  # the reported split is scored once, at the end
    assert results["method"] == "distill" and results["teacher_metrics"]["accuracy"] >= 0.9
    assert results["attention"] == "linformer" and results["projected_dim"] == 4
    assert results["best_step"] == 20 and results["selection"]["step"] == 20  # the last model, not the best
    # and the record says so: it said "best val_accuracy" and "chosen on N validation examples"
    assert results["selection"]["split"] is None and results["selection"]["rule"].startswith("last model")
    assert "chosen on" not in " ".join(read_json(run / "summary.json")["report"])
    assert 0 <= results["metrics"]["agreement"] <= 1
    # the saved student is the model the results describe: its predictions reproduce them
    model_dir = Path(results["model_path"])
    assert model_dir == run / "model" and (model_dir / "linformer_card.json").is_file()
    card = read_json(model_dir / "linformer_card.json")
    assert card["distillation"]["task"] == "sst2" and card["results"]["sst2"]["metrics"] == results["metrics"]
    text = (model_dir / "README.md").read_text()  # a trained student, not a fresh conversion to train before use
    assert f"distilled from `ft-{teacher}/best`" in text and "## Distillation" in text  # no local path for the hub
    assert "before use" not in text and "E and F were learned with the other weights in distillation" in text
    student = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    pred = read_json(run / "eval_predictions.json")
    assert pred["step"] == 20
    sentences = [line.split("\t")[0] for line in (teachers["sst2"] / "dev.tsv").read_text().splitlines()[1:]]
    with torch.no_grad():
        again = student(**tok(sentences, padding=True, return_tensors="pt")).logits.argmax(-1).tolist()
    assert again == pred["predictions"]
    assert "agrees with it on" in " ".join(read_json(run / "summary.json")["report"])


def test_a_task_without_a_hub_dataset_distils_and_its_student_gets_a_card(tmp_path, teachers, monkeypatch):
    """The student's card named every registered task's hub dataset (spec.hub[0]): distilling on a task of local
    files only failed after its training, with no results.json and no card."""
    import dataclasses

    from linformer.data import TASKS

    monkeypatch.setitem(TASKS, "mysst", dataclasses.replace(TASKS["sst2"], name="mysst", hub=(), hub_fields=()))
    results = distill(_compose(teachers, "roberta", "task.name=mysst", "trainer.epochs=1"), tmp_path / "run")
    assert results["task"] == "mysst" and (tmp_path / "run" / "results.json").is_file()
    assert "type: mysst" in (tmp_path / "run" / "model" / "README.md").read_text()


def test_hidden_states_term_and_two_learning_rates(teachers):
    """hidden_weight adds each layer's relative error to the KL; E/F get distill.lr_projections."""
    cfg = _compose(teachers, "roberta", "distill.hidden_weight=1.0")
    spec = DistillSpec.read(cfg)
    task = DistillTask(spec, spec.trainer, 1, 0)
    batch = task.micro_batch(0)
    with_hidden = task.loss(task.model, batch)
    task.hidden_weight = 0.0
    assert with_hidden.item() > task.loss(task.model, batch).item() > 0
    groups = task.param_groups(0.1)
    assert groups[0]["lr"] == 1e-2 and all("lr" not in g for g in groups[1:])
    assert sum(len(g["params"]) for g in groups) == sum(p.requires_grad for p in task.model.parameters())


def _student(tmp_path, teachers, num_labels=2, tokenizer_of=None):
    """A Linformer classifier beside the teachers (converted from the RoBERTa), with num_labels and a tokenizer."""
    model = LinformerForSequenceClassification.from_pretrained_encoder(
        teachers["roberta"], attention="linformer", projected_dim=4, num_labels=num_labels)
    model.save_pretrained(tmp_path / "student")
    AutoTokenizer.from_pretrained(tokenizer_of or teachers["roberta"]).save_pretrained(tmp_path / "student")
    return tmp_path / "student"


def test_a_student_path_of_the_same_tokenizer_is_distilled_into(tmp_path, teachers):
    """A student whose E and F were transferred first keeps that transfer on its distilled card."""
    from linformer.modeling.card import conversion_info, write_model_card

    student = _student(tmp_path, teachers)
    info = conversion_info(teachers["roberta"], LinformerForSequenceClassification.from_pretrained(student), "student")
    info["transfer"] = {"steps": 6, "tokens": 96, "target": "attention outputs", "rel_err_after": [0.1, 0.2]}
    write_model_card(student, info)
    cfg = _compose(teachers, "roberta", f"student_path={student}", "trainer.epochs=1")
    results = distill(cfg, tmp_path / "run")
    assert results["student_path"] == str(student) and results["steps"] == 13
    card = read_json(tmp_path / "run" / "model" / "linformer_card.json")
    assert card["transfer"] == info["transfer"] and card["model"]["projections"] == "kept"
    assert "96 tokens in 6 steps" in (tmp_path / "run" / "model" / "README.md").read_text()


def test_a_student_with_other_labels_is_refused(tmp_path, teachers):
    student = _student(tmp_path, teachers, num_labels=3)
    with pytest.raises(ConfigError, match=r"student_path=.*student classifies 3 labels, teacher_path=.* 2"):
        distill(_compose(teachers, "roberta", f"student_path={student}"), tmp_path / "run")


def test_a_student_with_full_attention_is_refused(tmp_path, teachers):
    """Distilling into a full-attention model would be finetuning under another name."""
    with pytest.raises(ConfigError, match=r"student_path=.*ft-linformer-full/best has full attention: the student is a Linf"):
        distill(_compose(teachers, "roberta", f"student_path={teachers['linformer-full']}"), tmp_path / "run")
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_student_with_another_tokenizer_is_refused(tmp_path, teachers, bert_tokenizer_dir):
    student = _student(tmp_path, teachers, tokenizer_of=bert_tokenizer_dir)
    with pytest.raises(ConfigError, match=r"student_path=.* has another tokenizer than teacher_path="):
        distill(_compose(teachers, "roberta", f"student_path={student}"), tmp_path / "run")


def _retokenized(tokenizer, change: str):
    """`tokenizer` with its vocabulary kept and one thing that decides the ids changed."""
    from tokenizers import AddedToken, normalizers, pre_tokenizers

    backend = tokenizer.backend_tokenizer
    if change == "normalizer":  # a cased student of an uncased teacher, or the reverse
        backend.normalizer = normalizers.Lowercase()
    elif change == "pre_tokenizer":
        backend.pre_tokenizer = pre_tokenizers.Whitespace()
    else:
        word = max((t for t in tokenizer.get_vocab() if t.isalpha()), key=len)  # kept whole, not split by the model
        tokenizer.add_tokens([AddedToken(word, normalized=False)])  # already in the vocabulary: its id stays
    return tokenizer


@pytest.mark.parametrize("change", ["normalizer", "pre_tokenizer", "added_tokens"])
def test_a_tokenizer_of_the_same_vocabulary_that_encodes_otherwise_is_refused(teachers, change):
    """The check compared vocabularies alone: a student tokenizer that lowercases (or splits words otherwise) passed,
    and the teacher was fed ids of another tokenisation ([UNK]s for every cased word of a cased student). What
    differs is said."""
    from linformer.train.distill import check_same_tokenization

    teacher = AutoTokenizer.from_pretrained(teachers["roberta"])
    student = _retokenized(AutoTokenizer.from_pretrained(teachers["roberta"]), change)
    assert student.get_vocab() == teacher.get_vocab()
    check_same_tokenization(teacher, AutoTokenizer.from_pretrained(teachers["roberta"]), "teacher_path=t",
                            "student_path=s")
    words = {"normalizer": r"normalizer \{\"type\": \"Lowercase\"\} against null", "pre_tokenizer": "pre_tokenizer type "
             "\"Whitespace\" against \"ByteLevel\"", "added_tokens": "added tokens '.*' differ"}[change]
    with pytest.raises(ConfigError, match=rf"^student_path=s has another tokenizer than teacher_path=t \({words}"):
        check_same_tokenization(teacher, student, "teacher_path=t", "student_path=s")


def test_a_student_whose_tokenizer_splits_words_otherwise_is_refused(tmp_path, teachers):
    """distill.py with a student saved with add_prefix_space (the same vocabulary; every text one id longer, each
    word another id): refused before anything trains, naming the setting."""
    student = _student(tmp_path, teachers)
    AutoTokenizer.from_pretrained(teachers["roberta"], add_prefix_space=True).save_pretrained(student)
    with pytest.raises(ConfigError, match=r"student_path=.* has another tokenizer than teacher_path=.*\(pre_tokenizer "
                                          "add_prefix_space true against false"):
        distill(_compose(teachers, "roberta", f"student_path={student}"), tmp_path / "run")
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.fixture()
def bert_tokenizer_dir(tmp_path):
    """A WordPiece tokenizer of another vocabulary (BERT's layout)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"])}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok = PreTrainedTokenizerFast(tokenizer_object=wp, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]")
    tok.save_pretrained(tmp_path / "wordpiece")
    return tmp_path / "wordpiece"


def test_a_teacher_that_is_not_a_finetuned_classifier_is_refused(tmp_path, teachers, pretrained_run):
    cfg = _compose(teachers, "roberta", f"teacher_path={pretrained_run}")
    with pytest.raises(ConfigError, match=r"teacher_path=.* holds a LinformerForMaskedLM, not a finetuned sequence"):
        distill(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_teacher_with_projected_attention_is_refused(tmp_path, teachers):
    student = _student(tmp_path, teachers)
    cfg = _compose(teachers, "roberta", f"teacher_path={student}")
    with pytest.raises(ConfigError, match=r"teacher_path=.* is a Linformer with projected attention"):
        distill(cfg, tmp_path / "run")


def test_a_teacher_of_other_labels_is_refused(tmp_path, teachers):
    from transformers import RobertaForSequenceClassification

    config = RobertaConfig.from_pretrained(teachers["roberta"], num_labels=3)
    RobertaForSequenceClassification(config).save_pretrained(tmp_path / "three")
    AutoTokenizer.from_pretrained(teachers["roberta"]).save_pretrained(tmp_path / "three")
    with pytest.raises(ConfigError, match=r"teacher_path=.*three classifies 3 labels, task=sst2 has 2"):
        distill(_compose(teachers, "roberta", f"teacher_path={tmp_path / 'three'}"), tmp_path / "run")


def test_a_teacher_of_another_task_with_as_many_labels_is_refused(tmp_path, teachers):
    """An SST-2 teacher has two labels as QNLI has: distilled on QNLI, the student answered negative/positive and its
    'teacher accuracy' compared sentiment with entailment. A teacher whose labels are named must name the task's."""
    qnli = tmp_path / "qnli"
    qnli.mkdir()
    rows = "".join(f"{i}\twhat is {i}?\tthe film is good .\t{'entailment' if i % 2 else 'not_entailment'}\n"
                   for i in range(8))
    for split in ("train", "dev"):
        (qnli / f"{split}.tsv").write_text("index\tquestion\tsentence\tlabel\n" + rows)
    cfg = _compose(teachers, "linformer-full", "task=qnli", f"task.data_dir={qnli}")
    with pytest.raises(ConfigError, match=r"classifies \['negative', 'positive'\], task=qnli's labels are "
                                          r"\['entailment', 'not_entailment'\]"):
        distill(cfg, tmp_path / "run")


@pytest.mark.slow  # the CLI's wrapper is the one every script shares; the refusal itself is tested in-process above
def test_a_student_of_another_tokenizer_is_one_error_line(tmp_path, teachers, bert_tokenizer_dir):
    """The CLI: one `error:` line naming both paths, exit 2, no traceback, nothing in the run directory."""
    student = _student(tmp_path, teachers, tokenizer_of=bert_tokenizer_dir)
    result = subprocess.run(
        [sys.executable, "scripts/distill.py", "task=sst2", f"task.data_dir={teachers['sst2']}",
         f"teacher_path={teachers['roberta']}", f"student_path={student}", f"paths.output_dir={tmp_path / 'out'}",
         f"task_cache_dir={teachers['cache']}"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert f"student_path={student}" in line and f"teacher_path={teachers['roberta']}" in line
    assert not list((tmp_path / "out").glob("**/results.json"))


@pytest.mark.parametrize("teacher", ["roberta", "linformer-full"])
def test_a_bad_student_setting_names_its_group_before_any_weights_load(tmp_path, teachers, teacher, forbid_loading):
    forbid_loading()  # a RoBERTa teacher's student is converted, a Linformer teacher's reshaped: neither loads
    with pytest.raises(ConfigError, match=r"^model: projected_dim \(k=999\) must be in 1..max_seq_len"):
        distill(_compose(teachers, teacher, "model.projected_dim=999"), tmp_path / "run")


def test_a_missing_teacher_is_named_by_its_key(tmp_path, teachers):
    from linformer.errors import CheckpointError

    with pytest.raises(CheckpointError, match=r"^teacher_path='.*nowhere' .* holds no model"):
        distill(_compose(teachers, "roberta", f"teacher_path={tmp_path / 'nowhere'}"), tmp_path / "run")


def test_the_logged_lr_is_trainer_lr_s_schedule(tmp_path, teachers):
    """E/F learn at distill.lr_projections in the first optimizer group; metrics.jsonl logs trainer.lr's schedule."""
    distill(_compose(teachers, "roberta", "trainer.epochs=1", "trainer.warmup_ratio=0.0"), tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    lrs = [r["lr"] for r in rows if "lr" in r]
    assert lrs[0] == pytest.approx(1e-3) and lrs[1] == pytest.approx(1e-3 * 12 / 13)  # linear decay from 1e-3


def test_a_student_longer_than_its_teacher_is_refused_and_local_keys_reach_the_student(tmp_path, teachers):
    """Distilling at a length the teacher was not lengthened to would teach the student from truncated views."""
    cfg = _compose(teachers, "linformer-full", "model.max_seq_len=128", "trainer.max_length=128")
    with pytest.raises(ConfigError, match=r"reads up to 128 tokens .* attends over at most 64"):
        distill(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "results.json").exists()
    with pytest.raises(ConfigError, match="trainer.max_length=200 is above"):
        distill(_compose(teachers, "linformer-full", "trainer.max_length=200"), tmp_path / "run2")
    student = student_from_teacher(str(teachers["linformer-full"]),
                                   {"projected_dim": 4, "local_window": 8, "global_positions": [0, -1]})
    assert (student.config.local_window, student.config.global_positions) == (8, [0, -1])


@pytest.mark.parametrize("task_max", [None, 64])
def test_a_student_lengthened_past_its_teacher_without_lengthening_it_is_refused(tmp_path, teachers, task_max,
                                                                                 forbid_loading):
    """model.max_seq_len above the teacher's n with distill.lengthen_teacher=false: the config says the teacher must
    read that far already. Where the task's default length (task.max_length) was the teacher's n, the inputs were cut
    to it and the student's n = 128 trained at 64 tokens without a word. Refused before any weights load."""
    forbid_loading()
    cap = [f"task.max_length={task_max}"] if task_max else []
    with pytest.raises(ConfigError, match=r"^model.max_seq_len=128 lengthens the student past what the teacher "
                                          r"teacher_path=.* reads \(64 tokens\), and distill.lengthen_teacher=false.*"
                                          r"or distill the longer student on what the teacher reads "
                                          r"\(trainer.max_length=64\)\.$"):
        distill(_compose(teachers, "linformer-full", "model.max_seq_len=128", *cap), tmp_path / "run")
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.mark.parametrize("refusal", ["teacher not a classifier", "student longer than its teacher",
                                     "student lengthened past its teacher"])
def test_the_commands_a_refusal_prints_carry_the_distill_command_s_imports(tmp_path, teachers, pretrained_run,
                                                                           refusal):
    """A distill command given imports= (its task, projection or sharing mode the user's own) was told to finetune
    or convert its teacher by a command without them, which then failed on the name they register. Each command a
    refusal prints carries imports=[...] as given, and Hydra composes it back from the line as printed."""
    import re
    import shlex

    overrides = {"teacher not a classifier": ("roberta", f"teacher_path={pretrained_run}"),
                 "student longer than its teacher": ("linformer-full", "model.max_seq_len=128",
                                                     "trainer.max_length=128"),
                 "student lengthened past its teacher": ("linformer-full", "model.max_seq_len=128")}[refusal]
    cfg = _compose(teachers, overrides[0], *overrides[1:], "imports=[my_task]")
    with pytest.raises(ConfigError) as err:
        distill(cfg, tmp_path / "run")
    (command,) = re.findall(r"python (?:\S+/)?scripts/(?:finetune|convert)\.py [^()]*?(?=\)|, or)", str(err.value))
    words = shlex.split(command.replace("<dir>", str(tmp_path / "out")).replace("model_path=...", "model_path=x"))
    assert "imports=[my_task]" in words, str(err.value)
    assert list(compose(Path(words[1]).stem, words[2:]).imports) == ["my_task"]


def test_a_lengthened_pair_trained_on_shorter_inputs_says_so(teachers, caplog):
    """distill.lengthen_teacher=true without trainer.max_length: the task's default length cuts the inputs below the
    new n, and the log says the lengthened positions go untrained."""
    spec = DistillSpec.read(_compose(teachers, "linformer-full", "model.max_seq_len=128",
                                     "distill.lengthen_teacher=true", "task.max_length=64"))
    with caplog.at_level("WARNING", logger="linformer.train.distill"):
        DistillTask(spec, spec.trainer, 1, 0)
    assert "inputs are cut to 64 tokens (task.max_length): the positions past them are not trained" in caplog.text


def test_the_student_takes_its_exact_keys_and_landmark_pooling_from_the_config(teachers):
    """The distill command's model keys reach the student (the long-input student with landmark pooling)."""
    cfg = _compose(teachers, "linformer-full", "model.local_window=8", "model.global_positions=[0,-1]",
                   "model.landmark_pooling=true", "model.sharing=layerwise")
    spec = DistillSpec.read(cfg)
    c = DistillTask(spec, spec.trainer, 1, 0).model.config
    assert (c.local_window, c.global_positions, c.landmark_pooling, c.sharing) == (8, [0, -1], True, "layerwise")


def test_a_lengthened_teacher_distils_a_longer_student_on_the_long_examples_only(tmp_path, teachers):
    """convert.py reshapes a finetuned full-attention classifier (positions copied, every other weight and the
    classifier kept); distill.min_tokens keeps the train examples longer than that, as for long IMDB reviews."""
    teacher = convert_encoder(teachers["linformer-full"], tmp_path / "teacher-128", max_seq_len=128, attention="full")
    src = AutoModelForSequenceClassification.from_pretrained(teachers["linformer-full"]).state_dict()
    long = AutoModelForSequenceClassification.from_pretrained(teacher)
    assert long.config.max_seq_len == 128 and long.config.attention == "full"
    reshaped = [k for k, v in long.state_dict().items() if v.shape != src[k].shape]
    assert reshaped == ["roberta.embeddings.position_embeddings.weight"]
    assert all(torch.equal(v, src[k]) for k, v in long.state_dict().items() if k not in reshaped)
    source = read_json(teacher / "linformer_card.json")["source"]  # the finetuned teacher's card goes along
    assert (source["name"], source["reshaped_from"]) == ("roberta",  # by its folder, as every local path on a card
                                                         "ft-linformer-full/best")
    assert source["reshaped_history"] == "finetuned on sst2"

    tok = AutoTokenizer.from_pretrained(teacher)
    rows = (teachers["sst2"] / "train.tsv").read_text().splitlines()[1:]
    lengths = sorted(len(tok(r.split("\t")[0].strip())["input_ids"]) for r in rows)
    cut = lengths[len(lengths) // 2]
    with_long = {**teachers, "long": teacher}
    results = distill(_compose(with_long, "long", "model.max_seq_len=128", f"distill.min_tokens={cut}",
                               "trainer.epochs=1"), tmp_path / "run")
    assert results["num_train_examples"] == sum(n > cut for n in lengths) > 0
    with pytest.raises(ConfigError, match=rf"distill.min_tokens=500: none of the {len(rows)} train examples"):
        distill(_compose(with_long, "long", "model.max_seq_len=128", "distill.min_tokens=500"), tmp_path / "run2")


def test_one_command_lengthens_the_teacher_and_the_card_says_at_what_length(tmp_path, teachers):
    """distill.lengthen_teacher=true: the teacher read at the student's n (positions copied) inside the run, as
    convert.py would have saved it; the student's card names the length and the long-example cut."""
    refused = _compose(teachers, "linformer-full", "model.max_seq_len=128")
    with pytest.raises(ConfigError, match=r"distill.lengthen_teacher=true"):
        distill(refused, tmp_path / "refused")
    cfg = _compose(teachers, "linformer-full", "model.max_seq_len=128", "distill.lengthen_teacher=true",
                   "trainer.epochs=1", "distill.min_tokens=4")
    results = distill(cfg, tmp_path / "run")
    card = read_json(tmp_path / "run" / "model" / "linformer_card.json")["distillation"]
    assert (card["max_length"], card["min_tokens"], card["teacher_max_seq_len"]) == (128, 4, 128)
    text = (tmp_path / "run" / "model" / "README.md").read_text()  # the teacher read the student's inputs, lengthened
    assert "| the teacher reads | the same inputs as the student (its n = 128); lengthened from n = 64 for this run" in text
    assert results["distill"]["min_tokens"] == 4
    converted = convert_encoder(teachers["linformer-full"], tmp_path / "t128", max_seq_len=128, attention="full")
    spec = DistillSpec.read(cfg)
    task = DistillTask(spec, spec.trainer, 1, 0)
    saved = AutoModelForSequenceClassification.from_pretrained(converted).state_dict()
    assert all(torch.equal(v, saved[k]) for k, v in task.teacher.state_dict().items())
