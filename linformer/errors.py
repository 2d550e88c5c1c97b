"""The package's error hierarchy (defined in ``linformer.modeling.errors``, beside the model's code that raises it)."""

import importlib.util
import sys
from pathlib import Path


def _beside_the_model(name: str):
    """The module linformer.modeling.<name> (standard library only), imported without running the modeling package's
    __init__, which imports torch and transformers and registers the Auto classes: seconds that every command spent
    before its start-up handling, the Ctrl-C of a mistyped command a traceback (``cli.stop_while_starting``). The
    modeling package's own ``from .errors import`` later finds this same module (sys.modules)."""
    full = f"{__package__}.modeling.{name}"
    if full not in sys.modules:
        spec = importlib.util.spec_from_file_location(full, Path(__file__).parent / "modeling" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[full]
            raise
    return sys.modules[full]


_errors = _beside_the_model("errors")
# the configuration values every layer shares, the scripts' parsers included (--sharing's choices): after this,
# ``from linformer.modeling.values import SHARING`` finds the module loaded, without the modeling package's torch
_beside_the_model("values")
CheckpointError = _errors.CheckpointError
ConfigError = _errors.ConfigError
CorpusError = _errors.CorpusError
DataError = _errors.DataError
DiskFullError = _errors.DiskFullError
HubOfflineError = _errors.HubOfflineError
LinformerError = _errors.LinformerError
OutputPathError = _errors.OutputPathError
PartialOutput = _errors.PartialOutput
PeerFailed = _errors.PeerFailed
Preempted = _errors.Preempted
RunDirError = _errors.RunDirError
TaskDataError = _errors.TaskDataError
TrainingDiverged = _errors.TrainingDiverged
did_you_mean = _errors.did_you_mean
stopped_status = _errors.stopped_status

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
