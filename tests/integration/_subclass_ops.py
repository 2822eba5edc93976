"""A user's module that imports Keras at its top and subclasses ``shmaug.Sequence`` beside an
augment function (for tests/integration/test_lazy_frameworks.py). Each hook writes into the
image whether Keras had loaded in the process that ran it."""

from __future__ import annotations

import sys
import types

import keras  # noqa: F401  -- the point: a user's module imports it for its model
import numpy as np

import shmaug


def keras_loaded() -> bool:
    return type(sys.modules.get("keras")) is types.ModuleType


def report(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An augment function beside the subclass: 1 where Keras had loaded here, else 0."""
    return np.full_like(image, keras_loaded())


class Reporting(shmaug.Sequence):
    """A subclass whose hooks run in the workers."""

    def load(self, index: int) -> np.ndarray:
        return np.full((4, 4), 2 * keras_loaded(), np.uint8)

    def augment(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # PyDataset's attributes read in a worker as in the main process (Keras is told 1)
        return image + keras_loaded() + (self.workers - 1)
