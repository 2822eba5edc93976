"""Built-in tone ops: ``brightness_contrast`` and ``gamma``, as ``PIL.ImageEnhance`` and a
gamma curve define them.

Each samples its parameters from ``rng`` and calls a pure kernel (``kernels/cv.py``, or
``kernels/pil.py`` for ``backend="pil"``). Each keeps shape, dtype, layout and value range
(results saturate to ``value_range``, by default the dtype's, see ``params``), moves no
pixel and so no target, and returns its input unchanged for factors of 1 and gamma 1. Keras'
colour layers (``hue``, ``color_jitter``, ...) are in ``colour.py``.
"""

from __future__ import annotations

import numpy as np

from ..kernels import cv, pil
from ..params import Range, ValueRange, draw, is_pil, levels, restore, to_work
from . import checks as chk
from ..core import STILL, register


@register("brightness_contrast", checks={"brightness": chk.GAIN, "contrast": chk.GAIN,
                                         **chk.BACKEND, **chk.VALUE_RANGE}, targets=STILL)
def brightness_contrast(
    image: np.ndarray, rng: np.random.Generator, brightness: Range = (0.8, 1.2),
    contrast: Range = (0.8, 1.2), backend: str = "cv", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Scale brightness by ``brightness``, then contrast about the mean gray by ``contrast``.

    The factors follow ``PIL.ImageEnhance`` (1 is the identity, 0 is black / flat gray), with
    black at the low end of ``value_range``.

    Example:
        >>> out = brightness_contrast(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    b = draw(rng, brightness, "brightness", 0.0)
    c = draw(rng, contrast, "contrast", 0.0)
    work = to_work(image)
    scale = levels(image, value_range)
    if b == 1.0 and c == 1.0:
        return image
    if is_pil(backend):
        return restore(pil.brightness_contrast(work, b, c, scale), image, scale)
    # Two saturating steps, like PIL: brightness clips before the contrast mean is taken.
    return restore(cv.brightness_contrast(work, b, c, scale), image, scale)


@register("gamma", checks={"gamma": chk.ranged(1e-3), **chk.BACKEND, **chk.VALUE_RANGE},
          targets=STILL)
def gamma(
    image: np.ndarray, rng: np.random.Generator, gamma: Range = (0.7, 1.5), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Gamma curve ``x ** gamma`` on the value range scaled to [0, 1] (>1 darkens, <1 brightens).

    Example:
        >>> out = gamma(np.zeros((8, 8), np.uint8), np.random.default_rng(0), gamma=0.8)
    """
    g = draw(rng, gamma, "gamma", 1e-3)
    work = to_work(image)
    scale = levels(image, value_range)
    if g == 1.0:
        return image
    out = pil.gamma(work, g, scale) if is_pil(backend) else cv.gamma(work, g, scale)
    return restore(out, image, scale)
