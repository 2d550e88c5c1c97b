"""Markdown tables, every report's: a cell's "|" and control characters escaped."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # control characters (Unicode's Cc): line breaks, tabs, escapes


def table_cell(cell: Any) -> str:
    """A cell as a Markdown table holds it: its "|" escaped and its control characters written as Python writes
    them (a line break as \\n): a run name or setting holding either would split the row."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], str(cell)).replace("|", "\\|")


def table_row(cells: Iterable[Any]) -> str:
    """One row of a Markdown table, each cell as ``table_cell`` writes it."""
    return "| " + " | ".join(map(table_cell, cells)) + " |"


def table_lines(header: Sequence[Any], rows: Iterable[Iterable[Any]] = ()) -> list[str]:
    """The lines of a Markdown table: `header`, its rule, then `rows` (``table_row``: every report's tables)."""
    return [table_row(header), "|" + "---|" * len(header), *map(table_row, rows)]
