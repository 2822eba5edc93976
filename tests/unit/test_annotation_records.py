"""Detection sets in record shards read into ``(records, y)``: TF Object Detection API
TFRecords (``from_tf_object_detection``) and Hugging Face ``objects`` columns
(``from_huggingface_detection``). The boxes come out in Keras' layout, scaled, formatted and
padded as ``from_coco``'s; each row of ``y`` goes with the record that ``records`` reads at
that row (checked against the pixels written); the filters; and a clear error at
construction for each kind of bad input, naming the shard or row, the key and the fix.

The shards are written by TensorFlow and ``datasets`` themselves (``annotation_records_data``).
No process is started."""

from __future__ import annotations

import numpy as np
import pytest

from shmaug.errors import ArgumentError, ArgumentTypeError
from shmaug.ops.targets.formats import to_xyxy
from shmaug.sources.annotations.hf_objects import from_huggingface_detection
from shmaug.sources.annotations.tf_od import from_tf_object_detection
from tests import annotation_records_data as D

# Each image's boxes as pixel edges (xyxy), less the difficult and crowd ones, in order.
PLAIN = [[(x, y, x + w, y + h) for x, y, w, h, _, difficult, crowd in boxes
          if not difficult and not crowd] for _, _, boxes in D.OBJECTS]


def reads_as_written(records, rows) -> None:
    """Record i of ``records`` is the image ``D.OBJECTS[rows[i]]`` (its pixels)."""
    assert len(records) == len(rows)
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(records.read(i), D.pixels(*D.OBJECTS[row]))


def check_plain(y, rows=range(len(D.OBJECTS))) -> None:
    """``y`` holds the undifficult, uncrowded boxes of images ``rows``, in pixels."""
    for i, row in enumerate(rows):
        count = len(PLAIN[row])
        np.testing.assert_allclose(y["boxes"][i, :count], np.reshape(PLAIN[row], (-1, 4)),
                                   atol=1e-4)
        assert (y["boxes"][i, count:] == -1).all() and (y["labels"][i, count:] == -1).all()


# -- TF Object Detection API TFRecords -------------------------------------------------------

@pytest.fixture(scope="module")
def tensorflow():
    return pytest.importorskip("tensorflow")


@pytest.fixture
def od(tmp_path, tensorflow):
    return D.write_od(tmp_path / "od")


def test_od_boxes_in_pixels_with_the_label_maps_names(od, tmp_path):
    records, y = from_tf_object_detection(str(tmp_path / "od" / "*.tfrecord"), image_size=None)
    assert records.class_names == ("person", "cat", "zebra")  # ids 1, 2, 3: class/text
    assert records.labels is None and records.image_size is None
    assert y["boxes"].dtype == np.float32 and y["boxes"].shape == (4, 2, 4)
    assert y["labels"].dtype == np.int64
    assert y["labels"].tolist() == [[1, -1], [0, 2], [-1, -1], [2, -1]]  # id - 1
    check_plain(y)
    reads_as_written(records, range(4))
    assert len(records.table.shards) == 2 and "from_tf_object_detection(" in repr(records)


def test_od_boxes_are_scaled_and_written_in_the_format_asked(od):
    records, y = from_tf_object_detection(od, image_size=(20, 30))
    np.testing.assert_allclose(y["boxes"][0, 0], [5, 2.5, 15, 7.5], atol=1e-4)  # 60x40
    np.testing.assert_allclose(y["boxes"][3, 0], [2, 2, 8, 8], atol=1e-4)  # 30x20
    assert records.image_size == (20, 30) and records.read(0).shape == (20, 30, 3)
    for fmt in ("rel_xyxy", "center_yxhw", "xywh"):
        _, formatted = from_tf_object_detection(od, image_size=(20, 30),
                                                bounding_box_format=fmt)
        real = y["labels"] >= 0
        assert (formatted["boxes"][~real] == -1).all()
        np.testing.assert_allclose(to_xyxy(formatted["boxes"][real], fmt, 20, 30),
                                   y["boxes"][real], atol=1e-4)


def test_od_difficult_crowd_empty_and_max_boxes(od):
    _, y = from_tf_object_detection(od, image_size=None, keep_difficult=True, keep_crowd=True)
    assert y["labels"][1].tolist() == [0, 2, 1, 0]
    np.testing.assert_allclose(y["boxes"][1, 2:], [[5, 25, 15, 35], [20, 4, 28, 12]],
                               atol=1e-4)
    _, y = from_tf_object_detection(od, image_size=None, keep_crowd=True)
    assert y["labels"][1].tolist() == [0, 2, 0]  # the difficult one still out
    records, y = from_tf_object_detection(od, image_size=None, keep_empty=False, max_boxes=3)
    reads_as_written(records, [0, 1, 3])  # the records kept are the images kept
    assert y["boxes"].shape == (3, 3, 4)
    check_plain(y, [0, 1, 3])
    with pytest.raises(ArgumentError, match=r"max_boxes`=1.*2 in record 1 of '.*train-00000"
                                            r"-of-00002.tfrecord'"):
        from_tf_object_detection(od, max_boxes=1)


def test_od_class_names_given_or_from_the_ids(tmp_path, tensorflow):
    od = D.write_od(tmp_path / "od", text=False, flags=False)
    records, y = from_tf_object_detection(od, image_size=None, keep_crowd=True)
    assert records.class_names == ("1", "2", "3")  # no class/text: the ids
    assert y["labels"][1].tolist() == [0, 2, 1, 0]  # no difficult / is_crowd: all kept
    records, _ = from_tf_object_detection(od, class_names=["a", "b", "c", "d"])
    assert records.class_names == ("a", "b", "c", "d")
    with pytest.raises(ArgumentError, match=r"class id 3 .*record 1 of .*train-00000.* ids 1 "
                                            r"to 2.*Fix: pass class_names"):
        from_tf_object_detection(od, class_names=["a", "b"])


def test_od_gzip_shards_and_many_shards_keep_their_order(tmp_path, tensorflow):
    images = [(20 + i, 20, [(i, 1, 5, 5, 1 + i % 3, 0, 0)]) for i in range(7)]
    paths = D.write_od(tmp_path / "od", images, shards=3, gzip_last=True)
    records, y = from_tf_object_detection(paths, image_size=None)
    assert len(records) == 7
    for i, (width, height, boxes) in enumerate(images):
        np.testing.assert_array_equal(records.read(i), D.pixels(width, height, boxes))
        np.testing.assert_allclose(y["boxes"][i, 0], [i, 1, i + 5, 6], atol=1e-4)


def _one_record(tmp_path, **options) -> str:
    import tensorflow as tf

    path = str(tmp_path / "bad.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(D.od_example(*D.OBJECTS[0]))
        writer.write(D.od_example(*D.OBJECTS[1], **options))
    return path


@pytest.mark.parametrize("key", ["image/object/bbox/ymax", "image/object/class/label",
                                 "image/height"])
def test_od_a_record_without_a_feature_is_named_with_the_key_and_fix(tmp_path, tensorflow, key):
    path = _one_record(tmp_path, drop=(key,))
    with pytest.raises(ArgumentError, match=rf"'{key}' is not a feature of record 1 of "
                                            rf"'.*bad.tfrecord' \(byte offset \d+\); its "
                                            rf"features are \[.*Fix: write each record with "
                                            rf"the TF Object Detection API's features"):
        from_tf_object_detection(path)


def test_classification_records_are_refused_at_construction(tmp_path, tensorflow):
    from tests import records_data

    path = records_data.write_tfrecords(tmp_path / "cls", 1, 2)[0]
    with pytest.raises(ArgumentError, match=r"'image/height' is not a feature of record 0 of "
                                            r".*from_tfrecord"):
        from_tf_object_detection(path)


def test_od_bad_boxes_are_refused_naming_the_record(tmp_path, tensorflow):
    import tensorflow as tf

    def floats(*values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))

    pixels = _one_record(tmp_path, change={"image/object/bbox/xmax": floats(10, 30, 50, 28)})
    with pytest.raises(ArgumentError, match=r"not fractions.*record 1 of .*bad.tfrecord.*"
                                            r"Fix: write the OD API's boxes as fractions"):
        from_tf_object_detection(pixels)
    inverted = _one_record(tmp_path, change={"image/object/bbox/xmax": floats(0.1, .5, .2, .5)})
    with pytest.raises(ArgumentError, match=r"inverted.*record 1 of .*xmin <= xmax"):
        from_tf_object_detection(inverted)
    short = _one_record(tmp_path, change={"image/object/bbox/ymin": floats(0.1)})
    with pytest.raises(ArgumentError, match=r"record 1 .*'image/object/bbox/ymin' holds 1 "
                                            r"value\(s\) but 'image/object/class/label' 4"):
        from_tf_object_detection(short)
    wrong = _one_record(tmp_path, change={"image/object/class/label": floats(1, 2, 3, 1)})
    with pytest.raises(ArgumentError, match=r"'image/object/class/label' holds a float_list, "
                                            r"not a int64_list"):
        from_tf_object_detection(wrong)
    texts = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"dog"] * 4))
    clash = _one_record(tmp_path, change={"image/object/class/text": texts})
    with pytest.raises(ArgumentError, match=r"class id 2 is 'cat' in one record and 'dog' in "
                                            r"record 1 of"):
        from_tf_object_detection(clash)


def test_od_settings_the_boxes_cannot_follow_are_refused(od, tmp_path):
    with pytest.raises(ArgumentError, match=r"crop_to_aspect_ratio=True"):
        from_tf_object_detection(od, crop_to_aspect_ratio=True)
    with pytest.raises(ArgumentError, match=r"`max_boxes` must be a positive int"):
        from_tf_object_detection(od, max_boxes=0)
    with pytest.raises(ArgumentError, match=r"no image to read"):
        from_tf_object_detection(D.write_od(tmp_path / "empty", [D.OBJECTS[2]], shards=1),
                                 keep_empty=False)
    with pytest.raises(ArgumentError, match=r"compression_type"):
        from_tf_object_detection(od, compression_type="ZLIB")


# -- Hugging Face objects --------------------------------------------------------------------

@pytest.fixture(scope="module")
def datasets():
    return pytest.importorskip("datasets")


@pytest.mark.parametrize("layout", ["struct", "list"])
def test_hf_boxes_classes_and_rows_from_either_layout(tmp_path, datasets, layout):
    ds = D.hf_on_disk(tmp_path / "hf", D.hf_dataset(layout=layout))
    records, y = from_huggingface_detection(ds, image_size=None)
    assert records.class_names == ("person", "cat", "zebra")  # the ClassLabel's
    assert records.labels is None and y["boxes"].shape == (4, 4, 4)
    assert y["labels"].tolist() == [[1, -1, -1, -1], [0, 2, 1, 0], [-1] * 4, [2, -1, -1, -1]]
    every = [[(x, y0, x + w, y0 + h) for x, y0, w, h, *_ in boxes] for _, _, boxes in D.OBJECTS]
    for i, boxes in enumerate(every):
        np.testing.assert_allclose(y["boxes"][i, :len(boxes)], np.reshape(boxes, (-1, 4)))
    reads_as_written(records, range(4))
    assert records.table.shards == tuple(f["filename"] for f in ds.cache_files)


def test_hf_sizes_from_the_headers_relative_boxes_and_scaling(datasets):
    ds = D.hf_dataset(layout="list", fmt="rel_xyxy", sizes=False)
    records, y = from_huggingface_detection(ds, bbox_format="rel_xyxy", image_size=(20, 30),
                                            bounding_box_format="rel_xyxy")
    np.testing.assert_allclose(y["boxes"][0, 0], [10 / 60, 5 / 40, 30 / 60, 15 / 40],
                               atol=1e-6)
    _, pixels = from_huggingface_detection(ds, bbox_format="rel_xyxy", image_size=(20, 30))
    np.testing.assert_allclose(pixels["boxes"][0, 0], [5, 2.5, 15, 7.5], atol=1e-4)
    assert records.read(0).shape == (20, 30, 3)
    with pytest.raises(ArgumentError, match=r"not fractions .*row 0 of the dataset.*Fix: pass "
                                            r"`bbox_format=`"):
        from_huggingface_detection(D.hf_dataset(), bbox_format="rel_xyxy")


def test_hf_keep_empty_and_a_shuffled_order_select_the_right_images(tmp_path, datasets):
    ds = D.hf_on_disk(tmp_path / "hf", D.hf_dataset()).shuffle(seed=3)
    order = [D.OBJECTS.index(next(o for o in D.OBJECTS if o[0] == w and o[1] == h))
             for w, h in zip(ds["width"], ds["height"])]
    assert order != sorted(order)
    files = sorted((tmp_path / "hf").iterdir())
    records, y = from_huggingface_detection(ds, image_size=None, keep_empty=False,
                                            max_boxes=4)
    kept = [row for row in order if D.OBJECTS[row][2]]
    reads_as_written(records, kept)
    for i, row in enumerate(kept):
        np.testing.assert_allclose(y["boxes"][i, 0], PLAIN[row][0])
    assert sorted((tmp_path / "hf").iterdir()) == files  # select wrote no indices file
    with pytest.raises(ArgumentError, match=r"max_boxes`=3.*4 in row \d of the dataset"):
        from_huggingface_detection(ds, max_boxes=3)


def test_hf_class_names_given_or_from_plain_ints(datasets):
    ds = D.hf_dataset()
    plain = ds.cast_column("objects", datasets.Sequence({
        "bbox": datasets.Sequence(datasets.Value("float32"), length=4),
        "category": datasets.Value("int64")}))
    records, _ = from_huggingface_detection(plain)
    assert records.class_names == ("0", "1", "2")
    records, _ = from_huggingface_detection(ds, class_names=["p", "c", "z", "other"])
    assert records.class_names == ("p", "c", "z", "other")
    with pytest.raises(ArgumentError, match=r"class id 2 \(in row 1 of the dataset\).* ids 0 "
                                            r"to 1"):
        from_huggingface_detection(ds, class_names=["p", "c"])


def test_hf_bad_columns_fields_and_boxes_are_refused(datasets):
    ds = D.hf_dataset()
    with pytest.raises(ArgumentError, match=r"`objects_column`='objs' is not a column.*"
                                            r"\['image', 'objects', 'width', 'height'\]"):
        from_huggingface_detection(ds, objects_column="objs")
    with pytest.raises(ArgumentError, match=r"`bbox_key`='box' is not a field.*\['bbox', "
                                            r"'category'\]"):
        from_huggingface_detection(ds, bbox_key="box")
    with pytest.raises(ArgumentError, match=r"`category_key`='label' is not a field"):
        from_huggingface_detection(ds, category_key="label")
    with pytest.raises(ArgumentError, match=r"'width' column holds int32, not objects"):
        from_huggingface_detection(ds, objects_column="width")
    with pytest.raises(ArgumentError, match=r"inverted.*row 1 of the dataset.*bbox_format=.*yxyx"):
        from_huggingface_detection(ds, bbox_format="yxyx")  # xywh read as yxyx: y1 < y0
    with pytest.raises(ArgumentError, match=r"`bbox_format` expects one of.*received .ltrb."):
        from_huggingface_detection(ds, bbox_format="ltrb")
    with pytest.raises(ArgumentTypeError, match=r"DatasetDict"):
        from_huggingface_detection(datasets.DatasetDict(train=ds))
    three = datasets.Dataset.from_dict(
        {"image": [{"bytes": D.png(10, 10, []), "path": None}],
         "objects": [{"bbox": [[1.0, 2.0, 3.0]], "category": [0]}]},
        features=datasets.Features({"image": datasets.Image(), "objects": datasets.Sequence(
            {"bbox": datasets.Sequence(datasets.Value("float32")),
             "category": datasets.Value("int64")})}))
    with pytest.raises(ArgumentError, match=r"'bbox' of an object of row 0 holds 3 numbers"):
        from_huggingface_detection(three)


def test_hf_check_sizes_refuses_columns_that_are_not_the_images(datasets):
    ds = D.hf_dataset()
    wrong = ds.map(lambda row: {"width": row["width"] + (row["height"] == 20)})
    _, y = from_huggingface_detection(wrong, image_size=None)  # trusted without check_sizes
    with pytest.raises(ArgumentError, match=r"Row 3 of the dataset gives its image a size of "
                                            r"31x20.*the image is 30x20"):
        from_huggingface_detection(wrong, check_sizes=True)
