"""The one CLI wrapper: `+`-added keys read by no code, and OS errors a user can fix, are one `error:` line."""

import contextlib
import errno
import io
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from linformer.configs import compose, refuse_added_keys
from linformer.errors import ConfigError
from linformer.rundir import INPUT_ENV, NUMERIC_ENV

REPO = Path(__file__).resolve().parents[1]


def _compose(name, overrides):
    return compose(name, overrides)


@pytest.mark.parametrize("config,override,hint", [
    ("transfer", "+transfer.trian=all", "did you mean transfer.train?"),
    ("pretrain", "+trainer.eval_evry=5", "did you mean trainer.eval_every?"),
    ("finetune", "+seeed=3", "did you mean seed?"),
    ("pretrain", "+trainer.foo=1", ""),
])
def test_an_added_key_is_refused_naming_the_closest(config, override, hint):
    cfg = _compose(config, [override])
    with pytest.raises(ConfigError, match="no code reads the key") as err:
        refuse_added_keys(cfg, [override], config)
    assert str(err.value).startswith(override + ":") and (hint in str(err.value)) and \
        ("did you mean" in str(err.value)) == bool(hint)


def test_an_added_key_the_config_reads_only_from_an_option_names_the_key_that_reads_it():
    """+data.vocab_size=300 with data=text was "no code reads the key", though configs/tokenizer.yaml reads it
    (${oc.select:data.vocab_size,50265}) where a data option sets it: the key to give is vocab_size."""
    override = "+data.vocab_size=300"
    with pytest.raises(ConfigError) as err:
        refuse_added_keys(_compose("tokenizer", ["data=text", override]), [override], "tokenizer")
    assert str(err.value) == (f"{override}: this command reads data.vocab_size only where its data option sets it, "
                              "as the default of vocab_size: give vocab_size=300")


def test_model_keys_are_left_to_their_owner_and_refused_where_none_reads_them():
    """finetune.py +model.projected_dim=8 (or +model.attention=full) ran unchanged while config.yaml recorded the
    change, and the recorded model block then refused the same command without it as another architecture."""
    refuse_added_keys(_compose("pretrain", ["+model.projected_dimm=8"]), ["+model.projected_dimm=8"], "pretrain")
    for override in ("+model.projected_dim=8", "+model.attention=full"):
        cfg = _compose("finetune", ["task=sst2", "model_path=m", override])
        with pytest.raises(ConfigError, match=r"nothing reads it: .*configs/finetune.yaml\) has no model settings"):
            refuse_added_keys(cfg, [override], "finetune")


@pytest.mark.parametrize("config, override, groups", [
    ("pretrain", "+task=sst2", "paths, model, data, optim, trainer, logger, experiment"),
    ("corpus", "+task=sst2", "paths, data"),
    ("finetune", "+accelerate=ddp_8gpu", "accelerate launch --config_file configs/accelerate/<file>.yaml"),
])
def test_an_added_config_group_the_command_does_not_select_is_refused(config, override, groups):
    """+accelerate=ddp_8gpu on pretrain.py ran one CPU process while config.yaml recorded 8 GPUs in fp16; +task on
    a pretraining run recorded a task it never read."""
    with pytest.raises(ConfigError, match="nothing reads it") as err:
        refuse_added_keys(_compose(config, [override]), [override], config)
    assert str(err.value).startswith(override + ":") and groups in str(err.value)


def test_the_cli_refuses_before_it_runs(tmp_path, monkeypatch, capsys):
    """transfer.py with the typo used to train only E/F silently and exit 0. The script runs in this process (the
    error line and exit status of a Hydra script as a shell sees them: the next test's process)."""
    from tests.conftest import run_script

    code = run_script("transfer", ["+transfer.trian=all", f"paths.output_dir={tmp_path}"], monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines() == [
        ("error: +transfer.trian=all: no code reads the key transfer.trian (did you mean transfer.train?). Every "
         "setting is in configs/; set a known one without the '+'.")]
    assert not list(tmp_path.glob("transfer/*"))  # nothing was started, no empty run directory left


@pytest.mark.parametrize("config,overrides,message", [
    ("finetune", [], ("model_path is not set: a pretraining run dir (uses its model/), a model dir, or a hub name "
                      "(online); give it on the command line, model_path=... (configs/finetune.yaml)")),
    ("distill", ["run_name=x"], "teacher_path is not set: a finetuned sequence classifier with full attention"),
    ("spectrum", [], "model_path is not set: a pretraining run dir (its model/), a model dir, minilm, or a hub name"),  # was read as the path '???'
    ("pretrain", ["trainer.lr=???"], ("trainer.lr is not set: peak, after warmup; every stage sets it; give it on "
                                      "the command line, trainer.lr=... (configs/trainer/base.yaml)")),
])
def test_a_value_left_unset_names_its_key_what_it_takes_and_its_file(config, overrides, message):
    """OmegaConf's ??? used to surface as a traceback where the run directory's name reads it."""
    from linformer.configs import refuse_missing_values

    cfg = compose(config, overrides, with_hydra=True)  # Hydra's own ??? (hydra.job.num ...) are not the user's
    with pytest.raises(ConfigError) as err:
        refuse_missing_values(cfg, config)
    assert message in str(err.value)
    refuse_missing_values(compose("pretrain", []), "pretrain")  # every value set: nothing to say


def test_a_sweep_sets_its_keys_and_the_rest_are_still_checked():
    from linformer.configs import refuse_sweep

    refuse_sweep("finetune", ["model_path=a,b", "seed=0,1"])
    with pytest.raises(ConfigError, match="^model_path is not set"):
        refuse_sweep("finetune", ["seed=0,1"])
    with pytest.raises(ConfigError, match="^trainer.lr is not set"):
        refuse_sweep("finetune", ["model_path=a,b", "trainer.lr=???"])


def test_the_script_without_its_model_is_one_error_line_and_leaves_nothing(tmp_path):
    """The one Hydra script run in a process of its own for its error line: what the shell sees (the other scripts'
    refusals run in-process, tests.conftest.run_script)."""
    result = subprocess.run([sys.executable, "scripts/finetune.py", f"paths.output_dir={tmp_path}"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
    assert result.stderr.startswith("error: model_path is not set")
    assert not list(tmp_path.iterdir())


def test_a_path_without_permission_is_one_error_line(capsys):
    """A read-only output directory (root, as in CI, bypasses permissions, so the error is raised as the OS would)."""
    from linformer.cli import cli_errors

    with pytest.raises(SystemExit) as stop, cli_errors():
        raise PermissionError(13, "Permission denied", "/data/readonly/run/config.yaml")
    assert stop.value.code == 2
    assert capsys.readouterr().err == ("error: permission denied: /data/readonly/run/config.yaml: choose an output "
                                       "path you can write, or fix its permissions.\n")


@pytest.mark.parametrize("code, expected", [
    (errno.EROFS, "error: /mnt/ro/out/config.json is on a read-only file system: choose an output path you can write."),
    (errno.ENOTDIR, "error: /tmp/notes.txt/out: part of this path is a file, not a folder: choose another path."),
    (errno.EEXIST, "error: /tmp/out already exists and is in the way: move it, or choose another path."),
    (errno.ENAMETOOLONG, ("error: /tmp/xxxx: a name in this path is longer than the file system allows (255 "
                          "bytes): choose a shorter one (run_name, or what the default name is made of).")),
])
def test_os_errors_on_the_user_s_paths_are_one_line_naming_the_path(capsys, code, expected):
    from linformer.cli import cli_errors

    path = expected.split()[1].rstrip(":")
    with pytest.raises(SystemExit) as stop, cli_errors():
        raise OSError(code, os.strerror(code), path)
    assert stop.value.code == 2 and capsys.readouterr().err == expected + "\n"


def test_a_ctrl_c_no_stop_handles_is_one_stopped_line_and_the_interrupt_s_exit_status(capsys):
    """Ctrl-C during a start-up (loading, tokenizing) or a second one: no traceback, the status a shell expects. Only
    a command that goes on where it stopped (a training run) says running it again goes on; a report starts over."""
    from linformer.cli import cli_errors

    for resumes, again in ((True, "Run the same command again to go on."),
                           (False, "Run the same command again: it starts over.")):
        with pytest.raises(SystemExit) as stop, cli_errors(resumes):
            raise KeyboardInterrupt
        assert stop.value.code == 130
        assert capsys.readouterr().err == f"stopped: interrupted by SIGINT (Ctrl-C). {again}\n"


def test_a_sigterm_to_a_command_is_its_stopped_line_and_128_plus_the_signal(capsys):
    """SIGTERM (a CI job cancelled, kill) ended a report script silently, as killed by it: it is the same
    `stopped:` line as Ctrl-C, naming it, and 143; SIGHUP is taken as it. The handler is the block's only."""
    import signal

    from linformer.cli import cli_errors

    got = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))  # the test's process survives
    try:
        with pytest.raises(SystemExit) as stop, cli_errors():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # Python runs the handler between bytecodes, at once
                pass
        assert (stop.value.code, got) == (143, [])
        assert capsys.readouterr().err == "stopped: interrupted by SIGTERM. Run the same command again: it starts over.\n"
        os.kill(os.getpid(), signal.SIGTERM)  # the handler before the block is back after it
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


class _Store(dict):
    """torchrun's key-value store as ``cli`` uses it (``_launch_store``)."""

    def check(self, keys):
        return all(key in self for key in keys)

    def get(self, key):
        return self[key].encode()

    def set(self, key, value):
        self[key] = value


@pytest.mark.parametrize("stop", ["interrupted", "preempted"])
def test_the_launcher_s_sigterm_after_another_process_failed_stops_this_one_without_a_line(capsys, monkeypatch, stop):
    """Rank 0 failed (its `error:` line given to the others) while rank 1 still started: torchrun's SIGTERM to rank 1
    printed `[rank 1] stopped: interrupted by SIGTERM. Run the same command again to go on.`, which running it again
    would not do. A stop by the launcher's SIGTERM after another process failed is that process's to say."""
    import signal

    from linformer import cli
    from linformer.errors import Preempted
    from linformer.signals import Interrupted

    said = "error: imports: no module named 'nowhere'"
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setattr(cli, "_launch_store", lambda: _Store(cause=said, rank0=said))
    for name, fresh in (("_causes", []), ("_told", []), ("_said", [])):
        monkeypatch.setattr(cli, name, fresh, raising=False)
    monkeypatch.setattr(cli, "_quieted", [1])  # as quieted already: rank 1's log prefix would outlive this test
    with pytest.raises(SystemExit) as ended, cli.cli_errors(resumes=True, work=False):
        raise Interrupted(signal.SIGTERM) if stop == "interrupted" else Preempted("stopped by {signal}", signal.SIGTERM)
    assert ended.value.code == 143
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cli, "_launch_store", lambda: _Store(cause="stopped: interrupted by SIGTERM.", rank0=said))
    monkeypatch.setattr(cli, "_causes", [])
    assert not cli.stopped_for_a_peer(Interrupted(signal.SIGTERM))  # a stop of every process is each one's own


def test_an_error_s_notes_are_lines_after_its_last_line(capsys):
    """What else failed while an error or stop unwound (atomic.add_note: a full disk recording a partial output) is
    said after the error's own line, which comes first; a sweep's summary keeps the line alone."""
    import signal

    from linformer.cli import cli_errors
    from linformer.errors import DataError, Preempted
    from linformer.files.atomic import add_note

    for err, line in ((DataError("the second run broke"), "error: the second run broke"),
                      (Preempted("stopped by SIGTERM", signal.SIGTERM), "stopped: stopped by SIGTERM")):
        add_note(err, "also: the partial output was not kept")
        with pytest.raises(SystemExit) as stop, cli_errors():
            raise err
        assert capsys.readouterr().err == f"{line}\nalso: the partial output was not kept\n"
        assert stop.value.line == line


def test_other_os_errors_keep_their_traceback():
    from linformer.cli import cli_errors

    with pytest.raises(OSError), cli_errors():
        raise OSError(errno.EIO, "Input/output error", "/dev/sdz")


def test_compose_turns_hydra_s_refusal_into_one_config_error_line():
    with pytest.raises(ConfigError) as err:
        compose("pretrain", ["trainer.max_stepz=3"])
    assert "\n" not in str(err.value) and "trainer.max_stepz" in str(err.value) and "configs/pretrain.yaml" in str(err.value)


def test_compose_with_hydra_gives_the_run_directory_the_script_writes():
    cfg = compose("finetune", ["task=sst2", "model_path=x", "run_name=demo-sst2"], with_hydra=True)
    assert cfg.hydra.run.dir == f"{REPO / cfg.paths.output_dir}/finetune/demo-sst2"


@pytest.mark.parametrize("config,overrides,message", [
    ("pretrain", ["trainer.max_step=10"], "trainer.max_step: no such key (did you mean trainer.max_steps?)"),
    ("finetune", ["optim.weight_decy=0.1"], "optim.weight_decy: no such key (did you mean optim.weight_decay?)"),
    ("distill", ["teacher_path=x", "distill.temprature=2"],
     "distill.temprature: no such key (did you mean distill.temperature?)"),
    ("pretrain", ["model.hiden_size=3"], "model.hiden_size: no such key (did you mean model.hidden_size?)"),
    # a retired key whose successor counts another unit: not "did you mean trainer.eval_blocks?", which scored an
    # eighth as much at batch 8
    ("pretrain", ["trainer.eval_batches=2"], ("trainer.eval_batches is no setting now: an evaluation scores "
                                              "trainer.eval_blocks blocks, not batches (blocks = batches x "
                                              "trainer.eval_batch_size")),
    ("finetune", ["task=sst3"], "task=sst3: no such option (did you mean sst2?); the options: imdb, qnli, qqp, sst2."),
    ("pretrain", ["logger=wandbb"], "logger=wandbb: no such option (did you mean wandb?)"),
    ("pretrain", ["model=tinyy"], "model=tinyy: no such option (did you mean tiny?); the options: base, mini, small, tiny."),
    # data=text has no vocab_size; the tokenizer's own key sets it (the mirror groups give it in the group)
    ("tokenizer", ["data=text", "data.vocab_size=2000"],
     "data.vocab_size: no such key (this command takes vocab_size as vocab_size=...); every setting is in configs/."),
])
def test_a_misspelt_key_or_option_is_one_line_with_the_closest(config, overrides, message):
    """Hydra's own message spans several lines and suggests '+key', which is then refused; ours names the key."""
    with pytest.raises(ConfigError) as err:
        compose(config, overrides)
    text = str(err.value)
    assert message in text and "\n" not in text and "+" not in text.split("(configs/")[0]


def test_the_script_says_a_misspelt_key_in_one_line_before_hydra_starts(tmp_path, monkeypatch, capsys):
    """In-process (the line as the shell sees it, of the same script:
    test_the_script_without_its_model_is_one_error_line_and_leaves_nothing)."""
    from tests.conftest import as_command, load_script

    monkeypatch.chdir(REPO)
    as_command(monkeypatch, ["scripts/finetune.py", "task=sst2", "model_path=x", "trainer.max_step=10",
                             f"paths.output_dir={tmp_path}"])
    with pytest.raises(SystemExit) as stop:
        load_script("finetune").main()
    expected = ("error: trainer.max_step: no such key (did you mean trainer.max_steps?); every setting is in "
                "configs/. (configs/finetune.yaml)")
    assert stop.value.code == 2 and capsys.readouterr().err.strip().splitlines() == [expected]
    assert not list(tmp_path.iterdir())


def test_a_refused_sweep_leaves_nothing_and_a_sweep_refused_after_a_job_keeps_that_job(tmp_path, monkeypatch, capsys):
    """--multirun: Hydra writes the sweep's multirun.yaml and each job's folder before the job starts. In-process
    (the script's error line as the shell sees it: test_the_script_without_its_model_is_one_error_line_...)."""
    from linformer.hydra_start import _remove_hydra_leftovers
    from tests.conftest import as_command, load_script

    monkeypatch.chdir(REPO)
    as_command(monkeypatch, ["scripts/finetune.py", "-m", "model_path=/nonexist,/nonexist2",
                             f"paths.output_dir={tmp_path / 'out'}"])
    with pytest.raises(SystemExit) as stop:
        load_script("finetune").main()
    assert stop.value.code == 2 and "error: model_path='/nonexist'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # the first job was refused: the sweep leaves nothing behind
    sweep = tmp_path / "outputs" / "finetune" / "multirun"
    (sweep / "job-1").mkdir(parents=True)
    (sweep / "job-1" / "results.json").write_text("{}")
    (sweep / "multirun.yaml").write_text("x")
    (sweep / "job-2").mkdir()
    _remove_hydra_leftovers(sweep / "job-2", "job", 0.0, before=tmp_path, sweep=sweep)  # stops at the sweep's folder
    assert sorted(p.name for p in sweep.iterdir()) == ["job-1", "multirun.yaml"]  # job 1 and its record stay


@pytest.mark.parametrize("earlier", [None, b"an earlier sweep's"])
def test_a_sweep_that_failed_whole_leaves_the_record_another_sweep_wrote_meanwhile(tmp_path, monkeypatch, earlier):
    """Two sweeps into one sweep folder at once: one whose jobs all failed took "its" multirun.yaml back (removed
    it, or put the earlier one back) though the other sweep, still running, had written it since: the running
    sweep's record was lost. Only the record as the failed sweep's Hydra wrote it is taken back."""
    from linformer import hydra_start

    monkeypatch.setattr(hydra_start, "_sweep_table", lambda *args, **kwargs: None)
    sweep = tmp_path / "pretrain" / "multirun"
    sweep.mkdir(parents=True)
    record = sweep / "multirun.yaml"
    failed = [hydra_start.SweepJob(0, sweep / "job-0", "failed", "error: no", 2)]
    ours, theirs = ["seed=7,8", "trainer.lr=-1"], ["seed=1"]
    for written in (theirs, ours):  # the other sweep's record written meanwhile, or still this sweep's own
        record.write_text(yaml.safe_dump({"hydra": {"overrides": {"hydra": ["hydra.mode=MULTIRUN"],
                                                                  "task": written}}}))
        kept = record.read_bytes() if written is theirs else earlier
        with pytest.raises(SystemExit):
            hydra_start._sweep_end(failed, time.time() - 5, (record, earlier), tmp_path,
                                   ["hydra.sweep.dir=x", *ours])
        assert (record.read_bytes() if record.exists() else None) == kept


def _hydra_leftovers(run: Path, started: float) -> list[Path]:
    files = [run / ".hydra" / name for name in ("config.yaml", "hydra.yaml", "overrides.yaml")] + [run / "job.log"]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
        os.utime(path, (started + 1, started + 1))
    return files


def test_a_refused_start_removes_what_hydra_made_for_it_and_the_folders_it_created(tmp_path, monkeypatch):
    from linformer.hydra_start import _remove_hydra_leftovers

    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()
    run = tmp_path / "outputs" / "benchmark" / "2026-01-01_00-00-00"
    _hydra_leftovers(run, started=100.0)
    _remove_hydra_leftovers(run, "job", 100.0, before=tmp_path / "outputs")
    assert list(tmp_path.rglob("*")) == [tmp_path / "outputs"]  # the folder that was there before is kept


@pytest.mark.parametrize("case", ["run files", "older files", "folder was there", "working directory"])
def test_a_refused_start_never_removes_what_it_did_not_make(tmp_path, monkeypatch, case):
    """Convert's run directory is the working directory: a refused convert run from an empty folder used to
    remove that folder (the shell was left in a deleted directory)."""
    from linformer.hydra_start import _remove_hydra_leftovers

    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run if case == "working directory" else tmp_path)
    started = 100.0 if case != "older files" else 200.0
    files = _hydra_leftovers(run, started=100.0)
    if case == "run files":
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "step-10.pt").write_text("weights")
    before = run if case in ("folder was there", "working directory") else tmp_path
    _remove_hydra_leftovers(run, "job", started, before=before)
    if case == "folder was there":  # the files this start wrote go; the user's folder stays
        assert run.is_dir() and not any(run.rglob("*"))
    else:
        assert all(f.exists() for f in files)


def test_a_refused_benchmark_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    """Every refused benchmark call used to leave outputs/benchmark/<timestamp>/ with .hydra/ and a log. In-process
    (the line as the shell sees it, of the same script:
    test_a_refused_benchmark_start_leaves_the_run_directory_s_hydra_record_as_it_was)."""
    from tests.conftest import as_command, load_script

    monkeypatch.chdir(tmp_path)
    as_command(monkeypatch, [str(REPO / "scripts/benchmark.py"), "inference.ns=[abc]"])
    with pytest.raises(SystemExit) as stop:
        load_script("benchmark").main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.strip().splitlines() == ["error: inference.ns=['abc'] must be a list, each entry a whole number."], err
    assert not list(tmp_path.iterdir())


def test_one_did_you_mean_rule_compares_a_key_with_its_siblings():
    from linformer.errors import did_you_mean

    known = ["trainer.lr", "trainer.lr_end", "trainer.epochs", "transfer.train", "model.projected_dim"]
    assert did_you_mean("transfer.trian", known) == " (did you mean transfer.train?)"
    assert did_you_mean("trainer.foo", known) == ""  # the shared "trainer." does not make trainer.lr close
    assert did_you_mean("trainr.epochs", known) == " (did you mean trainer.epochs?)"  # a misspelt group
    assert did_you_mean("sharng", ["sharing", "projection"], "model.") == " (did you mean model.sharing?)"
    assert did_you_mean("model.max_seq_len", ["model.max_seq_len"]) == ""  # never the name itself


@pytest.mark.parametrize("typed, hint", [
    ("trainer.Lr=1e-3", "(did you mean trainer.lr?)"),  # case does not count
    ("model.k=4", "(did you mean model.projected_dim? the paper calls it k)"),
    ("model.n=64", "(did you mean model.max_seq_len? the paper calls it n)"),
    ("trainer.learning_rate=1", "(did you mean trainer.lr? Hugging Face calls it learning_rate)"),
    ("trainer.per_device_train_batch_size=8",
     "(did you mean trainer.batch_size? Hugging Face calls it per_device_train_batch_size)"),
    ("trainer.gradient_accumulation_steps=2",
     "(did you mean trainer.grad_accum? Hugging Face calls it gradient_accumulation_steps)"),
])
def test_a_key_in_another_case_or_by_the_papers_or_hugging_faces_name_is_offered_ours(typed, hint):
    from linformer.configs import compose

    with pytest.raises(ConfigError) as err:
        compose("pretrain", [typed])
    assert str(err.value).startswith(f"{typed.split('=')[0]}: no such key {hint}; every setting is in configs/.")


def test_a_key_of_a_removed_group_says_the_group_is_removed():
    from linformer.configs import _one_line

    class HydraError(Exception):
        pass

    err = HydraError("Could not override 'model.max_seq_len'.\nTo append to your config use +model.max_seq_len=32")
    assert _one_line(err, "pretrain", ["~model", "model.max_seq_len=32"]) == (
        "model.max_seq_len: ~model removes the model group this key belongs to: keep the group (model=...) to set "
        "its keys.")


def test_a_misspelt_flag_is_one_error_line_first_with_the_closest_flag(capsys):
    """The argparse scripts (through linformer.cli.ArgumentParser): the error line comes first, then the usage."""
    import pytest

    from tests.conftest import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("reproduce_scratch").main(["--profle", "gpu"])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "error: unrecognized arguments: --profle gpu (did you mean --profile?)"
    assert lines[1].startswith("usage: ")
    with pytest.raises(SystemExit):  # a subcommand's flag
        load_script("gpu_carry").main(["pack", "scratch", "--dset", "x"])
    assert capsys.readouterr().err.splitlines()[0] == "error: unrecognized arguments: --dset x (did you mean --dest?)"


def test_a_run_directory_under_a_regular_file_is_one_error_line_not_hydras_traceback(tmp_path, monkeypatch, capsys):
    """In-process (the script's error line as the shell sees it: test_run_record's
    test_invalid_number_from_the_cli_is_one_error_line)."""
    from tests.conftest import as_command, load_script

    afile = tmp_path / "afile"
    afile.write_text("mine")
    monkeypatch.chdir(REPO)
    as_command(monkeypatch, ["scripts/pretrain.py", f"paths.output_dir={afile}"])
    with pytest.raises(SystemExit) as stop:
        load_script("pretrain").main()
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        (f"error: the run directory {afile}/pretrain/tiny-linformer-n128-k32-headwise-s0 cannot be made: {afile} is a "
        "file, not a folder. Choose another paths.output_dir or run_name.")]
    assert afile.read_text() == "mine"


def test_a_printed_command_keeps_each_word_one_word_in_the_shell(monkeypatch):
    """The one quoting of every command the scripts print to paste (next:, the resume hint): a path with a space or
    a quote comes back from the shell as the word it was."""
    import shlex

    from linformer.shell import shell_command
    from linformer.train.stopping import command_line

    words = ["python", "scripts/finetune.py", "task=sst2", "model_path=/tmp/my runs/it's here"]
    assert shlex.split(shell_command(*words)) == words
    assert shell_command("python", Path("/a b")) == "python '/a b'"
    for name in (*NUMERIC_ENV, *INPUT_ENV):  # the environment's own, which the command repeats
        monkeypatch.delenv(name, raising=False)
    from tests.conftest import as_command
    as_command(monkeypatch, ["scripts/pretrain.py", "run_name=a b"])
    assert shlex.split(command_line())[1:] == ["scripts/pretrain.py", "run_name=a b"]


def test_the_command_to_resume_repeats_the_variables_that_change_the_numbers(monkeypatch):
    """Bitwise results hold on one thread: a resume on the default threads would go on computing otherwise."""
    import shlex

    from linformer.train.stopping import command_line

    for name in (*NUMERIC_ENV, *INPUT_ENV):  # the environment's own, which the command repeats
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    from tests.conftest import as_command
    as_command(monkeypatch, ["scripts/pretrain.py", "seed=1"])
    assert shlex.split(command_line())[0] == "OMP_NUM_THREADS=1"
    assert shlex.split(command_line())[2:] == ["scripts/pretrain.py", "seed=1"]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert shlex.split(command_line())[:3] == ["OMP_NUM_THREADS=1", "torchrun", "--nproc_per_node=2"]


def test_the_command_to_resume_repeats_the_variables_that_chose_its_configs_and_data(monkeypatch):
    """Over a wheel the configs come from $LINFORMER_CONFIG_DIR: the recorded command without it stopped, pasted
    into a fresh shell, on the configs error. Each variable is an assignment to the shell (its value quoted, not the
    whole word, which the shell would take for the command)."""
    import shlex
    import subprocess

    from linformer.train.stopping import command_line
    from tests.conftest import as_command

    for name in (*NUMERIC_ENV, *INPUT_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LINFORMER_CONFIG_DIR", "/my clone/configs")
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", "/data")
    as_command(monkeypatch, ["scripts/pretrain.py", "seed=1"])
    command = command_line()
    assert shlex.split(command)[:2] == ["LINFORMER_CONFIG_DIR=/my clone/configs", "LINFORMER_DATA_MIRROR=/data"]
    assert shlex.split(command)[3:] == ["scripts/pretrain.py", "seed=1"]
    shown = command.replace(shlex.split(command)[2], "printenv LINFORMER_CONFIG_DIR #", 1)
    assert subprocess.run(["sh", "-c", shown], capture_output=True, text=True, env={"PATH": os.environ["PATH"]}
                          ).stdout == "/my clone/configs\n"


def test_a_run_not_started_by_a_script_is_resumed_by_calling_its_function(monkeypatch):
    """In a notebook sys.argv is the kernel launcher's: "the same command" would name it, which resumes nothing."""
    from linformer.train.stopping import command_line, how_to_resume

    for argv in (["/usr/lib/python3/site-packages/ipykernel_launcher.py", "-f", "/root/kernel-1.json"], [""],
                 ["my_experiments.py"]):
        monkeypatch.setattr(sys, "argv", argv)
        assert command_line() is None  # run.json records no command
        assert how_to_resume("finetune", Path("/runs/a")) == (
            "Resume by calling finetune(spec, run_dir) again (linformer.train.finetune) with the same spec and "
            "run_dir='/runs/a'")
    from tests.conftest import as_command
    as_command(monkeypatch, ["/clone/scripts/finetune.py", "task=sst2"])
    assert how_to_resume("finetune", "/runs/a").startswith("Resume with the same command (")
    assert how_to_resume("finetune", "/runs/a").endswith(" /clone/scripts/finetune.py task=sst2)")


def _expanded_in_bash(text: str) -> str:
    """The characters of a command line that bash reads outside single quotes (bare or double-quoted): where an
    interactive bash expands `!` (its history)."""
    seen, quote = [], None
    for c in text:
        if quote == "'":
            quote = None if c == "'" else quote
        elif c in "'\"" and quote is None:
            quote = c
        elif c == '"' and quote == '"':
            quote = None
        else:
            seen.append(c)
    return "".join(seen)


def test_a_printed_word_with_an_exclamation_mark_keeps_it_in_single_quotes():
    """An interactive bash expands `!` outside single quotes, double quotes included (`!v2` is the last command that
    started with v2, else "event not found"): a word the scripts print to paste (a quoted override's) that holds a
    `!` is single-quoted, where nothing expands, and comes back from the shell as the word it was."""
    import shlex

    from linformer.shell import hydra_override, shell_command

    word = hydra_override("run_name", "best run!v2")
    printed = shell_command("python", "scripts/finetune.py", word)
    assert shlex.split(printed)[2] == word and "!" not in _expanded_in_bash(printed)


def test_no_printed_command_puts_a_value_in_unquoted():
    """A command hint is built by shell_command, never by an f-string "python scripts/... {path}": the f-strings of the
    package and its scripts that start a command to paste may hold no value."""
    import ast

    found = []
    for path in sorted(p for folder in ("linformer", "scripts") for p in (REPO / folder).rglob("*.py")):
        name = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.JoinedStr):
                continue
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            for start in (i for i in range(len(text)) if text.startswith(("python scripts/", "pip install"), i)):
                command = text[start:].split(")")[0].split(";")[0]
                if "{}" in command:
                    found.append(f"{name}:{node.lineno}: {command}")
    assert found == []


def test_default_run_names_tell_apart_the_models_of_two_runs_saved_under_the_same_folder_name():
    """Every export is model-step-NNNNNNNN (every finetuning's best/): named by its folder alone, two runs' exports
    gave one default run name, and the second was offered to continue the first."""
    from linformer.configs import compose

    names = {compose("finetune", ["task=sst2", f"model_path=outputs/pretrain/{run}/model-step-00000100"]).run_name
             for run in ("a", "b")}
    assert names == {"sst2-a-model-step-00000100-lr2e-05-s0", "sst2-b-model-step-00000100-lr2e-05-s0"}
    assert compose("finetune", ["task=sst2", "model_path=outputs/pretrain/demo"]).run_name == "sst2-demo-lr2e-05-s0"
    assert compose("finetune", ["task=sst2", "model_path=minilm"]).run_name == "sst2-minilm-lr2e-05-s0"


@pytest.mark.parametrize("override, message", [
    ("trainer.lr=${trainer.nope}", "trainer.lr=${trainer.nope} does not resolve: Interpolation key 'trainer.nope'"),
    ("trainer.lr=${oc.env:LINFORMER_TEST_UNSET}", "Environment variable 'LINFORMER_TEST_UNSET' not found"),
    ("seed=${oc.env:LINFORMER_TEST_SEED}", ("seed=${oc.env:LINFORMER_TEST_SEED} gives the text '3' where the config "
                                           "holds a number")),
])
def test_an_interpolation_on_the_command_line_that_cannot_serve_is_one_line(override, message, monkeypatch):
    """An unresolvable ${...} was a traceback (from the check of added keys, which resolved the override strings);
    an environment variable read as the text '3' was refused as "seed='3' must be a whole number"."""
    from linformer.configs import refuse_bad_interpolations

    monkeypatch.setenv("LINFORMER_TEST_SEED", "3")
    monkeypatch.delenv("LINFORMER_TEST_UNSET", raising=False)
    cfg = _compose("pretrain", [override])
    with pytest.raises(ConfigError) as err:
        refuse_bad_interpolations(cfg, "pretrain", [override])
    assert message in str(err.value) and "\n" not in str(err.value)
    quoted = 'seed="${oc.decode:${oc.env:LINFORMER_TEST_SEED}}"'  # what the message advises
    assert override.startswith("trainer") or quoted in str(err.value)
    refuse_bad_interpolations(_compose("pretrain", [quoted]), "pretrain", [quoted])
    assert _compose("pretrain", [quoted]).seed == 3


@pytest.mark.parametrize("value", ["outputs/pretrain/x", "/tmp/my runs/x", "/tmp/pretrain's ü", "/tmp/a,b=c [x]",
                                   "C:\\dir\\", "a\\'b", "/a$b c", 'x"y z',
                                   "a,b", "x=y"])  # a bare comma: Hydra's list, a sweep under --multirun
def test_an_override_printed_for_pasting_reads_back_as_the_same_value(value):
    """The next: line for a run under 'my repo ü' pasted into the shell was refused by Hydra's grammar: the shell
    kept the path one word, but Hydra needs its own quotes around a space, a quote or a non-ASCII letter."""
    import shlex

    from linformer.shell import hydra_override, shell_command

    line = shell_command("python", "scripts/finetune.py", "task=sst2", hydra_override("model_path", value))
    words = shlex.split(line)
    assert compose("finetune", words[2:]).model_path == value


def test_a_plan_under_a_folder_with_a_space_composes_its_paths_whole(tmp_path):
    from linformer.experiments import Places

    under = tmp_path / "my dir ü"
    cfg = compose("pretrain", list(Places.of(under).overrides))
    assert cfg.paths.output_dir == str(under / "outputs") and cfg.paths.data_dir == str(under / "data")


def test_an_option_of_one_s_own_without_the_shared_settings_is_told_to_list_them(tmp_path, monkeypatch):
    """A model yaml written from scratch, without `_settings` in its defaults, lacks the settings every model option
    shares: setting one names the file and the default to list, not "no such key"."""
    import shutil

    from linformer import configs, hydra_start

    shutil.copytree(configs.config_dir(), tmp_path / "configs")
    (tmp_path / "configs" / "model" / "bare.yaml").write_text("name: bare\nhidden_size: 32\n")
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path / "configs"))
    with pytest.raises(ConfigError, match=r"^model.local_window: configs/model/bare.yaml lacks it: list _settings in "
                                          r"its defaults after _self_ \(configs/model/_settings.yaml holds"):
        compose("pretrain", ["model=bare", "model.local_window=8"])
    with pytest.raises(ConfigError, match=r"^model.local_windw: no such key \(did you mean model.local_window"):
        compose("pretrain", ["model.local_windw=8"])  # a misspelt key of a listing option stays a misspelling
    cfg = compose("pretrain", ["model=bare"], with_hydra=True)
    with pytest.raises(ConfigError, match=r"needs model.attention, which .*model/bare.yaml does not give: add "):
        hydra_start._run_dir_before(cfg)


@pytest.mark.parametrize("config, extra", [("benchmark", ["out_dir=elsewhere"]), ("finetune", [])])
def test_a_single_run_whose_run_directory_is_the_sweep_folder_is_refused_before_hydra_writes_there(config, extra):
    """run_name=multirun was refused only in the job (files.names.folder_name), after Hydra had written its .hydra/
    and log into the run directory: the stage's sweep folder, where a sweep's files were, so a refused start left
    them there. It is refused before Hydra runs, naming the key."""
    from linformer import hydra_start

    overrides = [*extra, "run_name=multirun"]
    cfg = compose(config, overrides, with_hydra=True)
    with pytest.raises(ConfigError, match=r"^run_name='multirun' makes the run directory .*/multirun the sweep "
                                          r"folder \(hydra.sweep.dir, where --multirun puts its jobs\)"):
        hydra_start._run_dir_before(cfg, overrides=overrides)
    assert hydra_start._run_dir_before(cfg, "sweep", overrides) is not None  # a sweep's own folder is its own


def test_a_group_option_of_one_s_own_without_a_key_the_run_name_needs_is_named(tmp_path, monkeypatch):
    """configs/model/<own>.yaml without `name:` was told that the command line removes model.name; the file is
    named now. A key the command line removes keeps the advice to select the group again."""
    from linformer import configs, hydra_start

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "bare.yaml").write_text("hidden_size: 32\n")
    (tmp_path / "model" / "tiny.yaml").write_text((configs.config_dir() / "model" / "tiny.yaml").read_text())
    cfg = compose("pretrain", ["~model.name"], with_hydra=True)  # the command line removes it: tiny.yaml has it
    with pytest.raises(ConfigError, match="which this command line removes or leaves unset"):
        hydra_start._run_dir_before(cfg)
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path))  # an option whose file gives no name
    cfg.hydra.runtime.choices.model = "bare"
    with pytest.raises(ConfigError, match=r"needs model.name, which .*model/bare.yaml does not give: add `name:`"):
        hydra_start._run_dir_before(cfg)


def test_a_package_installed_without_its_clone_says_where_the_configs_are_and_how_to_get_them(tmp_path, monkeypatch,
                                                                                             capsys):
    """A wheel carries the package alone: compose and every script failed with Hydra's "Primary config directory not
    found .../site-packages/configs", saying neither why nor what to do."""
    from linformer import configs, hydra_start

    monkeypatch.delenv(configs.CONFIG_DIR_VARIABLE, raising=False)
    monkeypatch.setattr(configs, "REPOSITORY_CONFIGS", tmp_path / "site-packages" / "configs")
    monkeypatch.setattr(configs, "scripts_dir", lambda: tmp_path / "scripts")  # no clone's configs beside them
    with pytest.raises(ConfigError, match=r"^no configs folder at \S*site-packages/configs: .*pip install -e <clone>\)"
                                          r", or set LINFORMER_CONFIG_DIR to a clone's configs/ folder"):
        compose("finetune", ["task=sst2", "model_path=m"])
    monkeypatch.setattr(sys, "argv", ["finetune.py", "task=sst2", "model_path=m"])
    with pytest.raises(SystemExit) as stop:  # a script: the same line, before Hydra reads anything
        hydra_start.hydra_main("finetune")(lambda cfg: None)()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: no configs folder at ") and err.count("\n") == 1
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"^LINFORMER_CONFIG_DIR=\S*nowhere names no folder: point it at the "
                                          "configs/ folder of a linformer clone"):
        compose("finetune", ["task=sst2", "model_path=m"])


def test_linformer_config_dir_is_read_by_compose_and_the_scripts(tmp_path, monkeypatch, capsys):
    """$LINFORMER_CONFIG_DIR (a clone's configs/, or one's own copy) is the configs folder of compose, of a script's
    Hydra and of the paths every default starts from, for a package installed without its clone."""
    import shutil

    from linformer import configs, hydra_start
    from linformer.data import io

    shutil.copytree(REPO / "configs", tmp_path / "configs")
    finetune = tmp_path / "configs" / "finetune.yaml"
    finetune.write_text(finetune.read_text().replace("\nseed: 0", "\nseed: 41", 1))
    monkeypatch.setattr(configs, "REPOSITORY_CONFIGS", tmp_path / "site-packages" / "configs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, "configs")  # relative: from the working directory
    assert compose("finetune", ["task=sst2", "model_path=m"]).seed == 41
    assert io.path_root("output_dir") == "outputs"
    monkeypatch.setattr(sys, "argv", ["finetune.py", "task=sst2", "model_path=m", "--cfg", "job"])
    hydra_start.hydra_main("finetune")(lambda cfg: None)()  # --cfg job: Hydra prints the config and runs nothing
    assert "\nseed: 41\n" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--config-path", "-cp"])
def test_an_absolute_config_path_is_the_configs_folder_of_a_package_without_its_clone(flag, tmp_path, monkeypatch,
                                                                                       capsys):
    """Over a wheel without LINFORMER_CONFIG_DIR, a command naming its configs folder (--config-path /abs/configs)
    was refused, "no configs folder at .../site-packages/configs": hydra_main asked config_dir() first."""
    import shutil

    from linformer import configs, hydra_start

    shutil.copytree(REPO / "configs", tmp_path / "configs")
    finetune = tmp_path / "configs" / "finetune.yaml"
    finetune.write_text(finetune.read_text().replace("\nseed: 0", "\nseed: 41", 1))
    monkeypatch.delenv(configs.CONFIG_DIR_VARIABLE, raising=False)
    monkeypatch.setattr(configs, "REPOSITORY_CONFIGS", tmp_path / "site-packages" / "configs")
    given = [flag, str(tmp_path / "configs"), "task=sst2", "model_path=m"]
    monkeypatch.setattr(sys, "argv", ["finetune.py", *given, "--cfg", "job"])
    hydra_start.hydra_main("finetune")(lambda cfg: None)()  # --cfg job: Hydra prints the config and runs nothing
    assert "\nseed: 41\n" in capsys.readouterr().out
    # the early checks read that folder too: a misspelt key is their one line, before Hydra writes anything
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["finetune.py", *given, "trainer.epocs=1", f"hydra.run.dir={tmp_path / 'run'}"])
    with pytest.raises(SystemExit) as stop:
        hydra_start.hydra_main("finetune")(lambda cfg: None)()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: trainer.epocs: no such key (did you mean trainer.epochs?)")
    assert not (tmp_path / "run").exists()


def _own_configs(tmp_path: Path) -> Path:
    """A folder of one's own configs for --config-dir: a data option, a model option and a pretraining config."""
    extra = tmp_path / "extra"
    (extra / "data").mkdir(parents=True)
    (extra / "model").mkdir()
    (extra / "data" / "mine.yaml").write_text("defaults:\n  - mirror_slice\n  - _self_\nname: mine\n")
    (extra / "model" / "wee.yaml").write_text("defaults:\n  - tiny\n  - _self_\nname: wee\n")
    (extra / "mypre.yaml").write_text("defaults:\n  - pretrain\n  - _self_\nmy_need: ???  # what one needs\n")
    return extra


@pytest.mark.parametrize(("config", "argv", "line"), [
    ("pretrain", ["--config-dir", "extra", "data=mine", "model=wee", "trainer.max_stepz=5"],
     "error: trainer.max_stepz: no such key (did you mean trainer.max_steps?)"),
    ("pretrain", ["-cd", "extra", "data=mien"], "error: data=mien: no such option (did you mean mine?)"),
    ("pretrain", ["--config-dir=extra", "-m", "model=tiny,woe"], "error: model=woe: no such option (did you mean wee?)"),
    ("finetune", ["--config-dir", "extra", "task=sst2"], "error: model_path is not set: "),
    ("benchmark", ["--config-name", "benchmark", "inference.max_m=1"],
     "error: inference.max_m: no such key (did you mean inference.max_n?)"),
    ("benchmark", ["-cn", "benchmrk"], "error: no config benchmrk.yaml in "),
    ("pretrain", ["--config-dir", "extra", "--config-name", "mypre", "model=wee"],
     "error: my_need is not set: what one needs; give it on the command line, my_need=... (/"),
    ("pretrain", ["-cd", "extra", "-cn", "mypre", "my_need=1", "+task=sst2"],  # the config named: -cn's, in extra/
     "error: +task=sst2: nothing reads it: this command's config (/"),  # its groups: pretrain's, which it lists
    ("pretrain", ["-cd", "nowhere", "model=tiny"], "error: --config-dir nowhere: no folder at "),
    ("pretrain", ["--config-path", "nowhere", "model=tiny"], "error: --config-path nowhere, from the script's folder"),
])
def test_a_command_line_with_hydra_s_config_flags_gets_the_same_one_line_refusals(tmp_path, monkeypatch, capsys,
                                                                                 config, argv, line):
    """Any flag but -m skipped the early composition: a misspelt key or option with --config-dir (one's own configs
    beside the clone's) or --config-name was Hydra's block of lines, a value left at ??? OmegaConf's traceback, each
    with exit status 1; the did-you-mean did not see the --config-dir folder's options."""
    from tests.conftest import run_script

    _own_configs(tmp_path)
    monkeypatch.chdir(tmp_path)  # --config-dir is Hydra's: from the working directory
    code = run_script(config, [*argv, f"paths.output_dir={tmp_path / 'outputs'}"], monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(line) and err.count("\n") == 1, err[-2000:]
    assert not (tmp_path / "outputs").exists()


def test_a_config_of_one_s_own_built_on_a_command_s_reads_that_command_s_groups(tmp_path, monkeypatch):
    """A config listing a command's (`- pretrain` in its defaults) was said to read no group: a '+' refusal listed
    none ("the groups it reads: "), and every value counted as the command line's choice."""
    from linformer.configs import command_sources, config_groups, hydra_command_line

    _own_configs(tmp_path)
    monkeypatch.chdir(tmp_path)
    with command_sources(hydra_command_line(["-cd", "extra", "-cn", "mypre"], "pretrain").sources):
        assert config_groups("mypre") == config_groups("pretrain") != []


def test_hydra_s_own_flags_keep_hydra_s_answer_with_one_s_own_configs(tmp_path, monkeypatch, capsys):
    """--cfg shows the config composed with the --config-dir folder, and runs nothing; the refusals are not its."""
    from linformer import hydra_start

    _own_configs(tmp_path)
    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(sys, "argv", ["pretrain.py", "--config-dir", "extra", "--cfg", "job", "model=wee",
                                      "data=mine"])
    hydra_start.hydra_main("pretrain")(ran.append)()
    out = capsys.readouterr().out
    assert not ran and "name: wee" in out and "name: mine" in out


def test_a_configs_folder_without_linformer_s_configs_names_the_folder_and_the_variable(tmp_path, monkeypatch):
    """Hydra's "Cannot find primary config 'pretrain'" named neither the folder read nor $LINFORMER_CONFIG_DIR; a
    site-packages/configs of another distribution was read as linformer's in silence; and the advice to unset the
    variable pointed a wheel, which has no clone, at nothing."""
    from linformer import configs

    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match=r"^no config pretrain.yaml in \S*empty \(LINFORMER_CONFIG_DIR=\S*empty\): "
                                          "it holds no linformer configs: point LINFORMER_CONFIG_DIR at a linformer "
                                          "clone's configs/"):
        compose("pretrain")
    other = tmp_path / "site-packages" / "configs"
    other.mkdir(parents=True)
    (other / "app.yaml").write_text("x: 1\n")  # another distribution's top-level configs/
    monkeypatch.setattr(configs, "REPOSITORY_CONFIGS", other)
    monkeypatch.delenv(configs.CONFIG_DIR_VARIABLE)
    with pytest.raises(ConfigError, match=r"^no config pretrain.yaml in \S*site-packages/configs \(the configs/ beside "
                                          r"the package\): it is not linformer's .*set LINFORMER_CONFIG_DIR to a "
                                          "linformer clone's configs/ folder"):
        compose("pretrain")
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"names no folder: .* this package is installed without a clone \(a wheel\)"):
        compose("pretrain")
    monkeypatch.setattr(configs, "REPOSITORY_CONFIGS", REPO / "configs")  # a clone's: unsetting it finds them
    with pytest.raises(ConfigError, match=r"names no folder: .*or unset it to use \S*configs, the configs/ of the "
                                          "clone this package is installed from"):
        compose("pretrain")


def test_path_root_follows_the_configs_folder_and_its_file(tmp_path, monkeypatch):
    """path_root kept the first configs folder's paths for the whole process (a cache), though
    $LINFORMER_CONFIG_DIR is read at each call: a notebook that set it later got the other folder's roots."""
    from linformer import configs
    from linformer.data import io as data_io

    for name, out in (("a", "outputs"), ("b", "runs")):
        (tmp_path / name / "paths").mkdir(parents=True)
        (tmp_path / name / "paths" / "default.yaml").write_text(f"output_dir: {out}\n")
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path / "a"))
    assert data_io.path_root("output_dir") == "outputs"
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path / "b"))
    assert data_io.path_root("output_dir") == "runs"
    (tmp_path / "b" / "paths" / "default.yaml").write_text("output_dir: elsewhere/runs\n")  # edited in place
    assert data_io.path_root("output_dir") == "elsewhere/runs"


def test_a_sweep_s_job_name_may_have_every_byte_a_name_may_have_and_not_one_more():
    """A job folder name of NAME_MAX_BYTES (255) bytes is one the file system makes: accepted; one byte more is not."""
    from linformer import configs
    from linformer.files.names import NAME_MAX_BYTES

    def longest_part(name):
        subdir = compose("pretrain", [f"data.name={name}", "data.seed=1"], with_hydra=True).hydra.sweep.subdir
        return max(len(part.encode()) for part in Path(str(subdir)).parts)

    name = "x" * (1 + NAME_MAX_BYTES - longest_part("x"))
    assert longest_part(name) == NAME_MAX_BYTES
    configs.refuse_long_job_names("pretrain", [f"data.name={name}", "data.seed=0,1"])
    with pytest.raises(ConfigError, match=rf"\({NAME_MAX_BYTES + 1} bytes; a name may have {NAME_MAX_BYTES}\)"):
        configs.refuse_long_job_names("pretrain", [f"data.name={name}x", "data.seed=0,1"])


@pytest.mark.parametrize(("config", "given", "key"), [("tokenizer", "data.tokenizer=../..", "data.tokenizer"),
                                                     ("pretrain", "run_name=../../..", "run_name")])
def test_a_name_that_climbs_out_of_its_folder_is_refused_before_hydra_writes_there(tmp_path, monkeypatch, capsys,
                                                                                   config, given, key):
    """A '..' in a name of the run directory put it above its folder (the checkout itself, by default), and Hydra
    wrote its .hydra/ and log there before the script's own check refused the name; beside other files, a refused
    start could not take them away."""
    from linformer import hydra_start

    home = tmp_path / "home"
    (home / "outputs").mkdir(parents=True)
    (home / "notes.txt").write_text("the user's")
    ran = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [f"{config}.py", "model=tiny", given, f"paths.output_dir={home / 'outputs'}"]
                        if config == "pretrain" else [f"{config}.py", given, f"paths.output_dir={home / 'outputs'}"])
    with pytest.raises(SystemExit) as stop:
        hydra_start.hydra_main(config)(ran.append)()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(f"error: {key}=") and "outside its folder" in err, err
    assert err.count("\n") == 1 and not ran
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "outputs"]
    assert not list(tmp_path.rglob(".hydra"))


@pytest.fixture
def other_rank(monkeypatch):
    """This process as rank 1 of 2 (torchrun's variables), its logging set-up undone after the test."""
    import logging

    from linformer import cli

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    import datasets
    from transformers.utils import logging as hf_logging

    factory = logging.getLogRecordFactory()
    bars = datasets.is_progress_bar_enabled(), hf_logging.is_progress_bar_enabled()
    yield
    logging.disable(logging.NOTSET)
    logging.setLogRecordFactory(factory)
    cli._quieted.clear()
    if bars[0]:
        datasets.enable_progress_bars()
    if bars[1]:
        hf_logging.enable_progress_bar()


def test_under_torchrun_another_rank_logs_errors_only_and_names_itself(other_rank, capsys, caplog):
    """Every process runs the same code: rank 0 logs each line, the others only their errors, prefixed."""
    import logging

    from linformer.cli import cli_errors

    with cli_errors():
        logging.getLogger("linformer.x").info("tokenized split from the cache")
        logging.getLogger("linformer.x").warning("SIGTERM received")
        logging.getLogger("linformer.x").error("this rank's own trouble")
    assert [r.getMessage() for r in caplog.records] == ["[rank 1] this rank's own trouble"]


def test_under_torchrun_another_rank_draws_no_progress_bar(other_rank):
    """datasets' bars (tokenize, map, save) and transformers' (loading weights) were drawn by every rank: rank 0 draws
    them, the others none (tests/train/test_ddp.py runs a 2-process finetune)."""
    import datasets
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    from linformer.cli import cli_errors

    datasets.enable_progress_bars()
    hf_logging.enable_progress_bar()
    with cli_errors():
        pass
    assert not datasets.is_progress_bar_enabled() and not hf_logging.is_progress_bar_enabled()
    assert are_progress_bars_disabled()


@pytest.fixture
def launch_store(monkeypatch):
    """A launcher's store, as torchrun's agent keeps it at MASTER_ADDR:MASTER_PORT, for this process as rank 1."""
    import datetime

    import torch.distributed as dist

    from linformer import cli

    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=5))
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(store.port), "TORCHELASTIC_RUN_ID": "t",
                       "TORCHELASTIC_RESTART_COUNT": "0", "WORLD_SIZE": "2", "RANK": "1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(cli, "PEER_WAIT_S", 1)
    monkeypatch.setattr(cli, "_causes", [])  # peer_cause's answer, once per process
    return dist.PrefixStore("linformer/last_line/t/0/", store)


def _ends(capsys, err: BaseException) -> tuple[int, str]:
    from linformer.cli import cli_errors

    with pytest.raises(SystemExit) as stop, cli_errors():
        raise err
    return stop.value.code, capsys.readouterr().err


def test_under_torchrun_a_line_rank_0_printed_is_not_printed_again(launch_store, other_rank, capsys):
    from linformer.errors import Preempted

    launch_store.set("rank0", "error: trainer.mixed_precision=fp16 needs a CUDA device")
    assert _ends(capsys, ConfigError("trainer.mixed_precision=fp16 needs a CUDA device")) == (2, "")
    launch_store.set("rank0", "stopped: SIGINT (Ctrl-C) at step 3")
    assert _ends(capsys, Preempted("SIGINT (Ctrl-C) at step 3", 2)) == (130, "")


def test_under_torchrun_a_line_of_one_rank_alone_is_printed_with_its_rank(launch_store, other_rank, capsys):
    launch_store.set("rank0", "error: another process failed")
    assert _ends(capsys, OSError(errno.ENOSPC, "full", "/x/ckpt")) == (
        2, "[rank 1] error: no space left on device writing /x/ckpt: free some space and run the same command again.\n")
    # rank 0's own "another process failed" is then left unsaid, and its record gives this line
    assert launch_store.get("cause") == b"[rank 1] error: no space left on device writing /x/ckpt: free some space and run the same command again."


def test_under_torchrun_a_rank_s_own_error_lets_the_others_go_and_prints_only_its_line(launch_store, other_rank, capfd):
    """Rank 1 alone failed while rank 0 waited in a collective: rank 1 waited PEER_WAIT_S for rank 0's line (which
    rank 0, stuck in the collective until rank 1 exited, never gave) under c10d's "waitForInput ... timeout" warnings.
    Its line goes to the store (rank 0 records it in run.json) and it leaves the process group, so that rank 0's
    collective fails at once; its wait prints nothing but its line."""
    import torch.distributed as dist

    from linformer.cli import cli_errors

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with pytest.raises(SystemExit), cli_errors():
            raise ConfigError("injected: bad file on rank 1")
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert capfd.readouterr().err == "[rank 1] error: injected: bad file on rank 1\n"
    assert launch_store.get("cause") == b"[rank 1] error: injected: bad file on rank 1"


def test_the_record_of_a_peer_s_failure_gives_that_process_s_line_or_says_it_ended_without_one(launch_store,
                                                                                               monkeypatch):
    """run.json said only "PeerFailed: another process of this run ended ... (its error says why)", where the
    error was on the terminal alone, and the same after a kill -9 of the other process."""
    from linformer import cli
    from linformer.errors import PeerFailed
    from linformer.train.core import peer_failure, peer_named

    monkeypatch.setenv("RANK", "0")
    gloo = RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:27831")
    assert str(peer_failure(gloo, 2)).startswith("process 1 ended without a word: killed?")  # at once: it left
    lost = PeerFailed("another process of this run ended while this one waited for it")
    assert str(peer_named(lost)).startswith("process 1 ended without a word: killed?")
    monkeypatch.setattr(cli, "_causes", [])
    launch_store.set("cause", "[rank 1] error: injected: bad file on rank 1")
    assert str(peer_named(lost)).startswith("[rank 1] error: injected: bad file on rank 1 (the process that failed")


def test_under_torchrun_another_process_s_failure_is_left_to_the_process_that_failed(launch_store, other_rank, capsys):
    from linformer import cli
    from linformer.errors import PeerFailed

    launch_store.set("rank0", "error: no space left on device writing /x/ckpt")
    launch_store.set("cause", "1")
    assert _ends(capsys, PeerFailed("another process failed writing the checkpoint")) == (2, "")
    launch_store.delete_key("cause")  # nobody printed a cause: this process says what it knows
    cli._causes.clear()  # the answer a process keeps once it has one: another process's here
    assert _ends(capsys, PeerFailed("another process failed writing the checkpoint"))[1] == (
        "[rank 1] error: another process failed writing the checkpoint\n")


def test_rank_0_prints_its_line_and_tells_the_others(launch_store, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    assert _ends(capsys, ConfigError("bad")) == (2, "error: bad\n")
    assert launch_store.get("rank0") == b"error: bad"


def test_a_sigterm_in_the_interpreter_s_teardown_keeps_the_command_s_exit_status(tmp_path):
    """A SIGTERM that landed after a command's last line, in the seconds of the interpreter's teardown (modules'
    clean-up, atexit), ended it as killed (-15, no line) though its outputs were complete; a caller read "killed". The
    teardown goes on, and the process exits with the status the command ended with: 0 after its work, 2 after an error
    line."""
    import concurrent.futures
    import signal
    import time

    from .conftest import as_a_script

    command = as_a_script(
        "import atexit, sys, time\n"
        "from linformer import cli\n"
        "from linformer.hydra_start import hydra_main\n"
        "from linformer.errors import ConfigError\n\n"
        "cli.models_registered = lambda: None  # a body that loads no model: torch's import (seconds) left out\n\n"
        "@hydra_main('convert')\n"
        "def main(cfg):\n"
        "    atexit.register(time.sleep, 3)  # a teardown that takes a while\n"
        "    print('the last line', file=sys.stderr, flush=True)\n"
        "    if cfg.seed == 1:\n"
        "        raise ConfigError('seed=1 is refused')\n\n"
        "if __name__ == '__main__':\n"
        "    main()\n", tmp_path)

    def stopped_in_teardown(seed):
        proc = subprocess.Popen([*command, f"seed={seed}"], cwd=tmp_path, stderr=subprocess.PIPE,
                                text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
        lines = []
        for line in proc.stderr:  # the command's last line, then its teardown
            lines.append(line)
            if line.startswith(("the last line", "error: ")) and (seed == 0 or line.startswith("error: ")):
                break
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=120), "".join(lines)

    # the two commands run together, each watched by a thread of its own: each pays an interpreter's start of seconds
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for (status, said), expected in zip(pool.map(stopped_in_teardown, (0, 1)), (0, 2)):
            assert status == expected, said


def test_a_signal_after_the_command_s_work_says_the_command_was_ending(monkeypatch, capsys):
    """The start-up handling (``stop_while_starting``) stays for the process's life: a Ctrl-C or SIGTERM after the
    command's body (while it prints its summary, in the interpreter's teardown) said "while the command was
    starting". After the body it says the command was ending."""
    import signal

    from linformer import cli

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    monkeypatch.setattr(cli, "_ended", [], raising=False)
    try:
        cli.stop_while_starting()
        stop = signal.getsignal(signal.SIGINT)
        with pytest.raises(cli.Ended) as starting:
            stop(signal.SIGINT, None)
        with cli.cli_errors():
            pass  # the command's work
        with pytest.raises(cli.Ended) as ending:
            stop(signal.SIGTERM, None)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    assert starting.value.line == "stopped: interrupted by SIGINT (Ctrl-C) while the command was starting."
    assert ending.value.line == "stopped: interrupted by SIGTERM as the command was ending, after its work."
    assert (starting.value.code, ending.value.code) == (130, 143)
    assert capsys.readouterr().err == f"{starting.value.line}\n{ending.value.line}\n"


class _Exited(BaseException):
    """os._exit, which would end the test's process, raised instead (args: its status)."""


@contextlib.contextmanager
def stop_handlers(monkeypatch):
    """cli.stop_while_starting's handlers installed (yields the SIGTERM one), os._exit raising
    _Exited, and the process's own handlers put back after."""
    import signal

    from linformer import cli

    def exits(code):
        raise _Exited(code)

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    monkeypatch.setattr(cli, "_ended", [], raising=False)
    monkeypatch.setattr(os, "_exit", exits)
    try:
        cli.stop_while_starting()
        yield signal.getsignal(signal.SIGTERM)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@pytest.mark.parametrize("launched", [False, True], ids=["one process", "rank 0 of torchrun's"])
def test_a_signal_after_the_command_s_error_line_ends_it_at_once_with_that_line_s_status(launched, launch_store,
                                                                                          monkeypatch, capsys):
    """Rank 1 killed (kill -9): rank 0 printed `error: process 1 ended without a word ...`, then torchrun's SIGTERM
    to the survivors added `stopped: interrupted by SIGTERM as the command was ending, after its work.`, which
    contradicts it, and turned its status into 143 after seconds of teardown. A signal after the command's last line
    now ends the process at once with that line's status, saying nothing more; a new command forgets the line."""
    import signal

    from linformer import cli
    from linformer.errors import PeerFailed

    monkeypatch.setenv("RANK", "0")
    if not launched:
        monkeypatch.setenv("WORLD_SIZE", "1")

    with stop_handlers(monkeypatch) as stop:
        code, err = _ends(capsys, PeerFailed("process 1 ended without a word: killed?"))
        assert (code, err) == (2, "error: process 1 ended without a word: killed?\n")
        for signum in (signal.SIGTERM, signal.SIGINT):  # the launcher's, then a user's Ctrl-C
            with pytest.raises(_Exited) as exited:
                stop(signum, None)
            assert exited.value.args == (2,)
        assert capsys.readouterr().err == ""
        with cli.cli_errors():
            pass  # a command after it (in-process, a sweep's): its end is not that line's
        with pytest.raises(cli.Ended) as ending:
            stop(signal.SIGTERM, None)
        assert ending.value.code == 143


@pytest.mark.parametrize("last", ["a job's error line", "the sweep's error line"])
def test_a_sweep_s_last_line_is_its_own_error_line_not_a_job_s(last, tmp_path, monkeypatch, capsys):
    """A --multirun runs its jobs inside a block of its own: a job's `error:` line is not the process's last (the
    sweep goes on, then prints its table), so a signal after it says the sweep was stopped; the sweep's own `error:`
    line (n of m jobs failed) is, and a signal after it ends the process at once with that line's status, saying
    nothing more."""
    import signal
    import time

    from linformer import cli, hydra_start

    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")

    monkeypatch.setattr(cli, "_said", [])  # the sweep's line, said here, is not a later test's
    with stop_handlers(monkeypatch) as stop:
        if last == "a job's error line":
            # the sweep's run of its jobs, then a job's
            with cli.cli_errors(work=False), pytest.raises(SystemExit) as job, cli.cli_errors(work=False):
                raise ConfigError("data.name=nowhere: no such dataset")
            assert job.value.code == 2
            capsys.readouterr()
            with pytest.raises(cli.Ended) as ending:
                stop(signal.SIGTERM, None)
            assert ending.value.code == 143 and capsys.readouterr().err.startswith("stopped: interrupted by SIGTERM")
        else:
            failed = hydra_start.SweepJob(1, tmp_path / "1", "failed", "error: data.name=nowhere: no such dataset", 2)
            with pytest.raises(SystemExit) as sweep:
                hydra_start._sweep_end([failed], time.time(), None, None)
            assert sweep.value.code == 2 and "error: 1 of 1 jobs failed (#1)" in capsys.readouterr().err
            with pytest.raises(_Exited) as exited:
                stop(signal.SIGTERM, None)
            assert exited.value.args == (2,) and capsys.readouterr().err == ""


def test_a_broken_pipe_other_than_standard_output_s_keeps_its_traceback(monkeypatch):
    """Only a standard output whose reader went away (`| head`) ends a command quietly with SIGPIPE's 141: a broken
    pipe elsewhere (a worker process that died, a subprocess's stdin) is a failure, whose traceback says where."""
    read, write = os.pipe()  # standard output's reader is there
    with open(read, "rb"), open(write, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        with pytest.raises(BrokenPipeError):
            from linformer.cli import cli_errors

            with cli_errors(work=False):
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def test_a_flag_taking_script_s_path_starts_from_the_repository_with_home_expanded(tmp_path, monkeypatch):
    """export.py --out '~/x' (a quoted ~, as a Makefile or a subprocess list passes it) wrote ./~/x, and every
    argparse script read relative paths from the working directory while the docs and the Hydra commands read them
    from the repository: one type (argtypes.path, over locations.resolve_path) reads them all."""
    import argparse

    from linformer.argtypes import folder, path
    from linformer.files.locations import repo_root

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert path("~/x") == str(tmp_path / "home" / "x")
    assert path("outputs/pretrain") == str(repo_root() / "outputs" / "pretrain")
    assert folder("~/under") == tmp_path / "home" / "under"
    for empty in ("", "  "):
        with pytest.raises(argparse.ArgumentTypeError, match="an empty path"):
            path(empty)


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "scripts").glob("*.py")))
def test_every_flag_taking_script_reads_its_paths_with_the_one_path_type(script):
    """A path argument given without argtypes.path (or folder) is read from the working directory, and a quoted ~
    becomes a folder named ~: each script's path-like arguments name their type."""
    import ast

    tree = ast.parse((REPO / "scripts" / f"{script}.py").read_text())
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument"):
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not any(n.lstrip("-") in PATH_ARGUMENTS for n in names):
            continue
        kind = next((k.value for k in call.keywords if k.arg == "type"), None)
        assert getattr(kind, "id", None) in ("path", "folder"), f"scripts/{script}.py {names[0]}"


# the argparse arguments that name a file or folder (positional runs and models are read by named_paths and
# resolve_model_path, which start from the repository too)
PATH_ARGUMENTS = {"out", "outputs", "logdir", "under", "run", "render", "data-mirror", "input", "output"}
# those read where the command uses them (fidelity records its --corpus as given), or by a script that imports
# nothing of the project (wheelhouse.py): every one refuses an empty path all the same
OTHER_PATH_ARGUMENTS = {"corpus": "given_path", "dest": "a_path", "node-packages": "a_path"}


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "scripts").glob("*.py")))
def test_every_path_argument_refuses_an_empty_path(script, capsys):
    """fidelity.py --corpus "" read the repository as the corpus, wheelhouse.py --dest "" wrote the wheels into the
    working folder and --node-packages "" was taken for no file: an unset variable is refused, naming the option."""
    import argparse
    import ast

    from linformer.argtypes import given_path

    tree = ast.parse((REPO / "scripts" / f"{script}.py").read_text())
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "add_argument"):
        names = [a.value.lstrip("-") for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        kind = next((k.value for k in call.keywords if k.arg == "type"), None)
        for name in (n for n in names if n in OTHER_PATH_ARGUMENTS):
            assert getattr(kind, "id", None) == OTHER_PATH_ARGUMENTS[name], f"scripts/{script}.py --{name}"
    if script == "fidelity":
        assert given_path("data/x") == "data/x"  # kept as given: the report records it so
        with pytest.raises(argparse.ArgumentTypeError, match="an empty path"):
            given_path(" ")
    if script == "wheelhouse":
        from .test_wheelhouse import wh

        for option in ("--dest", "--node-packages"):
            with pytest.raises(SystemExit) as stop:
                wh.main([option, ""])
            assert stop.value.code == 2
            assert f"error: argument {option}: an empty path" in capsys.readouterr().err


@pytest.mark.parametrize("config", ["pretrain", "corpus"])
def test_a_sweep_whose_job_folder_name_is_too_long_is_one_line_before_anything_is_written(config, tmp_path,
                                                                                          monkeypatch, capsys):
    """Thirteen ordinary overrides and a swept seed made a job folder name of 337 bytes: Hydra wrote the sweep's
    multirun.yaml, then failed making the folder with OSError [Errno 36] and a traceback."""
    from linformer import configs, hydra_start

    long_value = "x" * 240
    ran = []
    monkeypatch.setattr(sys, "argv", [f"{config}.py", "-m", f"paths.output_dir={tmp_path / 'out'}",
                                      f"data.name={long_value}", "data.seed=0,1", "data.val_fraction=0.05"])
    with pytest.raises(SystemExit) as stop:
        hydra_start.hydra_main(config)(ran.append)()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: a job of this sweep would be named ") and not ran, err
    assert err.count("\n") == 1 and "bytes; a name may have 255" in err and "override_dirname.exclude_keys" in err
    assert not (tmp_path / "out").exists()
    configs.refuse_long_job_names(config, [f"paths.output_dir={tmp_path / 'out'}", "data.seed=0,1"])  # short: fine


def test_a_stream_that_cannot_show_a_character_escapes_it_and_the_last_line_says_so(monkeypatch):
    """With PYTHONIOENCODING=ascii, train_tokenizer, prepare_corpus and compare_runs did their work, then crashed on
    their last print of a non-ASCII name with UnicodeEncodeError (exit 1); pretraining's next: line showed escapes
    without a word that it does not paste."""
    import io

    import linformer.cli as cli

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="ascii", write_through=True) for _ in range(2))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(cli, "_escaped", [])
    cli.streams_never_raise()
    print("wrote data/tokenizers/café_中文")
    cli._say_escaped()
    assert out.buffer.getvalue().decode() == "wrote data/tokenizers/caf\\xe9_\\u4e2d\\u6587\n"
    note = err.buffer.getvalue().decode()
    assert note.startswith("note: this terminal's encoding (ascii) cannot show some characters") and \
        "PYTHONIOENCODING=utf-8" in note and note.count("\n") == 1


def test_every_logger_is_given_back_as_it_was_and_only_the_handlers_added_are_closed(tmp_path):
    """Only the root's handlers and level and the loggers' disabled flags were put back: a named logger's handlers,
    level and propagate set by a command (a logging config's loggers: section) stayed for the caller's later records,
    and a handler of the caller's that the command took off was not put back."""
    import logging

    from linformer.hydra_start import logging_restored

    named, root = logging.getLogger("linformer.caller"), logging.getLogger()
    mine = logging.StreamHandler(io.StringIO())
    named.addHandler(mine)
    named.setLevel(logging.WARNING)
    try:
        with logging_restored():
            log_file = logging.FileHandler(tmp_path / "run.log")
            named.removeHandler(mine)
            named.addHandler(log_file)
            named.setLevel(logging.DEBUG)
            named.propagate, named.disabled = False, True
            made = logging.getLogger("linformer.made_inside")
            made.addHandler(logging.NullHandler())
            made.setLevel(logging.ERROR)
            made.propagate = False
            root.addHandler(mine)  # one of the caller's, moved: not closed
        assert named.handlers == [mine] and named.level == logging.WARNING
        assert named.propagate and not named.disabled
        assert (made.handlers, made.level, made.propagate, made.disabled) == ([], logging.NOTSET, True, False)
        assert mine not in root.handlers and not mine.stream.closed
        assert log_file.stream is None  # closed
    finally:
        named.removeHandler(mine)
        named.setLevel(logging.NOTSET)


def test_a_script_run_inside_a_live_interpreter_gives_back_the_root_logger_as_it_was(tmp_path, monkeypatch):
    """Hydra's job logging puts a handler on the command's log file on the root logger: once the script's main has
    returned (``%run`` in a notebook), the caller's own records no longer go into that file."""
    import logging

    from linformer import hydra_start

    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    added = []

    def body(cfg):
        added.extend(h for h in root.handlers if h not in before)
        logging.getLogger("linformer").warning("the command's own record")

    monkeypatch.setattr(sys, "argv", ["tokenizer.py", f"paths.output_dir={tmp_path}"])
    hydra_start.hydra_main("tokenizer")(body)()
    logs = list(tmp_path.rglob("*.log"))
    assert len(logs) == 1 and "the command's own record" in logs[0].read_text()
    assert any(isinstance(h, logging.FileHandler) for h in added)
    assert root.handlers == before and root.level == level
    assert all(h.stream is None for h in added if isinstance(h, logging.FileHandler))  # closed
    logging.getLogger("my_notebook").warning("a later cell's record")
    assert "a later cell's record" not in logs[0].read_text()


def test_a_run_directory_that_exists_but_cannot_be_written_is_not_said_to_be_made(tmp_path, monkeypatch):
    import re

    from linformer import hydra_start
    from linformer.errors import OutputPathError

    cfg = compose("pretrain", [f"paths.output_dir={tmp_path}", "run_name=r"], with_hydra=True)
    monkeypatch.setattr(hydra_start.os, "access", lambda *a: False)  # a read-only folder (root may write anywhere)
    with pytest.raises(OutputPathError, match="cannot be made: .* is not writable") as missing:
        hydra_start._run_dir_before(cfg)
    Path(re.match(r"the run directory (.+) cannot be made", str(missing.value)).group(1)).mkdir(parents=True)
    with pytest.raises(OutputPathError, match=r"^the run directory \S+ is not writable\. Choose another"):
        hydra_start._run_dir_before(cfg)  # a finished run's folder in a read-only outputs folder: it exists


def test_a_run_directory_another_user_s_live_run_holds_names_that_run_not_its_permissions(tmp_path, monkeypatch):
    """A run folder another user owns, held by their live run, was refused as "not writable", which sends one to
    fix the permissions of a colleague's live run: its lock's holder is named, as a start in one's own folder does.
    A dead holder's folder is still "not writable"."""
    import json
    import socket

    from linformer import hydra_start
    from linformer.errors import OutputPathError, RunDirError
    from linformer.files.processes import process_place

    cfg = compose("pretrain", [f"paths.output_dir={tmp_path}", "run_name=r"], with_hydra=True)
    run = tmp_path / "pretrain" / "r"
    run.mkdir(parents=True)
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "place": process_place(), "since": "09:00"}
    (run / ".lock").write_text(json.dumps(holder))
    monkeypatch.setattr(hydra_start.os, "access", lambda *a: False)  # another user's folder (root may write anywhere)
    with pytest.raises(RunDirError, match=rf"^{re.escape(str(run))} is in use by process {os.getpid()} on "
                                          rf"{re.escape(socket.gethostname())} \(since 09:00\): wait for it to finish, "
                                          "or choose another paths.output_dir or run_name"):
        hydra_start._run_dir_before(cfg)
    monkeypatch.setattr(hydra_start, "holder_gone", lambda holder: True)
    with pytest.raises(OutputPathError, match=r"^the run directory \S+ is not writable\."):
        hydra_start._run_dir_before(cfg)


def test_a_path_starting_with_a_dash_is_told_how_to_give_it(capsys):
    from tests.conftest import load_script

    with pytest.raises(SystemExit):
        load_script("export").main(["-lead", "--out", "x"])
    assert "(-lead is read as a flag: a path starting with '-' is given as ./-lead)" in \
        capsys.readouterr().err.splitlines()[0]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_help_colours_the_targets_on_a_terminal_only():
    """`make help` wrote its colour codes into a pipe, and under NO_COLOR and TERM=dumb, where they show as
    ^[[36m: colour only where its output is a terminal that takes it."""
    import pty

    def help_output(terminal: bool, **env) -> str:
        env = {k: v for k, v in {**os.environ, "TERM": "xterm", **env}.items() if v is not None}
        if not terminal:
            return subprocess.run(["make", "-s", "help"], cwd=REPO, env=env, capture_output=True, text=True,
                                  check=True).stdout
        main, child = pty.openpty()
        with subprocess.Popen(["make", "-s", "help"], cwd=REPO, env=env, stdout=child):
            os.close(child)
            chunks = []
            while True:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # the terminal's other end closed
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        os.close(main)
        return b"".join(chunks).decode()

    assert "\033[36mhelp" in help_output(True, NO_COLOR=None)
    for said in (help_output(False, NO_COLOR=None), help_output(True, NO_COLOR="1"), help_output(True, TERM="dumb")):
        assert "  help " in said and "\033" not in said
    # the descriptions in one column, however long a target's name (reproduce-pretrained ran into its own)
    columns = {re.match(r"  \S+ +", line).end() for line in said.splitlines()}
    assert len(columns) == 1, said


# Each script's --help and usage errors, run in one process forked per command line (each fork starts from the
# package's light modules, imported once): what each ends with and which heavy modules it imported.
_PARSE_ONLY = """\
import json, os, runpy, sys
from pathlib import Path

scripts, hydra = Path(sys.argv[1]), set(json.loads(sys.argv[2]))
sys.argv[0] = str(scripts / "probe.py")  # a script's process (cli.run_from_a_script), its main module
__linformer_command__ = True  # marked as each of scripts/*.py marks its own (locations.COMMAND_MARK)
sys.path[0] = str(scripts)  # as `python scripts/<name>.py` has it (gpu.py imports wheelhouse)
import linformer, linformer.cli, linformer.hydra_start  # noqa: E401
from hydra.core.plugins import Plugins

Plugins.instance()  # Hydra's search for its plugins, once for every fork

HEAVY = ("torch", "transformers", "datasets")
assert not set(HEAVY) & set(sys.modules), "the package's light modules"
for script in sorted(scripts.glob("*.py")):
    # a mistyped flag; dashboard hands the flags it does not know to tensorboard, and takes no positional argument
    usage = ["a_folder"] if script.stem == "dashboard" else ["--no-such-flag"]
    # each command line with the configs, and --help also without them
    for args, configs in ((["--help"], True), (["--help"], False), (usage, True),
                          *([(["no_such_key=1"], True)] if script.stem in hydra else [])):
        read, write = os.pipe()
        if os.fork() == 0:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            if not configs:  # as over a wheel without LINFORMER_CONFIG_DIR: no configs folder to read
                os.environ["LINFORMER_CONFIG_DIR"] = str(scripts / "no-such-configs")
            sys.argv = [str(script), *args]
            try:
                runpy.run_path(str(script), run_name="__main__")
                code = 0
            except SystemExit as end:
                code = end.code if isinstance(end.code, int) else int(end.code is not None)
            except BaseException as err:
                code = repr(err)
            heavy = sorted(m for m in HEAVY if m in sys.modules)
            os.write(write, json.dumps([script.stem, args, configs, code, heavy]).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as said:
            print(said.read(), flush=True)
        os.wait()
"""


@pytest.fixture(scope="module")
def parse_only_ends():
    """{(script stem, whether the configs are found): [(its arguments, exit status, heavy modules it imported), ...]}
    of every script in scripts/."""
    import json

    from .conftest import hydra_scripts

    done = subprocess.run([sys.executable, "-c", _PARSE_ONLY, str(REPO / "scripts"), json.dumps(list(hydra_scripts()))],
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    ends: dict[tuple[str, bool], list] = {}
    for line in done.stdout.splitlines():
        stem, args, configs, code, heavy = json.loads(line)
        ends.setdefault((stem, configs), []).append((args, code, heavy))
    return ends


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "scripts").glob("*.py")))
def test_a_script_s_help_and_usage_errors_answer_without_torch(parse_only_ends, script):
    """Every script imported its work's modules (torch, transformers: 10-20 s under load), and the package's import
    the model's, before it parsed its command line: a --help, a mistyped flag or a misspelt key waited for them. Each
    parses first; the work's modules come after."""
    ends = parse_only_ends[script, True]
    assert [code for _, code, _ in ends] == [0] + [2] * (len(ends) - 1), ends
    assert all(heavy == [] for _, _, heavy in ends), ends


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO / "scripts").glob("*.py")))
def test_a_script_s_help_and_usage_errors_need_no_configs(parse_only_ends, script):
    """Over a wheel without LINFORMER_CONFIG_DIR, 12 argparse scripts ended in a traceback even for --help: their
    defaults (paths.output_dir, ...) were read from the configs while argparse was set up, and 8 modules read them
    at import. An argparse script's --help needs no configs; a Hydra script's says what it does and that its
    config groups are the configs folder's to list. Never a traceback (a code that is no int)."""
    ((args, code, heavy),) = parse_only_ends[script, False]
    assert args == ["--help"] and code == 0 and heavy == [], (code, heavy)


def test_the_package_s_top_level_gives_every_name_it_exports():
    import linformer
    import linformer.modeling as modeling

    assert linformer.__all__ == ["LinformerConfig", "LinformerForMaskedLM", "LinformerForSequenceClassification",
                                 "LinformerModel", "__version__", "convert_encoder", "count_projection_matrices"]
    for name in linformer.__all__:
        assert getattr(linformer, name) is getattr(modeling, name, linformer.__version__)
        assert name in dir(linformer)
    with pytest.raises(AttributeError):
        linformer.LinformerNothing  # noqa: B018


# A script's process that stops, with a line, while it imports torch: the import waits there for the signal
_TORCH_WAITS = """\
import importlib.abc, pathlib, runpy, sys, time

class TorchWaits(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch":
            print("importing torch", flush=True)
            time.sleep(120)

sys.meta_path.insert(0, TorchWaits())
sys.argv = sys.argv[1:]
sys.path[0] = str(pathlib.Path(sys.argv[0]).parent)
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_signal_while_a_script_imports_torch_is_one_stopped_line_and_128_plus_the_signal(tmp_path):
    """Ctrl-C in a script's first seconds, while torch imported (a user who sees a mistyped command), printed a
    30-line KeyboardInterrupt traceback and ended as killed by it; SIGTERM ended it silently. Both are one `stopped:`
    line and 128 + the signal, however early: the handling comes with the package's first import."""
    import concurrent.futures
    import signal

    waits = tmp_path / "torch_waits.py"
    waits.write_text(_TORCH_WAITS)

    def stopped(script, signum, *args):
        proc = subprocess.Popen([sys.executable, str(waits), str(REPO / "scripts" / script), *args], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(REPO)))
        started = proc.stdout.readline()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
        return started, proc.returncode, err

    # commands whose work's modules (torch) are imported once the command line is parsed
    cases = [("model_checks.py", signal.SIGINT, (), 130, "SIGINT (Ctrl-C)"),
             ("export.py", signal.SIGTERM, ("outputs/pretrain/no-such-run",), 143, "SIGTERM")]
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:  # each pays an interpreter's start
        ends = list(pool.map(lambda case: stopped(case[0], case[1], *case[2]), cases))
    for (script, _, _, status, name), (started, rc, err) in zip(cases, ends):
        assert (started, rc) == ("importing torch\n", status), (script, err)
        assert err == f"stopped: interrupted by {name} while the command was starting.\n", script


def test_a_command_runs_and_refuses_inside_its_job_where_hydra_moved_the_parser_linformer_reads(tmp_path, monkeypatch,
                                                                                                capsys):
    """The early checks read the command line with Hydra's internal parser and made Hydra with its internal
    create_main_hydra2, with no fallback: a Hydra that moved them ended every command in an ImportError. Now the
    command runs, says in one note line that its early checks are Hydra's, and its job still refuses a key added
    with '+' that nothing reads, in one line."""
    from linformer import configs
    from tests.conftest import run_script

    monkeypatch.setattr(configs, "_hydra_internal", lambda module, name: None)  # Hydra's own hydra.main keeps them
    code = run_script("finetune", ["task=sst2", "model_path=m", "+trainer.trian=1", f"paths.output_dir={tmp_path}"],
                      monkeypatch)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 2, lines
    assert lines[0].startswith("note: this Hydra has moved the parser") and lines[1].startswith(
        "error: +trainer.trian=1: no code reads the key trainer.trian")


def test_a_hydra_mode_multirun_override_is_a_sweep_to_the_early_checks(tmp_path, monkeypatch, capsys):
    """Hydra sweeps on hydra.mode=MULTIRUN as on -m; the early checks composed it as one run, refusing every swept
    value as "Ambiguous value ... add --multirun", a sweep Hydra would run."""
    from linformer.configs import hydra_command_line
    from tests.conftest import run_script

    assert hydra_command_line(["hydra.mode=MULTIRUN", "model=tiny,mini"], "pretrain").multirun
    assert not hydra_command_line(["hydra.mode=RUN", "model=tiny"], "pretrain").multirun
    code = run_script("pretrain", ["hydra.mode=MULTIRUN", "model=tiny,mnii", f"paths.output_dir={tmp_path}",
                                   f"hydra.sweep.dir={tmp_path / 'sweep'}"], monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: model=mnii: no such option (did you mean mini?)"), err[-2000:]
    assert not list(tmp_path.iterdir())


def test_a_config_file_s_hydra_mode_multirun_is_a_sweep_to_the_early_checks(tmp_path, monkeypatch, capsys):
    """A config of one's own that sets hydra: mode: MULTIRUN is a sweep to Hydra (Hydra.get_mode composes it); the
    early checks composed it as one run: its swept values were refused as "Ambiguous value ... add --multirun", and
    a plan's check named the single run's folder as the job's output."""
    from linformer import hydra_start
    from linformer.output_rule import job_outputs
    from tests.conftest import run_script

    own = tmp_path / "own"
    own.mkdir()
    (own / "mysweep.yaml").write_text("defaults:\n  - pretrain\n  - _self_\nhydra:\n  mode: MULTIRUN\n")
    mine = ["--config-dir", str(own), "--config-name", "mysweep", f"paths.output_dir={tmp_path / 'out'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", f"hydra.run.dir={tmp_path / 'run'}"]
    code = run_script("pretrain", [*mine, "model=tiny,mnii"], monkeypatch)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: model=mnii: no such option (did you mean mini?)"), err[-2000:]
    assert [p.name for p in tmp_path.iterdir()] == ["own"]
    assert job_outputs(["python", "scripts/pretrain.py", *mine, "model=tiny"]) == []  # a sweep checks at its start
    # without swept values: a sweep of one job, in hydra.sweep.dir, as Hydra runs it
    modes = []

    def body(cfg):
        from hydra.core.hydra_config import HydraConfig

        modes.append(HydraConfig.get().mode.name)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["pretrain.py", *mine, "model=tiny"])
    hydra_start.hydra_main("pretrain")(body)()
    assert modes == ["MULTIRUN"] and (tmp_path / "sweep").is_dir() and not (tmp_path / "run").exists()


def test_a_hydra_script_s_help_without_a_configs_folder_says_what_it_can(tmp_path, monkeypatch, capsys):
    """Over a wheel without its configs, a Hydra script's --help was one error: line: it prints what the script
    does and its example command, and says that the groups come from the configs folder, with where it looked."""
    from tests.conftest import run_script

    monkeypatch.setenv("LINFORMER_CONFIG_DIR", str(tmp_path / "no-such-configs"))
    code = run_script("prepare_corpus", ["--help"], monkeypatch)
    said = capsys.readouterr()
    assert code == 0 and said.err == "", said.err
    assert said.out.startswith("Tokenize and pack a corpus into blocks of n tokens: python scripts/prepare_corpus.py")
    assert f"none was found: LINFORMER_CONFIG_DIR={tmp_path / 'no-such-configs'} names no folder" in said.out


def test_an_argument_the_locale_could_not_decode_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    """Under LC_ALL=C with UTF-8 mode off, Python keeps a non-ASCII path's bytes as surrogates: the tokenizers library
    refuses such a path (UTF-8 text only), so pretraining ended at its final save with a traceback, after every step.
    A surrogate from a byte that is no UTF-8 (0xff) stands for it under any locale."""
    import linformer.hydra_start as hydra_start

    out = tmp_path / os.fsdecode(b"dir-\xc3\xbc\xff")
    monkeypatch.setattr(sys, "argv", ["pretrain.py", f"paths.output_dir={out}"])
    with pytest.raises(SystemExit) as end:
        hydra_start.hydra_main("pretrain")(lambda cfg: pytest.fail("the job ran"))()
    assert end.value.code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert err.startswith(f"error: paths.output_dir={tmp_path}/dir-\\xc3\\xbc\\xff: this locale") and "PYTHONUTF8=1" in err


@pytest.mark.parametrize("value", ["/tmp/dir-\u00fc/outputs", "/tmp/my \u30c7\u30fc\u30bf/out"])
def test_a_value_hydra_reads_only_quoted_is_refused_saying_how_to_quote_it(value):
    """paths.output_dir=/tmp/dir-ü/outputs was refused with a bare "LexerNoViableAltException" line: a user whose home
    folder has an accent saw no word of the quotes it takes."""
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        compose("pretrain", ["run_name=x", f"paths.output_dir={value}"])
    quoted = f"paths.output_dir='{value}'"
    assert str(err.value).startswith(f"paths.output_dir={value}: Hydra's override grammar reads this value only in "
                                     f'quotes') and f'write it as "{quoted}"' in str(err.value)
    assert compose("pretrain", ["run_name=x", quoted]).paths.output_dir == value  # the advice works


def test_a_clone_s_script_over_a_wheel_names_that_clone_s_configs_in_the_error(tmp_path, monkeypatch):
    """A clone's script run over a wheel stopped saying "set LINFORMER_CONFIG_DIR to a clone's configs/ folder",
    though the script knows its clone: the line names the variable with that clone's configs, to paste."""
    from linformer import configs

    clone = tmp_path / "my clone"
    (clone / "scripts").mkdir(parents=True)
    (clone / "configs" / "paths").mkdir(parents=True)
    (clone / "configs" / "paths" / "default.yaml").write_text("data_mirror: x\n")
    monkeypatch.delenv(configs.CONFIG_DIR_VARIABLE, raising=False)
    monkeypatch.setattr(configs, "REPOSITORY_CONFIGS", tmp_path / "site-packages" / "configs")
    monkeypatch.setattr(configs, "scripts_dir", lambda: clone / "scripts")
    with pytest.raises(ConfigError, match=re.escape(f"or set LINFORMER_CONFIG_DIR='{clone}/configs' (the configs of "
                                                    "the clone whose script runs).")):
        configs.config_dir()
