"""``Model.fit`` on the GPU fed by shmaug and by Keras' own workers (``python -m bench.gpu fit``).

Per case (a workload into a model): one ``fit`` over batches already in RAM gives the GPU's own
pace (t_compute); then each feeder gets one ``fit`` of 1 + repeats epochs, the first a warm-up
(workers start, Keras' enqueuer fills), timed epoch by epoch with a callback, as a user's
``fit(epochs=...)`` runs; the in-RAM ``fit`` runs again at the end, and t_compute is the median
of both. Wait share = ``1 - t_compute / t_fed``. A sampler thread reads NVML's GPU utilisation
every 50 ms, so each epoch also has the share of its time a kernel ran on the GPU. Imports Keras
(the backend is ``KERAS_BACKEND``'s); run it where the process has no other Keras work.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable

import keras
import numpy as np

from bench.common.harness import deadline
from bench.suite import peers
from bench.common.workloads import augment_for, build_data, make_batch, output_spec
from bench.gpu.run import FEEDERS
from bench.suite.fit import CLASSES, Cached

CEILING = ("shmaug_sequence", "shmaug_sequence_pageable")  # also timed with no model
FIT_SIZES = {"W2": (6144, 64), "W1": (81920, 256)}  # whole batches: no retrace on a short last one
QUICK_SIZES = {"W2": (32, 16), "W1": (128, 64)}


class GpuBusy:
    """Samples NVML's utilisation of GPU 0 every ``period`` s; ``share(t0, t1)`` is the mean
    busy share of the samples taken between two ``perf_counter`` times (None without NVML)."""

    def __init__(self, period: float = 0.05) -> None:
        self.samples: list[tuple[float, float]] = []
        self.handle: Any = None
        with contextlib.suppress(Exception):
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            self.name = str(pynvml.nvmlDeviceGetName(self.handle))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(period,), daemon=True)
        if self.handle is not None:
            self.thread.start()

    def _run(self, period: float) -> None:
        while not self.stop.wait(period):
            util = self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu
            self.samples.append((time.perf_counter(), util / 100.0))

    def share(self, t0: float, t1: float) -> float | None:
        inside = [u for t, u in self.samples if t0 <= t <= t1]
        return float(np.mean(inside)) if inside else None

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()


class EpochTimer(keras.callbacks.Callback):  # type: ignore[misc]
    """Wall time of each epoch of one ``fit``, and the GPU's busy share during it."""

    def __init__(self, busy: GpuBusy) -> None:
        super().__init__()
        self.busy, self.seconds, self.shares = busy, [], []  # type: ignore[var-annotated]

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self.began = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        now = time.perf_counter()
        self.seconds.append(now - self.began)
        self.shares.append(self.busy.share(self.began, now))


def build_model(workload: str, shape: tuple[int, ...], quick: bool,
                w2_model: str = "resnet50") -> tuple[Any, str]:
    """ResNet50 for the photos (the small CNN in a quick run, or with ``w2_model="small"``),
    the demo's CNN for the glyphs."""
    from shmaug._demo import build_model as small_cnn

    if workload == "W2" and not quick and w2_model == "resnet50":
        return keras.applications.ResNet50(weights=None, input_shape=shape, classes=CLASSES), "ResNet50"
    return small_cnn(shape[0], CLASSES, channels=shape[-1]), "the demo's small CNN"


def timed_fit(model: Any, data: Any, repeats: int, busy: GpuBusy) -> tuple[list[float], list[Any]]:
    """Seconds of each timed epoch (the first of 1 + repeats is a warm-up) and the busy shares."""
    timer = EpochTimer(busy)
    model.fit(data, epochs=1 + repeats, verbose=0, callbacks=[timer])
    return timer.seconds[1:], timer.shares[1:]


def backend_version() -> str:
    """The version of the framework under Keras (jax, torch, tensorflow)."""
    import importlib

    try:
        return str(importlib.import_module(keras.backend.backend()).__version__)
    except (ImportError, AttributeError):
        return "?"


def device_name(busy: GpuBusy) -> str:
    backend = keras.backend.backend()
    with contextlib.suppress(Exception):
        if backend == "jax":
            import jax

            d = jax.devices()[0]
            return f"{d.platform}: {d.device_kind}"
        if backend == "torch":
            import torch

            return f"cuda: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
        if backend == "tensorflow":
            import tensorflow as tf

            return "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    return getattr(busy, "name", "?")


def run_case(workload: str, quick: bool, repeats: int, workers: int, busy: GpuBusy,
             case: dict[str, Any], report: Callable[[], None],
             feeders: tuple[str, ...] = FEEDERS, w2_model: str = "resnet50") -> None:
    n, bs = (QUICK_SIZES if quick else FIT_SIZES)[workload]
    x, ids = build_data(workload, n)
    y = ids % CLASSES
    augment = augment_for(workload, "shmaug")
    _, out_dtype = output_spec(workload, x)
    one = (make_batch(x, augment, 0, bs, out_dtype), y[:bs])
    cached = Cached([one] * (n // bs))  # the GPU's work with no data work: contents do not matter
    keras.utils.set_random_seed(0)
    model, model_name = build_model(workload, x.shape[1:], quick, w2_model)
    model.compile("adam", "sparse_categorical_crossentropy")
    case.update(workload=workload, model=model_name, n=n, batch_size=bs, workers=workers,
                compute_rates=[], compute_gpu_busy=[], feeders=[])

    def in_ram() -> None:  # before the feeders and after them: the GPU's pace, drift included
        seconds, shares = timed_fit(model, cached, repeats, busy)
        case["compute_rates"] += [n / s for s in seconds]
        case["compute_gpu_busy"] += shares
        report()

    in_ram()
    for name in feeders:
        case["feeders"].append(run_feeder(name, model, x, y, bs, augment, out_dtype, workers,
                                          repeats, busy, n))
        report()
    if not quick:  # the pace again, for its drift; a quick run's figures measure nothing
        in_ram()


def run_feeder(name: str, model: Any, x: np.ndarray, y: np.ndarray, bs: int, augment: Any,
               out_dtype: Any, workers: int, repeats: int, busy: GpuBusy, n: int) -> dict[str, Any]:
    feeder: dict[str, Any] = {"contender": name, "label": peers.REGISTRY[name].label,
                              "rates": [], "gpu_busy": [], "status": "ok"}
    began = time.perf_counter()
    try:
        with deadline(120 + 4 * repeats * n / 500), \
                peers.running(name, x, y, bs, augment, out_dtype, workers) as c:
            if name in CEILING:  # the same ops and hand-off with no model: the CPU-bound ceiling
                feeder["no_model_rates"] = no_model_rates(c, n, repeats)
            seconds, shares = timed_fit(model, c.keras_data(), repeats, busy)
        feeder.update(rates=[n / s for s in seconds], seconds=seconds, gpu_busy=shares)
    except Exception as exc:  # a failed feeder is a result; the others still run
        feeder["status"] = f"{type(exc).__name__}: {exc}"
    rate = f"{np.median(feeder['rates']):,.0f} images/s" if feeder["rates"] else feeder["status"]
    print(f"fit {name}: {rate} ({time.perf_counter() - began:.1f} s)", flush=True)
    return feeder


def no_model_rates(contender: Any, n: int, repeats: int) -> list[float]:
    """images/s of whole epochs read through Keras' adapter as ``fit`` reads them, with no
    model: the rate the feeder alone reaches, so the least the GPU can wait behind it is
    ``1 - rate / GPU pace``. The first epoch is a warm-up."""
    rates = []
    for k in range(1 + repeats):
        began = time.perf_counter()
        for _ in contender.epoch():
            pass
        if k:
            rates.append(n / (time.perf_counter() - began))
    return rates


def run_fit(quick: bool, repeats: int, workers: int,
            report: Callable[[dict[str, Any]], None],
            workloads: tuple[str, ...] = tuple(FIT_SIZES),
            feeders: tuple[str, ...] = FEEDERS, w2_model: str = "resnet50") -> dict[str, Any]:
    from bench.common.report import environment

    busy = GpuBusy()
    payload: dict[str, Any] = {"environment": environment(), "quick": quick, "repeats": repeats,
                               "backend": keras.backend.backend(), "keras": keras.__version__,
                               "backend_version": backend_version(),
                               "device": device_name(busy), "cases": []}
    try:
        for workload in workloads:
            case: dict[str, Any] = {}
            payload["cases"].append(case)
            run_case(workload, quick, repeats, workers, busy, case, lambda: report(payload),
                     feeders, w2_model)
    finally:
        busy.close()
    return payload
