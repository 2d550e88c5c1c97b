import torch

from linformer.data.collator import BlockCollator, MLMCollator


def _batch(tokenizer, rows=128, length=256, seed=0):
    """Random non-special ids with <s>/</s> at the ends and some rows shorter (padded by the collator)."""
    g = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids)
    allowed = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    out = []
    for r in range(rows):
        n = length if r % 4 else length // 2
        body = allowed[torch.randint(len(allowed), (n - 2,), generator=g)].tolist()
        out.append({"input_ids": [tokenizer.bos_token_id, *body, tokenizer.eos_token_id]})
    return out


def test_masking_statistics(tokenizer):
    examples = _batch(tokenizer)
    batch = MLMCollator(tokenizer, seed=0)(examples)
    orig = MLMCollator(tokenizer, mlm_probability=0.0, seed=0)(examples)["input_ids"]
    ids, labels, attn = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert ids.dtype == labels.dtype == torch.long and ids.shape == labels.shape == attn.shape
    special = torch.isin(orig, torch.tensor(tokenizer.all_special_ids))
    assert (orig[attn == 0] == tokenizer.pad_token_id).all()
    masked = labels != -100
    # never special tokens or padding; labels hold the original ids exactly where masked
    assert not (masked & special).any() and not (masked & (attn == 0)).any()
    assert (labels[masked] == orig[masked]).all()
    assert (ids[~masked] == orig[~masked]).all()
    rate = masked.sum().item() / (~special).sum().item()
    assert abs(rate - 0.15) < 0.01, rate
    n = masked.sum().item()
    to_mask = (ids[masked] == tokenizer.mask_token_id).float().mean().item()
    unchanged = (ids[masked] == orig[masked]).float().mean().item()
    rand = 1 - to_mask - unchanged
    assert abs(to_mask - 0.8) < 0.02 and abs(unchanged - 0.1) < 0.015 and abs(rand - 0.1) < 0.015, (n, to_mask, rand)
    # random replacements are never special tokens (HF's collator can draw them)
    assert not torch.isin(ids[masked & (ids != orig)], torch.tensor(
        [i for i in tokenizer.all_special_ids if i != tokenizer.mask_token_id])).any()


def test_random_replacement_never_special(tokenizer):
    coll = MLMCollator(tokenizer, mask_replace_prob=0.0, random_replace_prob=1.0, seed=1)
    batch = coll(_batch(tokenizer, rows=64, length=128))
    rnd = batch["input_ids"][batch["labels"] != -100]
    assert len(rnd) > 500 and not torch.isin(rnd, torch.tensor(tokenizer.all_special_ids)).any()


def test_reproducible_with_seed_or_generator(tokenizer):
    ex = _batch(tokenizer, rows=8, length=64)
    a = MLMCollator(tokenizer, seed=3)(ex)
    b = MLMCollator(tokenizer, seed=3)(ex)
    c = MLMCollator(tokenizer, generator=torch.Generator().manual_seed(3))(ex)
    d = MLMCollator(tokenizer, seed=4)(ex)
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], c["labels"])
    assert not torch.equal(a["labels"], d["labels"])
    # dynamic: the next batch from the same collator gets new masks
    coll = MLMCollator(tokenizer, seed=3)
    assert not torch.equal(coll(ex)["labels"], coll(ex)["labels"])


def test_accepts_plain_lists(tokenizer):
    batch = MLMCollator(tokenizer, seed=0)([[0, 10, 11, 2], [0, 12, 2]])
    assert batch["input_ids"].shape == (2, 4)
    assert batch["attention_mask"].tolist()[1] == [1, 1, 1, 0] and batch["labels"][1, 3] == -100


def test_equal_length_fast_path_and_numpy_rows(tokenizer):
    import numpy as np

    rows = [{"input_ids": np.array([0, 10, 11, 12, 2], dtype=np.int32)} for _ in range(3)]
    batch = MLMCollator(tokenizer, seed=0)(rows)
    assert batch["input_ids"].dtype == torch.long and batch["attention_mask"].all()
    assert batch["input_ids"].shape == (3, 5) and (batch["labels"][:, [0, 4]] == -100).all()


def test_dataloader_workers_draw_different_masks(tokenizer):
    ex = [{"input_ids": [0, *range(10, 60), 2]} for _ in range(8)]
    loader = torch.utils.data.DataLoader(ex, batch_size=4, num_workers=2,
                                         collate_fn=MLMCollator(tokenizer, seed=0))
    a, b = list(loader)  # batch 0 from worker 0, batch 1 from worker 1
    assert not torch.equal(a["labels"], b["labels"])


def test_short_batches_keep_the_closing_token_and_repeat_with_the_seed():
    rows = [{"input_ids": [101, *range(1000, 1030), 102]} for _ in range(3)]  # 32 tokens, [CLS] ... [SEP]
    blocks = BlockCollator(short_fraction=0.5, min_length=4)

    def lengths(seed):
        out = []
        for g in range(40):
            blocks.generator = torch.Generator().manual_seed(seed * 7_919 + g)
            ids = blocks(rows)["input_ids"]
            assert ids[0, 0] == 101 and (ids[:, -1] == 102).all() and (ids == ids[0]).all()  # one cut per batch
            out.append(ids.shape[1])
        return out

    first = lengths(0)
    assert first == lengths(0) and first != lengths(1)
    assert 8 < sum(n < 32 for n in first) < 32 and min(first) >= 4  # about half cut, none below min_length
    assert BlockCollator(length=8)(rows)["input_ids"].tolist()[0] == [101, *range(1000, 1006), 102]


def test_padding_to_a_multiple_never_passes_max_length(tokenizer):
    """pad_to_multiple_of had no cap: a batch whose longest row was cut to n = 13 came out 16 long, which the
    Linformer refuses. Padding stops at max_length (the model's n), as finetuning's batches do; without a
    max_length the multiple is refused up front."""
    import pytest

    coll = MLMCollator(tokenizer, seed=0, pad_to_multiple_of=8, max_length=13)
    reaches_n = [[0, *range(10, 21), 2], [0, 10, 2]]  # 13 and 3 tokens
    assert coll(reaches_n)["input_ids"].shape == (2, 13)
    assert coll([[0, 10, 2]])["input_ids"].shape == (1, 8)  # below n: still a multiple of 8
    assert coll([reaches_n[0]] * 2)["attention_mask"].all()  # rows of n tokens: nothing padded
    with pytest.raises(ValueError, match="needs max_length"):
        MLMCollator(tokenizer, pad_to_multiple_of=8)
