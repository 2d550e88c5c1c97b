"""scripts/predict.py: a finetuned classifier's prediction for each row of a file, in the file's order, each row
named by its line; tiny classifiers built here (a from-scratch Linformer, and one converted from a BERT encoder)."""

import io
import json
from pathlib import Path

import pytest
import torch

from linformer.data.tokenizer import load_tokenizer
from linformer.errors import ConfigError, TaskDataError
from linformer.files.atomic import write_json
from linformer.files.runs import RESULTS
from linformer.modeling import LinformerConfig, LinformerForSequenceClassification
from linformer.train.predict import load_classifier_dir, predict_file

from ..conftest import RecordingTokenizer, run_script
from .conftest import N

LABELS = {0: "negative", 1: "positive"}
WORDS = ["the cat", "a dog sees the river", "my sister paints", "the old man finds an apple", "a small bird",
         "the teacher remembers the long road " * 12, "a quiet song", "the garden", "the cat likes a red house"]


@pytest.fixture(scope="module")
def scratch(tiny_data, tmp_path_factory):
    """A from-scratch Linformer classifier of the fixture tokenizer (n = 32), saved as a finetuning run's best/ whose
    run records the task sst2 (its results.json)."""
    run = tmp_path_factory.mktemp("predict") / "run"
    tok = load_tokenizer(tiny_data["tokenizer_dir"])
    torch.manual_seed(0)
    config = LinformerConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, max_seq_len=N, projected_dim=8, num_labels=2, id2label=LABELS,
                             label2id={v: k for k, v in LABELS.items()}, pad_token_id=tok.pad_token_id,
                             initializer_range=0.5)  # logits far apart: both labels among the predictions
    LinformerForSequenceClassification(config).save_pretrained(run / "best")
    tok.save_pretrained(run / "best")
    write_json(run / RESULTS, {"task": "sst2"})
    return str(run / "best")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A Linformer classifier converted from a tiny BERT encoder with its WordPiece tokenizer (a converted MiniLM's
    layout: [CLS] ... [SEP], segment ids), recording no task."""
    from transformers import BertConfig, BertModel

    from tests.modeling.test_convert import save_tokenizer

    root = tmp_path_factory.mktemp("predict_bert")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=N, initializer_range=0.5)).save_pretrained(
        root / "bert")
    save_tokenizer(root / "bert", 40)
    model = LinformerForSequenceClassification.from_pretrained_encoder(root / "bert", projected_dim=8, num_labels=2,
                                                                       id2label=LABELS)
    model.save_pretrained(root / "clf")
    load_tokenizer(str(root / "bert")).save_pretrained(root / "clf")
    return str(root / "clf")


def _alone(model_dir, texts, pairs=None, max_length=None):
    """The model's label for each text (or pair) run alone, tokenized as finetuning tokenizes (cut to `max_length`
    tokens, else the model's n)."""
    from transformers import AutoModelForSequenceClassification

    tok = load_tokenizer(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    n = max_length or model.config.max_seq_len
    out = []
    with torch.no_grad():
        for i, text in enumerate(texts):
            args = (text, pairs[i]) if pairs else (text,)
            inputs = tok(*args, truncation=True, max_length=n, split_special_tokens=True, return_tensors="pt")
            out.append(LABELS[int(model(**inputs).logits.argmax())])
    return out


def _predict(model_dir, source, columns=None, max_length=None, **kw):
    buf = io.BytesIO()
    classifier = load_classifier_dir(model_dir, columns, max_length=max_length)
    summary = predict_file(classifier, source, buf, progress=False, **kw)
    return [json.loads(line) for line in buf.getvalue().decode().splitlines()], summary


def test_labels_are_the_models_own_on_each_text_alone_in_the_files_order(scratch, tmp_path):
    """Batches sorted by length, the output in the input's order; a row longer than n cut to it and counted."""
    source = tmp_path / "texts.tsv"
    source.write_text("sentence\tlabel\n" + "".join(f"{t}\t0\n" for t in WORDS))
    rows, summary = _predict(scratch, source, batch_size=2)
    assert [r["row"] for r in rows] == list(range(2, 2 + len(WORDS)))  # each row's line, as the readers name it
    assert [r["label"] for r in rows] == _alone(scratch, WORDS)
    assert len({r["label"] for r in rows}) == 2
    for r in rows:
        assert set(r["probs"]) == {"negative", "positive"} and sum(r["probs"].values()) == pytest.approx(1)
        assert r["score"] == max(r["probs"].values()) == r["probs"][r["label"]]
    assert (summary.rows, summary.skipped, summary.truncated) == (len(WORDS), 0, 1)


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".csv"])
def test_every_format_gives_the_same_labels_named_by_line(scratch, tmp_path, suffix):
    texts = WORDS[:4]
    source = tmp_path / f"in{suffix}"
    body = {".txt": "".join(f"{t}\n" for t in texts),
            ".jsonl": "".join(json.dumps({"sentence": t, "id": i}) + "\n" for i, t in enumerate(texts)),
            ".csv": "id,sentence\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(texts))}[suffix]
    source.write_text(body)
    rows, _ = _predict(scratch, source)
    first = 2 if suffix == ".csv" else 1
    assert [r["row"] for r in rows] == list(range(first, first + 4))
    assert [r["label"] for r in rows] == _alone(scratch, texts)


def test_a_converted_bert_classifier_reads_pairs_by_the_columns_given(converted, tmp_path):
    """A model that records no task: --text-columns names a pair's columns; each pair as finetuning encodes it
    (segment ids included)."""
    firsts, seconds = ["w5 w6", "w7 w8 w9", "w10", "w11 w12"], ["w13", "w14 w15", "w16 w17 w18", "w19"]
    source = tmp_path / "pairs.jsonl"
    source.write_text("".join(json.dumps({"q": a, "s": b}) + "\n" for a, b in zip(firsts, seconds)))
    rows, _ = _predict(converted, source, ("q", "s"), batch_size=3)
    assert [r["label"] for r in rows] == _alone(converted, firsts, seconds)
    with pytest.raises(TaskDataError, match=r"pairs.jsonl:1: no text \(a string\) under 'text'.*--text-columns"):
        _predict(converted, source)


def test_a_bad_row_is_refused_naming_its_line_or_skipped_and_counted(scratch, tmp_path):
    """An empty text is refused as finetuning refuses it, and a row of too many fields; --skip-bad-rows counts them."""
    source = tmp_path / "bad.tsv"
    source.write_text("sentence\tid\nthe cat\t1\na dog\ttoo\tmany\nthe garden\t3\n")
    with pytest.raises(TaskDataError, match=r"bad.tsv:3: malformed row.*; pass --skip-bad-rows to skip"):
        _predict(scratch, source)
    source.write_text("sentence\tid\nthe cat\t1\n   \t2\nthe garden\t3\n")
    with pytest.raises(TaskDataError, match=r"bad.tsv:3: empty text in column sentence.*, or pass --skip-bad-rows to skip"):
        _predict(scratch, source)
    source.write_text("sentence\tid\nthe cat\t1\n   \t2\na dog\ttoo\tmany\nthe garden\t4\n")
    rows, summary = _predict(scratch, source, skip_bad_rows=True)
    assert [r["row"] for r in rows] == [2, 5] and summary.skipped == 2
    source.write_text("sentence\tid\n   \t1\n")
    with pytest.raises(TaskDataError, match=r"all 1 rows are bad rows"):
        _predict(scratch, source, skip_bad_rows=True)


@pytest.mark.parametrize("suffix", [".txt", ".tsv", ".csv", ".jsonl"])
def test_a_line_of_whitespace_alone_is_left_out_as_an_empty_line_is(scratch, tmp_path, suffix):
    """A line of spaces, a lone form feed (a page break), a tab or U+2028 alone read as blank in the corpus, but a
    plain-text input refused them as "empty text", and a tsv or csv as "malformed row: 1 fields" (editors leave such
    lines at a file's end): each is left out, as an empty line is, the rows keeping their lines' numbers."""
    texts = ["the cat", "a dog sees the river", "the garden"]
    head, row = {".txt": ("", "{}"), ".tsv": ("sentence\tid\n", "{}\t0"), ".csv": ("sentence,id\n", '"{}",0'),
                 ".jsonl": ("", '{{"sentence": "{}"}}')}[suffix]
    source = tmp_path / f"in{suffix}"
    source.write_text(head + row.format(texts[0]) + "\n   \n\f\n" + row.format(texts[1]) + "\n\t \n\u2028\n"
                      + row.format(texts[2]) + "\n  \n", encoding="utf-8")
    rows, summary = _predict(scratch, source)
    first = 1 + bool(head)
    assert [r["row"] for r in rows] == [first, first + 3, first + 6] and summary.skipped == 0
    assert [r["label"] for r in rows] == _alone(scratch, texts)


def test_a_lone_surrogate_escaped_in_a_jsonl_line_is_a_bad_row_named_by_its_line(scratch, tmp_path):
    """json reads "\\ud800" as half of a UTF-16 pair, no character, which the tokenizer refused with a TypeError
    traceback (--skip-bad-rows too): it is a bad row naming its line and column; a whole pair is its character."""
    source = tmp_path / "surr.jsonl"
    source.write_text('{"sentence": "the cat"}\n{"sentence": "lone \\ud800 x"}\n{"sentence": "a dog \\ud83d\\ude00"}\n'
                      '{"sentence": "the garden \\udc00"}\n')
    with pytest.raises(TaskDataError, match=r"surr.jsonl:2: a lone surrogate \\ud800 in column sentence \(half of a "
                                            r"character's UTF-16 pair.*, or pass --skip-bad-rows to skip"):
        _predict(scratch, source)
    rows, summary = _predict(scratch, source, skip_bad_rows=True)
    assert [r["row"] for r in rows] == [1, 3] and summary.skipped == 2
    assert [r["label"] for r in rows] == _alone(scratch, ["the cat", "a dog \U0001f600"])


@pytest.mark.parametrize("name", ["reviews.txt", "reviews.tsv.gz"])
def test_a_gzip_file_is_named_as_compressed_with_the_command_that_decompresses_it(scratch, tmp_path, name):
    """A gzip file given as input was "not UTF-8 ... binary data?" (the corpus reader names gzip in the same case):
    one line saying it is gzip-compressed, with the command that writes the text beside it."""
    import gzip

    source = tmp_path / name
    source.write_bytes(gzip.compress(b"sentence\nthe cat\n"))
    text = tmp_path / ("reviews.tsv" if name.endswith(".gz") else "reviews-text.txt")
    with pytest.raises(TaskDataError, match=rf"{name}: gzip-compressed data, not text: decompress it first, e\.g\. "
                                            rf"gzip -dc \S*{name} > \S*{text.name}$"):
        _predict(scratch, source)


def test_a_model_that_is_not_a_classifier_is_refused(tmp_path, scratch):
    from linformer.modeling import LinformerForMaskedLM

    config = LinformerForSequenceClassification.from_pretrained(scratch).config
    LinformerForMaskedLM(LinformerConfig(**{**config.to_dict(), "architectures": None})).save_pretrained(tmp_path / "m")
    with pytest.raises(ConfigError, match=r"model_dir .*m is a LinformerForMaskedLM, not a sequence classifier"):
        load_classifier_dir(str(tmp_path / "m"))


def test_the_script_writes_its_output_whole_and_refuses_in_one_line(scratch, tmp_path, monkeypatch, capsys):
    source = tmp_path / "in.txt"
    source.write_text("the cat\na dog\n")
    out = tmp_path / "out.jsonl"
    assert run_script("predict", [scratch, "--input", str(source), "--output", str(out)], monkeypatch) == 0
    err = capsys.readouterr().err
    assert [json.loads(line)["row"] for line in out.read_text().splitlines()] == [1, 2]
    assert "predicted 2 rows" in err and "weights_sha256 " in err and "task sst2" in err
    source.write_text("the cat\nbin\x00ary\n")
    assert run_script("predict", [scratch, "--input", str(source), "--output", str(tmp_path / "o2.jsonl")],
                      monkeypatch) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and f"{source}:2: a NUL byte" in lines[0]
    assert not (tmp_path / "o2.jsonl").exists()  # nothing half-written
    assert run_script("predict", [str(tmp_path), "--input", str(source)], monkeypatch) == 2
    assert capsys.readouterr().err.count("error:") == 1
    assert run_script("predict", [scratch, "--input", str(tmp_path / "nope.txt")], monkeypatch) == 2
    assert f"error: --input {tmp_path / 'nope.txt'}: no such file" in capsys.readouterr().err
    assert run_script("predict", [scratch, "--input", str(source), "--output", str(source), "--overwrite"],
                      monkeypatch) == 2
    assert f"is {source}, which this command reads" in capsys.readouterr().err
    assert source.read_text() == "the cat\nbin\x00ary\n"


@pytest.mark.parametrize("inside", ["model", "run"])
def test_an_output_inside_the_model_or_run_it_reads_is_refused_even_with_overwrite(scratch, tmp_path, monkeypatch,
                                                                                  capsys, inside):
    """--output <the model's config.json> --overwrite wrote the predictions over the classifier it read (and a
    run's best/'s predict over its run's config.yaml, which says how it was finetuned): an output that is, or lies
    inside, what predict reads is refused in one line, overwrite or not, and nothing there changes."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(scratch, run / "best")
    (run / "config.yaml").write_text("task:\n  name: sst2\n")
    target = run / "best" / "config.json" if inside == "model" else run / "config.yaml"
    before = target.read_bytes()
    source = tmp_path / "in.txt"
    source.write_text("the cat\n")
    code = run_script("predict", [str(run / "best"), "--input", str(source), "--output", str(target), "--overwrite"],
                      monkeypatch)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "which this command reads" in lines[0], lines
    assert target.read_bytes() == before
    for record in (run / "run.json", run / "checkpoints" / "preds.jsonl"):  # the run's, which prune and resume read
        record.parent.mkdir(exist_ok=True)
        record.write_text("{}")
        assert run_script("predict", [str(run / "best"), "--input", str(source), "--output", str(record),
                                      "--overwrite"], monkeypatch) == 2
        assert record.read_text() == "{}"
    beside = run / "predictions.jsonl"  # a new file in the run's folder replaces nothing predict reads
    assert run_script("predict", [str(run / "best"), "--input", str(source), "--output", str(beside)],
                      monkeypatch) == 0
    assert len(beside.read_text().splitlines()) == 1


def test_the_task_a_models_card_records_gives_its_columns(converted, tmp_path):
    """A converted model finetuned on a pair task records it in its card: its columns are read without
    --text-columns, and columns of another count are refused."""
    import shutil

    from linformer.modeling.card import SIDECAR

    model = tmp_path / "qnli_model"
    shutil.copytree(converted, model)
    write_json(model / SIDECAR, {"finetuning": [{"task": "sst2", "max_length": 8}, {"task": "qnli", "max_length": 16}]})
    classifier = load_classifier_dir(str(model))
    assert classifier.columns == ("question", "sentence") and classifier.max_length == 16
    with pytest.raises(ConfigError, match=r"--text-columns q: the model was finetuned on qnli.*question, sentence"):
        load_classifier_dir(str(model), ("q",))
    source = tmp_path / "one.txt"
    source.write_text("w5 w6\n")
    with pytest.raises(ConfigError, match=r"one.txt: a plain text file holds one text a line.*pairs"):
        _predict(str(model), source)


def test_rows_are_cut_to_the_length_the_model_was_finetuned_at(scratch, tmp_path, monkeypatch, capsys):
    """A classifier finetuned at max_length 8 (its run's results.json) saw no longer input: its rows are cut there,
    not at its n (32), unless --max-length says otherwise (at most n); the summary says which and where from."""
    import shutil

    run = tmp_path / "short_run"
    shutil.copytree(Path(scratch).parent, run)
    write_json(run / RESULTS, {"task": "sst2", "max_length": 8})
    source = tmp_path / "texts.txt"
    source.write_text("".join(f"{t}\n" for t in WORDS))
    tok = load_tokenizer(scratch)
    longer = sum(len(tok(t, split_special_tokens=True)["input_ids"]) > 8 for t in WORDS)
    assert 1 < longer < len(WORDS)
    rows, summary = _predict(str(run / "best"), source)
    assert [r["label"] for r in rows] == _alone(str(run / "best"), WORDS, max_length=8)
    assert summary.truncated == longer
    assert load_classifier_dir(str(run / "best")).length_from.endswith(f"max_length in {run / RESULTS}")
    rows, summary = _predict(str(run / "best"), source, max_length=N)
    assert summary.truncated == 1 and [r["label"] for r in rows] == _alone(scratch, WORDS)
    assert run_script("predict", [str(run / "best"), "--input", str(source), "--output", str(tmp_path / "o.jsonl")],
                      monkeypatch) == 0
    assert f"truncated to 8 tokens (the length it was finetuned at: max_length in {run / RESULTS}): {longer}" in \
        capsys.readouterr().err
    with pytest.raises(ConfigError, match=rf"--max-length {N + 1} is above what the model .* takes \({N} tokens\)"):
        load_classifier_dir(str(run / "best"), max_length=N + 1, length_key="--max-length")


@pytest.fixture
def read_end_closed():
    """The writing end of a pipe whose reader has gone, as `predict.py ... | head -1` leaves it once head exits."""
    import os

    read, write = os.pipe()
    os.close(read)
    with open(write, "wb") as out:
        yield out


def test_a_pipe_whose_reader_has_gone_stops_the_work_before_the_next_batch(scratch, tmp_path, read_end_closed):
    """`| head` took its lines and exited: no row more is predicted for no one (the model is not run again)."""
    source = tmp_path / "texts.txt"
    source.write_text("".join(f"{t}\n" for t in WORDS))
    classifier = load_classifier_dir(scratch)
    batches = []
    classifier.model.register_forward_hook(lambda *_: batches.append(1))
    with pytest.raises(BrokenPipeError):
        predict_file(classifier, source, read_end_closed, batch_size=2, progress=False)
    assert batches == []


def test_the_script_ends_quietly_with_sigpipes_status_when_its_output_is_closed(scratch, tmp_path, read_end_closed,
                                                                                 monkeypatch, capsys):
    """As a process SIGPIPE ends: status 128 + 13, no traceback, no error line, no summary."""
    import sys

    source = tmp_path / "texts.txt"
    source.write_text("".join(f"{t}\n" for t in WORDS))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(read_end_closed))
    assert run_script("predict", [scratch, "--input", str(source)], monkeypatch) == 141
    err = capsys.readouterr().err
    assert "error" not in err.lower() and "Traceback" not in err and "predicted" not in err


def test_the_progress_bar_counts_the_files_lines_of_a_total(scratch, tmp_path, capsys):
    """The bar's total is the file's lines (``io.count_lines``), so a user sees how far it is; it ends full, a header
    and a blank last line included."""
    source = tmp_path / "texts.tsv"
    source.write_text("sentence\tlabel\n" + "".join(f"{t}\t0\n" for t in WORDS) + "\n")
    predict_file(load_classifier_dir(scratch), source, io.BytesIO(), batch_size=2, progress=True)
    total = len(WORDS) + 2
    assert f"{total}/{total}" in capsys.readouterr().err
    from linformer.data.io import count_lines

    for body, lines in [(b"", 0), (b"a\r\nb\r\n", 2), (b"a\nb", 2), (b"a\nb\r", 2), (b"a\rb\n", None)]:
        (tmp_path / "c.txt").write_bytes(body)
        assert count_lines(tmp_path / "c.txt", chunk=3) == lines, body


def test_a_model_whose_config_names_its_labels_generically_is_read_with_its_tasks_label_names(scratch, tmp_path):
    """A model finetuned by an earlier version has transformers' LABEL_0, LABEL_1 in its config: predict printed
    those although it names the task. The task's label names are given instead; without a recorded task, the
    config's own."""
    import shutil

    from linformer.data.tasks import get_task

    run = tmp_path / "old_run"
    shutil.copytree(Path(scratch).parent, run)
    config = json.loads((run / "best" / "config.json").read_text())
    generic = {str(i): f"LABEL_{i}" for i in range(2)}
    config.update(id2label=generic, label2id={v: int(k) for k, v in generic.items()})  # as an earlier version saved it
    (run / "best" / "config.json").write_text(json.dumps(config))
    source = tmp_path / "texts.txt"
    source.write_text("".join(f"{t}\n" for t in WORDS))
    assert load_classifier_dir(str(run / "best")).labels == list(get_task("sst2").label_names)
    rows, _ = _predict(str(run / "best"), source)
    assert [r["label"] for r in rows] == _alone(scratch, WORDS)  # LABELS: sst2's names, by id
    assert all(set(r["probs"]) == set(LABELS.values()) for r in rows)
    write_json(run / RESULTS, {})  # no task recorded: nothing to name them by
    assert load_classifier_dir(str(run / "best")).labels == ["LABEL_0", "LABEL_1"]


def test_a_recorded_length_above_the_models_n_cuts_rows_at_its_n(scratch, tmp_path):
    """A run's results.json may record a max_length the model cannot take (a model resized to a smaller n after its
    finetuning): rows are cut at the model's n, and predicted as the model predicts each alone."""
    import shutil

    run = tmp_path / "long_run"
    shutil.copytree(Path(scratch).parent, run)
    write_json(run / RESULTS, {"task": "sst2", "max_length": 4 * N})
    source = tmp_path / "texts.txt"
    source.write_text("".join(f"{t}\n" for t in WORDS))
    assert load_classifier_dir(str(run / "best")).max_length == N
    rows, summary = _predict(str(run / "best"), source)
    assert [r["label"] for r in rows] == _alone(scratch, WORDS) and summary.truncated == 1


PAIR_SPEC = {"text_fields": ["text", "text2"], "label_field": "label", "label_names": ["negative", "positive"],
             "raw_labels": ["0", "1"], "metrics": ["accuracy"], "title": "Pairy"}


def _pair_run(scratch, root: Path, results: dict, spec: dict | None = PAIR_SPEC) -> Path:
    """A finetuning run of a pair task of one's own, `pairy` (a config's spec block, registered in no process
    here): its best/ (the scratch classifier), its results.json `results`, and its config.yaml with the block."""
    import shutil

    from linformer.files.atomic import write_yaml

    run = root / "pairy-run"
    shutil.copytree(scratch, run / "best")
    write_json(run / RESULTS, results)
    write_yaml(run / "config.yaml", {"task": {"name": "pairy", "data_dir": "x", **({"spec": spec} if spec else {})}})
    return run


def test_a_pair_task_of_ones_own_is_read_from_its_runs_config_not_as_one_text_column(scratch, tmp_path):
    """A pair task defined in a config's spec block is registered in the process that finetuned it only: predict
    fell back to the column `text` and ran the pair model on each row's first sentence alone, without a word. The
    run's config.yaml records the block: its two columns are read from it (an older record's results.json names the
    task alone), and one column given is refused."""
    from linformer.data import tasks

    assert "pairy" not in tasks.TASKS
    run = _pair_run(scratch, tmp_path, {"task": "pairy"})
    classifier = load_classifier_dir(str(run / "best"))
    assert classifier.columns == ("text", "text2")
    firsts, seconds = WORDS[:4], WORDS[4:8]
    source = tmp_path / "pairs.tsv"
    source.write_text("text\ttext2\n" + "".join(f"{a}\t{b}\n" for a, b in zip(firsts, seconds)))
    rows, _ = _predict(str(run / "best"), source)
    assert [r["label"] for r in rows] == _alone(str(run / "best"), firsts, seconds)
    with pytest.raises(ConfigError, match=r"--text-columns text: the model was finetuned on pairy.*text, text2"):
        load_classifier_dir(str(run / "best"), ("text",))
    assert "pairy" not in tasks.TASKS  # read, not registered


def test_the_columns_a_models_record_names_win_and_a_task_recorded_nowhere_is_refused(scratch, tmp_path):
    """A model's card (an exported model, away from its run) names its task's text columns; a task of one's own
    whose columns nothing here records is refused rather than read from a column `text`."""
    from linformer.modeling.card import SIDECAR

    run = _pair_run(scratch, tmp_path, {"task": "pairy"}, spec=None)
    with pytest.raises(ConfigError, match=r"finetuned on pairy, whose text columns .*results.json does not give.*"
                                          r"--text-columns"):
        load_classifier_dir(str(run / "best"))
    assert load_classifier_dir(str(run / "best"), ("a", "b")).columns == ("a", "b")
    write_json(run / RESULTS, {"task": "pairy", "text_fields": ["q", "s"]})
    assert load_classifier_dir(str(run / "best")).columns == ("q", "s")
    moved = tmp_path / "exported"
    import shutil

    shutil.copytree(run / "best", moved)
    write_json(moved / SIDECAR, {"finetuning": [{"task": "pairy", "text_fields": ["question", "answer"],
                                                 "run_dir": "gone/run"}]})
    assert load_classifier_dir(str(moved)).columns == ("question", "answer")


@pytest.mark.parametrize("spec", [{**PAIR_SPEC, "format": "tsv"}, {**PAIR_SPEC, "old_key": 1}])
def test_a_recorded_spec_that_no_longer_reads_is_a_warning_where_the_columns_come_from_elsewhere(
        scratch, tmp_path, spec, capsys):
    """A run's config.yaml from another version (a reader since renamed, a key since retired) refused predict even
    with --text-columns given, or with the columns its results.json names: the spec is then wanted only for label
    names and text cleaning, and predict goes on with the model's own, saying why. Without them it is refused."""
    run = _pair_run(scratch, tmp_path, {"task": "pairy"}, spec=spec)
    with pytest.raises(ConfigError, match=r"config.yaml \(the run's recorded config\): task.spec"):
        load_classifier_dir(str(run / "best"))
    capsys.readouterr()
    classifier = load_classifier_dir(str(run / "best"), ("a", "b"))
    assert classifier.columns == ("a", "b") and classifier.labels == list(LABELS.values())
    assert classifier.clean is str.strip
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith(f"warning: {run / 'config.yaml'}") and \
        "read from --text-columns a,b" in said[0], said
    write_json(run / RESULTS, {"task": "pairy", "text_fields": ["q", "s"]})
    assert load_classifier_dir(str(run / "best")).columns == ("q", "s")
    assert "read from the text_fields of" in capsys.readouterr().err


def test_a_very_long_row_is_counted_as_cut_without_tokenizing_it_whole(scratch, tmp_path):
    """Encode tokenizes a long text from a prefix, but the count of cut rows tokenized every row at the limit again
    whole: a 20 MB line cost 15 s and 3 GB to be counted. It is counted from the same prefix, and counted right."""
    from dataclasses import replace

    book = " ".join(["the cat sat on a mat"] * 20_000)  # 420,000 characters, far past n = 32 tokens
    source = tmp_path / "long.txt"
    source.write_text(f"a cat\n{book}\nthe mat\n")
    classifier = load_classifier_dir(scratch, ("text",))
    given: list[str] = []
    summary = predict_file(replace(classifier, tokenizer=RecordingTokenizer(classifier.tokenizer, given)), source,
                           io.BytesIO(), progress=False)
    assert (summary.rows, summary.truncated) == (3, 1)
    assert max(map(len, given)) < len(book) // 100


def test_the_first_lines_and_the_bar_move_after_each_batch_not_a_whole_chunk(scratch, tmp_path, monkeypatch):
    """On a CPU a chunk of 32 batches at n = 512 is minutes: the first lines reach `out` (``| head -2``) after the
    first batch's work, and the bar moves after each batch; the lines stay in the file's order."""
    import linformer.train.predict as predict
    from linformer.progress import progress_bar

    source = tmp_path / "texts.txt"
    texts = [WORDS[i % len(WORDS)] for i in range(40)]
    source.write_text("".join(f"{t}\n" for t in texts))
    classifier = load_classifier_dir(scratch)
    forwards, bars, seen = [], [], []
    classifier.model.register_forward_hook(lambda *_: forwards.append(bars[0].n))

    def recorded_bar(show, **options):
        bars.append(progress_bar(True, mininterval=0, **options))
        return bars[-1]

    class Out(io.BytesIO):
        def write(self, data):
            seen.append((len(forwards), data.count(b"\n")))
            return super().write(data)

    monkeypatch.setattr(predict, "progress_bar", recorded_bar)
    out = Out()
    predict_file(classifier, source, out, batch_size=2, progress=True)
    assert seen[0] == (1, 2)  # one batch run, its two lines written
    assert len(forwards) == 20 and forwards[1:] == sorted(forwards[1:]) and forwards[1] > 0 and len(set(forwards)) > 10
    assert [json.loads(line)["row"] for line in out.getvalue().decode().splitlines()] == list(range(1, 41))
    assert [json.loads(line)["label"] for line in out.getvalue().decode().splitlines()] == _alone(scratch, texts)


def test_a_text_stream_is_written_as_text_and_one_not_open_for_writing_is_refused_before_any_work(scratch, tmp_path):
    source = tmp_path / "texts.txt"
    source.write_text("the cat\na dog\n")
    classifier = load_classifier_dir(scratch)
    with open(tmp_path / "out.jsonl", "w") as out:
        predict_file(classifier, source, out, progress=False)
    assert [json.loads(line)["row"] for line in (tmp_path / "out.jsonl").read_text().splitlines()] == [1, 2]
    text = io.StringIO()
    predict_file(classifier, source, text, progress=False)
    assert len(text.getvalue().splitlines()) == 2
    batches = []
    classifier.model.register_forward_hook(lambda *_: batches.append(1))
    closed = io.BytesIO()
    closed.close()
    with open(source, "rb") as read_only:
        for out in [read_only, closed, None]:
            with pytest.raises(ConfigError, match="not a stream open for writing"):
                predict_file(classifier, source, out, progress=False)
    assert batches == [] and source.read_text() == "the cat\na dog\n"


def test_a_pipe_or_standard_input_is_refused_as_such_and_output_dash_is_not_a_file(scratch, tmp_path, monkeypatch,
                                                                                   capsys):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for given in ["-", str(fifo)]:
        assert run_script("predict", [scratch, "--input", given], monkeypatch) == 2
        err = capsys.readouterr().err
        assert "a pipe or standard input is not read" in err and "no such file" not in err
    with pytest.raises(ConfigError, match="a pipe or standard input is not read"):
        predict_file(None, fifo, io.BytesIO())
    source = tmp_path / "in.txt"
    source.write_text("the cat\n")
    monkeypatch.chdir(tmp_path)
    for given in ["-", "/dev/stdout", str(fifo)]:
        assert run_script("predict", [scratch, "--input", str(source), "--output", given, "--overwrite"],
                          monkeypatch) == 2
        assert "predict writes to standard output without --output" in capsys.readouterr().err
    from linformer.files.locations import resolve_path

    assert not Path(resolve_path("-")).exists() and not (tmp_path / "-").exists()
