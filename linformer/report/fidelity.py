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

from ..data import load_prepared
from ..data.collator import cut_blocks as cut
from ..data.corpus import check_corpus_vocabulary
from ..errors import ConfigError, DataError
from ..files import atomic_write, save_figure, write_json
from ..modeling import LinformerModel
from ..modeling.reference import full_attention, squared_relative_error

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


def measure(models: dict[str, str], corpus_dir: str, lengths: list[int], blocks: int = 16,
            source: str | None = None) -> dict:
    """{label: {length: [error by layer]}} on the first ``blocks`` validation blocks of ``corpus_dir``, against
    ``source`` with full attention (a model directory or name), or each model's own weights with full attention."""
    val = load_prepared(corpus_dir, None)["validation"]
    if len(val) == 0:
        raise DataError(f"{corpus_dir} has no validation blocks")
    ids = torch.tensor([val[i]["input_ids"] for i in range(min(blocks, len(val)))])
    references: dict[int, LinformerModel] = {}
    out = {}
    for label, path in models.items():
        model = LinformerModel.from_pretrained(path).eval()
        n = model.config.max_seq_len
        if model.config.attention != "linformer":
            raise DataError(f"{path} has attention={model.config.attention!r}: nothing to compare with full attention")
        if ids.shape[1] != n:
            raise DataError(f"{corpus_dir} holds blocks of {ids.shape[1]} tokens but {path} has n={n}: prepare the "
                            f"corpus with data.n={n}")
        if max(lengths) > n:
            raise ConfigError(f"--lengths {max(lengths)} is longer than {path} allows (n={n}): give lengths up to {n}")
        check_corpus_vocabulary(corpus_dir, path)
        if source is not None and n not in references:
            references[n] = LinformerModel.from_pretrained_encoder(source, attention="full", max_seq_len=n).eval()
        reference = references.get(n)
        out[label] = {L: relative_errors(model, cut(ids, L), reference) for L in lengths}
    return out


def to_markdown(errors: dict, command: str, png: str | None, reference: str = SELF_REFERENCE) -> str:
    title = "Fidelity to the source" if reference != SELF_REFERENCE else "What the projection changes"
    lines = [f"# {title} by input length", "",
             (f"Relative error ||linformer - reference|| / ||reference|| of each layer's output; the reference is "
              f"{reference}; on held-out corpus blocks cut to each length."), "",
             f"Command: `{command}`", ""]
    for label, by_length in errors.items():
        layers = len(next(iter(by_length.values())))
        lines += [f"## {label}", "", "| tokens | " + " | ".join(f"layer {i}" for i in range(layers)) + " |",
                  "|---" * (layers + 1) + "|"]
        lines += [f"| {L} | " + " | ".join(f"{e:.3f}" for e in errs) + " |" for L, errs in by_length.items()]
        lines.append("")
    if png:
        lines.append(f"![last layer's error by length]({Path(png).name})")
    return "\n".join(lines) + "\n"


def plot(errors: dict, out_png: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for label, by_length in errors.items():
        lengths = list(by_length)
        ax.plot(lengths, [errs[-1] for errs in by_length.values()], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("input tokens")
    ax.set_ylabel("last layer's relative error vs the reference")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_png)


def write_report(errors: dict, out: str, command: str, reference: str = SELF_REFERENCE) -> None:
    png = plot(errors, f"{out}.png")
    atomic_write(f"{out}.md", to_markdown(errors, command, str(png), reference))
    write_json(f"{out}.json", {"command": command, "reference": reference, "errors": {k: {str(L): e for L, e in v.items()}
                                                              for k, v in errors.items()}})
