"""Sequences nobody asks for batches stop their workers and free their shared memory.

A ``Sequence`` can outlive its use where nothing of shmaug's can free it: on the TensorFlow
backend the default graph keeps every ``from_generator`` function of Keras' adapter, and with
it the Sequence, after ``fit`` (issue 30 §1). So a started Sequence idle for ``STOP_AFTER_S``
stops its workers (one daemon thread watches them all), and when another one starts, any idle
for ``STOP_AT_START_S`` stops at once: a notebook cell run again makes a new Sequence, and the
old one's copy of the data must not wait two minutes. The next ask starts the workers again and
the stream goes on unchanged (a batch is a function of seed, epoch and index).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Protocol

STOP_AFTER_S = 120.0
STOP_AT_START_S = 10.0


class Stoppable(Protocol):
    def _stop_if_idle(self, now: float, after_s: float | None = None) -> None:
        """Stop the workers if nothing was asked for in ``after_s`` (default STOP_AFTER_S)."""


_running: weakref.WeakSet[Stoppable] = weakref.WeakSet()  # whose workers run
_lock = threading.Lock()
_watcher: threading.Thread | None = None  # invariant: alive while _running is not empty


def starting() -> None:
    """Another Sequence starts its workers: stop those idle for ``STOP_AT_START_S``."""
    now = time.monotonic()
    for other in list(_running):
        other._stop_if_idle(now, STOP_AT_START_S)


def watch(seq: Stoppable) -> None:
    """Have ``seq``'s workers stopped once idle."""
    global _watcher
    with _lock:
        _running.add(seq)
        if _watcher is None:
            _watcher = threading.Thread(target=_stop_idle, name="shmaug-idle-stop", daemon=True)
            _watcher.start()


def forget(seq: Stoppable) -> None:
    """``seq``'s workers stopped (closed, or stopped while idle)."""
    _running.discard(seq)


def _stop_idle() -> None:
    global _watcher
    while True:
        time.sleep(min(STOP_AFTER_S / 4, 5.0))
        with _lock:
            running = list(_running)
            if not running:
                _watcher = None
                return
        now = time.monotonic()
        for seq in running:
            seq._stop_if_idle(now)
        del running, seq
