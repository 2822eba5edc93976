"""Pure planning: which samples form which batch, and how a batch is cut into tasks.

No I/O, no processes. Both the main process and the workers call these functions and get the
same answers from the same (seed, epoch), so the epoch order never crosses a queue.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass
from typing import Union

import numpy as np

from ...seeding import epoch_key
from . import blocks
from .blocks import Blocks

# How an epoch is shuffled: not at all, exactly (True), or by shards (``blocks``).
Shuffle = Union[bool, Blocks]

_DRAW = 0x2545F4914F6CDD1D  # sets the weighted draw's key apart from the shuffle's


def permutation(seed: int, epoch: int, n: int, shuffle: Shuffle) -> np.ndarray:
    """The order in which an epoch visits the ``n`` samples (identity when not shuffling;
    with ``Blocks``, shards permuted and records shuffled within windows of shards).

    In int32 while ``n`` fits: every worker keeps the last few epochs' orders, and at
    ImageNet's 1.28 million samples each int64 order is 10 MB of a worker's own memory.
    Shuffled in place (the same order as ``rng.permutation(n)``, whose draws depend only on
    ``n``): an int64 temporary freed would stay in the worker's heap.
    """
    order = np.arange(n, dtype=np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    if isinstance(shuffle, Blocks):
        blocks.permutation(np.random.Generator(np.random.PCG64(epoch_key(seed, epoch))),
                            order, shuffle)
    elif shuffle:
        np.random.Generator(np.random.PCG64(epoch_key(seed, epoch))).shuffle(order)
    return order


def weighted_draw(seed: int, epoch: int, cdf: np.ndarray, samples: int) -> np.ndarray:
    """``samples`` dataset indices drawn with replacement, index i with probability
    ``weights[i] / sum(weights)`` (``cdf`` is ``np.cumsum(weights)``): one epoch's global draw.

    A function of (seed, epoch) alone, as ``permutation``, so every worker and every host
    computes the same draw. A zero weight is a flat step of ``cdf``, which ``searchsorted``
    (side="right") never lands on; the clip guards the one rounding case ``u * total == total``.
    """
    rng = np.random.Generator(np.random.PCG64(epoch_key(seed, epoch) ^ _DRAW))
    total = cdf[-1]
    drawn = np.searchsorted(cdf, rng.random(samples) * total, side="right")
    last = int(np.searchsorted(cdf, total, side="left"))  # the last index with a weight
    np.minimum(drawn, last, out=drawn)
    out: np.ndarray = drawn.astype(np.int32 if len(cdf) <= np.iinfo(np.int32).max else np.int64)
    return out


@dataclass(frozen=True, slots=True)
class Shard:
    """Which part of every epoch this process takes: ``index`` of ``count`` equal parts.

    Named as ``tf.data.Dataset.shard(num_shards, index)``. Every shard gets
    ``n // count`` samples per epoch, so every host runs the same number of steps (a
    collective all-reduce deadlocks otherwise).
    """

    count: int = 1
    index: int = 0

    def size(self, n: int) -> int:
        """Samples per epoch in each shard."""
        return n // self.count


def epoch_order(seed: int, epoch: int, n: int, shuffle: Shuffle, shard: Shard = Shard(),
                cdf: np.ndarray | None = None) -> np.ndarray:
    """The dataset indices one shard visits in ``epoch``, in order.

    With ``cdf`` (weighted sampling) the global order is ``weighted_draw`` of ``n`` samples
    (then samples per epoch, not the dataset's length), shared out the same way.

    The global order (``permutation``) is the same on every host; shard k takes its positions
    k, k + K, k + 2K, ... (as ``Dataset.shard``) of the first ``K * (n // K)``. The
    ``n % K`` samples left over are not served that epoch; they rotate: with ``shuffle`` they
    are whichever the epoch's permutation puts last, without it the order is rotated by
    ``epoch * (n % K)`` first, so the left-over window slides through the dataset and no sample
    is left out twice in a row (``n % K < n / 2`` always).
    """
    order = permutation(seed, epoch, n, shuffle) if cdf is None else \
        weighted_draw(seed, epoch, cdf, n)
    if shard.count == 1:
        return order
    kept = shard.count * shard.size(n)
    if kept < n and not shuffle:
        order = np.roll(order, -((epoch * (n - kept)) % n))
    return np.ascontiguousarray(order[:kept][shard.index :: shard.count])


IN_ORDER = 1 << 62  # set in an epoch key: that epoch is read in the dataset's order


def in_order(epoch: int) -> int:
    """The key of ``epoch`` read in the dataset's order, whatever ``shuffle`` says: a
    ``Sequence`` under ``evaluate`` or ``predict`` reads its epochs so (Keras decides the order
    per pass), while its ``fit`` passes are shuffled. The key travels in a task as the epoch
    does; the workers read the flag back (``OrderCache``, ``seed_epoch``)."""
    return epoch | IN_ORDER


def seed_epoch(key: int) -> int:
    """The epoch a key names, without its order flag: what a sample's random stream is keyed
    by, so a sample is augmented the same way in an epoch whichever order reads it."""
    return key & ~IN_ORDER


class OrderCache:
    """The last few epochs' orders (of one shard), so a worker computes each one once."""

    def __init__(self, seed: int, n: int, shuffle: Shuffle, keep: int = 3,
                 shard: Shard = Shard(), cdf: np.ndarray | None = None) -> None:
        self._args = (seed, n, shuffle, shard)  # invariant: fixed for the run
        self._cdf = cdf  # invariant: cumulative sampling weights (read-only), or None
        self._keep = keep
        self._orders: OrderedDict[int, np.ndarray] = OrderedDict()  # epoch -> order, LRU

    def __call__(self, epoch: int) -> np.ndarray:
        """The order of epoch key ``epoch`` (``in_order`` keys: the dataset's order)."""
        order = self._orders.get(epoch)
        if order is None:
            seed, n, shuffle, shard = self._args
            ordered = bool(epoch & IN_ORDER)
            order = epoch_order(seed, seed_epoch(epoch), n, False if ordered else shuffle,
                                shard, self._cdf)
            self._orders[epoch] = order
            while len(self._orders) > self._keep:
                self._orders.popitem(last=False)
        else:
            self._orders.move_to_end(epoch)
        return order

    def keys(self, epoch: int, start: int, stop: int) -> np.ndarray:
        """What keys the random streams of positions ``start:stop``: the sample indices, or
        under weighted sampling each draw's place in the global draw, so a sample drawn twice
        in an epoch is augmented two ways (and the same on any host or worker)."""
        if self._cdf is None:
            return self(epoch)[start:stop]
        shard = self._args[3]
        return shard.index + shard.count * np.arange(start, stop, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Task:
    """One slice of one batch: positions ``start:stop`` of the epoch order, for one slot.

    Row ``p - row0`` of ring slot ``slot`` receives the sample at epoch position ``p``.
    ``ticket`` is unique per dispatch, so results of cancelled work can be told apart;
    ``generation`` is the slot's generation when the task was made (see ``OutputRing``).
    """

    ticket: int
    epoch: int
    slot: int
    generation: int
    start: int
    stop: int
    row0: int

    WIRE_SIZE = 56  # bytes of ``to_bytes()``: seven unsigned 64-bit fields

    def to_bytes(self) -> bytes:
        """56 bytes for the task pipe: packing beats pickling a dataclass several times over.

        The epoch travels modulo 2**64, as every random stream already takes it.
        """
        return _TASK_WIRE.pack(self.ticket, self.epoch & _MASK64, self.slot, self.generation,
                               self.start, self.stop, self.row0)

    @classmethod
    def from_bytes(cls, data: bytes) -> Task:
        return cls(*_TASK_WIRE.unpack(data))


_TASK_WIRE = struct.Struct("<7Q")  # every field is a non-negative int
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """How ``n`` samples fall into batches of ``batch_size``."""

    n: int
    batch_size: int
    drop_remainder: bool

    def __len__(self) -> int:
        if self.drop_remainder:
            return self.n // self.batch_size
        return -(-self.n // self.batch_size)

    @property
    def rows(self) -> int:
        """The most rows a batch holds: ``batch_size``, or fewer where an epoch is shorter
        (its positions: the shard's samples, or the draws of a weighted epoch, which may
        outnumber the dataset)."""
        return min(self.batch_size, self.n)

    def bounds(self, batch: int) -> tuple[int, int]:
        """Epoch positions ``[start, stop)`` of one batch."""
        if not 0 <= batch < len(self):
            raise IndexError(f"batch {batch} out of range for {len(self)} batches per epoch")
        start = batch * self.batch_size
        return start, min(start + self.batch_size, self.n)

    def slices(self, batch: int, parts: int, step: int = 1) -> list[tuple[int, int]]:
        """Cut one batch into at most ``parts`` contiguous, near-equal position ranges, each
        starting a multiple of ``step`` rows into the batch (2 keeps the pairs a mix makes
        whole: ``shmaug.ops.mixing``)."""
        start, stop = self.bounds(batch)
        units = -(-(stop - start) // step)
        parts = max(1, min(parts, units))
        edges = [start + min(stop - start, units * i // parts * step) for i in range(parts + 1)]
        return list(zip(edges[:-1], edges[1:]))
