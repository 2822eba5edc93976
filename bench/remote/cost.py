"""What one GET costs in CPU, client and server apart, against moto's S3 server and nginx.

    python -m bench.remote.cost [--requests 300] [--size 10000]

Why ``bench.remote``'s uncached rows are CPU-bound on a small machine, and which client is
lightest (issue 39 §4): one process GETs one small object ``--requests`` times, one request at
a time, straight to the server (no proxy), with each client, and reports per GET the client
process's CPU (user + system) and the server's (all its processes).

- S3 (moto's server): s3fs ``cat_file`` (what shmaug reads through: s3fs sends a HEAD before
  a whole object's GET unless ``max_concurrency=1``, as shmaug passes), boto3 ``get_object``,
  urllib3 over a presigned URL (botocore signs each; no SDK on the request path), and obstore
  (Rust's object_store: ``S3Store``, ``get`` of the object and ``get_range`` of its bytes;
  each request signed in Rust).
- HTTP range GETs (nginx from the system's packages, when installed; the bench installs
  nothing): urllib3, fsspec's HTTP file system ``cat_file`` with a range (shmaug's
  ``http(s)://`` path, aiohttp), and obstore's ``HTTPStore.get_range``.

A client whose library is missing is a row saying so. Prints a Markdown table; the CPU and
its load are in the header.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.common.report import cpu_model
from bench.remote.serve import BUCKET, OPTIONS, Nginx, cpu_of, nginx_binary, start_moto
from bench.common.harness import described

Get = Callable[[], bytes]
KEY = "one.bin"


def per_get(get: Get, requests: int, server_pids: list[int]) -> tuple[float, float, float]:
    """Client CPU ms, server CPU ms and wall ms per GET, over ``requests`` GETs."""
    for _ in range(10):  # warm: connections open, caches filled
        get()
    mine, served, began = os.times(), cpu_of(server_pids), time.perf_counter()
    for _ in range(requests):
        get()
    wall = time.perf_counter() - began
    after = os.times()
    client = after.user + after.system - mine.user - mine.system
    return (1e3 * client / requests, 1e3 * (cpu_of(server_pids) - served) / requests,
            1e3 * wall / requests)


def s3_clients(endpoint: str, size: int) -> dict[str, Get | str]:
    """The S3 clients' GETs of ``KEY`` (uploaded here), or why one cannot run."""
    import boto3
    import s3fs
    import urllib3

    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=OPTIONS["key"],
                          aws_secret_access_key=OPTIONS["secret"], region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    client.put_object(Bucket=BUCKET, Key=KEY, Body=os.urandom(size))
    fs = s3fs.S3FileSystem(**{**OPTIONS, "client_kwargs": {"endpoint_url": endpoint,
                                                             "region_name": "us-east-1"}})
    http = urllib3.PoolManager()

    def presigned() -> bytes:
        url = client.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": KEY})
        return bytes(http.request("GET", url).data)

    clients: dict[str, Get | str] = {
        "s3fs cat_file (a HEAD, then the GET)": lambda: bytes(fs.cat_file(f"{BUCKET}/{KEY}")),
        "s3fs cat_file, max_concurrency=1 (shmaug's)": lambda: bytes(
            fs.cat_file(f"{BUCKET}/{KEY}", max_concurrency=1)),
        "boto3 get_object": lambda: bytes(client.get_object(Bucket=BUCKET,
                                                            Key=KEY)["Body"].read()),
        "urllib3 GET of a presigned URL": presigned,
    }
    names = ("obstore S3Store get", "obstore S3Store get_range")
    if importlib.util.find_spec("obstore") is None:
        return {**clients, **dict.fromkeys(names, "not installed (pip install obstore)")}
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, config={"endpoint": endpoint, "access_key_id": OPTIONS["key"],
                                    "secret_access_key": OPTIONS["secret"],
                                    "region": "us-east-1",
                                    "virtual_hosted_style_request": False},
                    client_options={"allow_http": True})
    clients[names[0]] = lambda: bytes(obstore.get(store, KEY).bytes())
    clients[names[1]] = lambda: bytes(obstore.get_range(store, KEY, start=0, length=size))
    return clients


def http_clients(url: str, size: int) -> dict[str, Get | str]:
    """Range GETs of the object at ``url`` (served by nginx), or why one cannot run."""
    import fsspec
    import urllib3

    http = urllib3.PoolManager()
    fs = fsspec.filesystem("http")
    clients: dict[str, Get | str] = {
        "urllib3 range GET": lambda: bytes(http.request(
            "GET", url, headers={"Range": f"bytes=0-{size - 1}"}).data),
        "fsspec http cat_file with a range (shmaug's http)": lambda: bytes(
            fs.cat_file(url, start=0, end=size)),
    }
    if importlib.util.find_spec("obstore") is None:
        clients["obstore HTTPStore get_range"] = "not installed (pip install obstore)"
        return clients
    import obstore
    from obstore.store import HTTPStore

    base, _, name = url.rpartition("/")
    store = HTTPStore.from_url(base, client_options={"allow_http": True})
    clients["obstore HTTPStore get_range"] = lambda: bytes(
        obstore.get_range(store, name, start=0, length=size))
    return clients


def table(rows: dict[str, Get | str], size: int, requests: int, pids: list[int]) -> None:
    for name, get in rows.items():
        if isinstance(get, str):
            print(f"| {name} | {get} | | |", flush=True)
            continue
        assert len(get()) == size, name
        c, s, w = per_get(get, requests, pids)
        print(f"| {name} | {c:.2f} | {s:.2f} | {w:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remote.cost",
                                     description=described(__doc__))
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--size", type=int, default=10_000, help="bytes of the object")
    args = parser.parse_args()
    print(f"{args.requests} GETs of a {args.size:,}-byte object, one at a time, to a server on "
          f"localhost; {cpu_model()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| client | client CPU per GET (ms) | server CPU per GET (ms) | wall per GET (ms) |")
    print("|---|---:|---:|---:|")
    server, port = start_moto()
    try:
        print("| **S3: moto's server** | | | |")
        table(s3_clients(f"http://127.0.0.1:{port}", args.size), args.size, args.requests,
              [server.pid])
    finally:
        server.kill()
        server.wait()
    if nginx_binary() is None:
        print("| **HTTP: nginx** | not installed (e.g. apt-get install nginx) | | |")
        return
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / KEY).write_bytes(os.urandom(args.size))
        nginx: Any = Nginx(Path(tmp))
        try:
            print("| **HTTP range GETs: nginx** | | | |")
            table(http_clients(f"http://127.0.0.1:{nginx.port}/{KEY}", args.size), args.size,
                  args.requests, nginx.pids())
        finally:
            nginx.close()


if __name__ == "__main__":
    main()
