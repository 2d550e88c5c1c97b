"""Tiny run directories written directly (config.yaml + metrics.jsonl), as pretrain/finetune would leave them, and
a check of the PNGs reports draw."""

import json
from pathlib import Path

import pytest
import yaml


def write_run(root: Path, stage: str, name: str, rows: list[dict], model: dict | None = None,
              task: str | None = None, results: dict | None = None) -> Path:
    run = root / stage / name
    run.mkdir(parents=True)
    config = {"run_name": name, "experiment_name": "exp-" + stage, "seed": 0,
              "model": model or {"name": "tiny", "attention": "linformer", "projected_dim": 32,
                                 "sharing": "headwise", "max_seq_len": 128}}
    if task:
        config["task"] = {"name": task}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if results:
        (run / "results.json").write_text(json.dumps(results))
    return run


@pytest.fixture
def make_run():
    return write_run


def line_colours(png: Path, size: tuple[int, int], n: int) -> list[int]:
    """Check `png` is a `size` (width, height) image, and return how many pixels hold each of the first `n`
    rows' colours (plots.colours): a line drawn in a colour puts hundreds of pixels in it."""
    import matplotlib.image
    import numpy as np
    from matplotlib.colors import to_rgb

    from linformer import plots

    img = matplotlib.image.imread(png)[..., :3]
    assert (img.shape[1], img.shape[0]) == size
    return [int((np.abs(img - np.array(to_rgb(c))).max(axis=-1) < 0.02).sum()) for c in plots.colours(n)]
