"""Keep your albumentations pipeline; run it on every core with shmaug, reproducibly.

`PIPELINE` is an ordinary `albumentations.Compose`, as found in many training scripts.
`shmaug.from_albumentations` turns it into an op that the workers run; each sample is seeded
from (seed, epoch, sample index) through albumentations' own `set_random_state`, so the batches
are the same for 1 or 2 workers, fork or spawn, and a new epoch draws new augmentations. The
glyphs are float16 (as in W1): the op hands albumentations float32 and returns float16.
For masks, boxes and keypoints the same op has `apply(rng, image=..., mask=..., ...)`.

Needs the extra: pip install "shmaug[albumentations]"

Run:
    python examples/albumentations_pipeline.py [--quick] [--start-method spawn]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # albumentations asks PyPI on import

import albumentations as A  # noqa: E402
import numpy as np  # noqa: E402

import shmaug  # noqa: E402
from shmaug.glyphs import render_glyphs  # noqa: E402

PIPELINE = A.Compose([
    A.Affine(rotate=(-12, 12), shear=(-8, 8), scale=(0.85, 1.05), p=1.0),
    A.OneOf([A.GaussianBlur(sigma_limit=(0.5, 1.0), p=1.0), A.Sharpen(p=1.0)], p=0.8),
    A.CoarseDropout(num_holes_range=(1, 2), hole_height_range=(0.1, 0.2),
                    hole_width_range=(0.1, 0.2), p=0.3),
])


def epochs(x: np.ndarray, y: np.ndarray, workers: int, start_method: str | None) -> list[np.ndarray]:
    """Two epochs of augmented images, each put back in sample order (the loader shuffles)."""
    augment = shmaug.from_albumentations(PIPELINE)
    with shmaug.Loader(x, y, batch_size=32, augment=augment, workers=workers, seed=42,
                       shuffle=True, start_method=start_method) as loader:
        out = []
        for _ in range(2):
            xs, ys = zip(*loader)
            out.append(np.concatenate(xs)[np.argsort(np.concatenate(ys))])
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    x, _, _ = render_glyphs(64 if args.quick else 2048, 64, seed=3)
    x = (x / 255.0).astype(np.float16)
    index = np.arange(len(x))
    one = epochs(x, index, 1, args.start_method)
    two = epochs(x, index, 2, args.start_method)
    same = all(np.array_equal(a, b) for a, b in zip(one, two))
    print("albumentations pipeline, 1 vs 2 workers: bit-identical =", same)
    print("epoch 0 vs epoch 1 differ:", not np.array_equal(two[0], two[1]))
    print("output:", two[0].shape, two[0].dtype)

    # A segmentation sample: the image and its mask get the same draw.
    op = shmaug.from_albumentations(A.Compose([A.Affine(rotate=(-30, 30), p=1.0)]))
    mask = (x[0] > 0.5).astype(np.uint8)
    out = op.apply(np.random.default_rng(0), image=x[0], mask=mask)
    print("image + mask:", out["image"].shape, out["image"].dtype, out["mask"].shape)
    assert same and not np.array_equal(two[0], two[1])


if __name__ == "__main__":
    main()
