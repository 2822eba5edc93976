"""workers="auto" bookkeeping without processes: epochs measured from batch asks and a status
array, and retiring workers' lifecycle on stand-in process objects."""

from __future__ import annotations

import ctypes
import logging
from collections import deque

import pytest

from shmaug.engine.autoscale.autoworkers import AutoWorkers
from shmaug.engine.workers._retiring import Retiring
from shmaug.engine.workers.status import BUSY_S, IDLE, STARTED, STATUS_FIELDS, TICKET
from shmaug.engine.plan.schedule import Task
from shmaug.engine.workers.wire import TimedOut


def status_array(slots):
    return (ctypes.c_double * (slots * STATUS_FIELDS))()


def run_epoch(auto, status, epoch, workers, t, *, batches=20, step=0.05, wait=0.0001,
              busy_per_batch=0.005):
    """The consumer takes ``batches`` batches of ``epoch``; slot 0 works ``busy_per_batch``
    per batch. Returns the change asked for at its first ask, and the clock after it."""
    change = auto.before(epoch, workers, t)
    for _ in range(batches):
        status[BUSY_S] += busy_per_batch
        t += wait
        auto.after(wait, True, t)
        t += step
    return change, t


def test_epochs_are_told_apart_by_the_batches_asked_for_and_judged_between_them(caplog):
    status = status_array(4)
    auto = AutoWorkers(4, lambda: sum(status[BUSY_S::STATUS_FIELDS]))
    caplog.set_level(logging.INFO, logger="shmaug.engine.autoscale.autoworkers")
    change, t = run_epoch(auto, status, 0, 4, 0.0)
    assert change is None and auto.last is None  # nothing measured before epoch 0
    change, t = run_epoch(auto, status, 1, 4, t)
    assert change is None and "first epoch" in auto.summary()  # epoch 0: start-up
    assert auto.before(1, 4, t) is None  # the same epoch again: no boundary
    change, t = run_epoch(auto, status, 2, 4, t)
    assert change == 2  # epoch 1: 0.1 s busy in ~1 s, waited 0.2%: 4 -> 2 (halving)
    assert auto.decisions[-1][0] == 1 and auto.summary().startswith("4 -> 2: waited 0.2%")
    assert "after epoch 1: 4 -> 2" in caplog.text
    change, t = run_epoch(auto, status, 3, 2, t)
    assert change == 1 and auto.state.judged == 2


def test_time_between_epochs_is_not_counted_and_short_epochs_are_pooled():
    status = status_array(2)
    auto = AutoWorkers(2, lambda: sum(status[BUSY_S::STATUS_FIELDS]))
    _, t = run_epoch(auto, status, 0, 2, 0.0)
    # Two workers 95% busy, and 100 s of validation between epochs: were the gaps counted,
    # the workers would look idle and the pool would shrink.
    for epoch in (1, 2, 3):
        change, t = run_epoch(auto, status, epoch, 2, t + 100.0, busy_per_batch=0.09)
        assert change is None
    assert [e for e, _ in auto.decisions] == [0, 1, 2]
    assert auto.summary().startswith("kept 2: waited 0.2%, 100% of batches ready, workers "
                                     "busy 95%")
    # Epochs of 5 batches in 0.2 s are too short alone: pooled until 8 batches and 0.5 s.
    for epoch in (4, 5, 6):
        change, t = run_epoch(auto, status, epoch, 2, t + 100.0, batches=5, step=0.05,
                              busy_per_batch=0.001)
        assert change is None  # at 4: epoch 3 judged (kept); at 5 and 6: too little yet
    change, t = run_epoch(auto, status, 7, 2, t)
    assert change == 1 and [e for e, _ in auto.decisions] == [0, 1, 2, 3, 6]  # 4-6 pooled
    assert "waited 0.2%" in auto.summary()


def test_every_slots_busy_time_counts_retiring_ones_too():
    status = status_array(3)
    auto = AutoWorkers(3, lambda: sum(status[BUSY_S::STATUS_FIELDS]))
    run_epoch(auto, status, 0, 3, 0.0)
    auto.before(1, 3, 10.0)
    status[2 * STATUS_FIELDS + BUSY_S] += 1.5  # a slot above the live ones, still working
    auto.after(0.0, True, 11.0)
    auto.before(2, 3, 12.0)
    assert auto._busy == pytest.approx(1.5)


# -- Retiring, on stand-ins for a worker's process and pipes ---------------------------------


class FakeProcess:
    def __init__(self, alive=True, exitcode=0):
        self.pid, self.sentinel = 4242, object()
        self.alive, self.exitcode_after = alive, exitcode
        self.killed = False

    def is_alive(self):
        return self.alive

    def join(self, timeout=None):
        pass

    @property
    def exitcode(self):
        return None if self.alive else self.exitcode_after

    def kill(self):
        self.killed, self.alive, self.exitcode_after = True, False, -9

    terminate = kill


class FakePipe:
    def __init__(self):
        self.sent, self.closed = [], False

    def send_bytes(self, data):
        if self.closed:
            raise OSError("closed")
        self.sent.append(data)

    def close(self):
        self.closed = True


class FakeWorker:
    def __init__(self, tickets, **process):
        self.process, self.tasks, self.results = FakeProcess(**process), FakePipe(), object()
        self.queued = deque(Task(t, 0, 0, 0, 0, 1, 0) for t in tickets)


def retiring(status, answers=()):
    """A Retiring whose drain() answers ``answers`` once (as the pool's _drain does: popping
    each answered task off the worker's queue)."""
    pending = list(answers)
    closed = []

    def drain(w, everything=True):
        out = []
        while pending and (everything or not out):
            ticket = pending.pop(0)
            if w.queued and w.queued[0].ticket == ticket:
                w.queued.popleft()
            out.append(("done", ticket))
        return out

    return Retiring(status, {}, 3, drain=drain, close=closed.append), closed


def test_a_retiring_worker_gets_the_sentinel_behind_its_tasks_and_is_closed_when_it_exits():
    status = status_array(2)
    r, closed = retiring(status, answers=[7, 8])
    w = FakeWorker([7, 8])
    r.add(1, w)
    assert w.tasks.sent == [b""] and w.tasks.closed and len(r) == 1
    assert r.waitables() == [w.results, w.process.sentinel]
    results, redo, ended = r.collect({w.results}, sweep=False)
    assert results == [("done", 7)] and not redo and not ended  # still running
    w.process.alive = False
    results, redo, ended = r.collect({w.process.sentinel}, sweep=False)
    assert results == [("done", 8)] and not redo and ended and closed == [w] and not r


def test_a_retiring_worker_that_dies_gives_its_tasks_back_and_its_running_one_is_blamed():
    status = status_array(2)
    status[1 * STATUS_FIELDS + TICKET] = 8.0  # it was running ticket 8
    r, closed = retiring(status, answers=[7])
    w = FakeWorker([7, 8, 9], alive=False, exitcode=-11)
    r.add(1, w)
    results, redo, ended = r.collect(set(), sweep=True)
    assert results == [("done", 7)] and [t.ticket for t in redo] == [8, 9] and ended
    assert r._deaths == {8: 1} and closed == [w]


def test_a_slot_needed_again_waits_for_its_retiring_worker_then_stops_it():
    status = status_array(2)
    r, closed = retiring(status)
    w = FakeWorker([5, 6])  # never answers
    r.add(1, w)
    assert r.finish(0) == ([], [], False)  # slot 0 is not retiring
    results, redo, ended = r.finish(1)
    assert w.process.killed and [t.ticket for t in redo] == [5, 6] and ended and not results
    assert r._deaths == {} and closed == [w]  # stopped by us: nobody is blamed


def test_a_retiring_worker_stuck_past_the_timeout_is_stopped_and_its_task_reported():
    status = status_array(1)
    status[TICKET], status[STARTED] = 3.0, 100.0
    r, _ = retiring(status)
    w = FakeWorker([3, 4])
    r.add(0, w)
    assert r.timeouts(now=101.0, timeout=5.0) == ([], [], False)
    results, redo, ended = r.timeouts(now=106.0, timeout=5.0)
    assert w.process.killed and results[-1] == TimedOut(3, 0, 0) and ended
    assert [t.ticket for t in redo] == [4]
    status[TICKET] = IDLE


def test_close_takes_every_retiring_worker():
    r, _ = retiring(status_array(2))
    a, b = FakeWorker([]), FakeWorker([1])
    r.add(0, a)
    r.add(1, b)
    assert r.take_all() == [a, b] and not r and r.waitables() == []


def test_workers_a_resize_started_get_tasks_once_ready_unless_none_other_is():
    from shmaug.engine.workers.status import READY
    from shmaug.engine.workers.pool import WorkerPool

    pool = object.__new__(WorkerPool)  # only the dispatch choice: no process is started
    pool.status = status_array(3)
    pool._workers, pool._starting = ["w0", "w1", "w2"], {1, 2}
    assert pool._dispatchable() == ["w0"]
    pool.status[1 * STATUS_FIELDS + READY] = 1.0
    assert pool._dispatchable() == ["w0", "w1"] and pool._starting == {2}
    pool._workers = [None, None, "w2"]  # the others gone (being replaced): better late than never
    assert pool._dispatchable() == ["w2"]
