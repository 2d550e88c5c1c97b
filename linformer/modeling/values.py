"""Small rules on configuration values that every layer shares: whether a value is of an annotated type as YAML
gives it (and that type in the user's words), the ceiling division and rounding a size up to a multiple, the
attention and sharing modes and the converted models' defaults. The scripts' parsers and the run records' readers
read them too: this module imports nothing but its sibling errors module, and ``linformer.errors`` loads it without the
modeling package's torch."""

from __future__ import annotations

import dataclasses
import types
import typing

from .errors import ConfigError


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


def type_words(kind) -> str:
    """An annotated type (as ``fits_type`` reads it) in the user's words, for "key=value must be <words>": "true or
    false", "a whole number", "a number", "text", "a list, each entry <words>", "<words> or null"."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        words = [type_words(a) for a in args if a is not type(None)]
        return " or ".join(words + (["null"] if type(None) in args else []))
    if origin is list:
        return f"a list, each entry {type_words(args[0])}" if args else "a list"
    named = {bool: "true or false", int: "a whole number", float: "a number", str: "text", type(None): "null"}
    return named.get(kind, getattr(kind, "__name__", str(kind)))


def ceil_div(size, parts):
    """ceil(size / parts) for a whole ``size`` (of any sign) and a positive whole ``parts``, in a form every tracer
    keeps: traced, ``-(-size // parts)`` (a floor division of a negative number) is neither folded to a constant nor
    rounded down by the TorchScript ONNX exporter, which rounds it towards zero, one short. ``size`` may be a traced
    length (a 0-dim tensor or a SymInt)."""
    return (size + parts - 1) // parts


def round_up(size: int, multiple: int | None) -> int:
    """``size`` rounded up to a multiple of ``multiple`` (None or 1: unchanged), as HF's pad_to_multiple_of (the
    vocabulary's rows, the MLM head's prediction slots)."""
    if multiple is None or multiple <= 1:
        return size
    return ceil_div(size, multiple) * multiple


@dataclasses.dataclass(frozen=True)
class AttentionMode:
    """What an attention mode computes: every module that builds, counts, names or reports attention asks this (through
    ``projects_keys``), never a mode's name, so that a mode added here means one thing everywhere."""

    projects_keys: bool  # keys and values projected to k rows (E and F, with a k, a sharing and a projection)


# the values config.attention takes
ATTENTION_MODES = {
    "linformer": AttentionMode(projects_keys=True),
    "full": AttentionMode(projects_keys=False),  # every key attended: no k, sharing or projection
}


def projects_keys(attention: str | None) -> bool:
    """Whether attention mode `attention` projects keys and values to k rows (the Linformer's E and F); None, a plain
    encoder's config or a record that names no mode, is full attention. An unknown mode is refused here, for every
    caller in one message: ConfigError naming the key and the modes."""
    if attention is None:
        return False
    if attention not in ATTENTION_MODES:
        raise ConfigError(f"attention={attention!r} is not one of {', '.join(ATTENTION_MODES)}.")
    return ATTENTION_MODES[attention].projects_keys


@dataclasses.dataclass(frozen=True)
class Sharing:
    """What a sharing mode shares (the paper's section 4): every place that builds or counts E and F reads these,
    so a mode is defined here once, and one missing here is a KeyError, not another mode's behaviour."""

    per_head: bool      # one E (and F) per head
    separate_f: bool    # F is a matrix apart from E
    across_layers: bool  # one E for every layer (the encoder owns it)


# the values config.sharing takes: a mode added here is taken, built and counted everywhere
SHARING = {
    "none": Sharing(per_head=True, separate_f=True, across_layers=False),
    "headwise": Sharing(per_head=False, separate_f=True, across_layers=False),
    "kv": Sharing(per_head=False, separate_f=False, across_layers=False),
    "layerwise": Sharing(per_head=False, separate_f=False, across_layers=True),
}


# How converted models project inputs shorter than n, unless told otherwise: the policy that keeps converted MiniLM
# closest to its source before training, on SST-2 and IMDB train text (docs/results/length_policy_train.md; the dev
# and test text of length_policy.md agree). The source never saw a compressed input:
# short ones attend exactly, longer ones use all k columns.
CONVERTED_LENGTH_POLICY = {"length_policy": "resample", "mask_empty_windows": False, "exact_short_inputs": True}


# Exact local and global keys beside the projected ones that converted Linformers get unless told otherwise. Of the
# windows measured (32, 64, 128, with the first and last real token global), 128 kept converted MiniLM closest to its
# source at k = 64 and 128 on IMDB train reviews of every length (docs/results/length_policy_local_train.md: chosen
# on train text, never on the test reviews Table 2 reports; length_policy_local.md shows the same order on those).
# The window is at most n.
CONVERTED_EXACT_KEYS = {"local_window": 128, "global_positions": [0, -1]}
NO_EXACT_KEYS = {"local_window": 0, "global_positions": []}  # the paper's Linformer: projected keys alone
# With them, a projected column all of whose tokens the exact keys already hold is masked for that query (a column
# they hold only part of stays: its tokens inside the window count twice, as a global token does in the first and
# last columns): it lowers converted MiniLM's embedding error on IMDB train reviews at both windows measured, before
# any training (docs/results/length_policy_overlap_train.md).
# Lowering the counts of the columns they hold in part as well (overlap_columns="reduce") measured no clearly
# better there (under 0.01 lower at both windows, the bar for the more complex rule): the simpler mask stays.
# Part of the converted default wherever the model has exact keys.
CONVERTED_OVERLAP = {"overlap_columns": "mask"}
