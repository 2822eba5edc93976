"""ImageRecords under real workers: TFRecord, WebDataset, Arrow, ArrayRecord; fork and spawn.

Every record's image is a pure function of its number and its label is that number, so a batch
names the records it holds: each epoch must hold every record exactly once, and the batches
must be bit-identical for 0 and 2 workers, fork and spawn, with augmentation. A corrupt record
under on_error="skip" is stood in for and counted as a corrupt file is. The conftest guard fails
a test that leaves a /dev/shm segment or a child behind.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import shmaug
from tests import _ops
from tests import records_data as D
from tests._helpers import assert_same_batches

pytestmark = pytest.mark.timeout(180)
N = 10


def epoch(source, **kwargs) -> list:
    with shmaug.Loader(source, batch_size=4, **kwargs) as loader:
        return [(x.copy(), y.copy()) for x, y in loader]


@pytest.fixture(scope="module")
def tfrecords(tmp_path_factory):
    pytest.importorskip("tensorflow")
    paths = D.write_tfrecords(tmp_path_factory.mktemp("it_tfrecords"), 2, N // 2,
                              label=lambda i: i, gzip_last=True)
    return shmaug.ImageRecords.from_tfrecord(paths, image_size=D.SHAPE[:2])


@pytest.fixture(scope="module")
def tars(tmp_path_factory):
    folder = tmp_path_factory.mktemp("it_tars")
    for k in range(2):
        D.write_tar(folder / f"shard-{k}.tar", D.wds_members(k * N // 2, (k + 1) * N // 2,
                                                           label=lambda i: i))
    return shmaug.ImageRecords.from_webdataset(str(folder / "*.tar"), image_ext="png",
                                               image_size=D.SHAPE[:2])


@pytest.fixture(scope="module")
def huggingface(tmp_path_factory):
    datasets = pytest.importorskip("datasets")
    folder = str(tmp_path_factory.mktemp("it_hf") / "ds")
    datasets.Dataset.from_dict(
        {"image": [{"bytes": D.png(i), "path": None} for i in range(N)], "label": list(range(N))},
        features=datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")}),
    ).save_to_disk(folder, num_shards=2)
    return shmaug.ImageRecords.from_huggingface(datasets.load_from_disk(folder),
                                                image_size=D.SHAPE[:2])


@pytest.fixture(scope="module")
def array_records(tmp_path_factory):
    pytest.importorskip("array_record")
    pytest.importorskip("tensorflow")  # writes the Examples
    from array_record.python.array_record_module import ArrayRecordWriter

    folder = tmp_path_factory.mktemp("it_array_record")
    for k in range(2):
        writer = ArrayRecordWriter(str(folder / f"train.array_record-{k:05d}"), "group_size:1")
        for i in range(k * N // 2, (k + 1) * N // 2):
            writer.write(D.example(i, i))
        writer.close()
    return shmaug.ImageRecords.from_array_record(str(folder / "train.array_record-*"),
                                                 image_size=D.SHAPE[:2])


@pytest.fixture(scope="module")
def in_memory():
    return shmaug.ImageRecords.from_bytes([D.png(i) for i in range(N)], list(range(N)),
                                          image_size=D.SHAPE[:2])


def check_exactly_once(batches: list) -> None:
    labels = np.concatenate([y for _, y in batches])
    assert sorted(labels.tolist()) == list(range(N))
    for x, y in batches:
        for image, i in zip(x, y):
            np.testing.assert_array_equal(image, D.image(int(i)))


@pytest.mark.parametrize("kind", ["tfrecords", "tars", "huggingface", "array_records",
                                  "in_memory"])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_every_record_once_and_bit_identical_for_any_worker_count(kind, method, request):
    records = request.getfixturevalue(kind)
    inline = epoch(records, shuffle=True, seed=5, workers=0)
    check_exactly_once(inline)
    pooled = epoch(records, shuffle=True, seed=5, workers=2, start_method=method)
    assert_same_batches(pooled, inline)
    augmented = dict(shuffle=True, seed=5, augment=_ops.noisy)
    assert_same_batches(epoch(records, workers=2, start_method=method, **augmented),
                        epoch(records, workers=0, **augmented))


def test_a_corrupt_record_is_stood_in_for_and_counted(tmp_path):
    members = D.wds_members(0, 6, label=lambda i: i % 2)
    members[4] = ("sample000002.png", b"garbage")  # record 2, class 0
    path = D.write_tar(tmp_path / "bad.tar", members)
    records = shmaug.ImageRecords.from_webdataset(path, image_ext="png", image_size=D.SHAPE[:2],
                                                  on_error="skip")
    runs = []
    for workers in (0, 2):
        with shmaug.Loader(records, batch_size=3, workers=workers) as loader, \
                pytest.warns(shmaug.ShmaugWarning, match=r"record 2 of .*bad\.tar.*not an "
                                                         r"image.*next readable record"):
            runs.append([(x.copy(), y.copy()) for x, y in loader])
            assert loader.stats()["skipped"] == 1
            assert loader.stats()["unreadable"] == [f"{path}[2]"]
    assert_same_batches(*runs)
    np.testing.assert_array_equal(runs[1][0][0][2], D.image(4))  # next record of class 0


def test_encoded_images_in_memory_go_to_the_workers_by_name(in_memory):
    # A list of JPEG bytes (a Parquet column) was told it held paths.
    import pickle

    from shmaug.memory.store import SharedStore

    with SharedStore() as store:
        sent = pickle.dumps(in_memory.load.sharing(store))
        assert len(sent) < 2000 and D.png(3) not in sent  # the block's name, not the bytes
    with pytest.raises(shmaug.ArgumentTypeError, match=r"holds 10 encoded images \(the first: "
                                                        r"b'\\x89PNG.*ImageRecords\.from_bytes"):
        shmaug.Loader([D.png(i) for i in range(N)], batch_size=4, workers=0)
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`images\[1\]` must be an encoded "
                                                        r"image \(bytes\); received 'b\.png'.*"
                                                        r"ImageFiles\.from_paths"):
        shmaug.ImageRecords.from_bytes([D.png(0), "b.png"])
    with pytest.raises(shmaug.ArgumentError, match=r"`images\[0\]` is empty"):
        shmaug.ImageRecords.from_bytes([b""])
    import cv2

    padded = D.png(0) + b"\0" * (-len(D.png(0)) % 4)  # (bytes past a PNG's end are ignored)
    as_ints = memoryview(np.frombuffer(padded, np.int32))  # its len() counts int32s, a
    encoded = cv2.imencode(".png", D.image(1)[:, :, ::-1])[1]  # quarter of its bytes: each
    held = shmaug.ImageRecords.from_bytes([as_ints, encoded, D.png(2)], image_size=None)
    for i in range(3):  # later image was read from the wrong offset; cv2's (n, 1) uint8 array
        np.testing.assert_array_equal(held.load(i), D.image(i))  # was refused
    pa = pytest.importorskip("pyarrow")
    column = pa.chunked_array([[D.png(0), D.png(1)], [D.png(2)]], pa.binary())  # (its scalars
    np.testing.assert_array_equal(  # were told to be encoded)
        shmaug.ImageRecords.from_bytes(column, image_size=None).load(2), D.image(2))
    labels = pa.chunked_array([["b", "a"], ["b"]])  # (its scalars made a numpy error)
    assert shmaug.ImageRecords.from_bytes(column, labels).labels.tolist() == [1, 0, 1]
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"image": [D.png(i) for i in range(3)],
                          "label": pd.Categorical(["c", "a", "c"], categories=["a", "b", "c"])})
    held = shmaug.ImageRecords.from_bytes(frame["image"].tolist(), frame["label"])
    assert held.class_names == ("a", "b", "c") and held.labels.tolist() == [2, 0, 2]  # as
    # from_dataframe numbers them: all the categories (a fold without "b" numbered c as 1)
    for given in (pd.Categorical(["c", "a", "c"], categories=["a", "b", "c"]),
                  pd.CategoricalIndex(["c", "a", "c"], categories=["a", "b", "c"])):
        assert shmaug.ImageRecords.from_bytes(frame["image"].tolist(), given).labels.tolist() \
            == [2, 0, 2]  # (no `.cat` on these: a bare AttributeError)
    ids = shmaug.ImageRecords.from_bytes(frame["image"].tolist(),
                                         pd.Series([5, 7, 5], dtype="category"))
    assert ids.labels.tolist() == [5, 7, 5]  # class ids, not names sorted as text
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`images\[0\]` holds no bytes, only the "
                                                       r"path '/x\.png'.*from_paths"):
        shmaug.ImageRecords.from_bytes([{"bytes": None, "path": "/x.png"}])
    with pytest.raises(shmaug.ArgumentError, match=r"`labels` has no label at index 1 "
                                                   r"\(None\).*dropna"):
        shmaug.ImageRecords.from_bytes(frame["image"].tolist(), ["a", None, "c"])
    with pytest.raises(shmaug.ArgumentError, match=r"`images\[2\]` is missing \(None\).*"
                                                   r"dropna"):
        shmaug.ImageRecords.from_bytes([D.png(0), D.png(1), None])
    with pytest.raises(shmaug.ArgumentTypeError, match=r"fixed-width bytes \(\|S\d+\).*"
                                                       r"trailing NUL"):  # (they did not decode)
        shmaug.ImageRecords.from_bytes(np.array([D.png(0), D.png(1)]))
    spread = np.zeros(2 * len(D.png(2)), np.uint8)
    spread[::2] = np.frombuffer(D.png(2), np.uint8)
    as_parquet = [{"bytes": D.png(0), "path": None}, np.frombuffer(D.png(1), np.uint8)[None],
                  memoryview(spread)[::2]]  # HF's Image, a row vector, a strided view
    held = shmaug.ImageRecords.from_bytes(as_parquet, image_size=None)
    for i in range(3):
        np.testing.assert_array_equal(held.load(i), D.image(i))
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`x_col`='image' holds bytes "
                                                       r"\(b'\\x89PNG.*from_bytes"):
        shmaug.ImageFiles.from_dataframe(frame, x_col="image", y_col="label")
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`x` is a DataFrame \(columns "
                                                       r"\['image', 'label'\]\).*from_bytes"):
        shmaug.Loader(frame, batch_size=2, workers=0)
    listed = pd.DataFrame({"path": pd.array(["a.png", "b.png"], dtype="string"),
                           "label": pd.Categorical(["x", "y"])})  # (pandas' own dtypes:
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`x` is a DataFrame"):  # np.dtype
        shmaug.Loader(listed, batch_size=2, workers=0)  # refused them with a bare TypeError)
    with pytest.raises(shmaug.ArgumentError, match=r"`images\[1\]` is missing"):
        shmaug.ImageRecords.from_bytes([D.png(0), pd.NA])
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`images\[0\]` is a path \(b'/data/"
                                                       r"a\.jpg'\).*from_paths"):
        shmaug.ImageRecords.from_bytes([os.fsencode("/data/a.jpg")])
    pixels = pd.DataFrame(np.zeros((4, 784), np.uint8))  # (Kaggle's MNIST CSV: flattened)
    with pytest.raises(shmaug.ArgumentError, match=r"x\.reshape\(-1, 28, 28\)"):
        shmaug.Loader(pixels, batch_size=2, workers=0)
    as_bytes = [os.fsencode(p) for p in ("/nowhere/a.jpg", "/nowhere/b.jpg")]  # (a path, not
    with pytest.raises(shmaug.ArgumentError, match=r"do not exist"):  # an encoded image)
        shmaug.ImageFiles.from_paths(as_bytes)
    named = shmaug.ImageRecords.from_bytes([D.png(i) for i in range(4)], ["b", "a", "b", "a"],
                                           image_size=None)
    assert named.class_names == ("a", "b") and named.labels.tolist() == [1, 0, 1, 0]
    assert "from_bytes(<4 encoded images>, image_size=None)" in repr(named)


def test_resume_and_shards_per_host_hold_on_records(tars):
    """A loader over records resumes from its state (through JSON) bit for bit, and two
    hosts' shards split every epoch's records between them, once each."""
    import json

    kwargs = dict(batch_size=3, shuffle=True, seed=2, augment=_ops.noisy)
    with shmaug.Loader(tars, workers=2, **kwargs) as whole:
        expected = [(x.copy(), y.copy()) for _ in range(2) for x, y in whole]
    with shmaug.Loader(tars, workers=2, **kwargs) as first:
        it = iter(first)
        got = [tuple(a.copy() for a in next(it)) for _ in range(2)]
        state = json.loads(json.dumps(first.state_dict()))
        del it
    with shmaug.Loader(tars, workers=2, **kwargs) as second:
        second.load_state_dict(state)
        while len(got) < len(expected):
            got.extend((x.copy(), y.copy()) for x, y in second)
    assert_same_batches(got, expected)
    seen = []
    for host in range(2):
        with shmaug.Loader(tars, workers=0, num_shards=2, shard_index=host, **kwargs) as loader:
            seen += [int(i) for _, y in loader for i in y]
    assert sorted(seen) == list(range(N))
