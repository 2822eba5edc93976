"""ImageRecords.from_webdataset on tar shards written by tarfile and by webdataset.

No process is started: the reader runs in this process, as a worker runs it.
"""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pytest

import shmaug
from tests import records_data as D


def test_images_and_int_labels_across_shards(tmp_path):
    shards = [D.write_tar(tmp_path / f"s{k}.tar", D.wds_members(4 * k, 4 * k + 4))
              for k in range(2)]
    records = shmaug.ImageRecords.from_webdataset(str(tmp_path / "s*.tar"), image_ext="png",
                                                  image_size=D.SHAPE[:2])
    assert len(records) == 8 and records.labels.tolist() == [i % 3 for i in range(8)]
    assert records.class_names == ("0", "1", "2")
    for i in range(8):
        np.testing.assert_array_equal(records.load(i), D.image(i))
    again = pickle.loads(pickle.dumps(records))
    np.testing.assert_array_equal(again.load(5), D.image(5))
    assert records.load.name(5) == f"{shards[1]}[1]"
    assert "from_webdataset(" in repr(records) and "8 records in 2 shard(s)" in repr(records)


# webdataset's reader leaves its shard open for the garbage collector to close.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_written_by_webdataset_with_class_name_labels(tmp_path):
    wds = pytest.importorskip("webdataset")
    path = str(tmp_path / "wds-000000.tar")
    with wds.TarWriter(path) as sink:
        for i in range(5):
            sink.write({"__key__": f"k{i:03d}", "png": D.png(i), "txt": "bee" if i % 2 else "ant"})
    records = shmaug.ImageRecords.from_webdataset(path, image_ext="jpg;png", label_ext="txt",
                                                  image_size=D.SHAPE[:2])
    assert records.class_names == ("ant", "bee") and records.labels.tolist() == [0, 1, 0, 1, 0]
    # webdataset's own reader yields the same bytes for each key
    theirs = [s["png"] for s in wds.WebDataset(path, shardshuffle=False)]
    for i, data in enumerate(theirs):
        assert bytes(records.load.table.fetch(i)) == data
        np.testing.assert_array_equal(records.read(i), D.image(i))


def test_missing_label_missing_image_and_compressed_shard(tmp_path):
    members = D.wds_members(0, 3)
    del members[3]  # sample 1's .cls
    path = D.write_tar(tmp_path / "a.tar", members)
    with pytest.raises(shmaug.ArgumentError,
                       match=r"sample 1 \(key 'sample000001'\) of .*a\.tar.*no label member "
                             r"'sample000001\.cls'.*label_ext=None"):
        shmaug.ImageRecords.from_webdataset(path, image_ext="png")
    bare = shmaug.ImageRecords.from_webdataset(path, image_ext="png", label_ext=None,
                                               image_size=(2, 2))
    assert len(bare) == 3 and bare.labels is None
    with pytest.raises(shmaug.ArgumentError, match=r"no image member with `image_ext` "
                                                   r"\['jpg'\].*\['cls', 'png'\]"):
        shmaug.ImageRecords.from_webdataset(path)
    packed = tmp_path / "b.tar.gz"
    packed.write_bytes(gzip.compress((tmp_path / "a.tar").read_bytes()))
    with pytest.raises(shmaug.ArgumentError, match=r"uncompressed tar.*decompress"):
        shmaug.ImageRecords.from_webdataset(str(packed), image_ext="png")


def test_a_sparse_or_huge_label_member_is_refused_before_it_is_read(tmp_path):
    """A 10 KB shard whose label member was a sparse file claiming 3 GiB took 18 GiB of
    memory in the main process while indexing (tarfile fills the holes with zeros)."""
    import io
    import tarfile

    sparse = tmp_path / "sparse.tar"
    with tarfile.open(sparse, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in D.wds_members(0, 1)[:1]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo("sample000000.cls")
        info.pax_headers = {"GNU.sparse.map": "0,0", "GNU.sparse.size": str(3 << 30)}
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(shmaug.ArgumentError, match=r"sample000000\.cls.*sparse tar member.*"
                                                   r"3,221,225,472 bytes"):
        shmaug.ImageRecords.from_webdataset(str(sparse), image_ext="png")
    members = D.wds_members(0, 2)
    members[3] = ("sample000001.cls", b"1" + b" " * 100_000)  # a label of 100 KB
    with pytest.raises(shmaug.ArgumentError, match=r"label member of sample 1 .*100,001 bytes"):
        shmaug.ImageRecords.from_webdataset(D.write_tar(tmp_path / "big.tar", members),
                                            image_ext="png")


def test_a_huge_header_extension_or_image_member_is_refused_before_it_is_read(tmp_path):
    """A pax record or a GNU long name is read whole by tarfile: one of 4 GiB (holes on disk)
    took 4 GB while indexing; an image member of 6 GiB was read in one call by a worker."""
    import io
    import tarfile

    pax = tmp_path / "pax.tar"
    with tarfile.open(pax, "w", format=tarfile.PAX_FORMAT) as tar:
        name, data = D.wds_members(0, 1)[0]
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.pax_headers = {"comment": "x" * (2 << 20)}  # a pax record of 2 MiB
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(shmaug.ArgumentError, match=r"pax\.tar.*a header extension of "
                                                   r"[\d,]+ bytes"):
        shmaug.ImageRecords.from_webdataset(str(pax), image_ext="png", label_ext=None)
    big = tmp_path / "big.tar"
    info = tarfile.TarInfo("sample000000.png")
    info.size = (1 << 30) + 512
    with open(big, "wb") as f:  # the header, then holes: nothing of 1 GiB is written
        f.write(info.tobuf(tarfile.USTAR_FORMAT))
        f.truncate(512 + info.size + 1024)
    with pytest.raises(shmaug.ArgumentError, match=r"image member of sample 0 .*1,073,742,336 "
                                                   r"bytes"):
        shmaug.ImageRecords.from_webdataset(str(big), image_ext="png", label_ext=None)


def test_a_member_met_twice_is_refused_and_scattered_members_are_one_sample(tmp_path):
    """The last of a key's members was kept, and a sample went missing without a word; a
    tar written without --sort=name (a sample's members apart) reads as it did."""
    for members in (D.wds_members(0, 2) + D.wds_members(1, 2)[:1],  # adjacent
                    D.wds_members(0, 2) + D.wds_members(0, 1, label=lambda i: 2)):  # apart
        path = D.write_tar(tmp_path / "twice.tar", members)
        with pytest.raises(shmaug.ArgumentError, match=r"sample \d \(key 'sample00000\d'\) "
                                                       r"of .*twice\.tar.*\.(png|cls)' twice"
                                                       r".*Fix"):
            shmaug.ImageRecords.from_webdataset(path, image_ext="png")
    scattered = D.wds_members(0, 2)
    scattered = scattered[1::2] + scattered[0::2]  # every label first, then every image
    path = D.write_tar(tmp_path / "scattered.tar", scattered)
    records = shmaug.ImageRecords.from_webdataset(path, image_ext="png",
                                                  image_size=D.SHAPE[:2])
    assert records.labels.tolist() == [0, 1]
    np.testing.assert_array_equal(records.load(1), D.image(1))


def test_not_an_image_is_skipped_like_a_file(tmp_path):
    members = D.wds_members(0, 4, label=lambda i: 0)
    members[2] = ("sample000001.png", b"garbage")
    path = D.write_tar(tmp_path / "c.tar", members)
    strict = shmaug.ImageRecords.from_webdataset(path, image_ext="png", image_size=(6, 5))
    with pytest.raises(shmaug.ImageReadError,
                       match=r"record 1 of .*c\.tar' \(byte offset \d+\).*not an image"):
        strict.read(1)
    lenient = shmaug.ImageRecords.from_webdataset(path, image_ext="png", image_size=(6, 5),
                                                  on_error="skip")
    np.testing.assert_array_equal(lenient.load(1), D.image(2))


def test_a_missing_extra_is_one_line_naming_it(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("datasets", "array_record",
                                                          "tensorflow_datasets") else real(name, *a))
    for call, extra in ((lambda: shmaug.ImageRecords.from_huggingface(None), "huggingface"),
                        (lambda: shmaug.ImageRecords.from_array_record("x"), "arrayrecord"),
                        (lambda: shmaug.ImageRecords.from_tfds("mnist"), "tfds")):
        with pytest.raises(ModuleNotFoundError) as info:
            call()
        assert str(info.value).count("\n") == 0 and f'"shmaug[{extra}]"' in str(info.value)


def test_pure_python_crc32c_agrees_and_its_slowness_is_said(monkeypatch, tmp_path):
    from shmaug.sources.formats import tfrecord as T

    assert T._crc32c_python()(b"123456789") == 0xE3069283 == T.crc32c(b"123456789")
    monkeypatch.setattr(T, "SLOW_CRC", True)
    monkeypatch.setattr(T, "SLOW_CRC_FIX", "google-crc32c is not installed. Fix: pip install "
                                           "google-crc32c.")
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.warns(shmaug.ShmaugWarning, match=r'pure Python.*Fix: pip install'), \
            pytest.raises(shmaug.ArgumentError, match=r"hold no record"):
        shmaug.ImageRecords.from_tfrecord(str(tmp_path / "empty.tfrecord"))


def test_index_cache_is_reused_while_the_shard_is_unchanged(tmp_path, monkeypatch):
    from shmaug.sources.formats import tar as _tar

    path = D.write_tar(tmp_path / "s.tar", D.wds_members(0, 4, label=lambda i: "ab"[i % 2]))
    cache = tmp_path / "cache"
    first = shmaug.ImageRecords.from_webdataset(path, image_ext="png", index_cache=cache,
                                                image_size=(6, 5))
    assert len(list(cache.glob("*.npz"))) == 1 and "index_cache=" in repr(first)

    def no_scan(*args):
        raise AssertionError("scanned again")

    monkeypatch.setattr(_tar, "scan", no_scan)
    again = shmaug.ImageRecords.from_webdataset(path, image_ext="png", index_cache=cache,
                                                image_size=(6, 5))
    assert again.class_names == ("a", "b") and again.labels.tolist() == [0, 1, 0, 1]
    np.testing.assert_array_equal(again.load(3), D.image(3))
    D.write_tar(tmp_path / "s.tar", D.wds_members(0, 6))  # changed: scanned again
    with pytest.raises(AssertionError, match="scanned again"):
        shmaug.ImageRecords.from_webdataset(path, image_ext="png", index_cache=cache)


def test_a_buckets_failure_on_a_shards_first_read_is_the_buckets_not_the_formats():
    """A ``RemoteError`` is an ``OSError`` too; on a shard's first read it must come through
    as the bucket's failure, not as "cannot read ... as an uncompressed tar"."""
    import io

    from shmaug.errors import RemoteError
    from shmaug.sources.formats import tar as _tar

    class Failing(io.BytesIO):  # a bucket's object whose first read keeps failing
        def read(self, size=-1) -> bytes:
            raise RemoteError("Could not read 's3://b/shard-0.tar' after 4 attempts")

    with pytest.raises(RemoteError, match="after 4 attempts"):
        _tar.scan("s3://b/shard-0.tar", ["png"], "cls", fileobj=Failing(b"x" * 1024))
    with pytest.raises(shmaug.ArgumentError, match="as an uncompressed tar"):
        _tar.scan("not.tar", ["png"], "cls", fileobj=io.BytesIO(b"not a tar at all" * 40))
