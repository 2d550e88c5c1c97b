"""A Linformer against its full-attention reference: the same weights attending fully, and the relative error.

Transfer fits a Linformer to its reference, distillation to a finetuned teacher's layers, and the fidelity report
measures how far one is from its source: all with the one error defined here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .attention import LinformerSelfAttention


@contextlib.contextmanager
def full_attention(model) -> Iterator[None]:
    """Run the model's Linformer layers with full attention inside the block: the teacher of the same weights."""
    layers = [m for m in model.modules() if isinstance(m, LinformerSelfAttention)]
    modes = [m.linformer for m in layers]
    for m in layers:
        m.linformer = False
    try:
        yield
    finally:
        for m, mode in zip(layers, modes):
            m.linformer = mode


def squared_relative_error(student: torch.Tensor, teacher: torch.Tensor,
                           mask: torch.Tensor | None = None) -> torch.Tensor:
    """||student - teacher||^2 / ||teacher||^2 (in float32 at least: float64 for float64 outputs), over the real
    tokens (mask 1, shape (B, T)) of a padded batch when a mask is given."""
    acc = torch.promote_types(torch.promote_types(student.dtype, teacher.dtype), torch.float32)
    s, t = student.to(acc), teacher.to(acc)
    if mask is not None:
        m = mask.unsqueeze(-1).to(s.dtype)
        s, t = s * m, t * m
    return ((s - t) ** 2).sum() / (t ** 2).sum().clamp_min(1e-12)
