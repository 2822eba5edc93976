"""Pure planning: which samples form which batch, and how a batch is cut into tasks.

No I/O, no processes. Both the main process and the workers call these functions and get the
same answers from the same (seed, epoch), so the epoch order never crosses a queue.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .seeding import epoch_key


def permutation(seed: int, epoch: int, n: int, shuffle: bool) -> np.ndarray:
    """The order in which an epoch visits the ``n`` samples (identity when not shuffling)."""
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    rng = np.random.Generator(np.random.PCG64(epoch_key(seed, epoch)))
    return rng.permutation(n).astype(np.int64, copy=False)


class OrderCache:
    """The last few epochs' permutations, so a worker computes each one once."""

    def __init__(self, seed: int, n: int, shuffle: bool, keep: int = 3) -> None:
        self._args = (seed, n, shuffle)  # invariant: fixed for the run
        self._keep = keep
        self._orders: OrderedDict[int, np.ndarray] = OrderedDict()  # epoch -> order, LRU

    def __call__(self, epoch: int) -> np.ndarray:
        order = self._orders.get(epoch)
        if order is None:
            seed, n, shuffle = self._args
            order = permutation(seed, epoch, n, shuffle)
            self._orders[epoch] = order
            while len(self._orders) > self._keep:
                self._orders.popitem(last=False)
        else:
            self._orders.move_to_end(epoch)
        return order


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

    def bounds(self, batch: int) -> tuple[int, int]:
        """Epoch positions ``[start, stop)`` of one batch."""
        if not 0 <= batch < len(self):
            raise IndexError(f"batch {batch} out of range for {len(self)} batches per epoch")
        start = batch * self.batch_size
        return start, min(start + self.batch_size, self.n)

    def slices(self, batch: int, parts: int) -> list[tuple[int, int]]:
        """Cut one batch into at most ``parts`` contiguous, near-equal position ranges."""
        start, stop = self.bounds(batch)
        parts = max(1, min(parts, stop - start))
        edges = [start + (stop - start) * i // parts for i in range(parts + 1)]
        return list(zip(edges[:-1], edges[1:]))
