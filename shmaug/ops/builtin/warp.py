"""What the geometric ops share: the warp of an image by a 3x3 matrix, the matrices, sizes
given in pixels or as a fraction of the image, and the notes of their moves.

``warp`` sends a matrix to OpenCV's kernel (``kernels/cv.py``, the default) or PIL's
(``kernels/pil.py``, ``backend="pil"``), in the value range's levels; ``geometric.py``,
``framing.py`` and the policies (``policies/_space.py``) build the matrices with ``affine``.
Every warp notes its move (``targets/moves.py``), and so does every geometric op that moves
pixels another way (``moved``), so that the masks, boxes and keypoints of a pipeline's image
follow it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..kernels import cv, pil
from ..params import (
    ValueRange,
    border_code,
    bounds,
    check_image,
    choice,
    fill_value,
    interp_code,
    is_pil,
    levels,
    restore,
    to_work,
)
from ..targets.moves import MatrixMove, Move, note
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
    code = border_code(border)
    if is_pil(backend):
        pil.require_constant(border, op)
        choice(interpolation, "interpolation", ("nearest", "linear", "cubic"))
        out = pil.warp(work, matrix, (h, w), resample=interpolation,
                       fill=bounds(fill, "fill", 0, 1)[0], scale=scale)
    else:
        out = cv.warp(
            work, matrix, (h, w), interp=interp_code(interpolation), border=code,
            fill=fill_value(fill, scale),
        )
    return moved(image, restore(out, image, scale), MatrixMove(
        matrix, (h, w), code, warped_nearest=interpolation == "nearest" and not is_pil(backend)))


def moved(image: Any, out: np.ndarray, move: Move | Callable[[], Move]) -> np.ndarray:
    """``out``, the image the op made of ``image`` by ``move``, with the move noted (see
    ``warp``; a builder of the move is called only where targets are moved: ``note``)."""
    note(move, image, out)
    return out


def cut(image: np.ndarray, height: float, width: float, op: str,
        origin: Callable[[int, int], tuple[int, int]]) -> np.ndarray:
    """A ``height`` x ``width`` window of ``image`` (pixels, or fractions of its sides), at
    ``origin(spare rows, spare columns)`` -> (y0, x0), its move noted: ``crop`` and
    ``center_crop``."""
    h, w = check_image(image).shape[:2]
    ch, cw = pixels(height, "height", h), pixels(width, "width", w)
    if ch > h or cw > w:
        raise ArgumentError(
            f"`height`/`width` of `{op}` expect at most the image's height {h} and width "
            f"{w}; received height {ch} and width {cw}. Crop smaller, or resize first."
        )
    y0, x0 = origin(h - ch, w - cw)
    return moved(image, np.ascontiguousarray(image[y0 : y0 + ch, x0 : x0 + cw]),
                 lambda: MatrixMove(scaled(x0, y0, 1.0, 1.0), (ch, cw)))


def scaled(x0: float, y0: float, sx: float, sy: float) -> np.ndarray:
    """The matrix (pixel centres) of a window from (x0, y0) scaled by (sx, sy): a crop
    (``sx = sy = 1``), a resize (``x0 = y0 = 0``), or both."""
    return affine(sx, 0.0, (0.5 - x0) * sx - 0.5, 0.0, sy, (0.5 - y0) * sy - 0.5)


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
        whole = isinstance(value, float) and value > 1 and value.is_integer()
        raise ArgumentError(
            f"`{name}` expects pixels (an int >= 1) or a fraction in (0, 1] (a float); "
            f"received {value!r}." + (f" Fix: {name}={int(value)} for pixels (a float above 1 "
                                      f"is neither)." if whole else ""))
    return int(px)
