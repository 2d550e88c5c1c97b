"""Linformer: pretrain and finetune RoBERTa-shaped encoders with linear-complexity self-attention."""

from .modeling import (
    LinformerConfig,
    LinformerForMaskedLM,
    LinformerForSequenceClassification,
    LinformerModel,
    convert_encoder,
    count_projection_matrices,
)
from .version import __version__

__all__ = [
    "LinformerConfig",
    "LinformerForMaskedLM",
    "LinformerForSequenceClassification",
    "LinformerModel",
    "__version__",
    "convert_encoder",
    "count_projection_matrices",
]
