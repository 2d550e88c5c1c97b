"""Register the Linformer classes with the Auto API, so ``AutoModel*.from_pretrained(dir)`` works after
``import linformer``."""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
)

from .configuration import LinformerConfig
from .model import LinformerModel
from .task_models import LinformerForMaskedLM, LinformerForSequenceClassification


def register() -> None:
    """Idempotent: safe to call more than once (e.g. from several imports or processes)."""
    AutoConfig.register(LinformerConfig.model_type, LinformerConfig, exist_ok=True)
    AutoModel.register(LinformerConfig, LinformerModel, exist_ok=True)
    AutoModelForMaskedLM.register(LinformerConfig, LinformerForMaskedLM, exist_ok=True)
    AutoModelForSequenceClassification.register(LinformerConfig, LinformerForSequenceClassification, exist_ok=True)
