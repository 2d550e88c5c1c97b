"""Training throughput: tokens/s of one full MLM step (forward, backward, AdamW step).

Three models of the same size train on the same batch (random ids, 15% of positions carry labels):
LinformerForMaskedLM with attention='linformer' (layerwise sharing) and 'full' (SDPA) - both compute vocabulary
logits only at the labelled positions - and Hugging Face RobertaForMaskedLM (attn_implementation='sdpa'), which
computes logits at every position. Rounds are interleaved as in the inference benchmark; median step time.
AdamW is the fused implementation for every model (the default on CPU loops over parameters).
Precision 'bf16' runs the forward under ``torch.autocast`` (bf16) with fp32 weights and optimizer.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from ..modeling import LinformerConfig, LinformerForMaskedLM
from .common import machine_description, resolve_device, timed

TRAIN_MODELS = ("linformer", "full", "roberta")
TRAIN_LABELS = {
    "linformer": "LinformerForMaskedLM, linformer (layerwise)",
    "full": "LinformerForMaskedLM, full (SDPA)",
    "roberta": "HF RobertaForMaskedLM (SDPA)",
}


@dataclass
class ThroughputSettings:
    ns: list[int] = field(default_factory=lambda: [512, 2048])
    tokens_per_step: int = 4096  # batch = tokens_per_step // n
    layers: int = 4
    hidden: int = 256
    heads: int = 4
    ffn: int = 1024
    vocab: int = 50265
    k: int = 256
    sharing: str = "layerwise"
    dropout: float = 0.1  # RoBERTa's hidden and attention dropout, as in pretraining
    mask_prob: float = 0.15
    precisions: list[str] = field(default_factory=lambda: ["fp32", "bf16"])
    models: list[str] = field(default_factory=lambda: list(TRAIN_MODELS))
    steps: int = 3
    warmup: int = 1
    lr: float = 1e-4
    device: str = "auto"
    seed: int = 0


def build_mlm(kind: str, n: int, s: ThroughputSettings) -> nn.Module:
    sizes = {
        "vocab_size": s.vocab, "hidden_size": s.hidden, "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
        "intermediate_size": s.ffn, "hidden_dropout_prob": s.dropout, "attention_probs_dropout_prob": s.dropout,
    }
    if kind in ("linformer", "full"):
        config = LinformerConfig(**sizes, attention=kind, max_seq_len=n, projected_dim=min(s.k, n),
                                 sharing=s.sharing)
        return LinformerForMaskedLM(config).train()
    if kind == "roberta":
        from transformers import RobertaConfig, RobertaForMaskedLM

        config = RobertaConfig(**sizes, max_position_embeddings=n + 2, type_vocab_size=1, layer_norm_eps=1e-5,
                               attn_implementation="sdpa")
        return RobertaForMaskedLM(config).train()
    raise ValueError(f"unknown model {kind!r}; expected one of {TRAIN_MODELS}")


def make_batch(batch: int, n: int, vocab: int, mask_prob: float, device, generator=None):
    """Random ids and labels at ~mask_prob of the positions (at least one), -100 elsewhere."""
    ids = torch.randint(3, vocab, (batch, n), generator=generator)
    targets = torch.rand(batch, n, generator=generator) < mask_prob
    targets[0, 0] = True
    labels = torch.where(targets, ids, torch.full_like(ids, -100))
    return ids.to(device), labels.to(device)


def train_step(model, opt, ids, labels, precision: str, device) -> float:
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss.detach())


def run_throughput(s: ThroughputSettings, progress: bool = True, log=print) -> tuple[list[dict], dict]:
    device = resolve_device(s.device)
    combos = [(n, p) for n in s.ns for p in s.precisions]
    bar = tqdm(total=len(combos) * len(s.models) * (s.warmup + s.steps), desc="training", unit="step",
               disable=not progress)
    rows, start = [], time.perf_counter()
    for n, precision in combos:
        batch = max(1, s.tokens_per_step // n)
        gen = torch.Generator().manual_seed(s.seed)
        ids, labels = make_batch(batch, n, s.vocab, s.mask_prob, device, gen)
        models, opts = {}, {}
        for kind in s.models:
            torch.manual_seed(s.seed)
            models[kind] = build_mlm(kind, n, s).to(device)
            opts[kind] = torch.optim.AdamW(models[kind].parameters(), lr=s.lr, fused=True)
        bar.set_postfix(n=n, precision=precision)
        for kind in s.models:
            for _ in range(s.warmup):
                train_step(models[kind], opts[kind], ids, labels, precision, device)
                bar.update(1)
        times = {kind: [] for kind in s.models}
        for r in range(s.steps):
            order = s.models[r % len(s.models):] + s.models[: r % len(s.models)]
            for kind in order:
                step = lambda m=models[kind], o=opts[kind], x=ids, y=labels, p=precision: train_step(
                    m, o, x, y, p, device)
                times[kind].append(timed(step, device))
                bar.update(1)
        ref = statistics.median(times["roberta"]) if "roberta" in times else None
        for kind in s.models:
            step = statistics.median(times[kind])
            rows.append({
                "n": n, "precision": precision, "batch_size": batch, "model": kind, "label": TRAIN_LABELS[kind],
                "layers": s.layers, "hidden": s.hidden, "heads": s.heads, "ffn": s.ffn, "vocab": s.vocab,
                "k": s.k if kind == "linformer" else None,
                "step_s": step, "tokens_per_s": batch * n / step,
                "speedup_vs_roberta": (ref / step) if ref else None,
            })
        del models, opts
    bar.close()
    meta = {"machine": machine_description(device), "elapsed_s": time.perf_counter() - start, "settings": s}
    return rows, meta


__all__ = ["TRAIN_MODELS", "ThroughputSettings", "build_mlm", "make_batch", "run_throughput", "train_step"]
