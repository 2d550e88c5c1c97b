"""Training throughput: tokens/s of one full MLM step (forward, backward, AdamW step).

Three models of the same size train on the same batch (random ids, 15% of positions carry labels):
LinformerForMaskedLM with attention='linformer' and 'full' (SDPA) - both with sparse_prediction=True, vocabulary
logits only at the labelled positions, as in pretraining - and Hugging Face RobertaForMaskedLM
(attn_implementation='sdpa'), which computes logits at every position. Rounds are interleaved as in the inference
benchmark; median step time.
AdamW is the fused implementation for every model (the default on CPU loops over parameters).
Precision 'bf16' runs the forward under ``torch.autocast`` (bf16) with fp32 weights and optimizer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import nn
from tqdm.auto import tqdm

from .common import interleaved_medians, machine_description, resolve_device
from .models import build_ours, build_roberta, label, size_of

TRAIN_MODELS = ("linformer", "full", "roberta")


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
    """One of TRAIN_MODELS, in training mode, for sequences of n tokens."""
    if kind in ("linformer", "full"):
        return build_ours(size_of(s), n, kind, s.k, s.sharing, mlm=True).train()
    if kind == "roberta":
        return build_roberta(size_of(s), n, "sdpa", mlm=True).train()
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
        steps = {
            kind: (lambda m=models[kind], o=opts[kind], x=ids, y=labels, p=precision: train_step(m, o, x, y, p, device))
            for kind in s.models
        }
        t = interleaved_medians(steps, s.steps, device, on_call=lambda: bar.update(1))
        ref = t.get("roberta")
        for kind in s.models:
            linformer = kind == "linformer"
            rows.append({
                "n": n, "precision": precision, "batch_size": batch, "model": kind,
                "label": label(kind, s.k, s.sharing), "layers": s.layers, "hidden": s.hidden, "heads": s.heads,
                "ffn": s.ffn, "vocab": s.vocab, "k": min(s.k, n) if linformer else None,
                "sharing": s.sharing if linformer else None,
                "step_s": t[kind], "tokens_per_s": batch * n / t[kind],
                "speedup_vs_roberta": (ref / t[kind]) if ref else None,
            })
        del models, opts
    bar.close()
    meta = {"machine": machine_description(device), "elapsed_s": time.perf_counter() - start, "settings": s}
    return rows, meta


__all__ = ["TRAIN_MODELS", "ThroughputSettings", "build_mlm", "make_batch", "run_throughput", "train_step"]
