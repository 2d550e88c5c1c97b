"""Trainer settings read from ``cfg.trainer`` and checked where they are read, and the config resolvers that name
runs. Every bad value is a ConfigError naming its key."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..errors import ConfigError


def _attn_tag(attention: str, n: Any, k: Any, sharing: Any) -> str:
    """Run-name part for the architecture: full attention has no k and no sharing."""
    return f"full-n{n}" if str(attention) == "full" else f"{attention}-n{n}-k{k}-{sharing}"


def _suffix(text: Any) -> str:
    return f"-{text}" if text not in (None, "") else ""


# Resolvers used by configs/*.yaml to name runs.
OmegaConf.register_new_resolver("basename", lambda p: Path(str(p).rstrip("/")).name, replace=True)
OmegaConf.register_new_resolver("scratch_tag", lambda flag: "-scratch" if flag else "", replace=True)
OmegaConf.register_new_resolver("attn_tag", _attn_tag, replace=True)
OmegaConf.register_new_resolver("suffix", _suffix, replace=True)


def positive_int(cfg: Mapping, key: str, prefix: str = "trainer", allow_none: bool = False) -> int | None:
    """cfg[key] as an int >= 1 (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = cfg.get(key)
    if value is None and allow_none:
        return None
    name = f"{prefix}.{key}" if prefix else key
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value or value < 1:
        raise ConfigError(f"{name}={value!r} must be a whole number of at least 1.")
    return int(value)


def positive_float(cfg: Mapping, key: str, prefix: str = "trainer", allow_none: bool = False) -> float | None:
    """cfg[key] as a finite float > 0 (None allowed when `allow_none`), else a ConfigError naming `prefix.key`."""
    value = cfg.get(key)
    if value is None and allow_none:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ConfigError(f"{prefix}.{key}={value!r} must be a positive number.")
    return number


@dataclass(frozen=True)
class TrainerSettings:
    """What the training core needs from ``cfg.trainer``, validated."""

    max_steps: int | None         # None: the task derives it (finetuning: epochs x steps per epoch)
    batch_size: int
    grad_accum: int
    lr: float
    max_grad_norm: float          # inf: no clipping (the norm is still measured)
    mixed_precision: str
    eval_every: int | None        # None: the task's default (finetuning: once per epoch)
    save_every: int | None        # None: at the end and on a stop signal only
    keep_last: int
    log_every: int
    max_nonfinite_steps: int
    resume: str | None
    allow_config_change: bool | list[str]
    allow_nonbitwise_resume: bool

    @classmethod
    def read(cls, t: Mapping) -> TrainerSettings:
        precision = str(t.get("mixed_precision", "no"))
        if precision not in ("no", "fp16", "bf16"):
            raise ConfigError(f"trainer.mixed_precision={precision!r} is not one of no, fp16, bf16.")
        clip = t.get("max_grad_norm")
        if clip is not None and (not isinstance(clip, (int, float)) or clip < 0):
            raise ConfigError(f"trainer.max_grad_norm={clip!r} must be a number >= 0 (0 or null: no clipping).")
        allow = t.get("allow_config_change") or []
        if not isinstance(allow, bool):
            allow = [str(k) for k in (OmegaConf.to_container(allow) if OmegaConf.is_config(allow) else allow)]
        resume = t.get("resume")
        return cls(
            max_steps=positive_int(t, "max_steps", allow_none=True),
            batch_size=positive_int(t, "batch_size"),
            grad_accum=positive_int(t, "grad_accum"),
            lr=positive_float(t, "lr"),
            max_grad_norm=float(clip) if clip else math.inf,
            mixed_precision=precision,
            eval_every=positive_int(t, "eval_every", allow_none=True),
            save_every=positive_int(t, "save_every", allow_none=True),
            keep_last=positive_int(t, "keep_last") if t.get("keep_last") is not None else 3,
            log_every=positive_int(t, "log_every"),
            max_nonfinite_steps=positive_int(t, "max_nonfinite_steps"),
            resume=None if resume in (None, "", "null", "none", False) else str(resume),
            allow_config_change=allow,
            allow_nonbitwise_resume=bool(t.get("allow_nonbitwise_resume", False)),
        )
