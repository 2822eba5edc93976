"""Built-in erasing ops: ``cutout`` (holes of a drawn size) and ``erasing`` (torchvision's
RandomErasing geometry with Keras' RandomErasing ``factor`` and ``fill_value``).

Each draws its boxes from ``rng`` and fills them in place (``kernels/cv.py``'s ``erase``): it
keeps shape, dtype, layout and value range (a ``fill`` is a fraction of the value range, by
default the dtype's, see ``params``) and moves no pixel, so no target.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..kernels import cv
from ..params import (
    Range,
    ValueRange,
    bounds,
    check_image,
    cv_only,
    draw,
    draw_int,
    keras_factor,
    levels,
)
from . import checks as chk
from ..core import STILL, register


@register("cutout", targets=STILL, checks={
    "holes": chk.whole_range, "size": chk.ranged(0.0, 1.0), "fill": chk.ranged(0.0, 1.0),
    **chk.CV_ONLY, **chk.VALUE_RANGE})
def cutout(
    image: np.ndarray, rng: np.random.Generator, holes: Range = (1, 3), size: Range = (0.1, 0.3),
    fill: float = 0.0, backend: str = "cv", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Random erasing: ``holes`` rectangles, each side ``size`` x the image side, set to ``fill``
    (a fraction of the value range).

    Example:
        >>> out = cutout(np.full((32, 32), 255, np.uint8), np.random.default_rng(0), holes=2)
    """
    cv_only(backend, "cutout")
    n = draw_int(rng, holes, "holes")
    lo, hi = bounds(size, "size", 0.0, 1.0)
    f = bounds(fill, "fill", 0.0, 1.0)[0]
    check_image(image)
    scale = levels(image, value_range)
    if n == 0 or hi == 0.0:
        return image
    h, w = image.shape[:2]
    boxes = []
    for _ in range(n):
        bh = max(1, round(h * draw(rng, (lo, hi), "size")))
        bw = max(1, round(w * draw(rng, (lo, hi), "size")))
        y0, x0 = int(rng.integers(0, h - bh + 1)), int(rng.integers(0, w - bw + 1))
        boxes.append((y0, x0, y0 + bh, x0 + bw))
    return cv.erase(image, boxes, scale.at(f))


_ERASE_TRIES = 10  # torchvision's: after this many boxes that do not fit, nothing is erased


def _box(rng: np.random.Generator, h: int, w: int, scale: tuple[float, float],
         ratio: tuple[float, float]) -> tuple[int, int, int, int] | None:
    """torchvision's RandomErasing.get_params: a box of area fraction in ``scale`` and
    aspect (height / width, as there) log-uniform in ``ratio``, or None after
    ``_ERASE_TRIES``."""
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(_ERASE_TRIES):
        area = h * w * draw(rng, scale, "scale")
        aspect = math.exp(draw(rng, log_ratio, "ratio"))
        bh, bw = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if 0 < bh < h and 0 < bw < w:
            y0, x0 = int(rng.integers(0, h - bh + 1)), int(rng.integers(0, w - bw + 1))
            return y0, x0, y0 + bh, x0 + bw
    return None


@register("erasing", targets=STILL, checks={
    "factor": partial(keras_factor, lo=0.0, hi=1.0), "scale": chk.ranged(0.0, 1.0),
    "ratio": chk.ranged(1e-3), "fill_value": chk.optional(chk.ranged(0.0, 1.0)), **chk.VALUE_RANGE})
def erasing(
    image: np.ndarray, rng: np.random.Generator, factor: Range = 1.0,
    scale: Range = (0.02, 0.33), ratio: Range = (0.3, 3.3), fill_value: float | None = 0.0,
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Erase one box, with probability p drawn in ``factor`` (Keras: the default 1.0 erases
    half the samples; torchvision's ``p`` is ``factor=(p, p)``), of area ``scale`` x the
    image's and aspect ``ratio`` (height / width, torchvision's), filled with ``fill_value``
    (a fraction of the range) or, for None, Gaussian noise of one range's deviation clipped
    to the range (Keras' None; not torchvision's ``value="random"``, noise in normalized
    units).

    Example:
        >>> out = erasing(np.full((32, 32), 255, np.uint8), np.random.default_rng(0))
    """
    p = draw(rng, keras_factor(factor, "factor", 0.0, 1.0), "factor")
    if not rng.random() < p:
        check_image(image)
        return image
    h, w = check_image(image).shape[:2]
    box = _box(rng, h, w, bounds(scale, "scale", 0.0, 1.0), bounds(ratio, "ratio", 1e-3))
    if box is None:
        return image
    pixels = levels(image, value_range)
    if fill_value is not None:
        return cv.erase(image, [box], pixels.at(bounds(fill_value, "fill_value", 0, 1)[0]))
    y0, x0, y1, x1 = box
    out = image.copy()
    noise = rng.standard_normal((y1 - y0, x1 - x0, *image.shape[2:]), np.float32)
    out[y0:y1, x0:x1] = np.clip(pixels.lo + noise * pixels.span, pixels.lo, pixels.hi)
    return out
