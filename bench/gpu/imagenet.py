"""ImageNet-style JPEGs into ResNet50 under ``Model.fit`` on the GPU, fed by shmaug's
decode-time crop and by timm's transform in a torch ``DataLoader`` (``python -m bench.gpu
imagenet``).

The folder is written here from a seed, in parallel: photo-like JPEGs (``bench.files.data``)
350-500 px on the short side, quality 75-95. Both feeders do the reference's work: a random
resized crop drawn on the file's own resolution (scale 0.08-1, ratio 3/4-4/3), resized to
224 (bilinear, antialiased), a random flip, uint8 HWC out; the model rescales on the GPU and
computes in bfloat16 (``mixed_bfloat16``), as on any recent GPU.
shmaug: ``ImageFiles(image_size=None)`` + ``Compose([random_resized_crop, Maybe(hflip)])`` in a
``Sequence``; timm: ``create_transform(224, is_training=True, color_jitter=None,
use_prefetcher=True)`` (its uint8 path) over ``ImageFolder``, ``persistent_workers=True``. Each
again with RandAugment 2x9 after the flip (timm: ``auto_augment="rand-m9-n2-mstd0.5"``).

Per feeder: images/s of the feeder alone (no model, one warm-up epoch, then one), then
``fit`` for 1 + repeats epochs (the first a warm-up); the GPU's own pace from the same batches
already in RAM, before and after; GPU wait ``1 - t_compute / t_fed``; host CPU busy (cores,
from ``psutil``'s system times over the timed epochs). Both pipelines run on the CPU: they
take no GPU memory of their own. DALI's GPU decoder is not a contender here: its wheel does
not fit what travels to a lent machine, which cannot reach a registry.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from bench.common.report import fmt_num, markdown_table

SIZE, CLASSES = 224, 10
SIZES = {"full": (6144, 128), "quick": (32, 16)}  # (files, batch size): whole batches


def _write_one(args: tuple[Path, int, int]) -> None:
    import cv2

    from bench.files.data import photo

    root, i, seed = args
    rng = np.random.default_rng([seed, i])
    short, ratio = int(rng.integers(350, 501)), float(rng.uniform(1.0, 1.5))
    h, w = (short, int(short * ratio)) if rng.random() < 0.8 else (int(short * ratio), short)
    ok, data = cv2.imencode(".jpg", photo(h, w, rng)[..., ::-1],
                            [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(75, 96))])
    assert ok
    data.tofile(root / f"class_{i % CLASSES}" / f"{i:06d}.jpg")


def write_folder(root: Path, n: int, seed: int = 0) -> None:
    """``n`` ImageNet-like JPEGs in ``CLASSES`` class folders, written by every core."""
    import multiprocessing as mp

    for c in range(CLASSES):
        (root / f"class_{c}").mkdir(parents=True, exist_ok=True)
    with mp.get_context("fork").Pool() as pool:
        pool.map(_write_one, [(root, i, seed) for i in range(n)], chunksize=16)


def build_model(quick: bool) -> Any:
    """uint8 HWC in, rescaled on the device, into ResNet50 (the demo's CNN when quick)."""
    import keras

    from shmaug._demo import build_model as small_cnn

    inputs = keras.Input((SIZE, SIZE, 3), dtype="uint8")
    x = keras.layers.Rescaling(1 / 127.5, offset=-1.0)(inputs)
    if quick:
        body = small_cnn(SIZE, CLASSES, channels=3)
    else:
        body = keras.applications.ResNet50(weights=None, input_shape=(SIZE, SIZE, 3),
                                           classes=CLASSES)
    model = keras.Model(inputs, body(x))
    model.compile("adam", "sparse_categorical_crossentropy")
    return model


@contextlib.contextmanager
def shmaug_feeder(root: Path, bs: int, workers: int, rand_augment: bool = False,
                  antialias: bool = True, **sequence: Any) -> Iterator[Any]:
    import shmaug
    from shmaug.ops import Compose, Maybe, Op

    files = shmaug.ImageFiles.from_directory(root, image_size=None)
    ra = [Op("rand_augment", num_ops=2, magnitude=9)] if rand_augment else []
    augment = Compose([Op("random_resized_crop", height=SIZE, width=SIZE, antialias=antialias),
                       Maybe(Op("hflip")), *ra])
    with shmaug.Sequence(files, files.labels, batch_size=bs, augment=augment, workers=workers,
                         shuffle=True, seed=0, **sequence) as seq:
        yield seq


class _HWC:
    """What timm's uint8 path ends in (a CHW uint8 tensor, ``MaybePILToTensor``) as an HWC
    uint8 array, in the worker: the layout the model takes."""

    def __call__(self, image: Any) -> np.ndarray:
        chw = np.asarray(image, np.uint8)
        return np.ascontiguousarray(chw.transpose(1, 2, 0))


@contextlib.contextmanager
def timm_feeder(root: Path, bs: int, workers: int, rand_augment: bool = False
                ) -> Iterator[Any]:
    import torch
    import torchvision
    from timm.data import create_transform

    transform = create_transform(SIZE, is_training=True, color_jitter=None, use_prefetcher=True,
                                 auto_augment="rand-m9-n2-mstd0.5" if rand_augment else None)
    transform.transforms.append(_HWC())
    data = torchvision.datasets.ImageFolder(str(root), transform=transform)
    loader = torch.utils.data.DataLoader(data, batch_size=bs, shuffle=True, num_workers=workers,
                                         persistent_workers=workers > 0, drop_last=True)
    yield loader
    del loader


FEEDERS: dict[str, Callable[[Path, int, int], Any]] = {
    "shmaug": shmaug_feeder, "timm": timm_feeder,
    "shmaug + RandAugment 2x9": functools.partial(shmaug_feeder, rand_augment=True),
    "timm + RandAugment 2x9": functools.partial(timm_feeder, rand_augment=True),
    "shmaug, antialias=False": functools.partial(shmaug_feeder, antialias=False),
    "shmaug, pin_memory=False": functools.partial(shmaug_feeder, pin_memory=False),
    "shmaug, max_queue_size=32": functools.partial(shmaug_feeder, max_queue_size=32)}
DEFAULT_FEEDERS = tuple(FEEDERS)[:4]


def _epoch(data: Any) -> Iterator[Any]:
    """One epoch of batches: a ``DataLoader`` iterated, a ``Sequence`` indexed as Keras'
    adapter reads it."""
    if hasattr(data, "on_epoch_end"):
        for i in range(len(data)):
            yield data[i]
        data.on_epoch_end()
    else:
        yield from data


def _cpu_busy() -> Callable[[], float]:
    """Cores busy since the call, from the system's CPU times (all processes)."""
    import psutil

    t0, w0 = psutil.cpu_times(), time.perf_counter()

    def busy() -> float:
        t1 = psutil.cpu_times()
        idle = (t1.idle - t0.idle) + (getattr(t1, "iowait", 0) - getattr(t0, "iowait", 0))
        return (sum(t1) - sum(t0) - idle) / (time.perf_counter() - w0)
    return busy


def run_imagenet(quick: bool, repeats: int, workers: int, root: Path,
                 report: Callable[[dict[str, Any]], None],
                 feeders: tuple[str, ...] = DEFAULT_FEEDERS, files: int = 0) -> dict[str, Any]:
    import keras

    from bench.common.report import environment
    from bench.gpu.fit import GpuBusy, backend_version, device_name
    from bench.suite.fit import Cached

    n, bs = SIZES["quick" if quick else "full"]
    n = files // bs * bs or n
    began = time.perf_counter()
    write_folder(root, n)
    busy = GpuBusy()
    payload: dict[str, Any] = {
        "environment": environment(), "quick": quick, "repeats": repeats, "n": n,
        "batch_size": bs, "workers": workers, "backend": keras.backend.backend(),
        "keras": keras.__version__, "backend_version": backend_version(),
        "device": device_name(busy), "folder_s": time.perf_counter() - began,
        "compute_rates": [], "feeders": []}
    keras.utils.set_random_seed(0)
    if not quick:  # as on any recent GPU: ResNet50's compute in bfloat16
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = build_model(quick)
    batch = (np.random.default_rng(0).integers(0, 256, (bs, SIZE, SIZE, 3), dtype=np.uint8),
             np.arange(bs) % CLASSES)
    cached = Cached([batch] * (n // bs))

    def in_ram() -> None:
        from bench.gpu.fit import timed_fit

        seconds, _ = timed_fit(model, cached, repeats, busy)
        payload["compute_rates"] += [n / s for s in seconds]
        report(payload)

    try:
        in_ram()
        for name in feeders:
            payload["feeders"].append(_run_feeder(name, model, root, bs, workers, repeats, n,
                                                  busy))
            report(payload)
        if not quick:  # the pace again, for its drift; a quick run's figures measure nothing
            in_ram()
    finally:
        busy.close()
    return payload


def _run_feeder(name: str, model: Any, root: Path, bs: int, workers: int, repeats: int, n: int,
                busy: Any) -> dict[str, Any]:
    from bench.gpu.fit import timed_fit

    feeder: dict[str, Any] = {"contender": name, "status": "ok"}
    began = time.perf_counter()
    try:
        with FEEDERS[name](root, bs, workers) as data:
            alone = []
            for k in range(2):  # the feeder with no model: a warm-up epoch, then one
                t0 = time.perf_counter()
                count = sum(len(b[1]) for b in _epoch(data))
                alone.append(count / (time.perf_counter() - t0))
            cpu = _cpu_busy()
            seconds, shares = timed_fit(model, data, repeats, busy)
            feeder.update(no_model_rate=alone[-1], seconds=seconds, gpu_busy=shares,
                          rates=[(n // bs) * bs / s for s in seconds], host_cores_busy=cpu())
    except Exception as exc:  # a failed feeder is a result; the others still run
        feeder["status"] = f"{type(exc).__name__}: {exc}"
    rate = f"{np.median(feeder['rates']):,.0f} images/s" if "rates" in feeder else feeder["status"]
    print(f"imagenet {name}: {rate} ({time.perf_counter() - began:.1f} s)", flush=True)
    return feeder


def imagenet_table(payload: dict[str, Any]) -> str:
    pace = float(np.median(payload["compute_rates"])) if payload["compute_rates"] else float("nan")
    rows = []
    for f in payload["feeders"]:
        if f["status"] != "ok":
            rows.append([f["contender"], f["status"], "", "", "", ""])
            continue
        rate = float(np.median(f["rates"]))
        rows.append([f["contender"], fmt_num(rate), fmt_num(f["no_model_rate"]),
                     f"{max(0.0, 1 - rate / pace):.0%}", f"{f['host_cores_busy']:.1f}",
                     "0 (on the CPU)"])
    rows.append(["batches already in RAM (the GPU's pace)", fmt_num(pace), "", "0%", "", ""])
    return (f"### {payload['n']:,} ImageNet-like JPEGs into ResNet50, batch "
            f"{payload['batch_size']}, {payload['workers']} workers\n\n" + markdown_table(
                ["fed by", "images/s under fit", "feeder alone, images/s", "GPU waits",
                 "host cores busy", "GPU memory of the pipeline"], rows))
