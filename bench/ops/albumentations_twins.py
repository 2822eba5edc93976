"""The albumentations twin of each shmaug op that both libraries have, for ``bench/ops/run.py``.

Owns the mapping op -> (how to build the albumentations transform for an image of a given
size, what differs). Parameters are matched as closely as the two APIs allow; the note says
where they cannot be (the table prints it). Each twin is the bare transform with ``p=1``,
called as ``transform(image=img)["image"]`` (no ``Compose``: that adds per-call argument and
shape checks a shmaug ``Op`` does not make), and seeded once through albumentations' own
``set_random_seed`` so a run is repeatable.

albumentations is optional: ``available()`` says whether it imports; nothing is imported at
module import time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

Kernel = Callable[[np.ndarray, np.random.Generator], np.ndarray]


@dataclass(frozen=True)
class Twin:
    """``build(A, height, width)`` returns the transform; ``note`` says what differs."""

    build: Callable[[Any, int, int], Any]
    note: str


_LINEAR, _CONSTANT = cv2.INTER_LINEAR, cv2.BORDER_CONSTANT
_WARP = dict(interpolation=_LINEAR, border_mode=_CONSTANT, fill=0)  # shmaug's defaults
_SHEAR_DEG = math.degrees(math.atan(0.3))  # shmaug's shear factor 0.3, as an angle

TWINS: dict[str, Twin] = {
    "rotate": Twin(lambda A, h, w: A.Rotate(limit=(-15, 15), **_WARP, p=1.0),
                   "A.Rotate(±15°): same warp"),
    "shear": Twin(lambda A, h, w: A.Affine(shear={"x": (-_SHEAR_DEG, _SHEAR_DEG), "y": (0, 0)},
                                           **_WARP, p=1.0),
                  f"A.Affine(shear x ±{_SHEAR_DEG:.1f}°): shmaug takes the factor (tan), 0.3"),
    "scale_translate": Twin(lambda A, h, w: A.Affine(scale=(0.75, 1.0),
                                                     translate_percent=(-0.1, 0.1), **_WARP,
                                                     p=1.0),
                            "A.Affine(scale, translate): shmaug rounds the offset to pixels"),
    "translate": Twin(lambda A, h, w: A.Affine(translate_percent={"x": (-0.1, 0.1),
                                                                  "y": (-0.1, 0.1)},
                                               **_WARP, p=1.0),
                      "A.Affine(translate_percent ±10% per axis)"),
    "hflip": Twin(lambda A, h, w: A.HorizontalFlip(p=1.0), "A.HorizontalFlip"),
    "vflip": Twin(lambda A, h, w: A.VerticalFlip(p=1.0), "A.VerticalFlip"),
    "perspective": Twin(lambda A, h, w: A.Perspective(scale=(0.02, 0.08), keep_size=True,
                                                      **_WARP, p=1.0),
                        "A.Perspective: corner moves ~ normal(σ = scale); shmaug uniform "
                        "up to scale"),
    "elastic": Twin(lambda A, h, w: A.ElasticTransform(alpha=15.0, sigma=4.5,
                                                       noise_distribution="uniform",
                                                       interpolation=_LINEAR,
                                                       border_mode=cv2.BORDER_REFLECT_101,
                                                       p=1.0),
                    "A.ElasticTransform(alpha 15, σ 4.5): alpha scales the field; shmaug "
                    "normalizes it to a largest move of 1-3 px (about the same size)"),
    "gaussian_blur": Twin(lambda A, h, w: A.GaussianBlur(sigma_limit=(1.0, 1.0), blur_limit=0,
                                                         p=1.0),
                          "A.GaussianBlur(σ 1): 7x7 kernel in both"),
    "sharpen": Twin(lambda A, h, w: A.Sharpen(alpha=(0.125, 0.125), lightness=(1.0, 1.0),
                                              p=1.0),
                    "A.Sharpen(alpha 1/8, lightness 1): exactly PIL's SHARPEN, as amount=1"),
    "brightness_contrast": Twin(lambda A, h, w: A.RandomBrightnessContrast(
                                    brightness_limit=(-0.2, 0.2), contrast_limit=(-0.2, 0.2),
                                    p=1.0),
                                "A.RandomBrightnessContrast: additive brightness, contrast "
                                "about 0; shmaug (PIL's ImageEnhance) about the mean gray"),
    "gamma": Twin(lambda A, h, w: A.RandomGamma(gamma_limit=(70, 150), p=1.0),
                  "A.RandomGamma(70-150): same curve"),
    "gaussian_noise": Twin(lambda A, h, w: A.GaussNoise(std_range=(0.01, 0.05), p=1.0),
                           "A.GaussNoise(std 1-5% of full scale)"),
    "cutout": Twin(lambda A, h, w: A.CoarseDropout(num_holes_range=(1, 3),
                                                   hole_height_range=(0.1, 0.3),
                                                   hole_width_range=(0.1, 0.3), fill=0, p=1.0),
                   "A.CoarseDropout(1-3 holes, sides 10-30%)"),
    "resize": Twin(lambda A, h, w: A.Resize(32, 32, interpolation=cv2.INTER_AREA, p=1.0),
                   "A.Resize(32, 32, area)"),
    "crop": Twin(lambda A, h, w: A.RandomCrop(round(0.875 * h), round(0.875 * w), p=1.0),
                 "A.RandomCrop(87.5% per side)"),
    "resized_crop": Twin(lambda A, h, w: A.RandomResizedCrop((h, w), scale=(0.6, 1.0),
                                                             interpolation=_LINEAR, p=1.0),
                         "A.RandomResizedCrop(scale 0.6-1, ratio 3/4-4/3)"),
}


_REFLECT = dict(interpolation=_LINEAR, border_mode=cv2.BORDER_REFLECT_101)  # Keras' default

# The twins of the Keras-mirroring ops (``bench/ops/keras_rows.py``), 224x224x3 uint8 only.
KERAS_OP_TWINS: dict[str, Twin] = {
    "hue": Twin(lambda A, h, w: A.HueSaturationValue(18, 0, 0, p=1.0),
                "A.HueSaturationValue(hue ±18 of 180): Keras' factor 0.1 of a turn"),
    "saturation": Twin(lambda A, h, w: A.HueSaturationValue(0, 30, 0, p=1.0),
                       "A.HueSaturationValue(saturation ±30): additive, not a gain"),
    "color_jitter": Twin(lambda A, h, w: A.ColorJitter(0.2, 0.2, 0.2, 0.05, p=1.0),
                         "A.ColorJitter(0.2, 0.2, 0.2, 0.05), torchvision's order drawn"),
    "grayscale": Twin(lambda A, h, w: A.ToGray(num_output_channels=3, p=1.0),
                      "A.ToGray(3 channels)"),
    "invert": Twin(lambda A, h, w: A.InvertImg(p=1.0), "A.InvertImg"),
    "solarize": Twin(lambda A, h, w: A.Solarize(threshold_range=(0.5, 0.5), p=1.0),
                     "A.Solarize(threshold 0.5)"),
    "posterize": Twin(lambda A, h, w: A.Posterize(num_bits=4, p=1.0), "A.Posterize(4 bits)"),
    "equalize": Twin(lambda A, h, w: A.Equalize(p=1.0), "A.Equalize (per channel)"),
    "auto_contrast": Twin(lambda A, h, w: A.AutoContrast(p=1.0), "A.AutoContrast"),
    "clahe": Twin(lambda A, h, w: A.CLAHE(clip_limit=(4, 4), tile_grid_size=(8, 8), p=1.0),
                  "A.CLAHE(4, 8x8): OpenCV's on the L of LAB; shmaug Keras' per channel"),
    "channel_shuffle": Twin(lambda A, h, w: A.ChannelShuffle(p=1.0), "A.ChannelShuffle"),
    "zoom": Twin(lambda A, h, w: A.Affine(scale=(1 / 1.2, 1 / 0.8), **_REFLECT, p=1.0),
                 "A.Affine(scale 1/1.2-1/0.8, reflect)"),
    "center_crop": Twin(lambda A, h, w: A.CenterCrop(196, 196, p=1.0), "A.CenterCrop(196)"),
    "translation": Twin(lambda A, h, w: A.Affine(translate_percent={"x": (-0.1, 0.1),
                                                                    "y": (-0.1, 0.1)},
                                                 **_REFLECT, p=1.0),
                        "A.Affine(translate ±10%, reflect)"),
    "erasing": Twin(lambda A, h, w: A.Erasing(p=1.0), "A.Erasing (torchvision's area; its ratio w/h, drawn uniformly)"),
    "jpeg": Twin(lambda A, h, w: A.ImageCompression(quality_range=(50, 95), p=1.0),
                 "A.ImageCompression(quality 50-95)"),
}


def available() -> str | None:
    """albumentations' version, or None when it does not import."""
    try:
        import albumentations
    except ImportError:
        return None
    return str(albumentations.__version__)


def kernel(op: str, image: np.ndarray, twins: dict[str, Twin] | None = None) -> Kernel:
    """``fn(image, rng)`` running op's twin (from ``twins``, by default ``TWINS``) on images
    shaped like ``image`` (rng unused: albumentations draws from the transform's own
    generators)."""
    import albumentations as A

    transform = (TWINS if twins is None else twins)[op].build(A, image.shape[0], image.shape[1])
    return seeded(transform)


def seeded(transform: Any) -> Kernel:
    """An albumentations transform (or ``Compose``) as ``fn(image, rng)``, seeded once."""
    transform.set_random_seed(0)

    def run(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out: np.ndarray = transform(image=img)["image"]
        return out

    return run
