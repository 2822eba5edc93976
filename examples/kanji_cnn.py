"""The whole story: render glyphs, distort them on every core, train a CNN with Model.fit.

Characters are rendered locally (a CJK font when the system has one, otherwise Latin letters
and digits); each training sample gets one geometric distortion and one filter, in shmaug's
worker processes, while TensorFlow trains on the main process.

Run:
    python examples/kanji_cnn.py            # a few epochs, about a minute on 2 cores
    python examples/kanji_cnn.py --quick    # seconds (smoke test)
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

import shmaug
from shmaug.sources.glyphs import render_glyphs


def make_model(side: int, classes: int) -> keras.Model:
    return keras.Sequential([
        keras.Input((side, side, 1)),
        keras.layers.Rescaling(1 / 255),
        keras.layers.Conv2D(32, 5, strides=2, activation="relu"),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(96, 3, activation="relu"),
        keras.layers.GlobalMaxPooling2D(),
        keras.layers.Dense(classes, activation="softmax"),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    per_class = 3 if args.quick else 120
    x, y, names = render_glyphs(per_class * 62, 64, classes=62, seed=0)
    x = x[..., None]  # a channel axis for Conv2D
    split = int(0.85 * len(x))

    train = shmaug.Sequence(x[:split], y[:split], batch_size=128,
                            augment=shmaug.presets.glyph_distort(), workers=args.workers,
                            seed=0, shuffle=True, start_method=args.start_method)
    val = shmaug.Sequence(x[split:], y[split:], batch_size=256)  # no augment, natural order
    with train, val:
        keras.utils.set_random_seed(0)
        model = make_model(64, len(names))
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(train, validation_data=val, epochs=1 if args.quick else args.epochs,
                  callbacks=[shmaug.StallMonitor(train)], verbose=2)
        stats = train.stats()
        print(f"{stats['images_per_s']:,.0f} images/s, data wait "
              f"{100 * stats['wait_fraction']:.1f}%, prefetch hits {100 * stats['hit_rate']:.0f}%")
        _, accuracy = model.evaluate(val, verbose=0)
        print(f"validation accuracy {accuracy:.3f} on {len(names)} classes")
        assert np.isfinite(accuracy)


if __name__ == "__main__":  # required: spawned workers re-import this file
    main()
