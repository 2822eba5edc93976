"""Detection: a small detector trains on (images, {"boxes", "labels"}) batches whose boxes
move with their images, from a COCO folder, on any Keras backend.

The data is made here: 1-4 shapes (circle, square, triangle) per image on noise, their boxes
(``rel_xyxy``: fractions of the image) and class labels, padded to 4 per image with -1 rows
as Keras pads them (``shmaug.ops.pad_boxes`` does it from per-image lists). It is written as
a COCO folder (PNG files and ``instances.json``, with ``json``), which
``shmaug.sources.from_coco`` reads back as a user's COCO folder is read: the images decoded
in the workers, the boxes in Keras' layout (``--arrays`` trains from the arrays instead).
The pipeline flips, rotates, zooms and recolours; every geometric step moves the boxes (the
box of each moved outline, clipped; a box pushed out is dropped with its label), the colour
steps leave them as they are. ``y={"bounding_boxes": {"boxes": ..., "labels": ...}}`` (or
``from_coco``'s ``{"boxes", "labels"}``) is Keras' layout; a ``Sequence`` hands Keras its
``{"boxes", "labels"}``, which the model's two outputs of those names take. The loss skips
the padding: a masked L1 on the boxes, ``ignore_class=-1`` on the labels.

``--hub`` trains keras-hub's ``RetinaNetObjectDetector`` (a small ResNet built from config, no
download) instead, in keras-hub's layout (the same ``{"boxes", "labels"}``, boxes in pixels,
``xyxy``): its ``fit`` takes Grain or tf.data, not a PyDataset, so the Sequence goes in as
``seq.to_grain()`` (``pip install keras-hub grain``).

``--grid PATH`` writes a PNG of augmented samples with their boxes and masks drawn over them
(the masks, an instance mask per image, ride along as ``segmentation_masks``).

Run:
    python examples/detection.py [--quick] [--start-method spawn] [--grid grid.png] [--arrays]
                                 [--hub]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import cv2
import keras
import numpy as np

import shmaug
from shmaug.ops import Compose, Maybe, Op

SIDE, CLASSES, MAX_BOXES = 64, 3, 4
NAMES = ("circle", "square", "triangle")


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images (n, 64, 64, 3), boxes (n, 4, 4) rel_xyxy and labels (n, 4), both padded with
    -1, and masks (n, 64, 64, 1) of each image's shapes (1 + class)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 60, (n, SIDE, SIDE, 3), dtype=np.uint8)
    masks = np.zeros((n, SIDE, SIDE, 1), np.uint8)
    boxes, labels = [], []
    for i in range(n):
        own_boxes, own_labels = [], []
        for _ in range(int(rng.integers(1, MAX_BOXES + 1))):
            kind = int(rng.integers(0, CLASSES))
            cx, cy, r = (int(v) for v in (*rng.integers(10, SIDE - 10, 2), rng.integers(4, 10)))
            canvas = np.zeros((SIDE, SIDE), np.uint8)
            if kind == 0:
                cv2.circle(canvas, (cx, cy), r, 1, -1)
            elif kind == 1:
                cv2.rectangle(canvas, (cx - r, cy - r), (cx + r, cy + r), 1, -1)
            else:
                pts = np.array([[cx, cy - r], [cx - r, cy + r], [cx + r, cy + r]], np.int32)
                cv2.fillPoly(canvas, [pts], 1)
            ys, xs = np.nonzero(canvas)
            images[i][canvas > 0] = rng.integers(120, 256, 3, dtype=np.uint8)
            masks[i, :, :, 0][canvas > 0] = 1 + kind
            own_boxes.append([xs.min() / SIDE, ys.min() / SIDE, (xs.max() + 1) / SIDE,
                              (ys.max() + 1) / SIDE])
            own_labels.append(kind)
        boxes.append(np.array(own_boxes))
        labels.append(np.array(own_labels))
    padded, padded_labels = shmaug.ops.pad_boxes(boxes, labels, max_boxes=MAX_BOXES)
    assert padded_labels is not None
    return images, padded, padded_labels, masks


def write_coco(folder: str, images: np.ndarray, boxes: np.ndarray, labels: np.ndarray
               ) -> tuple[str, str]:
    """The images as PNG files and their boxes as COCO's ``instances.json`` (``bbox``:
    ``[x, y, width, height]`` in pixels; category ids from 1, as COCO numbers them); the
    JSON's path and the images' folder."""
    pictures = os.path.join(folder, "train")
    os.makedirs(pictures, exist_ok=True)
    entries, annotations = [], []
    for i, (image, own_boxes, own_labels) in enumerate(zip(images, boxes, labels)):
        cv2.imwrite(os.path.join(pictures, f"{i:05d}.png"), image[..., ::-1])  # (BGR)
        entries.append({"id": i, "file_name": f"{i:05d}.png", "width": SIDE, "height": SIDE})
        for (x0, y0, x1, y1), label in zip(own_boxes * SIDE, own_labels):
            if label >= 0:
                annotations.append({"id": len(annotations), "image_id": i, "iscrowd": 0,
                                    "category_id": int(label) + 1,
                                    "bbox": [float(x0), float(y0), float(x1 - x0),
                                             float(y1 - y0)]})
    path = os.path.join(folder, "instances.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"images": entries, "annotations": annotations,
                   "categories": [{"id": k + 1, "name": n} for k, n in enumerate(NAMES)]}, f)
    return path, pictures


def augmentation(bounding_box_format: str = "rel_xyxy") -> Compose:
    return Compose([
        Maybe(Op("hflip")), Op("rotate", degrees=(-15, 15), border="constant"),
        Op("zoom", height_factor=(-0.2, 0.2), border="constant"),
        Op("color_jitter", brightness_factor=0.2, contrast_factor=0.2, saturation_factor=None,
           hue_factor=None),
    ], bounding_box_format=bounding_box_format, min_visibility=0.3)


def masked_l1(y_true, y_pred):
    """L1 over the real boxes only: padding rows (and boxes the pipeline dropped) are -1."""
    real = keras.ops.cast(keras.ops.all(y_true >= 0, axis=-1), y_pred.dtype)
    error = keras.ops.sum(keras.ops.abs(y_true - y_pred), axis=-1) * real
    return keras.ops.sum(error, axis=-1) / keras.ops.maximum(keras.ops.sum(real, axis=-1), 1.0)


def detector() -> keras.Model:
    """A backbone and two heads, named as the targets: ``boxes`` and ``labels``."""
    inputs = keras.Input((SIDE, SIDE, 3))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    for width in (16, 32, 64):
        x = keras.layers.Conv2D(width, 3, strides=2, padding="same", activation="relu")(x)
    x = keras.layers.Dense(128, activation="relu")(keras.layers.Flatten()(x))
    boxes = keras.layers.Reshape((MAX_BOXES, 4))(keras.layers.Dense(MAX_BOXES * 4,
                                                                    activation="sigmoid")(x))
    labels = keras.layers.Reshape((MAX_BOXES, CLASSES))(keras.layers.Dense(MAX_BOXES * CLASSES)(x))
    return keras.Model(inputs, {"boxes": boxes, "labels": labels})


def retinanet(bounding_box_format: str = "xyxy") -> keras.Model:
    """keras-hub's RetinaNet on a small ResNet, built from config (no download), compiled
    with its own losses. Its anchors are in pixels, so the boxes are too (``xyxy``)."""
    import keras_hub

    encoder = keras_hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64, 16, 16, 16], stackwise_num_blocks=[1, 1, 1, 1],
        stackwise_num_strides=[1, 2, 2, 2], block_type="basic_block",
        image_shape=(SIDE, SIDE, 3))
    backbone = keras_hub.models.RetinaNetBackbone(
        image_encoder=encoder, min_level=3, max_level=5, use_p5=False,
        image_shape=(SIDE, SIDE, 3))
    anchors = keras_hub.layers.AnchorGenerator(  # anchors of 8-32 pixels, as the shapes are
        bounding_box_format, min_level=3, max_level=5, num_scales=3,
        aspect_ratios=[0.5, 1.0, 2.0], anchor_size=1)
    model = keras_hub.models.RetinaNetObjectDetector(
        backbone=backbone, num_classes=CLASSES, bounding_box_format=bounding_box_format,
        anchor_generator=anchors, pre_logits_num_conv_layers=1)
    model.compile(optimizer="adam")
    return model


def write_grid(path: str, images: np.ndarray, boxes: np.ndarray, labels: np.ndarray,
               masks: np.ndarray) -> None:
    """Augmented samples in a grid, masks tinted over them and boxes drawn (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = np.array([[0, 0, 0], [255, 80, 80], [80, 255, 80], [80, 160, 255]], np.uint8)
    fig, axes = plt.subplots(2, 4, figsize=(8, 4.3))
    for ax, image, own_boxes, own_labels, mask in zip(axes.flat, images, boxes, labels, masks):
        tint = colours[mask[:, :, 0]]
        ax.imshow(np.where(mask > 0, (0.5 * image + 0.5 * tint).astype(np.uint8), image))
        for (x0, y0, x1, y1), label in zip(own_boxes * SIDE, own_labels):
            if label >= 0:
                ax.add_patch(plt.Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False,
                                           color=colours[1 + label] / 255, linewidth=1.5))
        ax.set_axis_off()
    fig.suptitle("augmented samples: boxes and masks moved with their images")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print("wrote", path)


def train_on(x: object, y: object, args: argparse.Namespace) -> None:
    """A few epochs of the detector on ``(x, y)`` under ``fit``."""
    with shmaug.Sequence(x, y, batch_size=16, augment=augmentation(), workers=2, seed=0,
                         shuffle=True, start_method=args.start_method) as train:
        xb, yb = train[0]
        print("batch:", xb.shape, "boxes:", yb["boxes"].shape, "labels:", yb["labels"].shape)
        keras.utils.set_random_seed(0)
        model = detector()
        model.compile("adam", loss={
            "boxes": masked_l1,
            "labels": keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                 ignore_class=-1)})
        history = model.fit(train, epochs=1 if args.quick else 5, verbose=2)
        print(f"loss {history.history['loss'][0]:.3f} -> {history.history['loss'][-1]:.3f}")


def train_hub(x: object, y: object, *, epochs: int, batch_size: int = 16, workers: int = 2,
              start_method: str | None = None) -> keras.callbacks.History:
    """keras-hub's RetinaNet on ``(x, y)`` (boxes in pixels, ``xyxy``) under ``fit``. Its
    ``fit`` takes Grain or tf.data, not a PyDataset: ``to_grain()`` serves the Sequence's
    batches, each epoch shuffled anew. ``shuffle=False`` tells Keras not to try (it cannot
    shuffle a Grain dataset, and says so)."""
    with shmaug.Sequence(x, y, batch_size=batch_size, augment=augmentation("xyxy"),
                         workers=workers, seed=0, start_method=start_method) as train:
        keras.utils.set_random_seed(0)
        model = retinanet("xyxy")
        history = model.fit(train.to_grain(), epochs=epochs, shuffle=False, verbose=2)
        print(f"loss {history.history['loss'][0]:.3f} -> {history.history['loss'][-1]:.3f}")
        return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start-method", default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--grid", default=None, help="write a PNG of augmented samples here")
    parser.add_argument("--arrays", action="store_true",
                        help="train from the arrays, not from the COCO folder made of them")
    parser.add_argument("--hub", action="store_true",
                        help="train keras-hub's RetinaNet (pip install keras-hub grain)")
    args = parser.parse_args()
    images, boxes, labels, masks = make_data(64 if args.quick else 3000)
    if args.grid:
        y = {"bounding_boxes": {"boxes": boxes, "labels": labels}, "segmentation_masks": masks}
        with shmaug.Loader(images, y, batch_size=8, augment=augmentation(), workers=0,
                           seed=0, shuffle=True) as loader:
            xb, yb = loader.batch(0)
        write_grid(args.grid, xb, yb["bounding_boxes"]["boxes"], yb["bounding_boxes"]["labels"],
                   yb["segmentation_masks"])
    with tempfile.TemporaryDirectory(prefix="shmaug-coco-") as folder:
        box_format = "xyxy" if args.hub else "rel_xyxy"  # RetinaNet's anchors are in pixels
        if args.arrays:
            if args.hub:
                boxes = np.where(labels[..., None] >= 0, boxes * SIDE, -1).astype(np.float32)
            x, y = images, {"bounding_boxes": {"boxes": boxes, "labels": labels}}
        else:
            x, y = shmaug.sources.from_coco(*write_coco(folder, images, boxes, labels),
                                            image_size=(SIDE, SIDE), max_boxes=MAX_BOXES,
                                            bounding_box_format=box_format)
            print(f"COCO folder: {len(x)} images, classes {x.class_names}")
        if args.hub:
            train_hub(x, y, epochs=1 if args.quick else 5, start_method=args.start_method)
        else:
            train_on(x, y, args)


if __name__ == "__main__":
    main()
