"""The disk cache of bucket sources (``cache_dir=``, ``cache_limit=``) and its faults, against
the real S3 server (moto) of the ``s3`` fixture (tests/integration/conftest.py).

Epochs after the cache holds the shards read no byte from the bucket (the server's own
request log); two processes download a shard once; a download killed midway leaves nothing
readable; a cached copy that no longer matches is downloaded again; a bound too small, or a
disk that refuses a write, is a warning and reading goes on by range; a ``cache_dir`` that
cannot be written is refused at construction; no secret shows in the cache.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import time
from pathlib import Path

import numpy as np
import pytest

import shmaug
from shmaug.sources.cache import disk_cache as _disk_cache
from tests import records_data as D
from tests._helpers import assert_same_batches
from tests.integration._s3 import BUCKET, KEY, SECRET, options

pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
pytest.importorskip("moto.server", reason="needs moto[server]")
boto3 = pytest.importorskip("boto3", reason="needs boto3 (moto[server] brings it)")

pytestmark = pytest.mark.timeout(120)
N = 10  # records: two tar shards of five, record i labelled i


@pytest.fixture(scope="module")
def tars(s3, tmp_path_factory):
    """Two tar shards on disk and under ``cache/`` in the bucket; the endpoint and folder."""
    endpoint, _ = s3
    folder = tmp_path_factory.mktemp("cached-tars")
    for k in range(2):
        path = folder / f"shard-{k}.tar"
        D.write_tar(path, D.wds_members(k * N // 2, (k + 1) * N // 2, label=lambda i: i))
        upload(endpoint, path, f"cache/shard-{k}.tar")
    return endpoint, folder


def upload(endpoint: str, path: Path | str, key: str) -> None:
    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                 aws_secret_access_key=SECRET, region_name="us-east-1").upload_file(
        str(path), BUCKET, key)


def build(endpoint: str, cache_dir, prefix: str = "cache", **kwargs):
    return shmaug.ImageRecords.from_webdataset(
        f"s3://{BUCKET}/{prefix}/shard-{{0,1}}.tar", image_ext="png", image_size=D.SHAPE[:2],
        storage_options=options(endpoint), cache_dir=cache_dir, **kwargs)


def gets(caplog, key: str = "/cache/shard-") -> int:
    """GETs of the shards the server answered (its own request log)."""
    return sum(key in r.getMessage() and "GET /" in r.getMessage()
               for r in caplog.records if r.name == "werkzeug")


def cached(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.data"))


def epoch(source, **kwargs) -> list:
    with shmaug.Loader(source, batch_size=4, shuffle=True, seed=2, **kwargs) as loader:
        return [(x.copy(), y.copy()) for x, y in loader]


def test_epochs_after_the_cache_holds_the_shards_read_nothing_from_the_bucket(
        tars, tmp_path, caplog):
    endpoint, folder = tars
    cache = tmp_path / "cache"
    records = build(endpoint, cache)
    caplog.set_level(logging.INFO)
    caplog.clear()
    local = epoch(shmaug.ImageRecords.from_webdataset(f"{folder}/shard-{{0,1}}.tar",
                                                      image_ext="png", image_size=D.SHAPE[:2]))
    with shmaug.Loader(records, batch_size=4, shuffle=True, seed=2, workers=2,
                       start_method="fork") as loader:
        first = [(x.copy(), y.copy()) for x, y in loader]  # by range; downloads behind
        deadline = time.monotonic() + 20
        while len(cached(cache)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert_same_batches(first, local)
    assert len(cached(cache)) == 2 and not list(cache.glob("*.part")) and gets(caplog) > 2
    caplog.clear()
    again = build(endpoint, cache)  # the index scan reads the cached shards too
    assert_same_batches(epoch(again, workers=2, start_method="spawn"), local)
    assert gets(caplog) == 0  # a new source, loader and processes: every byte from the disk
    for path in cache.iterdir():  # hashed names; the data is the shards' own bytes
        assert SECRET not in path.name and KEY not in path.name
    assert SECRET not in repr(records) and str(cache) in repr(records)
    assert SECRET not in repr(records.table.remote.cache)


def _download(remote, url: str, start, out) -> None:
    start.wait(30)
    out.put(remote.cache.download(url, remote))


def test_two_processes_download_a_shard_once(tars, tmp_path, caplog):
    endpoint, _ = tars
    records = build(endpoint, tmp_path)
    remote, url = records.table.remote, records.table.shards[0]
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_download, args=(remote, url, start, out)) for _ in range(2)]
    caplog.set_level(logging.INFO)
    caplog.clear()
    for p in procs:
        p.start()
    start.set()
    results = sorted(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
    assert results == [False, True]
    assert gets(caplog, "/cache/shard-0.tar") == 1  # the server saw one download
    assert remote.cache.local(url) is not None


def _slow_download(remote, url: str) -> None:
    from shmaug.sources.remote._client import Remote

    _disk_cache.CHUNK = 512  # many requests, each slowed: killed well before the end
    read = Remote.read_range

    def slow(self, *args):
        time.sleep(0.2)
        return read(self, *args)

    Remote.read_range = slow  # type: ignore[method-assign]  (this process only: spawned)
    remote.cache.download(url, remote)


def test_a_download_killed_midway_leaves_nothing_readable(tars, tmp_path):
    endpoint, folder = tars
    records = build(endpoint, tmp_path)
    remote, url = records.table.remote, records.table.shards[1]
    proc = mp.get_context("spawn").Process(target=_slow_download, args=(remote, url))
    proc.start()
    deadline = time.monotonic() + 30
    while not list(tmp_path.glob("*.part")) and proc.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    proc.kill()
    proc.join(10)
    assert list(tmp_path.glob("*.part")) and not cached(tmp_path)  # half-written, not visible
    assert remote.cache.local(url) is None
    assert remote.cache.download(url, remote) is True  # the leftover removed, done again
    (path,) = cached(tmp_path)
    assert path.read_bytes() == (folder / "shard-1.tar").read_bytes()
    assert not list(tmp_path.glob("*.part"))


def test_a_cached_shard_that_no_longer_matches_is_downloaded_again(tars, tmp_path, caplog):
    endpoint, folder = tars
    for k in range(2):
        upload(endpoint, folder / f"shard-{k}.tar", f"stale/shard-{k}.tar")
    records = build(endpoint, tmp_path, "stale")
    remote, url = records.table.remote, records.table.shards[0]
    assert remote.cache.download(url, remote)
    (path,) = cached(tmp_path)
    with open(path, "r+b") as f:  # cut short on disk: its size no longer matches
        f.truncate(100)
    assert remote.cache.local(url) is None and remote.cache.download(url, remote)
    assert path.read_bytes() == (folder / "shard-0.tar").read_bytes()
    # The object rewritten in the bucket (another size and etag).
    smaller = D.write_tar(tmp_path / "small.tar", D.wds_members(0, 2, label=lambda i: i))
    upload(endpoint, smaller, "stale/shard-0.tar")
    fresh = build(endpoint, tmp_path, "stale").table.remote
    assert fresh.cache.local(url) is None and fresh.cache.download(url, fresh)
    (path,) = cached(tmp_path)  # the stale copy removed
    assert path.read_bytes() == Path(smaller).read_bytes()
    assert not remote.cache.download(url, remote)  # the old source's index: not cached
    # and not read at its offsets either: they were other records, under the old labels
    with pytest.raises(shmaug.RemoteError, match=r"shard-0\.tar changed in the bucket since "
                                                  r"the source was built.*Fix: build the "
                                                  r"source again") as caught:
        records.read(0)
    assert SECRET not in str(caught.value)
    np.testing.assert_array_equal(records.read(len(records) - 1), D.image(len(records) - 1))


def test_a_bound_too_small_warns_and_reads_by_range(tars, tmp_path, caplog):
    endpoint, folder = tars
    with pytest.warns(shmaug.ShmaugWarning, match=f"cache_dir={str(tmp_path)!r}.*100 bytes"):
        records = build(endpoint, tmp_path, cache_limit=100)
    caplog.set_level(logging.WARNING)
    local = epoch(shmaug.ImageRecords.from_webdataset(f"{folder}/shard-{{0,1}}.tar",
                                                      image_ext="png", image_size=D.SHAPE[:2]))
    assert_same_batches(epoch(records, workers=0), local)
    remote = records.table.remote
    assert not remote.cache.download(records.table.shards[0], remote)
    # The warning comes from whichever attempt finds no room: this call's, or a background
    # download of the epoch's that still held the shard's lock (then this call gave up
    # silently, and that one warns when it finishes).
    deadline = time.monotonic() + 30
    while "cache_limit=100 bytes" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "cache_dir=" in caplog.text and "cache_limit=100 bytes" in caplog.text
    assert not cached(tmp_path) and not list(tmp_path.glob("*.part"))


def _full_disk(remote, url: str, out) -> None:
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, no signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("shmaug").addHandler(handler)
    done = remote.cache.download(url, remote)
    data = remote.read_ranges(url, [(0, 512)])[0]  # reading goes on by range
    out.put((done, len(data), seen))


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_a_disk_that_refuses_a_write_warns_and_reads_by_range(tars, tmp_path):
    """A write refused for real: the process may not write files beyond 1,000 bytes (EFBIG,
    as ENOSPC from a full disk)."""
    endpoint, _ = tars
    records = build(endpoint, tmp_path)
    remote, url = records.table.remote, records.table.shards[0]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_full_disk, args=(remote, url, out))
    proc.start()
    done, size, seen = out.get(timeout=60)
    proc.join(30)
    assert done is False and size == 512
    assert any(f"cache_dir={str(tmp_path)!r} is full" in m and "no cache_limit" in m
               for m in seen), seen
    assert not cached(tmp_path) and not list(tmp_path.glob("*.part"))


def test_a_cache_dir_that_cannot_be_written_is_refused_naming_the_fix(tars, tmp_path):
    endpoint, _ = tars
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(shmaug.ArgumentError,
                       match=r"`cache_dir` must be a folder .* Fix: pass a writable"):
        build(endpoint, blocker / "cache")
    with pytest.raises(shmaug.ArgumentError, match="cache_dir.*local.*Fix: drop cache_dir"):
        shmaug.ImageRecords.from_webdataset(f"{tmp_path}/*.tar", cache_dir=tmp_path)
    with pytest.raises(shmaug.ArgumentTypeError, match="`cache_limit` must be a size"):
        build(endpoint, tmp_path, cache_limit="lots")
    assert build(endpoint, tmp_path, cache_limit="1MiB").table.remote.cache.limit == 1 << 20


def test_image_files_are_kept_as_read_and_later_epochs_read_none_from_the_bucket(
        s3, tmp_path, caplog):
    endpoint, root = s3

    def files(where, **kwargs):
        return shmaug.ImageFiles.from_directory(where, image_size=(8, 8), **kwargs)

    remote = files(f"s3://{BUCKET}/train/", storage_options=options(endpoint),
                   cache_dir=tmp_path, cache_limit="1MB")
    local = epoch(files(root))
    caplog.set_level(logging.INFO)
    with shmaug.Loader(remote, batch_size=4, shuffle=True, seed=2, workers=2,
                       start_method="fork") as loader:
        assert_same_batches([(x.copy(), y.copy()) for x, y in loader], local)
        deadline = time.monotonic() + 20
        while len(cached(tmp_path)) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(cached(tmp_path)) == 7 and gets(caplog, f"/{BUCKET}/train/") >= 7
    caplog.clear()
    assert_same_batches(epoch(remote, workers=2, start_method="spawn"), local)
    assert gets(caplog, f"/{BUCKET}/train/") == 0
    assert f"cache_dir={str(tmp_path)!r}, cache_limit='1MB'" in repr(remote)
    assert SECRET not in repr(remote)


def test_an_image_file_changed_in_the_bucket_is_read_again_not_taken_from_the_cache(
        s3, tmp_path, caplog):
    """The listing gives each file's size and etag; the cached copy is named by them, so a
    file rewritten in the bucket misses the cache in a source listed after it (and a source
    pickled keeps its identities); ``from_paths`` checks them as it checks that files exist."""
    import pickle

    import numpy as np
    from PIL import Image

    endpoint, root = s3
    for name in ("ant/0.png", "bee/0.png"):
        upload(endpoint, root / name, f"changing/{name}")

    def files():
        return shmaug.ImageFiles.from_directory(
            f"s3://{BUCKET}/changing/", image_size=(8, 8), storage_options=options(endpoint),
            cache_dir=tmp_path)

    def read_all(source):
        with shmaug.Loader(source, batch_size=2, workers=0) as loader:
            return loader.batch(0)[0].copy()

    before = read_all(files())
    deadline = time.monotonic() + 20
    while len(cached(tmp_path)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(cached(tmp_path)) == 2
    new = tmp_path / "new.png"
    Image.fromarray(np.full((12, 12, 3), 200, np.uint8)).save(new)
    upload(endpoint, new, "changing/ant/0.png")  # another size and etag
    caplog.set_level(logging.INFO)
    caplog.clear()
    source = files()
    for made in (source, pickle.loads(pickle.dumps(source))):
        after = read_all(made)
        assert np.all(after[0] == 200) and not np.array_equal(after[0], before[0])
        np.testing.assert_array_equal(after[1], before[1])  # unchanged: from the cache
    assert gets(caplog, f"/{BUCKET}/changing/ant/0.png") >= 1
    assert gets(caplog, f"/{BUCKET}/changing/bee/0.png") == 0
    by_paths = shmaug.ImageFiles.from_paths(
        [f"s3://{BUCKET}/changing/ant/0.png"], image_size=(8, 8),
        storage_options=options(endpoint), cache_dir=tmp_path)
    assert np.all(read_all(by_paths)[0] == 200)
