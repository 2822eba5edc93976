"""Section 5 of the engine benchmark: what the consumer's own process spends per image.

The main process's CPU time (``time.process_time``: this process, all its threads, not the
workers) around a plain ``for xb, yb in loader`` epoch, per image and per batch, and the feed
rate it implies for a host with many cores: 1 / (main-process CPU per image). The workers
make the samples; this is the share no worker count can take away (dispatching tasks,
collecting answers, copying a ready slot out, gathering ``y``). Waiting costs no CPU here
(the loader blocks in ``poll``), so a slow pipeline does not inflate it.

- W1: 64x64x1 float16 glyphs, ``presets.glyph_distort()``, batch 256, 2 workers (fork);
  target >= 200,000 images/s.
- W3: 224x224x3 uint8, no augmentation, batch 64, as the suite runs it (``augment=None``: the
  main process gathers the batch itself); and the same images through the workers with an
  identity ``augment``, copied out (``copy=True``) and lent (``copy=False``); target 5 GB/s.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from bench.common.harness import summarize
from bench.common.report import Row, fmt_num
from bench.engine.contenders import identity, interleave

W1_TARGET_IMAGES_S = 200_000
W3_TARGET_GB_S = 5.0


class MainCpuRun:
    """A ``shmaug.Loader`` iterated as a user does; ``cpu_s`` holds this process's CPU seconds
    per epoch (every run, warm-up included: the section drops the first)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, augment: Any,
                 copy: bool = True) -> None:
        import shmaug

        self.loader = shmaug.Loader(x, y, batch_size=batch_size, augment=augment, workers=2,
                                    seed=0, start_method="fork", copy=copy)
        self.cpu_s: list[float] = []

    def run(self, k: int) -> list[float]:
        times = [time.perf_counter()]
        cpu = time.process_time()
        for _ in self.loader:
            times.append(time.perf_counter())
        self.cpu_s.append(time.process_time() - cpu)
        return times

    def close(self) -> None:
        self.loader.close()


def _rows(sec: str, name: str, run: MainCpuRun | None, status: str, n: int, batches: int,
          sample_bytes: int | None) -> list[Row]:
    cpu = run.cpu_s[1:] if run is not None else []  # round 0 is warm-up
    if status != "ok" or not cpu:
        return [Row(sec, name, "main-process CPU per image", "µs", None, status or "no runs")]
    per_image = summarize([c / n * 1e6 for c in cpu])
    per_batch = summarize([c / batches * 1e3 for c in cpu])
    note = f"per batch {fmt_num(per_batch.median)} ms ({fmt_num(per_batch.lo)} – " \
           f"{fmt_num(per_batch.hi)})"
    rows = [Row(sec, name, "main-process CPU per image", "µs", per_image, note=note,
                  extra={"per_batch_ms": per_batch.to_dict()})]
    if sample_bytes is None:
        rate = summarize([n / c for c in cpu])
        met = rate.median >= W1_TARGET_IMAGES_S
        target = f">= {W1_TARGET_IMAGES_S:,} images/s: {'met' if met else 'MISSED'}"
        rows.append(Row(sec, name, "feed rate it implies", "images/s", rate, target=target))
    else:
        rate = summarize([n * sample_bytes / c / 1e9 for c in cpu])
        met = rate.median >= W3_TARGET_GB_S
        target = f">= {W3_TARGET_GB_S:g} GB/s: {'met' if met else 'MISSED'}"
        rows.append(Row(sec, name, "feed rate it implies", "GB/s", rate, target=target))
    return rows


def _measure(sec: str, contenders: dict[str, Callable[[], MainCpuRun]], rounds: int,
             timeout: float, n: int, batches: int, sample_bytes: int | None) -> list[Row]:
    built: dict[str, MainCpuRun] = {}

    def keep(name: str, make: Callable[[], MainCpuRun]) -> Callable[[], MainCpuRun]:
        return lambda: built.setdefault(name, make())

    _, status, _ = interleave({k: keep(k, v) for k, v in contenders.items()}, rounds, timeout,
                              sec)
    return [row for name in contenders
            for row in _rows(sec, name, built.get(name), status[name], n, batches, sample_bytes)]


def section_main(quick: bool) -> list[Row]:
    import cv2

    import shmaug
    from bench.common.workloads import build_data

    # One OpenCV thread before OpenCV runs here (W3's photo is decoded with it): forked
    # workers then never meet OpenCV's thread pool (see the NOTE in scaling.py).
    cv2.setNumThreads(1)
    rounds, timeout = (1, 60.0) if quick else (7, 90.0)
    n1, bs1 = (512, 256) if quick else (8192, 256)
    x1, y1 = build_data("W1", n1)
    rows = _measure("5 main process W1 glyphs 64x64x1 f16, batch 256",
                    {"shmaug Loader(workers=2), glyph_distort":
                     lambda: MainCpuRun(x1, y1, bs1, shmaug.presets.glyph_distort())},
                    rounds, timeout, n1, -(-n1 // bs1), None)
    n3, bs3 = (128, 64) if quick else (1024, 64)
    x3, y3 = build_data("W3", n3)
    rows += _measure("5 main process W3 224x224x3 u8, batch 64", {
        "shmaug Loader, augment=None (gathered here, as the suite runs W3)":
            lambda: MainCpuRun(x3, y3, bs3, None),
        "shmaug Loader(workers=2), identity, copy=True": lambda: MainCpuRun(x3, y3, bs3, identity),
        "shmaug Loader(workers=2), identity, copy=False":
            lambda: MainCpuRun(x3, y3, bs3, identity, copy=False),
    }, rounds, timeout, n3, -(-n3 // bs3), int(x3[0].nbytes))
    return rows
