"""ImageRecords.from_tfrecord on files tf.io.TFRecordWriter wrote: images, labels, bad data.

No process is started: the reader runs in this process (``records.load`` / ``read``), as a
worker runs it. TensorFlow writes the files and decodes the reference images.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys

from pathlib import Path

import numpy as np
import pytest

import shmaug
from shmaug.sources.formats import example as E
from shmaug.sources.formats import tfrecord as T
from tests import records_data as D

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return D.write_tfrecords(tmp_path_factory.mktemp("tfrecords"), 3, 4, gzip_last=True)


def test_images_labels_and_offsets_match_tensorflow(shards):
    records = shmaug.ImageRecords.from_tfrecord(shards, image_size=D.SHAPE[:2])
    assert len(records) == 12 and records.output_shape == D.SHAPE
    assert records.labels.tolist() == [i % 3 for i in range(12)]
    assert records.class_names == ("0", "1", "2")
    # TF's own reader over the same files, GZIP shard included: PNG bit for bit.
    theirs = []
    for path in shards:
        kind = "GZIP" if path.endswith(".gz") else ""
        for raw in tf.data.TFRecordDataset(path, compression_type=kind):
            parsed = tf.io.parse_single_example(raw, {
                "image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
            theirs.append((tf.io.decode_png(parsed["image/encoded"]).numpy(),
                           int(parsed["image/class/label"])))
    for i, (pixels, label) in enumerate(theirs):
        np.testing.assert_array_equal(records.read(i), pixels)
        np.testing.assert_array_equal(records.load(i), D.image(i))
        assert records.labels[i] == label


def test_glob_class_name_labels_and_no_labels(shards, tmp_path):
    names = D.write_tfrecords(tmp_path, 1, 5, label=lambda i: "bee" if i % 2 else "ant")
    records = shmaug.ImageRecords.from_tfrecord(str(tmp_path / "*.tfrecord"), image_size=(4, 4))
    assert records.class_names == ("ant", "bee") and records.labels.tolist() == [0, 1, 0, 1, 0]
    ordered = shmaug.ImageRecords.from_tfrecord(names, class_names=["bee", "ant"],
                                                image_size=(4, 4), label_mode="categorical")
    np.testing.assert_array_equal(ordered.labels[:2], [[0, 1], [1, 0]])
    bare = shmaug.ImageRecords.from_tfrecord(shards, label_key=None, image_size=(4, 4))
    assert bare.labels is None and bare.classes is None and len(bare) == 12
    assert "from_tfrecord(" in repr(records) and "2 classes ['ant', 'bee']" in repr(records)


def test_pickles_as_its_table_and_reads_the_same(shards):
    records = shmaug.ImageRecords.from_tfrecord(shards, image_size=(3, 3), color_mode="grayscale")
    again = pickle.loads(pickle.dumps(records))
    assert repr(again) == repr(records) and again.output_shape == (3, 3, 1)
    np.testing.assert_array_equal(again.load(11), records.load(11))
    np.testing.assert_array_equal(again.labels, records.labels)


def test_hand_parser_agrees_with_protobuf():
    data = D.example(7, -5, label_key="neg")
    found = E.features(data)
    assert set(found) == {"image/encoded", "neg"}
    assert E.int64_values(*found["neg"]) == [-5]
    assert bytes(E.bytes_value(*found["image/encoded"])) == D.png(7)
    with pytest.raises(E.ExampleError):
        E.features(data[:-3])


def corrupt(path: str, at: int, to: bytes | None = None, cut: int | None = None) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if to is not None:
        data[at:at + len(to)] = to
    if cut is not None:
        data = data[:cut]
    with open(path, "wb") as f:
        f.write(bytes(data))


def test_truncated_file_and_header_crc_are_reported_at_construction(tmp_path):
    (path,) = D.write_tfrecords(tmp_path, 1, 3)
    size = os.path.getsize(path)
    corrupt(path, 0, cut=size - 7)
    with pytest.raises(shmaug.ImageReadError,
                       match=r"record 2 of .*train-00000\.tfrecord.*byte offset \d+.*cut short.*Fix"):
        shmaug.ImageRecords.from_tfrecord([path])
    (path,) = D.write_tfrecords(tmp_path / "b", 1, 3)
    corrupt(path, 8, to=b"\0\0\0\0")
    with pytest.raises(shmaug.ImageReadError, match=r"record 0 of .*byte offset 0.*CRC.*Fix"):
        shmaug.ImageRecords.from_tfrecord([path])


def test_a_gzip_file_that_inflates_past_any_file_of_images_is_refused(tmp_path):
    """2 MiB of GZIP zeros decompressed whole to 2 GiB (4 GiB of memory) before any check;
    one cut short says so; gzip's members one after another are read as one file."""
    import gzip

    bomb = tmp_path / "bomb.tfrecord.gz"
    zeros = gzip.compress(bytes(64 << 20), compresslevel=9)  # 64 MiB in ~64 KiB
    bomb.write_bytes(zeros)
    with pytest.raises(shmaug.ImageReadError, match=r"bomb\.tfrecord\.gz.*more than 250 "
                                                    r"times its [\d,]+ bytes"):
        shmaug.ImageRecords.from_tfrecord([str(bomb)], compression_type="GZIP")
    (plain,) = D.write_tfrecords(tmp_path / "p", 1, 4)
    raw = Path(plain).read_bytes()
    split = tmp_path / "two.tfrecord.gz"  # two members (`cat a.gz b.gz`), zeros between
    cut = len(raw) // 2
    split.write_bytes(gzip.compress(raw[:cut]) + bytes(512) + gzip.compress(raw[cut:]))
    records = shmaug.ImageRecords.from_tfrecord([str(split)], compression_type="GZIP")
    assert len(records) == 4 and records.labels.tolist() == [0, 1, 2, 0]
    short = tmp_path / "short.tfrecord.gz"
    short.write_bytes(gzip.compress(raw)[:-20])
    with pytest.raises(shmaug.ImageReadError, match=r"short\.tfrecord\.gz.*end-of-stream"):
        shmaug.ImageRecords.from_tfrecord([str(short)], compression_type="GZIP")


def test_data_crc_mismatch_raises_naming_the_record_and_skip_stands_in(tmp_path):
    (path,) = D.write_tfrecords(tmp_path, 1, 4, label=lambda i: 0)
    with open(path, "rb") as f:
        data = f.read()
    second = T.HEADER.size + struct.unpack("<Q", data[:8])[0] + T.FOOTER
    # Inside record 1's image: its label still parses (labels are read when indexing), its
    # CRC no longer matches (checked when the image is read, where on_error applies).
    corrupt(path, data.find(D.png(1)) + 30, to=b"\xff\xfe")
    strict = shmaug.ImageRecords.from_tfrecord([path], label_key=None, image_size=(6, 5))
    with pytest.raises(shmaug.ImageReadError,
                       match=rf"record 1 of .*byte offset {second}\).*CRC.*Fix"):
        strict.read(1)
    lenient = shmaug.ImageRecords.from_tfrecord([path], image_size=(6, 5), on_error="skip")
    np.testing.assert_array_equal(lenient.load(1), D.image(2))  # the next readable record


def test_missing_keys_and_an_image_that_is_not_one(tmp_path):
    import tensorflow as tf

    path = str(tmp_path / "odd.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(D.example(0, 1))
        writer.write(D.example(1, 0, data=b"not an image at all"))
        writer.write(D.example(2, 1, image_key="jpeg"))
    with pytest.raises(shmaug.ArgumentError,
                       match=r"`image_key`='image/encoded' is not a feature of record 2 of "
                             r".*odd\.tfrecord.*\['image/class/label', 'jpeg'\]"):
        shmaug.ImageRecords.from_tfrecord([path])
    with pytest.raises(shmaug.ArgumentError, match=r"`label_key`='label' is not a feature of "
                                                   r"record 0.*label_key=None"):
        shmaug.ImageRecords.from_tfrecord([path], label_key="label")
    bare = shmaug.ImageRecords.from_tfrecord([path], label_key=None, image_size=(6, 5))
    with pytest.raises(shmaug.ImageReadError, match=r"record 2 of .*no bytes feature "
                                                    r"'image/encoded'.*its features are "
                                                    r"\['image/class/label', 'jpeg'\]"):
        bare.read(2)
    # a wrong key without labels: refused when built (it was found in a worker only)
    with pytest.raises(shmaug.ArgumentError, match=r"`image_key`='image' is not a feature of "
                                                   r"record 0 .*`image_key=`"):
        shmaug.ImageRecords.from_tfrecord([path], image_key="image", label_key=None)
    with pytest.raises(shmaug.ImageReadError, match=r"record 1 of .*corrupt, truncated or "
                                                    r"not an image.*on_error='skip'"):
        bare.read(1)


def test_arguments_are_checked(tmp_path, shards):
    with pytest.raises(shmaug.ArgumentError, match=r"`files`.*none matched"):
        shmaug.ImageRecords.from_tfrecord(str(tmp_path / "nothing-*"))
    with pytest.raises(shmaug.ArgumentError, match=r"`compression_type`.*'ZLIB'"):
        shmaug.ImageRecords.from_tfrecord(shards, compression_type="ZLIB")
    with pytest.raises(shmaug.ArgumentError, match=r"`interpolation`"):
        shmaug.ImageRecords.from_tfrecord(shards, interpolation="cubic")
    with pytest.raises(shmaug.ArgumentTypeError, match=r"\['colour_mode'\]"):
        shmaug.ImageRecords.from_tfrecord(shards, colour_mode="rgb")


def test_hand_parser_refuses_cut_or_garbled_bytes_with_its_own_error():
    data = D.example(3, 2)
    rng = np.random.default_rng(0)
    garbled = [bytes(rng.integers(0, 256, len(data), np.uint8)) for _ in range(200)]
    for bad in [data[:cut] for cut in range(len(data))] + garbled:
        try:
            found = E.features(bad)
        except E.ExampleError:
            continue
        for kind, message in found.values():  # what did parse decodes or refuses, no crash
            try:
                E.int64_values(kind, message), E.bytes_value(kind, message)
            except E.ExampleError:
                pass


def test_c_crc32c_is_a_base_dependency_and_the_tfrecord_extra_still_installs():
    # As an extra it was missed: TFRecords then read 9x slower behind one warning (issue 36).
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert any(dep.startswith("google-crc32c") for dep in project["dependencies"])
    assert project["optional-dependencies"]["tfrecord"] == ["google-crc32c>=1.5"]
    assert not T.SLOW_CRC and T.SLOW_CRC_FIX == ""  # the C code, here


def _fake_crc32c(folder, monkeypatch, code: str) -> None:
    """A ``google_crc32c`` package made of ``code``, imported in place of the real one."""
    (folder / "google_crc32c").mkdir()
    (folder / "google_crc32c" / "__init__.py").write_text(code)
    monkeypatch.delitem(sys.modules, "google_crc32c", raising=False)
    monkeypatch.syspath_prepend(str(folder))


def test_pure_python_fallback_without_the_c_extension_says_how_to_fix(tmp_path, monkeypatch):
    # google-crc32c built without its C library warns at import and runs pure Python: shmaug
    # imports it silently (warnings are errors here) and takes its own fallback, saying why.
    _fake_crc32c(tmp_path, monkeypatch, (
        "import warnings\n"
        "warnings.warn('pure python crc32c', RuntimeWarning)\n"
        "implementation = 'python'\n"
        "def value(data):\n    raise AssertionError('the slow one was used')\n"))
    crc, fix = T._crc32c()
    assert crc(b"123456789") == 0xE3069283
    assert "without its C extension" in fix and "--only-binary=:all: google-crc32c" in fix


def test_pure_python_fallback_without_google_crc32c_says_how_to_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "google_crc32c", None)  # import raises ImportError
    crc, fix = T._crc32c()
    assert crc(b"123456789") == 0xE3069283
    assert "not installed" in fix and "Fix: pip install google-crc32c." in fix


def test_c_crc32c_is_taken_when_its_extension_loads(tmp_path, monkeypatch):
    _fake_crc32c(tmp_path, monkeypatch, (
        "implementation = 'c'\n"
        "def value(data):\n    assert isinstance(data, bytes)\n    return 7\n"))
    crc, fix = T._crc32c()
    assert fix == "" and crc(memoryview(b"ab")) == 7


def test_negative_labels_are_kept_with_a_warning_and_labels_past_the_classes_refused(tmp_path):
    """-1 (an unlabelled record, TFDS' way) passed silently into batches; Keras'
    ``ignore_class=-1`` wants it kept."""
    path = D.write_tfrecords(tmp_path, 1, 4, label=lambda i: -1 if i == 2 else i % 2)
    with pytest.warns(shmaug.ShmaugWarning, match=r"1 of 4 labels are negative \(-1 at sample "
                                                  r"2\).*ignore_class=-1.*label_key=None"):
        records = shmaug.ImageRecords.from_tfrecord(path, image_size=(6, 5))
    assert records.labels.tolist() == [0, 1, -1, 1]
    with pytest.raises(shmaug.ArgumentError, match=r"must index `class_names` \(0..0\)"):
        shmaug.ImageRecords.from_tfrecord(D.write_tfrecords(tmp_path / "b", 1, 2, label=lambda
                                                            i: i), class_names=["a"])
