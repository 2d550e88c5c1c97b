"""Every committed config option composes and resolves, for each entry point that uses its group."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from linformer import LinformerConfig
from linformer.configs import compose
from linformer.errors import ConfigError
from linformer.files.mappings import flatten
from linformer.modeling.configuration import TOKENIZER_FIELDS

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIGS / group).glob("*.yaml") if not p.stem.startswith("_"))


def _compose(name: str, overrides: list[str]):
    cfg = compose(name, overrides)
    OmegaConf.resolve(cfg)  # every interpolation resolves
    return cfg


@pytest.mark.parametrize("model", _options("model"))
def test_every_model_builds_a_valid_linformer_config(model):
    cfg = _compose("pretrain", [f"model={model}"])
    fields = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "name"}
    config = LinformerConfig(**fields)  # validates k <= n, sharing, projection...
    assert cfg.run_name.startswith(model) and config.max_seq_len == cfg.model.max_seq_len


# LinformerConfig fields a model group does not list, and why: set from the tokenizer, by the training itself, or
# fixed for an encoder
NOT_IN_GROUPS = {*TOKENIZER_FIELDS, "sparse_prediction", "is_decoder", "add_cross_attention", "use_cache"}


@pytest.mark.parametrize("model", _options("model"))
def test_every_model_group_lists_every_setting_a_person_can_set(model):
    """So `model.<field>=...` works for each on the command line (not only with a '+'), and the group shows them."""
    import inspect

    from transformers import PretrainedConfig

    generic = set(inspect.signature(PretrainedConfig.__init__).parameters)
    own = set(inspect.signature(LinformerConfig.__init__).parameters) - generic - {"self", "kwargs"}
    listed = set(OmegaConf.to_container(compose("pretrain", [f"model={model}"]).model)) - {"name"}
    assert sorted(own - NOT_IN_GROUPS - listed) == []
    assert sorted(listed - own) == []
    group = OmegaConf.to_container(compose("pretrain", [f"model={model}"]).model)
    signature = inspect.signature(LinformerConfig.__init__).parameters
    for key in ("hidden_act", "layer_norm_eps", "initializer_range", "classifier_dropout", "classifier_head",
                "classifier_pooling", "lm_head_activation", "tie_word_embeddings", "type_vocab_size",
                "position_offset", "max_position_embeddings"):  # listed at the defaults: runs are unchanged
        assert group[key] == signature[key].default, key


@pytest.mark.parametrize("group", ["data", "logger", "trainer", "optim"])
def test_every_pretrain_option_composes(group):
    options = [o for o in _options(group) if not (group == "trainer" and o != "pretrain")]
    for option in options:
        cfg = compose("pretrain", [f"{group}={option}"])  # once (seconds): read unresolved, then resolved in place
        composed = flatten(OmegaConf.to_container(cfg[group]))
        OmegaConf.resolve(cfg)  # every interpolation resolves
        assert cfg.run_name == "tiny-linformer-n128-k32-headwise-s0"
        # what the option's file sets is what the run gets (pretrain.yaml overrides none of these groups)
        own = OmegaConf.to_container(OmegaConf.load(CONFIGS / group / f"{option}.yaml"))
        own.pop("defaults", None)
        assert {k: composed.get(k, "MISSING") for k in flatten(own)} == {k: v for k, v in flatten(own).items()}, option


@pytest.mark.parametrize("task", _options("task"))
@pytest.mark.parametrize("logger", _options("logger"))
def test_every_finetune_option_composes(task, logger):
    cfg = _compose("finetune", [f"task={task}", f"logger={logger}", "model_path=outputs/pretrain/run1"])
    assert cfg.run_name == f"{task}-run1-lr2e-05-s0" and cfg.optim.weight_decay == 0.1


def test_from_scratch_runs_are_named_apart():
    cfg = _compose("finetune", ["model_path=outputs/pretrain/run1", "from_scratch=true", "seed=3"])
    assert cfg.run_name == "sst2-run1-scratch-lr2e-05-s3"


def test_unknown_key_is_named():
    from linformer.errors import ConfigError

    with pytest.raises(ConfigError, match="trainer.max_stepz"):
        _compose("pretrain", ["trainer.max_stepz=10"])


@pytest.mark.parametrize("experiment", ["table2_mini", "table2/n512_k128_kv"])
def test_experiments_evaluate_finetuning_per_epoch(experiment):
    """Pretraining evaluates every so many steps; finetuning once per epoch (eval_every null), on every task."""
    pre = _compose("pretrain", [f"experiment={experiment}"])
    assert pre.trainer.eval_every >= 100 and pre.trainer.save_every >= 100
    for task in ("sst2", "imdb"):
        ft = _compose("finetune", [f"experiment={experiment}", f"task={task}", "model_path=outputs/pretrain/x"])
        assert ft.trainer.eval_every is None and ft.trainer.save_every is None


@pytest.mark.parametrize("row", _options("experiment/table2"))
def test_a_table2_row_reads_the_corpus_its_config_records(row):
    """The paper-scale rows read data=mirror in n-token blocks by path; the run's recorded data node said
    mirror_slice at n = 128 (the pretraining default), which is not what it trained on."""
    cfg = _compose("pretrain", [f"experiment=table2/{row}"])
    assert cfg.data.n == cfg.model.max_seq_len and cfg.data.tokenizer == "mirror" and cfg.data.max_documents is None
    assert cfg.corpus_dir == f"{cfg.paths.data_dir}/processed/{cfg.data.name}" == f"data/processed/mirror-n{cfg.data.n}"
    assert cfg.tokenizer_dir == "data/tokenizers/mirror"
    mirror = _compose("corpus", ["data=mirror", f"data.n={cfg.data.n}", f"data.name={cfg.data.name}"])
    assert mirror.out_dir == cfg.corpus_dir and list(mirror.data.sources) == list(cfg.data.sources)


@pytest.mark.parametrize("name, start, key, values", [
    ("pretrain", [], "trainer.lr", ["1e-3", "5e-4"]),
    ("pretrain", [], "init_from", ["outputs/pretrain/a", "outputs/pretrain/b"]),
    ("transfer", [], "trainer.warmup_steps", ["5", "10"]),
    ("finetune", ["task=sst2", "model_path=m"], "max_train_examples", ["32", "64"]),
    ("distill", ["task=sst2", "teacher_path=t"], "trainer.lr", ["1e-4", "3e-5"]),
])
def test_a_sweep_over_a_key_outside_run_name_gives_each_job_its_own_folder(name, start, key, values):
    """A pretraining sweep over trainer.lr put both jobs in one folder: the second was refused as a run with other
    settings and the sweep stopped. A path's slashes would have nested the folder."""
    subdirs = [compose(name, [*start, f"{key}={v}"], with_hydra=True).hydra.sweep.subdir for v in values]
    assert subdirs[0] != subdirs[1] and all("/" not in s for s in subdirs)
    assert compose(name, [*start, "seed=3"], with_hydra=True).hydra.sweep.subdir.endswith("-s3")  # in run_name
    # a run_name given holds none of the default name's keys: a swept seed still keeps the jobs apart
    named = [compose(name, [*start, "run_name=mine", f"seed={seed}"], with_hydra=True).hydra.sweep.subdir
             for seed in (3, 4)]
    assert named[0] != named[1] and all(s.startswith("mine-") and "/" not in s for s in named)


@pytest.mark.parametrize("name, start", [("pretrain", []), ("finetune", ["task=sst2", "model_path=m"]),
                                         ("transfer", []), ("distill", ["task=sst2", "teacher_path=t"]),
                                         ("corpus", []), ("tokenizer", []), ("benchmark", []), ("spectrum", [])])
def test_a_run_directory_is_relative_to_the_repository_from_any_working_directory(name, start, tmp_path,
                                                                                   monkeypatch):
    """Run from another directory, a run went under the cwd while the code read every relative path (model_path=
    outputs/pretrain/...) from the repository: the same relative path meant two places. A sweep (-m) of any command
    goes under the repository too, not Hydra's multirun/ under the cwd, each job in a folder of its own."""
    monkeypatch.chdir(tmp_path)
    cfg = compose(name, start, with_hydra=True)
    for mode in ("run", "sweep"):
        assert Path(str(cfg.hydra[mode].dir)).is_relative_to(CONFIGS.parent), (mode, cfg.hydra[mode].dir)
    key = {"corpus": "data.seed", "tokenizer": "vocab_size", "benchmark": "competing"}.get(name, "seed")
    jobs = [compose(name, [*start, f"{key}={value}"], with_hydra=True).hydra.sweep.subdir for value in (300, 400)]
    assert jobs[0] != jobs[1] and all("/" not in job.removeprefix("multirun/") for job in jobs)


def test_an_mlm_continuation_is_named_after_the_model_it_continues(tmp_path):
    """pretrain.py init_from=<a converted Linformer> was named after the default model group (tiny, headwise), whose
    settings the saved Linformer does not take: compare_runs showed another architecture than the one trained."""
    saved = tmp_path / "minilm-linformer-n256-k32-layerwise"
    saved.mkdir()
    (saved / "config.json").write_text('{"model_type": "linformer"}')
    assert compose("pretrain", [f"init_from={saved}"], with_hydra=True).run_name == \
        "minilm-linformer-n256-k32-layerwise-mlm-s0"
    # a BERT/RoBERTa encoder is converted by the group's attention settings: they name it too
    assert compose("pretrain", ["init_from=minilm", "model.projected_dim=64"], with_hydra=True).run_name == \
        "minilm-linformer-n128-k64-headwise-mlm-s0"
    assert compose("pretrain", [], with_hydra=True).run_name == "tiny-linformer-n128-k32-headwise-s0"


def test_a_default_run_name_is_shell_and_glob_safe_and_names_a_general_projection():
    """One k per layer named the run 'k[16, 32]' (a glob's character class, and a space); a conv or pooling run took a
    linear run's name."""
    assert compose("pretrain", ["model.projected_dim=[16,32]", "model.sharing=none"]).run_name == \
        "tiny-linformer-n128-k16-32-none-s0"
    assert compose("pretrain", ["model.projection=conv"]).run_name == "tiny-linformer-n128-k32-headwise-conv-s0"
    assert compose("pretrain", ["model.projection=mean_pool"]).run_name == \
        "tiny-linformer-n128-k32-headwise-mean_pool-s0"
    assert compose("pretrain", ["model.attention=full", "model.projection=conv"]).run_name == "tiny-full-n128-s0"
    assert compose("distill", ["task=sst2", "teacher_path=t", "model.projected_dim=[16,32]"]).run_name == \
        "sst2-t-distill-k16-32-s0"


def test_compose_works_where_the_caller_initialised_hydra_and_leaves_its_hydra_as_it_was():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from linformer.configs import config_dir

    assert compose("pretrain", ["model=tiny"]).model.name == "tiny"
    assert not GlobalHydra.instance().is_initialized()  # none made, none left
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):  # a notebook's own Hydra
        callers = GlobalHydra.instance()
        assert compose("pretrain", ["model=tiny"]).model.name == "tiny"
        assert GlobalHydra.instance() is callers and callers.is_initialized()
        assert hydra_compose("pretrain", ["model=small"]).model.name == "small"  # the caller's still composes


def test_each_config_file_is_parsed_once_and_an_edited_one_afresh(tmp_path, monkeypatch):
    """Hydra parsed each file's YAML at every composition reading it (a plan's dry run composes each of its jobs
    from the same files): a file's text is parsed once per process, each composition changing a copy of the parse.
    A file edited is parsed again, even where its size and modification time stay as they were."""
    import os
    import re

    import yaml

    from linformer import configs

    (tmp_path / "part").mkdir()
    (tmp_path / "app.yaml").write_text("defaults:\n  - part: a\n  - _self_\nx: 1\n")
    (tmp_path / "part" / "a.yaml").write_text("y: 2\n")
    (tmp_path / "part" / "b.yaml").write_text("y: 3\n")
    monkeypatch.setenv(configs.CONFIG_DIR_VARIABLE, str(tmp_path))
    parsed, load = [], OmegaConf.load
    monkeypatch.setattr(OmegaConf, "load", lambda f: parsed.append(f) or load(f))
    first = compose("app")
    assert (first.x, first.part.y) == (1, 2) and parsed
    first.part.y = 7  # the caller's copy: no later composition sees it
    parsed.clear()
    again = compose("app", ["x=5"])  # another composition of the same files (the defaults list kept in the parse)
    assert (again.x, again.part.y) == (5, 2) and parsed == []
    assert compose("app", ["part=b"]).part.y == 3 and len(parsed) == 1  # b.yaml alone is new
    edited = tmp_path / "part" / "a.yaml"
    before = edited.stat()
    edited.write_text("y: 4\n")  # the same size, and the same modification time put back
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert edited.stat().st_mtime_ns == before.st_mtime_ns and compose("app").part.y == 4
    edited.write_text("y: [\n")
    with pytest.raises(yaml.YAMLError, match=re.escape(f'in "{edited}", line 2')):  # as before: the file named
        compose("app", ["x=6"])


def test_a_config_file_read_from_two_folders_names_its_own_folder_though_their_texts_are_alike(tmp_path):
    """The parse of a text is shared by every file holding it (``parse_each_config_once``), not where it was read:
    configs/ and a --config-dir copy of it each give their own folder as Hydra's source of the file (its --info)."""
    from hydra._internal.sources_registry import SourcesRegistry

    from linformer import configs

    configs.parse_each_config_once()
    folder_source = SourcesRegistry.instance().resolve("file")  # the class composing uses (Hydra's plugin scan's)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "app.yaml").write_text("x: 1\n")
    a, b = (folder_source(provider="test", path=f"file://{tmp_path / name}").load_config("app.yaml")
            for name in ("a", "b"))
    assert a.config == b.config == {"x": 1}
    assert (a.path, b.path) == (f"file://{tmp_path / 'a'}", f"file://{tmp_path / 'b'}")


# Each command's config and the option of each of its groups that adds keys the defaults lack
DOCUMENTED = {"pretrain": [[], ["logger=all"], ["data=text"]], "finetune": [["model_path=m"], ["model_path=m", "task=_example"]],
              "convert": [["model_path=m"]], "tokenizer": [[]], "corpus": [[]], "distill": [["teacher_path=t"]],
              "transfer": [["model_path=m"]], "spectrum": [["model_path=m"]], "benchmark": [[]]}


def test_every_key_of_every_command_is_in_the_guide():
    """A key named only in its YAML comment is one a user cannot look up: each key a command's config holds is named
    (in backquotes, `key` or `key=...`) in docs/guide.md, whose configuration reference has a table per group. A key
    added to configs/ without a line there fails here. Hydra's own settings and keys starting with '_' (a config's
    internals) are not the user's."""
    import re

    guide = (CONFIGS.parent / "docs" / "guide.md").read_text()
    keys = set()
    for name, variants in DOCUMENTED.items():
        for overrides in variants:
            values = OmegaConf.to_container(compose(name, overrides), resolve=False)
            values.pop("hydra", None)
            keys |= {k for k in flatten(values) if not any(part.startswith("_") for part in k.split("."))}
    assert sorted(k for k in keys if not re.search(rf"`{re.escape(k)}[`=\[ ]", guide)) == []


@pytest.fixture
def hydra_internals_moved(monkeypatch):
    """A Hydra that moved the internals linformer reads (its parser, its search path's making): each looked up is
    missing, while Hydra's own use of them (hydra.main) is as it was."""
    from linformer import configs

    monkeypatch.setattr(configs, "_hydra_internal", lambda module, name: None)


def test_compose_falls_back_to_hydra_s_public_initialisation_where_its_internals_moved(hydra_internals_moved,
                                                                                        tmp_path):
    """compose (every command's early checks, every plan) reached Hydra.create_main_hydra2 and
    create_config_search_path with no fallback: a Hydra that moved them failed every command with an ImportError.
    Its public initialize_config_dir composes the same config, a --config-dir folder added by hydra.searchpath."""
    from linformer.configs import ConfigSources, command_sources, config_dir, hydra_command_line, reads_command_lines

    assert not reads_command_lines() and hydra_command_line(["model=tiny"], "pretrain") is None
    assert compose("pretrain", ["model=tiny"]).model.name == "tiny"
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "wee.yaml").write_text("defaults:\n  - tiny\n  - _self_\nname: wee\n")
    with command_sources(ConfigSources(config_dir(), tmp_path, "test")):
        assert compose("pretrain", ["model=wee"], with_hydra=True).model.name == "wee"
        assert compose("pretrain", ["model=small"]).model.name == "small"  # the configs folder's still first


def test_the_parse_cache_leaves_hydra_composing_as_before_where_its_sources_registry_moved(monkeypatch):
    """parse_each_config_once reaches hydra._internal.sources_registry: where it is gone the cache is not set up,
    without an error, and every composition is Hydra's own reading."""
    import sys
    import types

    from linformer.configs import parse_each_config_once

    # the module without the class, to an import of it; Hydra's own modules keep theirs
    monkeypatch.setitem(sys.modules, "hydra._internal.sources_registry", types.ModuleType("sources_registry"))
    assert parse_each_config_once() is None
    assert compose("pretrain", ["model=mini"]).model.name == "mini"


def test_an_error_in_an_option_of_one_s_own_names_that_option_s_file(tmp_path, monkeypatch):
    """A --config-dir option whose defaults name no option was said with the command's config's name
    (configs/pretrain.yaml), a file without the mistake: the file named is the option's."""
    from linformer.configs import command_sources, hydra_command_line
    from linformer.errors import ConfigError

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "bad.yaml").write_text("defaults:\n  - mirror_slce\n  - _self_\nname: bad\n")
    monkeypatch.chdir(tmp_path)
    line = hydra_command_line(["--config-dir", ".", "data=bad"], "pretrain")
    with command_sources(line.sources), pytest.raises(ConfigError) as err:
        compose(line.config_name, line.overrides)
    assert str(err.value).endswith(f"({tmp_path / 'data' / 'bad.yaml'})"), err.value


def test_a_stop_while_hydra_s_parser_reads_the_command_line_is_not_taken_for_a_usage_error(monkeypatch):
    """Hydra's parser ending the process (a usage error, --version) means "let Hydra's own run say it"; a SystemExit
    from elsewhere while it parses (a SIGTERM handler's) is a stop, and must end the command."""
    import hydra._internal.utils as hydra_utils

    from linformer import configs

    assert configs._parsed(["--no-such-flag"]) is None and configs._parsed(["--version"]) is None
    assert configs._parsed(["trainer.lr=1"]).overrides == ["trainer.lr=1"]
    real = hydra_utils.get_args_parser

    def stopped_while_parsing():
        parser = real()
        parser.parse_args = lambda args: (_ for _ in ()).throw(SystemExit(143))
        return parser

    monkeypatch.setattr(hydra_utils, "get_args_parser", stopped_while_parsing)
    with pytest.raises(SystemExit) as ended:
        configs._parsed(["trainer.lr=1"])
    assert ended.value.code == 143


@pytest.mark.parametrize("config, overrides", [
    ("pretrain", ["model=tiny", "seed=3", "trainer.lr=1e-3", "run_name=x"]),
    ("pretrain", ["seed=3", "model=small", "model.projected_dim=16", "data=mirror_mini", "data.n=64"]),
    ("pretrain", ["+extra=1", "++trainer.lr=2e-3", "trainer={batch_size: 4}", "run_name=${model.name}-a"]),
    ("finetune", ["task=sst2", "model_path=m", "subset_seed=5", "trainer.max_length=64"]),
    ("distill", ["teacher_path=t", "task=sst2", "distill.temperature=2.0"]),
])
@pytest.mark.parametrize("with_hydra", [False, True])
def test_the_tests_composition_memo_gives_what_hydra_composes(config, overrides, with_hydra, monkeypatch):
    """The tests' memo (tests/conftest.py) composes the group overrides once and applies the value overrides to a
    copy, as Hydra applies them after its composition: the same config, flags and hydra node included (the
    overrides it records, hydra.job.override_dirname), as Hydra's own compose."""
    import hydra

    memo = compose(config, overrides, with_hydra=with_hydra)
    monkeypatch.setattr(hydra, "compose", hydra.compose.__wrapped__)
    own = compose(config, overrides, with_hydra=with_hydra)
    assert OmegaConf.to_yaml(memo) == OmegaConf.to_yaml(own)
    assert (OmegaConf.is_struct(memo), OmegaConf.is_readonly(memo)) == (OmegaConf.is_struct(own),
                                                                        OmegaConf.is_readonly(own))
    monkeypatch.undo()
    with pytest.raises(ConfigError) as memo_err:  # a value override Hydra refuses is refused by Hydra itself
        compose(config, [*overrides, "trainer.no_such_key=1"])
    monkeypatch.setattr(hydra, "compose", hydra.compose.__wrapped__)
    with pytest.raises(ConfigError) as own_err:
        compose(config, [*overrides, "trainer.no_such_key=1"])
    assert str(memo_err.value) == str(own_err.value)
