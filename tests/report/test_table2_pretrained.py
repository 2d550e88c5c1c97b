"""The pretrained-encoder Table 2 on synthetic run directories: rows, paired differences, targets, the CLI."""

import json
from pathlib import Path

import numpy as np
import pytest

from linformer.report import by_length
from linformer.report import table2_pretrained as tp

REPO = Path(__file__).resolve().parents[2]


def _model(tmp_path, name, k=None, sharing=None, transfer=False):
    d = tmp_path / "models" / name
    d.mkdir(parents=True)
    info = {"transfer": {"steps": 10, "tokens": 20480, "train": "all", "target": "hidden",
                         "rel_err_before": [0.2, 0.6], "rel_err_after": [0.1, 0.3]} if transfer else None}
    (d / "linformer_card.json").write_text(json.dumps(info))
    return d


PAPER = {"length_policy": "slice", "mask_empty_windows": False, "exact_short_inputs": False}


def _run(tmp_path, name, model, task, seed, correct, k=None, sharing=None, labels=None, policy=None, **recipe):
    d = tmp_path / "runs" / name
    d.mkdir(parents=True)
    (d / "metrics.jsonl").write_text("")
    labels = np.zeros(len(correct), dtype=int) if labels is None else labels
    preds = np.where(correct, labels, 1 - labels)
    results = {"task": task, "seed": seed, "model_path": str(model), "metrics": {"accuracy": float(np.mean(correct))},
               "attention": "full" if k is None else "linformer", "projected_dim": k, "sharing": sharing,
               **(policy or {}), "num_train_examples": 100, "num_eval_examples": len(correct), "lr": 5e-5,
               "batch_size": 32, "max_length": 128, "steps": 4, **recipe}
    (d / "results.json").write_text(json.dumps(results))
    (d / "eval_predictions.json").write_text(json.dumps({"labels": labels.tolist(), "predictions": preds.tolist()}))


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(0)
    n = 1000
    teacher = {s: rng.random(n) < 0.90 for s in (0, 1, 2)}
    full = _model(tmp_path, "full")
    plain = _model(tmp_path, "k128", 128, "layerwise")
    moved = _model(tmp_path, "k128-tr", 128, "layerwise", transfer=True)
    for s, c in teacher.items():
        _run(tmp_path, f"imdb-full-s{s}", full, "imdb", s, c)
        worse = c.copy()
        worse[np.flatnonzero(c)[:60]] = False  # 6 points below the teacher
        _run(tmp_path, f"imdb-k128-s{s}", plain, "imdb", s, worse, 128, "layerwise", policy=PAPER)
        close = c.copy()
        close[np.flatnonzero(c)[:20]] = False  # 2 points below: closes 4 of the 6 points
        _run(tmp_path, f"imdb-k128-tr-s{s}", moved, "imdb", s, close, 128, "layerwise",
             policy={**tp.CONVERTED_LENGTH_POLICY, **tp.CONVERTED_EXACT_KEYS})
    _run(tmp_path, "sst2-full-s0", full, "sst2", 0, rng.random(200) < 0.92)
    return tmp_path


def test_rows_paired_differences_and_targets(runs):
    rows = tp.build_rows(tp.read_runs([str(runs / "runs")]))
    assert [r["name"] for r in rows] == ["full attention (teacher)", "linformer k=128, layerwise, E's first T rows (fairseq's)",
                                        ("linformer k=128, layerwise, resample, exact <= k, window 128, global [0, -1]"
                                        " + transfer")]
    teacher, plain, moved = rows
    assert teacher["tasks"]["imdb"]["seeds"].keys() == {0, 1, 2} and "vs_teacher" not in teacher["tasks"]["imdb"]
    d = plain["tasks"]["imdb"]["vs_teacher"]
    assert d["diff"] == pytest.approx(-6.0) and d["hi"] < 0
    assert d["seeds"] == [0, 1, 2] and d["p"] < 1e-10  # one p, pooled over the three seed pairs
    assert moved["tasks"]["imdb"]["vs_teacher"]["diff"] == pytest.approx(-2.0)
    assert moved["transfer_info"]["rel_err_after"] == [0.1, 0.3]
    text = "\n".join(tp.targets(rows))
    # a teacher of one seed decides nothing, and its interval says that it covers the examples only
    assert ("Teacher SST-2 >= 88: not decided: 1 seed(s) of 3 (93.5 [90.1, 96.9], one seed: examples only, "
        "no seed variance).") in text
    c = teacher["tasks"]["imdb"]  # both tasks' teachers are checked, each against its own target
    verdict = "met at the 95% level" if c["lo"] >= 90 else "missed" if c["acc"] < 90 else "not shown"
    assert f"Teacher IMDB >= 90: {verdict}" in text and "IMDB >= 90: not decided" not in text  # 3 seeds
    assert ("linformer k=128, layerwise, resample, exact <= k, window 128, global [0, -1] + transfer, IMDB within 0.5 "
            "of the teacher: missed (-2.0 [" in text)
    assert "E's first T rows (fairseq's), IMDB within" not in text  # the targets are set for the converted default only
    assert "transfer closes" not in text  # no row without transfer has the same policy to compare with


def test_a_target_row_with_fewer_than_three_seeds_is_not_decided(runs):
    import shutil

    for s in (1, 2):
        shutil.rmtree(runs / "runs" / f"imdb-k128-tr-s{s}")
    text = "\n".join(tp.targets(tp.build_rows(tp.read_runs([str(runs / "runs")]))))
    assert "IMDB within 0.5 of the teacher: not decided: 1 seed(s) of 3 (" in text


def test_runs_finetuned_with_another_recipe_are_refused_naming_the_key(runs, tmp_path):
    _run(tmp_path, "imdb-full-s7", tmp_path / "models" / "full", "imdb", 7, np.ones(1000, dtype=bool), lr=1e-4)
    with pytest.raises(tp.DataError, match=r"imdb-full-s7 was finetuned otherwise than .*\(lr: 5e-05 vs 0.0001\)"):
        tp.recipe_from_runs(tp.read_runs([str(runs / "runs")]))


def test_runs_on_other_eval_examples_are_refused(runs, tmp_path):
    model = tmp_path / "models" / "full"
    _run(tmp_path, "imdb-full-s5", model, "imdb", 5, np.ones(999, dtype=bool), num_eval_examples=1000)
    with pytest.raises(tp.DataError, match="evaluated on other examples"):
        tp.build_rows(tp.read_runs([str(runs / "runs")]))


def test_cli_writes_markdown_and_json(runs, tmp_path, monkeypatch, capsys):
    """The script's pretrained layout, in-process (the error line and exit status of a subprocess are
    tests/report/test_table2.py's)."""
    from tests.conftest import load_script

    monkeypatch.chdir(REPO)
    table2 = load_script("table2")
    out = tmp_path / "table"
    assert table2.main([str(runs / "runs" / "*"), "--layout", "pretrained", "--no-measure", "--no-by-length", "--out",
                        str(out), "--command", "make reproduce-pretrained"]) == 0
    md = (out.with_suffix(".md")).read_text()
    [row] = [line for line in md.splitlines() if line.startswith("| linformer k=128, layerwise, E's first T rows (fairseq's) |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["-", "-"]  # no SST-2 run for this row
    data = json.loads(out.with_suffix(".json").read_text())
    acc = data["rows"][1]["tasks"]["imdb"]["acc"]
    assert cells[3].startswith(f"{acc:.1f} [") and cells[4].startswith("-6.0 [") and cells[5] == "- / 3"
    assert "IMDB: 100 train / 1000 eval examples, lr 5e-05, batch 32, max length 128, 4 updates" in md
    assert "Time and memory: not measured (--no-measure)." in md and "## Targets" in md
    assert "Not run yet" not in md  # these runs are not the experiment's: its unfinished stages are not theirs
    assert [r["transfer"] for r in data["rows"]] == [False, False, True]
    (tmp_path / "nothing").mkdir()
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        table2.main([str(tmp_path / "nothing"), "--layout", "pretrained", "--no-measure", "--out",
                     str(tmp_path / "other")])
    assert stop.value.code == 2 and capsys.readouterr().err.startswith("error: no finished finetuning runs")
    assert not (tmp_path / "other.md").exists()


@pytest.mark.parametrize("part", [by_length.eval_lengths, by_length.trained_on_eval])
def test_a_run_whose_config_yaml_does_not_read_is_one_line_naming_it(tmp_path, part):
    from linformer.errors import RunDirError

    (tmp_path / "config.yaml").write_text("task: [sst2\n")
    with pytest.raises(RunDirError, match=f"{tmp_path}/config.yaml cannot be read"):
        part({"_dir": str(tmp_path)})
    (tmp_path / "config.yaml").unlink()
    with pytest.raises(tp.DataError, match=f"{tmp_path}/config.yaml is missing: "):
        part({"_dir": str(tmp_path)})


def test_by_length_finds_where_a_variant_loses():
    """A variant wrong only on the longest quarter of the examples loses there and nowhere else."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(5, 500, 800)
    teacher = (rng.random(800) < 0.85).astype(float)
    longest = lengths > np.quantile(lengths, 0.75)
    variant = np.where(longest & (rng.random(800) < 0.4), 0.0, teacher)
    res = by_length.by_length(lengths, teacher, {"v": variant - teacher, "same": np.zeros((2, 800))})
    assert len(res["buckets"]) == 4 and sum(res["examples"]) == 800
    assert res["buckets"][0].startswith("1-") and res["buckets"][-1].endswith(f"-{lengths.max()}")
    diffs = [d["diff"] for d in res["rows"]["v"]]
    assert diffs[:3] == [0.0, 0.0, 0.0] and diffs[3] < -20 and res["rows"]["v"][3]["hi"] < 0
    assert all(d["diff"] == 0.0 for d in res["rows"]["same"])
    assert res["teacher_acc"][3] == pytest.approx(100 * teacher[longest].mean())


def test_by_length_leaves_no_bucket_empty():
    """A quarter or more of the inputs at max_length (IMDB cut to 256 tokens), or every input of one length: every
    bucket holds examples (an empty last one had a NaN accuracy and stopped the table)."""
    rng = np.random.default_rng(2)
    lengths = np.minimum(rng.integers(20, 600, 800), 256)  # over half of them cut to 256
    teacher = (rng.random(800) < 0.85).astype(float)
    res = by_length.by_length(lengths, teacher, {"v": np.zeros((3, 800))})
    assert all(n > 0 for n in res["examples"]) and sum(res["examples"]) == 800
    assert res["buckets"][-1].endswith("-256") and not np.isnan(res["teacher_acc"]).any()
    res = by_length.by_length(np.full(800, 128), teacher, {"v": np.zeros((3, 800))})
    assert res["buckets"] == ["1-128"] and res["examples"] == [800]
    assert by_length.quartile_edges(np.array([10, 20])) == [12]  # quartiles 15 and 17 fall between the two lengths


def test_a_by_length_cell_says_what_its_interval_rests_on():
    """A quartile of fewer examples than an interval needs prints none, as the main cells do; a row of one seed pair
    says that its intervals leave out the seed-to-seed variance."""
    rng = np.random.default_rng(3)
    lengths = rng.integers(5, 500, 80)  # quartiles of about 20 examples
    teacher = (rng.random(80) < 0.85).astype(float)
    d = (rng.random((1, 80)) < 0.85) - teacher
    text = "\n".join(by_length.to_markdown("SST-2", by_length.by_length(lengths, teacher, {"v": d})))
    assert "(no interval: 2" in text and "[" not in text.split("\n")[-1]
    assert "v (one seed pair: examples only, no seed variance)" in text
    two = np.concatenate([d, (rng.random((1, 80)) < 0.85) - teacher])
    text = "\n".join(by_length.to_markdown("SST-2", by_length.by_length(lengths, teacher, {"v": two})))
    assert "v (two seed pairs: interval narrow where seeds spread)" in text


def test_kept_records_without_their_model_or_metrics_still_make_the_table(runs):
    """A fresh clone: only the committed records (results, predictions, the model's card) are there."""
    import shutil

    for d in (runs / "runs").iterdir():
        (d / "metrics.jsonl").unlink()
        model = json.loads((d / "results.json").read_text())["model_path"]
        shutil.copy(Path(model) / "linformer_card.json", d / "linformer_card.json")
    shutil.rmtree(runs / "models")
    rows = tp.build_rows(tp.read_runs([str(runs / "runs" / "*")]))
    assert [r["transfer"] for r in rows] == [False, False, True]
    # named by their folder, not a glob: kept records have no metrics.jsonl, and are found all the same
    assert len(tp.read_runs([str(runs / "runs")])) == len(tp.read_runs([str(runs / "runs" / "*")]))
    assert rows[2]["transfer_info"]["steps"] == 10


def _retransferred(runs, seed: int, scale: float):
    """Seed `seed` of the transfer row finetuned from a model whose layer errors are `scale` times the row's."""
    d = runs / "runs" / f"imdb-k128-tr-s{seed}"
    card = json.loads((runs / "models" / "k128-tr" / "linformer_card.json").read_text())
    card["transfer"]["rel_err_after"] = [e * scale for e in card["transfer"]["rel_err_after"]]
    (d / "linformer_card.json").write_text(json.dumps(card))  # a kept record's own card copy wins over the model's


def test_seeds_from_another_build_of_the_transfer_are_listed_as_such(runs):
    """A fresh machine rebuilds a row's transfer, and on a GPU not to the bit: the row's seeds then start from two
    builds of one recipe, and the report says which runs started from which."""
    _retransferred(runs, 2, 1.05)
    rows = tp.build_rows(tp.read_runs([str(runs / "runs")]))
    builds = rows[-1]["transfer_info"]["builds"]
    assert [b["runs"] for b in builds] == [["imdb-k128-tr-s0", "imdb-k128-tr-s1"], ["imdb-k128-tr-s2"]]
    assert builds[1]["rel_err_after"] == pytest.approx([e * 1.05 for e in builds[0]["rel_err_after"]])
    text = tp.to_markdown(rows, {}, {"source": "s", "hardware": "h", "command": "c", "recipe": "r"})
    assert "2 builds of this transfer" in text and "runs imdb-k128-tr-s2" in text


def test_a_row_whose_seeds_start_from_different_transfer_recipes_is_refused(runs):
    d = runs / "runs" / "imdb-k128-tr-s2"
    card = json.loads((runs / "models" / "k128-tr" / "linformer_card.json").read_text())
    card["transfer"]["steps"] = 2 * card["transfer"]["steps"]
    (d / "linformer_card.json").write_text(json.dumps(card))
    with pytest.raises(tp.DataError, match=r"transfers of different recipes \(steps 20 vs 10\)"):
        tp.build_rows(tp.read_runs([str(runs / "runs")]))


def test_a_transfer_rebuilt_to_the_last_digits_is_one_model_and_said(runs):
    _retransferred(runs, 1, 1 + 1e-6)
    rows = tp.build_rows(tp.read_runs([str(runs / "runs")]))
    moved = rows[-1]
    assert moved["transfer_info"]["rebuilt_within"] == pytest.approx(1e-6, rel=1e-3)
    assert len(moved["transfer_info"]["builds"]) == 1  # one model, rebuilt to its last digits
    assert rows[1].get("transfer_info") is None  # no transfer, nothing to compare
    text = tp.to_markdown(rows, {}, {"source": "s", "hardware": "h", "command": "c", "recipe": "r"})
    assert "rebuilt for some runs on another machine: its layer errors agree to 1e-06 relative" in text


def test_costs_of_kept_records_whose_models_are_gone_come_from_their_cards(tmp_path):
    """A fresh clone keeps the records, not the models: each architecture is rebuilt from its card's source and
    settings (weights do not change the time), so the cost columns are still measured side by side."""
    from transformers import BertConfig, BertModel

    source = tmp_path / "bert"
    BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(source)
    gone = str(tmp_path / "gone")

    def row(attention, k):
        settings = {"attention": attention, "max_seq_len": 32, "projected_dim": k, "sharing": "layerwise"}
        return {"attention": attention, "k": None if attention == "full" else k, "sharing": None if attention ==
                "full" else "layerwise", "policy": None, "model_path": gone,
                "converted_from": {"source": str(source), "settings": settings}}

    costs = tp.measure_costs([row("full", 8), row("linformer", 8)], n=32, batch=2, reps=1)
    assert set(costs) == {"full attention", "linformer k=8, layerwise"}
    assert all(c["ms"] > 0 for c in costs.values())
    assert tp.measure_costs([{**row("full", 8), "converted_from": None}], n=32) == {}  # nothing to rebuild it from


def test_a_damaged_or_mismatched_record_stops_the_table_naming_the_file(runs):
    """A truncated results.json used to drop its run with a warning and rewrite the table without it."""
    from linformer.errors import DataError, RunDirError

    results = runs / "runs" / "imdb-k128-s1" / "results.json"
    whole = results.read_text()
    results.write_text(whole[: len(whole) // 2])
    with pytest.raises(RunDirError, match=f"{results} cannot be read"):
        tp.read_runs([str(runs / "runs" / "*")])
    results.write_text(json.dumps({k: v for k, v in json.loads(whole).items() if k != "metrics"}))
    with pytest.raises(DataError, match=f"^{results} has no metrics "):
        tp.read_runs([str(runs / "runs" / "*")])
    results.write_text(whole)
    predictions = runs / "runs" / "imdb-k128-s1" / "eval_predictions.json"
    pred = json.loads(predictions.read_text())
    pred["predictions"][0] = 1 - pred["predictions"][0]
    predictions.write_text(json.dumps(pred))
    with pytest.raises(DataError, match="disagrees with"):
        tp.read_runs([str(runs / "runs" / "*")])


def test_the_header_names_where_the_runs_were_made_not_only_where_the_report_is():
    runs = [{"device": "NVIDIA H200"}] * 3 + [{"device": "CPU: AMD EPYC"}, {}]
    assert tp.run_devices(runs) == "NVIDIA H200 (3 runs), CPU: AMD EPYC (1 run), not recorded (1 run)"


def test_target_gaps_round_halves_away_from_zero_as_the_table_does():
    """87.40 against 87.65 is -0.25: the targets say -0.3, as the table's paired difference prints it (Python's
    format printed -0.2, the binary value being -0.2499...)."""
    teacher = {"name": "full attention (teacher)", "transfer": False, "attention": "full", "k": None,
               "tasks": {"imdb": {"acc": 87.65, "lo": 86.2, "hi": 89.1, "examples": 2000, "seeds": {0: 0, 1: 0, 2: 0}}}}
    row = {"name": "local", "transfer": True, "attention": "linformer", "k": 128, "sharing": "layerwise",
           "policy": tp.TARGET_POLICY, "tasks": {"imdb": {"acc": 87.40, "seeds": {0: 0}, "examples": 2000,
                                                            "vs_teacher": {"diff": 87.40 - 87.65, "lo": -1.25,
                                                                           "hi": 0.75, "seeds": [0],
                                                                           "teacher_seeds": 3}}}}
    assert ("IMDB within 0.5 of the teacher: not decided: 1 seed(s) of 3 (-0.3 [-1.3, +0.8], teacher seed 0 only; "
        "one seed pair: examples only, no seed variance, no p).") in "\n".join(tp.targets([teacher, row]))


def _target_rows(teacher_lo: float, diff: float, lo: float, hi: float, seeds: int = 3) -> list[dict]:
    teacher = {"name": "full attention (teacher)", "transfer": False, "attention": "full", "k": None,
               "tasks": {"sst2": {"acc": 89.1, "lo": teacher_lo, "hi": 91.2, "examples": 872,
                                  "seeds": {s: 0 for s in range(seeds)}}}}
    row = {"name": "local", "transfer": True, "attention": "linformer", "k": 128, "sharing": "layerwise",
           "policy": tp.TARGET_POLICY,
           "tasks": {"sst2": {"acc": 89.1, "lo": 87.2, "hi": 91.1, "examples": 872, "seeds": {s: 0 for s in range(seeds)},
                              "vs_teacher": {"diff": diff, "lo": lo, "hi": hi, "p": 1.0, "seeds": list(range(seeds)),
                                             "teacher_seeds": seeds}}}}
    return [teacher, row]


def test_a_target_is_met_only_where_its_95_percent_interval_shows_it():
    """The cpu report said "SST-2 within 0.5 of the teacher: met (+0.0)" of +0.0 [-0.6, +0.6]: met on the point
    estimate while the interval reached past the tolerance. "met" is now the interval's lower end at or above it;
    a point estimate inside it alone is "not shown", with how far the interval reaches."""
    text = "\n".join(tp.targets(_target_rows(87.1, 0.0, -0.6, 0.6)))
    assert ("SST-2 within 0.5 of the teacher: not shown: point estimate +0.0 meets it, its 95% interval reaches -0.6 "
        "(+0.0 [-0.6, +0.6]).") in text
    assert ("Teacher SST-2 >= 88: not shown: point estimate 89.1 meets it, its 95% interval reaches 87.1 "
        "(89.1 [87.1, 91.2]).") in text
    text = "\n".join(tp.targets(_target_rows(88.0, 0.1, -0.3, 0.4)))
    assert "SST-2 within 0.5 of the teacher: met at the 95% level (+0.1 [-0.3, +0.4])." in text
    assert "Teacher SST-2 >= 88: met at the 95% level (89.1 [88.0, 91.2])." in text
    text = "\n".join(tp.targets(_target_rows(87.1, -0.9, -1.5, -0.2)))
    assert "SST-2 within 0.5 of the teacher: missed (-0.9 [-1.5, -0.2])." in text
    # an end that rounds onto the tolerance says by how much it misses it
    assert "its 95% interval reaches -0.53 (" in "\n".join(tp.targets(_target_rows(87.1, 0.0, -0.53, 0.6)))
    # the table states the rule under its Targets heading
    assert "\"met\": shown at the 95% level" in tp.TARGETS_PROSE


def test_one_seed_cells_say_their_interval_covers_the_examples_only_and_print_no_p(runs):
    """A one-seed accuracy cell printed "92.6 [92.3, 93.0]" under prose saying "over seeds and examples", and a
    one-seed-pair comparison printed a p over the examples alone, in the table and in the JSON."""
    import shutil

    for s in (1, 2):
        shutil.rmtree(runs / "runs" / f"imdb-k128-tr-s{s}")
    rows = tp.build_rows(tp.read_runs([str(runs / "runs")]))
    cell = next(r for r in rows if r["transfer"])["tasks"]["imdb"]
    assert cell["seed_variance"] is False and cell["vs_teacher"]["p"] is None
    assert cell["vs_teacher"]["seed_variance"] is False
    assert tp._cell_text(cell).endswith(" (one seed: examples only, no seed variance)")
    assert ", p" not in tp._diff_text(cell) and "no seed variance, no p)" in tp._diff_text(cell)
    teacher = rows[0]["tasks"]["imdb"]
    assert teacher["seed_variance"] is True and "(" not in tp._cell_text(teacher)  # 3 seeds: no mark
    # a report written before these fields is rendered as today's code writes it
    old = [{**r, "tasks": {t: {k: v for k, v in c.items() if k != "seed_variance"} for t, c in r["tasks"].items()}}
           for r in rows]
    old_cell = next(r for r in old if r["transfer"])["tasks"]["imdb"]
    old_cell["vs_teacher"] = {**{k: v for k, v in cell["vs_teacher"].items() if k != "seed_variance"}, "p": 0.01}
    assert tp.labelled_rows(old) == rows


def test_a_row_whose_runs_started_from_different_weights_is_refused_unless_declared(runs, tmp_path):
    import shutil

    for s in (0, 1, 2):  # one start for the teacher's seeds, one for the variant's ... but seed 2 another build
        for name, h in ((f"imdb-full-s{s}", "a" * 64), (f"imdb-k128-s{s}", "b" * 64 if s < 2 else "c" * 64)):
            path = runs / "runs" / name / "results.json"
            path.write_text(json.dumps({**json.loads(path.read_text()), "start_weights_sha256": h}))
    shutil.rmtree(runs / "runs" / "sst2-full-s0")
    found = tp.read_runs([str(runs / "runs")])
    with pytest.raises(tp.DataError, match=r"row .linformer k=128, layerwise, E.s first T rows \(fairseq.s\).: its runs started from 2 "
                                           r"different weights \(bbbbbbbbbbbb: imdb-k128-s0, imdb-k128-s1; cccccccccccc: "
                                           r"imdb-k128-s2\)"):
        tp.build_rows(found)
    rows = tp.build_rows(found, {"linformer k=128, layerwise, E's first T rows (fairseq's)": "two builds, on purpose"})
    assert rows[1]["starts"]["declared"] == "two builds, on purpose" and rows[0]["starts"]["hashes"] == {
        "a" * 64: ["imdb-full-s0", "imdb-full-s1", "imdb-full-s2"]}
    assert rows[2]["starts"]["unrecorded"] == ["imdb-k128-tr-s0", "imdb-k128-tr-s1", "imdb-k128-tr-s2"]


def test_a_seed_without_its_teacher_seed_is_refused(runs, tmp_path):
    _run(tmp_path, "imdb-k128-s7", tmp_path / "models" / "k128", "imdb", 7, np.ones(1000, dtype=bool), 128,
         "layerwise", policy=PAPER)
    with pytest.raises(tp.DataError, match=r"seed\(s\) \[7\] have no teacher run of the same seed \(the teacher has "
                                           r"\[0, 1, 2\]\)"):
        tp.build_rows(tp.read_runs([str(runs / "runs")]))


def test_runs_that_chose_their_epoch_on_the_reported_split_are_left_out_and_listed(runs, tmp_path):
    path = runs / "runs" / "imdb-k128-s1" / "results.json"
    old = json.loads(path.read_text())
    path.write_text(json.dumps({**old, "best_step": 2, "steps": 4, "history": [{"step": 2, "accuracy": 0.9},
                                                                              {"step": 4, "accuracy": 0.85}]}))
    kept, left_out = tp.protocol_exclusions(tp.read_runs([str(runs / "runs")]))
    assert [e["run"] for e in left_out] == ["imdb-k128-s1"] and left_out[0]["last_accuracy"] == 0.85
    rows = tp.build_rows(kept)
    assert rows[1]["tasks"]["imdb"]["seeds"].keys() == {0, 2}
    assert rows[1]["tasks"]["imdb"]["vs_teacher"]["seeds"] == [0, 2]  # paired with the teacher's seeds 0 and 2 only
    assert "(teacher seeds 0, 2 only; two seed pairs: interval narrow where seeds spread)" in \
        tp._diff_text(rows[1]["tasks"]["imdb"])
    assert tp._cell_text(rows[1]["tasks"]["imdb"]).endswith(" (two seeds: interval narrow where seeds spread)")
    # the pre-protocol runs kept because their best evaluation on the reported split was their last: the protocol
    # section says their inclusion was decided on that split, not that nothing was
    for name in ("imdb-k128-s0", "imdb-full-s2"):
        last = runs / "runs" / name / "results.json"
        last.write_text(json.dumps({**json.loads(last.read_text()), "best_step": 4, "steps": 4,
                                    "history": [{"step": 2, "accuracy": 0.8}, {"step": 4, "accuracy": 0.9}]}))
    kept = tp.protocol_exclusions(tp.read_runs([str(runs / "runs")]))[0]
    assert tp.kept_on_reported(kept) == ["imdb-full-s2", "imdb-k128-s0"]
    notes = "\n".join(tp.protocol_notes(rows, {"kept_on_reported": tp.kept_on_reported(kept)}))
    assert "Nothing in the table was chosen" not in notes and "2 run(s) recorded before the protocol" in notes
    assert "decided on that split: imdb-full-s2, imdb-k128-s0." in notes
    assert "Nothing in the table was chosen" in "\n".join(tp.protocol_notes(rows, {"kept_on_reported": []}))
    # a run recorded under the protocol says which split chose: never left out, whatever its step
    path.write_text(json.dumps({**old, "best_step": 2, "steps": 4, "selection": {"split": "validation", "step": 2}}))
    assert not tp.protocol_exclusions(tp.read_runs([str(runs / "runs")]))[1]


def test_a_profile_s_table_is_refused_over_another_profile_s_runs_and_not_claimed_for_runs_of_none(runs, tmp_path):
    """The pretrained layout states its profile's recipe and unfinished jobs above every row: a table of the cpu12k
    profile's runs made with the default --profile cpu would state the cpu recipe for them, and one mixing the
    profile's runs with a user's would state it for the user's. Runs of no profile keep a table of their own, without
    the profile's recipe."""
    from linformer.errors import DataError
    from linformer.experiments import pretrained as exp
    from linformer.report.table2 import write_report

    def report(name):
        return write_report([str(runs / "runs" / "*")], str(tmp_path / name), "pretrained", "cpu", "test machine",
                            "cmd", measure=False, by_length=False)

    own = report("own")  # runs of no profile
    assert exp.recipe_text(exp.PROFILES["cpu"]) not in own["meta"]["recipe"] and own["meta"]["missing"] is None
    for d in sorted((runs / "runs").iterdir()):
        d.rename(d.with_name(f"tp-cpu12k-{d.name}"))
    with pytest.raises(DataError, match=r"^10 of the runs are not the 'cpu' profile's \(tp-cpu12k-imdb-full-s0, "
                                        r"tp-cpu12k-imdb-full-s1, tp-cpu12k-imdb-full-s2 and 7 more: the 'cpu12k' "
                                        r"profile's\): .*; pass --profile cpu12k\.$"):
        report("other")
    first = sorted((runs / "runs").iterdir())[0]
    for d in sorted((runs / "runs").iterdir()):
        d.rename(d.with_name(d.name.replace("tp-cpu12k-", "tp-cpu-")))
    ours = report("ours")
    assert exp.recipe_text(exp.PROFILES["cpu"]) in ours["meta"]["recipe"] and ours["meta"]["missing"] is not None
    first.with_name(first.name.replace("tp-cpu12k-", "tp-cpu-")).rename(first.with_name("my-run"))
    with pytest.raises(DataError, match=r"^1 of the runs are not the 'cpu' profile's \(my-run\): .*; give only the "
                                        r"'cpu' profile's runs \(the make reproduce-pretrained runs named after it\)"):
        report("mixed")
    assert not any(tmp_path.glob("other.*")) and not any(tmp_path.glob("mixed.*"))


def test_the_eval_examples_old_runs_trained_on_are_left_out_without_the_by_length_part_too(runs, tmp_path, monkeypatch,
                                                                                         capsys):
    """--no-by-length skips the lengths (tokenizer, plot), not the contamination check: the accuracies are the same
    with or without it. Where that check cannot be made (no config.yaml, no task data), the report and stderr say
    so and that the accuracies include those examples."""
    meta = {"source": "s", "hardware": "h", "command": "c", "recipe": None, "n": 128, "cost_batch": 8, "load": "l",
            "missing": None}
    unchecked = tp.write_table([str(runs / "runs")], str(tmp_path / "unchecked"), dict(meta), measure=False,
                               lengths=False)
    assert unchecked["meta"]["contamination"]["imdb"]["runs"] == 9 and "config.yaml is missing" in capsys.readouterr().err
    assert "IMDB: not checked for eval examples that 9 run(s)" in (tmp_path / "unchecked.md").read_text()
    seen = {"imdb": np.arange(1000) < 50, "sst2": np.zeros(200, dtype=bool)}
    monkeypatch.setattr(tp.by_length, "trained_on_eval", lambda run: seen[run["task"]])
    data = tp.write_table([str(runs / "runs")], str(tmp_path / "t"), dict(meta), measure=False, lengths=False)
    assert data["meta"]["contamination"]["imdb"] == {"dropped": 50, "examples": 1000, "runs": 9}
    assert data["rows"][0]["tasks"]["imdb"]["examples"] == 950
    assert "IMDB: 50 of 1000 eval examples left out of every row" in (tmp_path / "t.md").read_text()


def test_a_refresh_keeps_the_replaced_report_s_costs_and_the_table_shows_threads_where_they_differ(runs, tmp_path,
                                                                                                  monkeypatch):
    """Re-timing on whatever machine refreshes the accuracies would replace costs timed on a quiet one with a busy
    one's (slower, the Linformer rows at fewer threads under the adaptive policy): a refresh keeps them, and says
    where they were measured, unless --measure asks; rows timed at different threads say so."""
    meta = {"source": "s", "hardware": "quiet machine", "command": "c", "recipe": None, "n": 128, "cost_batch": 8,
            "load": "the 1-minute load average was 0.1 on 2 cores", "missing": None}
    timed = lambda ms: lambda rows, n, batch: {tp._arch(r): {"ms": ms, "mib": 1.0, "threads": "2" if r["k"] is None
                                                             else "1"} for r in rows}
    monkeypatch.setattr(tp, "measure_costs", timed(88.6))
    out = str(tmp_path / "t")
    tp.write_table([str(runs / "runs")], out, dict(meta), lengths=False)
    text = Path(f"{out}.md").read_text()
    assert "| 88.6 (2) |" in text and "| 88.6 (1) |" in text and "each row at the threads in brackets" in text
    monkeypatch.setattr(tp, "measure_costs", timed(542.4))
    busy = {**meta, "hardware": "busy machine", "load": "the 1-minute load average was 5.4 on 2 cores"}
    kept = tp.write_table([str(runs / "runs")], out, dict(busy), lengths=False)
    assert {c["ms"] for c in kept["costs"].values()} == {88.6}
    assert kept["meta"]["costs_measured"] == {"hardware": "quiet machine", "load": meta["load"], "kept": True}
    assert f"kept from the report this one replaced (measured on quiet machine while {meta['load']}" in \
        Path(f"{out}.md").read_text()
    again = tp.write_table([str(runs / "runs")], out, dict(busy), measure=True, lengths=False)
    assert {c["ms"] for c in again["costs"].values()} == {542.4} and not again["meta"]["costs_measured"]["kept"]


@pytest.mark.parametrize("old_name", ["paper's slice", "E's first T rows (the paper's)"])
def test_the_slice_policy_is_named_by_what_it_does_and_a_report_under_an_old_name_keeps_its_costs(runs, tmp_path,
                                                                                                  old_name):
    """The row of the slice policy was "paper's slice", which did not say of what, then "E's first T rows (the
    paper's)", which credited the paper with it (the paper does not say; fairseq's Linformer slices E). A report
    written under either old name still lends a refresh its timed costs (kept by row name, relabelled)."""
    rows = tp.build_rows(tp.read_runs([str(runs / "runs")]))
    assert rows[1]["name"] == "linformer k=128, layerwise, E's first T rows (fairseq's)"
    costs = {"full attention": {"ms": 1.0}, f"linformer k=128, layerwise, {old_name}": {"ms": 2.0},
             "linformer k=128, layerwise, resample, exact <= k, window 128, global [0, -1]": {"ms": 3.0}}
    out = tmp_path / "report"
    out.with_suffix(".json").write_text(json.dumps({"costs": costs, "meta": {"hardware": "cpu", "load": "idle"}}))
    kept, meta = tp.table_costs(rows, str(out), {"n": 128, "cost_batch": 8}, None)
    assert kept["linformer k=128, layerwise, E's first T rows (fairseq's)"] == {"ms": 2.0}
    assert meta["costs_measured"]["kept"] is True


def test_the_json_names_its_by_length_plot_relative_to_the_repository(runs, tmp_path, monkeypatch):
    """A committed report names its plot as the repository's other records name files (locations.repo_relative): the
    same on every checkout, not the absolute path of the clone that rendered it."""
    from linformer.files import locations

    meta = {"source": "s", "hardware": "h", "command": "c", "recipe": None, "n": 128, "cost_batch": 8, "load": "l",
            "missing": None}
    monkeypatch.setattr(tp.by_length, "eval_data", lambda run: None)  # these runs record no config.yaml
    monkeypatch.setattr(tp.by_length, "eval_lengths", lambda run: np.arange(len(run["_labels"])) % 300 + 1)
    monkeypatch.setattr(tp.by_length, "trained_on_eval", lambda run: np.zeros(len(run["_labels"]), dtype=bool))
    drawn = []
    monkeypatch.setattr(tp.by_length, "plot", lambda breakdown, titles, path, title: drawn.append(path))
    monkeypatch.setattr(locations, "repo_root", lambda: tmp_path)
    (tmp_path / "docs").mkdir()
    data = tp.write_table([str(runs / "runs")], str(tmp_path / "docs" / "t"), dict(meta), measure=False)
    assert data["meta"]["by_length_png"] == "docs/t_by_length.png"
    assert [Path(p).resolve() for p in drawn] == [tmp_path.resolve() / "docs" / "t_by_length.png"]
    assert "Plot: `t_by_length.png`." in (tmp_path / "docs" / "t.md").read_text()


def _record_config(run_dir, recorded_mirror):
    """A committed run's config.yaml (tp-cpu12k-imdb-full-s0) as if recorded with its data mirror at
    `recorded_mirror` (an older record names the mirror and its task's folder as plain paths)."""
    import yaml

    config = yaml.safe_load((REPO / "docs/results/table2_pretrained_runs/tp-cpu12k-imdb-full-s0/config.yaml").read_text())
    config["paths"]["data_mirror"], config["task"]["data_dir"] = str(recorded_mirror), f"{recorded_mirror}/imdb"
    (Path(run_dir) / "config.yaml").write_text(yaml.safe_dump(config))


def _imdb_files(mirror):
    (mirror / "imdb").mkdir(parents=True)
    for name in ("train.csv", "test.csv"):
        (mirror / "imdb" / name).write_text("text,label\nfine,1\n")


def test_a_record_s_task_data_under_its_mirror_is_read_from_this_machine_s_mirror(tmp_path, monkeypatch):
    """A record names its task data under the data mirror it also records (../shared/data/imdb beside
    ../shared/data): the report reads that task from the mirror the user set now (LINFORMER_DATA_MIRROR), as a
    newer record's ${paths.data_mirror}/imdb is, even where the recorded folder also exists (another copy)."""
    run = tmp_path / "run"
    run.mkdir()
    _record_config(run, tmp_path / "recorded")
    _imdb_files(tmp_path / "recorded")
    _imdb_files(tmp_path / "mine")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path / "mine"))
    assert Path(by_length._task_data({"_dir": str(run)}, "needed").data_dir) == tmp_path / "mine" / "imdb"


def test_a_report_whose_by_length_section_lacks_its_task_data_refuses_first_in_one_line(runs, tmp_path, monkeypatch,
                                                                                        capsys):
    """Without the data mirror the report warned that it would carry on without the contamination check, then
    failed in the by-length section naming the record's path (not the mirror the user set) and task.data_dir=null
    (no option of table2.py). Now it refuses before any other work, in one line naming the mirror it looked in,
    LINFORMER_DATA_MIRROR and --no-by-length, and writes nothing."""
    for d in (runs / "runs").iterdir():
        _record_config(d, tmp_path / "recorded")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path / "mine"))
    meta = {"source": "s", "hardware": "h", "command": "c", "recipe": None, "n": 128, "cost_batch": 8, "load": "l",
            "missing": None}
    with pytest.raises(tp.DataError) as refused:
        tp.write_table([str(runs / "runs")], str(tmp_path / "t"), dict(meta), measure=False)
    line = str(refused.value)
    assert "\n" not in line and f"{tmp_path / 'mine'}/imdb" in line and str(tmp_path / "recorded") in line
    assert "LINFORMER_DATA_MIRROR" in line and "--no-by-length" in line and "task.data_dir=null" not in line
    assert "warning" not in capsys.readouterr().err and not any(tmp_path.glob("t.*"))
