"""A page-locked output ring (``pin_memory``): the same batches either way; where there is no
CUDA driver (this host, CI) a warning and a pageable ring; where there is a GPU (run on the
device machine) a ring the driver reads from, unregistered when the loader closes."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
import pytest

import shmaug
from shmaug.engine import _pinned

from tests import _ops
from tests._helpers import needs_keras

X = np.random.default_rng(0).integers(0, 256, (24, 16, 16, 3), dtype=np.uint8)


def batches(**kwargs) -> list[np.ndarray]:
    with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=2,
                       seed=3, shuffle=True, **kwargs) as loader:
        return [xb.copy() for xb, _ in loader]


def cuda_driver() -> bool:
    return _pinned._open_driver() is not None


def page_locked(array: np.ndarray) -> bool:
    """What the CUDA driver says of the memory under ``array``: host memory it page-locked
    (``CU_POINTER_ATTRIBUTE_MEMORY_TYPE`` is ``CU_MEMORYTYPE_HOST``), or memory it does not
    know (an error)."""
    lib = _pinned._open_driver().lib
    kind = ctypes.c_uint()
    code = lib.cuPointerGetAttribute(ctypes.byref(kind), ctypes.c_int(2),  # MEMORY_TYPE
                                     ctypes.c_void_p(array.ctypes.data))
    return code == 0 and kind.value == 1  # CU_MEMORYTYPE_HOST


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (run on the GPU machine)")
    return torch


@pytest.mark.skipif(cuda_driver(), reason="a CUDA driver is here: test_pinned_ring_on_a_gpu")
def test_pin_memory_without_a_gpu_warns_once_and_gives_the_same_batches(caplog):
    with caplog.at_level(logging.WARNING, logger="shmaug.engine._pinned"):
        with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=1,
                           seed=3, copy=False, pin_memory=True) as loader:
            assert not loader.pinned and "pin_memory=True" in repr(loader)
            got = [xb.copy() for xb, _ in loader]
    warned = [r.getMessage() for r in caplog.records if r.name == "shmaug.engine._pinned"]
    assert len(warned) == 1 and "no CUDA driver" in warned[0] and "Fix:" in warned[0]
    with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=1,
                       seed=3, copy=False) as loader:
        expected = [xb.copy() for xb, _ in loader]
    assert len(got) == 3 and all(np.array_equal(a, b) for a, b in zip(got, expected))


@needs_keras
def test_a_sequence_pins_only_where_keras_trains_on_a_gpu_with_torch_or_jax():
    import keras

    from shmaug.keras import _checks

    assert _checks.pin_memory(True) is True and _checks.pin_memory(False) is False
    backend = keras.backend.backend()
    on_gpu = False
    if backend == "torch":
        import torch

        on_gpu = torch.cuda.is_available()
    elif backend == "jax":
        import jax

        on_gpu = jax.default_backend() == "gpu"
    assert _checks.pin_memory(None) is on_gpu
    with shmaug.Sequence(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy,
                         workers=1, seed=0) as seq:
        seq[0]
        assert seq.loader.pinned is on_gpu


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")  # (lent: read-only)
def test_pinned_ring_on_a_gpu():
    """The driver page-locks the ring: a lent batch lies in page-locked memory, it reaches
    the GPU intact (the batches are those of a pageable ring), and closing unregisters it (a
    batch kept past close is pageable again, and still readable)."""
    torch = torch_cuda()
    torch.zeros(1, device="cuda")  # torch's context first, as where a model is built first
    with shmaug.Loader(X, np.arange(len(X)), batch_size=8, augment=_ops.noisy, workers=2,
                       seed=3, shuffle=True, copy=False, pin_memory=True) as loader:
        assert loader.pinned
        got = []
        for xb, _ in loader:
            assert page_locked(xb) and not page_locked(X)
            got.append(torch.from_numpy(xb).to("cuda").cpu().numpy())
            kept = xb
    assert not page_locked(kept) and np.isfinite(kept).all()
    assert all(np.array_equal(a, b) for a, b in zip(got, batches()))
    assert len(got) == 3
