"""torchvision's augmentation space: what the policies in ``augment.py`` choose among.

Owns the operations of torchvision v2's ``_AutoAugmentBase`` (ShearX ... Invert), the
magnitude table of each per policy (``RAND``, ``WIDE``, ``AUTO``, ``AUGMIX``, as torchvision's
``_AUGMENTATION_SPACE`` dicts: ``name -> (table(bins, height, width), signed)``), and
:func:`apply`, which runs one operation at one magnitude with shmaug's ops and kernels and
draws nothing (the policies draw the operation, the bin and the sign). Also Keras'
RandAugment layers (:func:`keras_rand_augment`), each drawing its own parameters as the
Keras layer does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..builtin import colour, framing, geometric, tone, warp
from ..kernels import cv
from ..kernels import colour as k
from ..params import ValueRange, draw, levels, restore, to_work

Table = Callable[[int, int, int], "np.ndarray | None"]
AugmentationSpace = dict[str, tuple[Table, bool]]


def _linspace(low: float, high: float, bins: int, height: int, width: int) -> np.ndarray:
    return np.linspace(low, high, bins)


def _of_width(fraction: float, bins: int, height: int, width: int) -> np.ndarray:
    return np.linspace(0.0, fraction * width, bins)


def _of_height(fraction: float, bins: int, height: int, width: int) -> np.ndarray:
    return np.linspace(0.0, fraction * height, bins)


def _bits(top: int, steps: int, bins: int, height: int, width: int) -> np.ndarray:
    """torchvision's ``(top - arange(bins) / ((bins - 1) / steps)).round()`` (half to even)."""
    return np.round(top - np.arange(bins) / ((bins - 1) / steps))


def _none(bins: int, height: int, width: int) -> None:
    return None


def _lin(low: float, high: float) -> Table:
    return partial(_linspace, low, high)


def _space(shear: float, translate: tuple[Table, Table], rotate: float, enhance: float,
           bits: tuple[int, int]) -> AugmentationSpace:
    """One policy's table in torchvision's order (its draws index this order)."""
    return {
        "Identity": (_none, False),
        "ShearX": (_lin(0.0, shear), True),
        "ShearY": (_lin(0.0, shear), True),
        "TranslateX": (translate[0], True),
        "TranslateY": (translate[1], True),
        "Rotate": (_lin(0.0, rotate), True),
        "Brightness": (_lin(0.0, enhance), True),
        "Color": (_lin(0.0, enhance), True),
        "Contrast": (_lin(0.0, enhance), True),
        "Sharpness": (_lin(0.0, enhance), True),
        "Posterize": (partial(_bits, *bits), False),
        "Solarize": (_lin(1.0, 0.0), False),
        "AutoContrast": (_none, False),
        "Equalize": (_none, False),
    }


_IMAGENET_SHIFT = (partial(_of_width, 150.0 / 331.0), partial(_of_height, 150.0 / 331.0))
RAND: AugmentationSpace = _space(0.3, _IMAGENET_SHIFT, 30.0, 0.9, (8, 4))
WIDE: AugmentationSpace = _space(0.99, (_lin(0.0, 32.0), _lin(0.0, 32.0)), 135.0, 0.99, (8, 6))
AUTO: AugmentationSpace = {**{n: v for n, v in RAND.items() if n != "Identity"},
                           "Invert": (_none, False)}
_AUGMIX_ALL = _space(0.3, (partial(_of_width, 1 / 3), partial(_of_height, 1 / 3)), 30.0, 0.9,
                     (4, 4))
_COLOURS = ("Identity", "Brightness", "Color", "Contrast", "Sharpness")
AUGMIX: AugmentationSpace = {n: v for n, v in _AUGMIX_ALL.items() if n not in _COLOURS}
AUGMIX_ALL: AugmentationSpace = {**AUGMIX, **{n: _AUGMIX_ALL[n] for n in _COLOURS[1:]}}


def magnitude(space: AugmentationSpace, name: str, bins: int, height: int, width: int, index: int
              ) -> float | None:
    """The unsigned magnitude of ``name`` at bin ``index``, or None for one without."""
    table = space[name][0](bins, height, width)
    return None if table is None else float(table[index])


@dataclass(frozen=True, slots=True)
class Setting:
    """How a policy applies its operations: torchvision's ``interpolation`` and ``fill``."""

    interpolation: str
    fill: float
    value_range: ValueRange | None


def _warp(image: np.ndarray, matrix: np.ndarray, s: Setting, name: str) -> np.ndarray:
    return warp.warp(image, matrix, border="constant", fill=s.fill,
                     interpolation=s.interpolation, backend="cv", op=name,
                     value_range=s.value_range)


def _via_bytes(image: np.ndarray, vr: ValueRange | None,
               fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    work = to_work(image)
    scale = levels(image, vr)
    return restore(k.via_bytes(work, scale, fn), image, scale)


def _sharpness(image: np.ndarray, factor: float, s: Setting) -> np.ndarray:
    """PIL's ImageEnhance.Sharpness: blend with the SMOOTH-filtered image (1 keeps it); the
    outermost pixels stay as they were, as PIL's filter and torchvision's leave them."""
    work = to_work(image)
    scale = levels(image, s.value_range)
    out = cv.filter3x3(work, cv.blend_kernel(cv.SMOOTH, 1.0 - factor))
    out[0], out[-1], out[:, 0], out[:, -1] = work[0], work[-1], work[:, 0], work[:, -1]
    return restore(out, image, scale)


def apply(image: np.ndarray, rng: np.random.Generator, name: str, m: float, s: Setting
          ) -> np.ndarray:
    """torchvision's ``_apply_image_or_video_transform``: ``name`` at signed magnitude ``m``."""
    vr = s.value_range
    if name == "Identity":
        return image
    if name in ("ShearX", "ShearY"):
        # torchvision's: x' = x - m y (its SHx), about center=[0, 0], the image's top-left
        # corner, which is (-0.5, -0.5) in OpenCV's pixel-centre coordinates
        mx = warp.affine(1.0, -m, -0.5 * m, 0.0, 1.0, 0.0) if name == "ShearX" else \
            warp.affine(1.0, 0.0, 0.0, -m, 1.0, -0.5 * m)
        return _warp(image, mx, s, name)
    if name in ("TranslateX", "TranslateY"):
        dx, dy = (int(m), 0) if name == "TranslateX" else (0, int(m))
        return _warp(image, warp.affine(1.0, 0.0, dx, 0.0, 1.0, dy), s, name)
    if name == "Rotate":
        return geometric.rotate(image, rng, degrees=m, fill=s.fill,
                                interpolation=s.interpolation, value_range=vr)
    if name in ("Brightness", "Contrast"):
        b, c = (1.0 + m, 1.0) if name == "Brightness" else (1.0, 1.0 + m)
        return tone.brightness_contrast(image, rng, brightness=b, contrast=c, value_range=vr)
    if name == "Color":
        return colour.unit_op(image, vr, partial(k.degenerate, amount=-m), rgb=True,
                              on_bytes=partial(k.degenerate_bytes, amount=-m))
    if name == "Sharpness":
        return _sharpness(image, 1.0 + m, s)
    return _POINTWISE[name](image, m, vr)


_POINTWISE: dict[str, Callable[[np.ndarray, float, ValueRange | None], np.ndarray]] = {
    "Posterize": lambda im, m, vr: colour.mapped(im, vr, partial(k.posterize, bits=int(m))),
    "Solarize": lambda im, m, vr: colour.mapped(im, vr, partial(k.solarize, threshold=m,
                                                                addition=0.0)),
    "AutoContrast": lambda im, m, vr: colour.unit_op(im, vr, k.auto_contrast,
                                                     on_bytes=k.auto_contrast_bytes),
    "Equalize": lambda im, m, vr: _via_bytes(im, vr, k.equalize_pil),
    "Invert": lambda im, m, vr: colour.mapped(im, vr, colour.inverted),
}


def keras_rand_augment(image: np.ndarray, rng: np.random.Generator, name: str,
                       low: float, high: float, s: Setting) -> np.ndarray:
    """One of Keras' RandAugment layers at its ``factor`` (low, high), as that layer reads
    it (translations and brightness only forward, the bits of posterize drawn in
    [1, int(8 * high) - 1]); Keras' warps fill by reflection."""
    vr, lin = s.value_range, s.interpolation
    if name == "random_shear":
        sign = -1.0 if rng.random() < 0.5 else 1.0
        sx, sy = (sign * draw(rng, (low, high)) for _ in range(2))
        return geometric.shear(image, rng, x=sx, y=sy, border="reflect", interpolation=lin,
                               value_range=vr)
    if name == "random_translation":
        return framing.translation(image, rng, height_factor=(low, high),
                                   width_factor=(low, high), interpolation=lin, value_range=vr)
    if name == "random_rotation":
        return geometric.rotate(image, rng, degrees=(360.0 * low, 360.0 * high),
                                border="reflect", interpolation=lin, value_range=vr)
    if name == "random_sharpness":
        return _sharpness(image, 2.0 * draw(rng, (low, high)), s)
    if name == "random_posterization":
        top = max(1, int(8 * high))
        return colour.posterize(image, rng, factor=(1, max(1, top - 1)), value_range=vr)
    if name == "solarization":
        return colour.solarize(image, rng, addition_factor=(low, high),
                               threshold_factor=(low, high), value_range=vr)
    jitter = {"random_brightness": "brightness_factor", "random_contrast": "contrast_factor"}
    if name in jitter:
        factors: dict[str, Any] = dict.fromkeys(
            ("brightness_factor", "contrast_factor", "saturation_factor", "hue_factor"))
        factors[jitter[name]] = (low, high)
        return colour.color_jitter(image, rng, **factors, value_range=vr)
    if name == "random_color_degeneration":
        return colour.color_degeneration(image, rng, factor=(low, high), value_range=vr)
    return _POINTWISE["AutoContrast" if name == "auto_contrast" else "Equalize"](image, 0.0, vr)


KERAS_RAND_AUGMENT = ("random_shear", "random_translation", "random_rotation",
                      "random_brightness", "random_color_degeneration", "random_contrast",
                      "random_sharpness", "random_posterization", "solarization",
                      "auto_contrast", "equalization")
"""Keras' ``RandAugment._AUGMENT_LAYERS``, in its order."""
