"""A comparison's tables (``compare_runs``'): written whole as Markdown in runs.md (``markdown``), and fitted to a
terminal where printed (``terminal_text``): a sweep of hundreds of runs gave rows of 300 characters and more, which a
terminal wraps into noise.

A table that fits the width is printed as runs.md holds it. One that does not leaves out the settings that are the
same in every row (named once under it), shortens long values (``shortened``), aligns its columns, and, where it is
still too wide, leaves out columns from its right; a note under it names what was left out.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from ..files.tables import table_cell, table_lines

# The longest a value of a setting (a path, a list) and a row's label (the first column) are printed, in characters:
# longer ones keep their start and end around "..." (paths tell apart at their end, names at their start)
VALUE_CHARS = 24
LABEL_CHARS = 40
MORE = "..."


@dataclass
class Grid:
    """One table of a comparison: its header and rows of cells, written as Markdown in runs.md (``markdown``) and
    fitted to a terminal's width where printed (``fitted``); `settings`, the indexes of the columns that hold a run's
    settings (a printed table leaves out those that are the same in every row, and shortens long values)."""

    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    settings: frozenset[int] = frozenset()


# A comparison's text as blocks: paragraphs, headings and notes as written, and its tables
Blocks = list["str | Grid"]


def markdown(blocks: Blocks) -> str:
    """The blocks as runs.md holds them: each Grid a Markdown table (``table_lines``)."""
    return "".join(b if isinstance(b, str) else "\n".join(table_lines(b.header, b.rows)) for b in blocks)


def shortened(text: str, limit: int) -> str:
    """`text`, or where longer than `limit` characters, its start and end around MORE, `limit` long in all."""
    if len(text) <= limit:
        return text
    end = (limit - len(MORE)) // 2
    return text[:limit - len(MORE) - end] + MORE + text[len(text) - end:]


def terminal_text(blocks: Blocks, width: int | None) -> str:
    """The blocks for a terminal `width` characters wide (None or 0: no limit, the blocks as runs.md holds them):
    each table fitted (``fitted``), each paragraph wrapped at `width` (a table's note is one line of runs.md)."""
    if not width:
        return markdown(blocks)
    out = []
    for block in blocks:
        if isinstance(block, Grid):
            out.append(fitted(block, width))
        else:
            out.append("\n".join(textwrap.fill(line, width, break_on_hyphens=False, break_long_words=False)
                                 if len(line) > width else line for line in block.split("\n")))
    return "".join(out)


def fitted(grid: Grid, width: int) -> str:
    """`grid` as Markdown no line of which is wider than `width` where it can be: as runs.md holds it where it fits;
    else without its settings columns that hold one value in every row, its long values shortened (VALUE_CHARS, the
    first column LABEL_CHARS), its columns aligned, and columns left out from its right (never the first) until it
    fits; then a note, wrapped at `width`, of what it leaves out and where to read it whole."""
    lines = table_lines(grid.header, grid.rows)
    if max(map(len, lines)) <= width:
        return "\n".join(lines)
    columns = list(range(len(grid.header)))
    same = [c for c in columns if c in grid.settings and len({row[c] for row in grid.rows}) == 1]
    columns = [c for c in columns if c not in same]
    limit = {c: LABEL_CHARS if c == 0 else VALUE_CHARS for c in columns if c == 0 or c in grid.settings}
    cells = [[table_cell(grid.header[c]) for c in columns]]
    cells += [[shortened(table_cell(row[c]), limit[c]) if c in limit else table_cell(row[c]) for c in columns]
              for row in grid.rows]
    cut = any(len(table_cell(row[c])) > limit[c] for row in grid.rows for c in limit)
    sizes = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    kept = len(columns)
    while kept > 1 and sum(sizes[:kept]) + 3 * kept + 1 > width:
        kept -= 1
    out = ["| " + " | ".join(text.ljust(size) for text, size in zip(line[:kept], sizes)) + " |" for line in cells]
    out.insert(1, "|" + "|".join("-" * (size + 2) for size in sizes[:kept]) + "|")
    notes = []
    if same:
        notes.append("The same in every row: " + ", ".join(f"{grid.header[c]} {grid.rows[0][c] or '(unset)'}"
                                                            for c in same) + ".")
    if cut:
        notes.append(f"Values past {VALUE_CHARS} characters (the first column's past {LABEL_CHARS}) are shortened "
                     f'around "{MORE}".')
    if kept < len(columns):
        notes.append(f"Left out to fit {width} characters: {', '.join(grid.header[c] for c in columns[kept:])}.")
    note = " ".join(notes) + " runs.md has the table whole."
    return "\n".join(out) + "\n\n" + textwrap.fill(note, width, break_on_hyphens=False, break_long_words=False)
