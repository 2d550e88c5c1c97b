"""Table 3 of Wang et al. 2020 (arXiv 2006.04768): Linformer vs a standard Transformer, inference on a V100.

Left half: time saved (speed-up); right half: memory saved; rows n, columns k in (128, 256, 512, 1024, 2048).
The paper does not say how its "standard Transformer" computes attention; we take it to be 2020's eager attention
(materialised n x n softmax) in fairseq, the authors' toolkit: our reading, not the paper's words.
"""

from __future__ import annotations

PAPER_KS = (128, 256, 512, 1024, 2048)

PAPER_TIME_SAVED: dict[int, tuple[float, ...]] = {
    512: (1.5, 1.3),
    1024: (1.7, 1.6, 1.3),
    2048: (2.6, 2.4, 2.1, 1.3),
    4096: (3.4, 3.2, 2.8, 2.2, 1.3),
    8192: (5.5, 5.0, 4.4, 3.5, 2.1),
    16384: (8.6, 7.8, 7.0, 5.6, 3.3),
    32768: (13, 12, 11, 8.8, 5.0),
    65536: (20, 18, 16, 14, 7.9),
}

PAPER_MEMORY_SAVED: dict[int, tuple[float, ...]] = {
    512: (1.7, 1.5),
    1024: (3.0, 2.9, 1.8),
    2048: (6.1, 5.6, 3.6, 2.0),
    4096: (14, 13, 8.3, 4.3, 2.3),
    8192: (28, 26, 17, 8.5, 4.5),
    16384: (56, 48, 32, 16, 8),
    32768: (56, 48, 36, 18, 16),
    65536: (60, 52, 40, 20, 18),
}


def paper_value(table: dict[int, tuple[float, ...]], n: int, k: int) -> float | None:
    row = table.get(n)
    if row is None or k not in PAPER_KS:
        return None
    i = PAPER_KS.index(k)
    return row[i] if i < len(row) else None


__all__ = ["PAPER_KS", "PAPER_MEMORY_SAVED", "PAPER_TIME_SAVED", "paper_value"]
