"""Batches gathered straight from the dataset, for a loader with nothing to augment.

No worker, ring or probe is involved: one ``np.take`` in this process beats a round trip
through workers. With a ``Copier`` (``workers`` > 0) the next batch is gathered on its thread
while the consumer uses this one; with ``workers=0`` everything stays on the caller's thread.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from .copier import Copier, Copy
from ...memory.store import read_ahead_of
from .recycle import Recycler


class Gatherer:
    """Gathers batch ``(epoch, index)`` of ``x``, one batch ahead when a copier runs."""

    def __init__(self, x: Any, copier: Copier | None, recycler: Recycler,
                 indices: Callable[..., np.ndarray], batches: int) -> None:
        self._x = x  # the dataset (an array or a memory map); None once cleared
        self._copier = copier
        self._recycler = recycler
        self._indices = indices  # (index, epoch key) -> the dataset rows of that batch
        self._batches = batches  # per epoch
        self._ahead: tuple[tuple[int, int], Copy] | None = None  # (key, its gather)
        self._read_ahead = read_ahead_of(x)  # a memory map's rows asked of the OS together

    def __call__(self, epoch: int, index: int, positions: np.ndarray) -> np.ndarray:
        """Batch ``index`` gathered from ``x``: the copy the copier made ahead when this is
        the batch it was asked for, else made now. Asks for the next one first, so that a
        batch made now and the next one are gathered side by side."""
        out: np.ndarray
        if self._copier is None:
            if self._read_ahead is not None:
                self._read_ahead(positions)
            out = self._x[positions]
            return out
        self._copier.back()
        ahead, key = self._ahead, (epoch, index)
        self._ahead = None
        following = (epoch, index + 1) if index + 1 < self._batches else (epoch + 1, 0)
        rows = self._indices(following[1], following[0])
        # Sized by the batch made ahead, not this one: an epoch's short last batch must not
        # leave the next epoch's first one to be gathered on demand.
        if self._copier.pays(rows.size * self._x[:1].nbytes):
            # Allocated on this thread, like the gathers made here: 9.6 MB batches allocated
            # on the copier thread (its own malloc arena) stalled 10-20 ms now and then,
            # pages given back and faulted in again it seems, where a gather takes 1.4 ms.
            self._ahead = following, self._copier.submit(self._gather_into(rows))
        if ahead is not None and ahead[0] == key:
            out = self._copier.take(ahead[1])
        else:
            if ahead is not None:
                self._copier.discard(ahead[1])
            out = self._copier.make(self._gather_into(positions))
        return out

    def _gather_into(self, rows: np.ndarray) -> Callable[[], np.ndarray]:
        """The gather of ``rows`` of ``x``, to run on any thread, into an array picked now."""
        into = self._recycler.empty((len(rows), *self._x.shape[1:]), self._x.dtype)
        if self._read_ahead is not None:
            self._read_ahead(rows)
        return partial(np.take, self._x, rows, axis=0, out=into, mode="clip")  # rows in range

    def clear(self) -> None:
        """Drop the dataset and the batch gathered ahead (at close)."""
        self._x = None
        self._ahead = None
