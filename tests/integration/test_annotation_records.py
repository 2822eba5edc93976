"""Detection sets in record shards through the engine: the boxes that
``from_tf_object_detection`` and ``from_huggingface_detection`` read move with their images in
the workers, which read the images from the shards, and still frame the rectangle each image
holds after the resize to ``image_size`` and the augmentation; 0 and 2 workers give the same
batches bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, Op
from shmaug.sources.annotations.hf_objects import from_huggingface_detection
from shmaug.sources.annotations.tf_od import from_tf_object_detection
from tests import annotation_records_data as D
from tests.annotations_data import framed

pytestmark = pytest.mark.timeout(180)

# One rectangle per image (even edges: halving the image keeps them on whole pixels), in
# images of two sizes stretched to one image_size, and an image without a box.
RNG = np.random.default_rng(1)
ONE_BOX = [(64 if i % 2 else 48, 48, [(2 * int(RNG.integers(4, 8)), 2 * int(RNG.integers(4, 8)),
                                       2 * int(RNG.integers(4, 8)), 2 * int(RNG.integers(3, 7)),
                                       1 + i % 3, 0, 0)]) for i in range(10)] + [(40, 40, [])]
SIZE = (24, 32)
AUGMENT = Compose([Maybe(Op("hflip")), Op("translation", height_factor=0.1, width_factor=0.1,
                                          border="constant")], bounding_box_format="xyxy")


def batches(records, y, workers: int) -> list:
    with shmaug.Loader(records, y, batch_size=4, augment=AUGMENT, workers=workers, seed=3,
                       shuffle=True) as loader:
        return list(loader)


def check(records, y) -> None:
    """The pooled batches are the lone process's, and each box frames its rectangle."""
    assert len(records) == len(ONE_BOX) - 1 and records.class_names == tuple(D.NAMES)
    alone, pooled = batches(records, y, 0), batches(records, y, 2)
    assert len(alone) == len(pooled) == 3
    for (xa, ya), (xb, yb) in zip(alone, pooled):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya["boxes"], yb["boxes"])
        np.testing.assert_array_equal(ya["labels"], yb["labels"])
        assert xb.shape[1:3] == SIZE
        for image, box, label in zip(xb, yb["boxes"], yb["labels"]):
            assert label[0] >= 0 and framed(image, box[0], slack=2.0), (box, label)
    moved = np.concatenate([yb["boxes"] for _, yb in pooled])
    assert not np.isin(moved, y["boxes"]).all()  # the augmentation moved some


def test_od_tfrecord_boxes_move_with_their_images(tmp_path):
    pytest.importorskip("tensorflow")
    paths = D.write_od(tmp_path / "od", ONE_BOX, shards=3)
    check(*from_tf_object_detection(paths, image_size=SIZE, keep_empty=False))


def test_huggingface_objects_move_with_their_images(tmp_path):
    pytest.importorskip("datasets")
    ds = D.hf_on_disk(tmp_path / "hf", D.hf_dataset(ONE_BOX, layout="list"))
    check(*from_huggingface_detection(ds, image_size=SIZE, keep_empty=False))
