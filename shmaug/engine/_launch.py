"""Starting one worker process without the known hazards of fork and spawn.

Each hazard is a context manager around ``Process.start()``; ``start_worker`` applies them
all. Kept apart from the pool, which only decides *when* a worker starts.
"""

from __future__ import annotations

import gc
import signal
import sys
from contextlib import contextmanager
from multiprocessing import spawn as mp_spawn
from typing import Any, Iterator

from . import _platform


def start_worker(process: Any, start_method: str, *, needs_main: bool) -> None:
    """``process.start()`` under every guard below that applies to ``start_method``.

    ``needs_main``: the payload refers to ``__main__`` (a spawned worker must re-import it).
    """
    forking = start_method == "fork"
    skip_main = start_method == "spawn" and not needs_main
    with _main_module_skipped(skip_main), _cv2_single_threaded(forking), \
            _gc_frozen(forking), _sigint_blocked():
        process.start()


@contextmanager
def _main_module_skipped(skip: bool) -> Iterator[None]:
    """Start spawn workers without re-running the user's ``__main__``.

    Spawn re-imports the main script in every worker so that objects defined there unpickle.
    When the payload does not refer to ``__main__`` that import is pure cost: a script that
    imported TensorFlow would make each worker import it too (seconds, and ~300 MB each).
    """
    if not skip:
        yield
        return
    original = mp_spawn.get_preparation_data

    def lean(name: str) -> dict[str, Any]:
        data: dict[str, Any] = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    mp_spawn.get_preparation_data = lean
    try:
        yield
    finally:
        mp_spawn.get_preparation_data = original


@contextmanager
def _cv2_single_threaded(forking: bool) -> Iterator[None]:
    """Fork workers with OpenCV already set to one thread.

    After the parent has used OpenCV's thread pool, ``cv2.setNumThreads`` in a forked child
    deadlocks (the pool's threads do not exist there). Setting it in the parent around the
    fork lets the child inherit one thread and never touch the pool; the parent's own
    setting is restored right after.
    """
    cv2 = sys.modules.get("cv2")
    if not forking or cv2 is None:
        yield
        return
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(threads)


@contextmanager
def _gc_frozen(forking: bool) -> Iterator[None]:
    """Fork with every existing object moved out of the collector's sight (``gc.freeze``).

    A forked worker's collections would otherwise walk all the parent's objects (with
    TensorFlow imported, millions), costing CPU and copying the pages they sit on. The
    parent gets its objects back right after the fork. A program that froze objects itself
    manages that on its own: ``unfreeze`` would undo its freeze, so nothing is done then.
    """
    if not forking or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Hold Ctrl-C while a worker starts: delivered mid-fork, CPython's after-fork hooks would
    swallow it. It is delivered in the parent right after; the worker ignores it."""
    if not _platform.HAS_SIGMASK:  # Windows
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
