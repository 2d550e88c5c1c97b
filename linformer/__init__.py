"""Linformer: pretrain and finetune RoBERTa-shaped encoders with linear-complexity self-attention."""

import typing as _typing

from . import cli as _cli
from .data.workers import die_with_launcher as _die_with_launcher
from .lazy import lazy_names as _lazy_names
from .version import __version__

# A process torchrun started (a rank) stops, checkpointed, when the launcher dies, SIGKILL included
# (``data.workers.die_with_launcher``): asked for first, before the seconds of torch's import.
_die_with_launcher()

# Every name `from linformer import X` gives, from the module that defines it, imported when first asked for (PEP
# 562). In a script's process (``cli.run_from_a_script``) the package's import, the script's first, installs its
# start-up handling before anything heavy (``cli.stop_while_starting``: a Ctrl-C while torch imports is one `stopped:`
# line, not a traceback), and leaves linformer.modeling to the command's body (``cli.cli_errors``), once its command
# line is parsed: a --help or a usage error answers without torch and transformers (seconds). Elsewhere
# linformer.modeling is imported now, which registers the Auto classes, as a model card's `import linformer` says.
if _cli.run_from_a_script():
    _cli.stop_while_starting()
else:
    from . import modeling  # noqa: F401

_LAZY = {
    "LinformerConfig": ".modeling",
    "LinformerForMaskedLM": ".modeling",
    "LinformerForSequenceClassification": ".modeling",
    "LinformerModel": ".modeling",
    "convert_encoder": ".modeling",
    "count_projection_matrices": ".modeling",
}

__all__ = [
    "LinformerConfig",
    "LinformerForMaskedLM",
    "LinformerForSequenceClassification",
    "LinformerModel",
    "__version__",
    "convert_encoder",
    "count_projection_matrices",
]

# A type checker reads the names from their modules (the real classes and functions, and a misspelt name is an
# error); at run time they stay lazy. tests/test_imports.py checks that this block, _LAZY and __all__ agree.
if _typing.TYPE_CHECKING:
    from .modeling import (
        LinformerConfig,
        LinformerForMaskedLM,
        LinformerForSequenceClassification,
        LinformerModel,
        convert_encoder,
        count_projection_matrices,
    )
else:
    __getattr__, __dir__ = _lazy_names(__name__, _LAZY)
