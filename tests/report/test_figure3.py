"""Figure 3 from pretraining runs: ratios to full attention, the 5% target at k >= 128, same-budget check."""

import json
from pathlib import Path

import pytest

from linformer.errors import DataError
from linformer.report.figure3 import figure3, figure3_data, figure3_lines
from linformer.rundir import Run
from linformer.train.pretrain import pretrain

from ..train.conftest import compose_pretrain, tiny_data  # noqa: F401  (fixture)


def _run(attention: str, k: int | None, final_ppl: float, steps: int = 100, tokens: int = 51200,
         unigram_ppl: float | None = None) -> Run:
    model = {"attention": attention, "projected_dim": k, "sharing": "headwise", "max_seq_len": 512, "name": "base"}
    rows = [{"step": 0, "val_ppl": 900.0}, {"step": 50, "val_ppl": 2 * final_ppl},
            {"step": steps, "val_ppl": final_ppl}]
    results = {"steps": steps, "tokens": tokens}
    if unigram_ppl is not None:
        results["unigram_val_ppl"] = unigram_ppl
    return Run(path=Path(f"/runs/{attention}-{k}"), name=f"{attention}-{k}", stage="pretrain", config={"model": model},
               results=results, rows=rows)


def test_ratios_and_the_target_judge_only_k_of_at_least_128():
    data = figure3_data([_run("linformer", 64, 30.0), _run("full", None, 20.0), _run("linformer", 128, 20.9),
                         _run("linformer", 256, 20.5)])
    assert [r["label"] for r in data["runs"]] == ["full attention", "Linformer k=64 (headwise)",
                                                  "Linformer k=128 (headwise)", "Linformer k=256 (headwise)"]
    assert [round(r["ppl_ratio_vs_full"], 3) for r in data["runs"]] == [1.0, 1.5, 1.045, 1.025]
    assert data["target_met"]  # 4.5% and 2.5% above full attention
    assert data["judged"] == ["Linformer k=128 (headwise)", "Linformer k=256 (headwise)"]  # k = 64 is not judged
    assert data["runs"][1]["curve"] == {"step": [0, 50, 100], "val_ppl": [900.0, 60.0, 30.0]}
    missed = figure3_data([_run("full", None, 20.0), _run("linformer", 128, 21.2)])  # 6% above full
    assert not missed["target_met"]
    assert not figure3_data([_run("full", None, 20.0), _run("linformer", 64, 20.0)])["target_met"]  # nothing judged


def test_runs_still_on_the_unigram_plateau_are_not_judged():
    """Runs that predict little more than token frequencies agree whatever their attention: no verdict."""
    plateau = figure3_data([_run("full", None, 2117.0, unigram_ppl=2150.0), _run("linformer", 128, 2117.0)])
    assert plateau["target_met"] is None and "2,117.0" in plateau["not_judged"] and "2,150.0" in plateau["not_judged"]
    assert "not judged" in figure3_lines(plateau)[-1]
    learned = figure3_data([_run("full", None, 20.0, unigram_ppl=2150.0), _run("linformer", 128, 20.5)])
    assert learned["target_met"] and "not_judged" not in learned and figure3_lines(learned)[-1].endswith("met")


def test_runs_of_other_budgets_or_without_one_full_run_are_refused():
    with pytest.raises(DataError, match="same steps, tokens and n"):
        figure3_data([_run("full", None, 20.0), _run("linformer", 128, 20.0, steps=200, tokens=102400)])
    with pytest.raises(DataError, match="exactly one full-attention run"):
        figure3_data([_run("linformer", 128, 20.0), _run("linformer", 256, 20.0)])


def test_figure3_from_real_runs_writes_json_and_png(tiny_data, tmp_path):  # noqa: F811
    runs = []
    for name, attention in (("full", "full"), ("k8", "linformer")):
        run = tmp_path / name
        pretrain(compose_pretrain(tiny_data, "trainer.max_steps=4", "trainer.eval_every=2",
                                  f"model.attention={attention}", f"run_name={name}"), run)
        runs.append(run)
    out = tmp_path / "fig" / "figure3"
    data = figure3([str(r) for r in runs], out)
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["runs"][0]["label"] == "full attention" and saved["runs"][1]["k"] == 8
    assert saved["runs"][1]["curve"]["step"] == [0, 2, 4] and data["reference_val_ppl"] == saved["reference_val_ppl"]
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert saved["unigram_val_ppl"] > 1  # the full-attention run's reference, drawn in the plot
