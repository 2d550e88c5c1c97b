"""Run directories as the reports see them: any directory holding a metrics.jsonl is a run.

`outputs/<stage>/<run>/` holds config.yaml (the resolved Hydra config), metrics.jsonl (one JSON object per
line: step, time in seconds since the start, and whichever metrics that step logged), and per stage
summary.json (pretrain) or results.json (finetune). A benchmark run is any other directory with metrics.jsonl.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger(__name__)

METRICS = "metrics.jsonl"


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl. A torn last line (a run still writing) and blank lines are skipped."""
    rows = []
    for i, line in enumerate(Path(path).read_text().splitlines()):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            log.warning("%s:%d is not JSON (a run still writing?); skipped", path, i + 1)
            continue
        if isinstance(row, dict) and "step" in row:
            rows.append(row)
    return rows


def find_runs(paths: list[str | Path]) -> list[Path]:
    """Run directories at or under each path (a run dir itself, or a folder of them), sorted, without duplicates.

    Hidden directories (outputs/.dashboard) and checkpoints are not searched."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if (p / METRICS).is_file():
            found.add(p.resolve())
            continue
        if p.is_dir():
            for m in p.rglob(METRICS):
                rel = m.relative_to(p).parts[:-1]
                if any(part.startswith(".") or part in ("checkpoints", "wandb") for part in rel):
                    continue
                found.add(m.parent.resolve())
    return sorted(found)


def _read_mapping(path: Path, parse, error: type[Exception]) -> dict:
    """The mapping in a YAML or JSON file; {} when it is missing, unparsable (logged) or not a mapping."""
    if not path.is_file():
        return {}
    try:
        data = parse(path.read_text())
    except error as e:
        log.warning("%s: %s", path, e)
        return {}
    return data if isinstance(data, dict) else {}


def _read_yaml(path: Path) -> dict:
    return _read_mapping(path, yaml.safe_load, yaml.YAMLError)


def _read_json(path: Path) -> dict:
    return _read_mapping(path, json.loads, json.JSONDecodeError)


def _model_label(path: str | None) -> str | None:
    """A finetuned model's origin, shortly: .../pretrain/demo/model -> demo/model."""
    if not path:
        return None
    p = Path(str(path))
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


@dataclass
class Run:
    path: Path
    name: str                        # run_name from the config, else the directory name
    stage: str                       # pretrain / finetune / benchmark / the parent directory's name
    config: dict = field(default_factory=dict)
    results: dict = field(default_factory=dict)   # summary.json and/or results.json
    rows: list[dict] = field(default_factory=list)

    @property
    def key_config(self) -> dict[str, Any]:
        """attention, k, sharing, model, task, experiment: what tells runs apart in a comparison."""
        model = self.config.get("model") if isinstance(self.config.get("model"), dict) else {}
        task = self.config.get("task") if isinstance(self.config.get("task"), dict) else {}
        r = self.results
        # The saved architecture: this run's model/, else the model a finetune started from (where it still is).
        origin = r.get("model_path") or self.config.get("model_path")
        candidates = [self.path / "model"] + ([Path(str(origin)), Path(str(origin)) / "model"] if origin else [])
        saved = next((_read_json(c / "config.json") for c in candidates if (c / "config.json").is_file()), {})

        def pick(*values):
            return next((v for v in values if v is not None), None)

        return {
            "attention": pick(r.get("attention"), model.get("attention"), saved.get("attention")),
            "k": pick(r.get("projected_dim"), model.get("projected_dim"), saved.get("projected_dim")),
            "sharing": pick(r.get("sharing"), model.get("sharing"), saved.get("sharing")),
            "model": pick(model.get("name"), _model_label(pick(r.get("model_path"), self.config.get("model_path")))),
            "n": pick(r.get("max_seq_len"), model.get("max_seq_len"), saved.get("max_seq_len")),
            "task": pick(r.get("task"), task.get("name")) if self.stage != "pretrain" else None,
            "experiment": self.config.get("experiment_name"),
        }


def load_run(path: str | Path, root: str | Path | None = None) -> Run:
    """A run directory's config, results and metrics. `stage` is the first directory under `root` (outputs/)."""
    path = Path(path).resolve()
    config = _read_yaml(path / "config.yaml")
    results = {**_read_json(path / "summary.json"), **_read_json(path / "results.json")}
    stage = path.parent.name
    if root is not None:
        with contextlib.suppress(ValueError, IndexError):
            stage = path.relative_to(Path(root).resolve()).parts[0]
    name = str(config.get("run_name") or path.name)
    return Run(path=path, name=name, stage=stage, config=config, results=results, rows=read_metrics(path / METRICS))
