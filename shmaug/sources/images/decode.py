"""Decoding one image file in a worker: bytes -> uint8 (H, W, C) in the requested colour mode.

OpenCV first (its wheels decode JPEG with libjpeg-turbo), PIL for what OpenCV cannot read;
then channel conversion to RGB order and resizing. ``files.ImageFiles`` decides which file and
what to do when one is unreadable; this module only turns one file into pixels, or says why not.

Reduced-size decoding: when a JPEG is at least twice as large as the size it is resized to,
libjpeg can decode it at 1/2, 1/4 or 1/8 of its size directly (it scales the DCT blocks, so the
skipped pixels are never computed; OpenCV exposes this as ``IMREAD_REDUCED_*``, PIL as
``Image.draft``). ``decode(..., reduce_to=size)`` takes the largest of those factors that still
leaves the image at least ``size``, then the caller resizes as usual. Only baseline and
progressive 8-bit JPEGs with 1 or 3 components are decoded this way (identified by their
bytes, not their extension); every other file, PNG included, is decoded in full as before.
The output differs from a full decode + resize by the difference between libjpeg's block
scaling and the resize filter: see ``REDUCED_TOLERANCE``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from . import turbo
from ...deferred import Resample, Window, margin, resize_box
from ...errors import ImageReadError

COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}  # None: keep the files' own channels

_PIL_MODES = {"L": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA", "I;16": "I;16"}

# What a reduced-size decode may differ by, as the mean absolute difference per channel value
# (of 0..255), from a full decode resized to the same size. "area": with interpolation="area",
# from a full decode + area resize (libjpeg's scaling is an area average too; measured 0.1-1.8
# on photo-like JPEGs). "same interpolation": from a full decode + the same interpolation
# (measured up to 9 with "nearest" on grainy photos): shrinking more than 2x, those filters skip
# pixels and alias, while libjpeg averages them, so the reduced output is also never further from
# the alias-free (area) image than the full decode + the same resize is. bench.files prints
# the figures on its folders; tests/unit/test_decode.py holds the decoder to them.
REDUCED_TOLERANCE = {"area": 2.0, "same interpolation": 10.0}

# Start-of-frame markers libjpeg scales: baseline, extended, progressive (Huffman or
# arithmetic). Lossless and hierarchical JPEGs are decoded in full.
_SCALABLE_SOF = frozenset((0xC0, 0xC1, 0xC2, 0xC9, 0xCA))
_NO_LENGTH = frozenset((0x01, *range(0xD0, 0xD9)))  # TEM, RSTn, SOI: markers without a length


def decode(path: str, color_mode: str | None,
           reduce_to: tuple[int, int] | None = None) -> np.ndarray:
    """uint8 (H, W, C) in RGB(A) order, converted to ``color_mode``'s channel count.

    Reads the bytes with numpy (unicode paths work everywhere), then ``decode_bytes``. With
    ``reduce_to=(height, width)``, a JPEG at least twice that size is decoded at a reduced
    size no smaller than it (see the module docstring).
    """
    return decode_bytes(read_file(path), f"image file {path!r}", color_mode, reduce_to)


def read_file(path: str) -> np.ndarray:
    """The bytes of image file ``path`` (uint8), or ``ImageReadError`` saying why not."""
    try:
        data = np.fromfile(path, np.uint8)
    except OSError as exc:
        reason = ("no such file" if isinstance(exc, FileNotFoundError)
                  else (exc.strerror or str(exc)))
        raise unreadable(f"image file {path!r}", reason) from None
    return data


def stored_size(path: str | os.PathLike[str]) -> tuple[int, int]:
    """An image file's (height, width) as stored, from its header (PIL reads no pixels).

    Raises:
        OSError: the file is missing or PIL cannot read it.
    """
    with open(path, "rb") as f:
        found = _png_or_jpeg_size(f)
    if found is not None:
        return found
    from PIL import Image

    with Image.open(path) as image:
        width, height = image.size
    return height, width


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _png_or_jpeg_size(f: Any) -> tuple[int, int] | None:
    """(height, width) of a PNG (its IHDR) or a JPEG (its frame header, past the segments
    before it), read with a few small reads: PIL's open costs ~10x more, which a check of
    every image of a large set pays per image. None: another format, or one that does not
    parse so (PIL reads it then)."""
    head = f.read(24)
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        width, height = struct.unpack(">II", head[16:24])
        return height, width
    if head[:2] != b"\xff\xd8":
        return None
    f.seek(2)
    while True:
        marker = f.read(4)
        if len(marker) < 4 or marker[0] != 0xFF:
            return None
        kind, length = marker[1], struct.unpack(">H", marker[2:])[0]
        if kind in _SOF:
            frame = f.read(5)
            if len(frame) < 5:
                return None
            height, width = struct.unpack(">HH", frame[1:])
            return (height, width) if height and width else None
        if kind == 0xFF or length < 2:
            return None
        f.seek(length - 2, 1)


def decode_bytes(data: np.ndarray, what: str, color_mode: str | None,
                 reduce_to: tuple[int, int] | None = None) -> np.ndarray:
    """Encoded image bytes (uint8) to uint8 (H, W, C) in RGB(A) order, as ``decode``;
    ``what`` names them in errors (``"image file 'a.jpg'"``, a record of a shard).

    Decodes with OpenCV (whose wheels use libjpeg-turbo), and falls back to PIL for what
    OpenCV cannot read.
    """
    import cv2

    if data.size == 0:
        raise unreadable(what, "it is empty (0 bytes)")
    image = None if reduce_to is None else _decode_reduced(data, reduce_to)
    if image is None:
        image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)  # BGR(A); we convert channels ourselves
    if image is None:
        image = _decode_pil(what, data)
    if image.dtype == np.uint16:
        image = (image // 257).astype(np.uint8)  # 65535 -> 255, as PIL and TF do
    elif image.dtype != np.uint8:
        raise ImageReadError(
            f"Cannot use {what}: its pixels are {image.dtype}, not 8 or 16 bit. "
            f"Fix: convert it to 8-bit PNG or JPEG."
        )
    if image.ndim == 2:
        image = image[:, :, None]
    return _convert(image, COLOR_MODES[color_mode] if color_mode else None)


WINDOW_DECODES = ("turbo", "opencv", "whole")


def window_decode() -> str:
    """How this process would decode a JPEG's window, decided once by a loader for all its
    workers: "turbo" (the window alone, libjpeg-turbo 3 found), "opencv" (whole, at a
    reduced scale where the window allows), or "whole" (every pixel, then cut:
    ``SHMAUG_PARTIAL_DECODE=0``, the reference recipes' work, to compare)."""
    if os.environ.get("SHMAUG_PARTIAL_DECODE", "").strip().lower() in ("0", "off", "false"):
        return "whole"
    return "turbo" if turbo.available() else "opencv"


def resized_window(data: np.ndarray, what: str, color_mode: str | None,
                   header: tuple[int, int, int, int] | None, window: Window,
                   size: tuple[int, int], how: Resample, mode: str = "opencv",
                   reduced: bool = True) -> np.ndarray:
    """``window`` (top, left, height, width in the file's pixels) of the encoded image
    resampled to ``size``: as ``resize_box(..., how)`` on the whole decoded image, decoding
    less (around the window too where the filter reads there: ``how.within`` False).

    ``mode`` as ``window_decode`` says. A JPEG is decoded at 1/2, 1/4 or 1/8 scale in the DCT
    where the window stays at least ``size`` and ``reduced`` allows (``reduced_decode``);
    "turbo" decodes only the window; a JPEG libjpeg-turbo refuses (lossless, CMYK, 12-bit),
    and every other file, is decoded whole.
    """
    scalable = (header is not None and header[3] in _SCALABLE_SOF and header[2] in (1, 3)
                and mode != "whole")
    if not scalable:
        return resize_box(decode_bytes(data, what, color_mode), window, size, how)
    assert header is not None
    d = next((n for n in (8, 4, 2) if window[2] / n >= size[0] and window[3] / n >= size[1]),
             1) if reduced else 1
    scaled = (window[0] / d, window[1] / d, window[2] / d, window[3] / d)
    if mode == "turbo":
        if not turbo.available():
            raise RuntimeError(
                "This loader decodes JPEG windows with libjpeg-turbo, found in its own "
                "process, but this worker cannot load it (see the log for why), so its "
                "batches would not be the ones the other workers make. Fix: make the library "
                "loadable everywhere (pip install shmaug[jpeg]), or set "
                "SHMAUG_TURBOJPEG=off before the loader starts.")
        reach = margin(scaled, size, how) * d  # read beyond the window, in file pixels
        top, left = max(0, int(window[0]) - reach), max(0, int(window[1]) - reach)
        bottom = min(header[0], int(np.ceil(window[0] + window[2])) + reach)
        right = min(header[1], int(np.ceil(window[1] + window[3])) + reach)
        channels = COLOR_MODES[color_mode] if color_mode else header[2]
        try:
            pixels, (y0, x0) = turbo.decode_window(
                data, (top, left, bottom - top, right - left), d, channels)
        except turbo.TurboError:
            pass  # (lossless, CMYK, 12-bit: the whole decode below copes or says why)
        else:
            return resize_box(pixels, (scaled[0] - y0, scaled[1] - x0, scaled[2], scaled[3]),
                              size, how)
    pixels = decode_bytes(data, what, color_mode,
                          None if d == 1 else (-(-header[0] // d), -(-header[1] // d)))
    if pixels.shape[:2] == header[:2]:  # decoded at full size after all (PIL's fallback)
        scaled = window
    return resize_box(pixels, scaled, size, how)


def jpeg_header(data: np.ndarray) -> tuple[int, int, int, int] | None:
    """``(height, width, components, marker)`` from a JPEG's start-of-frame segment, or None
    when ``data`` is not a JPEG (or its header is cut short)."""
    buf = data.data.cast("B")
    n = len(buf)
    if n < 4 or buf[0] != 0xFF or buf[1] != 0xD8:
        return None
    i = 2
    while i + 4 <= n:
        if buf[i] != 0xFF:
            return None
        marker = buf[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _NO_LENGTH:
            i += 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # SOFn
            if i + 10 > n:
                return None
            height = buf[i + 5] << 8 | buf[i + 6]
            width = buf[i + 7] << 8 | buf[i + 8]
            return height, width, buf[i + 9], marker if buf[i + 4] == 8 else -1
        if marker in (0xDA, 0xD9):  # scan or end before any frame header
            return None
        i += 2 + (buf[i + 2] << 8 | buf[i + 3])
    return None


def reduction(header: tuple[int, int, int, int] | None, size: tuple[int, int]) -> int:
    """The largest of 8, 4, 2 by which a JPEG with ``header`` can be decoded and still be at
    least ``size`` (libjpeg rounds the scaled size up), or 1: decode it in full."""
    if header is None:
        return 1
    height, width, components, marker = header
    if marker not in _SCALABLE_SOF or components not in (1, 3) or not height or not width:
        return 1
    for denominator in (8, 4, 2):
        if -(-height // denominator) >= size[0] and -(-width // denominator) >= size[1]:
            return denominator
    return 1


def _decode_reduced(data: np.ndarray, size: tuple[int, int]) -> np.ndarray | None:
    """A JPEG decoded at 1/2, 1/4 or 1/8 scale (BGR or grey, as the full path gives), or None
    where the full decode applies. EXIF orientation is ignored, as ``IMREAD_UNCHANGED`` does."""
    import cv2

    header = jpeg_header(data)
    denominator = reduction(header, size)
    if denominator == 1:
        return None
    assert header is not None
    kind = "GRAYSCALE" if header[2] == 1 else "COLOR"
    flag = getattr(cv2, f"IMREAD_REDUCED_{kind}_{denominator}") | cv2.IMREAD_IGNORE_ORIENTATION
    image: np.ndarray | None = cv2.imdecode(data, flag)
    return image


def _decode_pil(what: str, data: np.ndarray) -> np.ndarray:
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data.tobytes())) as im:
            im.seek(0)  # first frame of an animated GIF / multi-page TIFF
            frame: Image.Image = im
            if frame.mode not in _PIL_MODES:
                keep_alpha = frame.mode in ("PA", "RGBa") or "transparency" in frame.info
                frame = frame.convert("RGBA" if keep_alpha else "RGB")
            array = np.asarray(frame)
    except Exception as exc:  # PIL raises many types for bad data; the reason is the message
        raise unreadable(what, f"neither OpenCV nor PIL can decode it ({_pil_reason(exc)}); "
                                "it is corrupt, truncated or not an image") from None
    if array.ndim == 3 and array.shape[2] >= 3:  # to OpenCV's BGR(A), like the main path
        array = array[:, :, [2, 1, 0, *range(3, array.shape[2])]]
    return np.ascontiguousarray(array)


def unreadable(what: str, reason: str) -> ImageReadError:
    """The error for image bytes that cannot be used; ``what`` names them ("image file 'a.png'",
    "the image of record 3 of 'train.tfrecord' (byte offset 1024)")."""
    return ImageReadError(
        f"Cannot read {what}: {reason}. Fix: replace or remove it, or pass on_error='skip' to "
        f"replace it with the next readable image and count it in stats()."
    )


def _pil_reason(exc: Exception) -> str:
    from PIL import UnidentifiedImageError

    if isinstance(exc, UnidentifiedImageError):
        return "no decoder recognises its format"
    return f"PIL: {type(exc).__name__}: {exc}"


def _convert(bgr: np.ndarray, channels: int | None) -> np.ndarray:
    """OpenCV-ordered (BGR, BGRA, grey, grey+alpha) to RGB-ordered ``channels``."""
    import cv2

    c = bgr.shape[2]
    if c == 2 and channels != 2:  # grey + alpha: alpha is kept only for rgba
        alpha = bgr[:, :, 1:]
        bgr = bgr[:, :, :1]
        if channels == 4:
            return np.concatenate([np.repeat(bgr, 3, axis=2), alpha], axis=2)
        c = 1
    codes = {
        (1, 3): cv2.COLOR_GRAY2RGB, (1, 4): cv2.COLOR_GRAY2RGBA,
        (3, 1): cv2.COLOR_BGR2GRAY, (3, 3): cv2.COLOR_BGR2RGB, (3, 4): cv2.COLOR_BGR2RGBA,
        (4, 1): cv2.COLOR_BGRA2GRAY, (4, 3): cv2.COLOR_BGRA2RGB, (4, 4): cv2.COLOR_BGRA2RGBA,
    }
    code = codes.get((c, channels if channels is not None else c))
    out = bgr if code is None else cv2.cvtColor(bgr, code)
    return out if out.ndim == 3 else out[:, :, None]


def resize(image: np.ndarray, size: tuple[int, int], interpolation: str,
           aspect: str | None = None) -> np.ndarray:
    """``image`` at ``size``: stretched (``aspect=None``), or without distortion as Keras'
    ``image_dataset_from_directory`` does it: ``"crop"`` (``crop_to_aspect_ratio``) takes the
    largest centred window of the output's aspect ratio first (Keras' ``smart_resize``);
    ``"pad"`` (``pad_to_aspect_ratio``) resizes to fit and pads with black around it
    (``tf.image.resize_with_pad``). Sizes are rounded in float32, as there."""
    import cv2

    if aspect == "crop":
        image = _aspect_window(image, size)
    elif aspect == "pad":
        return _resize_with_pad(image, size, interpolation)
    if image.shape[:2] == size:
        return image
    flags = {"area": cv2.INTER_AREA, "bicubic": cv2.INTER_CUBIC, "bilinear": cv2.INTER_LINEAR,
             "lanczos3": cv2.INTER_LANCZOS4, "lanczos5": cv2.INTER_LANCZOS4,
             "nearest": cv2.INTER_NEAREST}
    out = cv2.resize(image, (size[1], size[0]), interpolation=flags[interpolation])
    return out if out.ndim == 3 else out[:, :, None]


def _aspect_window(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The largest centred window of ``size``'s aspect ratio (Keras' ``smart_resize``)."""
    h, w = image.shape[:2]
    th, tw = np.float32(size[0]), np.float32(size[1])
    crop_h = max(min(h, int(np.float32(w) * th / tw)), 1)
    crop_w = max(min(w, int(np.float32(h) * tw / th)), 1)
    top, left = (h - crop_h) // 2, (w - crop_w) // 2
    return image[top:top + crop_h, left:left + crop_w]


def _resize_with_pad(image: np.ndarray, size: tuple[int, int], interpolation: str) -> np.ndarray:
    """Resized to fit inside ``size`` with its aspect ratio, centred on black
    (``tf.image.resize_with_pad``, which Keras' ``pad_to_aspect_ratio`` runs)."""
    h, w = np.float32(image.shape[0]), np.float32(image.shape[1])
    th, tw = np.float32(size[0]), np.float32(size[1])
    ratio = max(w / tw, h / th)
    inner = (max(int(np.floor(h / ratio)), 1), max(int(np.floor(w / ratio)), 1))
    top = max(int(np.floor((th - h / ratio) / 2)), 0)
    left = max(int(np.floor((tw - w / ratio) / 2)), 0)
    fitted = resize(image, inner, interpolation)
    out = np.zeros((*size, image.shape[2]), image.dtype)
    out[top:top + inner[0], left:left + inner[1]] = fitted
    return out
