"""The worker processes, seen from the parent: start, feed, watch, replace, stop.

Each worker has its own pair of one-way pipes (tasks in, results out): no feeder threads and no
locks shared between processes, so a worker killed at any instant cannot wedge the others. The
parent waits on every result pipe *and* every process sentinel at once, with a timeout, so a
death is seen as soon as it happens and a stuck task as soon as its time is up.

NOTE [shutdown order]. ``close()`` runs from ``Loader.close()``, ``with``-exit, a weakref
finalizer (garbage collection or interpreter exit), and after Ctrl-C. In this order:

1. Send each live worker the stop sentinel, an empty message (a worker stops between tasks).
2. Close our ends of the task pipes (a worker blocked on ``recv`` sees EOF and stops).
3. Join each worker for ``_JOIN_TIMEOUT_S``; kill the ones still running (stuck in an op):
   SIGTERM's default would end them alike, but a worker ignores it where the main process
   handles it (``worker._leave_signals_to_the_parent``).
4. Close the result pipes.
Only then may the caller unlink the ring and the store: workers must be gone before the
memory they write into disappears. Every step tolerates a worker that is already dead, so the
sequence is idempotent. If the parent itself is killed, workers notice through their parent
sentinel (``worker._watch_parent``) and exit; the resource tracker then unlinks the blocks.
Workers that ``resize`` removed and that are still finishing their tasks are stopped the same
way.

NOTE [resizing]. ``resize(n)`` runs between epochs (``workers="auto"``, see
``autoscale.autoworkers``). Growing starts workers in the next status slots; a new one is given
tasks once it is ready (a spawned one takes seconds) while any other worker can take them.
Shrinking removes the highest slots: each removed worker gets the stop sentinel *behind* the
tasks already in its pipe, so it finishes them, answers and exits by itself. Until then it is
retiring (``_retiring.Retiring``): its answers are collected as any worker's, and its exit is
not a death (it is closed, never replaced). One that dies or outlasts ``timeout`` first gives
its unanswered tasks back to be redone, as a dead worker does. A slot is reused only once its
retiring worker is gone, so two processes never share a status slot. What a sample looks like
never depends on which worker made it (per-sample seeding), so a resize changes no batch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Iterator

import numpy as np

from ... import platform
from . import shipping
from .launch import default_start_method, start_worker
from ._retiring import Retiring
from .status import IDLE, StatusBlock
from .wire import (
    STOP,
    Died,
    Result,
    TimedOut,
    decode_result,
    encode_task,
    ring_message,
)
from .reports import MAX_DEATHS_PER_TASK, describe_startup_failure, stall_warning, stalled
from .worker import Waiter, WorkerSpec, warning_filters, worker_main
from ...errors import ClosedError, warn
from ..plan.schedule import Task
from ..handoff.ring import OutputRing
from ...memory.store import ArrayHandle, SharedStore

log = logging.getLogger(__name__)

_JOIN_TIMEOUT_S = 2.0  # how long close() lets a worker finish before terminating it
_KILL_TIMEOUT_S = 1.0  # how long a killed worker may take to be reaped
# A replacement that dies before it is ready (killed from outside while it starts, say) is
# started again this many times in a row; only then is the pool broken, as when a first
# worker cannot start.
_REPLACEMENT_RETRIES = 3
# How often poll() also asks each worker's exit status: a process the worker forked keeps
# the worker's end of its sentinel open, and then only the exit status tells.
_SWEEP_S = 0.5
_WORKER_NAME = "shmaug-worker-"  # and its slot: the processes' names


@dataclass
class _Worker:
    process: Any  # multiprocessing.Process (context-specific class)
    tasks: Connection  # parent's sending end
    results: Connection  # parent's receiving end
    queued: deque[Task] = field(default_factory=deque)  # invariant: sent, not yet answered, FIFO
    head_since: float = 0.0  # when queued[0] became the task it owes next (sent, or answered)

    def owe(self, task: Task) -> None:
        """``task`` is sent: owed after the ones queued."""
        if not self.queued:
            self.head_since = time.monotonic()
        self.queued.append(task)

    def answered(self) -> None:
        """Its first task is answered: the next is owed from now."""
        self.queued.popleft()
        self.head_since = time.monotonic()


def _disown_in_child() -> None:
    """In a fork of this process (``os.fork``, gunicorn's preload_app) the workers of every
    pool, retiring and starting ones too, are the parent's, which multiprocessing would
    terminate and join at the fork's exit (it lists them among its children)."""
    children = multiprocessing.process._children  # type: ignore[attr-defined]
    for process in list(children):
        if process.name.startswith(_WORKER_NAME):
            children.discard(process)
            # A forkserver's worker knows its parent died when every copy of this pipe end
            # is closed: one kept here kept it running past its parent (multiprocessing's
            # own close of them runs in the parent only)
            finalizer = getattr(process._popen, "finalizer", None)
            for fd in getattr(finalizer, "_args", None) or ():
                if isinstance(fd, int):
                    with contextlib.suppress(OSError):
                        os.close(fd)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disown_in_child)


@contextlib.contextmanager
def _pipes(ctx: Any) -> Iterator[tuple[Any, ...]]:
    """A worker's two pipes (its tasks' ends, its results' ends), all four closed if its start
    fails: left to the collector, Python 3.13 closed them only once it ran (a cycle through
    the error), 4 descriptors per failed fork, on which a retrying job crept to its limit."""
    ends: list[Any] = []
    try:
        ends += ctx.Pipe(duplex=False)
        ends += ctx.Pipe(duplex=False)
        yield tuple(ends)
    except BaseException:
        for end in ends:
            end.close()
        raise


@contextlib.contextmanager
def _limits_named(wid: int) -> Iterator[None]:
    """An OS error starting worker ``wid`` that a limit of this process gives (EMFILE,
    EAGAIN, ENOMEM: ``platform.LIMIT_ERRNOS``) names the limit and its fix; others pass."""
    try:
        yield
    except OSError as exc:
        why = platform.limits_met(exc.errno) if exc.errno in platform.LIMIT_ERRNOS else ""
        if not why:
            raise
        raise OSError(exc.errno, f"{exc.strerror}, starting shmaug worker {wid}.{why}") \
            from exc  # (OSError picks the errno's own subclass: BlockingIOError for EAGAIN)


def _spec_now(spec: WorkerSpec, method: str) -> WorkerSpec:
    """``spec`` for a worker started now, by this thread. A forkserver's child gets our
    environment (the server's is older; fork and spawn inherit ours). The kernel may end the
    worker with its parent where the thread starting it lives as long as the process: the
    main thread (a Keras data thread may end first; a fork server lives as long as any worker
    it forked, a stuck one included, so its workers keep the watchdog only)."""
    fresh = method != "fork"  # (a fork has our warning filters; spawn's and a server's not)
    return dataclasses.replace(
        spec, environ=dict(os.environ) if method == "forkserver" else spec.environ,
        warning_filters=warning_filters() if fresh else None,
        die_with_parent=method != "forkserver"
        and threading.current_thread() is threading.main_thread())


class WorkerPool:
    """N persistent worker processes over one ``WorkerSpec``.

    ``submit`` queues tasks; ``poll`` returns results (``wire.Result``: ``Done``, ``Failed``,
    ...), replacing dead workers and redoing their tasks.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        workers: int,
        start_method: str | None,
        timeout: float | None,
        *,
        store: SharedStore,
        generation: ArrayHandle,
        in_flight_per_worker: int,
        capacity: int | None = None,
        op: str = "the op",
    ) -> None:
        self._ctx: Any = multiprocessing.get_context(
            start_method or default_start_method(spec.payload))
        self.start_method = str(self._ctx.get_start_method())  # (fork for a notebook's code)
        if spec.payload_by_value is not None:  # fresh workers need not import heavy modules
            spec = dataclasses.replace(spec, payload_by_value=None, payload=spec.payload
                                       if self.start_method == "fork" else spec.payload_by_value)
        # Spawned workers need the user's __main__ only if the payload refers to it.
        self._needs_main = b"__main__" in spec.payload
        shipping.tell_heavy_main(self.start_method, self._needs_main)
        self._spec = spec
        self._timeout = timeout
        self._op = op  # what a task runs, as a stall warning names it
        self._stall_told = False  # invariant: the stall warning was given (once per pool)
        self._stalls_next = 0.0  # when stalls are looked for next (a second apart)
        self._generation = generation  # the ring's per-slot generations, shared with workers
        # Deep enough that a worker never idles while the consumer is busy elsewhere:
        # cancelled work is cheap to skip (see OutputRing.generation).
        self._in_flight = in_flight_per_worker
        # A slot for every worker there may be at once (``capacity``: what ``resize`` may reach).
        self.capacity = max(workers, capacity or 0)
        # Per worker: busy seconds, current index, ... (a block of ``store``'s; see status)
        self._status_handle, self.status = store.empty(
            (StatusBlock.size(self.capacity),), np.float64, what="the workers' status")
        self._workers: list[_Worker | None] = [None] * workers
        self._pending: deque[Task] = deque()  # invariant: submitted, not yet sent to a worker
        self._turn = 0  # invariant: where the next tie-break among equally queued workers starts
        self._deaths: dict[int, int] = {}  # ticket -> workers that died while running it
        self._broken: BaseException | None = None  # a start-up failure: every poll raises it
        self._closed = False
        self._waiter: Waiter | None = None  # invariant: None whenever a worker changed
        self._next_sweep = 0.0  # monotonic time of the next exit-status sweep
        self._retiring = Retiring(self.status, self._deaths, MAX_DEATHS_PER_TASK,
                                  drain=self._drain, close=_close_worker)
        self._starting: set[int] = set()  # invariant: slots resize() filled, not yet seen ready
        self._early: list[Result] = []  # invariant: answers collected outside poll(), for it
        self.respawns = 0  # how many dead workers were replaced
        self._replaced: set[int] = set()  # invariant: worker ids running a replacement
        self._answered = False  # invariant: some worker has answered a task (it started fine)
        self._worked: set[int] = set()  # invariant: worker ids whose worker died once ready
        self._unready_deaths: dict[int, int] = {}  # worker id -> replacements that died
        # before they were ready, in a row
        try:
            for wid in range(workers):
                self._start(wid)
        except BaseException:  # e.g. Ctrl-C half-way through starting: leave nothing behind
            self.close()
            raise

    @property
    def workers(self) -> int:
        return len(self._workers)

    @property
    def status(self) -> Any:
        """The status block's array (``status``): shared with the workers, or once closed a
        private copy."""
        return self._status.array

    @status.setter
    def status(self, array: Any) -> None:
        self._status = StatusBlock(array)  # invariant: over the array the workers write

    def busy_s(self) -> float:
        """Every status slot's busy seconds so far, summed (read from the private copy once
        closed)."""
        return self._status.busy_total()

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w is not None]

    def _start(self, wid: int) -> None:
        self._status.row(wid).reset()
        with _limits_named(wid), _pipes(self._ctx) as (task_r, task_w, result_r, result_w):
            process = self._ctx.Process(
                target=worker_main, name=f"{_WORKER_NAME}{wid}", daemon=True,
                args=(_spec_now(self._spec, self.start_method), wid, task_r, result_w,
                      self._status_handle, self._generation))
            start_worker(process, self.start_method, needs_main=self._needs_main)
        task_r.close()  # the child's ends; closing ours lets EOF mean "the other side is gone"
        result_w.close()
        self._workers[wid] = _Worker(process, task_w, result_r)
        self._waiter = None

    def attach_ring(self, ring: OutputRing) -> None:
        """Give every worker, and every later replacement, the output ring (sized by the probe).

        A worker reads its pipe in order, so tasks sent after this find the ring attached.
        """
        assert ring.handles is not None, "the ring is allocated before it is attached"
        self._spec = dataclasses.replace(self._spec, ring=ring.handles)
        message = ring_message(ring.handles)
        for w in self._workers:
            if w is not None:
                try:
                    w.tasks.send_bytes(message)
                except OSError:  # it died just now; its replacement gets the ring in its spec
                    pass

    # -- feeding -----------------------------------------------------------------------------

    def submit(self, task: Task) -> None:
        if self._closed:
            raise ClosedError("The shmaug worker pool is closed. Fix: create a new loader.")
        self._pending.append(task)
        self._dispatch()

    def cancel_pending(self, tickets: set[int]) -> list[int]:
        """Drop tasks not yet sent to a worker; returns the tickets dropped."""
        dropped = [t.ticket for t in self._pending if t.ticket in tickets]
        if dropped:
            self._pending = deque(t for t in self._pending if t.ticket not in tickets)
        return dropped

    def _dispatch(self) -> None:
        while self._pending:
            live = self._dispatchable()
            # The least-queued worker; ties rotate, so a consumer-bound pool shares its few
            # tasks among all workers instead of handing every one to worker 0.
            self._turn = (self._turn + 1) % len(live)
            worker = min(live[self._turn:] + live[:self._turn], key=lambda w: len(w.queued))
            if len(worker.queued) >= self._in_flight:
                return
            task = self._pending.popleft()
            message = encode_task(task)
            worker.owe(task)
            try:
                worker.tasks.send_bytes(message)
            except OSError:  # it died just now; poll() will notice and redo the task
                pass

    def _dispatchable(self) -> list[_Worker]:
        """The live workers, less those ``resize`` started that are not ready yet, while any
        other can take a task (NOTE [resizing])."""
        live = [w for w in self._workers if w is not None]
        if self._starting:
            self._starting = {wid for wid in self._starting
                              if not self._status.row(wid).ready}
            ready = [w for wid, w in enumerate(self._workers)
                     if w is not None and wid not in self._starting]
            return ready or live
        return live

    # -- collecting --------------------------------------------------------------------------

    def poll(self, timeout_s: float) -> list[Result]:
        """Results that arrive within ``timeout_s`` (possibly none). Never blocks longer.

        Raises:
            WorkerDied: a worker could not even start (the payload does not unpickle there,
                the main module cannot be re-imported, ...).
            ClosedError: the pool was closed (perhaps by another thread).
        """
        if self._broken is not None:
            raise self._broken
        if self._closed:  # a consumer in another thread must not wait on no workers forever
            raise ClosedError("The shmaug worker pool is closed. Fix: create a new loader.")
        waiter = self._waiter
        if waiter is None:
            waiter = self._waiter = Waiter([obj for w in self._workers if w is not None
                                             for obj in (w.results, w.process.sentinel)]
                                            + self._retiring.waitables())
        self._check_stalls()  # (before any result is drained: under -W error none is lost)
        results, self._early = self._early, []
        ready = set(waiter.wait(0.0 if results else timeout_s))
        sweep = time.monotonic() >= self._next_sweep
        if sweep:
            self._next_sweep = time.monotonic() + _SWEEP_S
        if self._retiring:
            results += self._from_retiring(self._retiring.collect(ready, sweep))
        for wid, w in enumerate(self._workers):
            if w is None:
                continue
            if w.results in ready:
                results += self._drain(w, everything=False)
            if w.process.sentinel in ready or sweep and not w.process.is_alive():
                results += self._drain(w)  # it may have answered just before dying
                if not self._status.row(wid).ready:
                    results += self._retry_start(wid, w)
                    continue
                self._unready_deaths.pop(wid, None)
                self._worked.add(wid)
                results += self._replace(wid, w, crashed=True)
        results += self._check_timeouts()
        self._dispatch()
        return results

    def _drain(self, w: _Worker, *, everything: bool = True) -> list[Result]:
        """Read answers from ``w``: one (the pipe was seen readable), or all that are waiting.

        One per wake-up is the hot path: asking the pipe whether more is waiting costs a
        selector, and the next ``poll`` finds the rest just as fast.
        """
        out: list[Result] = []
        try:
            while True:
                if everything and not w.results.poll():
                    break
                result = decode_result(w.results.recv_bytes())
                self._answered = True
                if w.queued and w.queued[0].ticket == result.ticket:
                    w.answered()
                out.append(result)
                if not everything:
                    break
        except (EOFError, OSError):
            pass
        return out

    def _replace(self, wid: int, w: _Worker, *, crashed: bool) -> list[Result]:
        """A worker died (or was killed): start another in its place and redo what it held.

        ``crashed``: it died on its own. Only the task it had started (its status ticket) is
        blamed; a task that ``MAX_DEATHS_PER_TASK`` workers died running is reported as
        ``Died`` instead of redone.
        """
        if self._closed:  # close() is taking care of it
            return []
        w.process.join(_KILL_TIMEOUT_S)
        code = w.process.exitcode
        if crashed:
            log.warning("shmaug worker %d (pid %s) died with exit code %s; replacing it",
                        wid, w.process.pid, code)
        _close_worker(w)
        self._workers[wid] = None
        self._waiter = None
        running = self._status.row(wid).ticket
        failed: list[Result] = []
        redo: list[Task] = []
        for task in w.queued:
            if crashed and task.ticket == running:  # the one it was running when it died
                self._deaths[task.ticket] = self._deaths.get(task.ticket, 0) + 1
                if self._deaths[task.ticket] >= MAX_DEATHS_PER_TASK:
                    failed.append(Died(task.ticket, wid, code, self._current_index(wid)))
                    continue
            redo.append(task)
        self._pending.extendleft(reversed(redo))
        if not self._closed:
            self._start(wid)
            self._replaced.add(wid)
            self.respawns += 1
        return failed

    def _retry_start(self, wid: int, w: _Worker) -> list[Result]:
        """A worker died before it was ready. While no worker has started, that breaks the
        pool (the payload or the main module fails there, and would every time); once one
        has answered, or for a replacement, a start can only have been cut short (a kill
        from outside, say), which says nothing about the op: it gets
        ``_REPLACEMENT_RETRIES`` more starts in a row."""
        tries = self._unready_deaths.get(wid, 0)
        if not (self._answered or wid in self._replaced) or tries >= _REPLACEMENT_RETRIES:
            w.process.join(_KILL_TIMEOUT_S)
            self._broken = describe_startup_failure(
                wid, w.process.exitcode, self.start_method, tries, wid in self._worked)
            raise self._broken
        self._unready_deaths[wid] = tries + 1
        w.process.join(_KILL_TIMEOUT_S)
        log.warning("shmaug worker %d (pid %s) died with exit code %s before it was ready; "
                    "starting another (retry %d of %d)", wid, w.process.pid, w.process.exitcode,
                    tries + 1, _REPLACEMENT_RETRIES)
        return self._replace(wid, w, crashed=False)

    def _current_index(self, wid: int) -> int:
        return int(self._status.row(wid).current_index)

    def _check_timeouts(self) -> list[Result]:
        """Kill and replace a worker whose current task has run longer than ``timeout``.

        Timed from when the worker itself started the task, so start-up and queueing never
        count.
        """
        if self._timeout is None:  # (stalls are told instead: _check_stalls, in poll)
            return []
        now = time.monotonic()
        out: list[Result] = []
        if self._retiring:
            out += self._from_retiring(self._retiring.timeouts(now, self._timeout))
        for wid, w in enumerate(self._workers):
            row = self._status.row(wid)
            running = row.ticket  # read once: the worker may move on meanwhile
            if w is None or running == IDLE or now - row.started <= self._timeout:
                continue
            task = next((t for t in w.queued if t.ticket == running), None)
            if task is None:  # answered already; the result is in the pipe
                continue
            w.queued.remove(task)  # reported, not redone
            index = self._current_index(wid)
            out += self._drain(w)  # answers it sent before it got stuck still count
            platform.stop(w.process)
            out += self._replace(wid, w, crashed=False)
            out.append(TimedOut(task.ticket, wid, index))
        return out

    def _check_stalls(self) -> None:
        """Warn once (logging may be unset) of a stalled task or worker: ``reports.stalled``."""
        if self._stall_told or (now := time.monotonic()) < self._stalls_next:
            return
        self._stalls_next = now + 1.0  # (a second apart: its cost grows with the workers)
        owing = {wid: w for wid, w in enumerate(self._workers) if w is not None and w.queued
                 and (self._timeout is None or self._status.row(wid).idle)}
        found = stalled(self._status, {wid: w.head_since for wid, w in owing.items()}, now)
        if found is not None:
            wid, ran, usual, between = found
            if between and owing[wid].results.poll():  # it answered: the consumer was away
                return
            self._stall_told = True
            warn(stall_warning(wid, owing[wid].process.pid, self._op,
                               None if between else self._current_index(wid), ran, usual))

    # -- resizing (NOTE [resizing]) ----------------------------------------------------------

    def resize(self, workers: int) -> None:
        """Run ``workers`` workers from now on, 1 to ``capacity`` (NOTE [resizing])."""
        if self._closed:
            raise ClosedError("The shmaug worker pool is closed. Fix: create a new loader.")
        if not 1 <= workers <= self.capacity:
            raise ValueError(f"resize({workers}): this pool has room for 1 to {self.capacity}")
        while len(self._workers) > workers:  # the highest slots go first
            w = self._workers.pop()
            if w is not None:
                self._retiring.add(len(self._workers), w)
        while len(self._workers) < workers:
            wid = len(self._workers)
            self._early += self._from_retiring(self._retiring.finish(wid))  # its slot, freed
            self._workers.append(None)
            self._start(wid)
            self._starting.add(wid)
        self._waiter = None
        self._dispatch()

    def _from_retiring(self, outcome: tuple[list[Result], list[Task], bool]) -> list[Result]:
        """File what retiring workers left: tasks to redo first, answers to return."""
        results, redo, ended = outcome
        self._pending.extendleft(reversed(redo))
        if ended:
            self._waiter = None
        return results

    # -- stopping ----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop every worker (see NOTE [shutdown order]). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stop_all()
        finally:
            # The workers are gone (or this was interrupted, and the store unmaps anyway):
            # keep their figures in private memory, so that stats() after close reads them,
            # not the store's block that is unmapped next.
            self.status = self.status.copy()

    def _stop_all(self) -> None:
        live = [w for w in self._workers if w is not None]
        live += self._retiring.take_all()  # their task pipes are closed: nothing to send
        for w in live:
            try:
                w.tasks.send_bytes(STOP)
            except OSError:
                pass
        for w in live:
            w.tasks.close()
        deadline = time.monotonic() + _JOIN_TIMEOUT_S
        for w in live:
            try:
                w.process.join(max(0.0, deadline - time.monotonic()))
                if w.process.is_alive():
                    platform.stop(w.process)
                    w.process.join(_KILL_TIMEOUT_S)
            except ValueError:  # already reaped and closed by a concurrent poll()
                pass
            _close_worker(w)
        self._workers = [None] * len(self._workers)
        self._waiter = None
        self._pending.clear()


def _close_worker(w: _Worker) -> None:
    """Close a worker's pipes and release its process (one that has exited)."""
    for conn in (w.tasks, w.results):
        try:
            conn.close()
        except OSError:
            pass
    try:
        w.process.close()
    except ValueError:  # still running: only after kill() failed, nothing more to do
        pass
