"""Small rules on configuration values that every layer shares: whether a value is of an annotated type as YAML
gives it, and rounding a size up to a multiple."""

from __future__ import annotations

import types
import typing


def fits_type(value, kind) -> bool:
    """Whether a config value is of an annotated type (int, float, bool, str, list[...], X | None), as YAML gives
    values: a bool is no number, and an int is a float."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return any(fits_type(value, a) for a in args)
    if kind is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(fits_type(v, args[0]) for v in value)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def round_up(size: int, multiple: int | None) -> int:
    """``size`` rounded up to a multiple of ``multiple`` (None or 1: unchanged), as HF's pad_to_multiple_of (the
    vocabulary's rows, the MLM head's prediction slots)."""
    if multiple is None or multiple <= 1:
        return size
    return -(-size // multiple) * multiple
