"""Parameter sampling and image-layout helpers shared by the built-in ops.

Owns: turning a user's parameter (a fixed number or a ``(low, high)`` range) into one drawn
value, the names of border modes and interpolations, and the dtype / layout round trip that lets
OpenCV and PIL kernels see an array they support. Leaves the pixel work to ``kernels/cv.py`` and
``kernels/pil.py``, and the registry to ``core.py``.

Conventions every built-in op follows:

* A parameter is either a number (used as is) or a ``(low, high)`` pair drawn uniformly from
  the ``rng`` the op receives. A fixed number draws nothing from ``rng``.
* Pixel values lie in a ``value_range`` (Keras' augmentation layers take the same argument):
  given by the caller, or by the dtype: uint8 (0, 255), uint16 (0, 65535), floats (0, 1). An op
  clamps its result to that range and never to one the data is not in: float data outside
  (0, 1) with no ``value_range`` is refused with the fix (``levels``).
* ``fill`` and magnitudes such as a noise ``sigma`` are fractions of that range (``0`` black,
  ``1`` white), so one pipeline works on uint8, uint16 and float images alike.
* float16 is computed in float32 and cast back.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import cv2
import numpy as np

from ..resample import cv_flag
from ..errors import ArgumentError, ArgumentTypeError

Range = Union[float, Sequence[float]]
"""A fixed number, or a ``(low, high)`` pair (a tuple or a list) to draw uniformly from."""
ValueRange = tuple[float, float]
"""The (low, high) pixel values of an image: black and full scale."""

BORDERS: dict[str, int] = {
    "constant": cv2.BORDER_CONSTANT,
    "reflect": cv2.BORDER_REFLECT_101,
    "replicate": cv2.BORDER_REPLICATE,
    "wrap": cv2.BORDER_WRAP,
}
CV_INTERPOLATION_FLAGS: dict[str, int] = {name: cv_flag(name)
                                  for name in ("nearest", "linear", "cubic", "area")}
BACKENDS = ("cv", "pil")
_PLAIN = (int, float)
SUPPORTED_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.float16),
                    np.dtype(np.float32), np.dtype(np.float64))  # what the ops take
_CV_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # what cv2.minMaxLoc reads
_RANGE_SLACK = 1e-3  # of a range's span: rounding past its ends that still counts as inside


def _pair(value: Any, name: str) -> tuple[float, float]:
    pixels = name == "value_range"  # (a pair only, its example pixels')
    takes = "a (low, high) pair of numbers" if pixels else "a number or a (low, high) pair"
    example = "(0, 255)" if pixels else "(0.5, 1.5)"
    or_one = "" if pixels else f" or {name}=1.0"
    if isinstance(value, bool) or not isinstance(value, (int, float, Sequence, np.number)):
        raise ArgumentTypeError(
            f"`{name}` expects {takes}; received {value!r} "
            f"({type(value).__name__}). Pass e.g. {name}={example}{or_one}."
        )
    if isinstance(value, (int, float, np.number)):
        return float(value), float(value)
    if len(value) != 2 or not all(
        isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value
    ):
        raise ArgumentTypeError(
            f"`{name}` expects {takes}; received "
            f"{value!r} ({type(value).__name__}). Pass e.g. {name}={example}."
        )
    return float(value[0]), float(value[1])


def bounds(value: Any, name: str, lo: float = -math.inf, hi: float = math.inf,
           means: str = "") -> tuple[float, float]:
    """Validate a range parameter and return it as ``(low, high)`` floats; ``means``: what
    the parameter means, said where a value is refused (a clamped example alone can say the
    opposite of what was meant).

    Raises:
        ArgumentTypeError: ``value`` is neither a number nor a pair of numbers.
        ArgumentError: ``low > high`` or an end lies outside ``[lo, hi]``.
    """
    a, b = _pair(value, name)
    if not (math.isfinite(a) and math.isfinite(b)):  # (NaN would pass every check below)
        raise ArgumentError(
            f"`{name}` expects finite numbers within [{lo}, {hi}]; received {value!r}. Pass "
            f"e.g. {name}={_example(lo, hi)}.")
    if not (a <= b) or a < lo or b > hi:
        low, high = (_within(v, lo, hi) for v in sorted((a, b)))
        fix = f"{name}={low}" if a == b and not isinstance(value, Sequence) else \
            f"{name}=({low}, {high})"
        fix = f"{means} Pass a range inside those limits." if means else \
            f"Pass a range inside those limits, e.g. {fix}."  # (a clamped example may mislead)
        raise ArgumentError(
            f"`{name}` expects low <= high within [{lo}, {hi}]; received {value!r}. {fix}")
    return a, b


def number(value: Any, name: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """A parameter that is one number, never a range (a threshold, a fill): a ``(low,
    high)`` pair is refused rather than cut to its low end.

    Raises:
        ArgumentTypeError: ``value`` is not a number (a pair among others).
        ArgumentError: it lies outside ``[lo, hi]``.
    """
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        raise ArgumentTypeError(
            f"`{name}` expects one number, not a range; received {value!r}. Pass e.g. "
            f"{name}={_within(float(_pair(value, name)[0]), lo, hi)} (it is a threshold "
            f"or a value, not drawn per sample).")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise ArgumentTypeError(
            f"`{name}` expects one number; received {value!r} ({type(value).__name__}). "
            f"Pass e.g. {name}={sum(_example(lo, hi)) / 2}.")
    a = float(value)
    if not math.isfinite(a):
        bounds = f" within [{lo}, {hi}]" if math.isfinite(lo) or math.isfinite(hi) else ""
        raise ArgumentError(
            f"`{name}` expects a finite number{bounds}; received {value!r}. Pass "
            f"e.g. {name}={_example(lo, hi)[0]}.")
    if not lo <= a <= hi:
        raise ArgumentError(
            f"`{name}` expects a number within [{lo}, {hi}]; received {value!r}. Pass e.g. "
            f"{name}={_within(a, lo, hi)}.")
    return a


def _example(lo: float, hi: float) -> tuple[float, float]:
    """A finite (low, high) inside ``[lo, hi]``, for an error's example."""
    low = lo if math.isfinite(lo) else min(0.0, hi - 1.0) if math.isfinite(hi) else 0.0
    return low, hi if math.isfinite(hi) else low + 1.0


def _within(value: float, lo: float, hi: float) -> float:
    """``value`` moved inside ``[lo, hi]``: what an error suggests instead."""
    return min(hi, max(lo, value))


def keras_factor(value: Any, name: str, lo: float = -1.0, hi: float = 1.0, means: str = ""
                 ) -> tuple[float, float]:
    """A Keras ``factor`` as ``(low, high)``: a lone number f means ``(max(-f, lo), f)``, as
    Keras' image layers read it (symmetric, or ``(0, f)`` where ``lo`` is 0).

    Raises:
        ArgumentTypeError: ``value`` is neither a number nor a pair of numbers.
        ArgumentError: ``value`` (or an end of it) lies outside ``[lo, hi]``, or low > high.
    """
    a, b = _pair(value, name)
    if a == b and not isinstance(value, Sequence):
        if not lo <= a <= hi:
            raise ArgumentError(
                f"`{name}` expects a number in [{lo}, {hi}] (Keras' meaning: the range "
                f"(-{name}, {name}) cut at {lo}) or a (low, high) pair; received {value!r}. "
                + (means if means else f"Pass e.g. {name}={min(hi, max(lo, abs(a)))}.")
            )
        return max(-abs(a), lo), abs(a)
    return bounds(value, name, lo, hi, means)


def draw(
    rng: np.random.Generator, value: Any, name: str = "value", lo: float = -math.inf,
    hi: float = math.inf,
) -> float:
    """One value of an op's parameter, as the built-in ops draw theirs: ``value`` itself when
    it is a number (nothing is drawn from ``rng``), else uniform in a ``(low, high)`` range.

    Args:
        rng: the generator the op received.
        value: a number, or a ``(low, high)`` pair with low <= high.
        name: the parameter's name, for the error message.
        lo: the lowest value it may take (e.g. ``lo=0`` for a strength).
        hi: the highest value it may take.

    Returns:
        A float.

    Raises:
        ArgumentTypeError: ``value`` is neither a number nor a pair of numbers.
        ArgumentError: ``low > high``, or an end lies outside ``[lo, hi]``.

    Example:
        >>> @shmaug.register("ink_bleed")
        ... def ink_bleed(image, rng, strength=(0.1, 0.4)):
        ...     s = shmaug.ops.draw(rng, strength, "strength", lo=0)  # 0.3 or (0.1, 0.4)
    """
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


def draw_int(rng: np.random.Generator, value: Any, name: str = "value", lo: int = 0) -> int:
    """One integer from a fixed int or an inclusive ``(low, high)`` range (as ``draw``, for
    counts and sizes: ``draw_int(rng, (1, 3), "holes")`` is 1, 2 or 3)."""
    a, b = bounds(value, name, lo)
    if a != int(a) or b != int(b):
        raise ArgumentError(
            f"`{name}` expects whole numbers; received {value!r}. Pass e.g. {name}=(1, 3)."
        )
    return int(a) if a == b else int(rng.integers(int(a), int(b) + 1))


# Keras' (and PIL's) names for options shmaug names otherwise: what an error suggests.
_THEIR_NAMES = {("border", "nearest"): "replicate", ("interpolation", "bilinear"): "linear",
                ("interpolation", "bicubic"): "cubic"}


def choice(value: Any, name: str, options: Sequence[str]) -> str:
    """Check that a string option is one of ``options``."""
    if value not in options:
        ours = _THEIR_NAMES.get((name, value)) if isinstance(value, str) else None
        raise ArgumentError(
            f"`{name}` expects one of {', '.join(repr(o) for o in options)}; received "
            f"{value!r} ({type(value).__name__}). "
            + (f"Fix: {name}={ours!r}, shmaug's name for Keras' {value!r}." if ours in options
               else "Pick one of those."))
    return str(value)


def is_pil(backend: Any) -> bool:
    """Whether ``backend`` (checked) asks for PIL's kernels rather than OpenCV's."""
    return choice(backend, "backend", BACKENDS) == "pil"


def cv_only(backend: str, op: str) -> None:
    """Refuse a backend other than OpenCV for an op PIL has no kernel for."""
    if backend != "cv":
        raise ArgumentError(
            f"`backend` of `{op}` expects 'cv' (PIL has no such operation); received "
            f"{backend!r}. Drop the backend argument."
        )


def border_code(border: Any) -> int:
    """The OpenCV border constant for a border name."""
    return BORDERS[choice(border, "border", tuple(BORDERS))]


def interp_code(interpolation: Any, allowed: Sequence[str] = ("nearest", "linear", "cubic")) -> int:
    """The OpenCV interpolation constant for an interpolation name."""
    return CV_INTERPOLATION_FLAGS[choice(interpolation, "interpolation", allowed)]


def channels_first(shape: tuple[int, ...]) -> bool:
    """Whether an image of ``shape`` (3 axes) is laid out channels-first (C, H, W) with 1 to 4
    channels: read as (H, W, C) it would be at most 4 rows of at least 8 pixels with more
    than 4 channels, which no real image is, and which ops would garble (a rotation turns C
    rows). (8x8 patches of 13 bands are real: more channels first are not told apart.)"""
    rows, columns, channels = shape
    return rows <= 4 and columns >= 8 and channels > 4


def frames_first(shape: tuple[int, ...]) -> bool:
    """Whether an image of ``shape`` (3 axes) looks like a grey clip or volume, frames first
    (T, H, W): as many channels as columns, and a third as many rows (8 of 64x64: read as 8
    rows of 64 pixels in 64 channels, whose rotation blends the frames). Patches of as many
    bands as columns are real too (21x64 of 64 bands): told, not refused."""
    rows, columns, channels = shape
    return channels > 4 and columns == channels and 3 * rows <= columns


def check_image(image: Any) -> np.ndarray:
    """Reject anything that is not an (H, W), (H, W, 1) or (H, W, C) uint8/uint16/float array
    (a channels-first one included)."""
    if not isinstance(image, np.ndarray):
        raise ArgumentTypeError(
            f"`image` expects a numpy array; received {type(image).__name__}. "
            f"Convert it with numpy.asarray(image)."
        )
    if image.ndim not in (2, 3) or image.dtype not in SUPPORTED_DTYPES or 0 in image.shape:
        raise ArgumentError(
            f"`image` expects shape (H, W) or (H, W, C) with dtype uint8, uint16, float16, "
            f"float32 or float64; received shape {image.shape} dtype {image.dtype}. Convert it "
            f"before augmenting, e.g. image.astype(numpy.float32) with a matching value_range."
        )
    if image.ndim == 3 and channels_first(image.shape):
        c, h, w = image.shape
        raise ArgumentError(
            f"`image` has shape {image.shape}, the channels-first layout (C, H, W) of a "
            f"{c}-channel {h}x{w} image (or {c} frames or slices), but shmaug's ops take "
            f"channels-last images (H, W, C): they would read {c} rows of {h} pixels with {w} "
            f"channels. Fix: move the channel axis last, np.moveaxis(image, 0, -1) (where the "
            f"samples are made, e.g. a `load`; frames become channels, which geometric ops move "
            f"alike), and keep the model channels-last (Keras' default data_format); a "
            f"channels-first model (keras.config.image_data_format() 'channels_first') takes "
            f"np.moveaxis(xb, -1, 1) of each batch, from a Sequence subclass's "
            f"`model_inputs` (docs/keras.md).")
    return image


@dataclass(frozen=True, slots=True)
class Levels:
    """The pixel scale of an image: ``lo`` is black, ``hi`` full scale (its ``value_range``)."""

    lo: float
    hi: float

    @property
    def span(self) -> float:
        return self.hi - self.lo

    def at(self, fraction: float) -> float:
        """The pixel value ``fraction`` of the way from black to full scale."""
        return self.lo + fraction * (self.hi - self.lo)


_BY_DTYPE = {np.dtype(np.uint8): Levels(0.0, 255.0), np.dtype(np.uint16): Levels(0.0, 65535.0)}
UNIT = Levels(0.0, 1.0)  # the value range of float images by default


def dtype_range(dtype: Any) -> ValueRange | None:
    """The value range a dtype implies: uint8 (0, 255), uint16 (0, 65535), floats (0, 1)."""
    kind = np.dtype(dtype)
    fixed = _BY_DTYPE.get(kind, UNIT if kind.kind == "f" else None)
    return None if fixed is None else (fixed.lo, fixed.hi)


def outside(low: float, high: float, vr: ValueRange) -> bool:
    """Whether values spanning ``low..high`` leave ``vr`` (beyond rounding), or are not finite."""
    slack = _RANGE_SLACK * (vr[1] - vr[0])
    return not (vr[0] - slack <= low and high <= vr[1] + slack)


def value_range(value: Any, name: str = "value_range") -> tuple[float, float] | None:
    """Validate a ``value_range`` argument: None, or ``(low, high)`` with low < high."""
    if value is None:
        return None
    lo, hi = bounds(value, name)
    if not lo < hi or not (math.isfinite(lo) and math.isfinite(hi)):
        raise ArgumentError(
            f"`{name}` expects (low, high) with low < high, both finite, e.g. (0, 255); "
            f"received {value!r}."
        )
    return lo, hi


def levels(image: np.ndarray, given: tuple[float, float] | None) -> Levels:
    """The scale of ``image``: ``given`` (a checked ``value_range``), else by its dtype.

    Float images without a ``value_range`` must lie in [0, 1]: that is checked here (a pass
    over the image, paid only when no range was given, i.e. not inside a loader), so an op
    never clamps 0..255 data to [0, 1].
    """
    if given is not None:
        if type(given) is tuple and len(given) == 2 and given[0] < given[1]:
            return Levels(float(given[0]), float(given[1]))
        lo_hi = value_range(given)  # raises the message for a malformed range
        assert lo_hi is not None
        return Levels(*lo_hi)
    fixed = _BY_DTYPE.get(image.dtype)
    if fixed is not None:
        return fixed
    low, high = float(np.min(image)), float(np.max(image))
    if not (math.isfinite(low) and math.isfinite(high)):  # (their sum overflows near 1e308)
        raise ArgumentError(
            f"This {image.dtype} image holds NaN or infinity: an op would spread them through "
            f"the image, and no value_range can hold them. Fix: clean the data first, e.g. "
            f"image = np.nan_to_num(image, nan=0.0, posinf=1.0, neginf=0.0) for data in "
            f"[0, 1].")
    if outside(low, high, (0.0, 1.0)):
        guess = range_guess(low, high)
        seen = "" if guess in _USUAL_RANGES else (
            " That is this image's own span: every image must lie in the range, or its "
            "values are clipped. Data scaled per image (percentiles, z-scores) has no fixed "
            "range: scale it as the pipeline's last step, after the ops, and give them the "
            "range of the data before it.")
        raise ArgumentError(
            f"`value_range` is unset, so this {image.dtype} image should hold values in "
            f"[0, 1]; it spans {low:g}..{high:g}. Fix: pass the range the data is in, e.g. "
            f"value_range={guess}, to the op or to Compose(...) (a loader's value_range "
            f"reaches the ops of its Compose, not a function calling them).{seen}"
        )
    return UNIT


_USUAL_RANGES = ("(0, 255)", "(-1, 1)")


def range_guess(low: float, high: float) -> str:
    """A ``value_range`` to suggest for data seen spanning ``low..high``: the usual ones
    where they hold it (``_USUAL_RANGES``), else what was seen. Data in [0, 1] but for an
    overshoot (a resize's or sharpening's ringing, up to 2) is not told (0, 255), in which
    its white would be nearly black to the ops."""
    if low >= 0:
        if high <= 2.0:
            return f"(0, {high:g})"
        return _USUAL_RANGES[0] if high <= 255.5 else f"(0, {high:g})"
    return _USUAL_RANGES[1] if low >= -1 and high <= 1 else f"({low:g}, {high:g})"


def fill_value(fill: Any, scale: Levels) -> tuple[float, float, float, float]:
    """``fill`` (a fraction of the range) as an OpenCV border Scalar."""
    a = (float(fill) if type(fill) in _PLAIN and 0.0 <= fill <= 1.0
         else bounds(fill, "fill", 0.0, 1.0)[0])
    v = scale.at(a)
    return (v, v, v, v)


# cv2.subtract(array, 0.0, dtype=...) is OpenCV's depth conversion (x - 0 keeps -0.0, x + 0
# would not); its stubs take no float scalar.
_cv_subtract: Any = cv2.subtract


@functools.cache
def _cv_half() -> bool:
    """Whether this OpenCV converts numpy float16 arrays (CV_16F; F16C instructions where the
    CPU has them): 3-4x faster than numpy's astype on a 64x64 image, and bit-identical to it
    (round to nearest even) - checked here once, on a tie, a subnormal and -0.0."""
    probe = np.array([[0.0, -0.0, 1.0, 6e-8, 1.0 + 2.0**-11, 65504.0, 0.1, 1.0 / 3.0]], np.float32)
    try:
        half = _cv_subtract(probe, 0.0, dtype=cv2.CV_16F)
        back = _cv_subtract(half, 0.0, dtype=cv2.CV_32F)
    except (cv2.error, TypeError, AttributeError):  # an OpenCV without float16 (or CV_16F)
        return False
    expected = probe.astype(np.float16)
    return (isinstance(half, np.ndarray) and half.dtype == np.float16
            and np.array_equal(half.view(np.uint16), expected.view(np.uint16))
            and np.array_equal(back, expected.astype(np.float32)))


def convert(image: np.ndarray, dtype: Any) -> np.ndarray:
    """``image.astype(dtype)`` (a new array), through OpenCV between float16 and float32.

    float16 -> float32 is exact; float32 -> float16 rounds to nearest even, as numpy does.
    """
    dtype = np.dtype(dtype)
    if ({image.dtype.char, dtype.char} == {"e", "f"} and image.flags.c_contiguous
            and (image.ndim == 2 or (image.ndim == 3 and image.shape[2] <= 4)) and image.size
            and _cv_half()):
        depth = cv2.CV_16F if dtype.char == "e" else cv2.CV_32F
        out: np.ndarray = _cv_subtract(image, 0.0, dtype=depth)
        return out.reshape(image.shape)  # OpenCV drops a trailing channel axis of 1
    return image.astype(dtype)


def to_work(image: np.ndarray) -> np.ndarray:
    """The array OpenCV sees: float16 -> float32, (H, W, 1) -> (H, W)."""
    check_image(image)
    work = convert(image, np.float32) if image.dtype == np.float16 else image
    if work.ndim == 3 and work.shape[2] == 1:
        work = work[:, :, 0]
    return work


def inside(image: np.ndarray, scale: Levels) -> bool:
    """Whether a float32 / float64 ``image`` is known to lie within ``scale``: one read-only
    pass (``cv2.minMaxLoc``). False also when that cannot be told cheaply (other dtypes,
    non-contiguous layouts)."""
    if image.dtype in _CV_FLOATS and image.flags.c_contiguous and image.ndim in (2, 3):
        low, high = cv2.minMaxLoc(image.reshape(image.shape[0], -1))[:2]
        return bool(scale.lo <= low and high <= scale.hi)
    return False


def clamp(out: np.ndarray, scale: Levels) -> np.ndarray:
    """A float ``out`` clamped to ``scale`` (in place where it may be written).

    Most results already lie inside (a warp or a blur of pixels in range), so one read-only
    min / max pass decides first: on a 224x224x3 float32 image 3 us, against 11 us for the
    clip it saves; an image that does need it pays both.
    """
    if inside(out, scale):
        return out
    # The method, not np.clip: np.clip's wrapper costs ~4 us more per call on numpy 2.
    clipped: np.ndarray = out.clip(scale.lo, scale.hi, out=out if out.flags.writeable else None)
    return clipped


def restore(out: np.ndarray, like: np.ndarray, scale: Levels) -> np.ndarray:
    """Undo :func:`to_work`: give ``out`` the layout and dtype of ``like``, clamped to ``scale``
    (interpolation and filters can overshoot; OpenCV saturates integer results itself)."""
    if like.ndim == 3 and out.ndim == 2:
        out = out[:, :, None]
    if out.dtype.kind == "f":
        out = clamp(out, scale)
    elif scale != _BY_DTYPE.get(out.dtype):
        # Integer pixels in a narrower range (a 0/1 mask in uint8): whole-number bounds, as
        # numpy will not write float bounds into an integer array.
        lo, hi = math.ceil(scale.lo), math.floor(scale.hi)
        out = out.clip(lo, hi, out=out if out.flags.writeable else None)
    if out.dtype != like.dtype:
        out = convert(out, like.dtype)
    return out
