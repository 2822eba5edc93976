"""The recycler reuses a batch's memory only once nothing else can reach the batch."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from shmaug.engine.handoff.recycle import Recycler

SHAPE, DTYPE = (4, 8, 8), np.float32


def made(recycler: Recycler, fill: float) -> np.ndarray:
    out = recycler.empty(SHAPE, DTYPE)
    out[...] = fill
    return out


def test_a_dropped_batch_is_made_again_in_its_memory():
    recycler = Recycler()
    first = made(recycler, 1.0)
    address = first.ctypes.data
    del first
    again = made(recycler, 2.0)
    assert again.ctypes.data == address
    assert recycler.reused == 1


@pytest.mark.parametrize("holder", [
    lambda a: a,  # the array itself
    lambda a: a[1:],  # a view (its base)
    lambda a: a.reshape(-1),
    lambda a: memoryview(a),
    lambda a: np.frombuffer(a, np.uint8),
    lambda a: [a],  # a container
], ids=["array", "view", "reshape", "memoryview", "frombuffer", "list"])
def test_a_batch_anything_still_reaches_is_never_written(holder):
    recycler = Recycler()
    kept = holder(made(recycler, 1.0))
    for fill in (2.0, 3.0, 4.0, 5.0, 6.0):  # more batches than the recycler remembers
        made(recycler, fill)
    assert recycler.reused > 0  # the others were reused, between themselves
    values = np.frombuffer(kept[0] if isinstance(kept, list) else kept, np.float32)
    assert (values == 1.0).all()


def test_only_the_same_shape_and_dtype_is_reused():
    recycler = Recycler()
    made(recycler, 1.0)
    assert recycler.empty((2, 8, 8), DTYPE).shape == (2, 8, 8)
    assert recycler.empty(SHAPE, np.float64).dtype == np.float64
    assert recycler.empty(SHAPE, DTYPE).shape == SHAPE
    assert recycler.reused == 1


def test_it_remembers_a_bounded_number_of_arrays():
    recycler = Recycler(keep=2)
    held = [made(recycler, float(i)) for i in range(3)]  # all in use: three new arrays
    refs = [weakref.ref(a) for a in held]
    del held
    gc.collect()
    assert [r() is None for r in refs] == [True, False, False]  # only the last two are kept


def test_keep_zero_never_reuses():
    recycler = Recycler(keep=0)
    a = made(recycler, 1.0)
    address = a.ctypes.data
    del a
    b = made(recycler, 2.0)
    assert recycler.reused == 0
    del b, address


def test_clear_forgets_every_array():
    recycler = Recycler()
    a = made(recycler, 1.0)
    ref = weakref.ref(a)
    del a
    recycler.clear()
    gc.collect()
    assert ref() is None


def test_nothing_is_reused_where_reference_counts_are_not_exact(monkeypatch):
    from shmaug.engine.handoff import recycle as _recycle

    monkeypatch.setattr(_recycle, "_counts_exact", lambda: False)  # PyPy, free-threaded, ...
    recycler = Recycler()
    a = made(recycler, 1.0)
    del a
    made(recycler, 2.0)
    assert recycler.reused == 0
