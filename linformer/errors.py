"""One hierarchy for errors a user can fix. Every script prints their message as one `error: ...` line naming the
key, file or line, and exits 2 without a traceback (``linformer.cli``). Anything else keeps its traceback."""


class LinformerError(ValueError):
    """Base class for user-fixable errors."""


class ConfigError(LinformerError):
    """A config key holds a value that cannot work; the message names the key."""


class CheckpointError(LinformerError):
    """A checkpoint or model path is missing, damaged or incompatible; the message names the path and file."""


class DataError(LinformerError):
    """Input data the user supplied cannot be read as asked; the message names the file (and line)."""


class CorpusError(DataError):
    """Bad corpus input: empty corpus, malformed line, corrupt gzip stream, mismatched tokenizer."""


class TaskDataError(DataError):
    """Bad task data: malformed row, unknown label, bad header."""


class HubOfflineError(LinformerError):
    """A hub name was given but the hub cannot be reached; the message says which local files to use instead."""


class RunDirError(LinformerError):
    """A run directory cannot take this start: other recorded settings, or another live process holds it."""


class OutputPathError(LinformerError):
    """An output path holds something this command would not rebuild (a file, other content, an output with other
    settings); the message names the path, what is there, and the flag that replaces it."""


class DiskFullError(LinformerError):
    """No space left while writing; the message names the directory. What was written before stays intact."""


class TrainingDiverged(LinformerError):
    """Too many consecutive non-finite losses; a checkpoint was written before this is raised."""


class Preempted(Exception):
    """SIGTERM or SIGINT stopped a run after it wrote a checkpoint; the message says how to resume.

    Not an error: the CLI prints the message and exits with 128 + the signal number, as a killed process would.
    """

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + int(signum)
