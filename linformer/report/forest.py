"""Table 2's differences as a forest plot: a panel per task, a row per model row of the table, each row's accuracy
minus the reference's (the teacher, or full attention at the same n) as a point with its 95% interval where the
report has one, and a zero line. A cell is marked as its table marks it (seeds paired, one seed pair, updates
skipped), under its row."""

from __future__ import annotations

from .. import plots
from ..data.tasks import PAPER_ORDER, TITLES
from ..files.atomic import save_figure
from ..modeling.values import projects_keys
from .by_length import ONE_SEED, ONE_SEED_BAR, row_styles, short_names
from .paired import comparison_notes


def pretrained_cells(data: dict) -> dict[str, dict[str, dict | None]]:
    """{task: {row name: cell or None}} of a pretrained-layout report's JSON: each Linformer row's "vs teacher"
    (the seed-matched difference, its interval and the table's notes on the seeds it rests on); None where the row
    has no run of the task (the table's "-")."""
    tasks = [t for t in PAPER_ORDER if any(t in r["tasks"] for r in data["rows"])]
    rows = [r for r in data["rows"] if any((c or {}).get("vs_teacher") for c in r["tasks"].values())]
    cells: dict[str, dict[str, dict | None]] = {}
    for task in tasks:
        cells[task] = {}
        for r in rows:
            v = (r["tasks"].get(task) or {}).get("vs_teacher")
            cells[task][r["name"]] = None if not v else {
                "diff": v["diff"], "lo": v["lo"], "hi": v["hi"], "one_seed": len(v["seeds"]) == 1,
                "note": "; ".join(comparison_notes(v, "teacher", v["teacher_seeds"]))}
    return cells


def paper_cells(data: dict, mark) -> dict[str, dict[str, dict | None]]:
    """{task: {row name: cell or None}} of a paper-layout report's JSON: each row's accuracy minus the pretrained
    full-attention row's at the same n, with no interval (the report keeps each cell's mean only); `mark(row,
    task)` the table's mark of the cell (its subsets, its skipped updates). Rows with no such reference are left
    out."""
    base = {r["n"]: r for r in data["rows"] if not projects_keys(r["attention"]) and r["pretrained"]}
    tasks = [t for t in PAPER_ORDER if any(r.get(t) is not None for r in data["rows"])]
    rows = [r for r in data["rows"] if r["n"] in base and r is not base[r["n"]]]
    return {task: {r["name"]: None if r.get(task) is None or base[r["n"]].get(task) is None else {
        "diff": r[task] - base[r["n"]][task], "lo": None, "hi": None, "one_seed": False,
        "note": mark(r, task).strip().strip("[]").replace("] [", "; ")} for r in rows} for task in tasks}


def plot(cells: dict[str, dict[str, dict | None]], path: str, title: str, reference: str) -> None:
    """One panel per task, a row per model row (the same rows in the same order in every panel, named once on the
    left), each cell's difference from `reference` (points) with its 95% interval as a bar; a zero line. A cell of
    one seed pair draws its bar dashed; a cell with no interval a hollow point; a row with no run of the task "no
    run"; a cell's table mark is written under its row. Rows keep by_length's colour and marker."""
    from matplotlib.lines import Line2D

    names = list(dict.fromkeys(name for task in cells.values() for name in task))
    colour, marker, _ = row_styles(names)
    shown, shared = short_names(names)
    fig, axes = plots.figure(len(cells), size=(3.2 + 3.6 * len(cells), 1.6 + 0.62 * len(names)), sharey=True)
    y = {name: len(names) - 1 - i for i, name in enumerate(names)}
    one_seed = hollow = False
    for ax, (task, row_cells) in zip(axes[0], cells.items()):
        for name, cell in row_cells.items():
            if cell is None:
                ax.text(0.5, y[name], "no run", transform=ax.get_yaxis_transform(), ha="center", va="center",
                        fontsize=7, color="grey", bbox={"facecolor": "white", "edgecolor": "none"})
                continue
            interval = cell["lo"] is not None and cell["hi"] is not None
            if interval:
                bars = ax.errorbar(cell["diff"], y[name], xerr=[[cell["diff"] - cell["lo"]], [cell["hi"] - cell["diff"]]],
                                   fmt="none", capsize=3, color=colour[name])
                if cell["one_seed"]:  # as the table's "(one seed pair: no seed variance)"
                    one_seed = True
                    for line in bars.lines[2]:
                        line.set_linestyle(ONE_SEED_BAR)
            hollow |= not interval
            ax.plot(cell["diff"], y[name], marker=marker[name], ms=6, linestyle="none", color=colour[name],
                    markerfacecolor=colour[name] if interval else "white", label=shown[name])
            if cell["note"]:  # mid-panel under the row, a note a line: it stays inside the panel wherever the point
                ax.annotate(cell["note"].replace("; ", ";\n"), (0.5, y[name]), xycoords=ax.get_yaxis_transform(),
                            xytext=(0, -9), textcoords="offset points", ha="center", va="top", fontsize=6.5,
                            color="dimgrey")
        ax.axvline(0, color="black", lw=0.8)
        ax.set_xlabel(f"accuracy minus {reference}'s (points)")
        ax.set_ylim(-0.8, len(names) - 0.4)
        ax.margins(x=0.25)
        ax.grid(axis="x", alpha=0.3)
        plots.title(ax, TITLES.get(task, task))
    axes[0][0].set_yticks([y[n] for n in names], [shown[n] for n in names], fontsize=8)
    plots.title(fig, title)
    keys, labels = [Line2D([], [], color="black", lw=0.8)], [f"0: as good as {reference}"]
    if one_seed:
        keys.append(Line2D([], [], color="grey", linestyle=ONE_SEED_BAR))
        labels.append(f"dashed bar{ONE_SEED}: no seed variance, an interval over examples only")
    if hollow:
        keys.append(Line2D([], [], linestyle="none", marker="o", color="grey", markerfacecolor="white"))
        labels.append("hollow, no bar: no interval in the report")
    plots.legend_below(fig, keys, labels, title=f"every row: {shared}" if shared else None)
    save_figure(fig, path)
