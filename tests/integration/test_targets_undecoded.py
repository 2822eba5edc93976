"""Boxes and masks move with a photo cropped at decode time, which stays undecoded but for its
window (issue 57): ``from_coco(..., image_size=None)`` with ``random_resized_crop`` and a flip
decodes no photo whole, gives the boxes and masks a whole decode then crop gives (exactly: the
window is drawn on the header's size either way), the images within the decode-time crop's
stated tolerance, and the same batches for 0 and 2 workers."""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, Op
from shmaug.sources import from_coco
from tests._helpers import assert_same_batches
from tests.annotations_data import add_polygons, write_coco
from tests.unit.test_windows import PARTIAL_TOLERANCE

pytestmark = pytest.mark.timeout(180)
# JPEGs of several sizes, two boxes each: (name, width, height, [(x, y, w, h, class, crowd)])
JPEGS = [(f"{i}.jpg", 120 + 16 * i, 90 + 10 * i,
          [(10 + i, 8, 40, 30, 1, 0), (60, 40 + i, 30, 35, 5, 0)]) for i in range(6)]


@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    json_path, folder = write_coco(tmp_path_factory.mktemp("coco"), JPEGS)
    add_polygons(json_path)
    return json_path, folder


def _epoch(coco, **kwargs) -> tuple[list, dict]:
    files, y = from_coco(*coco, image_size=None, masks="instances")
    augment = Compose([Op("random_resized_crop", height=40, width=40, scale=(0.3, 1.0)),
                       Maybe(Op("hflip"))], bounding_box_format="xyxy")
    with shmaug.Loader(files, y, batch_size=3, augment=augment, seed=4, **kwargs) as loader:
        batches = [(xb.copy(), {k: np.array(v) for k, v in yb.items()}) for xb, yb in loader]
        return batches, loader.stats()


def _flat(batches: list) -> list:
    return [(xb, np.concatenate([yb[k].reshape(len(xb), -1) for k in sorted(yb)], axis=1))
            for xb, yb in batches]


def test_the_window_alone_is_decoded_and_workers_agree(coco) -> None:
    inline, stats = _epoch(coco, workers=0)
    assert stats["whole_decodes"] == {}
    images, targets = inline[0]
    assert images.shape == (3, 40, 40, 3) and targets["masks"].shape[-2:] == (40, 40)
    assert (targets["labels"] >= 0).any()
    workers, stats = _epoch(coco, workers=2)
    assert stats["whole_decodes"] == {}
    assert_same_batches(_flat(workers), _flat(inline))


def test_boxes_and_masks_equal_a_whole_decode_then_crop(coco, monkeypatch) -> None:
    window, _ = _epoch(coco, workers=0)
    monkeypatch.setenv("SHMAUG_JPEG", "whole")  # every pixel decoded, then cut
    whole, _ = _epoch(coco, workers=0)
    for (a, ya), (b, yb) in zip(window, whole):
        for name in yb:  # the same window, drawn on the same size: the same moves
            np.testing.assert_array_equal(ya[name], yb[name])
        diff = np.abs(a.astype(int) - b.astype(int)).mean()
        assert diff <= PARTIAL_TOLERANCE["reduced scale"], diff
    # the boxes still frame their white rectangles
    images, targets = window[0]
    for image, boxes, labels in zip(images, targets["boxes"], targets["labels"]):
        for (x0, y0, x1, y1), label in zip(boxes, labels):
            if label >= 0 and x1 - x0 > 4 and y1 - y0 > 4:
                inner = image[int(y0) + 2:int(y1) - 2, int(x0) + 2:int(x1) - 2]
                assert inner.mean() > 200, (x0, y0, x1, y1)
