"""Run an existing PIL `distort_sample` that uses `random`, unchanged, on every core.

`distort_sample` is the kind of function found in many training scripts: it takes a PIL image,
picks a distortion with the global `random`, and returns the image. `shmaug.from_pil` runs it
in the workers; per-sample seeding makes it reproducible and different in every worker.

Run:
    python examples/legacy_pil_function.py [--quick] [--start-method spawn]
"""

from __future__ import annotations

import argparse
import random

import numpy as np
from PIL import Image, ImageFilter

import shmaug
from shmaug.sources.glyphs import render_glyphs


def distort_sample(img: Image.Image) -> Image.Image:
    """The legacy code, untouched: global `random`, PIL all the way."""
    kind = random.choice(["rotate", "shear", "blur"])
    if kind == "rotate":
        return img.rotate(random.uniform(-15, 15), resample=Image.BILINEAR)
    if kind == "shear":
        s = random.uniform(-0.3, 0.3)
        return img.transform(img.size, Image.AFFINE, (1, s, -s * img.size[1] / 2, 0, 1, 0),
                             resample=Image.BILINEAR)
    return img.filter(ImageFilter.GaussianBlur(random.uniform(0.5, 1.2)))


def run(x: np.ndarray, workers: int, start_method: str | None) -> np.ndarray:
    with shmaug.Loader(x, batch_size=16, augment=shmaug.from_pil(distort_sample),
                       workers=workers, seed=42, start_method=start_method) as loader:
        return np.concatenate([xb for xb, _ in loader])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    x, _, _ = render_glyphs(64 if args.quick else 1024, 64, seed=2)
    one = run(x, 1, args.start_method)
    two = run(x, 2, args.start_method)
    print("same seed, 1 vs 2 workers: bit-identical =", np.array_equal(one, two))
    same = np.repeat(x[:1], 8, axis=0)  # eight copies of one glyph...
    outs = run(same, 2, args.start_method)  # ...each distorted its own way, in either worker
    distinct = len({o.tobytes() for o in outs})
    print("identical inputs, distinct outputs:", distinct, "of", len(outs))
    assert np.array_equal(one, two) and distinct == len(outs)


if __name__ == "__main__":
    main()
