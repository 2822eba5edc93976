"""Parameter sampling and image-layout helpers shared by the built-in ops.

Owns: turning a user's parameter (a fixed number or a ``(low, high)`` range) into one drawn
value, the names of border modes and interpolations, and the dtype / layout round trip that
lets OpenCV and PIL kernels see an array they support. Leaves the pixel work to ``cv.py`` and
``pil.py``, and the registry to ``core.py``.

Conventions every built-in op follows:

* A parameter is either a number (used as is) or a ``(low, high)`` pair drawn uniformly from
  the ``rng`` the op receives. A fixed number draws nothing from ``rng``.
* ``fill`` is a fraction of the dtype's full scale in ``[0, 1]`` (``0`` black, ``1`` white), so
  one pipeline works on uint8 and float images alike.
* Float images hold values in ``[0, 1]``; float16 is computed in float32 and cast back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Union

import cv2
import numpy as np

from ..errors import ArgumentError, ArgumentTypeError

Range = Union[float, tuple[float, float]]
"""A fixed number, or a ``(low, high)`` pair to draw uniformly from."""

BORDERS: dict[str, int] = {
    "constant": cv2.BORDER_CONSTANT,
    "reflect": cv2.BORDER_REFLECT_101,
    "replicate": cv2.BORDER_REPLICATE,
    "wrap": cv2.BORDER_WRAP,
}
INTERPOLATIONS: dict[str, int] = {
    "nearest": cv2.INTER_NEAREST,
    "linear": cv2.INTER_LINEAR,
    "cubic": cv2.INTER_CUBIC,
    "area": cv2.INTER_AREA,
}
BACKENDS = ("cv", "pil")
_PLAIN = (int, float)
_DTYPES = (np.dtype(np.uint8), np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _pair(value: Any, name: str) -> tuple[float, float]:
    if isinstance(value, bool) or not isinstance(value, (int, float, Sequence, np.number)):
        raise ArgumentTypeError(
            f"`{name}` expects a number or a (low, high) pair; received {value!r} "
            f"({type(value).__name__}). Pass e.g. {name}=(0.5, 1.5) or {name}=1.0."
        )
    if isinstance(value, (int, float, np.number)):
        return float(value), float(value)
    if len(value) != 2 or not all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value
    ):
        raise ArgumentTypeError(
            f"`{name}` expects a (low, high) pair of numbers; received {value!r}. "
            f"Pass e.g. {name}=(0.5, 1.5)."
        )
    return float(value[0]), float(value[1])


def bounds(value: Any, name: str, lo: float = -math.inf, hi: float = math.inf) -> tuple[float, float]:
    """Validate a range parameter and return it as ``(low, high)`` floats.

    Raises:
        ArgumentTypeError: ``value`` is neither a number nor a pair of numbers.
        ArgumentError: ``low > high`` or an end lies outside ``[lo, hi]``.
    """
    a, b = _pair(value, name)
    if not (a <= b) or a < lo or b > hi:
        raise ArgumentError(
            f"`{name}` expects low <= high within [{lo}, {hi}]; received {value!r}. "
            f"Pass a range inside those limits, e.g. {name}=({max(lo, min(a, b))}, "
            f"{min(hi, max(a, b))})."
        )
    return a, b


def draw(
    rng: np.random.Generator, value: Any, name: str, lo: float = -math.inf, hi: float = math.inf
) -> float:
    """One value from a fixed number or a ``(low, high)`` range (uniform)."""
    # Fast path for the common, valid cases (this runs several times per op call); anything
    # else goes through ``bounds`` for its error message. rng.random() is ~3x cheaper than
    # rng.uniform(a, b) for a scalar.
    kind = type(value)
    if kind is tuple and len(value) == 2 and type(value[0]) in _PLAIN and type(value[1]) in _PLAIN:
        a, b = value
        if lo <= a <= b <= hi:
            return float(a) if a == b else a + (b - a) * rng.random()
    elif kind in _PLAIN and lo <= value <= hi:
        return float(value)
    a, b = bounds(value, name, lo, hi)
    return a if a == b else a + (b - a) * rng.random()


def draw_int(rng: np.random.Generator, value: Any, name: str, lo: int = 0) -> int:
    """One integer from a fixed int or an inclusive ``(low, high)`` range."""
    a, b = bounds(value, name, lo)
    if a != int(a) or b != int(b):
        raise ArgumentError(
            f"`{name}` expects whole numbers; received {value!r}. Pass e.g. {name}=(1, 3)."
        )
    return int(a) if a == b else int(rng.integers(int(a), int(b) + 1))


def choice(value: Any, name: str, options: Sequence[str]) -> str:
    """Check that a string option is one of ``options``."""
    if value not in options:
        raise ArgumentError(
            f"`{name}` expects one of {', '.join(repr(o) for o in options)}; received "
            f"{value!r} ({type(value).__name__}). Pick one of those."
        )
    return str(value)


def border_code(border: Any) -> int:
    """The OpenCV border constant for a border name."""
    return BORDERS[choice(border, "border", tuple(BORDERS))]


def interp_code(interpolation: Any, allowed: Sequence[str] = ("nearest", "linear", "cubic")) -> int:
    """The OpenCV interpolation constant for an interpolation name."""
    return INTERPOLATIONS[choice(interpolation, "interpolation", allowed)]


def check_image(image: Any) -> np.ndarray:
    """Reject anything that is not an (H, W), (H, W, 1) or (H, W, C) uint8/float array."""
    if not isinstance(image, np.ndarray):
        raise ArgumentTypeError(
            f"`image` expects a numpy array; received {type(image).__name__}. "
            f"Convert it with numpy.asarray(image)."
        )
    if image.ndim not in (2, 3) or image.dtype not in _DTYPES or 0 in image.shape:
        raise ArgumentError(
            f"`image` expects shape (H, W) or (H, W, C) with dtype uint8, float16 or float32; "
            f"received shape {image.shape} dtype {image.dtype}. Convert it before augmenting, "
            f"e.g. image.astype(numpy.float32) / 255."
        )
    return image


def scale_of(dtype: np.dtype[Any]) -> float:
    """Full-scale value: 255 for uint8, 1 for floats."""
    return 255.0 if dtype == np.uint8 else 1.0


def fill_value(fill: Any, dtype: np.dtype[Any]) -> tuple[float, float, float, float]:
    """``fill`` (a fraction of full scale) as an OpenCV border Scalar for ``dtype``."""
    a = float(fill) if type(fill) in _PLAIN and 0.0 <= fill <= 1.0 else bounds(fill, "fill", 0.0, 1.0)[0]
    v = a * scale_of(dtype)
    return (v, v, v, v)


def to_work(image: np.ndarray) -> np.ndarray:
    """The array OpenCV sees: float16 -> float32, (H, W, 1) -> (H, W)."""
    check_image(image)
    work = image.astype(np.float32) if image.dtype == np.float16 else image
    if work.ndim == 3 and work.shape[2] == 1:
        work = work[:, :, 0]
    return work


def restore(out: np.ndarray, like: np.ndarray, *, clip: bool = True) -> np.ndarray:
    """Undo :func:`to_work`: give ``out`` the layout and dtype of ``like``.

    Float results are clamped to ``[0, 1]`` (uint8 results are already saturated); ``clip``
    is kept for call sites that document where overshoot comes from.
    """
    if like.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    if out.dtype != np.uint8:  # float rounding in OpenCV can overshoot 1.0 by an ulp
        out = np.clip(out, 0.0, 1.0, out=out if out.flags.writeable else None)
    if out.dtype != like.dtype:
        out = out.astype(like.dtype)
    return out
