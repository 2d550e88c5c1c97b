"""CPU threads fitted to the cores other processes leave free, for a model's inference forwards.

Why: on a CPU shared with other processes, a forward that runs more threads than there are free cores waits at the
end of each of its parallel regions for the thread whose core another process holds. The local/global attention
runs thousands of small regions per forward at n = 4096, so beside one busy process on 2 cores it is faster on one
thread than on two (docs/results/local_global_cpu.md). Under the ``adaptive`` policy (the default), the inference
forward of a Linformer (projected keys, with or without exact local and global ones) on the CPU therefore runs with

    threads = max(1, min(torch.get_num_threads(), round(cores - busy)))

where ``cores`` are the CPUs this process may run on and ``busy`` is how many of them other processes kept busy
since the last decision (their busy time in /proc/stat, a hypervisor's steal included, less this process's own CPU
time, over at least WINDOW_S of wall time). torch's own setting is restored after the forward.

Full attention keeps torch's setting: its fused kernel's few long parallel regions still gain from a contended
second thread (measured in the same file). Outputs agree at any thread count (the CPU kernels split their work by
rows, not along a reduction: bitwise on the machines measured, and a test holds them to 1e-6); training forwards
(grad enabled) keep torch's setting all the same, so that a training run's thread count never follows the load (its
bitwise reproducibility is then the kernels' own: on one thread, OMP_NUM_THREADS=1, runs are bitwise equal; on
several, on a machine other processes load, they can differ in their last digits whatever this module does), and so
do compiled forwards (inductor builds its CPU kernels for one thread count) and every forward that is being captured
as a graph or transformed (``capturing``: torch.compile, torch.export, torch.jit.trace, both ONNX exporters, fx, vmap):
a graph records only what the calling thread runs, so the same model exports the same graph whatever the load.

When the forward is fitted to one thread of torch's several (other processes hold all but about one of the
cores), it also shares its large pieces of work among torch's-setting one-thread workers that each take the next
piece as soon as they are free (``share``): the rows of every linear layer of at least 2 PIECE_ROWS rows, and the
blocked attention's chunks (local_global). A worker on a contended core then simply takes fewer pieces, where torch's own threads split
each operation evenly and wait at its end for the slowest. The pieces are rows: outputs are bitwise those of the
unshared forward.

``LINFORMER_CPU_THREADS=fixed`` in the environment, or ``set_policy("fixed")``, keeps torch's setting always; so
does a machine without /proc/stat (not Linux). The setting is the process's: Python threads that run forwards at
once share torch's thread count, and should use the fixed policy.
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch
import torch.fx.experimental.symbolic_shapes as symbolic_shapes
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack
from torch.utils._device import DeviceContext
from torch.utils._python_dispatch import _len_torch_dispatch_stack

from .errors import ConfigError
from .values import ceil_div

POLICIES = ("adaptive", "fixed")
ENV = "LINFORMER_CPU_THREADS"
WINDOW_S = 0.2  # the shortest wall time a decision is measured over: /proc/stat counts in ticks of 10 ms
PROC_STAT = "/proc/stat"
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest time is inside user)
# Rows of a linear layer per shared piece: long enough that handing a piece to a worker costs little (about 25 ms of
# MiniLM's feed-forward on one core), short enough that a worker on a contended core holds back the end by little
PIECE_ROWS = 2048
# fx.symbolic_trace (its flag alone: torch.export sets it too, and is_fx_tracing() logs a deprecation per call)
_fx_symbolic_tracing = getattr(torch.fx._symbolic_trace, "is_fx_symbolic_tracing", lambda: False)
# torch.export's own flag is torch 2.7+. Before it, torch.compiler.is_compiling, which torch.compile sets as well as
# torch.export: a compiled forward is then taken for an export, and attends through the path that holds at every
# length (the same outputs, without the shortcut for inputs no longer than k).
is_exporting = getattr(torch.compiler, "is_exporting", None) or torch.compiler.is_compiling
# Whether a length is a number fixed in the graph: torch 2.8+. Before it, an int is taken for a fixed length: Dynamo
# (strict export) shows a dynamic length to isinstance as an int, so strict export's dynamic lengths are not refused
# there (the ONNX dynamo exporter may then write a fixed-length graph without a word), and a SymInt that export
# specialised to a constant is refused.
has_static_value = getattr(symbolic_shapes, "has_static_value", lambda T: isinstance(T, int))


def _policy_from_env() -> str:
    value = os.environ.get(ENV, "adaptive").strip().lower() or "adaptive"
    if value not in POLICIES:
        raise ConfigError(f"{ENV}={value!r} is not one of {', '.join(POLICIES)}.")
    return value


class _State:
    """The policy and the last measurement, shared by every model in the process."""

    def __init__(self):
        self.policy: str | None = None  # read from the environment at the first forward (an error there is one line)
        self.lock = threading.Lock()
        self.local = threading.local()  # this Python thread's depth of nested calls and workers sharing its forward
        self.cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
        self.snapshot = _snapshot(self.cpus, self.tick_s)  # at import: the first forward has a window behind it
        self.busy = 0.0  # cores other processes kept busy in the last window
        self.records: list[list[int]] = []  # open ``recorded`` blocks: the threads of each model call in them


def _busy_seconds(cpus: list[int], tick_s: float) -> float | None:
    """Busy seconds of `cpus` since boot, from /proc/stat; None where it cannot be read."""
    wanted = {f"cpu{c}" for c in cpus}
    total = 0
    try:
        with open(PROC_STAT, encoding="utf-8") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if name in wanted:
                    fields = rest.split()
                    total += sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields))
    except (OSError, ValueError):
        return None
    return total * tick_s


def _snapshot(cpus: list[int], tick_s: float) -> tuple[float, float, float] | None:
    busy = _busy_seconds(cpus, tick_s) if cpus else None
    return None if busy is None else (time.monotonic(), busy, time.process_time())


_state = _State()


def set_policy(policy: str, key: str = "policy") -> None:
    """``adaptive`` (fit the threads to the free cores) or ``fixed`` (torch's setting), for the whole process; a
    ConfigError naming `key` for anything else."""
    if policy not in POLICIES:
        raise ConfigError(f"{key}={policy!r} is not one of {', '.join(POLICIES)}.")
    _state.policy = policy


def get_policy() -> str:
    if _state.policy is None:
        _state.policy = _policy_from_env()
    return _state.policy


def busy_cores() -> float:
    """Cores other processes kept busy, measured over the time since the last measurement (at least WINDOW_S;
    a shorter wait returns the last value)."""
    s = _state
    with s.lock:
        if s.snapshot is not None and time.monotonic() - s.snapshot[0] < WINDOW_S:
            return s.busy  # /proc/stat is read at most once a window, however many forwards run in it
        now = _snapshot(s.cpus, s.tick_s)
        if now is not None and s.snapshot is not None:
            wall, busy, own = (a - b for a, b in zip(now, s.snapshot, strict=True))
            s.busy = min(max((busy - own) / wall, 0.0), float(len(s.cpus)))
        s.snapshot = now
        return s.busy


def fitted_threads(requested: int) -> int:
    """The threads a forward gets under the adaptive policy: at most `requested`, at least 1."""
    free = len(_state.cpus) - busy_cores()
    return max(1, min(requested, math.floor(free + 0.5)))


def capturing() -> bool:
    """Whether the running Python code is being recorded as a graph or transformed, rather than run: torch.compile
    and torch.export (strict or not, the ONNX dynamo exporter's too), torch.jit.trace and the TorchScript ONNX
    exporter, fx symbolic tracing and make_fx, functorch transforms (vmap, grad), or any torch function or dispatch
    mode on this thread (a fake-tensor or proxy mode) but the policy's own and torch's default device. A captured graph holds what the
    calling thread ran: work handed to another thread is missing from it (a trace of ``torch.empty`` and nothing
    else), and so is any thread-local mode or transform there. So the thread policy steps aside for all of them, and
    a host-synced shortcut (a branch on a tensor's value) takes the general path instead of freezing one branch into
    the graph."""
    return (torch.compiler.is_compiling() or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()
            or _fx_symbolic_tracing() or _foreign_function_mode()
            or _len_torch_dispatch_stack() > 0 or torch._C._functorch.maybe_current_level() is not None)


def static_length_only(T, what: str, instead: str) -> None:
    """Refuse a dynamic length under torch.export where `what` (a part of the model whose layout the length decides)
    exports at a fixed length only; `instead`: the settings without it. torch.export would refuse the length's range
    in its own words, but the ONNX dynamo exporter (``torch.onnx.export(..., dynamo=True)``) takes torch's suggested
    fix, the example's length, and writes a graph that onnxruntime refuses at any other length, without a word.
    T: the forward's length, a SymInt where the export keeps it dynamic."""
    # has_static_value: False for a dynamic length, a SymInt non-strict; Dynamo (strict export) shows that one to
    # isinstance and type() as an int, but answers this function for it
    if is_exporting() and not has_static_value(T):
        raise ConfigError(f"{what} exports at a fixed length only (its layout follows the length): export without a "
                          "dynamic length (pad the inputs to the example's), or load the model with "
                          f"{instead}, whose graph takes any length up to n")


def traced_length_only(T, x: torch.Tensor, what: str, instead: str) -> torch.Tensor:
    """`x`, tied in a torch.jit.trace graph to a check that the graph runs at the length T it was traced at, where
    `what` (a part of the model whose layout the length decides) holds at that length only: the trace keeps the
    layout's sizes as constants, so at another length it gave wrong outputs without a word, or failed in a strided
    view's storage error. The check is an op of the graph (a functional assert, whose token `x` then depends on so
    that the trace keeps it) raising a RuntimeError that says so; `instead`: the settings without `what`. Eager,
    compiled and exported graphs are unchanged (an ONNX graph traced at a fixed length declares its inputs' shapes,
    and onnxruntime refuses others)."""
    if not (torch.jit.is_tracing() and isinstance(T, torch.Tensor)) or torch.onnx.is_in_onnx_export():
        return x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # the traced length, read as the constant it is
        traced = int(T)
    token = torch.ops.aten._functional_assert_async.msg(
        traced == T, f"{what}: this graph was traced at length {traced} and runs at that length only: trace it "
        f"again at its inputs' length (or pad them to {traced}), or load the model with {instead}, whose trace runs "
        "at any length up to n", torch.ops.aten._make_dep_token())
    return x + torch.zeros_like(token, dtype=x.dtype)  # a token is uninitialised memory: its value is not added


def _foreign_function_mode() -> bool:
    """Whether a torch function mode other than this module's own ``_SharedRows`` and torch's DeviceContext is on
    this thread. The policy's own mode runs the forward as eager code does (whole rows, one answer per batch); a
    DeviceContext (``torch.set_default_device``, ``with torch.device(...)``) only places the tensors a factory makes
    without a device, which the workers' pieces never do (they write into a given output). Counting either as a
    capture would send every CPU forward of such a process down the general paths (masking an unpadded batch, no
    exact short rows)."""
    return torch._C._len_torch_function_stack() > 0 and any(
        not isinstance(mode, (_SharedRows, DeviceContext)) for mode in _get_current_function_mode_stack())


def _applies(model) -> bool:
    """Whether `model`'s call is fitted: the adaptive policy, no gradients, nothing capturing it (``capturing``:
    compile, export, tracing), not ``model.compile()``'s compiled call, a Linformer (not full attention) on the CPU;
    the cheapest checks first, since every call, training steps on a GPU included, passes here. The policy comes
    first so that a bad LINFORMER_CPU_THREADS is said at the first call of any kind."""
    return (get_policy() == "adaptive" and not torch.is_grad_enabled() and _state.snapshot is not None
            and getattr(model, "_compiled_call_impl", None) is None and not capturing()
            and model.config.projects_keys and model.device.type == "cpu")


@contextmanager
def fitted(model):
    """Run the block (one call of `model`) with the threads fitted to the free cores where the policy applies
    (``_applies``): the outermost call on this Python thread decides, nested models' calls inside it keep its
    choice."""
    local = _state.local
    depth = getattr(local, "depth", 0)
    if depth or not _applies(model):
        if not depth and _state.records and not capturing():  # appending to a list breaks a compiled graph
            _record(torch.get_num_threads())
        local.depth = depth + 1
        try:
            yield
        finally:
            local.depth = depth
        return
    requested = torch.get_num_threads()
    threads = fitted_threads(requested) if requested > 1 else requested
    _record(threads)
    local.depth = 1
    # fitted to one thread of several: the large pieces of work go to `requested` one-thread workers (module
    # docstring); not under autocast, whose setting a worker thread would not have. With more threads fitted, each
    # worker's operations would run on all of them: too many threads for the cores.
    workers = requested if threads == 1 < requested and not torch.is_autocast_enabled("cpu") else 0
    if threads != requested:
        torch.set_num_threads(threads)
    try:
        if workers:
            local.workers = workers
            with _SharedRows():
                yield
        else:
            yield
    finally:
        local.depth, local.workers = 0, 0
        if threads != requested:
            torch.set_num_threads(requested)


def _record(threads: int) -> None:
    for calls in _state.records:
        calls.append(threads)


@contextmanager
def recorded():
    """A list of the threads each model call in the block ran with (fitted, or torch's setting where the policy does
    not apply), one entry per outermost call: what a timing records beside its times, since under the adaptive
    policy the models it compares may run with different thread counts."""
    calls: list[int] = []
    _state.records.append(calls)
    try:
        yield calls
    finally:
        _state.records = [c for c in _state.records if c is not calls]  # by identity: equal lists are others


_pools: dict[tuple[int, int], ThreadPoolExecutor] = {}  # (process id, workers): a forked child makes its own


def share(count: int, piece: Callable[[int], None], in_order: bool = False) -> None:
    """``piece(i)`` for every i in range(count): in order on this thread (always, with `in_order`: pieces that draw
    random numbers), or, inside a forward that shares its work (``fitted``, on a loaded machine), taken by the
    workers one at a time as each is free. The pieces must be independent (each writes its own output). A worker
    runs at one thread with this thread's grad and inference mode; a piece's exception is raised here once every
    worker has stopped."""
    workers = getattr(_state.local, "workers", 0)
    if in_order or workers < 2 or count < 2:
        for i in range(count):
            piece(i)
        return
    pending = iter(range(count))
    lock = threading.Lock()
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

    def work() -> None:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            while True:
                with lock:
                    i = next(pending, None)
                if i is None:
                    return
                piece(i)

    key = (os.getpid(), workers)  # a fork's copy of a pool has no threads: its tasks would wait for ever
    with _state.lock:
        if key not in _pools:
            _pools[key] = ThreadPoolExecutor(workers, thread_name_prefix="linformer-share")
        pool = _pools[key]
    for future in [pool.submit(work) for _ in range(workers)]:
        future.result()


class _SharedRows(TorchFunctionMode):
    """Every linear layer of at least 2 PIECE_ROWS rows as pieces of PIECE_ROWS rows (``share``), each written into
    its rows of the output; anything else as it is. The mode is this thread's only: a worker's own calls run
    unshared."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            rows = x.numel() // max(x.shape[-1], 1) if x.dim() >= 2 else 0
            if (rows >= 2 * PIECE_ROWS and x.dtype == weight.dtype and not kwargs.keys() - {"bias"}
                    and not torch.is_grad_enabled()):  # out= takes no gradients: a nested enable_grad stays whole
                return _shared_linear(x, weight, bias, rows)
        return func(*args, **kwargs)


def _shared_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, rows: int) -> torch.Tensor:
    flat = x.reshape(rows, x.shape[-1])
    out = torch.empty(rows, weight.shape[0], dtype=x.dtype, device=x.device)

    def piece(i: int) -> None:
        lo, hi = i * PIECE_ROWS, min(rows, (i + 1) * PIECE_ROWS)
        if bias is None:
            torch.mm(flat[lo:hi], weight.t(), out=out[lo:hi])
        else:
            torch.addmm(bias, flat[lo:hi], weight.t(), out=out[lo:hi])

    share(ceil_div(rows, PIECE_ROWS), piece)
    return out.view(*x.shape[:-1], weight.shape[0])
