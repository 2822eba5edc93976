"""Photos at their own size, cropped at decode time, through real workers and real stores.

A folder of JPEGs of many sizes (and a PNG) read with ``image_size=None`` and a pipeline that
starts with ``random_resized_crop``: the batches are bit-identical for any worker count and
start method; they equal what the whole decode gives within the stated tolerance; the same
JPEG bytes in TFRecord and WebDataset shards, and in a bucket (a real S3 server), give the
same batches as the files; a source without a size and a pipeline without one is refused
when the loader is built, naming both and the fix.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

import shmaug
from shmaug.errors import ArgumentError
from shmaug.ops import Compose, Maybe, Op
from tests import records_data as D
from tests._helpers import assert_same_batches
from tests.unit.test_windows import PARTIAL_TOLERANCE, photo

pytestmark = pytest.mark.timeout(180)
CLASSES = ("cat", "dog")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """9 JPEGs of 140-260 x 180-330 px at quality 70-95 (one greyscale), and one PNG."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    for i in range(9):
        (root / CLASSES[i % 2]).mkdir(exist_ok=True)
        h, w = int(rng.integers(140, 260)), int(rng.integers(180, 330))
        image = photo(h, w, i)[..., ::-1]
        if i == 4:
            image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        cv2.imwrite(str(root / CLASSES[i % 2] / f"{i}.jpg"), image,
                    [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(70, 96))])
    cv2.imwrite(str(root / "dog" / "9.png"), photo(120, 150, 9)[..., ::-1])
    return root


def pipeline(size: int = 48) -> Compose:
    return Compose([Op("random_resized_crop", height=size, width=size), Maybe(Op("hflip"))])


def epoch(x, **kwargs) -> list:
    kwargs = {"batch_size": 4, "shuffle": True, "seed": 7, "augment": pipeline(), **kwargs}
    with shmaug.Loader(x, x.labels, **kwargs) as loader:
        return [(xb.copy(), np.array(yb)) for xb, yb in loader]


def test_any_worker_count_and_start_method_gives_the_same_batches(folder) -> None:
    files = shmaug.ImageFiles.from_directory(folder, image_size=None)
    assert files.output_shape == (None, None, 3)
    inline = epoch(files, workers=0)
    assert inline[0][0].shape == (4, 48, 48, 3) and inline[0][0].dtype == np.uint8
    for kwargs in ({"workers": 2, "start_method": "fork"}, {"workers": 1, "start_method": "spawn"}):
        assert_same_batches(epoch(files, **kwargs), inline)


def test_the_decode_time_crop_is_the_whole_decodes_within_tolerance(folder, monkeypatch) -> None:
    files = shmaug.ImageFiles.from_directory(folder, image_size=None)
    partial = epoch(files, workers=0)
    monkeypatch.setenv("SHMAUG_JPEG", "whole")
    whole = epoch(files, workers=0)
    for (a, la), (b, lb) in zip(partial, whole):
        np.testing.assert_array_equal(la, lb)
        diff = np.abs(a.astype(int) - b.astype(int)).mean()
        assert diff <= PARTIAL_TOLERANCE["reduced scale"], diff


def test_a_pipeline_that_fixes_no_size_is_refused_naming_the_fix(folder) -> None:
    files = shmaug.ImageFiles.from_directory(folder, image_size=None)
    for augment in (None, Compose([Op("hflip")]), Op("crop", height=0.5, width=0.5)):
        with pytest.raises(ArgumentError, match=r"image_size=None.*random_resized_crop"):
            shmaug.Loader(files, files.labels, batch_size=4, augment=augment)
    with shmaug.Loader(files, files.labels, batch_size=4, workers=0,
                       augment=Op("center_resized_crop", height=32, width=40)) as loader:
        assert next(iter(loader))[0].shape == (4, 32, 40, 3)
    # A plain crop in pixels was told to "start augment with a crop to a size": it is told
    # why it does not count, and that output_shape= takes it where every photo holds it.
    crop = Op("center_crop", height=32, width=100)
    with pytest.raises(ArgumentError, match=r"`Op\('crop', \.\.\.\)` fails on a smaller one.*"
                                            r"pass `output_shape=`"):
        shmaug.Loader(files, files.labels, batch_size=4, augment=crop)
    with shmaug.Loader(files, files.labels, batch_size=4, workers=0, augment=crop,
                       output_shape=(32, 100, 3)) as loader:
        assert next(iter(loader))[0].shape == (4, 32, 100, 3)


def test_a_function_of_ones_own_that_sizes_photos_is_trusted(folder) -> None:
    files = shmaug.ImageFiles.from_directory(folder, image_size=None)

    def square(image, rng):
        return cv2.resize(image, (24, 24))

    with shmaug.Loader(files, files.labels, batch_size=5, augment=square, workers=0) as loader:
        assert next(iter(loader))[0].shape == (5, 24, 24, 3)


def test_settings_that_need_a_size_say_so(folder, tmp_path) -> None:
    with pytest.raises(ArgumentError, match="crop_to_aspect_ratio=True.*image_size"):
        shmaug.ImageFiles.from_directory(folder, image_size=None, crop_to_aspect_ratio=True)
    with pytest.raises(ArgumentError, match="`image_size` must be set to pack"):
        shmaug.pack(shmaug.ImageFiles.from_directory(folder, image_size=None), tmp_path / "p")


def jpeg_bytes(folder: Path) -> tuple[list[bytes], list[int]]:
    files = shmaug.ImageFiles.from_directory(folder, image_size=None)
    jpegs = [(Path(p).read_bytes(), int(c)) for p, c in zip(files.paths, files.classes)
             if p.endswith(".jpg")]
    return [d for d, _ in jpegs], [c for _, c in jpegs]


def test_jpeg_bytes_in_record_shards_give_the_files_batches(folder, tmp_path) -> None:
    pytest.importorskip("tensorflow")
    import tensorflow as tf

    data, labels = jpeg_bytes(folder)
    paths = [str(tmp_path / f"{i}.jpg") for i in range(len(data))]
    for path, d in zip(paths, data):
        Path(path).write_bytes(d)
    files = shmaug.ImageFiles.from_paths(paths, labels, image_size=None)
    shard = str(tmp_path / "train.tfrecord")
    with tf.io.TFRecordWriter(shard) as writer:
        for d, label in zip(data, labels):
            writer.write(D.example(0, label, data=d))
    tar = D.write_tar(tmp_path / "train.tar", [m for i, (d, label) in enumerate(zip(data, labels))
                                               for m in ((f"{i:04d}.jpg", d),
                                                         (f"{i:04d}.cls", str(label).encode()))])
    expected = epoch(files, workers=0)
    for records in (shmaug.ImageRecords.from_tfrecord(shard, image_size=None),
                    shmaug.ImageRecords.from_webdataset(tar, image_size=None)):
        assert_same_batches(epoch(records, workers=2, start_method="fork"), expected)


def test_jpegs_in_a_bucket_give_the_local_batches(folder, tmp_path) -> None:
    pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
    pytest.importorskip("moto.server", reason="needs moto[server]")
    boto3 = pytest.importorskip("boto3")
    from tests.integration._s3 import BUCKET, KEY, SECRET, options, start_server

    server, endpoint = start_server()
    try:
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                              aws_secret_access_key=SECRET, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        for path in sorted(folder.rglob("*.*")):
            client.upload_file(str(path), BUCKET, f"photos/{path.relative_to(folder).as_posix()}")
        remote = shmaug.ImageFiles.from_directory(f"s3://{BUCKET}/photos/", image_size=None,
                                                  storage_options=options(endpoint))
        local = shmaug.ImageFiles.from_directory(folder, image_size=None)
        assert_same_batches(epoch(remote, workers=2, start_method="fork"),
                            epoch(local, workers=0))
    finally:
        server.stop()


def test_an_unreadable_jpeg_is_stood_in_for_and_counted(folder, tmp_path) -> None:
    pytest.importorskip("turbojpeg", reason="the check at load is libjpeg-turbo's header read")
    broken = tmp_path / "cat" / "broken.jpg"
    broken.parent.mkdir()
    data = (folder / "cat" / "0.jpg").read_bytes()
    broken.write_bytes(data[:data.index(b"\xff\xda")])  # a frame header, and no scan
    paths = [str(p) for p in sorted(folder.glob("cat/*.jpg"))] + [str(broken)]
    files = shmaug.ImageFiles.from_paths(paths, [0] * len(paths), image_size=None,
                                         on_error="skip")
    with pytest.warns(shmaug.ShmaugWarning, match="broken.jpg"):
        with shmaug.Loader(files, files.labels, batch_size=len(paths), augment=pipeline(),
                           workers=2, start_method="fork") as loader:
            (xb, _), = list(loader)
            stats = loader.stats()
    assert xb.shape == (len(paths), 48, 48, 3)
    assert stats["skipped"] == 1 and any("broken.jpg" in u for u in stats["unreadable"])


_BIG_SCAN = """
import resource, sys
import shmaug
from shmaug.ops import Compose, Op
files = shmaug.ImageFiles([sys.argv[1]] * 2, image_size=None)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with shmaug.Loader(files, batch_size=2, workers=0,
                   augment=Compose([Op("center_resized_crop", height=64, width=64)])) as loader:
    assert loader.batch(0)[0].shape == (2, 64, 64, 3)
print("grew MiB:", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_the_loaders_start_does_not_decode_a_cropped_scan_whole(tmp_path):
    """A document engineer's 8000x6000 scans: the loader's start decoded sample 0 whole for
    its value range (the crop itself decodes a window at a DCT scale), 280 MiB and ten
    epochs' time before the first batch. 6000x6000 here: 103 MiB whole, a few cropped."""
    import subprocess
    import sys

    ramp = np.linspace(0, 255, 6000, dtype=np.float32).astype(np.uint8)
    scan = np.dstack([np.add.outer(ramp, ramp // 2).astype(np.uint8)] * 3)
    path = tmp_path / "scan.jpg"
    cv2.imwrite(str(path), scan, [cv2.IMWRITE_JPEG_QUALITY, 80])
    out = subprocess.run([sys.executable, "-c", _BIG_SCAN, str(path)], capture_output=True,
                         text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
    grew = float(out.stdout.split("grew MiB:")[1])
    assert grew < 30, out.stdout  # (decoded whole: 56-212 MiB more here, cropped 0-9)


def test_a_value_range_narrower_than_the_files_is_refused_with_a_decode_time_crop(tmp_path):
    """A diff review's: the probe no longer decoding sample 0 let value_range=(0, 1) over
    uint8 JPEGs through where a decode-time crop came first (refused with image_size set):
    the ops then returned wrong pixels."""
    path = tmp_path / "photo.jpg"
    cv2.imwrite(str(path), np.full((40, 48, 3), 200, np.uint8))
    files = shmaug.ImageFiles([str(path)] * 2, image_size=None)
    with pytest.raises(ArgumentError, match=r"value_range"):
        shmaug.Loader(files, batch_size=2, workers=0, augment=Compose(
            [Op("center_resized_crop", height=16, width=16), Op("invert")],
            value_range=(0, 1)))
