"""TrainerSettings: every cfg.trainer key read and checked once, unknown keys refused, identity derived from it."""

import dataclasses
import re

import pytest
from omegaconf import OmegaConf

import linformer.data.tasks as tasks
from linformer.configs import compose
from linformer.errors import ConfigError
from linformer.runconfig.settings import (
    OPERATIONAL_TRAINER_KEYS,
    DistillSettings,
    OptimSettings,
    TaskData,
    TrainerSettings,
    TransferSettings,
)
from linformer.rundir import identity, identity_diff

STAGES = {"pretrain": [], "finetune": ["task=sst2"], "transfer": [], "distill": ["teacher_path=teacher"]}


def _trainer(stage: str) -> dict:
    cfg = compose(stage, STAGES[stage])
    return OmegaConf.to_container(cfg.trainer, resolve=True)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_stage_config_reads_into_settings(stage):
    t = _trainer(stage)
    s = TrainerSettings.read(t)
    assert s.batch_size == t["batch_size"] and s.lr == t["lr"] and s.keep_last == t["keep_last"]
    assert s.warmup(100) == (t["warmup_steps"] if t.get("warmup_steps") is not None else round(t["warmup_ratio"] * 100))


def test_transfer_carries_no_pretraining_keys():
    # transfer once inherited pretraining's trainer config: its masking rate and MFU peak were recorded, never read
    assert not {"mlm_probability", "peak_tflops", "global_batch_size", "epochs"} & set(_trainer("transfer"))


def test_an_unknown_key_is_refused_with_a_suggestion():
    t = _trainer("pretrain") | {"warmup_step": 3}
    with pytest.raises(ConfigError, match=r"trainer.warmup_step is not a trainer setting \(did you mean "
                                          r"trainer.warmup_steps\?\)"):
        TrainerSettings.read(t)


@pytest.mark.parametrize("key, value, message", [
    ("warmup_steps", -1, "trainer.warmup_steps=-1 must be a whole number of at least 0"),
    ("warmup_steps", 2.5, "trainer.warmup_steps=2.5 must be a whole number"),
    ("warmup_steps", float("inf"), "trainer.warmup_steps=inf must be a whole number of at least 0"),
    ("eval_blocks", float("nan"), "trainer.eval_blocks=nan must be a whole number of at least 1"),
    ("warmup_ratio", 1.5, r"trainer.warmup_ratio=1.5 must lie in \[0, 1\)"),
    ("lr_schedule", "polynomial", r"trainer.lr_schedule=polynomial is no setting now: .*trainer.lr_power .*remove"),
    ("eval_batches", 2, (r"trainer.eval_batches=2 is no setting now: an evaluation scores trainer.eval_blocks "
                         r"blocks, not batches \(blocks = batches x trainer.eval_batch_size")),
    ("lr_end", -1e-5, "trainer.lr_end=-1e-05 must be a number >= 0"),
    ("mlm_probability", 1.0, r"trainer.mlm_probability=1.0 must lie in \(0, 1\)"),
    ("group_by_length", "yes", "trainer.group_by_length='yes' must be true or false"),
    ("cpu", 1, "trainer.cpu=1 must be true or false"),
    ("eval_blocks", 0, "trainer.eval_blocks=0 must be a whole number of at least 1"),
    ("sync_every", 0, "trainer.sync_every=0 must be a whole number of at least 1"),
    ("lr", True, "trainer.lr=True must be a positive number"),  # read as 1.0, and trained at lr 1
    ("save_every_minutes", True, "trainer.save_every_minutes=True must be a positive number"),
    ("compile_mode", "fast", ("trainer.compile_mode='fast' is not one of default, reduce-overhead, max-autotune, "
                              r"max-autotune-no-cudagraphs \(or null\)")),
])
def test_bad_values_name_their_key(key, value, message):
    with pytest.raises(ConfigError, match=message):
        TrainerSettings.read(_trainer("pretrain") | {key: value})


@pytest.mark.parametrize("extra, message", [
    ({"lr": 1e-4, "lr_end": 1e-4}, r"trainer.lr_end=0.0001 must be below trainer.lr=0.0001"),  # a traceback at start
])
def test_a_schedule_that_would_not_do_what_it_says_is_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        TrainerSettings.read(_trainer("pretrain") | extra)
    polynomial = TrainerSettings.read(_trainer("pretrain") | {"lr_power": 2.0})
    assert polynomial.lr_power == 2.0


def test_a_run_recorded_with_the_lr_schedule_key_is_the_same_run_without_it():
    """trainer.lr_schedule named the decay lr_power decides (linear == polynomial at power 1), so two configs that
    train alike were two identities; the key is gone, and a run recorded with it continues on the rest."""
    from linformer.rundir import identity_diff

    requested = {"trainer": _trainer("pretrain")}
    assert "lr_schedule" not in requested["trainer"]
    for schedule in ("linear", "polynomial"):
        recorded = {"trainer": {**requested["trainer"], "lr_schedule": schedule}}
        assert identity_diff(recorded, requested) == {}
    changed = {"trainer": {**requested["trainer"], "lr_power": 2.0}}
    assert set(identity_diff({"trainer": {**requested["trainer"], "lr_schedule": "linear"}}, changed)) == {
        "trainer.lr_power"}


@pytest.mark.parametrize("extra, message", [
    ({}, "trainer.compile_mode=reduce-overhead: without trainer.compile=true nothing is compiled"),
    ({"compile": True, "compile_backend": "eager"},
     "trainer.compile_mode=reduce-overhead: trainer.compile_backend=eager ignores it: modes are inductor's"),
])
def test_a_compile_mode_that_would_do_nothing_is_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        TrainerSettings.read(_trainer("pretrain") | {"compile_mode": "reduce-overhead", **extra})
    assert TrainerSettings.read(_trainer("pretrain") | {"compile_mode": "max-autotune", "compile": True}).compile_mode \
        == "max-autotune"


def test_warmup_steps_win_over_the_ratio():
    t = _trainer("finetune")
    assert TrainerSettings.read(t | {"warmup_ratio": 0.1}).warmup(55) == 6  # round(5.5), banker's: 6
    assert TrainerSettings.read(t | {"warmup_ratio": 0.1, "warmup_steps": 3}).warmup(55) == 3
    assert TrainerSettings.read(t | {"warmup_ratio": None, "warmup_steps": None}).warmup(55) == 0


def test_a_stage_missing_a_key_it_needs_names_it():
    s = TrainerSettings.read(_trainer("transfer"))
    with pytest.raises(ConfigError, match="trainer.epochs is null: finetuning needs it"):
        s.require("epochs", "finetuning")



@pytest.mark.parametrize("stage, needed", [("finetune", ["model_path=m"]), ("distill", ["teacher_path=t"])])
def test_a_task_run_without_epochs_or_steps_is_refused_when_read(stage, needed):
    """finetune trainer.epochs=null was refused only after the model had loaded and both splits were tokenized."""
    from linformer.runconfig import DistillSpec, FinetuneSpec

    spec = {"finetune": FinetuneSpec, "distill": DistillSpec}[stage]
    with pytest.raises(ConfigError, match=rf"^trainer.epochs and trainer.max_steps are null: {stage} needs one of them"):
        spec.read(compose(stage, ["task=sst2", *needed, "trainer.epochs=null", "trainer.max_steps=null"]))
    assert spec.read(compose(stage, ["task=sst2", *needed, "trainer.epochs=null", "trainer.max_steps=5"]))


def test_identity_follows_the_fields_operational_marks():
    t = _trainer("pretrain")
    base = identity({"trainer": t})
    assert "trainer.lr" in base and "trainer.mlm_probability" in base
    for key in OPERATIONAL_TRAINER_KEYS:
        assert key not in base
    assert {"trainer.eval_every", "trainer.resume", "trainer.save_best"} <= OPERATIONAL_TRAINER_KEYS
    assert identity_diff({"trainer": t}, {"trainer": t | {"eval_every": 7, "log_every": 1}}) == {}
    assert identity_diff({"trainer": t}, {"trainer": t | {"warmup_steps": 5}}) == {"trainer.warmup_steps": (20, 5)}


def test_a_model_field_recorded_before_the_groups_listed_it_is_no_change_at_its_default_and_a_change_otherwise():
    """A run recorded before model groups listed a LinformerConfig field resumes when the field is at its default."""
    now = {"model": OmegaConf.to_container(compose("pretrain").model, resolve=True)}
    assert now["model"]["local_window"] == 0
    before = {"model": {k: v for k, v in now["model"].items() if k != "local_window"}}
    assert identity_diff(before, now) == {}
    assert identity_diff(before, {"model": now["model"] | {"local_window": 64}}) == {"model.local_window": (None, 64)}
    assert identity_diff({"model": now["model"] | {"local_window": 64}}, now) == {"model.local_window": (64, 0)}


def test_a_transfer_run_recorded_with_the_unread_masking_rate_is_another_format():
    now = {"trainer": _trainer("transfer")}
    before = {"trainer": now["trainer"] | {"mlm_probability": 0.15}}
    assert identity_diff(before, now) == {"trainer.mlm_probability": (0.15, None)}
    pretrain = {"trainer": _trainer("pretrain")}  # where it is read, a change counts as a change of settings
    assert identity_diff(pretrain, {"trainer": pretrain["trainer"] | {"mlm_probability": 0.3}})


def _group(stage: str, group: str) -> dict:
    return OmegaConf.to_container(compose(stage, STAGES[stage])[group], resolve=True)


@pytest.mark.parametrize("stage, group, schema, typo, suggestion", [
    ("transfer", "transfer", TransferSettings, "trian", "transfer.train"),
    ("distill", "distill", DistillSettings, "hidden_weigth", "distill.hidden_weight"),
    ("pretrain", "optim", OptimSettings, "weight_decy", "optim.weight_decay"),
])
def test_each_group_reads_and_refuses_a_key_no_code_reads(stage, group, schema, typo, suggestion):
    values = _group(stage, group)
    schema.read(values)  # the committed config is valid
    with pytest.raises(ConfigError, match=rf"{group}.{typo} is not a {group} setting \(did you mean {suggestion}\?\)"):
        schema.read(values | {typo: 1})


def test_optim_and_transfer_values_are_checked():
    with pytest.raises(ConfigError, match=r"optim.betas=\[0.9\] must be two numbers"):
        OptimSettings.read(_group("pretrain", "optim") | {"betas": [0.9]})
    with pytest.raises(ConfigError, match="transfer.target='logits' is not one of hidden, attention"):
        TransferSettings.read(_group("transfer", "transfer") | {"target": "logits"})
    with pytest.raises(ConfigError, match="distill.hidden_weight=-1"):
        DistillSettings.read(_group("distill", "distill") | {"hidden_weight": -1})
    assert TransferSettings.read(_group("transfer", "transfer")).lr_rest is None  # only train=all has a second lr


def test_every_stage_reads_into_its_frozen_spec():
    import dataclasses

    from linformer.runconfig import DistillSpec, FinetuneSpec, PretrainSpec, TransferSpec

    specs = {"pretrain": PretrainSpec, "finetune": FinetuneSpec, "transfer": TransferSpec, "distill": DistillSpec}
    for stage, spec_class in specs.items():
        overrides = STAGES[stage] + (["model_path=m"] if stage == "finetune" else [])
        spec = spec_class.read(compose(stage, overrides))
        assert spec.stage == stage and spec.trainer == TrainerSettings.read(spec.config["trainer"])
        with pytest.raises(dataclasses.FrozenInstanceError):
            spec.seed = 1
    spec = FinetuneSpec.read(compose("finetune", ["task=imdb", "model_path=m", "seed=4", "max_train_examples=10"]))
    assert spec.task.name == "imdb" and spec.task.subset_seed == 4 and spec.task.max_train_examples == 10
    assert spec.task.data_dir.endswith("imdb") and spec.task.data_dir.startswith("/")  # resolved against the repo


def test_a_value_left_unset_is_one_error_naming_it_where_the_spec_is_read():
    from linformer.runconfig import FinetuneSpec, PretrainSpec

    # model_path is read by run_name's interpolation: without the check, OmegaConf's traceback names run_name
    with pytest.raises(ConfigError, match=r"^model_path is not set: .*model_path=\.\.\. \(configs/finetune.yaml\)"):
        FinetuneSpec.read(compose("finetune", ["task=sst2"]))
    # a partial mapping's misspelt key is named, not the run_name it leaves out
    with pytest.raises(ConfigError, match=r"trainer.max_stpes is not a trainer setting \(did you mean trainer.max_steps"):
        PretrainSpec.read({"trainer": {"max_stpes": 3}})


def test_operational_keys_derive_from_the_specs_marks():
    from linformer.runconfig import OPERATIONAL_KEYS

    assert {
        "logger", "paths", "hydra", "imports", "run_name", "experiment_name", "tokenizer_dir", "corpus_dir", "task_cache_dir",
        "max_eval_examples", "task.data_dir"} == OPERATIONAL_KEYS - OPERATIONAL_TRAINER_KEYS
    # identity: the seed, the data selection and the model stay in it
    assert not {"seed", "task.name", "max_train_examples", "subset_seed", "model_path"} & OPERATIONAL_KEYS


@pytest.mark.parametrize("override, message", [
    ("logger.trackers=[tensorbord]", "logger.trackers: tensorbord is not one of wandb, tensorboard."),
    ("logger.trackers=tensorbord", "logger.trackers: tensorbord is not one of"),  # one name, not its letters
    ("+task.max_lenght=5", "task.max_lenght is not a task setting (did you mean task.max_length?)"),
    ("seed=one", "seed='one' must be a whole number in 0..4294967295 (numpy's and torch's seeds)."),
    ("from_scratch=maybe", "from_scratch='maybe' must be true or false."),
    ("max_train_examples=0", "max_train_examples=0 must be a whole number of at least 1."),
])
def test_a_bad_value_in_any_group_names_its_key(override, message):
    from linformer.runconfig import FinetuneSpec

    with pytest.raises(ConfigError) as err:
        FinetuneSpec.read(compose("finetune", ["task=sst2", "model_path=m", override]))
    assert message in str(err.value)


@pytest.mark.parametrize("task, override, said", [
    ("sst2", "trainer.max_length=1", ("trainer.max_length=1: an example of sst2 needs room for <s>, at least one "
                                      "token and </s> (3 tokens at least)")),
    ("sst2", "trainer.max_length=2", "trainer.max_length=2: an example of sst2 needs room for <s>"),
    ("sst2", "task.max_length=2", "task.max_length=2: an example of sst2 needs room for <s>"),
    ("qnli", "trainer.max_length=4", ("trainer.max_length=4: an example of qnli needs room for <s>, at least one "
                                      "token of each text, a separator between them and </s> (5 tokens at least)")),
    ("sst2", "trainer.max_length=3", None),
    ("qnli", "trainer.max_length=5", None),  # a BERT tokenizer's pair fits; RoBERTa's 6 is checked once it is loaded
])
@pytest.mark.parametrize("stage", ["finetune", "distill"])
def test_an_example_length_without_room_for_text_is_refused_as_the_spec_is_read(stage, task, override, said):
    """Below the special tokens and one token of each text a tokenizer cannot truncate: trainer.max_length=1 crashed
    in the model's forward after loading, 2 trained on `<s></s>` alone and reported its accuracy. The same rule as
    data.n's, refused before any work."""
    from linformer.runconfig import DistillSpec, FinetuneSpec

    spec, path = (FinetuneSpec, "model_path=m") if stage == "finetune" else (DistillSpec, "teacher_path=t")
    cfg = compose(stage, [f"task={task}", path, override])
    if said is None:
        spec.read(cfg)
        return
    with pytest.raises(ConfigError) as err:
        spec.read(cfg)
    assert str(err.value).startswith(said)


def test_the_corpus_and_tokenizer_configs_read_into_their_functions_arguments():
    """Every data config composes into the arguments prepare_corpus and train_tokenizer take, paths resolved."""
    import inspect
    from pathlib import Path

    from linformer.data.corpus import prepare_corpus
    from linformer.data.tokenizer import train_tokenizer
    from linformer.runconfig.data import CorpusSpec, TokenizerSpec

    for data in ("mirror", "mirror_mini", "mirror_slice", "wiki"):
        corpus = CorpusSpec.read(compose("corpus", [f"data={data}"])).arguments()
        assert corpus.keys() <= inspect.signature(prepare_corpus).parameters.keys()
        assert Path(corpus["out_dir"]).is_absolute() and all(Path(s).is_absolute() for s in corpus["sources"])
        tokenizer = TokenizerSpec.read(compose("tokenizer", [f"data={data}"])).arguments()
        assert tokenizer.keys() <= inspect.signature(train_tokenizer).parameters.keys()
        assert tokenizer["files"] == corpus["sources"]
    assert CorpusSpec.read(compose("corpus", ["data=mirror_mini"])).n == 128


@pytest.mark.parametrize("config, override, message", [
    ("corpus", "data.n=abc", "data.n='abc' must be a whole number"),
    ("corpus", "data.n=1.5", "data.n=1.5 must be a whole number"),
    ("corpus", "data.skip_bad_rows=maybe", "data.skip_bad_rows='maybe' must be true or false"),
    ("corpus", "data.max_documents=x", "data.max_documents='x' must be a whole number or null"),
    ("corpus", "force=1", "force=1 must be true or false"),
    ("tokenizer", "vocab_size=2.5", "vocab_size=2.5 must be a whole number"),
    ("tokenizer", "show_progress=maybe", "show_progress='maybe' must be true or false"),
    ("tokenizer", "data.val_fraction=x", "data.val_fraction='x' must be a number"),
])
def test_a_wrong_type_in_the_data_configs_names_its_key(config, override, message):
    from linformer.runconfig.data import CorpusSpec, TokenizerSpec

    spec = {"corpus": CorpusSpec, "tokenizer": TokenizerSpec}[config]
    with pytest.raises(ConfigError, match="^" + message.replace("|", r"\|") + r"\.$"):
        spec.read(compose(config, ["data=mirror_mini", override]))


def test_the_spectrum_config_reads_into_analyze_spectrum_s_arguments():
    import inspect
    from pathlib import Path

    from linformer.report.spectrum import analyze_spectrum
    from linformer.runconfig.data import SpectrumSpec

    spec = SpectrumSpec.read(compose("spectrum", ["model_path=outputs/pretrain/run/model", "k=32"]))
    assert spec.arguments().keys() <= inspect.signature(analyze_spectrum).parameters.keys()
    # model_path as given (analyze_spectrum resolves it as every stage does); the output folder made absolute
    assert spec.model_path == "outputs/pretrain/run/model" and Path(spec.out_dir).is_absolute()
    assert spec.corpus_dir is None and spec.k == 32
    with pytest.raises(ConfigError, match=r"^num_windows='many' must be a whole number\.$"):
        SpectrumSpec.read(compose("spectrum", ["model_path=m", "num_windows=many"]))


@pytest.mark.parametrize("overrides, message", [
    (["seed=-1"], r"^seed=-1 must be a whole number in 0\.\.4294967295"),
    (["run_name="], r"^run_name='' must name a run directory"),
    (["run_name=a/b"], r"^run_name='a/b' must name a run directory"),
    (["optim.betas=true"], r"^optim\.betas=True must be two numbers in \[0, 1\)"),
    (["optim.betas=[false,false]"], r"^optim\.betas=\[False, False\] must be two numbers"),
])
def test_a_run_setting_nothing_can_run_with_is_one_error_naming_the_key(overrides, message):
    from linformer.configs import compose
    from linformer.runconfig import PretrainSpec

    with pytest.raises(ConfigError, match=message):
        PretrainSpec.read(compose("pretrain", overrides))


@pytest.mark.parametrize("config, spec, overrides, message", [
    ("pretrain", "PretrainSpec", ["run_name=.."], r"^run_name='\.\.' must name a run directory \(one name, not a path"),
    ("pretrain", "PretrainSpec", ["data.name=../../mine"],
     r"^data.name='\.\./\.\./mine' must name a corpus folder .*straight into paths.data_dir/processed/"),
    ("pretrain", "PretrainSpec", ["data.tokenizer=a/b"], r"^data.tokenizer='a/b' must name a tokenizer folder"),
    ("corpus", "CorpusSpec", ["data.name=.."], r"^data.name='\.\.' must name a corpus folder"),
    ("tokenizer", "TokenizerSpec", ["data.tokenizer=../../esc_tok"],
     r"^data.tokenizer='\.\./\.\./esc_tok' must name a tokenizer folder .*paths.data_dir/tokenizers/"),
    ("tokenizer", "TokenizerSpec", ["name=/tmp/tok"], r"^name='/tmp/tok' must name a tokenizer folder"),
    ("spectrum", "SpectrumSpec", ["model_path=m", "prefix=../p"], r"^prefix='\.\./p' must name a file name prefix"),
])
def test_a_name_that_becomes_a_folder_is_one_name_not_a_path(config, spec, overrides, message):
    """run_name was checked, but data.name, data.tokenizer (and the tokenizer's name) were not: `..` in them put a
    tokenizer and Hydra's folder outside data/tokenizers/ and outputs/tokenizer/. One check for every such name."""
    import linformer.runconfig as runs
    import linformer.runconfig.data as data
    from linformer.configs import compose

    with pytest.raises(ConfigError, match=message):
        (getattr(runs, spec, None) or getattr(data, spec)).read(compose(config, overrides))


# Every stage whose single runs sit beside its Hydra sweep folder (hydra.run.dir <stage>/<name>, hydra.sweep.dir
# <stage>/multirun): the reader of its config, and what else its composition needs
SWEEP_BESIDE = {
    "pretrain": ("runconfig.PretrainSpec", []),
    "finetune": ("runconfig.FinetuneSpec", ["task=sst2", "model_path=m"]),
    "distill": ("runconfig.DistillSpec", ["teacher_path=t"]),
    "transfer": ("runconfig.TransferSpec", []),
    "corpus": ("runconfig.data.CorpusSpec", []),
    "tokenizer": ("runconfig.data.TokenizerSpec", []),
    "benchmark": ("bench.cli.settings_from_config", []),
}


def _sweep_layouts():
    """(config, the key naming its run's folder) for each config whose run folder is a sibling of its sweep folder."""
    import re

    from omegaconf import OmegaConf

    from linformer.configs import config_dir
    from linformer.files.runs import HYDRA_SWEEP_DIR

    found = {}
    for path in sorted(config_dir().glob("*.yaml")):
        hydra = (OmegaConf.to_container(OmegaConf.load(path)).get("hydra") or {})
        run, sweep = (hydra.get("run") or {}).get("dir", ""), (hydra.get("sweep") or {}).get("dir", "")
        name = re.fullmatch(r"(.*)/\$\{([\w.]+)\}", run)
        if name and sweep == f"{name.group(1)}/{HYDRA_SWEEP_DIR}":
            found[path.stem] = name.group(2)
    return found


def test_every_stage_with_a_sweep_folder_beside_its_runs_is_covered():
    assert set(_sweep_layouts()) == set(SWEEP_BESIDE)


@pytest.mark.parametrize("config", sorted(SWEEP_BESIDE))
def test_a_name_that_is_the_stage_s_sweep_folder_is_refused_in_one_line_naming_the_key(config):
    """run_name=multirun put a single run into outputs/finetune/multirun, the sweep's folder: both commands wrote
    there, and every reader took the sweep for a run called multirun. Whatever names a stage's Hydra run folder
    (run_name, a tokenizer's name, a corpus's data.name) may not be the sweep folder's name. The benchmark, which has
    no paths group (its folder is fixed by configs/benchmark.yaml), names the folder itself."""
    import importlib

    from linformer.configs import compose

    key = _sweep_layouts()[config]
    where, extra = SWEEP_BESIDE[config]
    module, reader = where.rsplit(".", 1)
    read = getattr(importlib.import_module(f"linformer.{module}"), reader)
    read = getattr(read, "read", read)
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}='multirun' is the name of the \w+ sweep folder "
                                          r"\((paths.output_dir|/\S+)/\w+/multirun, where --multirun puts its jobs\)"):
        read(compose(config, [*extra, f"{key}=multirun"]))


def test_a_corpus_named_multirun_is_refused_only_to_the_command_whose_hydra_folder_it_names():
    """data.name names prepare_corpus's Hydra run folder (outputs/prepare/<name>, beside outputs/prepare/multirun),
    so prepare_corpus refuses `multirun`; pretraining and the tokenizer only read data.name's corpus (or its
    sources) and write nothing under outputs/prepare/: a corpus of that name, prepared before the check, stays
    usable there."""
    from linformer.configs import compose
    from linformer.runconfig import PretrainSpec
    from linformer.runconfig.data import CorpusSpec, TokenizerSpec

    with pytest.raises(ConfigError, match=r"^data\.name='multirun' is the name of the prepare sweep folder"):
        CorpusSpec.read(compose("corpus", ["data.name=multirun"]))
    assert PretrainSpec.read(compose("pretrain", ["data.name=multirun"])).corpus_dir.endswith("/processed/multirun")
    TokenizerSpec.read(compose("tokenizer", ["data.name=multirun"]))


@pytest.mark.parametrize("name", [".hidden", "checkpoints", "wandb"])
def test_a_run_name_the_readers_of_runs_pass_over_is_refused(name):
    from linformer.configs import compose
    from linformer.runconfig import PretrainSpec

    with pytest.raises(ConfigError, match=rf"^run_name='{re.escape(name)}' must name a run directory that the readers "
                                          "of runs search") as refused:
        PretrainSpec.read(compose("pretrain", [f"run_name={name}"]))
    assert "a run already in such a folder (made before this check) resumes after its folder is renamed" in str(
        refused.value)  # an unfinished run of that name, from before the check, is not lost


def test_a_task_flag_that_is_not_true_or_false_is_refused():
    from linformer.configs import compose
    from linformer.runconfig import FinetuneSpec

    with pytest.raises(ConfigError, match=r"^task\.skip_bad_rows='maybe' must be true or false\.$"):
        FinetuneSpec.read(compose("finetune", ["task=sst2", "model_path=x", "task.skip_bad_rows=maybe"]))


def test_a_removed_model_group_is_refused_not_replaced_by_the_defaults():
    from linformer.hydra_start import _run_dir_before
    from linformer.runconfig import PretrainSpec

    with pytest.raises(ConfigError, match=r"hydra.run.dir\) needs model.name"):
        # the default run name is made from the model's name
        _run_dir_before(compose("pretrain", ["~model"], with_hydra=True))
    with pytest.raises(ConfigError, match="model: no model config group is selected"):
        PretrainSpec.read(compose("pretrain", ["~model", "run_name=x"]))


def test_a_tokenizer_dir_that_holds_no_tokenizer_is_named(tmp_path):
    from linformer.errors import CheckpointError
    from linformer.modeling.loading import resolve_tokenizer_dir

    with pytest.raises(CheckpointError, match=r"tokenizer_dir='/nonexistent' \(/nonexistent\) does not exist"):
        resolve_tokenizer_dir("/nonexistent")
    with pytest.raises(CheckpointError, match="holds no tokenizer files"):
        resolve_tokenizer_dir(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text("{}")
    assert resolve_tokenizer_dir(str(tmp_path)) == str(tmp_path)
    assert resolve_tokenizer_dir("roberta-base") == "roberta-base"  # a hub name is left to the hub


def test_a_new_trainer_key_is_its_yaml_default_and_its_field():
    """One field (type, bounds from its annotation, identity or operational mark) and one YAML line: the generic
    reader does the rest; nothing else is written by hand."""
    import dataclasses

    from linformer.runconfig.settings import _setting

    yaml_group = {**OmegaConf.to_container(compose("pretrain", []).trainer), "warmup_floor": 5}  # its YAML default
    with_field = dataclasses.make_dataclass(  # its field
        "WithFloor", [("warmup_floor", int | None, _setting(operational=True))], bases=(TrainerSettings,), frozen=True)
    assert with_field.read(yaml_group).warmup_floor == 5
    assert with_field.read({**yaml_group, "warmup_floor": None}).warmup_floor is None
    with pytest.raises(ConfigError, match=r"trainer.warmup_floor=0 must be"):
        with_field.read({**yaml_group, "warmup_floor": 0})
    with pytest.raises(ConfigError, match="trainer.warmup_floor is not a trainer setting"):
        TrainerSettings.read(yaml_group)  # without the field the key is refused, never silently ignored
    assert next(f for f in dataclasses.fields(with_field) if f.name == "warmup_floor").metadata["operational"]


@pytest.mark.parametrize("override, message", [
    ("model.projected_dim=0", "model: projected_dim (k=0) must be in 1..max_seq_len"),
    ("model.sharing=foo", "model: sharing='foo' is not one of"),
    ("model.num_attention_heads=5", "model: hidden_size (128) must be a multiple of num_attention_heads (5)"),
])
def test_a_fresh_model_s_bad_value_is_refused_when_the_config_is_read(override, message):
    """Before, only once the tokenizer and the corpus were loaded (minutes of preparation for a typo in k)."""
    from linformer.runconfig import PretrainSpec

    with pytest.raises(ConfigError) as err:
        PretrainSpec.read(compose("pretrain", [override]))
    assert str(err.value).startswith(message)
    PretrainSpec.read(compose("pretrain", [override, "init_from=/nowhere"]))  # continued: the group is not applied


@pytest.mark.parametrize("config", ["pretrain", "convert", "distill", "transfer"])
@pytest.mark.parametrize("override, message", [
    ("model.max_seq_len=abc", "model.max_seq_len='abc' must be a whole number >= 1."),
    ("model.max_seq_len=0", "model.max_seq_len=0 must be a whole number >= 1."),
    ("model.max_seq_len=1.5", "model.max_seq_len=1.5 must be a whole number >= 1."),
    ("model.local_window=-1", "model.local_window=-1 must be a whole number >= 0."),
    ("model.projected_dim=abc", "model.projected_dim='abc' must be a whole number (or one per layer)."),
    ("++model.exact_short_inputs=maybe", "model.exact_short_inputs='maybe' must be true or false."),
])
def test_a_model_value_of_the_wrong_type_is_one_error_naming_the_key_typed(config, override, message):
    """convert.py and distill.py derived the position table from model.max_seq_len before any config checked it: abc
    was a ValueError traceback, 0 an error about max_position_embeddings, a key nobody typed."""
    reader, base = _spec_reader(config)
    with pytest.raises(ConfigError) as err:
        reader.read(compose(config, [*base, override]))
    assert str(err.value) == message


SEED_RANGE = "must be a whole number in 0..4294967295 (numpy's and torch's seeds)."


def _spec_reader(config):
    from linformer.runconfig import ConvertSpec, DistillSpec, FinetuneSpec, PretrainSpec, TransferSpec
    from linformer.runconfig.data import CorpusSpec, SpectrumSpec, TokenizerSpec

    return {"pretrain": (PretrainSpec, []), "finetune": (FinetuneSpec, ["task=sst2", "model_path=m"]),
            "distill": (DistillSpec, ["task=sst2", "teacher_path=t"]), "convert": (ConvertSpec, []),
            "transfer": (TransferSpec, []),
            "corpus": (CorpusSpec, []), "tokenizer": (TokenizerSpec, []),
            "spectrum": (SpectrumSpec, ["model_path=m"])}[config]


@pytest.mark.parametrize("config, key", [("pretrain", "seed"), ("convert", "seed"), ("spectrum", "seed"),
                                         ("finetune", "subset_seed"), ("distill", "subset_seed"),
                                         ("corpus", "data.seed"), ("tokenizer", "data.seed")])
@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "4294967296", "true"])
def test_every_seed_a_config_gives_is_checked_by_the_one_seed_check(config, key, value):
    """subset_seed=-1 was a ValueError traceback from the subset draw, subset_seed=1.5 was recorded as 1, and
    data.seed=-1 prepared a corpus: every seed key now has seed's own error line."""
    spec, overrides = _spec_reader(config)
    shown = {"abc": "'abc'", "true": "True"}.get(value, value)
    with pytest.raises(ConfigError, match="^" + re.escape(f"{key}={shown} {SEED_RANGE}") + "$"):
        spec.read(compose(config, [*overrides, f"{key}={value}"]))
    good = spec.read(compose(config, [*overrides, f"{key}=7"]))
    if config != "tokenizer":  # the tokenizer reads the data group for its files alone
        assert (good.task.subset_seed if key == "subset_seed" else good.seed) == 7


def test_an_unset_subset_seed_is_the_run_s_seed():
    from linformer.runconfig import FinetuneSpec

    assert FinetuneSpec.read(compose("finetune", ["task=sst2", "model_path=m", "seed=5"])).task.subset_seed == 5


@pytest.mark.parametrize("config, override, key", [
    ("corpus", "data.num_proc=0", "data.num_proc=0"), ("corpus", "data.num_proc=-1", "data.num_proc=-1"),
    ("tokenizer", "data.num_proc=0", "data.num_proc=0"), ("corpus", "data.max_documents=0", "data.max_documents=0"),
    ("tokenizer", "data.tokenizer_max_lines=-5", "data.tokenizer_max_lines=-5"),
    ("spectrum", "num_windows=0", "num_windows=0"), ("spectrum", "batch_size=-2", "batch_size=-2"),
    ("pretrain", "pad_vocab_to_multiple_of=0", "pad_vocab_to_multiple_of=0"),
])
def test_a_count_below_one_is_refused_naming_its_key(config, override, key):
    """data.num_proc=0 or -1 silently became one worker: every whole-number key is checked as the run specs check
    theirs."""
    spec, overrides = _spec_reader(config)
    with pytest.raises(ConfigError, match="^" + re.escape(f"{key} must be a whole number of at least 1.") + "$"):
        spec.read(compose(config, [*overrides, override]))


def test_one_tracker_named_alone_is_a_list_of_one():
    from linformer.runconfig import FinetuneSpec

    spec = FinetuneSpec.read(compose("finetune", ["task=sst2", "model_path=m", "logger.trackers=tensorboard"]))
    assert spec.logger.trackers == ("tensorboard",)


@pytest.fixture
def fresh_tasks(monkeypatch):
    """TASKS and TITLES as a fresh process has them: a task a test registers goes with it."""
    monkeypatch.setattr(tasks, "TASKS", dict(tasks.TASKS))
    monkeypatch.setattr(tasks, "TITLES", dict(tasks.TITLES))


COLORS = {"text_fields": ["text"], "label_field": "label", "label_names": ["red", "green", "blue"],
          "raw_labels": [0, 1, 2], "metrics": ["accuracy", "f1_macro"]}


def _task_config(name: str = "colors", **spec) -> dict:
    return {"task": {"name": name, "data_dir": None, "max_length": 64, "skip_bad_rows": False, "spec": spec}}


def test_a_task_spec_block_registers_its_task_where_the_config_is_read(fresh_tasks):
    """A task of one's own worked only from Python (register_task): a task config's spec block registers it where the
    config is read, so a run's config.yaml, read again by a report in another process, finds the task too."""
    assert TaskData.read(_task_config(**COLORS)).name == "colors"
    spec = tasks.get_task("colors")
    assert (spec.text_fields, spec.raw_labels, spec.metrics, spec.hub) == (("text",), ("0", "1", "2"),
                                                                          ("accuracy", "f1_macro"), ())
    assert tasks.TITLES["colors"] == "colors"
    assert TaskData.read(OmegaConf.create(_task_config(**COLORS | {"text_fields": "text"}))).name == "colors"
    # read again with a field edited (a notebook's kernel): the edit replaces the registration
    assert TaskData.read(_task_config(**COLORS | {"label_names": ["r", "g", "b"]})).name == "colors"
    assert tasks.get_task("colors").label_names == ("r", "g", "b")


def test_a_task_registered_from_python_is_recorded_in_the_run_s_config_as_a_spec_block(fresh_tasks):
    """A task registered from Python (register_task) left runs whose config.yaml named it without its spec: export
    and the reports said "unknown task" in any other process. The run's config records the block a task config
    would have given, and reading that config in a process without the registration registers it again."""
    from linformer.runconfig import FinetuneSpec
    from linformer.runconfig.settings import spec_block

    spec = tasks.register_task(tasks.TaskSpec("colors", ("text",), "label", ("red", "blue"), ("r", "b"),
                                              metrics=("accuracy", "f1"), title="Colors"))
    run = FinetuneSpec.read(compose("finetune", ["task=sst2", "task.name=colors", "model_path=m"]))
    assert run.config["task"]["spec"] == spec_block(spec)
    del tasks.TASKS["colors"]  # another process: the package's tasks only
    assert FinetuneSpec.read(run.config).task.name == "colors" and tasks.get_task("colors") == spec
    # a spec a block cannot write (a hub dataset) is not recorded: its block would read as another task
    hub = tasks.register_task(dataclasses.replace(spec, name="hubcolors", hub=("x", None), hub_fields=("text",)))
    cfg = compose("finetune", ["task=sst2", "task.name=hubcolors", "model_path=m"])
    assert FinetuneSpec.read(cfg).config["task"].get("spec") is None and tasks.get_task("hubcolors") is hub
    # a run of the task recorded before its spec was: resumed, its record lacks the block, not a change of settings
    recorded = {k: v for k, v in run.config.items() if k != "task"} | {"task": {
        k: v for k, v in run.config["task"].items() if k != "spec"}}
    assert identity_diff(recorded, run.config) == {}
    assert {k.split(".")[2] for k in identity_diff(run.config, recorded)} == set(spec_block(spec))


@pytest.mark.parametrize("change, message", [
    ({"hub": ["ag_news", None]}, r"^task.spec.hub is not a task.spec setting"),
    ({"label_field": None}, r"^task.spec.label_field is not set: "),
    ({"label_field": 3}, r"^task.spec.label_field=3 must be a text\.$"),
    ({"raw_labels": [True, False, None]}, r"^task.spec.raw_labels=.* must be a list of names \(quote true"),
    ({"files": ["train.tsv"]}, r"^task.spec.files=\['train.tsv'\] must map train and eval to file names"),
    # the TaskSpec's own checks, named by their key
    ({"metrics": ["accuracy", "f1"]}, (r"^task.spec.metrics: metric 'f1' scores the positive label of a task of two "
                                       r"labels, this task has 3; use 'f1_macro'$")),
    ({"text_fields": ["a", "b", "c"]}, r"^task.spec.text_fields=\('a', 'b', 'c'\) must name one text column"),
    ({"format": "jsonl"}, r"^task.spec.format='jsonl' is not a reader; the readers: glue_tsv, csv, imdb$"),
    ({"label_names": ["red", "green"]}, r"^task.spec.label_names \['red', 'green'\] and raw_labels \['0', '1', '2'\]"),
    ({"files": {"train": "t.tsv"}}, r"^task.spec.files=\{'train': 't.tsv'\} must have the keys train and eval$"),
])
def test_a_bad_task_spec_block_is_one_error_naming_its_key(fresh_tasks, change, message):
    with pytest.raises(ConfigError, match=message) as err:
        TaskData.read(_task_config(**COLORS | change))
    assert "\n" not in str(err.value) and "colors" not in tasks.TASKS


def test_a_spec_block_for_one_of_the_package_s_tasks_may_only_repeat_it(fresh_tasks):
    sst2 = {"text_fields": ["sentence"], "label_field": "label", "label_names": ["negative", "positive"],
            "raw_labels": ["0", "1"], "title": "SST-2"}
    assert TaskData.read(_task_config("sst2", **sst2)).name == "sst2"
    assert tasks.get_task("sst2").hub == ("glue", "sst2")  # the package's spec kept, its hub fields with it
    with pytest.raises(ConfigError, match=r"^task.spec: task.name=sst2 is the package's own task, and the spec "
                                          r"changes its label_names, title: give a task of one's own a name of its"):
        TaskData.read(_task_config("sst2", **sst2 | {"label_names": ["neg", "pos"], "title": "mine"}))


@pytest.mark.parametrize("config, key", [("convert", "out_dir"), ("convert", "paths.output_dir"),
                                         ("corpus", "out_dir"), ("tokenizer", "out_dir"), ("spectrum", "out_dir"),
                                         ("pretrain", "corpus_dir")])
def test_every_path_a_spec_reads_starts_from_the_repository_with_home_expanded(config, key, tmp_path, monkeypatch):
    """convert.py kept out_dir as given: it wrote relative to the working directory, and '~/x' made a folder named
    "~" there. Every command's paths start from the repository, "~" expanded."""
    from linformer.files.locations import repo_root

    spec, base = _spec_reader(config)
    field = "out_dir" if key.startswith("paths.") else key
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    relative = getattr(spec.read(compose(config, [*base, f"{key}=some/where"])), field)
    assert relative.startswith(str(repo_root() / "some" / "where"))
    home = getattr(spec.read(compose(config, [*base, f"{key}='~/out'"])), field)
    assert home.startswith(str(tmp_path / "home" / "out"))


@pytest.mark.parametrize("override, field, value", [
    ("task.spec.format=csv", "format", "csv"),
    ("task.spec.files={train:t.csv,eval:d.csv}", "files", {"train": "t.csv", "eval": "d.csv"}),
    ("task.spec.eval_split=test", "eval_split", "test"),
    ("task.spec.title=Hues", "title", "Hues"),
    ("+task.spec.title=Hues", "title", "Hues"),
])
def test_every_task_spec_field_is_set_on_the_command_line_where_the_task_config_leaves_it_out(
        fresh_tasks, override, field, value):
    """A task config as the guide writes it (no format, files, eval_split or title: the TaskSpec's defaults) refused
    task.spec.format=csv as "no such key", and +task.spec.title=... as "no code reads the key", though the spec
    reads both."""
    from linformer.configs import refuse_added_keys
    from linformer.runconfig import FinetuneSpec

    left_out = [f"~task.spec.{key}" for key in ("format", "files", "eval_split", "title")]
    cfg = compose("finetune", ["task=_example", "task.name=hues", "task.data_dir=d", "model_path=m", *left_out,
                               override])
    refuse_added_keys(cfg, [o for o in [override] if o.startswith("+")], "finetune")
    FinetuneSpec.read(cfg)
    assert getattr(tasks.get_task("hues"), field) == value
    with pytest.raises(ConfigError, match=r"^task.spec.formt: no such key \(did you mean task.spec.format\?\)"):
        compose("finetune", ["task=_example", "task.data_dir=d", "model_path=m", "task.spec.formt=csv"])
    # a package's task takes a field only as it has it: the others are its own, the change is named
    with pytest.raises(ConfigError, match=rf"^task.spec: task.name=sst2 is the package's own task, and the spec "
                                          rf"changes its {field}"):
        FinetuneSpec.read(compose("finetune", ["task=sst2", "model_path=m", override]))


def test_the_example_task_run_under_another_name_is_titled_by_that_name(fresh_tasks):
    """task=_example task.name=rte (the guide's route without a file of one's own) recorded the title Colors, and
    TITLES["rte"] became "Colors": the tables and forest plots would have named an RTE column Colors."""
    from linformer.runconfig import FinetuneSpec

    base = ["task=_example", "task.data_dir=d", "model_path=m"]
    run = FinetuneSpec.read(compose("finetune", [*base, "task.name=rte"]))
    assert run.config["task"]["spec"]["title"] == "rte" and tasks.TITLES["rte"] == tasks.get_task("rte").title == "rte"
    FinetuneSpec.read(compose("finetune", [*base, "task.name=rte2", "task.spec.title=RTE"]))
    assert tasks.TITLES["rte2"] == "RTE" and tasks.TITLES["rte"] == "rte"
