"""The contenders of ``bench.records``: the same JPEGs read from TFRecord shards, or as files.

Record i of the shards is file i of the folder (its label is i, for the exactly-once check);
every contender delivers 224x224x3 uint8 with ``bench.files_peers``' flip + rotation + blur.

- ``shmaug_tfrecord``: ``shmaug.Loader`` over ``ImageRecords.from_tfrecord`` (workers read and
  decode records, fork).
- ``shmaug_files``: the same loader over ``ImageFiles`` (``bench.files``' ``shmaug``): the
  same images as files, the "within 10% of ImageFiles" reference.
- ``tf_tfrecord``: tf.data as its guide writes it: ``from_tensor_slices(shards).interleave(
  TFRecordDataset, num_parallel_calls=AUTOTUNE)``, ``map(parse_single_example + decode_jpeg +
  the ops, num_parallel_calls=AUTOTUNE)``, ``batch``, ``prefetch(AUTOTUNE)``.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from bench import files_peers as P
from bench.peers._base import Base
from bench.peers.shmaug_engine import ShmaugLoader

LABELS = {
    "shmaug_tfrecord": "shmaug ImageRecords.from_tfrecord",
    "shmaug_files": "shmaug ImageFiles (same images as files)",
    "tf_tfrecord": "tf.data TFRecordDataset (interleave, parse, decode_jpeg, AUTOTUNE)",
}
KEYS = {"image/encoded": "image", "image/class/label": "label"}


class ShmaugRecords(ShmaugLoader):
    shards: list[str] = []

    def source(self) -> Any:
        import shmaug

        return shmaug.ImageRecords.from_tfrecord(self.shards, image_size=(P.SIZE, P.SIZE))


def _tf_record(raw: Any) -> Any:
    import tensorflow as tf

    parsed = tf.io.parse_single_example(raw, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    return P.tf_augment(parsed["image/encoded"], parsed["image/class/label"])


class TfRecords(Base):
    """tf.data's own TFRecord pipeline: C++ reading, parsing, decode and ops."""

    shards: list[str] = []

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import tensorflow as tf

        auto = tf.data.AUTOTUNE
        ds = tf.data.Dataset.from_tensor_slices(self.shards).interleave(
            tf.data.TFRecordDataset, cycle_length=len(self.shards), num_parallel_calls=auto)
        self.ds = ds.map(_tf_record, num_parallel_calls=auto).batch(self.bs).prefetch(auto)

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()


def build(name: str, paths: np.ndarray, ids: np.ndarray, bs: int, workers: int,
          shards: list[str] = ()) -> Base:  # type: ignore[assignment]
    """Contender ``name``; raises ImportError when its library is missing."""
    if name == "shmaug_files":
        return P.build("shmaug", paths, ids, bs, workers)
    if name == "shmaug_tfrecord":
        cls: Any = type("Records", (ShmaugRecords,), {"shards": list(shards)})
        return cls(paths, ids, bs, P.shmaug_augment(), np.uint8, workers, "fork")  # type: ignore[no-any-return]
    if name == "tf_tfrecord":
        cls = type("Tf", (TfRecords,), {"shards": list(shards)})
        return cls(paths, ids, bs, None, np.uint8, workers, None)  # type: ignore[no-any-return]
    raise KeyError(f"no contender {name!r}; known: {sorted(LABELS)}")
