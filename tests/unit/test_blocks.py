"""``shuffle="blocks"`` as planning (``shmaug.engine.plan.blocks``): each epoch a permutation that
keeps every window's records within its shards, the same from the same (seed, epoch), and
refused, with the fix, where it cannot apply. No process is started here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shmaug
from shmaug.engine.plan.blocks import Blocks
from shmaug.engine.plan.schedule import OrderCache, Shard, epoch_order, in_order, permutation


class Sharded:
    """The least a source needs for shuffle="blocks": a length and its shards' bounds."""

    def __init__(self, bounds, n=None):
        self.bounds = np.asarray(bounds)
        self.n = int(self.bounds[-1]) if n is None else n

    def __len__(self):
        return self.n

    def shard_bounds(self):
        return self.bounds

    def load(self, index):
        return np.full((2, 2), index % 251, np.uint8)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=20),
       window=st.integers(1, 25), seed=st.integers(0, 2**32), epoch=st.integers(0, 50))
def test_each_epoch_is_a_permutation_whose_windows_stay_in_their_shards(sizes, window, seed,
                                                                        epoch):
    blocks = Blocks(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), window)
    n = int(blocks.bounds[-1])
    order = permutation(seed, epoch, n, blocks)
    assert order.dtype == np.int32
    assert sorted(order.tolist()) == list(range(n))
    shard_of = np.searchsorted(blocks.bounds, order, side="right") - 1
    # Records of a window are contiguous in the epoch and come from at most `window` shards,
    # whole: the shards of consecutive windows never mix.
    firsts = {}
    for p, s in enumerate(shard_of.tolist()):
        firsts.setdefault(s, p)
    ranked = sorted(firsts, key=firsts.get)  # the epoch's shard order
    window_of = {s: r // window for r, s in enumerate(ranked)}
    assert np.all(np.diff([window_of[s] for s in shard_of.tolist()]) >= 0)
    np.testing.assert_array_equal(order, permutation(seed, epoch, n, blocks))


def test_the_order_depends_on_seed_and_epoch_and_a_window_of_all_shards_mixes_all():
    blocks = Blocks(np.arange(0, 1001, 100, dtype=np.int64), 2)
    a, b = permutation(1, 0, 1000, blocks), permutation(1, 1, 1000, blocks)
    assert not np.array_equal(a, b)
    assert not np.array_equal(a, permutation(2, 0, 1000, blocks))
    whole = permutation(1, 0, 1000, Blocks(blocks.bounds, 10))
    # one window of every shard: the first tenth of the epoch draws from most shards
    assert len(set((whole[:100] // 100).tolist())) >= 8
    assert len(set((a[:200] // 100).tolist())) == 2


def test_hosts_split_the_blocks_order_into_disjoint_parts_and_evaluation_reads_in_order():
    blocks = Blocks(np.array([0, 7, 20, 21, 40, 53], np.int64), 2)
    parts = [epoch_order(3, 4, 53, blocks, Shard(3, k)) for k in range(3)]
    union = np.concatenate(parts)
    assert len(union) == 3 * (53 // 3) and len(set(union.tolist())) == len(union)
    cache = OrderCache(3, 53, blocks)
    np.testing.assert_array_equal(cache(in_order(4)), np.arange(53))
    np.testing.assert_array_equal(cache(4), permutation(3, 4, 53, blocks))


X = np.zeros((10, 4, 4), np.uint8)


@pytest.mark.parametrize("x, kwargs, error, pattern", [
    (X, dict(shuffle="blocks"), shmaug.ArgumentError,
     r"`shuffle`=\"blocks\" permutes the shards.*`x` \(ndarray\) has none.*Fix: pass "
     r"shuffle=True.*ImageRecords"),
    (X, dict(shuffle="Blocks"), shmaug.ArgumentTypeError,
     r"`shuffle` must be True, False, None or \"blocks\"; received 'Blocks'"),
    (X, dict(shuffle=True, shuffle_window=4), shmaug.ArgumentError,
     r"`shuffle_window`=4 .* `shuffle` is True.*Fix: pass shuffle=\"blocks\""),
    (Sharded([0, 5, 10]), dict(shuffle="blocks", shuffle_window=0), shmaug.ArgumentError,
     r"`shuffle_window` must be a positive integer; received 0"),
    (Sharded([0, 5, 10]), dict(shuffle="blocks", shuffle_window=2.0), shmaug.ArgumentError,
     r"`shuffle_window` must be a positive integer.*2.0 \(type float\)"),
    (Sharded([0, 5, 10]), dict(shuffle="blocks", sampling_weights=np.ones(10)),
     shmaug.ArgumentError, r"`shuffle`=\"blocks\".*`sampling_weights` draws.*Fix"),
    (Sharded([0, 5, 9], n=10), dict(shuffle="blocks"), shmaug.ArgumentError,
     r"`x.shard_bounds\(\)` must return increasing record bounds from 0 to 10"),
])
@pytest.mark.parametrize("kind", ["Loader", "Sequence"])
def test_bad_blocks_arguments_are_refused_at_construction(x, kwargs, error, pattern, kind):
    if kind == "Sequence":
        pytest.importorskip("keras")
        make = shmaug.Sequence
    else:
        make = shmaug.Loader
    with pytest.raises(error, match=pattern):
        make(x, batch_size=4, workers=0, seed=0, **kwargs)


def test_the_fingerprint_names_the_window_and_layout():
    from shmaug.engine.config.options import BatchOptions, Order

    def order(window):
        return Order.of(BatchOptions(shuffle="blocks", shuffle_window=window, seed=0), 10,
                        None, x=Sharded([0, 5, 10]))

    a, b = order(None).fingerprint(), order(3).fingerprint()
    assert a["shuffle"] == "blocks" and a["blocks"]["window"] == 8
    assert a["blocks"]["shards"] == 2 and b["blocks"]["window"] == 3
