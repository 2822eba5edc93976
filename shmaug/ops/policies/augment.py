"""Built-in augmentation policies: RandAugment, TrivialAugmentWide, AutoAugment and AugMix.

Owns the four registered ops ``rand_augment``, ``trivial_augment_wide``, ``auto_augment`` and
``aug_mix``: which operation, bin, sign and mixing weight each draws, in torchvision v2's
order of draws. The operations and their magnitude tables are in ``_space.py``. Every draw
comes from the sample's own ``rng``, so a policy is bit-identical for any worker count and
start method, as every op is. ``interpolation`` and ``fill`` follow torchvision's defaults
("nearest", black) except AugMix's ("linear"); ``value_range`` is shmaug's.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from . import _space
from ..params import Range, ValueRange, bounds, check_image, choice, keras_factor, levels
from ..builtin import checks as chk
from ..core import BLENDED, Check, WARPED, register
from ...errors import ArgumentError

_POLICY_CHECKS: dict[str, Check] = {
    "interpolation": chk.INTERPOLATION, "fill": chk.ranged(0.0, 1.0), **chk.VALUE_RANGE,
}
IMAGENET_POLICY = (
    (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
    (("Solarize", 0.6, 3), ("Equalize", 0.6, None)),
    (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
    (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)),
    (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
    (("Rotate", 0.8, 8), ("Color", 0.4, 0)),
    (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
    (("Equalize", 0.0, None), ("Equalize", 0.8, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
    (("Color", 0.8, 8), ("Solarize", 0.8, 7)),
    (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
    (("ShearX", 0.6, 5), ("Equalize", 1.0, None)),
    (("Color", 0.4, 0), ("Equalize", 0.6, None)),
    (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
    (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
    (("Invert", 0.6, None), ("Equalize", 1.0, None)),
    (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
    (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
)
"""torchvision's ``AutoAugmentPolicy.IMAGENET``: 25 sub-policies of (operation, probability,
magnitude bin out of 10)."""


def _signed(rng: np.random.Generator, space: _space.AugmentationSpace, name: str, bins: int,
            shape: tuple[int, ...], index: int) -> float:
    """The magnitude of ``name`` at ``index``, negated on torchvision's coin flip if signed."""
    m = _space.magnitude(space, name, bins, shape[0], shape[1], index)
    if m is None:
        return 0.0
    return -m if space[name][1] and rng.random() <= 0.5 else m


def _pick(rng: np.random.Generator, space: _space.AugmentationSpace) -> str:
    return list(space)[int(rng.integers(len(space)))]


@register("rand_augment", targets=WARPED, checks={
    "num_ops": chk.whole(0), "magnitude": chk.whole(0),
    "num_magnitude_bins": chk.whole(2),
    "factor": chk.optional(partial(keras_factor, lo=0.0, hi=1.0)),
    **_POLICY_CHECKS})
def rand_augment(
    image: np.ndarray, rng: np.random.Generator, num_ops: int = 2, magnitude: int = 9,
    num_magnitude_bins: int = 31, factor: Range | None = None, interpolation: str = "nearest",
    fill: float = 0.0, value_range: ValueRange | None = None,
) -> np.ndarray:
    """RandAugment: ``num_ops`` operations drawn uniformly, with replacement.

    ``factor=None`` (the default) is torchvision's: its 14 operations, each at bin
    ``magnitude`` of ``num_magnitude_bins``. A ``factor`` is Keras' ``RandAugment``: its 11
    layers, each at ``factor`` as that layer reads it (``magnitude`` and the bins unused;
    pass ``interpolation="linear"`` for Keras' default).

    Example:
        >>> out = rand_augment(np.zeros((32, 32, 3), np.uint8), np.random.default_rng(0))
    """
    check_image(image)
    setting = _space.Setting(interpolation, fill, value_range)
    if factor is not None:
        low, high = keras_factor(factor, "factor", 0.0, 1.0)
        for _ in range(chk.whole_number(num_ops, "num_ops", 0)):
            name = _space.KERAS_RAND_AUGMENT[int(rng.integers(len(_space.KERAS_RAND_AUGMENT)))]
            image = _space.keras_rand_augment(image, rng, name, low, high, setting)
        return image
    bins = chk.whole_number(num_magnitude_bins, "num_magnitude_bins", 2)
    if not 0 <= chk.whole_number(magnitude, "magnitude", 0) < bins:
        raise ArgumentError(
            f"`magnitude` expects a bin in [0, num_magnitude_bins={bins}); received "
            f"{magnitude}. Lower it or raise num_magnitude_bins."
        )
    for _ in range(chk.whole_number(num_ops, "num_ops", 0)):
        name = _pick(rng, _space.RAND)
        m = _signed(rng, _space.RAND, name, bins, image.shape, magnitude)
        image = _space.apply(image, rng, name, m, setting)
    return image


@register("trivial_augment_wide", targets=WARPED, checks={"num_magnitude_bins": chk.whole(2),
                                                          **_POLICY_CHECKS})
def trivial_augment_wide(
    image: np.ndarray, rng: np.random.Generator, num_magnitude_bins: int = 31,
    interpolation: str = "nearest", fill: float = 0.0, value_range: ValueRange | None = None,
) -> np.ndarray:
    """TrivialAugmentWide (torchvision's): one operation of its wide space, at a bin drawn
    uniformly among ``num_magnitude_bins``.

    Example:
        >>> out = trivial_augment_wide(np.zeros((32, 32, 3), np.uint8), np.random.default_rng(0))
    """
    check_image(image)
    bins = chk.whole_number(num_magnitude_bins, "num_magnitude_bins", 2)
    name = _pick(rng, _space.WIDE)
    has_table = _space.WIDE[name][0](bins, 1, 1) is not None
    index = int(rng.integers(bins)) if has_table else 0
    m = _signed(rng, _space.WIDE, name, bins, image.shape, index)
    return _space.apply(image, rng, name, m, _space.Setting(interpolation, fill, value_range))


@register("auto_augment", targets=WARPED, checks={"policy": chk.one_of("imagenet"),
                                                  **_POLICY_CHECKS})
def auto_augment(
    image: np.ndarray, rng: np.random.Generator, policy: str = "imagenet",
    interpolation: str = "nearest", fill: float = 0.0, value_range: ValueRange | None = None,
) -> np.ndarray:
    """AutoAugment with torchvision's ImageNet policy: one of its 25 sub-policies, each of
    whose two operations runs with its own probability at its own magnitude bin.

    Example:
        >>> out = auto_augment(np.zeros((32, 32, 3), np.uint8), np.random.default_rng(0))
    """
    check_image(image)
    choice(policy, "policy", ("imagenet",))
    setting = _space.Setting(interpolation, fill, value_range)
    for name, p, index in IMAGENET_POLICY[int(rng.integers(len(IMAGENET_POLICY)))]:
        if not rng.random() <= p:
            continue
        m = 0.0 if index is None else _signed(rng, _space.AUTO, name, 10, image.shape, index)
        image = _space.apply(image, rng, name, m, setting)
    return image


@register("aug_mix", targets=BLENDED, checks={
    "severity": chk.whole(1, 10), "mixture_width": chk.whole(1),
    "chain_depth": chk.whole(-math.inf), "all_ops": chk.flag,
    "alpha": chk.ranged(1e-6), **_POLICY_CHECKS})
def aug_mix(
    image: np.ndarray, rng: np.random.Generator, severity: int = 3, mixture_width: int = 3,
    chain_depth: int = -1, alpha: float = 1.0, all_ops: bool = True,
    interpolation: str = "linear", fill: float = 0.0, value_range: ValueRange | None = None,
) -> np.ndarray:
    """AugMix (torchvision's): ``mixture_width`` chains of 1-3 operations (or
    ``chain_depth``) at bins below ``severity`` (of 10), mixed with Dirichlet(``alpha``)
    weights and the result blended with the image by a Beta(``alpha``, ``alpha``) weight.

    Example:
        >>> out = aug_mix(np.zeros((32, 32, 3), np.uint8), np.random.default_rng(0))
    """
    check_image(image)
    chk.whole_number(severity, "severity", 1, 10)
    space = _space.AUGMIX_ALL if all_ops else _space.AUGMIX
    setting = _space.Setting(interpolation, fill, value_range)
    a = float(bounds(alpha, "alpha", 1e-6)[0])
    keep = rng.dirichlet([a, a])
    weights = rng.dirichlet([a] * chk.whole_number(mixture_width, "mixture_width", 1)) * keep[1]
    mix = image.astype(np.float32) * np.float32(keep[0])
    for w in weights:
        aug = image
        depth = chain_depth if chain_depth > 0 else int(rng.integers(1, 4))
        for _ in range(depth):
            name = _pick(rng, space)
            m = _signed(rng, space, name, 10, image.shape, int(rng.integers(severity)))
            aug = _space.apply(aug, rng, name, m, setting)
        mix += aug.astype(np.float32) * np.float32(w)
    if image.dtype.kind in "ui":
        np.rint(mix, out=mix)
    scale = levels(image, value_range)
    out: np.ndarray = np.clip(mix, scale.lo, scale.hi).astype(image.dtype)
    return out
