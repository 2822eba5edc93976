"""Sequences nobody asks for batches stop their workers and free their shared memory.

A ``Sequence`` can outlive its use where nothing of shmaug's can free it: on the TensorFlow
backend the default graph keeps every ``from_generator`` function of Keras' adapter, and with
it the Sequence, after ``fit`` (issue 30 §1). So a started Sequence idle for ``STOP_AFTER_S``
stops its workers (one daemon thread watches them all), and when another one starts, any idle
for ``STOP_AT_START_S`` stops at once: a notebook cell run again makes a new Sequence, and the
old one's copy of the data must not wait two minutes. Past ``KEPT_RUNNING`` others, the ones
asked least recently stop then once idle for ``STOP_CROWDED_S``: a loop that makes a Sequence
per fold or per test-time-augmentation round and drops it made them faster than they went
idle. The next ask starts the workers again and the stream goes on unchanged (a batch is a
function of seed, epoch and index); a Sequence asked again so is in use by turns, and the
watch waits out its pauses (``PAUSE_CAP_S``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING

from .. import platform

if TYPE_CHECKING:
    from .sequence import Sequence

log = logging.getLogger(__name__)

STOP_AFTER_S = 120.0
STOP_AT_START_S = 10.0
KEPT_RUNNING = 8
"""Other Sequences whose workers a Sequence starting keeps running (those idle less than
``STOP_AT_START_S``, asked most recently): 50 dropped Sequences of 2 workers each, kept by
TensorFlow and asked within the last 10 s, ran a process out of its 1024 descriptors. Up to
this many in use by turns (training, validation, a callback's) never stop one another."""

_running: weakref.WeakSet[Sequence] = weakref.WeakSet()  # whose workers run
_lock = threading.Lock()
_watcher: threading.Thread | None = None  # invariant: alive while _running is not empty
_emptied = threading.Event()  # _running became empty: the watcher ends now, not at its tick
# (a thread-leak check after a test's last close saw it up to 5 s longer)


def _after_fork_in_child() -> None:
    """A fork has no watch thread, and none of the parent's Sequences run in it (they are
    the parent's: ``engine.running``): its own are watched from their start."""
    global _lock, _watcher, _emptied
    _lock, _watcher, _emptied = threading.Lock(), None, threading.Event()
    _running.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


PAUSE_CAP_S = 3600.0
"""A Sequence asked for a batch again after an idle stop (a validation set, in epochs longer
than ``STOP_AFTER_S``; a training set, past a long validation) is in use by turns: the watch
then waits one and a half times its longest such pause, at most this long, before stopping it
again, rather than restart its workers (and copy its data again) once an epoch."""

STOP_CROWDED_S = 1.0
"""Past ``KEPT_RUNNING`` others, how long one must have been idle to stop: more than that
many asked by turns within a second (a tf.data thread between two batches, a loop over
ten Sequences) go on without stopping one another."""


def starting() -> None:
    """Another Sequence starts its workers: stop those idle for ``STOP_AT_START_S`` (or, in
    use by turns, for 1.5 times their longest pause: a validation set whose epoch's pause a
    callback's Sequence ended was copied again every epoch), and those idle for
    ``STOP_CROWDED_S`` past the ``KEPT_RUNNING`` asked most recently (one serving a batch is
    not idle: it holds its lock)."""
    now = time.monotonic()
    with _lock:  # (a copy: the watcher's thread may forget one meanwhile)
        running = list(_running)
    newest_first = sorted(running, key=lambda seq: seq.last_asked, reverse=True)
    for rank, other in enumerate(newest_first):
        by_turns = min(PAUSE_CAP_S, 1.5 * other.longest_pause_s)
        stop_if_idle(other, now, max(STOP_AT_START_S, by_turns) if rank < KEPT_RUNNING
                     else STOP_CROWDED_S)


def watch(seq: Sequence) -> None:
    """Have ``seq``'s workers stopped once idle."""
    global _watcher
    with _lock:
        _running.add(seq)
        if _watcher is None:
            _watcher = platform.start_thread(_stop_idle, "shmaug-idle-stop")


def forget(seq: Sequence) -> None:
    """``seq``'s workers stopped (closed, or stopped while idle)."""
    with _lock:
        _running.discard(seq)
        if not _running:
            _emptied.set()


def _stop_idle() -> None:
    global _watcher
    while True:
        _emptied.wait(min(STOP_AFTER_S / 4, 5.0))
        with _lock:
            _emptied.clear()
            running = list(_running)
            if not running:
                _watcher = None
                return
        now = time.monotonic()
        for seq in running:
            stop_if_idle(seq, now)
        del running, seq


def stop_if_idle(seq: Sequence, now: float, after_s: float | None = None) -> None:
    """Stop the workers and free the shared memory if no batch was asked for in
    ``after_s`` (default ``STOP_AFTER_S``, longer for one in use by turns: ``PAUSE_CAP_S``;
    never while one is being served: that holds the lock)."""
    if after_s is None:  # the watch's (not a start's: a notebook's old Sequence goes then)
        after_s = max(STOP_AFTER_S, min(PAUSE_CAP_S, 1.5 * seq.longest_pause_s))
    idle_s = seq.stop_if_idle(now, after_s)
    if idle_s is not None:
        log.info("shmaug.Sequence idle for %.0f s: its workers stopped and its shared memory "
                 "freed (they start again on the next batch asked for)", idle_s)
