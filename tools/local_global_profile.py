"""Where the local/global forward's time goes beside a busy process: the profiler's self time per operation type,
idle and beside one busy process (bench.common.competing_processes), for full attention and the local/global
Linformer at all-MiniLM-L6-v2's shape (the models of tools/local_global_chunks.py), batch 1, inference.

    python tools/local_global_profile.py [--n 4096] [--threads 2] [--forwards 2] [--top 14]

Prints per model its total self time idle and loaded, then its `--top` operation types by idle time: calls per
forward, milliseconds per forward idle and loaded, their ratio, and the idle time per call.
"""

import argparse
import collections

import torch
from local_global_chunks import config
from torch.profiler import ProfilerActivity, profile

from linformer.bench.common import competing_processes
from linformer.modeling.model import LinformerModel
from linformer.script_help import description


def self_times(model: torch.nn.Module, ids: torch.Tensor, forwards: int) -> dict[str, tuple[float, float]]:
    """Operation type -> (calls, self milliseconds) per forward, after one warm-up forward."""
    with torch.inference_mode():
        model(ids)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(forwards):
                model(ids)
    out = collections.defaultdict(lambda: (0.0, 0.0))
    for e in prof.key_averages():
        calls, ms = out[e.key]
        out[e.key] = (calls + e.count / forwards, ms + e.self_cpu_time_total / 1000 / forwards)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=description(__doc__, __file__))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--forwards", type=int, default=2)
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    models = {a: LinformerModel(config(args.n, a)).eval() for a in ("full", "linformer")}
    ids = torch.randint(5, 30000, (1, args.n))
    times = {}
    for load in (0, 1):
        with competing_processes(load):
            for name, model in models.items():
                times[name, load] = self_times(model, ids, args.forwards)
    print(f"n = {args.n}, {args.threads} torch threads, {args.forwards} profiled forwards per model and load")
    for name in models:
        idle, busy = times[name, 0], times[name, 1]
        total = [sum(ms for _, ms in t.values()) for t in (idle, busy)]
        print(f"\n{name}: self time per forward {total[0]:.0f} ms idle, {total[1]:.0f} ms beside a busy process "
              f"({total[1] / total[0]:.2f}x)")
        print("| operation | calls | idle (ms) | loaded (ms) | loaded / idle | idle us per call |")
        print("|---|---|---|---|---|---|")
        for key in sorted(idle, key=lambda k: -idle[k][1])[:args.top]:
            calls, ms = idle[key]
            loaded = busy.get(key, (0.0, 0.0))[1]
            print(f"| {key} | {calls:.0f} | {ms:.1f} | {loaded:.1f} | {loaded / max(ms, 1e-9):.2f}x | "
                  f"{1000 * ms / max(calls, 1):.0f} |")


if __name__ == "__main__":
    main()
