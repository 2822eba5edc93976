"""Where every random number comes from: one function of (seed, epoch, sample index).

A sample's stream depends only on where the sample sits in the run, never on which worker ran
it or when, so batches are bit-identical for any worker count, start method or respawn
history. Distinct samples, epochs and seeds get distinct streams (no "every worker emits the
same batch").

Speed matters here (it runs once per sample): instead of building a fresh ``Generator``
(~20 us), each process keeps one ``PCG64`` and re-keys its state from a splitmix64 hash
(~3 us). Python's ``random`` and the legacy ``np.random`` globals cost ~10 us more to seed,
so ``SampleSeeder`` seeds them only for callables that may use them.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64 finaliser: a cheap bijective scramble of a 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def sample_key(seed: int, epoch: int, index: int) -> tuple[int, int]:
    """Two 64-bit words that identify (seed, epoch, index); the basis of every stream."""
    h = _mix64(seed & _MASK64)
    h = _mix64(h ^ (epoch & _MASK64))
    h = _mix64(h ^ (index & _MASK64))
    return h, _mix64(h ^ 0xD1B54A32D192ED03)


def epoch_key(seed: int, epoch: int) -> int:
    """A 63-bit seed for things decided once per epoch (the shuffle order)."""
    return _mix64(_mix64(seed & _MASK64) ^ (epoch & _MASK64) ^ 0x5851F42D4C957F2D) >> 1


def rng_for(seed: int, epoch: int, index: int) -> np.random.Generator:
    """A fresh ``Generator`` for one sample. Same arguments, same stream.

    Example:
        >>> a = rng_for(0, 1, 7).random(); b = rng_for(0, 1, 7).random()
        >>> a == b
        True
    """
    seeder = SampleSeeder(seed, seed_globals=False)
    return seeder.rng(epoch, index)


class SampleSeeder:
    """Re-keys one per-process generator for each sample (cheap), and optionally the globals.

    ``rng(epoch, index)`` returns the *same* ``Generator`` object each call, re-keyed; a
    caller must be done with one sample's stream before asking for the next.
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

    def rng(self, epoch: int, index: int) -> np.random.Generator:
        hi, lo = sample_key(self.seed, epoch, index)
        inner = self._state["state"]
        inner["state"] = (hi << 64) | lo
        inner["inc"] = ((lo << 64) | hi) | 1  # odd increment: a distinct PCG stream per sample
        self._bitgen.state = self._state
        if self.seed_globals:
            # Legacy user code draws from the globals; give it the same per-sample guarantee.
            random.seed(hi)
            np.random.seed(lo & 0xFFFFFFFF)
        return self._generator
