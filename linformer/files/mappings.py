"""Readers of the YAML and JSON mappings the package writes: a missing or damaged file reads as {} and why (a warning,
once), for readers that may go on without a record."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)


def parse_mapping(path: str | Path, json_file: bool | None = None) -> tuple[dict, str | None]:
    """The mapping in a YAML or JSON file (JSON by a .json name) and why it is not one: ({}, None) when the file is
    missing, ({}, why) when it is unparsable, not text, empty or another kind of value (the parser's message on one
    line). Readers that may go on without a record log the why (``read_yaml``/``read_json``); a run's own record
    refuses it (``rundir.RunRecord``)."""
    path = Path(path)
    if not path.is_file():
        return {}, None
    json_file = path.suffix == ".json" if json_file is None else json_file
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if json_file else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as e:
        return {}, " ".join(str(e).split())
    if not isinstance(data, dict):
        return {}, "it is empty" if data is None else f"it holds a {type(data).__name__}, not a mapping"
    return data, None


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """A warning about a damaged file, once per process: a report reads a run's files more than once in a pass, and
    the live dashboard every few seconds, and the same line again says nothing new."""
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def read_mapping(path: str | Path, json_file: bool | None = None) -> dict:
    """The mapping in a YAML or JSON file (JSON by a .json name, as ``parse_mapping``); {} when it is missing, or
    unparsable or not a mapping (a warning, once)."""
    data, why = parse_mapping(path, json_file)
    if why:
        warn_once(f"{path}: {why}")
    return data


def read_yaml(path: str | Path) -> dict:
    return read_mapping(path, json_file=False)


def read_json(path: str | Path) -> dict:
    return read_mapping(path, json_file=True)


def flatten(d: Mapping, prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> {'a.b': value}."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out
