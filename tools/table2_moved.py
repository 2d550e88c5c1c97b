"""Every figure of a pretrained-layout Table 2 that moved between two of its JSON reports (before and after a change),
as markdown lines: per row and task, the accuracy, the difference from the teacher and its p-value. Rows pair by
name, each report's retired row labels read as today's (report.rows.relabelled), so a renamed row is not "gone".

Usage: python tools/table2_moved.py OLD.json NEW.json
"""

from __future__ import annotations

import sys


def _diff(cell: dict | None) -> tuple[float | None, float | None]:
    v = (cell or {}).get("vs_teacher") or {}
    p = v.get("p")
    if p is None and v.get("mcnemar_p"):  # reports before the seed-matched pairing: one p per seed
        p = min(v["mcnemar_p"].values())
    return v.get("diff"), p


def moved(old: dict, new: dict) -> list[str]:
    from linformer.report.rows import relabelled

    old, new = relabelled(old), relabelled(new)
    before = {r["name"]: r for r in old["rows"]}
    lines = []
    for row in new["rows"]:
        was = before.pop(row["name"], None)
        for task, cell in row["tasks"].items():
            prev = (was or {}).get("tasks", {}).get(task)
            if prev is None:
                lines.append(f"- {row['name']}, {task}: new cell, {cell['acc']:.2f}")
                continue
            (d0, p0), (d1, p1) = _diff(prev), _diff(cell)
            parts = []
            if abs(prev["acc"] - cell["acc"]) > 1e-9:
                parts.append(f"accuracy {prev['acc']:.2f} -> {cell['acc']:.2f} ({cell['acc'] - prev['acc']:+.2f}; "
                             f"{prev['examples']} -> {cell['examples']} examples)")
            if d1 is not None and (d0 is None or abs(d0 - d1) > 1e-9):
                parts.append(f"vs teacher {d0:+.2f} -> {d1:+.2f} ({d1 - d0:+.2f})" if d0 is not None else f"vs teacher {d1:+.2f}")
            if p1 is not None and p0 is not None and f"{p0:.2g}" != f"{p1:.2g}":
                parts.append(f"p {p0:.2g} -> {p1:.2g}")
            if parts:
                lines.append(f"- {row['name']}, {task}: " + "; ".join(parts))
        for task in set((was or {}).get("tasks", {})) - set(row["tasks"]):
            lines.append(f"- {row['name']}, {task}: cell gone (its runs left out)")
    lines += [f"- {name}: row gone" for name in before]
    return lines


def main(argv: list[str] | None = None) -> int:
    from pathlib import Path

    from linformer.cli import ArgumentParser, cli_errors
    from linformer.files.mappings import read_json
    from linformer.script_help import description

    ap = ArgumentParser(description=description(__doc__, __file__, paragraph=True))
    ap.add_argument("old", type=Path, help="the report before the change (a table2 --layout pretrained .json)")
    ap.add_argument("new", type=Path, help="the report after it")
    args = ap.parse_args(argv)
    with cli_errors():
        reports = []
        for path in (args.old, args.new):
            if not path.is_file():
                raise FileNotFoundError(f"{path}: no such report")
            reports.append(read_json(path))
        print("\n".join(moved(*reports)) or "nothing moved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
