"""``bench.remote``'s data: JPEGs as files, TFRecord and tar shards, on disk, and uploaded to
the S3 server (the stores and the delay are ``bench.remote.serve``'s).

Record i of the shards is file i of the folder as ``ImageFiles.from_directory`` lists it (label
i), so every contender reads the same images. TFRecords are written by TensorFlow in a child
(``bench.records.write``: shmaug's workers fork, and forking after TensorFlow has started is
unsafe); tars by ``tarfile``, as WebDataset writes them (``00007.jpg`` + ``00007.cls``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from bench.records.write import write_tar
from bench.remote.serve import BUCKET, OPTIONS


def make_images(root: Path, count: int, size: int) -> None:
    import cv2

    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / f"class{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, (size // 8, size // 8, 3), np.uint8)
        image = cv2.resize(base, (size, size), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(folder / f"{i:05d}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 90])


def write_shards(root: Path, out: Path, shards: int, tfrecord: bool = True
                 ) -> dict[str, list[str]]:
    """The folder's JPEGs as ``shards`` WebDataset tars under ``out/wds`` and, with
    ``tfrecord`` and TensorFlow, as many TFRecord files under ``out/tfrecord``;
    ``{"tar": paths, "tfrecord": paths}``."""
    import shmaug

    paths = shmaug.ImageFiles.from_directory(root).paths.tolist()
    made: dict[str, list[str]] = {"tar": []}
    for k, part in enumerate(np.array_split(np.arange(len(paths)), shards)):
        path = out / "wds" / f"train-{k:03d}.tar"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_tar(path, paths, part.tolist(), digits=5)
        made["tar"].append(str(path))
    if not tfrecord:
        return made
    done = subprocess.run([sys.executable, "-m", "bench.records.write", str(root),
                           str(out), str(shards), "tfrecord"],  # into out/tfrecord
                          capture_output=True, text=True)
    if done.returncode == 0:  # without TensorFlow, no "tfrecord" entry
        written = json.loads(done.stdout.strip().splitlines()[-1])
        if "tfrecord" in written:
            made["tfrecord"] = written["tfrecord"]
    return made


def upload_folder(port: int, folder: Path, only: set[str] | None = None) -> None:
    """Every file under ``folder`` (its top-level folders in ``only``, or all) into the S3
    server's bucket, keyed by its path under ``folder``."""
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                          aws_access_key_id=OPTIONS["key"],
                          aws_secret_access_key=OPTIONS["secret"], region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = path.relative_to(folder).as_posix()
        if only is None or key.split("/")[0] in only:
            client.upload_file(str(path), BUCKET, key)
