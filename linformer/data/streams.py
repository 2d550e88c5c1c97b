"""The order of training data, one home: which rows each global micro-batch takes (``EpochOrder``), and the streams
built on it: packed corpus blocks (``BlockStream``, pretraining and transfer) and task examples (``ExampleStream``,
finetuning and distillation). Every batch is a pure function of (seed, step), so a resumed run sees exactly the
batches the uninterrupted one would have, on any number of processes."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator

import numpy as np
import torch

from ..errors import ConfigError
from ..modeling.values import round_up

log = logging.getLogger(__name__)

COLUMNS = ["input_ids", "attention_mask", "labels"]  # what a task example feeds the model
TOKEN_TYPES = "token_type_ids"  # a pair's segment ids (BERT's tokenizers give them; RoBERTa's do not)
PAD_MULTIPLE = 8  # batches are padded to a multiple of this length where the model takes it (tensor-core shapes)
# How a BlockStream seeds its per-batch draws (masks, cuts), as run.json and each checkpoint record it: per optimizer
# step over its whole global batch, or (runs recorded without it) per global micro-batch: the same at grad_accum = 1
SEEDING_STEP, SEEDING_MICRO = "step", "micro-batch"
# The seed of the held-out blocks' order and masks, the same for every training seed (so val_ppl across seeds
# measures one set): 1, the set seed-0 runs have always had; runs recorded without it used seed + 1
VALIDATION_SEED = 1
# How an evaluation chooses the held-out blocks it scores (``BlockStream.held_out``), as run.json and each checkpoint
# record it: a number of blocks (trainer.eval_blocks), or (runs recorded without it) whole global micro-batches
SCORING_BLOCKS, SCORING_BATCHES = "blocks", "batches"
# Places of the held-out order masked by one collator call (SCORING_BLOCKS): chunk c holds places [c*64, c*64 + 64)
# of the split's order, all of them however many are scored, masked by a generator seeded by (seed, c). A block's
# masks are thus a function of the seed and its place alone (not of the batch, the processes, grad_accum or
# trainer.eval_blocks), drawn over 64 blocks at once rather than one call per block. Changing it changes the masks.
HELD_OUT_CHUNK = 64


def recorded_draws(state, seed: int) -> tuple[str, int, str]:
    """(batch seeding, validation seed, validation scoring) a checkpoint's `state` records, or those of a checkpoint
    saved before they were recorded: per micro-batch, the run's seed + 1, whole batches."""
    seeding = state.get("batch_seeding", SEEDING_MICRO)
    scoring = state.get("validation_scoring", SCORING_BATCHES)
    if seeding not in (SEEDING_STEP, SEEDING_MICRO) or scoring not in (SCORING_BLOCKS, SCORING_BATCHES):
        raise ConfigError(f"the checkpoint records a batch seeding {seeding!r} or validation scoring {scoring!r} "
                          "this version does not know: continue it with the version that began it")
    return seeding, int(state.get("validation_seed", seed + 1)), scoring


class EpochOrder:
    """Which rows global micro-batch g takes: epoch e = g // batches_per_epoch visits the rows in a permutation
    seeded by (seed, e). A pure function of (seed, g), so resume needs only the step and any number of processes
    sees the same global batches.

    ``drop_last``: epochs of whole global batches only (pretraining). Otherwise the last batch of an epoch is
    shorter, and with several processes it is filled from the start of the permutation, so every rank gets a full
    slice: up to ``global_micro - 1`` rows are read twice per epoch (DistributedSampler's padding repeats at most
    world - 1), and such an epoch's last batch is not one process's.

    ``lengths`` (tokens per row) groups rows of similar length into batches, so that dynamic padding pads little:
    the epoch's permutation is cut into megabatches of ``MEGA`` global batches, each sorted longest first and cut
    into batches, and the whole batches are then shuffled with the same seeded generator (a short last batch stays
    last). Every row is still visited once per epoch; only which rows share a batch changes.
    """

    MEGA = 50  # global batches per megabatch (as transformers' group_by_length)

    def __init__(self, num_rows: int, global_micro: int, seed: int, drop_last: bool, world: int = 1,
                 lengths=None):
        self.num_rows, self.global_micro, self.seed, self.world = num_rows, global_micro, seed, world
        self.drop_last = drop_last
        self.batches_per_epoch = num_rows // global_micro if drop_last else math.ceil(num_rows / global_micro)
        # a copy of its own: Arrow's buffers are read-only, and a caller's tensor may change
        self.lengths = None if lengths is None else torch.as_tensor(np.array(lengths, dtype=np.int64))
        if self.lengths is not None and len(self.lengths) != num_rows:
            raise ValueError(f"lengths has {len(self.lengths)} entries for {num_rows} rows")
        self._perm: tuple[int, torch.Tensor] | None = None

    def _epoch_perm(self, epoch: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        perm = torch.randperm(self.num_rows, generator=gen)
        if self.lengths is None:
            return perm
        mega = self.MEGA * self.global_micro
        grouped = torch.cat([chunk[torch.argsort(self.lengths[chunk], descending=True, stable=True)]
                             for chunk in perm.split(mega)])
        batches = list(grouped.split(self.global_micro))
        whole = len(batches) - (len(batches[-1]) < self.global_micro)
        order = torch.randperm(whole, generator=gen).tolist() + list(range(whole, len(batches)))
        return torch.cat([batches[i] for i in order])

    def rows(self, g: int) -> torch.Tensor:
        epoch, pos = divmod(g, self.batches_per_epoch)
        if self._perm is None or self._perm[0] != epoch:
            self._perm = (epoch, self._epoch_perm(epoch))
        perm = self._perm[1]
        idx = perm[pos * self.global_micro : (pos + 1) * self.global_micro]
        if self.world > 1 and len(idx) < self.global_micro:
            idx = torch.cat([idx, perm[: self.global_micro - len(idx)]])
        return idx


def reading_moved(order: EpochOrder, step: int, before: int, now: int) -> str | None:
    """What a resume at optimizer step `step` with a global batch of `now` rows (every process's, grad_accum's
    micro-batches included) would skip or read twice of `order`'s epochs, where the checkpoint was trained at `before`:
    the order reads step s's global batch at s x the global batch (modulo the epoch), so another global batch moves
    the place it reads from. None where both places are the same (an epoch's start; mid-epoch too where the order
    is not grouped by length, whose groups depend on the global batch)."""
    rows = order.num_rows

    def place(batch: int) -> tuple[int, int]:  # (epoch, rows of its order read before `step`)
        per_epoch = rows // batch if order.drop_last else math.ceil(rows / batch)
        epoch, index = divmod(step, per_epoch)
        return epoch, index * batch

    (epoch, read), (epoch_now, start) = place(before), place(now)
    if (epoch, read) == (epoch_now, start) and (read == 0 or order.lengths is None):
        return None
    moved = (epoch_now - epoch) * rows + start - read
    what = (f"{moved:,} rows would never be read" if moved > 0 else f"{-moved:,} rows would be read twice"
            if moved < 0 else "the rest of the epoch would be grouped by length anew: some rows read twice, others "
            "never")
    return (f"its {step} steps of {before} read {read:,} of epoch {epoch}'s {rows:,} rows; {now} per step reads step "
            f"{step}'s from row {start:,} of epoch {epoch_now}'s: {what}")


class BlockStream:
    """Deterministic micro-batches of packed blocks, every one a pure function of (seed, step, place in the step's
    global batch), however that batch is split into processes and micro-batches.

    The unit is the global batch of an optimizer step (``per_device x world x grad_accum`` blocks: EpochOrder's rows
    for that step). Every rank masks that whole batch with one generator seeded by (seed, step) and keeps its own
    slice: micro-batch m of the step, rank r takes rows ``[(m*world + r)*b, ... + b)``. So batch 8 x 1, 4 x 2 and
    2 x 4 (grad_accum), on one process or several, see the same blocks with the same masks; at grad_accum = 1 the
    global micro-batch g is step g's batch. ``grad_accum`` is the number of micro-batches a step takes; pass 1 (the
    default) with micro-batch indices for ``SEEDING_MICRO``, the seeding of runs recorded before this one."""

    def __init__(self, dataset, per_device: int, world: int, rank: int, seed: int, collator,
                 split: str, grad_accum: int = 1):
        self.dataset = dataset
        self.blocks = dataset.with_format("numpy", columns=["input_ids"])  # rows read per batch, not held
        self.per_device, self.world, self.rank, self.seed = per_device, world, rank, seed
        self.global_micro, self.grad_accum = per_device * world, grad_accum
        self.order = EpochOrder(len(dataset), self.global_micro * grad_accum, seed, drop_last=True)
        self.batches_per_epoch = self.order.batches_per_epoch * grad_accum  # micro-batches
        if self.batches_per_epoch == 0:
            accum = f" x trainer.grad_accum={grad_accum}" if grad_accum > 1 else ""
            raise ConfigError(
                f"the corpus's {split} split has {len(dataset)} blocks, fewer than one global batch of "
                f"{self.global_micro * grad_accum} (trainer.batch_size={per_device}{accum} x {world} processes): lower "
                f"trainer.batch_size{', or prepare the corpus with a larger data.val_fraction' if split != 'train' else ''}."
            )
        self.collator, self.split, self._capped = collator, split, False
        self._step: tuple[int, dict[str, torch.Tensor]] | None = None  # the last step's masked global batch

    def replaced(self, seeding: str | None = None, seed: int | None = None) -> BlockStream:
        """This stream drawn with another batch seeding (SEEDING_MICRO: grad_accum 1 over micro-batch indices) or
        seed."""
        accum = self.grad_accum if seeding in (None, SEEDING_STEP) else 1
        seed = self.seed if seed is None else seed
        if (accum, seed) == (self.grad_accum, self.seed):
            return self
        return BlockStream(self.dataset, self.per_device, self.world, self.rank, seed, self.collator, self.split,
                           grad_accum=accum)

    def scored_blocks(self, limit: int | None) -> int:
        """How many blocks an evaluation scores (``held_out``): `limit` (trainer.eval_blocks), at most the split's
        (all when None); a limit above the split's is said once."""
        total = len(self.dataset) if limit is None else min(limit, len(self.dataset))
        if limit is not None and limit > total and not self._capped:
            self._capped = True
            log.warning("trainer.eval_blocks=%d, but the %s split holds %d blocks: evaluating on those %d", limit,
                        self.split, total, total)
        return total

    def held_out(self, limit: int | None, device, scoring: str = SCORING_BLOCKS) -> Iterator[dict[str, torch.Tensor]]:
        """This rank's batches of the blocks an evaluation scores, on `device`: the same every evaluation.

        SCORING_BLOCKS: the first ``scored_blocks(limit)`` blocks of an order drawn with the stream's seed, masked
        in chunks of places (``HELD_OUT_CHUNK``): the set and its masks are the same whatever the batch, the
        processes, grad_accum or the limit, and none is left out for not filling a batch. Every process takes its
        slice of each batch of batch x processes places, as in training (the last batch may be short: a process then
        takes fewer blocks, or where it holds none, the last scored block with no target, so that every process
        runs as many forwards: FSDP gathers parameters in each, and a process that skipped one would hang the
        others). SCORING_BATCHES (a run whose checkpoints record no scoring): as that version
        scored, whole global micro-batches of this stream, as many as hold the `limit` blocks."""
        total = self.scored_blocks(limit)
        if scoring == SCORING_BATCHES:
            for g in range(min(self.batches_per_epoch, math.ceil(total / self.global_micro))):
                yield {k: v.to(device) for k, v in self.micro_batch(g).items()}
            return
        order = torch.randperm(len(self.dataset), generator=torch.Generator().manual_seed(self.seed * 1_000_003))
        chunk: tuple[int, dict[str, torch.Tensor]] | None = None  # the last chunk masked: the next batch's too
        for start in range(0, total, self.global_micro):
            lo = start + self.rank * self.per_device
            hi = min(lo + self.per_device, total)
            if lo >= hi:  # the short last batch holds none of this process's places: it scores nothing, but runs
                lo, hi, filler = total - 1, total, True  # its forward as the others do (FSDP gathers in each)
            else:
                filler = False
            parts = []
            for c in range(lo // HELD_OUT_CHUNK, (hi - 1) // HELD_OUT_CHUNK + 1):
                if chunk is None or chunk[0] != c:
                    chunk = (c, self._held_out_chunk(order, c))
                first = c * HELD_OUT_CHUNK
                parts.append({k: v[max(lo, first) - first : hi - first] for k, v in chunk[1].items()})
            batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
            if filler:
                batch["labels"] = torch.full_like(batch["labels"], -100)
            yield {k: v.to(device) for k, v in batch.items()}

    def _held_out_chunk(self, order: torch.Tensor, c: int) -> dict[str, torch.Tensor]:
        """Places [c*HELD_OUT_CHUNK, (c+1)*HELD_OUT_CHUNK) of the held-out `order`, collated and masked at once by
        the generator seeded by (seed, c)."""
        rows = self.blocks[order[c * HELD_OUT_CHUNK : (c + 1) * HELD_OUT_CHUNK].tolist()]["input_ids"]
        self.collator.generator = torch.Generator().manual_seed(self.seed * 7_919 + c)
        return self.collator([{"input_ids": r.tolist()} for r in rows])

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        """The rank's slice of micro-batch g (step g // grad_accum), masked identically whatever the split."""
        step, micro = divmod(g, self.grad_accum)
        batch = self.step_batch(step)
        lo = (micro * self.world + self.rank) * self.per_device
        return {k: v[lo : lo + self.per_device] for k, v in batch.items()}

    def step_batch(self, step: int) -> dict[str, torch.Tensor]:
        """Step `step`'s whole global batch, masked by the generator seeded by (seed, step); kept for the step's
        other micro-batches."""
        if self._step is None or self._step[0] != step:
            rows = self.blocks[self.order.rows(step).tolist()]["input_ids"]  # (global batch, n) int32
            self.collator.generator = torch.Generator().manual_seed(self.seed * 7_919 + step)
            self._step = (step, self.collator([{"input_ids": r.tolist()} for r in rows]))
        return self._step[1]


def token_lengths(dataset) -> np.ndarray:
    """Tokens per row, read from the Arrow column (no Python list of every token id)."""
    import pyarrow.compute as pc

    return pc.list_value_length(dataset.with_format("arrow")["input_ids"]).to_numpy()


def example_columns(dataset, type_vocab_sizes) -> list[str]:
    """The columns of a tokenized task split that feed the model: COLUMNS, and the pair's segment ids where the split
    holds them (its tokenizer gives them) and every model fed has a segment vocabulary (``type_vocab_sizes``: each
    model's ``type_vocab_size``, BERT's 2). A saved model is then run by its tokenizer (a pipeline, or
    ``model(**tokenizer(a, b))``) on the inputs it was trained and scored on; a model of one segment row (RoBERTa's)
    takes none, as its tokenizer gives none."""
    keep = TOKEN_TYPES in dataset.column_names and all((size or 1) > 1 for size in type_vocab_sizes)
    return [*COLUMNS, TOKEN_TYPES] if keep else list(COLUMNS)


def padded_length(longest: int, limit: int, multiple: int = PAD_MULTIPLE) -> int:
    """The length a batch whose longest row has ``longest`` tokens is padded to: the next multiple of ``multiple``,
    but never past ``limit`` (the run's max_length, at most the model's n: a Linformer refuses a batch longer than
    its n, and rows were cut to ``limit``)."""
    return max(longest, min(round_up(longest, multiple), limit))


BUCKETS_PER_OCTAVE = 8  # task batches' padded lengths: 8 steps between each power of two (at most 1/8 padding added)


def bucketed_length(longest: int, limit: int) -> int:
    """A task batch's padded length: ``padded_length`` to a multiple that grows with the length (PAD_MULTIPLE up to
    8 x PAD_MULTIPLE tokens, then 1/BUCKETS_PER_OCTAVE of the power of two below the longest row: 32 for 256-511
    tokens, 64 for 512-1023). The padded lengths then take a few dozen values up to any max_length rather than one
    per multiple of 8: each new shape leaves glibc's heap holding the freed tensors of the earlier ones, so a
    finetune's memory kept climbing with the padded lengths it met (and torch.compile sees as few shapes)."""
    octave = 1 << (max(longest, 1).bit_length() - 1)
    return padded_length(longest, limit, max(PAD_MULTIPLE, octave // BUCKETS_PER_OCTAVE))


class TaskCollator:
    """Pads a list of tokenized task examples (dicts of ``example_columns``) into a batch of tensors, on the right, to
    ``bucketed_length`` of its longest row: dynamic padding that never passes ``max_length``."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length = tokenizer, max_length

    def __call__(self, rows: list[dict]) -> dict[str, torch.Tensor]:
        from transformers.data.data_collator import pad_without_fast_tokenizer_warning

        length = bucketed_length(max(len(r["input_ids"]) for r in rows), self.max_length)
        return dict(pad_without_fast_tokenizer_warning(self.tokenizer, rows, padding="max_length", max_length=length,
                                                       return_tensors="pt"))


class ExampleStream:
    """Deterministic global micro-batches of examples (EpochOrder, short last batch kept); rank r keeps rows
    [r*b, (r+1)*b). ``group_by_length`` batches examples of similar length together (less padding). ``columns``:
    what each example feeds the model (``example_columns``)."""

    def __init__(self, dataset, per_device: int, world: int, rank: int, seed: int, collate,
                 group_by_length: bool = False, columns: list[str] = COLUMNS):
        self.rows = dataset.with_format(columns=columns)
        self.per_device, self.rank, self.collate = per_device, rank, collate
        self.order = EpochOrder(len(dataset), per_device * world, seed, drop_last=False, world=world,
                                lengths=token_lengths(dataset) if group_by_length else None)
        self.batches_per_epoch = self.order.batches_per_epoch

    def micro_batch(self, g: int) -> dict[str, torch.Tensor]:
        idx = self.order.rows(g)
        mine = idx[self.rank * self.per_device : (self.rank + 1) * self.per_device].tolist()
        return self.collate([self.rows[i] for i in mine])
