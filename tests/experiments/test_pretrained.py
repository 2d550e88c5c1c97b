"""make reproduce-pretrained: the plan of both profiles, as its dry run prints it."""

import json
import sys
from pathlib import Path

import pytest

from linformer.experiments import pretrained as exp
from linformer.experiments.frontend import span
from linformer.jobs import _check, wanted
from linformer.rundir import chosen_on_reported

REPO = Path(__file__).resolve().parents[2]


def _value(argv: list[str], key: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(f"{key}=")]
    return value


@pytest.mark.parametrize("name", sorted(exp.PROFILES))
def test_every_row_is_finetuned_on_each_task_from_the_model_its_job_builds(name):
    p = exp.PROFILES[name]
    jobs = exp.plan(p, python="python")
    _check(jobs)  # unique names, every need known
    by_name = {s.name: s for s in jobs}
    rows = exp.rows(p)
    per_sharing = sum(len(p.policy_ks.get(policy, p.ks)) for policy in p.policies)
    assert len(rows) == 1 + len(p.sharings) * per_sharing and set(p.ks) == {64, 128}
    # every profile has the target rows and the comparisons; cpu12k runs the paper's slice at k = 128 only
    assert "local" in p.policies and set(p.policies) <= set(exp.POLICIES) and "layerwise" in p.sharings
    assert set(p.policies) == {"cpu12k": {"local", "converted", "paper"}, "cpu": {"local", "converted", "paper",
                                                                                "landmarks"},
                               "gpu": {"local", "converted", "paper"}}[name]
    assert {(r.policy, r.k) for r in rows if r.policy == "paper"} == (
        {("paper", 128)} if name == "cpu12k" else {("paper", 128), ("paper", 64)})
    assert set(p.tasks) == ({"imdb"} if name == "cpu12k" else {"sst2", "imdb"})
    # the converted default's exact keys are the target rows'; the others name "none" explicitly, so that the
    # converted default does not reach them
    assert exp.POLICIES["local"]["local_window"] > 0 and exp.POLICIES["local"]["global_positions"]
    assert all(exp.POLICIES[name]["local_window"] == 0 and exp.POLICIES[name]["global_positions"] == []
               for name in ("converted", "paper"))
    assert exp.POLICIES["landmarks"] == {**exp.POLICIES["local"], "landmark_pooling": True}
    # the corpus and the models are intermediate: a fresh clone whose records are all kept rebuilds none of them
    assert {s.name for s in jobs if s.intermediate} == {"corpus"} | {row.prepare for row in rows}
    for row in rows:
        prepare = by_name[row.prepare]
        if row.policy is None:  # the teacher: convert writes the directory finetuning reads
            assert _value(prepare.argv, "out_dir") == str(row.model_dir) and "model.attention=full" in prepare.argv
        else:  # transfer writes <output_dir>/transfer/<run_name>/model, and its summary marks it done
            assert row.model_dir == Path("outputs/transfer") / _value(prepare.argv, "run_name") / "model"
            assert prepare.done == exp.REPO / row.model_dir.parent / "summary.json"
            assert int(_value(prepare.argv, "model.projected_dim")) == row.k
            for key, value in exp.POLICIES[row.policy].items():
                assert _value(prepare.argv, f"model.{key}") == str(value).lower().replace(" ", "")
        for task in exp.row_tasks(p, row):
            for seed in exp.row_seeds(p, row):
                s = by_name[f"finetune {exp.run_name(p, task, row, seed)}"]
                assert s.needs == (row.prepare,) and _value(s.argv, "model_path") == str(row.model_dir)
                # fixed subsets: every row and seed is evaluated on the same examples (paired comparisons)
                assert _value(s.argv, "subset_seed") == "0" and _value(s.argv, "seed") == str(seed)
                # done when the run's records are kept where the table reads them (committed)
                kept = exp.REPO / exp.RECORDS / _value(s.argv, "run_name")
                assert s.done == kept / "results.json" and s.keep is not None
                # a kept record chosen on the reported split does not count as done: the job runs again
                if s.done.is_file() and chosen_on_reported(json.loads(s.done.read_text())):
                    assert not s.finished
    assert len(p.seeds) == 3
    # every row a target reads has 3 seeds (experiments.pretrained.SEEDS); the others none but their own
    from linformer.experiments.pretrained import SEEDS

    finetunes = [s.name for s in jobs if s.name.startswith("finetune")]
    for row in rows:
        count = sum(f"-{row.slug}-s" in n for n in finetunes)
        assert count == len(exp.row_tasks(p, row)) * (SEEDS if row.read_by_targets else len(p.other_rows_seeds)), row.slug
    # the landmarks row runs on IMDB only (SST-2's sentences are shorter than k); every other row on every task
    assert {r.slug: exp.row_tasks(p, r) for r in rows if exp.row_tasks(p, r) != tuple(p.tasks)} == (
        {f"k{k}-layerwise-landmarks-tr": ("imdb",) for k in p.ks} if name == "cpu" else {})
    assert [r.slug for r in rows if r.read_by_targets] == ["full"] + [f"k{k}-{sh}-local-tr" for sh in p.sharings
                                                                      for k in p.ks]
    imdb = p.tasks["imdb"]
    assert imdb.max_length == exp.N and (imdb.eval is None or imdb.eval >= 2000)
    # every seed of the rows the targets decide on (teacher, local policy, first sharing) comes first; then seed 0
    # of every other row before any of their other seeds: an interrupted run decides its targets, then has a table
    order = [s.name for s in jobs if s.name.startswith("finetune")]
    deciding = {"full"} | {f"k{k}-{p.sharings[0]}-local-tr" for k in p.ks}
    decides = [any(f"-{slug}-s" in n for slug in deciding) for n in order]
    assert decides == sorted(decides, reverse=True) and sum(decides) == len(p.tasks) * SEEDS * len(deciding)
    rest = order[sum(decides):]
    first_other = min((i for i, n in enumerate(rest) if not n.endswith("-s0")), default=len(rest))
    assert all(n.endswith("-s0") for n in rest[:first_other])
    assert len(rest[:first_other]) == sum(len(exp.row_tasks(p, r)) for r in rows if r.slug not in deciding)


def test_keeping_a_run_copies_its_records_and_the_model_card_whole(tmp_path):
    run, model = tmp_path / "run", tmp_path / "model"
    run.mkdir()
    model.mkdir()
    assert not exp.keep_records(run, tmp_path / "kept")  # not finished: nothing kept
    (model / "linformer_card.json").write_text('{"transfer": {"steps": 3}}')
    (run / "results.json").write_text(f'{{"task": "sst2", "model_path": "{model}"}}')
    (run / "eval_predictions.json").write_text('{"labels": [1], "predictions": [1]}')
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "metrics.jsonl").write_text("{}\n" * 1000)  # large: stays behind
    assert exp.keep_records(run, tmp_path / "kept")
    kept = tmp_path / "kept"
    assert sorted(p.name for p in kept.iterdir()) == ["config.yaml", "eval_predictions.json", "linformer_card.json",
                                                      "results.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "model", "run"]  # no temporary left


def test_kept_results_name_a_model_in_the_repository_relative_to_it(tmp_path, monkeypatch):
    """Kept records are committed: results.json named the model by an absolute path of the machine that made it
    (/work/main/outputs/...). Inside the repository it is named relative to it (and read back from there); outside,
    as it was. The card is still found and kept."""
    from linformer.files import locations

    monkeypatch.setattr(locations, "repo_root", lambda: tmp_path.resolve())
    for model, named in ((tmp_path / "outputs" / "model", "outputs/model"),
                         (tmp_path.parent / f"{tmp_path.name}-elsewhere", None)):
        run, kept = tmp_path / "run", tmp_path / "kept"
        model.mkdir(parents=True)
        run.mkdir(exist_ok=True)
        (model / "linformer_card.json").write_text('{"transfer": {"steps": 3}}')
        (run / "results.json").write_text(json.dumps({"task": "sst2", "model_path": str(model), "seed": 0}))
        (run / "eval_predictions.json").write_text('{"labels": [1], "predictions": [1]}')
        assert exp.keep_records(run, kept)
        results = json.loads((kept / "results.json").read_text())
        assert results == {"task": "sst2", "model_path": named or str(model.resolve()), "seed": 0}
        assert json.loads((kept / "linformer_card.json").read_text()) == {"transfer": {"steps": 3}}
        assert Path(locations.resolve_path(results["model_path"])) == model.resolve()


def test_dry_run_prints_every_job_once_and_the_minutes_of_those_left(capsys):
    import re
    import shlex

    profile = exp.PROFILES["gpu"]
    assert exp.reproduce(profile, jobs=2, dry_run=True, report_only=False) == 0
    out = capsys.readouterr().out
    jobs = exp.plan(profile)
    for job in jobs:  # every job once, as the command it runs
        assert out.count(f"] {job.name}: {shlex.join(['python', *job.argv[1:]])}\n") == 1, job.name
    todo = wanted(jobs, {s.name for s in jobs if s.finished})  # kept records chosen on the reported split run again
    minutes = span(todo, lambda s: exp.estimated_minutes(profile, s), 2)
    assert re.search(rf"{len(todo)} of {len(jobs)} jobs left: about {minutes:.0f} min with 2 at a time", out)
    assert "--layout pretrained --profile gpu" in out


def test_only_a_row_plans_its_runs_and_what_they_need(capsys):
    """--only ROW: a lending's unit of work, the row's transfer and corpus and its runs, nothing of another row; the
    dry run says whether the row fits --stop-after by the estimates."""
    sys.path.insert(0, str(REPO / "scripts"))
    import reproduce_pretrained

    profile = exp.PROFILES["gpu"]
    row = "k64-headwise-paper-tr"
    jobs = {s.name for s in exp.plan(profile, only=[row])}
    assert jobs == {"corpus", "transfer k64-headwise-paper", *exp.row_runs(profile)[row]}
    assert reproduce_pretrained.main(["--profile", "gpu", "--only", row, "--dry-run", "--stop-after", "30"]) == 0
    out = capsys.readouterr().out
    assert f"[row] {row}: " in out and ": fits --stop-after 30" in out and "[row] full:" not in out


def test_the_plan_reads_the_same_progress_from_any_working_directory(tmp_path, monkeypatch):
    """The jobs' finished files are looked up in the repository, not the caller's directory (the scripts no
    longer change directory to make relative paths work)."""
    monkeypatch.chdir(exp.REPO)
    here = [s.finished for s in exp.plan(exp.PROFILES["cpu"])]
    monkeypatch.chdir(tmp_path)
    assert [s.finished for s in exp.plan(exp.PROFILES["cpu"])] == here and any(here)
    assert all(s.done.is_absolute() for s in exp.plan(exp.PROFILES["cpu"]))


def test_the_runs_a_table_lacks_are_its_finetuning_runs_not_kept_yet():
    """Not the corpus or the transferred models: those are rebuilt wherever the runs go on, so a table made on
    another machine than its runs' lists only what it lacks."""
    gpu = exp.PROFILES["gpu"]
    kept = {p.name for p in (exp.REPO / exp.RECORDS).glob("tp-gpu-*")
            if not chosen_on_reported(json.loads((p / "results.json").read_text()))}  # those run again
    missing = exp.missing_runs(gpu)
    assert kept and set(missing) == exp.planned_runs(gpu) - kept and len(missing) == len(set(missing))
