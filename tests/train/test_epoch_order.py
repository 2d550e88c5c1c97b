import torch

from linformer.data.streams import EpochOrder


def _epoch(order: EpochOrder, epoch: int) -> list[torch.Tensor]:
    return [order.rows(epoch * order.batches_per_epoch + b) for b in range(order.batches_per_epoch)]


def test_grouping_by_length_visits_every_row_once_and_pads_less():
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(5, 500, (1000,), generator=gen)
    plain = EpochOrder(1000, 16, seed=3, drop_last=False)
    grouped = EpochOrder(1000, 16, seed=3, drop_last=False, lengths=lengths)
    for order in (plain, grouped):
        batches = _epoch(order, 0)
        assert sorted(torch.cat(batches).tolist()) == list(range(1000))
        assert [len(b) for b in batches] == [16] * 62 + [8]  # the short batch stays last

    def padded(order):
        return sum(len(b) * int(lengths[b].max()) for b in _epoch(order, 0))

    assert padded(grouped) < 0.7 * padded(plain)


def test_grouped_order_is_a_pure_function_of_seed_and_step_and_shuffles_batches():
    lengths = torch.arange(640)  # length = row id: a sorted-only order would be visible
    a = EpochOrder(640, 8, seed=1, drop_last=False, lengths=lengths)
    b = EpochOrder(640, 8, seed=1, drop_last=False, lengths=lengths)
    assert all(torch.equal(a.rows(g), b.rows(g)) for g in (0, 5, 79, 80, 123))  # 80 batches per epoch
    first = [int(lengths[x].max()) for x in _epoch(a, 0)]
    assert first != sorted(first, reverse=True) and first != sorted(first)  # batch order is shuffled
    assert not torch.equal(torch.cat(_epoch(a, 0)), torch.cat(_epoch(a, 1)))  # each epoch groups anew
    assert not torch.equal(a.rows(0), EpochOrder(640, 8, seed=2, drop_last=False, lengths=lengths).rows(0))


def test_a_resume_at_another_global_batch_names_the_rows_it_would_skip_or_read_twice():
    """24 steps at 8 rows per step, resumed at 16 (1 process to 2 with trainer.allow_config_change=[processes]),
    read epoch 0 from row 384 of its order: rows 192-383 were never read, without a word; the other way, rows 192-383
    twice. The resume check names the count, read here from the package's own order."""
    from linformer.data.streams import reading_moved

    rows, step = 849, 24
    for before, now in ((8, 16), (16, 8)):
        old, new = EpochOrder(rows, before, 0, drop_last=True), EpochOrder(rows, now, 0, drop_last=True)
        read = [int(i) for g in range(step) for i in old.rows(g)]
        read += [int(i) for g in range(step, new.batches_per_epoch) for i in new.rows(g)]
        whole = old._epoch_perm(0)[: new.batches_per_epoch * now].tolist()  # what the epoch reads of its order
        never, twice = len(set(whole) - set(read)), len(read) - len(set(read))
        assert (never, twice) == ((192, 0) if now > before else (0, 192))
        said = reading_moved(old, step, before, now)
        assert (f"{never} rows would never be read" if never else f"{twice} rows would be read twice") in said
    assert reading_moved(old, 0, 16, 8) is None  # the start of an epoch: nothing skipped


def test_a_resume_at_another_global_batch_past_an_epoch_counts_the_epochs_between():
    """100 rows, the last short batch kept (drop_last=False: 10 steps an epoch at 10 rows, 4 at 30). 12 steps at 10
    rows read epoch 0 and 20 rows of epoch 1; 30 per step reads step 12 from epoch 3's start: the 80 rows left of
    epoch 1 and the whole of epoch 2 are never read. The other way, 5 steps at 30 read epoch 0 and 30 rows of epoch 1;
    10 per step reads step 5 from row 50 of epoch 0: 50 + 30 rows read twice."""
    from linformer.data.streams import reading_moved

    at_10, at_30 = EpochOrder(100, 10, 0, drop_last=False), EpochOrder(100, 30, 0, drop_last=False)
    assert (at_10.batches_per_epoch, at_30.batches_per_epoch) == (10, 4)
    assert reading_moved(at_10, 12, 10, 30) == ("its 12 steps of 10 read 20 of epoch 1's 100 rows; 30 per step reads "
                                                "step 12's from row 0 of epoch 3's: 180 rows would never be read")
    assert reading_moved(at_30, 5, 30, 10) == ("its 5 steps of 30 read 30 of epoch 1's 100 rows; 10 per step reads "
                                               "step 5's from row 50 of epoch 0's: 80 rows would be read twice")
