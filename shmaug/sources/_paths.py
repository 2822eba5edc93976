"""The path table of an image source: millions of paths (and class indices) in one flat block.

A Python tuple of paths costs about 100 bytes of objects per path, and a forked worker copies
the pages of every string it touches (reading a string writes its reference count), while a
spawned worker receives the whole tuple by pickle. At ImageNet's 1.28 million files that is a
few hundred MiB per worker. ``PathTable`` keeps the paths as one block of bytes instead::

    int64 starts[n + 1]   path i is bytes[starts[i] : starts[i + 1] - 1] (a NUL ends each)
    int64 classes[n]      only when the table has class indices
    uint8 bytes[...]      the paths, file-system encoded (``os.fsencode``), NUL-separated

A table is built in the main process (``PathTable.build``). ``share(store)`` copies it once into
a shared-memory block that the caller's ``SharedStore`` owns (the loader's: it unlinks it), and
returns a table that pickles as the block's handle: a worker attaches by name and reads paths
straight from the shared pages with ``struct``, holding no numpy view on them, so its memory does
not grow with the number of paths and its block closes cleanly at exit. This module owns the
layout and the hand-off; which paths and what they mean is ``files.py``'s.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Iterable, Iterator, Sequence, overload

import numpy as np

from ._decode import read_file
from ..errors import ArgumentError
from ..engine._store import ArrayHandle, SharedStore, attach_block

_INT64 = struct.Struct("<q")
_PAIR = struct.Struct("<qq")


class PathTable(Sequence[str]):
    """Read-only sequence of paths (``str``), with an optional int64 class index per path.

    Example:
        >>> table = PathTable.build(["a/0.jpg", "b/1.jpg"], np.array([0, 1]))
        >>> table[1], table.class_of(1), len(table)
        ('b/1.jpg', 1, 2)
    """

    __slots__ = ("_n", "_has_classes", "_buf", "_handle", "_block", "_data")
    NOUN = "file"  # what a sample is, in a reader's messages
    SOURCE = "ImageFiles"  # whose ``load`` reads this table, in a worker error

    def __init__(self, data: np.ndarray, n: int, has_classes: bool,
                 handle: ArrayHandle | None = None) -> None:
        self._n = n  # invariant: number of paths
        self._has_classes = has_classes  # invariant: the block holds classes[n] after starts
        self._data = data  # the block as uint8 (main process), or None in a worker
        self._buf: Any = data.data.cast("B") if data is not None else None
        self._handle = handle  # invariant: set iff the block lives in shared memory
        self._block: Any = None  # in a worker: the attached SharedMemory behind ``_buf``

    # -- building and sharing ---------------------------------------------------------------

    @classmethod
    def build(cls, paths: Iterable[str | os.PathLike[str]], classes: Any = None) -> PathTable:
        """Pack ``paths`` (and ``classes``, one int per path, or None) into one block.

        Raises:
            ArgumentError: a path holds a NUL character (no file system allows one).
        """
        strings = [p if isinstance(p, str) else os.fspath(p) for p in paths]
        n = len(strings)
        encoded = os.fsencode("\0".join(strings) + "\0") if n else b""
        raw = np.frombuffer(encoded, np.uint8)
        ends = np.flatnonzero(raw == 0)
        if len(ends) != n:
            bad = next(s for s in strings if "\0" in s)
            raise ArgumentError(
                f"`paths` holds a path with a NUL character: {bad!r}. Fix: correct the path; "
                f"no file system allows NUL in a name."
            )
        starts = np.empty(n + 1, np.int64)
        starts[0] = 0
        starts[1:] = ends + 1
        parts = [starts.view(np.uint8)]
        if classes is not None:
            parts.append(np.ascontiguousarray(classes, dtype=np.int64).view(np.uint8))
        parts.append(raw)
        return cls(np.concatenate(parts), n, classes is not None)

    def share(self, store: SharedStore) -> PathTable:
        """This table copied into one block of ``store`` (which owns and unlinks it); the
        copy pickles as the block's handle, so workers attach instead of receiving paths."""
        if self._handle is not None:
            return self
        handle, view = store.empty((len(self._data),), np.uint8,
                                   what=f"the table of {self._n:,} image paths")
        view[...] = self._data
        view.flags.writeable = False
        return PathTable(view, self._n, self._has_classes, handle)

    @property
    def shared(self) -> bool:
        return self._handle is not None

    # -- reading ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        i = self._position(index)
        start, stop = _PAIR.unpack_from(self._buf, 8 * i)
        base = self._text_at()
        return os.fsdecode(bytes(self._buf[base + start:base + stop - 1]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        """Every path, decoded at once (faster than one at a time)."""
        if not self._n:
            return []
        base = self._text_at()
        # The text's end from the offsets, not the buffer's: an attached block may be
        # rounded up to a page (macOS, Windows).
        end = _INT64.unpack_from(self._buf, 8 * self._n)[0]
        return os.fsdecode(bytes(self._buf[base:base + end - 1])).split("\0")

    def fetch(self, index: int) -> np.ndarray:
        """The bytes of file ``index`` (what a reader decodes)."""
        return read_file(self[index])

    def what(self, index: int) -> str:
        """How an error names sample ``index``."""
        return f"image file {self[index]!r}"

    def class_of(self, index: int) -> int:
        """The class index of path ``index`` (the table must have classes)."""
        if not self._has_classes:
            raise LookupError("this path table holds no class indices")
        i = self._position(index)
        return int(_INT64.unpack_from(self._buf, 8 * (self._n + 1 + i))[0])

    @property
    def classes(self) -> np.ndarray | None:
        """int64 class index per path (a read-only copy), or None."""
        if not self._has_classes:
            return None
        out = np.frombuffer(self._buf, np.int64, self._n, 8 * (self._n + 1)).copy()
        out.flags.writeable = False
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathTable):
            return self.tolist() == other.tolist()
        if isinstance(other, (list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists and tuples, like them unhashable

    def __repr__(self) -> str:
        first = repr(self[0]) if self._n else "none"
        return f"PathTable({self._n:,} paths, first {first})"

    def _position(self, index: int) -> int:
        i = int(index)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"path index {index} out of range for {self._n} paths")
        return i

    def _text_at(self) -> int:
        return 8 * (self._n + 1 + (self._n if self._has_classes else 0))

    # -- pickling -------------------------------------------------------------------------------

    def __reduce__(self) -> Any:
        if self._handle is not None:  # to a worker: the name of the block, never its bytes
            return (_attached, (self._handle, self._n, self._has_classes))
        return (PathTable, (self._data, self._n, self._has_classes))


def _attached(handle: ArrayHandle, n: int, has_classes: bool) -> PathTable:
    """In a worker: the shared table, mapped by name. Reads go through ``struct`` on the
    block's own buffer (no numpy view), so the block closes cleanly whenever it is collected."""
    table = PathTable(None, n, has_classes)  # type: ignore[arg-type]
    block = attach_block(handle)
    table._block = block
    table._buf = block.buf
    table._handle = handle
    return table

