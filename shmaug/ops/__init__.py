"""Augmentation ops: fast OpenCV/PIL distortions, composition and a registry.

An op is ``op(image, rng, **params) -> image``. ``image`` is a numpy array (H, W), (H, W, 1)
or (H, W, C) of dtype uint8, float16 or float32 (floats in [0, 1]); ``rng`` is a
``numpy.random.Generator``. Parameters are fixed numbers or ``(low, high)`` ranges drawn from
``rng`` (``draw`` / ``draw_int`` draw them so in your own ops). Results keep shape, dtype,
layout and value range unless the op exists to change one (``resize``, ``crop``).

Example:
    >>> import numpy as np
    >>> from shmaug.ops import Compose, OneOf, Op
    >>> pipe = Compose([OneOf([Op("rotate", degrees=(-10, 10)), Op("shear")]), Op("smooth")])
    >>> out = pipe(np.zeros((64, 64), np.uint8), np.random.default_rng(0))
    >>> pipe == from_config(pipe.to_config())
    True

Importing this package registers the built-in ops; it starts nothing and imports no Keras.
"""

from __future__ import annotations

from ._params import draw, draw_int
from .albu import FromAlbumentations, from_albumentations
from .compose import Compose, Maybe, OneOf, SomeOf
from .core import Augment, Op, available, check_picklable, from_config, get, register, to_config
from .geometric import (
    crop,
    elastic,
    hflip,
    perspective,
    resize,
    resized_crop,
    rotate,
    scale_translate,
    shear,
    sine_warp,
    translate,
    vflip,
)
from .legacy import FromArray, FromPil, from_array, from_pil
from .photometric import (
    brightness_contrast,
    cutout,
    gamma,
    gaussian_blur,
    gaussian_noise,
    sharpen,
    smooth,
)

__all__ = [
    "Augment",
    "Compose",
    "FromAlbumentations",
    "FromArray",
    "FromPil",
    "Maybe",
    "OneOf",
    "Op",
    "SomeOf",
    "available",
    "brightness_contrast",
    "check_picklable",
    "crop",
    "cutout",
    "draw",
    "draw_int",
    "elastic",
    "from_albumentations",
    "from_array",
    "from_config",
    "from_pil",
    "gamma",
    "gaussian_blur",
    "gaussian_noise",
    "get",
    "hflip",
    "perspective",
    "register",
    "resize",
    "resized_crop",
    "rotate",
    "scale_translate",
    "sharpen",
    "shear",
    "sine_warp",
    "smooth",
    "to_config",
    "translate",
    "vflip",
]
