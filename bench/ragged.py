"""Photos of several sizes held in memory: ``python -m bench.ragged [--rounds 3] [--quick]``.

Three ways to hand a loader's workers a list of decoded photos of several sizes:

- list: the list given as ``x``, held once in the loader's shared memory
  (``shmaug.memory.ragged``), each photo read at its own size;
- load: the recipe it replaces, ``x=indices, load=images.__getitem__``: the list goes into
  every worker by pickle (by fork's copy-on-write under fork);
- files: the photos written once as JPEG files (q90) and read by index,
  ``ImageFiles.from_paths(image_size=None)``: nothing in memory, each decoded per epoch.

Each run is a fresh child process: ``N`` photos (crops of a photo a package ships, 256 to 640
pixels a side, tinted), a ``Loader`` with 2 workers under fork and spawn, a resized crop to
224 and a flip, one epoch. Per run: construction to the first batch and to the epoch's end
(the list's copy into shared memory and the workers' start included); after the epoch, the
loader still open, each worker's unique memory (USS: what one more worker costs), the
proportional memory (PSS) of the main process and its workers together (what the run holds:
pages they share counted once, the list's copy in shared memory among them, and under fork
the main process's pages its workers still share), and the loader's blocks in /dev/shm. The runs are
interleaved round by round in a rotated order; the table gives medians over rounds.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

from bench.common.harness import (child_result, described, memory_of, pool_children, prepare_out,
                                  rotated_rounds, study_parser, worker_memory)
from bench.common.report import cpu_model, write_study
from bench.common.workloads import photo
from shmaug.memory.store import SEGMENT_PREFIX

WAYS = ("list", "load", "files")
METHODS = ("fork", "spawn")
N, N_QUICK, SIDE = 300, 12, 224


def photos(n: int) -> list[np.ndarray]:
    """``n`` distinct RGB photos of several sizes (256..640 a side)."""
    import cv2

    base, _ = photo(704)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        h, w = (int(v) for v in rng.integers(256, 641, 2))
        y0, x0 = int(rng.integers(0, 704 - h + 1)), int(rng.integers(0, 704 - w + 1))
        crop = base[y0:y0 + h, x0:x0 + w] * rng.uniform(0.7, 1.1, 3)
        out.append(cv2.resize(np.clip(crop, 0, 255).astype(np.uint8), (w, h)))
    return out


def _source(way: str, images: list[np.ndarray], folder: str) -> dict[str, Any]:
    """The Loader's ``x`` (and ``load``) for ``way``."""
    import cv2

    import shmaug

    if way == "list":
        return {"x": images}
    if way == "load":
        return {"x": np.arange(len(images)), "load": images.__getitem__}
    paths = []
    for i, image in enumerate(images):
        paths.append(f"{folder}/{i:05d}.jpg")
        cv2.imwrite(paths[-1], image[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
    return {"x": shmaug.ImageFiles.from_paths(paths, image_size=None)}


def child(way: str, method: str, quick: bool) -> dict[str, Any]:
    """One run: the loader's first batch, its epoch and its processes' memory."""
    import shmaug
    from shmaug.ops import Compose, Maybe, Op

    images = photos(N_QUICK if quick else N)
    augment = Compose([Op("random_resized_crop", height=SIDE, width=SIDE), Maybe(Op("hflip"))])
    with tempfile.TemporaryDirectory() as folder:
        given = _source(way, images, folder)
        began = time.perf_counter()
        with shmaug.Loader(**given, batch_size=4 if quick else 32, augment=augment, workers=2,
                           seed=0, start_method=method) as loader:
            batches = iter(loader)
            next(batches)
            first = time.perf_counter() - began
            seen = 1 + sum(1 for _ in batches)
            epoch = time.perf_counter() - began
            workers = worker_memory(pool_children())
            pss = memory_of(os.getpid())["pss"] + sum(w["pss"] for w in workers)
            shm = sum(os.path.getsize(p) for p in glob.glob(
                f"/dev/shm/{SEGMENT_PREFIX}{os.getpid()}_*"))
    return {"way": way, "method": method, "first_batch_s": first, "batches": seen,
            "epoch_s": epoch,
            "worker_uss_mib": float(np.mean([w["uss"] for w in workers])),
            "all_pss_mib": pss, "shm_mib": shm / 2**20,
            "list_mib": sum(i.nbytes for i in images) / 2**20}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| start method | way | first batch s | epoch s | worker USS MiB | all PSS MiB "
             "| /dev/shm MiB | rounds |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for method, way in itertools.product(METHODS, WAYS):
        mine = [r for r in results if (r["method"], r["way"]) == (method, way)]
        if not mine:
            continue
        med = {k: float(np.median([r[k] for r in mine])) for k in (
            "first_batch_s", "epoch_s", "worker_uss_mib", "all_pss_mib", "shm_mib")}
        lines.append(f"| {method} | {way} | {med['first_batch_s']:.2f} | "
                     f"{med['epoch_s']:.2f} | {med['worker_uss_mib']:.0f} | "
                     f"{med['all_pss_mib']:.0f} | {med['shm_mib']:.0f} | {len(mine)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = study_parser(described(__doc__), "bench/results/ragged",
                        "WAY,METHOD").parse_args(argv)
    if args.child:
        way, method = args.child.split(",")
        print(json.dumps(child(way, method, args.quick)))
        return
    prepare_out(args.out)  # before measuring, not after
    configs = list(itertools.product(WAYS, METHODS[:1] if args.quick else METHODS))
    began = time.perf_counter()
    results = rotated_rounds(1 if args.quick else args.rounds, configs, lambda c: child_result(
        [sys.executable, "-m", "bench.ragged", "--child", ",".join(c),
         *(["--quick"] if args.quick else [])], timeout_s=900), "ragged runs")
    said = (f"{N_QUICK if args.quick else N} photos of several sizes "
            f"({results[0]['list_mib']:.0f} MiB decoded), 2 workers, a resized crop to {SIDE} "
            f"and a flip, one epoch; {cpu_model()}")
    write_study(args.out, "ragged", results, said, table(results), argv or sys.argv[1:],
                args.quick, time.perf_counter() - began)


if __name__ == "__main__":
    main()
