"""Batch copies made ahead of the consumer, on one background thread.

Why: handing out a batch means copying it out of its ring slot (or, with nothing to augment,
gathering it from the dataset), and for big images that copy takes milliseconds: 64 float32
images of 224x224x3 are 38.5 MB, about 15 ms on the 2-core machine the bench runs on. Made
on the consumer's thread, it is time the training step waits for data. numpy copies with the
GIL released, so a thread can make the copy of the next batch while the consumer is busy with
this one; the consumer then finds it made and only takes it.

One thread, copies in the order asked, one at a time: a copy is memory-bound, and a second
thread would only compete with the workers for the same cores. The thread starts with the
first copy asked for and holds no reference to the loader, so a loader that is never closed
is still collected (its finalizer closes the copier).

A copy is made ahead only when that pays: when the consumer stayed away (between taking a
batch and asking for the next) longer than a thread takes to wake (``WAKE_S``), the last two
times: a loop that pauses once per epoch stays a loop that copies for itself. A consumer
that comes straight back would only wait for the thread instead of copying itself, and pay
two thread wake-ups per batch on top: on the busy 2-core machine, 1 ms gathers took 1.7 to
2.3 ms each that way. (Copy times are no guide: the same copy takes 1 ms or 15 ms as pages
fault in and the cores are shared, and made ahead it pays either way.) Nor for batches under
``MIN_BYTES``: their copy costs about what handing it over does (0.1 to 0.2 ms of the
consumer's time), and in the suite's data-wait runs W1's 2 MB batches waited more with copies
made ahead than without in 6 interleaved rounds of 6 (medians 6.4% vs 3.2%, 8.5% vs 4.7%).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ... import platform

_PENDING, _RUNNING, _DONE = "pending", "running", "done"
# A consumer back sooner than this after its last batch is not left time to gain from a copy
# made ahead: the thread may not even have woken (up to about 1 ms on a busy 2-core machine).
WAKE_S = 0.001
MIN_BYTES = 4 << 20  # smaller copies are made when wanted (see the module docstring)


class Copy:
    """One copy asked for ahead: ``Copier.take`` gives its result."""

    __slots__ = ("done", "error", "fn", "state", "value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn: Callable[[], Any] | None = fn  # dropped once run: it may pin shared memory
        self.state = _PENDING  # invariant: changed only under the copier's lock
        self.value: Any = None
        self.error: Exception | None = None
        self.done = threading.Event()

    def run(self) -> None:
        fn, self.fn = self.fn, None
        assert fn is not None
        try:
            self.value = fn()
        except Exception as exc:  # noqa: BLE001 - re-raised on the consumer's thread by take()
            self.error = exc


class Copier:
    """One daemon thread that runs the copies ``submit``-ted to it, oldest first."""

    def __init__(self, name: str = "shmaug-copier") -> None:
        self._name = name
        self._lock = threading.Condition()
        self._queue: deque[Copy] = deque()  # invariant: the pending copies, oldest first
        self._thread: threading.Thread | None = None
        self._closed = False
        self._away_s = float("inf")  # the shorter of its last two times away (none yet)
        self._last_away_s = float("inf")
        self._handed: float | None = None  # when the consumer got its last batch

    @property
    def thread(self) -> threading.Thread | None:
        """The background thread, once the first copy started it."""
        return self._thread

    def back(self) -> None:
        """The consumer asks for its next batch (call this first): how long it was away since
        its last one decides whether copies made ahead pay."""
        if self._handed is not None:
            away = time.perf_counter() - self._handed
            self._away_s = min(away, self._last_away_s)
            self._last_away_s, self._handed = away, None

    def pays(self, nbytes: int) -> bool:
        """Whether a copy of ``nbytes`` made ahead pays (see the module docstring); else
        ``make`` it when it is wanted."""
        return nbytes >= MIN_BYTES and self._away_s > WAKE_S

    def submit(self, fn: Callable[[], Any]) -> Copy:
        """Have ``fn()`` (a copy) made in the background, to ``take`` later."""
        job = Copy(fn)
        with self._lock:
            if self._closed:  # take() makes it on the caller's thread
                return job
            self._queue.append(job)
            if self._thread is None:
                self._thread = platform.start_thread(self._run, self._name)
            self._lock.notify()
        return job

    def take(self, job: Copy) -> Any:
        """The result of ``job``, for the consumer: made already, waited for while it is
        being made, or made now on this thread when the background thread has not started
        it yet."""
        with self._lock:
            mine = job.state == _PENDING
            if mine:
                job.state = _RUNNING
                if job in self._queue:
                    self._queue.remove(job)
        if mine:
            job.run()
            job.state = _DONE
        else:
            job.done.wait()
        self._handed = time.perf_counter()
        if job.error is not None:
            raise job.error
        value, job.value = job.value, None
        return value

    def make(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, for the consumer, made now on this thread."""
        try:
            return fn()
        finally:
            self._handed = time.perf_counter()

    def discard(self, job: Copy) -> None:
        """No longer wanted: not made if it has not started (its result is dropped anyway)."""
        with self._lock:
            if job.state == _PENDING and job in self._queue:
                self._queue.remove(job)
                job.state, job.fn = _DONE, None
                job.done.set()
        job.value = None

    def close(self, timeout_s: float = 1.0) -> None:
        """Drop the pending copies and join the thread (bounded: a copy in progress ends in
        milliseconds). Idempotent; afterwards ``take`` makes every copy on the caller's
        thread."""
        with self._lock:
            self._closed = True
            self._queue.clear()  # still pending: take() makes them, should anyone ask
            self._lock.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
                job = self._queue.popleft()
                job.state = _RUNNING
            try:
                job.run()
            finally:  # whatever happens, take() must not wait forever
                with self._lock:
                    job.state = _DONE
                job.done.set()
