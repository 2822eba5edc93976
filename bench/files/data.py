"""The image folders the image-file benchmarks read, made here from a seed (nothing downloaded).

- ``FOLDERS``: the three folders of ``bench.files``: 256x256 JPEGs; ImageNet-like JPEGs (about
  500x375, quality 90, sizes varied as ImageNet's are); camera-size JPEGs (about 3000x2000).
- ``photo``: a photo-like picture. Decode time depends on how much a JPEG holds (its bits per
  pixel), not only on its size, so the pictures are made to compress like photographs: a
  multi-scale (roughly 1/f) colour texture, objects with hard edges, and fine grain (film or
  sensor noise); at quality 90 that is 2-3 bits per pixel, where camera photos lie.
- ``make_folder``: N such files in 4 class folders, behind a tqdm bar.
- ``link_tree``: a folder of N files made as hard links of small JPEGs, one per class folder
  (1.28 million in seconds, and next to no disk), for ``bench.files.memory``.

Nothing here times anything; it writes files.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CLASSES = 4


@dataclass(frozen=True)
class Folder:
    """One benchmark folder: ``n`` JPEGs about ``height`` x ``width`` (``jitter``: the share
    by which each side varies), at JPEG ``quality``."""

    name: str
    label: str
    n: int
    n_quick: int
    height: int
    width: int
    jitter: float
    quality: int
    grain: float  # strength of the fine grain (std of the values it adds)


FOLDERS = {
    "256": Folder("256", "256x256 JPEGs", 2000, 24, 256, 256, 0.0, 90, 6.0),
    "imagenet": Folder("imagenet", "ImageNet-like JPEGs (~500x375, q90, varied sizes)", 1500, 16,
                       375, 500, 0.25, 90, 6.0),
    "camera": Folder("camera", "camera-size JPEGs (~3000x2000, q90)", 240, 8, 2000, 3000, 0.05,
                     90, 6.0),
}


def photo(height: int, width: int, rng: np.random.Generator, grain: float = 6.0) -> np.ndarray:
    """A photo-like RGB uint8 picture (see the module docstring)."""
    import cv2

    h, w = max(8, height // 4), max(8, width // 4)  # the texture and objects, at 1/4 size
    field = np.zeros((h, w, 3), np.float32)
    amplitude, cell = 1.0, max(h, w) // 2
    while cell >= 1:
        gh, gw = -(-h // cell) + 2, -(-w // cell) + 2
        grid = rng.normal(0, 1, (gh, gw, 3)).astype(np.float32)
        grid[..., 1:] = 0.6 * grid[..., :1] + 0.4 * grid[..., 1:]  # channels correlate
        up = grid if cell == 1 else cv2.resize(grid, (gw * cell, gh * cell),
                                               interpolation=cv2.INTER_CUBIC)
        field += amplitude * up[cell:cell + h, cell:cell + w]
        amplitude *= 0.85
        cell //= 2
    field *= 38 / max(float(field.std()), 1e-6)
    for _ in range(int(rng.integers(3, 9))):  # objects: hard edges over the texture
        mask = np.zeros((h, w), np.uint8)
        axes = (int(rng.integers(h // 20 + 1, h // 4 + 2)), int(rng.integers(w // 20 + 1, w // 4 + 2)))
        cv2.ellipse(mask, (int(rng.integers(0, w)), int(rng.integers(0, h))), axes,
                    float(rng.uniform(0, 180)), 0, 360, 1, -1)
        field[mask.astype(bool)] += rng.uniform(-70, 70, 3).astype(np.float32)
    image = cv2.resize(field, (width, height), interpolation=cv2.INTER_CUBIC) + 128
    fine = rng.normal(0, 1, (height // 2 + 1, width // 2 + 1)).astype(np.float32)
    image += (grain * 0.7) * cv2.resize(fine, (width, height))[..., None]
    image += rng.normal(0, grain * 0.7, (height, width, 1)).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def make_folder(root: Path, folder: Folder, n: int, seed: int = 0) -> dict[str, Any]:
    """``n`` JPEGs of ``folder``'s kind in ``CLASSES`` class sub-folders; returns what was made
    (count, mean size, bytes, bits per pixel) for the report."""
    import cv2
    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    pixels = total = 0
    for c in range(CLASSES):
        (root / f"class_{c}").mkdir(parents=True, exist_ok=True)
    for i in tqdm(range(n), desc=f"making {folder.label}", unit="file", file=sys.stderr,
                  disable=not sys.stderr.isatty(), leave=False):
        scale = 1 + folder.jitter * rng.uniform(-1, 1, 2)
        h, w = int(folder.height * scale[0]), int(folder.width * scale[1])
        if folder.jitter and rng.random() < 0.2:
            h, w = w, h  # some portraits, as in any photo collection
        path = root / f"class_{i % CLASSES}" / f"{i:06d}.jpg"
        ok, data = cv2.imencode(".jpg", photo(h, w, rng, folder.grain)[..., ::-1],
                                [cv2.IMWRITE_JPEG_QUALITY, folder.quality])
        assert ok, f"could not encode {path}"
        data.tofile(path)
        pixels += h * w
        total += data.size
    return {"files": n, "bytes": total, "mean_kb": total / n / 1e3,
            "mean_pixels": pixels / n, "bits_per_pixel": 8 * total / pixels}


def link_tree(root: Path, n: int, classes: int = 1000, size: int = 64) -> float:
    """``n`` files in ``classes`` class folders, each a hard link of its folder's own small
    JPEG (``size`` x ``size``; one source per folder keeps every file's link count far below
    ext4's limit of 65,000); returns the seconds it took. Falls back to copies where the file
    system has no hard links."""
    import time

    import cv2
    from tqdm import tqdm

    began = time.perf_counter()
    rng = np.random.default_rng(0)
    originals = root / "_sources"
    originals.mkdir(parents=True)
    made = []
    for k in range(classes):
        path = originals / f"{k}.jpg"
        cv2.imwrite(str(path), photo(size, size, rng)[..., ::-1])
        made.append(str(path))
    tree = root / "tree"
    per_class = -(-n // classes)
    with tqdm(total=n, desc=f"linking {n:,} files", unit="file", file=sys.stderr,
              disable=not sys.stderr.isatty(), leave=False, miniters=10_000) as bar:
        i = 0
        for c in range(classes):
            folder = tree / f"n{c:08d}"
            folder.mkdir(parents=True)
            prefix = os.path.join(str(folder), f"n{c:08d}_")
            count = min(per_class, n - i)
            for j in range(i, i + count):
                target = f"{prefix}{j}.JPEG"
                try:
                    os.link(made[c], target)
                except OSError:  # no hard links here: copies cost disk, not correctness
                    shutil.copyfile(made[c], target)
            i += count
            bar.update(count)
    return time.perf_counter() - began
