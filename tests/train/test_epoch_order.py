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
