"""ArrayRecord files of ``tf.train.Example`` (as TFDS and Grain write them): the scan and the read.

ArrayRecord has its own index, so a record's "offset" in the table is its number in its file.
``scan`` runs once in the main process: it opens each file with ``array_record``'s reader,
counts its records and, when labels are asked for, parses each Example for its label
(``tfrecord.label_of``). ``ARRAY_RECORD.read`` runs in a worker: it reads record i through a
reader of its own (``RecordTable.opened`` keeps one per shard and process; readers are never
shared) and takes the image from the Example (``tfrecord.example_image``). This module knows
the format (the ``registry.RecordFormat`` named "array_record"); the table knows where.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..images.decode import unreadable
from .tfrecord import example_image, features_with_image, label_of
from ...errors import ArgumentError, ImageReadError

if TYPE_CHECKING:
    from .table import RecordTable


def _open(path: str) -> Any:
    from array_record.python.array_record_module import ArrayRecordReader

    return ArrayRecordReader(path, "readahead_buffer_size:0")


@dataclass(frozen=True, slots=True)
class ArrayRecord:
    """The ``registry.RecordFormat`` of ArrayRecord files of Examples: a worker reads record
    i through its own reader of the shard and takes the table's image feature."""

    name: str = "array_record"
    frame_bytes: int = 0
    by_bytes: bool = False  # the table's offset is the record's number

    def read(self, table: RecordTable, index: int) -> np.ndarray:
        shard, _, offset, _ = table.locate(index)  # the offset is the record's number
        try:
            raw = table.opened(shard, _open).read([offset])[0]
        except Exception as exc:  # the C++ reader raises plain RuntimeError / ValueError
            raise unreadable(table.what(index), f"ArrayRecord: {exc}") from None
        return example_image(raw, table.what(index), table.key)


ARRAY_RECORD = ArrayRecord()


def scan(path: str, image_key: str, label_key: str | None
         ) -> tuple[list[int], list[int], list[Any]]:
    """Every record of one ArrayRecord file of Examples: ``(record numbers, zeros, labels)``
    (its own index gives random access; labels are read when ``label_key`` is set).

    Raises:
        ArgumentError: not an ArrayRecord file; a record without ``image_key`` or ``label_key``.
    """
    reader = None
    try:
        reader = _open(path)
        if not reader.ok():  # it says why only when closed
            failed, reader = reader, None
            failed.close()
            raise RuntimeError("the reader is not ok")
        n = reader.num_records()
        labels: list[Any] = []
        # (without labels, the first record's features: a wrong `image_key`)
        read = n if label_key is not None else min(n, 1)
        for start in range(0, read, 1024):
            batch = reader.read(list(range(start, min(read, start + 1024))))
            for k, data in enumerate(batch):
                where = f"record {start + k} of {path!r}"
                found = features_with_image(data, where, image_key)
                if label_key is not None:
                    labels.append(label_of(found, where, label_key))
    except (RuntimeError, ValueError, OSError) as exc:  # what the C++ reader raises
        if isinstance(exc, (ArgumentError, ImageReadError)):
            raise
        raise ArgumentError(
            f"`files`: cannot read {path!r} as an ArrayRecord file ({exc}). Fix: pass "
            f"ArrayRecord files (as TFDS and Grain write them), or leave it out."
        ) from None
    finally:
        if reader is not None:
            with contextlib.suppress(RuntimeError):  # a reader that failed fails to close too
                reader.close()
    return list(range(n)), [0] * n, labels
