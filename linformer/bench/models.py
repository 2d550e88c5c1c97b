"""The benchmarked models: ours (Linformer or full attention) and Hugging Face RoBERTa of the same size.

RoBERTa's architecture is ours in full mode (tests/modeling/test_roberta_interop.py checks equal outputs), so the
RoBERTa baseline differs from our full mode only in its attention implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..modeling import LinformerConfig, LinformerForMaskedLM, LinformerModel, attention_label
from ..modeling.configuration import round_up


@dataclass(frozen=True)
class Size:
    """An encoder's size; dropout applies to hidden states and attention probabilities alike."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int = 50265
    dropout: float = 0.0
    pad_vocab_to_multiple_of: int | None = None  # ours only: embedding rows rounded up, as pretraining builds them

    def config_kwargs(self) -> dict:
        """The fields LinformerConfig and RobertaConfig share, with RoBERTa's layer_norm_eps and one token type."""
        return {
            "vocab_size": self.vocab, "hidden_size": self.hidden, "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads, "intermediate_size": self.ffn, "hidden_dropout_prob": self.dropout,
            "attention_probs_dropout_prob": self.dropout, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
        }


def size_of(settings) -> Size:
    """The Size of an InferenceSettings or ThroughputSettings."""
    return Size(settings.layers, settings.hidden, settings.heads, settings.ffn, settings.vocab,
                getattr(settings, "dropout", 0.0), getattr(settings, "pad_vocab_to_multiple_of", None))


def ours_config(size: Size, n: int, attention: str, k: int | None = None, sharing: str = "layerwise",
                mlm: bool = False, **fields) -> LinformerConfig:
    """Our model's config for sequences of up to n tokens (k is ignored for full attention), its vocabulary padded
    as ``size`` asks; ``fields``: other LinformerConfig fields (the Linformer's local and global keys)."""
    kwargs = size.config_kwargs()
    padded = round_up(size.vocab, size.pad_vocab_to_multiple_of)
    if padded > size.vocab:
        kwargs.update(vocab_size=padded, tokenizer_vocab_size=size.vocab)
    return LinformerConfig(**kwargs, attention=attention, max_seq_len=n, projected_dim=min(k or n, n),
                           sharing=sharing, sparse_prediction=mlm, **fields)


def build_ours(size: Size, n: int, attention: str, k: int | None = None, sharing: str = "layerwise",
               mlm: bool = False, **fields) -> nn.Module:
    """Our encoder (or MLM, with masked-only logits) for sequences of up to n tokens; k is ignored for full."""
    config = ours_config(size, n, attention, k, sharing, mlm, **fields)
    return LinformerForMaskedLM(config) if mlm else LinformerModel(config, add_pooling_layer=False)


def build_roberta(size: Size, n: int, attn_implementation: str = "sdpa", mlm: bool = False) -> nn.Module:
    """Hugging Face RoBERTa (encoder, or MLM with logits at every position) for sequences of up to n tokens."""
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaModel

    config = RobertaConfig(**size.config_kwargs(), max_position_embeddings=n + 2,
                           attn_implementation=attn_implementation)
    return RobertaForMaskedLM(config) if mlm else RobertaModel(config, add_pooling_layer=False)


def label(kind: str, k: int | None = None, sharing: str | None = None) -> str:
    """Report label of a model kind: ours 'linformer' / 'full', or RoBERTa 'eager' / 'roberta_sdpa' / 'roberta'."""
    if kind in ("linformer", "full"):
        return "ours, " + attention_label(kind, k, sharing)
    return {"eager": "HF RoBERTa, eager n x n softmax", "roberta_sdpa": "HF RoBERTa (SDPA)",
            "roberta": "HF RoBERTa (SDPA)"}[kind]


__all__ = ["Size", "build_ours", "build_roberta", "label", "ours_config", "size_of"]
