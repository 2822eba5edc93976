from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from shmaug.errors import SharedMemoryError
from shmaug.engine.handoff.ring import OutputRing
from shmaug.memory.store import SEGMENT_PREFIX, ArrayHandle, SharedStore, attach, free_shm_bytes


def test_put_attach_close_unlinks():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    store = SharedStore()
    handle, view = store.put(data)
    assert handle.name.startswith(SEGMENT_PREFIX) and handle.nbytes == data.nbytes
    handle = pickle.loads(pickle.dumps(handle))
    attached, close = attach(handle)
    np.testing.assert_array_equal(attached, data)
    view[0, 0, 0] = 99  # one block, two views: no copy
    assert attached[0, 0, 0] == 99
    del attached
    close()
    store.close()
    store.close()  # idempotent
    if os.path.isdir("/dev/shm"):
        assert handle.name not in os.listdir("/dev/shm")


@pytest.mark.parametrize("where", ["track", "reserve"])
def test_a_ctrl_c_while_a_block_is_tracked_leaves_no_block(monkeypatch, where):
    """The first block of a process starts the tracker, and a block's room is reserved
    (``posix_fallocate``, 0.4 s for 4 GiB); a Ctrl-C there left the block, made but nobody's,
    in /dev/shm for the life of the process (a loader's 12 MB ring, a 4 GiB dataset)."""
    from shmaug.memory import _tracker, store as _store

    def interrupted(*args):
        raise KeyboardInterrupt

    def mine() -> set[str]:
        return {n for n in os.listdir("/dev/shm") if n.startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")}

    before = mine()
    if where == "track":
        monkeypatch.setattr(_tracker, "track", interrupted)
    else:
        monkeypatch.setattr(_store, "_reserve", interrupted)
    store = SharedStore()
    with pytest.raises(KeyboardInterrupt):
        store.empty((1000,), np.uint8)
    assert mine() == before
    store.close()


def test_finalizer_unlinks_a_forgotten_store():
    store = SharedStore()
    handle, _ = store.empty((4,), np.uint8)
    del store, _
    if os.path.isdir("/dev/shm"):
        assert handle.name not in os.listdir("/dev/shm")


def test_memmapped_npy_handle(tmp_path):
    path = tmp_path / "x.npy"
    data = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.save(path, data)
    mm = np.load(path, mmap_mode="r")
    handle = ArrayHandle(str(path), mm.shape, mm.dtype.str, kind="npy", offset=mm.offset)
    array, close = attach(handle)
    np.testing.assert_array_equal(array, data)
    close()


@pytest.mark.skipif(free_shm_bytes() is None, reason="no /dev/shm here")
def test_too_large_a_block_fails_with_numbers_and_a_fix():
    with SharedStore() as store:
        with pytest.raises(SharedMemoryError) as info:
            store.empty((free_shm_bytes() + 2**30,), np.uint8, what="the dataset")
    text = str(info.value)
    assert "asked for" in text and "free" in text and "--shm-size" in text and ".npy" in text


def test_ring_slots_are_lent_once():
    with SharedStore() as store:
        ring = OutputRing(store, 3, 4)
        assert ring.handles is None and ring.view.size == 0  # no memory until it is sized
        ring.allocate((2, 2), np.float32, targets={"mask": ((2,), np.uint8)})
        assert ring.view.shape == (3, 4, 2, 2) and ring.handles.images.shape == (3, 4, 2, 2)
        assert ring.targets["mask"].shape == (3, 4, 2) and ring.handles.targets["mask"].shape \
            == (3, 4, 2)
        acquired = [ring.acquire() for _ in range(3)]
        slots = [slot for slot, _ in acquired]
        assert sorted(slots) == [0, 1, 2] and ring.acquire() is None
        assert all(generation == 1 for _, generation in acquired)
        ring.cancel(slots[1])
        assert ring.generation[slots[1]] == 2
        ring.view[slots[0]] = 1
        ring.targets["mask"][slots[0]] = 7
        lent, lent_targets = ring.lend(slots[0], 2)
        assert not lent.flags.writeable and not lent_targets["mask"].flags.writeable
        copy, targets = ring.read(slots[0], 2)
        ring.release(slots[0])
        ring.view[:] = 0
        ring.targets["mask"][:] = 0
        assert copy.shape == (2, 2, 2) and (copy == 1).all()
        assert targets["mask"].shape == (2, 2) and (targets["mask"] == 7).all()
        assert (lent == 0).all()  # a lease is a view: valid only until its slot is reused
        with pytest.raises(RuntimeError):
            ring.release(slots[0])
        del ring, lent, lent_targets


def test_segment_names_fit_the_shortest_platform_limit():
    """macOS refuses POSIX shared-memory names over 31 bytes (PSHMNAMLEN), and Python adds a
    leading slash; Linux pids go up to 4,194,304 (pid_max), macOS's to 99,999."""
    from shmaug.memory.store import segment_name

    longest = "/" + segment_name(pid=4_194_304)
    assert len(longest) <= 30, longest
    assert segment_name().startswith(f"{SEGMENT_PREFIX}{os.getpid()}_")
    assert segment_name() != segment_name()  # random part: no clash between stores


def test_attached_blocks_close_cleanly_with_no_view_left():
    from shmaug.memory.store import attach_block

    with SharedStore() as store:
        handle, view = store.empty((5,), np.uint8)
        block = attach_block(handle)
        block.buf[3] = 1  # a byte at a time: no numpy view to outlive the block
        assert view.tolist() == [0, 0, 0, 1, 0]
        block.close()


def test_a_forked_child_keeps_a_programs_own_resource_tracker_patch():
    """The fork hook that frees the patch lock in a child also put back the tracker calls
    shmaug saw at import, undoing a program's own patch (the common pre-3.13 workaround) in
    every forked child, torch's and multiprocessing's included."""
    code = (
        "import os\n"
        "from multiprocessing import resource_tracker\n"
        "import shmaug\n"
        "def mine(*args, **kwargs): pass\n"
        "resource_tracker.register = mine\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if resource_tracker.register is mine else 1)\n"
        "assert os.waitpid(pid, 0)[1] == 0, 'the child lost the patch'\n"
    )
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux's memory figures")
def test_a_copy_beyond_the_memory_left_is_told_before_it_is_made():
    """A memory reviewer: /dev/shm as large as RAM (here, and a Kubernetes emptyDir without a
    sizeLimit) let an array over half of RAM pass the only check, /dev/shm's room, and the copy
    beside it would end in the OOM killer without a word."""
    from shmaug import platform
    from shmaug.errors import ShmaugWarning
    from shmaug.memory.store import DATASET, RING, warn_if_beyond_memory

    room = platform.memory_available()
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert room is not None and 0 < room <= total + 2**40  # (swap counts too)
    with pytest.warns(ShmaugWarning, match=r"(?s)about to copy .* may fill only .*OOM killer"
                                           r".*\.npy file"):
        warn_if_beyond_memory({DATASET: room, RING: 2**20})
    warn_if_beyond_memory({DATASET: 2**20, RING: 2**20})  # (warnings are errors here)
    warn_if_beyond_memory({RING: room + 2**20})  # the ring alone: /dev/shm's check says it
