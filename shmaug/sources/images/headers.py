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

__all__ = ["stored_dims"]


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
            return _tiff(data.tobytes())
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


def _tiff(raw: bytes) -> tuple[int, int] | None:
    """A TIFF's first image: ImageWidth (256) and ImageLength (257) of its first directory."""
    order = "<" if raw[:2] == b"II" else ">"
    big = struct.unpack_from(order + "H", raw, 2)[0] == 43
    offset, count_of, entry = ("Q", "Q", 20) if big else ("I", "H", 12)
    (start,) = struct.unpack_from(order + offset, raw, 8 if big else 4)
    (count,) = struct.unpack_from(order + count_of, raw, start)
    first, sizes = start + (8 if big else 2), {}
    for k in range(min(count, 4096)):
        at = first + entry * k
        tag, kind = struct.unpack_from(order + "HH", raw, at)
        unit = {3: "H", 4: "I", 16: "Q"}.get(kind)
        if tag in (256, 257) and unit is not None:
            sizes[tag] = struct.unpack_from(order + unit, raw, at + (12 if big else 8))[0]
    return (sizes[257], sizes[256]) if len(sizes) == 2 else None
