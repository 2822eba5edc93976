"""Every resize's filters, and the exact resample of a window of pixels.

Why: a resize happens in many places (the ``resize`` op, crops, a source's ``image_size``,
a decode-time crop), and each must pick the same filter for a name and land on the same
pixels. This module holds the one table of Keras', PIL's and OpenCV's filter names
(``FILTERS``: ``pil_filter``, ``cv_flag``, ``for_resize``), OpenCV's channel limits
(``in_channel_groups``), the geometry of a resize that keeps the aspect ratio
(``aspect_window``, ``fitted``: the ``resize`` op and a source's ``crop_to_aspect_ratio`` /
``pad_to_aspect_ratio``), and ``resize_box``, the resample of a window that a window cut from
a decoded array and one decoded alone (``deferred.Undecoded``, ``after_dct``) both take.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

Window = tuple[float, float, float, float]  # (top, left, height, width) in the image's pixels

# Keras' interpolation names (and shmaug's "linear" / "cubic") -> (PIL's resampling filter,
# antialiased when shrinking, as torchvision's and timm's transforms on PIL images are;
# OpenCV's flag, which samples without widening). The one table of both libraries' names:
# every resize in shmaug looks its filter up here (``pil_filter``, ``cv_flag``).
FILTERS = {"bilinear": ("BILINEAR", "INTER_LINEAR"), "linear": ("BILINEAR", "INTER_LINEAR"),
           "nearest": ("NEAREST", "INTER_NEAREST"), "bicubic": ("BICUBIC", "INTER_CUBIC"),
           "cubic": ("BICUBIC", "INTER_CUBIC"), "area": ("BOX", "INTER_AREA"),
           "lanczos3": ("LANCZOS", "INTER_LANCZOS4"), "lanczos5": ("LANCZOS", "INTER_LANCZOS4")}
RESIZE_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "linear",
                  "cubic")
# How far each filter reaches beyond a pixel, in input pixels per output pixel (at least 1):
# the margin a window is decoded with so its edges resample as inside a whole image.
SUPPORT = {"BILINEAR": 1.0, "NEAREST": 0.5, "BICUBIC": 2.0, "BOX": 0.5, "LANCZOS": 3.0}

@dataclass(frozen=True, slots=True)
class Resample:
    """How a window becomes the output. ``interpolation``: one of ``RESIZE_INTERPOLATIONS``;
    ``within``: the filter reads only the window's pixels, as torchvision's ``resized_crop``
    (crop, then resize), or also those around it (False: a resize of the whole image, then a
    crop); ``antialias``: PIL's filters, widened when they shrink, as torchvision's and timm's
    transforms on PIL images, or OpenCV's, which sample without widening (False), as Keras'
    ``Resizing`` and ``tf.image.resize`` by default: 5-10 times faster when shrinking, and
    aliased there."""

    interpolation: str = "bilinear"
    within: bool = True
    antialias: bool = True


def pil_filter(interpolation: str) -> str:
    """PIL's name of the filter for ``interpolation`` (one of ``RESIZE_INTERPOLATIONS``)."""
    return FILTERS[interpolation][0]


def cv_flag(interpolation: str) -> int:
    """OpenCV's flag for ``interpolation`` (one of ``RESIZE_INTERPOLATIONS``)."""
    import cv2

    flag: int = getattr(cv2, FILTERS[interpolation][1])
    return flag


def for_resize(flag: int) -> int:
    """``flag`` (``cv_flag``'s) as ``cv2.resize`` takes it: its INTER_NEAREST floors each
    output pixel's position in the input, half a pixel off the nearest pixel that PIL,
    TensorFlow (Keras) and OpenCV's own warps take; INTER_NEAREST_EXACT takes that one."""
    import cv2

    return cv2.INTER_NEAREST_EXACT if flag == cv2.INTER_NEAREST else flag


CV_CHANNELS = 128  # the most channels OpenCV's Python binding takes in one array


def in_channel_groups(image: np.ndarray, group: int,
                      run: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``run(image)``, or where ``image`` has more than ``group`` channels (a hyperspectral
    cube's 200 bands, past OpenCV's 128; past 4, for its area and cubic filters), ``run`` on
    each ``group`` of them, stacked again: for kernels that treat every channel alike."""
    if image.ndim != 3 or image.shape[2] <= group:
        return run(image)
    parts = [run(image[:, :, i:i + group]) for i in range(0, image.shape[2], group)]
    return np.dstack([p if p.ndim == 3 else p[:, :, None] for p in parts])


def resized(image: np.ndarray, height: int, width: int, flag: int) -> np.ndarray:
    """``cv2.resize`` of ``image`` to (height, width) with ``flag`` (``cv_flag``'s), keeping
    its dimensions. OpenCV's area filter takes at most 4 channels where the ratio is not
    whole: more (multispectral bands) go through in groups of 4."""
    import cv2

    flag = for_resize(flag)
    out = in_channel_groups(image, 4 if flag == cv2.INTER_AREA else CV_CHANNELS,
                            lambda part: cv2.resize(part, (width, height), interpolation=flag))
    return out if out.ndim == image.ndim else out[:, :, None]


def aspect_window(height: int, width: int, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, rows, cols) of the largest centred window of ``size``'s aspect ratio in a
    ``height`` x ``width`` image (Keras' ``smart_resize``, ``crop_to_aspect_ratio``; in float32,
    as there)."""
    th, tw = np.float32(size[0]), np.float32(size[1])
    rows = max(min(height, int(np.float32(width) * th / tw)), 1)
    cols = max(min(width, int(np.float32(height) * tw / th)), 1)
    return (height - rows) // 2, (width - cols) // 2, rows, cols


def fitted(height: int, width: int, size: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, left, rows, cols) of a ``height`` x ``width`` image resized to fit inside ``size``
    with its aspect ratio, centred (``tf.image.resize_with_pad``, which Keras'
    ``pad_to_aspect_ratio`` runs; in float32, as there)."""
    h, w = np.float32(height), np.float32(width)
    th, tw = np.float32(size[0]), np.float32(size[1])
    ratio = max(w / tw, h / th)
    rows, cols = max(int(np.floor(h / ratio)), 1), max(int(np.floor(w / ratio)), 1)
    top = max(int(np.floor((th - h / ratio) / 2)), 0)
    left = max(int(np.floor((tw - w / ratio) / 2)), 0)
    return top, left, rows, cols


def margin(window: Window, size: tuple[int, int], how: Resample) -> int:
    """Pixels around ``window`` the resample reads (filter support times the shrink)."""
    if how.within:
        return 0
    shrink = max(window[2] / size[0], window[3] / size[1], 1.0) if how.antialias else 1.0
    return math.ceil(SUPPORT[pil_filter(how.interpolation)] * shrink) + 1


# What is left of a reduced resized crop after the DCT's scaling (less than 2x a side, more
# on the long side of an elongated window or at 1/8, or an enlargement) is OpenCV's: it
# resamples the window to k times the output on each axis, k the power of two that leaves at
# most ``SAMPLED_TO`` of a shrink (a shrink OpenCV's unwidened filter can take without
# aliasing to speak of), then averages each k x k block (a box over each output pixel: the
# antialiasing). A third of PIL's antialiased filter's time, and as close to it as the DCT's
# own scaling (``decode.REDUCED_CROP_QUALITY``). "nearest" samples once, at the output: an
# average of nearest samples would be a value no pixel holds.
SAMPLED_TO = 1.25


def dct_rest(how: Resample) -> Resample:
    """The filter ``after_dct`` resamples with (also what sets the margin a window is decoded
    with): OpenCV's ``how.interpolation`` ("area": bilinear, then the blocks averaged)."""
    name = "bilinear" if how.interpolation == "area" else how.interpolation
    return Resample(name, how.within, antialias=False)


def after_dct(pixels: np.ndarray, box: Window, size: tuple[int, int],
              how: Resample) -> np.ndarray:
    """``box`` of ``pixels`` (decoded at a reduced scale in the DCT, or in full where no
    eighth keeps it at least ``size``) at ``size``, antialiased as ``SAMPLED_TO`` says: the
    rest of a reduced resized crop."""
    rest = dct_rest(how)
    ky, kx = _blocks(box[2] / size[0]), _blocks(box[3] / size[1])
    if ky == kx == 1 or how.interpolation == "nearest":
        return _sampled(pixels, box, size, rest, warp=True)
    if pixels.dtype == np.float16:  # (OpenCV has no float16 kernels)
        return after_dct(pixels.astype(np.float32), box, size, how).astype(np.float16)
    return _block_means(_sampled(pixels, box, (ky * size[0], kx * size[1]), rest, warp=True),
                        ky, kx)


def _block_means(fine: np.ndarray, ky: int, kx: int) -> np.ndarray:
    """The mean of each ``ky`` x ``kx`` block of ``fine`` (powers of two), rounded once: OpenCV's
    area filter over the square part (SIMD for 2 x 2 blocks), then, for a 1 x 2 or 2 x 1 rest,
    its bilinear resize to exactly half a side, which averages each pair of pixels (a centre
    falls midway between two) as the area filter rounds them. The area filter takes 1 x 2
    blocks alone 7x slower here; any other rest, rare, it still takes."""
    import cv2

    for fy, fx in ((min(ky, kx),) * 2, (ky // min(ky, kx), kx // min(ky, kx))):
        if fy == fx == 1:
            continue
        flag = cv2.INTER_LINEAR if (fy, fx) in ((1, 2), (2, 1)) else cv2.INTER_AREA
        fine = resized(fine, fine.shape[0] // fy, fine.shape[1] // fx, flag)
    return fine


def _blocks(shrink: float) -> int:
    """The power of two that leaves at most ``SAMPLED_TO`` of ``shrink``."""
    k = 1
    while shrink > SAMPLED_TO * k:
        k *= 2
    return k


def resize_box(pixels: np.ndarray, box: Window, size: tuple[int, int],
               how: Resample = Resample()) -> np.ndarray:
    """``box`` (top, left, height, width; fractional) of ``pixels`` resampled to ``size`` as
    ``how`` says, for any dtype (PIL's float channels one by one)."""
    if not how.antialias:
        return _sampled(pixels, box, size, how)
    from PIL import Image

    if how.within:  # cut the box's pixels first, so the filter stops at its edges
        y0, x0 = int(math.floor(box[0])), int(math.floor(box[1]))
        y1 = int(math.ceil(box[0] + box[2] - 1e-9))
        x1 = int(math.ceil(box[1] + box[3] - 1e-9))
        pixels = pixels[y0:y1, x0:x1]
        box = (box[0] - y0, box[1] - x0, box[2], box[3])
    top, left, h, w = box
    resample = getattr(Image.Resampling, pil_filter(how.interpolation))
    region = (left, top, left + w, top + h)
    squeeze = pixels.ndim == 2
    work = pixels[:, :, None] if squeeze else pixels
    if work.dtype == np.uint8:  # three channels at a time as RGB, the rest one by one as L:
        parts = []  # never RGBA, which PIL premultiplies by the 4th (a dark NIR band erased
        for c in _byte_groups(work.shape[2]):  # the colour under it, by up to 113 levels)
            im = Image.fromarray(np.ascontiguousarray(work[:, :, c] if isinstance(c, int)
                                                      else work[:, :, c[0]:c[1]]))
            part = np.asarray(im.resize((size[1], size[0]), resample, box=region))
            parts.append(part if part.ndim == 3 else part[:, :, None])
        out = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=2)
    else:
        planes = [np.asarray(Image.fromarray(np.ascontiguousarray(work[:, :, c], np.float32))
                             .resize((size[1], size[0]), resample, box=region))
                  for c in range(work.shape[2])]
        out = np.stack(planes, axis=2)
        if work.dtype.kind in "iu":
            info = np.iinfo(work.dtype)
            out = np.clip(np.rint(out), info.min, info.max)
        out = out.astype(work.dtype, copy=False)
    return out[:, :, 0] if squeeze else out


def _byte_groups(channels: int) -> list[int | tuple[int, int]]:
    """The channels of a uint8 image as PIL resamples them apart: (start, stop) of three
    (an RGB image), or one channel's index (an L image)."""
    whole = channels - channels % 3
    return [(c, c + 3) for c in range(0, whole, 3)] + list(range(whole, channels))


def _sampled(pixels: np.ndarray, box: Window, size: tuple[int, int],
             how: Resample, warp: bool = False) -> np.ndarray:
    """``resize_box`` without antialiasing, by OpenCV: the box mapped onto the output by one
    affine warp (pixel centres as ``cv2.resize``'s), its edge pixels repeated beyond it where
    ``how.within``, else the image's. A box of whole pixels within is ``cv2.resize``'s, to
    the bit, unless ``warp`` (the warp is 2x faster on 8-bit pixels here, its weights in
    1/32 of a pixel)."""
    import cv2

    if pixels.dtype == np.float16:  # (OpenCV has no float16 kernels)
        return _sampled(pixels.astype(np.float32), box, size, how, warp).astype(np.float16)
    top, left, h, w = box
    flag = cv_flag(how.interpolation)
    whole = all(float(v).is_integer() for v in box)
    if flag == cv2.INTER_AREA or how.within and whole and not warp:
        # (a warp has no area filter: a fractional box is cut to the pixels it touches)
        y0, x0 = int(math.floor(top)), int(math.floor(left))
        cut = pixels[y0:int(math.ceil(top + h - 1e-9)), x0:int(math.ceil(left + w - 1e-9))]
        return resized(cut, size[0], size[1], flag)
    if how.within:
        y0, x0 = int(math.floor(top)), int(math.floor(left))
        pixels = pixels[y0:int(math.ceil(top + h - 1e-9)), x0:int(math.ceil(left + w - 1e-9))]
        top, left = top - y0, left - x0
    sy, sx = h / size[0], w / size[1]  # source pixels per output pixel
    inverse = np.array([[sx, 0, left + 0.5 * sx - 0.5], [0, sy, top + 0.5 * sy - 0.5]])
    out = cv2.warpAffine(pixels, inverse, (size[1], size[0]),
                         flags=flag | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_REPLICATE)
    return out if out.ndim == pixels.ndim else out[:, :, None]
