"""Images/s from a bucket at 0, 20 and 50 ms per request: files and record shards, against local
disk and against tf.data and torch + webdataset reading the same shards.

    python -m bench.remote --quick       # a smoke run: 32 small images, one delay, one round
    python -m bench.remote --out bench/results/remote    # 256 JPEGs 160x160, 3 rounds, peers

A real S3 server (moto's, in a process of its own, ``bench.remote.data``) runs on localhost; a
small TCP proxy in front of it holds every chunk a client sends for the delay, so each request
pays it before its first byte, as a bucket's 10-100 ms do. Rows, each ``--epochs`` epochs (3)
timed after a first that warms up (workers started, connections open), of ``--workers`` (2)
workers (batch 32, decode + resize, no augmentation): local disk (``ImageFiles`` over the
folder, and ``ImageRecords`` over the TFRecords on disk); at each delay ``ImageFiles`` over
``s3://`` files, ``ImageRecords.from_tfrecord`` / ``from_webdataset`` over ``s3://`` shards
(8), and the peers
(``bench.remote.peers``: tf.data over the TFRecord objects, a torch DataLoader + webdataset over
the tars; each in a child, skipped when its library is missing). The shards (about 2 MB) fit
each worker's span cache (``SHMAUG_SPAN_CACHE_MB``, 32 MiB): the row "span cache a quarter of the
shards" shows a dataset four times the cache. Rows "no span cache" and "one task per fetch"
are shmaug as it read before each change (``with_remote``), in the same run. Rounds are
interleaved; the table quotes medians and, per row, the median of its same-round ratio to
local disk (files), and the S3 server's CPU share during the row (moto
spends 3-6 ms of CPU per request, ``bench.remote.cost``: on a small machine it, not the delay,
is the ceiling). Needs
``pip install -e ".[tf,tfrecord,remote,remote-test]"``; the peers also ``webdataset`` and torch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import shmaug
from bench.remote.data import BUCKET, DelayProxy, make_images, start_server, upload, write_shards
from bench.common.harness import prepare_out
from bench.common.report import QUICK, cpu_model
from bench.remote.peers import timed_rate

log_name = "bench.remote"
Run = Callable[[], float]  # one epoch -> images/s


def loader_rate(source: Any, batch_size: int, start_method: str, epochs: int, workers: int
                ) -> float:
    """Images/s over ``epochs`` epochs after a first that warms up (workers started,
    connections open, the round trip measured)."""
    with shmaug.Loader(source, batch_size=batch_size, workers=workers, shuffle=True, seed=0,
                       start_method=start_method) as loader:
        return timed_rate(loader.__iter__, len(source), epochs)


def peer_rate(kind: str, spec: dict[str, Any]) -> float:
    done = subprocess.run([sys.executable, "-m", "bench.remote.peers", kind, json.dumps(spec)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if done.returncode:
        raise RuntimeError(f"peer {kind} failed: {done.stderr[-1500:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["images_per_s"])


def with_remote(run: Run, **values: int) -> Run:
    """``run`` with the remote layer's settings set to ``values`` (forked workers inherit
    them): ``AHEAD`` on ``shmaug.sources._ahead``, ``SPAN_CACHE`` (bytes) as
    ``SHMAUG_SPAN_CACHE_MB``; shmaug as it read before a change, in the same run."""
    from shmaug.sources import _ahead

    def patched() -> float:
        saved_ahead, saved_env = _ahead.AHEAD, os.environ.get("SHMAUG_SPAN_CACHE_MB")
        _ahead.AHEAD = values.get("AHEAD", saved_ahead)
        if "SPAN_CACHE" in values:
            os.environ["SHMAUG_SPAN_CACHE_MB"] = str(values["SPAN_CACHE"] / (1 << 20))
        try:
            return run()
        finally:
            _ahead.AHEAD = saved_ahead
            if saved_env is None:
                os.environ.pop("SHMAUG_SPAN_CACHE_MB", None)
            else:
                os.environ["SHMAUG_SPAN_CACHE_MB"] = saved_env

    return patched


def shard_rows(name: str, paths: list[str], args: Any, run: Run) -> dict[str, Run]:
    """``name``'s row, and (forked workers take the parent's settings) the same with a span
    cache a quarter of the shards' bytes, with none, and with none and one task per fetch."""
    rows = {name: run}
    if args.start_method == "fork":
        quarter = sum(os.path.getsize(p) for p in paths) // 4
        rows[f"{name}, span cache a quarter of the shards"] = with_remote(run, SPAN_CACHE=quarter)
        rows[f"{name}, no span cache"] = with_remote(run, SPAN_CACHE=0)
        rows[f"{name}, no span cache, one task per fetch"] = with_remote(run, SPAN_CACHE=0,
                                                                         AHEAD=0)
    return rows


def have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def contenders(args: Any, root: Path, shards: dict[str, list[str]], proxies: dict[float, Any],
               size: int, batch: int) -> dict[str, Run]:
    """Row name -> one timed epoch (sources built here, once, so indexing is not timed)."""
    image_size = (size, size)
    how = (args.start_method, args.epochs, args.workers)
    local = shmaug.ImageFiles.from_directory(root, image_size=image_size)
    rows: dict[str, Run] = {"local disk: files": lambda: loader_rate(local, batch, *how)}
    if "tfrecord" in shards:
        disk = shmaug.ImageRecords.from_tfrecord(shards["tfrecord"], image_size=image_size)
        rows["local disk: TFRecord shards"] = lambda: loader_rate(disk, batch, *how)
    for delay, proxy in proxies.items():
        opts = proxy.options()
        at = f"s3 {delay:g} ms"
        files = shmaug.ImageFiles.from_directory(f"s3://{BUCKET}/train/", image_size=image_size,
                                                 storage_options=opts)
        rows[f"{at}: shmaug files"] = (lambda s=files: loader_rate(s, batch, *how))
        tars = [f"s3://{BUCKET}/wds/{Path(p).name}" for p in shards["tar"]]
        if "tfrecord" in shards:
            urls = [f"s3://{BUCKET}/tfrecord/{Path(p).name}" for p in shards["tfrecord"]]
            records = shmaug.ImageRecords.from_tfrecord(urls, image_size=image_size,
                                                        storage_options=opts)
            rows.update(shard_rows(f"{at}: shmaug TFRecord", shards["tfrecord"], args,
                                   lambda s=records: loader_rate(s, batch, *how)))
        wds = shmaug.ImageRecords.from_webdataset(
            f"s3://{BUCKET}/wds/train-{{000..{len(tars) - 1:03d}}}.tar", image_size=image_size,
            storage_options=opts)
        rows.update(shard_rows(f"{at}: shmaug tar", shards["tar"], args,
                               lambda s=wds: loader_rate(s, batch, *how)))
        spec = {"options": opts, "size": size, "batch_size": batch, "workers": args.workers,
                "count": len(local), "epochs": args.epochs}
        if args.peers and "tfrecord" in shards and have("tensorflow"):
            rows[f"{at}: tf.data TFRecord (fsspec generator)"] = (
                lambda s={**spec, "urls": urls}: peer_rate("tf", s))
        if args.peers and have("torch") and have("webdataset"):
            rows[f"{at}: torch DataLoader + webdataset tar"] = (
                lambda s={**spec, "urls": tars}: peer_rate("torch", s))
    return rows


def measure(rows: dict[str, Run], rounds: int, server_pid: int) -> dict[str, dict[str, Any]]:
    """Each row once per round, rows in order (interleaved); per run, the S3 server's CPU and
    all the CPU the bench used (itself, its workers and peers once reaped, and the server), in
    cores: near the machine's core count, the row is CPU-bound."""
    import psutil

    server = psutil.Process(server_pid)

    def ours() -> tuple[float, float]:
        mine = os.times()
        served = sum(server.cpu_times()[:2])
        return served, served + mine.user + mine.system + mine.children_user + \
            mine.children_system

    runs: dict[str, dict[str, list[float]]] = {n: {"rate": [], "cpu": [], "all": []}
                                               for n in rows}
    for _ in range(rounds):
        for name, run in rows.items():
            (served, used), began = ours(), time.perf_counter()
            runs[name]["rate"].append(run())
            wall = time.perf_counter() - began
            after = ours()
            runs[name]["cpu"].append((after[0] - served) / wall)
            runs[name]["all"].append((after[1] - used) / wall)
    base = runs["local disk: files"]["rate"]
    return {n: {"images_per_s": statistics.median(r["rate"]), "rounds": r["rate"],
                "x_local": statistics.median(a / b for a, b in zip(r["rate"], base)),
                "server_cpu": statistics.median(r["cpu"]),
                "all_cpu": statistics.median(r["all"])} for n, r in runs.items()}


def report(result: dict[str, Any]) -> str:
    head = result["setup"]
    lines = ([QUICK, ""] if head["quick"] else []) + [f"{head['images']} JPEGs {head['size']}x{head['size']} ({head['shards']} shards), "
             f"{head.get('workers', 2)} workers, batch {head['batch']}, {head['start_method']}, "
             f"{head.get('epochs', 1)} timed epoch(s) after one, median of "
             f"{head['rounds']} interleaved round(s); {head['cpu']}, {head['cpus']} cpus", "",
             "| source | images/s | x local disk (same round) | S3 server CPU (cores) "
             "| all CPU used (cores) |", "|---|---:|---:|---:|---:|"]
    for name, row in result["rows"].items():
        cpu = f"{row['server_cpu']:.2f}" if name.startswith("s3") else "-"
        lines.append(f"| {name} | {row['images_per_s']:.0f} | {row['x_local']:.2f} | {cpu} "
                     f"| {row['all_cpu']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remote", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="32 small images, 20 ms, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per run, after one")
    parser.add_argument("--workers", type=int, default=2, help="of every loader, peers too")
    parser.add_argument("--delays-ms", default="0,20,50")
    parser.add_argument("--start-method", default="fork")
    parser.add_argument("--no-peers", dest="peers", action="store_false",
                        help="leave out tf.data and torch (each starts a child per run)")
    parser.add_argument("--out", default=None, help="folder for remote.json and remote.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.rounds, args.delays_ms, args.peers, args.epochs = 32, 1, "20", False, 1
    size, batch, shard_count = (64, 8, 4) if args.quick else (160, 32, 8)
    out = prepare_out(args.out) if args.out else None  # before anything is measured
    server, port = start_server()
    proxies: dict[float, Any] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "train"
            make_images(root, args.images, size)
            shards = write_shards(root, Path(tmp) / "shards", shard_count)
            upload(port, root, shards)
            for delay in (float(d) for d in args.delays_ms.split(",")):
                proxies[delay] = DelayProxy(("127.0.0.1", port), delay / 1000)
            rows = contenders(args, root, shards, proxies, size, batch)
            measured = measure(rows, args.rounds, server.pid)
    finally:
        for proxy in proxies.values():
            proxy.close()
        server.terminate()
        server.wait(timeout=10)
    result = {"setup": {"images": args.images, "epochs": args.epochs, "workers": args.workers,
                        "size": size,
                        "shards": shard_count,
                        "batch": batch, "start_method": args.start_method,
                        "rounds": args.rounds, "quick": args.quick, "cpu": cpu_model(),
                        "cpus": os.cpu_count(), "tfrecord": "tfrecord" in shards},
              "rows": measured}
    text = report(result)
    print(text)
    if out is not None:
        (out / "remote.json").write_text(json.dumps(result, indent=1))
        (out / "remote.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
