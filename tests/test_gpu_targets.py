"""scripts/gpu.py (linformer/gpu/targets.py): every target runs, its log and record survive a failing target, and the exit code says so."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from linformer.gpu import targets

from .conftest import as_a_script

REPO = Path(__file__).resolve().parents[1]


def _dirs(work: Path) -> list[str]:
    """--work `work` and --out beside it (`work`-back: the folder that would come back from the machine)."""
    return ["--work", str(work), "--out", f"{work}-back"]


def _load(monkeypatch, gpu: str | None = "a CUDA device (stand-in)"):
    """The GPU targets with their CUDA device stood in by `gpu` (None: no CUDA device), so stand-in targets run here."""
    monkeypatch.setattr("linformer.devices.cuda_device_name", lambda: gpu)  # targets imports it when it runs
    return targets


def test_a_failing_target_is_recorded_and_the_next_still_runs(tmp_path, monkeypatch, capsys):
    gpu = _load(monkeypatch)
    fake = {"tests": [[sys.executable, "-c", "print('3 passed'); raise SystemExit(1)"],
                      [sys.executable, "-c", "print('never runs')"]],
            "table3": [[sys.executable, "-c", "print('table written')"]],
            "throughput": [[sys.executable, "-c", "pass"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    assert gpu.main(["tests", "table3", *_dirs(tmp_path)]) == 1
    records = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert [(r["target"], r["rc"]) for r in records] == [("tests", 1), ("table3", 0)]
    log = (tmp_path / "gpu_tests.log").read_text()
    assert "3 passed\n" in log and "never runs" not in log  # a target stops at its first failing command
    assert (tmp_path / "table3.log").read_text().endswith("table written\n")
    assert "1 of 2 passed; failed: tests" in capsys.readouterr().out
    assert gpu.main(["throughput", *_dirs(tmp_path)]) == 0  # a later batch adds to the record
    assert [r["target"] for r in json.loads((tmp_path / "gpu_targets.json").read_text())] == ["tests", "table3",
                                                                                           "throughput"]


def test_the_target_commands_name_configs_that_exist(monkeypatch):
    commands = _load(monkeypatch).target_commands(Path("/out"))
    for name in ("table3", "throughput", "table3_local"):
        for command in commands[name]:
            assert (REPO / "configs" / f"{command[command.index('--config-name') + 1]}.yaml").is_file()
    flex_run, blocked_run = commands["table3_local"]  # the same table through flex, then through the blocked path
    assert not any(a.startswith("inference.linformer_attn_implementation") for a in flex_run)
    assert {"inference.linformer_attn_implementation=sdpa", "throughput.linformer_attn_implementation=sdpa",
            "name=table3_local_blocked_gpu", "throughput_name=table3_local_blocked_train_gpu"} <= set(blocked_run)
    assert (REPO / "tests" / "gpu").is_dir() and "gpu" in commands["tests"][-1]


def test_figure3_runs_differ_only_in_attention_and_k(monkeypatch):
    """Every Figure 3 run gets the same model, data and recipe (so the same tokens and steps); the figure reads the
    run directories the runs write, and their records come back with the target's files."""
    gpu = _load(monkeypatch)
    commands = gpu.target_commands(Path("/out"))["figure3"]
    (group,) = [c for c in commands if isinstance(c, gpu.Together)]
    runs = group.commands
    varying = lambda arg: arg.startswith(("model.attention=", "model.projected_dim=", "run_name="))
    assert len(runs) == 4 and all(c[1] == "scripts/pretrain.py" for c in runs)
    assert len({tuple(a for a in c if not varying(a)) for c in runs}) == 1
    names = [a.split("=", 1)[1] for c in runs for a in c if a.startswith("run_name=")]
    figure = commands[-1]
    assert figure[1] == "scripts/figure3.py" and [f"outputs/pretrain/{n}" for n in names] == figure[2:6]
    assert {f"outputs/pretrain/{n}/metrics.jsonl" for n in names} <= set(gpu.copy_back_patterns("figure3"))


def test_figure3d_runs_differ_only_in_attention_and_n_with_the_same_tokens_per_update(monkeypatch):
    """Figure 3d: a corpus of the book texts per n; at each n the Linformer (k = 128) and full attention get the same
    recipe, and every run the same tokens per update (batch x n), so the same tokens and steps; the Linformer runs go
    first, the figure reads every run directory, and the records come back with the target's files."""
    from linformer.runconfig import PretrainSpec

    from .train.conftest import compose

    gpu = _load(monkeypatch)
    commands = gpu.target_commands(Path("/out"))["figure3d"]
    prepared = [c for c in commands if not isinstance(c, gpu.Together) and "scripts/prepare_corpus.py" in c]
    assert [c[3:5] for c in prepared] == [[f"data.n={n}", f"data.name=books-n{n}"] for n in gpu.FIGURE3D_NS]
    groups = [c for c in commands if isinstance(c, gpu.Together)]
    assert [len(g.commands) for g in groups] == [4, 4]
    specs = [PretrainSpec.read(compose("pretrain", c[2:])) for g in groups for c in g.commands]
    assert [s.model["attention"] for s in specs] == ["linformer"] * 4 + ["full"] * 4
    for spec in specs:
        n = spec.model["max_seq_len"]
        assert spec.corpus_dir.endswith(f"data/processed/books-n{n}") and spec.tokenizer_dir.endswith("books")
        assert spec.trainer.batch_size * n == gpu.FIGURE3D_TOKENS and spec.model["hidden_size"] == 256
        assert (spec.trainer.max_steps, spec.trainer.lr) == (2000, 1e-3)
        assert spec.trainer.eval_blocks * n == gpu.FIGURE3D_EVAL_TOKENS  # the same validation tokens at every n
        kind = "full" if spec.model["attention"] == "full" else "k128"
        assert spec.model["projected_dim"] == 128 and spec.run_name == f"fig3d-{kind}-n{n}"
    figure = commands[-1]
    assert figure[1:4] == ["scripts/figure3.py", "--panel", "d"] and figure[-1] == "/out/figure3d_gpu"
    assert [f"outputs/pretrain/{s.run_name}" for s in specs] == figure[4:-2]
    assert {f"outputs/pretrain/{s.run_name}/metrics.jsonl" for s in specs} <= set(gpu.copy_back_patterns("figure3d"))


def _tagged_sleep(tag: str, seconds: float) -> list[str]:
    return [sys.executable, "-c", (f"import time; print('start {tag}', flush=True); time.sleep({seconds}); "
                                  f"print('end {tag}', flush=True)")]


def test_together_runs_its_commands_side_by_side_and_fails_with_any(tmp_path, monkeypatch):
    gpu = _load(monkeypatch)
    group = gpu.Together((_tagged_sleep("a", 1.5), _tagged_sleep("b", 1.5),
                                [sys.executable, "-c", "raise SystemExit(3)"]), gib_each=1.0)
    monkeypatch.setattr(gpu.Together, "slots", lambda self: 2)
    fake = {"figure3": [group, [sys.executable, "-c", "print('never runs')"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    assert gpu.main(["figure3", *_dirs(tmp_path)]) == 1
    (record,) = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert record["rc"] == 3  # overlap is judged by the log's order, not by wall time (the machine may be loaded)
    log = (tmp_path / "figure3.log").read_text().splitlines()
    assert log.index("[1] start b") < log.index("[0] end a")  # b started before a ended
    assert "[2] $ " in "\n".join(log) and "never runs" not in "\n".join(log)  # the third ran once a slot freed


def test_together_runs_one_at_a_time_without_cuda(monkeypatch):
    gpu = _load(monkeypatch)
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: the slots come from its free memory")
    assert gpu.Together(([], []), gib_each=1.0).slots() == 1


TRAPS_SIGTERM = """
import signal, sys, time
def stop(*_):
    print('saved what was finished', flush=True)
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
print('started', flush=True)
time.sleep(60)
"""


def test_stop_after_ends_the_running_command_and_records_a_stop_not_a_failure(tmp_path, monkeypatch, capsys):
    gpu = _load(monkeypatch)
    fake = {"table2": [[sys.executable, "-c", TRAPS_SIGTERM], [sys.executable, "-c", "print('never runs')"]],
            "figure3": [[sys.executable, "-c", "print('never runs either')"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    monkeypatch.setattr(gpu.node, "check_node", lambda: None)  # the minutes count from main's start
    monkeypatch.setattr(gpu, "table2_first_unit", lambda *_: None)  # stand-in commands, not the plan's rows
    assert gpu.main(["table2", "figure3", *_dirs(tmp_path), "--stop-after", "0.1"]) == 0
    records = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert [(r["target"], r["rc"], r.get("stopped")) for r in records] == [("table2", 130, True), ("figure3", 0, True)]
    assert records[0]["wall_s"] < 30  # stopped at about 3 s, not run to its end
    log = (tmp_path / "table2.log").read_text()
    assert "saved what was finished" in log and "never runs" not in log
    assert "never runs" not in (tmp_path / "figure3.log").read_text()
    assert "0 of 2 passed; stopped at --stop-after (resumable): table2, figure3" in capsys.readouterr().out


def test_stop_after_ends_every_command_of_a_together_group(tmp_path, monkeypatch):
    gpu = _load(monkeypatch)
    group = gpu.Together(([sys.executable, "-c", TRAPS_SIGTERM], [sys.executable, "-c", TRAPS_SIGTERM],
                                [sys.executable, "-c", "print('never runs')"]), gib_each=1.0)
    monkeypatch.setattr(gpu.Together, "slots", lambda self: 2)
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: {"figure3": [group]})
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    monkeypatch.setattr(gpu.node, "check_node", lambda: None)  # the minutes count from main's start
    monkeypatch.setattr(gpu, "table2_first_unit", lambda *_: None)  # stand-in commands, not the plan's rows
    assert gpu.main(["figure3", *_dirs(tmp_path), "--stop-after", "0.1"]) == 0
    (record,) = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert (record["rc"], record.get("stopped")) == (130, True) and record["wall_s"] < 30
    log = (tmp_path / "figure3.log").read_text()
    assert {"[0] saved what was finished", "[1] saved what was finished"} <= set(log.splitlines())
    assert "[2] $" not in log


def test_a_target_files_in_the_repository_come_back_whatever_its_exit(tmp_path, monkeypatch):
    gpu = _load(monkeypatch)
    repo = tmp_path / "repo"
    (repo / "records" / "run-a").mkdir(parents=True)
    (repo / "records" / "run-a" / "results.json").write_text("{}")
    (repo / "records" / "other").mkdir()
    (repo / "table.md").write_text("| a |")
    monkeypatch.setattr(gpu, "REPO", repo)
    monkeypatch.setattr(gpu, "copy_back_patterns",
                        lambda target: ("records/run-*", "table.*") if target == "table2" else ())
    monkeypatch.setattr(gpu, "target_commands",
                        lambda out, *_: {"table2": [[sys.executable, "-c", "raise SystemExit(3)"]]})
    out = tmp_path / "out"
    assert gpu.main(["table2", *_dirs(out)]) == 1
    (record,) = json.loads((out / "gpu_targets.json").read_text())
    assert record["rc"] == 3 and record["copied"] == ["records/run-a", "table.md"]
    assert (out / "repo" / "records" / "run-a" / "results.json").read_text() == "{}"
    assert not (out / "repo" / "records" / "other").exists()


def test_the_table2_target_brings_back_what_the_reproduction_resumes_from(monkeypatch):
    """The records a resumed reproduction skips on (each finetuning target's done file) and its table are under the
    globs the target copies back."""
    import fnmatch

    from linformer.experiments import pretrained as exp

    gpu = _load(monkeypatch)
    (command,) = gpu.target_commands(Path("/out"))["table2"]
    assert command[1:] == ["scripts/reproduce_pretrained.py", "--profile", "gpu"]
    (command,) = gpu.target_commands(Path("/out"), jobs=2)["table2"]
    assert command[-2:] == ["--jobs", "2"]  # fewer runs at once finish the first ones sooner on a fresh machine
    patterns = gpu.copy_back_patterns("table2")
    gpu = exp.PROFILES["gpu"]
    done = [str(s.done.relative_to(exp.REPO)) for s in exp.plan(gpu) if s.name.startswith("finetune ")]
    assert done and all(any(fnmatch.fnmatch(str(Path(d).parent), p) for p in patterns) for d in done)
    assert any(fnmatch.fnmatch(f"{exp.table_path(gpu)}.md", p) for p in patterns)


def test_out_gets_one_archive_of_every_target_whatever_they_wrote(tmp_path, monkeypatch):
    """--out is what comes back from a machine that returns 8 files at most, two folders down: gpu.py writes only
    gpu.tgz there, holding the record, the logs and the repository files copied back five folders down."""
    import tarfile

    gpu = _load(monkeypatch)
    repo = tmp_path / "repo"
    (repo / "docs" / "results" / "runs" / "tp-a").mkdir(parents=True)
    (repo / "docs" / "results" / "runs" / "tp-a" / "results.json").write_text("{}")
    monkeypatch.setattr(gpu, "REPO", repo)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ("docs/results/runs/tp-*",) if target == "table2"
                        else ())
    fake = {"tests": [[sys.executable, "-c", "print('tests ran')"]],
            "table2": [[sys.executable, "-c", "raise SystemExit(2)"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    out = tmp_path / "OUT"
    assert gpu.main(["tests", "table2", "--work", str(tmp_path / "work"), "--out", str(out)]) == 1
    assert sorted(p.name for p in out.iterdir()) == [".linformer-outputs.json", "gpu.tgz"]  # the output record
    with tarfile.open(out / "gpu.tgz") as tar:
        names = set(tar.getnames())
        records = json.load(tar.extractfile("./gpu_targets.json"))
        packages = tar.extractfile(f"./{gpu.PACKAGES}").read().decode().splitlines()  # the versions that ran
    assert {"./gpu_tests.log", "./table2.log", "./repo/docs/results/runs/tp-a/results.json"} <= names
    assert f"pytest=={pytest.__version__}" in packages
    assert [(r["target"], r["rc"]) for r in records] == [("tests", 0), ("table2", 2)]
    assert {"device", "commit", "dirty", "linformer", "source_sha256", "torch", "cuda", "driver", "argv",
            "started"} <= set(records[0])
    from linformer.rundir import code_revision  # the commit as a run's record gives it, with whether it was dirty

    assert {k: records[0][k] for k in code_revision()} == code_revision()
    assert records[0]["argv"][-2:] == ["--out", str(out)]
    with pytest.raises(SystemExit) as stop:  # an --out inside --work would archive itself
        gpu.main(["tests", "--work", str(tmp_path / "work"), "--out", str(tmp_path / "work" / "back")])
    assert stop.value.code == 2


def test_the_mfu_runs_compose_as_compiled_base_models_at_n_512_and_come_back(monkeypatch):
    from linformer.runconfig import PretrainSpec

    from .train.conftest import compose

    gpu = _load(monkeypatch)
    commands = gpu.target_commands(Path("/out"))["mfu"]
    reports = [c for c in commands if "scripts/compare_runs.py" in c]
    runs = [c for c in commands if "scripts/pretrain.py" in c]
    # the levers that can fail at their start (one micro-batch of 128, CUDA graphs) after a first report of the
    # others, since a failing command ends the target
    names = list(gpu.MFU_RUNS)
    first = gpu.MFU_FIRST_REPORT
    assert [commands.index(r) for r in reports] == [first, len(commands) - 1]
    assert [[a.split("/")[-1] for a in r if "/pretrain/" in a] for r in reports] == [names[:first], names]
    assert all("b128" in name for name in names[first:]) and not any("b128" in name for name in names[:first])
    assert all(r[r.index("--out") + 1] == "/out/mfu_gpu" for r in reports)
    specs = {}
    for command in runs:
        spec = PretrainSpec.read(compose("pretrain", command[2:]))
        specs[spec.run_name] = spec
        assert spec.trainer.compile and spec.trainer.mixed_precision == "bf16" and spec.model["hidden_size"] == 768
        assert spec.trainer.batch_size * spec.trainer.grad_accum == 128  # the same tokens per step in every run
        assert spec.model["max_seq_len"] == 512 and spec.pad_vocab_to_multiple_of == 64
        assert spec.corpus_dir.endswith("data/processed/wiki_mfu")
    assert list(specs) == names and "graphs" in names[-1] and len(runs) == len(names)
    assert specs["mfu-full"].trainer.sync_every == 1 and specs["mfu-full-async"].trainer.sync_every == 10
    assert specs[list(specs)[-1]].trainer.compile_mode == "reduce-overhead"
    assert {p.split("/")[2] for p in gpu.copy_back_patterns("mfu")} == set(gpu.MFU_RUNS)


def test_without_cuda_no_target_starts_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    """Without CUDA the GPU tests would all be skipped and the target pass: the script refuses to start, in one line,
    exit 2, before it makes --out."""
    import pytest

    with pytest.raises(SystemExit) as stop:
        _load(monkeypatch, gpu=None).main(["tests", "table3", *_dirs(tmp_path / "out")])
    assert stop.value.code == 2
    assert capsys.readouterr().err.splitlines() == [  # the machine's fault, not the command line's: no usage
        "error: no CUDA device here (torch.cuda.is_available() is false): the GPU targets need one"]
    assert not (tmp_path / "out").exists()


def test_a_test_target_whose_tests_were_all_skipped_did_not_pass(tmp_path, monkeypatch, capsys):
    gpu = _load(monkeypatch)
    assert gpu.all_skipped("....\n185 skipped in 3.20s\n")
    assert gpu.all_skipped("==== 4 skipped, 2 deselected in 1.0s ====")
    assert not gpu.all_skipped("3 passed, 182 skipped in 9.10s")
    assert not gpu.all_skipped("no summary here")
    fake = {"tests": [[sys.executable, "-c", "print('185 skipped in 3.20s')"]],
            "table3": [[sys.executable, "-c", "print('3 passed, 1 skipped in 2.00s')"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    assert gpu.main(["tests", "table3", *_dirs(tmp_path)]) == 1
    records = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert [(r["target"], r["rc"]) for r in records] == [("tests", 1), ("table3", 0)]
    out = capsys.readouterr().out
    assert "error: every GPU test was skipped" in out and "1 of 2 passed; failed: tests" in out


def test_an_out_that_is_a_file_or_a_damaged_record_is_one_error_line(tmp_path, capsys, monkeypatch):
    import pytest

    gpu = _load(monkeypatch)
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit) as stop:
        gpu.main(["tests", *_dirs(tmp_path / "file")])
    assert stop.value.code == 2 and "is a file, not a folder" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "gpu_targets.json").write_text('[{"target": "tes')
    with pytest.raises(SystemExit) as stop:
        gpu.main(["tests", *_dirs(tmp_path / "out")])
    assert stop.value.code == 2 and "gpu_targets.json is not JSON" in capsys.readouterr().err
    assert (tmp_path / "out" / "gpu_targets.json").read_text() == '[{"target": "tes'  # left as it was


def test_stop_after_must_be_a_positive_finite_number_of_minutes(tmp_path, capsys, monkeypatch):
    import pytest

    gpu = _load(monkeypatch)
    for bad in ("nan", "inf", "0", "-1"):
        with pytest.raises(SystemExit) as stop:
            gpu.main(["tests", *_dirs(tmp_path / "out"), "--stop-after", bad])
        assert stop.value.code == 2 and "give a positive number of minutes" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_signal_to_the_script_stops_its_command_records_the_target_and_ends_the_batch(tmp_path):
    """SIGTERM to gpu reaches the running command (which saves what it finished), the target's record is
    written as interrupted, and no further target starts: exit 143 (128 + SIGTERM, as the stopped command's)."""
    import os
    import signal
    import subprocess
    import time

    # the pid file appears whole (written aside, then renamed): the signal may come the moment it exists
    child = TRAPS_SIGTERM.replace("print('started', flush=True)",
                                  f"import os; open({str(tmp_path / 'pid.tmp')!r}, 'w').write(str(os.getpid())); "
                                  f"os.replace({str(tmp_path / 'pid.tmp')!r}, {str(tmp_path / 'pid')!r})")
    child = child.replace("time.sleep(60)", "time.sleep(600)")  # outlasts the wait below on a loaded machine
    driver = ("import sys; import linformer.devices as d; from linformer.gpu import targets as g\n"
              "d.cuda_device_name = lambda: 'stand-in'\n"
              f"g.target_commands = lambda out, *_: {{'table2': [[sys.executable, '-c', {child!r}]], "
              "'figure3': [[sys.executable, '-c', 'print(1)']]}\n"
              "g.copy_back_patterns = lambda target: ()\n"
              f"sys.exit(g.main(['table2', 'figure3', '--work', {str(tmp_path / 'out')!r}, '--out', "
              f"{str(tmp_path / 'back')!r}]))\n")
    proc = subprocess.Popen(as_a_script(driver, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    deadline = time.monotonic() + 300  # two interpreters' starts on 2 loaded cores (one took over a minute)
    while not (tmp_path / "pid").exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(proc.communicate())
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    printed, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "no further target runs" in err
    assert "stopped by a signal, exit 143" in printed and "--stop-after" not in printed  # none was given
    (record,) = json.loads((tmp_path / "out" / "gpu_targets.json").read_text())
    assert (record["target"], record["rc"], record["interrupted"]) == ("table2", 143, True)
    assert "saved what was finished" in (tmp_path / "out" / "table2.log").read_text()
    try:
        os.kill(int((tmp_path / "pid").read_text()), 0)
        raise AssertionError("the target's command outlived the script")
    except ProcessLookupError:
        pass


def test_a_log_or_archive_of_someone_elses_is_refused_before_any_target_runs(tmp_path, monkeypatch, capsys):
    """--out holding the user's table3.log, or --archive naming the user's file: one error line, nothing run, the
    files as they were. The script's own logs and archive of an earlier batch are its to replace."""
    import pytest

    gpu = _load(monkeypatch)
    ran = tmp_path / "ran"
    fake = {"table3": [[sys.executable, "-c", f"open({str(ran)!r}, 'w').write('x'); print('table written')"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    out = tmp_path / "out"
    out.mkdir()
    (out / "table3.log").write_text("the user's log")
    with pytest.raises(SystemExit):
        gpu.main(["table3", *_dirs(out)])
    assert "table3.log is a file gpu did not write" in capsys.readouterr().err
    assert (out / "table3.log").read_text() == "the user's log" and not ran.exists()

    mine = tmp_path / "back" / "gpu.tgz"
    mine.parent.mkdir()
    mine.write_text("the user's archive")
    with pytest.raises(SystemExit):
        gpu.main(["table3", "--work", str(tmp_path / "fresh"), "--out", str(mine.parent)])
    assert mine.read_text() == "the user's archive" and not ran.exists()

    for _ in range(2):  # its own log and archive, replaced by the next batch
        assert gpu.main(["table3", *_dirs(tmp_path / "own")]) == 0
    assert (tmp_path / "own" / "table3.log").read_text().endswith("table written\n")


def test_the_dry_run_prints_each_targets_commands_without_a_gpu_and_writes_nothing(tmp_path, monkeypatch, capsys):
    gpu = _load(monkeypatch)
    monkeypatch.setattr("linformer.devices.cuda_device_name", lambda: None)  # no CUDA: a dry run needs none
    out = tmp_path / "out"
    assert gpu.main(["tests", "mfu", *_dirs(out), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("[tests] ") and "pytest -m gpu tests/gpu" in printed
    assert "[mfu]" in printed and "run_name=mfu-full" in printed and "run_name=mfu-k128" in printed
    assert "[table3]" not in printed and not out.exists()
    assert gpu.main(["tests", "--dry-run"]) == 0  # anywhere, as the guide says: no --out needed to look
    assert capsys.readouterr().out.startswith(f"[tests] -> {gpu.REPO / gpu.WORK}/gpu_tests.log")
    assert gpu.main(["scratch", "table2", *_dirs(out), "--dry-run"]) == 0  # in the order they would run
    printed = capsys.readouterr().out
    assert printed.startswith("[scratch] ") and printed.index("[scratch]") < printed.index("[table2]")


def test_every_targets_commands_pass_the_plan_check_and_name_their_outputs(tmp_path):
    """The job runner checks each command's outputs before it starts (output_rule.check_plan): a command line it
    cannot read (a Hydra --config-name) must not end the batch. The benchmark targets write into --out, a folder."""
    from linformer.output_rule import check_plan, job_outputs

    out = tmp_path / "out"
    out.mkdir()
    for commands in targets.target_commands(out).values():
        for command in commands:
            for argv in (command.commands if isinstance(command, targets.Together) else (command,)):
                check_plan([argv])
    assert [p for _, p, _ in job_outputs(targets.target_commands(out)["table3"][0])] == [out]


def test_a_target_refused_by_the_output_rule_is_recorded_failed_and_the_next_still_runs(tmp_path, monkeypatch, capsys):
    from linformer.errors import OutputPathError

    gpu = _load(monkeypatch)
    fake = {"tests": [[sys.executable, "-c", "pass"]], "table3": [[sys.executable, "-c", "pass"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    real = gpu.run_jobs

    def refuse_table3(plan, **kw):
        if kw["stream"].name.endswith("table3.log"):
            raise OutputPathError("/x holds someone's files")
        return real(plan, **kw)

    monkeypatch.setattr(gpu, "run_jobs", refuse_table3)
    assert gpu.main(["table3", "tests", *_dirs(tmp_path)]) == 1
    records = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert [(r["target"], r["rc"]) for r in records] == [("table3", 2), ("tests", 0)]
    assert "error: /x holds someone's files" in (tmp_path / "table3.log").read_text()


def test_scratch_rows_and_table2_rows_pass_through_and_are_refused_without_their_target(tmp_path, monkeypatch,
                                                                                         capsys):
    gpu = _load(monkeypatch)
    commands = gpu.target_commands(Path("/out"), 3, 1, "full,k128-layerwise")
    (scratch,), (table2,) = commands["scratch"], commands["table2"]
    assert scratch[scratch.index("--rows") + 1] == "1" and scratch[-4:] == ["--jobs", "3", "--only",
                                                                             "full,k128-layerwise"]
    assert table2[-2:] == ["--only", "full,k128-layerwise"]
    assert gpu.main(["scratch", "--rows", "1", "--dry-run"]) == 0
    assert "--rows 1" in capsys.readouterr().out
    # two rows at once: every row --only names, not --rows 1
    assert gpu.main(["scratch", "--only", "full,full-scratch", "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert "--only full,full-scratch" in shown and "--rows" not in shown
    # with --stop-after, the dry run says whether the rows fit, as reproduce_scratch.py's own dry run does, and when
    # the stopped jobs have ended (the stop's wait, jobs.STOP_WAIT_S)
    import dataclasses

    from linformer.jobs import STOP_WAIT_S

    # the records of a checkout where no run is done yet, whatever this one holds
    monkeypatch.setitem(gpu.scratch.PROFILES, "gpu", dataclasses.replace(gpu.scratch.PROFILES["gpu"],
                                                                         records=tmp_path / "records"))
    assert gpu.main(["scratch", "--only", "full-scratch", "--dry-run", "--stop-after", "5"]) == 0
    shown = capsys.readouterr().out
    assert "  [row] full-scratch: 9 jobs left, about 6.5 min alone (--only full-scratch): does not fit" in shown
    assert f"have ended by {5 + STOP_WAIT_S / 60:g} min" in shown
    for argv in (["tests", "--rows", "1"], ["tests", "--only", "full"], ["table2", "scratch", "--only", "full"],
                 ["scratch", "--rows", "0"]):
        with pytest.raises(SystemExit) as stop:
            gpu.main([*argv, *_dirs(tmp_path / "w")])
        assert stop.value.code == 2
    assert not (tmp_path / "w").exists()


def test_the_runners_job_logs_come_back_with_table2_and_scratch(monkeypatch):
    """A job that fails or is stopped on the GPU names its log: the log comes back (the runner's log_dir)."""
    gpu = _load(monkeypatch)
    assert "outputs/reproduce_scratch_gpu_logs/*.log" in gpu.copy_back_patterns("scratch")
    assert "outputs/reproduce_pretrained_gpu_logs/*.log" in gpu.copy_back_patterns("table2")


def test_a_carry_not_unpacked_is_refused_before_any_target_runs(tmp_path, monkeypatch, capsys):
    from linformer.files.atomic import record_output_files
    from linformer.files.outputs import made_by

    gpu = _load(monkeypatch)
    mirror = tmp_path / "carry"
    (mirror / "glue" / "sst2").mkdir(parents=True)
    (mirror / "glue" / "sst2" / "train.tsv.xz").write_bytes(b"packed")
    record_output_files([mirror / "glue" / "sst2" / "train.tsv.xz"], made_by("gpu_carry pack", {"target": "scratch"}))
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(mirror))
    ran = tmp_path / "ran"
    fake = {"tests": [[sys.executable, "-c", f"open({str(ran)!r}, 'w')"]], "scratch": []}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    with pytest.raises(SystemExit) as stop:
        gpu.main(["tests", "scratch", *_dirs(tmp_path / "w")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "train.tsv is still packed" in err and "gpu_carry.py unpack" in err
    assert not ran.exists()


def test_the_source_hash_names_the_code_without_git_and_follows_every_source_file(tmp_path):
    """A copy of the sources without .git (what the device receives) hashes as the checkout does; a changed
    module, script or config changes it, and files that are not code (outputs, results) do not."""
    for rel, text in (("linformer/a.py", "x = 1\n"), ("linformer/sub/b.py", "y = 2\n"), ("scripts/run.py", "z\n"),
                      ("configs/task/t.yaml", "k: 1\n"), ("pyproject.toml", "[project]\n")):
        (tmp_path / "one" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "one" / rel).write_text(text)
    shutil.copytree(tmp_path / "one", tmp_path / "two")
    (tmp_path / "two" / "outputs").mkdir()
    (tmp_path / "two" / "outputs" / "log.txt").write_text("not code")
    first = targets.source_sha256(tmp_path / "one")
    assert targets.source_sha256(tmp_path / "two") == first
    for rel in ("linformer/sub/b.py", "configs/task/t.yaml", "scripts/run.py"):
        (tmp_path / "two" / rel).write_text("changed\n")
        assert targets.source_sha256(tmp_path / "two") != first, rel
        shutil.copy(tmp_path / "one" / rel, tmp_path / "two" / rel)
    (tmp_path / "two" / "linformer" / "sub" / "b.py").rename(tmp_path / "two" / "linformer" / "c.py")
    assert targets.source_sha256(tmp_path / "two") != first  # the same bytes under another name


def test_a_stop_after_whose_stop_wait_passes_the_command_limit_is_refused_before_anything_runs(tmp_path, capsys,
                                                                                              monkeypatch):
    """--stop-after plus the stop's wait (jobs.STOP_WAIT_S) must end within --limit, or the machine kills the command
    mid-job: one error line, nothing written, no GPU asked for."""
    from linformer.jobs import STOP_WAIT_S

    gpu = _load(monkeypatch, gpu=None)  # refused before the device is looked for: no "no CUDA device" line
    latest = gpu.COMMAND_LIMIT_MIN - STOP_WAIT_S / 60 - gpu.END_MIN
    for argv in (["--stop-after", f"{latest + 0.5:g}"], ["--stop-after", "4", "--limit", "5"]):
        with pytest.raises(SystemExit) as stop:
            gpu.main(["scratch", *_dirs(tmp_path / "out"), *argv])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.startswith("error: --stop-after ") and "past --limit" in err
    assert f"give --stop-after at most {5 - STOP_WAIT_S / 60 - gpu.END_MIN:g}, with --started $t0" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "out-back").exists()
    fake = {"scratch": [[sys.executable, "-c", "pass"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    monkeypatch.setattr("linformer.devices.cuda_device_name", lambda: "a CUDA device (stand-in)")
    monkeypatch.setattr(gpu.carry, "check_carry", lambda *_: None)
    monkeypatch.setattr(gpu, "scratch_first_unit", lambda *_: None)
    assert gpu.main(["scratch", *_dirs(tmp_path / "out"), "--stop-after", f"{latest:g}"]) == 0  # just fits


def test_the_gpu_readmes_stop_afters_leave_room_for_the_install_the_unpack_and_the_stop_wait():
    """docs/gpu/README.md's gpu.py commands end within the prepared command's 8 minutes: about a minute of install and
    unpack before gpu.py, then --stop-after, then the stop's wait; and gpu.py's own check accepts them."""
    import re

    from linformer.jobs import STOP_WAIT_S

    readme = (REPO / "docs" / "gpu" / "README.md").read_text()
    given = [float(m) for m in re.findall(r"gpu\.py [^`\n]*--stop-after ([\d.]+)", readme)]
    assert given and all(1 + minutes + STOP_WAIT_S / 60 <= 8 for minutes in given), given
    # the commands a lending runs count from the command's start, and scratch's first is one that can finish
    commands = re.findall(r"gpu\.py (?:table2|scratch) [^`]*--stop-after [^`]*", readme)
    assert commands and all("--started $t0" in " ".join(c.split()) for c in commands), commands
    assert "t0=$(date +%s) && python3 -m pip install" in readme
    assert all(minutes <= targets.largest_stop_after() for minutes in given)
    assert "gpu.py scratch --only full-scratch --stop-after 5" in readme
    assert "/tmp/node.txt" not in readme  # a per-user temporary file: helpers on one machine share /tmp


def _archived(archive: Path) -> dict[str, bytes]:
    """The files of a gpu.tgz by their path in it ({} where it is not there yet)."""
    import tarfile

    if not archive.is_file():
        return {}
    with tarfile.open(archive) as tar:
        return {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_run_finished_before_the_machine_kills_the_command_comes_back(tmp_path):
    """The machine's limit kills a command with SIGKILL (nothing after it runs): a run the target finished before it
    is in --out's archive already, with the record of the target that was running."""
    import os
    import signal
    import subprocess
    import time

    repo, back = tmp_path / "repo", tmp_path / "back"
    record = repo / "records" / "run-1" / "results.json"
    repo.mkdir()
    # the target's one command: a run finishes (its record written whole), then the next runs on and on
    child = (f"import json, os, time; from pathlib import Path; p = Path({str(record)!r}); "
             "p.parent.mkdir(parents=True); tmp = p.with_suffix('.tmp'); tmp.write_text(json.dumps({'acc': 0.9})); "
             "os.replace(tmp, p); time.sleep(120)")
    driver = ("import sys; from pathlib import Path; import linformer.devices as d; from linformer.gpu import targets as g\n"
              "d.cuda_device_name = lambda: 'stand-in'\n"
              f"g.REPO = Path({str(repo)!r}); g.DELIVER_EVERY_S = 0.2\n"
              f"g.target_commands = lambda out, *_: {{'scratch': [[sys.executable, '-c', {child!r}]]}}\n"
              "g.copy_back_patterns = lambda target: ('records/*',)\n"
              "g.carry.check_carry = lambda *_: None\n"
              f"sys.exit(g.main(['scratch', '--work', {str(tmp_path / 'work')!r}, '--out', {str(back)!r}]))\n")
    proc = subprocess.Popen(as_a_script(driver, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            cwd=REPO)
    try:
        deadline = time.monotonic() + 90
        while "repo/records/run-1/results.json" not in _archived(back / "gpu.tgz"):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)  # the machine's limit
        proc.wait()
    files = _archived(back / "gpu.tgz")
    assert json.loads(files["repo/records/run-1/results.json"]) == {"acc": 0.9}
    (running,) = json.loads(files["gpu_targets.json"])
    assert (running["target"], running["running"]) == ("scratch", True) and "pip_packages.txt" in files


def test_stop_after_counts_from_the_commands_start_and_leaves_the_end_room_in_the_limit(tmp_path, monkeypatch,
                                                                                      capsys):
    """--started: what ran before gpu.py (install, unpack) takes from --stop-after; the largest --stop-after accepted
    leaves the stop's wait and the records' archive inside --limit; a start already past it is refused."""
    import time

    gpu = _load(monkeypatch)
    fake = {"table2": [[sys.executable, "-c", TRAPS_SIGTERM]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    monkeypatch.setattr(gpu.carry, "check_carry", lambda *_: None)
    monkeypatch.setattr(gpu, "table2_first_unit", lambda *_: None)  # stand-in commands, not the plan's rows
    t0 = time.time() - 55  # the command started 55 s before gpu.py: a stop after 1 min comes about 5 s in
    assert gpu.main(["table2", *_dirs(tmp_path), "--stop-after", "1", "--started", f"{t0}"]) == 0
    (record,) = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert record["stopped"] and record["wall_s"] < 40
    assert gpu.largest_stop_after(10) + gpu.STOP_WAIT_S / 60 + gpu.END_MIN <= 10
    with pytest.raises(SystemExit):
        gpu.main(["table2", *_dirs(tmp_path), "--stop-after", "1", "--started", f"{time.time() - 61}"])
    assert "past --stop-after 1" in capsys.readouterr().err


def _refused_past_stop_after(gpu, capsys, target: str, work: Path, fits: str) -> str:
    """`target` with --stop-after 5 (its stand-in estimates past it) refused: exit 2, one error line, nothing written
    under `work`, before the device is looked for; with --only `fits` (a row that fits) or --past-estimates (the
    operator's word over the estimates) past that check, to the device's. Returns the error line."""
    with pytest.raises(SystemExit) as ended:
        gpu.main([target, *_dirs(work), "--stop-after", "5"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1 and not work.exists()
    for given in (["--only", fits], ["--past-estimates"]):
        with pytest.raises(SystemExit):
            gpu.main([target, *_dirs(work), "--stop-after", "5", *given])
        assert "no CUDA device" in capsys.readouterr().err  # past the check, to the device's
    return err


def test_scratch_refuses_a_stop_after_its_first_row_cannot_fit_and_names_the_row_that_would(tmp_path, monkeypatch,
                                                                                          capsys):
    """A pretrained row cut short runs again whole: a command whose first row cannot end by --stop-after would spend
    the machine on nothing, so it is one error line naming a row that fits, before the device is looked for."""
    gpu = _load(monkeypatch, gpu=None)
    monkeypatch.setattr(gpu.scratch, "first_units", lambda p, jobs: {"full": 9.0, "full-scratch": 5.0})
    monkeypatch.setattr(gpu.scratch, "slice_rows", lambda p, places, rows, only=None: (
        ["full"] if only is None else only, []))
    err = _refused_past_stop_after(gpu, capsys, "scratch", tmp_path / "w", fits="full-scratch")
    assert err.startswith("error: scratch's first row, full, needs about 9.0 min")
    assert "give --only full-scratch (about 5.0 min)" in err
    with pytest.raises(SystemExit) as ended:
        gpu.main(["table3", *_dirs(tmp_path / "w"), "--past-estimates"])
    assert ended.value.code == 2 and "--past-estimates is table2's and scratch's option" in capsys.readouterr().err
    assert gpu.main(["scratch", "--dry-run"]) == 0
    assert "fits one command (--stop-after at most 7.5 from its start): full-scratch (5.0 min)" in capsys.readouterr().out


def test_the_archive_size_warning_is_said_once_per_command(tmp_path, monkeypatch, capsys):
    """The archive is rewritten before and after each target (and as runs finish): an archive past what the device
    tool returns is warned of once in the command, and again in the next command."""
    gpu = _load(monkeypatch)
    monkeypatch.setattr(gpu, "RETURNED_FILE_MIB", 0)  # every archive is "too large"
    fake = {"tests": [[sys.executable, "-c", "pass"]], "table3": [[sys.executable, "-c", "pass"]]}
    monkeypatch.setattr(gpu, "target_commands", lambda out, *_: fake)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    for _ in range(2):
        assert gpu.main(["tests", "table3", *_dirs(tmp_path), "--overwrite"]) == 0
        assert capsys.readouterr().err.count("MiB a file the device tool returns") == 1


def test_table2_refuses_a_stop_after_a_transferred_row_cannot_fit_and_names_the_rows_that_would(tmp_path,
                                                                                               monkeypatch, capsys):
    """A transferred row's runs finetune one build of its transfer, which a fresh machine builds again: a command that
    cuts such a row short spends the machine on runs the report cannot pair, so it is one error line naming the rows
    that fit (the converted teacher, whose finished runs count anywhere), before the device is looked for."""
    gpu = _load(monkeypatch, gpu=None)
    monkeypatch.setattr(gpu.pretrained, "first_units", lambda p, jobs: {"full": 4.0, "k128-layerwise-local-tr": 10.0})
    err = _refused_past_stop_after(gpu, capsys, "table2", tmp_path / "w", fits="full")
    assert err.startswith("error: table2's row k128-layerwise-local-tr needs about 10.0 min")
    assert "give --only full (about 4.0 min)" in err
    assert err.endswith("(or --past-estimates, to start it all the same)\n")


def test_table2s_first_units_are_a_transferred_rows_whole_and_the_teachers_first_run():
    from linformer.experiments import pretrained

    profile = pretrained.PROFILES["gpu"]
    minutes = pretrained.first_units(profile, profile.jobs)
    transferred = [row for row in minutes if row.endswith("-tr")]
    assert transferred and all(minutes[row] >= 3 + 3.5 for row in transferred)  # a transfer and its runs
    assert minutes.get("full", 0) <= 0.5 + 4  # the teacher: its conversion and one run at most


def test_a_first_row_that_needs_exactly_the_stop_after_is_started(tmp_path, monkeypatch, capsys):
    """The estimates say the row's work that counts ends by --stop-after: the command goes on (to the device, here
    absent), for scratch's first row and for a table2 row alike."""
    gpu = _load(monkeypatch, gpu=None)
    monkeypatch.setattr(gpu.scratch, "first_units", lambda p, jobs: {"full": 5.0, "full-scratch": 9.0})
    monkeypatch.setattr(gpu.scratch, "slice_rows", lambda p, places, rows, only=None: (["full"], []))
    monkeypatch.setattr(gpu.pretrained, "first_units", lambda p, jobs: {"full": 5.0})
    for target in ("scratch", "table2"):
        with pytest.raises(SystemExit):
            gpu.main([target, *_dirs(tmp_path / "w"), "--stop-after", "5"])
        assert "no CUDA device" in capsys.readouterr().err  # past the estimates' check, to the device's


def test_a_job_log_growing_alone_does_not_rewrite_the_archive_and_a_finished_run_does(tmp_path, monkeypatch):
    """The runner's job logs grow all along: were they records, the archive (tens of MiB, gzipped) would be rewritten
    at every look (DELIVER_EVERY_S); they ride along with the target's log, at most every LOG_EVERY_S. A run's record
    written is archived at the next look."""
    import time

    repo, work = tmp_path / "repo", tmp_path / "work"
    (repo / "logs").mkdir(parents=True)
    work.mkdir()
    (work / "scratch.log").write_text("")
    monkeypatch.setattr(targets, "REPO", repo)
    monkeypatch.setattr(targets, "DELIVER_EVERY_S", 0.02)
    monkeypatch.setattr(targets, "LOG_EVERY_S", 3600)
    archived = []
    monkeypatch.setattr(targets, "archive", lambda folder, dest, warned=None: archived.append(dest))
    dest = tmp_path / "back" / "gpu.tgz"
    with targets.deliver_while(("logs/*.log", "records/*"), work, dest, work / "scratch.log"):
        for size in range(1, 11):
            (repo / "logs" / "job.log").write_text("x" * size)  # a job's log grows
            time.sleep(0.05)
        assert archived == []
        (repo / "records").mkdir()
        (repo / "records" / "results.json").write_text("{}")  # a run finished
        deadline = time.monotonic() + 20
        while not archived and time.monotonic() < deadline:
            time.sleep(0.02)
    assert archived and set(archived) == {dest}
    assert (work / "repo" / "records" / "results.json").is_file() and (work / "repo" / "logs" / "job.log").is_file()


def test_the_first_unit_is_compared_with_the_minutes_started_has_left_and_the_error_names_them(tmp_path,
                                                                                               monkeypatch, capsys):
    """--started: the install and the unpack before gpu.py took minutes of --stop-after; a first row whose work that
    counts needs more than what is left cannot end by the stop, so it is refused naming the minutes left, as a row
    that needs more than the whole --stop-after is; with enough left it goes on (to the device's check, here absent)."""
    import time

    gpu = _load(monkeypatch, gpu=None)
    monkeypatch.setattr(gpu.scratch, "first_units", lambda p, jobs: {"full": 9.0, "full-scratch": 3.0})
    monkeypatch.setattr(gpu.scratch, "slice_rows", lambda p, places, rows, only=None: (only or ["full"], []))
    monkeypatch.setattr(gpu.pretrained, "first_units", lambda p, jobs: {"full": 3.0})
    for target, only in (("scratch", "full-scratch"), ("table2", "full")):
        argv = [target, "--only", only, *_dirs(tmp_path / "w"), "--stop-after", "5"]
        with pytest.raises(SystemExit) as ended:  # 2.5 of the 5 minutes used before gpu.py: 2.5 left, under 3.0
            gpu.main([*argv, "--started", f"{time.time() - 150}"])
        err = capsys.readouterr().err
        assert ended.value.code == 2 and err.count("\n") == 1, err
        assert "needs about 3.0 min" in err and "past the 2.5 min left of --stop-after 5 (2.5 min used since --started)" \
            in err
        with pytest.raises(SystemExit):  # 1 minute used: 4 left, enough
            gpu.main([*argv, "--started", f"{time.time() - 60}"])
        assert "no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_scratchs_and_table2s_first_units_are_the_first_run_to_end_among_those_side_by_side():
    """The no-pretraining row's runs and the teacher's run `jobs` at a time: the first work that counts is the run that
    ends first (IMDB's, shorter), not the first in the plan's order (SST-2's)."""
    import dataclasses

    from linformer.experiments import pretrained, scratch

    p = dataclasses.replace(scratch.PROFILES["gpu"], records=REPO / "outputs" / "no-records-here")
    assert p.minutes["imdb"] < p.minutes["sst2"] and p.jobs > 1
    # the tokenizer, the corpus and the shape job, in turn (scratch.estimated_minutes: 0.5 where none is given)
    before = p.minutes.get("tokenizer", 0.5) + p.minutes.get("corpus", 0.5) + p.minutes["shape"]
    assert scratch.first_units(p, p.jobs)["full-scratch"] == pytest.approx(before + p.minutes["imdb"])
    assert scratch.first_units(p, 1)["full-scratch"] == pytest.approx(before + p.minutes["sst2"])  # one at a time
    q = pretrained.PROFILES["gpu"]
    fastest = min(q.tasks[task].minutes["full"] for task in q.tasks)
    assert pretrained.first_units(q, q.jobs).get("full", 0.5 + fastest) <= 0.5 + fastest


def test_table2s_and_scratchs_runners_start_no_job_past_the_stop_and_the_summary_names_those_left(tmp_path,
                                                                                                   monkeypatch, capsys):
    """With --stop-after, the table2 and scratch runners get its time (--end-by: a job whose estimate ends later is not
    started, as its checkpoint would not come back from a fresh machine); --past-estimates starts them all the same.
    The jobs a runner left (its NOT_STARTED line) are in the target's record and the command's summary."""
    import time

    from linformer.jobs import NOT_STARTED

    gpu = _load(monkeypatch)
    started = time.time() - 30
    commands = gpu.target_commands(Path("/out"), None, 1, None, started + 60 * 5)
    for name in ("scratch", "table2"):
        (command,) = commands[name]
        assert command[command.index("--end-by") + 1] == f"{started + 300:.0f}"
    assert all("--end-by" not in c for c in gpu.target_commands(Path("/out"))["scratch"][0])
    given = []

    def fake(out, jobs, rows, only, end_by=None):
        given.append(end_by)
        line = f"{NOT_STARTED} finetune ts-gpu-sst2-full-scratch-s0, finetune ts-gpu-sst2-full-scratch-s1"
        return {"scratch": [[sys.executable, "-c", f"import sys; print({line!r}, file=sys.stderr)"]]}

    monkeypatch.setattr(gpu, "target_commands", fake)
    monkeypatch.setattr(gpu, "copy_back_patterns", lambda target: ())
    monkeypatch.setattr(gpu.carry, "check_carry", lambda *_: None)
    monkeypatch.setattr(gpu, "scratch_first_unit", lambda *_: None)
    assert gpu.main(["scratch", *_dirs(tmp_path), "--stop-after", "5", "--started", f"{started}"]) == 0
    assert given == [pytest.approx(started + 300)]
    (record,) = json.loads((tmp_path / "gpu_targets.json").read_text())
    assert record["not_started"] == ["finetune ts-gpu-sst2-full-scratch-s0", "finetune ts-gpu-sst2-full-scratch-s1"]
    assert ("; not started, their estimates ending past --stop-after (a command with the time for them runs them): "
            "scratch: 2 jobs (finetune ts-gpu-sst2-full-scratch-s0, finetune ts-gpu-sst2-full-scratch-s1)") \
        in capsys.readouterr().out
    assert gpu.main(["scratch", *_dirs(tmp_path), "--stop-after", "5", "--past-estimates"]) == 0
    assert given[-1] is None
