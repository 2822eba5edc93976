"""Images/s from a bucket at 0, 20 and 50 ms per request, against the same files on local disk.

    python -m bench.remote --quick      # a smoke run: 64 small images, one round (~1 min)
    python -m bench.remote              # 512 images of 160x160, 3 rounds

A real S3 server (moto's server, in a process of its own so that it does not share the
loader's interpreter lock) runs on localhost; a small TCP proxy in front
of it holds every chunk the client sends for the given delay, so each request pays it before
its first byte, as a bucket's 10-100 ms do. The loader reads ``s3://`` through the proxy with
2 workers (``ImageFiles.from_directory``); the local row reads the same files from disk.
Needs ``pip install -e ".[remote,remote-test]"``. Prints a table; writes nothing.

Read the s3 rows against each other, not only against disk: moto answers a GET in ~15 ms of
its own CPU, so on a small machine it caps every s3 row (about 30-70 images/s on the 2 shared
cores of the dev box) whatever the delay. Equal rows at 0, 20 and 50 ms mean the delay is
hidden (each worker has a whole task's requests in flight); a faster server (MinIO, a real
bucket) is needed to compare remote with local disk.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import shmaug

BUCKET = "shmaug-bench"
log = logging.getLogger("bench.remote")


class DelayProxy:
    """A TCP proxy on localhost that holds each client chunk ``delay_s`` before forwarding."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target, self.delay_s = target, delay_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

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


def wait_for(port: int, server: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the S3 server did not start on port {port} within {timeout_s:.0f} s")


def make_images(root: Path, count: int, size: int) -> None:
    import cv2

    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / f"class{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        base = rng.integers(0, 256, (size // 8, size // 8, 3), np.uint8)
        image = cv2.resize(base, (size, size), interpolation=cv2.INTER_CUBIC)
        cv2.imwrite(str(folder / f"{i:05d}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 90])


def upload(endpoint: str, root: Path, options: dict[str, Any]) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=options["key"],
                          aws_secret_access_key=options["secret"], region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    for path in sorted(root.rglob("*.jpg")):
        client.upload_file(str(path), BUCKET, f"train/{path.relative_to(root).as_posix()}")


def images_per_s(files: shmaug.ImageFiles, batch_size: int, start_method: str) -> float:
    with shmaug.Loader(files, files.labels, batch_size=batch_size, workers=2, shuffle=True,
                       seed=0, start_method=start_method) as loader:
        began = time.perf_counter()
        count = sum(len(x) for x, _ in loader)
    return count / (time.perf_counter() - began)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 small images, one round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delays-ms", default="0,20,50")
    parser.add_argument("--start-method", default="fork")
    args = parser.parse_args(argv)
    count, size, rounds = (64, 64, 1) if args.quick else (512, 160, args.rounds)
    batch_size = 16 if args.quick else 32
    delays = [float(d) for d in args.delays_ms.split(",")]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows: list[tuple[str, float]] = []
    try:
        wait_for(port, server)
        options = {"key": "bench", "secret": "bench-secret"}
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "train"
            make_images(root, count, size)
            upload(f"http://127.0.0.1:{port}", root, options)
            local = shmaug.ImageFiles.from_directory(root, image_size=(size, size))
            sources: list[tuple[str, Any, DelayProxy | None]] = [("local disk", local, None)]
            for delay in delays:
                proxy = DelayProxy(("127.0.0.1", port), delay / 1000)
                opts = {**options, "client_kwargs": {
                    "endpoint_url": f"http://127.0.0.1:{proxy.port}", "region_name": "us-east-1"}}
                remote = shmaug.ImageFiles.from_directory(f"s3://{BUCKET}/train/",
                                                          image_size=(size, size),
                                                          storage_options=opts)
                sources.append((f"s3 at {delay:g} ms/request", remote, proxy))
            try:
                runs: dict[str, list[float]] = {name: [] for name, _, _ in sources}
                for _ in range(rounds):  # interleaved: each round runs every row once
                    for name, files, _ in sources:
                        runs[name].append(images_per_s(files, batch_size, args.start_method))
                rows = [(name, statistics.median(v)) for name, v in runs.items()]
            finally:
                for _, _, gate in sources:
                    if gate is not None:
                        gate.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    base = rows[0][1]
    print(f"{count} JPEGs {size}x{size}, 2 workers, batch {batch_size}, "
          f"{args.start_method}, median of {rounds} round(s), cpus {os.cpu_count()}")
    print(f"{'source':<24} {'images/s':>10} {'x local':>8}")
    for name, rate in rows:
        print(f"{name:<24} {rate:>10.0f} {rate / base:>8.2f}")


if __name__ == "__main__":
    main()
