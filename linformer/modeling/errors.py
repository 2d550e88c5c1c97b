"""One hierarchy for errors a user can fix. Every script prints their message as one `error: ...` line naming the
key, file or line, and exits 2 without a traceback (``linformer.cli``). Anything else keeps its traceback.

It lives beside the model's code, which raises it, because that code is saved with every model (``auto.register``:
``trust_remote_code``) and must import nothing from the rest of the package; the package imports it as
``linformer.errors``."""

import difflib
import signal
from collections.abc import Iterable

# what the package gives as linformer.errors: the one listing of these names
__all__ = [
    "CheckpointError",
    "ConfigError",
    "CorpusError",
    "DataError",
    "DiskFullError",
    "HubOfflineError",
    "LinformerError",
    "MissingFileError",
    "OutputPathError",
    "PartialOutput",
    "PeerFailed",
    "Preempted",
    "RunDirError",
    "TaskDataError",
    "TrainingDiverged",
    "did_you_mean",
    "first_line",
    "stopped_status",
]

CLOSE_ENOUGH = 0.6  # difflib's similarity ratio above which a known name is offered for an unknown one

# Names a user is likely to type for one of our keys, by its last part (lower case): the paper's symbols, and
# Hugging Face's (TrainingArguments, model configs). name -> (our key's last part, whose name it is). A name is
# offered only where the command has a key of that last part (the group's own first).
ALIASES = {
    **{name: (key, f"the paper calls it {symbol}") for symbol, name, key in (
        ("k", "k", "projected_dim"), ("n", "n", "max_seq_len"), ("E", "e", "projection"), ("F", "f", "projection"),
        ("d", "d", "hidden_size"), ("d_model", "d_model", "hidden_size"), ("h", "h", "num_attention_heads"),
        ("d_ff", "d_ff", "intermediate_size"))},
    **{name: (key, f"Hugging Face calls it {name}") for name, key in (
        ("learning_rate", "lr"), ("per_device_train_batch_size", "batch_size"),
        ("per_device_eval_batch_size", "eval_batch_size"), ("num_train_epochs", "epochs"),
        ("gradient_accumulation_steps", "grad_accum"), ("adam_epsilon", "eps"), ("adam_beta1", "betas"), ("adam_beta2", "betas"), ("logging_steps", "log_every"),
        ("save_steps", "save_every"), ("eval_steps", "eval_every"), ("save_total_limit", "keep_last"),
        ("resume_from_checkpoint", "resume"), ("torch_compile", "compile"),
        ("torch_compile_backend", "compile_backend"), ("torch_compile_mode", "compile_mode"),
        ("fp16", "mixed_precision"), ("bf16", "mixed_precision"), ("num_layers", "num_hidden_layers"),
        ("num_heads", "num_attention_heads"), ("hidden_dropout", "hidden_dropout_prob"),
        ("attention_dropout", "attention_probs_dropout_prob"), ("max_seq_length", "max_length"))},
}


def did_you_mean(name: str, known: Iterable[str], prefix: str = "") -> str:
    """The one did-you-mean rule of every refusal of an unknown key or option: " (did you mean <prefix><closest>?)"
    for the closest known name, or "" when none is close enough. A dotted name is compared by its last part with its
    siblings (the known keys of the same group), so that a shared group name does not make unrelated keys look close;
    without siblings (a misspelt group), by the whole name. Case does not count (trainer.Lr is trainer.lr), and a
    name of ``ALIASES`` (the paper's k, Hugging Face's learning_rate) offers our key of that meaning, saying whose
    name it is."""
    name = str(name)
    known = [k for k in known if k != name]  # the name itself is never its own suggestion
    parent, _, last = name.rpartition(".")
    alias = ALIASES.get(last.lower())
    if alias is not None:
        leaf, whose = alias
        same = [k for k in known if k.rpartition(".")[2] == leaf]
        same.sort(key=lambda k: k.rpartition(".")[0] != parent)  # the group's own key first
        if same:
            return f" (did you mean {prefix}{same[0]}? {whose})"
    siblings = {k.rpartition(".")[2].lower(): k for k in known if parent and k.rpartition(".")[0] == parent}
    if siblings:
        close = [siblings[m] for m in difflib.get_close_matches(last.lower(), list(siblings), 1, cutoff=CLOSE_ENOUGH)]
    else:
        lower = {k.lower(): k for k in known}
        close = [lower[m] for m in difflib.get_close_matches(name.lower(), list(lower), 1, cutoff=CLOSE_ENOUGH)]
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def first_line(err: BaseException, named: bool = False) -> str:
    """The one way a message quotes an exception: its message's first line, stripped, or, where the message is empty
    (a bare ``OSError()``, ``KeyError()``), the exception type's name, so that the quoting never raises over the error
    it reports. `named`: "OSError: disk full", the type's name before the line (alone where the message is empty)."""
    lines = str(err).strip().splitlines()
    if not lines:
        return type(err).__name__
    return f"{type(err).__name__}: {lines[0]}" if named else lines[0]


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


class MissingFileError(LinformerError, FileNotFoundError):
    """A file or folder the user named (or that a setting names) is not there; the message names it and what writes
    it. A FileNotFoundError too, as Python and transformers raise for a missing file, so that a caller's
    ``except FileNotFoundError`` takes it as it did before, and a notebook's ``except LinformerError`` takes it with
    every other error a user can fix."""


class HubOfflineError(LinformerError):
    """A hub name was given but the hub cannot be reached; the message says which local files to use instead."""


class RunDirError(LinformerError):
    """A run directory cannot take this start: other recorded settings, or another live process holds it."""


class OutputPathError(LinformerError):
    """An output path holds something this command would not rebuild (a file, other content, an output with other
    settings); the message names the path, what is there, and the flag that replaces it."""


class DiskFullError(LinformerError):
    """No space left while writing; the message names the output. What was written before stays intact."""


class TrainingDiverged(LinformerError):
    """Too many consecutive non-finite losses; a checkpoint was written before this is raised."""


class PeerFailed(LinformerError):
    """Another process of a multi-process run failed where every process had to succeed (a checkpoint's writing):
    this one stops too. That process prints the cause; this one's line shows only where it cannot (linformer.cli)."""


def stopped_status(signum: int) -> int:
    """The exit status of a command a signal stopped: 128 + the signal number, as the shell reports a process the
    signal killed (SIGINT 130, SIGTERM 143, SIGHUP 129), so a scheduler tells its own stop from the user's."""
    return 128 + int(signum)


class Preempted(BaseException):
    """SIGTERM or SIGINT stopped a run after it wrote a checkpoint; the message says how to resume.

    Not an error: the CLI prints the message and exits with 128 + the signal number, as a killed process would. A
    BaseException, as KeyboardInterrupt is, so that a stop asked for ends a caller's loop that goes on past failed
    runs (`except Exception:` in a notebook's sweep) instead of counting as one of them.
    """

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = stopped_status(signum)

    @property
    def signal_name(self) -> str:
        """SIGTERM, SIGINT, ...: the signal that stopped the run."""
        return signal.Signals(self.exit_code - 128).name


class PartialOutput(BaseException):
    """Raised by a writer once it has written a partial output whole (rows measured before an error or a stop,
    marked partial), for `cause`, the error or stop that cut it short: ``atomic.output_files`` keeps and records those
    files as the command's output instead of putting the earlier ones back, then raises `cause`, which is what the
    user sees. Not an error itself: a BaseException, as Preempted is, so an ``except Exception`` between the writer
    and ``output_files`` does not take it for one (and a Preempted carried keeps its exit status)."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause
