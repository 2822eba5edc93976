"""COCO JSON and Pascal VOC XML read into ``(files, y)``: boxes in Keras' layout, scaled to
``image_size``, in the format asked, padded with -1; the filters; and a clear error at
construction for each kind of bad input, naming the file and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shmaug.errors import ArgumentError, ShmaugWarning
from shmaug.ops.targets.formats import BOX_FORMATS, to_xyxy
from shmaug.sources import from_coco, from_voc
from tests.annotations_data import IMAGES, write_coco, write_voc


@pytest.fixture
def coco(tmp_path):
    return write_coco(tmp_path)


@pytest.fixture
def voc(tmp_path):
    return write_voc(tmp_path)


def test_coco_pixels_classes_crowd_and_padding(coco):
    files, y = from_coco(*coco, image_size=None)
    assert [p.rsplit("/", 1)[1] for p in files.paths] == ["a.png", "b.jpg", "c.png"]
    assert files.class_names == ("person", "cat", "zebra")  # by category id: 1, 5, 90
    assert files.labels is None and files.image_size is None
    assert y["boxes"].dtype == np.float32 and y["boxes"].shape == (3, 2, 4)
    np.testing.assert_array_equal(y["boxes"][0], [[10, 5, 30, 15], [-1, -1, -1, -1]])
    np.testing.assert_array_equal(y["boxes"][1], [[0, 0, 10, 20], [30, 30, 50, 50]])
    assert (y["boxes"][2] == -1).all()  # kept, without a box
    assert y["labels"].tolist() == [[1, -1], [0, 2], [-1, -1]]


def test_coco_boxes_are_scaled_to_image_size(coco):
    files, y = from_coco(*coco, image_size=(20, 30))
    np.testing.assert_allclose(y["boxes"][0, 0], [5, 2.5, 15, 7.5])  # 60x40 -> 30x20
    np.testing.assert_allclose(y["boxes"][1, 1], [18, 12, 30, 20])  # 50x50 -> 30x20
    assert files.image_size == (20, 30)


@pytest.mark.parametrize("fmt", BOX_FORMATS)
def test_every_keras_format_reads_back_as_the_same_boxes(coco, fmt):
    _, pixels = from_coco(*coco, image_size=(20, 30))
    _, y = from_coco(*coco, image_size=(20, 30), bounding_box_format=fmt)
    real = pixels["labels"] >= 0
    assert (y["boxes"][~real] == -1).all()
    np.testing.assert_allclose(to_xyxy(y["boxes"][real], fmt, 20, 30), pixels["boxes"][real],
                               atol=1e-5)


def test_the_fix_for_a_resize_keeping_the_aspect_moves_the_boxes(coco):
    """What the refusal below offers: the resize in `augment`, which moves the boxes."""
    import shmaug
    from shmaug.ops import Compose, Op

    files, y = from_coco(*coco, image_size=None)
    augment = Compose([Op("resize", height=30, width=30, pad_to_aspect_ratio=True)],
                      bounding_box_format="xyxy")
    with shmaug.Loader(files, y, batch_size=3, augment=augment, workers=0, seed=0) as loader:
        images, moved = loader.batch(0)
    assert images.shape[1:3] == (30, 30)
    # a.png, 60x40, fits as 30x20 from row 5: its box [10, 5, 30, 15] halves, 5 rows down
    np.testing.assert_allclose(moved["boxes"][0, 0], [5, 7.5, 15, 12.5], atol=1e-4)
    assert (moved["boxes"][0, 1] == -1).all() and (moved["boxes"][2] == -1).all()


def test_coco_filters_and_max_boxes(coco):
    _, y = from_coco(*coco, keep_crowd=True, image_size=None)
    assert y["boxes"].shape == (3, 3, 4) and y["labels"][1].tolist() == [0, 2, 1]
    files, y = from_coco(*coco, keep_empty=False, max_boxes=4)
    assert len(files) == 2 and y["boxes"].shape == (2, 4, 4)
    with pytest.raises(ArgumentError, match=r"max_boxes`=1.*2 in instances.json, image id 11"):
        from_coco(*coco, max_boxes=1)
    files, y = from_coco(*coco, class_names=["cat", "person", "zebra", "other"])
    assert files.class_names == ("cat", "person", "zebra", "other")
    assert y["labels"].tolist() == [[0, -1], [1, 2], [-1, -1]]


def test_coco_categories_sharing_a_name_keep_their_own_index(tmp_path):
    # merged or exported files repeat names; each id keeps its place in id order
    shared = [{"id": 90, "name": "person"}, {"id": 1, "name": "person"}, {"id": 5, "name": "cat"}]
    coco = write_coco(tmp_path, categories=shared)
    with pytest.warns(ShmaugWarning, match=r"share names \('person': ids \[1, 90\]\).*"
                                           r"each id keeps its own index"):
        files, y = from_coco(*coco)
    assert files.class_names == ("person", "cat", "person")
    assert y["labels"].tolist() == [[1, -1], [0, 2], [-1, -1]]
    files, y = from_coco(*coco, class_names=["person", "cat"])  # by name: both are person
    assert y["labels"].tolist() == [[1, -1], [0, 0], [-1, -1]]
    with pytest.raises(ArgumentError, match=r"`class_names` names 'cat' twice.*Fix: name each"
                                            r".*class_names=None for one index per category"):
        from_coco(*coco, class_names=["cat", "person", "cat"])


def test_a_keypoints_file_is_told_its_keypoints_are_not_read(tmp_path):
    """person_keypoints_*.json: boxes and labels came back, the keypoints dropped silently."""
    json_path, folder = write_coco(tmp_path)
    data = json.loads(json_path.read_text())
    for ann in data["annotations"]:
        ann.update(keypoints=[10, 12, 2] * 17, num_keypoints=17)
    json_path.write_text(json.dumps(data))
    with pytest.warns(ShmaugWarning, match=r"holds keypoints .* does not read.*v=0 joints set "
                                           r"to -1.*y=\{'keypoints': \.\.\.\}"):
        files, y = from_coco(json_path, folder)
    assert set(y) == {"boxes", "labels"}


def test_boxes_past_the_edge_are_clipped_and_empty_ones_dropped(tmp_path):
    images = [("a.png", 20, 10, [(-2, 1, 10, 4, 1, 0), (15, 2, 10, 20, 1, 0),
                                 (3, 3, 0, 5, 1, 0)])]
    _, y = from_coco(*write_coco(tmp_path, images), image_size=None)
    np.testing.assert_array_equal(y["boxes"][0], [[0, 1, 8, 5], [15, 2, 20, 10]])


def test_keep_empty_false_drops_images_whose_boxes_all_fell_outside(tmp_path):
    images = [("a.png", 20, 10, [(25, 1, 10, 4, 1, 0)]), ("b.png", 20, 10, [(1, 1, 5, 5, 1, 0)]),
              ("c.png", 20, 10, [])]
    files, y = from_coco(*write_coco(tmp_path, images), image_size=None, keep_empty=False)
    assert [p.rsplit("/", 1)[1] for p in files.paths] == ["b.png"]
    np.testing.assert_array_equal(y["boxes"], [[[1, 1, 6, 6]]])
    with pytest.raises(ArgumentError, match=r"no image to read \(2 annotated"):
        from_coco(*write_coco(tmp_path, images[::2]), keep_empty=False)


def test_a_size_missing_from_the_json_is_read_from_the_file(tmp_path):
    json_path, folder = write_coco(tmp_path)
    data = json.loads(json_path.read_text())
    del data["images"][0]["width"]
    data["images"][1]["width"] = 51  # wrong: trusted with check_sizes=False only
    json_path.write_text(json.dumps(data))
    _, y = from_coco(json_path, folder, image_size=(20, 30), check_sizes=False)
    np.testing.assert_allclose(y["boxes"][0, 0], [5, 2.5, 15, 7.5])
    with pytest.raises(ArgumentError, match=r"image id 11.*51x50.*file is 50x50"):
        from_coco(json_path, folder)


def test_coco_errors_name_the_file_and_the_fix(tmp_path):
    json_path, folder = write_coco(tmp_path)
    (folder / "b.jpg").unlink()
    with pytest.raises(ArgumentError, match=r"instances.json names 1 image file.*b\.jpg.*"
                                            r"image id 11.*Fix: pass `images`"):
        from_coco(json_path, folder)
    write_coco(tmp_path, categories=[c for c in json.loads(json_path.read_text())[
        "categories"] if c["id"] != 90])
    with pytest.raises(ArgumentError, match=r"instances.json: annotation 3 has category id "
                                            r"90, which `categories` does not define.*Fix"):
        from_coco(json_path, folder)
    write_coco(tmp_path)
    with pytest.raises(ArgumentError, match=r"category id 90 \('zebra'\).*Fix: add 'zebra'"):
        from_coco(json_path, folder, class_names=["person", "cat"])
    data = json.loads(json_path.read_text())
    data["annotations"][1]["image_id"] = 77
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 2 is of image id 77, which `images` "
                                            r"does not list.*Fix"):
        from_coco(json_path, folder)
    data["annotations"][1]["image_id"], data["annotations"][2]["bbox"] = 11, [1, 2, -3, 4]
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 3 has bbox \[1.0, 2.0, -3.0, 4.0\]"):
        from_coco(json_path, folder)
    data["annotations"][2]["bbox"] = [1, 2, 3]
    json_path.write_text(json.dumps(data))
    with pytest.raises(ArgumentError, match=r"annotation 3 has bbox \[1.0, 2.0, 3.0\], not"):
        from_coco(json_path, folder)
    json_path.write_text("{not json")
    with pytest.raises(ArgumentError, match=r"instances.json is not JSON.*Fix"):
        from_coco(json_path, folder)
    json_path.write_text(json.dumps({"images": []}))
    with pytest.raises(ArgumentError, match=r"no categories list"):
        from_coco(json_path, folder)


@pytest.mark.parametrize("setting", ["crop_to_aspect_ratio", "pad_to_aspect_ratio"])
def test_settings_the_boxes_cannot_follow_are_refused(coco, voc, setting):
    with pytest.raises(ArgumentError, match=rf"`{setting}=True`.*Fix: pass image_size=None .*"
                                            rf"Op\('resize', .*{setting}=True\).*leave"):
        from_coco(*coco, **{setting: True})
    with pytest.raises(ArgumentError, match=rf"`{setting}=True`"):
        from_voc(*voc, **{setting: True})
    with pytest.raises(ArgumentError, match="bounding_box_format"):
        from_coco(*coco, bounding_box_format="xyzw")
    with pytest.raises(ArgumentError, match="max_boxes"):
        from_voc(*voc, max_boxes=0)


def test_voc_corners_classes_difficult_and_split(voc):
    files, y = from_voc(*voc, image_size=None)
    assert files.class_names == ("cat", "dog")
    np.testing.assert_array_equal(y["boxes"][0], [[10, 5, 30, 15]])  # 1-based, ends inside
    np.testing.assert_array_equal(y["boxes"][1], [[0, 0, 10, 20]])  # the difficult dog: gone
    assert y["labels"].tolist() == [[1], [0]]
    files, y = from_voc(*voc, keep_difficult=True, image_size=(25, 25),
                        bounding_box_format="rel_xywh")
    np.testing.assert_allclose(y["boxes"][1], [[0, 0, 0.2, 0.4], [0.6, 0.6, 0.4, 0.4]])
    split = voc[0].parent / "ImageSets" / "Main" / "train.txt"
    files, y = from_voc(*voc, ids=split, image_size=None)  # the split's order: reversed
    assert [p.rsplit("/", 1)[1] for p in files.paths] == ["2007_000002.png", "2007_000001.png"]
    files, _ = from_voc(*voc, ids=["2007_000001"], class_names=["dog", "cat"])
    assert len(files) == 1 and files.class_names == ("dog", "cat")


def test_voc_errors_name_the_file_and_the_fix(voc):
    annotations, images = voc
    with pytest.raises(ArgumentError, match=r"2007_000002.xml has an object of class 'cat', "
                                            r"which is not in `class_names`.*Fix"):
        from_voc(annotations, images, class_names=["dog"])
    with pytest.raises(ArgumentError, match=r"1 id\(s\) of `ids` have no XML.*nope.xml"):
        from_voc(annotations, images, ids=["nope"])
    (annotations / "2007_000001.xml").write_text("<annotation><object></annotation>")
    with pytest.raises(ArgumentError, match=r"2007_000001.xml does not parse as XML.*Fix"):
        from_voc(annotations, images)
    (annotations / "2007_000001.xml").write_text(
        "<annotation><filename>x.png</filename><object><name>dog</name><bndbox><xmin>a</xmin>"
        "</bndbox></object></annotation>")
    with pytest.raises(ArgumentError, match=r"2007_000001.xml: <xmin> holds 'a'"):
        from_voc(annotations, images)
    (annotations / "2007_000001.xml").write_text(
        "<annotation><filename>x.png</filename><object><name>dog</name><bndbox><xmin>9</xmin>"
        "<ymin>1</ymin><xmax>3</xmax><ymax>5</ymax></bndbox></object></annotation>")
    with pytest.raises(ArgumentError, match=r"2007_000001.xml has a 'dog' box whose corners "
                                            r"are inverted.*Fix"):
        from_voc(annotations, images)


def test_voc_splits_built_apart_share_one_class_index(voc):
    """A split whose files lack a class (here: one image, only a cat) keeps the folder's
    index: train and val built apart must agree on what label 1 means."""
    annotations, images = voc
    whole, _ = from_voc(annotations, images, image_size=None)
    part, y = from_voc(annotations, images, ids=["2007_000002"], image_size=None)
    assert part.class_names == whole.class_names == ("cat", "dog")
    assert y["labels"].tolist() == [[0]]


def test_voc_keep_empty_and_a_size_read_from_the_file(tmp_path):
    annotations, images = write_voc(tmp_path, [("x", 30, 20, []), ("y", 30, 20,
                                                                    [("cat", 1, 1, 30, 20, 0)])])
    text = (annotations / "y.xml").read_text()
    (annotations / "y.xml").write_text(text.replace("<width>30</width>", ""))
    files, y = from_voc(annotations, images, keep_empty=False, image_size=(10, 15))
    assert len(files) == 1
    np.testing.assert_allclose(y["boxes"], [[[0, 0, 15, 10]]])


def test_the_images_load_at_image_size(coco):
    files, _ = from_coco(*coco, image_size=(20, 30))
    assert [files.load(i).shape for i in range(len(IMAGES))] == [(20, 30, 3)] * 3


def test_relative_boxes_without_image_size_are_fractions_of_each_image(coco):
    _, pixels = from_coco(*coco, image_size=None)
    _, y = from_coco(*coco, image_size=None, bounding_box_format="rel_xyxy")
    sides = np.array([[60, 40] * 2, [50, 50] * 2, [40, 60] * 2], np.float32)[:, None]
    real = pixels["labels"] >= 0
    np.testing.assert_allclose(y["boxes"][real], (pixels["boxes"] / sides)[real], rtol=1e-6)
