"""Table 2's rows: which row a finetuning run belongs to, and its name (the paper layout and the from-scratch table
share them)."""

from __future__ import annotations

from ..rundir import is_full_attention

SHARING_LABEL = {"headwise": "", "kv": ", shared kv", "layerwise": ", shared kv, layer", "none": ", per-head E, F"}


def row_key(r: dict) -> tuple:
    """(attention, n, k, sharing, pretrained). A model without k (full attention, a RoBERTa checkpoint) is full
    attention, with k and sharing None; a model without max_seq_len (RoBERTa) has the n it was finetuned at."""
    full = is_full_attention(r)
    n = int(r.get("max_seq_len") or r["max_length"])
    return ("full" if full else "linformer", n, None if full else int(r["projected_dim"]),
            None if full else r.get("sharing"), not bool(r.get("from_scratch", False)))


def row_name(key: tuple) -> str:
    attention, n, k, sharing, pretrained = key
    name = "Full attention (RoBERTa)" if attention == "full" else f"Linformer, {k}{SHARING_LABEL.get(sharing, f', {sharing}')}"
    return f"{name}, n={n}" + ("" if pretrained else ", no pretraining")
