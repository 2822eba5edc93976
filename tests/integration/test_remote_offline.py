"""A bucket's disk cache serves a new program when the bucket is down, and offline
(``SHMAUG_OFFLINE=1``), for TFRecord, WebDataset and image files, against a real S3 server
(moto) started per test, since some tests stop it (issue 51, section 2).

- A run ends with every object it read in the disk cache: a loader's ``close`` stops its
  workers, whose exit waits (bounded) for the downloads and writes still on their way.
- A source whose shards (or listing) a record keeps in ``index_cache`` (``listing_cache``),
  and whose objects the disk cache holds, is built and read with the server stopped.
- Offline, nothing reaches the server, and what the caches lack is named.
"""

from __future__ import annotations

import io
import logging
import warnings
import struct
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.errors import RemoteError
from shmaug.sources.cache.disk_cache import DiskCache
from shmaug.sources.formats.tfrecord import masked_crc
from tests import records_data as D
from tests._helpers import assert_same_batches
from tests.integration._s3 import BUCKET, KEY, SECRET, options, start_server

pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
pytest.importorskip("moto.server", reason="needs moto[server]")
boto3 = pytest.importorskip("boto3", reason="needs boto3 (moto[server] brings it)")

pytestmark = pytest.mark.timeout(120)
KINDS = ("tfrecord", "webdataset", "files")
OBJECTS = 4  # shards (two records each) or image files, per dataset
SLOW_S = 0.3  # a write into the cache made slower (well inside the exit's bound)


@pytest.fixture
def server() -> Iterator[dict[str, Any]]:
    """A fresh S3 server with its bucket; ``stop()`` it to take the bucket down."""
    process, endpoint = start_server()
    state: dict[str, Any] = {"endpoint": endpoint, "up": True}

    def stop() -> None:
        if state["up"]:
            state["up"] = False
            process.stop()

    state["stop"] = stop
    client(endpoint).create_bucket(Bucket=BUCKET)
    try:
        yield state
    finally:
        stop()


def client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, region_name="us-east-1")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tfrecord(records: list[tuple[bytes, int]]) -> bytes:
    """TFRecord frames of ``tf.train.Example``s with an image and an int64 label, written by
    hand (no TensorFlow: a test of seconds)."""
    out = b""
    for image, label in records:
        feature = {b"image/encoded": _field(1, _field(1, image)),  # bytes_list
                   b"image/class/label": _field(3, _field(1, _varint(label)))}  # int64_list
        example = _field(1, b"".join(_field(1, _field(1, k) + _field(2, v))
                                     for k, v in feature.items()))
        head = struct.pack("<Q", len(example))
        out += (head + struct.pack("<I", masked_crc(head)) + example
                + struct.pack("<I", masked_crc(example)))
    return out


def _png(seed: int) -> bytes:
    array = np.random.default_rng(seed).integers(0, 256, (9, 7, 3), np.uint8)
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, "PNG")
    return buf.getvalue()


def put(endpoint: str, kind: str, folder: Path) -> None:
    """``OBJECTS`` objects of ``kind`` under ``folder`` and under ``kind/`` in the bucket."""
    s3c = client(endpoint)
    for k in range(OBJECTS):
        if kind == "tfrecord":
            name = f"train-{k}.tfrecord"
            data = _tfrecord([(D.png(2 * k + i), 2 * k + i) for i in range(2)])
        elif kind == "webdataset":
            name = f"shard-{k}.tar"
            data = Path(D.write_tar(folder / "tmp.tar", D.wds_members(
                2 * k, 2 * k + 2, label=lambda i: i))).read_bytes()
        else:
            name = f"{'ant' if k % 2 else 'bee'}/{k}.png"
            data = _png(k)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        s3c.put_object(Bucket=BUCKET, Key=f"{kind}/{name}", Body=data)


def build(kind: str, root: str, caches: Path | None = None, endpoint: str = "",
          index: str = "index") -> Any:
    """The source of ``kind`` under ``root``: a local folder, or (``caches``) the bucket,
    with its disk cache (``caches/data``) and its record (``caches/<index>``)."""
    remote: dict[str, Any] = {} if caches is None else dict(
        storage_options=options(endpoint), cache_dir=caches / "data")
    keep = {} if caches is None else {
        "listing_cache" if kind == "files" else "index_cache": caches / index}
    if kind == "tfrecord":
        return shmaug.ImageRecords.from_tfrecord(f"{root}/train-*.tfrecord",
                                                 image_size=D.SHAPE[:2], **remote, **keep)
    if kind == "webdataset":
        return shmaug.ImageRecords.from_webdataset(
            f"{root}/shard-{{0..{OBJECTS - 1}}}.tar", image_ext="png", image_size=D.SHAPE[:2],
            **remote, **keep)
    return shmaug.ImageFiles.from_directory(f"{root}/", image_size=(8, 8), **remote, **keep)


def epochs(source: Any, count: int = 1, **kwargs: Any) -> list:
    kwargs = {"workers": 2, "start_method": "fork", **kwargs}
    with shmaug.Loader(source, batch_size=2, shuffle=True, seed=3, **kwargs) as loader:
        return [(x.copy(), y.copy()) for _ in range(count) for x, y in loader]


def kept(caches: Path) -> list[Path]:
    return sorted((caches / "data").glob("*.data"))


def requests(caplog: pytest.LogCaptureFixture) -> int:
    """Requests for the dataset's objects the server answered (its own log)."""
    return sum(f"/{BUCKET}" in r.getMessage() for r in caplog.records if r.name == "werkzeug")


def filled(server: dict[str, Any], kind: str, tmp_path: Path) -> tuple[Path, Path, list]:
    """The dataset in the bucket and on disk, one epoch read through the caches (a
    loader's close leaves them full); the local folder, the caches and the local epoch."""
    folder, caches = tmp_path / "local", tmp_path / "caches"
    folder.mkdir()
    put(server["endpoint"], kind, folder)
    local = epochs(build(kind, str(folder)), workers=0)
    assert_same_batches(epochs(build(kind, f"s3://{BUCKET}/{kind}", caches,
                                     server["endpoint"])), local)
    assert len(kept(caches)) == OBJECTS
    return folder, caches, local


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_ends_with_every_object_it_read_in_the_disk_cache(
        server, kind, tmp_path, monkeypatch):
    """Every write into the cache waits until the consumer has read two epochs (a file
    appears), then takes ``SLOW_S`` more: the loader's close stops its (forked) workers while
    each is on its way. Before the fix, the workers ended without them (a ``.lock`` and no
    ``.data``); now their exit waits (within ``EXIT_WAIT_S``)."""
    write, read = DiskCache._store, tmp_path / "read"

    def late(self: DiskCache, *args: Any, **kwargs: Any) -> bool:
        deadline = time.monotonic() + 30
        while not read.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(SLOW_S)
        return write(self, *args, **kwargs)

    monkeypatch.setattr(DiskCache, "_store", late)  # inherited by the forked workers
    put(server["endpoint"], kind, tmp_path)
    caches = tmp_path / "caches"
    source = build(kind, f"s3://{BUCKET}/{kind}", caches, server["endpoint"])
    with shmaug.Loader(source, batch_size=2, shuffle=True, seed=3, workers=2,
                       start_method="fork") as loader:
        for _ in range(2):
            assert sum(len(y) for _, y in loader) == len(source)
        read.touch()
    assert len(kept(caches)) == OBJECTS
    assert not list((caches / "data").glob("*.part"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_source_builds_and_reads_from_the_cache_with_the_bucket_down(
        server, kind, tmp_path, caplog):
    _, caches, local = filled(server, kind, tmp_path)
    server["stop"]()
    caplog.set_level(logging.WARNING, logger="shmaug")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        source = build(kind, f"s3://{BUCKET}/{kind}", caches, server["endpoint"])
    assert_same_batches(epochs(source), local)
    told = "".join(str(w.message) for w in said if w.category is shmaug.ShmaugWarning)
    if kind != "files":  # (a listing kept is reused, bucket or not)
        assert "built without the bucket" in told and "SHMAUG_OFFLINE=1" in told, told
    assert SECRET not in caplog.text and SECRET not in told


@pytest.mark.parametrize("kind", KINDS)
def test_offline_reaches_nothing_and_names_what_the_caches_lack(
        server, kind, tmp_path, caplog, monkeypatch):
    _, caches, local = filled(server, kind, tmp_path)
    monkeypatch.setenv("SHMAUG_OFFLINE", "1")  # the workers take the parent's environment
    caplog.set_level(logging.INFO)
    caplog.clear()
    url = f"s3://{BUCKET}/{kind}"
    assert_same_batches(epochs(build(kind, url, caches, server["endpoint"])), local)
    assert requests(caplog) == 0  # the server is up: nothing asked it
    with pytest.raises(RemoteError, match=r"SHMAUG_OFFLINE=1 keeps shmaug off the network.*"
                                          r"(index_cache|listing_cache)="):
        build(kind, url, caches, server["endpoint"], index="empty")
    kept(caches)[0].unlink()
    if kind == "files":  # the listing is kept: the missing file is named as it is read
        with pytest.raises(RemoteError, match=rf"Could not read '{url}/.*\.png': SHMAUG_OFF"
                                              r"LINE=1 .*cache_dir=.* does not hold it"):
            epochs(build(kind, url, caches, server["endpoint"]), workers=0)
    else:
        with pytest.raises(RemoteError, match=rf"1 of the {OBJECTS} shard\(s\) are not in the "
                                              rf"disk cache .*'{url}/.*SHMAUG_OFFLINE=1"):
            build(kind, url, caches, server["endpoint"])
    assert requests(caplog) == 0
    assert SECRET not in caplog.text


def test_gzip_shards_read_whole_at_construction_are_kept_for_a_build_without_the_bucket(
        server, tmp_path, monkeypatch):
    """A GZIP TFRecord is read whole when its source is built; those bytes are written to
    the disk cache then, not queued: the queue's bound on held bytes (``QUEUED_BYTES``,
    here 1 byte, as a shard of more than 256 MiB meets it) dropped them, and the build
    without the bucket lacked them."""
    import gzip

    from shmaug.sources.cache import disk_cache

    monkeypatch.setattr(disk_cache, "QUEUED_BYTES", 1)
    s3c, folder = client(server["endpoint"]), tmp_path / "local"
    folder.mkdir()
    for k in range(2):
        data = gzip.compress(_tfrecord([(D.png(2 * k + i), 2 * k + i) for i in range(2)]))
        (folder / f"train-{k}.tfrecord.gz").write_bytes(data)
        s3c.put_object(Bucket=BUCKET, Key=f"gz/train-{k}.tfrecord.gz", Body=data)
    caches = tmp_path / "caches"

    def source(root: str, remote: bool) -> Any:
        extra: dict[str, Any] = dict(
            storage_options=options(server["endpoint"]), cache_dir=caches / "data",
            index_cache=caches / "index") if remote else {}
        return shmaug.ImageRecords.from_tfrecord(f"{root}/train-*.tfrecord.gz",
                                                 image_size=D.SHAPE[:2], **extra)

    local = epochs(source(str(folder), False), workers=0)
    source(f"s3://{BUCKET}/gz", True)
    assert len(kept(caches)) == 2
    server["stop"]()
    with pytest.warns(shmaug.ShmaugWarning, match="built without the bucket"):
        rebuilt = source(f"s3://{BUCKET}/gz", True)
    assert_same_batches(epochs(rebuilt, workers=0), local)
