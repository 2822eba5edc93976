"""Segmentation: a small U-Net trains on (image, mask) batches whose masks move with their
images, from a folder of images beside a folder of masks, on any Keras backend.

The data is made here: shapes (circle, square, triangle) on noise, and a mask of class ids
(0 background, 1-3 the shapes), written as a segmentation folder is usually kept (JPEGs in
``images/``, palette PNGs of the same stem in ``masks/``), which
``shmaug.sources.from_segmentation`` reads back: both decoded in the workers, the masks
without interpolation (``--arrays`` trains from the arrays instead). The pipeline flips,
rotates, zooms and recolours; every geometric step moves the mask with the image
(nearest-neighbour), and the colour steps leave it as it is. ``y={"segmentation_masks":
masks}`` is Keras' name; a ``Sequence`` hands a one-output model the mask itself (Keras
matches a dict ``y`` to outputs by name).

Run:
    python examples/segmentation.py [--quick] [--start-method spawn] [--arrays]
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2
import keras
import numpy as np
from PIL import Image

import shmaug
from shmaug.ops import Compose, Maybe, Op

SIDE, CLASSES = 64, 4  # background + three shapes


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images (n, 64, 64, 3) uint8 and their masks (n, 64, 64, 1) of class ids."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 60, (n, SIDE, SIDE, 3), dtype=np.uint8)
    masks = np.zeros((n, SIDE, SIDE, 1), np.uint8)
    for i in range(n):
        for _ in range(int(rng.integers(1, 4))):
            kind = int(rng.integers(1, CLASSES))
            cx, cy, r = (int(v) for v in (*rng.integers(12, SIDE - 12, 2), rng.integers(5, 11)))
            canvas = np.zeros((SIDE, SIDE), np.uint8)
            if kind == 1:
                cv2.circle(canvas, (cx, cy), r, 1, -1)
            elif kind == 2:
                cv2.rectangle(canvas, (cx - r, cy - r), (cx + r, cy + r), 1, -1)
            else:
                pts = np.array([[cx, cy - r], [cx - r, cy + r], [cx + r, cy + r]], np.int32)
                cv2.fillPoly(canvas, [pts], 1)
            colour = rng.integers(120, 256, 3, dtype=np.uint8)
            images[i][canvas > 0] = colour
            masks[i, :, :, 0][canvas > 0] = kind
    return images, masks


def write_folder(root: str, images: np.ndarray, masks: np.ndarray) -> tuple[str, str]:
    """``root/images/<i>.jpg`` and ``root/masks/<i>.png`` (palette PNGs: the pixel values are
    the class ids, the palette only how a viewer shows them): the two folders."""
    paths = os.path.join(root, "images"), os.path.join(root, "masks")
    for folder in paths:
        os.makedirs(folder, exist_ok=True)
    palette = [0, 0, 0, 230, 25, 75, 60, 180, 75, 0, 130, 200] + [0] * (768 - 12)
    for i, (image, mask) in enumerate(zip(images, masks)):
        Image.fromarray(image).save(os.path.join(paths[0], f"{i:05d}.jpg"), quality=95)
        ids = Image.fromarray(mask[..., 0], "P")
        ids.putpalette(palette)
        ids.save(os.path.join(paths[1], f"{i:05d}.png"))
    return paths


def augmentation() -> Compose:
    return Compose([
        Maybe(Op("hflip")), Op("rotate", degrees=(-20, 20), border="constant"),
        Op("zoom", height_factor=(-0.2, 0.2), border="constant"),
        Op("color_jitter", brightness_factor=0.2, contrast_factor=0.2, saturation_factor=None,
           hue_factor=None),
    ])


def unet() -> keras.Model:
    """Two steps down, two up, with skips: one output of per-pixel class scores."""
    inputs = keras.Input((SIDE, SIDE, 3))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    skips = []
    for width in (16, 32):
        x = keras.layers.Conv2D(width, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    for width, skip in zip((32, 16), reversed(skips)):
        x = keras.layers.UpSampling2D()(x)
        x = keras.layers.Concatenate()([x, skip])
        x = keras.layers.Conv2D(width, 3, padding="same", activation="relu")(x)
    return keras.Model(inputs, keras.layers.Conv2D(CLASSES, 1)(x))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--arrays", action="store_true",
                        help="train from the arrays, not from the folders made of them")
    args = parser.parse_args()
    images, masks = make_data(64 if args.quick else 2000)
    with tempfile.TemporaryDirectory(prefix="shmaug-segmentation-") as root:
        if args.arrays:
            x, y = images, {"segmentation_masks": masks}
        else:
            x, y = shmaug.sources.from_segmentation(*write_folder(root, images, masks),
                                                    image_size=(SIDE, SIDE))
            print(f"read {len(x)} image/mask pairs: {y['segmentation_masks']}")
        train_on(x, y, args)


def train_on(x: object, y: object, args: argparse.Namespace) -> None:
    """A U-Net on ``(x, y)`` under ``fit``."""
    with shmaug.Sequence(x, y, batch_size=16, augment=augmentation(), workers=2, seed=0,
                         shuffle=True, start_method=args.start_method) as train:
        xb, yb = train[0]
        print("batch:", xb.shape, xb.dtype, "masks:", yb.shape, yb.dtype)
        keras.utils.set_random_seed(0)
        model = unet()
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        history = model.fit(train, epochs=1 if args.quick else 5, verbose=2)
        print(f"pixel accuracy {history.history['accuracy'][-1]:.3f}")


if __name__ == "__main__":
    main()
