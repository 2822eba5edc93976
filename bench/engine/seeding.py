"""Section 3 of the engine benchmark: the cost of per-sample seeding, as a share of a cheap op.

Microseconds per sample of ``SampleSeeder.streams(epoch, indices)`` (a 64-sample task at a
time, as workers call it) with and without the global generators seeded, and with the
``GlobalsWatch`` an undeclared op adds, next to the naive ``default_rng([seed, epoch, i])``
and three ops on one 64x64 glyph. Every figure is timed round by round in a rotating order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench.common.harness import paired_ratio, progress, summarize, time_calls
from bench.common.report import Row

_TASK = 64  # samples per seeding call: one worker task


def section_seeding(quick: bool) -> list[Row]:
    import cv2

    import shmaug
    from shmaug.sources.glyphs import render_glyphs
    from shmaug.ops import Op
    from shmaug.seeding import GlobalsWatch, SampleSeeder

    cv2.setNumThreads(1)  # as in a worker
    number, rounds = (2000, 1) if quick else (20000, 7)
    x, _, _ = render_glyphs(256, 64, seed=0)
    g = np.random.default_rng(0)
    off, on = SampleSeeder(0, seed_globals=False), SampleSeeder(0, seed_globals=True)
    numpy_only = SampleSeeder(0, seed_globals=False)
    numpy_only.seed_numpy = True  # what a watched op that draws only from np.random pays
    rotate, glyph = Op("rotate", degrees=(-15.0, 15.0)), shmaug.presets.glyph_distort()

    def warp(i: int) -> Any:
        m = cv2.getRotationMatrix2D((32.0, 32.0), float(g.uniform(-15, 15)), 1.0)
        return cv2.warpAffine(x[i & 255], m, (64, 64), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0)

    task = np.arange(_TASK)

    def streams(seeder: Any, watch: Any = None) -> Callable[[int], Any]:
        def one_task(i: int) -> None:
            for _ in seeder.streams(1, task + i):
                if watch is not None:
                    watch.moved()  # what a worker adds per sample for an undeclared op
        return one_task

    fns: dict[str, Callable[[int], Any]] = {
        "SampleSeeder.streams, seed_globals=False": streams(off),
        "SampleSeeder.streams + GlobalsWatch (undeclared op, globals unused)":
            streams(off, GlobalsWatch()),
        "SampleSeeder.streams, numpy's global seeded (op draws only from np.random)":
            streams(numpy_only),
        "SampleSeeder.streams, seed_globals=True": streams(on),
        "naive default_rng([seed, epoch, index])": lambda i: np.random.default_rng([0, 1, i]),
        "op: cv2.warpAffine rotate": warp,
        "op: shmaug Op('rotate')": lambda i: rotate(x[i & 255], g),
        "op: presets.glyph_distort()": lambda i: glyph(x[i & 255], g),
    }
    # A seeder call covers a whole task; its time is divided back to per sample below.
    per_call = {k: (_TASK if k.startswith("SampleSeeder") else 1) for k in fns}
    op_number = {k: (number // 4 if "glyph" in k else number) // per_call[k] for k in fns}
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    bar = progress(len(names) * (rounds + 1), "seeding")
    for r in range(rounds + 1):  # round 0 warms caches and is dropped
        for name in names[r % len(names):] + names[: r % len(names)]:
            t = time_calls(fns[name], op_number[name]) * 1e6 / per_call[name]
            if r > 0:
                times[name].append(t)
            bar.update()
    bar.close()
    sec = "3 seeding, per sample on 64x64 u8"
    rows = [Row(sec, k, "per sample", "us", summarize(v)) for k, v in times.items()]
    for op in ("op: cv2.warpAffine rotate", "op: shmaug Op('rotate')", "op: presets.glyph_distort()"):
        for seeder in names[:5]:
            share = paired_ratio(times[seeder], times[op]).scaled(100.0)
            target = ""
            if seeder.startswith("SampleSeeder"):
                target = f"< 10%: {'met' if share.median < 10 else 'MISSED'}"
            rows.append(Row(sec, f"{seeder} / {op[4:]}", "share of op time", "%", share,
                              target=target))
    return rows
