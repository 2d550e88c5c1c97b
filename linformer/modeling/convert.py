"""Turn a BERT- or RoBERTa-family encoder into a Linformer: its config, every weight it has, and its tokenizer.

The two families differ only in facts that LinformerConfig holds as fields (``position_offset``,
``classifier_head``, ``lm_head_activation``, ``type_vocab_size``), so one conversion serves both and the converted
model runs the same forward code. With ``attention="full"`` the converted model reproduces the source; with
``attention="linformer"`` only the projections E, F (and any head the source lacks) start fresh.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import transformers
from safetensors import SafetensorError, safe_open
from transformers import AutoConfig, AutoModel, PreTrainedModel
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_MASKED_LM_MAPPING,
    MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING,
)
from transformers.utils import cached_file

from ..data.io import load_auto
from ..data.tasks import tasks_with_labels
from ..data.tokenizer import load_tokenizer
from ..files.locations import resolve_path
from ..files.outputs import check_output_dir, made_by
from ..logfile import say
from ..rng import seeded
from ..shell import hydra_override, imports_words, script_command
from .attention import resampled_rows
from .card import conversion_info, fresh_besides_head, not_copied_words, read_card_info, write_model_card
from .configuration import (
    ENCODER_FIELDS,
    SHAPE_FIELDS,
    LinformerConfig,
    check_model_fields,
    first_layers,
    position_offset_of,
)
from .errors import CheckpointError, ConfigError, LinformerError, first_line
from .loading import (
    _SAFE_WEIGHTS,
    _CapturedReport,
    _modules,
    check_tokenizer_fits,
    check_weights_described,
    finetuning_run_models,
    load_pretrained,
    resolve_model_path,
    unpickling_refusal,
)
from .saving import model_folder, save_model_dir
from .values import CONVERTED_EXACT_KEYS as CONVERTED_EXACT_KEYS  # the converted defaults (their home: values)
from .values import CONVERTED_LENGTH_POLICY as CONVERTED_LENGTH_POLICY
from .values import CONVERTED_OVERLAP, projects_keys
from .values import NO_EXACT_KEYS as NO_EXACT_KEYS

if TYPE_CHECKING:
    from ..runconfig import ConvertSpec

log = logging.getLogger(__name__)

# Supported source model types, and the family whose layout (positions, heads) each one has.
SOURCE_FAMILIES = {"bert": "bert", "roberta": "roberta", "xlm-roberta": "roberta", "camembert": "roberta"}

_CLASSIFIER_FIELDS = ("id2label", "label2id", "problem_type")
# BERT's MLM head names -> ours (RoBERTa's lm_head.* and both families' classifier.* already match).
_HEAD_RENAMES = (
    ("cls.predictions.transform.LayerNorm.", "lm_head.layer_norm."),
    ("cls.predictions.transform.dense.", "lm_head.dense."),
    ("cls.predictions.", "lm_head."),
)
_PREFIX = "roberta."  # our base_model_prefix
_PROJECTION_PARAM = re.compile(r"(^|\.)(E|F)\.")  # E/F of a layer, or the encoder's layerwise E
_LAYER = re.compile(r"\.\d+\.")  # a layer's index in a parameter's name


def is_projection_weight(name: str) -> bool:
    """Whether a parameter (or state-dict key) belongs to a projection E or F."""
    return bool(_PROJECTION_PARAM.search(name))
_POSITIONS = "embeddings.position_embeddings.weight"


def from_pretrained_encoder(cls, name_or_path: str | os.PathLike | PreTrainedModel, *, extend_positions: bool = True,
                            **settings):
    """A BERT/RoBERTa-family model (a directory, a run directory, ``"minilm"``, a cached hub name, or a model object)
    converted into the Linformer model class `cls`, every weight the source has copied (the classmethod
    ``LinformerPreTrainedModel.from_pretrained_encoder`` calls this).

    ``settings`` set LinformerConfig fields (``attention``, ``projected_dim``, ``sharing``, ``max_seq_len``...).
    ``max_seq_len`` defaults to the source's longest input; a shorter one truncates the position table, a
    longer one repeats the source's learned positions to fill it (Longformer's recipe) unless
    ``extend_positions=False``, which makes that a ConfigError. ``dtype`` (or ``torch_dtype``), as for
    ``from_pretrained``: the converted weights in that dtype, ``"auto"`` the source's own (a float16 source stays
    float16); none given, float32, the dtype a model to train wants whatever the source's. A saved Linformer given
    as the source is reshaped with ``settings`` into `cls` (``from_linformer``).
    """
    if not isinstance(name_or_path, PreTrainedModel) and \
            _source_config(where := resolve_model_path(name_or_path)).model_type == "linformer":
        return from_linformer(where, cls, extend_positions=extend_positions, **settings)
    settings, dtype = _without_dtype(settings)
    # the config first: a bad setting is said before the weights load
    config, where = _encoder_config(cls.copies_classifier_fields, name_or_path, settings)
    source, leftovers = (name_or_path, {}) if isinstance(name_or_path, PreTrainedModel) else _load_source(where)
    return _in_dtype(_convert(cls, source, config, where, extend_positions, settings, leftovers), dtype, source)


def _without_dtype(settings: dict) -> tuple[dict, torch.dtype | str | None]:
    """(`settings` without ``dtype``/``torch_dtype``, the torch dtype they name, ``"auto"`` or None): those are
    from_pretrained's keywords for the weights' dtype, not config fields, and a conversion honours them as
    from_pretrained does."""
    settings = dict(settings)
    named = [settings.pop(key) for key in ("dtype", "torch_dtype") if key in settings]
    if not named or named[0] in (None, "auto"):
        return settings, named[0] if named else None
    dtype = named[0]
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ConfigError(f"dtype={named[0]!r} is not a floating-point torch dtype (torch.bfloat16, 'float16', ...).")
    return settings, dtype


def _in_dtype(model: PreTrainedModel, dtype: torch.dtype | str | None, source: PreTrainedModel) -> PreTrainedModel:
    """`model` (built in float32) in `dtype`: a torch dtype, ``"auto"`` (the dtype of `source`, the model it was
    converted from, as from_pretrained resolved it) or None (float32, as built)."""
    if dtype == "auto":
        dtype = source.dtype
    if dtype is not None:
        model.to(dtype)
        model.config.dtype = dtype  # what save_pretrained records, and from_pretrained(dtype="auto") reads back
    return model


def check_settings(name_or_path: str | os.PathLike, settings: dict, model_class: type | None = None,
                   key: str | None = "model") -> LinformerConfig:
    """The config that converting `name_or_path` (a BERT/RoBERTa-family encoder, or a saved Linformer to reshape)
    into `model_class` (default: ``default_class``'s) with `settings` gives, from the configs alone: a command checks
    its ``model.*`` settings with it before any weights load, and a ConfigError about them names the config group
    (``key: ...``; None: the caller names it)."""
    path = resolve_model_path(name_or_path)
    with settings_named(key) if key is not None else nullcontext():
        if _source_config(path).model_type == "linformer":
            return _reshaped_config(path, settings)[1]
        model_class = model_class or default_class(path)
        return _encoder_config(model_class.copies_classifier_fields, path, settings)[0]


def default_class(path: str) -> type[PreTrainedModel]:
    """The Linformer class that keeps what the model at `path` is: a saved Linformer's own class (``_saved_class``);
    for a BERT/RoBERTa-family source, the sequence classifier where the source is one (its head and labels come
    along), else the masked LM (the source's MLM head, or a fresh one)."""
    config = _source_config(path)
    if config.model_type == "linformer":
        return _saved_class(path)
    mapping = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING if is_sequence_classifier(config) else \
        MODEL_FOR_MASKED_LM_MAPPING  # the classes registered for LinformerConfig (auto.register)
    return mapping[LinformerConfig]


@contextmanager
def settings_named(key: str = "model"):
    """A ConfigError in the block names the config group its settings came from (``key: ...``). Around a conversion
    (``from_pretrained_encoder``, ``from_linformer``, ``convert_encoder``), which builds its config before any weights
    load, that is the whole check of a command's ``model.*`` settings."""
    try:
        yield
    except ConfigError as err:
        raise ConfigError(f"{key}: {err}") from None


def convert_encoder(name_or_path: str | os.PathLike, out_dir: str | os.PathLike, model_class: type | None = None, *,
                    seed: int | None = None, overwrite: bool = False, **settings) -> Path:
    """Convert the encoder at ``name_or_path`` into ``model_class`` (default ``default_class``'s: a classifier stays
    a classifier with its labels, anything else becomes LinformerForMaskedLM, a saved Linformer keeps its class) and
    save it with the source's tokenizer and a model card (``card.py``) in ``out_dir``, which appears complete or not
    at all. The weights keep the source's dtype unless ``dtype`` says otherwise (``from_pretrained_encoder``).

    ``out_dir`` follows the output rule (``outputs.check_output_dir``): an earlier conversion with the same source
    and settings is rebuilt, anything else there is refused unless ``overwrite``. ``seed`` seeds what starts
    fresh (E/F are deterministic; a missing head is not). Returns ``out_dir``."""
    path = resolve_model_path(name_or_path)
    source_type = _source_config(path).model_type
    if source_type != "linformer":
        _check_supported(source_type, path)  # first: a GPT-2 directory is named as one
    model_class = model_class or default_class(path)
    record = made_by("convert", {"model_path": str(name_or_path), "model_class": model_class.__name__,
                                 "model": settings, "seed": seed})
    check_output_dir(out_dir, record, overwrite, reads=[path], key="out_dir=")  # before the slow part
    tokenizer = load_tokenizer(path, "model_path")
    # a saved conversion is the source in another form: its dtype too, as the source's own save_pretrained keeps it
    dtype = {} if {"dtype", "torch_dtype"} & set(settings) else {"dtype": "auto"}
    with seeded(seed):  # the caller's generators as they were after: a notebook's draws do not repeat per conversion
        model = model_class.from_pretrained_encoder(path, **settings, **dtype)
    check_tokenizer_fits(tokenizer, model.config, path)
    with model_folder(out_dir, record, overwrite, key="out_dir=") as tmp:
        save_model_dir(model, tokenizer, tmp)  # its tokenizer's limit is n: it caps inputs (loading.max_tokens)
        # the card goes inside the atomic block: a converted directory never lacks its card
        write_model_card(tmp, conversion_info(name_or_path, model, name=Path(out_dir).name, path=path),
                         folder=Path(out_dir).name)
    return Path(out_dir)


def is_sequence_classifier(config) -> bool:
    return any(name.endswith("ForSequenceClassification") for name in config.architectures or ())


def classifier_config(given: str, option: str):
    """(the directory or hub name, the config) of the sequence classifier `given` to `option`. A finetuning run
    directory is refused naming the model in it, and so is any model that is not a *ForSequenceClassification (a
    pretrained or converted masked LM): its classifier head would start at random, and its accuracies would be
    chance. ConfigError naming the option."""
    instead = finetuning_run_models(Path(resolve_path(given)), given)
    if instead:
        raise ConfigError(f"{option} {given} is a finetuning run directory, not a model: give {instead}")
    path = resolve_model_path(given, option)
    config = load_auto(AutoConfig, path)
    if not is_sequence_classifier(config):
        raise ConfigError(f"{option} {given} is a {architecture(config)}, not a sequence classifier (its classifier "
                          "head would start at random): give a finetuned one, a finetuning run's best/")
    return path, config


def architecture(config) -> str:
    return ", ".join(config.architectures or [f"{config.model_type} model"])


def _saved_class(path: str) -> type[PreTrainedModel]:
    """The package's class of the saved Linformer at `path` (its config's ``architectures``): a finetuned classifier,
    a masked LM, or a bare encoder; a masked LM where the config names none."""
    saved = (LinformerConfig.from_pretrained(path).architectures or ["LinformerForMaskedLM"])[0]
    from . import model, task_models

    found = getattr(task_models, saved, None) or getattr(model, saved, None)
    if not isinstance(found, type) or not issubclass(found, PreTrainedModel):
        raise CheckpointError(f"{path}/config.json names the architecture {saved!r}, which is not a Linformer class "
                              "of this package: pass model_class.")
    return found


def from_linformer(path: str, auto_class, *, extend_positions: bool = True, **settings):
    """A saved Linformer (a converted model, a finetuned classifier) with its config changed by ``settings``: every
    weight is kept; E and F start fresh when the attention becomes ``linformer`` (as window means), and a longer
    ``max_seq_len`` extends the position table with copies of its learned rows (as ``from_pretrained_encoder``).
    A converted model switched to Linformer attention takes the converted models' length policy unless
    ``settings`` set it. ``dtype`` as for ``from_pretrained_encoder`` (``"auto"``: the saved model's dtype)."""
    settings, dtype = _without_dtype(settings)
    config, new = _reshaped_config(path, settings)
    if config.projects_keys and new.projects_keys:  # E and F are kept: their k, sharing and kind are theirs
        changed = [f"{name}: {getattr(config, name)!r} -> {getattr(new, name)!r}"
                   for name in ("projected_dim", "sharing", "projection") if getattr(config, name) != getattr(new, name)]
        if changed:
            raise ConfigError(f"{path} is a Linformer whose E and F are kept, so its k, sharing and projection stay as "
                              f"saved ({'; '.join(changed)}): give model.projected_dim={config.projected_dim!r}, "
                              f"model.sharing={config.sharing!r} and model.projection={config.projection!r} "
                              "(scripts/convert.py's keys; in Python the same without model.), or convert the source "
                              "encoder again with the new ones (E and F start fresh).")
    if new.max_seq_len > config.max_seq_len and not extend_positions:
        raise ConfigError(f"max_seq_len={new.max_seq_len} is longer than {path} allows ({config.max_seq_len}): pass "
                          "extend_positions=True to fill the longer table with copies of its learned positions.")
    model = load_pretrained(auto_class, path, config=config)  # as saved; the positions are resized below
    state = model.state_dict()
    key = next(k for k in state if k.endswith(_POSITIONS))
    state[key] = extend_positions_table(state[key], new.max_position_embeddings, new.position_offset)
    out = type(model)(new)
    _fit_projections(state, out.state_dict(), config, new, path)
    missing, unused = out.load_state_dict(state, strict=False)
    _check_and_report(out, path, missing, unused)
    out.tie_weights()
    return _in_dtype(out, dtype, model)


def _reshaped_config(path: str, settings: dict) -> tuple[LinformerConfig, LinformerConfig]:
    """The saved Linformer's config at `path`, and the one ``from_linformer`` gives it with `settings`."""
    check_model_fields(settings, prefix="")
    config = LinformerConfig.from_pretrained(path)
    check_kept_shapes(settings, config, path)
    fields = {k: v for k, v in config.to_dict().items() if k not in ("model_type", "transformers_version")}
    if projects_keys(settings.get("attention")) and not config.projects_keys:
        fields.update(converted_length_policy({"projection": config.projection, **settings}))
        fields.update(converted_exact_keys({"projection": config.projection, **settings},
                                           int(settings.get("max_seq_len", config.max_seq_len))))
    fields.update(exact_keys_cleared(config, settings))
    if "max_seq_len" in settings:
        fields["max_position_embeddings"] = int(settings["max_seq_len"]) + config.position_offset
    return config, LinformerConfig(**{**fields, **settings})


def exact_keys_cleared(config, settings: dict) -> dict:
    """The exact keys (local_window, global_positions) that `settings` do not name, cleared (NO_EXACT_KEYS), where
    they turn the saved Linformer of `config` to an attention that cannot have them (full: a longer teacher, the
    spectrum's n x n maps); else {}. A converted Linformer's window and global tokens have no projection to sit
    beside there, and a load that kept them would be refused. What a reshape (``from_linformer``) and a load of a
    saved Linformer under full attention (``spectrum.load_full_attention_model``) both add to their settings."""
    if _can_have_exact_keys({"attention": config.attention, "projection": config.projection, **settings}):
        return {}
    return {k: v for k, v in NO_EXACT_KEYS.items() if k not in settings}


def _can_have_exact_keys(settings: dict) -> bool:
    """Whether a model of these settings may have exact local and global keys: only beside a linear projection."""
    return projects_keys(settings.get("attention", "linformer")) and settings.get("projection", "linear") == "linear"


def cleared_exact_keys(source, config) -> str:
    """The exact keys (local_window, global_positions) a saved Linformer's config `source` had and the reshaped
    model's `config` does not, as words ("" for none): full attention has no projection for them to sit beside."""
    gone = [f"{k}={getattr(source, k)!r}" for k, none in NO_EXACT_KEYS.items()
            if getattr(source, k, none) != none and getattr(config, k, none) == none]
    return ", ".join(gone)


# The shape fields a conversion sets: n (the position table is cut or extended) and the attention with its E and F.
CONVERTED_SHAPE_FIELDS = frozenset({"max_seq_len", "attention", "projected_dim", "sharing", "projection"})


def check_kept_shapes(settings: dict, source_config, where: str) -> None:
    """ConfigError for the first of `settings` that would change the shape of a weight the source's model keeps (its
    width, depth, heads, vocabulary...): the weights would not load into it. A value equal to the source's passes."""
    for key in sorted((SHAPE_FIELDS - CONVERTED_SHAPE_FIELDS) & set(settings)):
        if key == "max_position_embeddings":
            raise ConfigError(f"max_position_embeddings={settings[key]!r}: a conversion sets it from max_seq_len (n "
                              "and the position offset): give max_seq_len instead.")
        have = getattr(source_config, key, None)
        if settings[key] != have:
            fewer = first_layers(have, settings[key]) if key == "num_hidden_layers" else None
            raise ConfigError(f"{key}={settings[key]!r}: a conversion keeps the shapes of the weights of {where}, "
                              f"whose {key} is {have!r}: leave {key} out (it comes from the source); "
                              + (f"{fewer}, after converting it whole." if fewer else
                                 "another size is a model to pretrain, not to convert."))


def _fit_projections(state: dict, target: dict, old: LinformerConfig, new: LinformerConfig, path: str) -> None:
    """E and F of the saved weights (`state`) in the shapes the new config's model (`target`) has. A linear E or F
    under ``length_policy="resample"`` takes a new n by the same area resampling that fits it to every input's
    length (``resampled_rows``: at an n that is a multiple of the old, every input the old n took is projected
    exactly as before). Any other change of an existing E or F's shape (its k, sharing or projection, or n under
    fairseq's slice policy, whose rows are positions) is a ConfigError: those weights would not mean the same."""
    for key in [k for k in state if is_projection_weight(k) and k in target and state[k].shape != target[k].shape]:
        have, want = state[key].shape, target[key].shape
        n_alone = (old.projection == new.projection == "linear" and have[:-2] == want[:-2]
                   and have[-1] == want[-1])  # the shapes differ in n, E's rows, alone
        if n_alone and new.length_policy == "resample" and old.length_policy == "resample":
            state[key] = resampled_rows(state[key], want[-2])
            continue
        changed = [f"{name}: {getattr(old, name)!r} -> {getattr(new, name)!r}"
                   for name in ("max_seq_len", "projected_dim", "sharing", "projection", "length_policy")
                   if getattr(old, name) != getattr(new, name)]
        if n_alone and old.length_policy != "resample":
            # the policy the source was saved under decides, not the one asked of the conversion
            raise ConfigError(f"{path}'s E and F ({key}: {tuple(have)}) cannot take n={want[-2]} "
                              f"({'; '.join(changed)}): {path} was saved under length_policy={old.length_policy!r}, "
                              "whose E rows are positions; only a model saved under length_policy=resample takes "
                              "another n (by resampling). Pretrain or convert with model.length_policy=resample to "
                              "lengthen the model later, or convert the source encoder again with these settings "
                              "(E and F start fresh).")
        raise ConfigError(f"{path}'s E and F ({key}: {tuple(have)}) cannot take the new settings' shape {tuple(want)} "
                          f"({'; '.join(changed)}): only a linear projection under length_policy=resample changes n "
                          "(by resampling). Convert the source encoder again with these settings (E and F start "
                          "fresh), or keep them.")


def _encoder_config(copies_classifier_fields: bool, name_or_path, settings: dict) -> tuple[LinformerConfig, str]:
    """The LinformerConfig of the source (a model object, or a path read for its config alone) converted with
    `settings` (and its labels, where the target class copies them), and how to name the source."""
    if isinstance(name_or_path, PreTrainedModel):
        source_config, where, pooling = name_or_path.config, type(name_or_path).__name__, None
        _check_supported(source_config.model_type, where)
    else:
        where = resolve_model_path(name_or_path)
        source_config = _source_config(where)
        _check_supported(source_config.model_type, where)
        pooling = sentence_transformers_pooling(where) if "classifier_pooling" not in settings else None
    check_kept_shapes(settings, source_config, where)
    return LinformerConfig(**_config_fields(source_config, copies_classifier_fields, settings, pooling)), where


def _load_source(path: str) -> tuple[PreTrainedModel, dict[str, torch.Tensor | None]]:
    """The source model at `path` (with its heads, as its config's ``architectures`` names them), and what its weight
    files hold beside it: the weights its class has no place for (a pooler or next-sentence head that
    bert-base-uncased's BertForMaskedLM does not take), by their names in the files, each with its tensor where it
    belongs to the base model (the pooler, which a Linformer may hold), else None (a head: named, not copied).
    CheckpointError (one line) where config.json does not describe the weights (``check_weights_described``)."""
    config = _source_config(path)
    report = _CapturedReport()  # transformers' LOAD REPORT table: what it says is checked below, in one line
    try:
        with report.capture():
            source, info = load_auto(_source_class(config), path, config=config, output_loading_info=True,
                                     ignore_mismatched_sizes=True)  # a shape is checked below, naming the key
    except (OSError, SafetensorError) as err:
        raise CheckpointError(f"{path!r} holds a config.json but no weights that load (a missing, damaged or "
                              f"incomplete weights file: copy it again): {first_line(err)}") from err
    except pickle.UnpicklingError as err:  # torch's weights-only loader refused a pickled weights file
        files = sorted(Path(path).glob("pytorch_model*.bin")) if os.path.isdir(path) else []
        raise CheckpointError(f"{path!r}: {unpickling_refusal(err, files, _SAFE_WEIGHTS)}") from None
    check_weights_described(path, source, info)
    base = source.base_model_prefix + "."
    left = sorted(info.get("unexpected_keys") or [])
    tensors = _file_tensors(path, [k for k in left if k.startswith(base)])
    return source, {k: tensors.get(k) for k in left}


def _file_tensors(path: str, keys: list[str]) -> dict[str, torch.Tensor]:
    """The tensors named `keys` in the weight files of the model at `path` (a folder, or a hub name in the cache):
    model.safetensors or pytorch_model.bin, sharded or not; a key the files do not hold by that name is left out."""
    if not keys:
        return {}

    def find(name):
        return cached_file(path, name, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False)

    for single, index in (("model.safetensors", "model.safetensors.index.json"),
                          ("pytorch_model.bin", "pytorch_model.bin.index.json")):
        if found := find(single):
            files = {k: found for k in keys}
        elif found := find(index):
            weight_map = json.loads(Path(found).read_text(encoding="utf-8")).get("weight_map") or {}
            files = {k: find(weight_map[k]) for k in keys if k in weight_map}
        else:
            continue
        tensors = {}
        for file in set(files.values()) - {None}:
            wanted = [k for k, f in files.items() if f == file]
            if file.endswith(".safetensors"):
                with safe_open(file, framework="pt") as weights:
                    held = set(weights.keys())  # a safe_open handle has no `in`
                    tensors |= {k: weights.get_tensor(k) for k in wanted if k in held}
            else:
                state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
                tensors |= {k: state[k] for k in wanted if k in state}
        return tensors
    return {}


def _source_config(path: str):
    try:
        return load_auto(AutoConfig, path)
    except LinformerError:  # already says what is wrong (a folder asking to run its own code)
        raise
    except (OSError, ValueError, KeyError) as err:
        if not os.path.isdir(path):  # a hub name: the hub's message runs over several lines; its first says why
            why = first_line(err)
            raise CheckpointError(f"{path!r} is not a folder here, and the Hugging Face hub did not give it ({why}): "
                                  "give a local model directory, or check the name and the network.") from err
        raise CheckpointError(f"{path!r} has a config.json that transformers cannot read: {err}") from err


def _check_supported(model_type: str, where: str) -> None:
    if model_type not in SOURCE_FAMILIES:
        raise CheckpointError(
            f"{where!r} is a {model_type!r} model; only {', '.join(SOURCE_FAMILIES)} encoders can be converted to a "
            "Linformer."
        )


def _source_class(config) -> type[PreTrainedModel]:
    """The class the checkpoint was saved from, so its heads load too; the bare encoder when unknown."""
    for name in config.architectures or ():
        found = getattr(transformers, name, None)
        if isinstance(found, type) and issubclass(found, PreTrainedModel) and \
                getattr(found.config_class, "model_type", None) == config.model_type:
            return found
    return AutoModel




def converted_exact_keys(settings: dict, n: int) -> dict:
    """The exact-key fields a converted Linformer of n tokens gets besides those ``settings`` name: each field left
    unset keeps its converted default (CONVERTED_EXACT_KEYS, the window capped at n; and CONVERTED_OVERLAP where the
    model has a window or global tokens), so that naming one (``local_window=64``) changes that one alone; 0 and []
    turn a part off. Nothing for an attention or projection that cannot have them."""
    if not _can_have_exact_keys(settings):
        return {}
    defaults = {"local_window": min(CONVERTED_EXACT_KEYS["local_window"], n),
                "global_positions": list(CONVERTED_EXACT_KEYS["global_positions"])}
    exact = defaults | {key: settings[key] for key in defaults if key in settings}
    if exact["local_window"] or exact["global_positions"]:
        defaults |= CONVERTED_OVERLAP
    return {key: value for key, value in defaults.items() if key not in settings}


def converted_length_policy(settings: dict) -> dict:
    """The length-policy fields of a converted model: CONVERTED_LENGTH_POLICY with the user's settings on top
    (``length_policy="slice"`` alone gives the slice with its window mask, the better slice for a converted model).
    Nothing for full attention, which projects nothing: its config keeps the defaults, which mean unused."""
    if not projects_keys(settings.get("attention", "linformer")):
        return {}
    policy = CONVERTED_LENGTH_POLICY | {key: settings[key] for key in CONVERTED_LENGTH_POLICY if key in settings}
    if settings.get("projection", "linear") != "linear" and "length_policy" not in settings:
        policy["length_policy"] = "slice"  # resampling needs a learned E: pooling and conv projections take the slice
    if policy["length_policy"] == "slice" and "mask_empty_windows" not in settings:
        policy["mask_empty_windows"] = True
    return policy


def sentence_transformers_pooling(path: str) -> str | None:
    """The classifier_pooling a sentence-transformers model was trained for ("mean" or "cls"), read from its
    ``modules.json`` and pooling config; None for a model without them (or pooled some other way)."""
    def read(name):
        found = cached_file(path, name, _raise_exceptions_for_missing_entries=False,
                            _raise_exceptions_for_connection_errors=False)
        return json.loads(Path(found).read_text(encoding="utf-8")) if found else None

    try:
        modules = read("modules.json") or []
        pooling = next((m for m in modules if m.get("type", "").endswith(".Pooling")), None)
        settings = pooling and read(f"{pooling.get('path') or pooling.get('name')}/config.json")
    except (OSError, ValueError, AttributeError) as err:
        raise CheckpointError(f"{path!r} has a sentence-transformers pooling config that cannot be read: {err}") from err
    if not settings:
        return None
    modes = [mode for mode in ("mean", "cls") if settings.get(f"pooling_mode_{mode}_tokens" if mode == "mean"
                                                               else "pooling_mode_cls_token")]
    others = [key for key, on in settings.items() if key.startswith("pooling_mode_") and on and
              key not in ("pooling_mode_mean_tokens", "pooling_mode_cls_token")]
    return modes[0] if len(modes) == 1 and not others else None


def _config_fields(source_config, copies_classifier_fields: bool, settings: dict, pooling: str | None = None) -> dict:
    check_model_fields(settings, prefix="")  # settings a person typed: a misspelt one is refused, not kept
    family = SOURCE_FAMILIES[source_config.model_type]
    fields = {f: getattr(source_config, f) for f in ENCODER_FIELDS if hasattr(source_config, f)}
    offset = position_offset_of(source_config)
    fields.update(
        position_offset=offset,
        max_seq_len=source_config.max_position_embeddings - offset,
        # an MLM head whose decoder is a weight of its own stays so: tying would replace it with the word embeddings
        tie_word_embeddings=getattr(source_config, "tie_word_embeddings", True),
        classifier_head=family,
        lm_head_activation="gelu" if family == "roberta" else source_config.hidden_act,
    )
    fields.update(converted_length_policy(settings))
    fields.update(converted_exact_keys(settings, int(settings.get("max_seq_len", fields["max_seq_len"]))))
    if pooling is not None:  # the features the source's sentence embedding was trained on
        fields["classifier_pooling"] = pooling
    if copies_classifier_fields and not {"num_labels", "id2label", "label2id"} & set(settings):
        fields.update({f: getattr(source_config, f) for f in _CLASSIFIER_FIELDS if getattr(source_config, f, None)})
    return {**fields, **settings}


def converted_config(name_or_path: str, **settings) -> LinformerConfig:
    """The LinformerConfig that converting `name_or_path` with `settings` gives, without reading its weights: what a
    report needs to time an architecture whose converted model is gone (a fresh clone keeps only the records)."""
    return _encoder_config(True, name_or_path, settings)[0]


def _convert(cls, source: PreTrainedModel, config: LinformerConfig, where: str, extend_positions: bool,
             settings: dict, leftovers: dict[str, torch.Tensor | None] | None = None):
    """`source` converted into `cls` with `config`; `leftovers`: what the source's weight files hold beside the
    source model (``_load_source``): a tensor is copied where the model has a place for it (bert-base-uncased's
    pooler, which its BertForMaskedLM does not take), and every other is named as not copied."""
    state = _renamed_state(source)
    base, bare = source.base_model_prefix + ".", source.base_model is source
    named = {_renamed_key(k, base, bare): v for k, v in (leftovers or {}).items()}
    state |= {k: v for k, v in named.items() if v is not None}
    have, need = state[_PREFIX + _POSITIONS].shape[0], config.max_position_embeddings
    if need > have and not extend_positions:
        limit = have - config.position_offset
        raise ConfigError(
            f"max_seq_len={config.max_seq_len} is longer than {where} allows: it has {have} position embeddings, "
            f"so max_seq_len <= {limit}; pass extend_positions=True to fill the longer table with copies of its "
            "learned positions."
        )
    state[_PREFIX + _POSITIONS] = extend_positions_table(state[_PREFIX + _POSITIONS], need, config.position_offset)
    model = cls(config)
    heads = []  # the source's heads, which a bare LinformerModel has no place for
    if model.base_model is model:  # a bare LinformerModel: no heads, no prefix
        heads = [k for k in state if not k.startswith(_PREFIX)]
        state = {k[len(_PREFIX):]: v for k, v in state.items() if k.startswith(_PREFIX)}
    target = model.state_dict()
    for key in [k for k, v in state.items() if not k.startswith(_PREFIX) and k in target]:
        if state[key].shape != target[key].shape:  # e.g. another num_labels: that head starts fresh
            del state[key]
    try:
        missing, unused = model.load_state_dict(state, strict=False)
    except RuntimeError as err:  # a setting changed the shape of a copied weight
        raise ConfigError(f"The settings {sorted(settings)} do not fit the weights of {where}: {err}") from err
    heads += [k for k, v in named.items() if v is None]  # the files' heads the source class did not take
    _check_and_report(model, where, missing, unused, heads)
    model.tie_weights()
    return model


def _renamed_state(source: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The source's weights under our names: the encoder under ``roberta.``, BERT's MLM head as ``lm_head``."""
    base_prefix, bare = source.base_model_prefix + ".", source.base_model is source
    return {_renamed_key(key, base_prefix, bare): tensor for key, tensor in source.state_dict().items()}


def _renamed_key(key: str, base_prefix: str, bare: bool) -> str:
    """A source weight's name as ours (`base_prefix`: the source's, e.g. ``bert.``; `bare`: a source without heads,
    whose names have no prefix)."""
    if bare or key.startswith(base_prefix):
        return _PREFIX + (key if bare else key[len(base_prefix):])
    for old, new in _HEAD_RENAMES:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def extend_positions_table(table: torch.Tensor, rows: int, offset: int) -> torch.Tensor:
    """The first ``rows`` rows of ``table``, continued past its end by repeating its learned rows (Longformer's
    recipe); the ``offset`` rows before the first position (RoBERTa's padding row and the one before it) stay."""
    index = torch.arange(rows)
    learned = table.shape[0] - offset
    index[offset:] = offset + (index[offset:] - offset) % learned
    return table[index].clone()


def _check_and_report(model, where: str, missing: list[str], unused: list[str], heads: list[str] = ()) -> None:
    """Only E/F and heads (with BERT's pooler) may start fresh; an encoder weight that did not load is a mismatch.
    What the source has and `model` does not hold (a RoBERTa pooler, as RobertaForMaskedLM has none; a head of
    another kind, or any head of a source given to a bare encoder: `heads`; a saved Linformer's E and F, which a
    full-attention model has no use for) is logged and kept as ``model.conversion_not_copied`` (module names, every
    layer's E or F as one name with ``*`` for the layer) for the model card."""
    tied = getattr(model, "all_tied_weights_keys", None) or {}  # copies of another weight, reported there
    projections = [k for k in missing if is_projection_weight(k)]
    fresh = [k for k in missing if k not in projections and k not in tied]
    encoder = [k for k in fresh + unused if k.startswith(_PREFIX) or model.base_model is model]
    encoder = [k for k in encoder if ".pooler." not in k and not k.startswith("pooler.") and
               not (k in unused and is_projection_weight(k))]  # dropped E/F: full attention has none
    if encoder:
        raise CheckpointError(f"{where} does not match {type(model).__name__}: weights {sorted(encoder)[:8]} differ.")
    unused = [*unused, *heads]  # `heads`: the source's head weights a bare encoder was not given
    modules = {_LAYER.sub(".*.", m) if is_projection_weight(k) else m
               for k in unused for m in [k.rsplit(".", 1)[0]]}
    # the outermost ones: lm_head, not also lm_head.dense
    model.conversion_not_copied = _outermost(modules)
    model.conversion_fresh = _outermost({k.rsplit(".", 1)[0] for k in fresh})  # E and F aside: the card says those
    # E and F are named only where the model has them: a full-attention model (a lengthened teacher) has none
    starting = [f"{_modules(fresh)} (not in the source, or shaped differently)"] if fresh else []
    starting += [f"{len(projections)} projection weights (E/F)"] if projections else []
    log.info("%s from %s: %d weights copied; starting fresh: %s; unused from the source: %s", type(model).__name__,
             where, len(model.state_dict()) - len(missing), " and ".join(starting) or "none",
             ", ".join(model.conversion_not_copied) or "none")


def _outermost(modules: set[str]) -> list[str]:
    """The modules not inside another of `modules` (lm_head, not also lm_head.dense), sorted."""
    return sorted(m for m in modules if not any(m.startswith(f"{o}.") for o in modules))


def convert_and_report(spec: ConvertSpec, imports: Sequence[str] = ()) -> Path:
    """``scripts/convert.py``: convert the spec's model_path with its Linformer settings into its out_dir, and say
    what was made and what to run next (with the command's `imports`, where its projection or sharing mode is)."""
    import time

    t0 = time.perf_counter()
    model_path = spec.model_path
    with settings_named("model"):
        out = convert_encoder(model_path, spec.out_dir, seed=spec.seed, overwrite=spec.overwrite, **spec.model)
    config = LinformerConfig.from_pretrained(out)
    info = read_card_info(out)
    card = {**info["model"], "reshaped": bool(info.get("source", {}).get("reshaped_from"))}
    source = _source_config(resolve_model_path(model_path))
    cleared = cleared_exact_keys(source, config) if source.model_type == "linformer" else ""
    learned = card.get("source_positions")
    words = (f"; the source's {learned} position rows repeat to fill n = {config.max_seq_len}"
             if learned and learned < config.max_seq_len else "") + \
        (f"; {cleared} cleared: {config.attention_label} attends to every key" if cleared else "")
    say(f"converted {model_path} -> {out} ({card['class']}, {config.attention_label}, n={config.max_seq_len}, "
        f"{time.perf_counter() - t0:.1f} s){words}{_head_words(card)}\nnext: {_next_command(out, config, imports)}")
    return out


def _head_words(card: dict) -> str:
    """What of the source's head and weights a conversion kept, as its model card (``card.conversion_info``) says;
    `card` also says whether the source was a saved Linformer (``reshaped``)."""
    classifier = card["class"].endswith("ForSequenceClassification")
    words = ""
    if card.get("new_head") and classifier:
        words = "; the source has no classifier for these labels, so it starts fresh (finetune it)"
    elif card.get("new_head"):
        words = ("; lm_head is still as initialised: the encoder first converted had no MLM head" if card["reshaped"]
                 else "; the source has no MLM head, so lm_head starts fresh") + " (finetuning replaces it anyway)"
    elif classifier:
        words = f"; the source's classifier is kept, with its labels ({', '.join(map(str, card['labels']))})"
    if others := fresh_besides_head(card):
        words += f"; {', '.join(others)} {'starts' if len(others) == 1 else 'start'} fresh (not in the source)"
    if card.get("not_copied"):
        words += f"; not copied from the source: {not_copied_words(card)}"
    return words


def _next_command(out: Path, config: LinformerConfig, imports: Sequence[str] = ()) -> str:
    """What to run on a conversion: a full-attention classifier is a distillation teacher; one with projected
    attention (E, F new) is finetuned on its task first; anything else is finetuned. Each with the conversion's
    `imports`: the model names what they register."""
    more = imports_words(imports)
    if not is_sequence_classifier(config):
        return script_command("finetune", "task=sst2", hydra_override("model_path", out), *more)
    task = _task_of(config)
    if not config.projects_keys:
        return script_command("distill", task, hydra_override("teacher_path", out),
                             f"model.max_seq_len={config.max_seq_len}", *more)
    return script_command("finetune", task, hydra_override("model_path", out), *more)


def _task_of(config: LinformerConfig) -> str:
    """The task= override for a classifier: the one task its labels name, else a placeholder naming the tasks of
    as many labels (a classifier's generic LABEL_<i> names say nothing more)."""
    tasks = tasks_with_labels([config.id2label[i] for i in range(config.num_labels)])
    if len(tasks) == 1:
        return f"task={tasks[0]}"
    return f"task=<{'|'.join(tasks) if tasks else f'a {config.num_labels}-label task'}>"
