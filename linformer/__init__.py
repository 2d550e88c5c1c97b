"""Linformer: pretrain and finetune RoBERTa-shaped encoders with linear-complexity self-attention."""

from .modeling import (
    LinformerConfig,
    LinformerForMaskedLM,
    LinformerForSequenceClassification,
    LinformerModel,
    convert_encoder,
    count_projection_matrices,
)

# imported with the package: the keys runconfig hands down to runname, which a sweep job's folder name leaves out,
# are known wherever Hydra composes a run's config
from .runconfig import OPERATIONAL_KEYS as _OPERATIONAL_KEYS  # noqa: F401
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
