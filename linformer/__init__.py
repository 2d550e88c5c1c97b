"""Linformer: pretrain and finetune RoBERTa-shaped encoders with linear-complexity self-attention."""

import importlib

from . import cli as _cli
from .version import __version__

# Every name `from linformer import X` gives, from the module that defines it, imported when first asked for (PEP
# 562). In a script's process (``cli.run_from_a_script``) the package's import, the script's first, does not import
# torch and transformers (seconds): its start-up handling comes first (``cli.stop_while_starting``: a Ctrl-C then is
# one `stopped:` line, not a traceback) and --help answers at once; the modules a command uses import
# linformer.modeling, and with it register the Auto classes, as they load. Elsewhere (a notebook, a model card's
# `import linformer`) the import registers the Auto classes at once, as the model cards and the guide say.
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


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
