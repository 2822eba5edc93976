"""Shared fixtures, and a guard that fails any test leaving shared memory or processes behind.

Only what pytest finds by itself lives here (hooks, fixtures); helpers the test modules import
(marks, TIME_SCALE, shmaug_segments, assert_same_batches, faulthandler_off) are in _helpers.py.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import time

import numpy as np
import psutil
import pytest

from tests._helpers import FAULT_FILE, shmaug_segments

# A shell without job control starts a background job with SIGINT ignored, and an ignored
# signal stays ignored through fork and exec (Python then leaves it so): every child the
# Ctrl-C tests start would ignore the Ctrl-C they send (seen with `( ... .ci/run & )`).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Tests with the `keras` mark (_helpers.needs_keras) skip where Keras is not installed.
_HAS_KERAS = importlib.util.find_spec("keras") is not None
_GRACE_S = 5.0  # a dropped loader's finalizer or the resource tracker may need a moment


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


def pytest_collection_modifyitems(config, items):
    """The `ray` tests (a real cluster, a minute or more) run only when asked for by name
    (`-m ray`): CI runs them once, in a step of their own."""
    if "ray" in (config.getoption("markexpr", "") or ""):
        return
    kept = [item for item in items if not item.get_closest_marker("ray")]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("ray")])
        items[:] = kept


def pytest_configure(config):
    try:
        from _pytest.faulthandler import fault_handler_stderr_fd_key
    except ImportError:  # another pytest: faulthandler_off() falls back to stderr
        return
    fd = config.stash.get(fault_handler_stderr_fd_key, None)
    if fd is not None:
        FAULT_FILE.append(fd)  # where _helpers.faulthandler_off turns pytest's back on


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


@pytest.fixture
def images() -> np.ndarray:
    """40 tiny deterministic grayscale images, each distinct."""
    rng = np.random.default_rng(1234)
    return rng.integers(0, 256, size=(40, 12, 12), dtype=np.uint8)
