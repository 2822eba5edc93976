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
Where each piece lives:

- ``core``: the registry (``register``, ``get``, ``available``), bound ops (``Op``), the
  config round trip and the picklability check;
- ``compose``: ``Compose``, ``OneOf``, ``Maybe``, ``SomeOf``;
- ``plan``: what a pipeline does (targets moved, size fixed, decode-time crop, value range),
  asked once by the engine (``plan_of``);
- ``declared``: a ``Sequence`` subclass's ``augment`` override, keeping its pipeline's plan;
- ``mixing``: ``MixUp`` and ``CutMix``: batch ops that mix pairs of samples and their labels;
- ``params``: drawing parameters (``draw``, ``draw_int``), value ranges and image layouts,
  shared by every op (and by the engine, for dtype ranges);
- ``builtin``: the built-in ops, by what they do (move pixels; change colour, tone, noise,
  blur; erase);
- ``kernels``: the pure pixel work, OpenCV's and PIL's;
- ``policies``: RandAugment, TrivialAugmentWide, AutoAugment, AugMix;
- ``interop``: Keras layers, albumentations pipelines and legacy functions as ops;
- ``targets``: what lies on the image (masks, boxes, keypoints, in Keras' layout) and how it
  follows the geometric ops (``pad_boxes``: boxes of varying count in one padded array;
  ``Boxes``: boxes that carry their ``bounding_box_format``, as the readers hand them on).
"""

from __future__ import annotations

from .params import draw, draw_int
from .interop.albumentations import FromAlbumentations, from_albumentations
from .builtin.colour import (
    auto_contrast,
    channel_shuffle,
    clahe,
    color_degeneration,
    color_jitter,
    equalize,
    grayscale,
    hue,
    invert,
    posterize,
    saturation,
    solarize,
)
from .compose import Compose, Maybe, OneOf, SomeOf
from .builtin.erasing import cutout, erasing
from .builtin.filters import gaussian_blur, sharpen, smooth
from .core import (Augment, Op, available, check_picklable, from_config, get, register, still,
                   to_config)
from .builtin.framing import center_crop, translation, zoom, zoom_out
from .builtin.geometric import (
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
    rot90,
    vflip,
)
from .interop.keras_layers import from_keras
from .interop.legacy import FromArray, FromPil, from_array, from_pil
from .mixing import CutMix, Mix, MixUp
from .builtin.noise import gaussian_noise, jpeg
from .builtin.tone import brightness_contrast, gamma
from .builtin.windows import center_resized_crop, random_resized_crop
from .policies.augment import aug_mix, auto_augment, rand_augment, trivial_augment_wide
from .targets.boxes import Boxes
from .targets.formats import pad_boxes
from .targets.moves import aside

__all__ = [
    "Augment",
    "Boxes",
    "Compose",
    "CutMix",
    "FromAlbumentations",
    "FromArray",
    "FromPil",
    "Maybe",
    "Mix",
    "MixUp",
    "OneOf",
    "Op",
    "SomeOf",
    "aside",
    "aug_mix",
    "auto_augment",
    "auto_contrast",
    "available",
    "brightness_contrast",
    "center_crop",
    "center_resized_crop",
    "channel_shuffle",
    "check_picklable",
    "clahe",
    "color_degeneration",
    "color_jitter",
    "crop",
    "cutout",
    "draw",
    "draw_int",
    "elastic",
    "equalize",
    "erasing",
    "from_albumentations",
    "from_array",
    "from_config",
    "from_keras",
    "from_pil",
    "gamma",
    "gaussian_blur",
    "gaussian_noise",
    "get",
    "grayscale",
    "hflip",
    "hue",
    "invert",
    "jpeg",
    "pad_boxes",
    "perspective",
    "posterize",
    "rand_augment",
    "random_resized_crop",
    "register",
    "resize",
    "resized_crop",
    "rot90",
    "rotate",
    "saturation",
    "scale_translate",
    "sharpen",
    "shear",
    "sine_warp",
    "smooth",
    "solarize",
    "still",
    "to_config",
    "translate",
    "translation",
    "trivial_augment_wide",
    "vflip",
    "zoom",
    "zoom_out",
]
