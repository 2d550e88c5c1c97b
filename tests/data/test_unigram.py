"""The perplexities of token frequencies alone and of the best model that reads no context, and the plateau test
that Figure 3 and the pretraining summary use."""

import math

import datasets
import numpy as np
import pytest
import torch

from linformer.data.collator import MLMCollator
from linformer.data.unigram import (
    context_free_perplexity,
    frequency_perplexities,
    mlm_input_shares,
    on_plateau,
    unigram_perplexity,
)


def _split(blocks):
    return datasets.Dataset.from_dict({"input_ids": blocks})


@pytest.mark.parametrize("rows", [1, 4096])
def test_unigram_perplexity_by_hand_skips_special_tokens_and_smooths_unseen_ones(rows):
    # vocabulary of 10, specials 0-2: the train split's targets are 3 x3, 4 x1, 5 x2 (6 tokens), so with add-one
    # smoothing over the 7 non-special ids p(3) = 4/13, p(4) = 2/13 and the unseen p(9) = 1/13
    train = _split([[0, 3, 3, 4, 2], [0, 3, 5, 5, 2]])
    validation = _split([[0, 3, 4, 9, 2]])
    ppl = unigram_perplexity(train, validation, vocab_size=10, special_ids=[0, 1, 2, 2], rows=rows)
    assert ppl == pytest.approx(math.exp(-(math.log(4 / 13) + math.log(2 / 13) + math.log(1 / 13)) / 3))
    assert ppl == pytest.approx(6.5)


def test_a_validation_split_of_specials_only_has_no_unigram_perplexity():
    assert math.isnan(unigram_perplexity(_split([[0, 3, 2]]), _split([[0, 1, 2]]), 10, [0, 1, 2]))


def test_the_plateau_is_within_ten_percent_of_the_context_free_perplexity():
    assert on_plateau(2117.0, 2150.0) and on_plateau(1950.0, 2150.0)
    assert on_plateau(1900.0, 2150.0) is False
    # unknown is not "off the plateau": a caller that judges runs must say the check could not be made
    assert on_plateau(None, 2150.0) is None and on_plateau(2117.0, None) is None


def _brute_force_context_free(train_counts, val_counts, shares):
    """The Bayes predictor that sees only the input token, by enumerating every (target, input) pair: inputs 0..K-1
    (the non-special ids) and K (<mask>)."""
    a, b, c = shares
    K = len(train_counts)
    p = (train_counts + 1.0) / (train_counts.sum() + K)
    given = np.zeros((K, K + 1))  # P(input | target)
    given[:, K] = a
    given[:, :K] += b / K
    given[np.arange(K), np.arange(K)] += c
    joint = p[:, None] * given
    posterior = joint / joint.sum(axis=0, keepdims=True)  # P(target | input)
    q = val_counts / val_counts.sum()
    with np.errstate(divide="ignore"):
        loss = np.where(given > 0, -np.log(posterior), 0.0)
    return math.exp(float((q[:, None] * given * loss).sum()))


@pytest.mark.parametrize("shares", [(0.8, 0.1, 0.1), (0.5, 0.3, 0.2), (0.8, 0.2, 0.0), (0.8, 0.0, 0.2)])
def test_the_context_free_perplexity_is_the_bayes_predictor_that_sees_only_its_input_token(shares):
    # vocabulary of 10, specials 0-2: the non-special ids 3-9 are K = 7
    train = _split([[0, 3, 3, 3, 4, 5, 5, 6, 2], [0, 3, 3, 7, 7, 8, 2, 1, 1]])  # 1: padding
    validation = _split([[0, 3, 4, 9, 3, 5, 2], [0, 8, 8, 3, 2, 1, 1]])
    cf = context_free_perplexity(train, validation, vocab_size=10, special_ids=[0, 1, 2], shares=shares)
    train_counts, val_counts = np.bincount([3, 3, 3, 4, 5, 5, 6, 3, 3, 7, 7, 8], minlength=10)[3:], \
        np.bincount([3, 4, 9, 3, 5, 8, 8, 3], minlength=10)[3:]
    assert cf == pytest.approx(_brute_force_context_free(train_counts, val_counts, shares), rel=1e-10)
    unigram = unigram_perplexity(train, validation, vocab_size=10, special_ids=[0, 1, 2])
    # copying the kept tokens only helps; with none kept (c = 0) the input says nothing and it is the unigram's
    assert cf == pytest.approx(unigram, rel=1e-10) if shares[2] == 0 else cf < unigram


def test_the_context_free_perplexity_follows_the_collators_masking():
    assert mlm_input_shares() == pytest.approx((0.8, 0.1, 0.1))
    assert (MLMCollator.mask_replace_prob, MLMCollator.random_replace_prob) == mlm_input_shares()[:2]


def test_a_model_that_reads_no_context_approaches_the_bound_from_above_and_is_on_the_plateau(tokenizer):
    """A model that sees only its own input token (a logits table indexed by it, trained on the collator's masks of
    context-free text) gets no lower than the context-free perplexity, and far below the unigram one: the old rule
    (below 90% of the unigram perplexity) called such a model off the plateau."""
    torch.manual_seed(0)
    special = set(tokenizer.all_special_ids)
    V = len(tokenizer)
    allowed = torch.tensor([i for i in range(V) if i not in special])
    zipf = 1.0 / torch.arange(1, len(allowed) + 1, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)

    def blocks(rows):  # ids drawn independently: no context to learn from
        body = allowed[torch.multinomial(zipf, rows * 62, replacement=True, generator=g)].view(rows, 62)
        ends = torch.tensor([[tokenizer.bos_token_id]] * rows), torch.tensor([[tokenizer.eos_token_id]] * rows)
        return torch.cat([ends[0], body, ends[1]], dim=1).tolist()

    train, validation = blocks(2000), blocks(500)
    unigram, cf = frequency_perplexities(_split(train), _split(validation), V, tokenizer.all_special_ids)
    # logits of the target given the input token: an output bias (as an MLM head's) plus a row per input token
    bias, table = torch.zeros(V, requires_grad=True), torch.zeros(V, V, requires_grad=True)
    opt = torch.optim.Adam([bias, table], lr=0.02)
    collator = MLMCollator(tokenizer, seed=1)
    for _ in range(400):
        batch = collator([train[i] for i in torch.randint(len(train), (64,), generator=g).tolist()])
        m = batch["labels"] != -100
        loss = torch.nn.functional.cross_entropy(bias + table[batch["input_ids"][m]], batch["labels"][m])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        batch = MLMCollator(tokenizer, seed=2)(validation)
        m = batch["labels"] != -100
        x, t = batch["input_ids"][m], batch["labels"][m]
        ppl = math.exp(torch.nn.functional.cross_entropy(bias + table[x], t).item())
    # the bound's own predictor on the same draw of masks (4,700 targets: within a few percent of its expectation)
    p = torch.zeros(V, dtype=torch.float64)
    counts = torch.bincount(torch.tensor(train).ravel(), minlength=V).double()[allowed]
    p[allowed] = (counts + 1) / (counts.sum() + len(allowed))
    copy = p[t] * (0.1 / len(allowed) + 0.1 * (x == t)) / (0.1 / len(allowed) + 0.1 * p[x])
    bayes = math.exp(-torch.where(x == tokenizer.mask_token_id, p[t], copy).log().mean().item())
    assert bayes == pytest.approx(cf, rel=0.05)
    assert bayes < ppl < cf * 1.1  # near the bound, from above
    assert cf < 0.7 * unigram
    assert ppl < 0.9 * unigram and on_plateau(ppl, cf)  # the old rule (90% of the unigram) said "off the plateau"
