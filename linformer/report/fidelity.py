"""How closely a converted (or transferred) Linformer follows its source with full attention, by input length.

For each model directory and each length L: held-out corpus blocks cut to L tokens (the block's closing token kept
last), run through the model and through the reference, and each layer's relative error
||linformer - reference|| / ||reference|| over all tokens. The reference is the source encoder with full attention
(``source``): what a converted or transferred Linformer should reproduce. Without a source it is the model's own
weights with every layer switched to full attention, which for a transferred model (every weight trained) measures
only what the projection changes, not fidelity to the source; reports say which reference they used.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoConfig

from .. import plots
from ..data import load_prepared
from ..data.collator import cut_blocks as cut
from ..data.corpus import check_corpus_tokenizer
from ..data.io import load_auto
from ..errors import ConfigError, DataError
from ..files.atomic import atomic_write, save_figure, write_json
from ..files.locations import resolve_path
from ..files.tables import table_lines
from ..modeling import LinformerModel, loading
from ..modeling.loading import load_pretrained
from ..modeling.reference import full_attention, squared_relative_error
from . import measured

SELF_REFERENCE = "the same weights with full attention"


def _hidden(model, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return model(input_ids=ids, output_hidden_states=True).hidden_states[1:]


@torch.no_grad()
def relative_errors(model: LinformerModel, ids: torch.Tensor, reference: LinformerModel | None = None) -> list[float]:
    """Each layer's ||linformer - reference|| / ||reference|| over the batch (reference None: the model itself with
    full attention)."""
    student = _hidden(model, ids)
    if reference is None:
        with full_attention(model):
            teacher = _hidden(model, ids)
    else:
        teacher = _hidden(reference, ids)
    return [float(squared_relative_error(s, t).sqrt()) for s, t in zip(student, teacher)]


def labelled(given: list[str]) -> dict[str, str]:
    """{label: model} from the command line's LABEL=DIR (or DIR, its own label; split at the last =, so that a label
    may hold one); a label given twice is a ConfigError (the second model would silently replace the first)."""
    models: dict[str, str] = {}
    for item in given:
        label, path = item.rsplit("=", 1) if "=" in item else (item, item)
        if label in models:
            raise ConfigError(f"the label {label!r} is given twice ({label}={models[label]} and {label}={path}): give "
                              "each model its own label")
        models[label] = path
    return models


def measure(models: dict[str, str], corpus_dir: str, lengths: list[int], blocks: int = 16,
            source: str | None = None, source_name: str | None = None) -> tuple[dict, int]:
    """({label: {length: [error by layer]}}, the blocks measured): on the first ``blocks`` validation blocks of
    ``corpus_dir`` (all of them when it holds fewer), against ``source`` with full attention (a model directory or
    name; ``source_name``: how the user gave it, for the errors), or each model's own weights with full attention."""
    # every model's embedding must hold every id (``load_prepared`` refuses an id past the smallest vocabulary, where
    # the forward raised an IndexError); a config is a few kilobytes, read before any weights load
    vocabulary = min(load_auto(AutoConfig, path).vocab_size for path in models.values())
    val = load_prepared(corpus_dir, None, vocabulary)["validation"]
    if len(val) == 0:
        raise DataError(f"{corpus_dir} has no validation blocks")
    ids = torch.tensor([val[i]["input_ids"] for i in range(min(blocks, len(val)))])
    references: dict[int, LinformerModel] = {}
    source_config = None if source is None else load_auto(AutoConfig, source)
    out = {}
    for label, path in models.items():
        model = load_pretrained(LinformerModel, path).eval()  # transformers' load report as one INFO line
        n = model.config.max_seq_len
        if not model.config.projects_keys:
            raise DataError(f"{path} has attention={model.config.attention!r}: nothing to compare with full attention")
        if ids.shape[1] != n:
            raise DataError(f"{corpus_dir} holds blocks of {ids.shape[1]} tokens but {path} has n={n}: prepare the "
                            f"corpus with data.n={n}")
        if max(lengths) > n:
            raise ConfigError(f"--lengths {max(lengths)} is longer than {path} allows (n={n}): give lengths up to {n}")
        check_corpus_tokenizer(corpus_dir, path)
        if source is not None:
            check_same_shape(model.config, source_config, path, source_name or source)
            if n not in references:
                references[n] = LinformerModel.from_pretrained_encoder(source, attention="full", max_seq_len=n).eval()
        reference = references.get(n)
        out[label] = {L: relative_errors(model, cut(ids, L), reference) for L in lengths}
    return out, len(ids)


# What a layer-by-layer comparison needs the model and its reference to share: token ids that mean the same, hidden
# states of one width, and a layer for each layer
SHAPE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers")


def run(models: list[str], corpus: str, lengths: list[int], blocks: int, source: str | None, out: str,
        say=print) -> dict:
    """scripts/fidelity.py's measurement, whole: the models (``labelled``: LABEL=DIR) and the source (None: each
    model's own weights with full attention) resolved, each measured on the corpus's held-out blocks at each length
    (``measure``) and the report written to `out` (.md, .json, .png). `say` takes the line that the corpus holds
    fewer blocks than asked. `corpus` is kept as given in the report's settings, resolved where it is read. Returns
    the errors."""
    started = measured.start()
    resolved = {label: loading.resolve_model_path(path, "models") for label, path in labelled(models).items()}
    reference_path = None if source is None else loading.resolve_model_path(source, "--source")
    errors, held = measure(resolved, resolve_path(corpus), sorted(lengths), blocks, reference_path,
                           source_name=source)
    if held < blocks:
        say(f"--blocks {blocks}: {corpus} holds {held} validation blocks; measured on those")
    reference = SELF_REFERENCE if reference_path is None else f"{source} with full attention"
    command, (machine, _) = measured.provenance("scripts/fidelity.py", started)
    write_report(errors, out, command, reference, held, machine)
    return errors


def check_same_shape(model, reference, path: str, source: str) -> None:
    """ConfigError naming --source when the model at `path` and the source (their configs) differ in vocabulary,
    width or depth: it was not converted from that source. Read from the configs, before the source's weights load."""
    differ = [f"{key} {getattr(model, key)} against {getattr(reference, key)}" for key in SHAPE_KEYS
              if getattr(model, key) != getattr(reference, key)]
    if differ:
        raise ConfigError(f"--source {source}: {path} was not converted from it, they differ in "
                          f"{', '.join(differ)}: give the encoder it was converted from, or --self-reference")


def to_markdown(errors: dict, command: str, png: str | None, reference: str = SELF_REFERENCE,
                blocks: int | None = None, machine: str = "") -> str:
    title = "Fidelity to the source" if reference != SELF_REFERENCE else "What the projection changes"
    held_out = "held-out corpus blocks (how many: not recorded)" if blocks is None else f"{blocks} held-out corpus blocks"
    lines = [f"# {title} by input length", "",
             (f"Relative error ||linformer - reference|| / ||reference|| of each layer's output; the reference is "
              f"{reference}; on {held_out} cut to each length."), "",
             *([machine] if machine else []), f"Command: `{command}`", ""]
    for label, by_length in errors.items():
        layers = len(next(iter(by_length.values())))
        # layers counted from 1, as the spectrum reports count them (hidden_states[0], the embeddings, is not one)
        lines += [f"## {label}", "", *table_lines(["tokens", *(f"layer {i}" for i in range(1, layers + 1))],
                                                  ([L, *(f"{e:.3f}" for e in errs)] for L, errs in by_length.items()))]
        lines.append("")
    if png:
        lines.append(f"![each layer's error by length]({Path(png).name})")
    return "\n".join(lines) + "\n"


PANELS_PER_ROW = 3


def plot(errors: dict, out_png: str | Path, title: str = "") -> Path:
    """Small multiples: a panel per model, a line per layer (plots.layer_colours, lighter to darker with depth, and
    a marker each; numbered from 1 as the tables number them), the error against input length; one y scale for all
    panels, so models compare; `title` (what is measured, against what, on which machine) above them."""
    import math

    ncols = min(PANELS_PER_ROW, len(errors))
    nrows = math.ceil(len(errors) / ncols)
    fig, axes = plots.figure(ncols, nrows, size=(3.6 * ncols, 3.0 * nrows + 0.4), sharey=True)
    lengths = sorted({int(L) for by_length in errors.values() for L in by_length})
    for i, (label, by_length) in enumerate(errors.items()):
        ax = axes[i // ncols][i % ncols]
        layers = len(next(iter(by_length.values())))
        for layer, (shade, marker) in enumerate(zip(plots.layer_colours(layers), plots.markers(layers))):
            ax.plot([int(L) for L in by_length], [errs[layer] for errs in by_length.values()], marker=marker,
                    markersize=4, color=shade, label=f"layer {layer + 1}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])  # token counts as a reader counts them, not powers of 2
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        plots.title(ax, label, fontsize=9)
        if i + ncols >= len(errors):  # no panel below it
            ax.set_xlabel("input tokens")
        if i % ncols == 0:
            ax.set_ylabel("relative error vs the reference")
    for ax in [a for row in axes for a in row][len(errors):]:
        ax.set_visible(False)
    if title:
        plots.title(fig, title)
    plots.legend_below(fig)
    return save_figure(fig, out_png)


def write_report(errors: dict, out: str, command: str, reference: str = SELF_REFERENCE,
                 blocks: int | None = None, machine: str = "") -> None:
    png = plot(errors, f"{out}.png", f"Each layer's relative error against {reference}, by input length; "
                                      f"{plots.machine(machine)}")
    atomic_write(f"{out}.md", to_markdown(errors, command, str(png), reference, blocks, machine))
    write_json(f"{out}.json", {"command": command, "machine": machine, "reference": reference, "blocks": blocks,
                               "errors": {k: {str(L): e for L, e in v.items()} for k, v in errors.items()}})


def render(measured: dict, out: str) -> None:
    """The report written again from the JSON of an earlier measurement (``--render``): its tables and figure from
    the recorded errors with today's layout, nothing measured. What a JSON written before it recorded them lacks is
    said, not guessed: the machine and the number of blocks are "not recorded"; the reference is the one its recorded
    command names (--self-reference or --source)."""
    errors = measured.get("errors")
    if not isinstance(errors, dict) or not errors or not isinstance(measured.get("command"), str):
        raise ConfigError("--render reads a JSON written by scripts/fidelity.py (its command and errors); this one "
                          "has no errors: measure again.")
    try:
        by_length = {label: {int(length): list(errs) for length, errs in rows.items()} for label, rows in errors.items()}
    except (AttributeError, TypeError, ValueError):
        raise ConfigError("--render: the JSON's errors are not {label: {length: [error per layer]}}: measure "
                          "again.") from None
    reference = measured.get("reference") or _recorded_reference(measured["command"])
    write_report(by_length, out, measured["command"], reference, measured.get("blocks"),
                 measured.get("machine") or "Machine: not recorded.")


def _recorded_reference(command: str) -> str:
    """The reference a recorded fidelity command names."""
    import shlex

    words = shlex.split(command)
    if "--self-reference" in words:
        return SELF_REFERENCE
    source = next((w.split("=", 1)[1] for w in words if w.startswith("--source=")), None)
    if source is None and "--source" in words[:-1]:
        source = words[words.index("--source") + 1]
    return f"{source} with full attention" if source else "not recorded"
