"""Datasets larger than RAM: a .npy file is memory-mapped by every worker, never copied."""

from __future__ import annotations

import os

import numpy as np
import psutil
import pytest

import shmaug
from tests import _ops
from tests._helpers import shmaug_segments

pytestmark = pytest.mark.timeout(180)


def epoch(x, n, **kwargs):
    with shmaug.Loader(x, np.arange(n), batch_size=8, augment=_ops.noisy, seed=4,
                       shuffle=True, **kwargs) as loader:
        return [b for b in loader]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_memmapped_npy_gives_the_same_epoch_as_ram(tmp_path, images, method):
    path = tmp_path / "x.npy"
    np.save(path, images)
    sources = [(str(path), 0), (np.load(path, mmap_mode="r"), 0),
               (np.load(path, mmap_mode="r")[8:], 8)]  # a slice starts deeper in the file
    for source, offset in sources:
        got = epoch(source, len(images) - offset, workers=2, start_method=method)
        ref = epoch(images[offset:], len(images) - offset, workers=0)
        assert len(got) == len(ref)
        for (xa, ya), (xb, yb) in zip(ref, got):
            np.testing.assert_array_equal(xa, xb)
            np.testing.assert_array_equal(ya, yb)


def test_a_copy_on_write_maps_edits_reach_the_workers(tmp_path):
    """``np.load(mmap_mode="c")`` then an edit in place: the workers re-mapped the file and
    read its pixels, not the edited ones that ``workers=0`` gave."""
    path = tmp_path / "x.npy"
    np.save(path, np.full((16, 8, 8), 200, np.uint8))
    x = np.load(path, mmap_mode="c")
    x[:] = 7  # (the file still holds 200)
    for source in (x, x[4:]):
        got = epoch(source, len(source), workers=2)
        ref = epoch(np.array(source), len(source), workers=0)
        for (xa, _), (xb, _) in zip(ref, got):
            np.testing.assert_array_equal(xa, xb)


def test_nothing_of_the_dataset_goes_to_shared_memory(tmp_path):
    path = tmp_path / "big.npy"
    x = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(2048, 256, 256))
    x[:] = 7  # 128 MiB on disk
    x.flush()
    del x
    with shmaug.Loader(str(path), batch_size=64, augment=_ops.mean_only, workers=2,
                       output_shape=(1,), output_dtype="float32") as loader:
        sizes = [(shmaug_segments_size(name)) for name in loader._run.store.names]
        assert sum(sizes) < 2**20  # only the (tiny) output ring
        loader.batch(0)
        idle = [private_dirty(pid) for pid in loader.pids]
        total = sum(float(xb.sum()) for xb, _ in loader)
        busy = [private_dirty(pid) for pid in loader.pids]
    assert total == pytest.approx(7.0 * 2048)
    for before, after in zip(idle, busy):
        assert after - before < 64 * 2**20  # the file's pages are page cache, not copies


def test_a_strided_view_of_a_map_is_told_it_is_copied(tmp_path):
    """`full[::2]` and `full[..., ::-1]` (BGR to RGB) of a 1.5 GB map went into /dev/shm whole
    without a word, and its out-of-room error told the user to pass a map."""
    path = tmp_path / "images.npy"
    np.save(path, np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3))
    full = np.load(path, mmap_mode="r")
    for view in (full[::2], full[..., ::-1]):
        with pytest.warns(shmaug.ShmaugWarning, match=r"view of the memory map .* with a step "
                                                      r"or a flip.*copied into shared memory"):
            with shmaug.Loader(view, batch_size=4, augment=_ops.identity, workers=0) as loader:
                np.testing.assert_array_equal(loader.batch(0)[0], view[:4])
    with shmaug.Loader(full[2:10], batch_size=4, augment=_ops.identity, workers=0) as loader:
        loader.batch(0)  # (contiguous: mapped, nothing said)


class Frames:
    """A user's reader that holds a memory map as an attribute (a subclass's ``self.clips``)."""

    def __init__(self, path):
        self.frames = np.load(path, mmap_mode="r")[4:]  # (a view, deeper in the file)

    def __call__(self, index):
        return self.frames[index]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_memory_map_a_load_reads_reaches_the_workers_as_its_file(tmp_path, method):
    """``load=mm.__getitem__`` (what the error for a list of clips names), or a reader object
    holding the map: pickled for the workers, each got a copy of the whole file (281 MiB of
    clips, twice over), a dataset larger than RAM an out-of-memory kill."""
    path = tmp_path / "frames.npy"
    x = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(388, 512, 512))
    x[:] = np.arange(388, dtype=np.uint8)[:, None, None]  # 97 MiB on disk
    x.flush()
    del x
    mm = np.load(path, mmap_mode="r")
    for load, first in ((mm.__getitem__, 0), (Frames(path), 4)):
        with shmaug.Loader(list(range(384)), batch_size=64, load=load, augment=_ops.mean_only,
                           workers=2, start_method=method, output_shape=(1,),
                           output_dtype="float32") as loader:
            means = np.concatenate([xb[:, 0] for xb, _ in loader])
            copied = [private_dirty(pid) for pid in loader.pids]
        np.testing.assert_array_equal(means, np.arange(first, first + 384) % 256)
        assert max(copied) < 64 * 2**20, copied  # a copy: more than the file's 97 MiB


class Cache:
    """A user's reader that writes what it read into a map of its own (``mode="w+"``)."""

    def __init__(self, path, source):
        self.source = source
        self.cache = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8,
                                               shape=source.shape)

    def __call__(self, index):
        self.cache[index] = self.source[index]
        return np.asarray(self.cache[index])


def test_writable_or_unlinked_maps_still_reach_the_workers_as_copies(tmp_path):
    """Only a read-only map goes as its file: a worker writing into a writable one was told
    "assignment destination is read-only", and one whose file was unlinked (a temporary
    file) failed to map in every worker."""
    source = np.arange(16 * 4 * 4, dtype=np.uint8).reshape(16, 4, 4)
    gone = tmp_path / "gone.npy"
    np.save(gone, source)
    unlinked = np.load(gone, mmap_mode="r")
    gone.unlink()
    for load in (Cache(tmp_path / "cache.npy", source), unlinked.__getitem__):
        with shmaug.Loader(list(range(16)), batch_size=8, load=load, augment=_ops.identity,
                           workers=1, start_method="fork") as loader:
            np.testing.assert_array_equal(np.concatenate([xb for xb, _ in loader]), source)


def private_dirty(pid: int) -> int:
    """Bytes a process has written of its own: a copy of the data would land here. Not USS,
    which also counts the clean file pages that only this process happens to map (two workers
    reading disjoint halves of a 128 MiB file: about 64 MiB each, yet no copy)."""
    return sum(m.private_dirty for m in psutil.Process(pid).memory_maps(grouped=True))


def shmaug_segments_size(name):
    return os.path.getsize(f"/dev/shm/{name}")


def test_bad_path_is_a_clear_error(tmp_path):
    with pytest.raises(shmaug.ArgumentError, match=r"existing \.npy file"):
        shmaug.Loader(str(tmp_path / "missing.npy"), augment=_ops.identity)
    assert not shmaug_segments(os.getpid())


def test_a_file_truncated_under_a_running_loader_is_named_as_what_changed(tmp_path):
    """The replacements failed mapping it, and the error told the user to make the ops
    importable, or to use fork: what fails at the start of an unchanged run."""
    path = tmp_path / "data.npy"
    np.save(path, np.zeros((256, 32, 32, 3), np.uint8))
    with shmaug.Loader(str(path), np.arange(256), batch_size=8, augment=_ops.noisy,
                       workers=2, seed=0, shuffle=True) as loader:
        it = iter(loader)
        next(it)
        with open(path, "r+b") as f:
            f.truncate(4096)
        with pytest.raises(shmaug.WorkerDied, match=r"replacing one that had worked.*memory-"
                                                    r"mapped `x` file truncated"):
            for _ in it:
                pass


def _evicted(path) -> bool:
    """``path``'s pages dropped from the page cache; False where they cannot be (a tmpfs)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        before = _read_bytes()
        os.pread(fd, 1 << 16, 1 << 20)
        read = _read_bytes() > before
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return read
    finally:
        os.close(fd)


def _disk_waits() -> int:
    """Page faults of this thread that waited on the disk (major faults)."""
    import resource

    return resource.getrusage(resource.RUSAGE_THREAD).ru_majflt


def _read_bytes() -> int:
    """Bytes this process had read from storage (not from the page cache)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("read_bytes"))


needs_storage = pytest.mark.skipif(not os.path.exists("/proc/self/io") or
                                   not hasattr(os, "posix_fadvise") or os.name != "posix",
                                   reason="reads from storage are measured on Linux")


@pytest.fixture
def small_memory(monkeypatch):
    """A host of 64 MiB (a container's memory limit, as ``platform.memory_bytes`` reads it):
    a file of more than half of it is one the page cache cannot be counted on to hold."""
    from shmaug import platform

    monkeypatch.setattr(platform, "memory_bytes", lambda: 64 << 20)


@needs_storage
def test_rows_read_ahead_are_read_from_the_file_once_and_no_more(tmp_path, small_memory):
    """A page fault reads what lies around the page (up to 8 MiB on hosts with a large
    readahead), so each row drawn at random read many times its bytes: the rows are asked
    of the OS first, each run of adjacent rows as one request, exactly their pages."""
    from shmaug.memory.store import read_ahead_of

    path = tmp_path / "x.npy"
    np.save(path, np.arange(4000 * 3 * 1024, dtype=np.uint32).reshape(4000, 3, 1024))
    if not _evicted(path):
        pytest.skip("this file system keeps no page cache to drop (tmpfs)")
    full = np.load(path, mmap_mode="r")
    for x, first in ((full, 0), (full[1000:], 1000)):  # a slice lies further in the file
        read_ahead = read_ahead_of(x)
        assert read_ahead is not None
        rows = np.array([500, 1900, 1901, 2999])  # (apart from the header numpy read)
        before = _read_bytes()
        read_ahead(rows)
        asked = _read_bytes() - before  # (another thread's reads may count: 1 MiB spared)
        waits = _disk_waits()
        for row in rows:  # in the page cache now, or on its way: no fault waits on the disk
            assert (x[row].ravel()[:4] == (first + row) * 3 * 1024 + np.arange(4)).all()
        assert _disk_waits() == waits
        assert len(rows) * x[0].nbytes <= asked <= len(rows) * x[0].nbytes + (1 << 20)
        assert _evicted(path)
    assert read_ahead_of(np.zeros((4, 4))) is None  # (an array in memory: nothing to ask)


def test_a_file_the_page_cache_holds_is_left_to_the_faults(tmp_path):
    """Under half the memory, a map's first pass reads 8 MiB a fault (200x fewer requests
    than a row each, at small rows) and the later passes find every row cached, where
    asking for each costs a system call (a gather 3.6x slower): nothing is asked."""
    from shmaug import platform
    from shmaug.memory.store import read_ahead_of

    path = tmp_path / "x.npy"
    np.save(path, np.zeros((1000, 8, 8, 3), np.uint8))
    assert platform.memory_bytes() > 2 * 1000 * 8 * 8 * 3
    assert read_ahead_of(np.load(path, mmap_mode="r")) is None


@needs_storage
@pytest.mark.parametrize("augment", [_ops.noisy, None], ids=["workers' code", "gathered"])
def test_rows_drawn_at_random_from_a_file_come_without_a_wait_on_the_disk_each(
        tmp_path, small_memory, augment):
    """Each row of a memory-mapped file drawn at random, read through a page fault, waited
    on the disk (a major fault) and read what lay around it as well (up to 8 MiB on this kind
    of host: 10x its bytes, 5-6x slower at 150 KB rows): a task's rows are asked of the OS
    together first, and their faults find them read or on their way."""
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((16000, 64, 64, 3), np.uint8))  # (~200 MB: more than 8 MiB a row)
    if not _evicted(path):
        pytest.skip("this file system keeps no page cache to drop (tmpfs)")
    x = np.load(path, mmap_mode="r")
    with shmaug.Loader(x, np.arange(len(x)), batch_size=16, augment=augment, seed=1,
                       shuffle=True, workers=0) as loader:  # (the workers' code, inline)
        batches = iter(loader)
        next(batches)  # (its start reads sample 0 through a fault)
        before = _disk_waits()
        for _ in range(4):
            next(batches)
        waits = _disk_waits() - before
    assert waits <= 2, f"{waits} of 64 rows waited on the disk"


def test_maps_read_together_are_measured_together(tmp_path, small_memory):
    """A dataset and its masks of a third of the memory each: neither alone is more than
    half of it, both together are, and the page cache holds neither for long (a real 256 MiB
    cgroup read 3.3-4.2 GiB an epoch for 228 MiB of them)."""
    from shmaug.memory.store import read_ahead_of, read_aheads_of

    np.save(tmp_path / "x.npy", np.zeros((700, 96, 96, 3), np.uint8))  # ~19 MB each, of 64 MiB
    np.save(tmp_path / "m.npy", np.zeros((700, 96, 96, 3), np.uint8))
    x, m = (np.load(tmp_path / n, mmap_mode="r") for n in ("x.npy", "m.npy"))
    assert read_ahead_of(x) is None and read_ahead_of(m) is None
    assert len(read_aheads_of([x, m, np.zeros(3)])) == 2
