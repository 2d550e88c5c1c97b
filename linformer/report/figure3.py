"""The paper's Figure 3 from pretraining runs: validation perplexity against updates, and each Linformer's final
perplexity against full attention's (target: within 5% for every k >= 128, at the same tokens and steps).

Writes ``<out>.json`` (every run's curve, so the figure survives the run directories) and ``<out>.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..data.unigram import PLATEAU_RATIO, on_unigram_plateau
from ..errors import DataError
from ..files import made_by, output_files, write_json
from ..rundir import Run, find_runs, load_run
from .compare import series
from .curves import plot_pretrain_curves

TARGET_K = 128        # every Linformer with k >= this...
TARGET_RATIO = 1.05   # ...ends within 5% of full attention's validation perplexity


def label_of(run: Run) -> str:
    key = run.key_config
    return "full attention" if key["attention"] == "full" else f"Linformer k={key['k']} ({key['sharing']})"


def figure3_data(runs: list[Run]) -> dict[str, Any]:
    """Curves, final perplexities and the target, from pretraining runs of one n that saw the same tokens."""
    if not runs:
        raise DataError("figure 3 needs pretraining runs; none were given")
    rows = []
    for run in runs:
        steps, ppl = series(run, "val_ppl")
        if not steps:
            raise DataError(f"{run.path} logged no val_ppl: is it a finished pretraining run?")
        key = run.key_config
        rows.append({"label": label_of(run), "run_dir": str(run.path), "attention": key["attention"], "k": key["k"],
                     "sharing": key["sharing"], "n": key["n"], "steps": run.results.get("steps"),
                     "tokens": run.results.get("tokens"), "tokens_per_s": run.results.get("tokens_per_s"),
                     "final_val_ppl": ppl[-1], "curve": {"step": steps, "val_ppl": ppl}})
    budgets = {(r["steps"], r["tokens"], r["n"]) for r in rows}
    if len(budgets) > 1:
        raise DataError("figure 3 compares runs of the same steps, tokens and n; got "
                        + "; ".join(f"{r['label']}: {r['steps']} steps, {r['tokens']} tokens, n={r['n']}" for r in rows))
    full = [r for r in rows if r["attention"] == "full"]
    if len(full) != 1:
        raise DataError(f"figure 3 needs exactly one full-attention run as its reference; got {len(full)}")
    reference = full[0]["final_val_ppl"]
    for r in rows:
        r["ppl_ratio_vs_full"] = r["final_val_ppl"] / reference
    judged = [r for r in rows if r["attention"] != "full" and r["k"] is not None and r["k"] >= TARGET_K]
    unigram = next((r.results.get("unigram_val_ppl") for r in runs if r.key_config["attention"] == "full"), None)
    data = {
        "runs": sorted(rows, key=lambda r: (r["attention"] != "full", r["k"] or 0)),
        "reference_val_ppl": reference,
        "unigram_val_ppl": unigram,
        "target": f"every Linformer with k >= {TARGET_K} within {TARGET_RATIO - 1:.0%} of full attention's final "
                  "validation perplexity",
        "target_met": bool(judged) and all(r["ppl_ratio_vs_full"] <= TARGET_RATIO for r in judged),
        "judged": [r["label"] for r in judged],
    }
    if on_unigram_plateau(reference, unigram):
        data["target_met"] = None
        data["not_judged"] = (f"full attention ends at {reference:,.1f}, above {PLATEAU_RATIO:.0%} of the "
                              f"perplexity of token frequencies alone ({unigram:,.1f}): no run has learned to use "
                              "its context yet, so their attention cannot differ; pretrain for more steps")
    return data


def figure3(paths: list[str | Path], out: str | Path, overwrite: bool = False) -> dict[str, Any]:
    """Write ``<out>.json`` and ``<out>.png`` from the pretraining runs under `paths`; returns the data."""
    runs = [load_run(p) for p in find_runs(paths)]
    data = figure3_data(runs)
    out = Path(out)
    files = [out.with_suffix(".json"), out.with_suffix(".png")]
    with output_files(files, made_by("figure3", {"runs": [r["run_dir"] for r in data["runs"]]}), overwrite):
        write_json(files[0], data)
        by_dir = {str(r.path): r for r in runs}
        n = data["runs"][0]["n"]
        plot_pretrain_curves({r["label"]: by_dir[r["run_dir"]].path for r in data["runs"]}, files[1],
                             title=f"MLM validation perplexity, n = {n} (cf. Linformer Figure 3a)",
                             unigram_ppl=data["unigram_val_ppl"])
    return data


def figure3_lines(data: dict[str, Any]) -> list[str]:
    """The closing summary: one line per run and the target."""
    lines = [f"  {r['label']:<32} final val ppl {r['final_val_ppl']:9.2f}  ({r['ppl_ratio_vs_full']:.3f}x full)"
             for r in data["runs"]]
    if data.get("not_judged"):
        lines.append(f"  target ({data['target']}): not judged: {data['not_judged']}")
    else:
        lines.append(f"  target ({data['target']}): {'met' if data['target_met'] else 'MISSED'}")
    return lines


__all__ = ["TARGET_K", "TARGET_RATIO", "figure3", "figure3_data", "figure3_lines"]
