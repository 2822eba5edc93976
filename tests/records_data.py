"""Record shards written by the real libraries, for the ImageRecords tests.

Every image is a small PNG whose pixels are a pure function of its record number (so a batch
tells which records it holds); TFRecords are written by ``tf.io.TFRecordWriter`` and
``tf.train.Example``, WebDataset shards by ``tarfile`` (and by ``webdataset.TarWriter`` where
installed). No process is started here.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import cv2
import numpy as np

SHAPE = (6, 5, 3)


def image(i: int) -> np.ndarray:
    """Record i's RGB pixels: distinct for every i, not flat."""
    rng = np.random.default_rng(1000 + i)
    return rng.integers(0, 256, SHAPE, np.uint8)


def png(i: int) -> bytes:
    ok, data = cv2.imencode(".png", image(i)[:, :, ::-1])
    assert ok
    return data.tobytes()


def example(i: int, label: Any = None, image_key: str = "image/encoded",
            label_key: str = "image/class/label", data: bytes | None = None) -> bytes:
    import tensorflow as tf

    feature = {image_key: tf.train.Feature(bytes_list=tf.train.BytesList(
        value=[png(i) if data is None else data]))}
    if isinstance(label, str):
        feature[label_key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[label.encode()]))
    elif label is not None:
        feature[label_key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_tfrecords(folder: Path, shards: int, per_shard: int, label=lambda i: i % 3,
                    gzip_last: bool = False) -> list[str]:
    """``shards`` files of ``per_shard`` records, record i labelled ``label(i)``."""
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        gz = gzip_last and s == shards - 1
        path = str(folder / f"train-{s:05d}.tfrecord{'.gz' if gz else ''}")
        with tf.io.TFRecordWriter(path, options="GZIP" if gz else None) as writer:
            for i in range(s * per_shard, (s + 1) * per_shard):
                writer.write(example(i, label(i)))
        paths.append(path)
    return paths


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> str:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def wds_members(start: int, stop: int, label=lambda i: i % 3, ext: str = "png"
                ) -> list[tuple[str, bytes]]:
    out = []
    for i in range(start, stop):
        out.append((f"sample{i:06d}.{ext}", png(i)))
        out.append((f"sample{i:06d}.cls", str(label(i)).encode()))
    return out
