"""Where every random number comes from: one function of (seed, epoch, sample index).

A sample's stream depends only on where the sample sits in the run, never on which worker ran
it or when, so batches are bit-identical for any worker count, start method or respawn
history. Distinct samples, epochs and seeds get distinct streams (no "every worker emits the
same batch").

Speed matters here (it runs once per sample): instead of building a fresh ``Generator``
(~20-30 us), each process keeps one ``PCG64`` and re-keys its state from a splitmix64 hash
computed for a whole task at once (~4 us a sample, mostly numpy's state setter). Python's
``random`` and the legacy ``np.random`` globals cost ~11 us more to seed, so ``SampleSeeder``
seeds them only for callables that may use them (``uses_global_rng``).
"""

from __future__ import annotations

import random
from typing import Any, Iterator

import numpy as np

_MASK64 = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_STREAM = np.uint64(0xD1B54A32D192ED03)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 arrays (wrapping arithmetic): a cheap bijection."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


def sample_keys(seed: int, epoch: int, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two 64-bit words per sample that identify (seed, epoch, index): the basis of every stream.

    Vectorized over a task's indices, so the per-sample cost is a few numpy lanes.
    """
    base = _mix64(_mix64(np.array([seed & _MASK64], np.uint64)) ^ np.uint64(epoch & _MASK64))
    hi = _mix64(base ^ np.asarray(indices, dtype=np.uint64))
    return hi, _mix64(hi ^ _STREAM)


def epoch_key(seed: int, epoch: int) -> int:
    """A 63-bit seed for things decided once per epoch (the shuffle order)."""
    h = _mix64(_mix64(np.array([seed & _MASK64], np.uint64)) ^ np.uint64(epoch & _MASK64)
               ^ np.uint64(0x5851F42D4C957F2D))
    return int(h[0]) >> 1


def rng_for(seed: int, epoch: int, index: int) -> np.random.Generator:
    """A fresh ``Generator`` for one sample. Same arguments, same stream as in the workers.

    Example:
        >>> a = rng_for(0, 1, 7).random(); b = rng_for(0, 1, 7).random()
        >>> a == b
        True
    """
    return next(SampleSeeder(seed, seed_globals=False).streams(epoch, np.array([index])))


class SampleSeeder:
    """Re-keys one per-process generator for each sample (cheap), and optionally the globals.

    ``streams(epoch, indices)`` yields the *same* ``Generator`` object once per index,
    re-keyed each time; a caller must be done with one sample's stream before the next.
    """

    def __init__(self, seed: int, *, seed_globals: bool) -> None:
        self.seed = seed  # invariant: fixed for the life of the run
        self.seed_globals = seed_globals  # invariant: True when the op may touch the globals
        self._bitgen = np.random.PCG64()
        self._generator = np.random.Generator(self._bitgen)
        self._state: Any = {
            "bit_generator": "PCG64",
            "state": {"state": 0, "inc": 1},
            "has_uint32": 0,
            "uinteger": 0,
        }

    def streams(self, epoch: int, indices: np.ndarray) -> Iterator[np.random.Generator]:
        his, los = sample_keys(self.seed, epoch, indices)
        inner = self._state["state"]
        for hi, lo in zip(his.tolist(), los.tolist()):
            inner["state"] = (hi << 64) | lo
            inner["inc"] = ((lo << 64) | hi) | 1  # odd increment: a distinct PCG stream
            self._bitgen.state = self._state
            if self.seed_globals:
                # Legacy user code draws from the globals; same per-sample guarantee.
                random.seed(hi)
                np.random.seed(lo & 0xFFFFFFFF)
            yield self._generator
