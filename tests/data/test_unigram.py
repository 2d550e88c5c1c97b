"""The perplexity of token frequencies alone, and the plateau test that Figure 3 and the pretraining summary use."""

import math

import datasets
import pytest

from linformer.data.unigram import on_unigram_plateau, unigram_perplexity


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


def test_the_plateau_is_within_ten_percent_of_the_unigram_perplexity():
    assert on_unigram_plateau(2117.0, 2150.0) and on_unigram_plateau(1950.0, 2150.0)
    assert not on_unigram_plateau(1900.0, 2150.0)
    assert on_unigram_plateau(1900.0, 2150.0) is False
    # unknown is not "off the plateau": a caller that judges runs must say the check could not be made
    assert on_unigram_plateau(None, 2150.0) is None and on_unigram_plateau(2117.0, None) is None
