"""How closely a converted (or transferred) Linformer follows its source with full attention, by input length.

For each model directory and each length L: held-out corpus blocks cut to L tokens (the block's closing token kept
last), run through the model twice, as a Linformer and with every layer switched to full attention (the same
weights: for a converted model that is its source), and each layer's relative error ||linformer - full|| / ||full||
over all tokens. Short inputs are where a projection sized for n = 512 is least like the source: they fill few of
the k columns.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..data import load_prepared
from ..errors import DataError
from ..modeling import LinformerModel
from ..rundir import atomic_write, write_json
from ..train.transfer import cut_blocks as cut
from ..train.transfer import full_attention
from .compare import save_figure


@torch.no_grad()
def relative_errors(model: LinformerModel, ids: torch.Tensor) -> list[float]:
    """Each layer's ||linformer - full|| / ||full|| over the batch."""
    student = model(input_ids=ids, output_hidden_states=True).hidden_states[1:]
    with full_attention(model):
        teacher = model(input_ids=ids, output_hidden_states=True).hidden_states[1:]
    return [float((s - t).norm() / t.norm()) for s, t in zip(student, teacher)]


def measure(models: dict[str, str], corpus_dir: str, lengths: list[int], blocks: int = 16) -> dict:
    """{label: {length: [error by layer]}} on the first ``blocks`` validation blocks of ``corpus_dir``."""
    val = load_prepared(corpus_dir, None)["validation"]
    if len(val) == 0:
        raise DataError(f"{corpus_dir} has no validation blocks")
    ids = torch.tensor([val[i]["input_ids"] for i in range(min(blocks, len(val)))])
    out = {}
    for label, path in models.items():
        model = LinformerModel.from_pretrained(path).eval()
        if model.config.attention != "linformer":
            raise DataError(f"{path} has attention={model.config.attention!r}: nothing to compare with full attention")
        if ids.shape[1] != model.config.max_seq_len:
            raise DataError(f"{corpus_dir} holds blocks of {ids.shape[1]} tokens but {path} has n="
                            f"{model.config.max_seq_len}: prepare the corpus with data.n={model.config.max_seq_len}")
        out[label] = {L: relative_errors(model, cut(ids, L)) for L in lengths}
    return out


def to_markdown(errors: dict, command: str, png: str | None) -> str:
    lines = ["# Fidelity to the source by input length", "",
             ("Relative error ||linformer - full|| / ||full|| of each layer's output, the same weights run with full "
              "attention as the reference, on held-out corpus blocks cut to each length."), "",
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
    ax.set_ylabel("last layer's relative error vs full attention")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_png)


def write_report(errors: dict, out: str, command: str) -> None:
    png = plot(errors, f"{out}.png")
    atomic_write(f"{out}.md", to_markdown(errors, command, str(png)))
    write_json(f"{out}.json", {"command": command, "errors": {k: {str(L): e for L, e in v.items()}
                                                              for k, v in errors.items()}})
