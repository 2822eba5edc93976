"""Colour kernels: pure functions of (array, drawn parameters) -> array.

Owns the pixel work of ``colour.py``'s ops. Like ``cv.py`` it draws nothing and validates
nothing. Most kernels work on a "unit" image: float32 in [0, 1], the op's value range mapped
onto it by :func:`to_unit` and back by :func:`from_unit`, so one kernel serves uint8, uint16
and float data. Kernels that mirror a Keras layer say which, and follow its arithmetic (the
reference tests compare them pixel for pixel).
"""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np

from ..params import Levels
from ...resample import CV_CHANNELS
from .cv import LUMA, lut

_BYTE = Levels(0.0, 255.0)
_UNIT_BYTES = np.arange(256, dtype=np.float32) / np.float32(255.0)
_UNIT_BYTES.setflags(write=False)


def to_unit(img: np.ndarray, scale: Levels) -> np.ndarray:
    """``img`` as float32 in [0, 1] (a new array): ``(x - lo) / span``."""
    out = img.astype(np.float32)
    if (scale.lo, scale.hi) != (0.0, 1.0):
        out -= np.float32(scale.lo)
        out *= np.float32(1.0 / scale.span)
    return out


def from_unit(unit: np.ndarray, dtype: np.dtype, scale: Levels) -> np.ndarray:
    """Undo :func:`to_unit` into ``dtype``: clipped to [0, 1], integers rounded."""
    out = np.clip(unit, 0.0, 1.0, out=unit if unit.flags.writeable else None)
    if (scale.lo, scale.hi) != (0.0, 1.0):
        out *= np.float32(scale.span)
        out += np.float32(scale.lo)
    if dtype.kind in "ui":
        np.rint(out, out=out)
    return out.astype(dtype, copy=False)


def pointwise(img: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], scale: Levels
              ) -> np.ndarray:
    """``fn`` (a map of unit values) on every pixel: a 256-entry table for uint8 bytes."""
    if img.dtype == np.uint8 and scale == _BYTE:
        table = np.rint(np.clip(fn(_UNIT_BYTES.copy()), 0.0, 1.0) * 255.0).astype(np.uint8)
        return lut(img, table)
    return from_unit(fn(to_unit(img, scale)), img.dtype, scale)


def via_bytes(img: np.ndarray, scale: Levels, fn: Callable[[np.ndarray], np.ndarray]
              ) -> np.ndarray:
    """``fn``, a kernel of uint8 images, on ``img`` quantized to 256 levels of ``scale``;
    the result comes back in ``img``'s dtype and range."""
    if img.dtype == np.uint8 and scale == _BYTE:
        return fn(img)
    byte = from_unit(to_unit(img, scale), np.dtype(np.uint8), _BYTE)
    return from_unit(to_unit(fn(byte), _BYTE), img.dtype, scale)


def on_rgb(unit: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``fn`` on the first three channels of a unit image, other channels kept."""
    rgb = np.ascontiguousarray(unit[:, :, :3])
    if unit.shape[2] == 3:
        return fn(rgb)
    out = unit.copy()
    out[:, :, :3] = fn(rgb)
    return out


def hsv_adjust(rgb: np.ndarray, hue_shift: float, saturation_gain: float) -> np.ndarray:
    """Shift hue by ``hue_shift`` turns (wrapping) and scale saturation by
    ``saturation_gain`` (clipped to [0, 1]): Keras' RandomHue / RandomSaturation."""
    # float HSV: H in degrees [0, 360), S and V in [0, 1]
    hsv: np.ndarray = cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV)
    if hue_shift:
        h = hsv[:, :, 0]
        h += np.float32(hue_shift * 360.0)
        np.mod(h, np.float32(360.0), out=h)
    if saturation_gain != 1.0:
        s = hsv[:, :, 1]
        s *= np.float32(saturation_gain)
        np.clip(s, 0.0, 1.0, out=s)
    out: np.ndarray = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)
    return out


def gray(rgb: np.ndarray) -> np.ndarray:
    """Luma of an RGB unit image, (H, W) float32 (ITU-R 601 weights, as Keras and PIL)."""
    r, g, b = LUMA
    out: np.ndarray = cv2.transform(rgb, np.array([[r, g, b]], np.float32))
    return out


def to_gray(rgb: np.ndarray) -> np.ndarray:
    """The luma in all three channels: ``degenerate(rgb, 1.0)`` in one merge of the gray."""
    g = gray(rgb)
    out: np.ndarray = cv2.merge([g, g, g])
    return out


def degenerate(rgb: np.ndarray, amount: float) -> np.ndarray:
    """Blend towards the image's gray by ``amount`` (0: unchanged, 1: gray), as Keras'
    RandomColorDegeneration."""
    g = gray(rgb)[:, :, None]
    out: np.ndarray = rgb + np.float32(amount) * (g - rgb)
    return out


def brightness(unit: np.ndarray, delta: float) -> np.ndarray:
    """Add ``delta`` (a fraction of the range), as Keras' RandomBrightness."""
    unit += np.float32(delta)
    return unit


def contrast(unit: np.ndarray, factor: float) -> np.ndarray:
    """``(x - mean) * factor + mean`` with each channel's own mean, as Keras' RandomContrast.

    Up to 4 channels (OpenCV's limit) it is one pass, ``factor * x + (1 - factor) * mean``
    per channel (``cv2.mean``, ``cv2.transform``): about 2 ms -> 0.3 ms at 224x224x3 against
    numpy's float64 axis mean; the same values up to float32 rounding.
    """
    channels = 1 if unit.ndim == 2 else unit.shape[2]
    if channels > 4:
        mean = unit.mean(axis=(0, 1), keepdims=True, dtype=np.float64).astype(np.float32)
        unit -= mean
        unit *= np.float32(factor)
        unit += mean
        return unit
    means = np.array(cv2.mean(unit)[:channels])
    m = np.zeros((channels, channels + 1))
    m[np.arange(channels), np.arange(channels)] = factor
    m[:, channels] = (1.0 - factor) * means
    out: np.ndarray = cv2.transform(unit.reshape(unit.shape[0], -1, channels), m)
    return out.reshape(unit.shape)


def solarize(unit: np.ndarray, threshold: float, addition: float) -> np.ndarray:
    """Add ``addition``, clip, then invert values at or above ``threshold`` (Keras'
    Solarization, in fractions of the range)."""
    out = np.clip(unit + np.float32(addition), 0.0, 1.0)
    return np.where(out < np.float32(threshold), out, np.float32(1.0) - out)


def posterize(unit: np.ndarray, bits: int) -> np.ndarray:
    """Keep the top ``bits`` bits of the 8-bit value (truncated, as Keras casts to uint8)."""
    q = (unit * np.float32(255.0)).astype(np.uint8)
    shift = 8 - bits
    out: np.ndarray = ((q >> shift) << shift).astype(np.float32) / np.float32(255.0)
    return out


def equalize(unit: np.ndarray, bins: int) -> np.ndarray:
    """Histogram equalization per channel over ``bins`` bins on the 0..255 scale, as Keras'
    Equalization (a channel with one occupied bin is left as it is)."""
    out = np.empty(unit.shape, np.float32)  # C order, so its reshape below is a view
    flat = unit.reshape(-1, unit.shape[2]) if unit.ndim == 3 else unit.reshape(-1, 1)
    dest = out.reshape(flat.shape)
    for c in range(flat.shape[1]):
        x = flat[:, c] * np.float32(255.0)
        hist = np.bincount(np.clip((x * (bins / 255.0)).astype(np.int64), 0, bins - 1),
                           minlength=bins)
        if np.count_nonzero(hist) <= 1:
            dest[:, c] = flat[:, c]
            continue
        cdf = np.cumsum(hist)
        cdf_min = cdf[np.nonzero(cdf)[0][0]]
        table = np.clip(np.round((cdf - cdf_min) * 255.0 / max(cdf[-1] - cdf_min, 1)), 0, 255)
        index = np.clip((x * ((bins - 1) / 255.0)).astype(np.int64), 0, bins - 1)
        dest[:, c] = table[index] / 255.0
    return out


def _planes(img: np.ndarray) -> list[np.ndarray]:
    """An (H, W, C) image's channels, each its own array (``cv2.split``, within its 128)."""
    if img.shape[2] <= CV_CHANNELS:
        return list(cv2.split(img))
    return [np.ascontiguousarray(img[:, :, c]) for c in range(img.shape[2])]


def _merged(planes: list[np.ndarray]) -> np.ndarray:
    """``_planes`` stacked again (``cv2.merge``, within its 128)."""
    out: np.ndarray = cv2.merge(planes) if len(planes) <= CV_CHANNELS else np.dstack(planes)
    return out


def equalize_pil(img8: np.ndarray) -> np.ndarray:
    """PIL's ``ImageOps.equalize`` (and torchvision's) on each channel of a uint8 image:
    a table from the histogram's cumulative sum in steps of (total - last level's count)
    / 255; a channel whose step is 0 is left as it is. OpenCV counts and looks up (a
    fifth of numpy's ``bincount`` and fancy indexing); the tables are PIL's integers."""
    planes = [img8] if img8.ndim == 2 else _planes(img8)
    tables: list[np.ndarray | None] = []
    for plane in planes:
        hist = _level_counts(plane)
        step = (hist.sum() - hist[np.flatnonzero(hist)[-1]]) // 255
        tables.append(None if step == 0 else
                      np.concatenate([[0], (np.cumsum(hist) + step // 2) // step])[:256])
    return _per_plane(img8, tables, planes if img8.ndim == 3 else None)


def _level_counts(plane: np.ndarray) -> np.ndarray:
    """How many pixels of a uint8 plane hold each of its 256 levels (int64): OpenCV's
    ``calcHist`` (a fifth of ``np.bincount``'s time), which counts in float32, so numpy's
    count past 2^24 pixels, where float32 would round."""
    if plane.size >= 1 << 24:
        return np.bincount(plane.ravel(), minlength=256)
    return cv2.calcHist([plane], [0], None, [256], [0, 256]).ravel().astype(np.int64)


def auto_contrast(unit: np.ndarray) -> np.ndarray:
    """Stretch each channel's min..max to the full range, as Keras' AutoContrast (a flat
    channel is left as it is)."""
    planes = [unit] if unit.ndim == 2 else _planes(unit)  # numpy's axis min is ~5x slower
    extremes = np.array([cv2.minMaxLoc(p)[:2] for p in planes], np.float32)
    shape = (1, 1, -1) if unit.ndim == 3 else (1, 1)
    low, high = extremes[:, 0].reshape(shape), extremes[:, 1].reshape(shape)
    span = high - low
    still = span == 0
    if unit.ndim == 3 and unit.shape[2] <= 4:  # one cv2.transform pass, as ``contrast``
        c = unit.shape[2]
        gain = np.where(still, 1.0, 1.0 / np.where(still, 1.0, span.astype(np.float64)))
        m = np.zeros((c, c + 1))
        m[np.arange(c), np.arange(c)] = gain.ravel()
        m[:, c] = np.where(still, 0.0, -low.astype(np.float64) * gain).ravel()
        moved: np.ndarray = cv2.transform(unit, m)
        return moved.reshape(unit.shape)
    out: np.ndarray = (unit - low) / np.where(still, np.float32(1.0), span)
    return np.where(still, unit, out)


def clahe(unit: np.ndarray, clip_limit: float, grid: tuple[int, int]) -> np.ndarray:
    """Contrast-limited adaptive histogram equalization of each channel, as Keras' CLAHE
    layer computes it: 256-level histograms per tile (the image padded symmetrically to
    whole tiles), clipped at ``clip_limit`` times the mean count with the excess spread
    evenly, and each pixel's four nearest tile mappings blended bilinearly."""
    img = unit[:, :, None] if unit.ndim == 2 else unit
    h, w, c = img.shape
    gh, gw = grid
    th, tw = -(-h // gh), -(-w // gw)
    padded = np.pad(img * np.float32(255.0), ((0, th * gh - h), (0, tw * gw - w), (0, 0)),
                    mode="symmetric")
    pixels = np.clip(padded, 0, 255).astype(np.int64)
    tiles = (np.arange(th * gh)[:, None] // th) * gw + np.arange(tw * gw)[None, :] // tw
    index = (tiles[:, :, None] * c + np.arange(c)) * 256 + pixels
    hist = np.bincount(index.ravel(), minlength=gh * gw * c * 256).astype(np.float32)
    hist = hist.reshape(gh, gw, c, 256)
    if clip_limit > 0:
        clipped = np.minimum(hist, np.float32(clip_limit * th * tw / 256.0))
        hist = clipped + (hist - clipped).sum(axis=-1, keepdims=True) / np.float32(256.0)
    cdf = np.cumsum(hist, axis=-1)
    low = cdf.min(axis=-1, keepdims=True)
    span = np.float32(th * tw) - low
    cdf = np.clip((cdf - low) * np.float32(255.0) / np.where(span == 0, 1, span), 0, 255)
    cdf = np.pad(cdf, ((1, 1), (1, 1), (0, 0), (0, 0)), mode="edge").ravel()
    (y0, y1, wy), (x0, x1, wx) = _corners(th * gh, th, gh), _corners(tw * gw, tw, gw)
    # flat positions in cdf: ((tile row * (gw + 2) + tile column) * c + channel) * 256 + level
    level = (np.arange(c, dtype=np.int32) * 256 + pixels.astype(np.int32)).astype(np.int32)
    rows0, rows1 = (y0 * (gw + 2))[:, None, None], (y1 * (gw + 2))[:, None, None]
    cols0, cols1 = x0[None, :, None], x1[None, :, None]
    wy, wx = wy[:, None, None], wx[None, :, None]
    top = _at(cdf, rows0 + cols0, c, level) * (1 - wx) + _at(cdf, rows0 + cols1, c, level) * wx
    bottom = (_at(cdf, rows1 + cols0, c, level) * (1 - wx)
              + _at(cdf, rows1 + cols1, c, level) * wx)
    out: np.ndarray = ((top * (1 - wy) + bottom * wy)[:h, :w] / np.float32(255.0)
                       ).astype(np.float32)
    return out[:, :, 0] if unit.ndim == 2 else out


def _at(cdf: np.ndarray, tile: np.ndarray, channels: int, level: np.ndarray) -> np.ndarray:
    """Each pixel's mapped value in one tile's table (``tile``: flat tile index per pixel)."""
    picked: np.ndarray = np.take(cdf, tile.astype(np.int32) * (channels * 256) + level)
    return picked


def _corners(size: int, tile: int, tiles: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each pixel row (or column) of a padded image: the two nearest tile centres in
    the edge-padded tile grid, and the weight of the second."""
    pos = (np.arange(size, dtype=np.float32) - np.float32(tile / 2.0)) / np.float32(tile) + 1
    first = np.floor(pos)
    weight = (pos - first).astype(np.float32)
    return (np.clip(first, 0, tiles + 1).astype(np.int64),
            np.clip(first + 1, 0, tiles + 1).astype(np.int64), weight)


def jpeg(img8: np.ndarray, quality: int) -> np.ndarray:
    """Encode as JPEG at ``quality`` and decode: uint8 gray or RGB (other channel counts
    are coded one channel at a time)."""
    channels = 1 if img8.ndim == 2 else img8.shape[2]
    if channels not in (1, 3):
        return np.dstack([jpeg(np.ascontiguousarray(img8[:, :, c]), quality)
                          for c in range(channels)])
    # OpenCV reads three channels as BGR: swap so the chroma planes are the real ones
    src = cv2.cvtColor(img8, cv2.COLOR_RGB2BGR) if channels == 3 else img8
    ok, buf = cv2.imencode(".jpg", src, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 gray or 3-channel image
        raise RuntimeError("cv2.imencode('.jpg') failed")
    flag = cv2.IMREAD_COLOR if channels == 3 else cv2.IMREAD_GRAYSCALE
    out = cv2.imdecode(buf, flag)
    if out is None:  # pragma: no cover - a buffer OpenCV just wrote always decodes
        raise RuntimeError("cv2.imdecode of a JPEG buffer failed")
    return cv2.cvtColor(out, cv2.COLOR_BGR2RGB) if channels == 3 else out


# -- 8-bit kernels: uint8 images in 0..255, the common case, without the float round trip ---
# Each does what its float kernel above does, in OpenCV's 8-bit arithmetic or through a lookup
# table; tests/unit/test_ops_colour_bytes.py states how far each lands from the float kernel.

_LEVELS = np.arange(256)


def _table(values: np.ndarray) -> np.ndarray:
    """A 256-entry uint8 lookup table: ``values`` rounded and saturated."""
    table: np.ndarray = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    return table


def _per_plane(img8: np.ndarray, tables: list[np.ndarray | None],
               planes: list[np.ndarray] | None = None) -> np.ndarray:
    """Each channel through its own table (None: kept). One table for all is one ``lut``;
    else the planes (``planes``: ``_planes(img8)`` made already, then rewritten) are each
    looked up in place and merged: 3x faster than ``cv2.LUT`` with a table per channel (70
    against 214 µs at 224x224x3)."""
    if img8.ndim == 2 or all(t is tables[0] for t in tables):
        return img8 if tables[0] is None else lut(img8, _table(tables[0]))
    planes = _planes(img8) if planes is None else planes
    for c, table in enumerate(tables):
        if table is not None:
            planes[c] = lut(planes[c], _table(table), mine=True)
    return _merged(planes)


def hsv_adjust_bytes(rgb8: np.ndarray, hue_shift: float, saturation_gain: float
                     ) -> np.ndarray:
    """``hsv_adjust`` on uint8 RGB in OpenCV's 8-bit HSV (hue in 256 steps of a turn), hue
    and saturation each a table: 3x faster than the float kernel, a few levels from it."""
    hsv = cv2.cvtColor(rgb8, cv2.COLOR_RGB2HSV_FULL)
    shifted = (_LEVELS + round(hue_shift * 256.0)) % 256
    hsv = _per_plane(hsv, [None if shifted[1] == 1 else shifted,
                           None if saturation_gain == 1.0 else _LEVELS * saturation_gain, None])
    out: np.ndarray = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL)
    return out


def to_gray_bytes(rgb8: np.ndarray) -> np.ndarray:
    """``to_gray`` on uint8 RGB: OpenCV's fixed-point luma (the same ITU-R 601 weights)."""
    out: np.ndarray = cv2.cvtColor(cv2.cvtColor(rgb8, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    return out


def degenerate_bytes(rgb8: np.ndarray, amount: float) -> np.ndarray:
    """``degenerate`` on uint8 RGB: one ``cv2.addWeighted`` of the image and its gray."""
    out: np.ndarray = cv2.addWeighted(rgb8, 1.0 - amount, to_gray_bytes(rgb8), amount, 0.0)
    return out


def brightness_bytes(img8: np.ndarray, delta: float) -> np.ndarray:
    """``brightness`` on uint8: a table adding ``delta`` of the range, saturated."""
    table = _LEVELS + delta * 255.0
    return _per_plane(img8, [table] * (1 if img8.ndim == 2 else img8.shape[2]))


def contrast_bytes(img8: np.ndarray, factor: float) -> np.ndarray:
    """``contrast`` on uint8: each channel's table about its own mean."""
    channels = 1 if img8.ndim == 2 else img8.shape[2]
    means = cv2.mean(img8)[:channels] if channels <= 4 else \
        img8.reshape(-1, channels).mean(axis=0)
    return _per_plane(img8, [factor * _LEVELS + (1.0 - factor) * m for m in means])


def equalize_bytes(img8: np.ndarray) -> np.ndarray:
    """``equalize`` with 256 bins on uint8: each level is its own bin, so each channel is one
    table from its histogram (a channel with one occupied level kept)."""
    planes = [img8] if img8.ndim == 2 else _planes(img8)
    tables: list[np.ndarray | None] = []
    for plane in planes:
        hist = _level_counts(plane).astype(np.float32)  # (the float arithmetic as before)
        if np.count_nonzero(hist) <= 1:
            tables.append(None)
            continue
        cdf = np.cumsum(hist)
        cdf_min = cdf[np.flatnonzero(cdf)[0]]
        tables.append(np.round((cdf - cdf_min) * 255.0 / max(cdf[-1] - cdf_min, 1)))
    return _per_plane(img8, tables, planes if img8.ndim == 3 else None)


def auto_contrast_bytes(img8: np.ndarray) -> np.ndarray:
    """``auto_contrast`` on uint8: each channel's min..max stretched by a table."""
    planes = [img8] if img8.ndim == 2 else _planes(img8)
    tables: list[np.ndarray | None] = []
    for plane in planes:
        low, high = cv2.minMaxLoc(plane)[:2]
        tables.append(None if high == low else (_LEVELS - low) * (255.0 / (high - low)))
    return _per_plane(img8, tables, planes if img8.ndim == 3 else None)
