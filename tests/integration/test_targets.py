"""Targets that move with their images are bit-identical for any worker count and start
method, like the images: a sample's masks, boxes and keypoints are a function of (seed, epoch,
sample index) and the pipeline. Also under a source's ``load`` (targets in y, images made in
the workers)."""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, OneOf, Op

pytestmark = pytest.mark.timeout(180)

N, SIDE = 24, 32


def dataset():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, (N, SIDE, SIDE, 3), dtype=np.uint8)
    boxes = np.full((N, 3, 4), -1, np.float32)
    boxes[:, 0] = [4, 5, 20, 18]
    boxes[::2, 1] = [10, 2, 30, 12]
    labels = np.where(boxes[:, :, 0] >= 0, np.arange(3), -1)
    masks = (rng.random((N, SIDE, SIDE, 1)) < 0.3).astype(np.uint8)
    points = np.array([[[8.0, 8.0], [30.0, 30.0]]] * N, np.float32)
    return x, {"bounding_boxes": {"boxes": boxes, "labels": labels},
               "segmentation_masks": masks, "keypoints": points}


PIPE = Compose([Maybe(Op("hflip")), OneOf([Op("rotate"), Op("elastic"), Op("sine_warp")]),
                Op("zoom", height_factor=0.3), Op("gamma")],
               bounding_box_format="xyxy", keypoint_format="xy", min_visibility=0.2)


def epoch(workers: int, start_method: str | None) -> list:
    x, y = dataset()
    with shmaug.Loader(x, y, batch_size=8, augment=PIPE, workers=workers, seed=7,
                       shuffle=True, start_method=start_method) as loader:
        return list(loader) + list(loader)  # two epochs


def flat(batches: list) -> list[np.ndarray]:
    out = []
    for xb, yb in batches:
        out += [xb, yb["bounding_boxes"]["boxes"], yb["bounding_boxes"]["labels"],
                yb["segmentation_masks"], yb["keypoints"]]
    return out


def test_targets_are_bit_identical_for_any_workers_and_start_method():
    reference = flat(epoch(0, None))
    for workers, method in ((2, "fork"), (2, "spawn")):
        for got, want in zip(flat(epoch(workers, method)), reference):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{workers} {method}")
    boxes = reference[1]
    assert (boxes != dataset()[1]["bounding_boxes"]["boxes"][:8]).any()  # they did move


def test_a_mask_stays_on_its_image_in_the_workers():
    x = np.zeros((N, SIDE, SIDE), np.uint8)
    x[:, 8:20, 6:24] = 200
    mask = (x > 0).astype(np.uint8)
    with shmaug.Loader(x, {"mask": mask}, batch_size=N, workers=2, seed=1,
                       augment=Compose([Op("rotate", degrees=(-30, 30)), Op("elastic")])) as L:
        xb, yb = L.batch(0)
    assert ((xb > 100) ^ (yb["mask"] > 0)).mean() < 0.02


@pytest.mark.parametrize("workers", [0, 2])
def test_a_class_label_per_sample_reaches_an_augment_that_declares_it(workers):
    """A label of one number a sample, `y={"label": y}` of shape (n,), failed in the worker
    ("'numpy.int64' object does not support item assignment", writing the output)."""
    from tests import _ops

    x, _ = dataset()
    y = np.arange(N) % 3
    with shmaug.Loader(x, {"label": y}, batch_size=8, augment=_ops.FlipsByLabel(),
                       workers=workers, seed=0) as loader:
        got = [(xb.copy(), yb["label"].copy()) for xb, yb in loader]
    images = np.concatenate([xb for xb, _ in got])
    labels = np.concatenate([yb for _, yb in got])
    assert np.array_equal(labels, y)
    flipped = np.where((y != 0)[:, None, None, None], x[:, :, ::-1], x)
    assert np.array_equal(images, flipped)
