"""An optional dependency (matplotlib, tensorboard, evaluate), imported where the feature that needs it starts."""

from __future__ import annotations

import importlib

from .errors import ConfigError, first_line
from .shell import shell_command


def import_needed(module: str, what: str, package: str | None = None):
    """`module`, imported; where it cannot be, a ConfigError saying `what` needs the PyPI package `package` (default:
    the module's top level) and the command that installs it, raised where that feature starts: an optional piece
    that is missing is one error line, not a traceback from deep inside the work."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = package or module.split(".")[0]
        why = first_line(err)
        raise ConfigError(f"{what} needs the {package} package, which cannot be imported here ({why}): "
                          f"{shell_command('pip', 'install', package)}") from err
