"""A table of millions of rows in flat blocks, handed to workers by name: the base of the
sources' path table (``sources/images/paths.py``) and record table
(``sources/formats/table.py``).

A table is built in the main process as numpy arrays. ``share(store)`` copies its blocks once
into the caller's ``SharedStore`` (which owns and unlinks them) and returns a table that pickles
as the blocks' handles: a worker attaches by name and reads the shared pages with ``struct``,
holding no numpy view on them, so its memory does not grow with the rows and its blocks close
cleanly at exit. The first block may end in an int64 class index per row (``class_of``,
``classes``). What a row holds, and the other blocks, are the subclass's.
"""

from __future__ import annotations

import struct
from typing import Any, TypeVar

import numpy as np

from .store import ArrayHandle, SharedStore, attach_block

_INT64 = struct.Struct("<q")
T = TypeVar("T", bound="FlatTable")


class FlatTable:
    """Rows in flat blocks, with an optional int64 class index per row (see the module
    docstring). A subclass says where the classes start (``_classes_at``), what each block is
    (``_blocks_are``), and what besides the blocks rebuilds it (``_meta``, ``_rebuilt``)."""

    __slots__ = ("_n", "_has_classes", "_arrays", "_bufs", "_handles", "_blocks")
    ROW = "row"  # what a row is, in the table's messages
    INSTEAD = ("or list fewer samples in the source (its table holds every one it lists, "
               "whatever `num_shards`)")  # what would need less room, as /dev/shm's error says

    def __init__(self, arrays: tuple[np.ndarray | None, ...], n: int, has_classes: bool,
                 handles: tuple[ArrayHandle | None, ...] | None = None) -> None:
        self._n = n  # invariant: number of rows
        self._has_classes = has_classes  # invariant: block 0 holds classes[n] at _classes_at
        self._arrays = arrays  # the blocks as numpy arrays (main process), or None
        self._bufs: tuple[Any, ...] = tuple(None if a is None else a.data.cast("B")
                                            for a in arrays)
        self._handles = handles  # invariant: set iff the blocks live in shared memory
        self._blocks: tuple[Any, ...] = ()  # in a worker: the attached blocks behind _bufs

    # -- what a subclass says -----------------------------------------------------------------

    def _classes_at(self) -> int:
        """Where block 0's int64 class indices start, in bytes."""
        raise NotImplementedError

    def _blocks_are(self) -> tuple[str, ...]:
        """What each block holds, as an out-of-memory message names it."""
        raise NotImplementedError

    def _meta(self) -> tuple[Any, ...]:
        """What, with the blocks and the row count, rebuilds this table (it pickles)."""
        return ()

    @classmethod
    def _rebuilt(cls: type[T], arrays: tuple[np.ndarray | None, ...], n: int,
                 has_classes: bool, handles: tuple[ArrayHandle | None, ...] | None,
                 meta: tuple[Any, ...]) -> T:
        """The table of these blocks (shared where ``handles`` is set) and ``meta``."""
        return cls(arrays, n, has_classes, handles)

    # -- rows and classes ------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def _position(self, index: int) -> int:
        """``index`` (negative: from the end) as a row number.

        Raises:
            IndexError: out of range.
        """
        i = int(index)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"{self.ROW} index {index} out of range for {self._n} {self.ROW}s")
        return i

    def class_of(self, index: int) -> int:
        """The class index of row ``index`` (the table must have classes).

        Raises:
            LookupError: the table holds no class indices (IndexError: ``index`` is out of
                range).
        """
        if not self._has_classes:
            raise LookupError(f"this {self.ROW} table holds no class indices")
        at = self._classes_at() + 8 * self._position(index)
        return int(_INT64.unpack_from(self._bufs[0], at)[0])

    @property
    def classes(self) -> np.ndarray | None:
        """int64 class index per row (a read-only copy), or None."""
        if not self._has_classes:
            return None
        out = np.frombuffer(self._bufs[0], np.int64, self._n, self._classes_at()).copy()
        out.flags.writeable = False
        return out

    # -- sharing and pickling -------------------------------------------------------------

    @property
    def shared(self) -> bool:
        return self._handles is not None

    def share(self: T, store: SharedStore) -> T:
        """This table copied into ``store`` (which owns and unlinks the blocks); the copy
        pickles as their handles, so workers attach instead of receiving the rows."""
        if self._handles is not None:
            return self
        handles: list[ArrayHandle | None] = []
        views: list[np.ndarray | None] = []
        for array, what in zip(self._arrays, self._blocks_are()):
            if array is None:
                handles.append(None)
                views.append(None)
                continue
            handle, view = store.put(array, what=what, instead=self.INSTEAD)
            view.flags.writeable = False
            handles.append(handle)
            views.append(view)
        return self._rebuilt(tuple(views), self._n, self._has_classes, tuple(handles),
                             self._meta())

    def __reduce__(self) -> Any:
        meta = (type(self), self._n, self._has_classes, self._meta())
        if self._handles is not None:  # to a worker: the names of the blocks, never the bytes
            return (_attached, (self._handles, *meta))
        return (_rebuilt, (self._arrays, *meta))


def _rebuilt(arrays: tuple[np.ndarray | None, ...], cls: type[FlatTable], n: int,
             has_classes: bool, meta: tuple[Any, ...]) -> FlatTable:
    return cls._rebuilt(arrays, n, has_classes, None, meta)


def _attached(handles: tuple[ArrayHandle | None, ...], cls: type[FlatTable], n: int,
              has_classes: bool, meta: tuple[Any, ...]) -> FlatTable:
    """In a worker: the shared table, mapped by name. Reads go through ``struct`` on the
    blocks' own buffers (no numpy view), so they close cleanly whenever they are collected."""
    table = cls._rebuilt((None,) * len(handles), n, has_classes, None, meta)
    blocks = tuple(None if h is None else attach_block(h) for h in handles)
    table._blocks = tuple(b for b in blocks if b is not None)
    table._bufs = tuple(None if b is None else b.buf for b in blocks)
    table._handles = handles
    return table
