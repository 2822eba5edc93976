"""``bench.remote``'s peers, each timed in a child of its own (TensorFlow and torch never start
in the process whose shmaug workers fork):

    python -m bench.remote.peers tf|torch|streaming|litdata SPEC_JSON   # prints one JSON line
    python -m bench.remote.peers write-mds|write-litdata SPEC_JSON      # their own shards

- ``tf``: tf.data reading the same TFRecord objects. tensorflow-io's ``s3://`` file system does
  not load against TensorFlow 2.21 (its 0.37.1 wheel is built for 2.16: an undefined symbol), so
  each shard is streamed through an fsspec file object in a generator
  (``from_generator`` interleaved over the shards, ``num_parallel_calls=AUTOTUNE``), then
  ``decode_jpeg`` + ``resize`` in ``map(num_parallel_calls=AUTOTUNE)``, ``batch``, ``prefetch``.
- ``torch``: a torch ``DataLoader`` (``workers`` processes, fork) over ``webdataset.WebDataset``
  of the same tar shards, opened through fsspec (``s3`` and ``http`` entries in webdataset's
  own ``gopen_schemes`` table), OpenCV decode + resize, ``batched``.
- ``streaming``: MosaicML Streaming's ``StreamingDataset`` over MDS shards its ``MDSWriter``
  wrote from the same JPEGs (``write-mds``), ``remote`` in the S3 server, ``local`` a fresh
  folder (its disk cache), its default shuffle (py1e), in a torch ``DataLoader`` (``workers``
  processes, fork). It reads ``s3://`` (no ``http://``).
- ``litdata``: litdata's ``StreamingDataset`` (``shuffle=True``, a fresh ``cache_dir``) over
  the chunks ``litdata.optimize`` wrote (``write-litdata``), in its ``StreamingDataLoader``
  (``workers`` processes). It reads ``s3://`` (no ``http://``).

tf.data and torch + webdataset read shards sequentially (as their guides do), so their order is
shard order, not a global shuffle; Streaming's and litdata's shuffles are local to blocks of
shards; shmaug reads records in an exact global shuffle. Every contender decodes and resizes to
the same size with OpenCV (tf.data with its own ops); none augments further. Each peer reports
epoch 1 (from its iterator's creation: workers starting, its cache cold) and the ``epochs``
after it, with the requests and bytes each read through the delaying proxy
(``bench.remote.serve.Counter``), as shmaug's rows do (``timed_epochs``).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from bench.remote.serve import Counter


def _block(url: str) -> dict[str, int]:
    """fsspec's read-ahead of 8 MiB per request, named as the URL's backend names it."""
    return {"block_size" if url.startswith("http") else "default_block_size": 8 << 20}


def _records(url: bytes, options: dict[str, Any]) -> Iterator[bytes]:
    """The TFRecord frames' payloads of one object, streamed (CRCs not checked, as tf.data's
    reader does not check them by default)."""
    import fsspec

    with fsspec.open(url.decode(), "rb", **_block(url.decode()), **options) as f:
        while head := f.read(12):
            length = int.from_bytes(head[:8], "little")
            yield f.read(length + 4)[:length]


def tf_rate(spec: dict[str, Any]) -> dict[str, float]:
    import tensorflow as tf

    auto, size = tf.data.AUTOTUNE, spec["size"]

    def parse(raw: Any) -> Any:
        parsed = tf.io.parse_single_example(raw, {
            "image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
        image = tf.image.resize(tf.io.decode_jpeg(parsed["image/encoded"], channels=3),
                               (size, size))
        return tf.cast(image, tf.uint8), parsed["image/class/label"]

    def shard(url: Any) -> Any:
        return tf.data.Dataset.from_generator(
            functools.partial(_records, options=spec["options"]), args=(url,),
            output_signature=tf.TensorSpec([], tf.string))

    ds = (tf.data.Dataset.from_tensor_slices(spec["urls"])
          .interleave(shard, cycle_length=len(spec["urls"]), num_parallel_calls=auto,
                      deterministic=False)
          .map(parse, num_parallel_calls=auto).batch(spec["batch_size"]).prefetch(auto))
    return timed_epochs(ds.as_numpy_iterator, spec)


def _decode(data: bytes, size: int) -> np.ndarray:
    import cv2

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)[:, :, ::-1].copy()


def torch_rate(spec: dict[str, Any]) -> dict[str, float]:
    import fsspec
    import torch
    import webdataset as wds
    from webdataset.gopen import gopen_schemes

    def opener(url: str, mode: str = "rb", bufsize: int = 8192, **_: Any) -> Any:
        return fsspec.open(url, mode, **_block(url), **spec["options"]).open()

    for scheme in ("s3", "http"):
        gopen_schemes[scheme] = opener  # webdataset's documented extension point
    data = (wds.WebDataset(spec["urls"], shardshuffle=False, empty_check=False)
            .to_tuple("jpg", "cls")
            .map_tuple(functools.partial(_decode, size=spec["size"]), lambda c: int(c))
            .batched(spec["batch_size"]))
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=spec["workers"],
                                         multiprocessing_context="fork", persistent_workers=True)
    return timed_epochs(lambda: ((x.numpy(), y) for x, y in loader), spec)


def streaming_rate(spec: dict[str, Any]) -> dict[str, float]:
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    os.environ.update(S3_ENDPOINT_URL=spec["endpoint"], AWS_ACCESS_KEY_ID=spec["key"],
                      AWS_SECRET_ACCESS_KEY=spec["secret"], AWS_DEFAULT_REGION="us-east-1")
    size = spec["size"]

    class Decoded(StreamingDataset):  # type: ignore[misc]  # the guide's way to decode
        def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
            sample = super().__getitem__(index)
            return _decode(sample["jpg"], size), int(sample["cls"])

    data = Decoded(remote=spec["remote"], local=spec["cache"], shuffle=True, shuffle_seed=0,
                   batch_size=spec["batch_size"])
    loader = torch.utils.data.DataLoader(data, batch_size=spec["batch_size"],
                                         num_workers=spec["workers"],
                                         multiprocessing_context="fork",
                                         persistent_workers=True)
    return timed_epochs(lambda: ((x.numpy(), y) for x, y in loader), spec)


def litdata_rate(spec: dict[str, Any]) -> dict[str, float]:
    from litdata import StreamingDataLoader, StreamingDataset
    from litdata.streaming import downloader

    # litdata builds obstore's client for its async downloads without allow_http, which an
    # http:// endpoint (the proxy's) needs and an https:// bucket does not
    downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS,
                                          "allow_http": True}
    size = spec["size"]
    data = StreamingDataset(
        spec["remote"], cache_dir=spec["cache"], shuffle=True, seed=0,
        storage_options={"endpoint_url": spec["endpoint"], "aws_access_key_id": spec["key"],
                         "aws_secret_access_key": spec["secret"], "region_name": "us-east-1"},
        transform=lambda sample: (_decode(sample["jpg"], size), int(sample["cls"])))
    loader = StreamingDataLoader(data, batch_size=spec["batch_size"],
                                 num_workers=spec["workers"], persistent_workers=True)
    return timed_epochs(lambda: ((x.numpy(), y) for x, y in loader), spec)


def _items(spec: dict[str, Any]) -> list[tuple[bytes, int]]:
    """The JPEGs' bytes and labels, in the order of ``spec["items"]`` (path, label pairs)."""
    pairs = json.loads(Path(spec["items"]).read_text())
    return [(Path(path).read_bytes(), int(label)) for path, label in pairs]


def write_mds(spec: dict[str, Any]) -> dict[str, Any]:
    """MDS shards by Streaming's own writer, ``spec["shards"]`` of them (by ``size_limit``)."""
    from streaming import MDSWriter

    items = _items(spec)
    limit = sum(len(data) + 64 for data, _ in items) // spec["shards"] + 1
    with MDSWriter(out=spec["out"], columns={"jpg": "bytes", "cls": "int"},
                   size_limit=limit) as writer:
        for data, label in items:
            writer.write({"jpg": data, "cls": label})
    return {"files": sorted(str(p) for p in Path(spec["out"]).iterdir())}


def _lit_item(item: tuple[bytes, int]) -> dict[str, Any]:
    return {"jpg": item[0], "cls": item[1]}


def write_litdata(spec: dict[str, Any]) -> dict[str, Any]:
    """Chunks by ``litdata.optimize``, about ``spec["shards"]`` of them (by ``chunk_bytes``)."""
    from litdata import optimize

    items = _items(spec)
    optimize(fn=_lit_item, inputs=items, output_dir=spec["out"], num_workers=1,
             chunk_bytes=sum(len(data) + 64 for data, _ in items) // spec["shards"] + 1)
    return {"files": sorted(str(p) for p in Path(spec["out"]).iterdir())}


def timed_epochs(epoch: Callable[[], Iterator[Any]], spec: dict[str, Any]) -> dict[str, float]:
    """Epoch 1 (from the iterator's creation: workers starting, caches cold) and then
    ``spec["epochs"]`` epochs, each checked to hold ``spec["count"]`` images: images/s of each
    part, and the requests and bytes per epoch read through the proxy whose ``Counter`` file is
    ``spec["counter"]`` (none: not counted). shmaug's rows (``bench.remote``) and the peers'."""
    count, epochs = spec["count"], spec["epochs"]
    counter = Counter(spec["counter"]) if spec.get("counter") else None
    marks: list[tuple[float, int, int]] = []

    def mark() -> None:
        requests, sent = counter.read() if counter else (0, 0)
        marks.append((time.perf_counter(), requests, sent))

    mark()
    for _ in range(1 + epochs):
        seen = sum(len(x) for x, _ in epoch())
        if seen != count:
            raise RuntimeError(f"delivered {seen} images, expected {count}")
        mark()
    (t0, r0, b0), (t1, r1, b1), (t2, r2, b2) = marks[0], marks[1], marks[-1]
    return {"epoch1": count / (t1 - t0), "after": epochs * count / (t2 - t1),
            "requests1": r1 - r0, "bytes1": b1 - b0,
            "requests_after": (r2 - r1) / epochs, "bytes_after": (b2 - b1) / epochs}


PEERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "tf": tf_rate, "torch": torch_rate, "streaming": streaming_rate, "litdata": litdata_rate,
    "write-mds": write_mds, "write-litdata": write_litdata}

if __name__ == "__main__":
    print(json.dumps(PEERS[sys.argv[1]](json.loads(sys.argv[2]))))
