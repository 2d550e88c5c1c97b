"""Numerical and speed checks of the model, printed side by side in one run.

    python -m linformer.bench.model_checks [--out docs/results/model_checks_cpu.md]

1. max |delta logits| of LinformerForMaskedLM(attention="full") against RobertaForMaskedLM with the same weights;
2. the padding leak: max |delta| between a sequence alone and inside a padded batch, for our projection and for a
   fairseq/lucidrains-style projection that lets padded positions into E^T K;
3. forward time of linformer against full attention at n = 4096, k = 256 (base width, 2 layers), interleaved.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from unittest import mock

import torch
from transformers import RobertaConfig, RobertaForMaskedLM

from linformer import LinformerForMaskedLM, LinformerModel
from linformer.bench.common import machine_description
from linformer.modeling import LinearProjection


def roberta_logits_delta(n: int = 128, layers: int = 12, batch: int = 4, seed: int = 0) -> float:
    """RoBERTa-base shape with random weights (no hub): our full mode against HF, padded batch."""
    torch.manual_seed(seed)
    rc = RobertaConfig(max_position_embeddings=n + 2, type_vocab_size=1, layer_norm_eps=1e-5, num_hidden_layers=layers)
    roberta = RobertaForMaskedLM(rc).eval()
    ours = LinformerForMaskedLM.from_roberta(roberta, attention="full").eval()
    ids, mask = _padded(batch, n, rc.vocab_size)
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


@contextlib.contextmanager
def leaky_projection():
    """Project padded positions too, as fairseq's and lucidrains' Linformer do."""
    original = LinearProjection.project_hidden
    with mock.patch.object(LinearProjection, "project_hidden", lambda self, h, m: original(self, h, None)):
        yield


def padding_leak(n: int = 512, k: int = 128, layers: int = 2, seed: int = 0) -> tuple[float, float]:
    """max |delta hidden| of a 100-token sequence alone vs padded to n, ours and leaky (base width)."""
    torch.manual_seed(seed)
    from linformer import LinformerConfig

    model = LinformerModel(LinformerConfig(num_hidden_layers=layers, max_seq_len=n, projected_dim=k)).eval()
    ids, mask = _padded(2, n, 50265)
    ids[1, 100:], mask[1, 100:] = 1, 0
    deltas = []
    for ctx in (contextlib.nullcontext(), leaky_projection()):
        with ctx, torch.no_grad():
            alone = model(ids[1:, :100]).last_hidden_state
            batched = model(ids, attention_mask=mask).last_hidden_state[1:, :100]
        deltas.append((alone - batched).abs().max().item())
    return deltas[0], deltas[1]


def forward_times(n: int = 4096, k: int = 256, layers: int = 2, batch: int = 1, reps: int = 5) -> dict[str, float]:
    """Median forward seconds, linformer (layerwise) and full (SDPA) interleaved on the same batch."""
    from linformer import LinformerConfig

    models = {
        mode: LinformerModel(
            LinformerConfig(num_hidden_layers=layers, max_seq_len=n, projected_dim=k, attention=mode, sharing="layerwise")
        ).eval()
        for mode in ("linformer", "full")
    }
    ids = torch.randint(4, 50265, (batch, n))
    times = {mode: [] for mode in models}
    with torch.inference_mode():
        for model in models.values():
            model(ids)  # warm-up
        for _ in range(reps):
            for mode, model in models.items():
                t0 = time.perf_counter()
                model(ids)
                times[mode].append(time.perf_counter() - t0)
    return {mode: statistics.median(t) for mode, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="also write the results as markdown to this file")
    args = parser.parse_args()
    delta = roberta_logits_delta()
    ours, leaky = padding_leak()
    t = forward_times()
    lines = [
        "# Model checks",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in machine_description(torch.device("cpu")).items()) + ". "
        "Command: `python -m linformer.bench.model_checks`.",
        "",
        "| check | value |",
        "|---|---|",
        (f"| max abs delta logits, full mode vs RobertaForMaskedLM (12 layers, width 768, n=128, padded batch) "
        f"| {delta:.2e} |"),
        f"| padding leak, ours (n=512, k=128, 100 real tokens alone vs padded to 512) | {ours:.2e} |",
        f"| padding leak, fairseq-style projection (same model and batch) | {leaky:.2e} |",
        f"| forward s, linformer (layerwise, k=256), n=4096, width 768, 2 layers, batch 1 | {t['linformer']:.3f} |",
        f"| forward s, full attention (SDPA), same | {t['full']:.3f} |",
        f"| speed-up linformer vs full | {t['full'] / t['linformer']:.2f}x |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
