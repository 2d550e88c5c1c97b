import gzip
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


@pytest.mark.parametrize("key,value", [("vocab_size", "lots"), ("vocab_size", 0), ("min_frequency", 1.5),
                                       ("max_lines", -3)])
def test_a_count_that_is_not_a_whole_number_is_a_config_error(corpus_file, tmp_path, key, value):
    """data.vocab_size=lots was a TypeError traceback from the trainer; now one error line naming the key."""
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match=f"^{key}={value!r} must be a whole number of at least 1.$"):
        train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), **{key: value}, show_progress=False)
    assert not (tmp_path / "tok").exists()


def test_a_vocabulary_below_the_byte_alphabet_is_refused_before_training(corpus_file, tmp_path):
    """The trainer gave 261 tokens for vocab_size=10 without a word; the smallest vocabulary trains to its size."""
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^vocab_size=260 is below the smallest byte-level BPE vocabulary, 261 "):
        train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=260, show_progress=False)
    assert not (tmp_path / "tok").exists()
    out = train_tokenizer([str(corpus_file)], str(tmp_path / "tok"), vocab_size=261, show_progress=False)
    assert len(AutoTokenizer.from_pretrained(out)) == 261


def test_a_saved_tokenizers_hash_is_the_one_its_corpora_and_runs_recorded(tok_dir):
    """The hash of a tokenizer train_tokenizer saved is sha256 of its tokenizer.json as canonical JSON: the form every
    corpus manifest and run config recorded, so sharing one hash function with the split caches moved no record."""
    import hashlib
    import json

    data = json.loads((Path(tok_dir) / "tokenizer.json").read_text(encoding="utf-8"))
    assert data["truncation"] is None and data["padding"] is None
    canon = json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")
    assert tokenizer_hash(tok_dir) == hashlib.sha256(canon).hexdigest()[:16]
