"""Ready-made pipelines: the ones people start from.

Owns named pipelines built from registered ops, each checked when it is built (a bad argument
fails here, naming it, not mid-epoch in a worker). Each returns a ``Compose`` of registered ops
only, so it pickles for spawned workers, round-trips through ``to_config`` / ``from_config``,
and draws only from the ``rng`` it is given (deterministic per sample). The ops themselves
live in ``shmaug.ops``.

- ``imagenet_train``: photos, training from scratch (random resized crop, flip, colour jitter).
- ``light``: photos, fine-tuning a pretrained model (a small crop, flip, slight colour).
- ``glyph_distort``: handwritten glyphs (one warp, then one filter).
- ``text_line``: lines of text for OCR / handwriting recognition (the same, at a line's scale).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import ArgumentError, ArgumentTypeError
from .ops import Compose, Maybe, OneOf, Op
from .ops.params import choice

__all__ = ["imagenet_train", "light", "glyph_distort", "text_line"]  # (what completion offers)

_INTERPOLATIONS = ("nearest", "linear", "cubic")
_KERAS_NAMES = {"bilinear": "linear", "bicubic": "cubic"}  # keras.layers.Resizing's, taken too


def imagenet_train(
    size: int | Sequence[int] | None = 224, *, scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3), horizontal_flip: bool = True,
    brightness: float = 0.4, contrast: float = 0.4, saturation: float = 0.4, hue: float = 0.0,
    interpolation: str = "linear",
) -> Compose:
    """The ImageNet training recipe (Inception / ResNet, torchvision's ``RandomResizedCrop``
    + ``RandomHorizontalFlip`` + ``ColorJitter``, timm's defaults): strong enough to train
    from scratch.

    In order:

    1. ``random_resized_crop(size, scale, ratio)``: a random window covering ``scale`` of the
       area (8% to all of it), of aspect ``ratio`` (3:4 to 4:3), drawn as torchvision draws
       it and resized to ``size``: the model sees objects at many scales and positions, the
       heart of this recipe. Over a source with ``image_size=None`` the window is drawn on
       the photo's own resolution and only the window is decoded
       ([the ImageNet recipe](../recipe-imagenet.md)).
    2. ``Maybe(hflip, p=0.5)`` when ``horizontal_flip``: photos are mirror-symmetric; text
       and digits are not (pass False).
    3. ``brightness_contrast``: factors drawn in ``1 +- brightness`` and ``1 +- contrast``
       (``PIL.ImageEnhance``'s, as ColorJitter's), for lighting the model must not rely on.
    4. ``saturation``: factors from ``1 - saturation`` to ``1 + saturation`` (Keras'
       ``RandomSaturation`` draw between those ends, which favours the lower half a little:
       mean 0.95 at 0.4, where ColorJitter's uniform factor has 1); ``hue``: a rotation of
       up to ``hue`` turns either way (ColorJitter's meaning; timm leaves it at 0). Each is
       left out at 0; a grey image passes through both unchanged.

    With ``size=None`` the crop keeps the input's size (``resized_crop``, its aspect relative
    to the input's), as before the decode-time crop.

    Args:
        size: output (height, width) in pixels, an int for a square, or None for the input's.
        scale: (low, high) area fraction of the crop, within (0, 1].
        ratio: (low, high) aspect (width / height) of the crop, positive.
        horizontal_flip: mirror half the samples left-right.
        brightness: jitter strength in [0, 1]; 0 leaves brightness as it is.
        contrast: jitter strength in [0, 1]; 0 leaves contrast as it is.
        saturation: jitter strength in [0, 1]; 0 leaves saturation as it is.
        hue: the largest hue rotation in turns, in [0, 0.5] (ColorJitter's); 0: none.
        interpolation: the crop's resampling: "nearest", "linear" or "cubic" (Keras'
            "bilinear" and "bicubic" are taken too); antialiased when it shrinks, as
            torchvision's on PIL images.

    Returns:
        A ``Compose``; on an (H, W[, C]) image, or a photo not yet decoded, it gives
        (``size``[, C]) of the same dtype.

    Raises:
        ArgumentTypeError, ArgumentError: an argument of the wrong type or out of range
            (named, with the fix).

    Example:
        >>> import numpy as np, shmaug
        >>> aug = shmaug.presets.imagenet_train(224)
        >>> aug(np.zeros((256, 256, 3), np.uint8), np.random.default_rng(0)).shape
        (224, 224, 3)
    """
    return _photo("imagenet_train", size, scale, ratio, horizontal_flip, brightness, contrast,
                  interpolation, saturation=saturation, hue=hue)


def light(
    size: int | Sequence[int] | None = None, *, scale: Sequence[float] = (0.8, 1.0),
    ratio: Sequence[float] = (0.9, 1 / 0.9), horizontal_flip: bool = True,
    brightness: float = 0.1, contrast: float = 0.1, interpolation: str = "linear",
) -> Compose:
    """A light touch for fine-tuning a pretrained model, or for small datasets where strong
    augmentation costs more accuracy than it buys.

    The same steps as :func:`imagenet_train`, milder: ``resized_crop`` keeping 80% to all of
    the area at an aspect within 10% of the input's, ``resize(size)`` when ``size`` is given,
    ``Maybe(hflip, p=0.5)`` when ``horizontal_flip``, and ``brightness_contrast`` with factors
    in ``1 +- 0.1``. The images stay close to those the pretrained weights saw.

    Args:
        size: output (height, width) in pixels, an int for a square, or None (the default)
            to keep the input's size.
        scale: the crop's area fraction (default: 80% to all of it).
        ratio: the crop's aspect relative to the input's (default: within 10%).
        horizontal_flip: as for :func:`imagenet_train`.
        brightness: its jitter strength (default 0.1).
        contrast: its jitter strength (default 0.1).
        interpolation: as for :func:`imagenet_train`.

    Returns:
        A ``Compose``; same shape as its input (or ``size``), same dtype.

    Raises:
        ArgumentTypeError, ArgumentError: an argument of the wrong type or out of range
            (named, with the fix).

    Example:
        >>> import numpy as np, shmaug
        >>> aug = shmaug.presets.light()
        >>> aug(np.zeros((96, 128, 3), np.uint8), np.random.default_rng(0)).shape
        (96, 128, 3)
    """
    return _photo("light", size, scale, ratio, horizontal_flip, brightness, contrast,
                  interpolation)


def _photo(
    who: str, size: Any, scale: Any, ratio: Any, horizontal_flip: Any, brightness: Any,
    contrast: Any, interpolation: Any, *, saturation: Any = None, hue: Any = None,
) -> Compose:
    """The photo recipe both presets share, every argument checked before any op is bound.
    With ``saturation`` given (``imagenet_train``), the crop is torchvision's, to ``size``."""
    hw = _size(size, who)
    area = _range(scale, "scale", who, 1.0, "(0.08, 1.0)")
    aspect = _range(ratio, "ratio", who, math.inf, "(0.75, 1.333)")
    flip = _flag(horizontal_flip, "horizontal_flip", who)
    b = _strength(brightness, "brightness", who)
    c = _strength(contrast, "contrast", who)
    if isinstance(interpolation, str):
        interpolation = _KERAS_NAMES.get(interpolation, interpolation)
    if not isinstance(interpolation, str) or interpolation not in _INTERPOLATIONS:
        raise ArgumentError(
            f"`interpolation` of `{who}` expects one of {', '.join(map(repr, _INTERPOLATIONS))} "
            f"(or Keras' 'bilinear', 'bicubic'); received {interpolation!r} "
            f"({type(interpolation).__name__}). Fix: pass interpolation='linear'."
        )
    # Only non-default op parameters are bound, so the stored config stays short.
    # resize's own default is "area": right for shrinking, but 6 to 14 times slower than
    # "linear" on a 256 or 500-pixel photo (0.8 to 1.8 ms), as much as decoding it.
    crop = {} if interpolation == "linear" else {"interpolation": interpolation}
    ops: list[Any] = []
    if saturation is not None and hw is not None:  # torchvision's crop, at decode time
        named = {"linear": "bilinear", "cubic": "bicubic"}.get(interpolation, interpolation)
        ops.append(Op("random_resized_crop", height=hw[0], width=hw[1], scale=area,
                      ratio=aspect, **({} if named == "bilinear" else
                                       {"interpolation": named})))
    else:
        ops.append(Op("resized_crop", scale=area, ratio=aspect, **crop))
        if hw is not None:
            ops.append(Op("resize", height=hw[0], width=hw[1], interpolation=interpolation))
    if flip:
        ops.append(Maybe(Op("hflip"), p=0.5))
    if b or c:
        ops.append(Op("brightness_contrast", brightness=(1.0 - b, 1.0 + b) if b else 1.0,
                      contrast=(1.0 - c, 1.0 + c) if c else 1.0))
    if saturation is not None and (s := _strength(saturation, "saturation", who)):
        # Keras' factor f scales saturation by f / (1 - f): 1 -+ s at f = (1 -+ s) / (2 -+ s)
        ops.append(Op("saturation", factor=((1 - s) / (2 - s), (1 + s) / (2 + s))))
    if hue is not None and (h := _strength(hue, "hue", who, 0.5)):
        ops.append(Op("hue", factor=2 * h))  # Keras': half-turns
    return Compose(ops)


def glyph_distort(*, backend: str = "cv", fill: float = 0.0) -> Compose:
    """One geometric distortion, then one filter: the classic handwritten-glyph pipeline.

    One of {sine warp, rotate, shear, scale + translate}, then one of {Gaussian blur,
    sharpen, smooth}, tuned for 64x64 grayscale characters (white ink on black; pass
    ``fill=1.0`` for black ink on white). No flip: a mirrored glyph is another glyph. Its
    rotation (up to 15 degrees) and moves (up to a tenth of the width) are a glyph's: on a
    line of text they carry words out of the image while its label keeps them; use
    :func:`text_line` there.

    Args:
        backend: "cv" (fast, default) or "pil" (PIL's exact look; the sine warp then runs the
            classic per-column ``np.roll``, which wraps ink off one edge onto the other).
        fill: background the geometric ops fill in, as a fraction of full scale, in [0, 1]
            (the sine warp's too, with the "cv" backend).

    Returns:
        A ``Compose`` of two ``OneOf`` steps; same shape and dtype as its input.

    Raises:
        ArgumentError, ArgumentTypeError: an unknown ``backend``, a ``fill`` outside [0, 1].

    Example:
        >>> import numpy as np, shmaug
        >>> aug = shmaug.presets.glyph_distort()
        >>> out = aug(np.zeros((64, 64), np.uint8), np.random.default_rng(0))
    """
    pil = choice(backend, "backend", ("cv", "pil")) == "pil"
    fill = _strength(fill, "fill", "glyph_distort")
    # Only non-default parameters are bound, so the stored config stays short.
    b = {"backend": "pil"} if pil else {}
    border = {} if pil else {"border": "constant", "fill": fill}  # pil: np.roll's wrap
    return _distort(
        Op("sine_warp", amplitude=(1.5, 3.5), period=(24.0, 64.0), **border, **b),
        Op("rotate", degrees=(-15.0, 15.0), fill=fill, **b),
        Op("shear", x=(-0.3, 0.3), fill=fill, **b),
        Op("scale_translate", scale=(0.7, 1.0), translate=(-0.1, 0.1), fill=fill, **b),
        b)


def text_line(*, fill: float = 1.0) -> Compose:
    """:func:`glyph_distort` at the scale of a line of text, for OCR and handwriting
    recognition: every word stays in the image, so the label still reads it.

    One of {sine warp (a wavy baseline), rotate up to 2 degrees, shear up to 0.3 (slant),
    scale 0.8-1 + translate up to 2%}, then one of {Gaussian blur, sharpen, smooth}. Tuned
    for lines 32 to 64 pixels high and up to 16 times as wide, (H, W) or (H, W, 1), with
    some margin around the text; the label's sequence is unchanged by every step. Every
    border is filled with ``fill``: black ink on white by default (scans, rendered text).

    Args:
        fill: the background, as a fraction of full scale, in [0, 1]: 1.0 (white) for black
            ink on white, 0.0 for white ink on black.

    Returns:
        A ``Compose`` of two ``OneOf`` steps; same shape and dtype as its input.

    Raises:
        ArgumentError, ArgumentTypeError: a ``fill`` outside [0, 1].

    Example:
        >>> import numpy as np, shmaug
        >>> aug = shmaug.presets.text_line()
        >>> aug(np.full((32, 256), 255, np.uint8), np.random.default_rng(0)).shape
        (32, 256)
    """
    fill = _strength(fill, "fill", "text_line")
    return _distort(
        Op("sine_warp", amplitude=(1.0, 2.5), period=(32.0, 96.0), border="constant",
           fill=fill),
        Op("rotate", degrees=(-2.0, 2.0), fill=fill),
        Op("shear", x=(-0.3, 0.3), fill=fill),
        Op("scale_translate", scale=(0.8, 1.0), translate=(-0.02, 0.02), fill=fill),
        {})


def _distort(warp: Op, rotate: Op, shear: Op, scale: Op, b: dict[str, str]) -> Compose:
    """One of the four distortions, then one of the three filters (with ``b``'s backend)."""
    return Compose([
        OneOf([warp, rotate, shear, scale]),
        OneOf([
            Op("gaussian_blur", sigma=(0.5, 1.0), **b),
            Op("sharpen", amount=1.0, **b),
            Op("smooth", amount=1.0, **b),
        ]),
    ])


# --- argument checks: each names the preset, the argument, what it takes and the fix -------


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)) and math.isfinite(value))


def _size(value: Any, who: str) -> tuple[int, int] | None:
    if value is None:
        return None
    if _is_int(value):
        hw = (int(value), int(value))
    elif isinstance(value, (tuple, list)) and len(value) == 2 and all(map(_is_int, value)):
        hw = (int(value[0]), int(value[1]))
    else:
        raise ArgumentTypeError(
            f"`size` of `{who}` expects an int or a (height, width) pair of ints in pixels, or "
            f"None to keep the input's size; received {value!r} ({type(value).__name__}). "
            f"Fix: pass e.g. size=224 or size=(224, 224)."
        )
    if min(hw) < 1:
        raise ArgumentError(
            f"`size` of `{who}` expects pixels >= 1; received {value!r} "
            f"({type(value).__name__}). Fix: pass e.g. size=224 or size=(224, 224)."
        )
    return hw


def _range(value: Any, name: str, who: str, high: float, example: str) -> tuple[float, float]:
    """A (low, high) pair with 0 < low <= high <= ``high``, as floats."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(map(_is_number, value))):
        raise ArgumentTypeError(
            f"`{name}` of `{who}` expects a (low, high) pair of numbers; received {value!r} "
            f"({type(value).__name__}). Fix: pass e.g. {name}={example}."
        )
    lo, hi = float(value[0]), float(value[1])
    if not 0.0 < lo <= hi <= high:
        limits = "0 < low <= high" + ("" if high == math.inf else f" <= {high:g}")
        raise ArgumentError(
            f"`{name}` of `{who}` expects {limits}; received {value!r} "
            f"({type(value).__name__}). Fix: pass e.g. {name}={example}."
        )
    return lo, hi


def _strength(value: Any, name: str, who: str, high: float = 1.0) -> float:
    """A number in [0, ``high``], as a float."""
    said = (f"`{name}` of `{who}` expects a number in [0, {high:g}]; received {value!r} "
            f"({type(value).__name__}). Fix: pass e.g. {name}=0.1 (0 for none).")
    if not _is_number(value):
        raise ArgumentTypeError(said)
    if not 0.0 <= float(value) <= high:
        raise ArgumentError(said)
    return float(value)


def _flag(value: Any, name: str, who: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentTypeError(
            f"`{name}` of `{who}` expects True or False; received {value!r} "
            f"({type(value).__name__}). Fix: pass {name}=False to turn it off."
        )
    return bool(value)
