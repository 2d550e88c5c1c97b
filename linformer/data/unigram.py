"""What a masked language model scores before it uses context, and the plateau rule built on it.

Two perplexities on the validation split's MLM targets, both from the train split's token frequencies:

- ``unigram_perplexity``: predicting every target from its frequency alone.
- ``context_free_perplexity``: the best a model reads no context can do. Under RoBERTa's masking (the collator's:
  80% of targets show <mask>, 10% a random non-special token, 10% themselves) a model that reads only its own
  position's input token learns to copy it, and scores well below the unigram perplexity (a factor of about
  exp(-0.1 x the unigram entropy) from the kept tokens alone). This is the plateau an MLM sits on before its
  attention matters.

A pretraining run reports its validation perplexity beside both, and runs compared while still on the plateau
(``on_plateau``; Figure 3) are not judged: their attention has not yet made a difference.
"""

from __future__ import annotations

import math

import numpy as np

# A run is on the plateau while its validation perplexity is above this fraction of the context-free perplexity,
# i.e. while it has gained less than -ln(0.9) = 0.105 nats per target from its context. No model reading no context
# gets below the context-free perplexity in expectation, but an evaluation scores a finite draw of masks: the kept
# 10% of targets score near 0 nats and the <mask>ed 80% near the unigram entropy, so the per-target losses spread by
# several nats and a held-out score of a few thousand targets scatters by a few hundredths of a nat around the
# bound. A margin of 0.105 nats lies well outside that scatter: a run below it has learned from its context.
PLATEAU_RATIO = 0.9


def on_plateau(ppl: float | None, context_free_ppl: float | None) -> bool | None:
    """Whether `ppl` is still on the plateau of a model that reads no context (its `context_free_ppl`,
    ``context_free_perplexity``); None where either is unknown: the check cannot be made, which a caller must not
    read as "off the plateau"."""
    if ppl is None or context_free_ppl is None:
        return None
    return ppl > PLATEAU_RATIO * context_free_ppl


def _token_counts(split, vocab_size: int, special: np.ndarray, rows: int) -> np.ndarray:
    """How often each id occurs in `split`'s input_ids (read `rows` blocks at a time), special ids counted 0."""
    total = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(split), rows):
        ids = np.asarray(split[start:start + rows]["input_ids"], dtype=np.int64)
        total += np.bincount(ids.ravel(), minlength=vocab_size)[:vocab_size]
    total[special] = 0
    return total


def _counts(train, validation, vocab_size: int, special_ids: list[int], rows: int):
    """(train counts, validation counts, the non-special ids) of the two splits."""
    special = np.asarray(sorted(set(special_ids)), dtype=np.int64)
    allowed = np.setdiff1d(np.arange(vocab_size), special)
    return (_token_counts(train, vocab_size, special, rows), _token_counts(validation, vocab_size, special, rows),
            allowed)


def _log_unigram(train_counts: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """log p(t) over the non-special ids `allowed`: train frequencies, add-one smoothed over them."""
    counts = train_counts[allowed]
    return np.log(counts + 1.0) - np.log(counts.sum() + len(allowed))


def mlm_input_shares() -> tuple[float, float, float]:
    """The shares of MLM targets whose input is <mask>, a random non-special token and the token itself, as the
    collator (``collator.MLMCollator``, Hugging Face's draws) makes them."""
    from .collator import MLMCollator

    mask, random = MLMCollator.mask_replace_prob, MLMCollator.random_replace_prob
    return mask, random, 1.0 - mask - random


def _unigram_nats(train_counts, val_counts, allowed) -> float:
    q = val_counts[allowed]
    return -float((q * _log_unigram(train_counts, allowed)).sum()) / q.sum()


def _context_free_nats(train_counts, val_counts, allowed, shares: tuple[float, float, float]) -> float:
    """Mean loss, on the validation targets, of the Bayes predictor that sees only the input token at the target's
    position: prior p (the smoothed train unigram), and the input drawn as the collator draws it (shares a, b, c of
    <mask>, a random one of the K non-special ids, the target itself). For input <mask> it predicts p(t); for an
    input token y, P(t | y) = p(t) (b/K + c [t = y]) / (b/K + c p(y)), so with r = cK/b

        -log P(t | t) = -log p(t) - log(b/K + c) + log(b/K + c p(t))
        -log P(t | y) = -log p(t) + log(1 + r p(y))                     (y != t)

    and a random input (uniform over the K ids, the target among them) costs on average
    ((K-1) (-log p(t)) + sum_y log(1 + r p(y)) - log(1 + r p(t)) - log P(t | t)) / K."""
    a, b, c = shares
    log_p = _log_unigram(train_counts, allowed)
    p, K = np.exp(log_p), len(allowed)
    q = val_counts[allowed] / val_counts[allowed].sum()
    nats = a * -log_p
    if b > 0 or c > 0:
        keep = -log_p - math.log(b / K + c) + np.log(b / K + c * p)  # -log P(t | t)
        nats = nats + c * keep
        if b > 0:
            r = c * K / b
            spread = np.log1p(r * p)
            nats = nats + b * ((K - 1) * -log_p + spread.sum() - spread + keep) / K
    return float((q * nats).sum())


def unigram_perplexity(train, validation, vocab_size: int, special_ids: list[int], rows: int = 4096) -> float:
    """Perplexity, on the validation split's MLM targets (its non-special tokens, of which the collator masks a
    uniform 15%), of predicting every token from its train-split frequency alone (add-one smoothed over the
    non-special vocabulary). Splits: datasets of input_ids blocks, read `rows` blocks at a time. NaN for a
    validation split without a target."""
    return frequency_perplexities(train, validation, vocab_size, special_ids, rows)[0]


def context_free_perplexity(train, validation, vocab_size: int, special_ids: list[int], rows: int = 4096,
                            shares: tuple[float, float, float] | None = None) -> float:
    """Perplexity, on the validation split's MLM targets, of the best model that reads no context: it sees only its
    own position's input token (<mask>, a random non-special token or the target itself, in the collator's
    `shares`: ``mlm_input_shares``) and knows the train split's smoothed token frequencies (``_context_free_nats``).
    NaN for a validation split without a target."""
    return frequency_perplexities(train, validation, vocab_size, special_ids, rows, shares)[1]


def frequency_perplexities(train, validation, vocab_size: int, special_ids: list[int], rows: int = 4096,
                           shares: tuple[float, float, float] | None = None) -> tuple[float, float]:
    """(``unigram_perplexity``, ``context_free_perplexity``) from one count of each split."""
    train_counts, val_counts, allowed = _counts(train, validation, vocab_size, special_ids, rows)
    if val_counts.sum() == 0:
        return float("nan"), float("nan")
    shares = mlm_input_shares() if shares is None else shares
    return (math.exp(_unigram_nats(train_counts, val_counts, allowed)),
            math.exp(_context_free_nats(train_counts, val_counts, allowed, shares)))


def corpus_perplexities(splits, tokenizer) -> tuple[float, float]:
    """``frequency_perplexities`` of a prepared corpus (its "train" and "validation" splits) under the tokenizer that
    made it: its vocabulary and special ids. The one call of prepare_corpus (once per corpus), of its reuse of an
    older manifest and of a pretraining start on one."""
    return frequency_perplexities(splits["train"], splits["validation"], len(tokenizer), tokenizer.all_special_ids)


__all__ = ["PLATEAU_RATIO", "context_free_perplexity", "corpus_perplexities", "frequency_perplexities",
           "mlm_input_shares", "on_plateau", "unigram_perplexity"]
