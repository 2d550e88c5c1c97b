"""Config -> settings glue for scripts/benchmark.py (kept here so it is testable without hydra.main)."""

from __future__ import annotations

from dataclasses import asdict, fields

from omegaconf import DictConfig, OmegaConf

from ..files import made_by, output_files
from .inference import InferenceSettings
from .runner import benchmark_files, run_benchmark
from .throughput import ThroughputSettings


def _settings(cls, section, device: str):
    values = OmegaConf.to_container(section, resolve=True)
    names = {f.name for f in fields(cls)}
    unknown = set(values) - names - {"enabled"}
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {sorted(unknown)}; known: {sorted(names)}")
    return cls(**{k: v for k, v in values.items() if k in names}, device=device)


def settings_from_config(cfg: DictConfig) -> tuple[InferenceSettings | None, ThroughputSettings | None]:
    inf = _settings(InferenceSettings, cfg.inference, cfg.device) if cfg.inference.enabled else None
    thr = _settings(ThroughputSettings, cfg.throughput, cfg.device) if cfg.throughput.enabled else None
    return inf, thr


def benchmark_from_config(cfg: DictConfig, command: str = ""):
    """Run the benchmark into ``cfg.out_dir`` (null: the Hydra run directory). Its files follow the output rule
    (``files.check_output_files``): one written by an earlier benchmark with the same settings is replaced, anything
    else is refused before anything is measured, unless ``overwrite=true``."""
    out_dir = cfg.out_dir
    if out_dir is None:
        from hydra.core.hydra_config import HydraConfig

        out_dir = HydraConfig.get().runtime.output_dir
    inf, thr = settings_from_config(cfg)
    record = made_by("benchmark", {"inference": asdict(inf) if inf else None,
                                   "throughput": asdict(thr) if thr else None})
    files = benchmark_files(out_dir, cfg.name, inf, thr, cfg.throughput_name)
    with output_files(list(files.values()), record, bool(cfg.overwrite), "overwrite=true"):
        return run_benchmark(out_dir, cfg.name, inf, thr, cfg.throughput_name, command=command, note=cfg.note,
                             progress=cfg.progress)


__all__ = ["benchmark_from_config", "settings_from_config"]
