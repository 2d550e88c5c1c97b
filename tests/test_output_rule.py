"""The output rule's registry, walked: every script is declared, and every declared output, holding a user's file or
folder, is refused in one `error:` line naming it, with the user's files untouched and nothing else written."""

import gzip
import hashlib
import re
from pathlib import Path

import pytest

from linformer.configs import compose
from linformer.output_rule import COMMANDS, DIR, FILES
from tests.conftest import run_script
from tests.train.conftest import _synthetic_corpus, compose_finetune, compose_pretrain, write_sst2_fixture

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
USER = b"a user's own bytes\n"


def test_every_script_is_declared():
    scripts = {p.stem for p in SCRIPTS.glob("*.py")}
    assert sorted(scripts - set(COMMANDS)) == [], "declare the new script's outputs in linformer/output_rule.py"
    assert sorted(set(COMMANDS) - scripts) == []
    for command in COMMANDS.values():
        assert command.outputs, command.script
        for out in command.outputs:
            assert "{out}" in " ".join(out.example), (command.script, out.where)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A mirror, tokenizer, corpus, full-attention pretraining run and a finetuning run of it, all tiny."""
    from linformer.data import prepare_corpus, train_tokenizer
    from linformer.train.finetune import finetune
    from linformer.train.pretrain import pretrain

    root = tmp_path_factory.mktemp("rule_inputs")
    text = _synthetic_corpus(root / "corpus.txt")
    mirror = root / "mirror"
    (mirror / "pretrain/wikipedia").mkdir(parents=True)
    (mirror / "pretrain/wikipedia/enwiki_extracted.txt.gz").write_bytes(gzip.compress(text.read_bytes()))
    sst2 = write_sst2_fixture(mirror / "glue/sst2")
    (mirror / "imdb").mkdir()
    for split in ("train", "test"):
        (mirror / f"imdb/{split}.csv").write_text("text,label\n\"a good film\",1\n\"a bad film\",0\n")
    (mirror / "MANIFEST.md").write_text("fixture\n")
    tok = train_tokenizer([str(text)], str(root / "tokenizer"), vocab_size=300, min_frequency=1, show_progress=False)
    prepare_corpus([str(text)], tok, str(root / "corpus"), n=32, val_fraction=0.1, num_proc=1)
    tiny = {"tokenizer_dir": tok, "corpus_dir": str(root / "corpus")}
    runs = root / "runs"
    pretrain(compose_pretrain(tiny, "trainer.max_steps=3", "model.attention=full"), runs / "pretrain/full")
    finetune(compose_finetune("task=sst2", f"task.data_dir={sst2}", f"model_path={runs / 'pretrain/full'}",
                              "trainer.epochs=1", "task_cache_dir=null"), runs / "finetune/ft")
    return {"mirror": str(mirror), "tokenizer": tok, "corpus": str(root / "corpus"), "corpus_text": str(text),
            "pretrained": str(runs / "pretrain/full"), "model": str(runs / "pretrain/full/model"),
            "finetuned": str(runs / "finetune/ft"), "sst2": str(sst2), "runs": str(runs)}


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def plant(target: Path, kind: str) -> None:
    """A user's file where a file output lands, else a user's folder (a file of theirs inside)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if kind == FILES or target.suffix in (".xz", ".whl", ".log", ".tgz"):
        target.write_bytes(USER)
    else:
        target.mkdir()
        (target / "notes.txt").write_bytes(USER)


CASES = [(c.script, i) for c in COMMANDS.values() for i, _ in enumerate(c.outputs)]


@pytest.mark.parametrize(("script", "index"), CASES, ids=[f"{s}-{i}" for s, i in CASES])
def test_a_declared_output_holding_a_users_files_is_refused(script, index, inputs, tmp_path, monkeypatch, capsys):
    out = COMMANDS[script].outputs[index]
    if out.needs:
        pytest.importorskip(out.needs, reason=f"the example needs the optional {out.needs}")
    root = tmp_path / "out"
    root.mkdir()
    target = root / out.lands
    plant(target, out.kind)
    before = _tree(root)
    argv = [a.format(out=root, **inputs) for a in out.example]
    monkeypatch.chdir(tmp_path)
    code = run_script(script, argv, monkeypatch)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and lines, f"{script} {argv}: exit {code}\n{err[-3000:]}"
    assert str(target) in lines[0] or str(target.resolve()) in lines[0], lines[0]
    assert _tree(root) == before, f"{script} wrote or changed files under {root}"
    if out.kind in (DIR, FILES):  # the advice names the setting or flag that chose the path, as the user gives it
        key = f"{out.where}=" if COMMANDS[script].config else out.where.split()[-1]
        assert f"choose another {key}" in lines[0], lines[0]
    flag = re.search(r"pass (\S+) to replace", lines[0])
    if flag:  # the fix it names is one this command takes
        if COMMANDS[script].config:
            assert flag.group(1).split("=")[0] in compose(COMMANDS[script].config, []), lines[0]
        else:
            assert run_script(script, ["--help"] if script != "gpu_carry" else ["pack", "--help"], monkeypatch) == 0
            assert flag.group(1) in capsys.readouterr().out, lines[0]


def test_foreign_says_why_for_each_kind_and_accepts_a_commands_own_output(tmp_path):
    from linformer.files.atomic import write_json
    from linformer.files.outputs import MANIFEST, made_by
    from linformer.output_rule import RUN, foreign

    assert foreign(tmp_path / "missing", DIR, "train_tokenizer") is None
    empty = tmp_path / "empty"
    empty.mkdir()
    assert foreign(empty, RUN, "pretrain") is None and foreign(empty, DIR, "convert") is None
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    assert foreign(theirs, RUN, "pretrain") == "is not a run directory but holds notes.txt"
    assert foreign(theirs, DIR, "convert") == "is a directory with other content (notes.txt)"
    write_json(theirs / MANIFEST, made_by("convert", {}))
    assert foreign(theirs, DIR, "convert") is None  # its own output, whatever its settings
    assert foreign(theirs, DIR, "export") == "holds the output of convert"
    (theirs / "config.yaml").write_text("seed: 0\n")
    assert foreign(theirs, RUN, "pretrain") is None  # a run's directory: its own start decides
    # a Hydra command's output files: `where` names their folder (benchmark's out_dir), their names are the command's
    report = tmp_path / "t3"
    report.write_text("mine")
    assert foreign(report, FILES, "benchmark") == "is a regular file, not a folder"
    report.unlink()
    report.mkdir()
    (report / "t3.md").write_text("mine")  # the benchmark's own start checks each of its files
    assert foreign(report, FILES, "benchmark") is None
    assert foreign(tmp_path / "afile", DIR, "x") is None
    (tmp_path / "afile").write_text("x")
    assert foreign(tmp_path / "afile", DIR, "x") == "is a regular file"


def test_foreign_names_what_was_put_beside_an_output_as_the_commands_own_check_does(tmp_path):
    """A plan's check said "holds the output of convert" of an export's out_dir where the user's notes lay beside
    convert's output, while export's own start refuses it for the notes, which no overwrite flag replaces: the plan
    words it as the command's check does, from one reading of the folder."""
    from linformer.errors import OutputPathError
    from linformer.files.atomic import write_json
    from linformer.files.outputs import MANIFEST, check_output_dir, made_by
    from linformer.output_rule import foreign

    out = tmp_path / "out"
    out.mkdir()
    (out / "weights.bin").write_text("w")
    write_json(out / MANIFEST, {**made_by("convert", {}), "entries": ["weights.bin"]})
    assert foreign(out, DIR, "export") == "holds the output of convert"
    (out / "notes.txt").write_text("the user's")
    clause = "holds notes.txt beside convert's own output, which it did not write"
    assert foreign(out, DIR, "convert") == foreign(out, DIR, "export") == clause
    for record in (made_by("convert", {}), made_by("export", {})):
        with pytest.raises(OutputPathError, match=f"out {clause}: move it elsewhere"):
            check_output_dir(out, record, overwrite=True)


READ_CASES = {  # script: (the input copied to <tmp>/in, argv; {in} is that copy, {out} the output path given)
    "convert": ("model", ["model_path={in}", "model.attention=linformer", "model.projected_dim=8", "out_dir={out}",
                          "overwrite=true"]),
    "prepare_corpus": ("corpus_text", ["data=mirror_slice", "data.sources=[{in}]", "data.n=32",
                                       "tokenizer_dir={tokenizer}", "paths.output_dir={tmp}/hydra", "out_dir={out}",
                                       "overwrite=true"]),
    "train_tokenizer": ("corpus_text", ["data=mirror_slice", "data.sources=[{in}]", "vocab_size=300",
                                        "paths.output_dir={tmp}/hydra", "out_dir={out}", "overwrite=true"]),
    "export": ("finetuned", ["{in}", "--out", "{out}", "--overwrite"]),
    "dashboard": ("runs", ["--outputs", "{in}", "--logdir", "{out}", "--mirror-only", "--overwrite"]),
}


@pytest.mark.parametrize("holds", [False, True], ids=["is the input", "holds the input"])
@pytest.mark.parametrize("script", sorted(READ_CASES))
def test_an_output_that_is_or_holds_what_the_command_reads_is_refused_even_with_overwrite(
        script, holds, inputs, tmp_path, monkeypatch, capsys):
    import shutil

    key, argv = READ_CASES[script]
    folder = tmp_path / "inputs"
    given = folder / "in" / Path(inputs[key]).name
    given.parent.mkdir(parents=True)
    (shutil.copytree if Path(inputs[key]).is_dir() else shutil.copy)(inputs[key], given)
    out = folder if holds else (given if given.is_dir() else given.parent)
    before = _tree(folder)
    monkeypatch.chdir(tmp_path)
    code = run_script(script, [a.format(**{**inputs, "in": given, "out": out, "tmp": tmp_path}) for a in argv],
                      monkeypatch)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 2 and lines and "which this command reads" in lines[0], lines
    assert _tree(folder) == before


def test_a_plan_job_s_outputs_are_read_with_hydra_s_config_flags(tmp_path, monkeypatch):
    """A plan's check read --config-name alone (a parser of its own) and skipped a job with any other flag: a job
    with one's own configs (--config-dir) had its outputs unchecked until it started. Hydra's parser reads both."""
    from linformer.output_rule import job_outputs

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "mybench.yaml").write_text("defaults:\n  - benchmark\n  - _self_\nout_dir: mine\n")
    monkeypatch.chdir(tmp_path)  # --config-dir is Hydra's: from the working directory
    assert [p for _, p, _ in job_outputs(["python", "scripts/benchmark.py", "-cd", "extra", "-cn", "mybench"])] == [
        REPO / "mine"]
    assert job_outputs(["python", "scripts/benchmark.py", "-m", "out_dir=a,b"]) == []  # a sweep: checked at its start


def test_a_plan_job_s_relative_config_folders_are_read_from_where_the_job_runs(tmp_path, monkeypatch):
    """A job's relative --config-path (from its script's folder, as Hydra takes it) was not read at all, so its
    outputs went unchecked until it started; a relative --config-dir was read from the plan's working directory, not
    the job's (run_jobs' cwd): a folder the job finds was refused, or another folder read."""
    from linformer.errors import ConfigError
    from linformer.output_rule import check_plan, job_outputs

    here, there = tmp_path / "here", tmp_path / "there"
    (there / "extra").mkdir(parents=True)
    here.mkdir()
    (there / "extra" / "mybench.yaml").write_text("defaults:\n  - benchmark\n  - _self_\nout_dir: mine\n")
    monkeypatch.chdir(here)
    assert [p for _, p, _ in job_outputs(["python", "scripts/benchmark.py", "-cd", "extra", "-cn", "mybench"],
                                         cwd=there)] == [REPO / "mine"]
    # the clone's configs as another configs folder (--config-path ../configs: from scripts/)
    assert [p for _, p, _ in job_outputs(["python", "scripts/benchmark.py", "--config-path", "../configs",
                                          "out_dir=ours"], cwd=REPO)] == [REPO / "ours"]
    with pytest.raises(ConfigError, match="--config-path ../nowhere, from the script's folder"):
        check_plan([["python", "scripts/benchmark.py", "--config-path", "../nowhere"]], cwd=REPO)
