"""Microseconds per image for every built-in op: OpenCV vs PIL vs numpy vs albumentations.

One core (``cv2.setNumThreads(1)``); 64x64 grayscale uint8 glyphs, 224x224x3 uint8 photos and
the same photos as float32 in [0, 1], in one run; also the ``glyph_distort`` preset against
the users' classic PIL code (``bench/common/pil_reference.py``). Columns: shmaug's OpenCV kernels
(the default), shmaug's ``backend="pil"`` twins, a plain numpy reference where one exists
(uint8 only, except the flips) and the albumentations twin of each op both libraries have
(``bench/ops/albumentations_twins.py``, parameters matched as the two APIs allow; the notes under the
table say where they differ; "not installed" when albumentations is missing).

Timing follows the house rule for this noisy machine: for each op and image, the contenders
take turns, one timed loop each per round, in a rotating order; round 0 is warm-up and is
dropped; the table quotes the median of the rounds (min and max are in the JSON), so the
ratios compare figures taken side by side.

Prints a Markdown table and the target checks; ``--out X.json`` also writes ``X.md`` (the
table) and ``X.png`` (shmaug vs albumentations per op); ``--quick`` uses tiny repeat counts
for a CI smoke run.

Run:
    python -m bench.ops --out ops.json
    python -m bench.ops --quick
    python -m bench.ops --w1 --out bench/results/ops/w1_dtype.json   # float16 vs uint8 only
    python -m bench.ops --keras --out bench/results/ops/keras_ops.json
        # the Keras-mirroring ops and two pipelines vs albumentations and Keras in tf.data
    python -m bench.ops --targets --out bench/results/ops/targets.json
        # geometric ops with a mask and 10 boxes vs albumentations, torchvision and Keras
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

import shmaug
from bench.common import pil_reference
from bench.common.harness import described, prepare_out, Stats, summarize, time_calls
from bench.common.report import NOT_JUDGED, QUICK, cpu_model, fmt_times, fmt_us, took
from bench.common.workloads import photo
from bench.ops import albumentations_twins, keras_rows, target_rows
from shmaug.sources.glyphs import render_glyphs
from shmaug.ops import Op
from shmaug.ops.params import dtype_range

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


# The contenders of one row, by column key; the key is also the JSON field (``<key>_us``).
COLUMNS = {"cv": "OpenCV", "pil": "PIL", "numpy": "numpy", "albumentations": "albumentations"}
ANY_DTYPE = {"hflip", "vflip"}  # numpy references written for any dtype; the rest for uint8


def interleaved_us(fns: dict[str, Kernel], images: list[np.ndarray], calls: int,
                   rounds: int) -> dict[str, Stats]:
    """Microseconds per call of each kernel: per round, one timed loop of ``calls`` calls per
    kernel in a rotating order; round 0 is warm-up and is dropped. Every kernel gets the
    same seeded generator in a round, so shmaug's backends draw the same parameters."""
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds + 1):
        for name in names[r % len(names):] + names[: r % len(names)]:
            rng = np.random.default_rng(r)
            fn = fns[name]
            us = time_calls(lambda i: fn(images[i % len(images)], rng), calls) * 1e6
            if r > 0:
                times[name].append(us)
    return {name: summarize(v) for name, v in times.items()}


def contenders(name: str, params: dict[str, Any], image: np.ndarray) -> dict[str, Kernel]:
    """The kernels of op ``name``'s row for images like ``image``, by column key."""
    # The value range bound, as a loader binds it: an op left without one on float data first
    # checks that the data lies in [0, 1] (a min / max pass the engine never pays).
    vr = dtype_range(image.dtype)
    assert vr is not None
    fns: dict[str, Kernel] = {"cv": Op(name, **params).with_value_range(vr)}
    if name in PIL_TWINS:
        fns["pil"] = Op(name, backend="pil", **params).with_value_range(vr)
    if name in NUMPY_REFERENCE and (image.dtype == np.uint8 or name in ANY_DTYPE):
        fns["numpy"] = NUMPY_REFERENCE[name]
    if name in albumentations_twins.TWINS and albumentations_twins.available():
        fns["albumentations"] = albumentations_twins.kernel(name, image)
    return fns


def users_pil(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return pil_reference.augment_array(img)


def run(quick: bool) -> dict[str, Any]:
    cv2.setNumThreads(1)
    random.seed(0)
    glyphs = list(render_glyphs(64, 64, seed=0)[0])
    rgb, source = photo()
    sets = {"64x64 gray": (glyphs, 8 if quick else 400), "224x224x3": ([rgb], 3 if quick else 60),
            "224x224x3 f32": ([rgb.astype(np.float32) / 255.0], 3 if quick else 60)}
    rounds = 1 if quick else 7
    rows = []
    for name, params in CASES:
        for label, (images, calls) in sets.items():
            stats = interleaved_us(contenders(name, params, images[0]), images, calls, rounds)
            row: dict[str, Any] = {"op": name, "image": label}
            row.update({f"{key}_us": s.median for key, s in stats.items()})
            row["spread_us"] = {key: s.to_dict() for key, s in stats.items()}
            rows.append(row)
    n = 16 if quick else 3000
    preset_fns: dict[str, Kernel] = {
        "shmaug glyph_distort (cv)": shmaug.presets.glyph_distort(),
        "shmaug glyph_distort (backend=pil)": shmaug.presets.glyph_distort(backend="pil"),
        "users' PIL version": users_pil,
    }
    preset = interleaved_us(preset_fns, glyphs, n, rounds)
    return {
        "machine": {"python": platform.python_version(), "opencv": cv2.__version__,
                    "numpy": np.__version__, "cpu": cpu_model(),
                    "cpus": os.cpu_count(), "threads": 1},
        "photo": source,
        "quick": quick,
        "timing": f"median of {rounds} interleaved rounds after 1 warm-up round",
        "albumentations": albumentations_twins.available(),
        "ops": rows,
        "preset_us": {k: s.median for k, s in preset.items()},
        "preset_spread_us": {k: s.to_dict() for k, s in preset.items()},
    }


def cpu_interleaved_us(fns: dict[str, Kernel], images: dict[str, list[np.ndarray]], calls: int,
                       rounds: int) -> dict[str, Stats]:
    """Like ``interleaved_us``, but each kernel on its own images, timed in CPU time
    (``time.process_time``): on a shared machine another process's work counts less."""
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds + 1):
        for name in names[r % len(names):] + names[: r % len(names)]:
            rng, fn, imgs = np.random.default_rng(r), fns[name], images[name]
            t0 = time.process_time()
            for i in range(calls):
                fn(imgs[i % len(imgs)], rng)
            if r > 0:
                times[name].append((time.process_time() - t0) / calls * 1e6)
    return {name: summarize(v) for name, v in times.items()}


def w1_dtype(quick: bool) -> dict[str, Any]:
    """W1's float16 cost against uint8 on one core: the glyph preset and each of its ops on
    64x64x1 glyphs, ``value_range`` bound as a loader binds it. Inside the preset the ops see
    float32 (the ``Compose`` converts float16 once in and once out), so the ops are timed on
    float32 and the edge conversion on its own."""
    cv2.setNumThreads(1)
    u8 = [g[..., None] for g in render_glyphs(64, 64, seed=0)[0]]
    f16 = [(g / 255.0).astype(np.float16) for g in u8]
    f32 = [g.astype(np.float32) for g in f16]
    preset = shmaug.presets.glyph_distort()
    by_dtype = {"uint8": (u8, (0.0, 255.0)), "float32": (f32, (0.0, 1.0))}
    fns: dict[str, Kernel] = {}
    images: dict[str, list[np.ndarray]] = {}
    for op in (o for step in preset.ops for o in step.ops):
        for dtype, (imgs, vr) in by_dtype.items():
            fns[f"{op.name} {dtype}"], images[f"{op.name} {dtype}"] = op.with_value_range(vr), imgs
    fns["edge float16->float32->float16"], images["edge float16->float32->float16"] = _edge, f16
    for dtype, (imgs, vr) in {"uint8": by_dtype["uint8"], "float16": (f16, (0.0, 1.0))}.items():
        fns[f"glyph_distort {dtype}"] = preset.with_value_range(vr)
        images[f"glyph_distort {dtype}"] = imgs
    rounds = 1 if quick else 9
    stats = cpu_interleaved_us(fns, images, 8 if quick else 400, rounds)
    return {"quick": quick,
            "timing": f"CPU µs per image (process_time), median of {rounds} interleaved rounds",
            "us": {k: s.median for k, s in stats.items()},
            "spread_us": {k: s.to_dict() for k, s in stats.items()}}


def _edge(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    from shmaug.ops.params import convert

    return convert(convert(img, np.float32), np.float16)


def w1_report(result: dict[str, Any]) -> str:
    us = result["us"]
    lines = [*([QUICK + ".", ""] if result.get("quick") else []),
             f"W1 float16 vs uint8, 64x64x1 glyphs, 1 core: {result['timing']}.", "",
             "| step | uint8 µs | float µs | float − uint8 |", "| --- | ---: | ---: | ---: |"]
    for key in us:
        name, _, dtype = key.rpartition(" ")
        if dtype == "uint8":
            wide = us.get(f"{name} float32", us.get(f"{name} float16"))
            if wide is not None:
                lines.append(f"| {name} | {us[key]:.1f} | {wide:.1f} | {wide - us[key]:+.1f} |")
    edge = us["edge float16->float32->float16"]
    lines.append(f"| float16 edge (in + out) | — | {edge:.1f} | {edge:+.1f} |")
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    version = result.get("albumentations")
    albu_head = f"albumentations {version} µs" if version else "albumentations µs"
    machine = result.get("machine", {})
    lines = [
        *([QUICK + ".", ""] if result.get("quick") else []),
        f"Single core, µs per image: {result.get('timing', 'best of rounds')}; "
        f"{machine.get('cpu', '?')}, OpenCV {machine.get('opencv', '?')}, numpy "
        f"{machine.get('numpy', '?')}.",
        "",
        f"| op | image | OpenCV µs | PIL µs | numpy µs | {albu_head} | PIL / OpenCV | "
        "albumentations / OpenCV |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["ops"]:
        has_twin = r["op"] in albumentations_twins.TWINS
        a = fmt_us(r.get("albumentations_us"), 1) if version or not has_twin else \
            "not installed"
        lines.append(
            f"| {r['op']} | {r['image']} | {fmt_us(r['cv_us'], 1)} | "
            f"{fmt_us(r.get('pil_us'), 1)} | {fmt_us(r.get('numpy_us'), 1)} | {a} | "
            f"{fmt_times(r.get('pil_us'), r['cv_us'])} | "
            f"{fmt_times(r.get('albumentations_us'), r['cv_us'])} |"
        )
    if not version:
        lines += ["", "albumentations is not installed (`pip install -e '.[bench]'`): its column "
                  "is empty and no plot is drawn."]
    lines += ["", "albumentations twins (bare transform, p=1, called as `t(image=img)['image']`):"]
    lines += [f"- {op}: {twin.note}" for op, twin in albumentations_twins.TWINS.items()]
    lines += ["", "| glyph pipeline, 64x64 gray, 1 core | µs / image | images / s |", "| --- | ---: | ---: |"]
    for name, us in result["preset_us"].items():
        lines.append(f"| {name} | {us:,.1f} | {1e6 / us:,.0f} |")
    lines += ["", *targets(result)]
    return "\n".join(lines)


def targets(result: dict[str, Any]) -> list[str]:
    if result.get("quick"):  # tiny repeat counts: no target, and no op against another
        return [f"- targets and comparisons: {NOT_JUDGED}"]
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
    faster = [r for r in result["ops"] if r.get("albumentations_us", math.inf) < r["cv_us"]]
    for r in faster:
        out.append(f"- albumentations faster than shmaug: {r['op']} {r['image']} "
                   f"({r['albumentations_us']:.1f} vs {r['cv_us']:.1f} µs)")
    return out


def plot(result: dict[str, Any], path: Path) -> bool:
    """Bars of shmaug (OpenCV) vs albumentations µs per op, one panel per image; False when
    there is no albumentations column to compare."""
    rows = [r for r in result["ops"] if "albumentations_us" in r]
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = list(dict.fromkeys(r["image"] for r in rows))
    ops = list(dict.fromkeys(r["op"] for r in rows))
    fig, axes = plt.subplots(1, len(images), figsize=(4.2 * len(images), 0.32 * len(ops) + 1.5),
                             sharey=True, squeeze=False)
    for ax, image in zip(axes[0], images):
        by_op = {r["op"]: r for r in rows if r["image"] == image}
        ys = np.arange(len(ops))
        for k, (key, label) in enumerate((("cv", "shmaug (OpenCV)"),
                                          ("albumentations", "albumentations"))):
            spread = [by_op[op]["spread_us"][key] for op in ops]
            med = np.array([s["median"] for s in spread])
            err = [med - [s["min"] for s in spread], [s["max"] for s in spread] - med]
            ax.barh(ys + (k - 0.5) * 0.4, med, 0.4, xerr=err, label=label)
        ax.set_xscale("log")
        ax.set_title(image, fontsize=9)
        ax.set_xlabel("µs per image, 1 core (median; bars min-max)", fontsize=8)
    axes[0][0].set_yticks(np.arange(len(ops)))
    axes[0][0].set_yticklabels(ops, fontsize=8)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(fontsize=8)
    fig.suptitle(f"shmaug vs albumentations {result.get('albumentations')}: per-op cost "
                 f"({'QUICK run, not a measurement' if result.get('quick') else result.get('timing')})",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ops",
                                     description=described(__doc__))
    parser.add_argument("--out", type=Path,
                        help="write the results as JSON here (and the table and plot beside it)")
    parser.add_argument("--quick", action="store_true", help="tiny repeat counts (CI smoke run)")
    parser.add_argument("--w1", action="store_true",
                        help="only W1's float16 vs uint8 cost: the glyph preset and its ops")
    parser.add_argument("--targets", action="store_true",
                        help="only the geometric ops with a mask and 10 boxes, against "
                             "albumentations, torchvision v2 and Keras (bench/ops/"
                             "target_rows.py)")
    parser.add_argument("--keras", action="store_true",
                        help="only the Keras-mirroring ops and two whole pipelines, against "
                             "albumentations and the Keras layers in tf.data (bench/ops/"
                             "keras_rows.py)")
    args = parser.parse_args(argv)
    if args.out:
        prepare_out(args.out, file=True)  # before measuring, not after
    began = time.perf_counter()
    kind = "w1" if args.w1 else "keras" if args.keras else "targets" if args.targets else "ops"
    measure = {"w1": w1_dtype, "keras": keras_rows.run, "targets": target_rows.run,
               "ops": run}[kind]
    result = measure(args.quick)
    result["wall_s"] = round(time.perf_counter() - began, 1)
    result["command"] = " ".join(["python -m bench.ops", *(sys.argv[1:] if argv is None
                                                           else argv)])
    write = {"w1": w1_report, "keras": keras_rows.report, "targets": target_rows.report,
             "ops": report}[kind]
    text = write(result) + f"\n\nThis run took {took(result['wall_s'])}."
    print(text)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
        args.out.with_suffix(".md").write_text(text + "\n")
        if kind == "ops" and plot(result, args.out.with_suffix(".png")):
            print(f"\nwrote {args.out}, {args.out.with_suffix('.md').name} and "
                  f"{args.out.with_suffix('.png').name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
