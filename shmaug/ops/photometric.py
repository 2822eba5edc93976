"""Built-in photometric ops: sample parameters from ``rng``, then call a pure kernel.

Owns the registered ops that change pixel values in place: ``gaussian_blur``, ``sharpen``,
``smooth``, ``brightness_contrast``, ``gamma``, ``gaussian_noise`` and ``cutout``. Each keeps
shape, dtype, layout and value range: results are saturated to ``value_range`` (default: by
dtype, see ``_params``), and magnitudes given as fractions (a noise ``sigma``, a ``fill``) are
fractions of it. A zero magnitude (sigma 0, amount 0, factors 1, gamma 1, no holes) returns the
input unchanged.
"""

from __future__ import annotations

import numpy as np

from . import cv, pil
from ._params import (
    BACKENDS,
    Range,
    ValueRange,
    bounds,
    check_image,
    choice,
    draw,
    draw_int,
    levels,
    restore,
    to_work,
)
from . import _checks as chk
from .core import register
from .geometric import _cv_only


def _is_pil(backend: str) -> bool:
    return choice(backend, "backend", BACKENDS) == "pil"


@register("gaussian_blur", checks={"sigma": chk.ranged(0.0), **chk.BACKEND, **chk.VALUE_RANGE})
def gaussian_blur(
    image: np.ndarray, rng: np.random.Generator, sigma: Range = (0.5, 1.5), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Gaussian blur with standard deviation ``sigma`` pixels (PIL: ``GaussianBlur(radius)``).

    Example:
        >>> out = gaussian_blur(np.zeros((64, 64), np.uint8), np.random.default_rng(0), sigma=1)
    """
    s = draw(rng, sigma, "sigma", 0.0)
    work = to_work(image)
    scale = levels(image, value_range)
    if s == 0.0:
        return image
    out = pil.gaussian_blur(work, s, scale) if _is_pil(backend) else cv.gaussian_blur(work, s)
    return restore(out, image, scale)


@register("sharpen", checks={"amount": chk.ranged(0.0, 4.0), **chk.BACKEND, **chk.VALUE_RANGE})
def sharpen(
    image: np.ndarray, rng: np.random.Generator, amount: Range = (0.5, 1.0), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Sharpen with PIL's ``ImageFilter.SHARPEN`` kernel blended with the identity.

    ``amount=1`` is exactly PIL's SHARPEN, ``0`` is a no-op, up to 4 exaggerates it.

    Example:
        >>> out = sharpen(np.zeros((64, 64), np.uint8), np.random.default_rng(0), amount=1)
    """
    return _blended_filter(image, rng, amount, 4.0, cv.SHARPEN, backend, value_range)


@register("smooth", checks={"amount": chk.ranged(0.0, 1.0), **chk.BACKEND, **chk.VALUE_RANGE})
def smooth(
    image: np.ndarray, rng: np.random.Generator, amount: Range = (0.5, 1.0), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Smooth with PIL's ``ImageFilter.SMOOTH`` kernel blended with the identity.

    ``amount=1`` is exactly PIL's SMOOTH, ``0`` is a no-op.

    Example:
        >>> out = smooth(np.zeros((64, 64), np.uint8), np.random.default_rng(0), amount=1)
    """
    return _blended_filter(image, rng, amount, 1.0, cv.SMOOTH, backend, value_range)


def _blended_filter(
    image: np.ndarray, rng: np.random.Generator, amount: Range, limit: float,
    kernel: np.ndarray, backend: str, value_range: ValueRange | None,
) -> np.ndarray:
    """A 3x3 PIL filter kernel blended with the identity by a drawn ``amount``."""
    a = draw(rng, amount, "amount", 0.0, limit)
    work = to_work(image)
    scale = levels(image, value_range)
    if a == 0.0:
        return image
    k = cv.blend_kernel(kernel, a)
    out = pil.filter3x3(work, k, scale) if _is_pil(backend) else cv.filter3x3(work, k)
    return restore(out, image, scale)


@register("brightness_contrast", checks={"brightness": chk.ranged(0.0), "contrast": chk.ranged(0.0),
                                        **chk.BACKEND, **chk.VALUE_RANGE})
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
    if _is_pil(backend):
        return restore(pil.brightness_contrast(work, b, c, scale), image, scale)
    # Two saturating steps, like PIL: brightness clips before the contrast mean is taken.
    return restore(cv.brightness_contrast(work, b, c, scale), image, scale)


@register("gamma", checks={"gamma": chk.ranged(1e-3), **chk.BACKEND, **chk.VALUE_RANGE})
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
    out = pil.gamma(work, g, scale) if _is_pil(backend) else cv.gamma(work, g, scale)
    return restore(out, image, scale)


@register("gaussian_noise", checks={"sigma": chk.ranged(0.0), **chk.CV_ONLY, **chk.VALUE_RANGE})
def gaussian_noise(
    image: np.ndarray, rng: np.random.Generator, sigma: Range = (0.01, 0.05), backend: str = "cv",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Add zero-mean Gaussian noise; ``sigma`` is a fraction of the value range (0.02 ~ 5 gray
    levels of 255).

    Example:
        >>> out = gaussian_noise(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    _cv_only(backend, "gaussian_noise")
    s = draw(rng, sigma, "sigma", 0.0)
    work = to_work(image)
    scale = levels(image, value_range)
    if s == 0.0:
        return image
    noise = cv.normal_noise(work.shape, s * scale.span, rng)
    return restore(cv.add_noise(work, noise, scale), image, scale)


@register("cutout", checks={"holes": chk.whole_range, "size": chk.ranged(0.0, 1.0),
                           "fill": chk.ranged(0.0, 1.0), **chk.CV_ONLY, **chk.VALUE_RANGE})
def cutout(
    image: np.ndarray, rng: np.random.Generator, holes: Range = (1, 3), size: Range = (0.1, 0.3),
    fill: float = 0.0, backend: str = "cv", value_range: ValueRange | None = None,
) -> np.ndarray:
    """Random erasing: ``holes`` rectangles, each side ``size`` x the image side, set to ``fill``
    (a fraction of the value range).

    Example:
        >>> out = cutout(np.full((32, 32), 255, np.uint8), np.random.default_rng(0), holes=2)
    """
    _cv_only(backend, "cutout")
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
