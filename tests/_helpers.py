"""Helpers the test modules share: marks, time bounds, a look at /dev/shm, batch comparison.

Test modules import these from here. ``conftest.py`` keeps only what pytest finds there by
itself (hooks, the autouse leak guard, fixtures): a conftest is pytest's to load, and a test
module that imported one would depend on how pytest names it (``--import-mode``).
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib.util
import os
import sys
from collections.abc import Iterator

import numpy as np
import pytest

SHM_DIR = "/dev/shm"
# Tests that need Keras carry the `keras` mark (this alias, or in a module's pytestmark): CI runs
# them under each Keras backend (`pytest -m keras` with KERAS_BACKEND=jax / torch, .ci/run), and
# they skip where Keras is not installed (the runs on Pythons without TensorFlow; the skip is
# conftest.py's pytest_runtest_setup).
needs_keras = pytest.mark.keras
needs_tensorflow = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                      reason="needs TensorFlow (tf.distribute)")
# Bounds that tell "ends promptly" from "hangs" (Ctrl-C, close, a timeout firing) are
# multiplied by this where the suite runs in two processes (pytest-xdist, setup.cfg): each
# test then shares the 2 cores with another runner's, and TensorFlow's teardown after a Ctrl-C
# once took 15.7 s against a bound of 15. A bound that measures a mechanism (a death seen
# before a 6 s sentinel could see it) is not scaled.
TIME_SCALE = 2.0 if "PYTEST_XDIST_WORKER" in os.environ else 1.0

# The descriptor pytest's faulthandler writes to; conftest.py's pytest_configure appends it once.
FAULT_FILE: list[int] = []


def shmaug_segments(pid: int | None = None) -> set[str]:
    """Our segments in /dev/shm; with ``pid``, only those that process created."""
    if not os.path.isdir(SHM_DIR):
        return set()
    prefix = "shmaug_" if pid is None else f"shmaug_{pid}_"
    return {name for name in os.listdir(SHM_DIR) if name.startswith(prefix)}


def running(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running: neither ended nor a zombie waiting to be reaped. One
    that ends between the two looks has ended (psutil's NoSuchProcess: a race CI met)."""
    import psutil

    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def assert_same_batches(got: list, expected: list) -> None:
    """Two runs' batches, ``(x, y)`` each, equal bit for bit and in the same order."""
    assert len(got) == len(expected)
    for (xa, ya), (xb, yb) in zip(got, expected):
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(xa, xb)


@contextlib.contextmanager
def faulthandler_off() -> Iterator[None]:
    """Processes forked inside print no faulthandler dump when the test crashes them on
    purpose (a forked worker inherits pytest's faulthandler); pytest's is back afterwards."""
    if not faulthandler.is_enabled():
        yield
        return
    faulthandler.disable()
    try:
        yield
    finally:
        faulthandler.enable(file=FAULT_FILE[0] if FAULT_FILE else sys.stderr)
