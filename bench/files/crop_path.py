"""The decode-time resized crop on real photographs: shmaug's crop + flip against the
full-decode-only ceiling, DALI's CPU pipeline and tf.data's ``decode_and_crop_jpeg``.

    python -m bench.files.crop_path [--quick] [--out bench/results/files] [--rounds 3]
        [--files 600] [--workers 2] [--contenders shmaug,shmaug_exact,...] [--data DIR]

The folder: ``--files`` JPEGs made from scikit-image's and scikit-learn's photographs at
ImageNet's sizes, q75-95 4:2:0 (``bench.files.photos``; nothing downloaded). Each contender
delivers every file once per epoch as a 224 x 224 x 3 uint8 crop (scale 0.08-1, ratio 3/4-4/3,
bilinear) with a random flip, with ``--workers`` processes (threads for DALI and tf.data),
batches of 64, in a child process of its own (``bench.files.imagenet``'s contenders):

- ``shmaug``: the default, the reduced crop (libjpeg-turbo scales the window in the DCT by
  the smallest eighth that keeps it at least 224, OpenCV finishes);
- ``shmaug_exact``: ``reduced_decode=False``, the window at full scale then PIL's
  antialiased filter (torchvision's pixels);
- ``dali_cpu_no_ra``, ``tfdata``, ``decode_ceiling``: as in ``bench.files.imagenet``.

Rounds are interleaved (every contender once per round, the order rotated); the table gives
the median over rounds and the median of the same-round ratios. Writes ``crop_path.md`` and
``crop_path.json`` to ``--out``, with the command and the CPU.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.harness import (
    base_parser, child_env, described, missing_module, prepare_out, summarize
)
from bench.common.report import environment, fmt_num, markdown_table
from bench.files import imagenet
from bench.files.child import run_child
from bench.files.run import contender_list, data_root, figure, run_args, same_round
from bench.suite.peers._base import Base

LABELS = {
    "shmaug": "shmaug, reduced crop (default) + flip",
    "shmaug_exact": "shmaug, reduced_decode=False (exact, PIL antialiased) + flip",
    "dali_cpu_no_ra": imagenet.LABELS["dali_cpu_no_ra"],
    "tfdata": imagenet.LABELS["tfdata"],
    "decode_ceiling": imagenet.LABELS["decode_ceiling"],
}
FILES, FILES_QUICK = 600, 24
# (numerator, denominator, issue 58's target or None)
RATIOS = [("shmaug", "decode_ceiling", 1.0), ("shmaug", "dali_cpu_no_ra", 1.5),
          ("shmaug", "tfdata", None), ("shmaug", "shmaug_exact", None),
          ("shmaug_exact", "decode_ceiling", None)]


class ShmaugCrop(imagenet.ShmaugImageNet):
    """``bench.files.imagenet``'s shmaug contender, with ``reduced_decode`` as given."""

    def __init__(self, *a: Any, folder: str, reduced: bool) -> None:
        Base.__init__(self, *a)
        import shmaug

        files = shmaug.ImageFiles.from_directory(folder, image_size=None,
                                                 reduced_decode=reduced)
        self.loader = shmaug.Loader(files, self.y, batch_size=self.bs, augment=self.augment,
                                    workers=self.workers, shuffle=True, seed=0,
                                    start_method=self.method)


def build(name: str, paths: np.ndarray, ids: np.ndarray, bs: int, workers: int,
          folder: str = "") -> Any:
    """Contender ``name`` (in the child process, ``bench.files.child``)."""
    if name.startswith("shmaug"):
        return ShmaugCrop(paths, ids, bs, imagenet.shmaug_augment(False), np.uint8, workers,
                          "fork", folder=folder, reduced=name == "shmaug")
    return imagenet.build(name, paths, ids, bs, workers, folder)


def prepare(root: Path, n: int) -> Path:
    from bench.files import photos

    where = root / f"photos_{n}"
    if not (where / "made.json").is_file():
        photos.folder(str(where), n)
        (where / "made.json").write_text(json.dumps({"files": n}))
    return where


def run_rounds(args: Any, folder: Path, contenders: list[str]) -> list[dict[str, Any]]:
    results = []
    for r in range(1, (1 if args.quick else args.rounds) + 1):
        k = (r - 1) % len(contenders)
        for contender in contenders[k:] + contenders[:k]:  # rotated: no fixed first
            missing = missing_module(imagenet.NEEDS.get(contender, ()))
            res: dict[str, Any] = ({"status": "skipped", "error": missing} if missing else
                   run_child(args, folder, contender, child_env(), peers="bench.files.crop_path",
                             extra={"folder": str(folder)}))
            res["round"], res["contender"] = r, contender
            results.append(res)
            print(f"round {r} {contender:16} {res.get('status')}: {fmt_num(figure(res))} "
                  f"images/s {res.get('error', '')}"[:200], file=sys.stderr)
    return results


def report(args: Any, argv: list[str], results: list[dict[str, Any]],
           contenders: list[str]) -> str:
    rounds = max(r["round"] for r in results)

    def rates(c: str) -> list[float]:
        out = [math.nan] * rounds
        for r in results:
            if r["contender"] == c:
                out[r["round"] - 1] = figure(r)
        return out

    rows = []
    for c in contenders:
        good = [v for v in rates(c) if not math.isnan(v)]
        bad = next((r for r in results if r["contender"] == c and r.get("status") != "ok"), None)
        status = "ok" if bad is None else f"{bad.get('status')}: {str(bad.get('error'))[:100]}"
        rows.append([c, fmt_num(summarize(good).median) if good else "—",
                     " ".join(fmt_num(v) for v in rates(c)), status, LABELS[c]])
    ratio_rows: list[list[str]] = []
    for top, bottom, goal in RATIOS:
        if top in contenders and bottom in contenders:
            ratios = same_round(rates(top), rates(bottom))
            got = summarize(ratios).median if ratios else math.nan
            target = "—" if goal is None else (
                f">= {goal:g}x: " + ("not judged (quick)" if args.quick else
                                     "n/a" if math.isnan(got) else
                                     "met" if got >= goal else "missed"))
            ratio_rows.append([f"{top} ÷ {bottom}", fmt_num(got), str(len(ratios)), target])
    env = environment()
    text = "\n\n".join([
        "# crop_path", f"Command: `python -m bench.files.crop_path {' '.join(argv)}`"
        f"{' (quick run: nothing measured)' if args.quick else ''}. CPU: {env['cpu']}, "
        f"{env['usable_cpus']} usable, load average {env.get('load_avg_1m')} at start. "
        f"{args.workers} workers, batch {8 if args.quick else args.batch_size}, {rounds} "
        "interleaved rounds; images/s: the median over rounds.",
        markdown_table(["contender", "images/s", "per round", "status", "what"], rows),
        markdown_table(["same-round ratio", "median", "rounds", "issue 58's target"],
                       ratio_rows)])
    out = prepare_out(args.out)
    (out / "crop_path.md").write_text(text + "\n")
    (out / "crop_path.json").write_text(json.dumps(
        {"argv": argv, "environment": env, "results": results}, indent=1) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = base_parser(described(__doc__), "bench/results/files")
    args = run_args(p, tuple(LABELS), repeats=1, files=(FILES, FILES_QUICK)).parse_args(argv)
    contenders = contender_list(args.contenders, LABELS)
    prepare_out(args.out)
    n = args.files or (FILES_QUICK if args.quick else FILES)
    began = time.perf_counter()
    with data_root(args.data, "shmaug_bench_crop_path_") as root:
        folder = prepare(root, n)
        print(f"folder {folder}: {n} files ({time.perf_counter() - began:.0f} s)",
              file=sys.stderr)
        print(report(args, argv, run_rounds(args, folder, contenders), contenders))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    raise SystemExit(main())
