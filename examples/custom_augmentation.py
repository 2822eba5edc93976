"""Register your own augmentation op and use it by name next to the built-in ones.

`ink_bleed` thickens strokes by a random amount; it is registered at module level (so spawned
workers can import it), composed by name, stored as JSON and rebuilt from it.

Run:
    python examples/custom_augmentation.py [--quick] [--start-method spawn]
"""

from __future__ import annotations

import argparse
import json

import cv2
import numpy as np

import shmaug
from shmaug.sources.glyphs import render_glyphs
from shmaug.ops import Op


@shmaug.register("ink_bleed")  # at module level: spawned workers import it
def ink_bleed(image: np.ndarray, rng: np.random.Generator, strength=(0.0, 1.0)) -> np.ndarray:
    """Dilate the ink by 0-2 pixels, with the amount drawn from `strength`."""
    low, high = strength if isinstance(strength, (tuple, list)) else (strength, strength)
    radius = int(round(2 * rng.uniform(low, high)))
    if radius == 0:
        return image
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    return cv2.dilate(image, kernel).reshape(image.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    pipeline = shmaug.Compose([
        shmaug.OneOf([Op("rotate", degrees=(-10, 10)), Op("shear")]),
        shmaug.Maybe(Op("ink_bleed", strength=(0.2, 1.0)), p=0.7),
    ])
    config = json.dumps(pipeline.to_config())  # store it with the training run
    print("pipeline config:", config)
    assert shmaug.from_config(json.loads(config)) == pipeline
    print("registered ops:", ", ".join(shmaug.available()))

    x, y, _ = render_glyphs(64 if args.quick else 2048, 64, seed=1)
    with shmaug.Loader(x, y, batch_size=32, augment=pipeline, workers=2, seed=0,
                       shuffle=True, start_method=args.start_method) as loader:
        ink = [float(xb.mean()) for xb, _ in loader]
    print(f"{len(ink)} batches; mean ink {np.mean(ink):.1f} (the originals: {x.mean():.1f})")


if __name__ == "__main__":
    main()
