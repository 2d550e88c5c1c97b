"""How the local/global attention's CPU kernel (blocked: its chunked softmax; compiled: the same model under
torch.compile; flex: the model under attn_implementation="flex_attention", torch.compile's CPU flex kernel) and chunk
size (linformer.modeling.local_global.CHUNK_ELEMENTS) move its forward time against full attention's, side by side in
one process: all-MiniLM-L6-v2's shape (6 x 384, 12 heads, FFN 1536), k = 128, w = 128, global [0, -1], batch 1, random
weights, at 1 and 2 threads, idle and beside one busy process (bench.common.competing_processes), with the CPU
thread policy fixed (torch's setting) and adaptive (threads fitted to the free cores: linformer.modeling.threads).

    python tools/local_global_chunks.py [--n 4096] [--reps 3] [--chunks 18] [--kernels blocked compiled flex]
        [--policies fixed adaptive]

Prints one row per (threads, load, policy, kernel, chunk): the median forward time of each model over interleaved rounds, the
part of it spent in the self-attention modules, their ratio, and the FLOP ratio it is held to (target: the time ratio
at most 1.15x the FLOP ratio).
"""

import argparse
import itertools
import os
import statistics
import time

import torch

import linformer.modeling.local_global as lg
from linformer.bench.common import competing_processes
from linformer.modeling import threads as cpu_threads
from linformer.modeling.attention import LinformerSelfAttention
from linformer.modeling.configuration import LinformerConfig
from linformer.modeling.flops import forward_flops_per_token
from linformer.modeling.model import LinformerModel
from linformer.script_help import description


def config(n: int, attention: str) -> LinformerConfig:
    extra = dict(local_window=128, global_positions=[0, -1], length_policy="resample", mask_empty_windows=False,
                 exact_short_inputs=True, sharing="layerwise", projected_dim=128) if attention == "linformer" else {}
    return LinformerConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                           intermediate_size=1536, max_seq_len=n, attention=attention, **extra)


class AttentionClock:
    """Seconds spent inside the self-attention modules of a model (forward hooks on each)."""

    def __init__(self, model: torch.nn.Module):
        self.seconds, self._start = 0.0, 0.0
        for m in model.modules():
            if isinstance(m, LinformerSelfAttention):
                m.register_forward_pre_hook(self._enter)
                m.register_forward_hook(self._leave)

    def _enter(self, *_):
        self._start = time.perf_counter()

    def _leave(self, *_):
        self.seconds += time.perf_counter() - self._start


def main() -> None:
    ap = argparse.ArgumentParser(description=description(__doc__, __file__))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--chunks", type=int, nargs="+", default=[18], help="log2 of CHUNK_ELEMENTS")
    ap.add_argument("--kernels", nargs="+", default=["blocked"], choices=["blocked", "compiled", "flex"])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--policies", nargs="+", default=["fixed", "adaptive"], choices=list(cpu_threads.POLICIES),
                    help="the CPU thread policy of both models")
    args = ap.parse_args()
    torch.manual_seed(0)
    models = {a: LinformerModel(config(args.n, a)).eval() for a in ("full", "linformer")}
    clocks = {a: AttentionClock(m) for a, m in models.items()}
    flop_ratio = forward_flops_per_token(models["linformer"].config, args.n) / forward_flops_per_token(
        models["full"].config, args.n)
    ids = torch.randint(5, 30000, (1, args.n))
    omp = {k: os.environ[k] for k in ("OMP_PROC_BIND", "OMP_WAIT_POLICY", "GOMP_CPU_AFFINITY") if k in os.environ}
    print(f"n = {args.n}, FLOP ratio (local/global / full) {flop_ratio:.3f}; torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs; OpenMP settings {omp or 'none'}")
    print("| threads | load | policy | kernel | chunk | full (ms) | its attention | local/global (ms) | its attention "
          "| time ratio | x FLOP ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for threads in args.threads:
        for load in ("idle", "one busy process"):
            torch.set_num_threads(threads)
            with competing_processes(0 if load == "idle" else 1):
                for policy, kernel in itertools.product(args.policies, args.kernels):
                    cpu_threads.set_policy(policy)
                    for c, full, full_att, local, local_att in _rounds(models, clocks, ids, kernel, args):
                        inside = "-" if kernel == "compiled" else f"{1000 * local_att:.0f}"  # hooks compiled away
                        print(f"| {threads} | {load} | {policy} | {kernel} | 2^{c} | {1000 * full:.0f} | "
                              f"{1000 * full_att:.0f} | {1000 * local:.0f} | {inside} | {local / full:.3f} | "
                              f"{local / full / flop_ratio:.2f} |", flush=True)


_COMPILED: dict[tuple[int, int], torch.nn.Module] = {}


def _compiled(model: torch.nn.Module, chunk: int) -> torch.nn.Module:
    """A copy of the model (the same weights, without the attention clock's hooks, which would break its graph)
    under torch.compile, once per (thread count, chunk size): inductor writes the thread count into its CPU kernels,
    and the chunk size sets the graph (its first call compiles: minutes at n = 4096)."""
    threads = torch.get_num_threads()
    if any(t != threads for t, _ in _COMPILED):  # compiled for another thread count: compile everything again
        torch._dynamo.reset()
        _COMPILED.clear()
    key = (threads, chunk)
    if key not in _COMPILED:  # a twin per chunk size: each keeps its own compiled graph
        twin = LinformerModel(model.config).eval()
        twin.load_state_dict(model.state_dict())
        _COMPILED[key] = torch.compile(twin, dynamic=False)
    return _COMPILED[key]


def _rounds(models: dict, clocks: dict, ids: torch.Tensor, kernel: str, args):
    """For each chunk size: the median forward time of each model and of its attention modules, over interleaved
    rounds (the order alternating)."""
    base = models["linformer"]
    base.set_attn_implementation("flex_attention" if kernel == "flex" else "sdpa")
    with torch.inference_mode():
        for c in args.chunks:
            lg.CHUNK_ELEMENTS = 1 << c
            if kernel == "compiled":
                models = {**models, "linformer": _compiled(base, c)}
            for name, m in models.items():
                t0 = time.perf_counter()
                m(ids)  # warm-up (and the compile)
                if kernel == "compiled" and name == "linformer":
                    print(f"(warm-up of the compiled model at {torch.get_num_threads()} threads, 2^{c}: "
                          f"{time.perf_counter() - t0:.0f} s, its compile included the first time)", flush=True)
            times = {"full": [], "linformer": []}
            inside = {"full": [], "linformer": []}
            for r in range(args.reps):
                for name in (("full", "linformer") if r % 2 == 0 else ("linformer", "full")):
                    clocks[name].seconds = 0.0
                    t0 = time.perf_counter()
                    models[name](ids)
                    times[name].append(time.perf_counter() - t0)
                    inside[name].append(clocks[name].seconds)
            median = {k: (statistics.median(times[k]), statistics.median(inside[k])) for k in times}
            yield (c, *median["full"], *median["linformer"])


if __name__ == "__main__":
    main()
