"""Batch arrays made again in the memory of batches the consumer has dropped.

Why: every batch handed out used to be a fresh array. Above glibc's mmap ceiling (32 MB; 64
float32 images of 224x224x3 are 38.5 MB) a fresh array is fresh pages, which the copy into it
faults in (6.9 ms for that batch where a copy into memory already touched takes 4.8 ms, on the
2-core machine the bench runs on), and a dropped one is unmapped on the consumer's thread
(0.25 ms of its step). Below the ceiling malloc keeps freed memory for the next batch, but
gives the top of the heap back when a few batches are dropped at once (an epoch's end), and
the next ones fault it in again: 5-10 ms stalls at W3's epoch starts. And in a process where
tf.data's ``from_generator`` has run (every ``Model.fit`` on the TensorFlow backend: it sets
``M_TRIM_THRESHOLD`` to 128 KB, see ``workers.worker._tune_malloc``) every array over 128 KB is an
mmap of its own: W1's 2 MB batch took 1.8 ms to copy into a new array, 0.3 ms into a reused
one. ``python -m bench.recycle`` measures the difference.

How: the last few arrays made are remembered. When the next batch of the same shape and dtype
is due, one whose only reference is ours is used again: nothing else can reach it, so nothing
sees it change. This is the test numpy's own ``ndarray.resize(refcheck=True)`` relies on.
Whatever still uses a batch holds a reference to it: a view of it (its ``base``), a
``memoryview``, a tensor sharing its memory (``torch.from_numpy``, TensorFlow's zero-copy
conversion, DLPack). Only code that keeps a bare address (``arr.ctypes.data`` as an int, an
``__array_interface__`` dict) without the array, or a ``weakref`` to a batch it then revives,
could see a batch change; the first is already wrong for any array.

The count an unused array has is measured on each call, on a sentinel held the same way, so
no interpreter's bookkeeping can shift it. Reuse is on only in CPython with the GIL, where
counts are exact; elsewhere (free-threaded builds, PyPy, GraalPy) every batch is new.

Memory: up to ``KEEP`` batch arrays the consumer has dropped stay allocated until the loader
closes.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from typing import Any

import numpy as np

KEEP = 4  # arrays remembered: the consumer may hold a couple, the copier makes one ahead


def _counts_exact() -> bool:
    gil = getattr(sys, "_is_gil_enabled", None)
    return sys.implementation.name == "cpython" and (gil is None or bool(gil()))


class Recycler:
    """Hands out arrays for batches, reusing the memory of those nobody refers to any more."""

    def __init__(self, keep: int = KEEP) -> None:
        self._lock = threading.Lock()
        self._made: deque[np.ndarray] = deque(maxlen=keep)  # newest last
        self._enabled = _counts_exact() and keep > 0
        self._sentinel: deque[np.ndarray] = deque([np.empty(0)])  # held as `_made` holds
        self.reused = 0  # how many arrays were made again in dropped memory (for tests, stats)

    def _counts(self) -> tuple[int, list[int]]:
        """The count of an array only this recycler holds (the sentinel's), and each made
        array's count, taken the same way."""
        sentinel, *counts = [sys.getrefcount(a) for a in self._sentinel + self._made]
        return sentinel, counts

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialized array of ``shape`` and ``dtype``: the memory of a dropped batch
        when one fits, else new."""
        dtype = np.dtype(dtype)
        if not self._enabled:
            return np.empty(shape, dtype)
        with self._lock:
            out = None
            unused, counts = self._counts()
            for i, count in enumerate(counts):
                old = self._made[i]
                if count == unused and old.shape == shape and old.dtype == dtype:
                    del self._made[i]
                    out = old
                    self.reused += 1
                    break
                del old
            if out is None:
                out = np.empty(shape, dtype)
            self._made.append(out)
            return out

    def clear(self) -> None:
        """Forget every array (the memory of those nobody holds is freed)."""
        with self._lock:
            self._made.clear()
