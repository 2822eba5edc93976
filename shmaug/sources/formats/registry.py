"""What a record format is to shmaug, and the one registry of formats.

A format lives in one module, which holds both its halves: the scan, run once in the main
process, that lists each record of a shard as ``(byte offset, length, label)`` (``shards.Scan``;
``records.py`` turns the lists into a ``RecordTable``), and the read, run in a worker, that
turns record i back into its encoded image (the ``RecordFormat`` protocol, below). A table
holds its format's ``name`` (what it pickles), and finds the format here.

Formats: ``tfrecord`` (``tfrecord.py``: a CRC-checked frame holding an Example),
``array_record`` (``array_record.py``: record i through ArrayRecord's own reader) and ``raw``
(below: a record's bytes are the image itself, as a WebDataset tar member, scanned by
``tar.py``, or an Arrow buffer, scanned by ``arrow.py``, are). Adding a format is its
module, one line in ``FORMATS`` and its tests; the table stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from . import array_record as _array_record, tfrecord as _tfrecord
from ..images.decode import unreadable

if TYPE_CHECKING:
    from .table import RecordTable


class RecordFormat(Protocol):
    """How a worker reads one record of a format, given the table that says where it lies."""

    @property
    def name(self) -> str:
        """How a table names the format (pickled with it, so workers find the same one)."""
        ...

    @property
    def frame_bytes(self) -> int:
        """What a record's frame adds to its length in the shard, read with it (a TFRecord's
        header and CRC)."""
        ...

    @property
    def by_bytes(self) -> bool:
        """Whether a table's offset of a record is where it lies in its shard, in bytes (else
        its number there, what the format's own index reads it by: an ArrayRecord's)."""
        ...

    def read(self, table: RecordTable, index: int) -> np.ndarray:
        """The encoded image of record ``index`` (uint8), checked as the format allows.

        Raises:
            ImageReadError: the record cannot be read or holds no image (named by
                ``table.what(index)``).
        """
        ...


@dataclass(frozen=True, slots=True)
class Raw:
    """Records whose bytes are the encoded image itself (a tar member, an Arrow buffer)."""

    name: str = "raw"
    frame_bytes: int = 0
    by_bytes: bool = True

    def read(self, table: RecordTable, index: int) -> np.ndarray:
        shard, _, offset, length = table.locate(index)
        raw = table.bytes_at(index, shard, offset, length)
        if len(raw) != length:
            raise unreadable(table.what(index), "the file is shorter than when it was indexed "
                                                "(it changed); build the ImageRecords again")
        return np.frombuffer(raw, np.uint8)


def _registry(*formats: RecordFormat) -> dict[str, RecordFormat]:
    found: dict[str, RecordFormat] = {}
    for fmt in formats:
        if fmt.name in found:
            raise RuntimeError(f"two record formats are named {fmt.name!r}")
        found[fmt.name] = fmt
    return found


RAW = Raw()
# The registry: adding a format is its module and one entry here.
FORMATS = _registry(_tfrecord.TFRECORD, _array_record.ARRAY_RECORD, RAW)


def named(name: str) -> RecordFormat:
    """The registered format called ``name``.

    Raises:
        ValueError: no format has that name.
    """
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"no record format {name!r}; the formats are {sorted(FORMATS)}") from None
