"""TFRecord files without TensorFlow: the framing, its CRCs, and the index scan.

A TFRecord file is a run of frames::

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

(little-endian; "masked" rotates the CRC-32C and adds a constant, as TensorFlow's
``crc32c::Mask``). ``scan`` walks one file once in the main process: it reads every header,
checks its CRC, and when labels are asked for reads the record and parses its Example
(``example.py``) for the label (or, given a ``FeatureRead`` instead of a label key, for what
it reads: a detection record's boxes, ``annotations/tf_od.py``); otherwise it seeks over the
data. It returns each record's
byte offset and length, which ``table.RecordTable`` keeps in shared memory. ``TFRECORD.read``
runs in a worker on one frame read at that offset (``image_of``): checks both CRCs, parses the
Example, returns the image's encoded bytes. GZIP files cannot be read at an offset, so
``indexer`` decompresses them once into memory (``inflate``). ArrayRecord files of Examples
(``array_record.py``) share the Example side (``label_of``, ``example_image``). This module
knows the format (the ``registry.RecordFormat`` named "tfrecord"); the table knows where.
"""

from __future__ import annotations

import io
import os
import struct
import warnings
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

import numpy as np

from . import example as E
from ..images.decode import unreadable
from .shards import Scan, Shards, cached
from ...errors import ArgumentError, ImageReadError

if TYPE_CHECKING:
    from .table import RecordTable


Features = dict[str, tuple[int, memoryview]]  # ``example.features``: key -> (kind, list)
FeatureRead = Callable[[Features, str], Any]
"""What the index scan reads of a record besides its place, given its features and how an
error names the record: ``label_key`` as a callable (a label is a key; a record's boxes take
several). Its values are not kept in an ``index_cache``."""

HEADER = struct.Struct("<QI")  # length, masked CRC of the length
FOOTER = 4  # masked CRC of the data
_MASK_DELTA = 0xA282EAD8


def _crc32c_python() -> Callable[[bytes | memoryview], int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)

    def crc(data: bytes | memoryview) -> int:
        c = 0xFFFFFFFF
        for byte in bytes(data):
            c = table[(c ^ byte) & 0xFF] ^ (c >> 8)
        return c ^ 0xFFFFFFFF

    return crc


def _crc32c() -> tuple[Callable[[bytes | memoryview], int], str]:
    """CRC-32C, and why it is the slow one ("" when it is not).

    google-crc32c's C code is a base dependency (issue 36: as an extra, a user who missed it
    read TFRecords 9x slower, told by one warning). The pure-Python table stays as the
    fallback for an install without it or without its C extension: correct, about 1,000
    times slower (a few ms per image); ``ImageRecords.from_tfrecord`` then warns, and
    ``SLOW_CRC_FIX`` says why and how to fix it.
    """
    with warnings.catch_warnings():
        # google-crc32c warns at import when its C extension is missing; importing shmaug
        # must stay silent, and the fix below is said where TFRecords are read.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            import google_crc32c
        except ImportError:
            return _crc32c_python(), (
                "google-crc32c is not installed (an install with --no-deps leaves it out). "
                "Fix: pip install google-crc32c."
            )
    if getattr(google_crc32c, "implementation", "c") != "c":
        return _crc32c_python(), (
            "google-crc32c is installed without its C extension (built from source without "
            "the crc32c C library). Fix: install its wheel (Linux glibc, macOS and Windows "
            "have one): pip install --force-reinstall --only-binary=:all: google-crc32c; "
            "elsewhere build it against the crc32c library (see google-crc32c's README)."
        )
    value: Callable[[bytes], int] = google_crc32c.value

    def crc(data: bytes | memoryview) -> int:
        return value(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only

    return crc, ""


crc32c, SLOW_CRC_FIX = _crc32c()
SLOW_CRC = bool(SLOW_CRC_FIX)  # the pure-Python fallback is in use; SLOW_CRC_FIX says why


def masked_crc(data: bytes | memoryview) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def is_gzip(head: bytes) -> bool:
    """Whether a file whose first bytes are ``head`` (``HEADER.size`` of them) is a GZIP
    stream rather than plain TFRecord frames: it starts with the GZIP magic *and* its first
    12 bytes are not a frame header with a good CRC."""
    if head[:2] != b"\x1f\x8b":
        return False
    return len(head) < HEADER.size or masked_crc(head[:8]) != HEADER.unpack(head)[1]


_MOST_INFLATED = 250  # times its size a GZIP TFRecord may decompress to (images: about 1)


def inflate(data: bytes, path: str) -> bytes:
    """A GZIP TFRecord file (``data``, read from ``path``) decompressed whole (it cannot be
    read at an offset), member by member, refused past ``_MOST_INFLATED`` times its size: a
    file of 2 MiB of zeros decompressed to 2 GiB, 4 GiB of memory, before any check."""
    most = max(len(data) * _MOST_INFLATED, 1 << 20)
    parts: list[bytes] = []
    rest, made = data.lstrip(b"\0"), 0
    try:
        while rest:  # gzip's members, one after another
            member = zlib.decompressobj(wbits=31)
            part = member.decompress(rest, most - made + 1)
            made += len(part)
            if made > most:
                raise ImageReadError(
                    f"Cannot use the GZIP TFRecord file {path!r}: it decompresses to more "
                    f"than {_MOST_INFLATED} times its {len(data):,} bytes, as no file of "
                    f"images does (a decompression bomb, or one of zeros). Fix: rewrite it "
                    f"uncompressed, or leave it out of `files`.")
            if not member.eof:
                raise EOFError("it ends before its end-of-stream marker")
            parts.append(part)
            rest = member.unused_data.lstrip(b"\0")  # (zeros may pad between members too)
    except (EOFError, zlib.error) as exc:
        raise ImageReadError(
            f"Cannot decompress the GZIP TFRecord file {path!r}: {exc}. Fix: rewrite the file "
            f"(it is cut short or corrupt), or leave it out of `files`."
        ) from None
    return b"".join(parts)


def scan(f: BinaryIO, size: int, path: str, image_key: str,
         label_key: str | FeatureRead | None) -> tuple[list[int], list[int], list[Any]]:
    """Every frame of one TFRecord file (``f``, ``size`` bytes; ``path`` names it):
    ``(offsets, lengths, labels)``, labels an int or str per record (what ``label_key``
    reads, when it is a ``FeatureRead``; empty without a ``label_key``).

    Raises:
        ImageReadError: a frame cut short, a header or record CRC that does not match.
        ArgumentError: a record without ``image_key`` or ``label_key``.
    """
    offsets: list[int] = []
    lengths: list[int] = []
    labels: list[Any] = []
    offset = 0
    while offset < size:
        head = f.read(HEADER.size)
        record = len(offsets)
        where = f"record {record} of {path!r} (byte offset {offset})"
        if len(head) < HEADER.size:
            raise _cut(where, f"its header has {len(head)} of {HEADER.size} bytes")
        length, crc = HEADER.unpack(head)
        if masked_crc(head[:8]) != crc:
            raise ImageReadError(
                f"Cannot index {where}: the CRC of its length does not match, so this is not "
                f"a TFRecord file or it is corrupt from here on. Fix: rewrite the file, or "
                f"leave it out (GZIP files are read whole: check `compression_type`)."
            )
        end = offset + HEADER.size + length + FOOTER
        if end > size:
            raise _cut(where, f"it needs {length + FOOTER} bytes after its header, the file "
                              f"has {size - offset - HEADER.size}")
        if label_key is None and offsets:
            f.seek(length + FOOTER, io.SEEK_CUR)
        else:  # (without labels, the first record's features: a wrong `image_key`)
            body = f.read(length + FOOTER)
            found = features_with_image(body[:length], where, image_key)
            if label_key is not None:
                labels.append(label_of(found, where, label_key))
        offsets.append(offset)
        lengths.append(length)
        offset = end
    return offsets, lengths, labels


def _cut(where: str, detail: str) -> ImageReadError:
    return ImageReadError(
        f"Cannot index {where}: the record is cut short ({detail}). Fix: rewrite the file "
        f"(it was not closed, or copied in part), or leave it out of `files`."
    )


def features_with_image(data: bytes, where: str, image_key: str) -> Features:
    """The features of one serialized Example, which holds ``image_key``.

    Raises:
        ImageReadError: not an Example. ArgumentError: no ``image_key``.
    """
    try:
        found = E.features(data)
    except E.ExampleError as exc:
        raise ImageReadError(
            f"Cannot index {where}: it is not a tf.train.Example ({exc}). Fix: rewrite the "
            f"file with tf.io.TFRecordWriter and Example.SerializeToString()."
        ) from None
    if image_key not in found:
        raise missing(f"`image_key`={image_key!r}", where, found,
                      "pass `image_key=` one of them.")
    return found


def label_of(found: Features, where: str, label_key: str | FeatureRead) -> Any:
    """The label in the features of one Example (``features_with_image``'s): an int or a
    class name; or what ``label_key`` reads of them, when it is a ``FeatureRead``.

    Raises:
        ArgumentError: no ``label_key``, or not one int or bytes value.
    """
    if not isinstance(label_key, str):
        return label_key(found, where)
    if label_key not in found:
        raise missing(f"`label_key`={label_key!r}", where, found, "pass `label_key=` one of "
                      "them, or `label_key=None` for no labels.")
    kind, message = found[label_key]
    ints = E.int64_values(kind, message)
    if len(ints) == 1:
        return ints[0]
    text = E.bytes_value(kind, message)
    if text is not None:
        return bytes(text).decode("utf-8", "replace")
    raise ArgumentError(
        f"`label_key`={label_key!r} in {where} holds a {E.KINDS.get(kind, 'empty list')} "
        f"of {len(ints) or 'no'} value(s); a label is one int64 (class index) or one bytes "
        f"value (class name). Fix: pass `label_key=` the feature that holds the class."
    )


def missing(feature: str, where: str, found: Features, fix: str) -> ArgumentError:
    """The error for a record (``where``) without the ``feature`` asked for (as the message
    names it: "`label_key`='label'"): its features listed, then ``fix``."""
    return ArgumentError(f"{feature} is not a feature of {where}; its features are "
                         f"{sorted(found)}. Fix: {fix}")


def image_of(frame: bytes, what: str, image_key: str) -> np.ndarray:
    """The encoded image in one frame read at its offset (header + data + CRC), checked.

    Raises:
        ImageReadError: short read, a CRC that does not match, no ``image_key``.
    """
    length = len(frame) - HEADER.size - FOOTER
    if length < 0 or HEADER.unpack_from(frame)[0] != length:
        raise unreadable(what, "the file is shorter than when it was indexed (it changed); "
                               "build the ImageRecords again")
    view = memoryview(frame)
    data = view[HEADER.size:HEADER.size + length]
    (expected,) = struct.unpack_from("<I", frame, HEADER.size + length)
    if masked_crc(view[:8]) != HEADER.unpack_from(frame)[1] or masked_crc(data) != expected:
        raise unreadable(what, "its CRC does not match: the record is corrupt")
    return example_image(data, what, image_key)


def example_image(data: bytes | memoryview, what: str, image_key: str) -> np.ndarray:
    """The encoded image in one serialized Example (a TFRecord's or an ArrayRecord's).

    Raises:
        ImageReadError: not an Example, or no bytes feature ``image_key``.
    """
    try:
        kind, message = E.features(data).get(image_key, (0, None))
    except E.ExampleError as exc:
        raise unreadable(what, f"it is not a tf.train.Example ({exc})") from None
    image = None if message is None else E.bytes_value(kind, message)
    if image is None:
        raise unreadable(what, f"it has no bytes feature {image_key!r} (`image_key`); its "
                               f"features are {sorted(E.features(data))}")
    return np.frombuffer(image, np.uint8)


@dataclass(frozen=True, slots=True)
class TFRecord:
    """The ``registry.RecordFormat`` of TFRecord frames holding an Example: a worker reads
    the whole frame, checks both CRCs and takes the table's image feature (``table.key``)."""

    name: str = "tfrecord"
    frame_bytes: int = HEADER.size + FOOTER
    by_bytes: bool = True

    def read(self, table: RecordTable, index: int) -> np.ndarray:
        shard, _, offset, length = table.locate(index)
        raw = table.bytes_at(index, shard, offset, length + self.frame_bytes)
        return image_of(raw, table.what(index), table.key)


TFRECORD = TFRecord()
Memory = Callable[[], tuple[Any, "tuple[int, ...] | None"]]


def indexer(found: Shards, image_key: str, label_key: str | FeatureRead | None,
            compression_type: str | None, index_cache: str | None) -> tuple[Scan, Memory]:
    """The scan of ``found``'s TFRecord files, and what it held in memory once it has run:
    ``(decompressed GZIP files as one uint8 array or None, per shard its start there or -1)``.
    Plain files are scanned where they lie (their index kept in ``index_cache``, None: not
    kept); GZIP files (``compression_type`` "GZIP", or None and their first bytes say so)
    are decompressed whole, since they cannot be read at an offset."""
    blobs: list[bytes] = []
    bases: list[int] = []

    def plain(path: str) -> tuple[list[int], list[int], list[Any]]:
        with found.opened(path) as (f, size):
            return scan(f, size, path, image_key, label_key)

    if callable(label_key):
        index_cache = None  # what a FeatureRead returns need not fit an .npz of labels
    reused = cached(plain, index_cache, f"tfrecord|{image_key}|{label_key}", found)

    def scan_one(path: str) -> tuple[list[int], list[int], list[Any]]:
        gz = (is_gzip(found.head(path, HEADER.size)) if compression_type is None
              else compression_type == "GZIP")
        if not gz:
            bases.append(-1)
            return reused(path)
        data = inflate(found.whole(path), path)
        bases.append(sum(len(b) for b in blobs))
        blobs.append(data)
        return scan(io.BytesIO(data), len(data), path, image_key, label_key)

    def memory() -> tuple[Any, tuple[int, ...] | None]:
        return np.frombuffer(b"".join(blobs), np.uint8) if blobs else None, tuple(bases)

    return scan_one, memory


def scan_file(path: str, image_key: str, label_key: str | FeatureRead | None
              ) -> tuple[list[int], list[int], list[Any]]:
    """``scan`` of one local, plain TFRecord file."""
    with open(path, "rb") as f:
        return scan(f, os.fstat(f.fileno()).st_size, path, image_key, label_key)
