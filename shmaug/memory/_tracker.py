"""shmaug's own resource tracker: it unlinks the blocks of a main process that died without
closing them (SIGTERM, SIGKILL, a crash), and says nothing while doing so.

Python's resource tracker does the same for every ``SharedMemory``, but at its exit it warns
"resource_tracker: There appear to be N leaked shared_memory objects to clean up": a user
reads that as a leak, while unlinking them is the very clean-up that keeps ``/dev/shm``
clean. So the store keeps its blocks registered here instead: a second tracker process (one
per main process, started on the first block) that tracks only shmaug's blocks and runs
with that warning ignored. Python's tracker, and its warnings about the program's own
objects, are left as they are. Where a block still leaks (a tracker killed too), the next
store sweeps it (``_leftovers``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from typing import Any

from .. import platform

# The leak report, and a failed unlink's, as the tracker process warns them (-W syntax).
_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"
_PATCH_LOCK = threading.Lock()
_SAVED: list[Any] = []  # the tracker calls ``python_tracker_skipped`` replaced, while it does


def _after_fork_in_child() -> None:
    """A fork while another thread held the lock (loaders built in two threads) left the
    child's copy locked for good, and its worker hung attaching its first block; the child
    has that one thread alone, so it starts with a free lock and, where the fork came in
    the middle of ``python_tracker_skipped``, the tracker calls it replaced (only those:
    a program's own patch of them stays)."""
    global _PATCH_LOCK
    _PATCH_LOCK = threading.Lock()
    if _SAVED and resource_tracker.register is _ignore:
        resource_tracker.register, resource_tracker.unregister = _SAVED
        _SAVED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class _QuietTracker(resource_tracker.ResourceTracker):
    def ensure_running(self) -> None:
        """Start the tracker process (if not running) with the leak report ignored (the
        interpreter flags it gets are read from ``sys.warnoptions``), and deaf to the signals
        a job scheduler sends the whole group: a mask outlives the exec, and the tracker
        unblocks only SIGINT and SIGTERM, which it ignores. Slurm's `--signal=USR1@...` killed
        it, and the blocks of a main process that died next leaked."""
        with _PATCH_LOCK:
            saved = list(sys.warnoptions)
            sys.warnoptions.append(_QUIET)
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, platform.GROUP_SIGNALS) \
                if platform.HAS_SIGMASK else None
            try:
                super().ensure_running()
            finally:
                sys.warnoptions[:] = saved
                if mask is not None:  # (a signal that came meanwhile is delivered now)
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


_TRACKER = _QuietTracker()


_POSIX = os.name == "posix"  # Windows frees a block with its last handle: nothing to track


def track(name: str) -> None:
    """Unlink block ``name`` (as ``SharedMemory._name`` spells it) if this process dies."""
    if _POSIX:
        _TRACKER.register(name, "shared_memory")


def untrack(name: str) -> None:
    """Block ``name`` was unlinked by its owner: nothing left to do at death."""
    if _POSIX:
        _TRACKER.unregister(name, "shared_memory")


@contextmanager
def python_tracker_skipped() -> Iterator[None]:
    """Around ``SharedMemory(create=True)`` and ``unlink()``: Python's tracker is not told
    (before 3.13 they always tell it; CPython gh-82300), so it never holds shmaug's blocks."""
    with _PATCH_LOCK:
        saved = resource_tracker.register, resource_tracker.unregister
        _SAVED[:] = saved
        resource_tracker.register = resource_tracker.unregister = _ignore
        try:
            yield
        finally:
            resource_tracker.register, resource_tracker.unregister = saved
            _SAVED.clear()


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None
