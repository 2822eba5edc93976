"""Images/s from a bucket at 0, 20 and 50 ms per request: shmaug's record shards with and
without its disk cache, its image files with the cache, against local disk, MosaicML
Streaming, litdata, torch + webdataset and tf.data.

    python -m bench.remote --quick       # a smoke run: 32 small images, one delay, one round
    python -m bench.remote --peer-python .venv-peers/bin/python --out bench/results/remote

The data: ``--images`` (2,000) photo-like JPEGs of 160x160 made locally, as files, as
``--shards`` (32) WebDataset tars and TFRecord files, as MDS shards by Streaming's writer and
as chunks by ``litdata.optimize`` (``bench.remote.data``, ``bench.remote.peers``). Every
shmaug worker's span cache (``SHMAUG_SPAN_CACHE_MB``) is set to a twentieth of the tars, so
the dataset is 20x the cache, as a real bucket's is.

The stores (``bench.remote.serve``): nginx (when installed; the bench installs nothing and
says when it is missing) serves the files and shards over ``http://`` with range reads from
2 processes: a store that answers in parallel. Streaming and litdata read only ``s3://``:
their MDS and litdata chunks are in moto's S3 server (one core; they read whole shards, a few
requests an epoch, so it is not their ceiling). Without nginx (``--store moto``, CI) every row
reads moto. In front of each store, per delay, a proxy of 2 asyncio processes holds every
request for the delay and counts the requests and bytes it forwards.

Rows, each ``--workers`` (2) workers, batch 32, decode + resize, no augmentation; each run
times epoch 1 (from the iterator's start: workers starting, caches cold) and then
``--epochs`` (2) epochs: local disk (files, tars); shmaug's exact shuffle over the tars
without a disk cache; with the disk cache (a fresh ``cache_dir`` per run): epoch 1, and the
epochs after it; image files with the cache, likewise; Streaming and litdata (their cache
fresh per run): epoch 1 and the epochs after; torch + webdataset and tf.data (no cache: the
epochs after the first); shmaug's locality shuffle (``shuffle="blocks"``, windows of 8
shards, or ``--windows``) over the tars without a disk cache. Each row prints the requests and bytes per epoch read through the proxy, the store's and the
proxy's CPU, and all the CPU the bench used. Rounds are interleaved; medians; the ratio to
local disk (files, epochs after the first) is the median of same-round ratios.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import shmaug
from bench.common.harness import described, prepare_out
from bench.common.report import QUICK, cpu_model
from bench.remote.data import make_images, upload_folder, write_shards
from bench.remote.peers import timed_epochs
from bench.remote.serve import BUCKET, DelayProxy, Nginx, cpu_of, nginx_binary, start_moto

log_name = "bench.remote"
Run = Callable[[], dict[str, float]]  # one run -> timed_epochs' figures
SPAN_SHARE = 20  # the dataset is this many times each worker's span cache
BASE = "local disk: files"
_PEER_TIMEOUT_S = 900


def loader_run(source: Any, spec: dict[str, Any], cache: Path | None = None,
               shuffle: bool | str = True, window: int | None = None,
               queue: int | None = None) -> dict[str, float]:
    """``timed_epochs`` of a shmaug Loader over ``source``, its disk cache emptied first
    (``queue``: its max_queue_size, else the spec's)."""
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
    with shmaug.Loader(source, batch_size=spec["batch_size"], workers=spec["workers"],
                       shuffle=shuffle, shuffle_window=window, seed=0,
                       start_method=spec["start_method"],
                       max_queue_size=queue or spec["max_queue_size"]) as loader:
        return timed_epochs(loader.__iter__, spec)


def with_transport(transport: str, run: Run) -> dict[str, float]:
    """``run()`` with ``SHMAUG_TRANSPORT=transport`` (its workers inherit it). A bench process
    that imported obstore itself would make forked workers read through fsspec: refused."""
    if "obstore" in sys.modules:
        raise RuntimeError("the bench process imported obstore: forked workers would not use it")
    before = os.environ.get("SHMAUG_TRANSPORT")
    os.environ["SHMAUG_TRANSPORT"] = transport
    try:
        return run()
    finally:
        if before is None:
            del os.environ["SHMAUG_TRANSPORT"]
        else:
            os.environ["SHMAUG_TRANSPORT"] = before


def peer_run(kind: str, spec: dict[str, Any], python: str) -> dict[str, float]:
    """One peer's run in a child of ``python`` (its cache folder fresh)."""
    if spec.get("cache"):
        shutil.rmtree(spec["cache"], ignore_errors=True)
    done = subprocess.run([python, "-m", "bench.remote.peers", kind, json.dumps(spec)],
                          capture_output=True, text=True, timeout=_PEER_TIMEOUT_S,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if done.returncode:
        raise RuntimeError(f"peer {kind} failed: {done.stderr[-1500:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def missing(python: str, module: str, install: str) -> str | None:
    """Why ``module`` cannot run under ``python`` ("not installed: pip install ..."), or None."""
    found = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    return None if found.returncode == 0 else f"not installed ({install})"


class Bench:
    """The stores, proxies, data and sources of one bench run; ``contenders()`` its rows."""

    def __init__(self, args: Any, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self.root = tmp / "data" / "train"
        self.nginx: Nginx | None = None
        self.moto: Any = None
        self.proxies: dict[tuple[str, float], DelayProxy] = {}

    def prepare(self) -> None:
        args = self.args
        make_images(self.root, args.images, args.size)
        self.shards = write_shards(self.root, self.tmp / "data", args.shards,
                                   tfrecord=args.peers)
        tar_bytes = sum(os.path.getsize(p) for p in self.shards["tar"])
        self.span_mb = tar_bytes / SPAN_SHARE / (1 << 20)
        os.environ["SHMAUG_SPAN_CACHE_MB"] = f"{self.span_mb:.4f}"  # the workers inherit it
        self.local = shmaug.ImageFiles.from_directory(self.root, image_size=self.image_size)
        self.items = self.tmp / "items.json"
        labels = [int(Path(p).parent.name[len("class"):]) for p in self.local.paths]
        self.items.write_text(json.dumps([[str(p), k] for p, k in zip(self.local.paths,
                                                                         labels)]))
        self.labels = labels
        self.peer_data: dict[str, str] = {}
        if args.peers:
            for kind, folder in (("write-mds", "mds"), ("write-litdata", "litdata")):
                spec = {"items": str(self.items), "out": str(self.tmp / "data" / folder),
                        "shards": args.shards}
                try:
                    peer_run(kind, spec, args.peer_python)
                    self.peer_data[folder] = spec["out"]
                except RuntimeError as e:
                    print(f"{kind}: {str(e)[-300:]}", file=sys.stderr)
        if self.args.store == "nginx":
            self.nginx = Nginx(self.tmp / "data")
        if self.args.store == "moto" or self.peer_data:
            self.moto, port = start_moto()
            self.moto_port = port
            upload_folder(port, self.tmp / "data", only=None if self.args.store == "moto"
                          else set(self.peer_data))
        for delay in (float(d) for d in args.delays_ms.split(",")):
            if self.nginx is not None:
                self.proxies["http", delay] = DelayProxy(("127.0.0.1", self.nginx.port),
                                                         delay / 1000)
            if self.moto is not None:
                self.proxies["s3", delay] = DelayProxy(("127.0.0.1", self.moto_port),
                                                       delay / 1000)

    @property
    def image_size(self) -> tuple[int, int]:
        return (self.args.size, self.args.size)

    def server_pids(self, store: str) -> list[int]:
        if store == "http" and self.nginx is not None:
            return self.nginx.pids()
        return [self.moto.pid] if self.moto is not None else []

    def spec(self, proxy: DelayProxy | None) -> dict[str, Any]:
        args = self.args
        return {"size": args.size, "batch_size": args.batch, "workers": args.workers,
                "max_queue_size": args.queue_sizes[0],
                "count": args.images, "epochs": args.epochs, "start_method": args.start_method,
                "counter": proxy.counter.path if proxy else None}

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()
        if self.nginx is not None:
            self.nginx.close()
        if self.moto is not None:
            self.moto.terminate()
            self.moto.wait(timeout=10)

    def contenders(self) -> dict[str, tuple[str | None, float | None, Run | str]]:
        """Run name -> (store, delay, the run or why it cannot run)."""
        runs: dict[str, tuple[str | None, float | None, Run | str]] = {}
        spec, local_tars = self.spec(None), self.shards["tar"]
        tars = shmaug.ImageRecords.from_webdataset(local_tars, image_size=self.image_size)
        runs[BASE] = (None, None, lambda: loader_run(self.local, spec))
        runs["local disk: tar shards"] = (None, None, lambda: loader_run(tars, spec))
        for (store, delay), proxy in self.proxies.items():
            at, spec = f"{store} {delay:g} ms", self.spec(proxy)
            if store == "http" or self.args.store == "moto":
                for transport in self.args.transports:
                    runs.update(self.by_transport(
                        transport, self.shmaug_runs(at, store, delay, proxy, spec)))
                runs.update(self.stream_runs(at, store, delay, proxy, spec))
            if store == "s3" and self.args.peers:
                runs.update(self.cache_peer_runs(at, delay, proxy, spec))
        return runs

    def shmaug_runs(self, at: str, store: str, delay: float, proxy: DelayProxy,
                    spec: dict[str, Any]) -> dict[str, tuple[str, float, Run | str]]:
        size, opts = self.image_size, (proxy.options() if store == "s3" else None)
        base = f"s3://{BUCKET}" if store == "s3" else proxy.url()
        tars = [f"{base}/wds/{Path(p).name}" for p in self.shards["tar"]]
        records = shmaug.ImageRecords.from_webdataset(tars, image_size=size,
                                                      storage_options=opts)
        cache = self.tmp / "cache" / at
        cached = shmaug.ImageRecords.from_webdataset(tars, image_size=size, storage_options=opts,
                                                     cache_dir=cache / "tar")
        urls = [f"{base}/train/{Path(p).relative_to(self.root).as_posix()}"
                for p in self.local.paths]
        files = shmaug.ImageFiles.from_paths(urls, self.labels, image_size=size,
                                             storage_options=opts, cache_dir=cache / "files")
        windows = {
            f"{at}: shmaug tar, locality shuffle{'' if k == 8 else f' (window {k})'}, no disk "
            f"cache": (store, delay,
                       lambda k=k: loader_run(records, spec, shuffle="blocks", window=k))
            for k in self.args.windows}
        deeper = {
            f"{at}: shmaug tar, {what}no disk cache, max_queue_size {q}": (
                store, delay, lambda q=q, how=how: loader_run(records, spec, queue=q, **how))
            for q in self.args.queue_sizes[1:]
            for what, how in (("", {}), ("locality shuffle, ", {"shuffle": "blocks"}))}
        return {
            f"{at}: shmaug tar, no disk cache": (store, delay, lambda: loader_run(records, spec)),
            **windows,
            **deeper,
            f"{at}: shmaug tar, disk cache": (
                store, delay, lambda: loader_run(cached, spec, cache / "tar")),
            f"{at}: shmaug files, disk cache": (
                store, delay, lambda: loader_run(files, spec, cache / "files"))}

    def by_transport(self, transport: str, runs: dict[str, tuple[str, float, Run | str]]
                     ) -> dict[str, tuple[str, float, Run | str]]:
        """shmaug's ``runs`` with their GETs sent by ``transport`` (``SHMAUG_TRANSPORT``): as
        they are for one transport, else each named after its own."""
        if len(self.args.transports) == 1:
            return runs
        label = {"auto": "obstore", "fsspec": "fsspec"}[transport]
        return {f"{name} [{label}]": (store, delay, run if isinstance(run, str) else
                                      functools.partial(with_transport, transport, run))
                for name, (store, delay, run) in runs.items()}

    def stream_runs(self, at: str, store: str, delay: float, proxy: DelayProxy,
                    spec: dict[str, Any]) -> dict[str, tuple[str, float, Run | str]]:
        """torch + webdataset and tf.data over the tars and TFRecords: no cache."""
        if not self.args.peers:
            return {}
        base = f"s3://{BUCKET}" if store == "s3" else proxy.url()
        opts = proxy.options() if store == "s3" else {}
        python = sys.executable
        runs: dict[str, tuple[str, float, Run | str]] = {}
        why = missing(python, "torch, webdataset", "pip install torch webdataset")
        tars = [f"{base}/wds/{Path(p).name}" for p in self.shards["tar"]]
        runs[f"{at}: torch DataLoader + webdataset"] = (store, delay, why or (
            lambda s={**spec, "options": opts, "urls": tars}: peer_run("torch", s, python)))
        why = missing(python, "tensorflow", "pip install tensorflow")
        if "tfrecord" not in self.shards:
            why = why or "no TFRecords (TensorFlow could not write them)"
        urls = [f"{base}/tfrecord/{Path(p).name}" for p in self.shards.get("tfrecord", [])]
        runs[f"{at}: tf.data TFRecord"] = (store, delay, why or (
            lambda s={**spec, "options": opts, "urls": urls}: peer_run("tf", s, python)))
        return runs

    def cache_peer_runs(self, at: str, delay: float, proxy: DelayProxy, spec: dict[str, Any]
                        ) -> dict[str, tuple[str, float, Run | str]]:
        """MosaicML Streaming and litdata from the S3 server, each with its cache fresh."""
        python = self.args.peer_python
        runs: dict[str, tuple[str, float, Run | str]] = {}
        creds = {"endpoint": proxy.url(), "key": "bench", "secret": "bench-secret"}
        for name, module, folder, install in (
                ("MosaicML Streaming", "streaming", "mds", "pip install mosaicml-streaming"),
                ("litdata", "litdata", "litdata", "pip install litdata")):
            why = missing(python, module, install)
            if why is None and folder not in self.peer_data:
                why = f"its writer failed ({folder})"
            s = {**spec, **creds, "remote": f"s3://{BUCKET}/{folder}",
                 "cache": str(self.tmp / "cache" / f"{at} {folder}")}
            runs[f"{at}: {name}"] = ("s3", delay, why or (
                lambda s=s, m=module: peer_run(m, s, python)))
        return runs


def measure(bench: Bench, runs: dict[str, tuple[str | None, float | None, Run | str]],
            rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Each run once per round, in order (interleaved); per run its figures, the store's and
    the proxy's CPU and all the CPU the bench used, in cores."""
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in runs}
    for _ in range(rounds):
        for name, (store, delay, run) in runs.items():
            if isinstance(run, str):
                continue
            server = bench.server_pids(store) if store else []
            proxy = bench.proxies[store, delay].pids if store and delay is not None else []
            before = (cpu_of(server), cpu_of(proxy), os.times())
            began = time.perf_counter()
            try:
                figures: dict[str, Any] = run()
            except Exception as e:  # a peer that fails is a row saying so
                text = " ".join(str(e).replace("|", "/").split())  # one table cell
                figures = {"error": f"{type(e).__name__}: {text[-300:]}"}
            wall = time.perf_counter() - began
            after = (cpu_of(server), cpu_of(proxy), os.times())
            mine = sum(after[2][:4]) - sum(before[2][:4])
            figures.update(server_cpu=(after[0] - before[0]) / wall,
                           proxy_cpu=(after[1] - before[1]) / wall,
                           all_cpu=(mine + after[0] - before[0] + after[1] - before[1]) / wall)
            got[name].append(figures)
    return got


# which part of a run each row shows: (suffix, images/s key, requests key, bytes key)
EPOCH_1 = (": epoch 1", "epoch1", "requests1", "bytes1")
AFTER = (": epochs after", "after", "requests_after", "bytes_after")
STEADY = ("", "after", "requests_after", "bytes_after")


def parts(name: str) -> tuple[tuple[str, str, str, str], ...]:
    if ", disk cache" in name or "Streaming" in name or "litdata" in name:
        return (EPOCH_1, AFTER)
    return (STEADY,)


def rows(runs: dict[str, tuple[str | None, float | None, Run | str]],
         got: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The table's rows: medians over rounds, ratios to local disk within a round."""
    base = [r.get("after") for r in got[BASE]]
    out: dict[str, dict[str, Any]] = {}
    for name, (_, _, run) in runs.items():
        done = [r for r in got[name] if "error" not in r]
        for suffix, rate, requests, sent in parts(name):
            row: dict[str, Any] = {"status": "ok"}
            if isinstance(run, str) or not done:
                row["status"] = run if isinstance(run, str) else got[name][-1]["error"]
                out[name + suffix] = row
                continue
            if len(done) < len(got[name]):
                row["status"] = f"ok {len(done)}/{len(got[name])}: " + next(
                    r["error"] for r in got[name] if "error" in r)
            pairs = [(r[rate], b) for r, b in zip(got[name], base) if "error" not in r and b]
            row.update(
                images_per_s=statistics.median(r[rate] for r in done),
                rounds=[r[rate] for r in done],
                x_local=statistics.median(a / b for a, b in pairs) if pairs else None,
                requests=statistics.median(r[requests] for r in done),
                mb=statistics.median(r[sent] for r in done) / 1e6,
                **{k: statistics.median(r[k] for r in done)
                   for k in ("server_cpu", "proxy_cpu", "all_cpu")})
            out[name + suffix] = row
    return out


def report(result: dict[str, Any]) -> str:
    head = result["setup"]
    command = " ".join(["python -m bench.remote", *head["argv"]])
    lines = ([QUICK, ""] if head["quick"] else []) + [f"`{command}`", "",
        f"{head['images']} JPEGs {head['size']}x{head['size']} in {head['shards']} shards "
        f"({head['tar_mb']:.1f} MB of tars; span cache {head['span_mb']:.2f} MiB per worker, "
        f"1/{SPAN_SHARE} of them), {head['workers']} workers, batch {head['batch']}, "
        f"max_queue_size {head.get('max_queue_size', 8)} (shmaug's rows), "
        f"{head['start_method']}, epoch 1 then {head['epochs']} timed, median of "
        f"{head['rounds']} interleaved round(s); store: {head['store']}; {head['cpu']}, "
        f"{head['cpus']} cpus, load average {head['load']:.2f} at start", "",
        "| source | images/s | x local disk | requests / epoch | MB read / epoch "
        "| store CPU | proxy CPU | all CPU |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, row in result["rows"].items():
        if "images_per_s" not in row:
            lines.append(f"| {name} | {row['status']} | | | | | | |")
            continue
        remote = not name.startswith("local")
        ratio = "-" if row["x_local"] is None else f"{row['x_local']:.2f}"
        lines.append(
            f"| {name} | {row['images_per_s']:.0f} | {ratio} "
            f"| {row['requests']:.0f} | {row['mb']:.1f} "
            + (f"| {row['server_cpu']:.2f} | {row['proxy_cpu']:.2f} " if remote else "| - | - ")
            + f"| {row['all_cpu']:.2f} |")
    notes = [f"- {n}: {r['status']}" for n, r in result["rows"].items()
             if r["status"].startswith("ok ")]
    return "\n".join(lines + ([""] + notes if notes else []))


def parse(argv: list[str] | None) -> Any:
    parser = argparse.ArgumentParser(prog="python -m bench.remote",
                                     description=described(__doc__))
    parser.add_argument("--quick", action="store_true", help="32 small images, 20 ms, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--size", type=int, default=160, help="pixels a side, made and read")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after epoch 1")
    parser.add_argument("--workers", type=int, default=2, help="of every loader, peers too")
    parser.add_argument("--queue-sizes", default="8",
                        type=lambda s: [int(k) for k in s.split(",")],
                        help="shmaug's max_queue_size: the first for every row, each other "
                             "for rows of its own without a disk cache (how many tasks each "
                             "worker has queued, whose samples it fetches ahead)")
    parser.add_argument("--delays-ms", default="0,20,50")
    parser.add_argument("--windows", default="8", type=lambda s: [int(k) for k in s.split(",")],
                        help="shuffle_window of the locality shuffle's rows (shards per window)")
    parser.add_argument("--transports", default="auto",
                        type=lambda s: [t.strip() for t in s.split(",")],
                        help="who sends shmaug's GETs (SHMAUG_TRANSPORT): auto (obstore where "
                             "it can) and/or fsspec; several: each shmaug row once per "
                             "transport, interleaved")
    parser.add_argument("--start-method", default="fork")
    parser.add_argument("--store", choices=("auto", "nginx", "moto"), default="auto",
                        help="what serves shmaug's, torch's and tf.data's reads (auto: nginx "
                             "where installed, else moto's S3 server)")
    parser.add_argument("--no-peers", dest="peers", action="store_false",
                        help="leave out every peer (each starts a child per run)")
    parser.add_argument("--peer-python", default=sys.executable,
                        help="the Python of MosaicML Streaming and litdata (a venv of their "
                             "own: Streaming pins numpy < 2.2)")
    parser.add_argument("--out", default=None, help="folder for remote.json and remote.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.shards, args.size, args.batch = 32, 4, 64, 8
        args.rounds, args.delays_ms, args.peers, args.epochs = 1, "20", False, 1
    if set(args.transports) - {"auto", "fsspec"}:
        parser.error(f"--transports: auto and/or fsspec, not {','.join(args.transports)}")
    if args.store == "auto":
        args.store = "nginx" if nginx_binary() else "moto"
    elif args.store == "nginx" and not nginx_binary():
        parser.error("--store nginx: nginx is not installed (e.g. apt-get install nginx)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    out = prepare_out(args.out) if args.out else None  # before anything is measured
    load = os.getloadavg()[0]
    if args.store == "moto":
        print("nginx not found: every row reads moto's S3 server, which answers on one core "
              "(apt-get install nginx for a store that answers in parallel)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(args, Path(tmp))
        try:
            bench.prepare()
            runs = bench.contenders()
            table = rows(runs, measure(bench, runs, args.rounds))
        finally:
            bench.close()
        tar_mb = sum(os.path.getsize(p) for p in bench.shards["tar"]) / 1e6
    store = ("nginx over http (2 worker processes); Streaming and litdata: moto's S3 server"
             if args.store == "nginx" else "moto's S3 server" + (
                 " (--store moto)" if nginx_binary() else " (nginx not installed)"))
    result = {"setup": {"images": args.images, "epochs": args.epochs, "workers": args.workers,
                        "max_queue_size": args.queue_sizes[0],
                        "size": args.size, "shards": args.shards, "batch": args.batch,
                        "start_method": args.start_method, "rounds": args.rounds,
                        "quick": args.quick, "cpu": cpu_model(), "cpus": os.cpu_count(),
                        "load": load, "store": store, "tar_mb": tar_mb,
                        "span_mb": bench.span_mb, "delays_ms": args.delays_ms,
                        "argv": sys.argv[1:] if argv is None else argv},
              "rows": table}
    text = report(result)
    print(text)
    if out is not None:
        (out / "remote.json").write_text(json.dumps(result, indent=1))
        (out / "remote.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
