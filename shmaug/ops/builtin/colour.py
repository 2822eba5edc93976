"""Built-in colour ops, Keras' image layers as shmaug ops: sample parameters, call a kernel.

Owns the registered ops ``hue``, ``saturation``, ``color_jitter``, ``grayscale``,
``color_degeneration``, ``invert``, ``solarize``, ``posterize``, ``equalize``,
``auto_contrast``, ``clahe`` and ``channel_shuffle``; the pixel work is in ``kernels/colour.py``.

Argument names and meanings follow the Keras 3 layer each op mirrors (``RandomHue`` for
``hue``, ...). A parameter named ``factor`` (or ``*_factor``) carries Keras' meaning whole, a
lone number included: ``factor=f`` is the range Keras makes of it, ``(-f, f)`` or ``(0, f)``
per op, and is drawn per sample; other parameters follow shmaug's rule (a number is fixed, a
pair is drawn). ``value_range`` is shmaug's (default: by dtype), and values Keras takes on the
0..255 scale (thresholds, additions) are fractions of it here. Ops that need colour (hue,
saturation, grayscale, degeneration) leave an image with fewer than 3 channels as it is and
work on the first three of more.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import cv2
import numpy as np

from ...resample import CV_CHANNELS
from ..kernels import colour as k
from ..params import (
    Range,
    ValueRange,
    bounds,
    check_image,
    choice,
    draw,
    draw_int,
    keras_factor,
    levels,
    restore,
    to_work,
)
from . import checks as chk
from ..core import STILL, register
from ...errors import ArgumentError

_UNIT_FACTOR = partial(keras_factor, lo=0.0, hi=1.0)  # Keras' _FACTOR_BOUNDS = (0, 1)
_SIGNED_FACTOR = partial(keras_factor, lo=-1.0, hi=1.0)  # Keras' default bounds, (-1, 1)
# Keras' RandomSaturation factor, where a gain of torchvision's (ColorJitter's 0.9-1.1) was
# told "e.g. (0.9, 1.0)": a strong saturation
_SATURATION_FACTOR = partial(keras_factor, lo=-1.0, hi=1.0, means=(
    "It is Keras' RandomSaturation factor f, a gain of f / (1 - f): 0.5 keeps the saturation, "
    "0 makes gray, 1 the most saturated. A gain g (torchvision's ColorJitter saturation) is "
    "f = g / (1 + g): (0.9, 1.1) is about (0.47, 0.52)."))
_ORDERS = ("keras", "random")


Kernel = Callable[[np.ndarray], np.ndarray]
_BYTES = (0.0, 255.0)


def unit_op(image: np.ndarray, vr: ValueRange | None, fn: Kernel, *, rgb: bool = False,
            on_bytes: Kernel | None = None) -> np.ndarray:
    """``fn`` on ``image`` mapped to a float32 unit image, mapped back to its dtype and
    range; ``rgb``: only on the first three channels, and not at all on gray images.
    ``on_bytes``: the same kernel on uint8 in 0..255 as it is (``cv_colour``'s 8-bit ones),
    run instead for such images: no float round trip."""
    work = to_work(image)
    scale = levels(image, vr)
    bytes_ = on_bytes is not None and work.dtype == np.uint8 and (scale.lo, scale.hi) == _BYTES
    if rgb:
        if work.ndim == 2 or work.shape[2] < 3:
            return image
        fn = partial(k.on_rgb, fn=fn)
        on_bytes = None if on_bytes is None else partial(k.on_rgb, fn=on_bytes)
    if bytes_:
        assert on_bytes is not None
        return restore(on_bytes(work), image, scale)
    out = k.from_unit(fn(k.to_unit(work, scale)), work.dtype, scale)
    return restore(out, image, scale)


def _hue_turns(rng: np.random.Generator, factor: Any) -> float:
    """Keras' RandomHue draw: a magnitude in ``factor``, a random sign, half a turn at 1."""
    magnitude = draw(rng, _UNIT_FACTOR(factor, "factor"), "factor")
    sign = -1.0 if rng.random() > 0.5 else 1.0
    return sign * magnitude * 0.5


_BYTES_GAIN = 4.0
"""The largest saturation gain (factor 0.8) made in 8-bit HSV: its rounding of a pale pixel's
saturation grows with the gain (42 gray levels from the float kernel at gain 99, 32 in a
color_jitter at 9), so a larger one takes the float kernels."""


def _saturation_gain(rng: np.random.Generator, factor: Any) -> float:
    """Keras' RandomSaturation draw: f in ``factor``, gain f / (1 - f) (0.5 keeps it; a
    negative f, which Keras 3.15 draws from a lone f, greys the image: gain 0)."""
    f = draw(rng, _SIGNED_FACTOR(factor, "factor"), "factor")
    return max(f, 0.0) / (1.0 - f + 1e-7)


@register("hue", targets=STILL, checks={"factor": _UNIT_FACTOR, **chk.VALUE_RANGE})
def hue(image: np.ndarray, rng: np.random.Generator, factor: Range = 0.1,
        value_range: ValueRange | None = None) -> np.ndarray:
    """Rotate the hue by up to ``factor`` half-turns either way (Keras' RandomHue).

    Example:
        >>> out = hue(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0), factor=0.2)
    """
    turns = _hue_turns(rng, factor)
    if turns == 0.0:
        check_image(image)
        return image
    return unit_op(image, value_range, partial(k.hsv_adjust, hue_shift=turns,
                                               saturation_gain=1.0), rgb=True,
                   on_bytes=partial(k.hsv_adjust_bytes, hue_shift=turns, saturation_gain=1.0))


@register("saturation", targets=STILL, checks={"factor": _SATURATION_FACTOR,
                                                **chk.VALUE_RANGE})
def saturation(image: np.ndarray, rng: np.random.Generator, factor: Range = (0.4, 0.6),
               value_range: ValueRange | None = None) -> np.ndarray:
    """Scale saturation by ``f / (1 - f)``, f drawn in ``factor`` (Keras' RandomSaturation:
    0 is gray, 0.5 the identity, 1 full saturation; below 0 gray too, so a lone f, drawn in
    (-f, f) as Keras 3.15 draws it, greys about half the images).

    Example:
        >>> out = saturation(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0))
    """
    gain = _saturation_gain(rng, factor)
    if abs(gain - 1.0) < 1e-6:  # factor 0.5, up to Keras' epsilon
        check_image(image)
        return image
    return unit_op(image, value_range, partial(k.hsv_adjust, hue_shift=0.0,
                                               saturation_gain=gain), rgb=True,
                   on_bytes=partial(k.hsv_adjust_bytes, hue_shift=0.0, saturation_gain=gain)
                   if gain <= _BYTES_GAIN else None)


def _jitter_draws(rng: np.random.Generator, brightness: Any, contrast: Any, saturation: Any,
                  hue: Any, order: str, colour: bool) -> list[tuple[str, float]]:
    """The drawn steps of ``color_jitter`` as (step, value), in Keras' order or a drawn one
    (saturation and hue only on ``colour`` images)."""
    steps: list[tuple[str, float]] = []
    if brightness is not None:
        steps.append(("brightness", draw(rng, keras_factor(brightness, "brightness_factor"),
                                         "brightness_factor")))
    if contrast is not None:
        steps.append(("contrast", draw(rng, _contrast_range(contrast, "contrast_factor"),
                                       "contrast_factor")))
    if saturation is not None and colour:
        steps.append(("saturation", _saturation_gain(rng, saturation)))
    if hue is not None and colour:
        steps.append(("hue", _hue_turns(rng, hue)))
    if choice(order, "order", _ORDERS) == "random":
        steps = [steps[i] for i in rng.permutation(len(steps))]
    return steps


# Each step of color_jitter: (kernel on a unit image, kernel on uint8), from its drawn value.
_JITTER: dict[str, tuple[Callable[[float], Kernel], Callable[[float], Kernel]]] = {
    "brightness": (lambda v: partial(k.brightness, delta=v),
                   lambda v: partial(k.brightness_bytes, delta=v)),
    "contrast": (lambda v: partial(k.contrast, factor=v),
                 lambda v: partial(k.contrast_bytes, factor=v)),
    "saturation": (lambda v: partial(k.on_rgb, fn=partial(k.hsv_adjust, hue_shift=0.0,
                                                          saturation_gain=v)),
                   lambda v: partial(k.on_rgb, fn=partial(k.hsv_adjust_bytes, hue_shift=0.0,
                                                          saturation_gain=v))),
    "hue": (lambda v: partial(k.on_rgb, fn=partial(k.hsv_adjust, hue_shift=v,
                                                   saturation_gain=1.0)),
            lambda v: partial(k.on_rgb, fn=partial(k.hsv_adjust_bytes, hue_shift=v,
                                                   saturation_gain=1.0))),
}


def _contrast_range(value: Any, name: str) -> tuple[float, float]:
    """Keras' RandomContrast ``factor`` (as documented): (a, b) draws the contrast in
    (1 - a, 1 + b), a lone f in (1 - f, 1 + f); (-c, c) pins it to 1 + c, as in Keras."""
    a, b = bounds(value, name, -1.0, 1.0)
    return 1.0 - a, 1.0 + b


@register("color_jitter", targets=STILL, checks={
    "brightness_factor": chk.optional(keras_factor),
    "contrast_factor": chk.optional(_contrast_range),
    "saturation_factor": chk.optional(_SATURATION_FACTOR),
    "hue_factor": chk.optional(_UNIT_FACTOR),
    "order": chk.one_of(*_ORDERS), **chk.VALUE_RANGE})
def color_jitter(
    image: np.ndarray, rng: np.random.Generator, brightness_factor: Range | None = 0.2,
    contrast_factor: Range | None = 0.2, saturation_factor: Range | None = (0.4, 0.6),
    hue_factor: Range | None = 0.05, order: str = "keras",
    value_range: ValueRange | None = None,
) -> np.ndarray:
    """Brightness, contrast, saturation and hue in one op (Keras' RandomColorJitter).

    Each factor means what it does in Keras' RandomBrightness, RandomContrast,
    RandomSaturation and RandomHue; ``None`` skips that step. ``order="keras"`` runs them in
    that order, ``"random"`` in an order drawn per sample, as torchvision's ColorJitter.
    Saturation and hue leave gray images alone.

    Example:
        >>> out = color_jitter(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0))
    """
    colour = check_image(image).ndim == 3 and image.shape[2] >= 3
    drawn = _jitter_draws(rng, brightness_factor, contrast_factor, saturation_factor,
                          hue_factor, order, colour)
    in_bytes = all(v <= _BYTES_GAIN for s, v in drawn if s == "saturation")
    return unit_op(image, value_range,
                   partial(_run_clipped, steps=[_JITTER[s][0](v) for s, v in drawn]),
                   on_bytes=partial(_run, steps=_byte_steps(drawn)) if in_bytes else None)


def _run_clipped(unit: np.ndarray, steps: list[Kernel]) -> np.ndarray:
    """Each step in turn, clipped to the range after each as Keras' layers clip."""
    for step in steps:
        unit = np.clip(step(unit), 0.0, 1.0)
    return unit


def _byte_steps(drawn: list[tuple[str, float]]) -> list[Kernel]:
    """The 8-bit kernels of ``color_jitter``'s steps; saturation and hue next to each other
    are one HSV round trip (they commute, and each round trip through 8-bit HSV rounds)."""
    steps: list[Kernel] = []
    i = 0
    while i < len(drawn):
        pair = {s for s, _ in drawn[i:i + 2]}
        if pair == {"saturation", "hue"}:
            values = dict(drawn[i:i + 2])
            steps.append(partial(k.on_rgb, fn=partial(
                k.hsv_adjust_bytes, hue_shift=values["hue"],
                saturation_gain=values["saturation"])))
            i += 2
            continue
        step, value = drawn[i]
        steps.append(_JITTER[step][1](value))
        i += 1
    return steps


def _run(img8: np.ndarray, steps: list[Kernel]) -> np.ndarray:
    """Each 8-bit step in turn (each saturates, as the float ones clip)."""
    for step in steps:
        img8 = step(img8)
    return img8


def _probability(rng: np.random.Generator, factor: Any) -> bool:
    """Keras' "apply with probability p, p drawn in factor" (RandomInvert, RandomErasing)."""
    p = draw(rng, _UNIT_FACTOR(factor, "factor"), "factor")
    return bool(rng.random() < p)


@register("grayscale", targets=STILL, checks={"factor": chk.ranged(0.0, 1.0), **chk.VALUE_RANGE})
def grayscale(image: np.ndarray, rng: np.random.Generator, factor: Range = 0.5,
              value_range: ValueRange | None = None) -> np.ndarray:
    """With probability ``factor``, replace the colours by their luma in every channel
    (Keras' RandomGrayscale; 3 channels stay 3).

    Example:
        >>> out = grayscale(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0))
    """
    if not rng.random() < draw(rng, factor, "factor", 0.0, 1.0):
        return image
    return unit_op(image, value_range, k.to_gray, rgb=True, on_bytes=k.to_gray_bytes)


@register("color_degeneration", targets=STILL,
          checks={"factor": _SIGNED_FACTOR, **chk.VALUE_RANGE})
def color_degeneration(image: np.ndarray, rng: np.random.Generator, factor: Range = 0.5,
                       value_range: ValueRange | None = None) -> np.ndarray:
    """Blend towards gray by f drawn in ``factor`` (Keras' RandomColorDegeneration: 0 keeps
    the colours, 1 is gray, below 0 away from gray; a lone f is (-f, f), as Keras 3.15
    draws it).

    Example:
        >>> out = color_degeneration(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0))
    """
    amount = draw(rng, _SIGNED_FACTOR(factor, "factor"), "factor")
    if amount == 0.0:
        return image
    return unit_op(image, value_range, partial(k.degenerate, amount=amount), rgb=True,
                   on_bytes=partial(k.degenerate_bytes, amount=amount))


def mapped(image: np.ndarray, vr: ValueRange | None,
           fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """A per-pixel map of unit values (a lookup table on uint8)."""
    work = to_work(image)
    scale = levels(image, vr)
    return restore(k.pointwise(work, fn, scale), image, scale)


def inverted(unit: np.ndarray) -> np.ndarray:
    """A unit image inverted: ``invert``'s map (RandAugment's ``Invert`` too)."""
    out: np.ndarray = np.float32(1.0) - unit
    return out


@register("invert", targets=STILL, checks={"factor": _UNIT_FACTOR, **chk.VALUE_RANGE})
def invert(image: np.ndarray, rng: np.random.Generator, factor: Range = 1.0,
           value_range: ValueRange | None = None) -> np.ndarray:
    """Invert (``hi + lo - x``) with probability p drawn in ``factor`` (Keras' RandomInvert:
    the default 1.0 draws p in (0, 1), so half the samples are inverted).

    Example:
        >>> out = invert(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    if not _probability(rng, factor):
        check_image(image)
        return image
    return mapped(image, value_range, inverted)


@register("solarize", targets=STILL, checks={"addition_factor": _UNIT_FACTOR,
                                             "threshold_factor": _UNIT_FACTOR, **chk.VALUE_RANGE})
def solarize(image: np.ndarray, rng: np.random.Generator, addition_factor: Range = 0.0,
             threshold_factor: Range = (0.5, 1.0), value_range: ValueRange | None = None
             ) -> np.ndarray:
    """Add a ``addition_factor`` fraction of the range, then invert pixels at or above a
    ``threshold_factor`` fraction (Keras' Solarization, both drawn in their ranges).

    Example:
        >>> out = solarize(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    add = draw(rng, _UNIT_FACTOR(addition_factor, "addition_factor"), "addition_factor")
    t = draw(rng, _UNIT_FACTOR(threshold_factor, "threshold_factor"), "threshold_factor")
    return mapped(image, value_range, partial(k.solarize, threshold=t, addition=add))


def _bits(value: Any, name: str) -> tuple[int, int]:
    """Keras' RandomPosterization ``factor`` as documented: bits kept, whole numbers in
    [1, 8], a lone number exactly that many."""
    low, high = bounds(value, name, 1.0, 8.0)
    if low != int(low) or high != int(high):
        raise ArgumentError(
            f"`{name}` expects whole numbers of bits in [1, 8]; received {value!r}. "
            f"Pass e.g. {name}=(4, 8)."
        )
    return int(low), int(high)


@register("posterize", targets=STILL, checks={"factor": _bits, **chk.VALUE_RANGE})
def posterize(image: np.ndarray, rng: np.random.Generator, factor: Range = (4, 8),
              value_range: ValueRange | None = None) -> np.ndarray:
    """Keep the top n bits of each 8-bit value: n is ``factor``, or drawn in a (low, high)
    ``factor`` with both ends included (Keras' RandomPosterization as documented; 8 is the
    identity).

    Example:
        >>> out = posterize(np.zeros((8, 8), np.uint8), np.random.default_rng(0), factor=4)
    """
    bits = draw_int(rng, _bits(factor, "factor"), "factor", 1)
    if bits == 8:
        check_image(image)
        return image
    return mapped(image, value_range, partial(k.posterize, bits=bits))


@register("equalize", targets=STILL, checks={"bins": chk.whole(2), **chk.VALUE_RANGE})
def equalize(image: np.ndarray, rng: np.random.Generator, bins: int = 256,
             value_range: ValueRange | None = None) -> np.ndarray:
    """Histogram equalization, each channel on its own (Keras' Equalization).

    Example:
        >>> out = equalize(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    bins = chk.whole_number(bins, "bins", 2)
    return unit_op(image, value_range, partial(k.equalize, bins=bins),
                   on_bytes=k.equalize_bytes if bins == 256 else None)


@register("auto_contrast", targets=STILL, checks=chk.VALUE_RANGE)
def auto_contrast(image: np.ndarray, rng: np.random.Generator,
                  value_range: ValueRange | None = None) -> np.ndarray:
    """Stretch each channel's darkest..brightest to the full range (Keras' AutoContrast).

    Example:
        >>> out = auto_contrast(np.zeros((8, 8), np.uint8), np.random.default_rng(0))
    """
    return unit_op(image, value_range, k.auto_contrast, on_bytes=k.auto_contrast_bytes)


def _grid(value: Any, name: str) -> tuple[int, int]:
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in value)):
        raise ArgumentError(
            f"`{name}` expects (rows, columns) of whole numbers >= 1; received {value!r} "
            f"({type(value).__name__}). Pass e.g. {name}=(8, 8)."
        )
    return int(value[0]), int(value[1])


@register("clahe", targets=STILL, checks={"clip_limit": chk.ranged(0.0),
                                          "tile_grid_size": _grid, **chk.VALUE_RANGE})
def clahe(image: np.ndarray, rng: np.random.Generator, clip_limit: Range = 4.0,
          tile_grid_size: tuple[int, int] = (8, 8), value_range: ValueRange | None = None
          ) -> np.ndarray:
    """Contrast-limited adaptive histogram equalization on each channel, as Keras'
    ContrastLimitedAdaptiveHistogramEqualization computes it (256 levels per tile).

    Example:
        >>> out = clahe(np.zeros((16, 16), np.uint8), np.random.default_rng(0))
    """
    limit = draw(rng, clip_limit, "clip_limit", 0.0)
    grid = _grid(tile_grid_size, "tile_grid_size")
    return unit_op(image, value_range, partial(k.clahe, clip_limit=limit, grid=grid))


@register("channel_shuffle", targets=STILL)
def channel_shuffle(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Permute the channels at random (albumentations' ChannelShuffle; gray stays as is).

    Example:
        >>> out = channel_shuffle(np.zeros((8, 8, 3), np.uint8), np.random.default_rng(0))
    """
    check_image(image)
    if image.ndim == 2 or image.shape[2] == 1:
        return image
    order = rng.permutation(image.shape[2])
    if image.dtype == np.float16 or image.shape[2] > CV_CHANNELS:  # (not OpenCV's)
        return np.take(image, order, axis=2)
    # cv2.mixChannels copies planes 4-7x faster than numpy's fancy index (same bytes)
    out = np.empty(image.shape, image.dtype)
    cv2.mixChannels([np.ascontiguousarray(image)], [out],
                    [int(i) for pair in zip(order, range(len(order))) for i in pair])
    return out
