"""Numerical and speed checks of the model, printed side by side in one run.

    python scripts/model_checks.py [--out docs/results/model_checks_cpu.md]

1. max |delta logits| of LinformerForMaskedLM(attention="full") against RobertaForMaskedLM with the same weights;
2. the padding leak: max |delta| between a sequence alone and inside a padded batch, for our projection and for a
   fairseq/lucidrains-style projection that lets padded positions into E^T K;
3. forward time of linformer against full attention at n = 4096, k = 256 (base width, 2 layers), interleaved.
"""

from __future__ import annotations

import sys

import torch

from linformer import LinformerForMaskedLM
from linformer.bench.common import (
    beyond_flop_bound,
    flop_bound_warning,
    interleaved_medians,
    load_average,
    machine_description,
    thread_range,
    threads_words,
    warning_paragraph,
)
from linformer.bench.models import Size, build_ours, build_roberta
from linformer.bench.report import machine_words
from linformer.files.atomic import atomic_write
from linformer.modeling import LinearProjection
from linformer.modeling.flops import flop_ratio

BASE = Size(layers=12, hidden=768, heads=12, ffn=3072)  # RoBERTa-base
BASE_2_LAYERS = Size(layers=2, hidden=768, heads=12, ffn=3072)


def roberta_logits_delta(n: int = 128, size: Size = BASE, batch: int = 4, seed: int = 0) -> float:
    """Random weights (no hub): our full mode against HF RobertaForMaskedLM, on the real tokens of a padded batch."""
    torch.manual_seed(seed)
    roberta = build_roberta(size, n, "sdpa", mlm=True).eval()
    ours = LinformerForMaskedLM.from_pretrained_encoder(roberta, attention="full").eval()
    ids, mask = _padded(batch, n, size.vocab)
    with torch.no_grad():
        a, b = ours(ids, attention_mask=mask).logits, roberta(ids, attention_mask=mask).logits
    return (a - b)[mask.bool()].abs().max().item()


def _padded(batch: int, n: int, vocab: int):
    ids = torch.randint(4, vocab, (batch, n))
    mask = torch.ones_like(ids)
    for i in range(1, batch):
        L = n * (batch - i) // batch
        ids[i, L:], mask[i, L:] = 1, 0
    ids[:, 0] = 0
    return ids, mask


def set_zero_padding(model: torch.nn.Module, zero_padding: bool) -> None:
    """Keep padded positions out of every learned projection (True), or let them in as fairseq does (False)."""
    for module in model.modules():
        if isinstance(module, LinearProjection):
            module.zero_padding = zero_padding


def padding_leak(n: int = 512, k: int = 128, size: Size = BASE_2_LAYERS,
                 real: int = 100, seed: int = 0) -> tuple[float, float]:
    """max |delta hidden| of a sequence of ``real`` tokens alone vs padded to n: ours, then fairseq-style."""
    torch.manual_seed(seed)
    model = build_ours(size, n, "linformer", k, sharing="headwise").eval()
    ids, mask = _padded(2, n, size.vocab)
    ids[1, real:], mask[1, real:] = 1, 0
    deltas = []
    for zero_padding in (True, False):
        set_zero_padding(model, zero_padding)
        with torch.no_grad():
            alone = model(ids[1:, :real]).last_hidden_state
            batched = model(ids, attention_mask=mask).last_hidden_state[1:, :real]
        deltas.append((alone - batched).abs().max().item())
    set_zero_padding(model, True)
    return deltas[0], deltas[1]


def forward_times(n: int = 4096, k: int = 256, size: Size = BASE_2_LAYERS, batch: int = 1,
                  reps: int = 5, threads_used: dict[str, list[int]] | None = None) -> dict[str, float]:
    """Median forward seconds, linformer (layerwise) and full (SDPA) interleaved on the same batch; with
    `threads_used`, the CPU threads each model's timed forwards ran with."""
    device = torch.device("cpu")
    models = {mode: build_ours(size, n, mode, k, "layerwise").eval() for mode in ("linformer", "full")}
    ids = torch.randint(4, size.vocab, (batch, n))

    def forward(model):
        with torch.inference_mode():
            model(ids)

    for model in models.values():
        forward(model)  # warm-up
    return interleaved_medians({mode: (lambda m=m: forward(m)) for mode, m in models.items()}, reps, device,
                               threads_used=threads_used)


def report(out: str | None = None, command: str = "python scripts/model_checks.py", n: int = 4096,
           k: int = 256) -> str:
    """The checks as a markdown table (printed; also written to `out`); `command`: the command line that ran them.
    The forward times' speed-up is checked against its FLOP ratio (common.beyond_flop_bound)."""
    load = load_average()
    delta = roberta_logits_delta()
    ours, leaky = padding_leak()
    used: dict[str, list[int]] = {}
    t = forward_times(n, k, threads_used=used)
    machine = machine_description(torch.device("cpu"), load)
    speedup, flops = t["full"] / t["linformer"], flop_ratio(n, k, BASE_2_LAYERS.hidden, BASE_2_LAYERS.ffn)
    threads = (f"the Linformer at {threads_words(thread_range(used['linformer']))} and full attention at "
               f"{threads_words(thread_range(used['full']))}")
    warnings = [flop_bound_warning("forward time", speedup, flops, machine["load_average"], threads)] \
        if beyond_flop_bound(speedup, flops) else []
    for line in warnings:
        print(line, file=sys.stderr)
    lines = [
        "# Model checks",
        "",
        f"Machine: {machine_words(machine)}. Command: `{command}`.",
        "",
        "| check | value |",
        "|---|---|",
        (f"| max abs delta logits, full mode vs RobertaForMaskedLM (12 layers, width 768, n=128, padded batch) "
        f"| {delta:.2e} |"),
        f"| padding leak, ours (n=512, k=128, 100 real tokens alone vs padded to 512) | {ours:.2e} |",
        f"| padding leak, fairseq-style projection (same model and batch) | {leaky:.2e} |",
        f"| forward s, linformer (layerwise, k={k}), n={n}, width 768, 2 layers, batch 1 | {t['linformer']:.3f} |",
        f"| forward s, full attention (SDPA), same | {t['full']:.3f} |",
        f"| speed-up linformer vs full (FLOP ratio {flops:.2f}x) | {speedup:.2f}x |",
        (f"| CPU threads of the timed forwards, linformer / full | {thread_range(used['linformer'])} / "
         f"{thread_range(used['full'])} |"),
        *("\n" + warning_paragraph(line) for line in warnings),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        atomic_write(out, text)
    return text
