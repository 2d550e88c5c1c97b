"""What a reader of a figure needs: every legend entry and title whole on the page, a readable form for one length
bucket, non-finite values said, not dropped."""

import json
import math

import pytest

from linformer import plots
from linformer.report import by_length, compare, length_policy
from linformer.report.compare import compare_runs
from linformer.report.rows import relabelled

LONG = "linformer k=128, layerwise, resample, exact <= k, window 128, global [0, -1], landmarks + transfer"


def _captured(monkeypatch, module) -> list:
    """Figures `module` saves, checked as drawn (plots.fits) before they are closed."""
    seen = []
    save = module.save_figure

    def spy(fig, path, *args, **kw):
        seen.append({"outside": plots.fits(fig), "fig": fig,
                     "legend": [t.get_text() for lg in fig.legends for t in lg.get_texts()]})
        return save(fig, path, *args, **kw)

    monkeypatch.setattr(module, "save_figure", spy)
    return seen


def test_a_legend_of_long_labels_and_a_long_title_stay_on_the_page():
    fig, axes = plots.figure(size=(6.0, 4.0))
    labels = [f"{LONG} {i}" for i in range(6)] + ["x" * 20 + " " + " ".join(["y"] * 90)]  # wider than the figure
    for label in labels:
        axes[0][0].plot([0, 1], [0, 1], label=label)
    plots.title(axes[0][0], "Cumulative singular values of P: " + "a long free-text description " * 6)
    legend = plots.legend_below(fig)
    assert plots.fits(fig) == []
    assert legend.get_window_extent(fig.canvas.get_renderer()).width <= fig.bbox.width
    assert [t.get_text().replace("\n", " ") for t in legend.get_texts()] == labels
    plots.pyplot().close(fig)


def _by_length_result(names: list[str]) -> dict:
    diff = {"diff": -1.0, "lo": -2.0, "hi": 0.0, "seeds": 3}
    return {"buckets": ["1-160", "161-221", "222-352", "353-512"], "examples": [510, 491, 496, 495],
            "teacher_acc": [90.0] * 4, "rows": {name: [diff] * 4 for name in names}}


def test_by_length_legend_fits_and_names_rows_by_what_differs(tmp_path, monkeypatch):
    """The legend ran off both edges of a one-task figure (fixed 4 columns, never measured): rows had no name."""
    seen = _captured(monkeypatch, by_length)
    names = [f"linformer k={k}, layerwise, {p} + transfer" for k in (64, 128)
             for p in ("paper's slice", "resample, exact <= k", "resample, exact <= k, window 128, global [0, -1]")]
    by_length.plot({"imdb": _by_length_result(names)}, {"imdb": "IMDB"}, str(tmp_path / "bl.png"))
    (figure,) = seen
    assert figure["outside"] == []
    assert figure["legend"] == sorted(n.removeprefix("linformer ").removesuffix(" + transfer") for n in names)
    assert figure["fig"].legends[0].get_title().get_text() == "every row: ... + transfer"


def _policy_row(buckets: dict, dtype: str = "fp32") -> dict:
    cells = {b: {"examples": n, "mean": v} for b, (n, v) in buckets.items()}
    return {"dtype": dtype, "embedding": cells, "hidden": cells, "mean_embedding": 0.5, "mean_hidden": 0.5}


def test_one_bucket_length_policy_draws_a_dot_per_row_and_a_bf16_twin_apart(tmp_path, monkeypatch):
    """Every row in one bucket drew one column of dots, a bf16 row exactly over its fp32 twin."""
    seen = _captured(monkeypatch, length_policy)
    rows = {}
    for window in (64, 128):
        for mask in ("", ", covered columns masked"):
            for dtype in ("fp32", "bf16"):
                label = f"resample, exact <= k, window {window}, global [0, -1]{mask}"
                rows[label if dtype == "fp32" else f"{label}, bf16"] = _policy_row({"257-512": (128, 0.289)}, dtype)
    length_policy.plot({"imdb": {"k=128": rows}}, str(tmp_path / "lp.png"))
    (figure,) = seen
    assert figure["outside"] == []
    ax = figure["fig"].axes[0]
    marks = [line for line in ax.get_lines() if len(line.get_xdata()) == 1]
    assert len(marks) == len(rows)  # one mark per row, each on its own line of the chart
    assert len({float(line.get_ydata()[0]) for line in marks}) == len(rows)
    assert {line.get_markerfacecolor() for line in marks[1::2]} == {"white"}  # the bf16 rows: hollow
    assert [t.get_text() for t in ax.texts] == ["0.289"] * len(rows)  # each value written beside its dot


def test_length_policy_lines_show_bucket_counts_and_hollow_small_buckets(tmp_path, monkeypatch):
    seen = _captured(monkeypatch, length_policy)
    buckets = {"33-64": (1, 0.8), "65-128": (7, 0.9), "129-256": (34, 0.85)}
    rows = {f"policy {i}": _policy_row(buckets) for i in range(12)}
    length_policy.plot({"imdb": {"k=64": rows}}, str(tmp_path / "lp.png"))
    (figure,) = seen
    ax = figure["fig"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["33-64\n(1 ex.)", "65-128\n(7 ex.)",
                                                               "129-256\n(34 ex.)"]  # n is a length elsewhere
    assert figure["outside"] == []
    assert figure["legend"][-1] == f"hollow: a bucket of fewer than {plots.MIN_EXAMPLES} examples"
    colours = [line.get_color() for line in ax.get_lines() if len(line.get_xdata()) == 3]
    assert len({str(c) for c in colours}) == 12  # twelve policies, no colour twice


def test_non_finite_values_are_said_in_table_and_plot(tmp_path, make_run, monkeypatch):
    """A loss of inf left a silent gap in the plot and nothing in the table; a run without the metric vanished
    from the legend."""
    seen = _captured(monkeypatch, compare)
    make_run(tmp_path / "out", "pretrain", "bad", [{"step": s, "time": s, "loss": math.inf if s == 3 else 5.0 - s,
                                                    "val_ppl": 9.0} for s in range(1, 6)])
    make_run(tmp_path / "out", "pretrain", "good", [{"step": s, "time": s, "loss": 4.0 - s / 2} for s in range(1, 6)])
    compare_runs([tmp_path / "out"], tmp_path / "cmp", ["loss", "val_ppl"], ["loss", "val_ppl"],
                 command="python scripts/compare_runs.py out")
    table = (tmp_path / "cmp" / "runs.md").read_text()
    assert table.startswith("Command: `python scripts/compare_runs.py out`")
    assert "; 1 non-finite |" in table and "`N non-finite`: values logged as inf or NaN" in table
    loss, ppl = seen
    assert "a non-finite value (1), drawn at the top edge" in loss["legend"]
    assert "no val_ppl logged: good" in ppl["legend"]
    assert json.loads((tmp_path / "cmp" / ".linformer-outputs.json").read_text())["runs.md"]["command_line"] == \
        "python scripts/compare_runs.py out"


def test_mfu_is_drawn_in_percent_as_the_table_prints_it(tmp_path, make_run, monkeypatch):
    seen = _captured(monkeypatch, compare)
    make_run(tmp_path / "out", "pretrain", "r", [{"step": s, "time": s, "mfu": 0.331} for s in (1, 2, 3)])
    compare_runs([tmp_path / "out"], tmp_path / "cmp", ["mfu"], ["mfu"])
    ax = seen[0]["fig"].axes[0]
    # (step 1, the compilation and warm-up, is left out of the line)
    assert ax.get_ylabel() == "MFU (%)" and list(ax.get_lines()[0].get_ydata()) == pytest.approx([33.1, 33.1])


def test_a_retired_label_gets_todays_name_and_numbers_stay():
    old = {"best": "window 128, global [0, -1], no double count",
           "results": {"imdb": {"window 128, no double count, bf16": {"mean": 0.289}}}}
    assert relabelled(old) == {"best": "window 128, global [0, -1], covered columns masked",
                               "results": {"imdb": {"window 128, covered columns masked, bf16": {"mean": 0.289}}}}


def test_benchmark_plot_draws_the_reference_dtype_and_names_the_exact_keys(tmp_path, monkeypatch):
    """The bf16 figures drew only bf16 lines, though their headline compares the Linformer in bf16 with full
    attention in fp32; the Linformer's label left out its local window."""
    from linformer.bench import report

    seen = _captured(monkeypatch, report)
    rows = [{"n": n, "k": 128, "batch_size": 1, "dtype": "bf16", "reference_dtype": "fp32",
             "time_full_s": n / 1000, "time_linformer_s": n / 4000, "time_full_ref_s": n / 900,
             "time_linformer_ref_s": n / 2000} for n in (4096, 16384)]
    report.plot_times(rows, tmp_path / "t.png", "Forward time (AMD EPYC, 2 threads)", 128, [0, -1])
    (figure,) = seen
    assert figure["legend"] == ["ours, full attention, bf16", "ours, full attention, fp32",
                                "Linformer, k = 128, window 128, global: first token and last token, bf16",
                                "Linformer, k = 128, window 128, global: first token and last token, fp32"]
    full = figure["fig"].axes[0].get_lines()[0]
    assert full.get_linestyle() == "--"  # full attention dashed, as in every figure


def test_a_length_policy_report_is_rendered_again_with_todays_labels(tmp_path):
    """An earlier report's JSON (no header kept) rendered beside its .md: the header is kept, the retired label
    renamed, the numbers the same."""
    old = "resample, exact <= k, window 128, global [0, -1], no double count"
    results = {"imdb": {"k=128": {old: _policy_row({"257-512": (128, 0.289)})}}}
    out = tmp_path / "lp"
    length_policy.write_report(results, str(out), ["Source: `minilm`.", "Command: `python x`"], {"command": "x"})
    record = json.loads(out.with_suffix(".json").read_text())
    del record["header"]
    length_policy.render(record, str(out))
    md, again = out.with_suffix(".md").read_text(), json.loads(out.with_suffix(".json").read_text())
    assert "no double count" not in md and "Source: `minilm`.\nCommand: `python x`" in md
    new = old.replace(", no double count", ", covered columns masked")
    assert again["header"] == ["Source: `minilm`.", "Command: `python x`"] and again["best"] == new
    assert again["results"]["imdb"]["k=128"][new] == results["imdb"]["k=128"][old]


def test_the_table_gives_mfu_in_percent_as_its_steady_column_does(tmp_path, make_run):
    make_run(tmp_path / "out", "pretrain", "r", [{"step": 1, "time": 1, "mfu": 0.3365}, {"step": 2, "time": 2,
                                                                                        "mfu": 0.3379}])
    compare_runs([tmp_path / "out"], tmp_path / "cmp", ["mfu"], ["mfu"])
    assert "| 33.8% (best) |" in (tmp_path / "cmp" / "runs.md").read_text()


def test_by_length_draws_no_bar_where_the_table_gives_no_interval(tmp_path, monkeypatch):
    """A bucket under MIN_INTERVAL_EXAMPLES examples, which the table leaves without an interval, had its error bar
    drawn like any other: its point is hollow, without a bar, and the legend says why."""
    from linformer.report.paired import MIN_INTERVAL_EXAMPLES

    seen = _captured(monkeypatch, by_length)
    result = _by_length_result(["linformer k=64 + transfer", "linformer k=128 + transfer"])
    result["examples"] = [MIN_INTERVAL_EXAMPLES - 1, 491, 2, 495]
    by_length.plot({"imdb": result}, {"imdb": "IMDB"}, str(tmp_path / "bl.png"))
    (figure,) = seen
    assert figure["outside"] == []
    ax = figure["fig"].axes[0]
    bars = [seg for c in ax.collections for seg in c.get_segments()]
    assert len(bars) == 2 * 2  # two rows x the two judged buckets
    assert sorted({round(float(seg[0][0])) for seg in bars}) == [1, 3]
    hollow = [line for line in ax.get_lines() if line.get_markerfacecolor() == "white"]
    assert sorted(round(float(x)) for line in hollow for x in line.get_xdata()) == [0, 0, 2, 2]
    assert any("no interval" in text for text in figure["legend"])


def test_the_mfu_plot_draws_the_target_where_a_run_is_the_base_model_at_512(tmp_path, make_run, monkeypatch):
    """The MFU figure of the base model's runs left out the target that its notes judge them by: the trainer's
    (its runs are the trainer's own, not the benchmark step's)."""
    from linformer.bench.throughput import TRAINER_TARGET_MFU

    seen = _captured(monkeypatch, compare)
    base = {"name": "base", "attention": "full", "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "intermediate_size": 3072, "max_seq_len": 512}
    rows = [{"step": s, "time": s, "mfu": 0.331} for s in (1, 2)]
    make_run(tmp_path / "base", "pretrain", "full", rows, model=base)
    make_run(tmp_path / "tiny", "pretrain", "tiny", rows)
    compare_runs([tmp_path / "base"], tmp_path / "cmp", ["mfu"], ["mfu"])
    compare_runs([tmp_path / "tiny"], tmp_path / "cmp_tiny", ["mfu"], ["mfu"])
    with_base, tiny = (fig["fig"].axes[0] for fig in seen)
    target = [line for line in with_base.get_lines() if list(line.get_ydata()) == [100 * TRAINER_TARGET_MFU] * 2]
    assert len(target) == 1 and target[0].get_label() == "trainer target, base model at n = 512 (45%)"
    assert any("target" in text for text in seen[0]["legend"])
    assert not any("target" in line.get_label() for line in tiny.get_lines())  # the target judges no other model


def test_a_fidelity_report_is_rendered_again_from_its_json_with_layers_from_one(tmp_path, capsys):
    """Fidelity reports could only be written by measuring: a JSON of older code (layers numbered 0-5, no machine
    or block count recorded) is written again with today's tables, its numbers kept, and what it lacks said."""
    import json

    from ..conftest import load_script

    errors = {"converted": {"16": [0.2, 0.4, 0.6], "512": [0.19, 0.35, 0.7]}}
    command = "python scripts/fidelity.py 'converted=m' --corpus c --self-reference --out x"
    (tmp_path / "old.json").write_text(json.dumps({"command": command, "errors": errors}))
    script = load_script("fidelity")
    assert script.main(["--render", str(tmp_path / "old.json"), "--out", str(tmp_path / "new")]) == 0
    md = (tmp_path / "new.md").read_text()
    assert "| tokens | layer 1 | layer 2 | layer 3 |" in md and "| 512 | 0.190 | 0.350 | 0.700 |" in md
    assert "Machine: not recorded." in md and "(how many: not recorded)" in md
    assert "the same weights with full attention" in md and f"Command: `{command}`" in md
    assert json.loads((tmp_path / "new.json").read_text())["errors"] == errors
    assert (tmp_path / "new.png").is_file()
    with pytest.raises(SystemExit):  # a measurement still needs its models, corpus and reference
        script.main(["--out", str(tmp_path / "m")])
    assert "the following arguments are required: models" in capsys.readouterr().err


def test_a_fidelity_figure_draws_every_layer_of_every_model(tmp_path, monkeypatch):
    """The figure drew the last layer alone, while the tables give every layer: a panel per model, a line per layer,
    labelled as the tables number them, everything on the page."""
    from linformer.report import fidelity

    seen = _captured(monkeypatch, fidelity)
    errors = {f"model {m}": {16: [0.2 + m, 0.4, 0.6], 512: [0.19, 0.35 + m, 0.7]} for m in range(4)}
    fidelity.plot(errors, tmp_path / "f.png")
    (figure,) = seen
    panels = [ax for ax in figure["fig"].axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == list(errors)
    for ax, rows in zip(panels, errors.values()):
        assert [line.get_label() for line in ax.get_lines()] == ["layer 1", "layer 2", "layer 3"]
        assert [list(line.get_ydata()) for line in ax.get_lines()] == [list(e) for e in zip(*rows.values())]
    assert figure["legend"] == ["layer 1", "layer 2", "layer 3"] and figure["outside"] == []


def test_every_row_has_a_colour_and_marker_pair_of_its_own_and_the_colours_are_colour_blind_safe():
    """Rows were told apart by tab10 hues alone, several of which look alike to a deuteranope and in greyscale."""
    assert plots.colours(8) == list(plots.OKABE_ITO)
    for n in (3, 8, 12, 30):
        pairs = {(str(c), m) for c, m in zip(plots.colours(n), plots.markers(n))}
        assert len(pairs) == n
    assert len(set(plots.markers(len(plots.MARKERS)))) == len(plots.MARKERS)


def test_a_policy_at_two_k_shares_its_colour_and_marker_and_differs_by_line_style(tmp_path, monkeypatch):
    names = [f"linformer k={k}, layerwise, {p} + transfer" for k in (64, 128) for p in ("resample", "window 128")]
    colour, marker, line = by_length.row_styles(names)
    for p in ("resample", "window 128"):
        at64, at128 = (f"linformer k={k}, layerwise, {p} + transfer" for k in (64, 128))
        assert (colour[at64], marker[at64]) == (colour[at128], marker[at128])
        assert line[at64] != line[at128] and line[at128] == "-"  # the larger k solid
    assert len({(str(colour[n]), marker[n], line[n]) for n in names}) == len(names)
    seen = _captured(monkeypatch, by_length)
    by_length.plot({"sst2": _by_length_result(names)}, {"sst2": "SST-2"}, str(tmp_path / "bl.png"))
    drawn = [h for h in seen[0]["fig"].axes[0].get_lines() if len(h.get_xdata()) == 4 and h.get_marker() != "_"]
    assert len({(str(h.get_color()), h.get_marker(), h.get_linestyle()) for h in drawn}) == len(drawn) == len(names)


def test_a_one_seed_row_s_dashed_bars_are_no_row_s_line_style_and_its_legend_entry_reads_whole(tmp_path,
                                                                                                 monkeypatch):
    """k=64 rows were drawn dashed, as the bars of a row of one seed pair were, and the legend's key for those bars,
    a grey dashed line, was a k=64 row's glyph; its label read "dashed bar, (one seed pair)"."""
    from matplotlib.colors import to_rgba
    from matplotlib.lines import Line2D

    names = [f"linformer k={k}, layerwise, {p} + transfer" for k in (32, 64, 128, 256) for p in ("resample", "window")]
    _, _, line = by_length.row_styles(names)
    assert "--" not in set(line.values()) and len(set(line.values())) == 4  # dashed: the bars of one seed pair
    result = _by_length_result(names)
    result["rows"]["linformer k=64, layerwise, resample + transfer"] = [
        {"diff": -1.0, "lo": -2.0, "hi": 0.0, "seeds": 1}] * 4
    seen = _captured(monkeypatch, by_length)
    by_length.plot({"sst2": result}, {"sst2": "SST-2"}, str(tmp_path / "bl.png"))
    fig = seen[0]["fig"]
    # a line's dash pattern as drawn (get_linestyle calls any custom pattern "--")
    dashes = Line2D([], [], linestyle="--")._unscaled_dash_pattern
    drawn = [h._unscaled_dash_pattern for h in fig.axes[0].get_lines()
             if len(h.get_xdata()) == 4 and h.get_marker() != "_"]  # the rows, not the bars' caps
    keys = [h._unscaled_dash_pattern for h in fig.legends[0].legend_handles if isinstance(h, Line2D)]
    assert len(drawn) == len(names) and dashes not in drawn
    assert keys.count(dashes) == 1  # the one dashed glyph: the one-seed bars' key
    one_seed = [c for c in fig.axes[0].collections if c.get_linestyle()[0][1] is not None]
    assert len(one_seed) == 1 and one_seed[0].get_color()[0].tolist() == list(to_rgba(
        by_length.row_styles(names)[0]["linformer k=64, layerwise, resample + transfer"]))
    assert "dashed bar (one seed pair): no seed variance, an interval over examples only" in seen[0]["legend"]


def test_length_policy_rows_of_equal_values_stay_side_by_side_never_one_under_another(tmp_path, monkeypatch):
    """Policies exact at 0 below k, or agreeing to three decimals, were drawn at the same points: the last hid the
    others, and the legend named rows that no reader could find."""
    seen = _captured(monkeypatch, length_policy)
    buckets = {"1-16": (197, 0.0), "17-32": (467, 0.0), "33-64": (208, 0.0)}
    rows = {f"policy {i}, exact <= k": _policy_row(buckets) for i in range(3)}
    length_policy.plot({"sst2": {"k=64": rows}}, str(tmp_path / "lp.png"))
    ax = seen[0]["fig"].axes[0]
    points = [(float(line.get_xdata()[0]), float(line.get_ydata()[0]), line.get_marker())
              for line in ax.get_lines() if len(line.get_xdata()) == 1]
    first = [p for p in points if p[0] < 0.5]
    assert len(first) == 3 and len({x for x, _, _ in first}) == 3 and len({m for _, _, m in first}) == 3


def test_fidelity_and_spectrum_draw_a_layer_in_the_same_colour_light_to_dark_none_fading_on_white(tmp_path,
                                                                                                 monkeypatch):
    """Fidelity drew layer 1 light and layer 6 dark, the spectrum the reverse, its layer 6 pale yellow on white."""
    import torch
    from matplotlib.colors import to_rgb

    from linformer.report import fidelity, spectrum

    seen = _captured(monkeypatch, fidelity)
    fidelity.plot({"m": {16: [0.1 * i for i in range(6)], 32: [0.2] * 6}}, tmp_path / "f.png")
    monkeypatch.setattr(spectrum, "save_figure", lambda fig, path: seen.append({"fig": fig}) or path)
    spectrum.plot_curves(torch.rand(6, 2, 16).cumsum(-1) / 16, tmp_path / "s.png", "t")
    fid = [to_rgb(line.get_color()) for line in seen[0]["fig"].axes[0].get_lines()]
    spec = [to_rgb(line.get_color()) for line in seen[1]["fig"].axes[0].get_lines() if line.get_linewidth() == 2]
    assert fid == spec and len(fid) == 6

    def luminance(rgb):
        return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]

    shades = [luminance(c) for c in fid]
    assert shades == sorted(shades, reverse=True) and shades[0] < 0.75  # layer 1 lightest, still off white
    assert len({line.get_marker() for line in seen[0]["fig"].axes[0].get_lines()}) == 6


def test_a_one_bucket_title_counts_examples_not_n_and_names_the_source_and_machine(tmp_path, monkeypatch):
    """"257-512 tokens (n=128)" beside "k=128" read as a sequence length of 128; no title named the machine."""
    seen = _captured(monkeypatch, length_policy)
    header = ["Source: `minilm`, converted at n = 512; reference: full.", "Machine: AMD EPYC, torch threads: 2."]
    length_policy.plot({"imdb": {"k=128": {"slice": _policy_row({"257-512": (128, 0.3)})}}}, str(tmp_path / "a.png"),
                       header)
    assert seen[0]["fig"].axes[0].get_title().replace("\n", " ") == "imdb, k=128: 257-512 tokens (128 examples)"
    title = seen[0]["fig"].get_suptitle().replace("\n", " ")
    assert "minilm, converted at n = 512" in title and title.endswith("machine: AMD EPYC")
    length_policy.plot({"imdb": {"k=128": {"slice": _policy_row({"257-512": (128, 0.3)})}}}, str(tmp_path / "b.png"))
    assert seen[1]["fig"].get_suptitle().replace("\n", " ").endswith("machine not recorded")


def test_by_length_marks_rows_of_one_seed_pair_and_its_title_names_the_teacher_profile_and_machine(tmp_path,
                                                                                                    monkeypatch):
    """Rows the table marks "(one seed pair: no seed variance)" were drawn like three-seed rows; three profiles'
    figures had the same title."""
    from linformer.report.table2_pretrained import by_length_title

    seen = _captured(monkeypatch, by_length)
    result = _by_length_result(["linformer k=64, resample", "linformer k=128, resample"])
    result["rows"]["linformer k=64, resample"] = [{**d, "seeds": 1} for d in result["rows"]["linformer k=64, resample"]]
    meta = {"source": "minilm (all-MiniLM-L6-v2, BertModel 6 x 384)", "run_devices": "NVIDIA H200 (3 runs)",
            "command": "make reproduce-pretrained ARGS='--profile gpu'"}
    by_length.plot({"sst2": result}, {"sst2": "SST-2"}, str(tmp_path / "bl.png"), by_length_title(meta))
    fig = seen[0]["fig"]
    dashed = [c.lines[2][0].get_linestyle()[0][1] is not None for c in fig.axes[0].containers]
    assert dashed == [True, False]  # in the rows' order: k=64 (one seed pair), then k=128
    assert "k=64 (one seed pair)" in seen[0]["legend"] and "k=128" in seen[0]["legend"]
    assert any("no seed variance" in label for label in seen[0]["legend"])
    title = fig.get_suptitle().replace("\n", " ")
    assert "minilm teacher, profile gpu" in title and "runs made on: NVIDIA H200 (3 runs)" in title
    assert seen[0]["outside"] == []


def test_figure3_title_says_the_plateau_is_not_judged_where_the_context_free_perplexity_is_unknown(tmp_path,
                                                                                                   monkeypatch):
    from linformer.report import figure3 as fig3

    from .test_figure3 import _run

    runs = {str(r.path): r for r in (_run("full", None, 2117.0, context_free_ppl=None),
                                     _run("linformer", 128, 2118.0, context_free_ppl=None))}
    titles = []
    monkeypatch.setattr(fig3, "named_paths", lambda paths: paths)
    monkeypatch.setattr(fig3, "find_runs", lambda paths, strict: paths)
    monkeypatch.setattr(fig3, "load_run", lambda path, rows, strict: runs[path])
    monkeypatch.setattr(fig3, "plot_pretrain_curves", lambda curves, png, title, **kw: titles.append(title))
    fig3.figure3(list(runs), tmp_path / "f")
    assert "a model that reads no context is unknown" in titles[0] and "not judged" in titles[0]


def test_benchmark_plot_says_its_log_axes_and_gives_each_k_a_marker_and_its_title_the_reference_lines(tmp_path,
                                                                                                       monkeypatch):
    """Table 3's figures drew log axes unsaid, every k with the marker "x" in neighbouring shades, and a bf16
    title over lines half of which were fp32."""
    from linformer.bench import report
    from linformer.bench.inference import InferenceSettings
    from linformer.bench.runner import inference_title

    seen = _captured(monkeypatch, report)
    rows = [{"n": n, "k": k, "batch_size": 1, "time_full_s": n / 1000, "time_linformer_s": n / (4000 + k)}
            for n in (512, 1024) for k in (128, 256)]
    report.plot_times(rows, tmp_path / "t.png", "t")
    ax = seen[0]["fig"].axes[0]
    assert ax.get_xlabel().endswith("log scale)") and ax.get_ylabel().endswith("log scale)")
    linformers = [line for line in ax.get_lines() if line.get_label().startswith("Linformer")]
    assert len({line.get_marker() for line in linformers}) == 2
    title = inference_title(InferenceSettings(dtype="bf16", reference_dtype="fp32"), {"cpu": "AMD EPYC"})
    assert "bf16, dotted lines fp32" in title


def test_fidelity_run_is_the_script_s_whole_measurement(tmp_path, monkeypatch):
    """scripts/fidelity.py resolved the models, measured, said a short corpus's line and wrote the report itself;
    fidelity.run is that measurement as one call (a move: run is new), the corpus kept as given in what it passes
    on to the report's line, the models by their labels."""
    from linformer.report import fidelity

    got = {}

    def measure(models, corpus_dir, lengths, blocks, source, source_name=None):
        got.update(models=models, lengths=lengths, source=source, source_name=source_name)
        return {label: {16: [0.1, 0.2], 32: [0.2, 0.3]} for label in models}, 2

    monkeypatch.setattr(fidelity, "measure", measure)
    monkeypatch.setattr("linformer.modeling.loading.resolve_model_path", lambda path, flag: f"/resolved/{path}")
    said = []
    fidelity.run(["k8=dir/a", "dir/b"], "corpus", [32, 16], 16, None, str(tmp_path / "f"), say=said.append)
    assert got == {"models": {"k8": "/resolved/dir/a", "dir/b": "/resolved/dir/b"}, "lengths": [16, 32], "source": None,
                   "source_name": None}
    assert said == ["--blocks 16: corpus holds 2 validation blocks; measured on those"]
    assert fidelity.SELF_REFERENCE in (tmp_path / "f.md").read_text() and (tmp_path / "f.json").is_file()


def _table3_rows(ks=(128, 256), flagged_at=None) -> list[dict]:
    """A plain Linformer's Table 3 grid at three n (the paper's values at each): the memory saved against eager
    attention the same at every k, as a CPU's peak-memory measure gives it; the speed-up its FLOP ratio, but at
    `flagged_at` (n, k): 10x there, over 2x its FLOP ratio."""
    from linformer.bench.paper import PAPER_MEMORY_SAVED, PAPER_TIME_SAVED, paper_value

    rows = []
    for n in (1024, 2048, 4096):
        for k in ks:
            speedup = 10.0 if (n, k) == flagged_at else 1.0 + n / (8 * k)
            rows.append({"n": n, "k": k, "batch_size": 1, "flop_ratio": 1.0 + n / (8 * k), "speedup_vs_full": speedup,
                         "speedup_vs_eager": 2 * speedup, "mem_saved_vs_full": 1.0 + k / 1024,
                         "mem_saved_vs_eager": n / 512, "time_full_s": n / 1000, "time_eager_s": n / 500,
                         "time_linformer_s": n / 1000 / speedup,
                         "paper_time_saved": paper_value(PAPER_TIME_SAVED, n, k),
                         "paper_mem_saved": paper_value(PAPER_MEMORY_SAVED, n, k)})
    return rows


def test_benchmark_figures_ring_the_cells_the_report_warns_of_and_say_why(tmp_path, monkeypatch):
    """A speed-up the .md warns of (more than 2x its FLOP ratio: a loaded machine) was drawn as a normal point, 5x
    above the paper's line: both figures ring it, and the legend says why."""
    from linformer.bench import report
    from linformer.bench.inference import beyond_flops_warnings

    seen = _captured(monkeypatch, report)
    rows = _table3_rows(flagged_at=(2048, 128))
    assert [w.split(": ")[1] for w in beyond_flops_warnings(rows, {})] == ["n=2048, k=128"]  # what the .md warns of
    report.plot_paper(rows, tmp_path / "p.png", "t")
    report.plot_times(rows, tmp_path / "t.png", "t")
    paper, times = seen
    for figure, panel, y in ((paper, 0, 10.0), (times, 0, 2.048 / 10)):
        rings = [line for line in figure["fig"].axes[panel].get_lines() if line.get_label().startswith("ringed")]
        assert len(rings) == 1 and rings[0].get_markerfacecolor() == "none"
        assert list(rings[0].get_xdata()) == [2048] and list(rings[0].get_ydata()) == pytest.approx([y])
        assert any(text.startswith("ringed") and "2x its FLOP ratio" in text for text in figure["legend"])
        assert figure["outside"] == []
    assert not any(line.get_label().startswith("ringed") for line in paper["fig"].axes[1].get_lines())
    report.plot_paper(_table3_rows(), tmp_path / "p2.png", "t")  # nothing warned of: no ring, no legend line
    assert not any(text.startswith("ringed") for text in seen[-1]["legend"])


def test_lines_drawn_one_over_another_are_said_in_the_legend(tmp_path, monkeypatch):
    """The memory saved against eager attention is the same at every k: five lines coincided and only the last
    showed, so k = 128's looked missing."""
    from linformer.bench import report

    fig, axes = plots.figure()
    ax = axes[0][0]
    ax.plot([1, 2, 4], [1.0, 2.0, 4.0], label="a")
    ax.plot([2, 4, 8], [2.01, 4.0, 8.0], label="b")  # 0.5% apart where they meet: one line
    ax.plot([4, 8], [4.0, 9.0], label="c")  # one shared x only
    ax.plot([1, 2], [1.0, 2.2], label="d")  # 10% apart
    assert [[line.get_label() for line in g] for g in plots.coinciding(ax)] == [["a", "b"]]
    plots.pyplot().close(fig)
    seen = _captured(monkeypatch, report)
    report.plot_paper(_table3_rows(ks=(128, 256, 512)), tmp_path / "p.png", "t")
    (figure,) = seen
    notes = figure["fig"].legends[0].get_title().get_text().replace("\n", " ")
    assert "memory saved: k = 128, 256 and 512, measured vs eager attention: equal within 2%" in notes
    assert "speed-up" not in notes and "vs our full attention" not in notes and figure["outside"] == []


def test_the_paper_overlay_is_drawn_for_the_paper_s_model_only_and_its_title_names_both_models(tmp_path):
    """inference_peers_cpu_t1_paper.png drew a Linformer with exact local and global keys as "k = 128" against the
    paper's plain Linformer, its memory at 0.8-0.96x beside the paper's 3-56x, and no title said they differ."""
    from linformer.bench.inference import InferenceSettings
    from linformer.bench.report import inference_sections, paper_grid
    from linformer.bench.runner import paper_title

    rows = _table3_rows()
    plain = InferenceSettings(layers=2, hidden=768, heads=12, ffn=3072)
    assert paper_grid(rows, plain) and not paper_grid(rows[:4], plain)  # two n: read from the table
    for variant in ({"local_window": 128, "global_positions": [0, -1]}, {"global_positions": [0]},
                    {"landmark_pooling": True}):
        s = InferenceSettings(**variant)
        assert not paper_grid(rows, s)
        assert "no target for it" in "\n".join(inference_sections(rows, s, {}))
    assert "no target" not in "\n".join(inference_sections(rows, plain, {}))
    title = paper_title(plain, {"cpu": "AMD EPYC", "torch_threads": 1})
    assert "Linformer (plain, sharing=layerwise), 2 layers x 768 wide, 12 heads, FFN 3072, batch 1, fp32" in title
    assert "AMD EPYC, 1 thread)" in title
    assert "the paper measured its plain Linformer at the base shape (12 layers x 768 wide) on a V100, not this" in title
    base = paper_title(InferenceSettings(layers=12, hidden=768, heads=12, ffn=3072, dtype="bf16"), {}, partial=True)
    assert "not this shape" not in base and "bf16" in base and "partial: the run was stopped" in base


def test_a_rendered_variant_report_loses_its_paper_figure_and_its_line(tmp_path, capsys):
    """A report of a Linformer with exact keys rendered again: no figure against the paper, and the one an earlier
    code drew is not left beside a report that no longer names it, nor named among the files written."""
    from linformer.bench.inference import InferenceSettings
    from linformer.bench.rendered import render_inference
    from linformer.bench.report import inference_markdown, write_csv
    from linformer.report import measured

    s = InferenceSettings(ns=[1024, 2048, 4096], ks=[128], local_window=128, global_positions=[0, -1])
    rows = [dict(r, layers=s.layers, hidden=s.hidden, heads=s.heads, ffn=s.ffn, sharing=s.sharing, dtype=s.dtype)
            for r in _table3_rows(ks=(128,))]
    out = tmp_path / "peers"
    write_csv(rows, f"{out}.csv")
    machine = {"device": "cpu", "cpu": "AMD EPYC"}
    cmd = "python scripts/benchmark.py inference.local_window=128 'inference.global_positions=[0,-1]'"
    (tmp_path / "peers.md").write_text(inference_markdown(rows, {"settings": s, "machine": machine, "elapsed_s": 1},
                                                          cmd, "peers_paper.png"))
    (tmp_path / "peers_paper.png").write_bytes(b"an earlier render's figure")
    assert measured.render_main(["--render", f"{out}.csv", "--overwrite"], "scripts/benchmark.py", "benchmark",
                                (".md", ".png", ".csv", "_paper.png"), render_inference) == 0
    assert not (tmp_path / "peers_paper.png").exists() and (tmp_path / "peers.png").is_file()
    assert "_paper.png" not in (tmp_path / "peers.md").read_text()
    assert capsys.readouterr().out.strip() == f"wrote {out}: .md, .png, .csv"


def _deficient(colour: str, kind: str) -> list[float]:
    """`colour` in CIELAB as a dichromat sees it (Machado et al. 2009, severity 1, on linear RGB)."""
    import numpy as np
    from matplotlib.colors import to_rgb

    m = {"deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                          [-0.011820, 0.042940, 0.968881]],
         "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                        [-0.003882, -0.048116, 1.051998]]}[kind]
    c = np.asarray(to_rgb(colour))
    linear = np.clip(np.asarray(m) @ np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4), 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    f = np.cbrt(xyz / np.array([0.95047, 1.0, 1.08883]))
    return [116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])]


def test_benchmark_time_figure_draws_every_model_in_the_colour_blind_safe_palette(tmp_path, monkeypatch):
    """ModernBERT (tab:red) and Longformer (tab:orange) came out two olive-yellows to a deuteranope; only their
    markers told them apart. A landmark-pooled Linformer was named as the plain one."""
    import math

    from linformer.bench import report
    from linformer.bench.inference import BASELINES

    seen = _captured(monkeypatch, report)
    rows = [{"n": n, "k": k, "batch_size": 1, "time_linformer_s": n / (4000 + k),
             **{f"time_{kind}_s": n / (900 + 10 * i) for i, kind in enumerate(BASELINES)}}
            for n in (1024, 4096) for k in (128, 256, 512)]
    report.plot_times(rows, tmp_path / "t.png", "t", 128, [0, -1], True)
    lines = {line.get_label(): line.get_color() for line in seen[0]["fig"].axes[0].get_lines()}
    assert len(lines) == len(BASELINES) + 3 == len(set(lines.values()))
    assert set(lines.values()) <= set(plots.OKABE_ITO)
    assert "Linformer, k = 128, window 128, global: first token and last token, landmark pooling" in lines
    peers = [lines[name] for name in lines if "ModernBERT" in name or "Longformer" in name]
    for kind in ("deuteranopia", "protanopia"):
        assert math.dist(*(_deficient(c, kind) for c in peers)) > 50
