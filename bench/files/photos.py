"""Real photographs for the decode-time crop's speed and quality figures, from wheels that
ship some: scikit-image's ``data`` and scikit-learn's sample images (nothing downloaded).

Why not drawn patterns: a JPEG's decode time and a resize's error follow a photo's texture
and noise, which a drawn pattern does not have. Each file is a random window of one of the
photos, rescaled (PIL's antialiased resize) so that its short side follows ImageNet's
spread (mostly 333-500, some up to 800, long side up to 1.5x), written by PIL at a quality
drawn from 75-95 with 4:2:0 chroma, as ImageNet's are.
"""

from __future__ import annotations

import io
from typing import Iterator

import numpy as np

# scikit-image's bundled colour photographs (no download) and scikit-learn's two samples.
SKIMAGE = ("astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry",
           "retina", "motorcycle_left", "motorcycle_right")
QUALITY = (75, 95)
SHORT_SIDE = (333, 500)  # ImageNet's median 375-500; 1 in 8 larger, up to 800


def sources() -> list[np.ndarray]:
    """The photographs (uint8 RGB) the installed wheels ship; ImportError without both."""
    import skimage.data
    from sklearn.datasets import load_sample_images

    photos = [np.asarray(image) for image in load_sample_images().images]
    for name in SKIMAGE:
        try:
            image = np.asarray(getattr(skimage.data, name)())
        except Exception:  # (a photo this version does not bundle, or fetches)
            continue
        if image.ndim == 3 and image.shape[2] >= 3:
            photos.append(np.ascontiguousarray(image[:, :, :3]))
    return photos


def jpegs(n: int, seed: int = 0) -> Iterator[bytes]:
    """``n`` JPEG files' bytes made from ``sources()`` (see the module docstring)."""
    from PIL import Image

    photos = sources()
    rng = np.random.default_rng(seed)
    for i in range(n):
        photo = photos[i % len(photos)]
        h, w = photo.shape[:2]
        # a window of 60-100% of each side, then rescaled to ImageNet's sizes
        ch, cw = int(h * rng.uniform(0.6, 1.0)), int(w * rng.uniform(0.6, 1.0))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        short = int(rng.integers(*SHORT_SIDE)) if rng.random() < 0.875 \
            else int(rng.integers(500, 801))
        scale = short / min(ch, cw)
        long = min(int(round(max(ch, cw) * scale)), int(short * 1.5))
        size = (short, long) if ch <= cw else (long, short)  # (height, width)
        image = Image.fromarray(photo[top:top + ch, left:left + cw])
        image = image.resize((size[1], size[0]), Image.Resampling.BILINEAR)
        if rng.random() < 0.5:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out = io.BytesIO()
        image.save(out, "JPEG", quality=int(rng.integers(QUALITY[0], QUALITY[1] + 1)),
                   subsampling=2)  # 4:2:0
        yield out.getvalue()


def folder(root: str, n: int, classes: int = 10, seed: int = 0) -> list[str]:
    """``n`` such files in ``classes`` class folders under ``root`` (ImageNet's layout)."""
    import os

    paths = []
    for i, data in enumerate(jpegs(n, seed)):
        where = os.path.join(root, f"n{i % classes:08d}")
        os.makedirs(where, exist_ok=True)
        path = os.path.join(where, f"n{i % classes:08d}_{i}.JPEG")
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    return paths
