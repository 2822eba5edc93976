"""``bench.files``' child process: ONE contender over ONE folder (``python -m bench.files.child SPEC``).

The spec (JSON) names the folder, the contender (``bench.files.peers``, or the module named by
``"peers"`` with keyword arguments ``"extra"`` for its ``build``: ``bench.records.peers``), the
worker count, the batch size and the number of timed epochs. The child lists the folder as
``ImageFiles.from_directory`` does (so every contender reads the same files in the same order),
warms up (the first batches, or a whole epoch for a contender whose stream spans epochs),
then times each epoch and checks that it delivered every file exactly once (the targets are
the files' ids). It reports one JSON line (``harness.report_json``): images/s per epoch, time
to the first batch, worker memory mid-epoch, and any exactly-once problem. A missing library
reports ``"status": "skipped"``.

Nothing is imported from TensorFlow, Grain or torch unless the contender is theirs: shmaug's
workers fork, and forking after TensorFlow has started is unsafe.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import Any

import numpy as np

from bench.common.harness import guarded, report_json, run_json, wait_gone, worker_memory

WARMUP_BATCHES = 3


def run_child(args: Any, folder: Any, contender: str, env: dict[str, str] | None = None,
              **spec: Any) -> dict[str, Any]:
    """How a driver measures ``contender`` over ``folder``: this module in a child process
    under ``args.timeout``, with the options every folder bench shares (``--workers``,
    ``--batch-size``, ``--repeats``; ``--quick``: batch 8, 1 repeat) and ``spec``'s
    (``peers``, ``extra``). Its result; an epoch that missed or repeated a file makes its
    status "duplicates/missing"."""
    spec = {"folder": str(folder), "contender": contender, "workers": args.workers,
            "batch_size": 8 if args.quick else args.batch_size,
            "repeats": 1 if args.quick else args.repeats, **spec}
    out = run_json([sys.executable, "-m", "bench.files.child", json.dumps(spec)], args.timeout,
                   env=env)
    res: dict[str, Any] = dict(out.value) if out.ok else {"status": out.status,
                                                          "error": out.error}
    if res.get("status") == "ok" and res.get("problems"):
        res["status"] = "duplicates/missing: " + "; ".join(res["problems"])[:200]
    return res


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    import shmaug

    paths = np.array(shmaug.ImageFiles.from_directory(spec["folder"]).paths.tolist())
    n, bs = len(paths), spec["batch_size"]
    ids = np.arange(n)
    result: dict[str, Any] = {"n": n, "rates": [], "problems": []}
    t0 = time.perf_counter()
    peers = importlib.import_module(spec.get("peers", "bench.files.peers"))  # bench.records'
    c = peers.build(spec["contender"], paths, ids, bs, spec["workers"], **spec.get("extra", {}))
    try:
        for r in range(spec["repeats"] + 1):  # round 0 warms up and gives the first batch
            seen: list[np.ndarray] = []
            began = time.perf_counter()
            for b, (_, yb) in enumerate(c.epoch()):
                if r == 0:
                    result.setdefault("first_batch_s", time.perf_counter() - t0)
                    if b + 1 >= WARMUP_BATCHES and not c.full_warmup:
                        break
                    continue
                if r == 1 and b == max(1, (n // bs) // 2):
                    workers = worker_memory(c.pids())
                    result["worker_uss_mib"] = [w["uss"] for w in workers]
                seen.append(np.asarray(yb))
            if r == 0:
                continue
            elapsed = time.perf_counter() - began
            got = np.concatenate(seen) if seen else np.empty(0, np.int64)
            distinct = len(np.unique(got))
            if len(got) != n or distinct != n:
                result["problems"].append(
                    f"epoch {r}: {len(got)} samples, {distinct} distinct of {n}")
            result["rates"].append(len(got) / elapsed)
    finally:
        pids = guarded(c.pids, 10).value or []
        c.close()
        wait_gone(pids, 10)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", help="JSON: folder, contender, workers, batch_size, repeats")
    spec = json.loads(parser.parse_args().spec)
    try:
        report_json({"status": "ok", **measure(spec)})
    except ImportError as exc:
        report_json({"status": "skipped", "error": f"{type(exc).__name__}: {exc}"})
    except Exception as exc:  # reported, not fatal: the driver goes on with the others
        report_json({"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]})
    sys.stdout.flush()
    os._exit(0)  # do not wait for a contender's stuck non-daemon threads or pools
