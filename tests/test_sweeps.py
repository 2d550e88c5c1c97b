"""--multirun: how a sweep names its jobs' folders, what it refuses before Hydra writes anything, and where a relative
Hydra directory goes."""

import contextlib
import logging
import signal
import sys
from pathlib import Path

import pytest

from linformer import hydra_start, runname
from linformer.configs import compose, refuse_bad_interpolations
from linformer.errors import ConfigError
from linformer.runconfig import OPERATIONAL_KEYS

REPO = Path(__file__).resolve().parents[1]
STARTS = {"pretrain": [], "finetune": ["task=sst2", "model_path=m"], "transfer": [],
          "distill": ["task=sst2", "teacher_path=t"]}


def _subdir(name: str, *overrides: str) -> str:
    return str(compose(name, [*STARTS[name], *overrides], with_hydra=True).hydra.sweep.subdir)


def test_two_experiments_of_the_same_run_get_folders_of_their_own():
    """experiment=a,b put both experiments' jobs in one folder (the default run name did not hold the experiment):
    the second was refused as a run with other settings, in a sweep and in two single runs alike."""
    names = [compose("pretrain", [f"experiment={e}"], with_hydra=True) for e in ("figure3_gpu", "mfu_gpu")]
    assert [c.run_name.rsplit("-", 1)[-1] for c in names] == ["figure3_gpu", "mfu_gpu"]
    assert names[0].hydra.run.dir != names[1].hydra.run.dir
    assert names[0].hydra.sweep.subdir != names[1].hydra.sweep.subdir
    assert compose("pretrain", with_hydra=True).run_name.endswith("-s0")  # no experiment: the name as before


@pytest.mark.parametrize("name", sorted(STARTS))
def test_an_operational_key_names_no_sweep_folder(name):
    """trainer.eval_every, trainer.allow_config_change, max_eval_examples... named the sweep's folders: rerunning a
    finished sweep with "raise trainer.max_steps with trainer.allow_config_change=[...]", or a stopped one with
    trainer.save_every added, started a new run from step 0 in a new folder. The keys left out are
    runconfig.OPERATIONAL_KEYS, the ones a run's identity leaves out, not a list of the config's own."""
    plain = _subdir(name)
    given = ["trainer.allow_config_change=[trainer.max_steps]", "trainer.eval_every=15", "trainer.save_every=5",
             "trainer.log_every=3", "logger=none", "experiment_name=x", f"paths.output_dir={REPO / 'elsewhere'}"]
    assert all(key.split("=")[0].split(".")[0] in {k.split(".")[0] for k in OPERATIONAL_KEYS} for key in given)
    assert _subdir(name, *given) == plain
    assert _subdir(name, "trainer.max_steps=45") == plain  # the length, set once: "raise trainer.max_steps" works
    assert _subdir(name, "optim.weight_decay=0.05") != plain  # what the run computes still names it


def test_a_length_the_sweep_varies_names_its_folders(monkeypatch):
    monkeypatch.setattr(runname, "_swept", {"trainer.max_steps"})
    steps = [_subdir("pretrain", f"trainer.max_steps={n}") for n in (30, 60)]
    assert steps[0] != steps[1] and steps[0].endswith("trainer.max_steps=30")


def test_a_key_an_experiments_own_run_name_does_not_hold_names_the_folder():
    """experiment=table2/... names its runs without the lr: a sweep over trainer.lr with it put every lr in one
    folder, the hand-written list saying trainer.lr was in the (default) run name."""
    lrs = [_subdir("finetune", "experiment=table2/n512_k128_kv", f"trainer.lr={lr}") for lr in ("1e-4", "3e-4")]
    assert lrs[0] != lrs[1]
    seeded = _subdir("finetune", "experiment=table2/n512_k128_kv", "seed=1")
    assert "-s1" in seeded and "seed=" not in seeded  # its name holds the seed


def _sweep(monkeypatch, capsys, config: str, *args: str) -> tuple[int, str, list]:
    ran = []
    monkeypatch.setattr(sys, "argv", [f"{config}.py", *args])
    with pytest.raises(SystemExit) as stop:
        hydra_start.hydra_main(config)(ran.append)()
    return stop.value.code, capsys.readouterr().err, ran


@pytest.mark.parametrize("override, said", [
    ("trainer.lrr=1e-4,2e-4", "error: trainer.lrr: no such key (did you mean trainer.lr?)"),
    ("task=sst2,sst3", "error: task=sst3: no such option (did you mean sst2?)"),
    ("+new_key=3,4", "error: +new_key=3: no code reads the key new_key."),
    ("+trainer.lr=1e-4", "error: +trainer.lr=...: trainer.lr is a key already: set it without the '+'."),
])
def test_a_sweeps_mistake_is_one_error_line_before_any_job(override, said, monkeypatch, capsys, tmp_path):
    """Under -m a misspelt key was Hydra's five lines and exit 1 (with its advice to add the key with '+', which
    the next run refused); a misspelt option of a swept group, or an added key, was caught in a job only."""
    code, err, ran = _sweep(monkeypatch, capsys, "finetune", "-m", "model_path=m", override,
                            f"paths.output_dir={tmp_path / 'out'}")
    assert code == 2 and err.startswith(said) and err.count("\n") == 1 and not ran, err
    assert not (tmp_path / "out").exists()


def test_an_added_existing_key_is_one_error_line_in_a_single_run(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["finetune.py", "model_path=m", "+trainer.lr=1e-4",
                                      f"paths.output_dir={tmp_path}"])
    with pytest.raises(SystemExit) as stop:
        hydra_start.hydra_main("finetune")(print)()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: +trainer.lr=...: trainer.lr is a key already") and \
        err.count("\n") == 1


@pytest.mark.parametrize("key", ["hydra.run.dir", "hydra.sweep.dir", "+hydra.sweep.dir"])
def test_a_relative_hydra_directory_is_taken_from_the_repository(key, monkeypatch, tmp_path):
    """hydra.sweep.dir=sweeps/rel went under the working directory while paths.output_dir=... went under the
    clone, and compare_runs.py sweeps/rel (from the clone) then found nothing."""
    monkeypatch.chdir(tmp_path)
    assert hydra_start._from_repository(f"{key}=sweeps/rel") == f"{key}={REPO / 'sweeps' / 'rel'}"
    assert hydra_start._from_repository(f"{key}=/abs/x") == f"{key}=/abs/x"
    assert hydra_start._from_repository("seed=sweeps/rel") == "seed=sweeps/rel"
    assert hydra_start._from_repository(f"{key}='my runs/x'") == f"{key}='{REPO / 'my runs' / 'x'}'"


def test_an_environment_variable_for_a_key_without_a_default_gets_the_decode_hint(monkeypatch):
    """max_train_examples (default null) took '${oc.env:NTRAIN}' as the text '64': "must be a whole number",
    without the hint trainer.lr (a number by default) gets."""
    monkeypatch.setenv("NTRAIN", "64")
    args = ["task=sst2", "model_path=m", "max_train_examples=${oc.env:NTRAIN}"]
    with pytest.raises(ConfigError, match=r"holds null .*max_train_examples=\"\$\{oc.decode:\$\{oc.env:NTRAIN\}\}\""):
        refuse_bad_interpolations(compose("finetune", args), "finetune", args)
    monkeypatch.setenv("NAME", "mine")  # text where text is meant: no hint
    refuse_bad_interpolations(compose("finetune", [*args[:2], "run_name=${oc.env:NAME}"]), "finetune",
                              ["run_name=${oc.env:NAME}"])


def test_an_environment_variable_for_a_flag_gets_the_decode_hint(monkeypatch):
    """task.skip_bad_rows=${oc.env:SKIP} with SKIP=false gives the text 'false', which a flag reads as true (a text
    that is not empty): refused with the oc.decode spelling that reads it as the flag it is meant to be."""
    monkeypatch.setenv("SKIP", "false")
    args = ["task=sst2", "model_path=m", "task.skip_bad_rows=${oc.env:SKIP}"]
    with pytest.raises(ConfigError, match=r"gives the text 'false' where the config holds true or false: .*"
                                          r"task.skip_bad_rows=\"\$\{oc.decode:\$\{oc.env:SKIP\}\}\""):
        refuse_bad_interpolations(compose("finetune", args), "finetune", args)


@pytest.mark.parametrize("signum, said", [(signal.SIGTERM, "a Ctrl-C, or kill -INT"),
                                          (signal.SIGINT, "Ctrl-C again stops at once")])
def test_a_stops_warning_names_what_stops_at_once_for_the_signal_received(signum, said, caplog):
    """A SIGTERM'd run said "Ctrl-C again stops at once": there had been no Ctrl-C, and a second SIGTERM waits for
    the step."""
    from linformer.train.stopping import StopSignal

    with caplog.at_level(logging.WARNING):
        StopSignal()._handle(signum, None)
    assert said in caplog.text and ("again" in caplog.text) == (signum == signal.SIGINT)


@pytest.mark.parametrize("mode, overrides, warned", [
    ("sweep", ["hydra.sweep.dir={repo}/my_sweep"], True),
    ("sweep", ["hydra.sweep.dir={repo}/outputs/my_sweep"], False),
    ("sweep", [], False),                                   # outputs/finetune/multirun
    ("run", ["paths.output_dir={repo}/my_runs"], True),
    ("run", [], False),                                     # outputs/finetune/<run_name>
    ("run", ["paths.output_dir={tmp}"], False),             # outside the clone
])
def test_a_run_directory_git_does_not_ignore_in_the_clone_is_one_warning_line(mode, overrides, warned, capsys,
                                                                              tmp_path):
    """hydra.sweep.dir=my_sweep (taken from the repository, as every relative path) put a sweep's runs where git
    does not ignore them: `git status` listed them and `git add -A` committed checkpoints. Only outputs/ and
    multirun/ are ignored; a folder of one's own elsewhere in the clone gets a warning line naming outputs/."""
    if not (REPO / ".git").exists():
        pytest.skip("no git checkout")
    args = [o.format(repo=REPO, tmp=tmp_path) for o in overrides]
    cfg = compose("finetune", [*STARTS["finetune"], *args], with_hydra=True)
    hydra_start._warn_if_git_sees(cfg, mode)
    err = capsys.readouterr().err
    if warned:
        assert err.startswith(f"warning: the {mode} directory {REPO}/my_") and err.count("\n") == 1, err
        assert "hydra.sweep.dir=outputs/<name>" in err
    else:
        assert err == ""


@pytest.mark.parametrize("name, overrides, subdir", [
    ("corpus", ["data.seed=1", "force=true", "overwrite=true"], "mirror-data.seed=1"),
    ("tokenizer", ["vocab_size=100", "show_progress=false", "overwrite=true"], "mirror-vocab_size=100"),
    ("spectrum", ["overwrite=true"], "multirun/spectrum"),
    ("benchmark", ["threads=2", "progress=false", "overwrite=true"], "-threads=2"),  # after its run_name, a time
])
def test_how_a_command_without_a_run_record_runs_names_no_sweep_folder(name, overrides, subdir):
    """A corpus sweep run again with force=true or overwrite=true (after a job was refused) went to new folders
    (mirror-data.seed=1,overwrite=true), its log apart from the first attempt's: as a training run's operational keys,
    the keys that say how these commands run never name a job's folder; what they compute does."""
    named = str(compose(name, overrides, with_hydra=True).hydra.sweep.subdir)
    assert named == subdir or (name == "benchmark" and named.endswith(subdir) and named.count("=") == 1), named


@pytest.mark.parametrize("between", [True, False], ids=["between jobs", "in a job"])
def test_a_stop_ends_a_sweep_with_its_table_and_128_plus_the_signal(between, monkeypatch, capsys, tmp_path):
    """A Ctrl-C between two jobs of a --multirun (as Hydra sets up the next) ended it with the start-up line ("while
    the command was starting") and no word of its jobs; one in a job, with the job's line alone. Both end with the
    stop's line, the sweep's table (the jobs done, the one stopped, those not started) and 130."""
    from linformer import cli

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    monkeypatch.setattr(cli, "_ended", [], raising=False)
    run_status, looked = hydra_start._run_status, []

    def before_a_job(run):  # each job's record is read before its body, outside it, as in Hydra's set-up
        looked.append(run)
        if between and len(looked) == 2:  # Ctrl-C before job #1: what the script's handler does with it
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        return run_status(run)

    def body(cfg):
        if not between and cfg.seed == 2:
            raise KeyboardInterrupt  # Ctrl-C in job #1

    monkeypatch.setattr(hydra_start, "_run_status", before_a_job)
    monkeypatch.setattr(sys, "argv", ["pretrain.py", "-m", "seed=1,2,3", f"paths.output_dir={tmp_path}"])
    try:
        cli.stop_while_starting()  # as in a script's process
        with pytest.raises(SystemExit) as stop:
            hydra_start.hydra_main("pretrain")(body)()
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 130, err
    said = "1 ran, 2 not started" if between else "1 ran, 1 stopped, 1 not started"
    at = next(i for i, line in enumerate(err) if line.startswith("sweep of"))
    assert err[at - 1] == "stopped: interrupted by SIGINT (Ctrl-C). Run the same command again: it starts over."
    assert err[at].startswith(f"sweep of 3 jobs stopped ({said}), in {tmp_path}")
    assert [line.split(":")[0] for line in err[at + 1:]] == ["  #0 ran", "  #1 not started" if between else
                                                             "  #1 stopped", "  #2 not started"]


def test_a_task_spec_field_names_a_sweep_job_and_its_record_as_typed(monkeypatch, capsys, tmp_path):
    """task.spec.<field>= is a force-add for Hydra's parse (configs.spec_overrides), and that ++ went into the sweep
    job's folder name and run.json's command: a sweep begun before named its jobs `...-s0-task.spec.format=csv`,
    and the same command then trained every job again in a `...-s0-++task.spec.format=csv` folder beside it."""
    typed = ["task=_example", "task.name=rte", "task.data_dir=d", "task.spec.format=csv", "task.spec.files.eval=dev.csv"]
    assert _subdir("finetune", *typed).endswith("-s0-task.spec.files.eval=dev.csv,task.spec.format=csv")
    # a value no other test of this process rewrites from its plain form (FORCED is per process: see as_typed)
    assert _subdir("finetune", *typed[:3], "++task.spec.title=Typed").endswith("-s0-++task.spec.title=Typed")
    seen = []

    def body(cfg):
        from hydra.core.hydra_config import HydraConfig

        seen.append((Path(HydraConfig.get().runtime.output_dir).name, sys.argv[1:]))

    args = ["-m", *typed, "model_path=m", "seed=0,1", f"paths.output_dir={tmp_path}"]
    monkeypatch.setattr(sys, "argv", ["finetune.py", *args])
    with contextlib.suppress(SystemExit):
        hydra_start.hydra_main("finetune")(body)()
    assert [name for name, _ in seen] == [f"rte-m-lr2e-05-s{s}-task.spec.files.eval=dev.csv,task.spec.format=csv"
                                          for s in (0, 1)], capsys.readouterr().err
    assert all(argv == args for _, argv in seen)  # what the job records as its command (train.stopping)
