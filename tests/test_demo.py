"""The demo (scripts/demo.py, linformer/experiments/demo.py) replaces its own runs only: a run directory named by run_name= that the demo did not make stays."""

import json
import re
import shutil

import pytest

from linformer.errors import DataError, LinformerError
from linformer.experiments import demo


def test_the_demo_removes_its_own_runs_and_refuses_anything_else(tmp_path):
    mine = tmp_path / "demo"
    mine.mkdir()
    (mine / "config.yaml").write_text("experiment_name: demo\nrun_name: demo\n")
    demo.remove_demo_run(mine)
    assert not mine.exists()
    demo.remove_demo_run(tmp_path / "absent")  # nothing there: nothing to do

    for name, files in (("notes", {"notes.txt": "mine"}),
                        ("other-run", {"config.yaml": "experiment_name: table2\n", "metrics.jsonl": "{}\n"})):
        victim = tmp_path / name
        victim.mkdir()
        for file, text in files.items():
            (victim / file).write_text(text)
        with pytest.raises(DataError, match=f"{victim} exists and is not a demo run"):
            demo.remove_demo_run(victim)
        assert {p.name: p.read_text() for p in victim.iterdir()} == files


def _demo_pretrain_run(run):
    """A demo pretraining run as it writes its directory: record, metrics, checkpoints, model, TensorBoard's folder
    (logger.project) and an interrupted atomic write's temporary."""
    for folder in ("checkpoints/step-00000040", "model", "linformer"):
        (run / folder).mkdir(parents=True)
    (run / "config.yaml").write_text("experiment_name: demo\nrun_name: demo\nlogger:\n  project: linformer\n")
    for name, text in (("run.json", '{"stage": "pretrain", "status": "stopped"}'), ("metrics.jsonl", "{}\n"),
                       ("model/config.json", "{}"), (".run.json.tmp-4794", "{")):
        (run / name).write_text(text)


@pytest.mark.parametrize("theirs", ["model-step-00000040", "model", "notes.txt"])
def test_the_demo_refuses_to_delete_what_another_command_or_the_user_put_in_its_run(tmp_path, monkeypatch, theirs):
    """export.py of the stopped demo run writes model-step-N (or, for a finetuning run's final step, model/) inside
    it, with export's manifest.json; running the demo again deleted it with the run. Anything its run did not write
    is refused, naming it, before the demo removes any run; without it the run is removed."""
    run = tmp_path / "outputs/pretrain/demo"
    _demo_pretrain_run(run)
    if theirs == "notes.txt":
        (run / theirs).write_text("mine")
    else:
        shutil.rmtree(run / theirs, ignore_errors=True)
        (run / theirs).mkdir()
        (run / theirs / "manifest.json").write_text(json.dumps({"command": "export", "settings": {"step": 40}}))
    finetuned = tmp_path / "outputs/finetune/demo-sst2"
    finetuned.mkdir(parents=True)
    (finetuned / "config.yaml").write_text("experiment_name: demo\n")
    monkeypatch.setattr(demo.frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    what = "not a file a run writes" if theirs == "notes.txt" else "the output of export"
    with pytest.raises(DataError, match=f"^{run / theirs} is {what}, inside the demo's run {run}, .* move it out"):
        demo.run([], under=tmp_path)
    assert (run / theirs).exists() and (run / "checkpoints/step-00000040").is_dir() and finetuned.is_dir()
    shutil.move(run / theirs, tmp_path / theirs)
    demo.remove_demo_run(run)
    assert not run.exists()


def test_every_output_is_checked_before_the_demo_removes_its_own_run(tmp_path, monkeypatch):
    """The demo's earlier pretraining run stays when its finetuning directory holds someone's files."""
    mine = tmp_path / "outputs/pretrain/demo"
    mine.mkdir(parents=True)
    (mine / "config.yaml").write_text("experiment_name: demo\nrun_name: demo\n")
    theirs = tmp_path / "outputs/finetune/demo-sst2"
    theirs.mkdir(parents=True)
    (theirs / "results.json").write_text("{}")
    monkeypatch.setattr(demo.frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    with pytest.raises(DataError, match=f"{theirs} exists and is not a demo run"):
        demo.run([], under=tmp_path)
    assert (mine / "config.yaml").is_file() and (theirs / "results.json").read_text() == "{}"


def test_a_setting_a_run_would_refuse_is_refused_before_the_demo_removes_its_finished_runs(tmp_path, monkeypatch):
    """trainer.max_steps=20 (below the demo's warmup) removed both finished runs, then failed at once, leaving the
    summary of runs that no longer existed. Every run's settings are read first now; a demo that starts removes the
    summary with the runs it describes."""
    from linformer.errors import ConfigError

    runs = [tmp_path / "outputs/pretrain/demo", tmp_path / "outputs/finetune/demo-sst2"]
    for run in runs:
        run.mkdir(parents=True)
        (run / "config.yaml").write_text("experiment_name: demo\n")
    summary = tmp_path / "outputs/demo/summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text("{}")
    monkeypatch.setattr(demo.frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    with pytest.raises(ConfigError, match=r"the warmup \(30 steps.*must be shorter than the run \(20 steps"):
        demo.run(["trainer.max_steps=20"], under=tmp_path)
    assert all((run / "config.yaml").is_file() for run in runs) and summary.is_file()
    monkeypatch.setattr(demo.frontend, "run", lambda *a, **k: (1, {}))  # a job fails: no summary of old runs stays
    assert demo.run([], under=tmp_path) == 1
    assert not summary.exists() and not any(run.exists() for run in runs)


def test_a_symlinked_demo_run_is_refused_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "config.yaml").write_text("experiment_name: demo\n")
    link = tmp_path / "demo"
    link.symlink_to(target)
    with pytest.raises(DataError, match=f"{link} is a symbolic link"):
        demo.remove_demo_run(link)
    assert (target / "config.yaml").is_file()


def test_a_demo_run_whose_record_does_not_read_is_one_line_naming_the_file(tmp_path):
    """The demo reads a run's config.yaml and run.json as rundir does: a damaged one is refused, naming it."""
    from linformer.errors import RunDirError

    run = tmp_path / "demo"
    run.mkdir()
    (run / "config.yaml").write_text("experiment_name: demo\n")
    (run / "run.json").write_text('{"stage": ')
    with pytest.raises(RunDirError, match=f"{run}/run.json cannot be read"):
        demo.others_in_run(run)
    (run / "config.yaml").write_text("experiment_name: [demo\n")
    with pytest.raises(RunDirError, match=f"{run}/config.yaml cannot be read"):
        demo.check_demo_run(run)


def test_the_dry_run_shows_every_job_with_the_demo_runs_to_do_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """The demo's own runs start over, so the dry run lists them as to do even when an earlier demo finished them."""
    monkeypatch.setattr(demo.frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    earlier = tmp_path / "outputs/pretrain/demo"
    earlier.mkdir(parents=True)
    (earlier / "config.yaml").write_text("experiment_name: demo\n")
    (earlier / "summary.json").write_text("{}")
    assert demo.run(["trainer.max_steps=50"], under=tmp_path, dry_run=True) == 0
    out = capsys.readouterr().out
    assert [line.split("]")[0] for line in out.splitlines() if line.startswith("[")] == ["[todo"] * 4
    assert "trainer.max_steps=50" in out and "4 of 4 jobs left" in out
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "outputs", "outputs/pretrain", "outputs/pretrain/demo", "outputs/pretrain/demo/config.yaml",
        "outputs/pretrain/demo/summary.json"]


def test_a_dry_run_under_a_file_says_what_the_run_would_refuse(tmp_path, monkeypatch, capsys):
    """`--under README.md --dry-run` printed the plan and exited 0 without a word, where the run refuses in one line
    (a reproduction's dry run warns)."""
    monkeypatch.setattr(demo.frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    under = tmp_path / "notes.txt"
    under.write_text("mine")
    assert demo.run([], under=under, dry_run=True) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("warning: the run would stop here: ") and str(under) in line, line
    assert under.read_text() == "mine" and sorted(tmp_path.iterdir()) == [under]


def test_a_failed_job_is_exit_1_with_its_error_line_and_no_summary(tmp_path, monkeypatch, capsys):
    from linformer.jobs import JobFailed

    def fail(*a, **k):
        raise JobFailed("pretrain: exit status 3")

    monkeypatch.setattr(demo.frontend, "run_jobs", fail)
    assert demo.run([], under=tmp_path) == 1
    assert "error: pretrain: exit status 3" in capsys.readouterr().err
    assert not (tmp_path / "outputs/demo/summary.json").exists()


@pytest.mark.parametrize(("codes", "status"), [({"tokenizer": 0, "pretrain": 2}, 2), ({"pretrain": 1}, 1),
                                               ({"pretrain": -9}, 137)])
def test_a_failed_job_s_exit_status_is_the_plan_s_as_a_sweep_s(codes, status, tmp_path, monkeypatch, capsys):
    """A plan whose job refused its start (its `error:` line, exit 2) ended with exit 1, where the job run alone, and
    a sweep of it, end with 2: the plan ends with its failed job's status (128 + the signal of a killed one)."""
    from linformer.jobs import JobFailed

    def fail(*a, **k):
        raise JobFailed("job(s) failed:\npretrain: exit status 2", codes)

    monkeypatch.setattr(demo.frontend, "run_jobs", fail)
    assert demo.run([], under=tmp_path) == status
    assert capsys.readouterr().err.startswith("error: job(s) failed:")


def test_a_stopped_demo_is_exit_130_and_says_its_runs_start_over(tmp_path, monkeypatch, capsys):
    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo.frontend, "run_jobs", stop)
    assert demo.run([], under=tmp_path) == 130
    err = capsys.readouterr().err
    assert "stopped: the demo's runs start over" in err
    # a stopped finetune's own line just above says "Resume with the same command (...)": the demo's says why it
    # does not, and which command does
    assert "a checkpoint a job saved is not used by the demo (the job's own command resumes from it)" in err


def test_an_empty_under_is_refused_not_taken_for_the_checkout(capsys, monkeypatch):
    """--under "$OUT" with OUT unset was the current directory: from the checkout, the demo rebuilt the checkout's
    runs. The CLI refuses it in one line (the reproductions share the flag: linformer.argtypes.folder)."""
    from tests.conftest import load_script, run_script

    empty = "error: argument --under: an empty path: give a folder (an unset variable?)"
    # the line and status as the script's command line gives them (a process of its own for an argparse script's
    # line: tests/train/test_export.py's CLI error)
    code = run_script("demo", ["--under", "", "--dry-run"], monkeypatch)
    said = capsys.readouterr().err
    assert code == 2 and said.splitlines()[0] == empty, said[-2000:]
    for script in ("demo", "reproduce_scratch"):
        with pytest.raises(SystemExit) as stop:
            load_script(script).main(["--under", "", "--dry-run"])
        assert stop.value.code == 2 and capsys.readouterr().err.splitlines()[0] == empty, script
    # a mistyped flag was passed to the pretraining job as a Hydra override and failed in Hydra's grammar
    with pytest.raises(SystemExit) as stop:
        load_script("demo").main(["--dryrun"])
    assert stop.value.code == 2 and capsys.readouterr().err.splitlines()[0] == (
        "error: unrecognized arguments: --dryrun (did you mean --dry-run?)")


def test_a_tokenizer_and_corpus_made_from_another_mirror_are_not_done(tmp_path, monkeypatch):
    """A demo re-run with LINFORMER_DATA_MIRROR pointing elsewhere said [done] for the tokenizer and corpus built from
    the old mirror, and pretrained on them: each is done only while its manifest records this config's sources (a
    stale one runs, and its script refuses the other settings in one line), the corpus by their content, and while
    the tokenizer was trained with the data group's settings (data.vocab_size), as pretraining checks them."""
    import json

    from linformer.configs import compose
    from linformer.data.corpus import FORMAT_VERSION
    from linformer.experiments import Places
    from linformer.files.hashing import sha256_file
    from linformer.files.locations import resolve_path

    def outputs(jobs):
        return {j.name: j for j in jobs}

    from linformer.data.tokenizer import tokenizer_hash, train_tokenizer

    from .data.conftest import write_corpus

    first = outputs(demo.plan([], Places.of(tmp_path)))
    wanted = [str(resolve_path(str(s))) for s in compose("corpus", ["data=mirror_slice"]).data.sources]
    tok, corpus = first["tokenizer"].done, first["prepare_corpus"].done
    # a real tokenizer (the corpus's check reads the ids it gives), its record as if trained from the mirror
    train_tokenizer([str(write_corpus(tmp_path / "text.txt"))], str(tok.parent), vocab_size=300, show_progress=False)
    packed = {"format_version": FORMAT_VERSION, "files": {}, "unigram_val_ppl": None, "complete": True,
              "sources": [{"source": w, "path": w, "sha256": sha256_file(w)} for w in wanted],  # a corpus it reads
              "tokenizer_hash": tokenizer_hash(str(tok.parent))}
    trained = {"command": "train_tokenizer", "settings": {"files": wanted, "vocab_size": 8000, "min_frequency": 2,
                                                          "max_lines": 20000}}
    corpus.parent.mkdir(parents=True)
    corpus.write_text("{}")
    for path, record in ((tok, trained), (corpus, {"settings": {"data": {"sources": wanted}}, **packed})):
        (path.parent / "manifest.json").write_text(json.dumps(record))
    jobs = outputs(demo.plan([], Places.of(tmp_path)))
    assert jobs["tokenizer"].finished and jobs["prepare_corpus"].finished
    jobs = outputs(demo.plan(["data.vocab_size=4000"], Places.of(tmp_path)))  # pretraining would refuse the tokenizer
    assert not jobs["tokenizer"].finished and not jobs["prepare_corpus"].finished
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path / "another_mirror"))
    jobs = outputs(demo.plan([], Places.of(tmp_path)))
    assert not jobs["tokenizer"].finished and not jobs["prepare_corpus"].finished


def test_a_tokenizer_trained_from_the_same_texts_in_another_mirror_is_done(tmp_path):
    """The demo's tokenizer job compared its sources' paths: with the data mirror moved it ran train_tokenizer, which
    refused, and the demo stopped, while the corpus job said [done]. The tokenizer is done while it was trained from
    the same texts (sha256), at any paths, as train_tokenizer and the corpus compare them."""
    import json

    from linformer.configs import compose
    from linformer.experiments import Places
    from linformer.files.hashing import sha256_file
    from linformer.files.locations import resolve_path

    tok = demo.plan([], Places.of(tmp_path))[0].done
    wanted = [str(resolve_path(str(s))) for s in compose("tokenizer", ["data=mirror_slice"]).data.sources]
    elsewhere = [{"source": f"/old/mirror/{i}", "path": f"/old/mirror/{i}", "sha256": sha256_file(w)}
                 for i, w in enumerate(wanted)]
    tok.parent.mkdir(parents=True)
    tok.write_text("{}")
    trained = {"command": "train_tokenizer", "settings": {"files": ["/old/mirror/*"], "vocab_size": 8000,
                                                          "min_frequency": 2, "max_lines": 20000}, "sources": elsewhere}
    (tok.parent / "manifest.json").write_text(json.dumps(trained))
    assert demo.plan([], Places.of(tmp_path))[0].finished
    (tok.parent / "manifest.json").write_text(json.dumps({**trained, "sources": elsewhere[:-1]}))
    assert not demo.plan([], Places.of(tmp_path))[0].finished


def test_the_command_a_changed_vocab_size_prints_runs_as_printed(tmp_path):
    """The demo's "not done" line for a changed data.vocab_size printed a train_tokenizer.py command without its data
    group, which failed as printed ("data.vocab_size: no such key"): the jobs' configs are composed outside Hydra, so
    the commands their checks print name the group the plan composed (data=mirror_mini)."""
    import json
    import shlex

    from linformer.configs import compose
    from linformer.experiments import Places

    tok = demo.plan(["data=mirror_mini"], Places.of(tmp_path))[0].done
    tok.parent.mkdir(parents=True)
    tok.write_text("{}")
    (tok.parent / "manifest.json").write_text(json.dumps({"command": "train_tokenizer",
                                                          "settings": {"vocab_size": 8000}}))
    job = demo.plan(["data=mirror_mini", "data.vocab_size=4000"], Places.of(tmp_path))[0]
    printed = re.search(r"train it again from these settings \((python scripts/train_tokenizer\.py .*?)\) and",
                        job.damage).group(1)
    argv = shlex.split(printed)
    assert argv[2] == "data=mirror_mini"
    assert compose("tokenizer", argv[2:]).data.vocab_size == 4000  # it composes: the command works as printed


def test_a_demo_run_in_use_by_a_live_process_is_not_removed(tmp_path, monkeypatch):
    """A second demo on the same folder removed the first one's runs while it was finetuning, and the first died on
    its vanished metrics.jsonl."""
    import json
    import os
    import socket

    from linformer.files.runs import LOCK

    run = tmp_path / "outputs/finetune/demo-sst2"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("experiment_name: demo\n")
    (run / LOCK).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))  # held: this process
    monkeypatch.setattr(demo.frontend, "run_jobs", lambda *a, **k: pytest.fail("a job started"))
    with pytest.raises(DataError, match=r"demo-sst2 is in use by a running process"):
        demo.run([], under=tmp_path)
    assert (run / "config.yaml").is_file()


def test_a_hydra_flag_after_the_double_dash_is_one_line_saying_the_demo_takes_overrides(capsys):
    """demo.py --dry-run -- --config-dir x was Hydra's lexer error (LexerNoViableAltException) naming pretrain.yaml."""
    from tests.conftest import load_script

    with pytest.raises(SystemExit) as stop:
        load_script("demo").main(["--dry-run", "--", "trainer.max_steps=5", "--config-dir", "x"])
    assert stop.value.code == 2 and capsys.readouterr().err.splitlines() == [
        ("error: --config-dir: the demo takes Hydra overrides for its pretraining job only (key=value, e.g. "
         "trainer.max_steps=100), not a flag")]


def test_a_data_override_makes_the_tokenizer_and_corpus_the_pretraining_reads(tmp_path):
    """demo.py data=mirror_mini built mirror_slice's tokenizer and corpus, then the pretraining failed on the
    missing mirror_mini tokenizer, with advice (run again) that could not help."""
    from linformer.configs import compose

    jobs = {s.name: s for s in demo.plan(["data=mirror_mini", "data.n=64"], demo.Places.of(tmp_path))}
    pretrain = compose("pretrain", jobs["pretrain"].argv[2:])
    corpus = compose("corpus", jobs["prepare_corpus"].argv[2:])
    tokenizer = compose("tokenizer", jobs["tokenizer"].argv[2:])
    assert corpus.out_dir == pretrain.corpus_dir and tokenizer.out_dir == pretrain.tokenizer_dir
    assert corpus.data.n == pretrain.data.n == 64


def _finished_demo_runs(tmp_path):
    """The records a finished demo's runs leave (summary.json, results.json), as their runs write them."""
    pre, fin = tmp_path / "pretrain", tmp_path / "finetune"
    for run in (pre, fin):
        run.mkdir()
    (pre / "summary.json").write_text(json.dumps({"initial_val_loss": 9.0, "final_val_loss": 7.2465, "steps": 300,
                                                  "tokens": 614400, "tokens_per_s": 3400.2}))
    (fin / "results.json").write_text(json.dumps({"metrics": {"accuracy": 0.776}, "num_train_examples": 20000,
                                                  "num_eval_examples": 872}))
    return [pre, fin]


@pytest.mark.parametrize("damage", ["missing", "torn", "no accuracy", "accuracy not a number"])
def test_a_missing_or_damaged_run_record_in_the_demo_summary_is_one_line_naming_it(tmp_path, capsys, damage):
    """The demo's summary read its runs' perplexity and accuracy unchecked: a results.json gone, torn or without its
    accuracy ended the demo in a traceback (KeyError, TypeError). Each is one error naming the file (and the key)."""
    runs = _finished_demo_runs(tmp_path)
    out = tmp_path / "summary.json"
    assert demo.summarize([], runs, {}, out)["sst2_dev_accuracy"] == 0.776
    results = runs[1] / "results.json"
    if damage == "missing":
        results.unlink()
    elif damage == "torn":
        results.write_text('{"metrics": {"accu')
    else:
        value = {} if damage == "no accuracy" else {"accuracy": "n/a"}
        results.write_text(json.dumps({"metrics": value, "num_train_examples": 20000, "num_eval_examples": 872}))
    why = {"missing": "is missing", "torn": "cannot be read", "no accuracy": "has no metrics.accuracy",
           "accuracy not a number": "has metrics.accuracy: 'n/a', not a number"}[damage]
    with pytest.raises(LinformerError, match=rf"^{re.escape(str(results))} {why}"):
        demo.summarize([], runs, {}, out)


@pytest.mark.parametrize("before", [None, 7.0])
def test_the_summary_says_not_measured_without_a_start_evaluation(tmp_path, capsys, before):
    """trainer.eval_at_start=false leaves initial_val_loss null: the summary says so, as pretraining's own line does,
    and a loss is turned into a perplexity by the package's one function (inf from 50, not an overflow)."""
    pre, fin = tmp_path / "pre", tmp_path / "fin"
    pre.mkdir(), fin.mkdir()
    (pre / "summary.json").write_text(json.dumps({
        "initial_val_loss": before, "final_val_loss": 60.0, "final_val_ppl": None, "steps": 3, "tokens": 1000,
        "tokens_per_s": 10.5}))
    (fin / "results.json").write_text(json.dumps({
        "metrics": {"accuracy": 0.5}, "num_train_examples": 8, "num_eval_examples": 4}))
    summary = demo.summarize([], [pre, fin], {"pretrain": 1.0}, tmp_path / "summary.json")
    out = capsys.readouterr().out
    if before is None:
        assert summary["val_ppl_before_pretraining"] is None
        assert "not measured before pretraining -> inf after 3 steps" in out
    else:
        assert summary["val_ppl_before_pretraining"] == pytest.approx(1096.6, abs=0.1)
        assert "1,096.6 before pretraining -> inf after 3 steps" in out


def test_the_summary_s_wall_times_say_which_kept_jobs_they_leave_out(tmp_path, capsys):
    """Run again after a stop, the demo keeps its tokenizer and corpus: its wall times (and total) are the jobs this
    command ran, and the printed line said nothing of the ones left out."""
    from linformer.jobs import Job

    runs = _finished_demo_runs(tmp_path)
    jobs = [Job(name, ["python"], tmp_path / name) for name in ("tokenizer", "prepare_corpus", *demo.RUNS)]
    summary = demo.summarize(jobs, runs, {"pretrain": 47.0, "finetune_sst2": 98.1, "total": 146.1},
                             tmp_path / "summary.json")
    assert summary["wall_time_s"]["total"] == 146.1
    assert ("pretrain 47.0, finetune_sst2 98.1, total 146.1 (this command's jobs; tokenizer, prepare_corpus kept "
            "from an earlier one, not counted)") in capsys.readouterr().out
    every = {"tokenizer": 1.0, "prepare_corpus": 2.0, "pretrain": 3.0, "finetune_sst2": 4.0, "total": 10.0}
    demo.summarize(jobs, runs, every, tmp_path / "summary.json")
    assert capsys.readouterr().out.rstrip().endswith("finetune_sst2 4.0, total 10.0")


def test_the_demo_reads_each_source_text_once_for_all_its_done_checks(tmp_path, monkeypatch):
    """The tokenizer's and the corpus's done-checks each hashed the demo's source text, and each check ran as the plan
    was shown (twice) and again as the runner started: the demo read its corpus text several times before its first
    job. One run reads it once (``hashing.hashed_once``), dry or not."""
    import gzip

    from linformer.data.corpus import FORMAT_VERSION
    from linformer.data.tokenizer import tokenizer_hash, train_tokenizer
    from linformer.experiments import Places
    from linformer.files import hashing
    from linformer.jobs import JobFailed

    from .data.conftest import write_corpus

    source = tmp_path / "mirror/pretrain/wikipedia/enwiki_extracted.txt.gz"
    source.parent.mkdir(parents=True)
    source.write_bytes(gzip.compress(write_corpus(tmp_path / "text.txt").read_bytes()))
    monkeypatch.setenv("LINFORMER_DATA_MIRROR", str(tmp_path / "mirror"))
    jobs = {j.name: j for j in demo.plan([], Places.of(tmp_path))}
    tok, corpus = jobs["tokenizer"].done, jobs["prepare_corpus"].done
    train_tokenizer([str(tmp_path / "text.txt")], str(tok.parent), vocab_size=300, show_progress=False)
    texts = [{"source": str(source), "path": str(source), "sha256": hashing.sha256_file(source)}]
    trained = {"command": "train_tokenizer", "sources": texts,
               "settings": {"files": [str(source)], "vocab_size": 8000, "min_frequency": 2, "max_lines": 20000}}
    packed = {"format_version": FORMAT_VERSION, "files": {}, "unigram_val_ppl": None, "complete": True,
              "sources": texts, "tokenizer_hash": tokenizer_hash(str(tok.parent)),
              "settings": {"data": {"sources": [str(source)]}}}
    corpus.parent.mkdir(parents=True)
    corpus.write_text("{}")
    (tok.parent / "manifest.json").write_text(json.dumps(trained))
    (corpus.parent / "manifest.json").write_text(json.dumps(packed))

    reads = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        reads.append(str(path))
        return real_open(path, *args, **kwargs)

    def runner_start(plan, *args, **kwargs):  # what run_jobs decides before its first job, then no job runs
        assert [s.name for s in plan if s.finished] == ["tokenizer", "prepare_corpus"]
        raise JobFailed("stopped before the first job")

    monkeypatch.setattr(hashing, "open", counting_open, raising=False)  # sha256_file's reads
    monkeypatch.setattr(demo.frontend, "run_jobs", runner_start)
    monkeypatch.setattr(demo, "check_plan", lambda argvs, cwd=None: None)  # these records are not the commands' own outputs
    assert demo.run([], under=tmp_path, dry_run=True) == 0
    assert reads.count(str(source)) == 1
    reads.clear()
    assert demo.run([], under=tmp_path) == 1
    assert reads.count(str(source)) == 1


def test_the_demo_s_validation_scores_its_whole_split_without_a_warning(tmp_path):
    """The demo's pretraining took trainer.eval_blocks' default (320), above the 162 blocks its mirror slice holds
    out, and warned in every demo that it was scoring fewer; it scores the whole split (null), as it means to."""
    from linformer.configs import compose
    from linformer.runconfig import PretrainSpec

    jobs = {s.name: s for s in demo.plan([], demo.Places.of(tmp_path))}
    assert PretrainSpec.of(compose("pretrain", jobs["pretrain"].argv[2:])).trainer.eval_blocks is None
