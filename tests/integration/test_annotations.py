"""COCO and VOC sets through the engine: the boxes that ``from_coco`` / ``from_voc`` read
move with their images in the workers, and still frame the rectangle each image holds after
the resize to ``image_size`` and the augmentation; the batches are the same for any worker
count, as for any ``y``."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.ops import Compose, Maybe, Op
from shmaug.sources import from_coco, from_segmentation, from_voc
from tests._helpers import needs_keras
from tests.annotations_data import add_polygons, framed, write_coco, write_voc

pytestmark = pytest.mark.timeout(180)

# One rectangle per image (even edges: halving the image keeps them on whole pixels), in
# images of two sizes stretched to one image_size.
RNG = np.random.default_rng(0)
ONE_BOX = [(f"{i}.png", 64 if i % 2 else 48, 48, [(2 * int(RNG.integers(4, 8)),
            2 * int(RNG.integers(4, 8)), 2 * int(RNG.integers(4, 8)),
            2 * int(RNG.integers(3, 7)), 1 + i % 2, 0)]) for i in range(12)]
CATEGORIES = [{"id": 1, "name": "square"}, {"id": 2, "name": "slab"}]
SIZE = (24, 32)
AUGMENT = Compose([Maybe(Op("hflip")), Op("translation", height_factor=0.1, width_factor=0.1,
                                          border="constant")], bounding_box_format="xyxy")


def check_framed(xb: np.ndarray, boxes: np.ndarray, labels: np.ndarray) -> None:
    assert xb.shape[1:3] == SIZE
    for image, box, label in zip(xb, boxes, labels):
        assert label[0] >= 0 and framed(image, box[0], slack=2.0), (box, label)


def batches(files, y, workers: int) -> list:
    with shmaug.Loader(files, y, batch_size=4, augment=AUGMENT, workers=workers, seed=3,
                       shuffle=True) as loader:
        return list(loader)


def test_coco_boxes_move_with_their_images_for_any_worker_count(tmp_path):
    files, y = from_coco(*write_coco(tmp_path, ONE_BOX, CATEGORIES), image_size=SIZE)
    alone, pooled = batches(files, y, 0), batches(files, y, 2)
    for (xa, ya), (xb, yb) in zip(alone, pooled):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya["boxes"], yb["boxes"])
        np.testing.assert_array_equal(ya["labels"], yb["labels"])
        check_framed(xb, yb["boxes"], yb["labels"])
    moved = np.concatenate([yb["boxes"] for _, yb in pooled])
    assert len(moved) == len(ONE_BOX) and not np.isin(moved, y["boxes"]).all()


@needs_keras
def test_a_voc_set_feeds_a_sequence_with_its_boxes(tmp_path):
    entries = [(f"{i}", width, height, [("slab" if label == 2 else "square", x + 1, y + 1,
                                         x + w, y + h, 0)])
               for i, (_, width, height, [(x, y, w, h, label, _)]) in enumerate(ONE_BOX)]
    files, y = from_voc(*write_voc(tmp_path, entries), image_size=SIZE)
    assert files.class_names == ("slab", "square")
    train = shmaug.Sequence(files, y, batch_size=4, augment=AUGMENT, workers=2, seed=0,
                            shuffle=True)
    try:
        seen = 0
        for i in range(len(train)):
            xb, yb = train[i]
            check_framed(np.asarray(xb), np.asarray(yb["boxes"]), np.asarray(yb["labels"]))
            seen += len(xb)
        assert seen == len(entries)
    finally:
        train.close()


def on_their_pixels(xb: np.ndarray, masks: np.ndarray) -> float:
    """The share of pixels where a mask (any of an image's, > 0) and a white pixel agree."""
    white = xb.max(-1) > 127
    covered = masks.reshape(len(xb), -1, *xb.shape[1:3]).max(1) > 0
    return float((white == covered).mean())


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_coco_masks_drawn_by_the_workers_move_with_their_images(tmp_path, start_method):
    json_path, folder = write_coco(tmp_path, ONE_BOX, CATEGORIES)
    add_polygons(json_path)
    files, y = from_coco(json_path, folder, image_size=SIZE, masks="instances")
    alone = batches(files, y, 0)
    with shmaug.Loader(files, y, batch_size=4, augment=AUGMENT, workers=2, seed=3,
                       shuffle=True, start_method=start_method) as loader:
        pooled = list(loader)
    for (xa, ya), (xb, yb) in zip(alone, pooled):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya["masks"], yb["masks"])
        assert yb["masks"].shape == (len(xb), 1, *SIZE) and yb["masks"].dtype == np.uint8
        assert on_their_pixels(xb, yb["masks"]) > 0.97
        check_framed(xb, yb["boxes"], yb["labels"])


def test_a_segmentation_folder_feeds_masks_that_move_with_their_images(tmp_path):
    for i, (name, width, height, [(x, y, w, h, label, _)]) in enumerate(ONE_BOX):
        for part in ("images", "masks"):
            (tmp_path / part).mkdir(exist_ok=True)
        pixels = np.zeros((height, width), np.uint8)
        pixels[y:y + h, x:x + w] = 255
        Image.fromarray(pixels).convert("RGB").save(tmp_path / "images" / f"{i}.png")
        Image.fromarray((pixels > 0).astype(np.uint8) * label).save(
            tmp_path / "masks" / f"{i}.png")
    files, y = from_segmentation(tmp_path / "images", tmp_path / "masks", image_size=SIZE)
    augment = Compose([Maybe(Op("hflip")), Op("rotate", degrees=(-20, 20), border="constant")])
    made = []
    for workers in (0, 2):
        with shmaug.Loader(files, y, batch_size=4, augment=augment, workers=workers, seed=1,
                           shuffle=True) as loader:
            made.append(list(loader))
    for (xa, ya), (xb, yb) in zip(*made):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya["segmentation_masks"], yb["segmentation_masks"])
        masks = yb["segmentation_masks"]
        assert masks.shape == (len(xb), *SIZE, 1) and set(np.unique(masks)) <= {0, 1, 2}
        assert on_their_pixels(xb, masks[..., 0]) > 0.97


def test_a_segmentation_folder_of_16_bit_scans_keeps_them_at_16_bits(tmp_path):
    # X-rays as 16-bit grey PNGs came back as uint8 RGB: `dtype` was not an argument.
    for part in ("images", "masks"):
        (tmp_path / part).mkdir()
    scans = np.random.default_rng(0).integers(0, 65536, (3, 12, 16), dtype=np.uint16)
    for i, scan in enumerate(scans):
        Image.fromarray(scan).save(tmp_path / "images" / f"{i}.png")
        Image.fromarray((scan > 30000).astype(np.uint8)).save(tmp_path / "masks" / f"{i}.png")
    files, y = from_segmentation(tmp_path / "images", tmp_path / "masks", image_size=(12, 16),
                                 color_mode="grayscale", dtype="uint16")
    with shmaug.Loader(files, y, batch_size=3, workers=0, shuffle=False) as loader:
        xb, yb = next(iter(loader))
    np.testing.assert_array_equal(xb[..., 0], scans)
    np.testing.assert_array_equal(yb["segmentation_masks"][..., 0], scans > 30000)


def test_a_mask_a_worker_cannot_read_is_an_error_naming_it_and_its_sample(tmp_path):
    """A mask file replaced after construction by a colour image: the worker's error reaches
    the caller with the file, the stage and the sample index, and nothing hangs or leaks."""
    for i in range(4):
        Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / f"{i}.png")
    masks = shmaug.sources.MaskFiles([tmp_path / f"{i}.png" for i in range(4)],
                                     image_size=(8, 8))
    colour = np.zeros((8, 8, 3), np.uint8)
    colour[1, 1] = (255, 0, 0)
    Image.fromarray(colour).save(tmp_path / "2.png")
    x = np.zeros((4, 8, 8, 3), np.uint8)
    with shmaug.Loader(x, {"segmentation_masks": masks}, batch_size=4, workers=2) as loader:
        with pytest.raises(shmaug.errors.ImageReadError,
                           match=r"(?s)2\.png' as a mask: it is a colour image.*MaskFiles\.load"
                                 r".*sample index 2"):
            loader.batch(0)


def test_a_target_source_of_the_users_own_is_made_and_moved_in_spawned_workers():
    from tests.annotations_data import StripeMasks

    n = 6
    x = np.zeros((n, 16, 16, 3), np.uint8)
    for i in range(n):
        x[i, :, :4 + i] = 255
    augment = Compose([Maybe(Op("hflip"))])
    made = []
    for workers, method in ((0, None), (2, "spawn")):
        with shmaug.Loader(x, {"segmentation_masks": StripeMasks(n)}, batch_size=3, seed=4,
                           augment=augment, workers=workers, start_method=method) as loader:
            made.append(list(loader))
    flipped = 0
    for (xa, ya), (xb, yb) in zip(*made):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya["segmentation_masks"], yb["segmentation_masks"])
        masks = yb["segmentation_masks"][..., 0]
        assert ((xb[..., 0] > 0) == (masks > 0)).all()  # each on its image, flipped or not
        flipped += int((masks[:, :, -1] > 0).all(axis=1).sum())
    assert 0 < flipped < n  # some flipped, some not: the masks moved


def test_a_target_source_drawing_from_the_globals_is_seeded_per_sample():
    """Legacy code in a target's load that calls np.random gets the per-sample seeding: the
    same draws for any worker count, and distinct ones across samples."""
    from tests.annotations_data import NoisyMasks

    x = np.zeros((8, 16, 16, 3), np.uint8)
    drawn = []
    for workers in (0, 2):
        with shmaug.Loader(x, {"segmentation_masks": NoisyMasks(8)}, batch_size=4, seed=1,
                           augment=Compose([Op("hflip")]), workers=workers) as loader:
            drawn.append(np.concatenate([yb["segmentation_masks"][:, 0, -1, 0]
                                         for _, yb in loader]))
    np.testing.assert_array_equal(drawn[0], drawn[1])
    assert len(set(drawn[0].tolist())) > 4


def test_an_unpicklable_target_source_is_named_before_spawned_workers_start():
    from tests.annotations_data import Unpicklable

    x = np.zeros((4, 16, 16, 3), np.uint8)
    with pytest.raises(shmaug.errors.NotPicklableError,
                       match=r"`y\['segmentation_masks'\]\.load` cannot be pickled.*lambda"):
        shmaug.Loader(x, {"segmentation_masks": Unpicklable(4)}, batch_size=2, workers=2,
                      start_method="spawn", augment=Compose([Op("hflip")]))


class _FetchingLoad:
    """A target's load that, as a bucket reader does, fetches a task's rows together first."""

    def __init__(self) -> None:
        self.fetched: list[list[int]] = []

    def prefetch(self, indices, ahead=None) -> None:
        self.fetched.append([int(i) for i in indices])

    def __call__(self, index: int) -> np.ndarray:
        return np.zeros((16, 16, 1), np.uint8)


class _FetchedMasks:
    def __init__(self) -> None:
        self.load = _FetchingLoad()

    def __len__(self) -> int:
        return 6


def test_a_target_sources_rows_are_fetched_together_before_they_are_made():
    """Masks in a bucket: the target load's prefetch hook gets each task's samples, as the
    image reader's does, so their round trips overlap instead of adding up."""
    masks = _FetchedMasks()
    with shmaug.Loader(np.zeros((6, 16, 16, 3), np.uint8), {"segmentation_masks": masks},
                       batch_size=3, workers=0, augment=Compose([Op("hflip")])) as loader:
        order = loader.indices(0)
        loader.batch(0)
    assert sorted(order.tolist()) in [sorted(f) for f in masks.load.fetched]
