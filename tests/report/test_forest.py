"""Table 2's forest plot: each row's difference from the teacher (or full attention) with its interval, drawn from a
report's JSON by scripts/table2.py --render, its cells marked as the table marks them."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from linformer.errors import ConfigError
from linformer.report import forest, table2

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"
sys.path.insert(0, str(REPO / "scripts"))
from table2 import main  # noqa: E402  (the script's command line, in this process)


def _kept(monkeypatch) -> list:
    figs, save = [], forest.save_figure

    def keep(fig, path):
        figs.append(fig)
        return save(fig, path)

    monkeypatch.setattr(forest, "save_figure", keep)
    return figs


def _vs(diff, seeds, teacher_seeds):
    return {"diff": diff, "lo": diff - 1, "hi": diff + 1, "p": 0.01, "seeds": seeds, "teacher_seeds": teacher_seeds}


def _pretrained_report():
    teacher = {"name": "full attention (teacher)", "tasks": {"sst2": {"acc": 90.0}, "imdb": {"acc": 88.0}}}
    three = {"name": "linformer k=128, layerwise, resample + transfer",
             "tasks": {"sst2": {"vs_teacher": _vs(-0.5, [0, 1, 2], 3)}, "imdb": {"vs_teacher": _vs(-2.0, [0, 1, 2], 3)}}}
    one = {"name": "linformer k=64, layerwise, resample + transfer",
           "tasks": {"imdb": {"vs_teacher": _vs(-4.0, [0], 3)}}}
    return {"rows": [teacher, three, one]}


def test_a_forest_plot_draws_each_row_s_difference_and_interval_per_task_marked_as_the_table(tmp_path, monkeypatch):
    figs = _kept(monkeypatch)
    forest.plot(forest.pretrained_cells(_pretrained_report()), str(tmp_path / "f.png"), "a title", "the teacher")
    fig = figs[0]
    sst2, imdb = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["SST-2", "IMDB"]
    # a row per Linformer row, named once, the same on both panels; the teacher is the zero line
    assert [t.get_text() for t in sst2.get_yticklabels()] == ["k=128", "k=64"]
    assert all(any(list(line.get_xdata()) == [0, 0] for line in ax.lines) for ax in fig.axes)
    points = {line.get_label(): (line.get_xdata()[0], line.get_ydata()[0]) for line in imdb.lines
              if not line.get_label().startswith("_")}
    assert points == {"k=128": (-2.0, 1), "k=64": (-4.0, 0)}
    # the interval as a bar, dashed for one seed pair, as the table's note says, written under its row
    bars = [c for c in imdb.collections if len(c.get_segments()) == 1 and c.get_segments()[0][0][1] ==
            c.get_segments()[0][1][1]]
    spans = sorted((tuple(c.get_segments()[0][:, 0]), c.get_linestyle()[0][1] is not None) for c in bars)
    assert spans == [((-5.0, -3.0), True), ((-3.0, -1.0), False)]
    assert [t.get_text() for t in imdb.texts] == ["teacher seed 0 only;\none seed pair: examples only, no seed variance, no p"]
    # the row not run on SST-2 says so; nothing drawn at 0 for it
    assert [t.get_text() for t in sst2.texts] == ["no run"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("dashed bar (one seed pair)") for t in legend)
    assert fig.get_suptitle() == "a title"


def test_a_paper_table_s_cells_are_differences_from_full_attention_at_their_n_marked_with_skipped_updates():
    rows = [{"name": "full", "attention": "full", "n": 128, "pretrained": True, "sst2": 80.0, "imdb": 70.0},
            {"name": "lin", "attention": "linformer", "n": 128, "pretrained": True, "sst2": 78.5, "imdb": None,
             "skipped_updates": {"sst2": 3}},
            {"name": "other n", "attention": "linformer", "n": 256, "pretrained": True, "sst2": 70.0, "imdb": 70.0}]
    cells = forest.paper_cells({"hardware": "x", "rows": rows}, table2._subset_mark)
    assert cells == {"sst2": {"lin": {"diff": -1.5, "lo": None, "hi": None, "one_seed": False,
                                      "note": "3 updates skipped"}},
                     "imdb": {"lin": None}}


@pytest.mark.parametrize("name", ["table2_pretrained_gpu", "table2_pretrained_cpu12k"])
def test_render_writes_a_pretrained_report_again_from_its_json_alone_with_its_forest_plot(tmp_path, name):
    """The committed report is what --render writes from its JSON: the same table, and the forest plot linked."""
    shutil.copy(RESULTS / f"{name}.json", tmp_path / f"{name}.json")
    assert main(["--render", str(tmp_path / f"{name}.json"), "--overwrite"]) == 0  # a copy: no record of it
    assert (tmp_path / f"{name}.md").read_text() == (RESULTS / f"{name}.md").read_text()
    assert f"`{name}_forest.png`" in (tmp_path / f"{name}.md").read_text()
    assert (tmp_path / f"{name}_forest.png").stat().st_size > 0 and (tmp_path / f"{name}_by_length.png").exists()
    written, committed = (json.loads((p / f"{name}.json").read_text()) for p in (tmp_path, RESULTS))
    for data in (written, committed):  # where it was drawn: a path of its checkout
        data["meta"].pop("forest_png"), data["meta"].pop("by_length_png")
    assert written == committed


def test_render_draws_a_paper_report_s_forest_plot_and_refuses_a_json_of_no_table2_report(tmp_path, capsys):
    shutil.copy(RESULTS / "table2_mini.json", tmp_path / "t.json")
    assert main(["--render", str(tmp_path / "t.json")]) == 0  # only its figure: the JSON is not written
    assert sorted(p.name for p in tmp_path.iterdir()) == [".linformer-outputs.json", "t.json", "t_forest.png"]
    (tmp_path / "x.json").write_text('{"results": {}}')
    with pytest.raises(ConfigError, match="not the JSON of a pretrained or paper layout table2 report"):
        table2.render(str(tmp_path / "x.json"))
    with pytest.raises(SystemExit):
        main(["--render", str(tmp_path / "t.json"), "runs/*"])
    assert "give no runs with it" in capsys.readouterr().err
