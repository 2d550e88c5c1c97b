"""The mini reproduction's plan (linformer/experiments/mini.py) and its CLI, without training anything."""

from pathlib import Path

from linformer.configs import compose
from linformer.experiments import mini, run_dir

REPO = Path(__file__).resolve().parents[2]


def test_the_plan_pretrains_seven_variants_and_finetunes_each_at_two_rates():
    lines = [" ".join(s.argv[1:]) for s in mini.plan()]
    pre = [line for line in lines if "scripts/pretrain.py" in line]
    fin = [line for line in lines if "scripts/finetune.py" in line]
    assert len(pre) == 7 and len(fin) == 32 and sum("from_scratch=true" in line for line in fin) == 4
    assert sum("trainer.lr=0.0003" in line for line in fin) == sum("trainer.lr=0.001" in line for line in fin) == 16
    assert all("experiment=table2_mini" in line and "seed=0" in line for line in pre + fin)
    assert sum("model.projected_dim=32 model.sharing=" in line for line in pre) == 3
    (full,) = [line for line in pre if "model.attention=full" in line]
    assert "projected_dim" not in full and "sharing" not in full   # full attention has no k


def test_plan_names_are_unique_and_each_finetune_reads_the_run_its_job_writes():
    plan = mini.plan()
    assert len({s.name for s in plan}) == len(plan) == 2 + 7 + 32
    by_name = {s.name: s for s in plan}
    for s in plan:
        if s.name.startswith("finetune"):
            (need,) = s.needs
            model_path = next(a for a in s.argv if a.startswith("model_path=")).split("=", 1)[1]
            pretrain = by_name[need]
            # the directory finetuning loads is the one whose summary marks its pretraining done
            assert pretrain.name.startswith("pretrain") and pretrain.done == REPO / model_path / "summary.json"


def test_run_directories_are_the_ones_the_scripts_compose():
    for config, overrides in (("finetune", ["task=imdb", "model_path=m", "run_name=a-b"]),
                              ("pretrain", ["run_name=a-b"]), ("transfer", ["run_name=a-b"])):
        assert str(REPO / run_dir(config, "a-b")) == compose(config, overrides, with_hydra=True).hydra.run.dir


def test_n_and_the_variants_k_follow_the_experiments_config(tmp_path, monkeypatch):
    """mini.N restated the config's model.max_seq_len: a config set to another n left the k's sized for 128."""
    import importlib
    import shutil

    from linformer.configs import CONFIG_DIR_VARIABLE

    assert compose("pretrain", [mini.EXP]).model.max_seq_len == mini.N
    shutil.copytree(REPO / "configs", tmp_path / "configs")
    config = tmp_path / "configs" / "experiment" / "table2_mini.yaml"
    config.write_text(config.read_text().replace("max_seq_len: 128", "max_seq_len: 256"))
    monkeypatch.setenv(CONFIG_DIR_VARIABLE, str(tmp_path / "configs"))
    try:
        moved = importlib.reload(mini)
        assert moved.N == 256 and {k for _, _, k, _ in moved.VARIANTS if k} == {64, 128}
    finally:
        monkeypatch.delenv(CONFIG_DIR_VARIABLE)
        importlib.reload(mini)


def test_every_plan_finds_a_jobs_done_file_by_one_table(tmp_path, monkeypatch):
    """The plans spelt each script's last file by hand beside the demo's own: one table (DONE_FILES) names it for
    all of them, in the folder the job's config gives."""
    import linformer.experiments as experiments
    from linformer.experiments import Places, demo, scratch

    monkeypatch.setitem(experiments.DONE_FILES, "pretrain", "last.json")
    monkeypatch.setitem(experiments.DONE_FILES, "corpus", "corpus-last.json")
    plans = {"mini": mini.plan(), "scratch": scratch.plan(scratch.PROFILES["toy"]),
             "demo": demo.plan([], Places.of(tmp_path))}
    for name, jobs in plans.items():
        done = {job.name.split()[0].removeprefix("prepare_"): job.done.name for job in jobs}
        assert done["pretrain"] == "last.json" and done["corpus"] == "corpus-last.json", name
