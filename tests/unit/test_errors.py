from __future__ import annotations

import pickle
import traceback

import pytest

from shmaug.errors import ErrorRecord, WorkerError, rebuild


class NeedsTwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def record_for(exc):
    try:
        raise exc
    except Exception as caught:
        return ErrorRecord.capture(caught, traceback.format_exc(), worker_id=1, sample_index=17,
                                   epoch=2, op="my_op")


@pytest.mark.parametrize("exc", [ValueError("bad"), KeyError("k"), OSError(5, "io"),
                                 ZeroDivisionError("zero")])
def test_rebuilt_error_is_both_the_original_type_and_a_worker_error(exc):
    err = rebuild(pickle.loads(pickle.dumps(record_for(exc))))
    assert isinstance(err, type(exc)) and isinstance(err, WorkerError)
    assert type(err).__name__ == type(exc).__name__
    text = str(err)
    assert "sample index 17" in text and "worker 1" in text and "my_op" in text
    assert "Traceback" in text
    assert err.sample_index == 17 and err.worker_id == 1 and err.epoch == 2


def test_unrebuildable_type_falls_back_to_worker_error():
    err = rebuild(record_for(NeedsTwoArgs("a", "b")))
    assert type(err) is WorkerError
    assert "NeedsTwoArgs" in str(err) and "sample index 17" in str(err)


class ShapeMemoryError(MemoryError):  # like numpy's _ArrayMemoryError(shape, dtype)
    def __init__(self, shape, dtype):
        super().__init__(f"Unable to allocate {shape} {dtype}")


def test_an_error_that_cannot_be_rebuilt_is_its_nearest_rebuildable_base():
    err = rebuild(record_for(ShapeMemoryError((2**31,), "uint8")))
    assert isinstance(err, MemoryError) and isinstance(err, WorkerError)
    assert "Unable to allocate" in str(err) and "ShapeMemoryError" in str(err)
