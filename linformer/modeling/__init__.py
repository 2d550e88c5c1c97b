"""RoBERTa-shaped Linformer models, registered with the Hugging Face Auto classes on import."""

# linformer.errors imports .errors without this package's start (linformer.errors._beside_the_model), which leaves it
# no attribute of the package: named here, as an import of it would
from . import errors  # noqa: F401
from .attention import (
    ConvProjection,
    LinearProjection,
    LinformerSelfAttention,
    PoolProjection,
    Projection,
    register_projection,
)
from .auto import register
from .configuration import LinformerConfig, attention_label
from .convert import convert_encoder
from .model import LinformerModel, LinformerPreTrainedModel, count_projection_matrices
from .task_models import LinformerForMaskedLM, LinformerForSequenceClassification

register()

__all__ = [
    "ConvProjection",
    "LinearProjection",
    "LinformerConfig",
    "LinformerForMaskedLM",
    "LinformerForSequenceClassification",
    "LinformerModel",
    "LinformerPreTrainedModel",
    "LinformerSelfAttention",
    "PoolProjection",
    "Projection",
    "attention_label",
    "convert_encoder",
    "count_projection_matrices",
    "register_projection",
]
