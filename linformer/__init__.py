"""Linformer: pretrain and finetune RoBERTa-shaped encoders with linear-complexity self-attention."""

from .modeling import (
    LinformerConfig,
    LinformerForMaskedLM,
    LinformerForSequenceClassification,
    LinformerModel,
    convert_encoder,
    count_projection_matrices,
)

__version__ = "0.1.0"

__all__ = [
    "LinformerConfig",
    "LinformerForMaskedLM",
    "LinformerForSequenceClassification",
    "LinformerModel",
    "convert_encoder",
    "count_projection_matrices",
]
