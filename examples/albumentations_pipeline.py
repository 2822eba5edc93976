"""Keep your albumentations pipeline; run it on every core with shmaug, reproducibly.

`PIPELINE` is an ordinary `albumentations.Compose`, as found in many training scripts.
`shmaug.from_albumentations` turns it into an op that the workers run; each sample is seeded
from (seed, epoch, sample index) through albumentations' own `set_random_state`, so the batches
are the same for 1 or 2 workers, fork or spawn, and a new epoch draws new augmentations. The
glyphs are float16 (as in W1): the op hands albumentations float32 and returns float16.
Targets go through the pipeline with their image when `y` files them under albumentations'
names: here a mask and a box per glyph (boxes padded with rows of -1 to a fixed count, as
Keras' dense bounding-box layout has them), with labels that follow their boxes.

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
from shmaug.sources.glyphs import render_glyphs  # noqa: E402

PIPELINE = A.Compose([
    A.Affine(rotate=(-12, 12), shear=(-8, 8), scale=(0.85, 1.05), p=1.0),
    A.OneOf([A.GaussianBlur(sigma_limit=(0.5, 1.0), p=1.0), A.Sharpen(p=1.0)], p=0.8),
    A.CoarseDropout(num_holes_range=(1, 2), hole_height_range=(0.1, 0.2),
                    hole_width_range=(0.1, 0.2), p=0.3),
])


def epochs(x: np.ndarray, y: np.ndarray, workers: int, start_method: str | None
           ) -> list[np.ndarray]:
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

    # Segmentation and detection: mask, box and label get the same draw as their image.
    ink = x > 0.5
    ys, xs = ink.any(axis=2), ink.any(axis=1)
    boxes = np.full((len(x), 2, 4), -1, np.float32)  # up to 2 boxes per image; one here
    boxes[:, 0] = np.stack([xs.argmax(1), ys.argmax(1), 64 - xs[:, ::-1].argmax(1),
                            64 - ys[:, ::-1].argmax(1)], axis=1)
    labels = np.full((len(x), 2), -1, np.int64)
    labels[:, 0] = index % 10
    targets = {"mask": ink.astype(np.uint8), "bboxes": boxes, "labels": labels}
    op = shmaug.from_albumentations(A.Compose(
        [A.Affine(rotate=(-20, 20), scale=(0.8, 1.0), p=1.0), A.HorizontalFlip(p=0.5)],
        bbox_params=A.BboxParams(format="pascal_voc", label_fields=["labels"])))
    with shmaug.Loader(x, targets, batch_size=32, augment=op, workers=2, seed=0,
                       start_method=args.start_method) as loader:
        xb, yb = next(iter(loader))
    print("image, mask, boxes, labels:", xb.shape, yb["mask"].shape, yb["bboxes"].shape,
          yb["labels"].shape)
    print("sample 0 box before / after:", boxes[0, 0].tolist(),
          yb["bboxes"][0, 0].round(1).tolist())
    inside = float((xb[yb["mask"] > 0] > 0.25).mean())
    print(f"mask pixels where the augmented glyph has ink: {inside:.0%}")
    assert inside > 0.9
    assert same and not np.array_equal(two[0], two[1])


if __name__ == "__main__":
    main()
