"""Segmentation and detection under real ``Model.fit``, on whichever Keras backend runs the
suite (CI runs it on TensorFlow, JAX and torch): masks and boxes in Keras' layout move with
their images in the workers and reach the model's outputs as Keras matches them.

The models and data are the examples' own (``examples/segmentation.py``,
``examples/detection.py``), so what the docs show is what runs here."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug  # noqa: E402

pytestmark = [pytest.mark.keras, pytest.mark.timeout(240), pytest.mark.slow]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fit_unet(seg, train):
    """Two epochs of the example's U-Net, compiled as the example compiles it."""
    keras.utils.set_random_seed(0)
    model = seg.unet()
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model.fit(train, epochs=2, verbose=0)


def test_a_unet_trains_on_masks_that_moved_with_their_images():
    seg = example("segmentation")
    images, masks = seg.make_data(48)
    with shmaug.Sequence(images, {"segmentation_masks": masks}, batch_size=16,
                         augment=seg.augmentation(), workers=2, seed=0, shuffle=True,
                         start_method="spawn") as train:
        xb, yb = train[0]
        assert xb.shape == (16, 64, 64, 3) and yb.shape == (16, 64, 64, 1)  # the mask itself
        made, moved = train.loader.batch(0)
        # the shapes' pixels and the mask's classes are where each other are
        shapes = made.max(-1) >= 120
        labelled = moved["y"]["segmentation_masks"][..., 0] > 0  # (the facade's side dict)
        assert (shapes ^ labelled).mean() < 0.03
        history = fit_unet(seg, train)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_a_unet_trains_from_a_segmentation_folder(tmp_path):
    """The example's data written as images and palette-PNG masks in two folders and read
    back with ``from_segmentation`` (issue 49): the same ids, decoded in the workers, and
    ``fit`` on every backend."""
    seg = example("segmentation")
    images, masks = seg.make_data(48)
    files, y = shmaug.sources.from_segmentation(*seg.write_folder(str(tmp_path), images, masks),
                                                image_size=(seg.SIDE, seg.SIDE))
    np.testing.assert_array_equal(y["segmentation_masks"].load(5), masks[5])  # ids, exactly
    with shmaug.Sequence(files, y, batch_size=16, augment=seg.augmentation(), workers=2,
                         seed=0, shuffle=True) as train:
        xb, yb = train[0]
        assert yb.shape == (16, 64, 64, 1) and yb.dtype == np.uint8
        assert ((xb.max(-1) >= 120) ^ (yb[..., 0] > 0)).mean() < 0.03
        history = fit_unet(seg, train)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]


def fit_detector(det, train):
    """Two epochs of the example's detector, compiled as the example compiles it."""
    keras.utils.set_random_seed(0)
    model = det.detector()
    model.compile("adam", loss={
        "boxes": det.masked_l1,
        "labels": keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                             ignore_class=-1)})
    return model.fit(train, epochs=2, verbose=0)


def test_a_detector_trains_on_padded_boxes_that_moved_with_their_images():
    det = example("detection")
    images, boxes, labels, _ = det.make_data(48)
    with shmaug.Sequence(images, {"bounding_boxes": {"boxes": boxes, "labels": labels}},
                         batch_size=16, augment=det.augmentation(), workers=2, seed=0,
                         shuffle=True) as train:
        xb, yb = train[0]
        assert set(yb) == {"boxes", "labels"}  # what the model's outputs of those names take
        assert yb["boxes"].shape == (16, 4, 4) and yb["labels"].shape == (16, 4)
        real = yb["labels"] >= 0
        assert real.any() and (yb["boxes"][~real] == -1).all()  # padding stays padding
        assert (yb["boxes"][real] >= 0).all() and (yb["boxes"][real] <= 1).all()
        history = fit_detector(det, train)
    assert np.isfinite(history.history["loss"]).all()
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_a_detector_trains_from_a_coco_folder(tmp_path):
    """The example's data written as a COCO folder and read back with ``from_coco`` (issue
    49): the same boxes, the images decoded in the workers, and ``fit`` on every backend."""
    det = example("detection")
    images, boxes, labels, _ = det.make_data(48)
    files, y = shmaug.sources.from_coco(*det.write_coco(str(tmp_path), images, boxes, labels),
                                        image_size=(det.SIDE, det.SIDE), max_boxes=det.MAX_BOXES,
                                        bounding_box_format="rel_xyxy")
    assert tuple(files.class_names) == det.NAMES
    real = labels >= 0
    np.testing.assert_array_equal(y["labels"][real], labels[real])
    np.testing.assert_allclose(y["boxes"][real], boxes[real], atol=1e-6)
    with shmaug.Sequence(files, y, batch_size=16, augment=det.augmentation(), workers=2,
                         seed=0, shuffle=True) as train:
        history = fit_detector(det, train)
    assert np.isfinite(history.history["loss"]).all()
