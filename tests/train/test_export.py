import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModel

from linformer.errors import CheckpointError, RunDirError
from linformer.modeling.card import SIDECAR, conversion_info, write_model_card
from linformer.train.export import export_run
from linformer.train.finetune import finetune
from tests.modeling.conftest import run_usage

from .conftest import compose_finetune, write_sst2_fixture

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def carded_run(tmp_path_factory, pretrained_run):
    """A finetuning run of two epochs (13 updates each) from a model with a card, checkpointed after each epoch."""
    root = tmp_path_factory.mktemp("export")
    source = root / "source"
    shutil.copytree(pretrained_run / "model", source)
    write_model_card(source, conversion_info(str(pretrained_run / "model"), AutoModel.from_pretrained(source), "tiny"))
    cfg = compose_finetune("task=sst2", f"task.data_dir={write_sst2_fixture(root / 'sst2')}", f"model_path={source}",
                           f"task_cache_dir={root / 'cache'}", "trainer.save_every=13", "run_name=exported")
    finetune(cfg, root / "run")
    return root / "run"


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(model_dir / "model.safetensors")


def _same_tokenizer(exported: Path, kept: Path) -> None:
    """The same tokenizer, saved the same way (its tokenizer.json's truncation state is a trace of its last call)."""
    from linformer.data.tokenizer import tokenizer_hash

    assert tokenizer_hash(str(exported)) == tokenizer_hash(str(kept))
    config = "tokenizer_config.json"
    assert json.loads((exported / config).read_text()) == json.loads((kept / config).read_text())


def test_export_of_the_best_step_is_the_model_save_best_kept(carded_run, tmp_path):
    results = json.loads((carded_run / "results.json").read_text())
    done = export_run(carded_run, tmp_path / "best", step=results["best_step"])
    assert done["step"] == results["best_step"] and done["metrics"] == results["metrics"]
    mine, kept = _weights(tmp_path / "best"), _weights(carded_run / "best")
    assert mine.keys() == kept.keys() and all(torch.equal(mine[k], kept[k]) for k in kept)
    _same_tokenizer(tmp_path / "best", carded_run / "best")
    card = json.loads((tmp_path / "best" / SIDECAR).read_text())
    assert card["model"]["class"] == "LinformerForSequenceClassification" and card["name"] == "exported"
    assert card["results"]["sst2"]["metrics"] == results["metrics"]
    [finetuning] = card["finetuning"]
    assert (finetuning["task"], finetuning["step"], finetuning["run_steps"]) == ("sst2", results["best_step"], 26)
    assert finetuning["start_weights_sha256"] == results["start_weights_sha256"] is not None
    assert finetuning["reported"] == results["reported"] and finetuning["selection"] == results["selection"]
    # the model the run kept has the same card: it is publishable as it is
    kept_card = json.loads((carded_run / "best" / SIDECAR).read_text())
    assert kept_card == {**card, "name": carded_run.name}
    text = (carded_run / "best" / "README.md").read_text()
    assert "It was then finetuned on sst2 (below)." in text and "## Finetuning" in text
    assert "before use" not in text and "E and F were learned with the other weights in finetuning" in text
    manifest = json.loads((tmp_path / "best" / "manifest.json").read_text())
    assert manifest["command"] == "export" and manifest["settings"]["step"] == results["best_step"]


def test_the_usage_on_a_finetuned_models_card_loads_its_folder(carded_run, tmp_path, monkeypatch):
    """The card of an export and of the run's best/ said from_pretrained("<run name>"), a name that is neither the
    folder nor a hub repo (it asked the hub, offline here): the snippet names the folder, and run from the folder's
    parent it loads the model and its tokenizer."""
    export_run(carded_run, tmp_path / "served")
    for model_dir in (tmp_path / "served", carded_run / "best"):
        loaded = run_usage(model_dir, monkeypatch)
        assert type(loaded["model"]).__name__ == "LinformerForSequenceClassification"
        assert loaded["tokenizer"]("a b")["input_ids"]
        assert f'from_pretrained("{model_dir.name}")' in (model_dir / "README.md").read_text()


def test_an_exported_checkpoint_that_the_run_does_not_report_has_no_result_on_its_card(carded_run, tmp_path):
    results = json.loads((carded_run / "results.json").read_text())
    other = 13 if results["best_step"] != 13 else 26
    export_run(carded_run, tmp_path / "other", step=other)
    card = json.loads((tmp_path / "other" / SIDECAR).read_text())
    assert card["results"] == {} and card["finetuning"][0]["step"] == other
    assert card["finetuning"][0]["reported"] is None  # never scored on the reported split
    assert "a checkpoint of the run, not the model it reports" in (tmp_path / "other" / "README.md").read_text()


def test_an_export_leaves_the_callers_generator_as_it_found_it(carded_run, tmp_path):
    """The model rebuilt before the checkpoint's weights replace its fresh ones drew from torch's global generator, so
    a notebook's next draw depended on whether it had exported; transformers' from_pretrained draws nothing."""
    torch.manual_seed(7)
    export_run(carded_run, tmp_path / "exported")
    assert torch.equal(torch.rand(4), (torch.manual_seed(7), torch.rand(4))[1])


def test_export_defaults_to_the_final_step_in_the_run(carded_run):
    done = export_run(carded_run)
    assert done["final"] and done["step"] == 26 and done["out"] == carded_run / "model"
    final = _weights(carded_run / "model")
    state = load_file(carded_run / "checkpoints" / "step-00000026" / "model.safetensors")
    assert all(torch.equal(final[k], state[k]) for k in state)
    assert export_run(carded_run)["out"] == carded_run / "model"  # its own earlier output is replaced
    shutil.rmtree(carded_run / "model")


def test_a_run_without_save_best_says_how_to_export_and_exports_its_final_model(tmp_path, pretrained_run,
                                                                               monkeypatch):
    """Its next: pastes whole, the run directory one word even with a space in it (the reason a comment), worded
    for the caller: scripts/export.py's command after the script, export_run's call after a call from Python (a
    notebook was told to run the script)."""
    import shlex

    run = tmp_path / "my runs" / "run's"
    cfg = compose_finetune("task=sst2", f"task.data_dir={write_sst2_fixture(tmp_path / 'sst2')}",
                           f"model_path={pretrained_run}", f"task_cache_dir={tmp_path / 'cache'}",
                           "trainer.save_best=false", "trainer.epochs=1")
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/site-packages/ipykernel_launcher.py", "-f", "kernel.json"])
    finetune(cfg, run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["model_dir"] is None
    assert summary["next"].startswith("export_run(")
    assert summary["next"].endswith("# linformer.train.export; trainer.save_best=false kept no model: this saves the "
                                    "final one")
    from linformer.train.summary import export_next  # the same words where a script ran it
    from tests.conftest import as_command
    as_command(monkeypatch, [str(REPO / "scripts" / "finetune.py")])
    said = export_next(run, "trainer.save_best=false kept no model: this saves the final one")
    assert shlex.split(said, comments=True) == ["python", "scripts/export.py", str(run)]
    assert said.endswith("  # trainer.save_best=false kept no model: this saves the final one")
    done = eval(summary["next"], {"export_run": export_run})  # the line pasted into the notebook
    assert done["final"] and done["out"] == run / "model" and not (run / "best").exists()
    # started from a model without a card (a pretraining run's): the exported classifier gets one all the same, as
    # the run's best/ does, naming its start's weights, what it was finetuned on and scored, and its task in config.json
    card = json.loads((run / "model" / SIDECAR).read_text())
    assert card["start"] == "weights" and card["source"]["weights_sha256"] and card["finetuning"][0]["task"] == "sst2"
    assert card["results"]["sst2"]["metrics"] and (run / "model" / "README.md").is_file()
    assert json.loads((run / "model" / "config.json").read_text())["finetuning_task"] == "sst2"


def test_damaged_weights_fall_back_to_the_previous_checkpoint_then_fail_naming_the_file(carded_run, tmp_path,
                                                                                       capsys):
    """The fall-back says which newer step is damaged and why, in one warning line: an export of step 13 that said
    only "not the run's final step" read as the run having stopped there."""
    run = tmp_path / "run"
    shutil.copytree(carded_run, run)
    for step, expected in ((26, 13), (13, None)):
        weights = run / "checkpoints" / f"step-{step:08d}" / "model.safetensors"
        size = weights.stat().st_size
        with weights.open("ab") as f:
            f.write(b"\0")
        if expected is None:
            with pytest.raises(CheckpointError, match=r"step-00000013: model.safetensors"):
                export_run(run)
        else:
            done = export_run(run)
            assert done["step"] == expected and done["out"] == run / "model-step-00000013" and not done["final"]
            warning = (f"warning: {run / 'checkpoints'} holds a newer checkpoint than step 13, damaged: step 26 "
                       f"(model.safetensors: {size + 1:,} bytes, {size:,} written); exporting step 13, the newest "
                       "intact one.")
            assert capsys.readouterr().err.splitlines() == [warning]
    with pytest.raises(CheckpointError, match=r"^step=7: .* \(steps: 13, 26\)"):
        export_run(run, step=7)


def test_a_pretraining_run_stopped_early_exports_the_model_its_checkpoint_holds(tiny_data, tmp_path):
    """The model of a run that never finished (SIGTERM, a lost machine): a checkpoint's weights in the MLM model
    the run's config builds. Its final step re-exported equals the model the finished run saved."""
    from transformers import AutoModelForMaskedLM

    from linformer.train.pretrain import pretrain

    from .conftest import compose_pretrain

    run = tmp_path / "run"
    pretrain(compose_pretrain(tiny_data, "trainer.max_steps=6", "trainer.save_every=3",
                              "pad_vocab_to_multiple_of=64"), run)
    with pytest.raises(RunDirError, match=rf"step 6 is the run's final step: its model is {run / 'model'} already"):
        export_run(run)
    again = export_run(run, tmp_path / "final", step=6)
    assert again["final"] and again["metrics"] is None
    saved, mine = _weights(run / "model"), _weights(tmp_path / "final")
    assert mine.keys() == saved.keys() and all(torch.equal(mine[k], saved[k]) for k in saved)
    assert json.loads((tmp_path / "final" / "config.json").read_text()) == json.loads(
        (run / "model" / "config.json").read_text())
    done = export_run(run, step=3)
    assert done["out"] == run / "model-step-00000003" and not done["final"]
    model = AutoModelForMaskedLM.from_pretrained(done["out"])
    state = load_file(run / "checkpoints" / "step-00000003" / "model.safetensors")
    assert all(torch.equal(model.state_dict()[k], state[k]) for k in state) and not model.config.sparse_prediction
    # the tokenizer saved as the run's model/ has it: model_max_length = n, so pipelines cut inputs to n
    _same_tokenizer(done["out"], run / "model")
    assert json.loads((done["out"] / "tokenizer_config.json").read_text())["model_max_length"] == 32


def test_a_run_whose_checkpoints_were_pruned_says_so_what_it_keeps_and_what_writes_a_checkpoint(pretrained_run,
                                                                                                 tmp_path):
    """Export of a run pruned by scripts/prune_checkpoints.py said "<run>/checkpoints holds no complete checkpoint:
    nothing to export": it names the pruning (when, how many), the models the run keeps, and training as what writes
    a checkpoint again, with --step N alike."""
    import re

    from linformer.train.checkpoint import prune_checkpoints

    run = tmp_path / "run"
    shutil.copytree(pretrained_run, run)
    prune_checkpoints(run)
    removed = json.loads((run / "run.json").read_text())["checkpoints_removed"]
    said = (f"{run} has no checkpoint to export: its checkpoints were removed by prune_checkpoints.py ({removed}). It "
            f"keeps its models: the model of its final step is {run}/model. A checkpoint is written only by training: "
            "run the run's command (its settings are its config.yaml) again under another run_name.")
    for step, asked in ((None, ""), (6, "step=6: ")):
        with pytest.raises(CheckpointError, match=f"^{re.escape(asked + said)}$"):
            export_run(run, tmp_path / "out", step)
    assert not (tmp_path / "out").exists()


def test_prune_leaves_a_run_whose_checkpoints_is_a_symlink_in_one_line_and_goes_on(pretrained_run, tmp_path,
                                                                                      monkeypatch, capsys):
    """A run whose checkpoints/ was a symlink (someone else's folder) ended prune_checkpoints.py in rmtree's
    traceback, and the runs after it were not pruned: it is kept in one line, nothing behind the link touched, the
    others pruned, and the summary counts the run kept (exit 0: a folder of runs usually holds some left as they are)."""
    import re

    from linformer.train.checkpoint import prune_checkpoints
    from tests.conftest import run_script

    linked, other, theirs = tmp_path / "linked", tmp_path / "other", tmp_path / "theirs"
    shutil.copytree(pretrained_run, linked)
    shutil.copytree(pretrained_run, other)
    shutil.move(linked / "checkpoints", theirs)
    (linked / "checkpoints").symlink_to(theirs)
    before = sorted((p.relative_to(theirs), p.stat().st_mtime_ns) for p in theirs.rglob("*"))
    said = f"{linked / 'checkpoints'} is a symlink (to {theirs}), not a folder of the run: nothing pruned"
    with pytest.raises(RunDirError, match=f"^{re.escape(said)}"):
        prune_checkpoints(linked)
    capsys.readouterr()
    code = run_script("prune_checkpoints", [str(linked), str(other)], monkeypatch)  # as its command line runs it
    out = subprocess.CompletedProcess([], code, *capsys.readouterr())
    assert out.returncode == 0, out.stderr
    assert f"kept {linked}: {said}" in out.stdout and f"pruned {other}: " in out.stdout
    assert "Traceback" not in out.stderr and "kept 1 as it was" in out.stdout.splitlines()[-1]
    assert not (other / "checkpoints").exists() and "checkpoints_removed" not in (linked / "run.json").read_text()
    assert sorted((p.relative_to(theirs), p.stat().st_mtime_ns) for p in theirs.rglob("*")) == before


def test_prune_checks_a_model_saved_without_checksums_against_its_checkpoints_and_keeps_what_it_cannot_check(
        pretrained_run, tmp_path):
    """A run saved by an earlier version has a model/ without manifest.json (no checksums): prune passed over the
    intact-model check in silence and removed the checkpoints even of a damaged model, the only copies that could
    write it again. Now its weights are compared with its checkpoints': equal, it is pruned; a flipped byte is
    damaged, and the run kept; with its step's checkpoint gone it cannot be checked, and the run is kept too."""
    from linformer.train.checkpoint import prune_checkpoints

    runs = {name: tmp_path / name for name in ("intact", "damaged", "unchecked")}
    for run in runs.values():
        shutil.copytree(pretrained_run, run)
        (run / "model" / "manifest.json").unlink()  # as an earlier version saved it
    weights = runs["damaged"] / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 1  # in the last tensor's data: the file still reads
    weights.write_bytes(bytes(data))
    shutil.rmtree(runs["unchecked"] / "checkpoints" / "step-00000006")
    with pytest.raises(RunDirError, match=r"model .*damaged \(its weights differ from those of its step 6 "
                                          r"checkpoint.*export\.py .* --overwrite"):
        prune_checkpoints(runs["damaged"])
    with pytest.raises(RunDirError, match=r"records no checksums \(saved by an earlier version\) and no checkpoint "
                                          r"left holds its weights \(its step is 6; the checkpoints kept are of step "
                                          r"4\).*nothing pruned"):
        prune_checkpoints(runs["unchecked"])
    assert (runs["damaged"] / "checkpoints" / "step-00000006").is_dir()
    assert (runs["unchecked"] / "checkpoints" / "step-00000004").is_dir()
    assert prune_checkpoints(runs["intact"])[0] == 2 and not (runs["intact"] / "checkpoints").exists()


def test_prune_tells_a_run_left_running_by_a_dead_process_from_a_live_one(pretrained_run, tmp_path):
    """A run stopped by an earlier version kept `status: running` in run.json, and prune said it "is running":
    a run no process holds (its lock) is stopped; one a live process holds is running, named with the process."""
    import os

    from linformer.files.locks import holder_record
    from linformer.train.checkpoint import prune_checkpoints

    run = tmp_path / "run"
    shutil.copytree(pretrained_run, run)
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps(dict(info, status="running")))
    with pytest.raises(RunDirError, match=r"is stopped \(its run.json says running, but no process holds it.*"
                                          r"not complete: its checkpoints are what continues it"):
        prune_checkpoints(run)
    (run / ".lock").write_text(json.dumps(holder_record()))  # this process: live
    with pytest.raises(RunDirError, match=rf"is running \(process {os.getpid()} on .*not complete"):
        prune_checkpoints(run)
    assert (run / "checkpoints").is_dir()


def test_prune_says_a_run_pruned_before_was_already_pruned_and_does_not_count_it(pretrained_run, tmp_path,
                                                                                   monkeypatch, capsys):
    """A second prune_checkpoints.py over a run printed "pruned <run>: 0 checkpoints, 0.0 MB" and counted it in the
    summary's runs: it says the run was already pruned, with run.json's record of when and what, leaves that record
    as it was, and counts only the runs it pruned now."""
    from linformer.train.checkpoint import prune_checkpoints
    from tests.conftest import run_script

    earlier, fresh = tmp_path / "earlier", tmp_path / "fresh"
    shutil.copytree(pretrained_run, earlier)
    shutil.copytree(pretrained_run, fresh)
    prune_checkpoints(earlier)
    record = (earlier / "run.json").read_text()
    removed = json.loads(record)["checkpoints_removed"]
    assert run_script("prune_checkpoints", [str(tmp_path)], monkeypatch) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"already pruned {earlier}: {removed}" in out
    assert any(line.startswith(f"pruned {fresh}: ") for line in out) and not (fresh / "checkpoints").exists()
    assert out[-1].startswith("freed ") and out[-1].endswith(" MB in 1 run; 1 already pruned")
    assert (earlier / "run.json").read_text() == record


def test_export_errors_name_the_arguments_as_the_caller_gives_them(pretrained_run, tmp_path, monkeypatch):
    """export_run called from Python said "--step 7" and "(--out DIR exports it again)": the script's options where
    scripts/export.py runs (stopping.run_from_a_script, as a stop's resume advice tells them apart), the function's
    keywords otherwise; and the output it would replace names overwrite=True or --overwrite alike."""
    import re

    from linformer.errors import OutputPathError
    from linformer.files.atomic import write_json
    from linformer.files.outputs import MANIFEST, made_by
    from tests.conftest import as_command

    (tmp_path / "out").mkdir()
    write_json(tmp_path / "out" / MANIFEST, made_by("convert", {}))  # another command's output: the flag replaces it
    for argv0, step, out, overwrite in (("-c", "step=7", "out=DIR", "overwrite=True"),
                                        (str(REPO / "scripts" / "export.py"), "--step 7", "--out DIR", "--overwrite")):
        as_command(monkeypatch, [argv0])  # "-c": no script, Python code calling the function
        with pytest.raises(CheckpointError, match=rf"^{re.escape(step)}: .* has no checkpoint of that step"):
            export_run(pretrained_run, step=7)
        with pytest.raises(RunDirError, match=re.escape(f"({out} exports it again)")):
            export_run(pretrained_run)
        with pytest.raises(OutputPathError) as refused:
            export_run(pretrained_run, tmp_path / "out")
        assert str(refused.value).endswith(f"pass {overwrite} to replace it.")
    assert [p.name for p in (tmp_path / "out").iterdir()] == [MANIFEST]


def test_transfer_and_distillation_runs_are_refused(tmp_path):
    (tmp_path / "config.yaml").write_text("seed: 0\n")
    (tmp_path / "run.json").write_text(json.dumps({"stage": "distill"}))
    with pytest.raises(RunDirError, match="is a distill run: export takes finetuning and pretraining runs"):
        export_run(tmp_path)


def test_cli_error_is_one_line_naming_the_path(tmp_path, monkeypatch, capsys):
    """A folder that does not exist said "is not a run directory (no config.yaml)"; and a relative path is read from
    the repository from any working directory, as the docs say, naming where it looked."""
    from tests.conftest import load_script

    def said(where: str, relative: bool) -> list[str]:
        return [f"error: {where}: give a finetuning or pretraining run's directory, outputs/finetune/<run_name> or "
                "outputs/pretrain/<run_name>" + (" (relative to the repository)." if relative else ".")]

    (tmp_path / "empty").mkdir()
    empty = str(tmp_path / "empty")
    # the line and status as a shell sees them: the one argparse script run in a process of its own for its error
    # line (the others' run in-process, tests.conftest.run_script)
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "export.py"), empty],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == said(f"{empty} is not a run directory (no config.yaml)", False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        load_script("export").main(["outputs/nowhere"])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == said(f"{REPO / 'outputs' / 'nowhere'} does not exist", True)


def test_after_pruning_the_advice_for_a_run_s_gone_or_damaged_model_names_what_is_left_not_export(pretrained_run,
                                                                                                tmp_path):
    """Once prune_checkpoints.py removed a run's checkpoints, a gone or damaged model/ (and a model exported from
    one of them) still said "write it again from the run's final checkpoint: python scripts/export.py ...", which
    then failed for want of a checkpoint. It says the checkpoints were removed, and what is left to do: restore the
    model from a copy, or train the run again under another run_name."""
    import re

    from linformer.files.runs import complete_checkpoints, step_of
    from linformer.modeling.loading import resolve_model_path
    from linformer.rundir import model_problem
    from linformer.train.checkpoint import prune_checkpoints

    run = tmp_path / "run"
    shutil.copytree(pretrained_run, run)
    exported = export_run(run, tmp_path / "early", step=step_of(complete_checkpoints(run)[0]))
    prune_checkpoints(run)
    removed = json.loads((run / "run.json").read_text())["checkpoints_removed"]
    advice = (f"no checkpoint of the run is left to write it from (its checkpoints were removed by "
              f"prune_checkpoints.py ({removed})): restore it from a copy, or train it again under another run_name "
              f"(its settings are {run}/config.yaml)")
    weights = run / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert model_problem(run).endswith(f"is damaged (model.safetensors: 1,000 bytes, "
                                       f"{(pretrained_run / 'model' / 'model.safetensors').stat().st_size:,} "
                                       f"written): {advice}.")
    with pytest.raises(CheckpointError, match=f"restore them: {re.escape(advice)}\\.$"):
        resolve_model_path(str(run))
    shutil.rmtree(run / "model")
    assert model_problem(run) == f"{run} is complete, but its model {run}/model is gone (deleted or moved): {advice}."
    with pytest.raises(CheckpointError, match=f"is a complete run whose model/ is gone: {re.escape(advice)}\\.$"):
        resolve_model_path(str(run))
    early = exported["out"] / "model.safetensors"
    early.write_bytes(early.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=re.escape(
            f"restore them: it was exported from step {exported['step']} of {run.resolve()}, whose checkpoint of "
            f"that step is gone (its checkpoints were removed by prune_checkpoints.py ({removed})): restore it from a "
            "copy, or train the run again under another run_name.")):
        resolve_model_path(str(exported["out"]))


def test_a_relative_run_dir_is_taken_from_the_repository_whatever_the_working_directory(tiny_data, tmp_path,
                                                                                        monkeypatch):
    """As every path of a spec and the scripts' run directories: a notebook elsewhere wrote the run under its own
    working directory while the summary's next: command (model_path=<the same relative path>) read the repository."""
    from linformer.files import locations
    from linformer.runconfig import PretrainSpec
    from linformer.train.pretrain import pretrain

    from .conftest import compose_pretrain

    spec = PretrainSpec.read(compose_pretrain(tiny_data, "trainer.max_steps=3", "trainer.warmup_steps=1",
                                           "trainer.eval_blocks=4"))
    repo, notebook = tmp_path / "repo", tmp_path / "notebook"
    repo.mkdir()
    notebook.mkdir()
    monkeypatch.setattr(locations, "repo_root", lambda: repo)
    monkeypatch.chdir(notebook)
    summary = pretrain(spec, "runs/rel")
    assert (repo / "runs" / "rel" / "run.json").is_file() and not list(notebook.iterdir())
    assert summary["run_dir"] == str(repo / "runs" / "rel")
    assert "model_path=runs/rel" in summary["next"]  # named as the record names it: read from the repository
    recorded = json.loads((repo / "runs" / "rel" / "summary.json").read_text())
    assert (recorded["run_dir"], recorded["model_dir"]) == ("runs/rel", "runs/rel/model")
    done = export_run("runs/rel", "exported")
    assert Path(done["out"]) == repo / "exported" and (repo / "exported" / "config.json").is_file()


def test_a_run_recorded_with_retired_keys_exports_and_a_bad_recorded_key_names_its_file(carded_run, tmp_path):
    """A run recorded by a version whose config.yaml held trainer.lr_schedule and trainer.eval_batches (retired keys:
    its identity and a resume drop them) was refused by export, naming neither the key's file nor, for eval_batches,
    its successor. It exports; a key today's settings refuse names the run's config.yaml."""
    import yaml

    from linformer.errors import ConfigError

    run = tmp_path / "old"
    shutil.copytree(carded_run, run, ignore=shutil.ignore_patterns("best", "model-step-*"))
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["trainer"] |= {"lr_schedule": "linear", "eval_batches": 2}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    assert export_run(run, tmp_path / "out", step=13)["step"] == 13
    config["trainer"]["warmup_step"] = 1
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=rf"^{run / 'config.yaml'} \(the run's recorded config\): "
                                          r"trainer.warmup_step is not a trainer setting"):
        export_run(run, tmp_path / "again", step=13)


def test_the_export_that_prune_advises_for_an_older_runs_damaged_model_writes_it(pretrained_run, tmp_path):
    """A run saved by an earlier version: its config.yaml lacks the keys today's configs added since (logger.project
    among them) and its model/ has no manifest.json. prune found its model damaged and advised `export.py <run> --out
    <run>/model --overwrite`, which failed twice over: "logger.project is not set" (an operational key, which export
    does not need, now read as today's configs give it), then model/ "is no output of this package's" (the run's own
    model/ is the run's to replace). The advice writes the model again, and prune then prunes the run."""
    import re

    import yaml

    from linformer.train.checkpoint import prune_checkpoints

    run = tmp_path / "old"
    shutil.copytree(pretrained_run, run)
    (run / "model" / "manifest.json").unlink()
    config = yaml.safe_load((run / "config.yaml").read_text())
    del config["logger"]["project"], config["imports"], config["paths"]["reports_dir"]
    for key in ("sync_every", "save_every_minutes", "compile", "compile_backend", "compile_mode", "eval_blocks"):
        del config["trainer"][key]
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    weights = run / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-100] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(RunDirError, match="damaged") as refused:
        prune_checkpoints(run)
    advised = re.search(r"export\.py (\S+) --out (\S+) --overwrite", str(refused.value))
    assert advised and Path(advised[2]) == run / "model"
    done = export_run(advised[1], advised[2], overwrite=True)
    assert done["final"] and done["out"] == run / "model"
    assert all(torch.equal(v, _weights(pretrained_run / "model")[k]) for k, v in _weights(run / "model").items())
    assert prune_checkpoints(run)[0] == 2 and not (run / "checkpoints").exists()
    assert yaml.safe_load((run / "config.yaml").read_text()) == config  # the run's record is read, never rewritten


def test_a_model_exported_before_its_run_moved_is_written_again_from_the_run_where_it_is_now(pretrained_run,
                                                                                          tmp_path):
    """An export's manifest names its run by the path it had then. Once the run and the model moved together (a
    clone, an outputs folder), a damaged model was said to have lost its checkpoints ("whose checkpoint of that step
    is gone"), though the run keeps them. The advice names the run where it is now, found from where the model is (in
    the run, the export's default place, or beside it under the same folders), and pasting it writes the model again,
    as that run's export; a run gone for good is said to be gone, with the export to give it where it is."""
    import re

    from linformer.modeling.loading import resolve_model_path

    old, new = tmp_path / "old", tmp_path / "new"
    run = old / "outputs" / "pretrain" / "p"
    shutil.copytree(pretrained_run, run)
    inside = export_run(run, step=4)["out"]  # <run>/model-step-00000004
    apart = export_run(run, old / "exports" / "p4", step=4)["out"]
    old.rename(new)
    run = new / "outputs" / "pretrain" / "p"
    for model in (new / inside.relative_to(old), new / apart.relative_to(old)):
        weights = model / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:1000])
        with pytest.raises(CheckpointError) as refused:
            resolve_model_path(str(model))
        advice = re.search(r"write it again: python scripts/export\.py (\S+) --step 4 --out (\S+)\.$",
                           str(refused.value))
        assert advice and Path(advice[1]) == run and Path(advice[2]) == model, str(refused.value)
        assert export_run(advice[1], advice[2], step=4)["out"] == model  # no overwrite flag: the run's own export
        assert json.loads((model / "manifest.json").read_text())["settings"]["run"] == str(run)
        state = load_file(run / "checkpoints" / "step-00000004" / "model.safetensors")
        assert all(torch.equal(_weights(model)[k], state[k]) for k in state)
    shutil.rmtree(run)
    weights = new / "exports" / "p4" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=re.escape(
            f"it was exported from step 4 of {run}, which is gone (deleted, or moved apart from the model: no run of "
            f"that name is found around it): export it again from where the run is now (python scripts/export.py "
            f"RUN --step 4 --out {new / 'exports' / 'p4'} --overwrite)")):
        resolve_model_path(str(new / "exports" / "p4"))


def test_a_module_a_run_folder_names_is_never_imported_by_its_export(carded_run, tmp_path, monkeypatch):
    """export imported the modules a run's config.yaml names under imports:, found in the folder it starts in too, so
    a shared or edited run folder ran code on whoever exported it. It imports only what the caller names, and a
    recorded module not named is refused naming it and the flag."""
    from linformer.errors import ConfigError

    run = tmp_path / "shared" / "run"
    shutil.copytree(carded_run, run)
    config = run / "config.yaml"
    config.write_text(config.read_text() + "\nimports:\n- cg8_export_marker\n" if "imports:" not in config.read_text()
                      else config.read_text().replace("imports: []", "imports:\n- cg8_export_marker"))
    marker = tmp_path / "MARK"
    (tmp_path / "shared" / "cg8_export_marker.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path / "shared")
    monkeypatch.setattr(sys, "path", list(sys.path))  # import_modules appends the working directory
    with pytest.raises(ConfigError, match=rf"^{run / 'config.yaml'} records imports=\['cg8_export_marker'\] .*"
                                          r"give imports=\['cg8_export_marker'\] to import it"):
        export_run(run, tmp_path / "exported")
    assert not marker.exists() and "cg8_export_marker" not in sys.modules


def test_an_out_that_is_another_runs_model_is_refused_even_with_overwrite(carded_run, pretrained_run, tmp_path):
    """--out <another run>/model --overwrite replaced that run's model with this run's export: its rerun still said
    "already complete" and its manifest's checksums were the export's. Another run's model/ or best/ is refused in
    one line, overwrite or not; the run's own model/ is still its export's to replace."""
    from linformer.errors import OutputPathError
    from linformer.files.outputs import MANIFEST

    other = tmp_path / "other"
    shutil.copytree(pretrained_run, other)
    before = (other / "model" / MANIFEST).read_bytes()
    with pytest.raises(OutputPathError, match=rf"^{other / 'model'} is the model/ of the run {other}, which that "
                                              r"run's records describe: choose another out= \(overwrite=True never "
                                              r"replaces another run's model"):
        export_run(carded_run, other / "model", overwrite=True)
    assert (other / "model" / MANIFEST).read_bytes() == before
    own = tmp_path / "own"
    shutil.copytree(carded_run, own)
    export_run(own, own / "model")
    assert export_run(own, own / "model", overwrite=True)["out"] == own / "model"
