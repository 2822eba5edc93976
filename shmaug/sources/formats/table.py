"""The record table: where each of millions of records lies, in one flat block.

``ImageRecords``' counterpart of ``images.paths.PathTable``. A shard (a TFRecord file, a tar) holds
many records; a worker finds record i from three int64s, so the table is::

    int64 rows[n, 3]     shard << 40 | record number in its shard, byte offset, length
    int64 classes[n]     only when the table has class indices

plus, per shard (a few thousand at most, kept as tuples), its path and, for a shard decompressed
into memory (GZIP TFRecords), where it starts in a second block of bytes (-1: read the file).
Shards in a bucket (URLs) come with the ``remote.Remote`` that reads them: ``prefetch`` (the
engine's hook, called with a task's samples) groups the task's records by shard and reads them
with ranged requests, neighbours coalesced, every shard's requests in flight together
(``Remote.read_many``); ``fetch`` then hands each record out once. ``share(store)`` hands
both blocks to the workers by name, as every flat table of shmaug's (``memory/table.py``), so a
worker's memory does not grow with the number of records. ``fetch(i)`` runs in a
worker: the table's format (``registry.RecordFormat``, named in the table) reads the record,
through ``bytes_at`` (one positioned read, no handle kept open, or a ranged request) or
``opened`` (a reader of the shard kept per process), and unwraps it (a TFRecord's CRCs and
Example; a tar member is the image itself). This module owns the layout and the reads;
which records and what they mean is ``records.py``'s, how a format reads them its module's.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from . import registry
from ..images.decode import unreadable
from ..remote import ahead as _ahead
from ..cache.disk_cache import DiskCache
from ..cache.plan import CachePlan
from ..remote import Fetched, Remote, shown_url
from ...errors import RemoteError
from ...memory.store import ArrayHandle
from ...memory.table import FlatTable

_ROW = struct.Struct("<qqq")
_EXTENT_ROWS = 1 << 20  # rows read at once to find each shard's extent (bounded memory)
_OPEN_READERS = 64  # readers of shards (ArrayRecord's) a process keeps open at most


class RecordTable(FlatTable):
    """Read-only table of ``n`` records in ``shards``, with optional int64 class indices.

    Example:
        >>> table = RecordTable.build(("a.tar",), np.zeros(2, np.int64), np.array([512, 2048]),
        ...                           np.array([900, 700]), None, "raw")
        >>> len(table), table[1]
        (2, 'a.tar[1]')
    """

    __slots__ = ("_shards", "_bases", "_kind", "_key", "_readers", "_remote", "_fetched",
                 "_extents", "_format", "_plan")
    ROW = "record"
    INSTEAD = ("or keep the images in files or uncompressed record shards "
               "(`ImageFiles.from_paths`, `ImageRecords.from_webdataset`), which workers read "
               "by index (nothing copied)")
    NOUN = "record"  # what a sample is, in a reader's messages
    SOURCE = "ImageRecords"  # whose ``load`` reads this table, in a worker error

    def __init__(self, data: Any, blob: Any, n: int, has_classes: bool,
                 shards: tuple[str, ...], bases: tuple[int, ...],
                 kind: str, key: str, handles: tuple[ArrayHandle | None, ...] | None = None,
                 remote: Remote | None = None) -> None:
        # blocks: rows[n, 3] (and classes[n] after them), and the decompressed shards or None
        super().__init__((data, blob), n, has_classes, handles)
        self._shards = shards  # invariant: one path per shard, in shard-number order
        self._bases = bases  # invariant: a shard's start in the blob, or -1 (read the file)
        self._kind = kind  # invariant: a name in registry.FORMATS (what pickles)
        self._format = registry.named(kind)  # reads a record: the format called ``kind``
        self._key = key  # the Example feature holding the image (TFRecord, ArrayRecord)
        self._readers: dict[int, Any] = {}  # readers of shards opened in this process
        self._remote = remote  # invariant: set iff the shards are URLs
        self._fetched = Fetched()  # this task's records and those of the tasks behind it
        self._extents: tuple[np.ndarray, int] | None = None  # see _extent_of
        self._plan: CachePlan | None = None  # this process's, made on first use (``plan``)

    @classmethod
    def build(cls, shards: tuple[str, ...], shard_of: np.ndarray, offsets: np.ndarray,
              lengths: np.ndarray, classes: np.ndarray | None, kind: str, key: str = "",
              blob: np.ndarray | None = None, bases: tuple[int, ...] | None = None,
              numbers: np.ndarray | None = None, remote: Remote | None = None
              ) -> RecordTable:
        """Pack the per-record arrays. ``numbers``: each record's number in its shard (for
        messages); by default records of a shard are contiguous and counted from 0."""
        shard_of = np.asarray(shard_of, np.int64)
        if numbers is None:
            firsts = np.searchsorted(shard_of, np.arange(len(shards)))
            numbers = np.arange(len(shard_of)) - firsts[shard_of]
        rows = np.stack([shard_of << 40 | np.asarray(numbers, np.int64),
                         np.asarray(offsets, np.int64), np.asarray(lengths, np.int64)],
                        axis=1).reshape(-1)
        parts = [rows] if classes is None else [rows, np.asarray(classes, np.int64)]
        data = np.concatenate(parts).view(np.uint8)
        return cls(data, blob, len(shard_of), classes is not None, shards,
                   bases or (-1,) * len(shards), kind, key, None, remote)

    def _classes_at(self) -> int:
        return 24 * self._n

    def _blocks_are(self) -> tuple[str, ...]:
        return (f"the index of {self._n:,} records",
                "the records held in memory (GZIP TFRecords decompressed, or bytes given)")

    def _meta(self) -> tuple[Any, ...]:
        return self._shards, self._bases, self._kind, self._key, self._remote

    @classmethod
    def _rebuilt(cls, arrays: tuple[np.ndarray | None, ...], n: int, has_classes: bool,
                 handles: tuple[ArrayHandle | None, ...] | None,
                 meta: tuple[Any, ...]) -> RecordTable:
        shards, bases, kind, key, remote = meta
        return cls(arrays[0], arrays[1], n, has_classes, shards, bases, kind, key, handles,
                   remote)

    @property
    def shards(self) -> tuple[str, ...]:
        return self._shards

    def bounds(self) -> np.ndarray:
        """Where each run of consecutive records of one shard begins, then ``n``: the layout
        ``shuffle="blocks"`` permutes (one run per shard, as the constructors index them)."""
        return self._runs()[0]

    def _runs(self) -> tuple[np.ndarray, np.ndarray]:
        """``bounds()``, and the shard of each run."""
        rows = np.frombuffer(self._bufs[0], np.int64, 3 * self._n).reshape(-1, 3)
        try:
            shard = rows[:, 0] >> 40
        finally:
            del rows  # no view of a shared block may outlive this: it must close
        starts = np.concatenate([[0], np.flatnonzero(np.diff(shard)) + 1]).astype(np.int64)
        return np.append(starts, self._n), shard[starts]

    @property
    def plan(self) -> Callable[..., None] | None:
        """The engine's hook with the order of this epoch and the next (``cache.plan.CachePlan``),
        where the shards are in a bucket with a disk cache; None otherwise."""
        if self._remote is None or self._remote.cache is None:
            return None
        if self._plan is None:
            self._plan = CachePlan(self._shards, *self._runs(), self._remote.cache,
                                   self._remote)
        return self._plan

    @property
    def remote(self) -> Remote | None:
        """What reads the shards when they are URLs (None: local files)."""
        return self._remote

    # -- reading ------------------------------------------------------------------------------

    def locate(self, index: int) -> tuple[int, int, int, int]:
        """``(shard, record number in the shard, offset, length)`` of record ``index``."""
        where, offset, length = _ROW.unpack_from(self._bufs[0], 24 * self._position(index))
        return where >> 40, where & (1 << 40) - 1, offset, length

    def __getitem__(self, index: int) -> str:
        """What ``stats()["unreadable"]`` calls record ``index``: ``shard[number]``."""
        shard, number, _, _ = self.locate(index)
        return f"{shown_url(self._shards[shard])}[{number}]"

    def what(self, index: int) -> str:
        """How an error names record ``index``: its shard, number and byte offset (where the
        format locates it by one)."""
        shard, number, offset, _ = self.locate(index)
        at = f" (byte offset {offset})" if self._format.by_bytes else ""
        return f"the image of record {number} of {shown_url(self._shards[shard])!r}{at}"

    @property
    def key(self) -> str:
        """The Example feature holding the image (formats of Examples; "" for the others)."""
        return self._key

    def fetch(self, index: int) -> np.ndarray:
        """The encoded image of record ``index`` (what a reader decodes), as its format
        reads it.

        Raises:
            ImageReadError: the shard cannot be read, changed since it was indexed, or (a
                TFRecord) the record's CRC does not match or it has no image.
        """
        return self._format.read(self, index)

    def bytes_at(self, index: int, shard: int, offset: int, size: int) -> bytes:
        """``size`` bytes of ``shard`` from ``offset`` (record ``index``'s, fewer where the
        file is shorter): from its decompressed copy, the bucket, or one positioned read.

        Raises:
            ImageReadError: the shard cannot be read.
        """
        base = self._bases[shard]
        if base >= 0:
            return bytes(self._bufs[1][base + offset:base + offset + size])
        if self._remote is not None:
            return self._remote_bytes(index, shard, offset, size)
        try:
            with open(self._shards[shard], "rb", buffering=0) as f:
                f.seek(offset)
                return f.read(size)
        except OSError as exc:
            raise unreadable(self.what(index), exc.strerror or str(exc)) from None

    @property
    def _frame_bytes(self) -> int:
        """What a record's frame adds to its length in the shard (its format's)."""
        return self._format.frame_bytes

    @property
    def prefetch(self) -> Callable[..., None] | None:
        """The engine's hook before a task's records are made (``fetch_together``) where the
        shards are in a bucket; None for local shards, which have nothing to fetch ahead."""
        return self.fetch_together if self._remote is not None else None

    def fetch_together(self, indices: Iterable[int], ahead: Iterable[int] = ()) -> None:
        """Have the records of ``indices`` (a task's) here, and those of ``ahead`` (the tasks
        behind it) here or on their way (``Fetched.request``, rounds of ``_read``); ``fetch``
        then hands each out once. Never raises: a failure is raised by ``fetch`` for its own
        record."""
        assert self._remote is not None
        located: dict[int, tuple[int, int, int]] = {}  # index -> (shard, offset, size)
        extra = self._frame_bytes

        def in_bucket(found: Iterable[int], budget: float = float("inf")) -> Iterator[int]:
            """The records read from the bucket (not those of a shard held decompressed),
            until their bytes pass ``budget``."""
            for index in found:
                shard, _, offset, length = self.locate(int(index))
                if self._bases[shard] < 0:
                    budget -= length + extra
                    if budget < 0:
                        return
                    located[int(index)] = (shard, offset, length + extra)
                    yield int(index)

        self._fetched.request(list(in_bucket(indices)), in_bucket(ahead, _ahead.AHEAD_BYTES),
                              lambda wanted: self._read(wanted, located))

    def _read(self, samples: list[int], located: dict[int, tuple[int, int, int]]) -> None:
        """Read the records of ``samples`` (``located``: each one's shard, offset and size)
        into ``_fetched``: grouped by shard, neighbours coalesced (across tasks too), all
        requests in flight at once (bounded per process)."""
        assert self._remote is not None
        wanted: dict[int, list[tuple[int, int, int]]] = {}  # shard -> (index, offset, size)
        for index in samples:
            shard, offset, size = located[index]
            wanted.setdefault(shard, []).append((index, offset, size))
        # Where all the shards in the bucket fit the span cache, a small one is read whole
        # (one more range, its records' extent, that coalescing merges with theirs): the span
        # kept then serves every later record of it.
        self._from_disk(wanted)
        extents, total = self._extent_of() if wanted else (None, 0)
        whole = self._remote.reads_whole(total)
        try:
            found = self._remote.read_many([(self._shards[s], [(o, n) for _, o, n in rows] + (
                [(0, int(extents[s]))] if extents is not None and extents[s] <= whole else []))
                for s, rows in wanted.items()])
        except RemoteError as exc:
            found = [exc] * len(wanted)
        for rows, pieces in zip(wanted.values(), found):
            self._fetched.put([index for index, _, _ in rows], [pieces] * len(rows)
                              if isinstance(pieces, BaseException) else pieces)

    def _from_disk(self, wanted: dict[int, list[tuple[int, int, int]]]) -> None:
        """Hand out the records of ``wanted`` whose shard the disk cache holds, read from
        there (and drop them from ``wanted``); queue the download of every other shard in
        ``wanted``, whose records are read by range meanwhile (``cache.disk_cache``)."""
        assert self._remote is not None
        cache = self._remote.cache
        if cache is None:
            return
        for shard in list(wanted):
            url = self._shards[shard]
            path = cache.local(url)
            rows = wanted[shard]
            pieces = None if path is None else cache.read(path, [(o, n) for _, o, n in rows])
            if pieces is None:
                cache.want(url, self._remote)
                continue
            self._fetched.put([index for index, _, _ in rows], pieces)
            del wanted[shard]

    def _extent_of(self) -> tuple[np.ndarray, int]:
        """Per shard, the end of its last record (with its TFRecord frame), and their sum over
        the shards read from the bucket: computed once, a million rows at a time."""
        if self._extents is None:
            frame = self._frame_bytes
            extents = np.zeros(len(self._shards), np.int64)
            for first in range(0, self._n, _EXTENT_ROWS):
                count = min(_EXTENT_ROWS, self._n - first)
                rows = np.frombuffer(self._bufs[0], np.int64, 3 * count, 24 * first).reshape(-1, 3)
                try:
                    np.maximum.at(extents, rows[:, 0] >> 40, rows[:, 1] + rows[:, 2] + frame)
                finally:
                    del rows  # no view of a shared block may outlive this: it must close
            total = int(extents[np.asarray(self._bases) < 0].sum())
            self._extents = (extents, total)
        return self._extents

    def _remote_bytes(self, index: int, shard: int, offset: int, size: int) -> bytes:
        data = self._fetched.take(index)
        assert self._remote is not None
        cache, url = self._remote.cache, self._shards[shard]
        if cache is not None:
            cache.refuse_changed(url)
        try:
            if data is None:
                path = cache.local(url) if cache is not None else None
                kept = DiskCache.read(path, [(offset, size)]) if path is not None else None
                data = kept[0] if kept else self._remote.read_ranges(url, [(offset, size)])[0]
            elif isinstance(data, BaseException):
                raise data.with_traceback(None)  # one failure may stand for many samples
        except FileNotFoundError:
            raise unreadable(self.what(index), "no such object (the shard was deleted or "
                                               "moved since it was indexed)") from None
        return data

    def opened(self, shard: int, open_shard: Callable[[str], Any]) -> Any:
        """This process's reader of ``shard`` (``open_shard(path)``, a format's: ArrayRecord's),
        opened on first use; readers are not shared: each process opens its own, and they
        close with the table, or when too many are open."""
        reader = self._readers.get(shard)
        if reader is None:
            if len(self._readers) >= _OPEN_READERS:
                for old in self._readers.values():
                    old.close()
                self._readers.clear()
            reader = open_shard(self._shards[shard])
            self._readers[shard] = reader
        return reader

    def with_classes(self, classes: np.ndarray | None) -> RecordTable:
        """The same records with other class indices (or none)."""
        rows = np.frombuffer(self._bufs[0], np.int64, 3 * self._n)
        parts = [rows] if classes is None else [rows, np.asarray(classes, np.int64)]
        data = np.concatenate(parts).view(np.uint8)
        return RecordTable(data, self._arrays[1], self._n, classes is not None, self._shards,
                           self._bases, self._kind, self._key, None, self._remote)

    def __repr__(self) -> str:
        return f"RecordTable({self._n:,} records in {len(self._shards)} shard(s))"
