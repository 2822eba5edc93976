"""``tf.train.Example`` read by hand: the few protobuf wire rules it needs, no TensorFlow.

An Example is ``features { feature { key: "image/encoded" value { bytes_list { value: ... }}}}``:
nested length-delimited fields. ``features(record)`` walks the map once and returns each key's
list message undecoded (its kind and a memoryview, nothing copied), ``bytes_value`` and
``int64_values`` (``bytes_values``, ``float_values``: every value) decode one list. That is
all a worker needs to find an image's bytes in a record, and all the index scan needs to read
a label, or a detection record's boxes (``annotations/tf_od.py``). This module knows the
format only; which record and what an error says about it is ``tfrecord.py``'s.
"""

from __future__ import annotations

import numpy as np

BYTES, FLOATS, INT64S = 1, 2, 3  # Feature's oneof field numbers
KINDS = {BYTES: "bytes_list", FLOATS: "float_list", INT64S: "int64_list"}


class ExampleError(ValueError):
    """The bytes are not a well-formed Example (the caller adds which record)."""


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise ExampleError("a varint runs past its message")


def _fields(buf: memoryview, pos: int, end: int) -> list[tuple[int, int, int, int]]:
    """``(field, wire type, start, stop)`` per field of the message in ``buf[pos:end]``;
    for a varint the value is ``start`` (stop -1), for fixed or length-delimited the span.
    One-byte tags and lengths (nearly all of an Example's) skip ``_varint``: indexing runs
    millions of times."""
    out = []
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if wire == 2:
            if pos >= end:
                raise ExampleError("a field runs past the end of the record")
            size = buf[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _varint(buf, pos, end)
            stop = pos + size
        elif wire == 0:
            value, pos = _varint(buf, pos, end)
            out.append((field, wire, value, -1))
            continue
        elif wire in (1, 5):
            stop = pos + (8 if wire == 1 else 4)
        else:
            raise ExampleError(f"wire type {wire} is not used by an Example")
        if stop > end:
            raise ExampleError("a field runs past the end of the record")
        out.append((field, wire, pos, stop))
        pos = stop
    return out


def features(record: bytes | memoryview) -> dict[str, tuple[int, memoryview]]:
    """Each feature's key -> (kind: BYTES, FLOATS or INT64S, its list message, undecoded).

    Raises:
        ExampleError: the bytes are not an Example.
    """
    buf = memoryview(record)
    out: dict[str, tuple[int, memoryview]] = {}
    for field, wire, start, stop in _fields(buf, 0, len(buf)):
        if field != 1 or wire != 2:
            continue  # Example has one field, `features`
        for entry_field, entry_wire, e_start, e_stop in _fields(buf, start, stop):
            if entry_field != 1 or entry_wire != 2:
                continue  # Features has one field, the map `feature`
            key, value = "", None
            for f, w, s, t in _fields(buf, e_start, e_stop):
                if f == 1 and w == 2:
                    try:
                        key = bytes(buf[s:t]).decode()
                    except UnicodeDecodeError:
                        raise ExampleError("a feature key is not UTF-8 text") from None
                elif f == 2 and w == 2:
                    value = (s, t)
            kind, span = 0, (0, 0)
            if value is not None:  # a Feature: one of its three lists
                for f, w, s, t in _fields(buf, *value):
                    if f in KINDS and w == 2:
                        kind, span = f, (s, t)
            out[key] = (kind, buf[span[0]:span[1]])
    return out


def bytes_value(kind: int, message: memoryview) -> memoryview | None:
    """The first value of a ``bytes_list`` (None when the list is empty or not bytes)."""
    if kind != BYTES:
        return None
    for field, wire, start, stop in _fields(message, 0, len(message)):
        if field == 1 and wire == 2:
            return message[start:stop]
    return None


def int64_values(kind: int, message: memoryview) -> list[int]:
    """The values of an ``int64_list``, packed or not ([] when it is not one)."""
    if kind != INT64S:
        return []
    out = []
    for field, wire, start, stop in _fields(message, 0, len(message)):
        if field != 1:
            continue
        if wire == 0:
            out.append(start)
        elif wire == 2:  # packed
            pos = start
            while pos < stop:
                value, pos = _varint(message, pos, stop)
                out.append(value)
    return [v - (1 << 64) if v >= 1 << 63 else v for v in out]


def bytes_values(kind: int, message: memoryview) -> list[memoryview]:
    """Every value of a ``bytes_list`` ([] when the list is empty or not bytes)."""
    if kind != BYTES:
        return []
    return [message[start:stop] for field, wire, start, stop
            in _fields(message, 0, len(message)) if field == 1 and wire == 2]


def float_values(kind: int, message: memoryview) -> np.ndarray:
    """The values of a ``float_list``, packed or not, as float32 (empty when it is not one):
    both encodings are little-endian float32s, joined and read by numpy in one go."""
    if kind != FLOATS:
        return np.zeros(0, np.float32)
    parts = [message[start:stop] for field, wire, start, stop
             in _fields(message, 0, len(message)) if field == 1 and wire in (2, 5)]
    return np.frombuffer(b"".join(parts), "<f4").astype(np.float32)
