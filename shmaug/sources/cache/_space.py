"""The room in a disk cache's folder (``Space``): what its entries hold, which to evict, and a
download's bytes reserved under the bound (``cache_limit``); and sizes as users write them
(``size_of``).

``disk_cache.DiskCache`` asks ``Space.reserve`` before it writes an object, holding that
object's own lock. Room is made under the folder's lock (``cache.lock``, ``_file_lock``), so
two processes never both count the same free bytes: the ``.part`` file a download will fill is
created at its full size there, and every process counts it.

The eviction policy is a seam (``Evict``): given the folder as this process sees it
(``Folder``: its entries, their order of use kept since the listing, the bytes in use, the
bound) and the bytes a write needs, it names the entries to remove. ``Space`` runs every
policy alike:

- ``lru``: least recently used first (by modification time, which a read refreshes), taken
  off the kept order: a few steps per entry evicted, never a sort of them all;
- ``farthest``, once the engine has handed a record table the order of this epoch and the next
  (``plan.CachePlan``): the entry whose next use is farthest away first (Belady's rule). It
  ranks every entry, so when it must evict it also frees a margin (``MARGIN``: a 32nd of the
  bound, whole entries only) that the next writes fill without ranking again: one sort per
  that many bytes written, not per write. The bound stays a hard bound: the margin is room
  left free below it, never bytes past it.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any, Callable, Iterable, NamedTuple

from ._file_lock import NOFOLLOW, FileLock
from ...errors import ArgumentError, ArgumentTypeError, got

LOCK_WAIT_S = 30.0  # the longest a process waits for the cache's own lock (making room)
# A process lists a folder of fewer entries than this (its shards, a few hundred files) that
# lists in under LIST_EACH_UNDER_S at each reservation, so every worker's writes are counted by
# the next: the bound holds however the processes interleave (a fixed 10 s between listings
# let 2 workers hold 1.84x the bound; a window of RESCAN_SHARE listings, widened by a listing
# slowed under CI's load, 1.17x). The time bound keeps a folder whose lock files piled up
# (one per object ever read, never removed) from being listed at every write.
LIST_EACH_BELOW = 1024
LIST_EACH_UNDER_S = 0.05
# A larger folder is listed again when room is reserved at least this many times as long
# after its last listing as that listing took; in between this process counts its own writes
# and evictions, and other processes' writes of that time can pass the bound by what they
# wrote. A million image files take seconds to list (200,000: 1.2 s here): once a minute,
# not by every write.
RESCAN_SHARE = 50
# ``farthest`` frees this share of the bound (1/MARGIN) beyond what a write needs, in whole
# entries that fit in it: with 200,000 image files it ranks them all (about a second) once per
# 6,000 writes, where it did for each. The cost: the cache holds up to 3% less between sorts.
MARGIN = 32
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
DATA, PART, LOCK = ".data", ".part", ".lock"  # an entry, its download, its lock


class Entry(NamedTuple):
    """A complete object in the cache, as the eviction policy sees it."""

    path: str
    size: int
    used: float  # its modification time: when a process last read it (``DiskCache.local``)


# The eviction policy: which entries of the folder (as this process sees it) to remove, in
# order, to free at least ``need`` bytes.
Evict = Callable[["Folder", int], list[Entry]]


def lru(folder: Folder | Iterable[Entry], need: int) -> list[Entry]:
    """Least recently used first, until ``need`` bytes are freed: taken off the folder's kept
    order (a plain list of entries is ranked first)."""
    return Folder.of(folder).oldest(need)


def farthest(next_use: Callable[[str], float]) -> Evict:
    """The policy that evicts the entry read again last first (``next_use(path)``: how far
    ahead that is), the least recently used among equals: Belady's rule, where the order of
    reads is known (``plan.CachePlan``). It ranks every entry, so it frees ``MARGIN`` more
    than asked: the next writes fit without ranking again."""

    def evict(folder: Folder | Iterable[Entry], need: int) -> list[Entry]:
        if need <= 0:
            return []
        seen = Folder.of(folder)
        ranked = sorted(seen.entries.values(), key=lambda e: (-next_use(e.path), e.used))
        return _until(ranked, need, seen.margin)

    return evict


def _until(ranked: Iterable[Entry], need: int, spare: int = 0) -> list[Entry]:
    """The first of ``ranked`` whose sizes add up to ``need`` bytes, and those after them that
    still fit in ``spare`` bytes more."""
    out: list[Entry] = []
    freed = 0
    for entry in ranked:
        if freed >= need and freed + entry.size > need + spare:
            break
        out.append(entry)
        freed += entry.size
    return out


def sibling(final: str, suffix: str) -> str:
    """The ``.part`` or ``.lock`` file of entry ``final`` (``<name>.data``)."""
    return final[:-len(DATA)] + suffix


# This process's view of each cache folder (by pid, folder and bound), shared by its Spaces:
# the copies of one source a process holds (a loader's, a probe's) count each other's writes
# between listings, where each alone would pass the bound by what the others wrote.
_VIEWS: dict[tuple[int, str, int | None], Folder] = {}


class Space:
    """The bytes a cache folder holds, bounded by ``limit`` (None: by the disk), as this
    process last saw them (``_VIEWS``). Not pickled (``DiskCache`` makes one)."""

    __slots__ = ("folder", "limit", "evict")

    def __init__(self, folder: str, limit: int | None, evict: Evict = lru) -> None:
        self.folder = folder
        self.limit = limit
        self.evict = evict

    @property
    def _seen(self) -> Folder | None:
        """The folder as last listed here, and this process's writes and evictions since."""
        return _VIEWS.get((os.getpid(), self.folder, self.limit))

    @_seen.setter
    def _seen(self, seen: Folder) -> None:
        _VIEWS[(os.getpid(), self.folder, self.limit)] = seen

    def _lock(self) -> FileLock:
        """The folder's lock (``cache.lock``): held while room is made and while a download
        is renamed into place."""
        return FileLock(os.path.join(self.folder, "cache" + LOCK))

    def reserve(self, final: str, size: int) -> str | None:
        """Reserve ``size`` bytes for entry ``final``: its ``.part`` created at that size,
        stale versions of the same object removed, others evicted as the policy says. None
        when reserved; else why it does not fit. Short of evicting, a few dictionary steps
        whatever the number of entries (a cache of a million image files writes each)."""
        if self.limit is not None and size > self.limit:
            return f"an object of {size:,} bytes is larger than the bound"
        with self._lock() as lock:
            if not lock.acquire(LOCK_WAIT_S):
                return f"another process held {self.folder}/cache.lock for {LOCK_WAIT_S:g} s"
            seen = self._listed()
            if not self._room(seen, final, size):  # another process evicted what this view
                seen = self._listed(again=True)  # counted: it is stale, so listed afresh
                self._room(seen, final, size)
            if self.limit is not None and seen.used + size > self.limit:
                return f"{seen.used:,} bytes are in use by objects being read or written"
            fd = os.open(sibling(final, PART), os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                         NOFOLLOW, 0o600)
            with open(fd, "wb") as f:
                f.truncate(size)  # reserved: other processes count it
            seen.add(Entry(final, size, time.time()))  # counted from now
        return None

    def complete(self, final: str) -> None:
        """Rename entry ``final``'s whole download into place, under the folder's lock: a
        listing meanwhile saw the ``.part`` go and missed the ``.data`` come (scandir makes no
        promise about a name renamed while it reads), and let the next write pass the bound
        by the entry's bytes (a single process held 1.17x under CI's load)."""
        with self._lock() as lock:
            lock.acquire(LOCK_WAIT_S)  # not held in time: renamed all the same, not lost
            os.replace(sibling(final, PART), final)

    def _room(self, seen: Folder, final: str, size: int) -> bool:
        """Room for ``size`` bytes of ``final`` made in ``seen``: stale versions of its object
        and what the policy names evicted. False when an entry to evict was gone already."""
        seen.drop(final)  # not as known (cut short): replaced by this download
        found = True
        for path in list(seen.versions.get(_object_of(final), ())):
            found &= self._evicted(seen, path)  # stale versions of the same object
        need = 0 if self.limit is None else seen.used + size - self.limit
        if need > 0:
            for entry in self.evict(seen, need):
                found &= self._evicted(seen, entry.path)
        return found

    @staticmethod
    def _evicted(seen: Folder, path: str) -> bool:
        """Remove entry ``path``; uncounted once gone (one open elsewhere on Windows stays).
        False when it was gone already: another process evicted it since ``seen`` was
        listed, and wrote what this view does not count."""
        removed = remove(path)
        if not removed and os.path.lexists(path):  # (Windows) open elsewhere: left for later
            return True
        seen.drop(path)
        return removed

    def _listed(self, again: bool = False) -> Folder:
        """The folder as ``_scan`` listed it, and what this process did since
        (``LIST_EACH_BELOW``, ``RESCAN_SHARE``); ``again``: listed now."""
        seen = self._seen
        if (again or seen is None
                or len(seen.entries) < LIST_EACH_BELOW and seen.took < LIST_EACH_UNDER_S
                or time.monotonic() - seen.when > RESCAN_SHARE * seen.took):
            began = time.monotonic()
            entries, used = self._scan()
            self._seen = seen = Folder(entries, used, self.limit, began,
                                       time.monotonic() - began)
        return seen

    def _scan(self) -> tuple[dict[str, Entry], int]:
        """The complete entries by path, and the bytes in use: entries and the ``.part``
        files of downloads under way (those of dead ones are removed)."""
        entries: dict[str, Entry] = {}
        used = 0
        with os.scandir(self.folder) as found:
            for item in found:
                if item.name.endswith(LOCK):
                    continue  # (most of a folder of image files: not worth a stat each)
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


class Folder:
    """A process's view of a cache folder, what an eviction policy is given: its entries by
    path and by object (the versions of one object share a name up to their identity's
    hash), in the order of their last use (sorted once per listing, kept since), the bytes in
    use (``.part`` files of downloads under way included) and the bound, since the listing
    made at ``when``, which took ``took`` seconds."""

    __slots__ = ("entries", "versions", "used", "limit", "when", "took", "_order")

    def __init__(self, entries: dict[str, Entry], used: int, limit: int | None = None,
                 when: float = 0.0, took: float = 0.0) -> None:
        self.entries, self.used, self.limit = entries, used, limit
        self.when, self.took = when, took
        self.versions: dict[str, set[str]] = {}
        for path in entries:
            self.versions.setdefault(_object_of(path), set()).add(path)
        # Least recently used first; an entry added later goes last. An entry dropped (or
        # added again) is skipped where it no longer matches (``oldest``).
        self._order = collections.deque(sorted(entries.values(), key=lambda e: e.used))

    @classmethod
    def of(cls, entries: Folder | Iterable[Entry]) -> Folder:
        """``entries`` as a folder's view: itself, or a list's (no bound), ranked once."""
        if isinstance(entries, Folder):
            return entries
        listed = {e.path: e for e in entries}
        return cls(listed, sum(e.size for e in listed.values()))

    @property
    def margin(self) -> int:
        """The bytes a ranking policy frees beyond a write's need (``MARGIN``)."""
        return 0 if self.limit is None else self.limit // MARGIN

    def add(self, entry: Entry) -> None:
        self.entries[entry.path] = entry
        self.versions.setdefault(_object_of(entry.path), set()).add(entry.path)
        self.used += entry.size
        self._order.append(entry)

    def oldest(self, need: int) -> list[Entry]:
        """The least recently used entries whose sizes add up to ``need`` bytes, taken off the
        kept order: a few steps per entry, where ranking them would sort them all."""
        out: list[Entry] = []
        while need > 0 and self._order:
            entry = self._order.popleft()
            if self.entries.get(entry.path) is not entry:
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
