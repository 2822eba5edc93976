"""Decoding one image file in a worker: bytes -> uint8 (H, W, C) in the requested colour mode.

OpenCV first (its wheels decode JPEG with libjpeg-turbo), PIL for what OpenCV cannot read;
then channel conversion to RGB order and resizing. ``files.ImageFiles`` decides which file and
what to do when one is unreadable; this module only turns one file into pixels, or says why not.

Reduced-size decoding: libjpeg scales a JPEG in its DCT (the skipped pixels are never
computed, and what is dropped is averaged: a low-pass, the antialiasing of a shrink).
libjpeg-turbo 3 (``turbo``, which also decodes a window alone), OpenCV (``IMREAD_REDUCED_*``)
and PIL (``draft``) scale by 1/2, 1/4 or 1/8 (``DCT_EIGHTHS``: libjpeg-turbo's other eighths
are slower than a full decode). One rule (``dct_scale``) picks the smallest scale that keeps
what is kept (the window of a crop, or the whole photo for a fixed ``image_size``) at least
the output; then the caller resizes the rest. Only baseline and progressive 8-bit JPEGs with 1
or 3 components are decoded this way (identified by their bytes, not their extension); every
other file, PNG included, is decoded in full as before. ``REDUCED_TOLERANCE`` and
``REDUCED_CROP_QUALITY`` state how far the output is from a full decode + resize.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import contextvars
import os
import struct
import threading
import time
from functools import partial
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from . import turbo
from .headers import stored_dims, tiff_fields
from ... import whole_decodes
from ...resample import (Resample, Window, after_dct, aspect_window, cv_flag, dct_rest, fitted,
                         for_resize, margin, resize_box)
from ...errors import SKIP_WHERE, ImageReadError
from ...platform import jpeg_setting

COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}  # None: keep the files' own channels

_PIL_MODES = {"L": "L", "LA": "LA", "RGB": "RGB", "RGBA": "RGBA", "I;16": "I;16"}

# What a reduced-size decode of a whole photo may differ by, as the mean absolute difference per
# channel value (of 0..255) from a full decode resized to the same size: the median over real
# photographs (ImageNet's sizes, q75-95 4:2:0; outputs from 16x16 to 112x112, 2x to 25x smaller).
# "area": with interpolation="area", from a full decode + area resize (libjpeg's scaling is a
# low-pass in the DCT, not a box: medians 1.7-3.2, single photos up to 8.7). "same
# interpolation": from a full decode + the same interpolation (medians 3.2-10, single photos up
# to 18 for bilinear and 26 for nearest at 16x16): shrinking more than 2x, those filters skip
# pixels and alias, while libjpeg averages them, so the reduced output is the closer of the two
# to the alias-free (area) image for 92-100% of photos at 4x or more, 70-75% at about 3x (60
# photos of bench.files.photos; a drawn photo-like image in tests/unit/test_decode.py).
# tests/unit/test_crop_quality.py holds the medians on 12 real photos.
REDUCED_TOLERANCE = {"area": 3.5, "same interpolation": 12.0}

# How far the reduced resized crop (the default) may be from the exact one
# (``reduced_decode=False``: the window at full scale, then PIL's antialiased filter, which is
# torchvision's ``resized_crop(antialias=True)`` on a PIL image), per interpolation, over many
# windows of real photographs (ImageNet's sizes, q75-95 4:2:0): the mean absolute difference
# per value (0..255) and the median PSNR (dB). Measured (the DCT at 1/8 to 1/1, then
# ``resample.after_dct``): MAD 0.46 / 0.49 / 1.48 / 0.65 and PSNR 50 / 50 / 40 / 48 dB for
# bilinear / bicubic / area / lanczos3, 5th percentile 43 / 43 / 33 / 40 dB, the same whether
# libjpeg-turbo decodes the window or OpenCV the photo. bench.files.crop_quality measures
# them; tests/unit/test_crop_quality.py holds the decoder to them.
REDUCED_CROP_QUALITY = {"bilinear": (0.6, 47.0), "bicubic": (0.6, 47.0), "area": (1.6, 38.0),
                        "lanczos3": (0.8, 45.0)}

# The scales a JPEG is decoded at, as eighths of its size: 1/8, 1/4, 1/2 and 1/1, which
# OpenCV (``IMREAD_REDUCED_*``) and Pillow (``draft``) also take. TurboJPEG 3 scales by any
# eighth, but only these have SIMD inverse DCTs: the others are plain C, and 7/8 and 6/8
# decoded a photo 1.5-1.7x slower than 8/8, 5/8 1.3x (``python -m bench.files.crop_quality``).
DCT_EIGHTHS = (1, 2, 4, 8)

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


def stored_sizes(paths: Sequence[str]) -> Iterator[tuple[int, int] | OSError]:
    """Each file's (height, width) as stored (``stored_size``), or the error, in order: read
    one by one where a header is quick (a local disk: threads would only contend for the
    interpreter), on ``_HEADER_THREADS`` threads where the first ``_PROBE`` took longer (a
    network file system, where each costs a round trip)."""
    started = time.perf_counter()
    yield from map(_stored_or_error, paths[:_PROBE])
    if time.perf_counter() - started <= _SLOW_HEADER * min(len(paths), _PROBE):
        yield from map(_stored_or_error, paths[_PROBE:])
        return
    pool = cf.ThreadPoolExecutor(_HEADER_THREADS)
    try:
        yield from pool.map(_stored_or_error, paths[_PROBE:], chunksize=64)
    finally:  # (refused at one: the rest are not waited for)
        pool.shutdown(wait=False, cancel_futures=True)


_HEADER_THREADS = 8
_PROBE = 64  # headers read one by one to tell a local disk from a network file system
_SLOW_HEADER = 1e-3  # seconds a header takes, past which the rest are read on threads


def _stored_or_error(path: str) -> tuple[int, int] | OSError:
    try:
        return stored_size(path)
    except OSError as exc:
        return exc


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
                 reduce_to: tuple[int, int] | None = None, eighths: int = 8,
                 dtype: str = "uint8") -> np.ndarray:
    """Encoded image bytes (uint8) to uint8 (H, W, C) in RGB(A) order, as ``decode``;
    ``what`` names them in errors (``"image file 'a.jpg'"``, a record of a shard).
    ``dtype="uint16"``: a 16-bit file stays uint16 (an 8-bit one stays uint8).

    Decodes with OpenCV (whose wheels use libjpeg-turbo), and falls back to PIL for what
    OpenCV cannot read. ``eighths`` (8, 4, 2 or 1): a JPEG decoded at that many eighths of
    its size, as ``reduce_to`` would choose it.
    """
    import cv2

    if data.size == 0:
        raise unreadable(what, "it is empty (0 bytes)")
    refuse_bombs(data, what)
    if reduce_to is not None:
        eighths = 8 // reduction(jpeg_header(data), reduce_to)
    try:
        image = _decode_reduced(data, 8 // eighths) if eighths != 8 else None
        if image is None:  # BGR(A); we convert channels ourselves
            image = imdecode(data, cv2.IMREAD_UNCHANGED)
    except cv2.error as exc:  # (an assertion of OpenCV's: PIL's turn, unless the file's)
        raise_if_refused(exc, lambda reason: unreadable(what, reason), what)
        image = None
    if image is None:
        image = _decode_pil(what, data)
    if image.dtype not in (np.uint8, np.uint16):
        raise ImageReadError(
            f"Cannot use {what}: its pixels are {image.dtype}, not 8 or 16 bit, and image "
            f"files decode to uint8 or uint16. Fix: {KEEP_DEPTH}."
        )
    if image.dtype == np.uint16 and dtype == "uint8":
        # the high byte, as tf.io.decode_png keeps it (Keras' image_dataset_from_directory):
        # // 257 differed by 1 on 45% of values
        image = np.right_shift(image, 8).astype(np.uint8)
    if image.ndim == 2:
        image = image[:, :, None]
    return _convert(image, COLOR_MODES[color_mode] if color_mode else None)


def refuse_bombs(data: np.ndarray, what: str,
                 error: Callable[[str], Exception] | None = None) -> None:
    """An image past ``refuse_bomb``'s limit, refused from its header (``headers``);
    ``error(reason)``: the error to raise (an image's own, ``unreadable``, by default)."""
    header = jpeg_header(data)
    dims = header[:2] if header is not None else stored_dims(data)
    if dims is not None:
        refuse_bomb(dims[0], dims[1], what, error)


def pixel_limit() -> int | None:
    """The most pixels an image may have, as PIL opens them: twice
    ``PIL.Image.MAX_IMAGE_PIXELS`` (None: no limit), read now (a source reads it when made,
    and its workers keep that: a spawned worker's PIL has its default)."""
    from PIL import Image

    most = Image.MAX_IMAGE_PIXELS
    return None if most is None else 2 * int(most)


_NOW = -1  # ``_LIMIT``'s default: PIL's, read at each check
_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("_LIMIT", default=_NOW)


@contextlib.contextmanager
def limited(most: int | None) -> Iterator[None]:
    """Decodes within check ``most`` pixels (a source's ``pixel_limit``, read when made)."""
    token = _LIMIT.set(most)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def refuse_bomb(height: int, width: int, what: str,
                error: Callable[[str], Exception] | None = None) -> None:
    """An image of more pixels than PIL opens (``pixel_limit``, as Keras' ``load_img``
    refuses it) is refused before it is decoded, on every decode path: a file of a megabyte
    can hold 20000x20000 pixels, 1.2 GB a decode in every worker."""
    most = _LIMIT.get()
    most = pixel_limit() if most == _NOW else most
    if most is None or width * height <= most:
        return
    reason = (f"its header gives {width}x{height} pixels (width x height), past the {most:,} "
              f"that PIL and Keras' load_img open (a decompression bomb, or a photo to cut "
              f"into tiles first; to read it, set PIL.Image.MAX_IMAGE_PIXELS higher, or to "
              f"None, before the source is made)")
    raise (error or partial(unreadable, what))(reason)


def decide_jpeg_mode() -> str:
    """How this process would decode a JPEG's window, decided once by a loader for all its
    workers, as ``SHMAUG_JPEG`` says (``shmaug.platform.jpeg_setting``): "turbo" (the window
    alone, at 1/2, 1/4 or 1/8 where it allows: libjpeg-turbo 3 found), "opencv" (whole, at
    the same scales), or "whole" (every pixel, then cut: the reference recipes' work, to
    compare).

    Raises:
        RuntimeError: ``SHMAUG_JPEG`` asks for libjpeg-turbo and none loads here.
    """
    mode, _ = jpeg_setting()
    if mode in ("whole", "opencv"):
        return mode
    if turbo.available():
        return "turbo"
    if mode == "turbo":
        raise RuntimeError(
            "SHMAUG_JPEG asks for libjpeg-turbo 3, but none loads in this process (see the "
            "log for why). Fix: pip install 'shmaug[jpeg]', point SHMAUG_JPEG at a "
            "libturbojpeg.so of version 3, or unset it to fall back to OpenCV.")
    return "opencv"


def decoder_report() -> dict[str, str]:
    """What decodes images in this process, for ``shmaug doctor``: the JPEG switch, the
    decoder a loader started now would use for a decode-time crop, and the libraries."""
    import platform as host

    import cv2
    import PIL

    from ... import __version__
    from ...platform import cpu_count

    mode, path = jpeg_setting()
    try:
        chosen = decide_jpeg_mode()
    except RuntimeError as exc:
        chosen = f"none: {exc}"
    how = {"turbo": "libjpeg-turbo 3: only the window, at 1/8, 1/4 or 1/2 in the DCT where "
                    "the window allows, then OpenCV (the reduced crop)",
           "opencv": "OpenCV: the whole photo, at 1/8, 1/4 or 1/2 where the window allows, "
                     "then OpenCV (pip install 'shmaug[jpeg]' for the window alone)",
           "whole": "OpenCV: every pixel, then cut (SHMAUG_JPEG=whole)"}
    return {
        "shmaug": __version__,
        "python": f"{host.python_version()} on {host.system()} {host.machine()}",
        "cores": str(cpu_count()),
        "SHMAUG_JPEG": mode + (f" ({path})" if path else ""),
        "JPEG decode-time crop": how.get(chosen, chosen),
        "libjpeg-turbo": turbo.describe(),
        "OpenCV": cv2.__version__,
        # (OpenCV's marks: none, its build's baseline; *, picked at run time; ?, built for
        # but missing here: a host without AVX2 blurs and warps float32 to other last bits)
        "OpenCV CPU kernels": cv2.getCPUFeaturesLine(),
        "Pillow": PIL.__version__,
        "numpy": np.__version__,
    }


def dct_scale(extent: tuple[float, float], size: tuple[int, int]) -> int:
    """The numerator M of the smallest scale M/8 among ``DCT_EIGHTHS`` at which ``extent``
    (height, width, in the file's pixels) stays at least ``size``, or 8: decode it in full.
    The one rule of every reduced decode (a window or a whole photo, by libjpeg-turbo or
    OpenCV): the scaled extent is never smaller than the output, so the resize after it never
    enlarges what the DCT shrank."""
    for m in DCT_EIGHTHS:
        if extent[0] * m >= size[0] * 8 and extent[1] * m >= size[1] * 8:
            return m
    return 8


def resized_window(data: np.ndarray, what: str, color_mode: str | None,
                   header: tuple[int, int, int, int] | None, window: Window,
                   size: tuple[int, int], how: Resample, mode: str = "opencv",
                   reduced: bool = True) -> np.ndarray:
    """``window`` (top, left, height, width in the file's pixels) of the encoded image
    resampled to ``size``: as ``resize_box(..., how)`` on the whole decoded image, decoding
    less (around the window too where the filter reads there: ``how.within`` False).

    ``mode`` as ``decide_jpeg_mode`` says. Where ``reduced`` (``reduced_decode``) allows, a JPEG
    is scaled in the DCT; "turbo" decodes only the window; a JPEG libjpeg-turbo refuses
    (lossless, CMYK, 12-bit), and every other file, is decoded whole. With ``how.antialias``
    (the reduced crop): at the smallest of 1/8, 1/4, 1/2 and 1/1 that keeps the window at
    least ``size`` (``dct_scale``), then OpenCV for the rest (``resample.after_dct``), its
    pixels within ``REDUCED_CROP_QUALITY`` of the exact path (``reduced=False``: the window
    at full scale, then PIL's antialiased filter). Without it: at the same scale, then
    OpenCV's sampled resize.
    """
    scalable = (header is not None and header[3] in _SCALABLE_SOF and header[2] in (1, 3)
                and mode != "whole")
    if not scalable:
        return resize_box(decode_bytes(data, what, color_mode), window, size, how)
    assert header is not None
    m = dct_scale(window[2:], size) if reduced else 8
    fast = how.antialias and reduced  # OpenCV finishes (after_dct); the exact path: PIL
    scaled = (window[0] * m / 8, window[1] * m / 8, window[2] * m / 8, window[3] * m / 8)
    finish = after_dct if fast else resize_box
    if mode == "turbo":
        _need_turbo()
        rest = dct_rest(how) if fast else how
        reach = -(-margin(scaled, size, rest) * 8 // m)  # in file pixels
        top, left = max(0, int(window[0]) - reach), max(0, int(window[1]) - reach)
        bottom = min(header[0], int(np.ceil(window[0] + window[2])) + reach)
        right = min(header[1], int(np.ceil(window[1] + window[3])) + reach)
        channels = COLOR_MODES[color_mode] if color_mode else header[2]
        try:
            pixels, (y0, x0) = turbo.decode_window(
                data, (top, left, bottom - top, right - left), m, channels)
        except turbo.TurboError:  # (a damaged file: the whole decode below copes or says why)
            whole_decodes.count("turbo_refused")
        else:
            return finish(pixels, (scaled[0] - y0, scaled[1] - x0, scaled[2], scaled[3]),
                          size, how)
    pixels = decode_bytes(data, what, color_mode, None, m)
    if pixels.shape[:2] == header[:2]:  # decoded at full size after all (PIL's fallback)
        scaled = window
    return finish(pixels, scaled, size, how)


def scaled_whole(data: np.ndarray, what: str, color_mode: str | None,
                 size: tuple[int, int], mode: str) -> np.ndarray | None:
    """A whole JPEG decoded by libjpeg-turbo at the smallest eighth of its size that keeps it
    at least ``size`` (``dct_scale``), in ``color_mode``'s RGB-ordered channels, for a source
    that resizes every photo to ``size``; None where that does not apply (not a scalable JPEG,
    no smaller eighth, ``mode`` not "turbo", or a file libjpeg-turbo refuses): the caller
    decodes it as before."""
    header = jpeg_header(data)
    if (mode != "turbo" or header is None or header[3] not in _SCALABLE_SOF
            or header[2] not in (1, 3) or not header[0] or not header[1]):
        return None
    refuse_bomb(header[0], header[1], what)
    m = dct_scale(header[:2], size)
    if m == 8:
        return None
    _need_turbo()
    channels = COLOR_MODES[color_mode] if color_mode else header[2]
    try:
        pixels, _ = turbo.decode_window(data, (0, 0, header[0], header[1]), m, channels)
    except turbo.TurboError:
        return None
    return pixels


def _need_turbo() -> None:
    """Raise where a loader chose libjpeg-turbo in its own process and this worker has none:
    its batches would not be the ones the other workers make."""
    if not turbo.available():
        raise RuntimeError(
            "This loader decodes JPEGs with libjpeg-turbo, found in its own process, but this "
            "worker cannot load it (see the log for why), so its batches would not be the "
            "ones the other workers make. Fix: make the library loadable everywhere (pip "
            "install shmaug[jpeg]), or set SHMAUG_JPEG=opencv before the loader starts.")


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


_TAIL = 1024  # bytes at a JPEG's end searched for its end marker


def jpeg_ends(data: np.ndarray) -> bool:
    """Whether a JPEG's image is whole: its end-of-image marker lies in its last KiB, or
    walking its segments and scans reaches one (a motion photo's video, or other data a
    camera appends, lies after it). A download cut short has none, which libjpeg-turbo only
    warns of after decoding the rows above the cut."""
    return bytes(data[-_TAIL:]).rfind(b"\xff\xd9") >= 0 or _walks_to_end(data)


def _walks_to_end(data: np.ndarray) -> bool:
    """Whether a JPEG's markers, read from its start, reach its end marker: each segment
    skipped by its length, each scan's coded data up to the next marker (in it, 0xFF is
    followed only by 0x00 or a restart marker). A pass over the bytes, for the few files
    whose last KiB has no end marker."""
    buf = data.data.cast("B")
    n, i = len(buf), 2
    markers: np.ndarray | None = None  # where a marker starts, past the first scan
    while i + 1 < n:
        if buf[i] != 0xFF:
            return False
        marker = buf[i + 1]
        if marker == 0xD9:
            return True
        if marker == 0xFF or marker in _NO_LENGTH:
            i += 1 if marker == 0xFF else 2
            continue
        if i + 4 > n:
            return False
        i += 2 + (buf[i + 2] << 8 | buf[i + 3])
        if marker == 0xDA:  # a scan: its coded data runs to the next marker
            if markers is None:
                at = np.flatnonzero(data[i:-1] == 0xFF) + i
                after = data[at + 1]
                markers = at[(after != 0) & (after != 0xFF) & ((after < 0xD0) | (after > 0xD7))]
            k = int(np.searchsorted(markers, i))
            if k == len(markers):
                return False
            i = int(markers[k])
    return False


def reduction(header: tuple[int, int, int, int] | None, size: tuple[int, int]) -> int:
    """The largest of 8, 4, 2 by which a JPEG with ``header`` can be decoded by OpenCV and
    still be at least ``size`` (``dct_scale``'s rule), or 1: decode it in full."""
    if header is None:
        return 1
    height, width, components, marker = header
    if marker not in _SCALABLE_SOF or components not in (1, 3) or not height or not width:
        return 1
    return 8 // dct_scale((height, width), size)


def _decode_reduced(data: np.ndarray, denominator: int) -> np.ndarray | None:
    """A JPEG decoded at 1/``denominator`` scale (2, 4 or 8; BGR or grey, as the full path
    gives), or None where the full decode applies. EXIF orientation is ignored, as
    ``IMREAD_UNCHANGED`` does."""
    import cv2

    header = jpeg_header(data)
    if denominator == 1 or header is None:
        return None
    kind = "GRAYSCALE" if header[2] == 1 else "COLOR"
    flag = getattr(cv2, f"IMREAD_REDUCED_{kind}_{denominator}") | cv2.IMREAD_IGNORE_ORIENTATION
    image: np.ndarray | None = imdecode(data, flag)
    return image


def scan_reads(data: np.ndarray) -> bool:
    """Whether OpenCV reads a JPEG's whole scan (at 1/8 scale, in grey: every coefficient is
    still read, a fraction of a full decode's work): the check ``on_error="skip"`` makes where
    libjpeg-turbo cannot read the header alone, before a decode-time crop."""
    import cv2

    try:
        return imdecode(data, cv2.IMREAD_REDUCED_GRAYSCALE_8 |
                        cv2.IMREAD_IGNORE_ORIENTATION) is not None
    except cv2.error:
        return False


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
        if _tiff_beyond_images(data):
            raise ImageReadError(
                f"Cannot read {what}: neither OpenCV nor PIL decodes this TIFF "
                f"({_pil_reason(exc)}). They read 1, 3 or 4 channels of 8 or 16 bits; a "
                f"multiband or float TIFF (tifffile reads it) is not an image file for them. "
                f"Fix: {KEEP_DEPTH}.") from None
        raise unreadable(what, f"neither OpenCV nor PIL can decode it ({_pil_reason(exc)}); "
                                "it is corrupt, truncated or not an image") from None
    if array.ndim == 3 and array.shape[2] >= 3:  # to OpenCV's BGR(A), like the main path
        array = array[:, :, [2, 1, 0, *range(3, array.shape[2])]]
    return np.ascontiguousarray(array)


KEEP_DEPTH = ("read the files into one array once (tifffile.imread or cv2.imread(path, "
              "cv2.IMREAD_UNCHANGED)), np.save it, and pass the array, or np.load(path, "
              "mmap_mode='r') when it is larger than memory: shmaug's ops take uint16, float "
              "and many-channel arrays as they are")


def _tiff_beyond_images(data: np.ndarray) -> bool:
    """Whether ``data`` is a TIFF whose first image is float or has more than 4 samples a
    pixel (bands): readable data that no image decoder here takes, told apart from a TIFF
    that is damaged (its first directory read off its header, a few bytes)."""
    fields = tiff_fields(data, (277, 339))  # SamplesPerPixel, SampleFormat
    return fields is not None and (fields.get(277, 1) > 4 or fields.get(339, 1) == 3)


_QUIET = threading.Lock()  # guards the three below
_quieted = [0, 0]  # decodes running with OpenCV's log off here, and the level to put back
# Per process, found at its first decode: OpenCV's logging where decodes turn it off, False
# where they leave it (off already, as a worker's from its start; OPENCV_LOG_LEVEL set).
_switch: Any = None


def _quiet_anew_in_child() -> None:
    """A fork while a thread decodes (the lock held, the count above 0) must not leave the
    child's first decode waiting for good: it starts with none running, and looks again."""
    global _QUIET, _switch
    _QUIET, _switch = threading.Lock(), None
    _quieted[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_quiet_anew_in_child)


def imdecode(data: np.ndarray, flag: int) -> np.ndarray | None:
    """``cv2.imdecode`` without OpenCV's own log lines, as in a worker
    (``engine/workers/worker.py``, which turns them off for good): a corrupt PNG printed
    ``[ERROR:0@0.35] global grfmt_png.cpp ... IHDR chunk shall be first`` on stderr, outside
    `logging`, beside shmaug's error or warning naming the file (the main process decodes
    with workers=0, for the first sample, for a stand-in's warning). The level is off while
    any decode here runs (threads decode side by side) and the user's comes back after the
    last; one set with ``OPENCV_LOG_LEVEL`` is kept."""
    import cv2

    global _switch
    if _switch is None:
        with _QUIET:
            log = getattr(cv2.utils, "logging", None)
            if _switch is None:
                _switch = False if log is None or "OPENCV_LOG_LEVEL" in os.environ or \
                    log.getLogLevel() == log.LOG_LEVEL_SILENT else log
    log = _switch
    if log is False:
        return cv2.imdecode(data, flag)
    with _QUIET:
        if not _quieted[0]:
            _quieted[1] = log.getLogLevel()
            log.setLogLevel(log.LOG_LEVEL_SILENT)
        _quieted[0] += 1
    try:
        return cv2.imdecode(data, flag)
    finally:
        with _QUIET:
            _quieted[0] -= 1
            if not _quieted[0]:
                log.setLogLevel(_quieted[1])


def unreadable(what: str, reason: str) -> ImageReadError:
    """The error for image bytes that cannot be used; ``what`` names them ("image file 'a.png'",
    "the image of record 3 of 'train.tfrecord' (byte offset 1024)")."""
    return ImageReadError(
        f"Cannot read {what}: {reason}. Fix: replace or remove it, or pass on_error='skip'"
        f"{SKIP_WHERE} to replace it with the next readable image and count it in stats()."
    )


def raise_if_refused(exc: Exception, error: Callable[[str], Exception], what: str) -> None:
    """After ``cv2.imdecode`` raised ``exc`` on ``what``: ``error(reason)`` raised where the
    file is at fault (past OpenCV's limit on pixels, which PIL's bomb check refuses too), a
    MemoryError naming it where memory ran short (not the file's fault: a skip would drop
    good images); else nothing, an assertion PIL may get past."""
    message = str(exc)
    if "CV_IO_MAX_IMAGE_PIXELS" in message:
        raise error("its header says it has more pixels than OpenCV decodes (2**30, set by "
                    "the environment variable OPENCV_IO_MAX_IMAGE_PIXELS): a damaged header, "
                    "or an image to cut into tiles first") from None
    if "alloc" in message.lower() or "memory" in message.lower():
        raise MemoryError(
            f"Memory ran short decoding {what} ({message.strip().splitlines()[-1]}). Fix: "
            f"fewer workers (each decodes its own photos), or cut such large images into "
            f"tiles first.") from exc


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
           aspect: str | None = None, stored: tuple[int, int] | None = None) -> np.ndarray:
    """``image`` at ``size``: stretched (``aspect=None``), or without distortion as Keras'
    ``image_dataset_from_directory`` does it: ``"crop"`` (``crop_to_aspect_ratio``) takes the
    largest centred window of the output's aspect ratio first (Keras' ``smart_resize``);
    ``"pad"`` (``pad_to_aspect_ratio``) resizes to fit and pads with black around it
    (``tf.image.resize_with_pad``). Sizes are rounded in float32, as there, from the file's
    ``stored`` (height, width) where ``image`` was decoded reduced (its own size rounds
    otherwise: a row of photo where Keras pads)."""
    import cv2

    if aspect == "crop":
        image = _aspect_window(image, size)
    elif aspect == "pad":
        return _resize_with_pad(image, size, interpolation, stored or image.shape[:2])
    if image.shape[:2] == size:
        return image
    flag = for_resize(cv_flag(interpolation))
    out = cv2.resize(image, (size[1], size[0]), interpolation=flag)
    return out if out.ndim == 3 else out[:, :, None]


def _aspect_window(image: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The largest centred window of ``size``'s aspect ratio (Keras' ``smart_resize``)."""
    top, left, rows, cols = aspect_window(image.shape[0], image.shape[1], size)
    return image[top:top + rows, left:left + cols]


def _resize_with_pad(image: np.ndarray, size: tuple[int, int], interpolation: str,
                     stored: tuple[int, int]) -> np.ndarray:
    """Resized to fit inside ``size`` with the aspect ratio of ``stored`` (its size in its
    file), centred on black (``tf.image.resize_with_pad``, which Keras' ``pad_to_aspect_ratio``
    runs)."""
    top, left, rows, cols = fitted(stored[0], stored[1], size)
    out = np.zeros((*size, image.shape[2]), image.dtype)
    out[top:top + rows, left:left + cols] = resize(image, (rows, cols), interpolation)
    return out
