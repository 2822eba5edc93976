"""Where a consumer's data wait goes, batch by batch: ``python -m bench.wait_trace``.

The suite's data-wait figure is one share per workload; this traces it. One ``shmaug.Loader``
(2 workers, fork) on a workload, two tight epochs to learn its images/s, then epochs with a
consumer that sleeps a fixed step per batch, the step set so that it needs ``--share`` of
those images/s (as the suite's data wait does). Per epoch: the wait share, the median time
to get a ready batch (what handing it over costs), and every wait of 3 ms or more with its
batch index (the stalls). Written to ``--out`` as JSON and printed as a table.

    python -m bench.wait_trace --workload W3 --impl none --epochs 8
    python -m bench.wait_trace --workload W1 --lend   # copy=False: no copy out of the slot
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.harness import base_parser, consume, described, prepare_out
from bench.common.report import QUICK, took
from bench.common.workloads import IMPLS, WORKLOADS, augment_for, build_data

STALL_MS = 3.0


def trace(workload: str, impl: str, epochs: int, share: float, quick: bool,
          copy: bool = True) -> dict[str, Any]:
    import shmaug

    wl = WORKLOADS[workload]
    n, bs = (wl.n_quick, wl.batch_size_quick) if quick else (wl.n, wl.batch_size)
    x, ids = build_data(wl.name, n)
    augment = None if impl == "none" else augment_for(wl.name, impl)
    with shmaug.Loader(x, ids, batch_size=bs, augment=augment, workers=2, seed=0,
                       start_method="fork", copy=copy) as loader:
        rates = []
        for _ in range(2):
            t = time.perf_counter()
            images = sum(len(xb) for xb, _ in loader)
            rates.append(images / (time.perf_counter() - t))
        step_s = bs / (share * float(np.median(rates)))
        rows = []
        for epoch in range(epochs):
            wall, waits = consume(loader, step_s)
            ms = np.array(waits) * 1e3
            rows.append({"epoch": epoch, "wait_share": float(ms.sum() / 1e3 / wall),
                         "median_ms": float(np.median(ms)), "wall_ms": wall * 1e3,
                         "stalls": [(i, round(float(v), 1)) for i, v in enumerate(ms)
                                    if v >= STALL_MS]})
    return {"workload": workload, "impl": impl, "copy": copy, "batch_size": bs, "images_per_s": rates,
            "step_ms": step_s * 1e3, "share": share, "epochs": rows}


def table(result: dict[str, Any]) -> str:
    lent = "" if result.get("copy", True) else ", lent (copy=False)"
    head = (f"{result['workload']} ({result['impl']} ops{lent}), batch {result['batch_size']}: "
            f"{np.median(result['images_per_s']):,.0f} images/s in tight epochs, step "
            f"{result['step_ms']:.1f} ms ({result['share']:.0%} of that)\n\n"
            "| epoch | wait | ready batch, median ms | epoch ms | waits ≥ 3 ms (batch, ms) |\n"
            "|---|---|---|---|---|\n")
    return head + "\n".join(
        f"| {r['epoch']} | {100 * r['wait_share']:.1f}% | {r['median_ms']:.2f} | "
        f"{r['wall_ms']:.0f} | {r['stalls'] or ''} |" for r in result["epochs"])


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(described(__doc__), "bench/results/wait_trace/wait_trace.json")
    parser.add_argument("--workload", default="W1", choices=sorted(WORKLOADS))
    parser.add_argument("--impl", default="shmaug", choices=[*IMPLS, "none"],
                        help="the workload's ops: shmaug's, the users' PIL code, or none")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--share", type=float, default=0.8,
                        help="the share of the loader's images/s the consumer needs")
    parser.add_argument("--lend", action="store_true",
                        help="copy=False: lend each batch's slot instead of copying it out")
    args: argparse.Namespace = parser.parse_args(argv)
    prepare_out(args.out, file=True)  # before measuring, not after
    began = time.perf_counter()
    result = trace(args.workload, args.impl, 2 if args.quick else args.epochs, args.share,
                   args.quick, copy=not args.lend)
    result["wall_s"] = round(time.perf_counter() - began, 1)
    text = (f"{QUICK}.\n\n" if args.quick else "") + table(result) + \
        f"\n\nThis run took {took(result['wall_s'])}."
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
