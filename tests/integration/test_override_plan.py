"""A ``Sequence`` subclass's ``augment`` override that calls ``super().augment`` keeps the plan
of the ``augment`` argument (issue 57): the value range bound into it, the decode-time crop
(the override receives the photo undecoded) and the targets it moves, under fork and spawn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Maybe, Op
from tests._helpers import assert_same_batches, needs_keras
from tests.unit.test_windows import photo

pytest.importorskip("keras")  # (the subclasses below are Sequences)
from tests.integration import _override_seq as subclasses  # noqa: E402

pytestmark = [needs_keras, pytest.mark.timeout(240)]


def _batches(seq: shmaug.Sequence) -> list:
    try:
        return [tuple(np.array(part) if not isinstance(part, dict) else
                      {k: np.array(v) for k, v in part.items()} for part in seq[i])
                for i in range(len(seq))]
    finally:
        seq.close()


def _float_pipeline() -> Compose:
    return Compose([Op("rotate", degrees=20), Op("brightness_contrast"), Maybe(Op("hflip"))])


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_super_augment_runs_the_argument_with_the_value_range_bound(start_method) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (12, 24, 24, 3)).astype(np.float32)  # floats in [0, 255]
    y = np.arange(12)
    kwargs = {"batch_size": 4, "augment": _float_pipeline(), "seed": 3, "value_range": (0, 255)}
    expected = _batches(shmaug.Sequence(x, y, workers=0, **kwargs))
    got = _batches(subclasses.Through(x, y, workers=2, start_method=start_method, **kwargs))
    assert_same_batches(got, expected)


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import cv2

    root = tmp_path_factory.mktemp("photos")
    for i in range(6):
        (root / ("ab"[i % 2])).mkdir(exist_ok=True)
        cv2.imwrite(str(root / "ab"[i % 2] / f"{i}.jpg"), photo(150 + 10 * i, 200, i)[..., ::-1])
    return root


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_an_override_keeps_the_decode_time_crop(photos, start_method) -> None:
    files = shmaug.ImageFiles.from_directory(photos, image_size=None)
    augment = Compose([Op("random_resized_crop", height=32, width=32), Maybe(Op("hflip"))])
    kwargs = {"batch_size": 3, "augment": augment, "seed": 5}
    expected = _batches(shmaug.Sequence(files, files.labels, workers=0, **kwargs))
    seq = subclasses.Undecoded(files, files.labels, workers=2, start_method=start_method,
                               **kwargs)
    got = _batches(seq)
    assert_same_batches(got, expected)
    assert seq.stats()["whole_decodes"] == {}


def _scenes(n: int = 8, size: int = 32) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(2)
    x = np.zeros((n, size, size, 3), np.uint8)
    boxes = np.full((n, 2, 4), -1, np.float32)
    labels = np.full((n, 2), -1, np.int64)
    for i in range(n):
        for j in range(2):
            x0, y0 = (int(v) for v in rng.integers(0, size - 10, 2))
            x[i, y0:y0 + 8, x0:x0 + 8] = 10 * (i + 1) + j
            boxes[i, j], labels[i, j] = (x0, y0, x0 + 8, y0 + 8), j
    return x, {"boxes": boxes, "labels": labels, "segmentation_masks": x[..., :1].copy()}


def test_an_override_moves_boxes_and_masks_as_the_pipeline_does() -> None:
    x, y = _scenes()
    augment = Compose([Maybe(Op("hflip")), Op("rotate", degrees=30)],
                      bounding_box_format="xyxy")
    kwargs = {"batch_size": 4, "augment": augment, "seed": 1, "workers": 2}
    expected = _batches(shmaug.Sequence(x, y, **kwargs))
    got = _batches(subclasses.Inverted(x, y, **kwargs))
    for (xa, ya), (xb, yb) in zip(got, expected):
        np.testing.assert_array_equal(xa, 255 - xb)
        for name in yb:
            np.testing.assert_array_equal(ya[name], yb[name])


def test_an_override_reading_the_pixels_itself_is_a_counted_whole_decode(photos) -> None:
    files = shmaug.ImageFiles.from_directory(photos, image_size=None)
    augment = Compose([Op("random_resized_crop", height=32, width=32)])
    seq = subclasses.Reading(files, files.labels, batch_size=3, augment=augment, seed=5,
                             workers=0)
    try:
        for i in range(len(seq)):
            seq[i]
        assert seq.stats()["whole_decodes"] == {"override": 6}
    finally:
        seq.close()
