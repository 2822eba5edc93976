"""Built-in filter ops: ``gaussian_blur``, ``sharpen`` and ``smooth``.

Each samples its parameters from ``rng`` and calls a pure kernel (``kernels/cv.py``, or
``kernels/pil.py`` for ``backend="pil"``). Each keeps shape, dtype, layout and value range
(results saturate to ``value_range``, by default the dtype's, see ``params``), moves no
pixel and so no target, and returns its input unchanged for a zero magnitude (sigma 0,
amount 0).
"""

from __future__ import annotations

import numpy as np

from ..kernels import cv, pil
from ..params import Range, ValueRange, cv_only, draw, is_pil, levels, restore, to_work
from . import checks as chk
from ..core import STILL, register


@register("gaussian_blur", checks={"sigma": chk.ranged(0.0), "kernel_size": chk.optional(chk.odd),
                                   **chk.BACKEND, **chk.VALUE_RANGE}, targets=STILL)
def gaussian_blur(
    image: np.ndarray, rng: np.random.Generator, sigma: Range = (0.5, 1.5), backend: str = "cv",
    value_range: ValueRange | None = None, kernel_size: int | None = None,
) -> np.ndarray:
    """Gaussian blur with standard deviation ``sigma`` pixels (PIL: ``GaussianBlur(radius)``).

    ``kernel_size`` None takes the kernel out to 3 sigma; an odd int cuts it to that many
    pixels a side (normalized), as Keras' RandomGaussianBlur and torchvision's GaussianBlur
    take it (OpenCV only).

    Example:
        >>> out = gaussian_blur(np.zeros((64, 64), np.uint8), np.random.default_rng(0), sigma=1)
    """
    s = draw(rng, sigma, "sigma", 0.0)
    work = to_work(image)
    scale = levels(image, value_range)
    if s == 0.0:
        return image
    if kernel_size is not None:
        cv_only(backend, "gaussian_blur with a kernel_size")
        return restore(cv.gaussian_blur(work, s, kernel_size), image, scale)
    out = pil.gaussian_blur(work, s, scale) if is_pil(backend) else cv.gaussian_blur(work, s)
    return restore(out, image, scale)



@register("sharpen", checks={"amount": chk.ranged(0.0, 4.0), **chk.BACKEND, **chk.VALUE_RANGE},
          targets=STILL)
def sharpen(
    image: np.ndarray, rng: np.random.Generator, amount: Range = (0.5, 1.0), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Sharpen with PIL's ``ImageFilter.SHARPEN`` kernel blended with the identity.

    ``amount=1`` is PIL's SHARPEN kernel, ``0`` is a no-op, up to 4 exaggerates it. PIL leaves
    the outermost pixels as they were; the OpenCV backend filters them too, its edges
    replicated (``backend="pil"`` is PIL's to the pixel).

    Example:
        >>> out = sharpen(np.zeros((64, 64), np.uint8), np.random.default_rng(0), amount=1)
    """
    return _blended_filter(image, rng, amount, 4.0, cv.SHARPEN, backend, value_range)


@register("smooth", checks={"amount": chk.ranged(-1.0, 1.0), **chk.BACKEND, **chk.VALUE_RANGE},
          targets=STILL)
def smooth(
    image: np.ndarray, rng: np.random.Generator, amount: Range = (0.5, 1.0), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Smooth with PIL's ``ImageFilter.SMOOTH`` kernel blended with the identity.

    ``amount=1`` is PIL's SMOOTH kernel (PIL leaves the outermost pixels as they were, the
    OpenCV backend filters them, edges replicated), ``0`` is a no-op, and below 0 the blend
    goes the other way, away from the smoothed image: sharper (Keras' RandomSharpness above
    0.5).

    Example:
        >>> out = smooth(np.zeros((64, 64), np.uint8), np.random.default_rng(0), amount=1)
    """
    return _blended_filter(image, rng, amount, 1.0, cv.SMOOTH, backend, value_range, low=-1.0)


def _blended_filter(
    image: np.ndarray, rng: np.random.Generator, amount: Range, limit: float,
    kernel: np.ndarray, backend: str, value_range: ValueRange | None, low: float = 0.0,
) -> np.ndarray:
    """A 3x3 PIL filter kernel blended with the identity by a drawn ``amount``."""
    a = draw(rng, amount, "amount", low, limit)
    work = to_work(image)
    scale = levels(image, value_range)
    if a == 0.0:
        return image
    k = cv.blend_kernel(kernel, a)
    out = pil.filter3x3(work, k, scale) if is_pil(backend) else cv.filter3x3(work, k)
    return restore(out, image, scale)
