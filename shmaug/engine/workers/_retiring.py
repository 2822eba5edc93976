"""Workers that ``WorkerPool.resize`` removed, while they finish the tasks they already hold.

A removed worker gets the stop sentinel behind the tasks in its pipe (NOTE [resizing] in
pool.py): it finishes them, answers, and exits by itself. Until it has exited, this class holds
it: the pool waits on its pipe and sentinel as on any worker's, files its answers, and closes it
when it is gone, without replacing it. A retiring worker that dies, outlasts ``timeout``, or
holds a slot the pool must reuse, gives back its unanswered tasks to be redone by the others.

It owns the retiring workers' pipes and processes (closed here, or by ``WorkerPool.close``
through ``take_all``); the pool owns everything else, including the status array and the
per-task death counts, which it shares with this class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ... import platform
from ..plan.schedule import Task
from .status import IDLE, StatusBlock
from .wire import STOP, Died, Result, TimedOut

log = logging.getLogger(__name__)

_FINISH_S = 2.0  # how long a slot's reuse waits for its retiring worker before stopping it
_REAP_S = 1.0  # how long to wait for the exit status of a worker seen gone or stopped

Outcome = tuple[list[Result], list[Task], bool]  # answers, tasks to redo, whether any ended


class Retiring:
    """The retiring workers, by status slot.

    Args:
        status: the pool's shared status array (a retiring worker keeps its slot's row).
        deaths: the pool's count, per ticket, of workers that died running it (shared).
        max_deaths: a task that this many workers died running is reported, not redone.
        drain: reads a worker's waiting answers (``WorkerPool._drain``).
        close: closes a worker's pipes and process object (``WorkerPool._close_worker``).
    """

    def __init__(self, status: Any, deaths: dict[int, int], max_deaths: int, *,
                 drain: Callable[..., list[Result]], close: Callable[[Any], None]) -> None:
        self._status = StatusBlock(status)
        self._deaths = deaths
        self._max_deaths = max_deaths
        self._drain = drain
        self._close = close
        self._by_slot: dict[int, Any] = {}  # invariant: sent the sentinel, not yet seen exited

    def __bool__(self) -> bool:
        return bool(self._by_slot)

    def __len__(self) -> int:
        return len(self._by_slot)

    def add(self, wid: int, w: Any) -> None:
        """Retire worker ``w`` of slot ``wid`` once the tasks it holds are done."""
        try:
            w.tasks.send_bytes(STOP)  # behind its tasks: a worker reads its pipe in order
        except OSError:  # it died just now: collect() sees it and redoes its tasks
            pass
        w.tasks.close()
        self._by_slot[wid] = w
        log.debug("shmaug worker %d (pid %s) retires after its %d queued tasks", wid,
                  w.process.pid, len(w.queued))

    def waitables(self) -> list[Any]:
        """What the pool waits on for these workers: result pipes and process sentinels."""
        return [obj for w in self._by_slot.values() for obj in (w.results, w.process.sentinel)]

    def collect(self, ready: set[Any], sweep: bool) -> Outcome:
        """Answers from the pipes in ``ready``, and the end of workers that have exited (seen
        by their sentinel, or by asking their exit status when ``sweep``)."""
        results: list[Result] = []
        redo: list[Task] = []
        ended = False
        for wid, w in list(self._by_slot.items()):
            if w.results in ready:
                results += self._drain(w, everything=False)
            if w.process.sentinel in ready or sweep and not w.process.is_alive():
                results += self._drain(w)  # what it answered before it exited
                failed, back = self._end(wid, crashed=True)
                results += failed
                redo += back
                ended = True
        return results, redo, ended

    def finish(self, wid: int) -> Outcome:
        """Free slot ``wid`` for a new worker: its retiring worker, if any, is given up to
        ``_FINISH_S`` to finish, then stopped; what it did not answer is redone."""
        w = self._by_slot.get(wid)
        if w is None:
            return [], [], False
        results = self._drain(w)
        w.process.join(_FINISH_S)
        results += self._drain(w)
        if w.process.is_alive():
            platform.stop(w.process)
        failed, redo = self._end(wid, crashed=False)
        return results + failed, redo, True

    def timeouts(self, now: float, timeout: float) -> Outcome:
        """Retiring workers stuck in a task for longer than ``timeout``: stopped, the task
        reported as ``TimedOut``, their other tasks redone."""
        results: list[Result] = []
        redo: list[Task] = []
        ended = False
        for wid, w in list(self._by_slot.items()):
            row = self._status.row(wid)
            running = row.ticket  # read once: the worker may move on meanwhile
            if running == IDLE or now - row.started <= timeout:
                continue
            task = next((t for t in w.queued if t.ticket == running), None)
            if task is None:  # answered already; the answer is in the pipe
                continue
            w.queued.remove(task)
            index = int(row.current_index)
            results += self._drain(w)
            platform.stop(w.process)
            failed, back = self._end(wid, crashed=False)
            results += [*failed, TimedOut(task.ticket, wid, index)]
            redo += back
            ended = True
        return results, redo, ended

    def take_all(self) -> list[Any]:
        """Hand every retiring worker to ``WorkerPool.close`` (which joins and closes them)."""
        out = list(self._by_slot.values())
        self._by_slot = {}
        return out

    def _end(self, wid: int, *, crashed: bool) -> tuple[list[Result], list[Task]]:
        """Close the worker of ``wid``, which has exited or was stopped. Normally it answered
        everything. If not, its unanswered tasks are redone; with ``crashed`` (it died by
        itself) the one it was running is blamed as a dead worker's is (reported as
        ``Died`` once ``max_deaths`` workers died running it)."""
        w = self._by_slot.pop(wid)
        w.process.join(_REAP_S)
        code, pid = w.process.exitcode, w.process.pid
        self._close(w)
        if not w.queued:
            return [], []
        if crashed:
            log.warning("shmaug worker %d (pid %s), retiring, exited with code %s before "
                        "answering %d tasks; they are redone", wid, pid, code, len(w.queued))
        row = self._status.row(wid)
        running = row.ticket
        failed: list[Result] = []
        redo: list[Task] = []
        for task in w.queued:
            if crashed and task.ticket == running:
                self._deaths[task.ticket] = self._deaths.get(task.ticket, 0) + 1
                if self._deaths[task.ticket] >= self._max_deaths:
                    failed.append(Died(task.ticket, wid, code, int(row.current_index)))
                    continue
            redo.append(task)
        return failed, redo
