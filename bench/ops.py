"""Microseconds per image for every built-in op: OpenCV vs PIL vs a plain numpy reference.

Single core (``cv2.setNumThreads(1)``), 64x64 grayscale glyphs and 224x224x3 uint8 photos, in
one run; also the ``glyph_distort`` preset against the users' classic PIL code
(``bench/_pil_reference.py``). Prints a Markdown table and the target checks; ``--out`` writes
JSON; ``--quick`` uses tiny repeat counts for a CI smoke run.

Run:
    python bench/ops.py --out ops.json
    python bench/ops.py --quick
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import shmaug  # noqa: E402
from bench import _pil_reference  # noqa: E402
from bench.workloads import photo  # noqa: E402
from shmaug.glyphs import render_glyphs  # noqa: E402
from shmaug.ops import Op, get  # noqa: E402

Kernel = Callable[[np.ndarray, np.random.Generator], np.ndarray]

# (op, params bound for all backends); params chosen so every backend does the same work.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("sine_warp", {"amplitude": 2.5, "period": (24.0, 64.0), "interpolation": "nearest"}),
    ("rotate", {}),
    ("shear", {}),
    ("scale_translate", {}),
    ("translate", {}),
    ("hflip", {}),
    ("vflip", {}),
    ("perspective", {}),
    ("elastic", {}),
    ("gaussian_blur", {"sigma": 1.0}),
    ("sharpen", {"amount": 1.0}),
    ("smooth", {"amount": 1.0}),
    ("brightness_contrast", {}),
    ("gamma", {}),
    ("gaussian_noise", {}),
    ("cutout", {}),
    ("resize", {"height": 32, "width": 32}),
    ("crop", {}),
    ("resized_crop", {}),
]


def _np_sine(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = img.copy()
    period = rng.uniform(24.0, 64.0)
    for x in range(img.shape[1]):
        out[:, x] = np.roll(img[:, x], int(round(2.5 * math.sin(2 * math.pi * x / period))), axis=0)
    return out


def _np_brightness(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    b, c = rng.uniform(0.8, 1.2), rng.uniform(0.8, 1.2)
    y = np.clip(img.astype(np.float32) * b, 0, 255)
    m = y.mean()
    return np.clip(np.rint(m + c * (y - m)), 0, 255).astype(np.uint8)


def _np_gamma(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    g = rng.uniform(0.7, 1.5)
    return np.rint(255.0 * (img / 255.0) ** g).astype(np.uint8)


def _np_noise(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_normal(img.shape) * (rng.uniform(0.01, 0.05) * 255)
    return np.clip(np.rint(img + noise), 0, 255).astype(np.uint8)


NUMPY_REFERENCE: dict[str, Kernel] = {
    "sine_warp": _np_sine,
    "hflip": lambda img, rng: np.ascontiguousarray(img[:, ::-1]),
    "vflip": lambda img, rng: np.ascontiguousarray(img[::-1]),
    "brightness_contrast": _np_brightness,
    "gamma": _np_gamma,
    "gaussian_noise": _np_noise,
}
PIL_TWINS = {
    "sine_warp", "rotate", "shear", "scale_translate", "translate", "hflip", "vflip",
    "perspective", "gaussian_blur", "sharpen", "smooth", "brightness_contrast", "gamma", "resize",
}
WHY_SLOWER = {
    "sine_warp": "the PIL column is the classic np.roll loop, not PIL",
}


def per_image_us(fn: Kernel, images: list[np.ndarray], calls: int, rounds: int) -> float:
    """Best of ``rounds``: mean microseconds per call over ``calls`` calls."""
    rng = np.random.default_rng(0)
    best = math.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(calls):
            fn(images[i % len(images)], rng)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def users_pil(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return _pil_reference.augment_array(img)


def run(quick: bool) -> dict[str, Any]:
    cv2.setNumThreads(1)
    random.seed(0)
    glyphs = list(render_glyphs(64, 64, seed=0)[0])
    rgb, source = photo()
    sets = {"64x64 gray": (glyphs, 8 if quick else 400), "224x224x3": ([rgb], 3 if quick else 60)}
    rounds = 1 if quick else 3
    rows = []
    for name, params in CASES:
        for label, (images, calls) in sets.items():
            row: dict[str, Any] = {"op": name, "image": label}
            row["cv_us"] = per_image_us(Op(name, **params), images, calls, rounds)
            if name in PIL_TWINS:
                row["pil_us"] = per_image_us(Op(name, backend="pil", **params), images, calls, rounds)
            if name in NUMPY_REFERENCE:
                row["numpy_us"] = per_image_us(NUMPY_REFERENCE[name], images, calls, rounds)
            rows.append(row)
    n = 16 if quick else 3000
    preset = {
        "shmaug glyph_distort (cv)": per_image_us(shmaug.presets.glyph_distort(), glyphs, n, rounds),
        "shmaug glyph_distort (backend=pil)": per_image_us(
            shmaug.presets.glyph_distort(backend="pil"), glyphs, n, rounds
        ),
        "users' PIL version": per_image_us(users_pil, glyphs, n, rounds),
    }
    return {
        "machine": {"python": platform.python_version(), "opencv": cv2.__version__,
                    "numpy": np.__version__, "cpu": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "threads": 1},
        "photo": source,
        "quick": quick,
        "ops": rows,
        "preset_us": preset,
    }


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:,.1f}"


def report(result: dict[str, Any]) -> str:
    lines = [
        "| op | image | OpenCV µs | PIL µs | numpy µs | PIL / OpenCV |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in result["ops"]:
        ratio = f"{r['pil_us'] / r['cv_us']:.1f}x" if "pil_us" in r else "—"
        lines.append(
            f"| {r['op']} | {r['image']} | {_fmt(r['cv_us'])} | {_fmt(r.get('pil_us'))} | "
            f"{_fmt(r.get('numpy_us'))} | {ratio} |"
        )
    lines += ["", "| glyph pipeline, 64x64 gray, 1 core | µs / image | images / s |", "| --- | ---: | ---: |"]
    for name, us in result["preset_us"].items():
        lines.append(f"| {name} | {us:,.1f} | {1e6 / us:,.0f} |")
    lines += ["", *targets(result)]
    return "\n".join(lines)


def targets(result: dict[str, Any]) -> list[str]:
    sine = next(r for r in result["ops"] if r["op"] == "sine_warp" and r["image"] == "64x64 gray")
    sine_x = sine["numpy_us"] / sine["cv_us"]
    p = result["preset_us"]
    preset_x = p["users' PIL version"] / p["shmaug glyph_distort (cv)"]
    out = [
        f"- sine warp vs per-column np.roll (64x64): {sine_x:.1f}x (target >= 10x): "
        f"{'met' if sine_x >= 10 else 'MISSED'}",
        f"- glyph preset vs users' PIL version: {preset_x:.1f}x (target >= 2.5x): "
        f"{'met' if preset_x >= 2.5 else 'MISSED'}",
    ]
    slower = [r for r in result["ops"] if "pil_us" in r and r["cv_us"] > r["pil_us"]]
    for r in slower:
        why = WHY_SLOWER.get(r["op"], "see note")
        out.append(f"- OpenCV slower than PIL: {r['op']} {r['image']} ({r['cv_us']:.1f} vs {r['pil_us']:.1f} µs): {why}")
    if not slower:
        out.append("- every OpenCV op is at least as fast as its PIL twin")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--quick", action="store_true", help="tiny repeat counts (CI smoke run)")
    args = parser.parse_args(argv)
    result = run(args.quick)
    print(report(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
