"""A real S3 server (moto) on localhost for the object-storage tests, and what they share.

test_remote.py and test_remote_records.py use the same bucket, credentials and client
options; the ``s3`` fixture (conftest.py beside this file) starts the server once per module
with ``upload``'s images in it. moto and boto3 (the remote-test extra) are imported where they
are used, so that importing this module, as conftest.py does for every integration test, needs
neither; the test modules skip themselves where they are missing.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.errors import ShmaugError

KEY, SECRET = "AKIDEXAMPLE", "SEKRIT-0123456789-do-not-show"
BUCKET = "shmaug-test"
CLASSES = {"ant": 4, "bee": 3}  # class -> images: 7 tiny PNGs (lossless: bit-exact)
# Fail fast in tests: one botocore attempt (shmaug's own retries still run).
FAST = {"config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2,
                          "read_timeout": 5}}


def start_server() -> tuple[Any, str]:
    """A started ThreadedMotoServer on a free port, and its endpoint URL; the caller stops it."""
    from moto import server as moto_server

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def options(endpoint: str, key: str = KEY, secret: str = SECRET) -> dict:
    return {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
            "key": key, "secret": secret, **FAST}


def upload(endpoint: str, root: Path) -> list[str]:
    """Write the images under ``root`` and the same bytes to the bucket; their keys."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    keys = []
    for c, (name, count) in enumerate(CLASSES.items()):
        (root / name).mkdir(parents=True)
        for i in range(count):
            rng = np.random.default_rng(10 * c + i)
            array = rng.integers(0, 256, (9 + i, 11, 3), np.uint8)
            path = root / name / f"{i}.png"
            Image.fromarray(array).save(path)
            key = f"train/{name}/{i}.png"
            client.upload_file(str(path), BUCKET, key)
            keys.append(key)
    client.put_object(Bucket=BUCKET, Key="train/bee/notes.txt", Body=b"not an image")
    return keys


def stop_server_mid_epoch(made: Callable[[str], Any], method: str) -> None:
    """A fresh server, a source ``made(endpoint)`` on it; one batch read, then the server
    stopped: the rest of the epoch must raise the retries' error (not hang)."""
    server, endpoint = start_server()
    try:
        source = made(endpoint)
        with shmaug.Loader(source, batch_size=1, workers=2, start_method=method,
                           max_queue_size=1) as loader:
            batches = iter(loader)
            next(batches)
            server.stop()
            server = None
            # Spawned workers find the port closed (refused: reported at once); forked ones
            # hold the old listening socket, so their requests time out and are retried.
            with pytest.raises(ShmaugError, match="(after 4 attempts|connection was refused)"
                                                  ".*Fix: check that the endpoint"):
                for _ in batches:
                    pass
    finally:
        if server is not None:
            server.stop()
