"""Built-in noise ops: ``gaussian_noise`` and ``jpeg`` (re-compression at a random quality,
tf.image's ``random_jpeg_quality``; Keras has no layer for it).

Each samples its parameters from ``rng`` and calls a pure kernel (``kernels/cv.py``,
``kernels/colour.py``). Each keeps shape, dtype, layout and value range (a noise ``sigma`` is
a fraction of the value range, by default the dtype's, see ``params``) and moves no pixel,
so no target.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..kernels import colour as k
from ..kernels import cv
from ..params import Range, ValueRange, cv_only, draw, draw_int, levels, restore, to_work
from . import checks as chk
from ..core import STILL, register


@register("gaussian_noise", checks={"sigma": chk.ranged(0.0), **chk.CV_ONLY, **chk.VALUE_RANGE},
          targets=STILL)
def gaussian_noise(
    image: np.ndarray, rng: np.random.Generator, sigma: Range = (0.01, 0.05), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Add zero-mean Gaussian noise; ``sigma`` is a fraction of the value range (0.02 ~ 5 gray
    levels of 255).

    Example:
        >>> out = gaussian_noise(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    cv_only(backend, "gaussian_noise")
    s = draw(rng, sigma, "sigma", 0.0)
    work = to_work(image)
    scale = levels(image, value_range)
    if s == 0.0:
        return image
    noise = cv.normal_noise(work.shape, s * scale.span, rng)
    return restore(cv.add_noise(work, noise, scale), image, scale)


@register("jpeg", targets=STILL, checks={"quality": chk.ranged(1.0, 100.0),
                                         **chk.VALUE_RANGE})
def jpeg(image: np.ndarray, rng: np.random.Generator, quality: Range = (50, 95),
         value_range: ValueRange | None = None) -> np.ndarray:
    """Re-compress as JPEG at a quality drawn in ``quality`` (1..100, ends inclusive).

    JPEG holds 8 bits per channel: other dtypes are quantized to 256 levels of their range
    and back.

    Example:
        >>> out = jpeg(np.zeros((16, 16, 3), np.uint8), np.random.default_rng(0), quality=75)
    """
    q = draw_int(rng, quality, "quality", 1)
    work = to_work(image)
    scale = levels(image, value_range)
    return restore(k.via_bytes(work, scale, partial(k.jpeg, quality=q)), image, scale)
