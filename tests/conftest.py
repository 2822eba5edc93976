"""Shared fixtures, and a guard that fails any test leaving shared memory or processes behind."""

from __future__ import annotations

import contextlib
import faulthandler
import importlib.util
import os
import signal
import sys
import time

import numpy as np
import psutil
import pytest

# A shell without job control starts a background job with SIGINT ignored, and an ignored
# signal stays ignored through fork and exec (Python then leaves it so): every child the
# Ctrl-C tests start would ignore the Ctrl-C they send (seen with `( ... .ci/run & )`).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SHM_DIR = "/dev/shm"
# Tests that need Keras carry the `keras` mark (this alias, or in a module's pytestmark): CI runs
# them under each Keras backend (`pytest -m keras` with KERAS_BACKEND=jax / torch, .ci/run), and
# they skip where Keras is not installed (the runs on Pythons without TensorFlow).
needs_keras = pytest.mark.keras
_HAS_KERAS = importlib.util.find_spec("keras") is not None
needs_tensorflow = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                      reason="needs TensorFlow (tf.distribute)")
_GRACE_S = 5.0  # a dropped loader's finalizer or the resource tracker may need a moment
# Bounds that tell "ends promptly" from "hangs" (Ctrl-C, close, a timeout firing) are
# multiplied by this where the suite runs in two processes (pytest-xdist, setup.cfg): each
# test then shares the 2 cores with another runner's, and TensorFlow's teardown after a Ctrl-C
# once took 15.7 s against a bound of 15. A bound that measures a mechanism (a death seen
# before a 6 s sentinel could see it) is not scaled.
TIME_SCALE = 2.0 if "PYTEST_XDIST_WORKER" in os.environ else 1.0


def shmaug_segments(pid: int | None = None) -> set[str]:
    """Our segments in /dev/shm; with ``pid``, only those that process created."""
    if not os.path.isdir(SHM_DIR):
        return set()
    prefix = "shmaug_" if pid is None else f"shmaug_{pid}_"
    return {name for name in os.listdir(SHM_DIR) if name.startswith(prefix)}


def _our_children() -> set[int]:
    """Child processes, ignoring multiprocessing's own long-lived helpers."""
    out = set()
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if "resource_tracker" in cmd or "forkserver" in cmd:
            continue
        out.add(child.pid)
    return out


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("keras") and not _HAS_KERAS:
        pytest.skip('needs Keras: pip install "shmaug[tf]"')


_FAULT_FILE: list[int] = []  # the descriptor pytest's faulthandler writes to, once configured


def pytest_configure(config):
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key
    except ImportError:  # another pytest: faulthandler_off() falls back to stderr
        return
    fd = config.stash.get(fault_handler_stderr_fd_key, None)
    if fd is not None:
        _FAULT_FILE.append(fd)


@contextlib.contextmanager
def faulthandler_off():
    """Processes forked inside print no faulthandler dump when the test crashes them on
    purpose (a forked worker inherits pytest's faulthandler); pytest's is back afterwards."""
    if not faulthandler.is_enabled():
        yield
        return
    faulthandler.disable()
    try:
        yield
    finally:
        faulthandler.enable(file=_FAULT_FILE[0] if _FAULT_FILE else sys.stderr)


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test must leave no `shmaug_` segment and no worker process behind."""
    segments_before = shmaug_segments(os.getpid())
    children_before = _our_children()
    yield
    deadline = time.monotonic() + _GRACE_S
    while True:
        leaked_segments = shmaug_segments(os.getpid()) - segments_before
        leaked_children = _our_children() - children_before
        if not (leaked_segments or leaked_children) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not leaked_segments, f"test leaked shared memory: {sorted(leaked_segments)}"
    assert not leaked_children, f"test leaked processes: {sorted(leaked_children)}"


def assert_same_batches(got: list, expected: list) -> None:
    """Two runs' batches, ``(x, y)`` each, equal bit for bit and in the same order."""
    assert len(got) == len(expected)
    for (xa, ya), (xb, yb) in zip(got, expected):
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(xa, xb)


@pytest.fixture
def images() -> np.ndarray:
    """40 tiny deterministic grayscale images, each distinct."""
    rng = np.random.default_rng(1234)
    return rng.integers(0, 256, size=(40, 12, 12), dtype=np.uint8)
