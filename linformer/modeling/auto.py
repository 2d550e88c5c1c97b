"""Register the Linformer classes with the Auto API, so ``AutoModel*.from_pretrained(dir)`` works after
``import linformer``, and so that every saved model carries the model's code beside its weights: with it
``AutoModel*.from_pretrained(dir_or_hub_name, trust_remote_code=True)`` works where this package is not installed
(transformers copies the class's module and every module its ``from .x import`` lines name; those modules import
nothing else of the package)."""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
)

from .configuration import LinformerConfig
from .model import LinformerModel, LinformerPreTrainedModel
from .task_models import LinformerForMaskedLM, LinformerForSequenceClassification

AUTO_CLASSES = {AutoModel: LinformerModel, AutoModelForMaskedLM: LinformerForMaskedLM,
                AutoModelForSequenceClassification: LinformerForSequenceClassification}


def auto_map() -> dict[str, str]:
    """config.json's ``auto_map``: every Auto class the saved code serves."""
    return {"AutoConfig": _where(LinformerConfig)} | {auto.__name__: _where(cls) for auto, cls in AUTO_CLASSES.items()}


def _where(cls) -> str:
    return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"  # the saved code's module (file) and class


def register() -> None:
    """Idempotent: safe to call more than once (e.g. from several imports or processes)."""
    AutoConfig.register(LinformerConfig.model_type, LinformerConfig, exist_ok=True)
    LinformerConfig.register_for_auto_class()
    for auto, cls in AUTO_CLASSES.items():
        auto.register(LinformerConfig, cls, exist_ok=True)
        cls.register_for_auto_class(auto.__name__)
    LinformerPreTrainedModel.saved_auto_map = auto_map()
