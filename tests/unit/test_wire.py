"""The worker protocol's messages (``shmaug.engine.workers.wire``): every kind survives its pipe, a
message's kind is read from its tag (never from its length), and a message of no known kind is
refused."""

from __future__ import annotations

import pickle

import pytest

from shmaug.engine.workers import wire as _wire
from shmaug.engine.handoff.ring import RingHandles
from shmaug.engine.plan.schedule import Task, in_order
from shmaug.memory.store import ArrayHandle
from shmaug.engine.workers.wire import (
    STOP,
    Done,
    Failed,
    Probe,
    Probed,
    Stop,
    decode_message,
    decode_result,
    encode_result,
    encode_task,
    probe_task,
    ring_message,
)
from shmaug.errors import ErrorRecord

HANDLES = RingHandles(ArrayHandle("shmaug_1_ring", (2, 4, 3), "|u1"),
                      {"mask": ArrayHandle("shmaug_1_mask", (2, 4, 3), "|u1")})


def record() -> ErrorRecord:
    try:
        raise ValueError("sample 3 is odd")
    except ValueError as exc:
        return ErrorRecord.capture(exc, "Traceback ...", worker_id=1, sample_index=3, epoch=0,
                                   op="odd")


@pytest.mark.parametrize("task", [
    Task(7, 2, 1, 5, 16, 32, 16),
    Task(8, in_order(3), 0, 1, 0, 4, 0),  # the order flag travels in the epoch
    probe_task(0),  # the probe's slot is the largest unsigned 64-bit value
])
def test_a_task_comes_back_as_it_was_sent(task):
    assert decode_message(encode_task(task)) == task


def test_the_ring_and_the_stop_sentinel_come_back_as_what_they_are():
    assert decode_message(ring_message(HANDLES)) == HANDLES
    assert decode_message(STOP) == Stop()


@pytest.mark.parametrize("result", [
    Done(0), Done(2**53), Failed(5, record()),
    Probed(0, Probe((4, 3), "|u1", "|u1", (0.0, 255.0), False, {"mask": ((4, 3), "|u1")})),
])
def test_a_result_comes_back_as_it_was_sent(result):
    back = decode_result(encode_result(result))
    assert type(back) is type(result) and back.ticket == result.ticket
    if isinstance(result, Failed):
        assert back.record.message == result.record.message
        assert back.record.sample_index == 3 and back.record.worker_id == 1
    else:
        assert back == result


def test_done_stays_nine_bytes_on_the_wire():
    assert len(encode_result(Done(123))) == 9  # the hot path: tag and ticket, packed


def test_a_ring_message_as_long_as_a_task_is_still_the_ring(monkeypatch):
    # When kinds were told apart by length, a ring pickle of a task's size passed for a task
    # (the sender padded it). Real handles pickle longer than a task, so a pickler whose
    # output has exactly that size stands in for the coincidence.
    task_size = len(encode_task(Task(0, 0, 0, 0, 0, 1, 0)))

    class SizedPickle:
        HIGHEST_PROTOCOL = pickle.HIGHEST_PROTOCOL

        @staticmethod
        def dumps(obj, protocol=None):
            return bytes(task_size - 1)

        @staticmethod
        def loads(data):
            assert len(data) == task_size - 1
            return HANDLES

    monkeypatch.setattr(_wire, "pickle", SizedPickle)
    message = ring_message(HANDLES)
    assert len(message) == task_size and decode_message(message) == HANDLES


@pytest.mark.parametrize("data", [b"X", b"X" + bytes(56), b"D" + bytes(8), b"T" + bytes(8)])
def test_a_message_of_no_known_kind_is_refused(data):
    with pytest.raises(ValueError, match="Not a message of shmaug's worker protocol"):
        decode_message(data)


@pytest.mark.parametrize("data", [b"", b"X" + bytes(8), b"T" + bytes(8), b"D" + bytes(3),
                                  b"P" + pickle.dumps("not a result")])
def test_a_result_of_no_known_kind_is_refused(data):
    with pytest.raises(ValueError, match="Not a message of shmaug's worker protocol"):
        decode_result(data)
