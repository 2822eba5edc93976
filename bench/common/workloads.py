"""The suite's workloads: the same data and the same per-sample work for every contender.

- W1 glyphs: grayscale 64x64 characters rendered locally, float16 in [0, 1], shape
  (N, 64, 64, 1); one of {sine warp, rotate, shear, scale+translate} then one of {blur,
  sharpen, smooth}; batch 256.
- W2 photos: RGB 224x224 uint8 (random crops, flips and tints of a photo a package ships, or a
  drawn scene); random flip + rotate(+-15 deg) + Gaussian blur; float32 output in [0, 1]; batch 64.
- W3 identity: W2's data with no augmentation (uint8 batches as stored): engine overhead.

Every augmentation is a picklable module-level ``fn(image, rng) -> image``, so one object serves
all contenders (the shmaug engine passes a per-sample ``rng``; the others pass a fresh
``numpy.random.default_rng()``). The "pil" implementation is the users' classic code driven
by the global ``random`` (as they run it today); "shmaug" is ``shmaug.ops``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from bench.common import pil_reference

IMPLS = ("pil", "shmaug")


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    n: int
    n_quick: int
    batch_size: int
    batch_size_quick: int
    augmented: bool = True


WORKLOADS = {
    "W1": Workload("W1", "glyphs 64x64x1 float16", 20_000, 512, 256, 64),
    "W2": Workload("W2", "photos 224x224x3 -> float32", 2_000, 64, 64, 16),
    "W3": Workload("W3", "identity 224x224x3 uint8", 2_000, 64, 64, 16, augmented=False),
}


def build_data(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x, ids)``: the workload's images (in RAM) and ``ids = arange(n)`` used as targets,
    so a consumer can check that each sample arrives exactly once per epoch."""
    if name == "W1":
        from shmaug.sources.glyphs import render_glyphs

        x, _, _ = render_glyphs(n, 64, seed=0)
        x = (x.astype(np.float32) / 255.0).astype(np.float16)[..., None]
    else:
        x = photos(n)
    return np.ascontiguousarray(x), np.arange(n, dtype=np.int64)


def photos(n: int, size: int = 224) -> np.ndarray:
    """``n`` distinct RGB photos: random crops, flips and tints of one shipped photo."""
    base, _ = photo(size + 32)
    rng = np.random.default_rng(0)
    out = np.empty((n, size, size, 3), np.uint8)
    for i in range(n):
        dy, dx = rng.integers(0, 33, 2)
        crop = base[dy:dy + size, dx:dx + size]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        tint = rng.uniform(0.7, 1.1, 3)
        out[i] = np.clip(crop * tint, 0, 255).astype(np.uint8)
    return out


def photo(size: int = 224) -> tuple[np.ndarray, str]:
    """A real RGB photo shipped by a local package, else a drawn scene."""
    import cv2  # here, not at import: the suite's parent process never runs OpenCV

    try:
        import matplotlib

        path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
        img = cv2.imread(str(path))
        if img is not None:
            img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
            return cv2.resize(img, (size, size), interpolation=cv2.INTER_AREA), str(path.name)
    except ImportError:
        pass
    yy, xx = np.mgrid[:size, :size]
    img = np.stack([xx * 255 // size, yy * 255 // size, np.full_like(xx, 128)], axis=2).astype(np.uint8)
    cv2.circle(img, (size // 2, size // 2), size // 4, (250, 220, 40), -1)
    return img, "drawn scene"


# -- the users' PIL code -----------------------------------------------------------------------


def pil_photo(img: Image.Image) -> Image.Image:
    """The users' photo augmentation in PIL: random flip, rotate +-15 deg, Gaussian blur."""
    if random.random() < 0.5:
        img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    img = img.rotate(random.uniform(-15.0, 15.0), resample=Image.Resampling.BILINEAR)
    return img.filter(ImageFilter.GaussianBlur(random.uniform(0.5, 1.5)))


class ToFloat32:
    """``fn(image, rng)`` then scale uint8 to float32 in [0, 1] (picklable)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.uses_global_rng = getattr(fn, "uses_global_rng", True)

    def __call__(self, image: np.ndarray, rng: Any) -> np.ndarray:
        out = self.fn(image, rng)
        return out.astype(np.float32) * np.float32(1.0 / 255.0)


def augment_for(name: str, impl: str) -> Any:
    """The per-sample augmentation of workload ``name`` in implementation ``impl``."""
    import shmaug
    from shmaug.ops import Compose, Maybe, Op

    if name == "W3":
        return None
    if name == "W1":
        if impl == "pil":
            return shmaug.ops.from_pil(pil_reference.distort)
        return shmaug.presets.glyph_distort()
    if impl == "pil":
        return ToFloat32(shmaug.ops.from_pil(pil_photo))
    return ToFloat32(Compose([Maybe(Op("hflip")), Op("rotate", degrees=(-15.0, 15.0)),
                              Op("gaussian_blur", sigma=(0.5, 1.5))]))


def output_spec(name: str, x: np.ndarray) -> tuple[tuple[int, ...], Any]:
    """Shape and dtype of one delivered sample."""
    if name == "W2":
        return tuple(x.shape[1:]), np.float32
    return tuple(x.shape[1:]), x.dtype


def make_batch(x: np.ndarray, augment: Any, lo: int, hi: int, out_dtype: Any) -> np.ndarray:
    """The per-batch work every non-shmaug contender runs: gather, augment each sample."""
    if augment is None:
        return x[lo:hi].copy()
    rng = np.random.default_rng()
    out = np.empty((hi - lo, *x.shape[1:]), out_dtype)
    for j in range(lo, hi):
        out[j - lo] = augment(x[j], rng)
    return out
