"""The parameter checks of the built-in ops, run when an ``Op`` is built.

Owns the ``check(value, name)`` callables the built-in ops register with
``register(name, checks={...})``, and the groups of them several ops share (the warp's
``border`` / ``fill`` / ``interpolation``, ``backend``, ``value_range``). Each raises the
same error the op itself would raise when it first draws that parameter, only earlier: in
the main process, when the pipeline is built, for every branch of a ``OneOf``. The checks
that need another parameter's value (a crop no larger than the image) stay in the ops.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from ..params import BACKENDS, BORDERS, CV_INTERPOLATION_FLAGS, bounds, choice, value_range
from ..core import Check
from .warp import pixels
from ...errors import ArgumentError


def ranged(lo: float = -math.inf, hi: float = math.inf, means: str = "") -> Check:
    """A number or (low, high) pair within [lo, hi], as ``draw`` reads it (``means``: what
    it means, said when a value is refused)."""
    return partial(bounds, lo=lo, hi=hi, means=means)


def one_of(*options: str) -> Check:
    return partial(choice, options=options)


def whole_number(value: Any, name: str, low: float, high: float = math.inf) -> int:
    """``value`` as an int, refused unless it is a whole number (an int) in [low, high]."""
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
            or not low <= value <= high):
        raise ArgumentError(
            f"`{name}` expects a whole number in [{low}, {high}]; received {value!r} "
            f"({type(value).__name__}). Pass e.g. {name}={_example(value, low, high)}."
        )
    return int(value)


def _example(value: Any, low: float, high: float) -> int:
    """The whole number in [low, high] nearest what was meant: ``value`` rounded where it is
    a number (64.0 -> 64), else 2 (or the bound it lies outside)."""
    try:
        meant = round(float(value)) if not isinstance(value, bool) else 2
    except (TypeError, ValueError, OverflowError):
        meant = 2
    return int(min(max(meant, low), high))


def odd(value: Any, name: str) -> None:
    """An odd whole number of pixels, at least 1: a kernel's side."""
    if whole_number(value, name, 1) % 2 == 0:
        raise ArgumentError(
            f"`{name}` expects an odd whole number of pixels; received {value!r}. Pass e.g. "
            f"{name}=3.")


def whole(low: float, high: float = math.inf) -> Check:
    """A whole number (int) in [low, high]."""
    return partial(whole_number, low=low, high=high)


def whole_range(value: Any, name: str) -> None:
    """A count as ``draw_int`` reads it: a whole number >= 0 or a (low, high) pair of them."""
    low, high = bounds(value, name, 0.0)
    if low != int(low) or high != int(high):
        raise ArgumentError(
            f"`{name}` expects whole numbers; received {value!r}. Pass e.g. {name}=(1, 3)."
        )


def flag(value: Any, name: str) -> None:
    """True or False (numpy's bool too): not a string, which is always true."""
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(
            f"`{name}` expects True or False; received {value!r} ({type(value).__name__})."
        )


def _unless_none(value: Any, name: str, check: Check) -> None:
    if value is not None:
        check(value, name)


def optional(check: Check) -> Check:
    """``check``, with None also accepted (a step left out)."""
    return partial(_unless_none, check=check)


def size(value: Any, name: str) -> None:
    """Pixels (an int >= 1) or a fraction of the image in (0, 1], as ``crop`` reads it."""
    pixels(value, name, 2**31)


VALUE_RANGE: dict[str, Check] = {"value_range": value_range}
BACKEND: dict[str, Check] = {"backend": one_of(*BACKENDS)}
CV_ONLY: dict[str, Check] = {"backend": one_of("cv")}
INTERPOLATION = one_of("nearest", "linear", "cubic")
# A move as a fraction of the image's side (a whole side moves it all out): not pixels.
SHIFT = ranged(-1.0, 1.0, means="A shift is a fraction of the image's width or height "
                                "(0.1: a tenth of it), not pixels: for pixels divide by the "
                                "side, e.g. 20 / width.")
# A gain about 1, as PIL's ImageEnhance and resizes take it, not a signed limit about 0.
GAIN_MEANS = ("It is a factor about 1 (1 keeps the image, 0.8 is a fifth less), not a limit "
              "about 0: albumentations' limit 0.2 is (0.8, 1.2).")
GAIN = ranged(0.0, means=GAIN_MEANS)
WARP: dict[str, Check] = {
    "border": one_of(*BORDERS), "interpolation": INTERPOLATION,
    "fill": ranged(0.0, 1.0, means="`fill` is a fraction of the value range, not a pixel "
                                   "value: 0 its low end, 1 its high end (128 of 0..255 is "
                                   "fill=0.5)."),
    **VALUE_RANGE,
}
"""What every warping op shares (its ``backend`` aside)."""
RESIZE_INTERPOLATION = one_of(*CV_INTERPOLATION_FLAGS)  # OpenCV's and PIL's (pil.RESAMPLE) alike
