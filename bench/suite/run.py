"""The benchmark suite: shmaug against Keras workers, the Pool recipe, tf.data and PyTorch.

Run ``python -m bench [--quick] [--out bench/results/suite] [--workloads W1,W2,W3]
[--contenders keras_single,...] [--impls pil,shmaug] [--workers N] [--repeats R] [--rounds K]
[--jobs J] [--timeout S] [--no-fit] [--no-scaling] [--render SUITE_JSON]``. Each measurement
(one contender, one workload, one implementation of the augmentation, one worker count) runs
in its own child process (``python -m bench.suite.child SPEC``) under a hard timeout, so a
contender that freezes or crashes is reported and the suite goes on. ``--rounds K`` runs the
contenders K times, round by round (``plan.schedule``), and the report quotes medians
over rounds and same-round ratios (``rounds.py``). Writes ``suite.json``
(raw), ``suite.md`` (tables) and ``throughput.png`` / ``scaling.png`` to ``--out``.

This module is the driver: options, running the planned specs (``plan.py``) and judging
each result; the tables and plots are ``report.py``'s. See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common.harness import (
    base_parser, child_env, guarded, prepare_out, progress, run_json,
)
from bench.common.report import environment
from bench.common.workloads import WORKLOADS
from bench.suite.peers import missing_library
from bench.suite.plan import CONTENDERS, QUICK_NO_TF, schedule, spec_key
from bench.suite.report import NAME, WAIT_SHARE, median, write

NO_TF_ENV = "SHMAUG_BENCH_CHILD_NO_TF"  # "1": bench.suite.child skips its TensorFlow import
DISTINCT_MIN = 0.9  # same input: below this share of distinct outputs, workers replay a stream


def _run(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    t = time.perf_counter()
    missing = missing_library(spec["contender"])
    if missing:  # what its child would say, without a process that imports TensorFlow
        res: dict[str, Any] = {"status": "skipped", "error": missing, "spec": spec, "child_s": 0.0}
        return res
    plain = spec["quick"] and spec["contender"] in QUICK_NO_TF and not spec.get("fit")
    out = run_json([sys.executable, "-m", "bench.suite.child", json.dumps(spec)], timeout_s,
                   env=child_env(**{NO_TF_ENV: "1"}) if plain else None)
    res = dict(out.value) if out.ok else {"status": out.status, "error": out.error}
    res["spec"], res["child_s"] = spec, time.perf_counter() - t
    return _judge(res)


def _judge(res: dict[str, Any]) -> dict[str, Any]:
    """A run that returned numbers but lost, repeated or replayed samples is not "ok"."""
    if res.get("status") == "ok":
        problems = list(res.get("problems") or [])
        if res.get("distinct") is not None and res["distinct"] < DISTINCT_MIN:
            problems.append(f"same input gave only {res['distinct']:.0%} distinct augmentations")
        if problems:
            res["status"] = "duplicates/missing: " + "; ".join(problems)[:200]
    return res


def run_all(args: argparse.Namespace, env: dict[str, Any]) -> list[dict[str, Any]]:
    stages = schedule(args)
    results: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    bar = progress(sum(len(s) for s in stages), "bench suite")
    try:
        for stage in stages:
            for spec in stage:  # the simulated step: consumer needs 80% of shmaug's rate
                ref = next((r for r in results if r["spec"]["contender"] == "shmaug_loader"
                            and r["spec"]["workload"] == spec["workload"]
                            and r["spec"]["impl"] == spec["impl"] and r.get("rates")), None)
                bs = (WORKLOADS[spec["workload"]].batch_size_quick if args.quick
                      else WORKLOADS[spec["workload"]].batch_size)
                if spec["round"] > 1 or (spec["contender"] == "shmaug_loader" and not spec.get("scaling")):
                    spec["step_s"] = None  # later rounds: no wait epochs; shmaug's own: see below
                elif ref and not spec.get("fit") and not spec.get("scaling"):
                    spec["step_s"] = bs / (WAIT_SHARE * median(ref["rates"]))

            def one(spec: dict[str, Any]) -> dict[str, Any]:
                res = _run(spec, args.timeout)
                if (spec["contender"] == "shmaug_loader" and not spec.get("scaling") and spec["round"] == 1
                        and res.get("rates") and _measures_own_wait(spec, args.quick)):
                    bs = res["batch_size"]  # its wait figure needs its own rate: one more run
                    # with one full epoch before the wait epochs, as every other contender has:
                    # after the warm-up's few batches alone the first would start cold
                    spec2 = dict(spec, step_s=bs / (WAIT_SHARE * median(res["rates"])), repeats=1)
                    res["wait"] = _run(spec2, args.timeout).get("wait")
                    res["spec"]["step_s"] = spec2["step_s"]
                bar.set_postfix_str(spec_key(spec)[:40])
                bar.update()
                return res

            with ThreadPoolExecutor(args.jobs) as ex:
                for res in ex.map(one, stage):
                    results.append(res)
                    if not args.quick:  # a run cut short still leaves every finished figure
                        guarded(lambda: write(results, args, env, time.perf_counter() - t0), 60)
    finally:
        bar.close()
    return results


def _measures_own_wait(spec: dict[str, Any], quick: bool) -> bool:
    """Whether shmaug's Loader gets the second run that measures its own data wait: on every
    workload, but in a quick run (a smoke run, each code path once) on W1's shmaug ops only."""
    return not quick or (spec["workload"], spec["impl"]) == ("W1", "shmaug")


def parse(argv: list[str] | None, prog: str | None = None) -> argparse.Namespace:
    parser = base_parser("shmaug vs Keras workers, the Pool recipe, tf.data and PyTorch",
                           "bench/results/suite", prog)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    parser.add_argument("--workloads", default="W1,W2,W3", help="comma list of W1,W2,W3")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="comma list of: " + ",".join(CONTENDERS))
    parser.add_argument("--impls", default="pil,shmaug", help="augmentation implementations: pil,shmaug")
    parser.add_argument("--workers", type=int, default=cores, help=f"worker count N (default: cores = {cores})")
    parser.add_argument("--repeats", type=int, default=None, help="timed epochs per run (default 3; --quick 1)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds: every contender runs once per round, in a rotated "
                             "order; figures are medians over rounds (default 1)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="runs at once (default 1; --quick 2: its numbers are not measurements)")
    parser.add_argument("--timeout", type=float, default=None, help="hard limit per run in s (default 300; --quick 90)")
    parser.add_argument("--no-fit", action="store_true", help="skip the Model.fit consumer")
    parser.add_argument("--no-scaling", action="store_true", help="skip the N = 1..workers-1 runs")
    parser.add_argument("--render", metavar="SUITE_JSON", default=None,
                        help="measure nothing: rewrite the tables and plots from a saved suite.json "
                             "(beside it, unless --out says where)")
    args = parser.parse_args(argv)
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.impls = [i for i in args.impls.split(",") if i]
    bad = [w for w in args.workloads if w not in WORKLOADS] + [c for c in args.contenders if c not in CONTENDERS]
    if bad:
        parser.error(f"unknown workload or contender: {', '.join(bad)}")
    unknown = [i for i in args.impls if i not in ("pil", "shmaug")]
    if unknown:
        parser.error(f"unknown --impls: {', '.join(unknown)} (pil, shmaug)")
    for name in ("rounds", "workers", "repeats", "jobs", "timeout"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            parser.error(f"--{name} must be positive; received {value}")
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.jobs = args.jobs or (2 if args.quick else 1)
    args.timeout = args.timeout or (90.0 if args.quick else 300.0)
    return args


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run the suite; ``prog`` names the command in its help (``shmaug bench``)."""
    args = parse(argv, prog)
    given = list(sys.argv[1:] if argv is None else argv)  # (under `shmaug bench`, its own)
    args.command = " ".join(["python -m bench", *given])  # what runs it again, from a clone
    prepare_out(args.out)  # before measuring, not after
    if args.render:
        try:
            saved = json.loads(Path(args.render).read_text())
            meta = saved["meta"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"{prog or 'python -m bench'}: error: --render {args.render} is not a suite.json "
                  f"a run wrote ({type(exc).__name__}: {exc}). Fix: pass the suite.json of a "
                  f"run (its --out folder).", file=sys.stderr)
            return 2
        args.quick, args.workers, args.repeats = meta["quick"], meta["workers"], meta["repeats"]
        args.rounds = meta.get("rounds", 1)
        args.command = meta["command"]
        results = [_judge(r) for r in saved["results"]]
        print(write(results, args, meta["environment"], meta["wall_s"], saved))
        _say_where(args.out)
        return 0
    env = environment()
    t0 = time.perf_counter()
    results = run_all(args, env)
    text = write(results, args, env, time.perf_counter() - t0)
    print(text)
    _say_where(args.out)
    return 0


def _say_where(out: str) -> None:
    """The last line of every run: the absolute folder it wrote (a quick run's is a temp one)."""
    print(f"results in {Path(out).resolve()}/ ({NAME}.json, {NAME}.md, throughput.png, "
          f"scaling.png)")


if __name__ == "__main__":
    sys.exit(main())
