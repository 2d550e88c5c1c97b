"""The length-policy measurement: per-example errors against the source, bucketed by length, and the best policy."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from linformer.report import length_policy as lp

from ..conftest import load_script

N = 32


def _source(tmp_path):
    torch.manual_seed(0)
    bert = BertModel(BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=N))
    with torch.no_grad():  # sharp attention, as a trained encoder has (a random one attends almost uniformly)
        for layer in bert.encoder.layer:
            layer.attention.self.query.weight.mul_(20)
            layer.attention.self.key.weight.mul_(20)
    bert.save_pretrained(tmp_path)
    return str(tmp_path)


def test_padded_batches_sort_by_length_and_pad_on_the_right():
    inputs = lp.padded_batches([[5, 6, 7], [5], [5, 6]], pad_id=0, batch_size=2)
    assert inputs.lengths.tolist() == [1, 2, 3]
    assert inputs.batches[0]["input_ids"].tolist() == [[5, 0], [5, 6]]
    assert inputs.batches[0]["attention_mask"].tolist() == [[1, 0], [1, 1]]


def test_exact_short_inputs_are_the_source_and_long_ones_are_not(tmp_path):
    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(5, 100, (L,), generator=g).tolist() for L in (3, 6, 8, 20, 30, 32)]
    inputs = lp.padded_batches(ids, pad_id=0, batch_size=4)
    policies = {name: lp.POLICIES[name] for name in ("slice", "slice, window mask, exact <= k")}
    results = lp.measure(_source(tmp_path), {"toy": inputs}, ks=[8], sharing="kv", n=N, policies=policies)
    exact = results["toy"]["k=8"]["slice, window mask, exact <= k"]["embedding"]
    sliced = results["toy"]["k=8"]["slice"]["embedding"]
    assert exact["1-16"]["examples"] == 3 and exact["17-32"]["examples"] == 3
    assert exact["1-16"]["mean"] < 1e-5 < sliced["1-16"]["mean"]  # 3, 6 and 8 tokens <= k: exact attention
    assert exact["17-32"]["mean"] > 1e-3  # longer inputs are projected either way
    assert lp.best_policy(results) == "slice, window mask, exact <= k"
    assert len(results["toy"]["k=8"]["slice"][lp.PER_EXAMPLE]) == 6  # what the verdict's interval pairs
    assert lp.best_margin(results)["examples"] == 6


def test_a_bf16_row_runs_the_model_in_bf16_against_the_fp32_source(tmp_path):
    """dtypes=("fp32", "bf16"): each policy twice, the bf16 one labelled and run in bf16 (its exact short inputs
    differ from the fp32 source by bf16's rounding, not by nothing), the reference in fp32 for both."""
    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(5, 100, (L,), generator=g).tolist() for L in (3, 6, 20, 30)]
    inputs = lp.padded_batches(ids, pad_id=0, batch_size=4)
    policy = "slice, window mask, exact <= k"
    results = lp.measure(_source(tmp_path), {"toy": inputs}, ks=[8], sharing="kv", n=N,
                         policies={policy: lp.POLICIES[policy]}, dtypes=("fp32", "bf16"))
    rows = results["toy"]["k=8"]
    assert list(rows) == [policy, f"{policy}, bf16"]
    fp32, bf16 = rows[policy]["embedding"]["1-16"]["mean"], rows[f"{policy}, bf16"]["embedding"]["1-16"]["mean"]
    assert fp32 < 1e-5 and 1e-4 < bf16 < 0.05  # bf16 keeps about 3 significant digits
    assert abs(rows[f"{policy}, bf16"]["mean_embedding"] - rows[policy]["mean_embedding"]) < 0.05
    rows[f"{policy}, bf16"]["mean_embedding"] = 0.0  # a bf16 row never wins the policy choice, whatever its error
    assert lp.best_policy(results) == policy


def test_buckets_hold_every_example_once():
    lengths = np.array([1, 16, 17, 64, 65, 512])
    buckets = lp.by_bucket(lengths, np.arange(6.0))
    assert sum(b["examples"] for b in buckets.values()) == 6
    assert buckets["1-16"] == {"examples": 2, "mean": 0.5} and buckets["257-512"] == {"examples": 1, "mean": 5.0}


def test_the_length_policy_script_refuses_a_k_above_n_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        load_script("length_policy").main(["--ks", "64", "1024", "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["error: --ks [64, 1024]: each k must be in 1..n=512"]
    assert list(tmp_path.iterdir()) == []


def test_a_length_below_one_is_blamed_on_n_not_on_the_ks(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        load_script("length_policy").main(["--n", "-1", "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == "error: argument --n: must be at least 1, not -1"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, line", [
    (["--sst2", "-5"], "error: argument --sst2: must be at least 0, not -5"),  # argtypes.at_least, as --n
    (["--longer-than", "512"], "error: --longer-than 512: a token count in 0..n-1 (--n 512)"),
    (["--landmarks"], "error: --landmarks changes the --local-windows rows: name at least one window"),
    (["--overlap"], "error: --overlap changes the --local-windows rows: name at least one window"),
])
def test_a_bad_example_choice_is_named_by_its_flag(argv, line, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        load_script("length_policy").main([*argv, "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == line and (len(err) == 1 or err[1].startswith("usage: "))  # argparse's line is followed by usage
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, said", [
    (["--local-windows", "-4"], "--local-windows -4: local_window=-4 must be a whole number >= 0."),
    (["--local-windows", "8", "--global-positions", "40", "-1"],
     "--global-positions 40 -1: global_positions=[40, -1]: [40] not a position in -32..31"),
    # the error named every option the models' settings come from, not the one at fault
    (["--local-windows", "40"], "--local-windows 40: local_window=40 must be a whole number in 0..max_seq_len (n=32)"),
])
def test_a_bad_model_setting_is_one_line_before_any_example_or_weight_loads(tmp_path, capsys, forbid_loading, argv,
                                                                           said):
    script = load_script("length_policy")
    source = _source(tmp_path / "bert")
    capsys.readouterr()  # saving the source shows a progress bar
    forbid_loading((lp, "load_task"))
    with pytest.raises(SystemExit) as stop:
        script.main(["--source", source, "--n", str(N), "--ks", "8", *argv,
                     "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {said}"), line
    assert not list(tmp_path.glob("r*"))


def test_landmark_rows_follow_each_local_window_row():
    policies = lp.with_local_keys([32, 128], [0, -1], local_only=True, landmarks=True)
    assert list(policies) == [lp.CONVERTED, f"{lp.CONVERTED}, window 32, global [0, -1]",
                              f"{lp.CONVERTED}, window 32, global [0, -1], landmarks",
                              f"{lp.CONVERTED}, window 128, global [0, -1]",
                              f"{lp.CONVERTED}, window 128, global [0, -1], landmarks"]
    assert policies[f"{lp.CONVERTED}, window 128, global [0, -1], landmarks"] == {
        **lp.POLICIES[lp.CONVERTED], "local_window": 128, "global_positions": [0, -1], "overlap_columns": "keep",
        "landmark_pooling": True}


def test_overlap_rows_follow_each_local_window_row_under_every_rule():
    """--overlap measures each window row again under "mask" and under "reduce", so that the two forms of one rule
    (no token counted twice) are compared on one report."""
    policies = lp.with_local_keys([64], [0, -1], local_only=True, overlap=True)
    row = f"{lp.CONVERTED}, window 64, global [0, -1]"
    assert list(policies) == [lp.CONVERTED, row, f"{row}, covered columns masked", f"{row}, reduced counts"]
    assert [policies[label].get("overlap_columns", "keep") for label in list(policies)[1:]] == ["keep", "mask",
                                                                                                "reduce"]


def test_buckets_reach_the_lengths_of_lengthened_models():
    buckets = lp.by_bucket(np.array([300, 600, 1500, 3000]), np.arange(4.0))
    assert list(buckets) == ["257-512", "513-1024", "1025-2048", "2049-4096"]


def _source_with_tokenizer(tmp_path, words):
    """``_source`` with a WordPiece tokenizer of ``words`` (one token each), as a converted encoder's directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    src = _source(tmp_path)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    PreTrainedTokenizerFast(tokenizer_object=wp, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(src)
    return src


def test_split_train_measures_train_reviews_never_the_test_ones_and_records_the_split(tmp_path, monkeypatch):
    """Where a default is chosen (--split train) the examples are train reviews, a review also in test dropped; the
    report and its JSON say which split measured. Train reviews are 20 tokens, test reviews 5, so the length buckets
    tell the splits apart."""
    import json

    words = ["good", "bad", "film", "plot", "actor"]
    src = _source_with_tokenizer(tmp_path / "src", words)
    mirror = tmp_path / "mirror"
    train = [(" ".join(words[(i + j) % 5] for j in range(20)), i % 2) for i in range(6)]
    test = [(" ".join(words[(i + j) % 3] for j in range(5)), i % 2) for i in range(6)]
    shared = ("good bad film plot actor", 1)  # 5 tokens, in both splits: never a train example
    for name, rows in (("train", [*train, shared]), ("test", [*test, shared])):
        (mirror / "imdb").mkdir(parents=True, exist_ok=True)
        (mirror / "imdb" / f"{name}.csv").write_text("id,label,rating,text\n" + "".join(
            f'x/{i},{y},{8 if y else 2},"{t}"\n' for i, (t, y) in enumerate(rows)))
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(mirror))
    script = load_script("length_policy")
    for split, bucket, other in (("train", "17-32", "1-16"), ("eval", "1-16", "17-32")):
        out = tmp_path / split
        assert script.main(["--source", src, "--sst2", "0", "--imdb", "10", "--ks", "4", "--n", str(N),
                            "--local-only", "--split", split, "--out", str(out)]) == 0
        record = json.loads(out.with_suffix(".json").read_text())
        rows = record["results"]["imdb"]["k=4"]
        buckets = next(iter(rows.values()))["embedding"]
        assert record["split"] == split
        assert record["machine"].startswith("Machine: ") and "1-minute load average" in record["machine"]
        assert buckets[bucket]["examples"] == (6 if split == "train" else 7) and other not in buckets
        md = out.with_suffix(".md").read_text()
        assert f"imdb {6 if split == 'train' else 7} {split} examples" in md
        assert ("none whose text is also in its test split" in md) == (split == "train")


@pytest.mark.parametrize("script, argv", [("length_policy", []), ("long_inputs", ["--classifier", "x"])])
def test_global_positions_without_windows_are_refused_not_ignored(script, argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        load_script(script).main([*argv, "--global-positions", "7", "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == ("error: --global-positions sets the global tokens of the "
                                                       "--local-windows rows: name at least one window")
    assert list(tmp_path.iterdir()) == []


def test_the_exact_key_options_default_to_the_converted_global_tokens_and_need_a_window():
    from linformer.cli import ArgumentParser
    from linformer.errors import ConfigError
    from linformer.modeling.convert import CONVERTED_EXACT_KEYS
    from linformer.report import measured

    ap = ArgumentParser()
    measured.add_exact_key_options(ap, "the rows")
    args = ap.parse_args(["--local-windows", "8"])
    measured.check_exact_key_options(args)
    assert args.global_positions == CONVERTED_EXACT_KEYS["global_positions"]
    with pytest.raises(ConfigError, match="^--overlap changes the --local-windows rows: name at least one window$"):
        measured.check_exact_key_options(ap.parse_args(["--overlap"]))


def test_a_report_records_the_options_it_measured_with_not_the_unset_default(tmp_path):
    """The record of a measurement's options (what a rerun is matched against) holds --global-positions as
    measured, the converted default filled in, not the None argparse left for "not given"."""
    from linformer.cli import ArgumentParser
    from linformer.files.outputs import file_record
    from linformer.modeling.convert import CONVERTED_EXACT_KEYS
    from linformer.report import measured

    ap = ArgumentParser()
    measured.add_exact_key_options(ap, "the rows")
    ap.add_argument("--out")
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(["--local-windows", "8", "--out", str(tmp_path / "r")])
    with measured.report_outputs(args, "length_policy", check=measured.check_exact_key_options):
        for ext in measured.EXTENSIONS:
            (tmp_path / f"r.{ext}").write_text("{}")
    settings = file_record(str(tmp_path / "r.json"))["settings"]
    assert settings["global_positions"] == list(CONVERTED_EXACT_KEYS["global_positions"])


class _Stop(Exception):
    pass


@pytest.mark.parametrize("script", ["length_policy", "long_inputs", "fidelity", "cls_probe", "model_checks"])
def test_the_measurement_scripts_resolve_out_against_the_repository_from_any_folder(script, tmp_path, monkeypatch):
    """As the Hydra commands and configs/paths say: a relative --out (and the default) is the repository's, not the
    current folder's."""
    import argparse

    from linformer.files.locations import repo_root

    parse = argparse.ArgumentParser.parse_args
    seen = {}

    def parse_then_stop(self, argv=None, namespace=None):
        seen["args"] = parse(self, argv, namespace)
        raise _Stop

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.chdir(tmp_path)
    needed = {"long_inputs": ["--classifier", "c"], "fidelity": ["m", "--corpus", "c", "--self-reference"],
              "cls_probe": ["r"]}.get(script, [])
    with pytest.raises(_Stop):
        load_script(script).main([*needed, "--out", "some/where"])
    assert seen["args"].out == str(repo_root() / "some" / "where")
    if script in ("length_policy", "long_inputs", "fidelity"):  # the default, read where the command's work starts
        import linformer.report.measured as measured
        from linformer.data.io import path_root
        from linformer.files.locations import resolve_path

        def outputs_then_stop(outputs, *args, **kwargs):
            seen["outputs"] = outputs
            raise _Stop

        monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse)
        monkeypatch.setattr(measured, "output_files", outputs_then_stop)
        with pytest.raises(_Stop):
            load_script(script).main(needed)
        assert seen["outputs"][0] == f"{resolve_path(path_root('reports_dir'))}/{script}.md"


@pytest.mark.parametrize("script", ["length_policy", "long_inputs"])
def test_an_empty_out_is_refused_as_every_command_refuses_it(script, capsys):
    """--out "" (an unset shell variable) named the repository itself as the report's stem: refused in argparse's
    one line, as every command's empty path is (``argtypes.path``)."""
    needed = {"long_inputs": ["--classifier", "c"]}.get(script, [])
    with pytest.raises(SystemExit) as stop:
        load_script(script).main([*needed, "--out", ""])
    assert stop.value.code == 2
    assert "argument --out: an empty path: give a path (an unset variable?)" in capsys.readouterr().err


def test_fidelity_reads_a_relative_corpus_from_the_repository_from_any_folder(tmp_path, monkeypatch):
    from linformer.files.locations import repo_root
    from linformer.report import fidelity

    seen = {}

    def measure(models, corpus, *args, **kw):
        seen["corpus"] = corpus
        raise _Stop

    monkeypatch.setattr(fidelity, "measure", measure)
    monkeypatch.setattr("linformer.modeling.loading.resolve_model_path", lambda path, *a: path)
    script = load_script("fidelity")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(_Stop):
        script.main(["m", "--corpus", "data/processed/c", "--self-reference", "--out", str(tmp_path / "f")])
    assert seen["corpus"] == str(repo_root() / "data" / "processed" / "c")


def _rows(**errors) -> dict:
    """One task at one k: each policy's row with its per-example embedding errors."""
    return {"toy": {"k=8": {label.replace("_", " "): {"dtype": "fp32", "mean_embedding": float(np.mean(e)),
                                                      lp.PER_EXAMPLE: list(e)} for label, e in errors.items()}}}


def test_the_best_policy_is_named_only_where_its_margin_over_the_runner_up_leaves_0_out():
    """A margin of 0.001 over 4 examples read "Best ...: **X**" as if settled: the line gives the margin over the
    runner-up with its interval paired over the examples, and says "no clear best" where that interval holds 0."""
    close = _rows(a=[0.40, 0.43, 0.38, 0.406], b=[0.41, 0.42, 0.39, 0.40], c=[0.9, 0.9, 0.9, 0.9])
    margin = lp.best_margin(close)
    assert (margin["best"], margin["runner_up"], margin["examples"]) == ("a", "b", 4)
    assert margin["lo"] < 0 < margin["hi"] and margin["margin"] == pytest.approx(0.001)
    line = lp.verdict(margin)
    assert line.startswith(f"{lp.VERDICT} no clear best: \"a\" 0.404, the runner-up \"b\" 0.405: lower by 0.001, "
                           "95% interval [") and line.endswith("paired over the 4 examples, which holds 0.")
    assert "**" not in line
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.5, 200)
    clear = _rows(a=base + 0.01 + rng.normal(0, 0.002, 200), b=base)
    margin = lp.best_margin(clear)
    assert 0 < margin["lo"] < margin["margin"] < margin["hi"] < 0.02
    assert lp.verdict(margin).startswith(f"{lp.VERDICT} **b** (") and "paired over the 200 examples)." in lp.verdict(
        margin)


def test_a_record_without_per_example_errors_renders_its_verdict_saying_it_has_no_interval(tmp_path):
    """The committed reports were measured before the per-example errors were recorded: --render rebuilds them with
    the margin and no invented interval."""
    import json
    from pathlib import Path

    measured = json.loads((Path(__file__).resolve().parents[2] / "docs" / "results" / "length_policy.json").read_text())
    lp.render(measured, str(tmp_path / "r"))
    line = next(x for x in (tmp_path / "r.md").read_text().splitlines() if x.startswith(lp.VERDICT))
    assert line.startswith(f"{lp.VERDICT} **resample, exact <= k** (0.360, the runner-up \"resample\" 0.403: "
                           "lower by 0.043; no interval: ")
    assert line.endswith("no interval: this record keeps no per-example errors (it was measured before they were "
                         "recorded); a new measurement has them).")
    again = json.loads((tmp_path / "r.json").read_text())
    assert again["results"] == measured["results"] and "lo" not in again["best_margin"]


def test_the_report_gives_the_median_embedding_error_where_the_rows_keep_per_example_errors(tmp_path):
    """An error target stated as a median was checked by hand from the JSON: the table gives each row's median over
    the examples beside its mean, and a record without per-example errors renders as before, means only."""
    rows = _rows(a=[0.1, 0.2, 0.9], b=[0.3, 0.31, 0.32])
    for r, h in zip(rows["toy"]["k=8"].values(), (0.5, 0.4)):
        r.update(embedding={"1-16": {"examples": 3, "mean": r["mean_embedding"]}}, mean_hidden=h,
                 hidden={"1-16": {"examples": 3, "mean": h}})
    assert lp.median_embedding(rows["toy"]["k=8"]["a"]) == pytest.approx(0.2)
    text = lp.to_markdown(rows, [], "p.png")
    assert ("## toy, k=8: relative error of the mean-pooled embedding, mean (hidden states in brackets) and median "
            "over the examples") in text
    assert "| policy | all: mean | all: median | 1-16 tokens (3) |" in text
    assert "| a | 0.400 (0.500) | 0.200 | 0.400 (0.500) |" in text
    assert "| b | 0.310 (0.400) | 0.310 | 0.310 (0.400) |" in text
    for r in rows["toy"]["k=8"].values():
        del r[lp.PER_EXAMPLE]
    text = lp.to_markdown(rows, [], "p.png")
    assert "median" not in text and "| policy | all | 1-16 tokens (3) |" in text


def test_run_is_the_script_s_whole_measurement_and_checks_its_options_before_any_model(tmp_path, monkeypatch):
    """scripts/length_policy.py checked its options and chained the package's calls itself; length_policy.run is
    the measurement a Python user calls, with the script's checks and their lines (a move: run is new)."""
    from linformer.errors import ConfigError

    looked_up = []
    monkeypatch.setattr(lp, "resolve_model_path", lambda *a: looked_up.append(a))
    for ks, longer, line in (([64, 1024], 0, "--ks [64, 1024]: each k must be in 1..n=512"),
                             ([64], 512, "--longer-than 512: a token count in 0..n-1 (--n 512)")):
        with pytest.raises(ConfigError) as refused:
            lp.run("minilm", ks, "layerwise", 512, {"sst2": 8}, str(tmp_path / "r"), longer_than_tokens=longer)
        assert str(refused.value) == line
    assert not looked_up and list(tmp_path.iterdir()) == []
