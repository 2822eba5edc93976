"""A page-locked output ring (``pin_memory=True``): the ring's blocks registered with the CUDA
driver, so that a framework copying a batch to the GPU (torch's ``.to("cuda")``,
``jax.device_put``) has the device read the slot a worker wrote. From pageable memory the
driver stages the copy instead: the calling thread, the main process, first copies every byte
into a buffer of the driver's. On an H100 with 15 workers that took 6.0 ms of the main thread
per 38.5 MB float32 batch, and 1.2 ms from the registered ring (``bench.gpu pinned``,
``bench/results/gpu/pinned``).

The driver (``libcuda``) is called through ``ctypes``, so the engine imports no framework. The
blocks are registered ``PORTABLE`` (page-locked for every CUDA context of the process) under
the primary context of the calling thread's device (the one a framework made current there,
as torch does after ``set_device``), else of the first visible device: a process that trains
on GPU 3 makes no context on GPU 0. Where there is no driver or no device, the ring stays
pageable and one warning says why. A copy that does not wait (``non_blocking=True``) reads
the slot after the call returns: it must finish before the next batch is asked for.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Sequence

import numpy as np

from ...errors import warn

log = logging.getLogger(__name__)

_PORTABLE = 0x01  # CU_MEMHOSTREGISTER_PORTABLE
_LIBRARIES = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")


class _Driver:
    """The few driver calls registration needs; each raises ``OSError`` on a CUDA error, or
    when the driver lacks the call (one older than CUDA 11)."""

    def __init__(self, lib: object) -> None:
        self.lib = lib

    def __call__(self, name: str, *args: object) -> None:
        try:
            function = getattr(self.lib, name)
        except AttributeError:
            raise OSError(f"the CUDA driver has no {name}") from None
        code = function(*args)
        if code:
            raise OSError(f"{name} returned CUDA error {code}")


def _open_driver() -> _Driver | None:
    for name in _LIBRARIES:
        try:
            return _Driver(ctypes.CDLL(name))
        except OSError:
            continue
    return None


def usable() -> bool:
    """Whether the CUDA driver is here and sees a device (no warning either way)."""
    driver = _open_driver()
    if driver is None:
        return False
    count = ctypes.c_int()
    try:
        driver("cuInit", ctypes.c_uint(0))
        driver("cuDeviceGetCount", ctypes.byref(count))
    except OSError:
        return False
    return count.value > 0


class Pinned:
    """Blocks registered with the driver, until ``release()`` (idempotent), which must run
    before they are unmapped."""

    def __init__(self, driver: _Driver, device: ctypes.c_int, context: ctypes.c_void_p,
                 pointers: list[int]) -> None:
        self._driver, self._device, self._context = driver, device, context
        self._pointers = pointers
        self._released = False

    def release(self) -> None:
        """Unregister every block (one that fails does not keep the others registered) and
        let go of the primary context."""
        if self._released:
            return
        self._released = True
        call = self._driver
        try:
            if self._pointers:
                call("cuCtxPushCurrent_v2", self._context)
                try:
                    for pointer in self._pointers:
                        try:
                            call("cuMemHostUnregister", ctypes.c_void_p(pointer))
                        except OSError as exc:
                            log.debug("unregistering a block of the output ring: %s", exc)
                finally:
                    call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))
        except OSError as exc:  # at exit the driver may be gone already: nothing to free
            log.debug("unregistering the output ring: %s", exc)
        finally:
            try:
                call("cuDevicePrimaryCtxRelease_v2", self._device)
            except OSError as exc:
                log.debug("releasing the primary context: %s", exc)


def _device(driver: _Driver) -> ctypes.c_int:
    """The calling thread's current device, else the first visible one."""
    current, device = ctypes.c_void_p(), ctypes.c_int(0)
    driver("cuCtxGetCurrent", ctypes.byref(current))
    if current.value:
        driver("cuCtxGetDevice", ctypes.byref(device))
    return device


def pin(blocks: Sequence[np.ndarray]) -> Pinned | None:
    """Register ``blocks`` (C-contiguous) with the CUDA driver; None, with a warning saying
    why, where they stay pageable."""
    driver = _open_driver()
    if driver is None:
        warn(f"pin_memory=True, but there is no CUDA driver here ({' or '.join(_LIBRARIES)}), "
             f"so the output ring stays in pageable memory: the batches are the same, their "
             f"copy to a GPU is not sped up. Fix: pass pin_memory=False on a machine without "
             f"an NVIDIA GPU.")
        return None
    device, context = ctypes.c_int(0), ctypes.c_void_p()
    done: list[int] = []
    retained = False
    try:
        driver("cuInit", ctypes.c_uint(0))
        device = _device(driver)
        driver("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        retained = True
        driver("cuCtxPushCurrent_v2", context)
        try:
            for block in blocks:
                if block.nbytes:
                    driver("cuMemHostRegister_v2", ctypes.c_void_p(block.ctypes.data),
                           ctypes.c_size_t(block.nbytes), ctypes.c_uint(_PORTABLE))
                    done.append(block.ctypes.data)
        finally:
            driver("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))
    except OSError as exc:
        if retained:  # undo what was done
            Pinned(driver, device, context, done).release()
        warn(f"pin_memory=True, but the CUDA driver did not page-lock the output ring ({exc}), "
             f"so it stays in pageable memory: the batches are the same, their copy to a GPU "
             f"is not sped up. Fix: check that a GPU is visible (nvidia-smi, "
             f"CUDA_VISIBLE_DEVICES), or pass pin_memory=False.")
        return None
    log.debug("output ring page-locked on device %d: %d block(s), %d bytes", device.value,
              len(done), sum(b.nbytes for b in blocks))
    return Pinned(driver, device, context, done)
