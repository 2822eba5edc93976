"""Keyed prefetch: which batches are in flight in which ring slot, and whose answers are whose.

``Prefetcher`` is the main process's side of the output ring. It knows each batch by its key
``(epoch, batch)``, schedules the one asked for and the next ones in free slots, files the
pool's answers under their batches, drops work the consumer no longer wants (bumping the slot's
generation so workers skip it), and hands a finished batch out by copy or by a lease. It owns
no memory and no process: the ``Loader`` owns the ring and the pool and closes them.
"""

from __future__ import annotations

import enum
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from . import depth
from . import presses
from .copier import Copier, Copy
from .recycle import Recycler
from ...errors import ClosedError
from ..workers.reports import as_error
from .ring import OutputRing, Targets
from ..plan.schedule import BatchPlan, Task
from ..workers.wire import Done

RESULTS_POLL_S = 0.1  # how long one wait for results lasts before the loop re-checks everything
_LEAVE_S = 1.0  # how long close() waits for consumer threads to leave produce()
CLOSED = "This shmaug.Loader is closed. Fix: create a new one."

EpochBatch = tuple[int, int]  # (epoch, batch)


class Handoff(enum.Enum):
    """How a finished batch leaves its slot."""

    COPY = "copy"  # private arrays; the slot goes back to the workers at once
    UNTIL_NEXT = "until next"  # read-only views, valid until the next batch (copy=False)
    LEND = "lend"  # writable arrays over the slot, which stays theirs while any lives


@dataclass
class _Batch:
    """One batch being produced in one ring slot."""

    key: EpochBatch
    slot: int
    rows: int
    tickets: set[int] = field(default_factory=set)  # invariant: dispatched, not yet answered
    starts: dict[int, int] = field(default_factory=dict)  # each task's first row, by ticket
    error: BaseException | None = None  # the failure of its earliest failed task
    error_at: int = 0  # that task's first row
    dropped: bool = False  # no longer wanted: free the slot when `tickets` is empty
    copy: Copy | None = None  # its copy out of the slot, asked of the copier ahead of time

    def settled(self) -> bool:
        """Done, or failed where no task before the failed one is still out: its error is
        then the one of the first failing sample in batch order, whichever task answered
        first (a batch cut into tasks named sample 38 or 39 by the race)."""
        return not self.tickets or self.error is not None and all(
            self.starts[t] > self.error_at for t in self.tickets)

    def failed(self, ticket: int, error: BaseException) -> None:
        if self.error is None or self.starts[ticket] < self.error_at:
            self.error, self.error_at = error, self.starts[ticket]


class Prefetcher:
    """Produces batches by key over ``ring`` and ``pool``, keeping the next ones in flight.

    Args:
        ring: the output ring; its slot count is the number of batches in flight.
        pool: a ``WorkerPool`` or ``InlinePool``.
        plan: how positions fall into batches.
        workers: how many workers ``pool`` runs (0 inline).
        timeout: the pool's per-task timeout, for the error message.
        copier: copies the next batch out of its slot while the consumer is away (see
            ``copier``); None copies on the consumer's thread. The caller owns and closes it.
        recycler: where the copies go (see ``recycle``); None: always new arrays.
        step: tasks start at multiples of this many rows into a batch (2 under a mix,
            whose pairs a worker makes whole; see ``plan.schedule.BatchPlan.slices``).
    """

    def __init__(self, ring: OutputRing, pool: Any, plan: BatchPlan, *, workers: int,
                 timeout: float | None, copier: Copier | None = None,
                 recycler: Recycler | None = None, step: int = 1) -> None:
        self.ring, self.pool, self.plan, self._step = ring, pool, plan, step
        self._copier = copier
        self._recycler = recycler
        self.workers = workers
        self.timeout = timeout
        self._closed = False  # set by close(), from any thread: every wait checks it
        self._batches = len(plan)
        # invariant: one entry per busy, wanted slot
        self._inflight: dict[EpochBatch, _Batch] = {}
        self._by_ticket: dict[int, _Batch] = {}  # invariant: every dispatched, unanswered ticket
        self._next_ticket = 1  # ticket 0 was the probe's (see loader.await_probe)
        self._lent: int | None = None  # invariant: the slot a lease (copy=False) still holds
        # Handoff.LEND: slots whose arrays all died, appended from any thread (a deque's
        # append is atomic), taken back on this side; at most half the ring is lent at once,
        # so a consumer that keeps every batch gets copies rather than a ring run dry.
        self._returned: deque[int] = deque()
        self._leased = 0  # invariant: slots lent (Handoff.LEND) and not yet taken back
        self._max_leased = ring.slots // 2  # (0 with one slot: that one must stay free)
        self._inside: set[int] = set()  # invariant: ids of the threads running produce()
        # Whether the last batch asked for found the ring with room for fewer batches ahead
        # than there are workers (``depth.short``): a worker then has no batch of its own.
        self.short = False
        # The batches wanted next, where the consumer knows them better than "the following
        # ones": a remote maker (``engine.loader.serve``) is asked for a stripe of the epoch.
        self.hint: list[EpochBatch] | None = None
        self.resized(workers)

    def resized(self, workers: int) -> None:
        """The pool runs ``workers`` workers from now on (``workers="auto"``): cut batches for
        that many. Only the cuts change, never a batch's content."""
        self.workers = workers

    def _ahead_parts(self, ahead: int) -> int:
        """The tasks each of ``ahead`` prefetched batches is cut into. A batch the consumer
        already waits for is cut across all workers (it arrives soonest). Prefetched ones go
        whole to one worker, which halves the messages and wake-ups of the main process, when
        the lookahead has enough batches to keep every worker busy; otherwise each is cut in
        as many pieces as that takes. The lookahead shrinks while the consumer holds lent
        slots (``fit`` on a GPU holds several): counted from the ring alone, 15 workers were
        left with 9 tasks among them, and ``fit`` got 0.6 of what they could make."""
        return max(1, -(-max(self.workers, 1) // max(1, ahead)))

    @property
    def ready(self) -> int:
        """Batches finished and not yet handed out."""
        return sum(1 for b in self._inflight.values() if not b.tickets and b.error is None)

    def close(self) -> None:
        """Forget everything in flight; a wait in progress (another thread) ends with
        ``ClosedError``, and close returns once it has (bounded by ``_LEAVE_S``).

        Why wait: at interpreter exit this runs from the loader's finalizer, just before
        Python finalizes. A thread still waiting in ``produce`` then (Keras' tf.data thread,
        inside a ``tf.py_function``) would be ended by Python the moment it wakes, without
        finishing its py_function, and TensorFlow's teardown waits for that forever: a
        Ctrl-C'd ``fit`` that never exits.
        """
        self._closed = True
        self._inflight = {}
        self._by_ticket = {}
        me = threading.get_ident()
        deadline = time.monotonic() + _LEAVE_S
        while self._inside - {me} and time.monotonic() < deadline:
            time.sleep(0.005)

    def produce(self, key: EpochBatch, rows: int, *, handoff: Handoff
                ) -> tuple[np.ndarray, Targets, bool]:
        """Batch ``key`` (its first ``rows`` rows): images, augmented targets by name, and
        whether it was ready when asked, handed over as ``handoff`` says (``Handoff.LEND``
        copies when half the ring is lent already)."""
        me = threading.get_ident()
        self._inside.add(me)
        try:
            return self._produce(key, rows, handoff, time.monotonic())
        finally:
            self._inside.discard(me)

    def _produce(self, key: EpochBatch, rows: int, handoff: Handoff, began: float
                 ) -> tuple[np.ndarray, Targets, bool]:
        if self._closed:
            raise ClosedError(CLOSED)
        if self._copier is not None:
            self._copier.back()  # how long the consumer was away: do copies ahead pay?
        if self._lent is not None:  # asking for the next batch ends the previous lease
            self.ring.release(self._lent)
            self._lent = None
        self._take_back()
        wanted = [key, *self._lookahead(key)]
        self.short = depth.short(len(wanted) - 1, self.workers)
        self._collect(0.0)  # file what finished while the consumer was busy
        self._drop_unwanted(set(wanted))
        hit = key in self._inflight and not self._inflight[key].tickets
        while key not in self._inflight:
            if not self._schedule(key, parts=max(self.workers, 1)):
                self._collect()  # every slot holds work we no longer want: let it drain
                self._take_back()  # (or a lent batch the consumer let go of meanwhile)
                presses.give_up(began)
        parts = self._ahead_parts(len(wanted) - 1)
        for ahead in wanted[1:]:
            if ahead not in self._inflight and not self._schedule(ahead, parts):
                break
        batch = self._inflight[key]
        while not batch.settled():
            self._collect()
            presses.give_up(began)  # (a Ctrl-C off the main thread: see presses)
        del self._inflight[key]
        if batch.error is not None:
            self._drop(batch)
            # What was made ahead meanwhile may hold the same failure (a bucket away, a file
            # being rewritten): made again when asked, not raised again after it is gone.
            # Batches finished whole stay.
            self._drop_unwanted({k for k, b in self._inflight.items()
                                 if not b.tickets and b.error is None})
            raise batch.error
        if handoff is Handoff.UNTIL_NEXT:
            self._lent = batch.slot
            return (*self.ring.lend(batch.slot, rows), hit)
        if handoff is Handoff.LEND and self._leased < self._max_leased:
            if batch.copy is not None and self._copier is not None:
                self._copier.discard(batch.copy)  # made ahead under another handoff
            try:
                lent = self.ring.lease(batch.slot, rows, self._returned.append)
            except Exception:
                if self._closed:  # closed from another thread (Ctrl-C): the ring is gone
                    raise ClosedError(CLOSED) from None
                raise
            self._leased += 1
            return (*lent, hit)
        if handoff is Handoff.COPY:
            self._copy_ahead(wanted[1:])
        out = self._read(batch, rows)
        self.ring.release(batch.slot)
        return (*out, hit)

    def _take_back(self) -> None:
        """Free the slots whose lent arrays have all died since the last look."""
        while self._returned:
            slot = self._returned.popleft()
            self._leased -= 1
            if not self._closed:
                self.ring.release(slot)

    # -- copies made ahead (see copier) -------------------------------------------------------

    def _copy_ahead(self, keys: list[EpochBatch]) -> None:
        """Ask the copier for the next batch's copy if that batch is finished already: it is
        then made while the consumer works on this one, not when the consumer asks."""
        ahead = self._inflight.get(keys[0]) if keys else None
        if self._copier is None or ahead is None or ahead.copy is not None:
            return
        nbytes = self.ring.view[ahead.slot, :ahead.rows].nbytes
        if not ahead.tickets and ahead.error is None and self._copier.pays(nbytes):
            # The array is picked on this thread: a new one then comes from its malloc arena
            # (see the loader's gather ahead).
            ahead.copy = self._copier.submit(partial(
                self.ring.read, ahead.slot, ahead.rows, self._into(ahead.slot, ahead.rows)))

    def _into(self, slot: int, rows: int) -> np.ndarray | None:
        """An array for a copy of the slot's first ``rows`` images (None: the copy's own)."""
        if self._recycler is None:
            return None
        images = self.ring.view[slot, :rows]
        return self._recycler.empty(images.shape, images.dtype)

    def _read(self, batch: _Batch, rows: int) -> Any:
        """The batch's rows copied out of its slot: the copy made ahead, else made now."""
        if self._copier is None:
            return self.ring.read(batch.slot, rows, self._into(batch.slot, rows))
        try:
            if batch.copy is not None and rows == batch.rows:
                return self._copier.take(batch.copy)
            return self._copier.make(partial(self.ring.read, batch.slot, rows,
                                             self._into(batch.slot, rows)))
        except Exception:
            if self._closed:  # the loader dropped the ring's memory while the copy was due
                raise ClosedError(CLOSED) from None
            raise

    def _lookahead(self, key: EpochBatch) -> list[EpochBatch]:
        """The keys the consumer most likely wants next: the following batches, in order, as
        many as the slots neither lent nor kept for the batch asked for. (Were lent slots
        counted, batches ahead could hold every other slot, and a batch asked for out of
        order would wait for a slot that only its own consumer can free.) ``hint``, where
        set, names them instead."""
        room = max(0, self.ring.slots - 1 - self._leased)
        if self.hint is not None:
            return [k for k in self.hint if k != key][:room]
        epoch, batch = key
        out = []
        for _ in range(room):
            batch += 1
            if batch >= self._batches:
                epoch, batch = epoch + 1, 0
            out.append((epoch, batch))
        return out

    def _schedule(self, key: EpochBatch, parts: int) -> bool:
        """Start a batch in a free slot, cut into ``parts`` tasks; False when none is free."""
        acquired = self.ring.acquire()
        if acquired is None:
            return False
        slot, generation = acquired
        start, stop = self.plan.bounds(key[1])
        batch = _Batch(key, slot, stop - start)
        self._inflight[key] = batch
        for lo, hi in self.plan.slices(key[1], parts, self._step):
            ticket = self._next_ticket
            self._next_ticket += 1
            batch.tickets.add(ticket)
            batch.starts[ticket] = lo
            self._by_ticket[ticket] = batch
            self.pool.submit(Task(ticket, key[0], slot, generation, lo, hi, start))
        return True

    def _drop_unwanted(self, wanted: set[EpochBatch]) -> None:
        for key in [k for k in self._inflight if k not in wanted]:
            self._drop(self._inflight.pop(key))

    def _drop(self, batch: _Batch) -> None:
        """Forget a batch; its slot frees once the tasks already running have answered."""
        batch.dropped = True
        if batch.copy is not None and self._copier is not None:
            self._copier.discard(batch.copy)
        self.ring.cancel(batch.slot)
        for ticket in self.pool.cancel_pending(set(batch.tickets)):
            batch.tickets.discard(ticket)
            self._by_ticket.pop(ticket, None)
        self._free_if_idle(batch)

    def _free_if_idle(self, batch: _Batch) -> None:
        if batch.dropped and not batch.tickets:
            self.ring.release(batch.slot)

    def _collect(self, timeout_s: float = RESULTS_POLL_S) -> None:
        """Wait (bounded) for worker results and file them under their batches."""
        if self._closed:
            raise ClosedError(CLOSED)
        self._take_back()  # a wait for a free slot may end with a lease
        for result in self.pool.poll(timeout_s):
            batch = self._by_ticket.pop(result.ticket, None)
            if batch is None:
                continue
            batch.tickets.discard(result.ticket)
            if not isinstance(result, Done):
                batch.failed(result.ticket, as_error(result, self.timeout))
            self._free_if_idle(batch)
