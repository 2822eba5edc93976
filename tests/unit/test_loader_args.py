"""Bad arguments fail fast, before any process starts, with a message that helps."""

from __future__ import annotations

import numpy as np
import psutil
import pytest

import shmaug
from tests import _ops

X = np.zeros((10, 4, 4), np.uint8)


def closure_op():
    scale = 2

    def op(image, rng):
        return image * scale

    return op


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(x=np.zeros((0, 4, 4), np.uint8)), ValueError, "`x` is empty"),
        (dict(x=[[1, 2]]), TypeError, r"`x` as a list must hold images.*np.stack"),
        (dict(x=(X[0], X[1][:2])), TypeError, r"`x` as a tuple must hold images.*image_key"),
        (dict(x={1, 2}), TypeError, r"`x` must be a numpy array.*set"),
        (dict(x=np.zeros((10, 4), np.uint8)), ValueError, r"shape \(N, H, W\)"),
        (dict(x=np.array([["a"] * 4] * 10)[:, :, None, None].repeat(2, 2)), TypeError, "numeric dtype"),
        (dict(x=np.empty((10, 4, 4), object)), TypeError, "numeric dtype"),
        (dict(y=np.arange(9)), ValueError, r"`y` must have one entry per sample.*\(10\).*9 entries"),
        (dict(y={"a": np.arange(3)}), ValueError, r"`y\['a'\]`"),
        (dict(batch_size=0), ValueError, r"`batch_size` must be a positive integer.*0 \(type int\)"),
        (dict(batch_size=-3), ValueError, "`batch_size`"),
        (dict(batch_size=2.5), ValueError, r"2.5 \(type float\)"),
        (dict(workers=-1), ValueError, "`workers`"),
        (dict(workers="max"), ValueError, r"`workers` must be None.*\"auto\".*'max' \(type str\)"),
        (dict(seed="x"), ValueError, "`seed`"),
        (dict(start_method="thread"), ValueError, "`start_method`"),
        (dict(max_queue_size=0), ValueError, "`max_queue_size`"),
        (dict(timeout=0), ValueError, "`timeout`"),
        (dict(augment="rotate"), TypeError, "`augment` must be a callable"),
        (dict(augment=lambda image, rng: image), TypeError, r"lambda.*module level"),
        (dict(augment=closure_op()), TypeError, "module level"),
        (dict(batch_size=20, drop_remainder=True), ValueError, "no batch"),
    ],
)
def test_bad_arguments_raise_before_any_process(kwargs, error, pattern):
    children = psutil.Process().children()
    kwargs = {"x": X, "batch_size": 4, "augment": _ops.identity, "workers": 2, **kwargs}
    x = kwargs.pop("x")
    with pytest.raises(error, match=pattern) as info:
        shmaug.Loader(x, **kwargs)
    assert isinstance(info.value, shmaug.ShmaugError)
    assert psutil.Process().children() == children


def test_shared_memory_shortage_says_how_much_and_how_to_fix():
    with pytest.raises(shmaug.SharedMemoryError, match=r"asked for [\d,]+ bytes.*free.*--shm-size"):
        shmaug.Loader(X, batch_size=4096, augment=_ops.identity, workers=1,
                      output_shape=(4096, 4096, 3), output_dtype="float32", max_queue_size=4096)


def test_ragged_targets_name_the_argument_and_the_fix() -> None:
    x = np.zeros((4, 8, 8), np.uint8)
    with pytest.raises(shmaug.ArgumentError, match="`y`.*same shape.*Fix"):
        shmaug.Loader(x, [[1], [2, 3], [4], [5]], batch_size=2, workers=0)
