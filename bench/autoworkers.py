"""What ``workers="auto"`` settles on, and what it delivers: ``python -m bench.autoworkers``.

Two cases, each setting run in a fresh child process (fork), the settings interleaved round by
round in a rotated order:

- ``fast``: workload W1 (glyphs, shmaug's ops, batch 256), a consumer that takes batches as
  fast as they come. Fixed ``workers`` 1 .. usable cores against ``"auto"``: images/s over
  the measured epochs, and the count auto ran them with. Goal: auto within 5% of the best
  fixed setting (medians over rounds, and each round's auto ÷ that round's best fixed).
- ``slow``: W1's glyphs with a light op (a horizontal flip) and a consumer that sleeps
  ``--step-ms`` per batch (an accelerator step that leaves the CPU free). Fixed 1 and the
  usable cores against ``"auto"``: the count auto settles on, the consumer's wait, the
  workers' busy seconds per epoch (the same work, on fewer cores) and their memory (USS,
  summed over the live workers after each epoch). Goal: fewer workers than cores, the wait
  within 2%.

Each run takes ``--settle`` epochs first (auto judges its first epoch only as start-up, then
may halve per epoch: by default 3 + log2(cores) epochs, enough to go from every core to one),
then ``--epochs`` measured ones. Per epoch the child records images/s, the wait share, the
count at its end and auto's latest decision. Written to ``--out`` as ``autoworkers.json`` and
``autoworkers.md`` (also printed).

    python -m bench.autoworkers --rounds 3 --out bench/results/autoworkers
    python -m bench.autoworkers --quick --out /tmp/aw        # smoke run: measures nothing
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from bench.common.harness import (

    described, base_parser, child_result, consume, prepare_out, rotated_rounds, worker_memory,

)
from bench.common.report import environment
from bench.common.workloads import WORKLOADS, augment_for, build_data

CASES = ("fast", "slow")
GOAL_RATIO = 0.95  # fast: auto ÷ the best fixed setting
GOAL_WAIT = 0.02  # slow: the consumer's wait with auto


def cores() -> int:
    from shmaug import platform as _platform

    return _platform.cpu_count()


def settings(case: str) -> list[str]:
    """The settings run for ``case``: fixed counts, then "auto"."""
    fixed = range(1, cores() + 1) if case == "fast" else sorted({1, cores()})
    return [*map(str, fixed), "auto"]


def default_settle() -> int:
    return 3 + max(0, cores() - 1).bit_length()


def child(case: str, setting: str, epochs: int, settle: int, step_ms: float,
          quick: bool) -> dict[str, Any]:
    """One run: ``settle + epochs`` epochs of ``case`` with ``workers=setting``."""
    import shmaug
    from shmaug.engine.autoscale import _autotune

    wl = WORKLOADS["W1"]
    n, bs = (wl.n_quick, wl.batch_size_quick) if quick else (wl.n, wl.batch_size)
    if quick:  # tiny epochs: let the rule judge them anyway, so the smoke run exercises it
        _autotune.MIN_SECONDS, _autotune.MIN_BATCHES = 0.01, 2
    x, ids = build_data("W1", n)
    augment = (augment_for("W1", "shmaug") if case == "fast"
               else shmaug.Compose([shmaug.ops.Op("hflip")]))
    step_s = step_ms / 1e3 if case == "slow" else 0.0
    workers: Any = setting if setting == "auto" else int(setting)
    rows = []
    with shmaug.Loader(x, ids, batch_size=bs, augment=augment, workers=workers, seed=0,
                       shuffle=True, start_method="fork") as loader:
        for epoch in range(settle + epochs):
            loader.reset_stats()
            wall, waits = consume(loader, step_s)
            stats = loader.stats()
            uss = sum(m["uss"] for m in worker_memory(loader.pids))
            rows.append({"epoch": epoch, "measured": epoch >= settle, "seconds": wall,
                         "images_per_s": n / wall, "wait": float(sum(waits) / wall),
                         "workers": stats["workers"], "busy_s": sum(stats["worker_busy"]) * wall,
                         "uss_mib": uss, "decision": stats["workers_decision"]})
    return {"case": case, "setting": setting, "cores": cores(), "batch_size": bs, "n": n,
            "step_ms": step_ms if case == "slow" else 0.0, "epochs": rows}


def measured(run: dict[str, Any]) -> dict[str, float]:
    """A run's figures over its measured epochs: images/s (all images ÷ all seconds), wait
    share, workers at the end, busy seconds and the live workers' USS per epoch."""
    rows = [r for r in run["epochs"] if r["measured"]] or run["epochs"]
    seconds = sum(r["seconds"] for r in rows)
    return {"images_per_s": run["n"] * len(rows) / seconds,
            "wait": sum(r["wait"] * r["seconds"] for r in rows) / seconds,
            "workers": rows[-1]["workers"],
            "busy_s": float(np.mean([r["busy_s"] for r in rows])),
            "uss_mib": float(np.mean([r["uss_mib"] for r in rows]))}


def run_rounds(rounds: int, cases: list[str], epochs: int, settle: int, step_ms: float,
               quick: bool) -> list[dict[str, Any]]:
    configs = [(case, s) for case in cases for s in settings(case)]

    def run_one(config: tuple[str, str]) -> dict[str, Any]:
        return child_result(
            [sys.executable, "-m", "bench.autoworkers", "--child", ",".join(config), "--epochs",
             str(epochs), "--settle", str(settle), "--step-ms", str(step_ms),
             *(["--quick"] if quick else [])], timeout_s=900)

    return rotated_rounds(rounds, configs, run_one, "autoworkers runs")


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per case: the median over rounds of each setting's figures, and the goals."""
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r["case"] for r in results):
        runs = [r for r in results if r["case"] == case]
        rounds = sorted({r["round"] for r in runs})
        by = {(r["round"], r["setting"]): measured(r) for r in runs}
        names = list(dict.fromkeys(r["setting"] for r in runs))
        table = {s: {key: float(np.median([by[i, s][key] for i in rounds if (i, s) in by]))
                     for key in ("images_per_s", "wait", "workers", "busy_s", "uss_mib")}
                 for s in names}
        counts = [[row["workers"] for row in r["epochs"]] for r in runs if r["setting"] == "auto"]
        summary: dict[str, Any] = {"settings": table, "auto_counts": counts,
                                   "cores": runs[0]["cores"], "rounds": len(rounds)}
        fixed = [s for s in names if s != "auto"]
        if case == "fast" and fixed:
            best = max(fixed, key=lambda s: table[s]["images_per_s"])
            same_round = [by[i, "auto"]["images_per_s"]
                          / max(by[i, s]["images_per_s"] for s in fixed) for i in rounds]
            summary.update(best_fixed=best,
                           ratio=table["auto"]["images_per_s"] / table[best]["images_per_s"],
                           same_round=same_round)
        out[case] = summary
    return out


def report(summary: dict[str, Any], command: str, env: dict[str, Any]) -> str:
    lines = [f"`workers=\"auto\"` against fixed counts (`{command}`)", "",
             f"{env['cpus']} CPUs ({env['cpu']}) · Python {env['python']} · commit "
             f"{env.get('git_commit', '?')} · {env['time']} · load average "
             f"{env['load_avg_1m']} at start", ""]
    for case, s in summary.items():
        lines += [(f"**{case}** ({s['cores']} usable cores, {s['rounds']} rounds; medians "
                   f"over rounds, of the measured epochs):"), "",
                  ("| workers | images/s | consumer wait | workers at the end | busy s/epoch "
                   "| workers' USS, MiB |"), "|---|---:|---:|---:|---:|---:|"]
        for name, row in s["settings"].items():
            lines.append(f"| {name} | {row['images_per_s']:,.0f} | {row['wait']:.2%} | "
                         f"{row['workers']:.0f} | {row['busy_s']:.2f} | "
                         f"{row['uss_mib']:.0f} |")
        lines += ["", "auto's count per epoch, each round: "
                  + "; ".join(" ".join(map(str, c)) for c in s["auto_counts"])]
        if case == "fast" and "ratio" in s:
            sr = s["same_round"]
            lines.append(
                f"auto ÷ the best fixed setting ({s['best_fixed']}): {s['ratio']:.3f} "
                f"(goal {GOAL_RATIO}); same round, auto ÷ that round's best fixed: median "
                f"{np.median(sr):.3f}, min {min(sr):.3f}, {sum(v >= GOAL_RATIO for v in sr)}"
                f"/{len(sr)} rounds at the goal")
        if case == "slow":
            auto = s["settings"]["auto"]
            lines.append(f"auto settled on {auto['workers']:.0f} of {s['cores']} workers "
                         f"(goal: fewer than the cores), consumer wait {auto['wait']:.2%} "
                         f"(goal: at most {GOAL_WAIT:.0%})")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = base_parser(described(__doc__), "bench/results/autoworkers")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--epochs", type=int, default=3, help="measured epochs per run")
    parser.add_argument("--settle", type=int, default=None,
                        help="epochs before them (default 3 + log2 of the usable cores)")
    parser.add_argument("--step-ms", type=float, default=40.0,
                        help="slow: the consumer's step per batch of 256")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # "case,setting"
    args = parser.parse_args(argv)
    settle = default_settle() if args.settle is None else args.settle
    epochs, step_ms = (2, 5.0) if args.quick else (args.epochs, args.step_ms)
    if args.child:
        case, setting = args.child.split(",")
        print(json.dumps(child(case, setting, args.epochs, settle, args.step_ms, args.quick)))
        return
    out = prepare_out(args.out)  # before measuring, not after
    env = environment()
    started = time.time()
    results = run_rounds(1 if args.quick else args.rounds, args.cases.split(","), epochs,
                         settle, step_ms, args.quick)
    summary = summarize(results)
    text = report(summary, f"python -m bench.autoworkers {' '.join(argv or sys.argv[1:])}",
                  env)
    print(text)
    (out / "autoworkers.json").write_text(json.dumps(
        {"summary": summary, "runs": results, "seconds": time.time() - started,
         "environment": env}, indent=1))
    (out / "autoworkers.md").write_text(text)


if __name__ == "__main__":
    main()
