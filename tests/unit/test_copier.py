"""The copier: copies made ahead on one background thread, taken by the consumer."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from shmaug.engine.handoff import copier as _copier
from shmaug.engine.handoff.copier import MIN_BYTES, WAKE_S, Copier

pytestmark = pytest.mark.timeout(30)


def where() -> str:
    return threading.current_thread().name


def away(copier: Copier, seconds: float) -> None:
    """A consumer that takes a batch, then works ``seconds`` before asking again."""
    copier.make(lambda: None)
    time.sleep(seconds)
    copier.back()


@pytest.fixture
def clock(monkeypatch):
    """The copier's clock, moved by the test. With real pauses a loaded machine stretched a
    consumer's "straight back" (no pause at all) past ``WAKE_S`` (a CI failure)."""
    now = SimpleNamespace(t=100.0)
    monkeypatch.setattr(_copier, "time", SimpleNamespace(perf_counter=lambda: now.t))

    def after(copier: Copier, seconds: float) -> None:
        """A consumer that takes a batch, then works ``seconds`` before asking again."""
        copier.make(lambda: None)
        now.t += seconds
        copier.back()

    return after


def test_a_copy_asked_ahead_is_made_on_the_thread_and_taken_as_is():
    copier = Copier()
    try:
        assert copier.pays(MIN_BYTES)  # nothing known of the consumer yet
        job = copier.submit(where)
        assert job.done.wait(5)
        assert copier.take(job) == "shmaug-copier"
        source = np.arange(12.0).reshape(3, 4)
        away(copier, 0.01)
        job = copier.submit(source.copy)
        out = copier.take(job)
        np.testing.assert_array_equal(out, source)
        assert out is not source and not np.shares_memory(out, source)
    finally:
        copier.close()


def test_a_consumer_that_comes_straight_back_copies_on_its_own_thread(clock):
    """Ahead would only add two thread wake-ups to a consumer that waits for the copy."""
    copier = Copier()
    try:
        clock(copier, 0.0)  # however long a copy takes, a consumer back at once
        assert not copier.pays(MIN_BYTES)
        assert copier.make(where) == "MainThread"
        for _ in range(3):  # a consumer that works a while, batch after batch
            clock(copier, 5 * WAKE_S)
        assert copier.pays(MIN_BYTES)
        assert not copier.pays(MIN_BYTES - 1)  # a small copy costs what handing it over does
        job = copier.submit(where)
        assert job.done.wait(5)
        assert copier.take(job) == "shmaug-copier"
    finally:
        copier.close()


def test_one_pause_of_a_consumer_that_comes_straight_back_is_no_reason_to_hand_off(clock):
    """A tight loop that pauses between epochs: copying ahead would start for one batch only,
    and a third batch-sized buffer (pages to fault in) comes with it."""
    copier = Copier()
    try:
        for pause in (0.0, 0.0, 10 * WAKE_S, 0.0, 0.0):
            clock(copier, pause)
            assert not copier.pays(MIN_BYTES)
        for _ in range(2):
            clock(copier, 10 * WAKE_S)
        assert copier.pays(MIN_BYTES)  # away twice in a row: a consumer that works
    finally:
        copier.close()


def test_a_copy_the_thread_has_not_started_is_made_by_take():
    copier = Copier()
    gate = threading.Event()
    try:
        first = copier.submit(lambda: gate.wait(5))  # holds the thread
        second = copier.submit(where)
        assert copier.take(second) == "MainThread"
        gate.set()
        assert copier.take(first) is True
    finally:
        gate.set()
        copier.close()


def test_an_error_in_a_copy_is_raised_by_take():
    copier = Copier()

    def fail() -> None:
        raise MemoryError("no room for the batch")

    try:
        job = copier.submit(fail)
        with pytest.raises(MemoryError, match="no room"):
            copier.take(job)
        assert copier.thread is not None and copier.thread.is_alive()  # it goes on
    finally:
        copier.close()


def test_a_discarded_copy_is_not_made():
    copier = Copier()
    gate = threading.Event()
    made: list[int] = []
    try:
        blocker = copier.submit(lambda: gate.wait(5))
        job = copier.submit(lambda: made.append(1))
        copier.discard(job)
        gate.set()
        copier.take(blocker)
        time.sleep(0.05)
        assert made == []
    finally:
        gate.set()
        copier.close()


def test_close_with_a_copy_in_progress_joins_the_thread():
    copier = Copier()
    copier.submit(lambda: time.sleep(0.3))
    time.sleep(0.05)  # the thread is inside the copy
    thread = copier.thread
    assert thread is not None and thread.is_alive()
    began = time.monotonic()
    copier.close()
    assert not thread.is_alive()
    assert time.monotonic() - began < 2
    copier.close()  # idempotent


def test_after_close_copies_are_made_by_the_caller():
    copier = Copier()
    copier.submit(lambda: time.sleep(0.3))  # the thread is busy with this one
    queued = copier.submit(where)
    copier.close()
    assert copier.take(queued) == "MainThread"  # dropped from the queue, made by take
    assert copier.take(copier.submit(where)) == "MainThread"


def test_no_thread_until_a_copy_is_asked_for_ahead():
    copier = Copier()
    assert copier.make(lambda: 7) == 7
    assert copier.thread is None
    copier.close()
