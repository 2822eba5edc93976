"""The reference recipes' crops, drawn on the photo's full resolution and decoded only where
they fall: ``random_resized_crop`` (torchvision's ``RandomResizedCrop``, timm's and DALI's
training crop) and ``center_resized_crop`` (their validation resize-then-centre-crop).

Why a module of their own: both take a ``shmaug.deferred.Undecoded`` as well as pixels. First
in a ``Compose`` over a source with ``image_size=None``, each draws its window on the size the
JPEG's header gives and asks for that window alone (``Undecoded.resized_window``: libjpeg-turbo
decodes the window, at the smallest eighth of its size in the DCT that keeps it at least the
output, and OpenCV resamples the rest: the reduced crop, within
``decode.REDUCED_CROP_QUALITY`` of the exact one). Given pixels, each cuts the same window and
resamples it exactly (``resample.resize_box``, PIL's antialiased filters, as torchvision on a
PIL image: the random crop is cut, then resized; the centre crop resized, then cut), as a
source with ``reduced_decode=False`` does: the draw never depends on where the op runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import checks as chk
from .warp import moved, scaled
from ..core import WARPED, register
from ..params import Range, bounds, draw
from ..targets.moves import MatrixMove
from ...deferred import Undecoded
from ...resample import RESIZE_INTERPOLATIONS, Resample, Window, resize_box

_INTERPOLATION = chk.one_of(*RESIZE_INTERPOLATIONS)
_TRIES = 10  # torchvision's: then the centre fallback


def window_of(height: int, width: int, rng: np.random.Generator, scale: Range,
              ratio: Range) -> tuple[int, int, int, int]:
    """torchvision's ``RandomResizedCrop.get_params`` with ``rng``: (top, left, h, w) of a
    window covering a fraction in ``scale`` of the area, of aspect (w / h) in ``ratio``
    (log-uniform), 10 tries, then the largest centred window of an aspect within ``ratio``."""
    area = height * width
    lo, hi = bounds(ratio, "ratio", 1e-3)
    log_ratio = (math.log(lo), math.log(hi))
    for _ in range(_TRIES):
        target = area * draw(rng, scale, "scale", 1e-3, 1.0)
        aspect = math.exp(draw(rng, log_ratio, "ratio"))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    in_ratio = width / height
    if in_ratio < lo:
        w, h = width, max(1, int(round(width / lo)))  # (torchvision's may round to 0)
    elif in_ratio > hi:
        h, w = height, max(1, int(round(height * hi)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def centre_window(height: int, width: int, size: tuple[int, int],
                  crop_fraction: float) -> Window:
    """The window of the file that ``Resize(short side)`` then ``CenterCrop(size)`` keep, as
    torchvision computes both, with the short side ``max(size) / crop_fraction`` (timm's
    ``crop_pct``; 256 for 224), so the crop always lies inside the resized photo."""
    short = int(math.floor(max(size) / crop_fraction))
    if height <= width:
        rh, rw = short, int(short * width / height)
    else:
        rh, rw = int(short * height / width), short
    top = int(round((rh - size[0]) / 2.0))
    left = int(round((rw - size[1]) / 2.0))
    sy, sx = height / rh, width / rw
    return top * sy, left * sx, size[0] * sy, size[1] * sx


def _resampled(image: Any, window: Window, size: tuple[int, int], how: Resample) -> np.ndarray:
    """``window`` of ``image`` (pixels or a ``Undecoded``) at ``size``, the move noted: the
    same either way, since the window is in the file's pixels, so boxes and masks move with
    an undecoded photo as with a decoded one."""
    out = (image.resized_window(window, size, how) if isinstance(image, Undecoded)
           else resize_box(image, window, size, how))
    top, left, h, w = window
    return moved(image, out, lambda: MatrixMove(scaled(left, top, size[1] / w, size[0] / h),
                                                size))


@register("random_resized_crop", targets=WARPED, takes_undecoded=True,
          sized_by=("height", "width"), checks={
    "height": chk.whole(1), "width": chk.whole(1), "scale": chk.ranged(1e-3, 1.0),
    "ratio": chk.ranged(1e-3), "interpolation": _INTERPOLATION, "antialias": chk.flag})
def random_resized_crop(
    image: np.ndarray, rng: np.random.Generator, height: int = 224, width: int = 224,
    scale: Range = (0.08, 1.0), ratio: Range = (3 / 4, 4 / 3),
    interpolation: str = "bilinear", antialias: bool = True,
) -> np.ndarray:
    """A random window resized to ``height`` x ``width``: torchvision's ``RandomResizedCrop``.

    The window covers a fraction in ``scale`` of the area, with an aspect (width / height)
    in ``ratio`` drawn log-uniformly, as torchvision draws it (10 tries, then a centred
    fallback). First in a ``Compose`` over a source with ``image_size=None``, it is drawn on
    the file's own resolution and only the window is decoded (see the module). Resampled
    with PIL's antialiased filters ("bilinear" by default), as torchvision and timm on PIL
    images; ``antialias=False``: with OpenCV's, as Keras' ``Resizing`` and tf.data's
    ``tf.image.resize`` by default, several times faster where the window is larger than
    the output (a JPEG window at least twice the output is scaled in the DCT either way).
    Decoded at the crop, the default antialiased path scales the window in the DCT and
    finishes with OpenCV (the reduced crop; ``reduced_decode=False`` on the source: PIL's
    filter on the window at full scale, torchvision's pixels).

    Example:
        >>> random_resized_crop(np.zeros((300, 400, 3), np.uint8), np.random.default_rng(0),
        ...                     224, 224).shape
        (224, 224, 3)
    """
    h, w = image.shape[:2]
    window = window_of(h, w, rng, scale, ratio)
    return _resampled(image, tuple(float(v) for v in window),  # type: ignore[arg-type]
                      (int(height), int(width)),
                      Resample(interpolation, within=True, antialias=bool(antialias)))


@register("center_resized_crop", targets=WARPED, takes_undecoded=True,
          sized_by=("height", "width"), checks={
    "height": chk.whole(1), "width": chk.whole(1), "crop_fraction": chk.ranged(1e-3, 1.0),
    "interpolation": _INTERPOLATION, "antialias": chk.flag})
def center_resized_crop(
    image: np.ndarray, rng: np.random.Generator, height: int = 224, width: int = 224,
    crop_fraction: float = 0.875, interpolation: str = "bilinear", antialias: bool = True,
) -> np.ndarray:
    """The validation crop of the ImageNet recipes: resize the short side to
    ``max(height, width) / crop_fraction`` (256 for 224), then cut the centred ``height`` x
    ``width``, in one resample of the file's window (decoded at reduced size where it is at
    least twice the output). Draws nothing; ``antialias`` as ``random_resized_crop``'s.

    Example:
        >>> center_resized_crop(np.zeros((375, 500, 3), np.uint8), np.random.default_rng(0)
        ...                     ).shape
        (224, 224, 3)
    """
    size = (int(height), int(width))
    h, w = image.shape[:2]
    return _resampled(image, centre_window(h, w, size, float(crop_fraction)), size,
                      Resample(interpolation, within=False, antialias=bool(antialias)))

