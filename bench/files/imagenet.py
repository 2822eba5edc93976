"""ImageNet training input: shmaug's decode-time crop against timm, torchvision, DALI (CPU),
tf.data and a decode-only ceiling, on one folder of JPEGs, side by side.

    python -m bench.files.imagenet [--quick] [--out bench/results/files] [--rounds 3]
        [--repeats 1] [--contenders shmaug,timm,...] [--workers 2] [--batch-size 64]
        [--data DIR] [--files 1200] [--timeout 900]

Writes an ImageNet-like folder from a seed (nothing downloaded; ``--data DIR`` keeps and
reuses it, otherwise a temporary folder removed at the end): ``--files`` photo-like JPEGs
(``bench.files.data.photo``) of 350-500 px on the short side, the long side up to 1.5x, JPEG
quality drawn from 75-95, in 10 class folders. Every contender then delivers each file once per
epoch as a 224x224x3 uint8 image from a training recipe: a random resized crop (scale
0.08-1, ratio 3/4-4/3, bilinear) and a random flip, plus RandAugment (2 ops, magnitude 9) in the
RA rows, with ``--workers`` processes (threads for DALI and tf.data), batches of 64, shuffled:

- ``shmaug`` / ``shmaug_no_ra``: ``shmaug.Loader`` over ``ImageFiles.from_directory(root,
  image_size=None)`` with ops ``random_resized_crop``, ``Maybe(hflip)`` (and ``rand_augment``):
  the crop is cut while the JPEG is decoded, and resampled with PIL's antialiased filter, as
  timm's, torchvision's and DALI's. ``shmaug_fast``: the same without RA and with
  ``antialias=False`` (OpenCV's bilinear, as tf.data's ``tf.image.resize``). ``shmaug_fullcrop``: the same with RA, run with
  ``SHMAUG_JPEG=whole``, so every photo is decoded whole first (the gain of the
  decode-time crop).
- ``timm`` / ``timm_no_ra``: ``timm.data.create_transform(224, is_training=True,
  auto_augment="rand-m9-n2-mstd0.5")`` (no RA: ``auto_augment=None, color_jitter=None``) with
  ``use_prefetcher=True``, timm's train.py default: uint8 tensors, the normalising left to the
  accelerator as for every other contender; over ``torchvision.datasets.ImageFolder`` in a
  ``DataLoader`` (fork, persistent workers).
- ``torchvision`` / ``torchvision_no_ra``: ``transforms.v2`` ``RandomResizedCrop(224,
  antialias=True)``, ``RandomHorizontalFlip()``, ``RandAugment(num_ops=2, magnitude=9)``,
  ``ToImage()``, ``ToDtype(uint8)`` on PIL images, in the same ``DataLoader``.
- ``dali_cpu`` / ``dali_cpu_no_ra``: a CPU-only DALI pipeline (``device_id=None``,
  ``num_threads=workers``): ``readers.file`` (the same files, each file's id as its label),
  ``decoders.image_random_crop`` (DALI's own decode-time crop), ``resize``,
  ``crop_mirror_normalize`` with a coin-flip mirror; RA by ``nvidia.dali.auto_aug.rand_augment``.
- ``tfdata``: ``stateless_sample_distorted_bounding_box`` + ``decode_and_crop_jpeg`` +
  ``resize`` + flip in a ``map`` with ``num_parallel_calls=workers`` on a private thread pool
  of ``workers`` threads; no RA (tf.data has none), so it is a no-RA row.
- ``decode_ceiling``: a ``multiprocessing.Pool`` of ``workers`` processes that only decodes
  every file whole (``cv2.imdecode`` of its bytes, OpenCV as shmaug's full decode) and returns
  its id: what a pipeline that decodes whole photos cannot beat.

Each contender runs in its own child process (``bench.files.child``, under a hard timeout),
round by round, the order rotated every round: a warm-up, then ``--repeats`` timed epochs, each
checked to deliver every file exactly once. The table quotes the median over rounds; the
ratios (to each other and to ``decode_ceiling``) are taken within a round, so a host that drifts
between rounds moves both sides. A contender whose library is missing is reported "not
installed" and skipped. Writes ``imagenet.json`` and ``imagenet.md`` to ``--out``. A full run
takes about 15-20 minutes on 2 cores.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from bench.common.harness import (
    described, base_parser, child_env, missing_module, prepare_out, progress, summarize,
)
from bench.common.report import Row, environment, fmt_num, markdown_table, verdict, write_results
from bench.files.child import run_child
from bench.files.run import (
    contender_list, data_root, figure, meta_of, run_args, same_round,
)
from bench.suite.peers._base import Base
from bench.suite.peers.shmaug_engine import ShmaugLoader
from bench.suite.peers.torch_loader import Torch

SIZE = 224
SCALE = (0.08, 1.0)
RATIO = (3 / 4, 4 / 3)
RA_OPS, RA_MAGNITUDE = 2, 9
CLASSES = 10
FILES, FILES_QUICK = 1200, 40
SHORT_SIDE, SHORT_SIDE_QUICK = (350, 500), (96, 160)
LONG_RATIO = (1.0, 1.5)
QUALITY = (75, 95)

LABELS = {
    "shmaug": "shmaug, decode-time crop + flip + RA",
    "shmaug_no_ra": "shmaug, decode-time crop + flip",
    "shmaug_fast": "shmaug, decode-time crop + flip, antialias=False (tf.data's resize)",
    "shmaug_fullcrop": "shmaug, full decode then crop + flip + RA (SHMAUG_JPEG=whole)",
    "timm": "timm create_transform rand-m9-n2-mstd0.5 + DataLoader",
    "timm_no_ra": "timm create_transform, no RA, no colour jitter + DataLoader",
    "torchvision": "torchvision.transforms.v2 RRC + flip + RandAugment + DataLoader",
    "torchvision_no_ra": "torchvision.transforms.v2 RRC + flip + DataLoader",
    "dali_cpu": "DALI CPU image_random_crop + resize + flip + rand_augment",
    "dali_cpu_no_ra": "DALI CPU image_random_crop + resize + flip",
    "tfdata": "tf.data decode_and_crop_jpeg + resize + flip",
    "decode_ceiling": "decode only: cv2.imdecode of whole files, Pool",
}
# The libraries a peer imports, in the order it does: where one is missing, the driver records
# the child's "not installed" without starting it.
NEEDS = {"timm": ("torch", "torchvision", "timm"), "timm_no_ra": ("torch", "torchvision", "timm"),
         "torchvision": ("torch", "torchvision"), "torchvision_no_ra": ("torch", "torchvision"),
         "dali_cpu": ("nvidia.dali",), "dali_cpu_no_ra": ("nvidia.dali",),
         "tfdata": ("tensorflow",)}
RA = ("shmaug", "shmaug_fullcrop", "timm", "torchvision", "dali_cpu")
CEILING = "decode_ceiling"
# (numerator, denominator, goal or None): same-round ratios; a goal is one of the targets.
RATIOS = [
    ("shmaug", "timm", 1.5), ("shmaug", "torchvision", 1.5), ("shmaug", "dali_cpu", 1.3),
    ("shmaug_no_ra", "timm_no_ra", 1.5), ("shmaug_no_ra", "torchvision_no_ra", 1.5),
    ("shmaug_no_ra", "dali_cpu_no_ra", 1.3), ("shmaug_no_ra", CEILING, 1.2),
    ("shmaug_no_ra", "tfdata", None), ("shmaug_fast", CEILING, 1.2),
    ("shmaug_fast", "tfdata", None), ("shmaug", "shmaug_fullcrop", None),
]
PARTIAL_DECODE_ENV = "SHMAUG_JPEG"  # "whole": every pixel, then cut


# -- the folder ------------------------------------------------------------------------------


def make_imagenet(root: Path, n: int, quick: bool, seed: int = 0) -> dict[str, Any]:
    """``n`` ImageNet-like JPEGs in ``CLASSES`` class folders (see the module docstring);
    returns what was made, for the report. Sizes and qualities vary per file, as ImageNet's
    do: decode time follows a file's pixels and bits."""
    import cv2
    from tqdm import tqdm

    from bench.files.data import photo

    rng = np.random.default_rng(seed)
    low, high = SHORT_SIDE_QUICK if quick else SHORT_SIDE
    pixels = total = 0
    qualities = []
    for c in range(CLASSES):
        (root / f"n{c:08d}").mkdir(parents=True, exist_ok=True)
    for i in tqdm(range(n), desc="making ImageNet-like JPEGs", unit="file", file=sys.stderr,
                  disable=not sys.stderr.isatty(), leave=False):
        short = int(rng.integers(low, high + 1))
        long = int(short * rng.uniform(*LONG_RATIO))
        h, w = (long, short) if rng.random() < 0.25 else (short, long)  # some portraits
        quality = int(rng.integers(QUALITY[0], QUALITY[1] + 1))
        ok, data = cv2.imencode(".JPEG", photo(h, w, rng)[..., ::-1],
                                [cv2.IMWRITE_JPEG_QUALITY, quality])
        assert ok, f"could not encode file {i}"
        data.tofile(root / f"n{i % CLASSES:08d}" / f"n{i % CLASSES:08d}_{i}.JPEG")
        pixels += h * w
        total += data.size
        qualities.append(quality)
    return {"files": n, "classes": CLASSES, "bytes": total, "mean_kb": total / n / 1e3,
            "mean_pixels": pixels / n, "bits_per_pixel": 8 * total / pixels,
            "quality": [min(qualities), max(qualities)], "short_side": [low, high]}


def prepare(root: Path, n: int, quick: bool) -> tuple[Path, dict[str, Any]]:
    """The folder of ``n`` files under ``root``, made unless a complete one is already there."""
    where = root / f"imagenet_like_{'quick_' if quick else ''}{n}"
    stamp = where / "made.json"
    if stamp.is_file():
        return where, json.loads(stamp.read_text())
    shutil.rmtree(where, ignore_errors=True)
    made = make_imagenet(where, n, quick)
    stamp.write_text(json.dumps(made))  # last: a folder cut short is made again
    return where, made


# -- the contenders (built in the child process, ``bench.files.child``) ----------------------


def shmaug_augment(ra: bool, antialias: bool = True) -> Any:
    """The training recipe as shmaug's ops: the crop first, so it can be cut at decode."""
    from shmaug.ops import Compose, Maybe, Op

    ops = [Op("random_resized_crop", height=SIZE, width=SIZE, scale=SCALE, ratio=RATIO,
              interpolation="bilinear", antialias=antialias), Maybe(Op("hflip"))]
    if ra:
        ops.append(Op("rand_augment", num_ops=RA_OPS, magnitude=RA_MAGNITUDE))
    return Compose(ops)


class ShmaugImageNet(ShmaugLoader):
    """``shmaug.Loader`` over the photos at their own size (``image_size=None``); the targets
    are the files' ids (the listing's order is the child's), for the exactly-once check.
    Read and closed as the suite's ``ShmaugLoader``; only its source differs."""

    def __init__(self, *a: Any, folder: str) -> None:
        Base.__init__(self, *a)
        import shmaug

        files = shmaug.ImageFiles.from_directory(folder, image_size=None)
        if len(files) != len(self.x):
            raise RuntimeError(f"{len(files)} files listed, the child has {len(self.x)}")
        self.loader = shmaug.Loader(files, self.y, batch_size=self.bs, augment=self.augment,
                                    workers=self.workers, shuffle=True, seed=0,
                                    start_method=self.method)


def torch_transform(name: str) -> Any:
    """timm's or torchvision's training transform, as their users write it."""
    if name.startswith("timm"):
        from timm.data import create_transform

        ra = "rand-m9-n2-mstd0.5" if name == "timm" else None
        return create_transform(SIZE, is_training=True, auto_augment=ra, use_prefetcher=True,
                                **({} if ra else {"color_jitter": None}))
    import torch
    from torchvision.transforms import v2

    ops = [v2.RandomResizedCrop(SIZE, scale=SCALE, ratio=RATIO, antialias=True),
           v2.RandomHorizontalFlip()]
    if name == "torchvision":
        ops.append(v2.RandAugment(num_ops=RA_OPS, magnitude=RA_MAGNITUDE))
    return v2.Compose([*ops, v2.ToImage(), v2.ToDtype(torch.uint8)])


class TorchImageNet(Torch):
    """``ImageFolder`` + ``DataLoader(num_workers=workers, shuffle=True)``, fork, persistent
    workers; each sample's target is its index, for the exactly-once check. Read and closed
    as the suite's ``Torch``; only its dataset differs."""

    def __init__(self, *a: Any, folder: str, name: str) -> None:
        Base.__init__(self, *a)
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        class Indexed(ImageFolder):  # type: ignore[misc]
            def __getitem__(self, index: int) -> Any:
                return super().__getitem__(index)[0], index

        dataset = Indexed(folder, transform=torch_transform(name))
        self.loader = DataLoader(dataset, batch_size=self.bs, shuffle=True,
                                 num_workers=self.workers, persistent_workers=True,
                                 multiprocessing_context=self.method)


class DaliImageNet(Base):
    """A CPU-only DALI pipeline over the same files (labels: the files' ids).

    Its reader runs on across epochs, so a warm-up that stopped mid-epoch would shift the
    next: it warms up with a whole epoch. ``pad_last_batch`` ends each epoch on a batch; the
    padding (repeats of the last sample) is dropped."""

    full_warmup = True

    def __init__(self, *a: Any, ra: bool) -> None:
        super().__init__(*a)
        from nvidia.dali import fn, pipeline_def, types

        if ra:
            try:
                from nvidia.dali.auto_aug import rand_augment
            except ImportError as exc:
                raise ImportError(f"n/a: this DALI has no rand_augment ({exc})") from exc

        @pipeline_def(enable_conditionals=ra)  # type: ignore[untyped-decorator]
        def pipeline() -> Any:
            jpegs, ids = fn.readers.file(files=[str(p) for p in self.x],
                                         labels=[int(i) for i in self.y], random_shuffle=True,
                                         pad_last_batch=True, name="reader")
            images = fn.decoders.image_random_crop(
                jpegs, device="cpu", output_type=types.RGB, random_area=list(SCALE),
                random_aspect_ratio=list(RATIO), num_attempts=10)
            images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
            if ra:
                images = rand_augment.rand_augment(images, n=RA_OPS, m=RA_MAGNITUDE)
            images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(),
                                              dtype=types.UINT8, output_layout="HWC")
            return images, ids

        self.pipe = pipeline(batch_size=self.bs, num_threads=self.workers, device_id=None,
                             seed=0)
        self.pipe.build()

    def epoch(self) -> Iterator[Any]:
        n = len(self.x)
        for b in range(self.nb):
            images, ids = self.pipe.run()
            keep = min(self.bs, n - b * self.bs)
            yield images.as_array()[:keep], ids.as_array().reshape(-1)[:keep]

    def close(self) -> None:
        del self.pipe


def _tf_sample(path: Any, seed: Any, i: Any) -> Any:
    """A random resized crop cut while the JPEG decodes (tf's own decode-time crop), then
    resize and flip: tf.data's ImageNet recipe (the Inception preprocessing)."""
    import tensorflow as tf

    encoded = tf.io.read_file(path)
    begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.io.extract_jpeg_shape(encoded), bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        seed=seed, min_object_covered=0.0, aspect_ratio_range=RATIO, area_range=SCALE,
        max_attempts=10, use_image_if_no_bounding_boxes=True)
    window = tf.stack([begin[0], begin[1], size[0], size[1]])
    image = tf.io.decode_and_crop_jpeg(encoded, window, channels=3)
    image = tf.image.resize(image, (SIZE, SIZE))  # float32, bilinear
    image = tf.image.stateless_random_flip_left_right(image, seed + 1)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8), i


class TfImageNet(Base):
    """tf.data: shuffle, ``map(num_parallel_calls=workers)`` on a private pool of ``workers``
    threads (one thread per op: as many cores as the others' workers), batch, prefetch."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import tensorflow as tf

        seeds = tf.data.Dataset.random(seed=0, rerandomize_each_iteration=True).batch(2)
        ds = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(list(self.x)), seeds,
                                  tf.data.Dataset.from_tensor_slices(self.y)))
        ds = ds.shuffle(len(self.x), seed=0, reshuffle_each_iteration=True)
        ds = ds.map(_tf_sample, num_parallel_calls=self.workers).batch(self.bs).prefetch(1)
        options = tf.data.Options()
        options.threading.private_threadpool_size = self.workers
        options.threading.max_intra_op_parallelism = 1
        self.ds = ds.with_options(options)

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()


def _decode_batch(paths: list[str]) -> int:
    """One batch of whole-file decodes in a pool worker; only the count comes back."""
    import cv2

    for path in paths:
        image = cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_COLOR)
        assert image is not None, f"could not decode {path}"
    return len(paths)


def _pool_init() -> None:
    import cv2

    cv2.setNumThreads(1)


class DecodeCeiling(Base):
    """``workers`` processes that decode each file whole, nothing else: a batch's ids come
    back when its files are decoded. At most two batches per worker are in flight, and a cut
    epoch (the warm-up) waits for them, so the next epoch times only its own files."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import multiprocessing

        self.pool = multiprocessing.get_context(self.method).Pool(self.workers, _pool_init)
        self.rng = np.random.default_rng(0)

    def epoch(self) -> Iterator[Any]:
        order = self.rng.permutation(len(self.x))
        batches = [order[k:k + self.bs] for k in range(0, len(order), self.bs)]
        pending: list[tuple[np.ndarray, Any]] = []
        try:
            for ids in batches:
                pending.append((ids, self.pool.apply_async(
                    _decode_batch, ([str(p) for p in self.x[ids]],))))
                if len(pending) > 2 * self.workers:
                    done, result = pending.pop(0)
                    result.get()
                    yield None, self.y[done]
            while pending:
                done, result = pending.pop(0)
                result.get()
                yield None, self.y[done]
        finally:
            for _, result in pending:
                result.wait()

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


def build(name: str, paths: np.ndarray, ids: np.ndarray, bs: int, workers: int,
          folder: str = "") -> Base:
    """Contender ``name`` over ``paths`` (the files of ``folder``, listed as
    ``ImageFiles.from_directory`` lists them); ImportError when its library is missing."""
    common = (paths, ids, bs)
    if name.startswith("shmaug"):
        augment = shmaug_augment(name in RA, antialias=name != "shmaug_fast")
        return ShmaugImageNet(*common, augment, np.uint8, workers, "fork", folder=folder)
    if name.startswith(("timm", "torchvision")):
        return TorchImageNet(*common, None, np.uint8, workers, "fork", folder=folder, name=name)
    if name.startswith("dali_cpu"):
        return DaliImageNet(*common, None, np.uint8, workers, None, ra=name == "dali_cpu")
    if name == "tfdata":
        return TfImageNet(*common, None, np.uint8, workers, None)
    if name == CEILING:
        return DecodeCeiling(*common, None, np.uint8, workers, "fork")
    raise KeyError(f"no contender {name!r}; known: {sorted(LABELS)}")


# -- the driver ------------------------------------------------------------------------------


def parser() -> Any:
    p = base_parser(described(__doc__), "bench/results/files")
    return run_args(p, tuple(LABELS), repeats=1, files=(FILES, FILES_QUICK))


def run_one(args: Any, folder: Path, contender: str) -> dict[str, Any]:
    """One contender's child process; ``shmaug_fullcrop``'s with the decode-time path off."""
    missing = missing_module(NEEDS.get(contender, ()))
    if missing:  # what its child would report
        return {"status": "skipped", "error": missing}
    env = child_env()
    env.pop(PARTIAL_DECODE_ENV, None)
    if contender == "shmaug_fullcrop":
        env[PARTIAL_DECODE_ENV] = "whole"
    return run_child(args, folder, contender, env, peers="bench.files.imagenet",
                     extra={"folder": str(folder)})


def run_rounds(args: Any, folder: Path, contenders: list[str]) -> list[dict[str, Any]]:
    rounds = 1 if args.quick else args.rounds
    results = []
    bar = progress(rounds * len(contenders), "bench imagenet")
    for r in range(1, rounds + 1):
        k = (r - 1) % len(contenders)
        for contender in contenders[k:] + contenders[:k]:  # rotated: no fixed first
            res = run_one(args, folder, contender)
            res.update(round=r, contender=contender)
            results.append(res)
            bar.update(1)
            print(f"round {r} {contender:18} {res.get('status')}: "
                  f"{fmt_num(figure(res))} images/s {res.get('error', '')}"[:200], file=sys.stderr)
    bar.close()
    return results


def per_round(results: list[dict[str, Any]], contender: str) -> list[float]:
    """``contender``'s figure in each round (nan where it did not run)."""
    rounds = max(r["round"] for r in results)
    out = [math.nan] * rounds
    for r in results:
        if r["contender"] == contender:
            out[r["round"] - 1] = figure(r)
    return out


def status_of(results: list[dict[str, Any]], contender: str) -> tuple[str, str]:
    """A contender's status over its rounds and, when not ok, why (its first failure)."""
    mine = [r for r in results if r["contender"] == contender]
    bad = next((r for r in mine if r.get("status") != "ok"), None)
    if bad is None:
        return "ok", ""
    error = str(bad.get("error", ""))
    if bad.get("status") == "skipped":
        if error.startswith("ImportError: n/a"):
            return "n/a", error.removeprefix("ImportError: ")[:160]
        return "not installed", error[:160]
    if contender.startswith("dali"):
        return f"not available: {bad.get('status')}", error[:160]
    return str(bad.get("status")), error[:160]


def judged(ratios: list[float], goal: float | None, quick: bool) -> str:
    if goal is None:
        return "(for information)"
    got = summarize(ratios).median if ratios else math.nan
    met = None if math.isnan(got) else got >= goal
    return f">= {goal:g}x: {verdict(met, quick)}"


def report(args: Any, argv: list[str], results: list[dict[str, Any]], made: dict[str, Any],
           contenders: list[str]) -> str:
    rows: list[Row] = []
    rounds = max(r["round"] for r in results)
    section = (f"ImageNet-like training input, {made['files']} JPEGs, {args.workers} workers, "
               f"batch {8 if args.quick else args.batch_size}")
    ceiling = per_round(results, CEILING) if CEILING in contenders else []
    summary: list[list[str]] = []
    round_rows: list[list[str]] = []
    ratio_rows: list[list[Any]] = []
    for c in contenders:
        rates = per_round(results, c)
        good = [v for v in rates if not math.isnan(v)]
        status, note = status_of(results, c)
        shares = same_round(rates, ceiling) if c != CEILING else []
        row = Row(section, c, "throughput", "images/s", summarize(good) if good else None,
                  status=status, note=note or LABELS[c])
        if shares:
            row.ratio = f"{fmt_num(summarize(shares).median)}x decode ceiling"
        rows.append(row)
        firsts = [r["first_batch_s"] for r in results
                  if r["contender"] == c and r.get("first_batch_s") is not None]
        uss = [sum(r["worker_uss_mib"]) for r in results
               if r["contender"] == c and r.get("worker_uss_mib")]
        median = summarize(good).median if good else math.nan
        summary.append([c, "RA" if c in RA else "—" if c == CEILING else "no RA",
                        fmt_num(median) if status == "ok" else status,
                        fmt_num(median / args.workers) if status == "ok" else "—",
                        fmt_num(summarize(shares).median) + "x" if shares else "—",
                        fmt_num(summarize(firsts).median) if firsts else "—",
                        fmt_num(summarize(uss).median) if uss else "—"])
        round_rows.append([c, *[fmt_num(v) for v in rates]])
    for top, bottom, goal in RATIOS:
        if top not in contenders or bottom not in contenders:
            continue
        ratios = same_round(per_round(results, top), per_round(results, bottom))
        text = judged(ratios, goal, args.quick)
        ratio_rows.append([f"{top} ÷ {bottom}",
                           fmt_num(summarize(ratios).median) if ratios else "n/a",
                           fmt_num(min(ratios)) if ratios else "n/a", len(ratios), text])
        if goal is not None:
            row = next(r for r in rows if r.contender == top)
            row.target = "; ".join(filter(None, [row.target, f"÷ {bottom} {text}"]))
    quick = " (quick run: nothing measured)" if args.quick else ""
    extra = "\n\n".join([
        f"Command: `python -m bench.files.imagenet {' '.join(argv)}`{quick}. CPU: "
        f"{environment()['cpu']}. The folder: {made['files']} JPEGs in {made['classes']} "
        f"classes, short side {made['short_side'][0]}-{made['short_side'][1]} px (the long "
        f"side up to {LONG_RATIO[1]:g}x), quality {made['quality'][0]}-{made['quality'][1]}, "
        f"{made['mean_kb']:.0f} kB, {made['mean_pixels'] / 1e3:.0f} kpixels and "
        f"{made['bits_per_pixel']:.1f} bits/pixel on average.",
        "### Per contender\n\nimages/s: the median over rounds of each round's median epoch; "
        "per core: divided by the workers; share of the decode ceiling: the median of the "
        "same-round ratios to `decode_ceiling`; first batch: seconds from building the "
        "contender; worker USS: all workers together, mid-epoch (threads: none).\n\n"
        + markdown_table(["contender", "work", "images/s", "images/s per core",
                          "÷ decode ceiling", "first batch s", "worker USS MiB"], summary),
        "### Same-round ratios and the targets\n\n"
        + markdown_table(["ratio", "median", "min", "rounds", "target"], ratio_rows),
        f"### images/s in each of {rounds} rounds\n\n"
        + markdown_table(["contender", *[f"round {k}" for k in range(1, rounds + 1)]],
                         round_rows),
    ])
    meta = meta_of(args, argv, results, folder=made, environment=environment())
    return write_results(args.out, "imagenet", rows, meta, extra)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    contenders = contender_list(args.contenders, LABELS)
    prepare_out(args.out)  # before measuring anything
    n = args.files or (FILES_QUICK if args.quick else FILES)
    began = time.perf_counter()
    with data_root(args.data, "shmaug_bench_imagenet_") as root:
        folder, made = prepare(root, n, args.quick)
        print(f"folder {folder}: {made['files']} files, {made['mean_kb']:.0f} kB on average "
              f"({time.perf_counter() - began:.0f} s)", file=sys.stderr)
        results = run_rounds(args, folder, contenders)
        print(report(args, argv, results, made, contenders))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    raise SystemExit(main())
