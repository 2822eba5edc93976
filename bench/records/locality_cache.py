"""Requests to the bucket per epoch, exact shuffle against ``shuffle="blocks"``, with a disk
cache bounded below the data.

    python -m bench.records.locality_cache [--quick] [--shards 32] [--per-shard 20]
                                           [--window 4] [--out bench/results/locality]

A real S3 server (moto, in this process) holds ``--shards`` WebDataset tars of tiny PNGs; a
``workers=0`` Loader reads three epochs of each order through a disk cache bounded at two
windows (``2 x --window`` shards), the cache planned from the order (``_plan.CachePlan``).
Per epoch: the server's GET requests (ranged reads and download chunks) and the shards the
cache downloaded; blocks once more with the plan switched off (evicting least recently
used, downloading a shard when a task first reads it). Counts, not speed: moto answers on one core, and there is no delay. The
span cache of the workers is turned off (``SHMAUG_SPAN_CACHE_MB=0``): this dataset would fit
it whole, where ImageNet fits no worker's.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import tarfile
import tempfile
import time
import warnings
from io import BytesIO
from pathlib import Path

import numpy as np

from bench.common.harness import described, prepare_out

BUCKET = "shmaug-locality"
KEY, SECRET = "bench", "bench-secret"


class Count(logging.Handler):
    """Counts log records whose message holds ``word``."""

    def __init__(self, word: str) -> None:
        super().__init__(logging.DEBUG)
        self.word, self.n = word, 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += self.word in record.getMessage()


def shards(folder: Path, count: int, per_shard: int) -> list[Path]:
    import cv2

    rng = np.random.default_rng(0)
    out = []
    for s in range(count):
        path = folder / f"shard-{s:04d}.tar"
        with tarfile.open(path, "w") as tar:
            for i in range(s * per_shard, (s + 1) * per_shard):
                png = cv2.imencode(".png", rng.integers(0, 256, (8, 8, 3), np.uint8))[1]
                for name, data in ((f"{i:06d}.png", png.tobytes()), (f"{i:06d}.cls", b"0")):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, BytesIO(data))
        out.append(path)
    return out


def settle(cache: Path) -> None:
    """Wait for the background downloads to land (no ``.part`` left, then a moment)."""
    deadline = time.monotonic() + 30
    while list(cache.glob("*.part")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.records.locality_cache",
                                     description=described(__doc__))
    parser.add_argument("--quick", action="store_true", help="8 shards of 5, windows of 2: a smoke run")
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--per-shard", type=int, default=20)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--out", default="bench/results/locality")
    args = parser.parse_args()
    out = prepare_out(args.out)
    if args.quick:
        args.shards, args.per_shard, args.window = 8, 5, 2
    # No span cache: a dataset this small would fit it whole, where ImageNet fits no
    # worker's; every record not on the disk is then a ranged read, as at scale.
    os.environ["SHMAUG_SPAN_CACHE_MB"] = "0"
    import boto3
    from moto.server import ThreadedMotoServer

    import shmaug
    from shmaug.sources.formats import table as _index

    plan = _index.RecordTable.plan

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    gets, downloads = Count("GET /"), Count("cached ")
    logging.getLogger("werkzeug").addHandler(gets)
    logging.getLogger("werkzeug").setLevel(logging.INFO)
    cache_log = logging.getLogger("shmaug.sources.cache.disk_cache")
    cache_log.addHandler(downloads)
    cache_log.setLevel(logging.DEBUG)
    rows = []
    root = Path(tempfile.mkdtemp(prefix="shmaug-locality-"))  # the shards and every cache
    try:
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                              aws_secret_access_key=SECRET, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        paths = shards(root, args.shards, args.per_shard)
        for path in paths:
            client.upload_file(str(path), BUCKET, path.name)
        bound = 2 * args.window * max(p.stat().st_size for p in paths)
        options = {"key": KEY, "secret": SECRET,
                   "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        for shuffle, planned in ((True, True), ("blocks", True), ("blocks", False)):
            # workers=0: the table's hook can be switched off in this process
            _index.RecordTable.plan = plan if planned else property(lambda self: None)
            cache = Path(tempfile.mkdtemp(prefix="cache-", dir=root))
            with warnings.catch_warnings():  # the bound is below the data on purpose
                warnings.simplefilter("ignore")
                records = shmaug.ImageRecords.from_webdataset(
                    f"s3://{BUCKET}/shard-{{0000..{args.shards - 1:04d}}}.tar",
                    image_ext="png", image_size=(8, 8), storage_options=options,
                    cache_dir=cache, cache_limit=bound)
            window = {"shuffle_window": args.window} if shuffle == "blocks" else {}
            with shmaug.Loader(records, batch_size=32, workers=0, seed=0, shuffle=shuffle,
                               **window) as loader:
                for epoch in range(3):
                    gets.n = downloads.n = 0
                    sum(len(y) for _, y in loader)
                    settle(cache)
                    order = f"{shuffle}{'' if planned else ', cache not planned (LRU)'}"
                    rows.append((order, epoch + 1, gets.n, downloads.n))
    finally:
        _index.RecordTable.plan = plan
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    text = (f"{args.shards} shards x {args.per_shard} records, disk cache bound "
            f"{2 * args.window} shards (two windows of {args.window}), workers=0\n\n"
            "| shuffle | epoch | GET requests | shards downloaded |\n|---|---|---|---|\n" +
            "".join(f"| {s} | {e} | {g:,} | {d} |\n" for s, e, g, d in rows))
    print(text)
    (out / "locality_cache.md").write_text(
        f"`python -m bench.records.locality_cache{' --quick' if args.quick else ''}`\n\n{text}")


if __name__ == "__main__":
    main()
