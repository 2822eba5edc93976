"""``bench.remote``'s peers, each timed in a child of its own (TensorFlow and torch never start
in the process whose shmaug workers fork):

    python -m bench.remote.peers tf|torch SPEC_JSON      # prints {"images_per_s": ...}

- ``tf``: tf.data reading the same TFRecord objects. tensorflow-io's ``s3://`` file system does
  not load against TensorFlow 2.21 (its 0.37.1 wheel is built for 2.16: an undefined symbol), so
  each shard is streamed through an fsspec file object in a generator
  (``from_generator`` interleaved over the shards, ``num_parallel_calls=AUTOTUNE``), then
  ``decode_jpeg`` + ``resize`` in ``map(num_parallel_calls=AUTOTUNE)``, ``batch``, ``prefetch``.
- ``torch``: a torch ``DataLoader`` (``workers`` processes, fork) over ``webdataset.WebDataset``
  of the same tar shards, opened through fsspec (an ``s3`` entry in webdataset's own
  ``gopen_schemes`` table), OpenCV decode + resize, ``batched``.

Both read shards sequentially (as their guides do), so their order is shard order, not a
global shuffle; shmaug reads records in an exact global shuffle. Every contender decodes and
resizes to the same size; none augments further. As shmaug's rows, the epochs after a
first are timed.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from typing import Any, Callable, Iterator

import numpy as np


def _records(url: bytes, options: dict[str, Any]) -> Iterator[bytes]:
    """The TFRecord frames' payloads of one object, streamed (CRCs not checked, as tf.data's
    reader does not check them by default)."""
    import fsspec

    with fsspec.open(url.decode(), "rb", default_block_size=8 << 20, **options) as f:
        while head := f.read(12):
            length = int.from_bytes(head[:8], "little")
            yield f.read(length + 4)[:length]


def tf_rate(spec: dict[str, Any]) -> float:
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
    return timed_rate(ds.as_numpy_iterator, spec["count"], spec["epochs"])


def _decode(data: bytes, size: int) -> np.ndarray:
    import cv2

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_LINEAR)[:, :, ::-1].copy()


def torch_rate(spec: dict[str, Any]) -> float:
    import fsspec
    import torch
    import webdataset as wds
    from webdataset.gopen import gopen_schemes

    def opener(url: str, mode: str = "rb", bufsize: int = 8192, **_: Any) -> Any:
        return fsspec.open(url, mode, default_block_size=8 << 20, **spec["options"]).open()

    gopen_schemes["s3"] = opener  # webdataset's documented extension point
    data = (wds.WebDataset(spec["urls"], shardshuffle=False, empty_check=False)
            .to_tuple("jpg", "cls")
            .map_tuple(functools.partial(_decode, size=spec["size"]), lambda c: int(c))
            .batched(spec["batch_size"]))
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=spec["workers"],
                                         multiprocessing_context="fork", persistent_workers=True)
    return timed_rate(lambda: ((x.numpy(), y) for x, y in loader), spec["count"],
                      spec["epochs"])


def timed_rate(epoch: Callable[[], Iterator[Any]], count: int, epochs: int) -> float:
    """Images/s over ``epochs`` epochs after a first that warms up, each checked to hold
    ``count`` images: shmaug's rows (``bench.remote``) and the peers' alike."""
    for _ in epoch():
        pass
    began = time.perf_counter()
    for _ in range(epochs):
        seen = sum(len(x) for x, _ in epoch())
        if seen != count:
            raise RuntimeError(f"delivered {seen} images, expected {count}")
    return epochs * count / (time.perf_counter() - began)


if __name__ == "__main__":
    spec = json.loads(sys.argv[2])
    rate = {"tf": tf_rate, "torch": torch_rate}[sys.argv[1]](spec)
    print(json.dumps({"images_per_s": rate}))
