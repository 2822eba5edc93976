"""Shared memory that outlives no one: named blocks, their picklable handles, and attaching.

``SharedStore`` (main process) creates blocks and is their only owner: it keeps them
registered with shmaug's own resource tracker (``_tracker``: even a SIGKILLed main process
gets them unlinked, with no "leaked" report) and unlinks them in ``close()``; blocks whose
owner died together with its tracker are swept by the next store (``_leftovers``). Workers
``attach()`` by ``ArrayHandle`` and never copy, never unlink and never register (see
``_attach_untracked``).

Memory-mapped ``.npy`` files get the same kind of handle (``kind="npy"``): every process maps
the file read-only, so the OS page cache is shared and nothing is copied into /dev/shm.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import secrets
import sys
import threading
import weakref
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any, Callable, Collection, Iterable

import numpy as np

from . import _leftovers, _tracker
from .. import platform
from ..errors import SharedMemoryError, warn

log = logging.getLogger(__name__)

SEGMENT_PREFIX = "shmaug_"
_SHM_DIR = platform.SHM_DIR or "/dev/shm"  # named in messages; measured only where it exists


def enlarge(gib: int = 2) -> str:
    """How to give /dev/shm ``gib`` GiB where it lives: a container's default is 64 MiB."""
    return (f"Docker: `--shm-size={gib}g`; Kubernetes: an emptyDir volume with "
            f"`medium: Memory` and `sizeLimit: {gib}Gi` mounted at {_SHM_DIR}; elsewhere: "
            f"`mount -o remount,size={gib}G {_SHM_DIR}`")


@dataclass(frozen=True, slots=True)
class ArrayHandle:
    """A picklable description of a shared array: where it lives, its shape and dtype."""

    name: str  # shm segment name, or the path of a .npy file when kind == "npy"
    shape: tuple[int, ...]
    dtype: str  # as ``dtype_text`` writes it
    kind: str = "shm"  # "shm" | "npy"
    offset: int = 0  # byte offset of the data in the file (kind == "npy")

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * dtype_of(self.dtype).itemsize


def dtype_text(dt: np.dtype) -> str:
    """A dtype as a handle carries it: numpy's string (``"<f4"``), but ``"bfloat16"`` by name
    (its string, ``"|V2"``, would come back as raw bytes)."""
    return "bfloat16" if dt.name == "bfloat16" else dt.str


def dtype_of(text: str) -> np.dtype:
    if text == "bfloat16":
        import ml_dtypes  # (present: the dtype was made from it)

        bf16: np.dtype = np.dtype(ml_dtypes.bfloat16)
        return bf16
    return np.dtype(text)


def segment_name(pid: int | None = None) -> str:
    """``shmaug_<creator pid>_<random>``: attributable, and short (macOS caps names at 31)."""
    return f"{SEGMENT_PREFIX}{os.getpid() if pid is None else pid}_{secrets.token_hex(4)}"


def mapped_file_handle(array: np.ndarray) -> ArrayHandle | None:
    """A handle that re-maps ``array`` from its file in each worker, or None if it is not a
    C-contiguous view of a file mapped shared (then it must be copied into shared memory):
    a copy-on-write map (``mmap_mode="c"``) holds edits the file does not, and a worker
    re-mapping the file would read the file's pixels instead."""
    buffer = getattr(array, "_mmap", None)
    if not isinstance(array, np.memmap) or array.filename is None or buffer is None or \
            array.mode == "c":
        return None
    if not array.flags.c_contiguous:
        return None
    # np.memmap maps from the allocation-granularity boundary below its offset; a slice
    # starts further in. The data's place in the file is the map's start plus that distance.
    map_start = array.offset - array.offset % mmap.ALLOCATIONGRANULARITY
    offset = map_start + _into_map(array, buffer)
    return ArrayHandle(str(array.filename), tuple(int(s) for s in array.shape),
                       dtype_text(array.dtype),
                       kind="npy", offset=int(offset))


def read_aheads_of(arrays: Iterable[Any]) -> list[Callable[[np.ndarray], None]]:
    """``read_ahead_of`` each of ``arrays`` read together (a dataset and its masks), their
    maps measured together against the memory: two of a third of it each are two the page
    cache cannot hold."""
    arrays = list(arrays)
    together = sum(a.nbytes for a in arrays if isinstance(a, np.memmap))
    return [r for r in (read_ahead_of(a, together) for a in arrays) if r is not None]


def read_ahead_of(array: Any, together: int = 0) -> Callable[[np.ndarray], None] | None:
    """For a file-mapped ``array`` (C-contiguous rows) larger than half the memory (RAM, or
    the cgroup's limit), it or the maps read with it (``together`` bytes), a function that
    asks the OS to read the given rows now, each run of adjacent rows as one request; None
    for anything else.

    Why: a page fault in a map reads what lies around the page, as far as the disk's
    readahead (8 MiB on some hosts), so rows drawn at random from a file the page cache
    cannot hold read 10-20x their bytes (2 workers, 150 KB rows: 770-1,050 rows a second
    here); asked for first (``MADV_WILLNEED``), a task's rows come in one request each, side
    by side, their bytes read once (4,900-5,300 rows a second). A file the page cache holds
    is better left to the faults: its first pass reads 8 MiB at a time (small rows: 200x
    fewer requests than a row each), and the later ones would pay a system call a row (1.5
    us: a gather 3.6x slower) for nothing. Best effort: where the OS has no such advice,
    nothing is asked.
    """
    mapping = getattr(array, "_mmap", None)
    if not isinstance(array, np.memmap) or not isinstance(mapping, mmap.mmap) or \
            not hasattr(mapping, "madvise") or not array.flags.c_contiguous or \
            array.ndim == 0 or not array.size or \
            max(array.nbytes, together) <= (platform.memory_bytes() or 2**62) // 2:
        return None
    lead, stride, size = _into_map(array, mapping), array.strides[0], len(mapping)
    page = mmap.PAGESIZE

    def read_ahead(rows: np.ndarray) -> None:
        if not len(rows):
            return
        rows = np.unique(rows)
        breaks = np.flatnonzero(np.diff(rows) != 1) + 1
        for first, last in zip(rows[np.r_[0, breaks]].tolist(),
                               rows[np.r_[breaks - 1, len(rows) - 1]].tolist()):
            start = lead + first * stride
            start -= start % page
            end = min(lead + (last + 1) * stride, size)
            with contextlib.suppress(OSError, ValueError, OverflowError):  # advice only
                mapping.madvise(mmap.MADV_WILLNEED, start, end - start)
    return read_ahead


def _into_map(array: np.ndarray, mapping: Any) -> int:
    """How far into its map ``mapping`` the memory-mapped ``array``'s data starts."""
    return array.ctypes.data - np.frombuffer(mapping, dtype=np.uint8).ctypes.data


def remapped(handle: ArrayHandle) -> np.ndarray:
    """The file-mapped array ``handle`` describes, mapped again read-only in this process: how
    a memory map inside a user's ``load`` or ``augment`` reaches a worker (pickled, a
    np.memmap would carry a copy of all its pixels to every worker)."""
    return attach(handle)[0]


def free_shm_bytes(needed: int = 0) -> int | None:
    """Bytes free in /dev/shm, or None where there is no such mount (macOS, Windows); where
    fewer than ``needed``, those free once what killed shmaug processes left is swept."""
    if platform.SHM_DIR is None:
        return None
    try:
        st = os.statvfs(platform.SHM_DIR)
    except (OSError, AttributeError):
        return None
    free = st.f_bavail * st.f_frsize
    if free < needed and _leftovers.sweep(SEGMENT_PREFIX, short=True):
        return free_shm_bytes()
    return free


def shm_report() -> str:
    """/dev/shm's size and what is free, for ``shmaug doctor``: a loader's data and ring live
    there, and a container's default (Docker: 64 MiB) holds little."""
    if platform.SHM_DIR is None:
        return "no /dev/shm to measure here (segments live in the system's memory)"
    try:
        st = os.statvfs(platform.SHM_DIR)
    except (OSError, AttributeError) as exc:
        return f"{platform.SHM_DIR} cannot be measured ({exc})"
    size, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    unit, scale = ("GiB", 2**30) if size >= 2**30 else ("MiB", 2**20)  # (Docker: 64 MiB)
    held = _others_held(())
    return (f"{platform.SHM_DIR}: {size / scale:.1f} {unit}, {free / scale:.1f} {unit} free"
            + (f"; {held}" if held else "; no shmaug segment there"))


_SMALLER = ("lower `max_queue_size` or `batch_size`, or pass `x` as a path to a .npy file so "
            "it is memory-mapped instead of copied into shared memory")


def check_capacity(nbytes: int, what: str, instead: str = _SMALLER,
                   own: Collection[str] = ()) -> None:
    """Raise ``SharedMemoryError`` with the remedy when /dev/shm cannot hold ``nbytes``;
    ``instead``: what else would need less of it, for this block; ``own``: the asking
    loader's blocks (not counted as its process's other loaders')."""
    free = free_shm_bytes(nbytes)
    if free is not None and nbytes > free:
        held = _others_held(own)
        here = _held_here(own)
        smaller = "" if nbytes < 2**16 else f", {instead}"  # (a few bytes: nothing smaller)
        closing = (f"close the loaders of this process it no longer uses (its other "
                   f"loaders hold {here:,} bytes there), " if here else "")
        raise SharedMemoryError(
            f"Not enough shared memory for {what}: asked for {nbytes:,} bytes "
            f"({nbytes / 2**20:.1f} MiB) but {_SHM_DIR} has {free:,} bytes "
            f"({free / 2**20:.1f} MiB) free{f' ({held})' if held else ''}. Fix: {closing}free "
            f"room there or enlarge it ({enlarge(-(-nbytes // 2**30) + 1)}){smaller}."
        )


def _reserve(shm: shared_memory.SharedMemory, nbytes: int) -> None:
    """Take ``nbytes`` of /dev/shm for a new block now. A block is created sparse: unreserved,
    it counts as free to the next loader's checks, and a write past what the tmpfs holds
    kills the writer with SIGBUS (several loaders in Docker's 64 MiB). Reserved, the block
    that does not fit is refused when made instead (ENOSPC, raised)."""
    fallocate = getattr(os, "posix_fallocate", None)  # (Linux; macOS and Windows have none)
    if fallocate is None or nbytes == 0:
        return
    try:
        fallocate(shm._fd, 0, nbytes)  # type: ignore[attr-defined]
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            raise
        # else a file system that cannot reserve (EOPNOTSUPP): as before


def _not_created(nbytes: int, what: str, exc: OSError) -> SharedMemoryError:
    """The error for a block that could not be made, with the fix its cause has."""
    where = platform.SHM_DIR or "memory (on Windows, the paging file)"
    space = platform.rlimit("AS")
    if exc.errno in (errno.ENOENT, errno.EROFS, errno.EACCES, errno.EPERM):
        fix = (f"{where} is missing or not writable here: mount a writable tmpfs there "
               f"(Docker and Kubernetes give one; `mount -t tmpfs tmpfs {where}`)")
    elif exc.errno in (errno.EMFILE, errno.ENFILE):  # (a block is a file descriptor)
        return SharedMemoryError(f"Could not create a shared-memory block of {nbytes:,} bytes "
                                 f"for {what}: {exc}.{platform.limits_met(exc.errno)}")
    elif exc.errno == errno.ENOMEM and space is not None:  # the map, not /dev/shm's room
        fix = (f"this process may map {space / 2**30:,.1f} GiB in all (`ulimit -v`), and "
               f"this block does not fit beside what it maps already: raise the limit "
               f"(`ulimit -v unlimited`, or as high as your cluster allows), or pass `x` as a "
               f"path to a .npy file (`np.save(path, x)`): workers map it, nothing is copied")
    else:
        fix = (f"free or enlarge {where} ({enlarge(-(-nbytes // 2**30) + 1)}): other "
               f"loaders' blocks, "
               f"or other programs', hold the rest; close the loaders you no longer use, or "
               f"lower `max_queue_size`")
    return SharedMemoryError(
        f"Could not create a shared-memory block of {nbytes:,} bytes for {what}: {exc}. "
        f"Fix: {fix}.")


RING = "the output ring"  # how check_need's callers name the ring and the dataset among
DATASET = "the dataset"  # the parts


def check_need(parts: dict[str, int], *, batch_bytes: int = 0, slots: int = 0,
               depth: str = "", own: Collection[str] = ()) -> None:
    """Raise ``SharedMemoryError`` when /dev/shm cannot hold all of ``parts`` together (bytes
    still to be written there, by what they are for), before any of them is written.

    The fix fits the case: when the output ring (``RING``: ``slots`` batches of
    ``batch_bytes``) does not fit, a smaller batch or queue (with the ``max_queue_size``
    that fits; ``depth``: what chose the ring's depth, said with it); when the dataset
    alone does not, a ``.npy`` path, which is memory-mapped
    instead of copied; always, enlarging /dev/shm. ``own``: the asking loader's blocks,
    left out of what the message says the process's other loaders hold.
    """
    total = sum(parts.values())
    free = free_shm_bytes(total)
    if free is None or total <= free:
        return
    ring, data = parts.get(RING, 0), parts.get(DATASET, 0)
    fits = (free - (total - ring)) // batch_bytes if batch_bytes and total - ring < free else 0
    chosen = f", {depth}" if depth else ""
    shrink = (f"lower `max_queue_size` (now {slots} batches of {batch_bytes:,} bytes{chosen}; "
              + (f"max_queue_size={fits} fits" if fits >= 1 else "not one batch fits beside "
                 "the rest, so lower `batch_size` too") + ") or `batch_size`"
              if slots > 1 else f"lower `batch_size` (the queue holds one batch of "
              f"{batch_bytes:,} bytes already{chosen})")
    npy = ("pass `x` as a path to a .npy file (`np.save(path, x)`) or a "
           "`np.load(path, mmap_mode='r')` array, itself or a contiguous slice `x[a:b]`: every "
           "worker memory-maps it, nothing is copied into shared memory (a view with a step "
           "or a flip is copied: take those in `augment`)")
    if ring > free:  # the ring alone: the data's place would not help
        fix = (f"{shrink}, or make the augmented samples smaller (a float32 output takes 4x "
               f"uint8's)") + (f"; and {npy}" if data > free else "")
    elif data > free:  # the dataset alone: a smaller ring would not help
        fix = npy
    elif ring:
        fix = f"{shrink}, or {npy}"
    else:
        fix = npy if data else "free some of it"
    listed = ", ".join(f"{what} {n:,} bytes" for what, n in parts.items() if n)
    gib = -(-total // 2**30) + 1
    held, elsewhere = _held_here(own), _others_held(own)
    others = (f"; this process's other loaders hold {held:,} bytes there: close those it "
              f"no longer uses" if held else "") + (f"; {elsewhere}" if elsewhere else "")
    raise SharedMemoryError(
        f"Not enough shared memory: shmaug needs {total:,} bytes ({total / 2**20:,.1f} MiB) "
        f"in {_SHM_DIR} ({listed}) but it has {free:,} bytes ({free / 2**20:,.1f} MiB) free "
        f"(checked before any of it is copied). Fix: {fix}{others}; or enlarge {_SHM_DIR} "
        f"({enlarge(gib)})."
    )


def warn_if_beyond_memory(parts: dict[str, int]) -> None:
    """Warn, before the copy, when the bytes about to be written to shared memory (``parts``)
    exceed the memory this process may still fill (``platform.memory_available``): /dev/shm
    may be as large as RAM (a Kubernetes ``emptyDir`` without ``sizeLimit``), and the copy
    would then end in the OOM killer, with no word. A warning, not a refusal: swap the
    figure misses, or memory freed meanwhile, may let it fit."""
    total, room = sum(parts.values()), platform.memory_available()
    if room is None or total <= room or not parts.get(DATASET):
        return
    warn(f"shmaug is about to copy {total / 2**20:,.1f} MiB into shared memory ({_SHM_DIR}), "
         f"and this process may fill only {room / 2**20:,.1f} MiB more (the machine's "
         f"available memory, within its container's limit): the copy may end in the kernel's "
         f"OOM killer. An array in memory is held twice until the loader closes (it and its "
         f"copy). Fix: pass `x` as a path to a .npy file (`np.save(path, x)`, then `del x`): "
         f"every worker memory-maps it, nothing is copied.")


def _held_here(own: Collection[str]) -> int:
    """Bytes of /dev/shm this process's shmaug blocks hold, but for ``own`` (the asking
    loader's): its other loaders'. (Not by the PID in their names: in a PID namespace,
    another container's job has this process's PID.)"""
    theirs = _this_process() - {name.lstrip("/") for name in own}
    total = 0
    for name in theirs:
        try:
            total += os.stat(os.path.join(_SHM_DIR, name)).st_blocks * 512
        except OSError:  # (gone meanwhile; no /dev/shm to list: Windows, macOS)
            continue
    return total


def _this_process() -> set[str]:
    """The names of the blocks this process's live stores own."""
    with _STORES_LOCK:
        stores = list(_STORES)
    return {name.lstrip("/") for store in stores for name in store.names}


def _others_held(own: Collection[str]) -> str:
    """What shmaug segments of other processes hold in /dev/shm (``_leftovers.census``),
    said for an out-of-room message and ``shmaug doctor``; "" where none."""
    found = _leftovers.census(
        SEGMENT_PREFIX, frozenset(_this_process() | {n.lstrip("/") for n in own}))
    said = []
    if found["live"]:
        said.append(f"other running shmaug jobs hold {sum(found['live'].values()):,} bytes")
    if found["left"]:
        said.append(f"segments of killed shmaug jobs hold {sum(found['left'].values()):,} "
                    f"bytes, which the next shmaug job removes once they are "
                    f"{_leftovers.STALE_AFTER_S:g} s old")
    if found["unknown"]:
        who = ", ".join(f"uid {uid}: {n / 2**20:,.1f} MiB"
                        for uid, n in sorted(found["unknown"].items()))
        said.append(f"other users' shmaug segments hold {sum(found['unknown'].values()):,} "
                    f"bytes ({who}), their running jobs' or those a killed one left, which "
                    f"only that user's next shmaug job (or root's) can remove")
    return "; ".join(said)


def copied_bytes(x: np.ndarray | None, targets: dict[str, np.ndarray],
                 workers: int) -> dict[str, int]:
    """What a loader will copy into shared memory, by what it is (``check_need``'s parts):
    ``x`` unless memory-mapped (None: a ``load`` source, nothing to copy), and with workers,
    the targets they augment with each image."""
    need = {}
    if x is not None and mapped_file_handle(x) is None:
        need[DATASET] = int(x.nbytes)
    for name, array in targets.items() if workers else ():
        if mapped_file_handle(array) is None:
            need[f"the target y[{name!r}]"] = int(array.nbytes)
    return need


def _attach_untracked(name: str) -> shared_memory.SharedMemory:
    """Attach to an existing block without registering it with the resource tracker.

    Before Python 3.13 attaching registers the block (CPython gh-82300). Forked and spawned
    workers share the owner's tracker, so a worker's register/unregister would drop the
    owner's registration, and the tracker could no longer clean up after a killed owner.
    3.13 added ``track=False`` for exactly this.
    """
    if sys.version_info >= (3, 13):
        return _Attached(name=name, track=False)  # type: ignore[call-arg]
    with _tracker.python_tracker_skipped():
        return _Attached(name=name)


class _Attached(shared_memory.SharedMemory):
    """A block this process attached to, which only its owner unlinks: CPython's constructor
    unlinks the block when mapping it fails, even one it only attaches to, so a worker over
    its `ulimit -v` deleted the loader's dataset under every other worker and replacement."""

    def unlink(self) -> None:
        pass


def attach(handle: ArrayHandle, *, lent: bool = False
           ) -> tuple[np.ndarray, Callable[[], None]]:
    """Map a shared array in this process (no copy). Returns the array and its closer.

    The closer only unmaps; it never unlinks (the owner does that). ``lent``: views of the
    array may outlive the closer's call (images handed out of it), which then leaves the
    mapping to the last of them (``_close_quietly``).
    """
    if handle.kind == "npy":
        mapped = np.memmap(handle.name, dtype=dtype_of(handle.dtype), mode="r",
                           offset=handle.offset, shape=handle.shape)
        return mapped, lambda: None
    shm = _attach_untracked(handle.name)
    array = np.ndarray(handle.shape, dtype=dtype_of(handle.dtype), buffer=shm.buf)

    def close() -> None:
        nonlocal array
        del array
        _close_quietly(shm, lent=lent)

    return array, close


def attach_block(handle: ArrayHandle) -> shared_memory.SharedMemory:
    """Map a shared block in this process as raw bytes (``.buf``), not as a numpy view.

    For small flag arrays written a few bytes at a time (``struct.pack_into``) from objects
    without a close step: with no view on it, the block closes cleanly whenever the object
    holding it is collected.
    """
    return _attach_untracked(handle.name)


def _close_quietly(shm: shared_memory.SharedMemory, *, lent: bool = False) -> None:
    """Close this process's hold on a block; a ``lent`` block (ring slots that
    ``copy=False`` hands out) is never unmapped from under a view.

    ``SharedMemory.close()`` unmaps at once, yet a numpy array made on its buffer keeps only
    the ``mmap`` object as its base, not an export of it: a batch lent with ``copy=False``
    and kept past the ``Loader``'s close then read freed pages and crashed Python. So where
    anything besides the block itself still holds a lent block's ``mmap``, the ``mmap`` is
    dropped instead of closed: it unmaps itself (and closes its descriptor) when the last
    array over it is collected. The owner unlinks the name regardless. (The attributes are
    CPython's own, the same from 3.10 to 3.13.)
    """
    mapping = shm._mmap  # type: ignore[attr-defined]
    # References: the block's attribute, its memoryview's, `mapping`, getrefcount's argument
    if lent and mapping is not None and sys.getrefcount(mapping) > 4:
        shm._buf = None  # type: ignore[attr-defined]
        shm._mmap = None  # type: ignore[attr-defined]
    del mapping
    try:
        shm.close()  # the mapping where nothing else holds it, and the descriptor (POSIX)
    except BufferError:
        # A view of the memoryview itself is alive; the mapping goes when the view does.
        pass


def _release(segments: list[shared_memory.SharedMemory], locks: list[int],
             lent: set[str], before: list[Callable[[], None]]) -> None:
    """Run the ``before`` hooks (what must happen while the blocks are mapped), close and
    unlink every block, then drop the locks that said its owner lives; safe to call twice
    (the lists are emptied)."""
    while before:
        try:
            before.pop()()
        except Exception as exc:  # the segments must go regardless
            log.warning("before closing shared memory: %s: %s", type(exc).__name__, exc)
    while segments:
        shm = segments.pop()
        _close_quietly(shm, lent=shm.name in lent)
        try:
            with _tracker.python_tracker_skipped():
                shm.unlink()
        except FileNotFoundError:
            pass
        _tracker.untrack(shm._name)  # type: ignore[attr-defined]
    while locks:
        os.close(locks.pop())


_STORES: weakref.WeakSet[SharedStore] = weakref.WeakSet()  # this process's live stores
_STORES_LOCK = threading.Lock()  # (a loader made on another thread adds one meanwhile)


def _disown_in_child() -> None:
    """A fork of this process (``os.fork``, gunicorn's preload_app) holds its stores too:
    at the fork's exit their finalizers unlinked the parent's blocks. They are the parent's
    (mapped in the fork until it exits: views of them live on)."""
    global _STORES_LOCK
    _STORES_LOCK = threading.Lock()  # (held by another thread at the fork: free here)
    for store in list(_STORES):
        store._finalizer.detach()
    _STORES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disown_in_child)


class SharedStore:
    """Owner of named shared-memory blocks.

    Blocks are named ``shmaug_<creator pid>_<random>`` so leaks are attributable. The store
    unlinks them in ``close()`` (also via ``with`` and, as a backstop, a weakref finalizer at
    garbage collection or interpreter exit). Workers attach by handle; they never unlink.

    Example:
        >>> with SharedStore() as store:
        ...     handle, view = store.put(np.arange(6).reshape(2, 3))
        ...     int(view.sum())
        15
    """

    def __init__(self) -> None:
        _leftovers.sweep(SEGMENT_PREFIX)
        self._segments: list[shared_memory.SharedMemory] = []  # invariant: all owned, all live
        self._locks: list[int] = []  # invariant: one descriptor locking each, where locks apply
        self._lent: set[str] = set()  # invariant: names of the blocks views are lent from
        self._before: list[Callable[[], None]] = []  # run first by close (before_close)
        self._finalizer = weakref.finalize(self, _release, self._segments, self._locks,
                                           self._lent, self._before)
        with _STORES_LOCK:
            _STORES.add(self)

    def empty(self, shape: tuple[int, ...], dtype: Any, *, what: str = "an array",
              lent: bool = False, reserved: int | None = None, instead: str = _SMALLER
              ) -> tuple[ArrayHandle, np.ndarray]:
        """A new zero-filled shared array; returns its handle and a view for this process.
        ``lent``: views of it may outlive the store (the ring's slots under ``copy=False``):
        closing then unlinks its name but leaves the mapping to the last view.
        ``reserved``: the bytes whose room is taken now (``_reserve``; default all), the rest
        by ``reserve`` once it is known to fit. ``instead``: what would need less room than
        this block, as the error for too little says it."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        check_capacity(nbytes if reserved is None else reserved, what, instead,
                       own=self.names)
        with platform.sigint_deferred():  # (a press mid-way left a segment no one owned)
            name = segment_name()
            try:
                with _tracker.python_tracker_skipped():  # ours tracks it, quietly (_tracker)
                    shm = shared_memory.SharedMemory(name=name, create=True, size=max(nbytes, 1))
            except OSError as exc:
                raise _not_created(nbytes, what, exc) from exc
            lock = None
            try:  # (a Ctrl-C may land in any: the reservation of gigabytes takes a while, and
                # the first block of a process starts the tracker)
                lock = _leftovers.hold(name)  # first: a reservation may outlast a sweep's patience
                _reserve(shm, nbytes if reserved is None else reserved)
                _tracker.track(shm._name)  # type: ignore[attr-defined]
            except BaseException as exc:  # untracked and not yet ours to close: unlinked here
                _close_quietly(shm, lent=False)
                with contextlib.suppress(FileNotFoundError), _tracker.python_tracker_skipped():
                    shm.unlink()
                if lock is not None:
                    os.close(lock)
                if isinstance(exc, OSError):  # (no room)
                    raise _not_created(nbytes, what, exc) from exc
                raise
            self._segments.append(shm)
            if lent:
                self._lent.add(shm.name)
            if lock is not None:
                self._locks.append(lock)
        view = np.ndarray(shape, dtype=dt, buffer=shm.buf)
        return ArrayHandle(name, tuple(int(s) for s in shape), dtype_text(dt)), view

    def put(self, array: np.ndarray, *, what: str = "the dataset",
            rows: int | None = None, instead: str = _SMALLER) -> tuple[ArrayHandle, np.ndarray]:
        """Copy ``array`` into a new shared block (once); returns its handle and view. With
        ``rows``, only its first ``rows`` rows are copied and reserved yet: the block is made
        whole, and the rest takes room once ``reserve(handle)`` is called (after the check
        that it fits), before ``view[rows:] = array[rows:]``."""
        first = None if rows is None else rows * (array[0].nbytes if len(array) else 0)
        handle, view = self.empty(array.shape, array.dtype, what=what, reserved=first,
                                  instead=instead)
        if rows is None:
            view[...] = array
        else:
            view[:rows] = array[:rows]
        return handle, view

    def reserve(self, handle: ArrayHandle, what: str = "the dataset") -> None:
        """Take the room of all of block ``handle`` (one ``put`` reserved in part).

        Raises:
            SharedMemoryError: /dev/shm has no room left for it.
        """
        shm = next(shm for shm in self._segments if shm.name == handle.name)
        try:
            _reserve(shm, handle.nbytes)
        except OSError as exc:
            raise _not_created(handle.nbytes, what, exc) from exc

    def before_close(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` when the store closes, while its blocks are still mapped (the ring
        unregistered from the CUDA driver before it is unmapped)."""
        self._before.append(hook)

    @property
    def names(self) -> list[str]:
        return [shm.name for shm in self._segments]

    def close(self) -> None:
        """Unlink every block this store created. Idempotent."""
        self._finalizer()

    def __enter__(self) -> SharedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
