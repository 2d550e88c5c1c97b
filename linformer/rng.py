"""The global random generators (Python's, numpy's, torch's) as a library call leaves them: as it found them."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import numpy as np
import torch


@contextlib.contextmanager
def rng_kept() -> Iterator[None]:
    """Python's, numpy's and torch's global generators put back after the block as it found them, so that a
    notebook's later draws do not depend on what a call drew (a fresh model's weights, dropout) or seeded. CUDA's are
    kept where CUDA was in use before the block (asking for them would start it)."""
    kept = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(kept[0])
        np.random.set_state(kept[1])
        torch.random.set_rng_state(kept[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[None]:
    """The global generators seeded with `seed` for the block (None: left as they are) and put back after
    (``rng_kept``). A run's data order and masks come from generators of its own (seed, step), and a resume restores
    the global ones from its checkpoint: neither needs them left seeded."""
    with rng_kept():
        if seed is not None:
            seed_all(seed)
        yield


def seed_all(seed: int) -> None:
    """Python's, numpy's and torch's global generators (every device's) seeded with `seed`."""
    from accelerate.utils import set_seed  # accelerate's import costs; only where a seed is given

    set_seed(seed)
