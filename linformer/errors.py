"""Errors a user can fix: the scripts print their message (naming the key, path or file) without a traceback."""


class LinformerError(ValueError):
    """Base class for user-fixable errors."""


class ConfigError(LinformerError):
    """A config key holds a value that cannot work; the message names the key."""


class CheckpointError(LinformerError):
    """A checkpoint or model path is missing, incomplete or incompatible; the message names the path."""


class TrainingDiverged(RuntimeError):
    """Too many consecutive non-finite losses; a final checkpoint was written before this is raised."""
