"""benchmark.py --render: an inference report (.md, .png) written again from its CSV and the report beside it, nothing
measured (linformer/bench/rendered.py through report.measured.render_main)."""

from dataclasses import asdict
from pathlib import Path

import pytest

from linformer.bench import rendered
from linformer.bench.inference import InferenceSettings
from linformer.bench.report import write_csv
from linformer.errors import ConfigError
from linformer.files.atomic import record_output_files
from linformer.files.mappings import read_json
from linformer.files.outputs import FILE_RECORDS, made_by
from linformer.report import measured

SETTINGS = InferenceSettings(ns=[1024, 4096], ks=[128], layers=2, hidden=64, heads=2, ffn=128, baselines=["full"],
                             local_window=16, global_positions=[0, -1])
ROWS = [{"n": n, "k": 128, "batch_size": 1, "layers": 2, "hidden": 64, "heads": 2, "ffn": 128, "sharing": "layerwise",
         "dtype": "fp32", "time_linformer_s": t / 3, "time_full_s": t, "mem_linformer_mib": 10.0, "mem_full_mib": 9.0,
         "flop_ratio": 1.5, "speedup_vs_full": 3.0, "mem_saved_vs_full": 0.9, "paper_time_saved": p,
         "paper_mem_saved": 3.0} for n, t, p in ((1024, 0.42, 1.7), (4096, 3.5, 3.4))]
OLD_REPORT = """# Table 3 reproduction: Linformer inference efficiency

Machine: AMD EPYC (2 cores, 1 torch threads, 24 GiB), device `cpu`; torch 2.13.0+cpu, transformers 5.24.0, Python 3.11.7.
Model: base width (64 hidden, 2 heads, FFN 128), 2 layers, batch 1, fp32; Linformer with `sharing=layerwise`.
Timing: 1 warm-up, then 2 interleaved rounds, median.

Command:

```bash
python scripts/benchmark.py device=cpu out_dir=x name=t
```

## Against the paper-era standard Transformer (eager n x n softmax)

| n | k = 128 |
|---|---|
| 1024 | **- / -** *(1.7x / 3.0x)* |

## Forward time and peak memory per model

| n | ours | linformer |
|---|---|---|

## Notes (written after the run)

**Load.** Nothing else ran.
"""


def _old_run(folder, report: str = OLD_REPORT, record: bool = True):
    write_csv(ROWS, folder / "t.csv")
    (folder / "t.md").write_text(report)
    if record:
        record_output_files([folder / "t.csv", folder / "t.md"],
                            made_by("benchmark", {"inference": asdict(SETTINGS), "throughput": None}))
    return folder / "t.csv"


def test_an_inference_report_is_written_again_from_its_csv_without_the_sections_todays_code_leaves_out(
        tmp_path, monkeypatch):
    """inference_* and table3_* could only be written by measuring: an old report kept a section of '- / -' for an
    eager baseline that was not run, and 'base width' for a 384-wide model."""
    titles = []
    monkeypatch.setattr(rendered, "plot_times", lambda rows, path, title, *a: titles.append(title))
    csv = _old_run(tmp_path)
    before = read_json(tmp_path / FILE_RECORDS)
    assert measured.render_main(["--render", str(csv)], "scripts/benchmark.py", "benchmark",
                                (".md", ".png", ".csv"), rendered.render_inference) == 0
    md = (tmp_path / "t.md").read_text()
    assert "paper-era" not in md and "base width" not in md
    assert "Model: 64 hidden, 2 heads, FFN 128, 2 layers, batch 1, fp32" in md
    assert "exact local keys of w = 16 tokens" in md  # today's words from the recorded settings
    assert "Machine: AMD EPYC (2 cores, 1 torch threads, 24 GiB)" in md and "device=cpu out_dir=x name=t" in md
    assert "| 1024 | 1 | 420 ms, 9 MiB | 140 ms, 10 MiB |" in md and "| 4096 | **3.0x / 0.9x** *(1.5x)* |" in md
    assert md.rstrip().endswith("## Notes (written after the run)\n\n**Load.** Nothing else ran.")
    assert titles == ["Forward time, 2 layers x 64 wide, batch 1, fp32 (AMD EPYC, 1 thread)"]
    assert read_json(tmp_path / FILE_RECORDS) == before  # still the measurement's record: replaced in place


def test_a_render_says_what_its_records_do_not_hold(tmp_path, monkeypatch):
    titles = []
    monkeypatch.setattr(rendered, "plot_times", lambda rows, path, title, *a: titles.append(title))
    report = OLD_REPORT.replace("Machine: AMD EPYC (2 cores, 1 torch threads, 24 GiB), device `cpu`", "Machine: ?")
    csv = _old_run(tmp_path, report, record=False)
    rendered.render_inference(str(csv), str(tmp_path / "new"))  # settings: its recorded command, composed today
    assert titles[0].endswith("(machine not recorded, threads not recorded)")
    assert (tmp_path / "new.csv").read_text() == csv.read_text()  # the report elsewhere: its CSV beside it
    (tmp_path / "t.md").write_text("# Something else\n")
    with pytest.raises(ConfigError, match="is not the inference report of its CSV"):
        rendered.render_inference(str(csv), str(tmp_path / "new"))


def test_a_csv_row_reads_back_as_written(tmp_path):
    from linformer.bench.report import read_csv

    row = {"n": 512, "k": 128, "ok": True, "time_s": 0.0771705, "eager": None, "label": "x"}
    write_csv([row], tmp_path / "r.csv")
    assert read_csv(tmp_path / "r.csv") == [row]


def test_a_largest_batch_ratio_says_when_its_batches_are_at_the_search_limit():
    """A batch at the search's limit only says the model fits at least that many: the Linformer's at the limit over
    a measured batch is a lower bound, over full attention's also at the limit it is limit over limit, neither a
    bound nor a measurement, and the cell says so instead of printing 1.0x."""
    from linformer.bench.report import inference_sections

    def row(n, lin, full, eager):
        return {**ROWS[0], "n": n, "time_eager_s": 1.0, "max_batch_limit": 64, "max_batch_linformer": lin,
                "max_batch_full": full, "max_batch_eager": eager, "max_batch_ratio_vs_full": lin / full,
                "max_batch_ratio_vs_eager": lin / eager}

    rows = [row(1024, 64, 64, 16), row(2048, 40, 20, 64), row(4096, 32, 16, 8)]
    md = "\n".join(inference_sections(rows, SETTINGS, {}))
    assert "| 1024 | **>=4.0x** / both at the limit *(3.0x)*, batch >=64 |" in md
    assert "| 2048 | **<=0.6x** / 2.0x *(3.0x)*, batch 40 |" in md
    assert "| 4096 | **4.0x** / 2.0x *(3.0x)*, batch 32 |" in md
    assert "neither a bound nor a measurement" in md


RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


@pytest.mark.parametrize("name", ["table3_cpu", "table3_gpu"])
def test_a_table3_grid_is_drawn_against_the_paper_and_its_report_names_the_figure(tmp_path, monkeypatch, name):
    """Table 3's report compared with the paper cell by cell in a table only: no figure drew measured against the
    paper's speed-up and memory saved."""
    import shutil

    from linformer.bench import report
    from linformer.bench.inference import InferenceSettings
    from linformer.bench.paper import PAPER_MEMORY_SAVED, PAPER_TIME_SAVED

    figs, save = [], report.save_figure
    monkeypatch.setattr(report, "save_figure", lambda fig, path, dpi=None: (figs.append(fig), save(fig, path, dpi))[1])
    for suffix in (".csv", ".md"):
        shutil.copy(RESULTS / f"{name}{suffix}", tmp_path / f"{name}{suffix}")
    rendered.render_inference(str(tmp_path / f"{name}.csv"), str(tmp_path / name))
    assert (tmp_path / f"{name}.md").read_text() == (RESULTS / f"{name}.md").read_text()
    assert f"`{name}_paper.png`" in (tmp_path / f"{name}.md").read_text()
    rows = report.read_csv(RESULTS / f"{name}.csv")
    time, memory = next(f for f in figs if len(f.axes) == 2).axes
    for ax, column, paper in ((time, "speedup_vs_full", PAPER_TIME_SAVED), (memory, "mem_saved_vs_full",
                                                                            PAPER_MEMORY_SAVED)):
        lines = {line.get_label(): line for line in ax.lines}
        measured = [r for r in rows if r["k"] == 128]
        drawn = lines["k = 128, measured vs our full attention (SDPA)"]
        assert list(drawn.get_xdata()) == [r["n"] for r in measured]
        assert list(drawn.get_ydata()) == [r[column] for r in measured]
        assert list(lines["k = 128, paper"].get_ydata()) == [paper[r["n"]][0] for r in measured]
        assert lines["k = 128, paper"].get_markerfacecolor() == "white"
        assert all(t.get_text().endswith("x") for t in ax.get_yticklabels() if t.get_text())
    # two lengths are read from their table: no figure
    plain = InferenceSettings()
    assert report.paper_grid(rows, plain) and not report.paper_grid([r for r in rows if r["n"] in (512, 2048)], plain)


@pytest.mark.parametrize("words", [["-cn", "benchmark_table3_gpu", "out_dir=x"],
                                   ["out_dir=x", "--config-name=benchmark_table3_gpu"]])
def test_a_recorded_command_s_config_flags_are_read_as_hydra_reads_them(words):
    """The recorded command's config was read with a parser of its own: a leading `--config-name NAME` alone, so
    -cn, --config-name=NAME or the flag after an override composed benchmark.yaml with the flag as an override (a
    ConfigError). Hydra's parser reads them all."""
    from linformer.configs import compose

    cfg = compose("benchmark_table3_gpu", ["out_dir=x"])
    assert rendered._composed(words) == rendered._composed(["--config-name", "benchmark_table3_gpu", "out_dir=x"])
    assert rendered._composed(words).max_n == cfg.inference.max_n
