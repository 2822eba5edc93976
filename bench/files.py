"""Images/s reading a folder of JPEGs: decode in shmaug's workers, tf.data, or a packed .npy.

    python -m bench.files [--quick] [--out results/files]

Writes N seeded 256x256 JPEGs (4 class folders) to a temporary folder, then times full epochs
(batch 64, image_size 224, hflip + rotate + gaussian_blur from shmaug's ops) for:

- ``shmaug ImageFiles``: ``Loader`` over ``ImageFiles.from_directory``; workers decode,
  resize and augment;
- ``keras image_dataset_from_directory``: decode and resize in tf.data, then
  ``.map(tf.numpy_function(same ops))`` with ``AUTOTUNE`` and ``prefetch``;
- ``shmaug packed .npy``: ``shmaug.pack`` once (its time is a separate row), then ``Loader``
  over the memory-mapped file with the same ops.

Each contender runs one warm-up epoch, then ``repeats`` timed epochs; the median is quoted.
The shmaug contenders run before TensorFlow is imported (forking after TF starts is unsafe).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import shmaug
from bench._harness import base_parser, prepare_out, summarize
from bench import _report as R
from bench._report import Row, environment, write_results

BATCH = 64
SIZE = 224


def augment() -> Any:
    return shmaug.Compose([shmaug.get("hflip"), shmaug.get("rotate"),
                           shmaug.get("gaussian_blur")])


def write_jpegs(root: Path, n: int, seed: int = 0) -> None:
    """n seeded 256x256 JPEGs (smooth shapes plus noise) in 4 class folders."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:256, 0:256]
    for i in range(n):
        folder = root / f"class_{i % 4}"
        folder.mkdir(parents=True, exist_ok=True)
        cy, cx, r = rng.integers(40, 216, 2).tolist() + [int(rng.integers(20, 60))]
        disc = ((yy - cy) ** 2 + (xx - cx) ** 2 < r * r)[..., None]
        base = rng.integers(0, 256, 3) * disc + (xx[..., None] * rng.integers(0, 2, 3))
        image = np.clip(base + rng.normal(0, 12, (256, 256, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(image).save(folder / f"{i:05d}.jpg", quality=90)


def time_epochs(batches: Callable[[], Any], n: int, repeats: int) -> list[float]:
    """Images/s of ``repeats`` full epochs after one warm-up epoch."""
    out = []
    for r in range(repeats + 1):
        began = time.perf_counter()
        count = sum(len(xb) for xb, _ in batches())
        elapsed = time.perf_counter() - began
        assert count == n, f"an epoch gave {count} images, expected {n}"
        if r:
            out.append(n / elapsed)
    return out


def shmaug_epochs(x: Any, y: Any, n: int, repeats: int, workers: int) -> list[float]:
    with shmaug.Loader(x, y, BATCH, augment=augment(), workers=workers, seed=0, shuffle=True,
                       output_shape=(SIZE, SIZE, 3), output_dtype=np.uint8) as loader:
        return time_epochs(lambda: iter(loader), n, repeats)


def _tf_augment(batch: np.ndarray, seed: np.ndarray) -> np.ndarray:
    fn = augment()
    rng = np.random.default_rng(int(seed))
    return np.stack([fn(im, rng) for im in batch.astype(np.uint8)])


def keras_epochs(folder: Path, n: int, repeats: int) -> list[float]:
    import keras
    import tensorflow as tf

    ds = keras.utils.image_dataset_from_directory(
        str(folder), image_size=(SIZE, SIZE), batch_size=BATCH, shuffle=True, seed=0,
        verbose=False)
    counter = tf.data.Dataset.counter()
    ds = tf.data.Dataset.zip((ds, counter)).map(
        lambda xy, i: (tf.numpy_function(_tf_augment, [xy[0], i], tf.uint8), xy[1]),
        num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
    return time_epochs(lambda: ds.as_numpy_iterator(), n, repeats)


def run(quick: bool, out: str) -> str:
    n, repeats = (64, 1) if quick else (2000, 3)
    workers = len(os.sched_getaffinity(0))
    rows: list[Row] = []
    section = f"{n} JPEGs 256x256 -> {SIZE}x{SIZE}x3, batch {BATCH}, hflip+rotate+blur"
    with tempfile.TemporaryDirectory(prefix="shmaug_bench_files_") as tmp:
        folder = Path(tmp) / "jpegs"
        write_jpegs(folder, n)
        files = shmaug.ImageFiles.from_directory(folder, image_size=(SIZE, SIZE))
        decoded = summarize(shmaug_epochs(files, files.labels, n, repeats, workers))
        began = time.perf_counter()
        packed = shmaug.pack(files, Path(tmp) / "packed", workers=workers, progress=False)
        pack_s = time.perf_counter() - began
        x, y = packed.open()
        from_npy = summarize(shmaug_epochs(packed.images, y, n, repeats, workers))
        try:
            tf_row = Row(section, "keras image_dataset_from_directory + tf.numpy_function map",
                         "throughput", "images/s", summarize(keras_epochs(folder, n, repeats)))
        except Exception as exc:  # reported, not fatal: TF may be missing
            tf_row = Row(section, "keras image_dataset_from_directory + tf.numpy_function map",
                         "throughput", "images/s", None, status=f"error: {exc}")
        rows += [
            Row(section, f"shmaug ImageFiles (decode in {workers} workers)", "throughput",
                "images/s", decoded),
            tf_row,
            Row(section, f"shmaug packed .npy ({workers} workers)", "throughput", "images/s",
                from_npy),
            Row(section, "shmaug.pack (once, decode+resize only)", "throughput", "images/s",
                summarize([n / pack_s]), note=f"{pack_s:.1f} s for {n} images"),
        ]
        base = decoded.median
        for row in rows[1:3]:
            if row.stats is not None:
                row.ratio = f"{row.stats.median / base:.2f}x ImageFiles"
        del x
    meta = {"quick": quick, "n": n, "repeats": repeats, "workers": workers,
            "wall_s": R.process_age_s(),
            "environment": environment()}
    return write_results(out, "files", rows, meta)


def main(argv: list[str] | None = None) -> int:
    args = base_parser(__doc__.splitlines()[0], "results/files").parse_args(argv)
    prepare_out(args.out)  # before measuring, not after
    print(run(args.quick, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
