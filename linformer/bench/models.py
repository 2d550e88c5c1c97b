"""The benchmarked models: ours (Linformer or full attention) and Hugging Face RoBERTa of the same size.

RoBERTa's architecture is ours in full mode (tests/modeling/test_roberta_interop.py checks equal outputs), so the
RoBERTa baseline differs from our full mode only in its attention implementation.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..modeling import LinformerConfig, LinformerForMaskedLM, LinformerModel, attention_label
from ..modeling.values import round_up


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


def linformer_fields(settings) -> dict:
    """LinformerConfig fields of a benchmark's Linformer rows beyond k and sharing, from its settings'
    local_window, global_positions and (where it has one) landmark_pooling: {} for the paper's Linformer."""
    landmarks = getattr(settings, "landmark_pooling", False)
    if not (settings.local_window or settings.global_positions or landmarks):
        return {}
    fields = {"local_window": int(settings.local_window), "global_positions": list(settings.global_positions or [])}
    if landmarks:  # the attention pooling follows each input's length, as resampling does
        fields.update(landmark_pooling=True, length_policy="resample")
    return fields


def with_kernel(model: nn.Module, attn_implementation: str) -> nn.Module:
    """`model` switched to `attn_implementation` (sdpa, the default, or flex_attention)."""
    if attn_implementation != "sdpa":
        model.set_attn_implementation(attn_implementation)
    return model


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


# The long-document encoders users pick instead of a Linformer, at the same size (layers, width, heads, and parameters:
# modernbert_ffn): ModernBERT with local attention of 128 tokens in every layer but each second one (global), through SDPA; Longformer
# with a window of 256 tokens and [CLS] global. Random weights: they are timed, not scored.
MODERNBERT_LOCAL, LONGFORMER_WINDOW = 128, 256


class _GlobalCLS(nn.Module):
    """Longformer called as the benchmark calls every model (input ids alone), its first token global."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, **kwargs):
        import torch

        global_mask = torch.zeros_like(input_ids)
        global_mask[:, 0] = 1
        return self.model(input_ids, global_attention_mask=global_mask, **kwargs)


def modernbert_ffn(ffn: int) -> int:
    """ModernBERT's intermediate_size for a peer of our FFN width `ffn`. Its MLP is a GLU (Wi: hidden -> 2 x
    intermediate, Wo: intermediate -> hidden), three hidden x intermediate matrices against our two, so 2/3 of ours
    gives it our FFN's parameters and FLOPs (any integer is valid: the config asks no rounding)."""
    return max(1, round(2 * ffn / 3))


def build_peer(kind: str, size: Size, n: int) -> nn.Module:
    """HF ModernBERT ('modernbert', its GLU feed-forward sized by modernbert_ffn) or HF Longformer ('longformer') of
    `size` for sequences of up to n tokens."""
    if kind == "modernbert":
        from transformers import ModernBertConfig, ModernBertModel

        config = ModernBertConfig(vocab_size=size.vocab, hidden_size=size.hidden, num_hidden_layers=size.layers,
                                  num_attention_heads=size.heads,
                                  intermediate_size=modernbert_ffn(size.ffn),
                                  max_position_embeddings=n, local_attention=MODERNBERT_LOCAL,
                                  global_attn_every_n_layers=2, hidden_activation="gelu", attn_implementation="sdpa",
                                  pad_token_id=1, bos_token_id=0, eos_token_id=2, cls_token_id=0, sep_token_id=2)
        return ModernBertModel(config)
    if kind == "longformer":
        from transformers import LongformerConfig, LongformerModel

        config = LongformerConfig(**size.config_kwargs(), max_position_embeddings=n + 2,
                                  attention_window=LONGFORMER_WINDOW)
        return _GlobalCLS(LongformerModel(config, add_pooling_layer=False))
    raise ValueError(f"unknown peer {kind!r}; expected modernbert or longformer")


def label(kind: str, k: int | None = None, sharing: str | None = None) -> str:
    """Report label of a model kind: ours 'linformer' / 'full', RoBERTa 'eager' / 'roberta_sdpa' / 'roberta', or a
    peer 'modernbert' / 'longformer'."""
    if kind in ("linformer", "full"):
        return "ours, " + attention_label(kind, k, sharing)
    return {"eager": "HF RoBERTa, eager n x n softmax", "roberta_sdpa": "HF RoBERTa (SDPA)",
            "roberta": "HF RoBERTa (SDPA)",
            "modernbert": f"HF ModernBERT (local {MODERNBERT_LOCAL}, global every 2nd layer, SDPA)",
            "longformer": f"HF Longformer (window {LONGFORMER_WINDOW}, [CLS] global)"}[kind]


__all__ = ["Size", "build_ours", "build_peer", "build_roberta", "label", "modernbert_ffn", "ours_config", "size_of"]
