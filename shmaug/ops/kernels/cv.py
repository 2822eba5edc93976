"""OpenCV kernels: pure functions of (array, drawn parameters) -> array.

Owns the pixel work of the default backend. Nothing here draws random numbers or validates
user input: the built-in ops (``builtin/``) sample the parameters and hand over a
"work" array (see ``params.to_work``: uint8, uint16, float32 or float64; (H, W) or (H, W, C))
and, where values are computed rather than moved, its ``Levels`` (black and full scale).
Geometric kernels take a 3x3 matrix that maps input pixel centres to output pixel centres
(OpenCV's convention: the centre of the top-left pixel is (0, 0)).

OpenCV's thread count is left alone here; the loader's workers set it to 1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import cv2
import numpy as np

from ...resample import CV_CHANNELS, in_channel_groups, resized
from ..params import UNIT, Levels, clamp, convert, inside

try:  # optional: a byte lookup table 2-3x faster than cv2.LUT (albumentations brings it along)
    import stringzilla as _stringzilla
except ImportError:  # pragma: no cover - depends on the environment
    _stringzilla = None

# PIL's 3x3 ImageFilter.SHARPEN and ImageFilter.SMOOTH, normalised to sum 1; the ops blend
# them with the identity by ``amount`` so amount=1 is PIL's exact kernel and 0 is a no-op.
SHARPEN = np.array([[-2, -2, -2], [-2, 32, -2], [-2, -2, -2]], np.float32) / 16.0
SMOOTH = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13.0
_IDENTITY3 = np.zeros((3, 3), np.float32)
_IDENTITY3[1, 1] = 1.0
_LEVELS = np.arange(256, dtype=np.float32)  # the byte values, for building lookup tables
_LEVELS.setflags(write=False)
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601, the weights PIL uses for convert("L")


@functools.lru_cache(maxsize=32)
def grid(h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Identity remap grids (x, y) for an (h, w) image, float32, read-only and cached."""
    ys, xs = np.indices((h, w), dtype=np.float32)
    xs.setflags(write=False)
    ys.setflags(write=False)
    return xs, ys


def blend_kernel(kernel: np.ndarray, amount: float) -> np.ndarray:
    """``(1 - amount) * identity + amount * kernel`` (3x3, float32)."""
    out: np.ndarray = np.float32(1.0 - amount) * _IDENTITY3 + np.float32(amount) * kernel
    return out


def warp(
    img: np.ndarray,
    matrix: np.ndarray,
    size: tuple[int, int],
    *,
    interp: int,
    border: int,
    fill: tuple[float, float, float, float],
) -> np.ndarray:
    """Warp by a 3x3 matrix (affine when the last row is [0, 0, 1]) to ``size``, the output's
    (height, width) (OpenCV takes (width, height))."""
    dsize = (size[1], size[0])
    if matrix[2, 0] == 0 and matrix[2, 1] == 0 and matrix[2, 2] == 1:
        return _resampled(img, border, interp, lambda part, b: cv2.warpAffine(
            part, matrix[:2], dsize, flags=interp, borderMode=b, borderValue=fill))
    return _resampled(img, border, interp, lambda part, b: cv2.warpPerspective(
        part, matrix, dsize, flags=interp, borderMode=b, borderValue=fill))


def shift_columns(
    img: np.ndarray,
    shifts: np.ndarray,
    *,
    interp: int,
    border: int,
    fill: tuple[float, float, float, float],
) -> np.ndarray:
    """Shift column ``x`` down by ``shifts[x]`` pixels, all columns in one ``cv2.remap``.

    With integer shifts, nearest interpolation and ``BORDER_WRAP`` this equals
    ``out[:, x] = np.roll(img[:, x], shifts[x])`` for every column.
    """
    h, w = img.shape[:2]
    xs, ys = grid(h, w)
    map_y = ys - shifts.astype(np.float32)[None, :]
    return _resampled(img, border, interp, lambda part, b: cv2.remap(
        part, xs, map_y, interp, borderMode=b, borderValue=fill))


def displace(
    img: np.ndarray,
    dx: np.ndarray,
    dy: np.ndarray,
    *,
    interp: int,
    border: int,
    fill: tuple[float, float, float, float],
) -> np.ndarray:
    """Sample the input at (x + dx, y + dy) for every output pixel (one ``cv2.remap``)."""
    h, w = img.shape[:2]
    xs, ys = grid(h, w)
    map_x, map_y = xs + dx, ys + dy
    return _resampled(img, border, interp, lambda part, b: cv2.remap(
        part, map_x, map_y, interp, borderMode=b, borderValue=fill))


def _resampled(img: np.ndarray, border: int, interp: int,
               sample: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """``sample(img, border)`` within OpenCV's limits.

    Cubic interpolation takes at most 4 channels, the others 128: more go through in groups.
    A reflected border along a 1-pixel axis makes OpenCV's cubic warps loop forever; there it
    is the same image as a replicated border, which is used instead.
    """
    if border == cv2.BORDER_REFLECT_101 and min(img.shape[:2]) < 2:
        border = cv2.BORDER_REPLICATE
    cubic = interp in (cv2.INTER_CUBIC, cv2.INTER_LANCZOS4)
    return in_channel_groups(img, 4 if cubic else CV_CHANNELS, lambda part: sample(part, border))


def gaussian_blur(img: np.ndarray, sigma: float, size: int | None = None) -> np.ndarray:
    """Gaussian blur with standard deviation ``sigma`` pixels (kernel radius 3 sigma, or
    ``size`` pixels a side, normalized).

    ``sepFilter2D`` with an explicit kernel: about 2x faster on uint8 than ``GaussianBlur``,
    whose bit-exact fixed-point path is slow on small images.
    """
    k = cv2.getGaussianKernel(size or 2 * math.ceil(3 * sigma) + 1, sigma, cv2.CV_32F)
    reach = max(img.shape[:2])  # taps past the image's size read its replicated edge alone:
    if len(k) > 2 * reach + 1:  # their weights go to the outermost kept ones (1.8 million
        tail = (len(k) - 2 * reach - 1) // 2  # taps for sigma=3e5 summed uint8 to black)
        kept = k[tail:len(k) - tail].copy()
        kept[0] += k[:tail].sum()
        kept[-1] += k[len(k) - tail:].sum()
        k = kept
    return in_channel_groups(img, CV_CHANNELS, lambda part: cv2.sepFilter2D(
        part, -1, k, k, borderType=cv2.BORDER_REPLICATE))


def filter3x3(img: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Correlate with a 3x3 kernel; edges replicate (uint8 results saturate)."""
    return in_channel_groups(img, CV_CHANNELS, lambda part: cv2.filter2D(
        part, -1, kernel, borderType=cv2.BORDER_REPLICATE))


def gray_mean(img: np.ndarray) -> float:
    """Mean luma (PIL's ``convert("L")`` weights for 3 or 4 channels; cv2.mean takes <= 4)."""
    return _luma(cv2.mean(img), img.shape[2] if img.ndim == 3 else 1)


def _luma(means: Sequence[float], channels: int) -> float:
    """One gray level from per-channel means: luma weights for 3+ channels, else their mean."""
    if channels >= 3:
        return float(sum(m * k for m, k in zip(means[:3], LUMA)))
    return float(sum(means[:channels]) / channels)  # not np.mean: ~2 us on a short list


def linear(img: np.ndarray, gain: float, offset: float, scale: Levels, *,
           mine: bool = False) -> np.ndarray:
    """``gain * img + offset``, saturated to ``scale`` (a lookup table for uint8). ``mine``:
    ``img`` is a temporary of the caller's that may be overwritten."""
    if img.dtype == np.uint8:
        table = _LEVELS * np.float32(gain)
        table += np.float32(offset)
        np.rint(table, out=table)
        return lut(img, table.clip(scale.lo, scale.hi, out=table).astype(np.uint8), mine=mine)
    out = img if mine and img.dtype == np.float32 else img.astype(np.float32)
    out *= np.float32(gain)
    out += np.float32(offset)
    return _saturated(out, img.dtype, scale)


def brightness_contrast(img: np.ndarray, b: float, c: float, scale: Levels) -> np.ndarray:
    """Brightness by ``b`` (black fixed), then contrast by ``c`` about the brightened image's
    mean gray (rounded to a level for integer images), each step saturated, as
    ``PIL.ImageEnhance`` does. Channels past the first three (alpha, near infrared, more
    bands), and both of two (a microscope's stains), each turn about their own mean: one
    gray for all would pull every band toward the others' level."""
    bright = linear(img, b, (1.0 - b) * scale.lo, scale)
    if img.ndim == 3 and img.shape[2] > 1 and img.shape[2] != 3:
        return _banded_contrast(bright, c, scale)
    mean = gray_mean(bright)
    if img.dtype.kind in "ui":
        mean = float(int(mean + 0.5))  # PIL rounds the mean to a gray level
    return linear(bright, c, (1.0 - c) * mean, scale, mine=True)


def _banded_contrast(bright: np.ndarray, c: float, scale: Levels) -> np.ndarray:
    """Contrast by ``c``, the first three channels (of three or more) about their gray and
    each other one about its own mean: one pass, with an offset per channel (a table per
    channel for uint8)."""
    channels = bright.shape[2]
    means = cv2.mean(bright)[:channels] if channels <= 4 else \
        bright.reshape(-1, channels).mean(axis=0, dtype=np.float64)  # (float32 sums drift)
    colour = 3 if channels >= 3 else 0
    pivots = np.array([_luma(means, 3)] * colour + [float(m) for m in means[colour:]])
    if bright.dtype.kind in "ui":
        pivots = np.floor(pivots + 0.5)  # (as the gray's: levels are never negative)
    offsets = ((1.0 - c) * pivots).astype(np.float32)
    if bright.dtype == np.uint8 and channels <= 4:  # (OpenCV's table: one per channel)
        table = _LEVELS[:, None] * np.float32(c) + offsets
        np.rint(table, out=table)
        table = table.clip(scale.lo, scale.hi, out=table).astype(np.uint8)
        return cv2.LUT(bright, table.reshape(1, 256, channels))
    out = bright if bright.dtype == np.float32 else bright.astype(np.float32)
    out *= np.float32(c)
    out += offsets
    return _saturated(out, bright.dtype, scale)


def _saturated(out: np.ndarray, dtype: np.dtype, scale: Levels) -> np.ndarray:
    """A float32 result clamped to ``scale`` in ``dtype`` (integers rounded)."""
    if dtype.kind in "ui":
        np.rint(out, out=out)
    out = clamp(out, scale)
    return out if out.dtype == dtype else convert(out, dtype)


def lut(img: np.ndarray, table: np.ndarray, *, mine: bool = False) -> np.ndarray:
    """Apply a 256-entry uint8 lookup table to every channel (the same bytes either way).
    ``mine``: ``img`` is a contiguous temporary of the caller's, rewritten in place."""
    if _stringzilla is not None:
        # ours to write: one copy, contiguous, unless the caller's temporary is
        out: np.ndarray = img if mine and img.flags.c_contiguous else np.array(img, order="C")
        _stringzilla.translate(memoryview(out.reshape(-1)),  # type: ignore[arg-type]
                               memoryview(table), inplace=True)  # type: ignore[arg-type]
        return out
    if img.ndim == 3 and img.shape[2] > 4:
        out = table[img]
        return out
    return cv2.LUT(img, table)


@functools.lru_cache(maxsize=16)
def _unit_levels(lo: float, hi: float) -> np.ndarray:
    """The 256 byte values clamped to [lo, hi] and scaled to [0, 1] (float64, read-only)."""
    unit = (np.clip(np.arange(256, dtype=np.float64), lo, hi) - lo) / (hi - lo)
    unit.setflags(write=False)
    return unit


def normal_noise(shape: tuple[int, ...], sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Zero-mean float32 normal noise of standard deviation ``sigma``, a function of ``rng``.

    OpenCV's generator, seeded from one draw of ``rng``, is ~3x faster than numpy's for an
    image. Its first value after seeding is poorly spread (it follows the seed), so one extra
    value is drawn and dropped.
    """
    cv2.setRNGSeed(int(rng.integers(0, 2**31)))
    out = np.empty(math.prod(shape) + 1, np.float32)
    cv2.randn(out, 0.0, float(sigma))  # type: ignore[call-overload]
    return out[1:].reshape(shape)


def gamma(img: np.ndarray, g: float, scale: Levels) -> np.ndarray:
    """``x ** g`` on the range scaled to [0, 1] (a lookup table for uint8)."""
    if img.dtype == np.uint8:
        table = np.power(_unit_levels(scale.lo, scale.hi), g)
        table *= scale.span
        table += scale.lo
        return lut(img, np.rint(table, out=table).astype(np.uint8))
    scaled = (scale.lo, scale.hi) != (0.0, 1.0)  # x - 0 and x * 1 are exact: skip them
    power: Callable[[np.ndarray], np.ndarray] = lambda part: cv2.pow(part, g)  # noqa: E731
    if not scaled and img.dtype == np.float32 and inside(img, UNIT):
        return in_channel_groups(img, CV_CHANNELS, power)  # the common case: one pass, new
    unit = np.array(img, np.float32, order="C")  # ours, and laid out as cv2.pow's dst needs
    if scaled:
        unit -= np.float32(scale.lo)
        unit *= np.float32(1.0 / scale.span)
    unit = clamp(unit, UNIT)  # a negative's power is NaN
    out = in_channel_groups(unit, CV_CHANNELS, power) if unit.ndim == 3 and \
        unit.shape[2] > CV_CHANNELS else cv2.pow(unit, g, dst=unit)
    if scaled:
        out *= np.float32(scale.span)
        out += np.float32(scale.lo)
    # Powers of [0, 1] stay inside, up to rounding, which the op's restore() clamps.
    return out if img.dtype.kind == "f" else _saturated(out, img.dtype, scale)


def add_noise(img: np.ndarray, noise: np.ndarray, scale: Levels) -> np.ndarray:
    """Add float32 ``noise`` (already in the image's units) and saturate to ``scale``."""
    out = img.astype(np.float32)
    out += noise
    return _saturated(out, img.dtype, scale)


def erase(img: np.ndarray, boxes: list[tuple[int, int, int, int]], value: float) -> np.ndarray:
    """Fill each (y0, x0, y1, x1) box with the pixel value ``value``."""
    out = img.copy()
    for y0, x0, y1, x1 in boxes:
        out[y0:y1, x0:x1] = value
    return out


def resize(img: np.ndarray, height: int, width: int, interp: int) -> np.ndarray:
    """``cv2.resize`` to (height, width); nearest takes the pixel under each output pixel's
    centre (``resample.for_resize``)."""
    return resized(img, height, width, interp)


_NUMPY_BORDERS = {cv2.BORDER_CONSTANT: "constant", cv2.BORDER_REFLECT_101: "reflect",
                  cv2.BORDER_REPLICATE: "edge", cv2.BORDER_WRAP: "wrap"}  # (the same pixels)
_CV_DTYPES = frozenset({"uint8", "int8", "uint16", "int16", "int32", "float32", "float64"})


def pad(img: np.ndarray, pixels: int, border: int) -> np.ndarray:
    """``pixels`` more rows and columns on each side, filled as OpenCV's ``border`` says
    (constant: 0); by numpy's ``pad`` (20 times slower) for dtypes OpenCV has none of."""
    if img.dtype.name not in _CV_DTYPES:
        spread = ((pixels, pixels),) * 2 + ((0, 0),) * (img.ndim - 2)
        padded: np.ndarray = np.pad(img, spread, mode=_NUMPY_BORDERS[border])  # type: ignore[call-overload]
        return padded
    out = in_channel_groups(img, CV_CHANNELS, lambda part: cv2.copyMakeBorder(
        part, pixels, pixels, pixels, pixels, border, value=0))
    return out if out.ndim == img.ndim else out[:, :, None]


def flip(img: np.ndarray, horizontal: bool) -> np.ndarray:
    """Mirror left-right (``horizontal``) or top-bottom."""
    out = in_channel_groups(img, CV_CHANNELS, lambda part: cv2.flip(part, 1 if horizontal else 0))
    return out[:, :, None] if img.ndim == 3 and out.ndim == 2 else out
