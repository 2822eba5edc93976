"""Section 2 of the engine benchmark: images/s of a CPU-bound pipeline with 0, 1 and 2 workers.

``presets.glyph_distort()`` on rendered 64x64 uint8 glyphs, batch 64: ``shmaug.Loader`` with
``workers`` = 1, 2 and 0, a plain in-process loop (with a fixed generator, and with a
``SampleSeeder`` stream per sample), and the same plain loop in 2 processes at once (what this
machine's 2 cores give with no loader at all). Ratios are per round over ``workers=1``.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.common.harness import paired_ratio, summarize
from bench.common.report import Row, fmt_num
from bench.engine.contenders import (
    ParallelPlainLoops, PlainLoop, ShmaugRun, interleave, overlap_rate, steady_rate,
)

CEILING = "plain loop in 2 processes at once (this machine's 2-core ceiling)"


CEILING = "plain loop in 2 processes at once (this machine's 2-core ceiling)"


def section_scaling(quick: bool) -> list[Row]:
    import shmaug
    from shmaug.sources.glyphs import render_glyphs

    import cv2

    n, bs = (512, 64) if quick else (4096, 64)
    rounds, timeout = (1, 60.0) if quick else (15, 90.0)  # short rounds, many: this host drifts 1.5x in seconds
    x, _, _ = render_glyphs(n, 64, seed=0)
    aug = shmaug.presets.glyph_distort()
    per_batch = [float(min(bs, n - lo)) for lo in range(0, n, bs)]
    # One OpenCV thread here too, before OpenCV has run: the plain loops are then one core's
    # worth, as a worker is, and forking stays safe (see the NOTE below).
    cv2.setNumThreads(1)
    # NOTE: forked workers are built first, before OpenCV has run in this process, and with
    # the output declared so the Loader's own shape probe does not run OpenCV here either.
    # A worker forked after OpenCV's thread pool has been used can hang for good in
    # `cv2.setNumThreads(1)` (shmaug/engine/workers/worker.py `_limit_threads`, OpenCV issue #5150); this
    # section measures scaling, and section 4 shows that hazard as a user meets it.
    contenders: dict[str, Callable[[], Any]] = {
        "shmaug workers=1": lambda: ShmaugRun(x, bs, aug, 1, declare_output=True),
        "shmaug workers=2": lambda: ShmaugRun(x, bs, aug, 2, declare_output=True),
        "shmaug workers=0": lambda: ShmaugRun(x, bs, aug, 0),
        "plain loop, no loader": lambda: PlainLoop(x, bs, aug),
        "plain loop + SampleSeeder.streams": lambda: PlainLoop(x, bs, aug, seeded=True),
        CEILING: lambda: ParallelPlainLoops(x, bs, aug, 2),
    }
    runs, status, notes = interleave(contenders, rounds, timeout, "scaling")
    rates = {k: [overlap_rate(v_, bs) if k == CEILING else steady_rate(v_, per_batch)
                 for v_ in v] for k, v in runs.items()}
    sec = "2 scaling glyph_distort 64x64 u8, batch 64"
    rows = []
    for name in contenders:
        ok = status[name] == "ok" and bool(rates[name])
        stats = summarize(rates[name]) if ok else None
        ratio_txt, target, extra = "", "", {}
        if ok and name != "shmaug workers=1" and status["shmaug workers=1"] == "ok" and rates["shmaug workers=1"]:
            pr = paired_ratio(rates[name], rates["shmaug workers=1"])
            extra["ratio_vs_workers1"] = pr.to_dict()
            ratio_txt = f"{pr.median:.2f}x workers=1 ({fmt_num(pr.lo)} – {fmt_num(pr.hi)})"
            if name == "shmaug workers=2":
                target = f">= 1.8x workers=1: {'met' if pr.median >= 1.8 else 'MISSED'}"
        for base, key, label in (("plain loop, no loader", "ratio_vs_plain", "one plain loop"),
                                 (CEILING, "ratio_vs_ceiling", "the 2-core ceiling")):
            if ok and name in (CEILING, "shmaug workers=2") and name != base and rates[base]:
                pr = paired_ratio(rates[name], rates[base])
                extra[key] = pr.to_dict()
                ratio_txt += f"; {pr.median:.2f}x {label}"
        note = notes.get(name, "")
        rows.append(Row(sec, name, "throughput", "images/s", stats, status[name], ratio_txt,
                          target, note, extra))
    return rows
