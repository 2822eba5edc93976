"""Subclass shmaug.Sequence to change what a sample is, without touching the engine.

Here a sample is *drawn* from its index in the workers (`load`), distorted by a method that
uses subclass state (`augment`), and its target becomes one-hot in the main process
(`targets`). Nothing but the index list is stored.

Run:
    python examples/subclass_sequence.py [--quick] [--start-method spawn]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2
import keras
import numpy as np

import shmaug
from shmaug.ops import Op

SHAPES = ("circle", "square", "triangle")


class Shapes(shmaug.Sequence):
    """Sample i: shape i % 3 at a position and size that depend only on i."""

    def __init__(self, n: int, side: int = 48, **kwargs):
        super().__init__(list(range(n)), np.arange(n) % len(SHAPES), **kwargs)
        self.side = side  # set after super().__init__(): the workers still get it
        self.wobble = Op("rotate", degrees=(-20, 20))

    def load(self, index: int) -> np.ndarray:  # runs in a worker
        place = np.random.default_rng(index)  # the sample's identity, not its augmentation
        img = np.zeros((self.side, self.side), np.uint8)
        c, r = place.integers(14, self.side - 14, 2), int(place.integers(6, 12))
        kind = SHAPES[index % len(SHAPES)]
        if kind == "circle":
            cv2.circle(img, (int(c[0]), int(c[1])), r, 255, -1)
        elif kind == "square":
            cv2.rectangle(img, (int(c[0] - r), int(c[1] - r)), (int(c[0] + r), int(c[1] + r)),
                          255, -1)
        else:
            pts = np.array([[c[0], c[1] - r], [c[0] - r, c[1] + r], [c[0] + r, c[1] + r]], np.int32)
            cv2.fillPoly(img, [pts], 255)
        return img[..., None]

    def augment(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:  # in a worker
        return self.wobble(image, rng)

    def targets(self, y_batch: np.ndarray) -> np.ndarray:  # in the main process
        return keras.utils.to_categorical(y_batch, len(SHAPES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    with Shapes(96 if args.quick else 3000, batch_size=32, workers=2, seed=0, shuffle=True,
                start_method=args.start_method) as train:
        xb, yb = train[0]
        print("batch:", xb.shape, xb.dtype, "targets:", yb.shape)
        keras.utils.set_random_seed(0)
        model = keras.Sequential([
            keras.Input((48, 48, 1)), keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
            keras.layers.GlobalMaxPooling2D(),
            keras.layers.Dense(len(SHAPES), activation="softmax"),
        ])
        model.compile("adam", "categorical_crossentropy", metrics=["accuracy"])
        history = model.fit(train, epochs=1 if args.quick else 4, verbose=2)
        print(f"training accuracy {history.history['accuracy'][-1]:.3f}")


if __name__ == "__main__":
    main()
