"""``bench.records``' child: a folder's JPEGs into TFRecord shards, written by TensorFlow.

    python -m bench.records_write FOLDER OUT SHARDS

Record i is file i of the folder as ``ImageFiles.from_directory`` lists it (so every contender
reads the same images in the same order) with label i; the shards split the files into
contiguous runs. Writes ``OUT/made.json`` (the shard paths) last, so a half-written set is never
reused. Prints one JSON line (the shard paths).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main(folder: str, out: str, shards: int) -> None:
    import shmaug
    import tensorflow as tf

    paths = shmaug.ImageFiles.from_directory(folder).paths.tolist()
    where = Path(out)
    where.mkdir(parents=True, exist_ok=True)
    written = []
    for k, part in enumerate(np.array_split(np.arange(len(paths)), shards)):
        path = str(where / f"train-{k:05d}-of-{shards:05d}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in part.tolist():
                feature = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[Path(paths[i]).read_bytes()])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[i]))}
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())
        written.append(path)
    (where / "made.json").write_text(json.dumps(written))
    print(json.dumps(written))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
