"""`shmaug demo`: the whole story in under two minutes on two cores.

Renders a labelled glyph data set locally, trains a small CNN through ``shmaug.Sequence`` with
the glyph preset, reports images/s, the data-wait fraction, the prefetch hit rate and the
validation accuracy, and writes a PNG grid of augmented samples.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np


def sample_grid(x: np.ndarray, augment: Any, seed: int, path: Path, draws: int = 7) -> Path:
    """A PNG: one row per glyph, the original then ``draws`` augmentations (as workers do them)."""
    from PIL import Image

    from .seeding import rng_for

    rows = [np.concatenate([x[i]] + [augment(x[i], rng_for(seed, e, i)) for e in range(draws)],
                           axis=1) for i in range(len(x))]
    grid = np.concatenate(rows, axis=0).squeeze()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).resize((grid.shape[1] * 2, grid.shape[0] * 2), Image.Resampling.NEAREST).save(path)
    return path


def build_model(side: int, classes: int) -> Any:
    import keras

    def block(filters: int, strides: int = 1) -> list[Any]:
        return [keras.layers.Conv2D(filters, 3, strides=strides, use_bias=False),
                keras.layers.BatchNormalization(momentum=0.9), keras.layers.ReLU()]

    return keras.Sequential([
        keras.Input((side, side, 1)),
        keras.layers.Rescaling(1 / 255),
        *block(32, strides=2),
        keras.layers.MaxPooling2D(),
        *block(64),
        *block(96),
        keras.layers.GlobalMaxPooling2D(),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(classes, activation="softmax"),
    ])


def run(*, epochs: int, per_class: int, workers: int | None, out: Path, seed: int,
        start_method: str | None) -> dict[str, Any]:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from . import presets
    from .glyphs import find_cjk_font, render_glyphs

    began = time.perf_counter()
    font = find_cjk_font()
    probe_classes = 100 if font else 62
    n_train, n_val = per_class * probe_classes, max(per_class // 5, 2) * probe_classes
    x, y, names = render_glyphs(n_train + n_val, 64, seed=seed)
    x = x[..., None]  # (N, 64, 64, 1): the channel axis a Conv2D expects
    x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    augment = presets.glyph_distort()
    print(f"shmaug demo: {n_train:,} training and {n_val:,} validation glyphs of "
          f"{len(names)} classes ({'CJK font ' + Path(font).name if font else 'Pillow built-in font'})",
          flush=True)

    import keras

    from .sequence import Sequence, StallMonitor

    keras.utils.set_random_seed(seed)
    model = build_model(64, len(names))
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    with Sequence(x_train, y_train, batch_size=128, augment=augment, workers=workers, seed=seed,
                  shuffle=True, start_method=start_method) as train, \
            Sequence(x_val, y_val, batch_size=256) as val:
        print(f"{train.loader.workers} shmaug workers "
              f"({start_method or 'default start method'}); training {epochs} epochs", flush=True)
        monitor = StallMonitor(train)
        history = model.fit(train, validation_data=val, epochs=epochs, callbacks=[monitor],
                            verbose=1)
        last = monitor.history[-1]
        stats = train.stats()
    grid = sample_grid(x_train[:8], augment, seed, out / "augmented_samples.png")
    result = {
        "images_per_s": last["images_per_s"],
        "data_wait": last["wait_fraction"],
        "hit_rate": stats["hit_rate"],
        "val_accuracy": float(history.history["val_accuracy"][-1]),
        "grid": str(grid),
        "seconds": time.perf_counter() - began,
    }
    print(f"last epoch: {result['images_per_s']:,.0f} augmented images/s fed to fit, "
          f"waiting for data {100 * result['data_wait']:.1f}% of the time, "
          f"{100 * result['hit_rate']:.1f}% of batches ready when Keras asked")
    print(f"validation accuracy: {result['val_accuracy']:.3f}")
    print(f"augmented samples: {grid}")
    print(f"done in {result['seconds']:.0f} s")
    return result
