"""A run's settings, read and checked once at its entry: the config groups' schemas (``settings``) and the stages'
run specs (``runs``)."""

from .runs import (
           OPERATIONAL_KEYS,
           ConvertSpec,
           DistillSpec,
           FinetuneSpec,
           PretrainSpec,
           RunSpec,
           TaskRunSpec,
           TransferSpec,
           model_config,
)
from .settings import TaskData, TrainerSettings

__all__ = ["OPERATIONAL_KEYS", "ConvertSpec", "DistillSpec", "FinetuneSpec", "PretrainSpec", "RunSpec", "TaskData", "TaskRunSpec",
           "TrainerSettings", "TransferSpec", "model_config"]
