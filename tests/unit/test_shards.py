"""Sharding is pure planning: disjoint equal parts of one global order, a rotating remainder,
and clear errors for bad shard arguments (raised before any process starts)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shmaug
from tests._helpers import needs_keras
from shmaug.engine.plan.schedule import OrderCache, Shard, epoch_order, permutation

X = np.zeros((10, 4, 4), np.uint8)


@given(st.integers(1, 300), st.integers(1, 9), st.integers(0, 2**40), st.integers(0, 50),
       st.booleans())
@settings(max_examples=200, deadline=None)
def test_shards_are_disjoint_equal_parts_of_the_global_order(n, k, seed, epoch, shuffle):
    k = min(k, n)
    parts = [epoch_order(seed, epoch, n, shuffle, Shard(k, i)) for i in range(k)]
    assert all(len(p) == n // k for p in parts), "every host runs the same number of steps"
    union = np.concatenate(parts)
    assert len(np.unique(union)) == len(union) == k * (n // k), "nothing twice"
    if shuffle:  # the global order is the same on every host: shard i takes positions i::k
        kept = permutation(seed, epoch, n, True)[: k * (n // k)]
        for i, p in enumerate(parts):
            np.testing.assert_array_equal(p, kept[i::k])


@given(st.integers(2, 200), st.integers(2, 9), st.integers(0, 2**40), st.booleans())
@settings(max_examples=100, deadline=None)
def test_no_sample_is_left_out_every_epoch(n, k, seed, shuffle):
    k = min(k, n)
    left_out = n % k
    epochs = 40 if shuffle else -(-n // max(left_out, 1)) + 1
    seen: set[int] = set()
    previous: set[int] = set()
    for epoch in range(epochs):
        served = set(np.concatenate(
            [epoch_order(seed, epoch, n, shuffle, Shard(k, i)) for i in range(k)]).tolist())
        dropped = set(range(n)) - served
        if not shuffle:
            assert not dropped & previous, "without shuffle the left-out window slides on"
        previous = dropped
        seen |= served
    assert seen == set(range(n))


def test_one_shard_is_the_plain_order():
    for shuffle in (False, True):
        np.testing.assert_array_equal(epoch_order(3, 2, 17, shuffle, Shard()),
                                      permutation(3, 2, 17, shuffle))
    cache = OrderCache(3, 17, True, shard=Shard(4, 3))
    np.testing.assert_array_equal(cache(5), epoch_order(3, 5, 17, True, Shard(4, 3)))


@needs_keras
@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(num_shards=0, shard_index=0), r"`num_shards` must be a positive integer.*0 \(type int\)"),
        (dict(num_shards=-2, shard_index=0), r"`num_shards`.*-2"),
        (dict(num_shards=2.0, shard_index=0), r"`num_shards`.*2.0 \(type float\)"),
        (dict(num_shards=True, shard_index=0), r"`num_shards`.*True \(type bool\)"),
        (dict(num_shards=2, shard_index=2), r"`shard_index` must be an integer in 0..1.*2 \(type int\)"),
        (dict(num_shards=2, shard_index=-1), r"`shard_index`.*-1"),
        (dict(num_shards=2), r"`shard_index`.*None.*get_rank"),
        (dict(shard_index=1), r"`shard_index`=1 was given without `num_shards`"),
        (dict(num_shards=11, shard_index=0), r"`num_shards`=11 is more than the 10 samples"),
        (dict(num_shards=5, shard_index=0, batch_size=3, drop_remainder=True),
         r"2 samples per shard of 5"),
        # each host would draw its own order: samples overlap and go missing, silently
        (dict(num_shards=2, shard_index=0, seed=None, shuffle=True), r"`num_shards`=2 with `shuffle`=True needs a `seed`"),
    ],
)
def test_bad_shard_arguments_fail_before_any_process(kwargs, pattern):
    kwargs = {"batch_size": 2, "augment": lambda image, rng: image, "workers": 2, "seed": 0,
              **kwargs}
    with pytest.raises(shmaug.ArgumentError, match=pattern):
        shmaug.Loader(X, **kwargs)  # a lambda would fail later, at pickling: we fail first
    pytest.importorskip("keras")
    with pytest.raises(shmaug.ArgumentError, match=pattern):
        shmaug.Sequence(X, **kwargs)


@needs_keras
def test_a_shard_has_its_share_of_batches():
    with shmaug.Loader(X, batch_size=2, workers=0, num_shards=3, shard_index=2) as loader:
        assert len(loader) == 2  # 10 // 3 = 3 samples -> batches of 2 and 1
        assert [len(xb) for xb, _ in loader] == [2, 1]
        assert loader.stats()["images"] == 3
    pytest.importorskip("keras")
    assert len(shmaug.Sequence(X, batch_size=2, num_shards=3, shard_index=2)) == 2
