"""``bench.remote``'s data and server: JPEGs as files, TFRecord and tar shards, on disk and in a
real S3 server (moto, in a process of its own) behind a proxy that delays every request.

Record i of the shards is file i of the folder as ``ImageFiles.from_directory`` lists it (label
i), so every contender reads the same images. TFRecords are written by TensorFlow in a child
(``bench.records.write``: shmaug's workers fork, and forking after TensorFlow has started is
unsafe); tars by ``tarfile``, as WebDataset writes them (``00007.jpg`` + ``00007.cls``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.records.write import write_tar

BUCKET = "shmaug-bench"
OPTIONS = {"key": "bench", "secret": "bench-secret"}


class DelayProxy:
    """A TCP proxy on localhost that holds each client chunk ``delay_s`` before forwarding,
    so each request pays it before its first byte, as a bucket's 10-100 ms do."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def options(self) -> dict[str, Any]:
        """``storage_options`` that reach the server through this proxy."""
        return {**OPTIONS, "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{self.port}",
                                             "region_name": "us-east-1"}}

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            server = socket.create_connection(self.target, timeout=30)
            for src, dst, delay in ((client, server, self.delay_s), (server, client, 0.0)):
                threading.Thread(target=self._pump, args=(src, dst, delay), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, delay: float) -> None:
        try:
            while not self._stop.is_set():
                chunk = src.recv(1 << 16)
                if not chunk:
                    break
                if delay:
                    time.sleep(delay)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.listener.close()


def start_server() -> tuple[subprocess.Popen[bytes], int]:
    """moto's S3 server in a process of its own (it must not share the loader's GIL)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, port
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"the S3 server did not start on port {port} within 30 s")


def make_images(root: Path, count: int, size: int) -> None:
    import cv2

    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / f"class{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, (size // 8, size // 8, 3), np.uint8)
        image = cv2.resize(base, (size, size), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(folder / f"{i:05d}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 90])


def write_shards(root: Path, out: Path, shards: int) -> dict[str, list[str]]:
    """The folder's JPEGs as ``shards`` TFRecord files (None if TensorFlow is missing) and as
    many WebDataset tars; ``{"tfrecord": paths, "tar": paths}``."""
    import shmaug

    paths = shmaug.ImageFiles.from_directory(root).paths.tolist()
    made: dict[str, list[str]] = {"tar": []}
    for k, part in enumerate(np.array_split(np.arange(len(paths)), shards)):
        path = out / "wds" / f"train-{k:03d}.tar"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_tar(path, paths, part.tolist(), digits=5)
        made["tar"].append(str(path))
    done = subprocess.run([sys.executable, "-m", "bench.records.write", str(root),
                           str(out / "tfrecord"), str(shards), "tfrecord"],
                          capture_output=True, text=True)
    if done.returncode == 0:  # without TensorFlow, no "tfrecord" entry
        written = json.loads(done.stdout.strip().splitlines()[-1])
        if "tfrecord" in written:
            made["tfrecord"] = written["tfrecord"]
    return made


def upload(port: int, root: Path, shards: dict[str, list[str]]) -> None:
    """The files under ``train/`` and the shards under ``tfrecord/`` and ``wds/``."""
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                          aws_access_key_id=OPTIONS["key"],
                          aws_secret_access_key=OPTIONS["secret"], region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    for path in sorted(root.rglob("*.jpg")):
        client.upload_file(str(path), BUCKET, f"train/{path.relative_to(root).as_posix()}")
    for kind, paths in shards.items():
        for path in paths:
            client.upload_file(path, BUCKET, f"{'wds' if kind == 'tar' else kind}/"
                                             f"{Path(path).name}")
