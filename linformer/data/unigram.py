"""The perplexity of token frequencies alone: the plateau a masked language model sits on before it uses context.

A pretraining run reports its validation perplexity beside this one, and runs compared while still on it (Figure 3)
are not judged: their attention has not yet made a difference.
"""

from __future__ import annotations

import math

import numpy as np

# An MLM whose validation perplexity is above this fraction of the unigram perplexity still predicts little more
# than token frequencies: runs compared there differ by noise, whatever their attention.
PLATEAU_RATIO = 0.9


def on_unigram_plateau(ppl: float | None, unigram_ppl: float | None) -> bool | None:
    """Whether `ppl` is still on the plateau of `unigram_ppl`; None where either is unknown: the check cannot be
    made, which a caller must not read as "off the plateau"."""
    if ppl is None or unigram_ppl is None:
        return None
    return ppl > PLATEAU_RATIO * unigram_ppl


def unigram_perplexity(train, validation, vocab_size: int, special_ids: list[int], rows: int = 4096) -> float:
    """Perplexity, on the validation split's MLM targets (its non-special tokens, of which the collator masks a
    uniform 15%), of predicting every token from its train-split frequency alone (add-one smoothed over the
    non-special vocabulary): the plateau an MLM sits on before it uses context. Splits: datasets of input_ids
    blocks, read `rows` blocks at a time."""
    special = np.asarray(sorted(set(special_ids)), dtype=np.int64)

    def counts(split) -> np.ndarray:
        total = np.zeros(vocab_size, dtype=np.int64)
        for start in range(0, len(split), rows):
            ids = np.asarray(split[start:start + rows]["input_ids"], dtype=np.int64)
            total += np.bincount(ids.ravel(), minlength=vocab_size)[:vocab_size]
        total[special] = 0
        return total

    train_counts, val_counts = counts(train), counts(validation)
    log_p = np.log(train_counts + 1.0) - np.log(train_counts.sum() + vocab_size - len(special))
    targets = val_counts.sum()
    if targets == 0:
        return float("nan")
    return math.exp(-float((val_counts * log_p).sum()) / targets)


__all__ = ["PLATEAU_RATIO", "on_unigram_plateau", "unigram_perplexity"]
