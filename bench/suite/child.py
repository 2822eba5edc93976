"""The suite's child process: measure ONE contender on ONE workload (``python -m bench.suite.child SPEC``).

The spec (JSON) names the workload, the ops implementation, the contender (``bench.suite.peers``),
the worker count and the number of timed epochs. The child reports JSON, under the parent's
hard timeout: time to first batch (from construction), images/s per timed epoch (epoch 0 is
warm-up), exactly-once checks per epoch, USS/PSS mid-epoch, the same-image probe for
replayed random streams, and the data-wait fraction of a consumer that takes a fixed
``step_s`` per batch. ``"fit": true`` instead trains a small CNN (``bench/suite/fit.py``).
A contender whose library is missing reports ``"status": "skipped"``. OpenCV runs on one
thread in every contender (``OPENCV_FOR_THREADS_NUM=1``), as in shmaug's workers.

This module imports TensorFlow at the top on purpose: a user's training script does, and that
is what spawned workers which re-run ``__main__`` pay for (Keras, the Pool recipe and Grain
under spawn). Keep it a module, not a package ``__main__``: multiprocessing does not re-run a
``*.__main__`` module in spawned children. The one exception: a quick run's children for
``plan.QUICK_NO_TF`` (shmaug's fork Loader, the copy), whose figures measure nothing and whose
code needs no TensorFlow, are started with ``SHMAUG_BENCH_CHILD_NO_TF=1`` and skip it.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Every contender's process and its workers run OpenCV on one thread, as shmaug's workers do
# (``engine/workers/worker.py``): a peer left with OpenCV's pool oversubscribes the cores, which
# cost Grain 12-15% on W2 in a review's rounds. Read when cv2 is imported, and inherited.
os.environ.setdefault("OPENCV_FOR_THREADS_NUM", "1")

if os.environ.get("SHMAUG_BENCH_CHILD_NO_TF") != "1":  # see the module docstring
    import tensorflow as tf  # noqa: F401

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench.common.harness import (  # noqa: E402
    consume, guarded, memory_of, report_json, wait_gone, worker_memory)
from bench.suite import peers  # noqa: E402
from bench.common.workloads import WORKLOADS, augment_for, build_data, output_spec  # noqa: E402
from bench.suite.peers import Base  # noqa: E402

WARMUP_BATCHES = 4  # excluded from the timing; the pools start and the caches fill


# -- the measurement --------------------------------------------------------------------------


def _memory(c: Base) -> dict[str, Any]:
    main = memory_of(os.getpid())
    workers = worker_memory(c.pids())
    return {"uss": main["uss"] + sum(w["uss"] for w in workers),
            "pss": main["pss"] + sum(w["pss"] for w in workers),
            "main_uss": main["uss"], "workers": len(workers),
            "worker_uss": [w["uss"] for w in workers], "worker_pss": [w["pss"] for w in workers]}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """One contender on one workload: see the module docstring."""
    wl = WORKLOADS[spec["workload"]]
    n = wl.n_quick if spec["quick"] else wl.n
    bs = wl.batch_size_quick if spec["quick"] else wl.batch_size
    x, ids = build_data(wl.name, n)
    augment = augment_for(wl.name, spec["impl"])
    _, out_dtype = output_spec(wl.name, x)
    result: dict[str, Any] = {"n": n, "batch_size": bs, "rates": [], "problems": []}
    t0 = time.perf_counter()
    c = peers.build(spec["contender"], x, ids, bs, augment, out_dtype, spec["workers"])
    try:
        for r in range(spec["repeats"] + 1):  # round 0: warm-up, gives time to first batch
            seen: list[np.ndarray] = []
            images = 0
            t_start = time.perf_counter()
            for b, (xb, yb) in enumerate(c.epoch()):
                if r == 0:
                    if b == 0:
                        result["first_batch_s"] = time.perf_counter() - t0
                    if b + 1 >= WARMUP_BATCHES and not c.full_warmup:
                        break  # warm-up is the first batches of an epoch, not a whole one
                    continue
                if r == 1 and b == max(1, (n // bs) // 2):
                    result["memory"] = _memory(c)
                images += len(xb)
                seen.append(np.asarray(yb))
            elapsed = time.perf_counter() - t_start
            if r == 0:
                continue
            got = np.concatenate(seen) if seen else np.empty(0, np.int64)
            if len(got) != n or len(np.unique(got)) != n:
                result["problems"].append(
                    f"epoch {r}: {len(got)} samples, {len(np.unique(got))} distinct of {n}")
            result["rates"].append(images / elapsed)
        if spec.get("step_s"):
            result["wait"] = _wait_epoch(c, spec["step_s"], 0.0 if spec["quick"] else WAIT_MIN_S)
    finally:
        pids = guarded(c.pids, 10).value or []
        c.close()
        wait_gone(pids, 10)
    if spec.get("probe") and augment is not None:
        result["distinct"] = _distinct_probe(spec, x[:1], bs, augment, out_dtype)
    return result


def _distinct_probe(spec: dict[str, Any], one: np.ndarray, bs: int, augment: Any,
                    out_dtype: Any) -> float:
    """Share of distinct outputs when every sample is the SAME image: a worker that repeats
    another's random stream (the classic forked-RNG failure) shows up as identical outputs."""
    n = bs * 2 * max(1, spec["workers"])
    x = np.ascontiguousarray(np.repeat(one, n, axis=0))
    c = peers.build(spec["contender"], x, np.arange(n), bs, augment, out_dtype, spec["workers"])
    try:
        outs = [np.asarray(xb) for xb, _ in c.epoch()]
    finally:
        pids = guarded(c.pids, 10).value or []
        c.close()
        wait_gone(pids, 10)
    flat = np.concatenate(outs).reshape(n, -1)
    return len({row.tobytes() for row in flat}) / n


WAIT_MIN_S = 2.0  # the wait is measured over whole epochs lasting at least this long in all


def _wait_epoch(c: Base, step_s: float, min_s: float) -> dict[str, float]:
    """Epochs with a consumer that takes ``step_s`` per batch (a simulated accelerator), as
    many as last ``min_s`` (``WAIT_MIN_S``; a quick run takes one): one W3 epoch lasts 70 ms,
    where a single 10 ms stall of the machine would read as a 15% wait.

    They follow one epoch at the same pace, not measured, as ``fit``'s epochs after the first
    follow one at their own pace: the change from tight epochs to a paced consumer is not
    something ``fit`` does. It cost shmaug a one-off 120-150 ms on W2 (the first copy made
    ahead needs a third 38.5 MB array, and memory a process touches for the first time faults
    in at 50-80 ms per 38.5 MB on the bench machine, against 10 ms later), 3-4% of two epochs.
    """
    if min_s:
        consume(c.epoch(), step_s)
    waited, epochs, t0 = 0.0, 0, time.perf_counter()
    while epochs == 0 or time.perf_counter() - t0 < min_s:
        waited += sum(consume(c.epoch(), step_s)[1])
        epochs += 1
    wall = time.perf_counter() - t0
    return {"wait_s": waited, "wall_s": wall, "epochs": epochs,
            "fraction": waited / wall if wall else float("nan")}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", help="JSON spec: workload, impl, contender, workers, quick, ...")
    spec = json.loads(parser.parse_args().spec)
    try:
        if spec.get("fit"):
            from bench.suite.fit import fit_keras

            out = fit_keras(spec)
        else:
            out = measure(spec)
        report_json({"status": "ok", **out})
    except ImportError as exc:
        report_json({"status": "skipped", "error": f"{type(exc).__name__}: {exc}"})
    except Exception as exc:
        report_json({"status": "error", "error": f"{type(exc).__name__}: {exc}"[:300]})
    sys.stdout.flush()
    os._exit(0)  # do not wait for a contender's stuck non-daemon threads or pools
