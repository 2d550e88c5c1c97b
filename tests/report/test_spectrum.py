import json
from pathlib import Path

import pytest
import torch

from linformer.errors import ConfigError, CorpusError, DataError
from linformer.report.spectrum import (
    analyze_spectrum,
    attention_spectrum,
    cumulative_singular_values,
    default_k,
)


def test_rank_one_is_one_at_index_one():
    n = 16
    u = torch.rand(n, 1)
    P = (u @ torch.ones(1, n)) / n            # rank 1, rows of a stochastic-like matrix
    c = cumulative_singular_values(P)
    assert torch.allclose(c, torch.ones(n, dtype=torch.float64), atol=1e-9)


def test_identity_is_linear():
    n = 10
    c = cumulative_singular_values(torch.eye(n))
    assert torch.allclose(c, torch.arange(1, n + 1, dtype=torch.float64) / n)


def test_batched_and_monotone():
    P = torch.rand(3, 2, 8, 8).softmax(-1)
    c = cumulative_singular_values(P)
    assert c.shape == (3, 2, 8)
    assert torch.all(c[..., 1:] >= c[..., :-1] - 1e-12) and torch.allclose(c[..., -1], torch.ones(3, 2, dtype=torch.float64))


def test_default_k():
    assert default_k(512) == 128 and default_k(4096) == 128 and default_k(128) == 32 and default_k(2) == 1


def _tiny_model(tmp_path, tokenizer=None):
    import linformer  # noqa: F401
    from linformer import LinformerConfig, LinformerForMaskedLM

    cfg = LinformerConfig(vocab_size=len(tokenizer) if tokenizer else 50, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=32, max_seq_len=16, projected_dim=4)
    model = LinformerForMaskedLM(cfg)
    model.save_pretrained(tmp_path / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def test_full_attention_spectrum_of_a_model(tmp_path, monkeypatch):
    from linformer.report.spectrum import load_full_attention_model

    path = _tiny_model(tmp_path)
    model = load_full_attention_model(path)
    assert model.config.attention == "full"
    # configs/spectrum.yaml's device=auto (what device=cuda's refusal recommends) went to torch as it was: a traceback
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert next(load_full_attention_model(path, "auto").parameters()).device == torch.device("cpu")
    ids = torch.randint(3, 50, (3, 16))
    cum = attention_spectrum(model, ids, batch_size=2)
    assert cum.shape == (2, 2, 16)
    assert torch.allclose(cum[..., -1], torch.ones(2, 2, dtype=torch.float64))


def _text(tmp_path) -> str:
    """A text file for the tests whose windows are stubbed: text_path must name a file."""
    path = tmp_path / "some.txt"
    path.write_text("some text\n")
    return str(path)


def test_analyze_spectrum_writes_plots_and_json(tmp_path, monkeypatch):
    from linformer.files import locations
    from linformer.report import spectrum

    monkeypatch.setattr(locations, "repo_root", lambda: tmp_path.resolve())  # the model and text in the repository
    path = _tiny_model(tmp_path)
    monkeypatch.setattr(spectrum, "windows_from_text", lambda tok, p, n, w, seed, max_lines: torch.randint(3, 50, (w, n)))
    monkeypatch.setattr(spectrum, "load_tokenizer", lambda *a, **k: None)  # the model has no tokenizer saved
    r = analyze_spectrum(path, tmp_path / "out", "s", text_path=_text(tmp_path), num_windows=4, k=3)
    data = json.loads((tmp_path / "out" / "s.json").read_text())
    assert data["n"] == 16 and data["k"] == 3 and data["layers"] == 2 and data["heads"] == 2
    assert data["value_at_k"][0][0] == pytest.approx(data["cumulative"][0][0][2], abs=1e-4)
    assert r["num_windows"] == 4 and r["plots"] == ["s_curves.png", "s_heatmap.png"]
    assert data["machine"].startswith("CPU: ") and "torch threads: " in data["machine"] and data["command"] is None
    # named as a run's record names them: the JSON is committed (docs/results), and names no path of this machine
    assert str(tmp_path) not in (tmp_path / "out" / "s.json").read_text()
    assert Path(locations.resolve_path(data["model_path"])) == Path(path).resolve()
    import matplotlib.image

    for name in r["plots"]:  # whole PNGs with something drawn on them
        pixels = torch.as_tensor(matplotlib.image.imread(tmp_path / "out" / name))
        assert pixels.ndim == 3 and len(torch.unique(pixels.reshape(-1, pixels.shape[-1]), dim=0)) > 10


class _CharTokenizer:
    """One id per character (offset past the specials): enough to check how windows are cut."""

    bos_token_id, eos_token_id = 0, 2

    def __call__(self, lines, add_special_tokens=False, verbose=True):
        assert add_special_tokens is False
        return {"input_ids": [[3 + ord(c) % 40 for c in line] for line in lines]}


def test_windows_from_text(tmp_path):
    import gzip

    from linformer.report.spectrum import windows_from_text

    path = tmp_path / "text.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("".join(f"paragraph number {i} with some words\n\n" for i in range(40)))
    ids = windows_from_text(_CharTokenizer(), path, n=16, num_windows=5, seed=0, max_lines=1000)
    assert ids.shape == (5, 16)
    assert (ids[:, 0] == 0).all() and (ids[:, -1] == 2).all()
    with pytest.raises(ValueError, match="fewer than one window"):
        windows_from_text(_CharTokenizer(), path, n=4096, num_windows=1, max_lines=1)
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"text\n\x00\x01\x02 bytes\n")  # read as the corpus reads text: a binary file is refused
    with pytest.raises(CorpusError, match=rf"{binary}:2: malformed line \(NUL byte; binary file\?\)"):
        windows_from_text(_CharTokenizer(), binary, n=16, num_windows=1)


@pytest.mark.parametrize("content", [b"", b"\n  \n\t\n", "gz"])
def test_a_text_file_without_text_is_one_error_naming_it(content, tmp_path):
    """An empty file, blank lines only, or an empty .txt.gz: the tokenizer failed on the empty batch (an IndexError
    traceback); it is the error a short file gets."""
    import gzip

    from transformers import AutoTokenizer

    from linformer.report.spectrum import windows_from_text

    tok = AutoTokenizer.from_pretrained(_bert_with_wordpiece(tmp_path / "bert"))
    path = tmp_path / ("empty.txt.gz" if content == "gz" else "empty.txt")
    path.write_bytes(gzip.compress(b"") if content == "gz" else content)
    with pytest.raises(DataError, match=rf"text_path={path}: no text in the first 20000 lines \(an empty file"):
        windows_from_text(tok, path, n=8, num_windows=2)


def test_a_missing_text_path_is_named_before_the_model_loads(tmp_path, monkeypatch):
    from linformer.report import spectrum

    def no_load(*args, **kw):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(spectrum, "load_full_attention_model", no_load)
    with pytest.raises(ConfigError, match=r"text_path=.*nonexistent.txt: no such file: give a .txt or .txt.gz"):
        analyze_spectrum(_tiny_model(tmp_path), tmp_path / "out", "s", text_path=str(tmp_path / "nonexistent.txt"))


def test_corpus_of_another_tokenizer_is_refused(tmp_path, monkeypatch, capsys):
    """Windows from a corpus packed with tokenizer A fed to a model trained with tokenizer B would be other words:
    analyze_spectrum.py refuses with one `error:` line naming both tokenizers (exit 2); with A it runs. The script's
    main in-process, with its command line."""
    from transformers import AutoTokenizer

    from linformer.data import prepare_corpus, train_tokenizer
    from tests.conftest import as_command, load_script
    from tests.data.conftest import write_corpus

    text = write_corpus(tmp_path / "corpus.txt")
    tok_a = train_tokenizer([str(text)], str(tmp_path / "tok_a"), vocab_size=300, min_frequency=1, show_progress=False)
    tok_b = train_tokenizer([str(text)], str(tmp_path / "tok_b"), vocab_size=350, min_frequency=1, show_progress=False)
    prepare_corpus([str(text)], tok_a, str(tmp_path / "corpus"), n=16, val_fraction=0.2, num_proc=1)
    model_b = _tiny_model(tmp_path / "b", AutoTokenizer.from_pretrained(tok_b))
    monkeypatch.chdir(tmp_path)
    as_command(monkeypatch, ["scripts/analyze_spectrum.py", f"model_path={model_b}",
                             f"corpus_dir={tmp_path / 'corpus'}", f"out_dir={tmp_path / 'out'}",
                             "num_windows=2", f"hydra.run.dir={tmp_path / 'run'}"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        load_script("analyze_spectrum").main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err, err[-3000:]
    error = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and str(model_b) in error[0] and tok_a in error[0]
    assert not (tmp_path / "out" / "spectrum.json").exists()
    model_a = _tiny_model(tmp_path / "a", AutoTokenizer.from_pretrained(tok_a))
    assert analyze_spectrum(model_a, tmp_path / "out", corpus_dir=tmp_path / "corpus", num_windows=2)["n"] == 16


def test_a_corpus_holding_ids_past_the_model_s_vocabulary_is_refused_by_the_spectrum_and_fidelity(tmp_path):
    """A corpus whose blocks hold an id the model has no embedding for (its files and listing rewritten, its manifest
    naming the model's tokenizer) was an IndexError traceback in the forward of analyze_spectrum and fidelity: each
    refuses it naming the corpus's file, the id and the vocabulary, as pretraining does."""
    from transformers import AutoTokenizer

    from linformer.data import prepare_corpus, train_tokenizer
    from linformer.errors import CorpusError
    from linformer.report import fidelity
    from tests.conftest import put_token_id
    from tests.data.conftest import write_corpus

    text = write_corpus(tmp_path / "corpus.txt")
    tok = train_tokenizer([str(text)], str(tmp_path / "tok"), vocab_size=300, min_frequency=1, show_progress=False)
    corpus = tmp_path / "corpus"
    prepare_corpus([str(text)], tok, str(corpus), n=16, val_fraction=0.2, num_proc=1)
    model = _tiny_model(tmp_path / "m", AutoTokenizer.from_pretrained(tok))
    arrow = put_token_id(corpus, 5000, "validation")
    past = rf"prepared corpus {corpus} holds token id 5,000 \(in validation/{arrow.name}\), outside the model's vocabulary"
    with pytest.raises(CorpusError, match=past):
        analyze_spectrum(model, tmp_path / "out", corpus_dir=corpus, num_windows=2)
    with pytest.raises(CorpusError, match=past):
        fidelity.measure({"m": str(model)}, str(corpus), [16], blocks=2)


def test_a_run_directory_is_read_through_its_model_and_a_non_model_is_one_error(tmp_path, monkeypatch):
    """`model_path=outputs/pretrain/<run>` works as in every other command; a directory without a model is a
    CheckpointError naming it (it was a transformers traceback)."""
    from linformer.errors import CheckpointError
    from linformer.report import spectrum

    run = tmp_path / "run"
    run.mkdir()
    _tiny_model(run)  # run/model, as a pretraining run has it
    monkeypatch.setattr(spectrum, "windows_from_text", lambda tok, p, n, w, seed, max_lines: torch.randint(3, 50, (w, n)))
    monkeypatch.setattr(spectrum, "load_tokenizer", lambda *a, **k: None)  # the model has no tokenizer saved
    assert analyze_spectrum(run, tmp_path / "out", "s", text_path=_text(tmp_path), num_windows=2, k=3)["n"] == 16
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"model_path='.*empty'.* holds no model"):
        analyze_spectrum(tmp_path / "empty", tmp_path / "out2", "s", text_path="unused.txt")


def _bert_with_wordpiece(path, size=16, n=16):
    """A tiny BERT encoder (no MLM head) saved with a WordPiece tokenizer of `size` tokens (words w5, w6, ...):
    BERT's layout, where the tokenizer has [CLS] and [SEP] but no bos or eos."""
    from transformers import BertConfig, BertModel

    from tests.modeling.test_convert import save_tokenizer

    BertModel(BertConfig(vocab_size=size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=n)).save_pretrained(path)
    save_tokenizer(path, size)
    return path


def test_a_bert_encoder_gives_its_spectrum_from_raw_text(tmp_path):
    """The paper's Figure 1 is a pretrained RoBERTa's: a BERT-family encoder (model_type bert, no MLM head, a
    tokenizer without bos/eos) is read with eager attention, its n is its position table's length, and its windows
    are [CLS] ... [SEP]. It was a TypeError (the Linformer-only `attention` argument) before."""
    from linformer.report.spectrum import load_full_attention_model

    words = [f"w{i}" for i in range(5, 13)]
    path = _bert_with_wordpiece(tmp_path / "bert")
    text = tmp_path / "text.txt"
    text.write_text("".join(" ".join(words[(i + j) % 8] for j in range(30)) + "\n" for i in range(20)))
    r = analyze_spectrum(path, tmp_path / "out", "s", text_path=text, num_windows=3, k=4)
    assert r["n"] == 16 and r["layers"] == 2 and r["heads"] == 2 and r["num_windows"] == 3
    assert all(row[-1] == pytest.approx(1.0) for layer in r["cumulative"] for row in layer)
    model = load_full_attention_model(path)
    assert type(model).__name__ == "BertModel" and model.config._attn_implementation == "eager"


def test_bert_windows_are_cls_body_sep(tmp_path):
    from transformers import AutoTokenizer

    from linformer.report.spectrum import windows_from_text

    tok = AutoTokenizer.from_pretrained(_bert_with_wordpiece(tmp_path / "bert"))
    text = tmp_path / "text.txt"
    text.write_text("w5 w6 w7 " * 20 + "\n")
    ids = windows_from_text(tok, text, n=8, num_windows=2, seed=0)
    assert (ids[:, 0] == tok.cls_token_id).all() and (ids[:, -1] == tok.sep_token_id).all()
    assert not (ids[:, 1:-1] == tok.unk_token_id).any()


def test_analyze_spectrum_takes_the_names_every_stage_takes_and_refuses_a_missing_gpu(tmp_path, monkeypatch):
    """model_path is resolved as every stage resolves it (minilm, a hub name), not made a path below the working
    directory first; a device the machine lacks is one error naming the key, before the model loads."""
    from omegaconf import OmegaConf

    from linformer.errors import ConfigError
    from linformer.runconfig.data import SpectrumSpec

    cfg = OmegaConf.create({"model_path": "minilm", "corpus_dir": None, "text_path": "t.txt", "max_lines": 10,
                            "num_windows": 2, "batch_size": 1, "k": None, "seed": 0, "device": "cpu",
                            "description": None, "out_dir": str(tmp_path / "out"), "prefix": "s", "overwrite": False})
    assert SpectrumSpec.read(cfg).model_path == "minilm"
    assert SpectrumSpec.read(OmegaConf.merge(cfg, {"model_path": "user/model"})).model_path == "user/model"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"^device='cuda': this machine has no CUDA device"):
        SpectrumSpec.read(OmegaConf.merge(cfg, {"device": "cuda"}))
    with pytest.raises(ConfigError, match=r"^device='gpu' is not a device here"):
        SpectrumSpec.read(OmegaConf.merge(cfg, {"device": "gpu"}))


def test_the_figures_are_rendered_again_from_the_json_nothing_measured(tmp_path, monkeypatch):
    """spectrum_* could only be drawn by running the model: --render draws today's figures from the JSON's curves,
    and the JSON's numbers stay as they were."""
    import json
    from pathlib import Path

    from linformer.report import measured, spectrum

    cum = [[[round((i + 1) / 8, 4) for i in range(8)] for _ in range(2)] for _ in range(2)]
    data = {"model_path": "/x/model", "description": "tiny", "n": 8, "k": 2, "layers": 2, "heads": 2,
            "num_windows": 4, "value_at_k": [[0.25, 0.25], [0.25, 0.25]], "cumulative": cum,
            "plots": ["old_curves.png", "old_heatmap.png"]}
    (tmp_path / "old.json").write_text(json.dumps(data))
    titles = []
    monkeypatch.setattr(spectrum, "plot_curves", lambda c, path, title, k: titles.append(title) or Path(path))
    monkeypatch.setattr(spectrum, "plot_heatmap", lambda a, path, title, k: titles.append(title) or Path(path))
    assert measured.render_main(["--render", str(tmp_path / "old.json"), "--out", str(tmp_path / "new")],
                                "scripts/analyze_spectrum.py", "analyze_spectrum",
                                ("_curves.png", "_heatmap.png", ".json"), spectrum.render) == 0
    assert titles == ["Cumulative singular values of P: tiny (n=8, 4 windows)", "Cumulative value at index 2 (n=8)\ntiny"]
    assert json.loads((tmp_path / "new.json").read_text()) == {**data, "plots": ["new_curves.png", "new_heatmap.png"]}
    (tmp_path / "bad.json").write_text(json.dumps({"n": 8}))
    with pytest.raises(SystemExit):  # one error line, nothing written
        measured.render_main(["--render", str(tmp_path / "bad.json"), "--out", str(tmp_path / "bad2")],
                             "scripts/analyze_spectrum.py", "analyze_spectrum", (".json",), spectrum.render)
    assert not (tmp_path / "bad2.json").exists()


def test_fewer_windows_than_asked_are_said_and_both_counts_recorded(tmp_path, monkeypatch, caplog):
    """num_windows above what the sample holds is measured on what there is, with a warning naming the key and both
    counts; the JSON keeps the count asked for beside the count measured."""
    from linformer.report import spectrum

    path = _tiny_model(tmp_path)
    monkeypatch.setattr(spectrum, "windows_from_text", lambda tok, p, n, w, seed, max_lines: torch.randint(3, 50, (2, n)))
    monkeypatch.setattr(spectrum, "load_tokenizer", lambda *a, **k: None)
    with caplog.at_level("WARNING", logger="linformer.report.spectrum"):
        r = analyze_spectrum(path, tmp_path / "out", "s", text_path=_text(tmp_path), num_windows=1000, k=3)
    assert r["num_windows"] == 2 and r["num_windows_asked"] == 1000
    assert "num_windows=1000" in caplog.text and "holds 2 windows" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="linformer.report.spectrum"):
        analyze_spectrum(path, tmp_path / "out", "s", text_path=_text(tmp_path), num_windows=2, k=3, overwrite=True)
    assert "num_windows" not in caplog.text


def test_a_converted_linformer_with_exact_keys_gives_its_full_attention_spectrum(tmp_path):
    """A converted Linformer (local_window=128, global_positions=[0, -1], convert's defaults) loaded with
    attention="full" was refused, advising local_window=0 and global_positions=[], which analyze_spectrum.py cannot
    take: its window and global tokens are cleared as convert's model.attention=full clears them."""
    import linformer  # noqa: F401
    from linformer import LinformerConfig, LinformerForMaskedLM
    from linformer.report.spectrum import load_full_attention_model

    cfg = LinformerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=32, max_seq_len=16, projected_dim=4, local_window=4,
                          global_positions=[0, -1])
    LinformerForMaskedLM(cfg).save_pretrained(tmp_path / "model")
    model = load_full_attention_model(tmp_path / "model")
    assert (model.config.attention, model.config.local_window, model.config.global_positions) == ("full", 0, [])
    cum = attention_spectrum(model, torch.randint(3, 50, (2, 16)), batch_size=2)
    assert cum.shape == (2, 2, 16)
