"""Linformer: pretrain and finetune RoBERTa-shaped encoders with linear-complexity self-attention."""

import importlib
import sys

from . import cli as _cli
from .version import __version__

# Every name `from linformer import X` gives, from the module that defines it, imported when first asked for (PEP
# 562). In a script's process (``cli.run_from_a_script``) the package's import, the script's first, installs its
# start-up handling before anything heavy (``cli.stop_while_starting``: a Ctrl-C while torch imports is one `stopped:`
# line, not a traceback). Then linformer.modeling is imported, which registers the Auto classes, as a model card's
# `import linformer` says and as a command's loads need (a tokenizer read from a model folder too); but not for a
# script's --help, which answers without torch and transformers (seconds).
_script = _cli.run_from_a_script()
if _script:
    _cli.stop_while_starting()
if not (_script and {"-h", "--help"} & set(sys.argv[1:])):
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


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
