"""Analytic forward-pass FLOPs of one encoder stack (a multiply-add counts as 2 FLOPs).

Counted per layer: the query/key/value and output projections, the attention score (Q K^T) and value
(P V) matmuls, the Linformer's E/F projections and the FFN. Embeddings, LayerNorm, softmax, GELU and
biases are left out: they are the same for both models or O(n D), far below the matmuls.

The Linformer count follows our implementation, not the paper's naive order: when E (and F) is shared
by the heads (sharing = headwise | kv | layerwise, linear projection), the layer input is projected first
(E^T X, 2 n k D), so the key/value linear layers run on k rows (2 k D^2 each). With kv/layerwise sharing,
E = F and E^T X is computed once per layer. With sharing = none, K and V are computed on all n rows and each
head projects its own d columns (2 n k D for keys, as much for values).
"""

from __future__ import annotations


def layer_flops(n: int, hidden: int, ffn: int, attention: str, k: int | None = None,
                sharing: str = "layerwise") -> float:
    """FLOPs of one post-LN encoder layer's forward for one sequence of n tokens."""
    D = hidden
    q_out = 2 * n * D * D * 2  # query and output projections, n rows each
    mlp = 2 * 2 * n * D * ffn  # FFN: D -> ffn -> D
    if attention == "full":
        kv = 2 * 2 * n * D * D
        attn = 2 * 2 * n * n * D  # scores Q K^T and values P V over all heads (H * d = D)
        return float(q_out + kv + attn + mlp)
    if attention != "linformer" or k is None:
        raise ValueError(f"attention must be 'full' or 'linformer' (with k); got {attention!r}, k={k}")
    k = min(k, n)  # a batch of T < n tokens uses the first T rows of E
    if sharing == "none":
        kv = 2 * 2 * n * D * D + 2 * (2 * n * k * D)  # K, V on n rows, then E_i^T K_i, F_i^T V_i per head
    else:
        projections = 1 if sharing in ("kv", "layerwise") else 2  # E^T X (and F^T X for headwise)
        kv = projections * 2 * n * k * D + 2 * 2 * k * D * D
    attn = 2 * 2 * n * k * D  # scores (n x k) and values, over all heads
    return float(q_out + kv + attn + mlp)


def model_flops(n: int, hidden: int, ffn: int, layers: int, attention: str, k: int | None = None,
                sharing: str = "layerwise", batch: int = 1) -> float:
    return batch * layers * layer_flops(n, hidden, ffn, attention, k, sharing)


def flop_ratio(n: int, k: int, hidden: int, ffn: int, sharing: str = "layerwise") -> float:
    """Full-attention FLOPs / Linformer FLOPs: the speed-up a perfectly efficient implementation would see."""
    return layer_flops(n, hidden, ffn, "full") / layer_flops(n, hidden, ffn, "linformer", k, sharing)


__all__ = ["flop_ratio", "layer_flops", "model_flops"]
