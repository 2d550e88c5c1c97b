"""Table 2 report on synthetic finetuning run directories, and every Table 2 experiment composing for both scripts."""

import json
import re
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from linformer.configs import compose
from linformer.errors import DataError
from linformer.report.table2 import PAPER, build_rows, paper_analogue, read_results, to_markdown

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from table2 import main  # noqa: E402  (the script's command line, in this process)

CONFIGS = REPO / "configs"
ROWS = sorted(p.stem for p in (CONFIGS / "experiment/table2").glob("[!_]*.yaml"))


def _compose(name, overrides):
    return OmegaConf.to_container(compose(name, overrides), resolve=True)


@pytest.mark.parametrize("row", ROWS)
def test_table2_experiment_composes_for_both_scripts(row):
    p = _compose("pretrain", [f"experiment=table2/{row}"])
    r = p["table2"]["row"]
    assert p["model"]["attention"] == r["attention"] and p["model"]["max_seq_len"] == r["n"]
    assert p["model"]["hidden_size"] == 768 and p["model"]["num_hidden_layers"] == 12
    t = p["trainer"]
    assert t["max_steps"] == 250000 and t["lr"] == 5e-4 and t["mixed_precision"] == "fp16" and t["warmup_steps"] == 10000
    assert t["batch_size"] * t["grad_accum"] * 64 * r["n"] == 2048 * 512  # tokens per update, 64 GPUs
    assert t["max_grad_norm"] == 0  # fairseq's --clip-norm 0.0: no clipping (TrainerSettings reads 0 as inf)
    assert p["optim"]["betas"] == [0.9, 0.98] and p["optim"]["eps"] == 1e-6 and p["optim"]["weight_decay"] == 0.01
    if r["attention"] == "linformer":
        assert (p["model"]["projected_dim"], p["model"]["sharing"]) == (r["k"], r["sharing"])
    for task, batch in (("sst2", 32), ("imdb", 8), ("qnli", 32), ("qqp", 32)):
        f = _compose("finetune", [f"experiment=table2/{row}", f"task={task}"])
        ft = f["trainer"]
        assert ft["epochs"] == 10 and ft["warmup_ratio"] == 0.06 and ft["lr"] == 1e-5 and ft["max_steps"] is None
        assert ft["batch_size"] == batch and ft["batch_size"] * ft["grad_accum"] == 32
        assert ft["max_grad_norm"] == 0
        assert f["optim"]["weight_decay"] == 0.1 and f["model_path"].endswith(f"pretrain/{p['run_name']}")
        assert f["run_name"].startswith(f"{task}-")
    f = _compose("finetune", [f"experiment=table2/{row}", "task=sst2", "trainer.lr=3e-5", "model_path=x/y"])
    assert f["trainer"]["lr"] == 3e-5 and f["model_path"] == "x/y"


def test_mini_experiment_composes():
    p = _compose("pretrain", ["experiment=table2_mini"])
    assert p["trainer"]["max_steps"] == 7200 and p["model"]["max_seq_len"] == 128
    assert p["trainer"]["max_grad_norm"] == 1.0  # the scaled-down profile keeps clipping (its committed runs did)
    f = _compose("finetune", ["experiment=table2_mini", "task=imdb", "model_path=x"])
    assert f["trainer"]["epochs"] == 3 and f["max_train_examples"] == 10000


def _run(root: Path, name: str, task: str, acc: float, *, attention="linformer", n=128, k=32, sharing="kv",
         scratch=False, seed=0, ppl=12.0, f1=None, split=None, lr=None, model_type="linformer", val=None,
         scored=None, arch=None):
    """A finished finetuning run directory: metrics.jsonl and results.json, as linformer.train.finetune writes them
    (`arch`: more of the architecture fields it records)."""
    d = root / name
    d.mkdir(parents=True)
    metrics = {"epoch": 1, "accuracy": acc} | ({"f1": f1} if f1 is not None else {})
    d.joinpath("metrics.jsonl").write_text(json.dumps({"step": 10, "time": 1.0, "eval_accuracy": acc}) + "\n")
    d.joinpath("results.json").write_text(json.dumps({
        "task": task, "eval_split": split or ("test" if task == "imdb" else "dev"), "metrics": metrics,
        "best_epoch": 1, "from_scratch": scratch, "model_type": model_type, "attention": attention,
        "max_seq_len": n, "projected_dim": k, "sharing": sharing, "pretrain_val_ppl": ppl, "seed": seed,
        "max_length": 128} | ({"lr": lr} if lr is not None else {})
        | ({"selection": {"split": "validation", "value": val}} if val is not None else {})
        | ({"reported": {"split": "dev", "step": 10, "examples": scored[0], "of": scored[1]}} if scored else {})
        | (arch or {})))


def test_runs_of_another_architecture_are_their_own_row_named_by_what_differs(tmp_path):
    """A conv and a linear run (seeds 0 and 1) were averaged as two seeds of one model and set against the paper's
    linear row: every architecture field results.json records is part of a row's key and, where it is not the
    paper's, of its name. A record without a field (older) is the default; one k per layer is its own row."""
    runs = tmp_path / "runs"
    _run(runs, "linear", "sst2", 0.80, seed=1, arch={"projection": "linear", "overlap_columns": "keep",
                                                      "classifier_pooling": "cls"})  # RoBERTa's head: the paper's
    _run(runs, "old", "sst2", 0.70, seed=2)  # written before the fields: the paper's linear projection
    _run(runs, "conv", "sst2", 0.60, seed=0, arch={"projection": "conv"})
    _run(runs, "local", "sst2", 0.50, seed=0, arch={"length_policy": "resample", "local_window": 16,
                                                     "global_positions": [0, -1], "overlap_columns": "mask"})
    _run(runs, "layers", "sst2", 0.40, seed=0, k=[16, 32])
    rows = {r["name"]: r for r in build_rows(read_results([str(runs / "*")]))}
    assert list(rows) == ["Linformer, 32, shared kv, n=128", "Linformer, 32, shared kv, conv, n=128",
                          ("Linformer, 32, shared kv, resample, window 16, global [0, -1], covered columns masked, "
                           "n=128"), "Linformer, 16/32 per layer, shared kv, n=128"]
    assert rows["Linformer, 32, shared kv, n=128"]["sst2"] == 75.0
    conv = rows["Linformer, 32, shared kv, conv, n=128"]
    assert conv["sst2"] == 60.0 and conv["variant"] == {"projection": "conv"}
    assert rows["Linformer, 16/32 per layer, shared kv, n=128"]["k"] == [16, 32]
    md = to_markdown(list(rows.values()), "cpu", "x")
    assert "| Linformer, 32, shared kv, conv, n=128 | yes | 60.0 |" in md
    assert md.count("~Linformer, 128, shared kv, n=512") == 3  # the per-layer k has no analogue


def test_runs_of_another_model_size_are_their_own_row_from_the_record_or_the_kept_model(tmp_path):
    """A 1-layer D=32 model and the 2-layer D=128 one were averaged as two seeds of one row: the encoder's size is
    part of a row's key. A record written before it reads the size from the run's best/config.json; with neither,
    the size is unknown and tells no row apart."""
    runs = tmp_path / "runs"
    tiny = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 512}
    _run(runs, "tiny", "sst2", 0.80, seed=0, arch=tiny)
    _run(runs, "small", "sst2", 0.60, seed=1)  # its size only in the model it kept
    (runs / "small" / "best").mkdir()
    (runs / "small" / "best" / "config.json").write_text(json.dumps({**tiny, "hidden_size": 32,
                                                                      "num_hidden_layers": 1}))
    _run(runs, "unknown", "sst2", 0.70, seed=2)
    _run(runs, "full-tiny", "sst2", 0.50, seed=0, attention="full", k=None, sharing=None, arch=tiny)
    rows = {r["name"]: r for r in build_rows(read_results([str(runs / "*")]))}
    assert rows["Linformer, 32, shared kv, D=128, 2 layers, 2 heads, FFN 512, n=128"]["sst2"] == 80.0
    assert rows["Linformer, 32, shared kv, D=32, 1 layer, 2 heads, FFN 512, n=128"]["sst2"] == 60.0
    assert rows["Linformer, 32, shared kv, n=128"]["sst2"] == 70.0
    assert rows["Full attention (RoBERTa), D=128, 2 layers, 2 heads, FFN 512, n=128"]["sst2"] == 50.0
    assert len(rows) == 4


def test_the_pretrained_layout_refuses_a_row_of_two_architectures(tmp_path):
    from linformer.report import table2_pretrained

    runs = [{"_dir": str(tmp_path / name), "task": "sst2", "seed": seed, "attention": "linformer",
             "projected_dim": 64, "sharing": "kv", "max_seq_len": 128} | arch
            for name, seed, arch in (("a", 0, {"projection": "linear"}), ("b", 1, {"projection": "conv"}))]
    with pytest.raises(DataError, match=f"{tmp_path / 'a'} and {tmp_path / 'b'} differ in projection "
                                        r"\('linear' and 'conv'\)"):
        table2_pretrained._group(runs)
    assert list(table2_pretrained._group([{**runs[0], "projected_dim": [32, 64]}])) == [
        ("linformer", (32, 64), "kv", None, False)]


def test_table2_from_synthetic_runs(tmp_path, capsys):
    runs = tmp_path / "runs"
    _run(runs, "a", "sst2", 0.80, attention="full", sharing="headwise")
    _run(runs, "b", "sst2", 0.70, attention="full", sharing="headwise", scratch=True, ppl=None)
    _run(runs, "c", "sst2", 0.78, seed=0)
    _run(runs, "d", "sst2", 0.80, seed=1)
    _run(runs, "e", "imdb", 0.75)
    _run(runs, "f", "qqp", 0.85, f1=0.8)
    _run(runs, "g", "qnli", 0.6, split="devsplit")
    out = tmp_path / "rep/table2"
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "test-cpu", "--command", "make x"]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    assert set(data) == {"hardware", "run_devices", "command", "rows"} and data["hardware"] == "test-cpu"
    rows = {(r["attention"], r["pretrained"]): r for r in data["rows"]}
    assert len(data["rows"]) == 3
    full, scratch, lin = rows[("full", True)], rows[("full", False)], rows[("linformer", True)]
    assert full["k"] is None and full["sharing"] is None and full["sst2"] == 80.0 and full["average"] == 80.0
    assert scratch["val_ppl"] is None and scratch["sst2"] == 70.0
    assert lin["sst2"] == 79.0 and lin["imdb"] == 75.0 and lin["qqp"] == 85.0 and lin["qnli"] is None
    assert lin["average"] == pytest.approx((79 + 75 + 85) / 3, abs=0.01) and lin["qnli_devsplit"] == 60.0
    assert lin["val_ppl"] == 12.0 and (lin["n"], lin["k"], lin["sharing"]) == (128, 32, "kv")
    keys = {"name", "attention", "n", "k", "sharing", "pretrained", "sst2", "imdb", "qnli", "qqp", "average", "val_ppl"}
    assert all(set(r) - {"qnli_devsplit"} == keys for r in data["rows"])
    md = out.with_suffix(".md").read_text()
    assert "85.0 (80.0)" in md and "not QNLI dev" in md and "test-cpu" in md and "~Linformer, 128, shared kv" in md
    assert "+10.0 points" in md  # pretraining gain on SST-2
    assert "Left out" not in md and "unfinished" not in data
    # the same runs again: rebuilt; a table of other runs at the same path: refused, the earlier one kept
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "test-cpu", "--command", "make x"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main([str(runs / "a"), "--out", str(out), "--hardware", "test-cpu", "--command", "make x"])
    assert stop.value.code == 2 and "runs" in capsys.readouterr().err and out.with_suffix(".md").read_text() == md


def test_the_machine_rendering_the_report_is_not_given_as_the_runs_hardware(tmp_path):
    """Runs of an earlier version record no device, and the paper layout's report said "Hardware: <the machine that
    rendered it>" as though the runs were made there; the runs' devices (as their records say, "not recorded" for
    those that do not) and the report's machine are two statements, as in the pretrained layout."""
    from linformer.report.table2 import write_table2

    runs = tmp_path / "runs"
    _run(runs, "old", "sst2", 0.80, seed=0)  # recorded before results.json named a device
    _run(runs, "new", "sst2", 0.70, seed=1, arch={"device": "NVIDIA H200"})
    data = write_table2([str(runs / "*")], str(tmp_path / "t"), "report-cpu", "make x")
    assert data["hardware"] == "report-cpu"
    assert data["run_devices"] == "not recorded (1 run), NVIDIA H200 (1 run)" or \
        data["run_devices"] == "NVIDIA H200 (1 run), not recorded (1 run)"
    md = (tmp_path / "t.md").read_text()
    assert f"Runs made on: {data['run_devices']}. This report made on: report-cpu." in md
    assert "Hardware: report-cpu" not in md


def test_runs_of_tasks_without_a_column_are_said_not_dropped(tmp_path, capsys):
    """Runs of a task of one's own wrote an empty table (header only) with exit status 0."""
    runs = tmp_path / "runs"
    _run(runs, "a", "agnews", 0.9)
    with pytest.raises(SystemExit) as stop:
        main([str(runs / "*"), "--out", str(tmp_path / "t2"), "--hardware", "cpu", "--command", "x"])
    assert stop.value.code == 2 and "are of task(s) agnews; Table 2 has SST-2" in capsys.readouterr().err
    _run(runs, "b", "sst2", 0.8)
    assert main([str(runs / "*"), "--out", str(tmp_path / "t2"), "--hardware", "cpu", "--command", "x"]) == 0
    assert "Left out: runs of tasks Table 2 has no column for (agnews)" in (tmp_path / "t2.md").read_text()


def test_lr_grid_keeps_the_best_validation_average_per_cell(tmp_path):
    runs = tmp_path / "runs"
    # SST-2 at lr 1e-3: validation 0.70 and 0.86 (mean 78); at 3e-4: 0.80 and 0.80 (mean 80): 3e-4 is kept. Its
    # reported accuracy (0.75) is below 1e-3's (0.85): the choice never looks at the reported split. IMDB keeps 1e-3.
    for name, task, acc, val, seed, lr in [("a", "sst2", 0.85, 0.70, 0, 1e-3), ("b", "sst2", 0.85, 0.86, 1, 1e-3),
                                           ("c", "sst2", 0.75, 0.80, 0, 3e-4), ("d", "sst2", 0.75, 0.80, 1, 3e-4),
                                           ("e", "imdb", 0.70, 0.9, 0, 1e-3), ("f", "imdb", 0.80, 0.5, 0, 3e-4)]:
        _run(runs, name, task, acc, seed=seed, lr=lr, val=val)
    _run(runs, "g", "sst2", 0.5, attention="full", sharing="headwise")  # no lr recorded: one group
    out = tmp_path / "t"
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x"]) == 0
    rows = {r["attention"]: r for r in json.loads(out.with_suffix(".json").read_text())["rows"]}
    assert rows["linformer"]["sst2"] == 75.0 and rows["linformer"]["imdb"] == 70.0 and rows["full"]["sst2"] == 50.0
    md = out.with_suffix(".md").read_text()
    assert "imdb:1, sst2:2; best lr imdb:0.001, sst2:0.0003" in md
    # a grid whose runs record no validation score is refused: its lr would be chosen on the reported split
    _run(runs, "h", "qnli", 0.6, lr=1e-3)
    _run(runs, "i", "qnli", 0.7, lr=3e-4)
    with pytest.raises(DataError, match=r"record no validation score .* chosen on the split the table reports"):
        build_rows([json.loads((runs / x / "results.json").read_text()) for x in ("h", "i")])


def test_lrs_that_tie_on_validation_keep_the_smaller_lr_whatever_the_reported_split_says(tmp_path):
    """Two lrs with the same mean validation score: the cell reports the smaller lr's runs (the larger one's reported
    accuracy, higher here, is never looked at)."""
    runs = tmp_path / "runs"
    for name, acc, seed, lr in [("a", 0.90, 0, 1e-3), ("b", 0.70, 0, 3e-4), ("c", 0.90, 1, 1e-3), ("d", 0.70, 1, 3e-4)]:
        _run(runs, name, "sst2", acc, seed=seed, lr=lr, val=0.8)
    out = tmp_path / "t"
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x"]) == 0
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["sst2"] == 70.0
    assert "best lr sst2:0.0003" in out.with_suffix(".md").read_text()


def test_a_run_scored_on_a_subset_of_its_split_is_refused_unless_asked_for_and_then_marked(tmp_path, capsys):
    """A run finetuned with max_eval_examples=200 was reported as SST-2's dev accuracy, nothing saying it scored 200
    of the 872 dev examples."""
    runs = tmp_path / "runs"
    _run(runs, "whole", "sst2", 0.80, scored=(872, 872))
    _run(runs, "part", "sst2", 0.51, seed=1, scored=(200, 872))
    out = tmp_path / "t"
    with pytest.raises(SystemExit) as stop:
        main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("error:") == 1 and not out.with_suffix(".md").exists()
    assert f"{runs / 'part'} scored 200 of the 872 examples of sst2's dev split (max_eval_examples)" in err
    assert "--subsets" in err
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x", "--subsets"]) == 0
    row = json.loads(out.with_suffix(".json").read_text())["rows"][0]
    assert row["sst2"] == 65.5 and row["subsets"] == {"sst2": [[200, 872]]}
    assert "| 65.5 [200 of 872 examples] |" in out.with_suffix(".md").read_text()


def test_two_runs_of_one_seed_in_a_cell_are_refused_naming_both(tmp_path, capsys):
    """Four runs of seed 0 (an old run, its rerun by another version, ...) were averaged into a cell that said
    sst2:1 (one seed). Two seeds, or one seed at each lr of a grid, are still one run per seed."""
    runs = tmp_path / "runs"
    _run(runs, "a", "sst2", 0.80, seed=0)
    _run(runs, "b", "sst2", 0.70, seed=1)
    _run(runs, "c", "imdb", 0.70, seed=0)  # another task: another cell
    assert main([str(runs / "*"), "--out", str(tmp_path / "t"), "--hardware", "cpu", "--command", "x"]) == 0
    _run(runs, "a-again", "sst2", 0.60, seed=0)
    with pytest.raises(SystemExit) as stop:
        main([str(runs / "*"), "--out", str(tmp_path / "t2"), "--hardware", "cpu", "--command", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("error:") == 1
    assert f"{runs / 'a'} and {runs / 'a-again'} are both seed 0 of Linformer, 32, shared kv, n=128, sst2" in err


def test_the_pretrained_and_scratch_layouts_refuse_two_runs_of_one_seed(tmp_path):
    """Their seed-matched pairs kept one of two runs of a seed without a word (a dict by seed)."""
    import numpy as np

    from linformer.report import table2_pretrained, table2_scratch

    runs = [{"_dir": str(tmp_path / name), "task": "sst2", "seed": 0, "_labels": np.array([0, 1]),
             "_correct": np.array([True, False]), "attention": "full", "max_seq_len": 128, "max_length": 128}
            for name in ("x", "y")]
    with pytest.raises(DataError, match=f"{tmp_path / 'x'} and {tmp_path / 'y'} are both seed 0 of row full "
                                        "attention \\(teacher\\), sst2"):
        table2_pretrained._correct_by_seed(runs)
    with pytest.raises(DataError, match=f"{tmp_path / 'x'} and {tmp_path / 'y'} are both seed 0 of row Full "
                                        "attention, n=128, sst2"):  # the scratch table's own row name
        table2_scratch._by_seed(runs, "sst2")
    assert list(table2_scratch._by_seed(runs[:1], "sst2")) == [0]


def test_paper_numbers_consistent():
    for key, (_, *accs, avg) in PAPER.items():
        assert sum(accs) / 4 == pytest.approx(avg, abs=0.006), key
    row = {"attention": "linformer", "n": 256, "k": 128, "sharing": "layerwise", "pretrained": True}
    assert paper_analogue(row) == ("linformer", 512, 256, "layerwise")


def test_roberta_checkpoint_is_a_full_attention_row(tmp_path):
    """A model finetuned from a RoBERTa checkpoint records no attention, n or k: it is full attention at the
    length it was finetuned at, never a Linformer row with some k."""
    runs = tmp_path / "runs"
    _run(runs, "roberta", "sst2", 0.9, attention=None, n=None, k=None, sharing=None, model_type="roberta")
    _run(runs, "full", "sst2", 0.8, attention="full", k=64, sharing="kv", seed=1)  # k in the config, not the model
    (tmp_path / "pretrain" / "p").mkdir(parents=True)  # a pretraining run (no results.json) is not a row
    (tmp_path / "pretrain" / "p" / "metrics.jsonl").write_text('{"step": 1, "loss": 3.0}\n')
    out = tmp_path / "t"
    assert main([str(runs / "roberta" / "results.json"), str(runs / "full"), str(tmp_path / "pretrain"),
                 "--out", str(out), "--hardware", "cpu", "--command", "x"]) == 0
    (row,) = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert (row["attention"], row["n"], row["k"], row["sharing"], row["sst2"]) == ("full", 128, None, None, 85.0)
    assert row["name"] == "Full attention (RoBERTa), n=128"


def test_no_runs_is_one_error_line(tmp_path, monkeypatch, capsys):
    """scripts/table2.py run in this process as its command line runs it."""
    from tests.conftest import run_script

    (tmp_path / "empty").mkdir()
    code = run_script("table2", [str(tmp_path / "empty"), "--out", str(tmp_path / "t")], monkeypatch)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == f"error: no finished finetuning runs (with results.json) at or under {tmp_path / 'empty'}\n"
    assert not (tmp_path / "t.md").exists()


def test_a_named_run_or_glob_that_names_nothing_is_an_error_not_a_run_left_out(tmp_path):
    """Two patterns, one of them mistyped: the table was written from the other's runs without a word."""
    from linformer.report.table2 import read_results
    from linformer.rundir import named_paths

    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    (run / "results.json").write_text('{"task": "sst2", "metrics": {"accuracy": 0.9}}')
    assert named_paths([str(tmp_path / "runs" / "*"), str(run / "results.json")]) == [run, run / "results.json"]
    assert named_paths([str(tmp_path / "**" / "results.json")]) == [run / "results.json"]
    assert len(read_results([str(tmp_path / "runs" / "*")])) == 1
    for typo, message in ((str(tmp_path / "runs" / "b*"), "matches no file or folder"),
                          (str(tmp_path / "runs" / "b"), "does not exist")):
        with pytest.raises(DataError, match=f"^{re.escape(typo)} {message}$"):
            read_results([str(tmp_path / "runs" / "*"), typo])


def test_the_columns_follow_the_task_registry():
    """Titles and order from data.tasks (PAPER_ORDER, TITLES); a task with an F1 metric shows it beside accuracy."""
    from linformer.report import table2

    row = {"name": "full", "pretrained": True, "sst2": 90.1, "imdb": 88.0, "qnli": None, "qqp": 85.5,
           "_f1": {"qqp": 80.2}, "average": 87.9, "val_ppl": 4.5, "_seeds": {"sst2": 3}, "_lr": {},
           "attention": "full", "n": 512, "k": None, "sharing": None}
    lines = table2.to_markdown([row], "cpu", "cmd").splitlines()
    assert "| model | pretrained | SST-2 | IMDB | QNLI | QQP acc (F1) | avg |" in next(x for x in lines if x.startswith("| model"))
    assert "| full | yes | 90.1 | 88.0 | - | 85.5 (80.2) | 87.90 |" in next(x for x in lines if x.startswith("| full"))


@pytest.mark.parametrize("args, flag, layouts", [
    (["--profile", "gpu"], "--profile", "pretrained or scratch"),
    (["--layout", "scratch", "--no-measure"], "--no-measure", "pretrained"),
    (["--no-by-length"], "--no-by-length", "pretrained"),
])
def test_an_option_of_another_layout_is_refused_not_ignored(tmp_path, capsys, args, flag, layouts):
    from tests.conftest import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("table2").main([str(tmp_path), *args])
    assert stop.value.code == 2
    layout = args[args.index("--layout") + 1] if "--layout" in args else "paper"
    assert capsys.readouterr().err.startswith(f"error: {flag} applies to --layout {layouts}, not {layout}\n")


@pytest.mark.parametrize("damage, key", [({"metrics": None}, "metrics"), ({"metrics": {"f1": 0.5}}, "metrics.accuracy"),
                                         ({"max_seq_len": None, "max_length": None}, "max_length"), ("[1, 2]", None),
                                         ("{", None)])
def test_a_malformed_results_json_is_one_line_naming_the_file_and_key(tmp_path, capsys, damage, key):
    """A results.json without "metrics" was a KeyError traceback, and a damaged one was left out as unfinished."""
    runs = tmp_path / "runs"
    _run(runs, "a", "sst2", 0.80, attention="full", sharing="headwise")
    results = runs / "a" / "results.json"
    if isinstance(damage, dict):
        results.write_text(json.dumps({**json.loads(results.read_text()), **damage}))
    else:
        results.write_text(damage)
    out = tmp_path / "t"
    with pytest.raises(SystemExit) as stop:
        main([str(runs), "--out", str(out), "--hardware", "cpu", "--command", "x"])
    said = capsys.readouterr().err
    assert stop.value.code == 2
    what = f"has no {key} " if key else r"cannot be read \("
    assert re.fullmatch(f"error: {re.escape(str(results))} {what}[^\n]*\n", said), said
    assert not out.with_suffix(".md").exists()


def test_a_finetuning_run_without_results_is_named_as_left_out(tmp_path):
    """A run still running (or stopped, or failed) has no results.json: it is no row, and the report says so."""
    runs = tmp_path / "runs"
    _run(runs, "a", "sst2", 0.80, attention="full", sharing="headwise")
    (runs / "busy").mkdir()
    (runs / "busy" / "metrics.jsonl").write_text('{"step": 1, "time": 1.0, "loss": 0.7}\n')
    (runs / "busy" / "run.json").write_text(json.dumps({"stage": "finetune", "status": "running"}))
    out = tmp_path / "t"
    assert main([str(runs), "--out", str(out), "--hardware", "cpu", "--command", "x"]) == 0
    assert json.loads(out.with_suffix(".json").read_text())["unfinished"] == [str(runs / "busy")]
    assert (f"Left out: 1 run(s) without results.json (still running, stopped or failed): {runs / 'busy'}."
            in out.with_suffix(".md").read_text())


def test_an_option_of_another_layout_is_named_with_the_layouts_that_read_it():
    from linformer.report.layouts import misplaced_option

    assert misplaced_option("paper", ["--subsets"]) is None
    assert misplaced_option("scratch", ["--profile"]) is None
    assert misplaced_option("paper", ["--profile"]) == "--profile applies to --layout pretrained or scratch, not paper"
    assert misplaced_option("scratch", ["--no-by-length"]) == "--no-by-length applies to --layout pretrained, not scratch"


def test_the_scratch_layout_defaults_to_its_own_profile(tmp_path, monkeypatch):
    """write_report without a profile takes the layout's default (scratch: toy), as scripts/table2.py does."""
    from linformer.report import table2

    seen = []
    monkeypatch.setattr(table2.table2_scratch, "write_table", lambda runs, out, profile, *a: seen.append(profile) or
                        (Path(f"{out}.md").write_text(""), {"rows": []})[1])
    table2.write_report([str(tmp_path / "none")], str(tmp_path / "t"), "scratch", hardware="h", command="c")
    assert [profile.name for profile in seen] == ["toy"]


def test_each_layout_reports_its_reproductions_default_profile_and_one_check_refuses_another(tmp_path):
    """write_report's default profile was "cpu" for every layout: the scratch layout refused it from Python (it has
    toy and gpu), and the defaults lived in scripts/table2.py alone; a bad profile was refused by two checks."""
    from linformer.errors import ConfigError, DataError
    from linformer.experiments import pretrained, scratch
    from linformer.report.table2 import layout_profile, write_report

    assert layout_profile("scratch", None) is scratch.PROFILES[scratch.DEFAULT_PROFILE]
    assert layout_profile("pretrained", None) is pretrained.PROFILES[pretrained.DEFAULT_PROFILE]
    assert layout_profile("paper", None) is None
    with pytest.raises(DataError, match=r"none/\* matches no file or folder"):  # read as the toy profile's table
        write_report([str(tmp_path / "none" / "*")], str(tmp_path / "t"), layout="scratch")
    for layout, profiles in (("scratch", "toy, gpu"), ("pretrained", ", ".join(pretrained.PROFILES))):
        with pytest.raises(ConfigError, match=f"^--profile 'bogus' is not one of the {layout} layout's: {profiles}$"):
            write_report([str(tmp_path / "none" / "*")], str(tmp_path / "t"), layout=layout, profile="bogus")
    assert not list(tmp_path.glob("t*"))


def test_a_cell_whose_seeds_scored_different_subsets_says_so(tmp_path):
    """subset_seed unset follows seed: each seed of a cell scored its own draw of the 200 examples, not one subset."""
    import yaml

    runs = tmp_path / "runs"
    for seed, subset_seed in [(0, None), (1, None)]:
        _run(runs, f"s{seed}", "sst2", 0.5 + seed / 10, seed=seed, scored=(200, 872))
        (runs / f"s{seed}" / "config.yaml").write_text(yaml.safe_dump(
            {"seed": seed, "subset_seed": subset_seed, "max_eval_examples": 200}))
    out = tmp_path / "t"
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x", "--subsets"]) == 0
    assert ("[200 of 872 examples; 2 different draws of the examples (subset_seed unset follows seed; give "
            "subset_seed=<fixed> to score every seed on one subset)]") in out.with_suffix(".md").read_text()
    for seed in (0, 1):  # one subset for every seed: one draw, the plain mark
        (runs / f"s{seed}" / "config.yaml").write_text(yaml.safe_dump(
            {"seed": seed, "subset_seed": 0, "max_eval_examples": 200}))
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x", "--subsets"]) == 0
    assert "| 55.0 [200 of 872 examples] |" in out.with_suffix(".md").read_text()


def test_kept_records_make_the_paper_layout_as_they_make_the_pretrained_one(tmp_path):
    """A run's kept records (results.json and config.json, no metrics.jsonl) were found by the pretrained layout and
    left out by the paper layout: both read the same runs from the same paths (``rows.finished_runs``)."""
    _run(tmp_path / "runs", "live", "sst2", 0.80, seed=0)
    _run(tmp_path / "kept", "imdb-k32-s0", "sst2", 0.60, seed=1)
    kept = tmp_path / "kept" / "imdb-k32-s0"
    (kept / "metrics.jsonl").unlink()
    (kept / "config.json").write_text("{}")
    for paths in ([str(tmp_path / "runs"), str(tmp_path / "kept")], [str(tmp_path / "*" / "*")],
                  [str(tmp_path / "runs" / "live" / "results.json"), str(kept)]):
        assert [Path(r["_dir"]).name for r in read_results(paths)] == ["imdb-k32-s0", "live"], paths
    rows = {r["name"]: r for r in build_rows(read_results([str(tmp_path / "runs"), str(tmp_path / "kept")]))}
    assert rows["Linformer, 32, shared kv, n=128"]["sst2"] == 70.0


def test_a_kept_models_size_is_read_once_for_the_whole_table(tmp_path, monkeypatch):
    """A record without the encoder's size reads it from its run's best/config.json: that file was read again for
    every row key the table asked for (grouping, ordering, the one-architecture check), many times per run."""
    from linformer.report import rows as rows_module

    runs = tmp_path / "runs"
    for seed in range(3):
        _run(runs, f"small-{seed}", "sst2", 0.6 + seed / 100, seed=seed)  # their size only in the models they kept
        (runs / f"small-{seed}" / "best").mkdir()
        (runs / f"small-{seed}" / "best" / "config.json").write_text(json.dumps(
            {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}))
    reads = []
    real = rows_module.read_json
    monkeypatch.setattr(rows_module, "read_json", lambda path, *a, **k: reads.append(str(path)) or real(path, *a, **k))
    (row,) = build_rows(read_results([str(runs / "*")]))
    assert row["name"] == "Linformer, 32, shared kv, D=32, 1 layer, 2 heads, FFN 64, n=128"
    assert sorted(reads) == sorted(str(runs / f"small-{seed}" / "best" / "config.json") for seed in range(3))
    config = runs / "small-0" / "best" / "config.json"
    config.write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                                  "intermediate_size": 64, "model_type": "linformer"}))  # rewritten: read again
    assert rows_module.with_size({"_dir": str(runs / "small-0")})["hidden_size"] == 64


def test_a_run_recorded_before_its_reported_block_scored_on_a_subset_is_refused_unless_asked_for(tmp_path, capsys):
    """A run of a version that recorded no `reported` block (results.json: num_eval_examples; config.yaml:
    max_eval_examples) scored 100 of SST-2's 872 dev examples and was taken as the whole split, without --subsets
    and without a mark. Its num_eval_examples at its max_eval_examples is a subset; one below it scored its whole
    split (the limit cut nothing)."""
    runs = tmp_path / "runs"
    _run(runs, "old", "sst2", 0.51)
    _run(runs, "whole", "sst2", 0.80, seed=1)
    for name, scored, limit in (("old", 100, 100), ("whole", 67, 100)):
        results = json.loads((runs / name / "results.json").read_text())
        (runs / name / "results.json").write_text(json.dumps({**results, "num_eval_examples": scored}))
        (runs / name / "config.yaml").write_text(f"task:\n  name: sst2\nmax_eval_examples: {limit}\n")
    out = tmp_path / "t"
    with pytest.raises(SystemExit) as stop:
        main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"{runs / 'old'} scored 100 examples of sst2's dev split (max_eval_examples)" in err
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x", "--subsets"]) == 0
    row = json.loads(out.with_suffix(".json").read_text())["rows"][0]
    assert row["subsets"] == {"sst2": [[100, None]]}
    assert "| 65.5 [100 of the split's examples] |" in out.with_suffix(".md").read_text()


def test_a_cell_whose_runs_skipped_updates_says_how_many_as_compare_runs_does(tmp_path):
    """compare_runs marks the reported score of a run that skipped updates; Table 2 took such runs without a mark.
    A cell says how many its runs skipped: results.json's skipped_steps, or for a run that recorded none (an older
    record) its logged non-finite losses; a clean run's cell is as it was."""
    runs = tmp_path / "runs"
    _run(runs, "counted", "sst2", 0.50, seed=0)
    _run(runs, "older", "sst2", 0.60, seed=1)
    _run(runs, "clean", "imdb", 0.70, seed=0)
    for name, record in (("counted", {"skipped_steps": 3}), ("clean", {"skipped_steps": 0})):
        results = json.loads((runs / name / "results.json").read_text())
        (runs / name / "results.json").write_text(json.dumps({**results, **record}))
    (runs / "older" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "time": s, "loss": float("nan") if s in (2, 3) else 1.0}) + "\n" for s in (1, 2, 3)))
    out = tmp_path / "t"
    assert main([str(runs / "*"), "--out", str(out), "--hardware", "cpu", "--command", "x"]) == 0
    row = json.loads(out.with_suffix(".json").read_text())["rows"][0]
    assert row["skipped_updates"] == {"sst2": 5}
    table = out.with_suffix(".md").read_text()
    assert "| 55.0 [5 updates skipped] | 70.0 |" in table
    assert "`N updates skipped`: N updates were skipped for a non-finite loss or gradient" in table


def test_an_out_inside_a_run_it_reads_is_refused_even_with_overwrite(tmp_path, monkeypatch, capsys):
    """--out <run>/results --overwrite wrote the table's JSON over the run's own results.json, which table2 reads:
    an output file inside a run it reads is refused in one line, overwrite or not, and the run is left as it was."""
    runs = tmp_path / "runs"
    _run(runs, "a", "sst2", 0.80)
    before = (runs / "a" / "results.json").read_bytes()
    from tests.conftest import run_script

    assert run_script("table2", [str(runs / "*"), "--out", str(runs / "a" / "results"), "--overwrite"],
                      monkeypatch) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and f"is inside {runs / 'a'}, which this command reads" in lines[0], lines
    assert (runs / "a" / "results.json").read_bytes() == before and not (runs / "a" / "results.md").exists()
