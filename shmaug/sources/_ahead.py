"""The look-ahead: a worker's samples fetched for its task and the tasks queued behind it, in
one round of requests, each handed out once (``Fetched``).

``_bucket.RemoteTable`` and ``_index.RecordTable`` ask ``Fetched`` which samples to fetch and
fetch them through ``_client.Remote``; this module sends no request itself.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from typing import Any, Iterable, Sequence

# Samples of the tasks queued behind a worker's task whose bytes are fetched with the task's
# (``Fetched``): fewer round trips, and records of one shard coalesced across tasks. At most
# this many samples, and about AHEAD_BYTES of them per worker once their size is known.
AHEAD, AHEAD_BYTES = 256, 32 << 20


class Fetched:
    """A worker's fetched bytes (or the exception a fetch raised), handed out as asked.

    Asked for a task's samples, it says which to fetch: none when an earlier task fetched them
    all; otherwise the task's missing ones and those of the tasks queued behind it (up to
    ``AHEAD`` samples, ``AHEAD_BYTES`` at the mean size seen so far; before any is seen, as
    many as the task's), in one round of requests. A sample is kept until each of its uses in
    that round took it (weighted sampling draws one twice). What is no longer wanted (a
    cancelled task's) is dropped at the next round. Failures live one task: a queued task's
    sample whose fetch failed, or a failure left by an earlier task, is fetched again (a
    missing object stays missing)."""

    __slots__ = ("_ready", "_uses", "_task", "_pid", "_bytes", "_count")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._ready: dict[int, bytes | BaseException] = {}
        self._uses: dict[int, int] = {}  # takes left per sample, as counted at its round
        self._task: set[int] = set()  # the samples of the task that asked last
        self._pid = os.getpid()  # a fork starts empty: its parent's leftovers are not its own
        self._bytes = self._count = 0  # of the samples fetched: their mean size bounds ahead

    def missing(self, indices: Iterable[int], ahead: Iterable[int] = ()) -> list[int]:
        if self._pid != os.getpid():
            self._reset()
        for i in [i for i, o in self._ready.items() if _transient(o)]:
            del self._ready[i]  # an earlier task's failure: this task tries again
        task = [int(i) for i in indices]
        self._task = set(task)
        if all(i in self._ready for i in task):
            return []
        room = len(task) if not self._count else min(AHEAD, AHEAD_BYTES * self._count // max(
            1, self._bytes))
        wanted = task + [int(i) for i in itertools.islice(ahead, room)]
        self._uses = Counter(wanted)
        self._ready = {i: self._ready[i] for i in self._uses if i in self._ready}
        return [i for i in self._uses if i not in self._ready]

    def put(self, indices: Sequence[int], outcomes: Sequence[bytes | BaseException]) -> None:
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
        i = int(index)
        data = self._ready.get(i)
        if data is not None:
            left = self._uses.get(i, 1) - 1
            if left > 0:
                self._uses[i] = left
            else:
                del self._ready[i]
                self._uses.pop(i, None)
        return data


def _transient(outcome: Any) -> bool:
    """A failure worth another try (not a missing object)."""
    return isinstance(outcome, BaseException) and not isinstance(outcome, FileNotFoundError)

