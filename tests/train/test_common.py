"""train/common.py's optimizer groups, at the module's own depth: which weights decay, which are left out, and the
converted Linformer's separate projection group (a pretraining run would only show it as a slightly different loss)."""

import errno
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from linformer.modeling import LinformerConfig, LinformerForMaskedLM
from linformer.train.common import param_groups, projection_param_groups


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.dense = nn.Linear(4, 4)
        self.LayerNorm = nn.LayerNorm(4)
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)
        self.scale = nn.Parameter(torch.ones(4))  # one-dimensional, whatever its name


def _names(model, params) -> set[str]:
    ids = {id(p) for p in params}
    return {n for n, p in model.named_parameters() if id(p) in ids}


def test_matrices_decay_and_biases_norms_and_vectors_do_not():
    model = _Block()
    decay, no_decay = param_groups(model, 0.01)
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.01, 0.0)
    assert _names(model, decay["params"]) == {"embed.weight", "dense.weight"}
    assert _names(model, no_decay["params"]) == {"dense.bias", "LayerNorm.weight", "LayerNorm.bias", "scale"}


def test_frozen_and_left_out_parameters_are_in_neither_group():
    model = _Block()
    groups = param_groups(model, 0.01, leave_out=[model.dense.weight])
    grouped = set().union(*(_names(model, g["params"]) for g in groups))
    assert "dense.weight" not in grouped and not any(n.startswith("frozen.") for n in grouped)


def test_a_linformers_projections_get_their_own_group_without_decay_and_every_other_weight_one_group():
    config = LinformerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_seq_len=16, projected_dim=4, sharing="headwise")
    model = LinformerForMaskedLM(config)
    groups = projection_param_groups(model, 0.01, lr_projections=1e-3, lr_rest=1e-4)
    proj, *rest = groups
    assert proj["weight_decay"] == 0.0 and proj["lr"] == 1e-3
    projections = _names(model, proj["params"])
    assert projections and all(re.search(r"(^|\.)(E|F)\.", n) for n in projections)
    assert all(g["lr"] == 1e-4 for g in rest)
    every = [id(p) for g in groups for p in g["params"]]
    assert len(every) == len(set(every))  # no weight in two groups
    assert set(every) == {id(p) for p in model.parameters() if p.requires_grad}


# ------------------------------------------------------------------------------------------------ trackers
@pytest.mark.parametrize(("logger", "hidden", "package"), [("wandb", ("wandb",), "wandb"),
                                                           ("tensorboard", ("tensorboard", "tensorboardX"), "tensorboard"),
                                                           ("all", ("wandb",), "wandb")])
def test_a_tracker_whose_package_is_missing_is_refused_before_the_run(tiny_data, tmp_path, monkeypatch, logger, hidden,
                                                                       package):
    """Accelerate drops a tracker whose package is missing with a buried warning: the run 'succeeded' with no tracker
    and nothing said so."""
    import importlib.util

    from linformer.errors import ConfigError
    from linformer.train.pretrain import pretrain

    from .conftest import compose_pretrain

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else find_spec(name, *a))
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match=rf"needs the {package} package, not installed here: pip install {package} "):
        pretrain(compose_pretrain(tiny_data, f"logger={logger}", "trainer.max_steps=3"), run)
    assert not run.exists()


@pytest.mark.parametrize("launcher, trainer, warned", [("bf16", "no", "trainer.mixed_precision=bf16"),
                                                       ("fp16", "no", "trainer.mixed_precision=bf16 (fp16 needs"),
                                                       ("bf16", "bf16", None), ("no", "bf16", None)])
def test_a_launcher_s_other_precision_is_warned_naming_both_and_the_override(monkeypatch, caplog, launcher, trainer,
                                                                             warned):
    """`accelerate launch --mixed_precision bf16` reaches the run as ACCELERATE_MIXED_PRECISION, which
    trainer.mixed_precision overrides: the run trained in fp32 without a word."""
    import logging

    from linformer.runconfig.settings import LoggerSettings, TrainerSettings
    from linformer.train.common import build_accelerator, reset_accelerate_state

    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", launcher)
    with caplog.at_level(logging.WARNING, logger="linformer.train.common"):
        build_accelerator(TrainerSettings(batch_size=2, lr=1e-3, mixed_precision=trainer, cpu=True),
                          LoggerSettings(trackers=(), project="p"), Path("unused"))
    # the tests that build an Accelerator(cpu=True) themselves take the precision of a state left over
    reset_accelerate_state()
    said = [r.getMessage() for r in caplog.records if "launcher asks" in r.getMessage()]
    if warned is None:
        assert not said
    else:
        assert len(said) == 1 and f"mixed precision {launcher}" in said[0] and warned in said[0]
        assert f"trainer.mixed_precision={trainer} decides, so this run computes in fp32" in said[0]


def test_a_second_run_in_the_process_gets_its_own_precision_and_a_distributed_state_is_kept():
    """Accelerate keeps one state per process and refused a second mixed_precision in it ("restart your runtime"):
    a notebook's fp32 run and then a bf16 run. Each run gets the precision it asks for; a launcher's distributed
    state is never cleared."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    from linformer.runconfig.settings import LoggerSettings, TrainerSettings
    from linformer.train.common import build_accelerator, reset_accelerate_state

    def build(precision):
        return build_accelerator(TrainerSettings(batch_size=2, lr=1e-3, mixed_precision=precision, cpu=True),
                                 LoggerSettings(trackers=(), project="p"), Path("unused"))

    try:
        assert build("no").mixed_precision == "no"
        assert build("bf16").mixed_precision == "bf16"
        assert build("no").mixed_precision == "no"
        PartialState._shared_state["distributed_type"] = DistributedType.MULTI_CPU
        with pytest.raises(ValueError, match="already been initialized"):
            build("bf16")
    finally:  # the tests that build an Accelerator(cpu=True) themselves would take this one's state
        reset_accelerate_state()


def test_accelerate_still_has_the_private_state_reset_the_package_relies_on():
    """Accelerate has no public way to clear its per-process state; ``reset_accelerate_state`` calls its private
    ``_reset_state`` methods (and fit_accelerate_state reads the singletons' ``_shared_state``). An accelerate
    without them fails here, naming its version, not in a user's second run in a notebook."""
    import accelerate
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState, PartialState

    from linformer.train.common import reset_accelerate_state

    used = {"AcceleratorState._reset_state": getattr(AcceleratorState, "_reset_state", None),
            "GradientState._reset_state": getattr(GradientState, "_reset_state", None),
            "PartialState._shared_state": getattr(PartialState, "_shared_state", None),
            "AcceleratorState._shared_state": getattr(AcceleratorState, "_shared_state", None)}
    gone = [name for name, found in used.items() if found is None]
    assert not gone, (f"accelerate {accelerate.__version__} has no {', '.join(gone)}: linformer/train/common.py's "
                      "reset_accelerate_state and fit_accelerate_state need another way to clear its state")
    try:
        assert Accelerator(cpu=True).mixed_precision == "no"
        reset_accelerate_state()
        assert not PartialState._shared_state and not AcceleratorState._shared_state
        assert not GradientState._shared_state
        # cleared: another precision in the same process is taken, not refused
        assert Accelerator(cpu=True, mixed_precision="bf16").mixed_precision == "bf16"
    finally:
        reset_accelerate_state()


def test_the_trackers_config_carries_the_summary_s_batch_record(tiny_data, tmp_path):
    """The summary records the processes and the global batch, the trackers' config did not: a TensorBoard (or W&B)
    run of 2 processes x batch 8 looked like one of batch 8. The trackers get the same fields as the summary."""
    import contextlib

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from linformer.train.pretrain import pretrain

    from .conftest import compose_pretrain

    summary = pretrain(compose_pretrain(tiny_data, "logger=tensorboard", "trainer.max_steps=3",
                                        "trainer.grad_accum=2"), tmp_path)
    hparams = {}
    for events in tmp_path.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        with contextlib.suppress(KeyError):  # a file of the run holds the hparams plugin
            content = acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
            info = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
            hparams.update({k: v.string_value or v.number_value for k, v in info.hparams.items()})
    fields = ("batch_size", "grad_accum", "processes", "global_batch", "mixed_precision")
    assert {k: hparams[k] for k in fields} == {k: summary[k] for k in fields}
    assert hparams["processes"] == 1 and hparams["global_batch"] == 16 and hparams["trainer/batch_size"] == 8


def test_a_model_s_architecture_names_k_and_sharing_only_where_it_projects_keys():
    """Every stage tags and configures its trackers with model_architecture: full attention has no k and no sharing,
    whatever its config's defaults say, and the model group's projection keys leave the trackers' config with them."""
    from linformer.train.common import architecture_tags, model_architecture, tracker_config

    linformer = LinformerConfig(projected_dim=16, sharing="kv")
    full = LinformerConfig(projected_dim=16, sharing="kv", attention="full")
    assert architecture_tags(linformer) == ["attention=linformer", "k=16", "sharing=kv"]
    assert architecture_tags(full) == ["attention=full"]
    model = {"name": "tiny", "attention": "full", "projected_dim": 16, "sharing": "kv", "projection": "linear",
             "projection_init": "mean", "hidden_size": 32}
    assert tracker_config({"model": model, "seed": 0}, model_architecture(full)) == {
        "model": {"name": "tiny", "attention": "full", "hidden_size": 32}, "seed": 0, "attention": "full"}
    assert tracker_config({"model": model}, model_architecture(linformer))["model"] == model


def test_a_run_s_tensorboard_tracker_is_one_tensorboard_run_whose_hparams_sit_beside_its_metrics(tiny_data, tmp_path):
    """Accelerate's add_hparams wrote each start's hparams into a sub-run of its own (a folder named by the time, no
    metrics): TensorBoard listed a run folder as several runs, and HPARAMS sessions with empty metric columns; a
    full-attention run's said model/projected_dim 8 and model/sharing headwise."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    from linformer.train.pretrain import pretrain

    from .conftest import compose_pretrain

    for steps in (3, 4):  # a run continued: a second start writes into the same run
        pretrain(compose_pretrain(tiny_data, "logger=tensorboard", "model.attention=full", f"trainer.max_steps={steps}",
                                  "trainer.allow_config_change=[trainer.max_steps]"), tmp_path)
    files = list(tmp_path.rglob("events.out.tfevents.*"))
    assert len(files) == 2 and {f.parent for f in files} == {tmp_path / "linformer"}
    assert not [p for p in (tmp_path / "linformer").iterdir() if p.is_dir()]
    acc = EventAccumulator(str(tmp_path / "linformer"))
    acc.Reload()
    assert "loss" in acc.Tags()["scalars"]
    plugin = acc.PluginTagToContent("hparams")
    assert set(plugin) == {"_hparams_/session_start_info"}  # no experiment: metric columns are the run's tags
    info = plugin_data_pb2.HParamsPluginData.FromString(plugin["_hparams_/session_start_info"]).session_start_info
    hparams = {k: v.string_value or v.number_value for k, v in info.hparams.items()}
    assert hparams["attention"] == "full" and hparams["model/attention"] == "full"
    assert not {"k", "sharing", "model/projected_dim", "model/sharing", "model/projection"} & set(hparams)


def test_a_resumed_run_s_tensorboard_events_drop_the_steps_an_earlier_attempt_logged_past_the_checkpoint(tmp_path):
    """An attempt killed at step 8 of a run checkpointed at 5: the next attempt logs 6.. again. TensorBoard showed the
    killed attempt's 6-8 beside the new ones (each step twice), while metrics.jsonl had dropped them."""
    from accelerate import Accelerator
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from linformer.runconfig.settings import LoggerSettings
    from linformer.train.common import init_trackers, reset_accelerate_state

    logger = LoggerSettings(trackers=("tensorboard",), project="linformer")
    for steps, resumed in ((range(1, 9), None), (range(6, 11), 5)):
        reset_accelerate_state()
        accelerator = Accelerator(cpu=True, log_with=["tensorboard"], project_dir=str(tmp_path))
        init_trackers(accelerator, logger, tmp_path, "run", {"lr": 1e-3}, "pretrain", None, [],
                      resumed_step=resumed)
        for step in steps:
            accelerator.log({"loss": float(step + (100 if resumed is None else 0))}, step=step)
        accelerator.end_training()
    reset_accelerate_state()
    acc = EventAccumulator(str(tmp_path / "linformer"), size_guidance={"scalars": 0})
    acc.Reload()
    points = [(e.step, e.value) for e in acc.Scalars("loss")]
    assert points == [(s, s + 100.0) for s in range(1, 6)] + [(s, float(s)) for s in range(6, 11)]


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "runs/linformer/events.out.tfevents")


def _no_memory(*args, **kwargs):
    raise MemoryError()


def _our_bug(*args, **kwargs):
    raise TypeError("unhashable type: 'list'")


@pytest.mark.parametrize(("target", "raiser", "raised"), [
    ("torch.utils.tensorboard.writer.FileWriter.add_summary", _no_space, OSError),  # the run's hparams, its first
    ("torch.utils.tensorboard.writer.FileWriter.add_summary", _no_memory, MemoryError),  # write
    ("linformer.train.common._flatten", _our_bug, TypeError),  # before any tracker's code
], ids=["full-disk", "out-of-memory", "our-code"])
def test_an_error_another_tracker_release_would_not_mend_is_raised_as_it_is(tmp_path, monkeypatch, target, raiser,
                                                                             raised):
    """A full disk or unwritable log folder (the CLI's own line names it), no memory, or a bug of ours that raises
    while the trackers start was reported as the tracker failing to start, "Install a release of it that works"."""
    from accelerate import Accelerator

    from linformer.runconfig.settings import LoggerSettings
    from linformer.train.common import init_trackers, reset_accelerate_state

    monkeypatch.setattr(target, raiser)
    reset_accelerate_state()
    accelerator = Accelerator(cpu=True, log_with=["tensorboard"], project_dir=str(tmp_path))
    try:
        with pytest.raises(raised):  # a ConfigError is none of these
            init_trackers(accelerator, LoggerSettings(trackers=("tensorboard",), project="linformer"), tmp_path,
                          "run", {"lr": 1e-3}, "pretrain", None, [])
    finally:
        accelerator.end_training()
        reset_accelerate_state()


def test_a_sweep_s_runs_get_a_w_b_group_and_names_of_their_own(tmp_path):
    """Without experiment_name a sweep's runs had no W&B group, and two sweeps' runs of one run_name shared a name."""
    from linformer.train.common import tracker_names

    sweep = tmp_path / "finetune" / "multirun"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - task=sst2\n    - trainer.lr=1e-4,3e-4\n"
                                         "    - seed=0,1\n")
    a, b = sweep / "sst2-lr0.0001-s0-max_train_examples=64", sweep / "sst2-lr0.0001-s0-max_train_examples=96"
    assert tracker_names(a, "sst2-lr0.0001-s0", None) == (a.name, "finetune/multirun: trainer.lr=1e-4,3e-4 seed=0,1")
    assert tracker_names(b, "sst2-lr0.0001-s0", None)[0] != tracker_names(a, "sst2-lr0.0001-s0", None)[0]
    assert tracker_names(a, "sst2-lr0.0001-s0", "mine") == (a.name, "mine")
    assert tracker_names(tmp_path / "finetune" / "one", "one", None) == ("one", None)  # not a sweep's
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - " + "x" * 200 + "=1,2\n")
    assert len(tracker_names(a, "r", None)[1]) == 128


def test_pretraining_and_finetuning_decay_a_linformers_projections_like_every_matrix():
    """The other rule for E and F (``param_groups``' docstring says why each holds): decayed with the model's
    matrices in pretraining and finetuning, while transfer and distillation leave them undecayed (above)."""
    config = LinformerConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_seq_len=16, projected_dim=4, sharing="headwise")
    model = LinformerForMaskedLM(config)
    decay, _ = param_groups(model, 0.01)
    projections = {n for n in _names(model, decay["params"]) if re.search(r"(^|\.)(E|F)\.", n)}
    assert len(projections) == 2 * config.num_hidden_layers
