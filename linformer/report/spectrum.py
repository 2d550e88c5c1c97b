"""The spectrum of the context-mapping matrix P (paper §3, Figure 1).

For a model run in full-attention mode, every layer and head has an n x n attention matrix
P = softmax(Q K^T / sqrt(d)). Its normalised cumulative singular values c_i = (s_1 + ... + s_i) / (s_1 + ... + s_n)
(singular values in descending order, i = 1..n) say how much of P a rank-i approximation keeps: the paper's
evidence that P is low rank is that c_k is close to 1 for k << n. We average c over a sample of n-token windows
of validation text, per layer and head, plot it (Figure 1 left) and draw c_k as a layer x head heatmap (right).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import torch

import linformer  # noqa: F401  (registers the Auto classes)
from linformer import plots
from linformer.data.corpus import load_prepared
from linformer.data.io import checked_lines
from linformer.data.tokenizer import load_tokenizer
from linformer.devices import resolve_device
from linformer.errors import ConfigError, CorpusError, DataError
from linformer.files.atomic import record_output_files, save_figure, write_json
from linformer.files.outputs import check_output_files, made_by
from linformer.logfile import fewer_than_asked

from ..data.io import load_auto, record_path
from ..modeling.convert import exact_keys_cleared
from ..modeling.loading import load_pretrained, model_length, resolve_model_path
from . import measured
from .measured import machine_words

log = logging.getLogger(__name__)


def cumulative_singular_values(P: torch.Tensor) -> torch.Tensor:
    """(..., n, n) matrices -> (..., n) normalised cumulative sums of their singular values (float64).

    A rank-1 matrix gives 1 at every index; the identity gives i / n at index i (1-based)."""
    s = torch.linalg.svdvals(P.to(torch.float64))          # descending
    total = s.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    return s.cumsum(-1) / total


def default_k(n: int) -> int:
    """The paper's k = 128 (for n = 512), or n / 4 when n is too small for that to mean anything."""
    return 128 if n >= 512 else max(1, n // 4)


def windows_from_corpus(corpus_dir: str | Path, num_windows: int, seed: int = 0,
                        tokenizer_dir: str | Path | None = None, vocabulary: int | None = None) -> torch.Tensor:
    """`num_windows` blocks (`<s> body </s>`, n ids each) drawn with `seed` from a prepared corpus's validation split.

    With `tokenizer_dir` (the model's), a corpus packed with another tokenizer raises CorpusError naming both:
    its ids would mean other tokens to the model; with `vocabulary` (the model's vocab_size), so does a corpus
    holding an id the model has no embedding for (``load_prepared``), where the forward raised an IndexError."""

    val = load_prepared(str(corpus_dir), None if tokenizer_dir is None else str(tokenizer_dir),
                        vocabulary)["validation"]
    idx = sorted(random.Random(seed).sample(range(len(val)), min(num_windows, len(val))))
    return torch.tensor([val[i]["input_ids"] for i in idx], dtype=torch.long)


def windows_from_text(tokenizer, text_path: str | Path, n: int, num_windows: int, seed: int = 0,
                      max_lines: int = 20000) -> torch.Tensor:
    """`num_windows` windows `<s> body(n-2) </s>` (BERT's: `[CLS] body [SEP]`) cut from raw text (one paragraph per
    line; .gz read as gzip).

    Paragraphs of the first `max_lines` lines are tokenized and joined by `</s>` into one stream; windows start
    at seeded random positions without overlap. Raw text is not held out from training: prefer a prepared
    corpus's validation split (`windows_from_corpus`) where there is one."""
    lines = []
    # read as the corpus and the tokenizer read text: a binary file is one error line naming it
    for i, line in enumerate(checked_lines(str(text_path), False, {"replaced_chars": 0, "skipped_bad_rows": 0})):
        if i >= max_lines:
            break
        if line.strip():
            lines.append(line.strip())
    if not lines:  # the tokenizer fails on an empty batch: said here, as a short file is below
        raise DataError(f"text_path={text_path}: no text in the first {max_lines} lines (an empty file, or blank "
                        "lines only), fewer than one window: give a file of text, one paragraph per line")
    # <s> ... </s> (RoBERTa, ours), or [CLS] ... [SEP] (BERT, whose tokenizer has neither bos nor eos)
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.cls_token_id
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    stream: list[int] = []
    for ids in tokenizer(lines, add_special_tokens=False, verbose=False)["input_ids"]:  # long paragraphs: no warning
        stream.extend(ids)
        stream.append(eos)
    body = n - 2
    slots = len(stream) // body
    if slots == 0:
        raise DataError(f"{text_path}: {len(stream)} tokens in the first {max_lines} lines, fewer than one window")
    chosen = sorted(random.Random(seed).sample(range(slots), min(num_windows, slots)))
    return torch.tensor([[bos, *stream[j * body:(j + 1) * body], eos] for j in chosen], dtype=torch.long)


@torch.no_grad()
def attention_spectrum(model, input_ids: torch.Tensor, batch_size: int = 8) -> torch.Tensor:
    """Mean over windows of the normalised cumulative singular values: (layers, heads, n), float64."""
    model.eval()
    device = next(model.parameters()).device
    total, count = None, 0
    for start in range(0, len(input_ids), batch_size):
        ids = input_ids[start:start + batch_size].to(device)
        out = model(input_ids=ids, output_attentions=True)
        if not out.attentions or out.attentions[0] is None:
            raise ValueError("the model returned no attention probabilities (output_attentions=True)")
        P = torch.stack(out.attentions, dim=1)               # (B, layers, heads, n, n)
        if P.shape[-1] != P.shape[-2]:
            raise ValueError(f"attention matrices are {tuple(P.shape[-2:])}, not n x n: load with attention='full'")
        c = cumulative_singular_values(P.float().cpu()).sum(0)
        total = c if total is None else total + c
        count += ids.shape[0]
    return total / count


def load_full_attention_model(model_path: str | Path, device: str = "cpu"):
    """The saved encoder attending fully, so that P is the paper's n x n matrix: a Linformer with attention="full"
    (E and F left unused; a converted one's local window and global tokens cleared), or a BERT/RoBERTa-family encoder (the paper's Figure 1 is RoBERTa's) with eager attention,
    the implementation that returns its probabilities; on `device` as the config names it (``resolve_device``:
    auto, cpu, cuda or cuda:<index>)."""
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    path = str(model_path)
    config = load_auto(AutoConfig, path)
    if config.model_type == "linformer":  # a converted one's exact keys cleared, as convert's model.attention=full does
        full = {"attention": "full"}
        model = load_pretrained(AutoModelForMaskedLM, path, **full, **exact_keys_cleared(config, full))
    else:
        model = load_pretrained(AutoModel, path, attn_implementation="eager")
    return model.to(resolve_device(device)).eval()


def plot_curves(cum, path: str | Path, title: str, k: int | None = None) -> Path:
    """Figure 1 (left): c_i vs i, one thick line per layer (mean over heads) and a thin one per head; the title
    wrapped to the figure's width."""
    cum = torch.as_tensor(cum)
    L, H, n = cum.shape
    x = range(1, n + 1)
    fig, axes = plots.figure(size=(6.4, 4.4))
    ax = axes[0][0]
    # the layers' colours as every figure draws them (light to dark with depth), a marker each on the mean line
    for layer, (color, marker) in enumerate(zip(plots.layer_colours(L), plots.markers(L))):
        for h in range(H):
            ax.plot(x, cum[layer, h], color=color, alpha=0.35, linewidth=0.7)
        ax.plot(x, cum[layer].mean(0), color=color, linewidth=2, marker=marker, markersize=5,
                markevery=max(1, n // 8), label=f"layer {layer + 1} (mean of {H} heads)")
    if k is not None:
        ax.axvline(k, color="grey", linestyle="--", linewidth=1)
        ax.text(k, 0.02, f" k={k}", color="grey", fontsize=8)
    ax.set_xlim(1, n)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("singular value index i")
    ax.set_ylabel("normalised cumulative singular value")
    plots.title(ax, title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, path)


def plot_heatmap(at_k, path: str | Path, title: str, k: int) -> Path:
    """Figure 1 (right): c_k per layer (rows, 1 = bottom layer) and head (columns), coloured on one scale from 0 to
    1 in every heatmap, so that two models' figures side by side compare (a range fitted to each figure's values
    drew 0.97 dark in one and bright in another)."""
    at_k = torch.as_tensor(at_k)
    L, H = at_k.shape
    lo = 0.0
    fig, axes = plots.figure(size=(max(4.5, 0.55 * H + 2.5), max(3.2, 0.45 * L + 1.8)))
    ax = axes[0][0]
    im = ax.imshow(at_k.numpy(), origin="lower", cmap="viridis", vmin=lo, vmax=1.0, aspect="auto")
    for i in range(L):
        for j in range(H):
            v = float(at_k[i, j])
            ax.text(j, i, f"{v:.3f}", ha="center", va="center", fontsize=7,
                    color="black" if (v - lo) / max(1.0 - lo, 1e-9) > 0.5 else "white")
    ax.set_xticks(range(H), [str(h + 1) for h in range(H)])
    ax.set_yticks(range(L), [str(layer + 1) for layer in range(L)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    fig.colorbar(im, ax=ax, label=f"cumulative value at index {k}")
    plots.title(fig, title, fontsize=8)
    return save_figure(fig, path)


def analyze_spectrum(model_path: str | Path, out_dir: str | Path, prefix: str = "spectrum",
                     corpus_dir: str | Path | None = None, text_path: str | Path | None = None,
                     num_windows: int = 32, batch_size: int = 8, k: int | None = None, seed: int = 0,
                     max_lines: int = 20000, device: str = "cpu", description: str | None = None,
                     overwrite: bool = False, command: str | None = None) -> dict[str, Any]:
    """Write <out_dir>/<prefix>_curves.png, <prefix>_heatmap.png and <prefix>.json; return the JSON's content.
    A file there that an earlier analyze_spectrum did not write is refused unless `overwrite`
    (``outputs.check_output_files``), before the model runs.

    Windows come from `corpus_dir`'s validation split when given (it must have been packed with the tokenizer
    saved in `model_path`), else from the raw text at `text_path`. The JSON records `command` (the script's command
    line) and the machine it ran on."""
    started = measured.start()
    model_path = resolve_model_path(str(model_path))  # a run directory: its model/
    out_dir = Path(out_dir)
    outputs = [out_dir / f"{prefix}{end}" for end in ("_curves.png", "_heatmap.png", ".json")]
    record = made_by("analyze_spectrum", {})
    check_output_files(outputs, record, overwrite, flag="overwrite=true", key="out_dir=")
    if not corpus_dir and text_path and not Path(text_path).is_file():  # before the model loads
        raise ConfigError(f"text_path={text_path}: " + ("a folder, not a text file" if Path(text_path).is_dir()
                                                        else "no such file") + ": give a .txt or .txt.gz file")
    model = load_full_attention_model(model_path, device)
    n = model_length(model.config)
    if corpus_dir:
        ids = windows_from_corpus(corpus_dir, num_windows, seed, tokenizer_dir=model_path,
                                  vocabulary=model.config.vocab_size)
        source = {"corpus_dir": record_path(corpus_dir), "split": "validation"}
    elif text_path:
        tokenizer = load_tokenizer(str(model_path), "model_path")
        ids = windows_from_text(tokenizer, text_path, n, num_windows, seed, max_lines)
        source = {"text_path": record_path(text_path), "max_lines": max_lines}
    else:
        raise ConfigError("give corpus_dir (a prepared corpus) or text_path (raw text) for the sample windows")
    if ids.shape[1] != n:
        raise CorpusError(f"{corpus_dir or text_path}: windows of {ids.shape[1]} tokens, but the model {model_path} "
                          f"has n={n}; prepare the corpus with data.n={n}")
    if len(ids) < num_windows:  # the sample holds fewer: said here, and the JSON keeps both counts
        where = f"{corpus_dir}'s validation split" if corpus_dir else f"text_path={text_path} (first {max_lines} lines)"
        fewer_than_asked(log, f"num_windows={num_windows}", where, len(ids), f"windows of n={n}", "measuring on")
    cum = attention_spectrum(model, ids, batch_size)
    L, H, _ = cum.shape
    k = int(k) if k else default_k(n)
    if not 1 <= k <= n:
        raise ConfigError(f"k={k} must be in 1..n={n}")
    at_k = cum[:, :, k - 1]
    out_dir.mkdir(parents=True, exist_ok=True)
    curves, heat = _plots(cum, at_k, str(out_dir / prefix), description or Path(model_path).name, n, len(ids), k)
    result = {
        "model_path": record_path(model_path),  # as a run's record names it: no path of this machine
        "description": description,
        "n": n, "k": k, "layers": L, "heads": H,
        "num_windows": len(ids), "num_windows_asked": num_windows, "seed": seed, "sample": source,
        "value_at_k": [[round(float(v), 6) for v in row] for row in at_k],
        "mean_value_at_k_per_layer": [round(float(v), 6) for v in at_k.mean(1)],
        # every head's curve (layers x heads x n values: 36,864 for a 6 x 12 model at n = 512), to 4 decimals
        "cumulative": [[[round(float(v), 4) for v in head] for head in layer] for layer in cum],
        "plots": [curves.name, heat.name],
        "command": command,
        "machine": machine_words(next(model.parameters()).device, started),
    }
    write_json(out_dir / f"{prefix}.json", result, indent=None)  # compact: the curves are for programs (the plots)
    record_output_files(outputs, record)
    return result


def _plots(cum, at_k, out: str, what: str, n: int, windows: int, k: int) -> tuple[Path, Path]:
    """<out>_curves.png and <out>_heatmap.png of a model described by `what`."""
    curves = plot_curves(cum, f"{out}_curves.png", f"Cumulative singular values of P: {what} (n={n}, {windows} windows)",
                         k)
    heat = plot_heatmap(at_k, f"{out}_heatmap.png", f"Cumulative value at index {k} (n={n})\n{what}", k)
    return curves, heat


def render(path: str, out: str) -> None:
    """Figure 1's plots and JSON written again from the JSON of an earlier analyze_spectrum (``--render``): the
    recorded curves and values in today's figures, nothing measured; the JSON as it was (untouched in place), its
    plots' names those written."""
    data = measured.read_measured(path, "scripts/analyze_spectrum.py")
    try:
        n, k, windows = int(data["n"]), int(data["k"]), int(data["num_windows"])
        cum, at_k = torch.tensor(data["cumulative"]), torch.tensor(data["value_at_k"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"--render {path}: not the JSON of scripts/analyze_spectrum.py (n, k, num_windows, "
                          "cumulative, value_at_k): measure again.") from None
    what = data.get("description") or Path(str(data.get("model_path") or "model not recorded")).name
    curves, heat = _plots(cum, at_k, out, what, n, windows, k)
    names = [curves.name, heat.name]
    if Path(f"{out}.json").resolve() != Path(path).resolve() or data.get("plots") != names:  # else kept as it is
        write_json(f"{out}.json", {**data, "plots": names}, indent=None)
