"""The one CLI wrapper of every script: user-fixable errors become one `error: ...` line and exit status 2.

Hydra scripts use ``@hydra_main("pretrain")``; argparse scripts wrap their body in ``with cli_errors():``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import LinformerError, Preempted

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
EXIT_USER_ERROR = 2


@contextlib.contextmanager
def cli_errors():
    """Run a script body: user-fixable errors print `error: <message>` on stderr and exit 2, without a traceback.

    A missing file or a full disk is user-fixable too; every other exception keeps its traceback.
    """
    try:
        yield
    except Preempted as stop:
        print(f"stopped: {stop}", file=sys.stderr)
        sys.exit(stop.exit_code)
    except LinformerError as err:
        _fail(str(err))
    except FileNotFoundError as err:
        _fail(str(err))
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        _fail(f"no space left on device writing {err.filename or 'a file'}: free some space and run the same "
              "command again.")


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(EXIT_USER_ERROR)


def hydra_main(config_name: str) -> Callable:
    """``@hydra.main`` over configs/<config_name>.yaml, with the body run under ``cli_errors``."""
    import hydra

    from .train import settings  # noqa: F401  (the resolvers that name runs, needed before Hydra composes)

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def body(cfg):
            with cli_errors():
                return fn(cfg)

        return hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name=config_name)(body)

    return decorate


def hydra_run_dir() -> Path:
    """The Hydra run directory of this job (outputs/<stage>/<run_name>), the same on every rank."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)

