"""Zero copy in: a worker's private memory does not grow with the dataset it reads."""

from __future__ import annotations

import multiprocessing

import numpy as np
import psutil
import pytest

import shmaug
from tests import _ops

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

_GIB = 2**30
_ALLOWED_GROWTH = 150 * 2**20


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_read_a_1gb_dataset_without_copying_it(method):
    x = np.empty((_GIB // (128 * 128), 128, 128), np.uint8)  # 1 GiB
    x[:] = np.arange(128, dtype=np.uint8)  # touch every page, and make it non-constant
    with shmaug.Loader(x, batch_size=256, augment=_ops.mean_only, workers=2, seed=0,
                       start_method=method, output_shape=(1,), output_dtype="float32") as loader:
        del x  # the loader owns its shared copy now
        loader.batch(0)  # workers are up and have run an op
        idle = [psutil.Process(pid).memory_full_info().uss for pid in loader.pids]
        total = 0.0
        for xb, _ in loader:  # every sample read by some worker
            total += float(xb.sum())
        busy = [psutil.Process(pid).memory_full_info().uss for pid in loader.pids]
    assert total > 0
    for before, after in zip(idle, busy):
        assert after - before < _ALLOWED_GROWTH, (
            f"a worker's private memory grew by {(after - before) / 2**20:.0f} MiB")


NO_FORK = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                             reason="fork is not available on this platform")


@NO_FORK
def test_forked_workers_leave_the_parents_objects_to_the_parent_collector():
    """gc.freeze() around fork: a worker's collections skip the parent's objects (no CPU
    spent walking them, no pages copied for it); the parent's own collector is unchanged."""
    import gc

    x = np.zeros((4, 8, 8), np.uint8)
    with shmaug.Loader(x, batch_size=4, augment=_ops.gc_frozen_objects, workers=1,
                       start_method="fork", output_shape=(8, 8), output_dtype=np.uint8) as loader:
        (xb, _), = list(loader)
    assert (xb == 1).all()
    assert gc.get_freeze_count() == 0


@NO_FORK
def test_a_programs_own_gc_freeze_is_left_alone():
    import gc

    x = np.zeros((4, 8, 8), np.uint8)
    mine = [[]]  # an object this program froze on purpose
    gc.freeze()
    try:
        with shmaug.Loader(x, batch_size=4, augment=_ops.gc_frozen_objects, workers=1,
                           start_method="fork", output_shape=(8, 8),
                           output_dtype=np.uint8) as loader:
            (xb, _), = list(loader)
        assert (xb == 1).all()  # the worker still sees frozen objects: the program's
        assert not any(o is mine for o in gc.get_objects())  # still frozen here
    finally:
        gc.unfreeze()
