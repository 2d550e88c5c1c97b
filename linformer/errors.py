"""The package's error hierarchy (defined in ``linformer.modeling.errors``, beside the model's code that raises it,
whose ``__all__`` lists it once)."""

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


_beside_the_model("errors")
# the configuration values every layer shares, the scripts' parsers included (--sharing's choices): after this,
# ``from linformer.modeling.values import SHARING`` finds the module loaded, without the modeling package's torch
_beside_the_model("values")

# Loaded above, the module is found in sys.modules: the names of its __all__ (their one listing), without the
# modeling package's __init__ (a static reader sees them through the same import)
from .modeling.errors import *  # noqa: E402, F403
from .modeling.errors import __all__ as __all__  # noqa: E402
