"""A page-locked output ring (``pin_memory``): the same batches either way; where there is no
usable NVIDIA GPU (this host, CI) a warning and a pageable ring, and a Sequence that does not
try; where there is one (run on the GPU machine) a ring the driver reads from, unregistered
when the loader closes. The driver's error paths: tests/unit/test_pinned.py."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

import shmaug
from shmaug.engine.handoff import pinned as _pinned
from tests import _ops
from tests._helpers import needs_keras

X = np.random.default_rng(0).integers(0, 256, (24, 16, 16, 3), dtype=np.uint8)
GPU = _pinned.usable()
needs_gpu = pytest.mark.skipif(not GPU, reason="needs an NVIDIA GPU (run on the GPU machine)")
no_gpu = pytest.mark.skipif(GPU, reason="an NVIDIA GPU is here: the tests marked needs_gpu")


def batches(**kwargs) -> list[np.ndarray]:
    with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=2,
                       seed=3, shuffle=True, copy=False, **kwargs) as loader:
        assert loader.pinned is bool(kwargs.get("pin_memory"))
        return [xb.copy() for xb, _ in loader]


def page_locked(array: np.ndarray) -> bool:
    """What the CUDA driver says of the memory under ``array``: host memory it page-locked
    (``CU_POINTER_ATTRIBUTE_MEMORY_TYPE`` is ``CU_MEMORYTYPE_HOST``), or memory it does not
    know (an error)."""
    lib = _pinned._open_driver().lib
    kind = ctypes.c_uint()
    code = lib.cuPointerGetAttribute(ctypes.byref(kind), ctypes.c_int(2),  # MEMORY_TYPE
                                     ctypes.c_void_p(array.ctypes.data))
    return code == 0 and kind.value == 1  # CU_MEMORYTYPE_HOST


@no_gpu
def test_pin_memory_without_a_gpu_warns_and_gives_the_same_batches():
    with pytest.warns(shmaug.ShmaugWarning, match=r"pin_memory=True.*pageable.*Fix:") as seen:
        with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=2,
                           seed=3, shuffle=True, copy=False, pin_memory=True) as loader:
            assert not loader.pinned and "pin_memory=True" in repr(loader)
            pinned = [xb.copy() for xb, _ in loader]
    assert len([w for w in seen if w.category is shmaug.ShmaugWarning]) == 1  # (3.13 records
    # its fork DeprecationWarning here too)
    assert len(pinned) == 3 and all(np.array_equal(a, b)
                                    for a, b in zip(pinned, batches(pin_memory=False)))


def test_pin_memory_on_copies_or_without_a_ring_says_it_gains_nothing():
    """(Here the missing driver warns too: each warning is looked for among them.)"""
    with pytest.warns(shmaug.ShmaugWarning) as seen:
        with shmaug.Loader(X, batch_size=8, augment=_ops.noisy, workers=0, seed=0,
                           pin_memory=True) as loader:
            next(iter(loader))
    assert any(re.search(r"copy=True.*Fix: pass copy=False", str(w.message)) for w in seen)
    with pytest.warns(shmaug.ShmaugWarning) as seen:
        shmaug.Loader(X, batch_size=8, workers=0, copy=False, pin_memory=True).close()
    assert [str(w.message) for w in seen if "has none (nothing to augment" in str(w.message)]


@needs_keras
def test_a_sequence_pinned_with_nothing_to_augment_says_it_gains_nothing():
    """(Here the missing driver warns too.) The fix names no `copy`, a Sequence's lends."""
    with pytest.warns(shmaug.ShmaugWarning) as seen:
        with shmaug.Sequence(X, np.arange(len(X)), batch_size=8, workers=0,
                             pin_memory=True) as seq:
            seq[0]
    told = [str(w.message) for w in seen if "has none (nothing to augment" in str(w.message)]
    assert len(told) == 1 and "Fix: pass an augment" in told[0], told


@needs_keras
@no_gpu
def test_a_sequence_leaves_its_ring_pageable_without_a_gpu_and_says_nothing():
    """pin_memory=None decides when the workers start, and without a GPU it does not try
    (filterwarnings = error: a warning would fail this test)."""
    with shmaug.Sequence(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy,
                         workers=1, seed=0) as seq:
        seq[0]
        assert seq.loader.pinned is False and "pin_memory" not in repr(seq.loader)


@needs_gpu
@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")  # (lent: read-only)
def test_pinned_ring_on_a_gpu():
    """The driver page-locks the ring: a lent batch lies in page-locked memory, the batches
    are those of a pageable ring (and reach the GPU intact, where torch has CUDA), and
    closing unregisters it (a batch kept past close is pageable again, and still readable)."""
    with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=2,
                       seed=3, shuffle=True, copy=False, pin_memory=True) as loader:
        assert loader.pinned
        got = []
        for xb, _ in loader:
            assert page_locked(xb) and not page_locked(X)
            got.append(xb.copy())
            kept = xb
    assert not page_locked(kept) and np.isfinite(kept).all()
    assert len(got) == 3 and all(np.array_equal(a, b)
                                 for a, b in zip(got, batches(pin_memory=False)))
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")  # torch's context current first, as under training
        with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=2,
                           seed=3, shuffle=True, copy=False, pin_memory=True) as loader:
            sent = [torch.from_numpy(xb).to("cuda").cpu().numpy() for xb, _ in loader]
        assert all(np.array_equal(a, b) for a, b in zip(got, sent))


@needs_keras
@needs_gpu
def test_a_sequence_pins_its_ring_where_keras_trains_on_a_gpu_with_torch_or_jax():
    import keras

    with shmaug.Sequence(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy,
                         workers=1, seed=0) as seq:
        seq[0]
        assert seq.loader.pinned is (keras.backend.backend() in ("torch", "jax"))
