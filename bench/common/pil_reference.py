"""The users' PIL version of the glyph distortions: the classic per-sample PIL code.

This is the baseline ``bench/ops/run.py`` compares ``shmaug.presets.glyph_distort()`` with. It is
written the way such users write it: a PIL image per sample, ``random.choice`` of a sine warp
(a per-column ``np.roll`` loop over a numpy copy), a rotate, a shear (``Image.transform``
AFFINE) or a scale + translate (resize, then paste on a background), then one of
``ImageFilter.GaussianBlur`` / ``SHARPEN`` / ``SMOOTH``. Randomness comes from the global
``random`` module, as in the original code.
"""

from __future__ import annotations

import math
import random

import numpy as np
from PIL import Image, ImageFilter


def sine_warp(img: Image.Image) -> Image.Image:
    a = np.array(img)
    amplitude = random.uniform(1.5, 3.5)
    period = random.uniform(24.0, 64.0)
    phase = random.uniform(0.0, 2 * math.pi)
    for x in range(a.shape[1]):
        a[:, x] = np.roll(a[:, x], int(round(amplitude * math.sin(2 * math.pi * x / period + phase))))
    return Image.fromarray(a)


def rotate(img: Image.Image) -> Image.Image:
    return img.rotate(random.uniform(-15.0, 15.0), resample=Image.Resampling.BILINEAR)


def shear(img: Image.Image) -> Image.Image:
    s = random.uniform(-0.3, 0.3)
    w, h = img.size
    return img.transform(img.size, Image.Transform.AFFINE, (1, s, -s * h / 2, 0, 1, 0), resample=Image.Resampling.BILINEAR)


def scale_translate(img: Image.Image) -> Image.Image:
    s = random.uniform(0.7, 1.0)
    w, h = img.size
    nw, nh = int(w * s), int(h * s)
    small = img.resize((nw, nh), Image.Resampling.BILINEAR)
    background = Image.new(img.mode, img.size, 0)
    dx = int((w - nw) / 2 + random.uniform(-0.1, 0.1) * w)
    dy = int((h - nh) / 2 + random.uniform(-0.1, 0.1) * h)
    background.paste(small, (dx, dy))
    return background


def distort(img: Image.Image) -> Image.Image:
    img = random.choice([sine_warp, rotate, shear, scale_translate])(img)
    blur = ImageFilter.GaussianBlur(random.uniform(0.5, 1.0))
    return img.filter(random.choice([blur, ImageFilter.SHARPEN, ImageFilter.SMOOTH]))


def augment_array(x: np.ndarray) -> np.ndarray:
    """What the users' data loop does per sample: array -> PIL -> distort -> array."""
    return np.asarray(distort(Image.fromarray(x)))
