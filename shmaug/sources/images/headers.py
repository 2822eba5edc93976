"""An image file's stored size from its header, read before it is decoded.

Why: a file of a kilobyte can claim 30000x30000 pixels (a run-length BMP, a lossless WebP, a
deflated TIFF or GIF), which the decoder allocates whole, gigabytes in every worker that
meets it; its header says so in a few bytes, so ``decode.refuse_bomb`` refuses it first.
PNG, BMP, GIF, WebP and TIFF (its first image, the one decoded) are read here, JPEG by
``decode.jpeg_header``; any other format is left to its decoder's own limit.
"""

from __future__ import annotations

import struct

import numpy as np

__all__ = ["stored_dims", "tiff_fields"]


def stored_dims(data: np.ndarray) -> tuple[int, int] | None:
    """``(height, width)`` the header of the encoded image ``data`` gives, or None: another
    format, or a header that does not parse (its decoder then says why)."""
    head = data[:32].tobytes()
    try:
        if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
            width, height = struct.unpack(">II", head[16:24])
            return height, width
        if head[:2] == b"BM":
            if struct.unpack("<I", head[14:18])[0] == 12:  # BITMAPCOREHEADER: 16-bit sizes
                width, height = struct.unpack("<HH", head[18:22])
            else:  # BITMAPINFOHEADER and later: signed 32-bit, height < 0 top-down
                width, height = struct.unpack("<ii", head[18:26])
            return abs(height), abs(width)
        if head[:6] in (b"GIF87a", b"GIF89a"):  # the logical screen
            width, height = struct.unpack("<HH", head[6:10])
            return height, width
        if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            return _webp(head)
        if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
            return _tiff(data)
    except struct.error:  # (cut short: its decoder says so)
        return None
    return None


def _webp(head: bytes) -> tuple[int, int] | None:
    """A WebP's canvas: VP8X's (24-bit, minus one), VP8L's (14-bit), or VP8's frame."""
    chunk = head[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(head[24:27], "little")
        height = 1 + int.from_bytes(head[27:30], "little")
        return height, width
    if chunk == b"VP8L":
        bits = int.from_bytes(head[21:25], "little")
        return 1 + (bits >> 14 & 0x3FFF), 1 + (bits & 0x3FFF)
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", head[26:30])
        return height & 0x3FFF, width & 0x3FFF
    return None


def _tiff(data: np.ndarray) -> tuple[int, int] | None:
    """A TIFF's first image: its ImageLength (257) and ImageWidth (256)."""
    fields = tiff_fields(data, (256, 257))
    return None if fields is None or len(fields) < 2 else (fields[257], fields[256])


def tiff_fields(data: np.ndarray, tags: tuple[int, ...]) -> dict[int, int] | None:
    """The first value of each of ``tags`` in a TIFF's (or BigTIFF's) first directory, read
    in place (no copy of the file); None: no TIFF, or a directory cut short."""
    order = {b"II": "<", b"MM": ">"}.get(data[:2].tobytes())
    if order is None:
        return None
    buf = data.data.cast("B")  # (the file's bytes as they lie)
    try:
        (magic,) = struct.unpack_from(order + "H", buf, 2)
        if magic not in (42, 43):  # TIFF, BigTIFF
            return None
        big = magic == 43  # 8-byte offsets and counts, 20-byte entries
        offset, count_of, entry = ("Q", "Q", 20) if big else ("I", "H", 12)
        (start,) = struct.unpack_from(order + offset, buf, 8 if big else 4)
        (count,) = struct.unpack_from(order + count_of, buf, start)
        first, fields = start + (8 if big else 2), {}
        for k in range(count):  # tag, type, count, value or its offset
            at = first + entry * k
            tag, kind = struct.unpack_from(order + "HH", buf, at)
            (n,) = struct.unpack_from(order + offset, buf, at + 4)
            unit = {3: "H", 4: "I", 16: "Q"}.get(kind)
            if tag not in tags or unit is None:
                continue
            value_at = at + (12 if big else 8)
            if n * struct.calcsize(unit) > (8 if big else 4):  # held elsewhere: its offset
                (value_at,) = struct.unpack_from(order + offset, buf, value_at)
            fields[tag] = struct.unpack_from(order + unit, buf, value_at)[0]
    except struct.error:
        return None
    return fields
