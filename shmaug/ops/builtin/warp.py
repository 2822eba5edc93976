"""What the geometric ops share: the warp of an image by a 3x3 matrix, the matrices, and sizes
given in pixels or as a fraction of the image.

``warp`` sends a matrix to OpenCV's kernel (``kernels/cv.py``, the default) or PIL's
(``kernels/pil.py``, ``backend="pil"``), in the value range's levels; ``geometric.py``,
``framing.py`` and the policies (``policies/_space.py``) build the matrices with ``affine``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels import cv, pil
from ..params import (
    BACKENDS,
    ValueRange,
    border_code,
    bounds,
    choice,
    fill_value,
    interp_code,
    levels,
    restore,
    to_work,
)
from ...errors import ArgumentError, ArgumentTypeError


def warp(
    image: np.ndarray, matrix: np.ndarray, *, border: str, fill: float, interpolation: str,
    backend: str, op: str, value_range: ValueRange | None,
) -> np.ndarray:
    """``image`` warped by ``matrix``, the 3x3 map from input to output pixel coordinates, at
    the same size; ``fill`` (the constant border) is a fraction of the value range."""
    work = to_work(image)
    scale = levels(image, value_range)
    h, w = work.shape[:2]
    if choice(backend, "backend", BACKENDS) == "pil":
        pil.require_constant(border, op)
        choice(interpolation, "interpolation", ("nearest", "linear", "cubic"))
        out = pil.warp(work, matrix, (w, h), resample=interpolation,
                       fill=bounds(fill, "fill", 0, 1)[0], scale=scale)
    else:
        out = cv.warp(
            work, matrix, (w, h), interp=interp_code(interpolation), border=border_code(border),
            fill=fill_value(fill, scale),
        )
    return restore(out, image, scale)


def affine(a: float, b: float, c: float, d: float, e: float, f: float) -> np.ndarray:
    """The 3x3 matrix of the affine map ``(x, y) -> (a x + b y + c, d x + e y + f)``."""
    return np.array([[a, b, c], [d, e, f], [0.0, 0.0, 1.0]])


def pixels(value: Any, name: str, full: int) -> int:
    """``value`` as pixels of a side ``full`` long: pixels (an int >= 1) or a fraction in
    (0, 1]."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ArgumentTypeError(
            f"`{name}` expects an int (pixels) or a float in (0, 1] (fraction); received "
            f"{value!r} ({type(value).__name__})."
        )
    value = int(value) if isinstance(value, (int, np.integer)) else float(value)
    px = value if isinstance(value, int) else round(value * full)
    if not (isinstance(value, int) or 0 < value <= 1) or not 1 <= px:
        raise ArgumentError(
            f"`{name}` expects pixels >= 1 or a fraction in (0, 1]; received {value!r}."
        )
    return int(px)
