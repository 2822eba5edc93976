"""The path table of an image source: millions of paths (and class indices) in one flat block.

A Python tuple of paths costs about 100 bytes of objects per path, and a forked worker copies
the pages of every string it touches (reading a string writes its reference count), while a
spawned worker receives the whole tuple by pickle. At ImageNet's 1.28 million files that is a
few hundred MiB per worker. ``PathTable`` keeps the paths as one block of bytes instead::

    int64 starts[n + 1]   path i is bytes[starts[i] : starts[i + 1] - 1] (a NUL ends each)
    int64 classes[n]      only when the table has class indices
    uint8 bytes[...]      the paths, file-system encoded (``os.fsencode``), NUL-separated

A table is built in the main process (``PathTable.build``); ``share(store)`` hands it to the
workers by name, as every flat table of shmaug's (``memory/table.py``), so a worker's memory does
not grow with the number of paths. This module owns the layout; which paths and what they mean
is ``files.py``'s.
"""

from __future__ import annotations

import os
import struct
from typing import Any, Iterable, Iterator, Sequence, overload

import numpy as np

from .decode import read_file
from ...errors import ArgumentError
from ...memory.table import FlatTable

_INT64 = struct.Struct("<q")
_PAIR = struct.Struct("<qq")


class PathTable(FlatTable, Sequence[str]):
    """Read-only sequence of paths (``str``), with an optional int64 class index per path.

    Example:
        >>> table = PathTable.build(["a/0.jpg", "b/1.jpg"], np.array([0, 1]))
        >>> table[1], table.class_of(1), len(table)
        ('b/1.jpg', 1, 2)
    """

    __slots__ = ()
    ROW = "path"
    NOUN = "file"  # what a sample is, in a reader's messages
    SOURCE = "ImageFiles"  # whose ``load`` reads this table, in a worker error

    def _classes_at(self) -> int:
        return 8 * (self._n + 1)

    def _blocks_are(self) -> tuple[str, ...]:
        return (f"the table of {self._n:,} image paths",)

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
        return cls((np.concatenate(parts),), n, classes is not None)

    # -- reading ------------------------------------------------------------------------------

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._n))]
        buf = self._bufs[0]
        start, stop = _PAIR.unpack_from(buf, 8 * self._position(index))
        base = self._text_at()
        return os.fsdecode(bytes(buf[base + start:base + stop - 1]))

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        """Every path, decoded at once (faster than one at a time)."""
        if not self._n:
            return []
        buf, base = self._bufs[0], self._text_at()
        # The text's end from the offsets, not the buffer's: an attached block may be
        # rounded up to a page (macOS, Windows).
        end = _INT64.unpack_from(buf, 8 * self._n)[0]
        return os.fsdecode(bytes(buf[base:base + end - 1])).split("\0")

    def fetch(self, index: int) -> np.ndarray:
        """The bytes of file ``index`` (what a reader decodes)."""
        return read_file(self[index])

    def what(self, index: int) -> str:
        """How an error names sample ``index``."""
        return f"image file {self[index]!r}"

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

    def _text_at(self) -> int:
        return 8 * (self._n + 1 + (self._n if self._has_classes else 0))
