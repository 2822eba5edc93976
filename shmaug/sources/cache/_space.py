"""The room in a disk cache's folder (``Space``): what its entries hold, which to evict, and a
download's bytes reserved under the bound (``cache_limit``); and sizes as users write them
(``size_of``).

``disk_cache.DiskCache`` asks ``Space.reserve`` before it writes an object, holding that
object's own lock. Room is made under the folder's lock (``cache.lock``, ``_file_lock``), so
two processes never both count the same free bytes: the ``.part`` file a download will fill is
created at its full size there, and every process counts it. The eviction policy is a seam
(``Evict``): ``lru`` (least recently used first, by modification time, which a read refreshes),
or, once the engine has handed a record table the order of this epoch and the next
(``plan.CachePlan``), ``farthest``: the entry whose next use is farthest away first.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable, NamedTuple

from ._file_lock import FileLock
from ...errors import ArgumentError, ArgumentTypeError, got

LOCK_WAIT_S = 30.0  # the longest a process waits for the cache's own lock (making room)
# A process lists the folder (its entries and their sizes) at most this often; in between it
# counts its own writes and evictions. Other processes' writes of that time can pass the bound.
RESCAN_S = 10.0
# ... and no more often than this many times the listing took: a folder of a million image
# files takes seconds to list (200,000: 1.2 s here), which every 10 s would be a worker's time.
RESCAN_SHARE = 50
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
DATA, PART, LOCK = ".data", ".part", ".lock"  # an entry, its download, its lock


class Entry(NamedTuple):
    """A complete object in the cache, as the eviction policy sees it."""

    path: str
    size: int
    used: float  # its modification time: when a process last read it (``DiskCache.local``)


# The eviction policy: which entries to remove (in order) to free ``need`` bytes.
Evict = Callable[[list[Entry], int], list[Entry]]


def lru(entries: list[Entry], need: int) -> list[Entry]:
    """Least recently used first, until ``need`` bytes are freed."""
    return _until(sorted(entries, key=lambda e: e.used), need)


def farthest(next_use: Callable[[str], float]) -> Evict:
    """The policy that evicts the entry read again last first (``next_use(path)``: how far
    ahead that is), the least recently used among equals: Belady's rule, where the order of
    reads is known (``plan.CachePlan``)."""

    def evict(entries: list[Entry], need: int) -> list[Entry]:
        return _until(sorted(entries, key=lambda e: (-next_use(e.path), e.used)), need)

    return evict


def _until(ranked: list[Entry], need: int) -> list[Entry]:
    """The first of ``ranked`` whose sizes add up to ``need`` bytes."""
    out: list[Entry] = []
    for entry in ranked:
        if need <= 0:
            break
        out.append(entry)
        need -= entry.size
    return out


def sibling(final: str, suffix: str) -> str:
    """The ``.part`` or ``.lock`` file of entry ``final`` (``<name>.data``)."""
    return final[:-len(DATA)] + suffix


class Space:
    """The bytes a cache folder holds, bounded by ``limit`` (None: by the disk), as this
    process last saw them. Per process; not pickled (``DiskCache`` makes one)."""

    __slots__ = ("folder", "limit", "evict", "_seen")

    def __init__(self, folder: str, limit: int | None, evict: Evict = lru) -> None:
        self.folder = folder
        self.limit = limit
        self.evict = evict
        self._seen: _Seen | None = None  # the folder as last listed, and this process's since

    def reserve(self, final: str, size: int) -> str | None:
        """Reserve ``size`` bytes for entry ``final``: its ``.part`` created at that size,
        stale versions of the same object removed, others evicted as the policy says. None
        when reserved; else why it does not fit. Short of evicting, a few dictionary steps
        whatever the number of entries (a cache of a million image files writes each)."""
        if self.limit is not None and size > self.limit:
            return f"an object of {size:,} bytes is larger than the bound"
        with FileLock(os.path.join(self.folder, "cache" + LOCK)) as lock:
            if not lock.acquire(LOCK_WAIT_S):
                return f"another process held {self.folder}/cache.lock for {LOCK_WAIT_S:g} s"
            seen = self._listed()
            seen.drop(final)  # not as known (cut short): replaced by this download
            stale = [seen.entries[p] for p in seen.versions.get(_object_of(final), ())]
            victims = stale
            if self.limit is not None and seen.used + size > self.limit:
                gone = {e.path for e in stale}
                need = seen.used + size - self.limit
                if self.evict is lru:  # in the order kept since the listing: no sort per write
                    victims = stale + seen.oldest(need, gone)
                else:
                    victims = stale + self.evict([e for e in seen.entries.values()
                                                  if e.path not in gone], need)
            for entry in victims:
                if remove(entry.path):
                    seen.drop(entry.path)
            if self.limit is not None and seen.used + size > self.limit:
                return f"{seen.used:,} bytes are in use by objects being read or written"
            with open(sibling(final, PART), "wb") as f:
                f.truncate(size)  # reserved: other processes count it
            seen.add(Entry(final, size, time.time()))  # counted from now
        return None

    def _listed(self) -> _Seen:
        """The folder as ``_scan`` listed it, and what this process did since (``RESCAN_S``,
        ``RESCAN_SHARE``)."""
        seen = self._seen
        if seen is None or time.monotonic() - seen.when > max(RESCAN_S,
                                                              RESCAN_SHARE * seen.took):
            began = time.monotonic()
            entries, used = self._scan()
            self._seen = seen = _Seen(began, entries, used, time.monotonic() - began)
        return seen

    def _scan(self) -> tuple[dict[str, Entry], int]:
        """The complete entries by path, and the bytes in use: entries and the ``.part``
        files of downloads under way (those of dead ones are removed)."""
        entries: dict[str, Entry] = {}
        used = 0
        with os.scandir(self.folder) as found:
            for item in found:
                try:
                    st = item.stat()
                except OSError:
                    continue
                if item.name.endswith(DATA):
                    used += st.st_size
                    entries[item.path] = Entry(item.path, st.st_size, st.st_mtime)
                elif item.name.endswith(PART):
                    other = FileLock(item.path[:-len(PART)] + LOCK)
                    if other.acquire(0):  # nobody writes it: a killed download's
                        remove(item.path)
                        other.release()
                    else:
                        used += st.st_size
        return entries, used


class _Seen:
    """A process's view of a cache folder: its entries by path and by object (the versions
    of one object share a name up to their identity's hash), in the order of their last use
    (``lru``'s, sorted once per listing), and the bytes in use (``.part`` files of downloads
    under way included), since the listing made at ``when``, which took ``took`` seconds."""

    __slots__ = ("when", "entries", "versions", "used", "took", "_order")

    def __init__(self, when: float, entries: dict[str, Entry], used: int,
                 took: float = 0.0) -> None:
        self.when, self.entries, self.used, self.took = when, entries, used, took
        self.versions: dict[str, set[str]] = {}
        for path in entries:
            self.versions.setdefault(_object_of(path), set()).add(path)
        # Least recently used first; an entry added later goes last. An entry dropped (or
        # added again) is skipped where it no longer matches (``oldest``).
        self._order = collections.deque(sorted(entries.values(), key=lambda e: e.used))

    def add(self, entry: Entry) -> None:
        self.entries[entry.path] = entry
        self.versions.setdefault(_object_of(entry.path), set()).add(entry.path)
        self.used += entry.size
        self._order.append(entry)

    def oldest(self, need: int, skip: set[str]) -> list[Entry]:
        """``lru``'s choice among the entries (those in ``skip`` aside), taken off the order:
        a few steps per entry, where ``lru`` sorts them all."""
        out: list[Entry] = []
        while need > 0 and self._order:
            entry = self._order.popleft()
            if self.entries.get(entry.path) is not entry or entry.path in skip:
                continue
            out.append(entry)
            need -= entry.size
        return out

    def drop(self, path: str) -> None:
        entry = self.entries.pop(path, None)
        if entry is not None:
            self.used -= entry.size
            versions = self.versions[_object_of(path)]
            versions.discard(path)
            if not versions:
                del self.versions[_object_of(path)]


def _object_of(path: str) -> str:
    """An entry's path less its identity's hash: the same for every version of an object."""
    return path[:-len("-0123456789abcdef" + DATA)]


def size_of(name: str, value: Any) -> int | None:
    """A size in bytes: an int (bytes) or a text with a unit (``"50GB"``, ``"512MiB"``; kB,
    MB, GB, TB are powers of 10, KiB, MiB, GiB, TiB of 2); None: none.

    Raises:
        ArgumentError: negative.
        ArgumentTypeError: neither an int nor such a text.
    """
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        digits = text.rstrip("kmgtib")
        unit = _UNITS.get(text[len(digits):])
        try:
            number = float(digits) * unit if unit is not None else None
        except ValueError:
            number = None
    if number is None or number != number:
        raise ArgumentTypeError(
            f"`{name}` must be a size: bytes (an int) or a text with a unit; received "
            f"{got(value)}. Fix: e.g. {name}=50_000_000_000 or {name}='50GB' (or '512MiB')."
        )
    if number < 0:
        raise ArgumentError(
            f"`{name}` must be a size >= 0; received {got(value)}. Fix: e.g. {name}='50GB', "
            f"or None for no bound but the disk."
        )
    return int(number)


def remove(path: str) -> bool:
    try:
        os.remove(path)
        return True
    except OSError:  # gone already, or (Windows) open in another process: left for later
        return False
