"""``shmaug.Sequence`` subclasses that override ``augment`` and call ``super().augment``, in a
module of their own so that spawned workers can import them (tests/integration/
test_override_plan.py)."""

from __future__ import annotations

import numpy as np

import shmaug
from shmaug import deferred


class Through(shmaug.Sequence):
    """An override that only calls the pipeline: its batches are the plain Sequence's."""

    def augment(self, image, rng):
        return super().augment(image, rng)


class Undecoded(shmaug.Sequence):
    """Refuses a decoded photo: the decode-time crop must reach the pipeline undecoded."""

    def augment(self, image, rng):
        if not isinstance(image, deferred.Undecoded):
            raise TypeError(f"the override got {type(image).__name__}, not an undecoded photo")
        return super().augment(image, rng)


class Inverted(shmaug.Sequence):
    """Work of its own after the pipeline: the targets still follow the pipeline's moves."""

    def augment(self, image, rng):
        return 255 - np.asarray(super().augment(image, rng))


class Reading(shmaug.Sequence):
    """Reads the pixels before the pipeline: a whole decode, counted."""

    def augment(self, image, rng):
        return super().augment(np.asarray(image) // 2, rng)


class Leveled(shmaug.Sequence):
    """A curriculum kept in an attribute its augment reads (``self.level``), and one it
    does not read (``self.seen``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.level, self.seen = 0, 0

    def augment(self, image, rng):
        return np.full_like(image, self.level)


class _Halve:
    def __call__(self, image, rng):
        return image // 2


class CallableHook(shmaug.Sequence):
    """An augment that is an object, not a function: its code cannot be read."""

    augment = _Halve()


class Averaging(shmaug.Sequence):
    """Keeps a running mean of its own (``self.mean``) that its augment never reads: the
    augment calls ``image.mean()``, the same name on another object."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mean = 0.0

    def augment(self, image, rng):
        return image - image.mean()
