"""``bench.records``' child: a folder's JPEGs written into each record format by its own writer.

    python -m bench.records.write FOLDER OUT SHARDS [FORMATS]

Record i of every format is file i of the folder as ``ImageFiles.from_directory`` lists it (so
every contender reads the same images in the same order) with label i; the shards split the
files into contiguous runs. The formats, each in ``OUT/<format>``:

- ``tfrecord``: ``tf.train.Example`` (``image/encoded``, ``image/class/label``) by
  ``tf.io.TFRecordWriter``;
- ``array_record``: the same serialized Examples by array_record's ``ArrayRecordWriter``
  (``group_size:1``, as Grain advises for random access);
- ``huggingface``: a ``datasets.Dataset`` with an ``Image`` column (the JPEG bytes embedded) and
  an int64 ``label``, ``save_to_disk`` in SHARDS Arrow files;
- ``webdataset``: tars of ``NNNNNN.jpg`` + ``NNNNNN.cls`` members, by ``tarfile`` (what
  ``webdataset.TarWriter`` writes).

A format whose library is missing is left out and named, with its error, under ``"missing"``.
Writes ``OUT/made.json`` (each format's files, or its folder) last, so a half-written set is
never reused, and prints it as one JSON line. A child process: shmaug's workers fork, and
forking after TensorFlow has started is unsafe.
"""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path
from typing import Any, Callable

import numpy as np


def _examples(paths: list[str]) -> list[bytes]:
    import tensorflow as tf

    out = []
    for i, path in enumerate(paths):
        feature = {
            "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[Path(path).read_bytes()])),
            "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i]))}
        out.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return out


def tfrecord(where: Path, paths: list[str], parts: list[np.ndarray]) -> list[str]:
    import tensorflow as tf

    examples, written = _examples(paths), []
    for k, part in enumerate(parts):
        written.append(str(where / f"train-{k:05d}-of-{len(parts):05d}.tfrecord"))
        with tf.io.TFRecordWriter(written[-1]) as writer:
            for i in part.tolist():
                writer.write(examples[i])
    return written


def array_record(where: Path, paths: list[str], parts: list[np.ndarray]) -> list[str]:
    from array_record.python.array_record_module import ArrayRecordWriter

    examples, written = _examples(paths), []
    for k, part in enumerate(parts):
        written.append(str(where / f"train.array_record-{k:05d}-of-{len(parts):05d}"))
        writer = ArrayRecordWriter(written[-1], "group_size:1")
        for i in part.tolist():
            writer.write(examples[i])
        writer.close()
    return written


def huggingface(where: Path, paths: list[str], parts: list[np.ndarray]) -> str:
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    ds = datasets.Dataset.from_dict(
        {"image": [{"bytes": Path(p).read_bytes(), "path": None} for p in paths],
         "label": list(range(len(paths)))}, features=features)
    ds.save_to_disk(str(where), num_shards=len(parts))
    return str(where)


def write_tar(path: Path | str, paths: list[str], samples: list[int], digits: int = 6) -> None:
    """One WebDataset shard: sample i as ``<i>.jpg`` (its file's bytes) and ``<i>.cls``."""
    with tarfile.open(path, "w") as tar:
        for i in samples:
            for name, data in ((f"{i:0{digits}d}.jpg", Path(paths[i]).read_bytes()),
                               (f"{i:0{digits}d}.cls", str(i).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def webdataset(where: Path, paths: list[str], parts: list[np.ndarray]) -> list[str]:
    written = []
    for k, part in enumerate(parts):
        written.append(str(where / f"train-{k:06d}.tar"))
        write_tar(written[-1], paths, part.tolist())
    return written


WRITERS: dict[str, Callable[[Path, list[str], list[np.ndarray]], Any]] = {
    "tfrecord": tfrecord, "array_record": array_record, "huggingface": huggingface,
    "webdataset": webdataset}


def main(folder: str, out: str, shards: int, formats: str = ",".join(WRITERS)) -> None:
    """Writes ``formats`` (comma-separated, default every one) and prints what it made."""
    import shmaug

    paths = [str(p) for p in shmaug.ImageFiles.from_directory(folder).paths]
    parts = np.array_split(np.arange(len(paths)), shards)
    made: dict[str, Any] = {"missing": {}}
    for name in formats.split(","):
        write = WRITERS[name]
        where = Path(out) / name
        where.mkdir(parents=True, exist_ok=True)
        try:
            made[name] = write(where, paths, parts)
        except ImportError as exc:
            made["missing"][name] = f"{type(exc).__name__}: {exc}"
    (Path(out) / "made.json").write_text(json.dumps(made))
    print(json.dumps(made))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
