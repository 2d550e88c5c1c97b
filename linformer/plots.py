"""What every figure of the project shares: its start (the file backend, a layout that makes room for titles and
legends), row colours that never repeat, a legend below the panels in as many columns as fit, and titles and labels
wrapped to the width they have, measured as drawn. matplotlib is imported inside the functions: it is slow to import
and only plots need it."""

from __future__ import annotations

LEGEND_ENTRIES = 40  # a legend's entries at most: beyond, the first ones and a last entry "and N more"
FULL_STYLE = "--"  # full attention, the baseline of every comparison, is dashed in every figure; the rest solid
MIN_EXAMPLES = 10  # a length bucket with fewer examples is drawn hollow: one or two inputs make its mean
# Okabe and Ito's colour-blind-safe palette (Color Universal Design), told apart under the three common colour
# vision deficiencies; its yellow last, since a thin yellow line fades on white
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
# a row's marker besides its colour, so that rows are told apart in greyscale and by a reader who sees no hue
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
COINCIDE = 0.02  # lines this close (relative) at every x they share are drawn one over another: about a pixel apart


def pyplot():
    """matplotlib.pyplot on the file backend (no display is needed or used)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(ncols: int = 1, nrows: int = 1, size: tuple[float, float] = (7.0, 4.2), dpi: float = 120, **kw):
    """(fig, axes as a 2-D array) with the constrained layout, which keeps titles, labels and an outside legend on
    the page."""
    return pyplot().subplots(nrows, ncols, figsize=size, dpi=dpi, layout="constrained", squeeze=False, **kw)


def colours(n: int) -> list:
    """n colours, none repeated: the colour-blind-safe OKABE_ITO up to 8 rows; up to 20, tab20's ten hues, then
    their light twins; beyond, a colour map's n even steps. Draw each row with its marker too (``markers``): past 8
    rows hue alone no longer tells them apart."""
    import matplotlib

    if n <= len(OKABE_ITO):
        return list(OKABE_ITO[:n])
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in [*range(0, 20, 2), *range(1, 20, 2)][:n]]
    return [matplotlib.colormaps["turbo"](i / (n - 1)) for i in range(n)]


def markers(n: int) -> list[str]:
    """n markers, the i-th row's MARKERS[i]: with ``colours(n)``, a (colour, marker) pair no two rows share, and
    distinct markers alone up to len(MARKERS) rows."""
    return [MARKERS[i % len(MARKERS)] for i in range(n)]


def layer_colours(layers: int) -> list:
    """A colour per layer on one ramp, light (layer 1) to dark (the last), in every figure that draws layers; the
    lightest step stays well off white."""
    import matplotlib

    ramp = matplotlib.colormaps["viridis"]
    return [ramp(0.8 * (1 - i / max(1, layers - 1))) for i in range(layers)]


def text_width(fig, text: str, fontsize: float) -> float:
    """The width in pixels of `text` drawn at `fontsize` on `fig`."""
    probe = fig.text(0, 0, text, fontsize=fontsize)
    try:
        return probe.get_window_extent(fig.canvas.get_renderer()).width
    finally:
        probe.remove()


def wrapped(fig, text: str, fontsize: float, width: float) -> str:
    """`text` broken at spaces into lines no wider than `width` pixels (a word wider than that alone on its line);
    lines it already has are kept."""
    lines = []
    for given in text.split("\n"):
        line = ""
        for word in given.split(" "):
            longer = f"{line} {word}" if line else word
            if line and text_width(fig, longer, fontsize) > width:
                lines.append(line)
                line = word
            else:
                line = longer
        lines.append(line)
    return "\n".join(lines)


def title(target, text: str, fontsize: float = 10) -> None:
    """`text` as the title of `target` (an Axes, or the figure: its suptitle), wrapped to the target's width."""
    fig = target.figure if hasattr(target, "set_title") else target
    if hasattr(target, "set_title"):
        width = target.get_position().width * fig.get_figwidth() * fig.dpi
        target.set_title(wrapped(fig, text, fontsize, 0.98 * width), fontsize=fontsize)
    else:
        fig.suptitle(wrapped(fig, text, fontsize, 0.96 * fig.get_figwidth() * fig.dpi), fontsize=fontsize)


def legend_below(fig, handles: list | None = None, labels: list[str] | None = None, fontsize: float = 8,
                 more: str = "more", title: str | None = None):
    """The figure's legend below its panels (the constrained layout's "outside"), in as many columns as fit its
    width, measured as drawn (a label's characters alone undercount its handle and spacing); a label wider than the
    figure is wrapped; the figure made taller for the legend's rows. Handles and labels default to those of every
    axes; past LEGEND_ENTRIES entries, the first ones and "and N `more`", so every label shown is whole."""
    from matplotlib.lines import Line2D

    if handles is None:
        handles, labels = [], []
        for ax in fig.axes:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                if label not in labels:
                    handles.append(handle)
                    labels.append(label)
    handles, labels = list(handles), list(labels)
    if not handles:
        return None
    if len(handles) > LEGEND_ENTRIES:
        rest = len(handles) - (LEGEND_ENTRIES - 1)
        handles = [*handles[:LEGEND_ENTRIES - 1], Line2D([], [], linestyle="none")]
        labels = [*labels[:LEGEND_ENTRIES - 1], f"and {rest} {more}"]
    width, height = fig.get_size_inches()
    room = 0.98 * width * fig.dpi  # pixels
    handle = 4 * fontsize * fig.dpi / 72  # a handle and its gap: about 4 font sizes
    labels = [wrapped(fig, label, fontsize, room - handle) for label in labels]
    renderer = fig.canvas.get_renderer()

    def placed(ncol: int):
        return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=fontsize, frameon=False,
                          title=title, title_fontsize=fontsize)

    one = placed(1)  # one column: the widest entry; columns are that wide, 2 font sizes apart
    column = one.get_window_extent(renderer).width + 2 * fontsize * fig.dpi / 72
    one.remove()
    for ncol in range(max(1, min(len(handles), int(room // column) + 1)), 0, -1):
        legend = placed(ncol)
        if ncol == 1 or legend.get_window_extent(renderer).width <= room:
            break
        legend.remove()
    lines = sum(max(label.count("\n") + 1 for label in labels[i:i + ncol]) for i in range(0, len(labels), ncol))
    # the panels give up the room of two lines; the figure grows by the rest, a line 1.5 font sizes high
    titled = 0 if title is None else title.count("\n") + 1  # a title of several lines (notes on the lines drawn)
    fig.set_size_inches(width, height + max(0, lines + titled - 2) * 1.5 * fontsize / 72)
    return legend


def fits(fig) -> list[str]:
    """The texts of `fig` (titles, labels, legends) that reach past its edges, drawn as they would be saved; []
    when everything is on the page."""
    fig.canvas.draw()
    renderer, page = fig.canvas.get_renderer(), fig.bbox
    out = []
    for artist in [*fig.legends, *fig.texts, *(a for ax in fig.axes for a in (ax.title, ax.xaxis.label,
                                                                          ax.yaxis.label, ax.get_legend()) if a)]:
        if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            continue
        box = artist.get_window_extent(renderer)
        if box.x0 < page.x0 - 1 or box.x1 > page.x1 + 1 or box.y0 < page.y0 - 1 or box.y1 > page.y1 + 1:
            out.append(artist.get_text() if hasattr(artist, "get_text") else type(artist).__name__)
    return out


def coinciding(ax, rtol: float = COINCIDE) -> list[list]:
    """Groups of `ax`'s labelled lines drawn one over another, in drawing order: lines that share two x values or
    more and agree within `rtol` (relative) at each (chained: a group holds every line that coincides with one of
    it). A reader sees the last one drawn, so a figure says so rather than leave the others to look missing."""
    lines = [line for line in ax.get_lines() if not str(line.get_label()).startswith("_")
             and line.get_linestyle() not in ("None", "none", "") and len(line.get_xdata()) >= 2]
    points = [dict(zip(map(float, line.get_xdata()), map(float, line.get_ydata()))) for line in lines]

    def same(a: dict, b: dict) -> bool:
        shared = a.keys() & b.keys()
        return len(shared) >= 2 and all(abs(a[x] - b[x]) <= rtol * max(abs(a[x]), abs(b[x])) for x in shared)

    group = list(range(len(lines)))
    for i in range(len(lines)):
        for j in range(i):
            if same(points[i], points[j]):
                old, new = group[i], group[j]
                group = [new if g == old else g for g in group]
    groups = [[line for line, g in zip(lines, group) if g == head] for head in dict.fromkeys(group)]
    return [g for g in groups if len(g) > 1]


def count_ticks(names: list[str], counts: list[int]) -> list[str]:
    """Tick labels "name\\n(count ex.)", a bucket's examples under its name (not "n=": n is the sequence length in
    every figure and in the paper)."""
    return [f"{name}\n({count:,} ex.)" for name, count in zip(names, counts)]


def machine(lines: list[str] | str | None) -> str:
    """"machine: NAME" from a record's "Machine: NAME, ..." line (a report header's lines, or one line), its name up
    to the first comma; "machine not recorded" where there is none, so that a title never leaves it unsaid."""
    for line in [lines] if isinstance(lines, str) else lines or []:
        if "Machine:" in line:
            name = line.split("Machine:", 1)[1].split(",")[0].strip().rstrip(".")
            if name and name != "not recorded":
                return f"machine: {name}"
    return "machine not recorded"


def plain_ticks(axis) -> None:
    """`axis`'s tick labels as plain numbers with thousands separators, and in millions ("1.5M") where the axis
    reaches a million: never matplotlib's offset or "1e6" corner text, which a reader misses and so reads every
    tick a million times too small. For a linear axis (a log axis labels its own decades)."""
    from matplotlib.ticker import FuncFormatter

    def label(value: float, _position) -> str:
        if value == 0:  # zero at any scale, not "0M" (nor "-0" for a tick at -0.0)
            return "0"
        if max(abs(v) for v in axis.get_view_interval()) >= 1e6:
            return f"{value / 1e6:,g}M"
        return f"{value:,g}"

    axis.set_major_formatter(FuncFormatter(label))
