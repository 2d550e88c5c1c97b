"""Model cards for converted Linformers and the models trained from them: README.md in the Hugging Face format,
generated from a JSON sidecar.

``linformer_card.json`` holds everything the card says (source, license, n, k, sharing, projection, attention
transfer, finetuning results); README.md is rendered from it on every change, so no step ever parses markdown.
``info`` (the sidecar's content) is::

    {"name": "minilm-linformer-k128",
     "source": {"name": ..., "hub_id": ... or None, "model_type": ..., "architecture": ..., "license": ...,
                "weights_sha256": ..., "reshaped_from": absent, or the carded Linformer converted again,
                "reshaped_history": ...},
     "model": {"class": ..., "attention": ..., "max_seq_len": ..., "projected_dim": ..., "sharing": ...,
               "projection": ..., "projections": where E and F come from ("new", "kept" or "resampled" from a saved
               Linformer's, then with "resampled_from_n"; absent for full attention),
               "new_head": whether its task head is fresh, not the source's (None: no head),
               "not_copied": the source's modules the model does not hold ([]: none; absent: not recorded),
               "fresh": the model's modules the source had no weights for, E and F aside (a BertForMaskedLM's
               missing pooler, a new head; []: none; absent: not recorded),
               "labels": a sequence classifier's label names, by id (absent for other classes)},
     "transfer": None or {"steps": ..., "tokens": ..., "target": ..., "max_seq_len": the n E and F were fitted at,
                          "rel_err_before": [...], "rel_err_after": [...]} (a reshaped Linformer's, where its E and F
                          went along),
     "distillation": absent, or {"task": ..., "teacher": ..., "steps": ..., "examples": ..., "student_path": ...,
                                 "max_length": ..., "min_tokens": ..., "text_cleaning": the function that cleaned
                                 the task's text before tokenizing (None: none), "text_fields": its text
                                 columns (a pair task's two), "teacher_max_seq_len": the teacher's n as it
                                 read the inputs, "teacher_saved_max_seq_len": its n as saved, ...},
     "finetuning": absent, or [{"task": ..., "step": ..., "run_steps": ..., "selection": ..., "reported": ...,
                                "start_weights_sha256": ..., "max_length": ..., "min_train_tokens": ...,
                                "text_cleaning": ..., "text_fields": ...,
                                "run_dir": ...}, ...] (in the order they ran),
     "results": {task: {"metrics": {...}, "run_dir": ...}}: the scores of these weights (a finetuned or distilled
                model's); a run never writes into the model it started from, so a converted model's card has none of
                its own (a card that lists some names the models finetuned from it, and says so)}

The card tells the weights' history in that order: converted (or distilled) from the source, E and F transferred,
finetuned; advice to train before use appears only where nothing trained E and F.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from huggingface_hub import (
    EvalResult,
    HfApi,
    ModelCard,
    ModelCardData,
    constants,
    metadata_load,
    try_to_load_from_cache,
)
from transformers import AutoConfig

from ..data.io import load_auto
from ..data.tasks import TASKS
from ..files.atomic import atomic_write, write_json
from ..files.locations import repo_relative, repo_root
from ..files.mappings import read_json
from ..files.outputs import MANIFEST
from ..files.tables import table_lines
from ..runname import model_label
from .errors import CheckpointError, HubOfflineError
from .loading import PACKAGED_MODELS, model_length, resolve_model_path, weights_sha256
from .model import SERVED_CLASSES
from .values import projects_keys

CARD = "README.md"
# what a card's weights hash is (loading.weights_sha256): not one file's digest, so that sharding cannot hide a change
WEIGHTS_HASH = "sha256 over the lines `<weight file>:<its sha256>`, the files sorted by name"
SIDECAR = "linformer_card.json"
_PIPELINES = {"LinformerForMaskedLM": "fill-mask", "LinformerForSequenceClassification": "text-classification",
              "LinformerModel": "feature-extraction"}


# ------------------------------------------------------------------------------------------------ the record
def conversion_info(name_or_path: str | os.PathLike, model, name: str, path: str | None = None) -> dict:
    """The card's info for ``model``, converted from ``name_or_path`` (found at `path`, where the caller resolved it)
    by convert_encoder: no transfer, no results."""
    given = str(name_or_path)
    path = path or resolve_model_path(given)
    source_config = load_auto(AutoConfig, path)
    c = model.config
    source = {
        "name": card_path(given),  # a hub name as it is; a local folder by its name, as every path the card gives
        "hub_id": _hub_id(given, path),
        "model_type": source_config.model_type,
        "architecture": (source_config.architectures or [None])[0],
        "license": _source_metadata(path).get("license") or "unknown",
        "weights_sha256": weights_sha256(path),  # the source by content: a hub name or a path may change
    }
    earlier = read_card_info(path) if source_config.model_type == "linformer" else {}
    if earlier.get("source"):  # a saved Linformer reshaped (lengthened, say): the encoder's origin and licence stay
        # its source's, and the card says what the reshaped weights had been through
        source = {**_named_source(earlier)["source"], "reshaped_from": card_path(given),
                  "reshaped_history": _trained_words(earlier)}
    projections = _projections(source_config, c)
    return {
        "name": name,
        "source": source,
        "model": _model_record(model, source_config, earlier.get("model") or {}, projections),
        "transfer": _kept_transfer(earlier, projections),
        "results": {},
    }


def _model_record(model, source_config, earlier: dict, projections: dict) -> dict:
    """The card's "model": `model`'s class and settings, its task head's origin and labels (`earlier`: the model
    record of the carded Linformer it was reshaped from, {} for none)."""
    c = model.config
    settings = ("projected_dim", "sharing", "projection", "length_policy", "exact_short_inputs", "mask_empty_windows",
                "local_window", "global_positions", "landmark_pooling", "overlap_columns", "classifier_pooling")
    # a plain encoder (a finetuned BERT or RoBERTa baseline) has full attention and none of the Linformer's settings;
    # the source's position rows: fewer than n means the rest repeat them (Longformer's recipe); a Linformer
    # lengthened again keeps the count of the encoder it came from
    return {"class": type(model).__name__, "attention": getattr(c, "attention", "full"), "max_seq_len": model_length(c),
            "source_positions": min(model_length(source_config), earlier.get("source_positions") or math.inf),
            **{name: getattr(c, name, None) for name in settings},
            **projections,
            "new_head": _new_head(source_config, model, earlier),
            **({} if getattr(model, "conversion_not_copied", None) is None
               else {"not_copied": model.conversion_not_copied}),  # what the conversion logged
            **({} if getattr(model, "conversion_fresh", None) is None else {"fresh": model.conversion_fresh}),
            **({"labels": [c.id2label[i] for i in range(c.num_labels)]}
               if type(model).__name__.endswith("ForSequenceClassification") else {})}


def started_info(model_path: str, model, from_scratch: bool) -> dict:
    """The card's info for a classifier finetuned from a model without a card of its own (a pretraining run's, a
    plain encoder's) or, `from_scratch`, from random weights in that model's shape: the start as its source, nothing
    converted; `model`: the classifier (its config names the task's labels)."""
    path = resolve_model_path(model_path)
    source_config = load_auto(AutoConfig, path)
    source = {"name": card_path(model_path), "hub_id": _hub_id(model_path, path),
              "model_type": source_config.model_type, "architecture": (source_config.architectures or [None])[0],
              "license": _source_metadata(path).get("license") or "unknown",
              "weights_sha256": None if from_scratch else weights_sha256(path)}
    return {"name": Path(model_path).name, "start": "random" if from_scratch else "weights", "source": source,
            "model": _model_record(model, source_config, {}, {}), "transfer": None, "results": {}}


def start_card(model_path: str, model, from_scratch: bool) -> dict:
    """The card a finetuning's models build on: its start's (a conversion's, a transfer's), or, for a start without
    one or random weights (`from_scratch`: neither the start's history nor its results are theirs), ``started_info``:
    every classifier the package saves has a card."""
    card = read_card_info(model_path)
    return card if card and not from_scratch else started_info(model_path, model, from_scratch)


def continued_info(card: dict, name: str) -> dict:
    """The card's info for a model whose weights trained further as they were, without a new architecture (a continued
    attention transfer): ``card``'s source and model records, none of its training. Nothing is read from the source,
    which the card may name by its folder's name only (``card_path``)."""
    return {"name": name, **_named_source(card), "model": card["model"], "transfer": None, "results": {}}


def _projections(source_config, c) -> dict:
    """Where the converted model's E and F come from: ``projections`` "new" (fresh, as window means), "kept" (a saved
    Linformer's, as saved) or "resampled" (a saved Linformer's, resampled from ``resampled_from_n`` rows to n: the
    model was lengthened); {} for full attention, which has none."""
    if not c.projects_keys:
        return {}
    if source_config.model_type != "linformer" or not projects_keys(getattr(source_config, "attention", None)):
        return {"projections": "new"}
    if source_config.max_seq_len == c.max_seq_len:
        return {"projections": "kept"}
    return {"projections": "resampled", "resampled_from_n": source_config.max_seq_len}


def _kept_transfer(earlier: dict, projections: dict) -> dict | None:
    """The transfer record of the carded Linformer a conversion reshaped, when its E and F went along (kept or
    resampled), with the n it was measured at (``max_seq_len``); None otherwise."""
    transfer = earlier.get("transfer")
    if not transfer or projections.get("projections") not in ("kept", "resampled"):
        return None
    return {**transfer, "max_seq_len": transfer.get("max_seq_len") or (earlier.get("model") or {}).get("max_seq_len")}


def card_path(path: str | os.PathLike | None) -> str | None:
    """How a card names a local path (a run, a teacher, a student): as given when relative, relative to the
    repository when under it (every relative path the package reads is taken from there), else by its run's name
    (``model_label``: `<run>/<best, model or model-step-N>` for a run's saved model). The card goes to the hub with
    the model (push_to_hub), where a path of this machine would say nothing but its layout; a hub name passes as it
    is."""
    if path is None:
        return None
    p = Path(os.path.expanduser(str(path)))
    if not p.is_absolute():
        return str(path)
    if p.resolve().is_relative_to(repo_root()):
        return repo_relative(p)
    return model_label(p)


def _named_source(card: dict) -> dict:
    """``{"source": ...}`` of a card its weights carry on to a new card, the source's name through ``card_path`` (a
    card written before that named a local source by its absolute path); {} for a card without a source."""
    source = card.get("source")
    return {"source": {**source, "name": card_path(source.get("name"))}} if source else {}


def _new_head(source_config, model, earlier: dict) -> bool | None:
    """Whether `model`'s task head starts fresh, not from the source: a masked-LM head converted from a source without
    one (a sentence encoder), a classifier from a source that classifies no such labels, or a head a carded Linformer
    reshaped again still has fresh (``earlier``: its card's model); None for a bare encoder."""
    kind = type(model).__name__
    if earlier.get("class") == kind and earlier.get("new_head"):
        return True
    names = source_config.architectures or ()
    if kind.endswith("ForMaskedLM"):
        return not any("MaskedLM" in a or "PreTraining" in a for a in names)
    if kind.endswith("ForSequenceClassification"):
        return not (any(a.endswith("ForSequenceClassification") for a in names)
                    and source_config.num_labels == model.config.num_labels)
    return None


def _trained_words(info: dict) -> str | None:
    """What a card's weights went through after their conversion, in a few words ('finetuned on sst2'); None."""
    done = (["E and F transferred"] if info.get("transfer") else []) + \
        ([f"distilled on {info['distillation']['task']}"] if info.get("distillation") else []) + \
        [f"finetuned on {f['task']}" for f in info.get("finetuning") or []]
    return ", then ".join(done) or None


def _hub_id(given: str, path: str) -> str | None:
    """The source's hub id, or None for a local directory: the hub rejects a card whose base_model is not a model
    id, so a local path must not go there."""
    if given in PACKAGED_MODELS and path != given:
        return PACKAGED_MODELS[given][2]
    return None if os.path.isdir(path) else path


def _source_metadata(path: str) -> dict:
    """The front matter of the source's own model card (local, or in the hub cache); {} when it has none."""
    card = Path(path) / CARD if os.path.isdir(path) else try_to_load_from_cache(path, CARD)
    if not isinstance(card, (str, Path)) or not Path(card).is_file():
        return {}
    try:
        return metadata_load(card) or {}
    except ValueError:  # a front matter that is not a mapping says nothing usable
        return {}


def read_card_info(model_dir: str | os.PathLike) -> dict:
    """The card's info from the sidecar; {} when the directory has none."""
    return read_json(Path(model_dir) / SIDECAR)


def write_model_card(model_dir: str | os.PathLike, info: dict, folder: str | None = None) -> None:
    """Write the sidecar (``info`` as given) and README.md rendered from it, its usage loading the folder by its name
    (`folder`: the name the folder will have, where `model_dir` is a temporary renamed to it), as a user in the
    folder's parent loads it."""
    write_json(Path(model_dir) / SIDECAR, info)
    atomic_write(Path(model_dir) / CARD, str(render_card(info, folder or Path(model_dir).name)))


def results_entry(results: dict, run_dir: str | os.PathLike) -> dict:
    """The card's ``results`` for the weights a run scored (`results`: its results.json content): its task's row."""
    return {results["task"]: {"metrics": dict(results["metrics"]), "run_dir": card_path(run_dir), **_examples(results)}}


def finetuned_card(source_card: dict, name: str, model_class: str, results: dict, run_dir: str | os.PathLike,
                   step: int) -> dict:
    """The card of the weights of `step` of finetuning run `run_dir` (its results.json content `results`), from a
    source with a card: the source's history with this finetuning after it, and the run's reported result when
    `step` is the step it reports (another checkpoint has no result: it was never scored)."""
    reported = results.get("best_step") == step and bool(results.get("metrics"))
    finetuning = {"task": results.get("task"), "step": step, "run_steps": results.get("steps"),
                  "selection": results.get("selection") if reported else None,
                  "reported": results.get("reported") if reported else None,
                  "start_weights_sha256": results.get("start_weights_sha256"), "seed": results.get("seed"),
                  "lr": results.get("lr"), "max_length": results.get("max_length"),
                  "min_train_tokens": results.get("min_train_tokens"), "text_cleaning": results.get("text_cleaning"),
                  "text_fields": results.get("text_fields"), "run_dir": card_path(run_dir)}
    return {**source_card, "name": name, **_named_source(source_card),
            "model": {**source_card["model"], "class": model_class, "new_head": False},
            "finetuning": [*(source_card.get("finetuning") or []), finetuning],
            "results": results_entry(results, run_dir) if reported else {}}


def _examples(results: dict) -> dict:
    """How many of the reported split's examples scored the results (a subset is not the split's score)."""
    reported = results.get("reported") or {}
    return {k: reported[k] for k in ("examples", "of") if reported.get(k) is not None}


# ------------------------------------------------------------------------------------------------ rendering
def render_card(info: dict, load: str) -> ModelCard:
    """The card of ``info``; `load`: what its usage passes to ``from_pretrained`` (the folder's name, or the hub id
    it is pushed to). The title is ``info["name"]``, the run or conversion that made the weights."""
    source, model = info["source"], info["model"]
    distillation, finetuning = info.get("distillation"), info.get("finetuning") or []
    trained = "distillation" if distillation else "finetuning" if finetuning else None
    # the hub's model-index holds this model's own scores only: a converted model's results are those of the models
    # finetuned from it, which its text lists under "Finetuning results"
    data = ModelCardData(
        license=source["license"], library_name="transformers", base_model=source.get("hub_id"),
        tags=["linformer", source["model_type"]] + (["attention-transfer"] if info.get("transfer") else []),
        # a fresh masked-LM head fills masks at random: the encoder's features are what the model offers
        pipeline_tag="feature-extraction" if model.get("new_head") and model["class"].endswith("ForMaskedLM")
        else _PIPELINES.get(model["class"]),
        **(_eval_results(info["name"], info.get("results") or {}) if trained else {}),
    )
    sections = [f"# {info['name']}", _history(info), _source_section(source),
                _attention_section(model, info.get("start"))]
    if not info.get("start"):  # a conversion's E and F: fitted to the source's attention, or why not
        sections.append(_transfer_section(info.get("transfer"), model, trained, source))
    if distillation:
        sections.append(_distillation_section(distillation))
    if finetuning:
        sections.append(_finetuning_section(finetuning))
    sections += [_results_section(info.get("results") or {}, trained), _usage_section(load, model["class"], _cleanings(info))]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(sections) + "\n")


def _cleanings(info: dict) -> list[str]:
    """The functions that cleaned the text of the stages that trained these weights, in order."""
    stages = [info.get("distillation") or {}, *(info.get("finetuning") or [])]
    return [stage["text_cleaning"] for stage in stages if stage.get("text_cleaning")]


def _history(info: dict) -> str:
    """Where the weights came from, in one paragraph: converted or distilled from the source, then finetuned."""
    model, source, distillation = info["model"], info["source"], info.get("distillation")
    full = not projects_keys(model["attention"])
    if info.get("start"):  # finetuned from a model without a card, or from random weights in its shape
        begun = (f"random weights in the shape of `{source['name']}` ({source['model_type']}): nothing of its weights "
                 "was used" if info["start"] == "random" else f"the weights of `{source['name']}` "
                 f"({source['model_type']}, its sha256 below)")
        text = f"A {model['class']} trained with the `linformer` package, starting from {begun}."
    elif distillation:
        start = f"`{distillation['student_path']}`" if distillation.get("student_path") else \
            "the teacher's weights" + ("" if full else ", with the low-rank projections E, F new")
        teacher = distillation.get("teacher") or source["name"]
        text = (f"A Linformer ({model['class']}) distilled from `{teacher}` with the `linformer` package: it "
                f"started from {start}, and was trained to match the teacher's predictions on {distillation['task']}.")
    else:
        others = [f"`{m}`" for m in fresh_besides_head(model)]
        new = (["the head below"] if model.get("new_head") else []) + others
        text = (f"A Linformer ({model['class']}) converted from `{source['name']}` with the `linformer` package: "
                f"{_copied_text(model)}" + (_projections_words(model, source) if not full else
                                           f"; in full attention only {' and '.join(new)} "
                                           f"{'is' if len(new) == 1 else 'are'} new." if new else
                                           "; in full attention nothing is new."))
        if others:  # a pooler a BertForMaskedLM source lacks: random, as in HF's classifier loaded from it
            text += (f" The source holds no weights for {' and '.join(others)}: "
                     f"{'it starts' if len(others) == 1 else 'they start'} at random (until trained).")
    if model.get("new_head"):
        text += (" The source has no masked-LM head, so `lm_head` is new too (random until trained): use the "
                 "encoder's features, or train the model, before filling masks."
                 if model["class"].endswith("ForMaskedLM") else
                 " The source has no classifier for these labels, so `classifier` is new too (random until "
                 "trained): finetune the model before use.")
    tasks = [f["task"] for f in info.get("finetuning") or []]
    if model.get("labels") and not (distillation or tasks or model.get("new_head")):
        text += f" Its classifier is kept, with its labels ({', '.join(map(str, model['labels']))})."
    return text + (f" It was then finetuned on {', then '.join(tasks)} (below)." if tasks else "")


def fresh_besides_head(model: dict) -> list[str]:
    """The modules a conversion started fresh (a card's ``model["fresh"]``) besides the task head, which
    ``new_head`` tells of: a pooler the source lacked (BertForMaskedLM has none)."""
    return [m for m in model.get("fresh") or [] if m.split(".", 1)[0] not in ("lm_head", "classifier")]


def _projections_words(model: dict, source: dict) -> str:
    """Where the low-rank projections come from, ending the history's first sentence (cards written before
    ``projections`` had them new)."""
    origin = model.get("projections") or "new"
    if origin == "new":
        return ", and the low-rank projections E, F are new."
    words = f", the low-rank projections E, F included (those of `{source.get('reshaped_from')}`"
    if origin == "resampled":
        words += f", resampled from n = {model.get('resampled_from_n')} to n = {model['max_seq_len']} rows"
    return words + ")."


def _copied_text(model: dict) -> str:
    """What of the source the conversion copied: every weight, or every weight but the modules it has no place for
    (``not_copied_words``)."""
    left = not_copied_words(model, lambda m: f"`{m}`")
    return f"every weight of the source is copied except {left}" if left else "every weight of the source is copied"


def not_copied_words(model: dict, quote=str) -> str:
    """The source's modules a conversion left out (``model["not_copied"]``; "": none) and why, true of the model
    (``model``: a card's "model"): a pooler or another task's head, "which a <class> does not hold"; a saved
    Linformer's E and F, "(full attention has no E or F)" (a Linformer target keeps them: ``convert``). `quote`: how a
    name is written."""
    left = model.get("not_copied") or []
    projections = [m for m in left if m.rsplit(".", 1)[-1] in ("E", "F")]  # a layer's E or F, the encoder's E
    others = [m for m in left if m not in projections]
    parts = [f"{', '.join(map(quote, others))}, which a {model['class']} does not hold"] if others else []
    if projections:
        why = "full attention has no E or F" if model.get("attention") is not None and not projects_keys(model["attention"]) else "this model has no such module"
        parts.append(f"{', '.join(map(quote, projections))} ({why})")
    return "; ".join(parts)


def _eval_results(name: str, results: dict) -> dict:
    """ModelCardData's model-index arguments: one EvalResult per numeric metric of each task."""
    evals = []
    for task, row in results.items():
        if row.get("of") is not None and row.get("examples", row["of"]) < row["of"]:
            continue  # scored on a subset: the hub's model-index would read it as the split's score
        spec = TASKS.get(task)  # a task with a hub dataset names it (glue/sst2, validation split); others their name
        dataset = dict(dataset_type=spec.hub[0], dataset_config=spec.hub[1], dataset_split=spec.hub_splits["eval"]) \
            if spec and spec.hub else dict(dataset_type=task)
        evals += [EvalResult(task_type="text-classification", dataset_name=task, metric_type=metric,
                             metric_value=value, **dataset)
                  for metric, value in row["metrics"].items()
                  if isinstance(value, (int, float)) and not isinstance(value, bool)]
    return dict(model_name=name, eval_results=evals) if evals else {}


def _table(rows: list[tuple], header: tuple) -> str:
    return "\n".join(table_lines(header, rows))


def _source_section(source: dict) -> str:
    where = f"`{source['name']}`" + (f" (hub: [{source['hub_id']}](https://huggingface.co/{source['hub_id']}))"
                                     if source.get("hub_id") else " (a local directory, not a hub model)")
    license_text = source["license"] if source["license"] != "unknown" else \
        "unknown: the source's model card states no license, so check the source's terms before reuse"
    rows = [("model", where), ("model_type", source["model_type"]), ("architecture", source["architecture"]),
            ("license", license_text)]
    if source.get("weights_sha256"):
        rows.append(("weights hash", f"`{source['weights_sha256']}` ({WEIGHTS_HASH})"))
    if source.get("reshaped_from"):
        history = source.get("reshaped_history")
        rows.append(("reshaped from", f"`{source['reshaped_from']}`" + (f" ({history})" if history else "")))
    return "## Source\n\n" + _table(rows, ("", ""))


def _attention_section(model: dict, start: str | None = None) -> str:
    """The model's attention settings (`start`: "random" or "weights" for a model finetuned from a start without
    a card, ``started_info``; None for a conversion's line)."""
    if not projects_keys(model["attention"]):
        rows = [("attention", "full (standard attention: no projection, so no k, sharing or projection)"),
                ("n (max_seq_len)", model["max_seq_len"])]
    else:
        rows = [("attention", "linformer"), ("n (max_seq_len)", model["max_seq_len"]),
                ("k (projected_dim)", model["projected_dim"]), ("sharing", model["sharing"]),
                ("projection", model["projection"]), ("inputs shorter than n", _length_policy_text(model)),
                ("exact keys beside the projected ones", _exact_keys_text(model))]
    positions = {"random": "learned in training, from random weights", "weights": "the start's"}.get(start)
    rows.insert(2, ("position embeddings", positions or _positions_text(model)))
    if model.get("classifier_pooling"):
        rows.append(("sentence classifier reads", _POOLING_TEXT[model["classifier_pooling"]]))
    return "## Attention\n\n" + _table(rows, ("", ""))


def _positions_text(model: dict) -> str:
    """Where the n position rows came from (cards written before ``source_positions`` say only that they are the
    source's)."""
    n, learned = model["max_seq_len"], model.get("source_positions")
    if learned is None or learned == n:
        return "the source's"
    if learned > n:
        return f"the source's first {n} of {learned}"
    return f"the source's {learned} rows, repeated to fill n = {n} (Longformer's recipe)"


_POOLING_TEXT = {"pooler": "[CLS] through the pooler (dense + tanh)", "cls": "the [CLS] token's hidden state",
                 "mean": "the mean over the real tokens (classifier_pooling=mean)"}


def _length_policy_text(model: dict) -> str:
    """How an input of T < n tokens is projected, in words (cards written before the policy fields say 'slice')."""
    k = model["projected_dim"]
    if model.get("length_policy") == "resample":
        text = "E, F resampled to the input's length: every length uses all k columns (length_policy=resample)"
    elif model.get("mask_empty_windows"):
        text = ("E, F's first T rows, keeping the columns whose window holds a token (length_policy=slice, "
                "mask_empty_windows)")
    else:
        text = "E, F's first T rows, as fairseq's Linformer does (length_policy=slice)"
    if model.get("exact_short_inputs"):
        text += f"; inputs of at most k={k} tokens get exact attention (exact_short_inputs)"
    return text


def _exact_keys_text(model: dict) -> str:
    """The local window and global tokens in words (cards written before those fields had neither)."""
    w, positions = model.get("local_window") or 0, model.get("global_positions") or []
    if not w and not positions:
        return "none: every key is projected, as in the paper"
    window = f"the {w // 2} tokens on each side of each query, {2 * (w // 2) + 1} with the query itself"
    parts = [f"{window} (local_window={w})"] if w else []
    if positions:
        parts.append(f"the tokens at {list(positions)} for every query, and they attend to every position "
                     "(global_positions; negative counts from each row's last real token)")
    pooled = " (each pooling its window of tokens by attention from the window's landmark query: landmark_pooling)" \
        if model.get("landmark_pooling") else ""
    if model.get("overlap_columns") == "mask":
        overlap = ("; a projected column all of whose tokens the exact keys already hold is masked for that query "
                   "(overlap_columns: mask; a column they hold only part of stays, so its tokens inside the window, "
                   "and a global token in the first or last column, still count twice)")
    elif model.get("overlap_columns") == "reduce":
        overlap = ("; each projected column's count is lowered, per query, by the tokens of it the exact keys already "
                   "hold, and a column they hold whole is masked (overlap_columns: reduce)")
    else:
        overlap = "; projected columns stay whole even where the exact keys hold their tokens (overlap_columns: keep)"
    return "; ".join(parts) + f", in one softmax with the projected keys{pooled}{overlap}"


def _earlier_projections(model: dict, source: dict) -> str | None:
    """Where a reshaped Linformer's E and F were trained before it was reshaped, in words; None when they were not
    (new, or kept from a model that never trained them)."""
    history = source.get("reshaped_history")
    if model.get("projections") not in ("kept", "resampled") or not history:
        return None
    return f"E and F are those of `{source.get('reshaped_from')}`, trained there ({history})"


def _transfer_section(transfer: dict | None, model: dict, trained: str | None = None, source: dict | None = None
                      ) -> str:
    """The transfer of E and F; without one, why none (`trained`: the stage that learned E and F instead, if any;
    `source`: the card's source, which says what a reshaped Linformer's E and F had been through)."""
    if not transfer:
        earlier = _earlier_projections(model, source or {})
        if not projects_keys(model["attention"]):
            why = "full attention has no projection to fit"
        elif earlier:
            why = earlier + (f", and learned further with the other weights in {trained} (below)" if trained else "")
        elif trained:
            why = f"E and F were learned with the other weights in {trained} (below)"
        else:
            why = "E and F are as initialised; finetune, or fit them to the source's attention, before use"
        return f"## Attention transfer\n\nNo attention transfer: {why}."
    # A run that skipped its step-0 evaluation has no "before": those cells say so rather than dropping layers.
    columns = [("before", "rel_err_before"), ("after", "rel_err_after")]
    short = transfer.get("eval_short_length")
    if transfer.get("rel_err_short_after"):  # the same held-out blocks cut to a sentence-like length
        columns += [(f"before, {short} tokens", "rel_err_short_before"), (f"after, {short} tokens",
                                                                          "rel_err_short_after")]
    errs = [transfer.get(key) or [] for _, key in columns]
    rows = [(i, *(_number(e[i]) if i < len(e) else "not measured" for e in errs))
            for i in range(max(map(len, errs)))]
    what = "E and F" if transfer.get("train") != "all" else "E, F and every other weight"
    cut = f", {100 * transfer['short_fraction']:.0f}% of batches cut to shorter lengths" \
        if transfer.get("short_fraction") else ""
    fitted_n = transfer.get("max_seq_len")
    since = f" (at n = {fitted_n}; E and F were since resampled to n = {model['max_seq_len']} rows)" \
        if fitted_n and fitted_n != model["max_seq_len"] else ""
    return (f"## Attention transfer\n\n{what} were fitted to the source's attention ({transfer.get('target')}) on "
            f"{transfer.get('tokens')} tokens in {transfer.get('steps')} steps{cut}{since}. Relative error per layer "
            "on held-out blocks:\n\n" + _table(rows, ("layer", *(name for name, _ in columns))))


def _inputs_text(max_length: int | None, min_tokens: int | None, cleaning: str | None = None) -> str:
    """What a stage trained on, in words: its inputs' length, and the cut to long ones (cards written before these
    were recorded: not recorded)."""
    if max_length is None:
        return "not recorded"
    return (f"up to {max_length} tokens" + (f", only those longer than {min_tokens}" if min_tokens else "")
            + (f", the text cleaned by `{cleaning}` first" if cleaning else ""))


def _teacher_text(d: dict) -> str:
    """The teacher's side of a distillation: it reads the student's inputs, at its n (lengthened by the run or not)."""
    n, saved = d.get("teacher_max_seq_len"), d.get("teacher_saved_max_seq_len")
    text = f"the same inputs as the student (its n = {n})"
    if saved is not None and saved != n:
        text += f"; lengthened from n = {saved} for this run, its learned positions copied (distill.lengthen_teacher)"
    return text


def _distillation_section(d: dict) -> str:
    rows = [("task", d["task"]), ("examples (with repeats)", d.get("examples")), ("steps", d.get("steps")),
            ("inputs", _inputs_text(d.get("max_length"), d.get("min_tokens"), d.get("text_cleaning"))),
            ("the teacher reads", _teacher_text(d)),
            ("temperature", d.get("temperature")), ("hidden-state weight", d.get("hidden_weight"))]
    teacher = d.get("teacher_metrics") or {}
    if teacher:
        rows.append(("the teacher's score on the reported split",
                     ", ".join(f"{m} {_number(v)}" for m, v in teacher.items())))
    return "## Distillation\n\n" + _table([(k, _number(v)) for k, v in rows], ("", ""))


def _finetuning_section(runs: list[dict]) -> str:
    """One row per finetuning, in order: the weights' step, how that step was chosen, where it was scored."""
    rows = []
    for f in runs:
        selection, reported = f.get("selection"), f.get("reported")
        if not reported:
            chosen, scored = "a checkpoint of the run, not the model it reports", "not scored"
        elif selection and selection.get("split"):
            chosen = f"{selection['rule']} on a {selection['split']} split carved from train"
            scored = f"{reported['split']} ({reported['examples']} examples), once"
        else:
            chosen = "the last model (nothing chosen)"
            scored = f"{reported['split']} ({reported['examples']} examples), once"
        start = f.get("start_weights_sha256")
        rows.append((f["task"], f"{f['step']} of {f.get('run_steps')}", chosen, scored,
                     _inputs_text(f.get("max_length"), f.get("min_train_tokens"), f.get("text_cleaning")),
                     f"`{start[:12]}`" if start else "not recorded", f"`{f['run_dir']}`"))
    return "## Finetuning\n\n" + _table(rows, ("task", "step", "chosen as", "scored on", "inputs",
                                                  "started from (weights hash)", "run"))


def _results_section(results: dict, trained: str | None) -> str:
    """The results: this model's own where a stage trained it on the task (`trained`), else those of the models
    finetuned from it."""
    if trained and not results:
        return "## Results\n\nNone: these weights were not scored on the reported split."
    if not results:  # a run never writes into the model it started from: its scores go with the model it keeps
        return ("## Finetuning results\n\nNone here: a model finetuned from this one carries its scores in its own "
                "card (and its run's results.json).")
    if trained:
        head = "## Results\n\nThis model's scores on its task's reported split, scored once."
    else:
        head = "## Finetuning results\n\nThe scores of models finetuned from this one, on each task's reported split."
    metrics = list(dict.fromkeys(m for row in results.values() for m in row["metrics"]))  # first-seen order
    rows = [(task, *(_number(row["metrics"].get(m, "")) for m in metrics), _examples_text(row),
             f"`{row['run_dir']}`") for task, row in sorted(results.items())]
    return f"{head}\n\n" + _table(rows, ("task", *metrics, "examples", "run"))


def _examples_text(row: dict) -> str:
    if row.get("of") is None:
        return "-"
    examples = row.get("examples", row["of"])
    return f"all {examples:,}" if examples >= row["of"] else f"{examples:,} of {row['of']:,} (a subset)"


def _usage_section(name: str, model_class: str, cleanings: list[str] | None = None) -> str:
    """How to load the model from `name` (its folder or hub id), with and without the package, and (``cleanings``:
    the functions that cleaned a stage's text before tokenizing) what to apply to raw text for the inputs its scores
    were measured on."""
    auto = {where.split(".")[1]: auto for auto, where in SERVED_CLASSES.items()}.get(model_class, "AutoModel")
    text = ("## Usage\n\nThe model type `linformer` is registered with transformers when the `linformer` package is "
            f"imported:\n\n```python\nimport linformer  # noqa: F401\nfrom transformers import {auto}, AutoTokenizer\n\n"
            f"model = {auto}.from_pretrained(\"{name}\")\ntokenizer = AutoTokenizer.from_pretrained(\"{name}\")\n```\n\n"
            "Without the package, the model's code saved beside its weights (the `.py` files here; they need only torch "
            "and transformers) loads it: read them, then pass `trust_remote_code=True` to `from_pretrained` (a "
            "`pipeline`'s too). The tokenizer is a plain transformers tokenizer, the class `tokenizer_config.json` "
            "names (`tokenizer_class`): that class's `from_pretrained` loads it without running any code of the "
            "model's. `AutoTokenizer` reads the model's config first (transformers 5): without `trust_remote_code` "
            "it asks whether to run the code (`[y/N]`), and on a refusal, as with `trust_remote_code=False` (which "
            "does not ask), it loads that tokenizer class anyway, with a warning that the model type `linformer` is "
            "not the tokenizer's; the Auto model and config classes refuse without `trust_remote_code=True`.")
    if not model_class.endswith("ForMaskedLM"):  # saved with split_special_tokens (saving.py); a masked LM's input
        # names its mask by the mask's text
        text += ("\n\nA special token's text in an input (`[SEP]`, `<s>`, `<mask>`, ...) is text to this model, as it "
                 "was in training: the transformers tokenizer does so (`split_special_tokens` in "
                 "`tokenizer_config.json`). A serving stack that reads `tokenizer.json` with the `tokenizers` library "
                 "itself must set `encode_special_tokens = True` on the loaded `Tokenizer` (`tokenizer.json` cannot "
                 "record it): otherwise such text becomes the special token's id. The `[CLS]`/`[SEP]` (or `<s>`/`</s>`) "
                 "around the text are added either way.")
    for clean in dict.fromkeys(cleanings or ()):
        text += (f"\n\nThe text this model was trained and scored on was cleaned by `{clean}` (the `linformer` "
                 "package's) before tokenizing: apply it to raw text (before a `pipeline`, say) for the inputs its "
                 "scores above were measured on.")
    return text


def _number(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


# ------------------------------------------------------------------------------------------------ the hub
def push_to_hub(model_dir: str | os.PathLike, repo_id: str, token: str | None = None, private: bool = False,
                api: HfApi | None = None):
    """Upload ``model_dir`` (model, tokenizer, card) to the hub repo ``repo_id``, creating it if needed.

    Returns the last commit's CommitInfo (the card's, where the folder has a sidecar). ``api`` replaces the HfApi
    client (tests give a stand-in)."""
    if constants.is_offline_mode():
        raise HubOfflineError(f"cannot push {model_dir} to {repo_id}: the hub is offline here (HF_HUB_OFFLINE); run "
                              "push_to_hub on a machine where the hub is reachable.")
    if not (Path(model_dir) / "config.json").is_file():
        raise CheckpointError(f"{model_dir} holds no config.json: it is not a saved model directory.")
    api = api or HfApi(token=token)
    api.create_repo(repo_id, token=token, private=private, exist_ok=True)
    info = read_card_info(model_dir)
    # ".*" leaves out atomic_write's temporaries and other hidden files; the manifest records local paths. A card with
    # its sidecar goes up rendered for the hub, its usage loading `repo_id` (the local one loads the folder's name).
    ignored = [".*", MANIFEST] + ([CARD] if info else [])
    commit = api.upload_folder(repo_id=repo_id, folder_path=str(model_dir), token=token, ignore_patterns=ignored,
                               commit_message=f"Upload {Path(model_dir).name} (linformer)")
    if not info:
        return commit
    return api.upload_file(path_or_fileobj=str(render_card(info, repo_id)).encode(), path_in_repo=CARD,
                           repo_id=repo_id, token=token, commit_message=f"Model card of {Path(model_dir).name}")
