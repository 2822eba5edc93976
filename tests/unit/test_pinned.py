"""The page-locked ring's driver calls (``shmaug.engine.handoff.pinned``) on their error paths,
against a stand-in for ``libcuda``: no driver runs on this host or in CI, and the paths a
real driver takes only when it fails cannot be provoked on the GPU machine either. The real
driver is tested there: tests/integration/test_pinned.py."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import shmaug
from shmaug.engine.handoff import pinned as _pinned
from shmaug.memory.store import SharedStore


class FakeDriver:
    """libcuda's calls used, recording them; ``fail`` names calls that return an error (for
    cuMemHostRegister_v2 / cuMemHostUnregister: from the n-th call on, n = fail's value)."""

    def __init__(self, missing: tuple[str, ...] = (), **fail: int) -> None:
        self.missing = missing  # calls this driver lacks (an old one)
        self.fail, self.calls = fail, []  # type: ignore[var-annotated]
        self.registered: set[int] = set()
        self.depth = 0  # contexts pushed and not popped
        self.retained = 0

    def __getattribute__(self, name: str):
        if name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def _code(self, name: str) -> int:
        self.calls.append(name)
        nth = self.fail.get(name)
        return 1 if nth is not None and self.calls.count(name) >= nth else 0

    def cuInit(self, flags):
        return self._code("cuInit")

    def cuCtxGetCurrent(self, out):
        return self._code("cuCtxGetCurrent")  # leaves NULL: no current context

    def cuDevicePrimaryCtxRetain(self, out, device):
        code = self._code("cuDevicePrimaryCtxRetain")
        self.retained += not code
        return code

    def cuDevicePrimaryCtxRelease_v2(self, device):
        self.retained -= 1
        return self._code("cuDevicePrimaryCtxRelease_v2")

    def cuCtxPushCurrent_v2(self, context):
        self.depth += 1
        return self._code("cuCtxPushCurrent_v2")

    def cuCtxPopCurrent_v2(self, out):
        self.depth -= 1
        return self._code("cuCtxPopCurrent_v2")

    def cuMemHostRegister_v2(self, pointer, size, flags):
        code = self._code("cuMemHostRegister_v2")
        if not code:
            self.registered.add(pointer.value)
        return code

    def cuMemHostUnregister(self, pointer):
        code = self._code("cuMemHostUnregister")
        self.registered.discard(pointer.value)  # (a failed one is left to the others)
        return code


@pytest.fixture
def driver(monkeypatch):
    def install(missing: tuple[str, ...] = (), **fail: int) -> FakeDriver:
        fake = FakeDriver(missing, **fail)
        monkeypatch.setattr(_pinned, "_open_driver", lambda: _pinned._Driver(fake))
        return fake

    return install


BLOCKS = [np.zeros((4, 8), np.float32), np.zeros(16, np.uint8), np.zeros(0, np.uint8)]


def test_blocks_are_registered_and_released_once_with_the_context_balanced(driver):
    fake = driver()
    pinned = _pinned.pin(BLOCKS)
    assert pinned is not None and fake.registered == {b.ctypes.data for b in BLOCKS[:2]}
    assert fake.depth == 0 and fake.retained == 1  # (the empty block is not registered)
    pinned.release()
    pinned.release()
    assert not fake.registered and fake.depth == 0 and fake.retained == 0
    assert fake.calls.count("cuMemHostUnregister") == 2


def test_a_block_the_driver_refuses_undoes_the_others_and_warns(driver):
    fake = driver(cuMemHostRegister_v2=2)
    with pytest.warns(shmaug.ShmaugWarning, match=r"did not page-lock.*error 1.*Fix:"):
        assert _pinned.pin(BLOCKS) is None
    assert not fake.registered and fake.depth == 0 and fake.retained == 0


def test_one_block_that_fails_to_unregister_keeps_none_of_the_others(driver):
    fake = driver(cuMemHostUnregister=1)
    pinned = _pinned.pin(BLOCKS)
    pinned.release()
    assert fake.calls.count("cuMemHostUnregister") == 2 and fake.retained == 0
    assert fake.depth == 0


def test_a_driver_without_a_call_is_a_warning_not_a_crash(driver):
    fake = driver(missing=("cuDevicePrimaryCtxRelease_v2",))  # a driver older than CUDA 11
    pinned = _pinned.pin(BLOCKS)
    pinned.release()  # unregisters, then cannot release the context: logged, not raised
    assert not fake.registered and fake.depth == 0
    fake = driver(missing=("cuCtxGetCurrent",))
    with pytest.warns(shmaug.ShmaugWarning, match="has no cuCtxGetCurrent"):
        assert _pinned.pin(BLOCKS) is None
    assert fake.retained == 0


def test_no_driver_warns_with_the_fix(monkeypatch):
    monkeypatch.setattr(_pinned, "_LIBRARIES", ("libshmaug_no_such_driver.so",))
    with pytest.warns(shmaug.ShmaugWarning, match=r"no CUDA driver.*pass pin_memory=False"):
        assert _pinned.pin(BLOCKS) is None
    assert not _pinned.usable()


def test_the_store_runs_its_hooks_while_mapped_and_unlinks_even_when_one_fails():
    seen = []
    store = SharedStore()
    _, view = store.empty((4,), np.int64)
    view[:] = 7
    store.before_close(lambda: seen.append(int(view.sum())))  # still mapped: readable
    store.before_close(lambda: 1 / 0)
    names = store.names
    store.close()
    assert seen == [28]
    from multiprocessing import shared_memory

    for name in names:
        with pytest.raises(FileNotFoundError):
            shared_memory.SharedMemory(name=name)


def test_ctypes_pointers_are_passed_whole():
    """A 64-bit address passes through ``c_void_p`` unchanged (ctypes' default int would
    cut it to 32 bits)."""
    block = np.zeros(8, np.uint8)
    assert ctypes.c_void_p(block.ctypes.data).value == block.ctypes.data
