"""ImageRecords.from_array_record on files array_record's own writer wrote (Examples inside).

No process is started. The reference is array_record's own reader plus TensorFlow's PNG decode.
"""

from __future__ import annotations

import numpy as np
import pytest

import shmaug
from tests import records_data as D

pytest.importorskip("array_record")
tf = pytest.importorskip("tensorflow")


def write(path, start: int, stop: int, **kwargs) -> str:
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(str(path), "group_size:1")
    for i in range(start, stop):
        writer.write(D.example(i, **kwargs) if "label" in kwargs else D.example(i, i % 2))
    writer.close()
    return str(path)


def test_images_and_labels_match_array_records_own_reader(tmp_path):
    from array_record.python.array_record_module import ArrayRecordReader

    paths = [write(tmp_path / f"train.array_record-{k:05d}", 3 * k, 3 * k + 3) for k in range(2)]
    records = shmaug.ImageRecords.from_array_record(str(tmp_path / "train.array_record-*"),
                                                    image_size=D.SHAPE[:2])
    assert len(records) == 6 and records.labels.tolist() == [i % 2 for i in range(6)]
    assert records.class_names == ("0", "1")
    i = 0
    for path in paths:
        reader = ArrayRecordReader(path)
        for raw in reader.read_all():
            parsed = tf.io.parse_single_example(raw, {
                "image/encoded": tf.io.FixedLenFeature([], tf.string)})
            np.testing.assert_array_equal(records.read(i),
                                          tf.io.decode_png(parsed["image/encoded"]).numpy())
            i += 1
        reader.close()
    assert records.load.name(4) == f"{paths[1]}[1]"


def test_missing_label_and_not_an_array_record_file(tmp_path):
    path = write(tmp_path / "a.array_record", 0, 2, label=None)
    with pytest.raises(shmaug.ArgumentError, match=r"`label_key`='image/class/label' is not a "
                                                   r"feature of record 0 of .*a\.array_record"):
        shmaug.ImageRecords.from_array_record(path)
    bare = shmaug.ImageRecords.from_array_record(path, label_key=None, image_size=D.SHAPE[:2])
    np.testing.assert_array_equal(bare.load(1), D.image(1))
    other = tmp_path / "b.array_record"
    other.write_bytes(b"not an array record file" * 10)
    with pytest.raises(shmaug.ArgumentError, match=r"cannot read .*b\.array_record.* as an "
                                                   r"ArrayRecord file"):
        shmaug.ImageRecords.from_array_record(str(other))


def test_a_wrong_image_key_without_labels_is_refused_when_built_and_errors_name_no_byte_offset(
        tmp_path, monkeypatch):
    """It was found only in a worker, told to replace the record or skip it; an unreadable
    record was said to lie at "byte offset" its number."""
    from shmaug.sources.formats import array_record

    path = write(tmp_path / "a.array_record", 0, 3, label=None)
    read, opened = [], array_record._open

    class Counted:  # the reader, its reads counted
        def __init__(self, reader):
            self.reader = reader

        def __getattr__(self, name):
            return getattr(self.reader, name)

        def read(self, indices):
            read.extend(indices)
            return self.reader.read(indices)

    monkeypatch.setattr(array_record, "_open", lambda p: Counted(opened(p)))
    shmaug.ImageRecords.from_array_record(path, label_key=None)
    assert read == [0]  # the first record only
    with pytest.raises(shmaug.ArgumentError, match=r"`image_key`='image' is not a feature of "
                                                   r"record 0 .*'image/encoded'.*`image_key=`"):
        shmaug.ImageRecords.from_array_record(path, image_key="image", label_key=None)
    bad = write(tmp_path / "b.array_record", 0, 1, label=None, data=b"not an image")
    records = shmaug.ImageRecords.from_array_record(bad, label_key=None, image_size=(8, 8))
    with pytest.raises(shmaug.ImageReadError, match=r"record 0 of .*b\.array_record'") as info:
        records.load(0)
    assert "byte offset" not in str(info.value)
