"""What one GET costs in CPU, client and server apart, against the local S3 server.

    python -m bench.remote.cost [--requests 300] [--size 10000]

Why ``bench.remote``'s files rows are CPU-bound on a small machine: one process GETs one small
object ``--requests`` times, one request at a time, straight to moto's server (no proxy), with
each client, and reports per GET the client process's CPU (user + system) and the server
process's. Clients: s3fs ``cat_file`` (what shmaug reads through: s3fs sends a HEAD before a
whole object's GET unless ``max_concurrency=1``, as shmaug passes), boto3 ``get_object``, and
urllib3 over a presigned URL (botocore signs each; no SDK on the request path). Prints a
Markdown table; the CPU and its load are in the header.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Callable

from bench.remote.data import BUCKET, OPTIONS, start_server
from bench.common.report import cpu_model


def per_get(get: Callable[[], bytes], requests: int, server_pid: int) -> tuple[float, float, float]:
    """Client CPU ms, server CPU ms and wall ms per GET, over ``requests`` GETs."""
    import psutil

    server = psutil.Process(server_pid)
    for _ in range(10):  # warm: connections open, caches filled
        get()
    mine, served, began = os.times(), sum(server.cpu_times()[:2]), time.perf_counter()
    for _ in range(requests):
        get()
    wall = time.perf_counter() - began
    after = os.times()
    client = after.user + after.system - mine.user - mine.system
    return (1e3 * client / requests, 1e3 * (sum(server.cpu_times()[:2]) - served) / requests,
            1e3 * wall / requests)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remote.cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--size", type=int, default=10_000, help="bytes of the object")
    args = parser.parse_args()
    import boto3
    import s3fs
    import urllib3

    server, port = start_server()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=OPTIONS["key"],
                              aws_secret_access_key=OPTIONS["secret"], region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        client.put_object(Bucket=BUCKET, Key="one.bin", Body=os.urandom(args.size))
        fs = s3fs.S3FileSystem(**{**OPTIONS, "client_kwargs": {"endpoint_url": endpoint,
                                                                 "region_name": "us-east-1"}})
        http = urllib3.PoolManager()

        def presigned() -> bytes:
            url = client.generate_presigned_url("get_object", Params={"Bucket": BUCKET,
                                                                      "Key": "one.bin"})
            return bytes(http.request("GET", url).data)

        clients: dict[str, Callable[[], bytes]] = {
            "s3fs cat_file (a HEAD, then the GET)": lambda: bytes(fs.cat_file(f"{BUCKET}/one.bin")),
            "s3fs cat_file, max_concurrency=1 (shmaug's)": lambda: bytes(
                fs.cat_file(f"{BUCKET}/one.bin", max_concurrency=1)),
            "boto3 get_object": lambda: bytes(client.get_object(Bucket=BUCKET,
                                                                Key="one.bin")["Body"].read()),
            "urllib3 GET of a presigned URL": presigned,
        }
        print(f"{args.requests} GETs of a {args.size:,}-byte object, one at a time, to moto's "
              f"server on localhost; {cpu_model()}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.2f}\n")
        print("| client | client CPU per GET (ms) | server CPU per GET (ms) | wall per GET (ms) |")
        print("|---|---:|---:|---:|")
        for name, get in clients.items():
            assert len(get()) == args.size
            c, s, w = per_get(get, args.requests, server.pid)
            print(f"| {name} | {c:.2f} | {s:.2f} | {w:.2f} |", flush=True)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
