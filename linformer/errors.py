"""The package's error hierarchy (defined in ``linformer.modeling.errors``, beside the model's code that raises it)."""

from .modeling.errors import (
    CheckpointError,
    ConfigError,
    CorpusError,
    DataError,
    DiskFullError,
    HubOfflineError,
    LinformerError,
    OutputPathError,
    PartialOutput,
    PeerFailed,
    Preempted,
    RunDirError,
    TaskDataError,
    TrainingDiverged,
    did_you_mean,
    stopped_status,
)

__all__ = [
    "CheckpointError",
    "ConfigError",
    "CorpusError",
    "DataError",
    "DiskFullError",
    "HubOfflineError",
    "LinformerError",
    "OutputPathError",
    "PartialOutput",
    "PeerFailed",
    "Preempted",
    "RunDirError",
    "TaskDataError",
    "TrainingDiverged",
    "did_you_mean",
    "stopped_status",
]
