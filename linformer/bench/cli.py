"""Config -> settings glue for scripts/benchmark.py (kept here so it is testable without hydra.main)."""

from __future__ import annotations

from dataclasses import asdict

from omegaconf import DictConfig, OmegaConf

from ..files import made_by, output_files
from ..spec.settings import check_types, positive_int, refuse_unknown
from .inference import InferenceSettings
from .runner import benchmark_files, run_benchmark
from .throughput import ThroughputSettings


def _settings(cls, section, device: str, prefix: str):
    """The dataclass `cls` from config group `prefix`: an unknown key (with the closest known one) or a value of
    the wrong type is one ConfigError naming the key."""
    values = {k: v for k, v in OmegaConf.to_container(section, resolve=True).items() if k != "enabled"}
    refuse_unknown(values, cls, prefix)
    check_types(values, cls, prefix)
    return cls(**values, device=device)


def settings_from_config(cfg: DictConfig) -> tuple[InferenceSettings | None, ThroughputSettings | None]:
    inf = _settings(InferenceSettings, cfg.inference, cfg.device, "inference") if cfg.inference.enabled else None
    thr = _settings(ThroughputSettings, cfg.throughput, cfg.device, "throughput") if cfg.throughput.enabled else None
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
    threads = positive_int(cfg, "threads", prefix="", allow_none=True)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)  # machine_description records it beside every table
    record = made_by("benchmark", {"inference": asdict(inf) if inf else None,
                                   "throughput": asdict(thr) if thr else None})
    files = benchmark_files(out_dir, cfg.name, inf, thr, cfg.throughput_name)
    with output_files(list(files.values()), record, bool(cfg.overwrite), "overwrite=true"):
        return run_benchmark(out_dir, cfg.name, inf, thr, cfg.throughput_name, command=command, note=cfg.note,
                             progress=cfg.progress)


__all__ = ["benchmark_from_config", "settings_from_config"]
