"""Config -> settings glue for scripts/benchmark.py (kept here so it is testable without hydra.main)."""

from __future__ import annotations

from dataclasses import asdict

from omegaconf import DictConfig, OmegaConf

from ..devices import DTYPES, resolve_device
from ..errors import ConfigError
from ..files.atomic import output_files
from ..files.locations import resolve_path
from ..files.names import folder_name
from ..files.outputs import made_by
from ..logfile import say
from ..runconfig.settings import check_types, positive_int, refuse_unknown
from ..signals import signals_stop
from .common import competing_processes
from .inference import BASELINES, LINFORMER_KERNELS, InferenceSettings
from .models import linformer_fields, ours_config, size_of
from .runner import benchmark_files, run_benchmark
from .throughput import ThroughputSettings


def _settings(cls, section, device: str, prefix: str):
    """The dataclass `cls` from config group `prefix`: an unknown key (with the closest known one) or a value of
    the wrong type is one ConfigError naming the key."""
    values = {k: v for k, v in OmegaConf.to_container(section, resolve=True).items() if k != "enabled"}
    refuse_unknown(values, cls, prefix)
    check_types(values, cls, prefix)
    return cls(**values, device=device)


DEVICES = ("auto", "cpu", "cuda")
HYDRA_OUTPUTS = "outputs"  # configs/benchmark.yaml's hydra.run.dir is <this, from the repository>/benchmark/<run_name>


def _check_values(s, prefix: str) -> None:
    """Values no measurement can run with, named (their types are checked already): counts below 1, a budget that
    is not positive, an unknown dtype, and a grid with nothing to measure (_check_grid)."""
    values = vars(s)
    for key in ("reps", "steps", "layers", "hidden", "heads", "ffn", "vocab", "batch_size", "tokens_per_step"):
        positive_int(values, key, prefix, allow_none=True)
    positive_int(values, "warmup", prefix, minimum=0)
    if s.linformer_attn_implementation not in LINFORMER_KERNELS:
        raise ConfigError(f"{prefix}.linformer_attn_implementation={s.linformer_attn_implementation!r} is not one "
                          f"of {', '.join(LINFORMER_KERNELS)}.")
    if isinstance(s, InferenceSettings):
        if not s.budget_s > 0:
            raise ConfigError(f"{prefix}.budget_s={s.budget_s!r} must be a positive number of seconds.")
        for key in ("dtype", "reference_dtype"):
            value = getattr(s, key)
            if value not in DTYPES and (key == "dtype" or value is not None):
                raise ConfigError(f"{prefix}.{key}={value!r} is not one of {', '.join(DTYPES)}"
                                  f"{' (or null)' if key == 'reference_dtype' else ''}.")
        unknown = [b for b in s.baselines if b not in BASELINES]
        if unknown:
            raise ConfigError(f"{prefix}.baselines: {unknown[0]!r} is not one of {', '.join(BASELINES)}.")
    _check_grid(s, prefix)
    _check_models(s, prefix)


def _check_grid(s, prefix: str) -> None:
    """A grid that would write an empty table (or measure what cannot be), refused for both groups alike: an n or k
    below 1 or none given, no cell with k < n (a k >= n has nothing to project: the inference grid skips such cells,
    the throughput grid leaves out the Linformer rows of such a k at that n), and (throughput) no precision, model
    or compile setting to time."""
    if min(s.ns, default=0) < 1 or min(s.ks, default=0) < 1:
        raise ConfigError(f"{prefix}.ns={s.ns} / {prefix}.ks={s.ks}: every n and k must be at least 1.")
    max_n = getattr(s, "max_n", None)
    if max_n is not None and min(s.ns) > max_n:
        raise ConfigError(f"{prefix}.ns={s.ns}: every n is above {prefix}.max_n={max_n} (the CPU's default cap), so "
                          f"nothing would be measured; give an n up to {max_n}, or {prefix}.max_n=null to lift the "
                          "cap.")
    linformer = not isinstance(s, ThroughputSettings) or "linformer" in s.models  # else no row reads ks
    if linformer and not any(k < n for n in s.ns for k in s.ks if max_n is None or n <= max_n):
        raise ConfigError(f"{prefix}.ns={s.ns} and {prefix}.ks={s.ks}"
                          + (f" (max_n={max_n})" if max_n else "")
                          + ": no cell has k < n, so nothing would be measured.")
    for key in ("precisions", "models", "compile") if isinstance(s, ThroughputSettings) else ():
        if not getattr(s, key):
            raise ConfigError(f"{prefix}.{key}=[]: nothing would be measured; give at least one.")


def _check_models(s, prefix: str) -> None:
    """The models' settings (sharing, the shape, the Linformer's local and global keys) as LinformerConfig takes
    them, at every n and k of the grid, before anything is built or measured; an error names the group."""
    size = size_of(s)
    try:
        cells = [(n, s.ks) for n in s.ns if getattr(s, "max_n", None) is None or n <= s.max_n]  # what the grid runs
        if isinstance(s, ThroughputSettings) and s.levers.enabled:
            cells.append((s.levers.n, [s.levers.k]))
        for n, ks in cells:
            ours_config(size, n, "full")
            for k in ks:
                ours_config(size, n, "linformer", k, s.sharing, **linformer_fields(s))
    except ConfigError as err:
        raise ConfigError(f"{prefix}: {err}") from None


def settings_from_config(cfg: DictConfig) -> tuple[InferenceSettings | None, ThroughputSettings | None]:
    if cfg.device not in DEVICES:
        raise ConfigError(f"device={cfg.device!r} is not one of {', '.join(DEVICES)}.")
    inf = _settings(InferenceSettings, cfg.inference, cfg.device, "inference") if cfg.inference.enabled else None
    thr = _settings(ThroughputSettings, cfg.throughput, cfg.device, "throughput") if cfg.throughput.enabled else None
    if inf is None and thr is None:
        raise ConfigError("inference.enabled=false and throughput.enabled=false: nothing would be measured; enable "
                          "one of them.")
    # run_name names the Hydra run directory: the benchmark's files go there where out_dir is null, and Hydra's own
    # (.hydra/, benchmark.log) go there whatever out_dir is
    outputs = resolve_path(HYDRA_OUTPUTS)  # named as the folder it is: no key sets it (paths is not the benchmark's)
    folder_name(cfg.get("run_name"), "run_name", "a benchmark's folder", f"{outputs}/benchmark/", stage="benchmark",
                outputs=outputs)
    for settings, prefix in ((inf, "inference"), (thr, "throughput")):
        if settings is not None:
            _check_values(settings, prefix)
    return inf, thr


def benchmark_from_config(cfg: DictConfig, command: str = ""):
    """Run the benchmark into ``cfg.out_dir`` (null: the Hydra run directory). Its files follow the output rule
    (``outputs.check_output_files``): one written by an earlier benchmark with the same settings is replaced, anything
    else is refused before anything is measured, unless ``overwrite=true``."""
    out_dir = cfg.out_dir
    if out_dir is None:
        from hydra.core.hydra_config import HydraConfig

        out_dir = HydraConfig.get().runtime.output_dir
    out_dir = resolve_path(out_dir)  # relative to the repository, "~" expanded, as every command's paths
    inf, thr = settings_from_config(cfg)
    resolve_device(cfg.device)  # a GPU the machine lacks: refused before busy processes start or files are claimed
    if cfg.get("cpu_threads") is not None:  # null: the package's policy (LINFORMER_CPU_THREADS, else adaptive)
        from ..modeling import threads as cpu_threads

        cpu_threads.set_policy(str(cfg.cpu_threads), key="cpu_threads")
    threads = positive_int(cfg, "threads", prefix="", allow_none=True)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)  # machine_description records it beside every table
    busy = positive_int(cfg, "competing", prefix="", allow_none=True, minimum=0) or 0  # busy processes beside it
    # everything that changes what is measured: a run with other threads (or thread policy) is another output
    record = made_by("benchmark", {"inference": asdict(inf) if inf else None,
                                   "throughput": asdict(thr) if thr else None, "competing": busy,
                                   "threads": threads, "cpu_threads": cfg.get("cpu_threads")})
    files = benchmark_files(out_dir, cfg.name, inf, thr, cfg.throughput_name)
    # a stop's partial tables are kept and recorded as this command's output, then the stop raised (PartialOutput)
    with output_files(list(files.values()), record, bool(cfg.overwrite), "overwrite=true", key="out_dir="), \
            competing_processes(busy), signals_stop(STOPPED):
        return run_benchmark(out_dir, cfg.name, inf, thr, cfg.throughput_name, command=command, note=cfg.note,
                             progress=cfg.progress, log=say)  # its lines in benchmark.log too


# SIGTERM (a scheduler's stop, a GPU target's deadline) or Ctrl-C: what was measured is written, marked partial
STOPPED = ("stopped by {signal}: any cells measured before it are written, marked partial; the same command again "
           "measures the whole grid.")


__all__ = ["benchmark_from_config", "settings_from_config"]
