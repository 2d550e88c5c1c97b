"""Shared helpers: synchronisation, peak-memory measurement, the machine's description."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import platform
import re
import statistics
import time
from collections.abc import Callable

import torch

from ..devices import cpu_model_name
from ..modeling import threads
from ..native import fd2_filtered


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock seconds of one call, the device synchronised before and after."""
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def round_order(names: list[str], r: int) -> list[str]:
    """The order round `r` of interleaved_rounds runs `names` in: it starts with the r-th name (cyclically), and goes
    forward through the list in even rounds, backward in odd ones. So no name always runs first, and each name
    follows each of its two neighbours in turn rather than always the same one (a cache or allocator state a model
    leaves would otherwise favour or penalise the same model every round)."""
    step = 1 if r % 2 == 0 else -1
    return [names[(r + step * i) % len(names)] for i in range(len(names))]


def interleaved_rounds(fns: dict[str, Callable[[], object]], reps: int, device: torch.device,
                       on_call: Callable[[], object] | None = None,
                       threads_used: dict[str, list[int]] | None = None) -> dict[str, list[float]]:
    """Seconds of each call in each of ``reps`` rounds ({name: [round 0, round 1, ...]}). Every round runs each
    function once, in the order round_order gives (rotated by one each round, reversed every other round), so no
    function always runs first or after the same one, and machine noise hits all of them alike: the i-th times of two
    names were measured side by side, so their ratio is a per-round ratio. With `threads_used`, each name gets the CPU
    threads its timed model calls ran with (threads.recorded; torch's setting for a call of a model that does not fit
    its threads, such as Hugging Face's)."""
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        for name in round_order(names, r):
            with threads.recorded() as calls:
                times[name].append(timed(fns[name], device))
            if threads_used is not None:
                threads_used.setdefault(name, []).extend(calls or [torch.get_num_threads()])
            if on_call is not None:
                on_call()
    return times


def interleaved_medians(fns: dict[str, Callable[[], object]], reps: int, device: torch.device,
                        on_call: Callable[[], object] | None = None,
                        threads_used: dict[str, list[int]] | None = None) -> dict[str, float]:
    """Median seconds of each call over the interleaved rounds of ``interleaved_rounds``."""
    return {name: statistics.median(t)
            for name, t in interleaved_rounds(fns, reps, device, on_call, threads_used).items()}


def round_ratio_range(numerator: list[float] | None, denominator: list[float] | None) -> tuple[float, float] | None:
    """The lowest and highest per-round ratio of two names' interleaved_rounds times (round i over round i: measured
    side by side); None where either was not timed."""
    if not numerator or not denominator:
        return None
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True) if b > 0]
    return (min(ratios), max(ratios)) if ratios else None


def thread_range(counts: list[int]) -> str:
    """The threads a model's timed calls ran with, as a row records them: "2", or "1-2" where they varied."""
    if not counts:
        return ""
    lo, hi = min(counts), max(counts)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def threads_words(count) -> str:
    """A thread count as a row records it (``thread_range``: "1", "1-2"; None or "" unknown) in words: "1 thread",
    "1-2 threads", "? threads"."""
    count = str(count or "?")
    return f"{count} thread{'' if count == '1' else 's'}"


def load_average() -> float | None:
    """The 1-minute load average (processes running or waiting for a core); None where the system keeps none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def load_words(start: float | None, end: float | None = None) -> str:
    """The machine's load over a measurement, as its reports say it: the 1-minute load average at its start (None:
    not taken) and end (None: now), beside the cores (a load above the cores means processes waited for one)."""
    end = load_average() if end is None else end
    at = [f"{v:.1f} at the {when}" for v, when in ((start, "start"), (end, "end")) if v is not None]
    return f"1-minute load average {' and '.join(at)} on {os.cpu_count()} cores" if at else "load average unknown"


# A time ratio more than this many times its FLOP ratio is more than the arithmetic saved can explain: on a CPU,
# other processes on the cores or models run with different thread counts (threads.py's adaptive policy)
BEYOND_FLOPS = 2.0


def beyond_flop_bound(speedup: float | None, flop_ratio: float | None) -> bool:
    """Whether a measured speed-up (time of the reference / time of the model) exceeds what its FLOP ratio (FLOPs of
    the reference / FLOPs of the model) explains by more than BEYOND_FLOPS."""
    return speedup is not None and bool(flop_ratio) and speedup > BEYOND_FLOPS * flop_ratio


def warning_paragraph(line: str) -> str:
    """A "warning: ..." line as a report's bold paragraph."""
    return f"**Warning{line.removeprefix('warning')}**"


def flop_bound_warning(what: str, speedup: float, flop_ratio: float, load: str, thread_words: str) -> str:
    """The warning line for a speed-up beyond its FLOP bound (beyond_flop_bound), naming the load and the threads."""
    return (f"warning: {what}: measured speed-up {speedup:.2f}x is more than {BEYOND_FLOPS:g}x its FLOP ratio "
            f"{flop_ratio:.2f}x, more than the arithmetic saved explains; measured with {thread_words}, {load}: the "
            "ratio reflects the machine (other processes on its cores, unequal thread counts), not only the "
            "attention. Measure on an idle machine, or with cpu_threads=fixed / LINFORMER_CPU_THREADS=fixed.")


def _proc_status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _release_free_memory() -> None:
    """Collect garbage and hand glibc's free heap pages back to the OS, so RSS holds only live memory."""
    gc.collect()
    # Not glibc (OSError, AttributeError): freed memory may then be reused without RSS growth.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def cpu_peak_supported() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")
        _proc_status_kb("VmHWM")
        return True
    except OSError:
        return False


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Peak memory that one call of ``fn`` adds on top of what is live before it (model, inputs).

    CUDA: ``torch.cuda.max_memory_allocated`` minus the bytes allocated before the call.
    CPU: the process's resident-set high-water mark (VmHWM), reset to the current RSS just before the call
    (``echo 5 > /proc/self/clear_refs``, Linux), minus that RSS. Freed heap memory is first returned to
    the OS (``malloc_trim``) so that re-used pages are counted again. This is real memory touched by the
    call, activations and temporaries included, like a fresh process's max RSS delta, without the cost of
    a process per cell. Returns None where the kernel interface is missing.
    """
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    if not cpu_peak_supported():
        return None
    _release_free_memory()
    with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
        f.write("5")  # VmHWM := current RSS
    before = _proc_status_kb("VmRSS")
    fn()
    return int(max(0, _proc_status_kb("VmHWM") - before) * 1024)


# A line the profiler's C++ library (kineto) writes to fd 2 on each start and stop, whatever its log level
# (KINETO_LOG_LEVEL and TORCH_CPP_LOG_LEVEL leave it): "USDT:<date> <time> <pid>:<tid> <file>.cpp:<line>] ..."
_KINETO_LINE = re.compile(rb"(?:USDT|STAGE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \w+\.cpp:\d+\] ")


def _kineto_lines_dropped():
    """``native.fd2_filtered`` keeping every line written to fd 2 inside the block but kineto's (_KINETO_LINE): two
    lines per profiled call would bury a benchmark's own output."""
    return fd2_filtered(lambda written: b"".join(line for line in written.splitlines(keepends=True)
                                                 if not _KINETO_LINE.match(line)))


def peak_tensor_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes of live tensors that one call of ``fn`` adds on top of those alive before it.

    CUDA: as peak_memory_bytes. CPU: the profiler's record of every allocation and free (``profile_memory``),
    replayed in time order. Unlike the resident set it does not move with the heap's state or other threads, so the
    same call gives the same figure; what an operator allocates and frees inside itself (a kernel's scratch space)
    is not seen, nor are the allocator's free pages.
    """
    if device.type == "cuda":
        return peak_memory_bytes(fn, device)
    from torch.profiler import ProfilerActivity, profile

    with _kineto_lines_dropped(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.self_cpu_memory_usage  # an operator's own allocations net of its frees; a "[memory]" free
        peak = max(peak, live)
    return peak


# The busy process's program: torch only (an interpreter that imported this package would first spend seconds on
# transformers). One thread of 512 x 512 products, free to run on any core: a child starts with its parent's affinity,
# and a measurement bound by OMP_PROC_BIND would pin it beside its own first thread (the mask is set again once torch
# has started its OpenMP runtime, which may bind by its own settings). It prints a line once busy, and ends on
# SIGTERM, SIGINT or SIGHUP, or when its stdin closes: the benchmark holds the pipe's only writer, so a benchmark that
# ends in any way, SIGKILL included, leaves no busy process behind.
_BUSY_PROGRAM = """
import os, signal, sys, threading
def free():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
free()
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, lambda *_: os._exit(0))
threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)), daemon=True).start()
import torch
torch.set_num_threads(1)
free()
x = torch.randn(512, 512)
print("busy", flush=True)
while True:
    x = (x @ x).tanh_()
"""
_COMPETING: list = []  # the one-thread busy processes (subprocess.Popen) running beside the measurement
COMPETING_START_S = 120  # seconds a busy process may take to start (it imports torch)


def _wait_busy(proc, deadline: float) -> None:
    """Return once `proc` says it is busy; RuntimeError if it ends first or `deadline` (time.monotonic) passes."""
    import select

    left = deadline - time.monotonic()
    if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
        raise RuntimeError(f"a competing process did not start within {COMPETING_START_S} s")
    if not proc.stdout.readline():
        raise RuntimeError(f"a competing process ended before it was busy (exit status {proc.wait()})")


@contextlib.contextmanager
def competing_processes(count: int):
    """`count` one-thread busy processes (_BUSY_PROGRAM, each its own interpreter importing torch only) for the
    length of the block, as other users' jobs on a shared machine; machine_description records how many."""
    if count < 1:
        yield
        return
    import subprocess
    import sys

    # one OpenMP thread, no binding from the measurement's environment (the program sets its threads and mask too)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")}
    env["OMP_NUM_THREADS"] = "1"
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-c", _BUSY_PROGRAM], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, env=env))
        deadline = time.monotonic() + COMPETING_START_S
        for p in procs:  # each imports torch first (seconds): measure only once all are busy
            _wait_busy(p, deadline)
        _COMPETING[:] = procs
        yield
    finally:
        _COMPETING.clear()
        for p in procs:
            p.stdin.close()  # the program ends when its stdin closes
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            p.stdout.close()


def machine_description(device: torch.device, load_at_start: float | None = None) -> dict[str, str]:
    """The machine a measurement ran on, ended now; `load_at_start`: the load average when it began (load_average).
    competing_processes counts only the busy processes the benchmark itself started (benchmark key competing);
    load_average is the whole machine's."""
    import transformers

    desc = {
        "device": device.type,
        "cpu": cpu_model_name(),
        "cpu_cores": str(os.cpu_count()),
        "torch_threads": str(torch.get_num_threads()),
        "cpu_thread_policy": threads.get_policy(),
        "competing_processes": str(len(_COMPETING)),
        "load_average": load_words(load_at_start),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            desc["memory_gib"] = f"{int(f.readline().split()[1]) / 2**20:.0f}"
    except OSError:
        pass
    if device.type == "cuda":
        desc["gpu"] = torch.cuda.get_device_name(device)
    return desc


def available_memory_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * 2**30


def is_oom(err: BaseException) -> bool:
    """Out of memory: CUDA's OutOfMemoryError, or a RuntimeError that says so (CPU allocators, some kernels)."""
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err)


def free_memory(device: torch.device | None = None) -> None:
    """Collect garbage and return the CUDA caching allocator's free blocks, so the next model starts clean."""
    gc.collect()
    if (device is None or device.type == "cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def max_batch_that_fits(try_batch: Callable[[int], object], start: int = 1, limit: int = 4096,
                        tolerance: float = 0.0) -> int:
    """Largest batch for which ``try_batch(b)`` runs without running out of memory (binary search).

    Doubles from ``start`` until a failure (or ``limit``), then bisects. ``try_batch`` raises
    ``torch.OutOfMemoryError`` (or a RuntimeError saying "out of memory") when b does not fit. 0 = none fit.
    With ``tolerance`` > 0 the bisection stops once the largest fitting batch found is within that fraction of the
    smallest failing one (each try costs a forward at its batch, so the last few percent are the dearest).
    A ``limit`` that fits is returned as is: the true largest batch is at least that.
    """

    def fits(b: int) -> bool:
        try:
            try_batch(b)
            return True
        except (torch.OutOfMemoryError, RuntimeError) as err:
            if not is_oom(err):
                raise
            free_memory()
            return False

    if not fits(start):
        return 0
    lo, hi = start, start * 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    if hi > limit:  # lo fits and the next doubling passes the limit: try the limit itself
        if lo == limit or fits(limit):
            return limit
        hi = limit
    while hi - lo > 1 and hi > lo * (1 + tolerance):  # lo fits, hi does not
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
