"""Training entry points: ``pretrain(cfg, run_dir)`` and ``finetune(cfg, run_dir)`` (plain functions; the
scripts are thin Hydra wrappers)."""

import contextlib
import sys
from pathlib import Path

from omegaconf import OmegaConf

from ..errors import LinformerError, TrainingDiverged

# Config resolvers used by configs/finetune.yaml to name runs after the model they start from.
OmegaConf.register_new_resolver("basename", lambda p: Path(str(p).rstrip("/")).name, replace=True)
OmegaConf.register_new_resolver("scratch_tag", lambda flag: "-scratch" if flag else "", replace=True)


def run_dir() -> Path:
    """The Hydra run directory of this job (outputs/<stage>/<run_name>), the same on every rank."""
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


@contextlib.contextmanager
def cli_errors():
    """User-fixable errors end the script with their message (naming the key or path), not a traceback."""
    try:
        yield
    except (LinformerError, FileNotFoundError, TrainingDiverged) as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def pretrain(cfg, run_dir):
    from .pretrain import pretrain as _pretrain

    return _pretrain(cfg, run_dir)


def finetune(cfg, run_dir):
    from .finetune import finetune as _finetune

    return _finetune(cfg, run_dir)


__all__ = ["cli_errors", "finetune", "pretrain", "run_dir"]
