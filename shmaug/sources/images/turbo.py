"""libjpeg-turbo's TurboJPEG 3 API through ctypes: decode one window of a JPEG, at a scale.

Why: a random resized crop needs a window of the photo, often at less than full resolution.
TurboJPEG 3 decodes only that window (``tj3SetCroppingRegion``: rows above it are skipped,
columns beside it are never transformed, rows below it never read) and scales by any eighth
(1/8 to 8/8) in the DCT (``tj3SetScalingFactor``), which is how DALI's CPU decoder and FFCV
crop. The DCT's scaling averages what it drops: it is the antialiasing of a resized crop.
OpenCV (``IMREAD_REDUCED_*``), Pillow (``draft``) and ``simplejpeg`` expose the scaling alone;
``PyTurboJPEG`` crops only by a lossless transform (an entropy decode and re-encode) and needs
a system library. So the library is loaded here, from (in order):

- the path in ``SHMAUG_JPEG`` (``opencv`` or ``whole``: never use it;
  ``shmaug.platform.jpeg_setting``);
- the copy bundled in the ``turbojpeg`` wheel (``pip install shmaug[jpeg]``: Linux, Windows;
  ``turbojpeg`` 0.0.2 wraps libjpeg-turbo 3.0 and exposes no path, so its file is found by
  the names its wheels give it);
- the system's ``libturbojpeg`` (``apt install libturbojpeg0``, ``brew install jpeg-turbo``),
  when it is version 3 or later.

Without one, ``available()`` is False and ``decode.resized_window`` decodes with OpenCV (whole,
at a reduced size where it can), with the same window and nearly the same pixels. A loader
decides once, in its own process, how windows decode (``decode.decide_jpeg_mode``):
its workers do as it decided, or fail saying why. A handle is made once per process and
thread (fork, spawn, and the threads of a ``workers=0`` loader) and never shared.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import logging
import math
import os
import threading
from collections.abc import Iterator
from ctypes import POINTER, Structure, c_char_p, c_int, c_size_t, c_ubyte, c_void_p
from ctypes.util import find_library
from typing import Any

import numpy as np

from ...platform import jpeg_setting

log = logging.getLogger(__name__)

_INIT_DECOMPRESS = 1
_PARAM_SUBSAMP, _PARAM_WIDTH, _PARAM_HEIGHT, _PARAM_PRECISION, _PARAM_COLORSPACE = 4, 5, 6, 7, 8
_PARAM_LOSSLESS = 15
_MCU_WIDTH = (8, 16, 16, 8, 8, 32, 8)  # by TJSAMP_*: 444, 422, 420, GRAY, 440, 411, 441
_COLORSPACE_CMYK, _COLORSPACE_YCCK = 3, 4
PIXEL_FORMATS = {1: 6, 3: 0, 4: 7}  # channels -> TJPF_GRAY, TJPF_RGB, TJPF_RGBA


class _Scaling(Structure):
    _fields_ = [("num", c_int), ("denom", c_int)]


class _Region(Structure):
    _fields_ = [("x", c_int), ("y", c_int), ("w", c_int), ("h", c_int)]


class TurboError(Exception):
    """libjpeg-turbo could not decode the bytes (the caller falls back to a full decode)."""


class _Library:
    """The loaded functions and this process's decompressor handle."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        self.path = path
        self.init = lib.tj3Init
        self.init.argtypes, self.init.restype = [c_int], c_void_p
        self.header = lib.tj3DecompressHeader
        self.header.argtypes, self.header.restype = [c_void_p, POINTER(c_ubyte), c_size_t], c_int
        self.get = lib.tj3Get
        self.get.argtypes, self.get.restype = [c_void_p, c_int], c_int
        self.scale = lib.tj3SetScalingFactor
        self.scale.argtypes, self.scale.restype = [c_void_p, _Scaling], c_int
        self.crop = lib.tj3SetCroppingRegion
        self.crop.argtypes, self.crop.restype = [c_void_p, _Region], c_int
        self.decompress = lib.tj3Decompress8
        self.decompress.argtypes = [c_void_p, POINTER(c_ubyte), c_size_t, c_void_p, c_int, c_int]
        self.decompress.restype = c_int
        self.error = lib.tj3GetErrorStr
        self.error.argtypes, self.error.restype = [c_void_p], c_char_p
        self.error_code = lib.tj3GetErrorCode
        self.error_code.argtypes, self.error_code.restype = [c_void_p], c_int
        self.destroy = lib.tj3Destroy
        self.destroy.argtypes, self.destroy.restype = [c_void_p], None
        self._local = threading.local()  # (pid, handle): one per process and thread

    def handle(self) -> Any:
        pid = os.getpid()
        held = getattr(self._local, "held", None)
        if held is None or held[0] != pid:
            made = self.init(_INIT_DECOMPRESS)
            if not made:
                raise TurboError("tj3Init failed")
            held = self._local.held = (pid, made)
        return held[1]

    def fail(self, handle: Any, what: str) -> TurboError:
        """The error for a failed call, this thread's handle given up: after a failure a
        handle reads the next header wrong (it answers 0 and the last file's size)."""
        error = TurboError(f"{what}: {self.error(handle).decode(errors='replace')}")
        self.destroy(handle)
        self._local.held = None
        return error


_LIBRARY: _Library | None = None  # this process's, once looked for (``_LOOKED``)
_LOOKED = False


def _candidates() -> Iterator[str]:
    """The libraries to try, in order; the system's looked for only after the wheel's (its
    search runs a compiler in a temporary folder, which a read-only container may lack)."""
    mode, chosen = jpeg_setting()
    if mode in ("opencv", "whole"):
        return
    if chosen:
        yield chosen
        return
    spec = importlib.util.find_spec("turbojpeg")
    if spec is not None and spec.origin:
        site = os.path.dirname(spec.origin)
        for pattern in ("turbojpeg.libs/libturbojpeg*.so*", "turbojpeg.dylibs/libturbojpeg*.dylib",
                        "turbojpeg*.dll"):
            yield from sorted(glob.glob(os.path.join(site, pattern)))
    try:
        system = find_library("turbojpeg")
    except OSError as exc:  # (no usable temporary folder, no compiler to ask)
        log.debug("libturbojpeg not looked for on the system: %s", exc)
        return
    if system:
        yield system


def library() -> _Library | None:
    """The TurboJPEG 3 library, loaded once per process, or None where there is none."""
    global _LIBRARY, _LOOKED
    if not _LOOKED:
        _LOOKED = True
        for path in _candidates():
            try:
                _LIBRARY = _Library(path)
                break
            except (OSError, AttributeError) as exc:  # missing, or TurboJPEG 2 (no tj3*)
                chosen = jpeg_setting()[0] == "turbo"
                (log.warning if chosen else log.debug)(
                    "libturbojpeg at %s not used (%s): JPEG windows are decoded by OpenCV, "
                    "whole", path, exc)
    return _LIBRARY


def available() -> bool:
    """Whether windows of JPEGs are decoded by libjpeg-turbo here (see the module)."""
    return library() is not None


def _check(lib: _Library, handle: Any, status: int, what: str) -> None:
    """Raise on a failed call, a warning included: libjpeg-turbo fills a truncated scan with
    grey and only warns, where OpenCV and PIL refuse the file. The caller's whole decode then
    gives their verdict, so a file reads (or is refused) alike on every path."""
    if status != 0:
        raise lib.fail(handle, what)


def header(data: np.ndarray) -> tuple[int, int]:
    """(height, width) as libjpeg-turbo reads the header, or ``TurboError`` saying why not:
    the check a source makes when a sample is loaded, where an unreadable one can still be
    stood in for."""
    lib = library()
    if lib is None:
        raise TurboError("libturbojpeg 3 is not available")
    handle = lib.handle()
    _check(lib, handle, lib.header(handle, data.ctypes.data_as(POINTER(c_ubyte)), data.size),
           "header")
    height, width = lib.get(handle, _PARAM_HEIGHT), lib.get(handle, _PARAM_WIDTH)
    if height <= 0 or width <= 0:
        raise TurboError(f"header: a size of {width} x {height}")
    return height, width


def decode_window(data: np.ndarray, window: tuple[int, int, int, int], eighths: int,
                  channels: int) -> tuple[np.ndarray, tuple[int, int]]:
    """The smallest MCU-aligned region holding ``window`` (top, left, height, width, in the
    file's pixels), decoded at ``eighths``/8 scale (1 to 8: TurboJPEG 3 scales in the DCT by
    any eighth) into ``channels`` (1, 3 or 4, RGB order). Returns the pixels and the region's
    (top, left) in the scaled image's pixels.

    Raises ``TurboError`` where libjpeg-turbo refuses the file (lossless, CMYK, 12-bit) or warns
    while decoding the region (a truncated or corrupt scan): the caller then decodes in full.
    """
    lib = library()
    if lib is None:
        raise TurboError("libturbojpeg 3 is not available")
    handle = lib.handle()
    buf = data.ctypes.data_as(POINTER(c_ubyte))
    _check(lib, handle, lib.header(handle, buf, data.size), "header")
    if (lib.get(handle, _PARAM_LOSSLESS) or lib.get(handle, _PARAM_PRECISION) != 8
            or lib.get(handle, _PARAM_COLORSPACE) in (_COLORSPACE_CMYK, _COLORSPACE_YCCK)):
        raise TurboError("not an 8-bit lossy JPEG in YCbCr, RGB or grey")
    subsamp = lib.get(handle, _PARAM_SUBSAMP)
    width, height = lib.get(handle, _PARAM_WIDTH), lib.get(handle, _PARAM_HEIGHT)
    if width <= 0 or height <= 0:
        raise TurboError(f"header: a size of {width} x {height}")
    common = math.gcd(eighths, 8)  # TurboJPEG knows its factors in lowest terms (3/4, not 6/8)
    _check(lib, handle, lib.scale(handle, _Scaling(eighths // common, 8 // common)), "scaling")
    sw, sh = scaled(width, eighths), scaled(height, eighths)
    top, left, h, w = window
    # The window in scaled pixels, widened to whole pixels; the region's left edge on an MCU
    # (scaled) boundary, as tj3SetCroppingRegion requires; rows need no alignment.
    y0, x0 = top * eighths // 8, left * eighths // 8
    y1 = min(sh, scaled(top + h, eighths))
    x1 = min(sw, scaled(left + w, eighths))
    if not 0 <= subsamp < len(_MCU_WIDTH):  # unusual, or newer than this table: whole
        x0, x1, y0, y1 = 0, sw, 0, sh
    else:
        mcu = scaled(_MCU_WIDTH[subsamp], eighths)
        x0 -= x0 % mcu
    region = _Region(x0, y0, x1 - x0, y1 - y0) if (x0, y0, x1, y1) != (0, 0, sw, sh) \
        else _Region(0, 0, 0, 0)
    _check(lib, handle, lib.crop(handle, region), "cropping region")
    out = np.empty((y1 - y0, x1 - x0, channels), np.uint8)
    status = lib.decompress(handle, buf, data.size, out.ctypes.data, out.strides[0],
                            PIXEL_FORMATS[channels])
    _check(lib, handle, status, "decompress")
    return out, (y0, x0)


def scaled(pixels: int, eighths: int) -> int:
    """``pixels`` at ``eighths``/8 scale, rounded up as libjpeg's ``TJSCALED`` does."""
    return -(-pixels * eighths // 8)


def describe() -> str:
    """Which libjpeg-turbo this process loaded, and from where (``shmaug doctor``)."""
    lib = library()
    if lib is None:
        return "none (no libturbojpeg 3 found, or SHMAUG_JPEG says not to look)"
    try:
        from importlib.metadata import version

        wheel = f", from the turbojpeg {version('turbojpeg')} wheel" \
            if "turbojpeg" in os.path.dirname(lib.path) else ""
    except Exception:  # (no such distribution: a system library)
        wheel = ""
    return f"libjpeg-turbo 3 (TurboJPEG 3 API) at {lib.path}{wheel}"
