"""Dynamic MLM masking (RoBERTa / paper): 15% of non-special tokens are chosen; of those 80% become `<mask>`,
10% a random NON-special token and 10% stay unchanged. Special tokens and padding are never chosen; labels
are -100 everywhere except at chosen positions.

HF `DataCollatorForLanguageModeling` does the padding and the 15% / 80% / 10% draws correctly, but its random
replacement draws from the whole vocabulary, specials included (`torch.randint(len(tokenizer))`). We subclass it
and replace only that draw. Randomness comes from one `torch.Generator` (pass `generator` or `seed`), so a
given seed and batch order give the same masks.

``BlockCollator`` collates packed blocks without masking (attention transfer), cut short where asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import DataCollatorForLanguageModeling

from .streams import padded_length


@dataclass
class MLMCollator(DataCollatorForLanguageModeling):
    """`MLMCollator(tokenizer, mlm_probability=0.15, seed=0)` or `(..., generator=torch.Generator())`.

    Takes a list of examples (dicts with input_ids, or lists of ids), pads them on the right to the longest, and
    returns {input_ids, attention_mask, labels} as torch tensors. ``pad_to_multiple_of`` pads further, to a multiple
    of it, but never past ``max_length`` (the model's n, which a Linformer refuses to exceed: ``streams.padded_length``,
    as finetuning's batches); it needs ``max_length``.
    """

    generator: torch.Generator | None = None
    max_length: int | None = None

    def __post_init__(self):
        if self.pad_to_multiple_of is not None and self.max_length is None:
            raise ValueError("MLMCollator(pad_to_multiple_of=...) needs max_length (the model's n), which padding must "
                             "not pass.")
        gen = self.generator
        super().__post_init__()  # resets self.generator
        self.generator = gen
        if self.generator is None and self.seed is not None:
            self.generator = torch.Generator().manual_seed(self.seed)
        special = set(self.tokenizer.all_special_ids)
        vocab = len(self.tokenizer)
        self._allowed = torch.tensor([i for i in range(vocab) if i not in special], dtype=torch.long)
        self._special = torch.tensor(sorted(special), dtype=torch.long)
        self._mask_id = self.tokenizer.mask_token_id

    def _reseed_for_worker(self) -> None:
        """In a DataLoader worker, each worker gets its own stream (base seed + worker id), else every worker
        would draw the same masks from its copy of the generator."""
        info = torch.utils.data.get_worker_info()
        if info is not None and getattr(self, "_worker_id", None) != info.id:
            base = self.seed if self.seed is not None else (
                self.generator.initial_seed() if self.generator is not None else info.seed)
            self.generator = torch.Generator().manual_seed(base + info.id)
            self._worker_id = info.id

    def torch_call(self, examples: list[Any]) -> dict[str, torch.Tensor]:
        self._reseed_for_worker()
        rows = [e["input_ids"] if isinstance(e, Mapping) else e for e in examples]
        lengths = {len(r) for r in rows}
        length = self._padded_length(max(lengths))
        if lengths == {length}:
            # packed pretraining blocks all have length n: no padding needed
            input_ids = torch.as_tensor(np.asarray([np.asarray(r) for r in rows]), dtype=torch.long)
            attention_mask = torch.ones_like(input_ids)
        else:
            batch = self.tokenizer.pad([{"input_ids": list(r)} for r in rows], return_tensors="pt",
                                       padding="max_length", max_length=length)
            input_ids = batch["input_ids"].long()
            attention_mask = batch["attention_mask"].long()
        input_ids, labels = self.torch_mask_tokens(input_ids)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    def _padded_length(self, longest: int) -> int:
        """The batch's length: its longest row, or the next multiple of pad_to_multiple_of up to max_length."""
        if self.pad_to_multiple_of is None:
            return longest
        return padded_length(longest, self.max_length, self.pad_to_multiple_of)

    def torch_mask_tokens(self, inputs: torch.Tensor, special_tokens_mask=None, offset_mapping=None):
        inputs = inputs.clone()
        labels = inputs.clone()
        # special ids (includes <pad>) by id lookup: faster than get_special_tokens_mask and covers padding
        no_mask = torch.isin(inputs, self._special)
        prob = torch.full(labels.shape, self.mlm_probability)
        prob.masked_fill_(no_mask, 0.0)
        g = self.generator
        masked = torch.bernoulli(prob, generator=g).bool()
        labels[~masked] = -100
        replaced = torch.bernoulli(torch.full(labels.shape, self.mask_replace_prob), generator=g).bool() & masked
        inputs[replaced] = self._mask_id
        remaining = 1.0 - self.mask_replace_prob
        if remaining > 0 and self.random_replace_prob > 0:
            p_rand = self.random_replace_prob / remaining
            rand = torch.bernoulli(torch.full(labels.shape, p_rand), generator=g).bool() & masked & ~replaced
            picks = torch.randint(len(self._allowed), labels.shape, generator=g)
            inputs[rand] = self._allowed[picks][rand]
        return inputs, labels


class BlockCollator:
    """Collates packed blocks (no masking: every token is real), cut short where asked.

    Downstream inputs are often far shorter than n (an SST-2 sentence fills a few of k projected columns), a regime
    that n-token blocks never show the student. With ``short_fraction`` > 0 that share of batches is cut to a length
    drawn uniformly from ``min_length``..n (the block's closing token, [SEP] or </s>, kept last); ``length`` cuts
    every batch to one length (the short held-out evaluation). The whole global micro-batch gets one length, drawn
    from the generator BlockStream seeds per batch, so every rank and every resume cuts alike.
    """

    generator = None  # BlockStream seeds one per batch

    def __init__(self, short_fraction: float = 0.0, min_length: int = 8, length: int | None = None):
        self.short_fraction, self.min_length, self.length = short_fraction, min_length, length

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        ids = torch.tensor([r["input_ids"] for r in rows], dtype=torch.long)
        cut = self.length
        if cut is None and self.short_fraction > 0 and \
                torch.rand((), generator=self.generator).item() < self.short_fraction:
            cut = int(torch.randint(self.min_length, ids.shape[1] + 1, (), generator=self.generator))
        if cut is not None:
            ids = cut_blocks(ids, cut)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def cut_blocks(blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Blocks cut to ``length`` tokens, the closing token ([SEP] or </s>) kept last."""
    if length >= blocks.shape[1]:
        return blocks
    return torch.cat([blocks[:, : length - 1], blocks[:, -1:]], dim=1)
