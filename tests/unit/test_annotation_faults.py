"""Detection and segmentation faults that gave wrong results silently (issue 60): each is
refused with its fix, or now gives the right answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shmaug.errors import ArgumentError, ArgumentTypeError
from shmaug.ops import Compose, Maybe, Op
from shmaug.sources import from_coco
from tests.annotations_data import write_coco


def test_min_visibility_range_is_refused_not_cut() -> None:
    with pytest.raises(ArgumentTypeError, match=r"one number, not a range.*min_visibility=0.2"):
        Compose([Op("hflip")], min_visibility=(0.2, 0.9))
    with pytest.raises(ArgumentTypeError, match="not a range"):
        Maybe(Op("hflip"), p=(0.2, 0.9))


@pytest.mark.parametrize("value, fix", [(1.5, "min_visibility=1.0"),
                                        (-0.2, "min_visibility=0.0")])
def test_min_visibility_out_of_range_suggests_a_valid_value(value: float, fix: str) -> None:
    with pytest.raises(ArgumentError, match=f"e.g. {fix}\\."):
        Compose([Op("hflip")], min_visibility=value)
    Compose([Op("hflip")], min_visibility=float(fix.split("=")[1]))  # the fix works


def test_range_error_suggests_a_range_inside_the_limits() -> None:
    from shmaug.ops.params import bounds
    with pytest.raises(ArgumentError, match=r"e.g. x=\(0.5, 1.0\)"):
        bounds((0.5, 1.5), "x", 0.0, 1.0)


# -- COCO polygons: pycocotools' raster ------------------------------------------------------


def _random_polygons(rng: np.random.Generator, width: int, height: int, count: int
                     ) -> list[list[float]]:
    """Star-shaped, scattered (self-crossing) and on-the-grid polygons, some past the
    image's edge or with a repeated point: what real annotations hold."""
    out = []
    for i in range(count):
        n = int(rng.integers(3, 12))
        if i % 3 == 0:
            points = rng.uniform(-4, [width + 4, height + 4], (n, 2))
        elif i % 3 == 1:
            centre, angle = rng.uniform(0, [width, height]), np.sort(rng.uniform(0, 6.28, n))
            points = centre + np.c_[np.cos(angle), np.sin(angle)] * rng.uniform(1, 20, (n, 1))
        else:
            points = np.round(rng.uniform(0, [width, height], (n, 2)))
        if i % 5 == 0:
            points = np.concatenate([points, points[-1:]])
        out.append([round(float(v), 2) for v in points.reshape(-1)])
    return out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (pycocotools' own, numpy 2)
def test_polygon_masks_equal_pycocotools_ann_to_mask(tmp_path) -> None:
    from pycocotools.coco import COCO  # the reference (the `test` extra), never a dependency

    rng = np.random.default_rng(60)
    sizes = [(57, 41), (80, 64), (33, 90)]
    images = [(f"{i}.png", w, h, [(0, 0, 1, 1, 1, 0)] * 40) for i, (w, h) in enumerate(sizes)]
    json_path, folder = write_coco(tmp_path, images, [{"id": 1, "name": "thing"}])
    data = json.loads(json_path.read_text())
    for ann in data["annotations"]:
        _, w, h, _ = images[ann["image_id"] - 10]
        ann["segmentation"] = _random_polygons(rng, w, h, 2 if ann["id"] % 4 == 0 else 1)
        ann["bbox"] = [1, 1, 2, 2]
    data["annotations"].append({"id": 999, "image_id": 10, "category_id": 1, "iscrowd": 0,
                                "bbox": [2.3, 2.3, 5, 5], "area": 25,
                                "segmentation": [[2.3, 2.3, 7.3, 2.3, 7.3, 7.3, 2.3, 7.3]]})
    json_path.write_text(json.dumps(data))
    files, y = from_coco(json_path, folder, image_size=None, masks="instances",
                         max_boxes=41)
    reference = COCO(str(json_path))
    drawn = [y["masks"].load(i) for i in range(len(images))]
    row = {0: 0, 1: 0, 2: 0}
    compared = 0
    for ann in data["annotations"]:
        image = ann["image_id"] - 10
        ours, theirs = drawn[image][row[image]], reference.annToMask(ann)
        row[image] += 1
        np.testing.assert_array_equal(ours, theirs, err_msg=str(ann["segmentation"]))
        compared += 1
    assert compared == 121 and drawn[0][40].sum() == 25  # the 5x5 square: 25 px


# -- COCO RLEs of another size ---------------------------------------------------------------


def test_an_rle_of_another_size_than_its_image_is_refused_naming_it(tmp_path) -> None:
    from tests.unit.test_masks_sources import coco_with_masks

    json_path, folder = coco_with_masks(tmp_path)  # annotation 3: b.png's RLE, 7x9
    data = json.loads(json_path.read_text())
    data["annotations"][2]["segmentation"]["size"] = [9, 7]  # [w, h] for [h, w]
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 3 has an RLE of size \[9, 7\], but its "
                                            r"image is 7x9 .*swapped"):
        from_coco(json_path, folder, image_size=None, masks="instances")


def test_an_rle_whose_counts_miss_its_size_is_refused_naming_it(tmp_path) -> None:
    from tests.unit.test_masks_sources import coco_with_masks

    json_path, folder = coco_with_masks(tmp_path)
    data = json.loads(json_path.read_text())
    data["annotations"][2]["segmentation"]["counts"] = [10, 5, 20]  # 35 of 63 pixels
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 3 has an RLE whose counts add up to "
                                            r"35 pixels, but its size \[7, 9\] holds 63"):
        from_coco(json_path, folder, image_size=None, masks="semantic")
    data["annotations"][2]["segmentation"]["counts"] = "6160K30M030M0"  # a string, cut short
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 3 has an RLE whose counts add up"):
        from_coco(json_path, folder, image_size=None, masks="instances")


# -- MaskFiles beside its images -------------------------------------------------------------


def test_mask_files_of_another_size_than_their_images_are_refused_naming_both(tmp_path) -> None:
    import shmaug
    from PIL import Image
    from shmaug.sources import MaskFiles

    Image.fromarray(np.zeros((48, 64, 3), np.uint8)).save(tmp_path / "image.png")
    Image.fromarray(np.zeros((24, 32), np.uint8)).save(tmp_path / "mask.png")
    Image.fromarray(np.zeros((48, 64), np.uint8)).save(tmp_path / "good.png")
    files = shmaug.ImageFiles.from_paths([tmp_path / "image.png"] * 2, image_size=(32, 32))
    masks = MaskFiles([tmp_path / "good.png", tmp_path / "mask.png"], image_size=(32, 32))
    with pytest.raises(ArgumentError, match=r"mask .*mask.png' is 32x24 .* its image "
                                            r".*image.png' is 64x48.*check_sizes=False"):
        shmaug.Loader(files, {"segmentation_masks": masks}, batch_size=2, workers=0)
    unchecked = MaskFiles(masks.paths, image_size=(32, 32), check_sizes=False)  # on purpose
    with shmaug.Loader(files, {"segmentation_masks": unchecked}, batch_size=2,
                       workers=0) as loader:
        assert loader.batch(0)[1]["segmentation_masks"].shape == (2, 32, 32, 1)


# -- COCO's width and height, checked by default ---------------------------------------------


def test_coco_sizes_are_checked_against_the_files_by_default(tmp_path) -> None:
    json_path, folder = write_coco(tmp_path)
    data = json.loads(json_path.read_text())
    data["images"][0]["width"], data["images"][0]["height"] = 40, 60  # a.png is 60x40
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"image id 10 gives the image .*a.png' a size of "
                                            r"40x60 .*file is 60x40.*check_sizes=False"):
        from_coco(json_path, folder, image_size=(32, 32))
    files, y = from_coco(json_path, folder, image_size=(32, 32), check_sizes=False)  # trusted
    assert len(files) == 3


# -- from_segmentation's split, as from_voc's ------------------------------------------------


def test_from_segmentation_takes_a_split_like_from_voc(tmp_path) -> None:
    from PIL import Image
    from shmaug.sources import from_segmentation
    from tests.unit.test_masks_sources import write_pairs

    images, masks = write_pairs(tmp_path, ["0001", "0002", "0003"])
    Image.fromarray(np.zeros((12, 16, 3), np.uint8)).save(images / "0009.jpg")  # no mask
    split = tmp_path / "train.txt"
    split.write_text("0003\n0001\n")
    files, y = from_segmentation(images, masks, ids=split, image_size=None)
    assert [p.rsplit("/", 1)[1] for p in files.paths] == ["0003.jpg", "0001.jpg"]
    assert [p.rsplit("/", 1)[1] for p in y["segmentation_masks"].paths] == ["0003.png",
                                                                            "0001.png"]
    files, _ = from_segmentation(images, masks, ids=["0002"], image_size=None)
    assert len(files) == 1  # train and val apart: never each other's
    with pytest.raises(ArgumentError, match=r"1 id\(s\) of `ids` have no mask .*'0009'"):
        from_segmentation(images, masks, ids=["0001", "0009"])
    with pytest.raises(ArgumentError, match=r"have no image .*'0404'.*unpaired='drop'"):
        from_segmentation(images, masks, ids=["0404"])
    files, _ = from_segmentation(images, masks, ids=["0001", "0009"], unpaired="drop")
    assert len(files) == 1


# -- boxes wholly outside their image --------------------------------------------------------


def test_boxes_wholly_outside_their_image_are_counted_once(tmp_path, caplog) -> None:
    import logging

    images = [("a.png", 60, 40, [(10, 5, 20, 10, 1, 0), (70, 5, 10, 10, 1, 0),
                                 (5, 45, 10, 10, 1, 0)]),
              ("b.png", 50, 50, [(0, 0, 0, 10, 1, 0), (60, 60, 5, 5, 1, 0)])]
    json_path, folder = write_coco(tmp_path, images, [{"id": 1, "name": "thing"}])
    with caplog.at_level(logging.WARNING, logger="shmaug"):
        files, y = from_coco(json_path, folder, image_size=None)
    said = [r.getMessage() for r in caplog.records if "wholly outside" in r.getMessage()]
    assert len(said) == 1  # once, for the whole file
    assert "dropped 3 box(es) of 5" in said[0] and "(70.0, 5.0, 80.0, 15.0)" in said[0]
    assert "image id 10" in said[0] and "60x40" in said[0]
    assert (y["labels"] >= 0).sum(1).tolist() == [1, 0]  # (the zero-width one: not said)


# -- a box format that disagrees between source and pipeline ---------------------------------


@pytest.mark.parametrize("ours, theirs", [("xyxy", "rel_xyxy"), ("rel_xyxy", "xyxy")])
def test_a_file_source_box_format_other_than_the_pipelines_is_refused(tmp_path, ours: str,
                                                                      theirs: str) -> None:
    import shmaug

    json_path, folder = write_coco(tmp_path)
    for size in ((32, 32), None):
        files, y = from_coco(json_path, folder, image_size=size, bounding_box_format=ours)
        aug = Compose([Maybe(Op("hflip")), Op("center_resized_crop", height=16, width=16)],
                      bounding_box_format=theirs)
        with pytest.raises(ArgumentError, match=f"bounding_box_format='{ours}' .*pipeline "
                                                f"reads boxes as bounding_box_format="
                                                f"'{theirs}'.*Fix: build the pipeline with "
                                                f"bounding_box_format='{ours}'"):
            shmaug.Loader(files, y, batch_size=3, workers=0, augment=aug)


def test_a_pipeline_without_a_box_format_takes_the_sources(tmp_path) -> None:
    import shmaug

    json_path, folder = write_coco(tmp_path)
    files, y = from_coco(json_path, folder, image_size=(32, 32), bounding_box_format="rel_xyxy")
    batches = []
    for fmt in (None, "rel_xyxy"):
        aug = Compose([Op("hflip")], bounding_box_format=fmt)
        with shmaug.Loader(files, y, batch_size=3, workers=0, augment=aug, seed=1) as loader:
            batches.append(loader.batch(0)[1]["boxes"])
    np.testing.assert_array_equal(batches[0], batches[1])
    real = batches[0][batches[0][..., 0] >= 0]
    assert len(real) and (real <= 1).all()  # flipped as fractions, none lost to padding


def test_numpy_results_of_carried_boxes_claim_no_format(tmp_path) -> None:
    import pickle

    from shmaug.ops.targets.boxes import Boxes, format_of

    json_path, folder = write_coco(tmp_path)
    _, y = from_coco(json_path, folder, image_size=(32, 32), bounding_box_format="xyxy")
    boxes = y["boxes"]
    assert isinstance(boxes, Boxes) and format_of(boxes) == "xyxy"
    assert "bounding_box_format='xyxy'" in repr(boxes)
    for made in (boxes / 32, boxes[..., [1, 0, 3, 2]], boxes[0], np.concatenate([boxes]),
                 boxes.astype(np.float64), np.maximum(boxes, 0)):
        assert format_of(made) is None  # numpy cannot know the format still holds
    assert format_of(boxes.copy()) == format_of(pickle.loads(pickle.dumps(boxes))) == "xyxy"
    held = y["boxes"]
    held /= 32  # in place: now fractions, and it says no format any more
    assert format_of(y["boxes"]) is None and type(held.copy()) is np.ndarray


@pytest.mark.parametrize("change", [
    lambda b: b.__setitem__((Ellipsis, slice(2, None)), b[..., 2:] - b[..., :2]),
    lambda b: np.clip(b, 0, 5, out=b),
    lambda b: np.copyto(b, b[..., ::-1]),
    lambda b: np.asarray(b).__setitem__(0, 7),  # through a plain view of it
], ids=["xywh in place", "clip out=", "copyto", "a view's write"])
def test_boxes_changed_in_place_by_any_means_claim_no_format(tmp_path, change) -> None:
    """``boxes[..., 2:] -= boxes[..., :2]`` (the usual conversion to xywh) kept claiming
    ``xyxy``: a pipeline naming ``xywh`` was refused, and one taking the boxes' own format
    moved every box as xyxy."""
    import pickle

    from shmaug.ops.targets.boxes import format_of

    json_path, folder = write_coco(tmp_path)
    boxes = from_coco(json_path, folder, image_size=(32, 32), bounding_box_format="xyxy")[1][
        "boxes"]
    change(boxes)
    assert format_of(boxes) is None
    assert format_of(pickle.loads(pickle.dumps(boxes))) is None
    boxes.bounding_box_format = "xywh"  # claimed again, for the values as they are now
    assert format_of(pickle.loads(pickle.dumps(boxes))) == format_of(boxes) == "xywh"


@pytest.mark.parametrize("mode, fmt, options", [
    ("RGB", "JPEG", {}), ("RGB", "JPEG", {"progressive": True}), ("L", "JPEG", {}),
    ("CMYK", "JPEG", {}), ("RGB", "JPEG", {"exif": b"Exif\0\0" + b"\0" * 3000}),
    ("P", "PNG", {}), ("I;16", "PNG", {}), ("RGB", "BMP", {}), ("RGB", "WEBP", {})])
def test_a_header_read_without_pil_gives_pils_size(tmp_path, mode: str, fmt: str,
                                                   options: dict) -> None:
    """The check of every image reads PNG's and JPEG's headers itself (a few small reads,
    ~5x cheaper than PIL's open); any other format, or a JPEG it cannot walk, is PIL's."""
    from PIL import Image
    from shmaug.sources.images.decode import stored_size

    path = tmp_path / f"image.{fmt.lower()}"
    Image.new(mode, (123, 45)).save(path, fmt, **options)
    with Image.open(path) as image:
        assert stored_size(path) == (image.height, image.width) == (45, 123)


def test_an_albumentations_pipeline_is_checked_against_the_boxes_format(tmp_path) -> None:
    A = pytest.importorskip("albumentations")
    import shmaug
    from shmaug.ops import from_albumentations

    json_path, folder = write_coco(tmp_path)
    files, y = from_coco(json_path, folder, image_size=(32, 32), bounding_box_format="xyxy")
    y = {"bboxes": y["boxes"], "labels": y["labels"]}  # albumentations' name, its format kept

    def pipeline(fmt: str):
        return from_albumentations(A.Compose([A.HorizontalFlip(p=1.0)], bbox_params=A.BboxParams(
            format=fmt, label_fields=["labels"])))

    with pytest.raises(ArgumentError, match=r"bounding_box_format='xyxy' .* reads boxes as "
                                            r"bounding_box_format='xywh'.*Fix: pass "
                                            r"A.BboxParams\(format='pascal_voc'\)"):
        shmaug.Loader(files, y, batch_size=3, workers=0, augment=pipeline("coco"))
    with shmaug.Loader(files, y, batch_size=3, workers=0, augment=pipeline("pascal_voc")) as loader:
        np.testing.assert_allclose(loader.batch(0)[1]["bboxes"][0, 0], [16, 4, 32 - 16 / 3, 12],
                                   rtol=1e-6)
