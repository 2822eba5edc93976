"""Augments in a module that imports a framework at its top, as a user's module does (for
tests/integration/test_lazy_frameworks.py). Each writes into the image whether the framework
had loaded in the process that ran it."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import numpy as np

FRAMEWORK = next((name for name in ("tensorflow", "jax", "torch")
                  if importlib.util.find_spec(name) is not None), None)
framework = importlib.import_module(FRAMEWORK) if FRAMEWORK else None


def _loaded() -> bool:
    return type(sys.modules.get(FRAMEWORK or "")) is types.ModuleType


def report(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """1 where the framework had loaded in this process, else 0; it does not touch it."""
    return np.full_like(image, _loaded())


def use_then_report(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Reads an attribute of the framework first: it must work, and load it."""
    assert isinstance(framework.__version__, str)  # type: ignore[union-attr]
    return np.full_like(image, 2 * _loaded())
