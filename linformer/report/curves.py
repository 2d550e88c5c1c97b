"""Validation perplexity against updates for pretraining runs (the paper's Figure 3) from metrics.jsonl."""

import json
from pathlib import Path


def read_val_curve(run_dir: str | Path) -> tuple[list[int], list[float]]:
    steps, ppl = [], []
    for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("val_ppl") is not None:
            steps.append(int(row["step"]))
            ppl.append(float(row["val_ppl"]))
    return steps, ppl


def plot_pretrain_curves(runs: dict[str, str | Path], out_png: str | Path, title: str = "") -> Path:
    """runs: label -> pretraining run dir. Log-scale perplexity against updates, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, run in runs.items():
        steps, ppl = read_val_curve(run)
        ax.plot(steps, ppl, marker="o", markersize=3, label=label, linestyle="--" if "full" in label else "-")
    ax.set_yscale("log")
    ax.set_xlabel("updates")
    ax.set_ylabel("validation perplexity")
    ax.set_title(title or "MLM validation perplexity (cf. Linformer Figure 3)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
