import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from linformer.errors import ConfigError, DataError
from linformer.files.mappings import read_json
from linformer.report.compare import compare_runs, summarize_run
from linformer.rundir import find_runs, load_run, named_paths, read_metrics

from .conftest import line_colours

REPO = Path(__file__).resolve().parents[2]


def _pretrain_rows(scale: float):
    rows = [{"step": 0, "time": 0.0, "val_loss": 9.0, "val_ppl": math.exp(9.0)}]
    for s in range(1, 11):
        rows.append({"step": s, "time": float(s), "loss": scale * (10 - s) + 1.0, "lr": 1e-3, "tokens_per_s": 100.0 * s})
    rows.append({"step": 10, "time": 10.5, "val_loss": 3.0 * scale, "val_ppl": math.exp(3.0 * scale)})
    return rows


def test_summary_final_and_best(tmp_path, make_run):
    run = load_run(make_run(tmp_path, "pretrain", "a", _pretrain_rows(1.0)))
    s = summarize_run(run, ["loss", "val_loss", "tokens_per_s", "missing"])
    assert s["loss"] == {"final": 1.0, "final_step": 10, "best": 1.0, "best_step": 10}
    assert s["val_loss"]["final"] == 3.0 and s["val_loss"]["best"] == 3.0
    assert s["tokens_per_s"]["best"] == 1000.0 and s["tokens_per_s"]["best_step"] == 10   # higher is better
    assert "missing" not in s


def test_best_is_not_final(tmp_path, make_run):
    rows = [{"step": 1, "time": 1, "eval_accuracy": 0.7}, {"step": 2, "time": 2, "eval_accuracy": 0.9},
            {"step": 3, "time": 3, "eval_accuracy": 0.8}]
    run = load_run(make_run(tmp_path, "finetune", "ft", rows, task="sst2"))
    s = summarize_run(run, ["eval_accuracy"])["eval_accuracy"]
    assert (s["final"], s["best"], s["best_step"]) == (0.8, 0.9, 2)


def test_a_metric_s_best_follows_its_registry_entry(tmp_path, make_run, monkeypatch):
    """A metric's direction came from a list of words: a new metric such as "mcc" counted as lower-is-better, and
    its "best" was its worst epoch."""
    from linformer.data.metrics import METRICS, MetricSpec

    monkeypatch.setitem(METRICS, "mcc", MetricSpec("accuracy", higher_is_better=True))
    rows = [{"step": 40, "time": 1, "val_mcc": 0.38}, {"step": 80, "time": 2, "val_mcc": 1.0},
            {"step": 120, "time": 3, "val_mcc": 0.9}]
    run = load_run(make_run(tmp_path, "finetune", "ft", rows, task="sst2"))
    s = summarize_run(run, ["val_mcc"])["val_mcc"]
    assert (s["best"], s["best_step"]) == (1.0, 80)
    table = compare_runs([run.path], tmp_path / "cmp")["table"]  # a registered metric is shown by default
    assert "| val_mcc |" in table and "Best = max for val_mcc; min otherwise." in table


def test_markdown_and_pngs(tmp_path, make_run):
    make_run(tmp_path / "out", "pretrain", "lin-k32", _pretrain_rows(1.0))
    make_run(tmp_path / "out", "pretrain", "full", _pretrain_rows(0.5),
             model={"name": "tiny", "attention": "full", "projected_dim": 32, "sharing": "none", "max_seq_len": 128})
    make_run(tmp_path / "out", "finetune", "sst2-run",
             [{"step": 5, "time": 1, "loss": 0.7}, {"step": 10, "time": 2, "eval_accuracy": 0.75}], task="sst2",
             results={"task": "sst2", "attention": "linformer", "projected_dim": 16, "sharing": "kv"})
    res = compare_runs([tmp_path / "out"], tmp_path / "cmp")
    table = (tmp_path / "cmp" / "runs.md").read_text()
    lines = table.splitlines()
    assert lines[0].startswith("| run | stage | model | attention | n | k | sharing | task | experiment_name | steps |")
    assert "val_ppl" in lines[0] and "eval_accuracy" in lines[0]
    full = next(row for row in lines if row.startswith("| full "))
    # full attention has no k and no sharing, whatever the config holds for them
    assert "| full | 128 |  |  |" in full and "| 32 |" not in full and f"{math.exp(1.5):.4g} (best)" in full
    # loss: final 1 (scale 0.5 * 0 + 1) is the best
    lin = next(row for row in lines if row.startswith("| lin-k32 "))
    assert "| 32 |" in lin and "| headwise |" in lin and f"{math.exp(3.0):.4g} (best)" in lin
    ft = next(row for row in lines if row.startswith("| sst2-run "))
    assert "| 16 |" in ft and "| kv |" in ft and "| sst2 |" in ft and "0.75 (best)" in ft
    assert {p.name for p in res["plots"]} >= {"val_ppl.png", "loss.png", "eval_accuracy.png"}
    # a run keeps its colour in every plot (plots.colours in order: finetune/sst2-run, pretrain/full,
    # pretrain/lin-k32): val_ppl, the two pretraining runs' lines; eval_accuracy, only the finetuning run's
    finetune, *pretraining = line_colours(tmp_path / "cmp" / "val_ppl.png", (840, 504), 3)
    assert finetune == 0 and all(n > 100 for n in pretraining)
    one, *others = line_colours(tmp_path / "cmp" / "eval_accuracy.png", (840, 504), 3)
    assert one > 20 and others == [0, 0]


def test_without_matplotlib_the_table_is_written_and_only_plot_refuses(tmp_path, make_run, monkeypatch, capsys):
    """The per-stage panels were always drawn: without matplotlib compare_runs failed with a traceback after
    writing runs.md, though the table never needs it; --plot now says what to install, before writing anything."""
    from linformer.errors import ConfigError

    make_run(tmp_path / "out", "pretrain", "lin-k32", _pretrain_rows(1.0))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where it is not installed: its import fails
    res = compare_runs([tmp_path / "out"], tmp_path / "cmp")
    assert res["plots"] == [] and sorted(p.name for p in (tmp_path / "cmp").iterdir()) == [".linformer-outputs.json",
                                                                                           "runs.md"]
    assert "needs the matplotlib package" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"^--plot needs the matplotlib package, .*: pip install matplotlib$"):
        compare_runs([tmp_path / "out"], tmp_path / "cmp2", plot_metrics=["loss"])
    assert not (tmp_path / "cmp2").exists()


def test_a_comparison_written_again_into_its_folder_leaves_none_of_the_earlier_one_s_plots(tmp_path, make_run):
    """The folder holds one comparison: plots of metrics the new one does not compare go, files of others stay."""
    make_run(tmp_path / "pre", "pretrain", "p", _pretrain_rows(1.0))
    make_run(tmp_path / "ft", "finetune", "f", [{"step": 10, "time": 2, "eval_accuracy": 0.75}], task="sst2")
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "notes.txt").write_text("mine")
    compare_runs([tmp_path / "pre"], tmp_path / "cmp")
    assert (tmp_path / "cmp" / "val_ppl.png").is_file()
    compare_runs([tmp_path / "ft"], tmp_path / "cmp")
    left = sorted(p.name for p in (tmp_path / "cmp").iterdir())
    assert left == [".linformer-outputs.json", "eval_accuracy.png", "notes.txt", "runs.md"], left
    assert set(read_json(tmp_path / "cmp" / ".linformer-outputs.json")) == {"eval_accuracy.png", "runs.md"}


def test_metric_no_run_logged_is_named(tmp_path, make_run):
    make_run(tmp_path, "pretrain", "a", _pretrain_rows(1.0))
    with pytest.raises(DataError, match=r"--plot: no run logged eval_f1; the runs logged loss, lr, tokens_per_s"):
        compare_runs([tmp_path], tmp_path / "o", plot_metrics=["val_ppl", "eval_f1"])
    assert not (tmp_path / "o").exists()


def test_torn_last_line_and_hidden_dirs(tmp_path, make_run):
    run = make_run(tmp_path, "pretrain", "a", _pretrain_rows(1.0))
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 11, "lo')
    assert len(read_metrics(run / "metrics.jsonl")) == 12
    hidden = tmp_path / ".dashboard" / "x"
    hidden.mkdir(parents=True)
    (hidden / "metrics.jsonl").write_text('{"step": 1}\n')
    assert find_runs([tmp_path]) == [run.resolve()]


def test_a_named_path_without_runs_is_an_error_not_a_run_left_out(tmp_path, make_run):
    """compare_runs and figure3 name their runs on the command line: a mistyped one, or a glob the shell did not
    expand, was dropped without a word and the report made from the others."""
    from linformer.report.figure3 import figure3

    run = make_run(tmp_path, "pretrain", "a", _pretrain_rows(1.0))
    (tmp_path / "empty").mkdir()
    assert find_runs([run, tmp_path / "typo"]) == [run.resolve()]  # the readers of kept records keep their leniency
    for missing, message in ((tmp_path / "typo", "does not exist"), (tmp_path / "fig3-*", "matches no file or folder"),
                             (tmp_path / "empty", r"holds no run \(no metrics.jsonl at or under it\)")):
        if "*" not in missing.name:
            with pytest.raises(DataError, match=f"^{missing} {message}"):
                find_runs([run, missing], strict=True)
        with pytest.raises(DataError, match=message):
            compare_runs([run, missing], tmp_path / "out")
        with pytest.raises(DataError, match=message):
            figure3([run, missing], tmp_path / "fig")
    assert not (tmp_path / "out").exists() and not (tmp_path / "fig.json").exists()
    quoted_glob = str(tmp_path / "pretrain" / "a*")
    assert compare_runs([quoted_glob], tmp_path / "out")["runs"][0].path == run.resolve()


@pytest.mark.slow  # several fresh processes; make test-all runs it
def test_cli(tmp_path, make_run):
    make_run(tmp_path, "pretrain", "a", _pretrain_rows(1.0))
    make_run(tmp_path, "pretrain", "b", _pretrain_rows(2.0))
    out = subprocess.run([sys.executable, str(REPO / "scripts/compare_runs.py"), str(tmp_path / "pretrain/a"),
                          str(tmp_path / "pretrain/b"), "--metrics", "val_loss", "loss", "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "| a |" in out.stdout and "| b |" in out.stdout
    assert (tmp_path / "o" / "val_loss.png").is_file() and (tmp_path / "o" / "loss.png").is_file()
    for args, message in (([str(tmp_path / "nothing")], f"error: {tmp_path / 'nothing'} does not exist"),
                          ([str(tmp_path), "--metrics", "val_ppl", "acc"], "error: --metrics: no run logged acc; ")):
        bad = subprocess.run([sys.executable, str(REPO / "scripts/compare_runs.py"), *args], capture_output=True,
                             text=True, timeout=60, check=False)
        assert bad.returncode == 2 and bad.stderr.startswith(message) and bad.stderr.count("\n") == 1, bad.stderr


def test_steady_speed_columns_come_from_the_summary(tmp_path, make_run):
    """The summary's steady-state tokens/s and MFU (median of the later steps) get columns; a run without them an
    empty cell, and none appear when no run has them."""
    fast = make_run(tmp_path / "out", "pretrain", "fast", _pretrain_rows(1.0))
    (fast / "summary.json").write_text('{"tokens_per_s_steady": 544631.5, "mfu": 0.3313}')
    make_run(tmp_path / "out", "pretrain", "plain", _pretrain_rows(1.0))
    lines = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].splitlines()
    assert lines[0].endswith("| steady tokens/s | steady MFU |")
    assert next(r for r in lines if r.startswith("| fast ")).endswith("| 544,632 | 33.1% |")
    assert next(r for r in lines if r.startswith("| plain ")).endswith("|  |  |")
    (fast / "summary.json").unlink()
    assert "steady" not in compare_runs([tmp_path / "out"], tmp_path / "cmp2")["table"]


def test_the_table_names_the_machines_the_runs_computed_on(tmp_path, make_run):
    """Tokens/s and MFU are figures of a machine: the table says where each run computed, and how many ran there."""
    for name, device in (("a", "GPU: NVIDIA H200"), ("b", "GPU: NVIDIA H200"), ("c", "CPU: AMD EPYC"), ("d", None)):
        run = make_run(tmp_path / "out", "pretrain", name, _pretrain_rows(1.0))
        if device:
            (run / "summary.json").write_text(f'{{"device": "{device}"}}')
    table = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"]
    assert ("Machines: GPU: NVIDIA H200 (2 runs); CPU: AMD EPYC (1 run); not recorded (no summary.json device or "
            "run.json environment) (1 run).") in table.splitlines()


def test_a_finished_run_s_reported_scores_get_columns_naming_the_split_and_step(tmp_path, make_run):
    """The reported split is scored once, into results.json, not metrics.jsonl: without these columns a comparison of
    finetuning runs showed their losses but not their accuracy."""
    rows = [{"step": s, "time": s, "loss": 1.0 / s} for s in range(1, 5)]
    make_run(tmp_path / "out", "finetune", "chosen", rows, task="sst2",
             results={"metrics": {"accuracy": 0.9125, "f1": 0.9}, "reported": {"split": "dev", "step": 2}})
    make_run(tmp_path / "out", "finetune", "running", rows, task="sst2")
    lines = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].splitlines()
    assert "| reported accuracy | reported f1 |" in lines[0]
    assert "| 0.9125 (dev, step 2) | 0.9 (dev, step 2) |" in next(r for r in lines if r.startswith("| chosen "))
    assert next(r for r in lines if r.startswith("| running ")).endswith("|  |  |")


def test_a_reported_score_of_a_run_that_skipped_updates_says_so(tmp_path, make_run):
    """A run that skipped updates for non-finite losses reported its accuracy unflagged while its loss cell said
    "7 non-finite": the reported cell now says how many updates were skipped (results.json's skipped_steps, or for
    a run recorded before the count, its non-finite losses), and a clean run's cell is as it was."""
    rows = [{"step": s, "time": s, "loss": 1.0 / s if s < 3 else float("nan")} for s in range(1, 5)]
    clean = [{"step": s, "time": s, "loss": 1.0 / s} for s in range(1, 5)]
    reported = {"metrics": {"accuracy": 0.5}, "reported": {"split": "dev", "step": 2}}
    make_run(tmp_path / "out", "finetune", "older", rows, task="sst2", results=reported)
    make_run(tmp_path / "out", "finetune", "counted", clean, task="sst2", results={**reported, "skipped_steps": 3})
    make_run(tmp_path / "out", "finetune", "clean", clean, task="sst2", results={**reported, "skipped_steps": 0})
    table = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"]
    lines = table.splitlines()
    cell = {name: next(r for r in lines if r.startswith(f"| {name} ")).split(" | ")[-1] for name in
            ("older", "counted", "clean")}
    assert cell == {"older": "0.5 (dev, step 2; 2 updates skipped) |", "counted": "0.5 (dev, step 2; 3 updates "
                    "skipped) |", "clean": "0.5 (dev, step 2) |"}
    assert "`N updates skipped`: N updates were skipped for a non-finite loss or gradient" in table


def test_a_run_that_did_not_finish_says_so_beside_its_steps(tmp_path, make_run):
    """A stopped run's best validation value would otherwise read as a finished run's; one whose process died without
    a word (SIGKILL) read as running forever."""
    import json
    import os
    import socket

    from linformer.files.runs import LOCK

    rows = [{"step": s, "time": s, "loss": 1.0 / s} for s in range(1, 5)]
    for name, status in (("done", "complete"), ("cut", "stopped"), ("crashed", "failed"), ("old", None),
                         ("live", "running"), ("gone", "running"), ("unlocked", "running")):
        run = make_run(tmp_path / "out", "pretrain", name, rows)
        if status:
            (run / "run.json").write_text(json.dumps({"stage": "pretrain", "status": status}))
    # a live holder (this process), one of a process that is gone (SIGKILL, the OOM killer), and none at all
    me, dead = os.getpid(), 2**22 + 12345  # above Linux's default pid_max: no such process
    for name, pid in (("live", me), ("gone", dead)):
        (tmp_path / "out" / "pretrain" / name / LOCK).write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
    lines = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].splitlines()
    steps = {r.split(" | ")[0][2:]: r.split(" | ")[lines[0].split(" | ").index("steps")] for r in lines[2:]
             if r.startswith("| ") and " | " in r}
    assert {k: steps[k] for k in ("done", "cut", "crashed", "old", "live", "gone", "unlocked")} == {
        "done": "4", "cut": "4 (stopped)", "crashed": "4 (failed)", "old": "4", "live": "4 (running)",
        "gone": "4 (killed)", "unlocked": "4 (killed)"}


def test_runs_that_differ_in_their_seed_alone_get_a_mean_and_sd_over_the_seeds(tmp_path, make_run):
    """A sweep of seeds (finetune.py -m ... seed=1,2,3) is summarised across its seeds; another learning rate, or
    other start weights, is another group, and a group of one seed gets no row."""
    import yaml

    rows = [{"step": 1, "time": 1, "loss": 0.5}]

    def run(name, seed, accuracy, lr=2e-5, start="a" * 64):
        path = make_run(tmp_path / "out", "finetune", name, rows, task="sst2",
                        results={"metrics": {"accuracy": accuracy}, "reported": {"split": "dev", "step": 1},
                                 "start_weights_sha256": start})
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed, "trainer": {"lr": lr}}))

    run("s1", 1, 0.80)
    run("s2", 2, 0.90)
    run("s3", 3, 0.85)
    run("other-lr", 1, 0.5, lr=1e-4)
    run("other-start", 4, 0.6, start="b" * 64)
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp")
    assert [[r.name for r in g] for g in result["seed_groups"]] == [["s1", "s2", "s3"]]
    section = result["table"].split("## Across seeds")[1]
    assert "| s1; s2; s3 | 1, 2, 3 | 0.85 +- 0.05 (0.8-0.9, 3 seeds) |" in section
    assert "other" not in section
    run("s1-again", 1, 0.70)  # the same command in another folder: its runs are counted as runs, not seeds
    section = compare_runs([tmp_path / "out"], tmp_path / "cmp2")["table"].split("## Across seeds")[1]
    assert "| s1; s1-again; s2 (+1) | 1, 1, 2, 3 | 0.8125 +- 0.08539 (0.7-0.9, 4 runs of 3 seeds) |" in section


def test_a_seed_group_whose_seeds_drew_their_own_subsets_says_so(tmp_path, make_run):
    """With max_eval_examples and subset_seed unset, each seed trained and scored on other rows: the group is not
    'the seed alone' without saying so."""
    import yaml

    rows = [{"step": 1, "time": 1, "loss": 0.5}]
    for seed in (0, 1):
        path = make_run(tmp_path / "out", "finetune", f"s{seed}", rows, task="sst2",
                        results={"metrics": {"accuracy": 0.5 + seed / 10}, "reported": {"split": "dev", "step": 1}})
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed, "subset_seed": None,
                                                          "max_eval_examples": 100}))
    section = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].split("## Across seeds")[1]
    assert ("| 0, 1: 2 different draws of the examples (subset_seed unset follows seed; give subset_seed=<fixed> to "
            "score every seed on one subset) |") in section


def test_the_draw_a_run_records_is_read_not_guessed_from_its_seed(tmp_path, make_run):
    """results.json did not record subset_seed: a group's draws were guessed from the config (subset_seed unset
    follows seed), so runs that record one draw were said to have drawn two. What a run records is its draw."""
    import yaml

    rows = [{"step": 1, "time": 1, "loss": 0.5}]
    for seed in (0, 1):
        path = make_run(tmp_path / "out", "finetune", f"s{seed}", rows, task="sst2",
                        results={"metrics": {"accuracy": 0.5 + seed / 10}, "reported": {"split": "dev", "step": 1},
                                 "subset_seed": 7})
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed, "subset_seed": None,
                                                          "max_eval_examples": 100}))
    section = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].split("## Across seeds")[1]
    assert "| 0, 1 |" in section and "different draws" not in section


def test_runs_sharing_a_name_are_told_apart_in_the_table(tmp_path, make_run):
    """By stage where that is enough, by the shortest end of their paths where nothing else is (copies of one run in
    two folders)."""
    rows = [{"step": 1, "time": 1, "loss": 0.5}]
    make_run(tmp_path / "x", "pretrain", "demo", rows), make_run(tmp_path / "y", "pretrain", "demo", rows)
    make_run(tmp_path / "x", "finetune", "demo", rows, task="sst2")
    lines = compare_runs([tmp_path / "x", tmp_path / "y"], tmp_path / "cmp")["table"].splitlines()
    assert sorted(r.split(" | ")[0][2:] for r in lines[2:5]) == ["finetune/demo", "x/pretrain/demo", "y/pretrain/demo"]


def test_a_comparison_names_what_differs_and_its_plots_stay_readable(tmp_path, make_run):
    """A sweep's runs (one run_name) were labelled by their absolute paths, cut off at the figure's edge; the table
    had no column for the lr they differ in; an MLM loss and a classification loss shared one axis; an 11th run
    took the first run's colour."""
    import yaml

    def run(stage, name, folder, lr, **extra):
        path = make_run(tmp_path / "out" / folder, stage, name, _pretrain_rows(lr * 1e3), **extra)
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "run_name": name, "trainer": {"lr": lr}}))
        return path

    for i in range(10):
        run("pretrain", "sweep", f"sweep-trainer.lr={i + 1}e-4", (i + 1) * 1e-4)
    run("finetune", "sst2-sweep", "sst2-a", 2e-5, task="sst2")
    run("finetune", "sst2-sweep", "sst2-b", 3e-5, task="sst2")
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp", metrics=["loss"])
    lines = result["table"].splitlines()
    assert lines[0].startswith("| run | stage | model | attention | n | k | sharing | task | experiment_name | trainer.lr | steps |")
    labels = [r.split(" | ")[0][2:] for r in lines[2:14]]
    assert labels[:2] == ["sst2-sweep (lr=2e-05)", "sst2-sweep (lr=3e-05)"]
    assert sorted(labels[2:]) == sorted(f"sweep (lr={(i + 1) * 1e-4})" for i in range(10))
    assert "trainer.lr: the settings in which runs of one stage differ" in result["table"]
    # a panel per stage, side by side (2 x 4.6 inches at 120 dpi), the legend below them
    import matplotlib.image

    from linformer.plots import colours as run_colours

    assert matplotlib.image.imread(tmp_path / "cmp" / "loss.png").shape[1] == 1104
    assert len({str(c) for c in run_colours(20)}) == 20 and len({str(c) for c in run_colours(30)}) == 30


def test_an_existing_path_is_taken_as_it_is_before_any_glob(tmp_path, make_run):
    """A run folder whose name holds glob characters ('k[16, 32]', as the shell already expanded it) "matched no file
    or folder": it was globbed again, its brackets read as a character class."""
    run = make_run(tmp_path, "pretrain", "tiny-linformer-n128-k[16, 32]-none-s0", _pretrain_rows(1.0))
    assert named_paths([str(run)]) == [run]
    assert [r.path for r in compare_runs([str(run)], tmp_path / "o")["runs"]] == [run]
    with pytest.raises(DataError, match="matches no file or folder"):
        named_paths([str(tmp_path / "pretrain" / "nothing-[ab]")])


def test_a_sweep_glob_skips_hydra_s_record_and_a_run_s_metrics_name_its_run(tmp_path, make_run):
    """`outputs/pretrain/multirun/*` matched Hydra's multirun.yaml, which stopped the report ("holds no run"); a run's
    metrics.jsonl given for its run was "no metrics.jsonl at or under it"."""
    a = make_run(tmp_path, "pretrain", "multirun/sweep-lr=1", _pretrain_rows(1.0))
    b = make_run(tmp_path, "pretrain", "multirun/sweep-lr=2", _pretrain_rows(2.0))
    (tmp_path / "pretrain" / "multirun" / "multirun.yaml").write_text("hydra: {}\n")
    assert find_runs(named_paths([str(tmp_path / "pretrain" / "multirun" / "*")]), strict=True) == [a, b]
    assert [r.path for r in compare_runs([str(tmp_path / "pretrain" / "multirun" / "*")], tmp_path / "o")["runs"]] == [a, b]
    assert find_runs([a / "metrics.jsonl"], strict=True) == [a]
    assert load_run(a).stage == "pretrain"  # the folder above Hydra's sweep folder


def test_figure3_names_a_run_that_did_not_finish_or_is_no_run(tmp_path, make_run):
    """It said "got Linformer k=32 (headwise): None steps, None tokens" for a failed run, and drew "Linformer k=None
    (None)" for a folder holding only a metrics.jsonl."""
    import json

    from linformer.report.figure3 import figure3

    full = make_run(tmp_path, "pretrain", "full", _pretrain_rows(1.0),
                    model={"name": "tiny", "attention": "full", "max_seq_len": 128})
    (full / "summary.json").write_text(json.dumps({"steps": 10, "tokens": 100}))
    bad = make_run(tmp_path, "pretrain", "bad-lr", _pretrain_rows(2.0))
    (bad / "run.json").write_text(json.dumps({"stage": "pretrain", "status": "failed",
                                              "error": "TrainingDiverged: 2 consecutive non-finite losses"}))
    with pytest.raises(DataError, match=rf"^{bad} is not a finished run \(failed \(TrainingDiverged: 2 consecutive "
                                        r"non-finite losses\)\): figure 3 compares finished pretraining runs"):
        figure3([full, bad], tmp_path / "fig")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "metrics.jsonl").write_text((full / "metrics.jsonl").read_text())
    with pytest.raises(DataError, match=rf"^{tmp_path / 'bare'} holds no record of a run \(no config.yaml"):
        figure3([full, tmp_path / "bare"], tmp_path / "fig")
    assert load_run(tmp_path / "bare").stage is None  # not its folder's name


def test_runs_of_one_global_batch_on_other_processes_are_one_batch_not_two(tmp_path, make_run):
    """1 process x 16 and 2 processes x 8 computed the same steps: the table shows their global batch and
    processes, and does not list trainer.batch_size as a setting they differ in; another global batch it does."""
    import yaml

    def run(name, batch, processes, **trainer):
        path = make_run(tmp_path / "out", "pretrain", name, _pretrain_rows(1.0),
                        results={"processes": processes, "batch_size": batch, "global_batch": batch * processes})
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "trainer": {"batch_size": batch, **trainer}}))
        return path

    one, two = run("p1", 16, 1), run("p2", 8, 2)
    table = compare_runs([one, two], tmp_path / "cmp", metrics=["loss"])["table"]
    header = table.splitlines()[0]
    assert "| global_batch | processes |" in header and "trainer.batch_size" not in header
    assert "| 16 | 1 |" in table and "| 16 | 2 |" in table
    four = run("p4", 8, 1)
    assert "trainer.batch_size" in compare_runs([one, four], tmp_path / "cmp4", metrics=["loss"])["table"].splitlines()[0]


def test_an_earlier_run_s_global_batch_is_worked_out_from_its_config_and_processes(tmp_path, make_run):
    import yaml

    path = make_run(tmp_path / "out", "pretrain", "old", _pretrain_rows(1.0), results={"processes": 2})
    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "trainer": {"batch_size": 8, "grad_accum": 2}}))
    assert load_run(path).global_batch == 32


def test_the_script_reads_runs_and_writes_out_from_the_repository_with_home_expanded(tmp_path, make_run,
                                                                                    monkeypatch, capsys):
    """From another folder, compare_runs.py outputs/pretrain compared that folder's runs, and a quoted '~/x' was
    "does not exist": paths start from the repository, "~" expanded, from any working directory."""
    from linformer.files.locations import repo_root
    from tests.conftest import run_script

    make_run(tmp_path / "home" / "runs", "pretrain", "a", _pretrain_rows(1.0))
    make_run(tmp_path / "elsewhere" / "runs", "pretrain", "decoy", _pretrain_rows(2.0))  # the cwd's, not named
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path / "elsewhere")
    relative = os.path.relpath(tmp_path / "home" / "runs", repo_root())  # the same runs, from the repository
    for runs in ("~/runs", relative):
        assert run_script("compare_runs", [runs, "--out", "~/cmp", "--overwrite"], monkeypatch) == 0
        printed = capsys.readouterr().out
        assert "| a |" in printed and "decoy" not in printed
        assert f"wrote {tmp_path / 'home' / 'cmp' / 'runs.md'}" in printed and not (tmp_path / "elsewhere" / "~").exists()


def test_runs_are_read_row_by_row_keeping_exact_table_values_and_a_bounded_plot_series(tmp_path, make_run,
                                                                                       monkeypatch):
    """compare_runs held every row of every run (100 runs x 12k rows: 2.1 GB): it reads each metrics.jsonl once, row
    by row, keeping the table's final and best exactly and for the plots a series thinned to a bound, with its last
    and best points."""
    import linformer.rundir
    from linformer.report import compare

    rows = [{"step": s, "time": float(s), "loss": 10.0 - s / 1000} for s in range(1, 3001)]
    rows[1233]["loss"] = 0.1  # the best, at step 1234, between the thinned points
    run = make_run(tmp_path / "out", "pretrain", "long", rows)
    monkeypatch.setattr(linformer.rundir, "read_metrics", lambda path: pytest.fail(f"{path} read whole"))
    monkeypatch.setattr(compare, "PLOT_POINTS", 20)
    drawn = {}
    plot = compare.plot_metric

    def spy(runs, metric, path, **kw):
        drawn[metric] = kw["series_of"](runs[0], metric)
        return plot(runs, metric, path, **kw)

    monkeypatch.setattr(compare, "plot_metric", spy)
    res = compare_runs([run], tmp_path / "cmp", ["loss"], ["loss"])
    assert res["summary"][str(run.resolve())]["loss"] == {"final": 7.0, "final_step": 3000, "best": 0.1,
                                                            "best_step": 1234}
    steps, values = drawn["loss"]
    assert len(steps) <= 2 * 20 + 2 and steps == sorted(steps) and {1, 1234, 3000} <= set(steps)
    assert values[steps.index(1234)] == 0.1


@pytest.mark.parametrize("runs", [20, 45])
def test_the_plot_legend_shows_every_label_whole(tmp_path, make_run, monkeypatch, runs):
    """From ~9 short-named runs the legend's columns (estimated from the labels' characters alone) ran past the
    figure's edges, cutting the first handles and the last labels; past LEGEND_ENTRIES runs it ends with "and N more
    runs"."""
    from linformer import plots
    from linformer.report import compare

    for i in range(runs):
        make_run(tmp_path / "out", "pretrain", f"r{i:03d}", [{"step": s, "time": s, "loss": 5.0 - s + i} for s in (1, 2)])
    seen = {}
    save = compare.save_figure

    def spy(fig, path):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        (legend,) = fig.legends
        box, page = legend.get_window_extent(renderer), fig.bbox
        seen.update(inside=box.x0 >= page.x0 and box.x1 <= page.x1 and box.y0 >= page.y0,
                    labels=[t.get_text() for t in legend.get_texts()])
        return save(fig, path)

    monkeypatch.setattr(compare, "save_figure", spy)
    compare_runs([tmp_path / "out"], tmp_path / "cmp", ["loss"], ["loss"])
    assert seen["inside"]
    shown = min(runs, plots.LEGEND_ENTRIES - 1) if runs > plots.LEGEND_ENTRIES else runs
    assert seen["labels"][:shown] == [f"r{i:03d}" for i in range(shown)]
    if runs > plots.LEGEND_ENTRIES:
        assert seen["labels"][-1] == f"and {runs - shown} more runs"


@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_run_path_is_refused_naming_the_argument_not_read_as_the_repository(tmp_path, make_run, empty):
    """An unset variable (compare_runs.py "$RUN") named the repository: compare_runs tabled every run in it, and
    prune_checkpoints.py "" pruned every complete run in it. Now one line naming the argument (the commands' `runs`),
    nothing written."""
    with pytest.raises(ConfigError, match=rf"^runs: an empty path \('{empty}'\) names no run: give run directories, "
                                          r"folders of them or globs \(an unset variable\?\)$"):
        named_paths([empty])
    run = make_run(tmp_path, "pretrain", "a", _pretrain_rows(1.0))
    with pytest.raises(ConfigError, match="^runs: an empty path"):
        compare_runs([str(run), empty], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _sweep_run(make_run, root, folder, seed, lr, accuracy, chosen=None, **config_extra):
    """A finished finetuning run of an lr x seed sweep (one run_name, its folder's name, under folders told apart by
    their overrides)."""
    import yaml

    selection = ({"split": "validation", "step": 1, "rule": "best val_accuracy", "value": chosen}
                 if chosen is not None else {"split": None, "step": 1, "rule": "last model"})
    path = make_run(root / folder, "finetune", f"sst2-s{seed}", [{"step": 1, "time": 1, "loss": 0.5}], task="sst2",
                    results={"metrics": {"accuracy": accuracy}, "reported": {"split": "dev", "step": 1},
                             "selection": selection, "start_weights_sha256": "a" * 64})
    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "run_name": f"sst2-s{seed}", "seed": seed,
                                                      "trainer": {"lr": lr}, **config_extra}))
    return path


def test_the_seeds_table_labels_its_runs_as_the_main_table_does(tmp_path, make_run):
    """Two seed sweeps differing in max_train_examples gave two seed rows reading the same bare run names."""
    for n in (64, 96):
        for seed in (0, 1):
            _sweep_run(make_run, tmp_path / "out", f"n{n}-s{seed}", seed, 1e-4, 0.5, max_train_examples=n)
    section = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].split("## Across seeds")[1]
    rows = [r for r in section.splitlines() if r.startswith("| sst2")]
    assert rows[0].startswith("| sst2-s0 (max_train_examples=64); sst2-s1 (max_train_examples=64) | 64 | 0, 1")
    assert rows[1].startswith("| sst2-s0 (max_train_examples=96); sst2-s1 (max_train_examples=96) | 96 | 0, 1")


def test_an_lr_sweep_s_groups_give_the_validation_score_to_choose_on_and_the_lr_and_plot_it(tmp_path, make_run):
    """The only per-group summary of an lr sweep was the reported split's mean, with no lr column: it invited
    choosing the lr on the split a result is reported on."""
    for lr, chosen in ((1e-4, 0.6), (1e-3, 0.8)):
        for seed in (0, 1):
            _sweep_run(make_run, tmp_path / "out", f"lr{lr}-s{seed}", seed, lr, 0.5 + seed / 10, chosen + seed / 10)
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp")
    section = result["table"].split("## Across seeds")[1]
    assert ("| runs | trainer.lr | seeds | chosen val_accuracy: mean +- sd (min-max) | reported accuracy: mean +- sd "
            "(min-max) |") in section
    assert "| 0.001 | 0, 1 | 0.85 +- 0.07071 (0.8-0.9, 2 seeds) | 0.55 +- 0.07071 (0.5-0.6, 2 seeds) |" in section
    assert "Choose among the rows on the chosen columns (val_accuracy" in section
    assert "never on the reported ones" in section
    png = tmp_path / "cmp" / "chosen_val_accuracy_by_trainer.lr.png"
    assert png in result["plots"] and png.stat().st_size > 0
    from linformer.report.compare import chosen_scores

    assert chosen_scores(result["runs"][0]) in ({"val_accuracy": 0.6}, {"val_accuracy": 0.7},
                                                {"val_accuracy": 0.8}, {"val_accuracy": 0.9})


def test_without_a_validation_split_the_seeds_table_says_nothing_may_choose(tmp_path, make_run):
    for lr in (1e-4, 1e-3):
        for seed in (0, 1):
            _sweep_run(make_run, tmp_path / "out", f"lr{lr}-s{seed}", seed, lr, 0.5)
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp")
    assert "nothing here may choose among the rows" in result["table"]
    assert "chosen " not in result["table"] and not [p for p in result["plots"] if "chosen_" in p.name]


def test_labels_name_an_unset_setting_null_and_keep_one_order(tmp_path, make_run):
    """`subset_seed=` printed empty, and the settings' order changed from one group of a name to the next."""
    from linformer.report.compare import run_labels

    for seed in (0, 1):
        _sweep_run(make_run, tmp_path / "out", f"a-s{seed}", seed, 1e-4, 0.5, max_train_examples=200,
                   subset_seed=0 if seed else None)
        _sweep_run(make_run, tmp_path / "out", f"b-s{seed}", seed, 1e-4, 0.5, max_train_examples=400,
                   subset_seed=None if seed else 0)
    runs = compare_runs([tmp_path / "out"], tmp_path / "cmp")["runs"]
    labels = sorted(run_labels(runs))
    assert labels == ["sst2-s0 (max_train_examples=200, subset_seed=null)",
                      "sst2-s0 (max_train_examples=400, subset_seed=0)",
                      "sst2-s1 (max_train_examples=200, subset_seed=0)",
                      "sst2-s1 (max_train_examples=400, subset_seed=null)"]


def test_past_20_runs_each_panel_s_runs_get_their_own_spread_of_colours(tmp_path, make_run):
    """One ramp over all runs gave the 5 runs of the last panel near-identical dark reds."""
    from matplotlib.colors import to_rgb

    from linformer.report.compare import run_colours

    for i in range(20):
        make_run(tmp_path / "out", "finetune", f"f{i}", [{"step": 1, "time": 1, "loss": 0.5}], task="sst2")
    for i in range(5):
        make_run(tmp_path / "out", "pretrain", f"p{i}", [{"step": 1, "time": 1, "loss": 0.5}])
    runs = [load_run(p) for p in find_runs([tmp_path / "out"])]
    colours = [to_rgb(c) for c in run_colours(runs)]
    pretrain = [c for r, c in zip(runs, colours) if r.stage == "pretrain"]
    assert len(set(pretrain)) == 5 and len({c for r, c in zip(runs, colours) if r.stage == "finetune"}) == 20
    assert min(sum(abs(x - y) for x, y in zip(a, b)) for i, a in enumerate(pretrain) for b in pretrain[i + 1:]) > 0.3
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=["loss"])
    assert result["plots"]


def test_task_hashes_that_restate_the_task_are_no_columns_and_experiment_name_is_named_so(tmp_path, make_run):
    """Mixing an IMDB run in added task_data_key and task_spec_key columns (hashes of what `task` says) and an
    `experiment` column that held experiment_name."""
    import yaml

    for task, key in (("sst2", "1" * 16), ("imdb", "2" * 16), ("sst2", "1" * 16)):
        path = make_run(tmp_path / "out", "finetune", f"{task}-{len(list((tmp_path / 'out').rglob('*.yaml')))}",
                        [{"step": 1, "time": 1, "loss": 0.5}], task=task)
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "task_data_key": key, "task_spec_key": key}))
    header = compare_runs([tmp_path / "out"], tmp_path / "cmp")["table"].splitlines()[0]
    assert "task_data_key" not in header and "task_spec_key" not in header
    assert "| experiment_name |" in header
    # under one task name, other data: the hash is what tells the runs apart
    path = make_run(tmp_path / "out", "finetune", "sst2-other-data", [{"step": 1, "time": 1, "loss": 0.5}], task="sst2")
    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "task_data_key": "3" * 16, "task_spec_key": "1" * 16}))
    header = compare_runs([tmp_path / "out"], tmp_path / "cmp2")["table"].splitlines()[0]
    assert "task_data_key" in header and "task_spec_key" not in header


def test_an_unfinished_run_is_described_from_its_record_as_a_finished_one_is(tmp_path, make_run):
    """A stopped, killed or running run showed its start model without `/model`, no global batch or processes, and
    "not recorded" for the machine, though its run.json records the processes and the device."""
    import json

    import yaml

    start = tmp_path / "pretrain" / "tiny-s0"
    (start / "model").mkdir(parents=True)
    (start / "model" / "config.json").write_text(json.dumps({"attention": "linformer", "projected_dim": 32,
                                                              "sharing": "headwise", "max_seq_len": 128}))
    env = {"device": "cpu", "cpu": "AMD EPYC"}
    for name, status in (("done", "complete"), ("cut", "stopped")):
        path = make_run(tmp_path / "out", "finetune", name, [{"step": 1, "time": 1, "loss": 0.5}], task="sst2",
                        results={"model_path": str(start / "model"), "processes": 1, "global_batch": 16,
                                 "device": "CPU: AMD EPYC"} if status == "complete" else None)
        config = yaml.safe_load((path / "config.yaml").read_text())
        config.pop("model")
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "model_path": str(start),
                                                          "trainer": {"batch_size": 16}}))
        (path / "run.json").write_text(json.dumps({"stage": "finetune", "status": status, "processes": 1,
                                                   "environment": env}))
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp")
    rows = {r.split(" | ")[0][2:]: r.split(" | ")[1:8] for r in result["table"].splitlines()[2:4]}
    assert rows["cut"] == rows["done"] == ["finetune", "tiny-s0/model", "linformer", "128", "32", "headwise", "sst2"]
    done, cut = sorted(result["runs"], key=lambda r: r.name)
    assert (cut.key_config["global_batch"], cut.key_config["processes"]) == (16, 1) == \
        (done.key_config["global_batch"], done.key_config["processes"])
    assert "Machines: CPU: AMD EPYC (2 runs)." in result["table"]


def test_a_run_is_named_by_its_folder_in_the_comparison_as_on_the_dashboard(tmp_path, make_run):
    """A run made through the Python API into a folder of one's own (finetune(spec, "out/finetune/rte-api")) was
    labelled by the run_name its config records, a name no folder has, while the dashboard mirrors it as
    finetune/rte-api: both name it by its folder."""
    import yaml

    from linformer.report.dashboard import mirror_all

    path = make_run(tmp_path / "out", "finetune", "rte-api", [{"step": 1, "time": 1, "loss": 0.5}], task="sst2")
    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "run_name": "rte-minilm-k32-lr2e-05-s0"}))
    assert load_run(path).name == "rte-api"
    table = compare_runs([path], tmp_path / "cmp")["table"]
    assert "| rte-api |" in table and "rte-minilm-k32" not in table
    assert list(mirror_all(tmp_path / "out", tmp_path / "logs")) == ["finetune/rte-api"]


def test_a_relative_out_dir_is_taken_from_the_repository_as_the_runs_are(tmp_path, make_run, monkeypatch):
    """From Python (a notebook elsewhere) as from the script: the runs' paths were taken from the repository, the
    comparison's folder from the working directory."""
    from linformer.files import locations

    path = make_run(tmp_path / "out", "finetune", "a", [{"step": 1, "time": 1, "loss": 0.5}], task="sst2")
    (tmp_path / "repo").mkdir()
    (tmp_path / "notebook").mkdir()
    monkeypatch.setattr(locations, "repo_root", lambda: tmp_path / "repo")
    monkeypatch.chdir(tmp_path / "notebook")
    assert compare_runs([path], "cmp")["markdown"] == tmp_path / "repo" / "cmp" / "runs.md"
    assert (tmp_path / "repo" / "cmp" / "runs.md").is_file() and not list((tmp_path / "notebook").iterdir())


def test_an_output_folder_that_cannot_be_written_names_the_flag_that_chose_it(tmp_path, make_run, monkeypatch):
    from linformer.errors import OutputPathError
    from linformer.files import outputs

    make_run(tmp_path / "out", "pretrain", "lin-k32", _pretrain_rows(1.0))
    monkeypatch.setattr(outputs.os, "access", lambda *a: False)  # a read-only clone (root may write anywhere)
    with pytest.raises(OutputPathError, match="so neither can .*cmp/runs.md: choose another out_dir=, one you can write"):
        compare_runs([tmp_path / "out"], tmp_path / "cmp")
    from tests.conftest import as_command
    as_command(monkeypatch, ["scripts/compare_runs.py"])  # the script's words
    with pytest.raises(OutputPathError, match="choose another --out, one you can write"):
        compare_runs([tmp_path / "out"], tmp_path / "cmp")


def _kept_figures(monkeypatch) -> dict:
    """The figures compare's plots save, by file name, kept for their artists to be read (saved as usual)."""
    from linformer.report import compare

    figs, save = {}, compare.save_figure

    def keep(fig, path):
        figs[Path(path).name] = fig
        return save(fig, path)

    monkeypatch.setattr(compare, "save_figure", keep)
    return figs


def test_a_throughput_axis_says_its_millions_in_its_ticks_never_in_a_corner_offset(tmp_path, make_run, monkeypatch):
    """tokens/s near 3,000,000 was labelled 2.6 ... 3.0 with a "1e6" in the axis corner, which a reader misses."""
    rows = [{"step": s, "time": float(s), "loss": 1.0, "tokens_per_s": 2.6e6 + 5e4 * s} for s in range(1, 11)]
    make_run(tmp_path / "out", "pretrain", "fast", rows)
    figs = _kept_figures(monkeypatch)
    compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=["tokens_per_s", "loss"])
    for name, fig in figs.items():
        fig.canvas.draw()
        for axis in (fig.axes[0].xaxis, fig.axes[0].yaxis):
            assert axis.get_offset_text().get_text() == "", name
    ticks = [t.get_text() for t in figs["tokens_per_s.png"].axes[0].get_yticklabels() if t.get_text()]
    assert ticks and all(t.endswith("M") for t in ticks) and "3M" in ticks
    assert [t.get_text() for t in figs["loss.png"].axes[0].get_xticklabels() if t.get_text()][:2] == ["0", "2"]


def test_a_throughput_plot_leaves_out_each_run_s_warm_up_step_and_says_so(tmp_path, make_run, monkeypatch):
    """mfu.png drew step 1 (compilation: 0.2% MFU) as a point of the line, which then climbed to 33%."""
    for name, first in (("a", 0.0016), ("b", 0.0012)):
        rows = [{"step": s, "time": float(s), "loss": 1.0, "mfu": first if s == 1 else 0.33} for s in range(1, 11)]
        make_run(tmp_path / "out", "pretrain", name, rows)
    figs = _kept_figures(monkeypatch)
    compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=["mfu", "loss"])
    lines = [line for line in figs["mfu.png"].axes[0].get_lines() if line.get_label() in ("a", "b")]
    assert len(lines) == 2 and all(list(line.get_xdata()) == list(range(2, 11)) for line in lines)
    assert min(y for line in lines for y in line.get_ydata()) == pytest.approx(33.0)
    legend = [t.get_text() for t in figs["mfu.png"].legends[0].get_texts()]
    assert any("first step (compilation and warm-up)" in t for t in legend)
    # a loss keeps its first step
    assert [line.get_xdata()[0] for line in figs["loss.png"].axes[0].get_lines()] == [1, 1]


def test_the_compare_runs_script_is_a_main_of_argv_and_its_table_is_printed_inside_its_error_handling(
        tmp_path, make_run, capsys, monkeypatch):
    """scripts/compare_runs.py had its body under `if __name__ == "__main__"` (no main(argv) to call in-process, as
    the other report scripts have) and printed its table after its cli_errors block."""
    from tests.conftest import load_script

    script = load_script("compare_runs")
    make_run(tmp_path / "out", "pretrain", "lin-k32", _pretrain_rows(1.0))
    assert script.main([str(tmp_path / "out"), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| run | stage |") and f"wrote {tmp_path / 'cmp' / 'runs.md'}" in out
    import builtins

    shown = builtins.print

    def broken(*args, **kwargs):  # the table's print fails: the command's error line, not a traceback
        if kwargs.get("file") is None:
            raise FileNotFoundError(2, "No such file or directory", "stdout")
        shown(*args, **kwargs)

    monkeypatch.setattr(builtins, "print", broken)
    with pytest.raises(SystemExit) as stop:
        script.main([str(tmp_path / "out"), "--out", str(tmp_path / "cmp")])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: ") and "No such file or directory" in last and "stdout" in last, last


def _batch_run(make_run, root, name, batch, n=128, val_ppls=((10, 50.0), (20, 40.0))):
    """A pretraining run of `batch` sequences of n tokens a step, logging its tokens each step, as the trainer does."""
    import yaml

    rows = [{"step": 0, "time": 0.0, "val_ppl": 100.0}]
    evals = dict(val_ppls)
    for s in range(1, max(evals) + 1):
        rows.append({"step": s, "time": float(s), "loss": 5.0 - s / 10, "tokens": float(s * batch * n),
                     **({"val_ppl": evals[s]} if s in evals else {})})
    path = make_run(root, "pretrain", name, rows, results={"processes": 1, "batch_size": batch, "global_batch": batch})
    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "trainer": {"batch_size": batch}}))
    return path


def test_pretraining_runs_of_other_tokens_per_step_are_ranked_at_equal_tokens_and_plotted_by_tokens(tmp_path,
                                                                                                   make_run):
    """A batch-32 run is ahead of a batch-16 one at every step only because it saw twice the tokens: the note names
    the batch that makes the difference, the table gives the tokens seen, and the runs are ranked at equal tokens,
    where the batch-16 run leads; the plots' axis is the tokens seen, and says why."""
    small = _batch_run(make_run, tmp_path / "out", "b16", 16, val_ppls=((10, 60.0), (20, 40.0)))
    # at step 10 (40,960 tokens) 50, at step 20 (81,920) 30: at the 40,960 tokens the batch-16 run saw by its end
    big = _batch_run(make_run, tmp_path / "out", "b32", 32, val_ppls=((10, 50.0), (20, 30.0)))
    result = compare_runs([small, big], tmp_path / "cmp", metrics=["val_ppl"])
    table = result["table"]
    assert "tokens seen" in table.splitlines()[0] and "| 40,960 |" in table and "| 81,920 |" in table
    assert "2,048 to 4,096 tokens per step (2x), by trainer.batch_size (16, 32)" in table
    equal = table.split("## At equal tokens (pretrain runs)")[1]
    assert "value at 40,960 tokens seen" in equal and "ranked by val_ppl, best first" in equal
    rows = [line for line in equal.splitlines() if line.startswith("| b")]
    assert rows == ["| b16 | 2,048 | 20 | 40 |", "| b32 | 4,096 | 10 | 50 |"]
    from linformer.report.compare import digest, value_at_tokens
    from linformer.rundir import iter_metrics
    runs = result["runs"]
    d = digest(iter_metrics(runs[1].path / "metrics.jsonl"), {"val_ppl"}, {"val_ppl"})
    # between 40,960 (50) and 81,920 (30) tokens a perplexity is interpolated in its log: the geometric mean halfway
    assert value_at_tokens(d, "val_ppl", 61_440) == pytest.approx(math.sqrt(50.0 * 30.0))


def test_the_plot_axis_is_tokens_where_tokens_per_step_differ_or_asked_and_says_which(tmp_path, make_run,
                                                                                      monkeypatch):
    from linformer.report import compare

    drawn = []
    real = compare.plot_metric
    monkeypatch.setattr(compare, "plot_metric", lambda *a, **k: drawn.append((k["x_label"], k["series_of"]))
                        or real(*a, **k))
    small = _batch_run(make_run, tmp_path / "out", "b16", 16)
    big = _batch_run(make_run, tmp_path / "out", "b32", 32)
    runs = compare_runs([small, big], tmp_path / "cmp", metrics=["val_ppl"])["runs"]
    label, series_of = drawn[-1]
    assert label == "tokens seen (the runs differ in tokens per step)"
    assert series_of(runs[1], "val_ppl")[0] == [0.0, 40_960.0, 81_920.0]
    other = _batch_run(make_run, tmp_path / "out2", "b16b", 16)
    compare_runs([small, other], tmp_path / "cmp2", metrics=["val_ppl"])
    assert drawn[-1][0] == "step"
    compare_runs([small, other], tmp_path / "cmp3", metrics=["val_ppl"], x="tokens")
    assert drawn[-1][0] == "tokens seen"
    compare_runs([small, big], tmp_path / "cmp4", metrics=["val_ppl"], x="step")
    # a step asked for: the axis says that at one step these runs have not seen the same tokens
    assert drawn[-1][0] == "step (the runs differ in tokens per step: at one step they have not seen the same tokens)"
    assert "## At equal tokens" in (tmp_path / "cmp4" / "runs.md").read_text()


def test_a_rate_is_plotted_by_step_where_runs_differ_in_tokens_per_step_and_the_title_names_the_machine(
        tmp_path, make_run, monkeypatch):
    """mfu.png of runs of 2x the tokens per step was drawn by tokens seen: the run of twice the tokens a step
    stretched to twice the length, at the same MFU. A rate is drawn by step; a perplexity still by tokens. The title
    named no machine, although a speed is a machine's."""
    small = _batch_run(make_run, tmp_path / "out", "b16", 16)
    big = _batch_run(make_run, tmp_path / "out", "b32", 32)
    for path in (small, big):  # an MFU logged at each training row
        rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        (path / "metrics.jsonl").write_text("".join(json.dumps({**r, **({"mfu": 0.3} if "loss" in r else {})}) + "\n"
                                                    for r in rows))
    (big / "results.json").write_text(json.dumps({**read_json(big / "results.json"), "device": "NVIDIA H200"}))
    figs = _kept_figures(monkeypatch)
    compare_runs([small, big], tmp_path / "cmp", metrics=["val_ppl", "mfu"])
    mfu = figs["mfu.png"].axes[0]
    assert [list(line.get_xdata()) for line in mfu.get_lines() if line.get_label() in ("b16", "b32")] == \
        [list(range(2, 21))] * 2  # steps, the warm-up step left out, for both runs
    assert mfu.get_xlabel() == "step"
    assert figs["val_ppl.png"].axes[0].get_xlabel() == "tokens seen (the runs differ in tokens per step)"
    assert figs["mfu.png"]._suptitle.get_text().replace("\n", " ") == \
        "MFU (%) by step; machines: not recorded (1 run), NVIDIA H200 (1 run)"
    compare_runs([small], tmp_path / "cmp2", metrics=["mfu"])
    assert figs["mfu.png"]._suptitle.get_text() == "MFU (%) by step; machine not recorded"


def _tokenized(path: Path, tokenizer: str, vocab: int) -> Path:
    import yaml

    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "data": {"tokenizer": tokenizer, "vocab_size": vocab}}))
    return path


def test_runs_of_other_tokenizers_get_a_panel_each_whose_title_names_it_and_the_figure_says_they_do_not_compare(
        tmp_path, make_run, monkeypatch):
    """val_ppl.png drew a run of another tokenizer on one axis with the others, titled only "validation perplexity by
    step": runs.md said they do not compare, the figure did not. A per-token metric gets a panel per tokenizer and a
    title that says so; a metric that is no per-token one (tokens/s) and runs of one tokenizer stay on one axis."""
    ours = _tokenized(make_run(tmp_path / "out", "pretrain", "a", _pretrain_rows(1.0)), "mirror_slice", 8000)
    theirs = _tokenized(make_run(tmp_path / "out", "pretrain", "b", _pretrain_rows(0.5)), "other_tok", 8000)
    same = _tokenized(make_run(tmp_path / "out", "pretrain", "c", _pretrain_rows(0.7)), "mirror_slice", 8000)
    figs = _kept_figures(monkeypatch)
    compare_runs([ours, theirs, same], tmp_path / "cmp", metrics=["val_ppl", "tokens_per_s"])
    fig = figs["val_ppl.png"]
    panels = {ax.get_title().replace("\n", " "): sorted(line.get_label() for line in ax.get_lines())
              for ax in fig.axes}
    assert panels == {"pretrain runs, tokenizer data.tokenizer=mirror_slice": ["a", "c"],
                      "pretrain runs, tokenizer data.tokenizer=other_tok": ["b"]}
    assert "Not comparable across tokenizers" in fig._suptitle.get_text().replace("\n", " ")
    speed = figs["tokens_per_s.png"]
    assert len(speed.axes) == 1 and "Not comparable" not in speed._suptitle.get_text()
    compare_runs([ours, same], tmp_path / "cmp2", metrics=["val_ppl"])
    assert len(figs["val_ppl.png"].axes) == 1 and "Not comparable" not in figs["val_ppl.png"]._suptitle.get_text()


def test_a_run_of_one_logged_point_gets_an_axis_around_it_not_fractions_of_a_step(tmp_path, make_run, monkeypatch):
    """A run whose metrics.jsonl held step 0's evaluation alone was drawn on an x axis of "-0.04 ... 0.04" steps."""
    make_run(tmp_path / "out", "pretrain", "start", [{"step": 0, "time": 0.0, "val_loss": 9.0, "val_ppl": 8103.0}])
    figs = _kept_figures(monkeypatch)
    compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=["val_ppl"])
    ax = figs["val_ppl.png"].axes[0]
    figs["val_ppl.png"].canvas.draw()
    assert ax.get_xlim() == (-0.5, 0.5)
    assert [t.get_text() for t in ax.get_xticklabels() if t.get_text()] == ["0"]


def test_an_axis_in_millions_labels_its_zero_0_not_0m():
    """A tokens axis reaching 5.2M labelled its first tick "0M"."""
    from linformer import plots

    fig, axes = plots.figure()
    ax = axes[0][0]
    ax.plot([0, 5.2e6], [1, 2])
    plots.plain_ticks(ax.xaxis)
    fig.canvas.draw()
    low, high = ax.get_xlim()
    ticks = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
    assert ticks[0] == "0" and ticks[1].endswith("M")


def test_runs_of_other_tokenizers_are_not_ranked_on_perplexity_at_equal_tokens(tmp_path, make_run):
    """At equal tokens, perplexities and losses over two vocabularies are shown but ranked by neither: the section
    says why, naming the tokenizers, and keeps the runs in the table's order."""
    import yaml

    def tokenized(path, tokenizer, vocab):
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "data": {"tokenizer": tokenizer,
                                                                              "vocab_size": vocab}}))
        return path

    # ranked by val_ppl at 40,960 tokens, b32 (50) would lead b16 (55), which comes first by name
    small = tokenized(_batch_run(make_run, tmp_path / "out", "b16", 16, val_ppls=((10, 60.0), (20, 55.0))),
                      "mirror_slice", 8000)
    big = tokenized(_batch_run(make_run, tmp_path / "out", "b32", 32, val_ppls=((10, 50.0), (20, 30.0))),
                    "other_tok", 16000)
    table = compare_runs([small, big], tmp_path / "cmp", metrics=["val_ppl", "loss"])["table"]
    equal = table.split("## At equal tokens (pretrain runs)")[1]
    assert "ranked by" not in equal.replace("not ranked by", "")
    assert ("not ranked by val_ppl, loss: the runs differ in their tokenizer (data.tokenizer (mirror_slice, "
            "other_tok); data.vocab_size (16000, 8000)), so these are per token of different vocabularies") in equal
    rows = [line for line in equal.splitlines() if line.startswith("| b")]
    assert rows == ["| b16 | 2,048 | 20 | 55 | 3 |", "| b32 | 4,096 | 10 | 50 | 4 |"]


def test_pretraining_runs_of_other_tokenizers_are_said_not_comparable_on_perplexity(tmp_path, make_run):
    """Perplexities over two vocabularies are no comparison: the note says so first, naming the tokenizers; runs of
    one tokenizer get no such words, nor do metrics that are not per token."""
    import yaml

    def run(name, tokenizer, vocab):
        path = make_run(tmp_path / "out", "pretrain", name, _pretrain_rows(1.0))
        config = yaml.safe_load((path / "config.yaml").read_text())
        (path / "config.yaml").write_text(yaml.safe_dump({**config, "data": {"tokenizer": tokenizer,
                                                                              "vocab_size": vocab}}))
        return path

    ours, theirs, same = run("a", "mirror_slice", 8000), run("b", "other_tok", 16000), run("c", "mirror_slice", 8000)
    table = compare_runs([ours, theirs], tmp_path / "cmp", metrics=["val_ppl", "loss"])["table"]
    note = next(line for line in table.splitlines() if line.startswith("Not comparable"))
    assert "differ in their tokenizer (data.tokenizer (mirror_slice, other_tok); data.vocab_size (16000, 8000))" in note
    assert "their val_ppl, loss are per token of different vocabularies" in note
    assert "Not comparable" not in compare_runs([ours, same], tmp_path / "cmp2", metrics=["val_ppl"])["table"]
    assert "Not comparable" not in compare_runs([ours, theirs], tmp_path / "cmp3", metrics=["tokens_per_s"])["table"]


def _sweep_with_a_damaged_config(root, make_run, first: bool):
    """Three pretraining runs that differ in trainer.lr alone (one tokenizer), and one more whose config.yaml does
    not read while its run.json does (its stage is known): named to sort `first` or last."""
    import json

    import yaml

    for i, lr in enumerate((1e-3, 2e-3, 3e-3)):
        run = make_run(root, "pretrain", f"lr{i}", _pretrain_rows(1.0 + i))
        config = yaml.safe_load((run / "config.yaml").read_text())
        config |= {"trainer": {"lr": lr, "batch_size": 8, "max_steps": 10},
                   "data": {"tokenizer": "data/tokenizer", "vocab_size": 8000, "n": 128}}
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        (run / "run.json").write_text(json.dumps({"stage": "pretrain", "status": "complete"}))
    bad = make_run(root, "pretrain", "0bad" if first else "zbad", _pretrain_rows(2.0))
    (bad / "config.yaml").write_text("model: {name: tiny\n  projected_dim: [")
    (bad / "run.json").write_text(json.dumps({"stage": "pretrain", "status": "complete"}))
    return bad


@pytest.mark.parametrize("first", [True, False])
def test_a_damaged_config_leaves_the_other_runs_rows_as_they_were(tmp_path, make_run, caplog, first):
    """One run whose config.yaml did not read among good ones: its empty config differed from theirs in every
    setting, so every row got a column per identity key (20 -> 47 at sweep scale) and a false "differ in their
    tokenizer" note. The run is shown marked damaged and left out of what the others differ in."""
    from linformer.report.compare import differing_settings

    bad = _sweep_with_a_damaged_config(tmp_path / "out", make_run, first)
    runs = [load_run(p, rows=False) for p in find_runs([tmp_path / "out"])]
    assert differing_settings(runs) == ["trainer.lr"]
    table = compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=None)["table"]
    header = table.splitlines()[0]
    assert "| trainer.lr |" in header and "data." not in header and "trainer.max_steps" not in header
    assert "tokenizer" not in table
    assert f"{bad.name} (config.yaml cannot be read)" in table
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1 and said[0].startswith(f"{bad / 'config.yaml'} cannot be read")


def test_a_row_whose_step_is_no_integer_is_skipped_not_a_traceback(tmp_path, make_run, caplog):
    """`"step": "abc"` (a hand-edited file, another logger) crashed compare_runs in int(), and `"step": null` with a
    TypeError: the whole comparison lost. Such rows are skipped as a torn line is, with a warning naming the file."""
    run = make_run(tmp_path / "out", "pretrain", "a", _pretrain_rows(1.0))
    with (run / "metrics.jsonl").open("a") as f:
        for step in ('"abc"', "null", "true", "2.5", "[3]"):
            f.write(f'{{"step": {step}, "loss": 0.5}}\n')
        f.write('{"step": 11.0, "loss": 0.25}\n')  # an integer written as a float is one
    table = compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=None)["table"]
    row = next(line for line in table.splitlines() if line.startswith("| a |"))
    assert "| 11 |" in row and "0.25 (best)" in row
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said and all(line.startswith(str(run / "metrics.jsonl")) for line in said)


def _clock(monkeypatch, step_s: float = 31.0):
    """progress_over's clock, advanced `step_s` seconds at each reading: a slow pass without the wait."""
    from linformer import progress

    ticks = iter(range(0, 10_000))
    monkeypatch.setattr(progress, "monotonic", lambda: step_s * next(ticks))


def test_reading_many_runs_says_how_far_it_is_in_a_log_file(tmp_path, make_run, monkeypatch, capsys):
    """compare_runs said nothing for 2+ minutes while it read 400 runs: a user could not tell slow from hung. Where
    stderr is a log file it says a plain line every 30 s (a terminal gets a bar)."""
    for name in ("a", "b", "c"):
        make_run(tmp_path / "out", "pretrain", name, _pretrain_rows(1.0))
    _clock(monkeypatch)
    compare_runs([tmp_path / "out"], tmp_path / "cmp", plot_metrics=None)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("compare_runs: reading")]
    assert said == ["compare_runs: reading: 1 of 3 runs (31 s)", "compare_runs: reading: 2 of 3 runs (62 s)"]


def _grid_run(make_run, root, k, sharing, lr, seed, val_ppl=None, **config_extra):
    """A pretraining run of a k x sharing x lr x seed sweep, every run named `p` (a sweep's one run_name) in a folder
    of its own, its final val_ppl `val_ppl` (default: falling with k, a point higher for seed 1)."""
    import yaml

    rows = [{"step": s, "time": float(s), "loss": 5.0 - s / 10} for s in range(1, 5)]
    rows.append({"step": 4, "time": 4.5, "val_ppl": val_ppl or 50.0 - k / 10 + seed})
    path = make_run(root / f"k{k}-{sharing}-lr{lr}-s{seed}", "pretrain", "p", rows,
                    model={"name": "tiny", "attention": "linformer", "projected_dim": k, "sharing": sharing,
                           "max_seq_len": 128})
    config = yaml.safe_load((path / "config.yaml").read_text())
    (path / "config.yaml").write_text(yaml.safe_dump({**config, "seed": seed, "trainer": {"lr": lr}, **config_extra}))
    return path


def test_where_keeps_the_runs_of_a_setting_s_values_numbers_compared_numerically(tmp_path, make_run):
    """A sweep of hundreds of runs could only be compared whole: --where narrows it to the runs of a setting's value,
    named as the table names it (a column, k, or a config key), 3e-4 matching the recorded 0.0003, a key given twice
    either value, and runs.md says how many of those found it kept."""
    for k in (32, 64, 128):
        for sharing in ("headwise", "kv"):
            for lr in (1e-4, 3e-4):
                _grid_run(make_run, tmp_path / "out", k, sharing, lr, 0)
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp", ["val_ppl"],
                          where=["model.sharing=kv", "trainer.lr=3e-4", "k=32", "k=1.28e2"])
    kept = sorted((r.key_config["k"], r.key_config["sharing"], r.key_config["lr"]) for r in result["runs"])
    assert kept == [(32, "kv", 3e-4), (128, "kv", 3e-4)]
    table = (tmp_path / "cmp" / "runs.md").read_text()
    assert "Runs where model.sharing kv and trainer.lr 3e-4 and k 32 or 1.28e2: 2 of the 12 found." in table
    header, _, *rows = table.split("found.\n\n")[1].split("\n\n")[0].splitlines()
    assert len(rows) == 2
    # the settings that differ among the runs kept are those of the table: lr and sharing no longer do
    assert "trainer.lr" not in header and "| k |" in header


def test_a_where_or_group_by_key_no_run_records_or_a_value_none_has_is_one_error_line_naming_the_flag(
        tmp_path, make_run, capsys, monkeypatch):
    """A misspelt key or a value no run has is an `error:` line naming the flag, the closest key and the settings
    there are (or the values the runs have), with nothing written."""
    from tests.conftest import run_script

    for k in (32, 64):
        _grid_run(make_run, tmp_path / "out", k, "kv", 1e-4, 0)
    unknown = ("error: --where model.sharng: no run records a setting model.sharng (did you mean model.sharing?); "
               "the runs' settings: stage, model, attention, n, k, sharing, experiment_name, model.attention, ")
    grouped = "error: --group-by model.sharding: no run records a setting model.sharding (did you mean model.sharing?)"
    for args, line in ((["--where", "model.sharng=kv"], unknown),
                       (["--where", "k=48"], "error: --where k=48: no run has it; their k: 32, 64\n"),
                       (["--where", "k"], "error: --where 'k': give KEY=VALUE"),
                       (["--group-by", "model.sharding"], grouped)):
        assert run_script("compare_runs", [str(tmp_path / "out"), "--out", str(tmp_path / "cmp"), *args],
                          monkeypatch) == 2
        err = capsys.readouterr().err
        assert err.startswith(line) and err.count("\n") == 1, err
    assert not (tmp_path / "cmp").exists()


def test_group_by_gives_the_mean_and_sd_over_each_value_s_runs_in_numeric_order(tmp_path, make_run):
    """The "Across seeds" table needed reported scores (finetuning only) and grouped by every setting at once: a
    pretraining sweep got no mean at all, and rows came in string order (k128 before k32). --group-by k gives a row
    per k, in numeric order, of the mean +- sd of each metric's final value over its runs, naming what it pools."""
    for k in (128, 32, 64):
        for sharing in ("headwise", "kv"):
            for seed in (0, 1):
                _grid_run(make_run, tmp_path / "out", k, sharing, 1e-4, seed)
    table = compare_runs([tmp_path / "out"], tmp_path / "cmp", ["val_ppl"], group_by=["k"])["table"]
    main, grouped = table.split("## Across seeds, by k")
    header, _, *rows = main.split("\n\n")[0].splitlines()
    k = header.split(" | ").index("k")
    assert [row.split(" | ")[k] for row in rows] == ["32"] * 4 + ["64"] * 4 + ["128"] * 4  # the main table's too
    assert "its runs, pooled over every other setting in which they differ (sharing, seed)" in grouped
    rows = [line for line in grouped.splitlines() if line.startswith("| ") and not line.startswith("| k ")]
    assert rows == ["| 32 | 4 | 0, 1 | 4 | 47.3 +- 0.5774 (46.8-47.8, 4 runs of 2 seeds) |",
                    "| 64 | 4 | 0, 1 | 4 | 44.1 +- 0.5774 (43.6-44.6, 4 runs of 2 seeds) |",
                    "| 128 | 4 | 0, 1 | 4 | 37.7 +- 0.5774 (37.2-38.2, 4 runs of 2 seeds) |"]
    # two keys: a row per combination, and finetuning's chosen and reported scores beside the final metrics
    for lr, chosen in ((1e-4, 0.6), (1e-3, 0.8)):
        for seed in (0, 1):
            _sweep_run(make_run, tmp_path / "ft", f"lr{lr}-s{seed}", seed, lr, 0.5 + seed / 10, chosen + seed / 10)
    grouped = compare_runs([tmp_path / "ft"], tmp_path / "cmp2", ["loss"], group_by=["trainer.lr,task"])["table"]
    assert "## Across seeds\n" not in grouped  # replaced, not added to
    assert ("| trainer.lr | task | runs | seeds | steps | final loss | chosen val_accuracy | reported accuracy |"
            in grouped)
    assert "| 0.001 | sst2 | 2 | 0, 1 | 1 | 0.5 +- 0 (0.5-0.5, 2 seeds) | 0.85 +- 0.07071 (0.8-0.9, 2 seeds) |" in grouped


def test_the_printed_table_of_a_sweep_fits_the_width_naming_what_it_leaves_out(tmp_path, make_run):
    """A sweep's table was 274-371 characters a row in the terminal: columns the same in every run, whole paths.
    Printed at a width, it names the settings the same in every row instead of a column each, shortens long values
    (runs.md keeps them whole), and leaves out columns that still do not fit, naming them; a table that fits, or no
    width, is printed as runs.md holds it."""
    long = "outputs/pretrain/the-warm-start-of-a-long-base-run-{}"
    for k in (32, 64):
        for seed in (0, 1):
            _grid_run(make_run, tmp_path / "out", k, "kv", 1e-4, seed, init_from=long.format(seed))
    result = compare_runs([tmp_path / "out"], tmp_path / "cmp", ["val_ppl", "loss"], width=100)
    printed, whole = result["printed"], (tmp_path / "cmp" / "runs.md").read_text()
    assert long.format(1) in whole and long.format(1) not in printed
    assert "| outputs/pre...base-run-1 |" in printed
    lines = printed.split("\n\n")[0].splitlines()
    assert lines[0].startswith("| run ") and "| sharing " not in lines[0] and "| stage " not in lines[0]
    assert max(map(len, printed.splitlines())) <= 100 < max(map(len, whole.splitlines()))
    assert "| val_ppl " in lines[0] and "| loss " not in lines[0]
    note = " ".join(printed.split("\n\n")[1].split())
    assert note.startswith("The same in every row: stage pretrain, model tiny, attention linformer, n 128, sharing kv")
    assert "Values past 24 characters (the first column's past 40) are shortened around \"...\"." in note
    assert "Left out to fit 100 characters: loss. runs.md has the table whole." in note
    assert compare_runs([tmp_path / "out"], tmp_path / "cmp", ["val_ppl", "loss"])["printed"] == result["table"]
    assert compare_runs([tmp_path / "out"], tmp_path / "cmp", ["val_ppl"], where=["k=32", "seed=0"],
                        width=200)["printed"] == (tmp_path / "cmp" / "runs.md").read_text()
