"""What reusing dropped batches' memory buys: ``python -m bench.recycle``.

``shmaug.engine.handoff.recycle`` copies each batch into the memory of one the consumer has dropped. This
measures it against new arrays per batch (``Recycler(keep=0)``), side by side: per workload,
one ``shmaug.Loader`` (2 workers, fork) traced as ``bench.wait_trace`` does (tight epochs for
the images/s, then epochs with a consumer that needs 80% of them), in two kinds of process:

- plain: glibc's defaults;
- after tf.data: a ``tf.data.Dataset.from_generator`` has run first, as it has in every
  ``Model.fit`` on the TensorFlow backend. TensorFlow then sets glibc's ``M_TRIM_THRESHOLD``
  to 128 KB (its log: "Memory patch applied"), which turns every array over 128 KB into an
  mmap of its own: new pages to fault in for each batch, and an unmap for each one dropped.

Each run is a fresh child process; the runs are interleaved round by round in a rotated
order. The table gives medians over rounds and the same-round ratios.

    python -m bench.recycle --rounds 3
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from bench.common.harness import child_result, described, prepare_out, rotated_rounds, study_parser
from bench.common.report import write_study
from bench import wait_trace

CASES = {"W1": "shmaug", "W2": "shmaug", "W3": "none"}  # workload: its ops (as wait_trace)
PROCESSES = ("plain", "after tf.data")


def _after_tf_data() -> None:
    import tensorflow as tf

    for _ in tf.data.Dataset.from_generator(lambda: iter([np.zeros(1)]), tf.float64):
        pass


def child(workload: str, recycle: bool, process: str, quick: bool) -> dict[str, Any]:
    """One run: the trace's images/s and its wait share over the consumer's epochs."""
    import shmaug.engine.loader
    from shmaug.engine.handoff.recycle import Recycler

    if process == "after tf.data":
        _after_tf_data()
    if not recycle:
        shmaug.engine.loader.Recycler = lambda: Recycler(keep=0)  # type: ignore[misc]
    epochs = 2 if quick else 6
    result = wait_trace.trace(workload, CASES[workload], epochs, 0.8, quick)
    rows = result["epochs"][1:] or result["epochs"]  # the first one settles the step
    wall = sum(r["wall_ms"] for r in rows)
    return {"workload": workload, "recycle": recycle, "process": process,
            "images_per_s": float(np.median(result["images_per_s"])),
            "wait": sum(r["wait_share"] * r["wall_ms"] for r in rows) / wall}


def run_rounds(rounds: int, workloads: list[str], quick: bool) -> list[dict[str, Any]]:
    has_tf = importlib.util.find_spec("tensorflow") is not None
    processes = PROCESSES if has_tf else PROCESSES[:1]  # no TensorFlow: plain processes only
    if quick:  # a smoke run, each path once: the process that ran tf.data first where it can
        processes = processes[-1:]
    configs = list(itertools.product(workloads, processes, (True, False)))

    def run_one(config: tuple[str, str, bool]) -> dict[str, Any]:
        workload, process, recycle = config
        return child_result([sys.executable, "-m", "bench.recycle", "--child",
                               f"{workload},{int(recycle)},{process}",
                               *(["--quick"] if quick else [])], timeout_s=600)

    if quick:  # a smoke run (its figures measure nothing): its one round's runs at once, as
        # bench --quick and bench.engine --quick run theirs; each run's consumer mostly sleeps
        with ThreadPoolExecutor(len(configs)) as pool:
            return [{"round": 0, **r} for r in pool.map(run_one, configs)]
    return rotated_rounds(rounds, configs, run_one, "recycle runs")


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| workload | process | wait, reused | wait, new arrays | images/s, reused ÷ new "
             "| rounds |", "|---|---|---:|---:|---:|---:|"]
    for workload, process in dict.fromkeys((r["workload"], r["process"]) for r in results):
        mine = [r for r in results if (r["workload"], r["process"]) == (workload, process)]
        by_round = {(r["round"], r["recycle"]): r for r in mine}
        rounds = sorted({r["round"] for r in mine})
        on = [by_round[i, True] for i in rounds]
        off = [by_round[i, False] for i in rounds]
        ratio = [a["images_per_s"] / b["images_per_s"] for a, b in zip(on, off)]
        lines.append(
            f"| {workload} | {process} | {np.median([r['wait'] for r in on]):.1%} | "
            f"{np.median([r['wait'] for r in off]):.1%} | {np.median(ratio):.2f}x "
            f"({min(ratio):.2f}-{max(ratio):.2f}) | {len(rounds)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = study_parser(described(__doc__), "bench/results/recycle",
                          "WORKLOAD,RECYCLE,PROCESS")
    parser.add_argument("--workloads", default="W1,W2,W3")
    args = parser.parse_args(argv)
    if not args.child:
        prepare_out(args.out)  # before measuring, not after
    if args.child:
        workload, recycle, process = args.child.split(",")
        print(json.dumps(child(workload, recycle == "1", process, args.quick)))
        return
    workloads = args.workloads.split(",")[:1 if args.quick else None]
    began = time.perf_counter()
    results = run_rounds(1 if args.quick else args.rounds, workloads, args.quick)
    write_study(args.out, "recycle", results, "Data wait at 80% load and images/s, batches in "
                "dropped batches' memory vs new arrays", table(results), argv or sys.argv[1:],
                args.quick, time.perf_counter() - began)


if __name__ == "__main__":
    main()
