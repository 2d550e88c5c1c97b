"""torch.compile in the training core (``trainer.compile``): Dynamo's counts, and its recompile limit.

The core compiles with ``nn.Module.compile``, which compiles the module's forward in place, so the model keeps its class, its parameter names and
its state dict: checkpoints, ``save_pretrained`` and a resume without compile see the same model. Dynamo's counters
are per process; the trainer reports what its run added (``CompileCounts.since``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CompileCounts:
    """Graphs Dynamo compiled (a recompile is one more) and graph breaks it met, in this process so far."""

    graphs: int = 0
    graph_breaks: int = 0

    @classmethod
    def now(cls) -> CompileCounts:
        with contextlib.suppress(Exception):
            from torch._dynamo.utils import counters

            return cls(int(counters["stats"]["unique_graphs"]), int(sum(counters["graph_break"].values())))
        return cls()

    def since(self, before: CompileCounts) -> CompileCounts:
        return CompileCounts(self.graphs - before.graphs, self.graph_breaks - before.graph_breaks)


def raise_recompile_limit(limit: int) -> None:
    """Past Dynamo's recompile limit (8 by default) a function silently runs eagerly; a process that compiles many
    models or shapes (the throughput benchmark) raises it."""
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), limit))
    for name in ("accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 16 * limit))


__all__ = ["CompileCounts", "raise_recompile_limit"]
