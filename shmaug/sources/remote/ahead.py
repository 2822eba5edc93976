"""The look-ahead: a worker's samples fetched for its task and the tasks queued behind it, the
next round in flight while this task's samples decode, each handed out once (``Fetched``).

``bucket.RemoteTable`` and ``formats.table.RecordTable`` hand ``Fetched.request`` the function that
reads a list of samples through ``_client.Remote`` and ``put``s them here; this module sends
no request itself.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import os
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Iterable, Sequence

from ... import platform

# Samples of the tasks queued behind a worker's task whose bytes are fetched ahead of it
# (``Fetched``): fewer round trips, records of one shard coalesced across tasks, and the wait
# for a round hidden behind the tasks before it. At most this many samples, and about
# AHEAD_BYTES of them per worker once their size is known.
AHEAD, AHEAD_BYTES = 256, 32 << 20


class Fetched:
    """A worker's fetched bytes (or the exception a fetch raised), handed out as asked.

    ``request`` is called with each task's samples and those of the tasks queued behind it
    (the window: up to ``AHEAD`` samples, ``AHEAD_BYTES`` at the mean size seen so far; before
    any is seen, as many as the task's). It returns once the task's samples are here:

    - those an earlier round brought, or is bringing (then it waits for that round);
    - the others fetched now, on the worker's thread, in one round with the rest of the window.

    Once half of the window behind the task is neither here nor on its way, that half is asked
    for in the background (a daemon thread, rounds in order), so the next tasks' samples
    travel while this one's decode. It is, only where the work queued before them outlasts a
    round (both measured here): else the round would be waited for anyway, and the next task's
    own round takes them (one wait for several tasks). Rounds of half a window keep what
    coalescing saves (one request per shard for several tasks).

    A sample is kept until each of its uses in the window took it (weighted sampling draws one
    twice). What is no longer wanted (a cancelled task's) is dropped at the next request; a
    background round ending after that may leave up to a second window's bytes until then.
    Failures live one task: a sample whose background fetch failed, or a failure left by an
    earlier task, is fetched again by its own task (a missing object stays missing)."""

    __slots__ = ("_ready", "_uses", "_task", "_pid", "_bytes", "_count", "_flight", "_lock",
                 "_queue", "_draining", "_round_s", "_sample_s", "_asked")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._ready: dict[int, bytes | BaseException] = {}
        self._uses: dict[int, int] = {}  # takes left per sample, as counted at its request
        self._task: set[int] = set()  # the samples of the task that asked last
        self._pid = os.getpid()  # a fork starts empty: its parent's leftovers are not its own
        self._bytes = self._count = 0  # of the samples fetched: their mean size bounds ahead
        self._flight: dict[int, cf.Future[None]] = {}  # sample -> the background round
        self._lock = threading.Lock()  # rounds put from their thread while the worker takes
        self._queue: deque[tuple[list[int], Callable[[list[int]], None], cf.Future[None]]] = (
            deque())  # background rounds not started, in order
        self._draining = False  # invariant: a thread runs the queued rounds
        self._round_s = 0.0  # how long a round takes (moving average; 0: none seen yet)
        self._sample_s = 0.0  # how long the worker spends on a sample between two requests
        self._asked: tuple[float, int] | None = None  # the last request: when it returned,
        # and its task's samples (the time to the next request is theirs to make)

    def _own(self) -> None:
        if self._pid != os.getpid():  # a fork: no thread, no lock held, nothing in flight
            self._reset()

    def request(self, indices: Iterable[int], ahead: Iterable[int],
                fetch: Callable[[list[int]], None]) -> None:
        """Have the task's samples (``indices``) here, and those of ``ahead`` (the tasks
        behind it) here or on their way; ``fetch(samples)`` reads samples and ``put``s them.
        Never raises: a failure is ``put`` for its own samples."""
        self._own()
        task = [int(i) for i in indices]
        with self._lock:
            for i in [i for i, o in self._ready.items() if _transient(o)]:
                del self._ready[i]  # an earlier task's failure: this task tries again
            self._task = set(task)
            room = len(task) if not self._count else min(
                AHEAD, AHEAD_BYTES * self._count // max(1, self._bytes))
            later = [int(i) for i in itertools.islice(ahead, room)]
            self._uses = Counter(task + later)
            self._ready = {i: o for i, o in self._ready.items() if i in self._uses}
            known = self._ready.keys() | self._flight.keys()
            need = [i for i in dict.fromkeys(task) if i not in known]
            soon = [i for i in dict.fromkeys(later) if i not in known and i not in self._task]
            waits = {self._flight[i] for i in task if i in self._flight}
            cover = len(task) + next((k for k, i in enumerate(later) if i not in known),
                                     len(later))  # samples to make before one not asked for
        if self._asked is not None and self._asked[1]:  # the last task's making, no wait
            self._sample_s = _moving(self._sample_s, (time.perf_counter() - self._asked[0])
                                     / self._asked[1])
        if need:
            self._round(need + soon, fetch)
        elif 2 * len(soon) >= max(1, len(later)) and cover * self._sample_s >= self._round_s:
            self._start(soon, fetch)
        for waited in waits:
            waited.result()
        with self._lock:  # a background round's failure: fetched again, by its own task
            again = [i for i in dict.fromkeys(task) if i not in self._ready]
        if again:
            self._round(again, fetch)
        self._asked = time.perf_counter(), len(task)

    def _start(self, samples: list[int], fetch: Callable[[list[int]], None]) -> None:
        """Fetch ``samples`` in the background, after the rounds already asked for."""
        done: cf.Future[None] = cf.Future()
        with self._lock:
            for i in samples:
                self._flight[i] = done
            self._queue.append((samples, fetch, done))
            if not self._draining:  # a daemon: a worker's exit does not wait for a round
                try:
                    platform.start_thread(self._drain, "shmaug-ahead")
                except RuntimeError:  # (no thread: each task fetches its own, as before)
                    self._queue.pop()
                    for i in samples:
                        self._flight.pop(i, None)
                    done.set_result(None)
                    return
                self._draining = True  # (the thread waits on the lock held here)

    def _drain(self) -> None:
        """Run the queued rounds in order; end once none is left."""
        while True:
            with self._lock:
                if not self._queue:
                    self._draining = False
                    return
                samples, fetch, done = self._queue.popleft()
            try:
                self._round(samples, fetch, background=True)
            finally:
                done.set_result(None)

    def _round(self, samples: list[int], fetch: Callable[[list[int]], None],
               background: bool = False) -> None:
        began = time.perf_counter()
        try:
            fetch(samples)
        except Exception as exc:  # a source's bug: each sample's read raises it
            self.put(samples, [exc] * len(samples))
        finally:
            self._round_s = _moving(self._round_s, time.perf_counter() - began)
            with self._lock:
                for i in samples:
                    if background:
                        self._flight.pop(i, None)
                        if _transient(self._ready.get(i)):
                            del self._ready[i]  # its task tries again (``request``)

    def put(self, indices: Sequence[int], outcomes: Sequence[bytes | BaseException]) -> None:
        with self._lock:
            for i, outcome in zip(indices, outcomes):
                if isinstance(outcome, BaseException):
                    if i in self._task or not _transient(outcome):
                        self._ready[i] = outcome
                else:
                    self._ready[i] = outcome
                    self._bytes += len(outcome)
                    self._count += 1

    def take(self, index: int) -> bytes | BaseException | None:
        """The sample's bytes or exception; None: not fetched (read it alone)."""
        self._own()
        i = int(index)
        with self._lock:
            data = self._ready.get(i)
            if data is not None:
                left = self._uses.get(i, 1) - 1
                if left > 0:
                    self._uses[i] = left
                else:
                    del self._ready[i]
                    self._uses.pop(i, None)
        return data


def _moving(average: float, seconds: float) -> float:
    """A moving average of durations that follows a change within a few of them."""
    return seconds if not average else 0.7 * average + 0.3 * seconds


def _transient(outcome: Any) -> bool:
    """A failure worth another try (not a missing object)."""
    return isinstance(outcome, BaseException) and not isinstance(outcome, FileNotFoundError)
