"""ImageNet-style training with Model.fit: random resized crop drawn on each photo's own
resolution (and decoded only where it crops), flip, RandAugment, MixUp / CutMix with label
smoothing, and a soft-target loss, all of the augmentation in shmaug's workers.

The recipe is timm's (``--mixup 0.8 --cutmix 1.0 --smoothing 0.1``, with torchvision's
RandAugment at magnitude 9 of 31, about a third of timm's ``rand-m9``: see
docs/recipe-imagenet.md) on a folder of JPEGs in one sub-folder per class, as
``image_dataset_from_directory`` reads it.
The folder is made here (coloured shapes on textured backgrounds, written as JPEG files), so
nothing is downloaded; point ``--data`` at your own folder to train on it.

Run:
    python examples/imagenet_recipe.py                    # about 2 minutes on 2 cores
    python examples/imagenet_recipe.py --quick            # seconds (smoke test)
    python examples/imagenet_recipe.py --grid batch.png   # also a PNG of one mixed batch
    python examples/imagenet_recipe.py --compare crops.png  # crops of a photo vs of it at 224
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2
import keras
import numpy as np
from PIL import Image

import shmaug
from shmaug.ops import Compose, Maybe, Mix, Op

SHAPES = ("circle", "square", "triangle", "cross", "ring", "bar")


def write_folder(root: Path, per_class: int, seed: int = 0) -> None:
    """``per_class`` JPEGs of each shape, in sizes from 96 to 160 pixels: a shape of a random
    colour, size and place on a noisy gradient, so crops and colour ops have work to do."""
    rng = np.random.default_rng(seed)
    for label, shape in enumerate(SHAPES):
        (root / shape).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            h, w = (int(v) for v in rng.integers(96, 161, 2))
            ramp = np.linspace(0, 1, w)[None, :, None] * rng.uniform(0, 120, 3)
            image = np.clip(60 + ramp + rng.normal(0, 18, (h, w, 3)), 0, 255).astype(np.uint8)
            colour = tuple(int(c) for c in rng.integers(90, 256, 3))
            r = int(min(h, w) * rng.uniform(0.2, 0.35))
            cy, cx = int(rng.integers(r, h - r)), int(rng.integers(r, w - r))
            if shape == "circle":
                cv2.circle(image, (cx, cy), r, colour, -1)
            elif shape == "ring":
                cv2.circle(image, (cx, cy), r, colour, max(3, r // 3))
            elif shape == "square":
                cv2.rectangle(image, (cx - r, cy - r), (cx + r, cy + r), colour, -1)
            elif shape == "triangle":
                points = np.array([[cx, cy - r], [cx - r, cy + r], [cx + r, cy + r]], np.int32)
                cv2.fillPoly(image, [points], colour)
            elif shape == "cross":
                cv2.line(image, (cx - r, cy - r), (cx + r, cy + r), colour, max(3, r // 3))
                cv2.line(image, (cx - r, cy + r), (cx + r, cy - r), colour, max(3, r // 3))
            else:  # bar
                cv2.rectangle(image, (cx - r, cy - r // 4), (cx + r, cy + r // 4), colour, -1)
            cv2.imwrite(str(root / shape / f"{i:05d}.jpg"), image[:, :, ::-1])


def make_model(side: int, classes: int) -> keras.Model:
    """A small residual CNN. uint8 batches go to the device as they are (a quarter of
    float32's bytes) and ``Rescaling`` makes them [0, 1] floats there. Its shortcuts pool,
    then project (ResNet-D's): TensorFlow 2.21's oneDNN kernels crash the process training a
    strided 1x1 convolution on some AVX-512 hosts (seen here)."""

    def block(x, filters: int, strides: int):
        pooled = keras.layers.AveragePooling2D(strides)(x) if strides > 1 else x
        shortcut = keras.layers.Conv2D(filters, 1, use_bias=False)(pooled)
        x = keras.layers.Conv2D(filters, 3, strides=strides, padding="same", use_bias=False)(x)
        x = keras.layers.ReLU()(keras.layers.BatchNormalization()(x))
        x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
        x = keras.layers.BatchNormalization()(x)
        return keras.layers.ReLU()(keras.layers.Add()([x, shortcut]))

    inputs = keras.Input((side, side, 3), dtype="uint8")
    x = keras.layers.Rescaling(1 / 255)(inputs)
    for filters in (32, 64, 128):
        x = block(x, filters, 2)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(classes, activation="softmax")(x))


def train_augment(side: int, smallest_crop: float) -> Compose:
    """timm's ImageNet training transform, minus its normalisation (in the model here): the
    random resized crop first, so that it is drawn on each photo's own resolution and only
    its window is decoded. timm crops down to 8% of the area; the shapes here fill less of
    their images than an ImageNet object does, so the example crops down to
    ``smallest_crop``."""
    return Compose([Op("random_resized_crop", height=side, width=side,
                       scale=(smallest_crop, 1.0)),
                    Maybe(Op("hflip")), Op("rand_augment", num_ops=2, magnitude=9)])


def val_augment(side: int) -> Op:
    """timm's validation transform: the short side to side / 0.875, the centre cut out, in
    one resample of the file's window."""
    return Op("center_resized_crop", height=side, width=side, crop_fraction=0.875)


def save_grid(xb: np.ndarray, yb: np.ndarray, names: tuple[str, ...], path: str) -> None:
    """One mixed batch, each tile captioned with its two largest soft targets (rows 2k and
    2k + 1 are a pair: a blend of the same two images, or each with the other's box)."""
    tiles = []
    for image, soft in zip(xb[:16], yb[:16]):
        tile = cv2.resize(image, (128, 128), interpolation=cv2.INTER_NEAREST)
        tile = np.vstack([tile, np.full((30, 128, 3), 255, np.uint8)])
        top = np.argsort(soft)[::-1][:2]
        for row, k in enumerate(top):
            cv2.putText(tile, f"{names[k]} {soft[k]:.2f}", (3, 141 + 13 * row),
                        cv2.FONT_HERSHEY_SIMPLEX, 0.38, (0, 0, 0), 1, cv2.LINE_AA)
        tiles.append(tile)
    rows = [np.hstack(tiles[i:i + 8]) for i in range(0, len(tiles), 8)]
    # A 128-colour palette: a sixth of the bytes of the noisy full-colour PNG
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.vstack(rows)).quantize(colors=128).save(path, optimize=True)


def save_crops(path: str, side: int = 224, seed: int = 3) -> None:
    """Four random resized crops of one 500 x 375 photo-like picture with fine detail:
    drawn on the photo (top row: what the decode-time crop gives), and the same windows of
    the photo shrunk to ``side`` x ``side`` first (bottom row: ``image_size=(side, side)``)."""
    from shmaug.resample import Resample, resize_box
    from shmaug.ops.builtin.windows import window_of

    rng = np.random.default_rng(seed)
    h, w = 375, 500
    photo = np.clip(80 + np.linspace(0, 120, w)[None, :, None] * rng.uniform(0.3, 1, 3)
                    + rng.normal(0, 6, (h, w, 3)), 0, 255).astype(np.uint8)
    for y in range(12, h, 14):  # fine print and thin lines: the detail a shrink loses
        cv2.putText(photo, "the quick brown fox jumps over the lazy dog 0123456789",
                    (4, y), cv2.FONT_HERSHEY_PLAIN, 0.7, (20, 20, 60), 1, cv2.LINE_AA)
    for x in range(0, w, 40):
        cv2.line(photo, (x, 0), (x + 60, h), (200, 40, 40), 1, cv2.LINE_AA)
    shrunk = cv2.resize(photo, (side, side), interpolation=cv2.INTER_AREA)
    top, bottom = [], []
    for k in range(4):
        t, left, ch, cw = window_of(h, w, rng, (0.08, 0.3), (3 / 4, 4 / 3))
        top.append(resize_box(photo, (t, left, ch, cw), (side, side), Resample()))
        sy, sx = side / h, side / w
        bottom.append(resize_box(shrunk, (t * sy, left * sx, ch * sy, cw * sx), (side, side),
                                 Resample()))
    gap = np.full((side, 6, 3), 255, np.uint8)
    rows = [np.hstack([part for tile in row for part in (tile, gap)][:-1])
            for row in (top, bottom)]
    grid = np.vstack([rows[0], np.full((6, rows[0].shape[1], 3), 255, np.uint8), rows[1]])
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).quantize(colors=48).save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None,
                        help="a folder with one sub-folder of images per class (default: "
                             "a folder of shapes written here)")
    parser.add_argument("--side", type=int, default=96)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", default="auto")
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--grid", default=None, help="write one mixed batch as a PNG here")
    parser.add_argument("--compare", default=None,
                        help="write the same crops drawn on a photo and on it shrunk to 224 "
                             "first as a PNG here, and stop")
    parser.add_argument("--smallest-crop", type=float, default=0.35,
                        help="the random resized crop's smallest area (timm's: 0.08)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.compare and args.grid:
        parser.error("--compare writes its PNG and stops, so --grid would be dropped: run "
                     "them one at a time")
    if args.compare:
        save_crops(args.compare)
        print(f"wrote {args.compare}")
        return
    epochs = 1 if args.quick else args.epochs
    workers = args.workers if args.workers == "auto" else int(args.workers)

    with tempfile.TemporaryDirectory() as tmp:
        root = args.data
        if root is None:
            root = Path(tmp) / "shapes"
            write_folder(root, per_class=12 if args.quick else 150)
        # Photos at their own size (image_size=None): the crops below are drawn on them and
        # decode only their window. One-hot labels: the training batches' soft targets and
        # the validation batches' one-hot ones then take the same loss.
        train_files, val_files = shmaug.ImageFiles.from_directory(
            root, image_size=None, label_mode="categorical",
            validation_split=0.2, subset="both", seed=1337)
        mix = Mix(mixup_alpha=0.8, cutmix_alpha=1.0, switch_p=0.5, label_smoothing=0.1)
        train = shmaug.Sequence(train_files, batch_size=args.batch_size,
                                augment=train_augment(args.side, args.smallest_crop), mix=mix,
                                workers=workers, seed=0, shuffle=True,
                                start_method=args.start_method)
        val = shmaug.Sequence(val_files, batch_size=args.batch_size,
                              augment=val_augment(args.side), workers=workers,
                              start_method=args.start_method)
        with train, val:
            if args.grid:
                save_grid(*train.batch(0), train_files.class_names, args.grid)
            keras.utils.set_random_seed(0)
            model = make_model(args.side, len(train_files.class_names))
            steps = epochs * len(train)
            model.compile(
                optimizer=keras.optimizers.AdamW(
                    keras.optimizers.schedules.CosineDecay(0.0, steps, warmup_target=3e-3,
                                                           warmup_steps=max(1, steps // 10)),
                    weight_decay=0.05),
                loss=keras.losses.CategoricalCrossentropy(),  # soft targets
                metrics=["categorical_accuracy"])
            history = model.fit(train, validation_data=val, epochs=epochs,
                                verbose=0 if args.quick else 2)
            stats = train.stats()
    print(f"{len(train_files)} training and {len(val_files)} validation images, "
          f"{len(train_files.class_names)} classes, "
          f"{epochs} epochs on KERAS_BACKEND={keras.backend.backend()}")
    print(f"validation accuracy {history.history['val_categorical_accuracy'][-1]:.3f}, "
          f"training loss {history.history['loss'][-1]:.3f} (on mixed, smoothed targets)")
    print(f"shmaug: {stats['workers']} workers, {stats['wait_fraction']:.0%} of the time "
          f"waiting for data")


if __name__ == "__main__":
    main()
