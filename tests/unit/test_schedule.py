from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shmaug.engine.plan.schedule import BatchPlan, OrderCache, permutation


@given(st.integers(1, 500), st.integers(1, 64), st.booleans(), st.integers(1, 5))
@settings(max_examples=200, deadline=None)
def test_batches_and_slices_cover_each_position_once(n, batch_size, drop, parts):
    plan = BatchPlan(n, batch_size, drop)
    covered = []
    for b in range(len(plan)):
        start, stop = plan.bounds(b)
        assert 0 < stop - start <= batch_size
        slices = plan.slices(b, parts)
        assert len(slices) <= parts
        assert slices[0][0] == start and slices[-1][1] == stop
        for (_, hi), (lo, _) in zip(slices, slices[1:]):
            assert hi == lo
        covered += range(start, stop)
    expected = (n // batch_size) * batch_size if drop else n
    assert covered == list(range(expected))


@given(st.integers(0, 2**40), st.integers(0, 100), st.integers(1, 300))
@settings(max_examples=100, deadline=None)
def test_permutation_is_deterministic_and_complete(seed, epoch, n):
    order = permutation(seed, epoch, n, True)
    assert sorted(order.tolist()) == list(range(n))
    assert (order == permutation(seed, epoch, n, True)).all()
    assert (permutation(seed, epoch, n, False) == np.arange(n)).all()


def test_epochs_and_seeds_shuffle_differently():
    assert not (permutation(0, 0, 100, True) == permutation(0, 1, 100, True)).all()
    assert not (permutation(0, 0, 100, True) == permutation(1, 0, 100, True)).all()


def test_order_cache_returns_cached_orders():
    cache = OrderCache(3, 50, True, keep=2)
    first = cache(0)
    assert cache(0) is first
    cache(1), cache(2)
    assert cache(0) is not first and (cache(0) == first).all()


def test_task_survives_the_wire():
    from shmaug.engine.plan.schedule import Task

    task = Task(ticket=2**40, epoch=3, slot=7, generation=12, start=64, stop=96, row0=64)
    assert Task.from_bytes(task.to_bytes()) == task
    huge = Task(ticket=1, epoch=2**64 + 5, slot=0, generation=1, start=0, stop=1, row0=0)
    assert Task.from_bytes(huge.to_bytes()).epoch == 5  # streams take epochs modulo 2**64


def test_the_epoch_order_is_numpys_permutation_in_int32():
    """Orders are int32 (half a worker's memory for them), and the same as before: the
    permutation numpy draws for n from the epoch's key."""
    import numpy as np

    from shmaug.engine.plan.schedule import permutation
    from shmaug.seeding import epoch_key

    for n in (1, 7, 1000):
        order = permutation(3, 2, n, shuffle=True)
        assert order.dtype == np.int32
        expected = np.random.Generator(np.random.PCG64(epoch_key(3, 2))).permutation(n)
        np.testing.assert_array_equal(order, expected)
    assert permutation(3, 2, 5, shuffle=False).tolist() == [0, 1, 2, 3, 4]
