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


def _through_shmaug(exc):
    """``exc`` raised by user code called from inside shmaug (a bound op), as in a worker."""
    from shmaug.ops import core

    def user_code(image, rng):
        raise exc

    spec = core.OpSpec("user", user_code, (), {}, __name__)
    core._REGISTRY["_test_user_code"] = spec
    try:
        core.Op("_test_user_code")(None, None)
    except Exception as caught:
        return ErrorRecord.capture(caught, traceback.format_exc(), worker_id=0, sample_index=3,
                                   epoch=0, op="user")
    finally:
        del core._REGISTRY["_test_user_code"]


def test_the_message_leaves_shmaugs_frames_out_unless_a_switch_asks(monkeypatch):
    import sys
    import types

    from shmaug import errors

    monkeypatch.delenv(errors.FILTERING_ENV, raising=False)
    record = _through_shmaug(ValueError("nope"))
    assert "ops/core.py" in record.traceback  # kept in full on the record
    text = str(rebuild(record))
    assert "in user_code" in text and "ops/core.py" not in text
    monkeypatch.setenv(errors.FILTERING_ENV, "off")
    assert "ops/core.py" in str(rebuild(record))
    monkeypatch.delenv(errors.FILTERING_ENV)
    # Keras' own switch, when Keras is in use: keras.config.disable_traceback_filtering()
    keras = types.SimpleNamespace(config=types.SimpleNamespace(
        is_traceback_filtering_enabled=lambda: False))
    monkeypatch.setitem(sys.modules, "keras", keras)
    assert "ops/core.py" in str(rebuild(record))


def test_an_error_raised_inside_shmaug_keeps_its_innermost_frame():
    from shmaug.ops import _params

    try:
        _params.check_image("not an image")
    except Exception as caught:
        ours_only = caught.with_traceback(caught.__traceback__.tb_next)  # as in a worker
        record = ErrorRecord.capture(ours_only, traceback.format_exc(), worker_id=0,
                                     sample_index=0, epoch=0, op="check_image")
    assert "in check_image" in record.user_traceback


def test_a_read_only_complaint_gets_the_fix():
    record = record_for(ValueError("output array is read-only"))
    assert "read-only view of the data in shared memory" in record.message
    assert "image = image.copy()" in str(rebuild(record))
    assert record_for(ValueError("bad")).message == "bad"
