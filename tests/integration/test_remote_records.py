"""Record shards and bucket listings in object storage: the real S3 server (moto) of the
``s3`` fixture (tests/integration/conftest.py), as in test_remote.py.

TFRecord and WebDataset shards uploaded to the server and read through s3:// must give the
batches of the same shards on local disk, bit for bit, under fork and spawn; a shard deleted
after indexing and the server stopped mid-epoch give their documented errors without hanging
or leaving anything behind (the conftest guard); the index and listing caches are reused, so a
second construction neither streams the shards nor lists the bucket again.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import shmaug
from shmaug.errors import ImageReadError
from tests import records_data as D
from tests._helpers import assert_same_batches
from tests.integration._s3 import BUCKET, KEY, SECRET, options, stop_server_mid_epoch

pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
pytest.importorskip("moto.server", reason="needs moto[server]")
boto3 = pytest.importorskip("boto3", reason="needs boto3 (moto[server] brings it)")

pytestmark = pytest.mark.timeout(120)
N = 10  # records: two shards of five, record i labelled i


def client(endpoint: str):
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, region_name="us-east-1")


def put_shards(endpoint: str, folder: Path, prefix: str) -> None:
    """Write two TFRecord shards (the second GZIP) and two tars under ``folder``, and the same
    bytes under ``prefix`` in the bucket."""
    D.write_tfrecords(folder / "tfrecord", 2, N // 2, label=lambda i: i, gzip_last=True)
    (folder / "wds").mkdir()
    for k in range(2):
        D.write_tar(folder / "wds" / f"shard-{k}.tar",
                    D.wds_members(k * N // 2, (k + 1) * N // 2, label=lambda i: i))
    s3c = client(endpoint)
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            s3c.upload_file(str(path), BUCKET, f"{prefix}/{path.relative_to(folder).as_posix()}")


@pytest.fixture(scope="module")
def shards(s3, tmp_path_factory):
    pytest.importorskip("tensorflow")
    endpoint, _ = s3
    folder = tmp_path_factory.mktemp("shards")
    put_shards(endpoint, folder, "records")
    return endpoint, folder


def build(kind: str, where: str, **kwargs):
    """The same shards as local paths or URLs: TFRecords by glob, tars by WebDataset braces."""
    if kind == "tfrecord":
        return shmaug.ImageRecords.from_tfrecord(f"{where}/tfrecord/train-*",
                                                 image_size=D.SHAPE[:2], **kwargs)
    return shmaug.ImageRecords.from_webdataset(f"{where}/wds/shard-{{0..1}}.tar",
                                               image_ext="png", image_size=D.SHAPE[:2], **kwargs)


def epoch(source, **kwargs) -> list:
    with shmaug.Loader(source, batch_size=4, **kwargs) as loader:
        return [(x.copy(), y.copy()) for x, y in loader]


@pytest.mark.parametrize("kind", ["tfrecord", "tar"])
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_shards_in_a_bucket_give_the_local_shards_batches(shards, kind, method):
    endpoint, folder = shards
    remote = build(kind, f"s3://{BUCKET}/records", storage_options=options(endpoint))
    local = build(kind, str(folder))
    assert len(remote) == len(local) == N and remote.class_names == local.class_names
    assert remote.table.shards[0].startswith(f"s3://{BUCKET}/records/")
    kwargs = dict(shuffle=True, seed=5, workers=2, start_method=method)
    got = epoch(remote, **kwargs)
    assert_same_batches(got, epoch(local, **kwargs))
    assert sorted(np.concatenate([y for _, y in got]).tolist()) == list(range(N))
    assert SECRET not in repr(remote) and "'secret': '***'" in repr(remote)


def test_a_shard_deleted_after_indexing_is_an_error_naming_it(shards):
    endpoint, folder = shards
    s3c = client(endpoint)
    s3c.upload_file(str(folder / "wds" / "shard-1.tar"), BUCKET, "gone/shard-1.tar")
    s3c.upload_file(str(folder / "wds" / "shard-0.tar"), BUCKET, "gone/shard-0.tar")
    records = shmaug.ImageRecords.from_webdataset(
        f"s3://{BUCKET}/gone/shard-{{0,1}}.tar", image_ext="png", image_size=D.SHAPE[:2],
        storage_options=options(endpoint))
    s3c.delete_object(Bucket=BUCKET, Key="gone/shard-1.tar")
    with pytest.raises(ImageReadError, match=r"gone/shard-1.tar'.*no such object"):
        epoch(records, workers=2, start_method="fork")
    with pytest.raises(shmaug.ArgumentError, match="1 do not exist.*shard-1.tar"):
        shmaug.ImageRecords.from_webdataset([f"s3://{BUCKET}/gone/shard-{k}.tar" for k in (0, 1)],
                                            storage_options=options(endpoint))


def test_the_index_cache_skips_the_scan_until_the_object_changes(shards, tmp_path, caplog):
    endpoint, folder = shards
    s3c = client(endpoint)
    for k in range(2):
        s3c.upload_file(str(folder / "wds" / f"shard-{k}.tar"), BUCKET, f"cached/shard-{k}.tar")
    url = f"s3://{BUCKET}/cached/shard-*.tar"
    cache = tmp_path / "index"

    def make():
        return shmaug.ImageRecords.from_webdataset(url, image_ext="png", index_cache=cache,
                                                   storage_options=options(endpoint))

    def reads() -> int:  # GETs of the shards' bytes, from the server's own request log
        return sum(" /shmaug-test/cached/shard-" in r.getMessage() and "GET" in r.getMessage()
                   for r in caplog.records if r.name == "werkzeug")

    caplog.set_level(logging.INFO)
    first = make()
    streamed = reads()
    assert streamed >= 2 and len(first) == N
    saved = sorted(cache.iterdir())  # each shard's index, and the record of the shards
    assert len(list(cache.glob("*.npz"))) == 2 and len(list(cache.glob("shards-*.txt"))) == 1
    assert len(saved) == 3 and not any(SECRET.encode() in p.read_bytes() for p in saved)
    assert len(make()) == N and reads() == streamed  # unchanged objects: no shard read
    # A shard rewritten (another etag) is scanned again.
    smaller = D.write_tar(tmp_path / "small.tar", D.wds_members(0, 2, label=lambda i: i))
    s3c.upload_file(smaller, BUCKET, "cached/shard-1.tar")
    assert len(make()) == N // 2 + 2 and reads() > streamed


def test_the_server_stopped_mid_epoch_is_an_error_not_a_hang(tmp_path, monkeypatch):
    pytest.importorskip("tensorflow")
    monkeypatch.setenv("SHMAUG_REQUEST_TIMEOUT_S", "2")

    def made(endpoint: str):
        client(endpoint).create_bucket(Bucket=BUCKET)
        put_shards(endpoint, tmp_path, "records")
        return build("tfrecord", f"s3://{BUCKET}/records", storage_options=options(endpoint))

    stop_server_mid_epoch(made, "fork")


def test_a_listing_cache_lists_the_bucket_once(s3, tmp_path, caplog):
    endpoint, root = s3
    s3c = client(endpoint)
    for name in ("ant/0.png", "bee/0.png"):
        s3c.upload_file(str(root / name), BUCKET, f"listed/{name}")

    def make():
        return shmaug.ImageFiles.from_directory(f"s3://{BUCKET}/listed/", image_size=(8, 8),
                                                listing_cache=tmp_path,
                                                storage_options=options(endpoint))

    def listings() -> int:  # the server's own log: one line per request it answered
        return sum("list-type=2" in r.getMessage() for r in caplog.records
                   if r.name == "werkzeug")

    caplog.set_level(logging.INFO)
    first = make()
    assert listings() == 1
    # An object added after the first listing: a second construction that listed the bucket
    # would see it; one that reused the cached listing does not, and sends no listing request.
    s3c.upload_file(str(root / "ant" / "1.png"), BUCKET, "listed/ant/1.png")
    second = make()
    assert listings() == 1
    assert list(second.paths) == list(first.paths) and len(first) == 2
    assert any("reused the listing" in r.getMessage() for r in caplog.records)
    (cached,) = tmp_path.iterdir()
    assert SECRET not in cached.read_text() and SECRET not in repr(second)
    cached.unlink()
    assert len(make()) == 3  # the file deleted: listed again
    with pytest.raises(shmaug.ArgumentError, match="listing_cache.*local"):
        shmaug.ImageFiles.from_directory(root, listing_cache=tmp_path)


@pytest.fixture(scope="module")
def tars(s3, tmp_path_factory):
    """Two tar shards of five records (no TensorFlow needed), on disk and in the bucket."""
    endpoint, _ = s3
    folder = tmp_path_factory.mktemp("tars")
    (folder / "wds").mkdir()
    s3c = client(endpoint)
    for k in range(2):
        path = folder / "wds" / f"shard-{k}.tar"
        D.write_tar(path, D.wds_members(k * N // 2, (k + 1) * N // 2, label=lambda i: i))
        s3c.upload_file(str(path), BUCKET, f"ahead/shard-{k}.tar")
    return endpoint, folder


def test_a_worker_reads_the_records_of_its_queued_tasks_together(tars, caplog, monkeypatch):
    """One task per record: each task fetched alone costs a request; a worker that fetches its
    queued tasks' records with the current one's, coalesced per shard, sends fewer, and
    delivers the same batches."""
    from shmaug.sources.remote import ahead as _ahead

    endpoint, folder = tars
    remote = shmaug.ImageRecords.from_webdataset(
        f"s3://{BUCKET}/ahead/shard-{{0,1}}.tar", image_ext="png", image_size=D.SHAPE[:2],
        storage_options=options(endpoint))
    caplog.set_level(logging.INFO)
    kwargs = dict(batch_size=1, workers=1, shuffle=True, seed=3, max_queue_size=N,
                  start_method="fork")  # forked: the worker takes AHEAD as set here

    def epoch_and_reads(ahead: int) -> tuple[list, int]:
        monkeypatch.setattr(_ahead, "AHEAD", ahead)
        monkeypatch.setenv("SHMAUG_SPAN_CACHE_MB", "0")  # what the tasks fetch, nothing kept
        caplog.clear()
        with shmaug.Loader(remote, **kwargs) as loader:
            got = [(x.copy(), y.copy()) for x, y in loader]
        return got, sum(" /shmaug-test/ahead/shard-" in r.getMessage() and "GET" in
                        r.getMessage() for r in caplog.records if r.name == "werkzeug")

    default = _ahead.AHEAD
    alone, alone_reads = epoch_and_reads(0)
    together, reads = epoch_and_reads(default)
    assert alone_reads >= N  # the probe's, then one per task
    # (about a third of them on an idle host; how many tasks wait when the worker fetches
    # hangs on the scheduler: 6 of 11 on a host busy with a second suite and an install)
    assert reads <= alone_reads * 2 // 3, (reads, alone_reads)
    assert_same_batches(together, alone)
    with shmaug.Loader(build("tar", str(folder)), **kwargs) as loader:
        assert_same_batches(together, [(x.copy(), y.copy()) for x, y in loader])
