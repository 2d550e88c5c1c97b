"""The long-input report: a classifier lengthened, with full and Linformer attention, measured side by side."""

import numpy as np
import pytest
import torch
from transformers import RobertaConfig, RobertaForSequenceClassification

from linformer.errors import ConfigError
from linformer.modeling import LinformerForSequenceClassification
from linformer.report import long_inputs

from ..conftest import load_script

N = 32


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A tiny full-mode Linformer classifier at n = 32 (a finetuned one stands in: only the weights' shapes count)."""
    root = tmp_path_factory.mktemp("long")
    torch.manual_seed(0)
    RobertaForSequenceClassification(RobertaConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                                                   num_attention_heads=4, intermediate_size=64,
                                                   max_position_embeddings=N + 2, type_vocab_size=1)
                                     ).save_pretrained(root / "roberta")
    LinformerForSequenceClassification.from_pretrained_encoder(root / "roberta", attention="full").save_pretrained(
        root / "full")
    return str(root / "full")


def _examples(count=9, seed=0):
    rng = np.random.default_rng(seed)
    ids = [[0, *rng.integers(5, 50, size=int(t)).tolist(), 2] for t in rng.integers(N, 3 * N, size=count)]
    return ids, rng.integers(0, 2, size=count)


def test_truncation_keeps_the_closing_token():
    assert long_inputs.truncate([0, 5, 6, 7, 2], 3) == [0, 5, 2] and long_inputs.truncate([0, 5, 2], 8) == [0, 5, 2]


def test_padded_batched_predictions_are_each_example_alone(classifier):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(classifier).eval()
    ids, _ = _examples()
    batched = long_inputs.predict(model, ids, N, pad_id=1, batch_size=4)
    with torch.no_grad():
        alone = [int(model(input_ids=torch.tensor([long_inputs.truncate(x, N)])).logits.argmax()) for x in ids]
    assert batched.tolist() == alone


def test_measure_reports_each_model_side_by_side(classifier):
    ids, labels = _examples()
    result = long_inputs.measure(classifier, ids, labels, [2 * N, 4 * N], k=8, sharing="layerwise", pad_id=1,
                                 batch_size=4, cost_reps=1, progress=lambda _: None)
    rows = result["rows"]
    assert [(r["model"], r["n"]) for r in rows] == [("as finetuned", N), ("full", 2 * N), ("linformer k=8", 2 * N),
                                                    ("full", 4 * N), ("linformer k=8", 4 * N)]
    assert rows[0]["truncated"] == 9 and rows[3]["truncated"] == 0  # every example is longer than N, none than 4N
    for r in rows:
        correct = r["accuracy"] * len(labels)
        assert abs(correct - round(correct)) < 1e-9 and r["interval"][0] <= r["accuracy"] <= r["interval"][1]
    assert "agreement" not in rows[1] and 0 <= rows[2]["agreement"] <= 1 and rows[2]["ms"] > 0
    assert rows[1]["threads"] == str(torch.get_num_threads()) and rows[2]["threads"]  # each model's, per row
    md, pairs = long_inputs.to_markdown(result, ["header"]).split("## Paired differences")
    assert md.count("| linformer k=8 |") == 2 and "| as finetuned | 32 |" in md
    assert pairs.count("| as finetuned (n = 32) |") == 4  # every lengthened row against the truncated classifier


def test_a_finetuned_hf_classifier_is_measured_as_its_full_mode_linformer_is(classifier):
    """A BERT/RoBERTa-family classifier (a finetuning run's best/ of an HF encoder) is converted at each n as the
    full-mode Linformer made from it is: the same rows, the same predictions."""
    from pathlib import Path

    ids, labels = _examples()
    kw = dict(k=8, sharing="layerwise", pad_id=1, batch_size=4, cost_reps=1, progress=lambda _: None)
    ours = long_inputs.measure(classifier, ids, labels, [2 * N], **kw)["rows"]
    hf = long_inputs.measure(str(Path(classifier).parent / "roberta"), ids, labels, [2 * N], **kw)["rows"]
    assert [(r["model"], r["n"]) for r in hf] == [(r["model"], r["n"]) for r in ours]
    assert [r["predictions"] for r in hf] == [r["predictions"] for r in ours]


@pytest.mark.parametrize("argv, line", [
    (["--ns", "16", "--k", "8"], (f"error: --ns [16] --k 8: every n must be above the classifier's n = {N}, and k "
                                  "below every n")),
    (["--landmarks"], "error: --landmarks changes the --local-windows rows: name at least one window"),
    (["--overlap"], "error: --overlap changes the --local-windows rows: name at least one window"),
    (["--ns", "64", "--k", "8", "--local-windows", "8", "--global-positions", "70"],
     ("error: --global-positions 70: global_positions=[70]: [70] not a position in -64..63 (max_seq_len n=64; "
      "negative counts from each row's last real token).")),
    (["--ns", "64", "--k", "8", "--local-windows", "80"],
     "error: --local-windows 80: local_window=80 must be a whole number in 0..max_seq_len (n=64).")
])
def test_the_script_refuses_bad_options_in_one_line(classifier, tmp_path, capsys, argv, line):
    with pytest.raises(SystemExit) as stop:
        load_script("long_inputs").main(["--classifier", classifier, *argv, "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [line]
    assert list(tmp_path.iterdir()) == []  # nothing written at the output paths


def test_local_global_rows_predictions_ratios_and_the_majority_rate(classifier):
    ids, labels = _examples()
    result = long_inputs.measure(classifier, ids, labels, [2 * N], k=8, sharing="layerwise", pad_id=1, batch_size=4,
                                 cost_reps=1, local_windows=(8,), progress=lambda _: None, landmarks=True)
    rows = result["rows"]
    assert [r["model"] for r in rows] == ["as finetuned", "full", "linformer k=8",
                                          "linformer k=8 + window 8, global [0, -1]",
                                          "linformer k=8 + window 8, global [0, -1], landmarks"]
    assert rows[4]["predictions"] != rows[3]["predictions"] or rows[4]["gflops"] != rows[3]["gflops"]
    for r in rows:  # every example's prediction is kept and gives the accuracy
        assert len(r["predictions"]) == 9
        assert np.mean(np.array(r["predictions"]) == labels) == pytest.approx(r["accuracy"])
    assert rows[1]["ms_vs_full"] == 1.0 and rows[3]["ms_vs_full"] == rows[3]["ms"] / rows[1]["ms"]
    assert result["majority_rate"] == max(np.mean(labels), 1 - np.mean(labels))
    md = long_inputs.to_markdown(result, ["header"])
    assert "majority class scores" in md and \
        "| FLOPs vs full | time vs full | memory vs full | tensor memory vs full |" in md
    from linformer.modeling.flops import forward_flops_per_token

    twin = rows[2]  # the FLOP ratio is the forward count of each row's own config, the Linformer's below full's
    assert rows[1]["gflops_vs_full"] == 1.0 and 0 < twin["gflops_vs_full"] < 1
    assert twin["gflops"] == pytest.approx(forward_flops_per_token(
        LinformerForSequenceClassification.from_pretrained_encoder(
            classifier, max_seq_len=twin["n"], **long_inputs.variants(8, "layerwise")["linformer k=8"]).config,
        twin["n"]) * twin["n"] / 1e9)
    assert "(no interval: 9 examples)" in md  # 9 examples are too few for a 95% interval
    assert rows[3]["tensor_mib_vs_full"] == rows[3]["tensor_mib"] / rows[1]["tensor_mib"]


def test_a_student_trained_at_length_is_a_row_at_every_n_it_reaches(classifier, tmp_path):
    """A student (here the Linformer twin at 4N itself, saved) is evaluated like the twins: at 4N its predictions
    are the twin's; at 8N, beyond its n, it has no row."""
    from transformers import AutoModelForSequenceClassification

    from linformer.modeling.convert import NO_EXACT_KEYS, from_linformer

    from_linformer(classifier, AutoModelForSequenceClassification, max_seq_len=4 * N, attention="linformer",
                   projected_dim=8, sharing="layerwise", **NO_EXACT_KEYS).save_pretrained(tmp_path / "student")
    ids, labels = _examples()
    result = long_inputs.measure(classifier, ids, labels, [4 * N, 8 * N], k=8, sharing="layerwise", pad_id=1,
                                 batch_size=4, cost_reps=1, students={"student": str(tmp_path / "student")},
                                 progress=lambda _: None)
    rows = {(r["model"], r["n"]): r for r in result["rows"]}
    assert ("student", 4 * N) in rows and ("student", 8 * N) not in rows
    assert rows[("student", 4 * N)]["predictions"] == rows[("linformer k=8", 4 * N)]["predictions"]
    assert rows[("student", 4 * N)]["ms_vs_full"] > 0


def test_a_classifier_with_projected_attention_is_refused_naming_its_attention(classifier, tmp_path, capsys):
    from transformers import AutoModelForSequenceClassification

    from linformer.modeling.convert import from_linformer

    from_linformer(classifier, AutoModelForSequenceClassification, attention="linformer", projected_dim=8
                   ).save_pretrained(tmp_path / "lin")
    with pytest.raises(SystemExit) as stop:
        load_script("long_inputs").main(["--classifier", str(tmp_path / "lin"), "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert "not one with linformer" in capsys.readouterr().err


@pytest.mark.parametrize("attention", ["full", "linformer"])
def test_a_model_that_is_not_a_sequence_classifier_is_refused_naming_the_option(classifier, tmp_path, capsys,
                                                                               attention):
    """A masked LM (a converted or pretrained model) would load with a classifier head at random and report chance
    accuracies: refused, as --classifier or as a student, by what it is."""
    from pathlib import Path

    from linformer.modeling import LinformerForMaskedLM

    LinformerForMaskedLM.from_pretrained_encoder(Path(classifier).parent / "roberta", attention=attention,
                                                 projected_dim=8).save_pretrained(tmp_path / "mlm")
    capsys.readouterr()
    script = load_script("long_inputs")
    for argv, option in ((["--classifier", str(tmp_path / "mlm")], "--classifier"),
                         (["--classifier", classifier, "--students", str(tmp_path / "mlm")], "--students")):
        with pytest.raises(SystemExit) as stop:
            script.main([*argv, "--out", str(tmp_path / "r")])
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            (f"error: {option} {tmp_path / 'mlm'} is a LinformerForMaskedLM, not a sequence classifier (its "
             "classifier head would start at random): give a finetuned one, a finetuning run's best/")]
    assert not list(tmp_path.glob("r.*"))


def test_a_student_below_every_n_is_refused_not_silently_left_out(classifier, tmp_path, capsys):
    """A student is a row at every n up to its own: one whose n is below every --ns had no row and no word."""
    LinformerForSequenceClassification.from_pretrained_encoder(classifier, max_seq_len=2 * N, attention="linformer",
                                                               projected_dim=8).save_pretrained(tmp_path / "short")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        load_script("long_inputs").main(["--classifier", classifier, "--ns", str(4 * N), "--k", "8", "--students",
                                         str(tmp_path / "short"), "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        (f"error: --students {tmp_path / 'short'}: its n = {2 * N} is below every --ns [{4 * N}], so it would have "
         f"no row: give an --ns of at most {2 * N}, or leave it out")]
    assert not list(tmp_path.glob("r.*"))


def test_a_finetuning_run_directory_is_refused_naming_the_model_in_it(classifier, tmp_path, capsys):
    import json
    import shutil

    run = tmp_path / "run"
    shutil.copytree(classifier, run / "best")
    (run / "run.json").write_text(json.dumps({"stage": "finetune"}))
    script = load_script("long_inputs")
    for has_best, advice in ((True, f"{run}/best (the model its validation chose), or its final model exported"),
                             (False, "its final model exported")):
        if not has_best:
            shutil.rmtree(run / "best")
        with pytest.raises(SystemExit) as stop:
            script.main(["--classifier", str(run), "--out", str(tmp_path / "r")])
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            (f"error: --classifier {run} is a finetuning run directory, not a model: give {advice}: python "
             f"scripts/export.py {run} (writes {run}/model)")]


@pytest.mark.parametrize("argv, line", [
    (["--examples", "-3"], "error: argument --examples: must be at least 0, not -3"),
    (["--batch-size", "0"], "error: argument --batch-size: must be at least 1, not 0"),
    (["--k", "0"], "error: argument --k: must be at least 1, not 0"),
    (["--ns", "1024", "-5"], "error: argument --ns: must be at least 1, not -5"),
])
def test_a_count_below_its_least_is_refused_naming_its_flag(classifier, tmp_path, capsys, argv, line):
    with pytest.raises(SystemExit) as stop:
        load_script("long_inputs").main(["--classifier", classifier, *argv, "--out", str(tmp_path / "r")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == line
    assert list(tmp_path.iterdir()) == []


def _result(labels, rows):
    def row(name, n, attention, preds, extra):
        correct = (np.asarray(preds) == labels).astype(float)
        return {"model": name, "n": n, "attention": attention, "predictions": [int(p) for p in preds],
                "accuracy": float(correct.mean()), "interval": long_inputs.bootstrap_interval(correct),
                "examples": len(labels), **extra}
    return {"labels": labels.tolist(), "base_n": N, "rows": [row(*r) for r in rows]}


def test_paired_rows_judge_each_row_against_the_truncated_classifier_and_full_students_at_its_n():
    labels = np.array([0, 1] * 20)
    right, wrong = labels.copy(), 1 - labels
    half = np.where(np.arange(40) < 20, labels, 1 - labels)
    result = _result(labels, [
        ("as finetuned", N, "full", half, {}),
        ("full", 4 * N, "full attention", half, {}),
        ("teacher at 4N", 4 * N, "full attention", right, {"student": True}),  # the label attention_label gives
        ("its twin", 4 * N, "linformer k=8", right, {"student": True}),
        ("linformer k=8", 4 * N, "linformer k=8", wrong, {}),
    ])
    pairs = {(p["model"], p["against"]): p for p in long_inputs.paired_rows(result)}
    # every lengthened row against the truncated classifier; against the full-attention student at its n, each
    # other row (never a row against itself, nor against a full row built from the classifier)
    assert set(pairs) == {(m, "as finetuned") for m in ("full", "teacher at 4N", "its twin", "linformer k=8")} | {
        ("full", "teacher at 4N"), ("its twin", "teacher at 4N"), ("linformer k=8", "teacher at 4N")}
    assert pairs[("its twin", "as finetuned")]["difference"]["diff"] == pytest.approx(50.0)
    assert pairs[("its twin", "teacher at 4N")]["difference"]["diff"] == 0.0
    assert pairs[("its twin", "teacher at 4N")]["agreement"] == 1.0
    assert pairs[("linformer k=8", "teacher at 4N")]["difference"]["diff"] == pytest.approx(-100.0)
    md = long_inputs.to_markdown(result | {"lengths": {}}, ["header"])
    assert "## Paired differences" in md and "| its twin | 128 | teacher at 4N | +0.0 " in md
    # every row is one run: its intervals are a bootstrap over examples, which the page says (it did not)
    assert "a bootstrap over the examples of single runs" in md.split("## Paired differences")[0]
    assert "95% interval over the examples (single runs: no seed variance)." in md


def test_a_time_ratio_far_below_its_flop_ratio_is_warned_naming_the_load_and_the_threads():
    """A Linformer timed at 0.20x of full attention beside 0.70x of its FLOPs (a loaded CPU: its threads fitted to the
    free cores, full attention's waiting for busy ones) is a warning naming the load and both models' threads."""
    labels = np.array([0, 1] * 4)
    result = _result(labels, [
        ("as finetuned", N, "full", labels, {}),
        ("full", 4 * N, "full attention", labels, {"ms": 2090.0, "threads": "2", "gflops_vs_full": 1.0,
                                                   "ms_vs_full": 1.0}),
        ("linformer k=8", 4 * N, "linformer k=8", labels, {"ms": 421.0, "threads": "1", "gflops_vs_full": 0.70,
                                                           "ms_vs_full": 0.20}),
        ("linformer w=4", 4 * N, "linformer k=8", labels, {"ms": 1600.0, "threads": "1-2", "gflops_vs_full": 0.75,
                                                           "ms_vs_full": 0.77}),
    ]) | {"lengths": {}, "load": "1-minute load average 7.0 at the start and 6.5 at the end on 2 cores"}
    (warning,) = long_inputs.beyond_flops_warnings(result)
    assert warning.startswith("warning: linformer k=8 at n = 128: measured speed-up 5.00x is more than 2x its FLOP ratio 1.43x")
    assert "load average 7.0 at the start" in warning and "it at 1 thread and full attention at 2 threads" in warning
    md = long_inputs.to_markdown(result, ["header"])
    assert "**Warning: linformer k=8 at n = 128" in md and "linformer w=4 at n = 128: 1-2" in md


def test_render_writes_the_report_again_from_its_json_and_refuses_one_without_a_header(tmp_path):
    from linformer.files.mappings import read_json

    labels = np.array([0, 1] * 20)
    result = _result(labels, [("as finetuned", N, "full", labels, {}),
                              ("full", 2 * N, "full", 1 - labels, {"ms": 3.0, "mib": 2.0})])
    result |= {"k": 8, "sharing": "layerwise", "majority_rate": 0.5, "lengths": {}}
    long_inputs.write_report(result, str(tmp_path / "a"), ["the header line"], {"command": "python x"})
    long_inputs.render(read_json(tmp_path / "a.json"), str(tmp_path / "b"))
    assert (tmp_path / "b.md").read_text() == (tmp_path / "a.md").read_text()
    assert read_json(tmp_path / "b.json") == read_json(tmp_path / "a.json")
    with pytest.raises(ConfigError, match="has no header: measure again"):
        long_inputs.render({"rows": []}, str(tmp_path / "c"))


def test_render_says_what_is_wrong_with_its_file_and_which_flag_is_missing(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not json\n")
    (tmp_path / "list.json").write_text("[1, 2]")
    script = load_script("long_inputs")
    for argv, line in (
            (["--render", str(tmp_path / "nope.json")],
             (f"error: --render {tmp_path / 'nope.json'}: no such file: give the <out>.json of an earlier "
              "scripts/long_inputs.py run.")),
            (["--render", str(tmp_path / "notes.txt")],
             (f"error: --render {tmp_path / 'notes.txt'} is not JSON (Expecting value: line 1 column 1 (char 0)): "
              "give the <out>.json of an earlier scripts/long_inputs.py run.")),
            (["--render", str(tmp_path / "list.json")],
             (f"error: --render {tmp_path / 'list.json'} holds a JSON list, not a report: give the <out>.json of an "
              "earlier scripts/long_inputs.py run.")),
            ([], "error: one of the arguments --classifier --render is required"),
            (["--render", "x.json", "--classifier", "c"],
             "error: argument --classifier: not allowed with argument --render")):
        with pytest.raises(SystemExit) as stop:
            script.main([*argv, "--out", str(tmp_path / "r")])
        assert stop.value.code == 2
        assert capsys.readouterr().err.splitlines()[0] == line  # and nothing else before it
    assert not list(tmp_path.glob("r.*"))


def test_a_report_at_one_n_plots_one_row_per_model_in_the_tables_order(monkeypatch, tmp_path):
    figures = []
    monkeypatch.setattr(long_inputs, "save_figure", lambda fig, path: figures.append(fig))
    labels = np.array([0, 1] * 20)
    costs = [{"ms_vs_full": 1.0, "tensor_mib_vs_full": 1.0, "gflops_vs_full": 1.0, "ms": 5.0},
             {"ms_vs_full": 0.6, "tensor_mib_vs_full": 0.9, "gflops_vs_full": 0.5, "ms": 3.0},
             {"ms_vs_full": 0.9, "tensor_mib_vs_full": 1.2, "gflops_vs_full": 0.7, "ms": 4.5}]
    result = _result(labels, [("as finetuned", N, "full", labels, {}),
                              *[(name, 3 * N, "x", labels, c) for name, c in zip(("full", "lin", "student"), costs)]])
    long_inputs.plot(result, str(tmp_path / "p.png"))
    accuracy, time, memory = figures[0].axes
    by_y = sorted(zip((t.get_position()[1] for t in accuracy.get_yticklabels()),
                      (t.get_text() for t in accuracy.get_yticklabels())), reverse=True)
    assert [name for _, name in by_y] == ["full", "lin", "student"]  # the table's order, top to bottom
    assert sorted((p.get_y(), p.get_width()) for p in time.patches)[::-1] == [
        (pytest.approx(y, abs=0.5), w) for y, w in zip((2, 1, 0), (1.0, 0.6, 0.9))]
    assert [p.get_width() for p in sorted(memory.patches, key=lambda p: -p.get_y())] == [1.0, 0.9, 1.2]
    # at several ns: accuracy and cost against n, one line per model
    result["rows"].append({**result["rows"][1], "n": 4 * N})
    long_inputs.plot(result, str(tmp_path / "q.png"))
    assert figures[1].axes[0].get_xscale() == "log" and len(figures[1].axes[1].lines) == 3


def test_a_report_rendered_in_place_keeps_its_measurements_record_and_needs_no_overwrite(tmp_path, capsys):
    import argparse

    from linformer.files.mappings import read_json
    from linformer.files.outputs import FILE_RECORDS
    from linformer.report import measured

    labels = np.array([0, 1] * 20)
    result = _result(labels, [("as finetuned", N, "full", labels, {}),
                              ("full", 2 * N, "full", 1 - labels, {"ms": 3.0, "mib": 2.0})])
    result |= {"k": 8, "sharing": "layerwise", "majority_rate": 0.5, "lengths": {}}
    for name, classifier in (("a", "clf"), ("other", "another clf")):
        args = argparse.Namespace(classifier=classifier, render=None, ns=[2 * N], out=str(tmp_path / name),
                                  overwrite=False)
        with measured.report_outputs(args, "long_inputs"):
            long_inputs.write_report(result, args.out, ["the header line"], {"command": "python x"})
    before = read_json(tmp_path / FILE_RECORDS)
    script = load_script("long_inputs")
    assert script.main(["--render", str(tmp_path / "a.json"), "--out", str(tmp_path / "a")]) == 0
    assert read_json(tmp_path / FILE_RECORDS) == before  # still the measurement's settings, not the render's
    with pytest.raises(SystemExit):  # another measurement's report is not replaced by this one's
        script.main(["--render", str(tmp_path / "a.json"), "--out", str(tmp_path / "other")])
    assert "error: " in capsys.readouterr().err and read_json(tmp_path / FILE_RECORDS) == before


def test_rows_only_at_the_ns_some_input_reaches_and_old_reports_say_which_are_not():
    from linformer.errors import ConfigError

    ids = [[1] * 600, [1] * 1378, [1] * 700]
    assert long_inputs.reached([1024, 2048, 4096], ids) == ([1024], [2048, 4096])
    assert long_inputs.reached([1378], ids) == ([1378], [])  # an input of exactly n tokens reaches n
    with pytest.raises(ConfigError, match=r"--ns 2048 4096: no example .* \(the longest has 1378 tokens\)"):
        long_inputs.reached([2048, 4096], ids)
    # the longest input as printed: cut one token past the largest n, it reads "over" that n
    assert long_inputs.longest_text({"max": 4097}, [2048, 4096]) == "over 4,096 tokens"
    assert long_inputs.longest_text({"max": 1378}, [2048, 4096]) == "1,378 tokens"
    # a report measured before the rule gets one line naming its unreached rows, once
    result = {"lengths": {"max": 1378}, "rows": [{"n": 512}, {"n": 2048}, {"n": 4096}]}
    (note,) = long_inputs.unreached_note(result, ["Examples: ..."])
    assert "no input reaches n = 2,048, 4,096" in note
    assert long_inputs.unreached_note(result, [note]) == []


def test_overlap_adds_each_window_row_with_no_token_counted_twice(classifier, monkeypatch):
    """overlap=True: each exact-key row again with the columns its exact keys hold masked (the converted default),
    and again with their counts lowered, built so (overlap_columns="mask", "reduce") and named so."""
    from linformer.modeling import convert

    built = []
    real = convert.from_linformer  # what from_pretrained_encoder reshapes a saved Linformer with

    def spy(*args, **fields):
        built.append(fields)
        return real(*args, **fields)

    monkeypatch.setattr(convert, "from_linformer", spy)
    ids, labels = _examples()
    result = long_inputs.measure(classifier, ids, labels, [2 * N], k=8, sharing="layerwise", pad_id=1, batch_size=4,
                                 cost_reps=1, local_windows=(8,), progress=lambda _: None, overlap=True)
    assert [r["model"] for r in result["rows"]][3:] == ["linformer k=8 + window 8, global [0, -1]",
                                                         "linformer k=8 + window 8, global [0, -1], covered columns masked",
                                                         "linformer k=8 + window 8, global [0, -1], reduced counts"]
    assert [f.get("overlap_columns", "keep") for f in built if f.get("local_window")] == ["keep", "mask", "reduce"]


def test_a_cost_not_measured_is_left_out_never_drawn_as_zero(monkeypatch, tmp_path):
    """The multi-n figure drew a row without memory at 0 MiB, and the one-n figure a bar of 0."""
    figures = []
    monkeypatch.setattr(long_inputs, "save_figure", lambda fig, path: figures.append(fig))
    labels = np.array([0, 1] * 20)
    cost = {"ms_vs_full": 1.0, "mib_vs_full": 1.0, "gflops_vs_full": 1.0, "ms": 5.0, "mib": 40.0}
    rows = [("as finetuned", N, "full", labels, {})]
    for n in (2 * N, 3 * N):
        rows += [(name, n, "x", labels, dict(cost)) for name in ("full", "lin")]
    result = _result(labels, rows)
    del result["rows"][-1]["mib"]  # lin at 3N: memory not measured
    result["header"] = ["Machine: AMD EPYC, torch threads: 2."]
    long_inputs.plot(result, str(tmp_path / "p.png"))
    accuracy, _, memory = figures[0].axes
    drawn = {line.get_label(): list(zip(line.get_xdata(), line.get_ydata())) for line in memory.lines}
    assert drawn["lin"] == [(2 * N, 40.0)]  # one point: none at 0
    assert [t.get_text() for t in accuracy.get_xticklabels()] == [f"{2 * N:,}", f"{3 * N:,}"]
    assert accuracy.containers  # the accuracy's 95% intervals, as the table gives them
    assert memory.get_ylabel() == "MiB" and "machine: AMD EPYC" in figures[0].get_suptitle()
    one_n = _result(labels, rows[:3])
    del one_n["rows"][-1]["mib_vs_full"]
    long_inputs.plot(one_n, str(tmp_path / "q.png"))
    memory = figures[1].axes[2]
    assert max(memory.patches, key=lambda p: p.get_y()).get_width() == 1.0  # full attention, the top row
    assert not any(p.get_width() == 0 for p in memory.patches)
    assert [t.get_text() for t in memory.texts] == ["not measured"]
    assert figures[1].get_suptitle().replace("\n", " ").endswith("machine not recorded")  # its header has none


def test_a_title_names_the_machine_or_says_it_is_not_recorded():
    from linformer import plots

    assert plots.machine(["Examples: 9.", "Machine: AMD EPYC, torch threads: 2, 1453 s."]) == "machine: AMD EPYC"
    assert plots.machine("Machines: not recorded") == plots.machine([]) == "machine not recorded"


def test_run_is_the_script_s_whole_measurement_with_the_rows_built_once(classifier, tmp_path, monkeypatch):
    """scripts/long_inputs.py chained eight of the package's calls itself (a Python user could not call the
    measurement as one function), and the rows prepare() checked were built again, from the same four flags, inside
    measure(). long_inputs.run is the whole measurement; the rows it checks are the rows it measures. (A move: run
    did not exist before, so this test is new with it.)"""
    ids, labels = _examples()
    checked, built = [], []
    real_variants = long_inputs.variants

    def counted(*args, **kwargs):
        built.append(args)
        return real_variants(*args, **kwargs)

    def prepare(given, task, ns, k, examples, students, rows):
        checked.append(rows)
        return long_inputs.Examples(given, N, {}, ids, labels, len(ids), 1)

    monkeypatch.setattr(long_inputs, "variants", counted)
    monkeypatch.setattr(long_inputs, "prepare", prepare)
    warned = []
    result = long_inputs.run(classifier, "imdb", [2 * N, 9 * N], 8, "layerwise", str(tmp_path / "r"), batch_size=4,
                             local_windows=(4,), warn=warned.append)
    assert len(built) == 1 and checked == [real_variants(8, "layerwise", (4,), (0, -1))]
    assert {r["model"] for r in result["rows"] if r["n"] == 2 * N} == set(checked[0])
    assert result["ns"] == [2 * N]  # 9N: no input reaches it, and the report says so
    report = (tmp_path / "r.md").read_text()
    assert f"No row at n = {9 * N}" in report and "Command: `python scripts/long_inputs.py" in report
    assert (tmp_path / "r.json").is_file() and all(isinstance(line, str) for line in warned)
