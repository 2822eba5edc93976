"""The suite's report: tables, targets and plots from the list of run results.

Owns everything written to ``suite.md``, ``suite.json``, ``throughput.png`` and
``scaling.png``; ``write()`` is called after every finished run (a cut-short run still leaves
its figures) and by ``python -m bench --render suite.json`` (measure nothing, redraw). A result
is one child's JSON with its ``spec`` attached (see ``bench/suite/child.py``). With ``--rounds``
the tables below see one result per contender folded over the rounds and the per-round
tables come from ``rounds.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
from typing import Any

from bench.common.harness import summarize
from bench.common.report import QUICK, fmt_num, fmt_stats, markdown_table, verdict
from bench.suite import rounds as suite_rounds
from bench.common.workloads import IMPLS, WORKLOADS
from bench.suite.peers import REGISTRY
from bench.suite.plan import CONTENDERS, SCALING

NAME = "suite"
LABELS = {name: entry.label for name, entry in REGISTRY.items()}
WAIT_SHARE = 0.8  # the simulated consumer needs this share of shmaug's throughput


def median(v: list[float]) -> float:
    return summarize(v).median if v else math.nan


def _find(results: list[dict[str, Any]], wl: str, impl: str, c: str, **kw: Any) -> dict[str, Any] | None:
    for r in results:
        s = r["spec"]
        if (s["workload"], s["impl"], s["contender"]) == (wl, impl, c) and all(
                bool(s.get(k)) == v for k, v in kw.items()):
            return r
    return None


def _rate(r: dict[str, Any] | None) -> float:
    return median(r["rates"]) if r and r.get("status") == "ok" and r.get("rates") else math.nan


def _status(r: dict[str, Any]) -> str:
    st = r.get("status", "?")
    return st if st == "ok" else f"{st}: {r.get('error', '')}"[:160]


def main_table(results: list[dict[str, Any]], workers: int) -> str:
    parts = []
    runs = [r for r in results if not r["spec"].get("fit") and not r["spec"].get("scaling")]
    for wl in WORKLOADS:
        rows = []
        for r in (r for r in runs if r["spec"]["workload"] == wl):
            s = r["spec"]
            base = _rate(_find(results, wl, s["impl"], "keras_single", fit=False, scaling=False))
            med, spread = fmt_stats(summarize(r.get("rates") or []) if r.get("status") == "ok" else None)
            mem = r.get("memory") or {}
            wait = r.get("wait") or {}
            per_worker = (sum(mem["worker_uss"]) / len(mem["worker_uss"])) if mem.get("worker_uss") else math.nan
            rows.append([LABELS[s["contender"]], s["impl"], med, spread,
                         f"{_rate(r) / base:.2f}x" if base == base and _rate(r) == _rate(r) else "",
                         fmt_num(r.get("first_batch_s", math.nan)),
                         fmt_num(mem.get("uss", math.nan)), fmt_num(mem.get("pss", math.nan)),
                         fmt_num(per_worker),
                         f"{100 * wait['fraction']:.1f}%" if wait.get("fraction") is not None else "",
                         _status(r) + (" (rerun)" if r.get("rerun") else "")])
        if rows:
            wlo = WORKLOADS[wl]
            parts.append(f"### {wl}: {wlo.title}, {workers} workers\n\n" + markdown_table(
                ["contender", "ops", "images/s", "min – max", "vs 1.", "1st batch s",
                 "USS MiB", "PSS MiB", "USS/worker", "data wait*", "status"], rows))
    return "\n\n".join(parts)


def summary_table(results: list[dict[str, Any]]) -> str:
    """One line per contender: images/s (speed-up over contender 1) per workload and ops."""
    cols = [(wl, impl) for wl in WORKLOADS for impl in (*IMPLS, "none")
            if any(r["spec"]["workload"] == wl and r["spec"]["impl"] == impl for r in results)]
    rows = []
    for c in CONTENDERS:
        cells = []
        for wl, impl in cols:
            r = _find(results, wl, impl, c, fit=False, scaling=False)
            base = _rate(_find(results, wl, impl, "keras_single", fit=False, scaling=False))
            if r is None:
                cells.append("")
            elif r.get("status") != "ok":
                cells.append(r.get("status", "?").split(":")[0])
            else:
                sp = f" ({_rate(r) / base:.2f}x)" if base == base and c != "keras_single" else ""
                cells.append(fmt_num(_rate(r)) + sp)
        r = _find(results, "W1", "shmaug", c, fit=False, scaling=False)
        cells.append(fmt_num(r["first_batch_s"]) if r and r.get("first_batch_s") is not None else "")
        if any(cells[:-1]):
            rows.append([LABELS[c], *cells])
    return ("### Summary: images/s delivered (speed-up over contender 1, same ops)\n\n"
            + markdown_table(["contender", *[f"{wl} {impl} ops" if impl != "none" else wl
                                               for wl, impl in cols], "W1 1st batch s"], rows))


def scaling_table(results: list[dict[str, Any]], workers: int) -> str:
    """images/s per worker count, with the parallel efficiency where contender 1's run gives
    the 1-process rate. A cell holds a number or nothing: a run that failed is empty, its
    status in a line under the table (a status in a number column read as a figure)."""
    rows, failed = [], []
    no_single = False
    for impl in IMPLS:
        single = _rate(_find(results, "W1", impl, "keras_single", fit=False, scaling=False))
        for c in SCALING:
            cells = []
            for n in range(1, workers + 1):
                r = next((r for r in results if r["spec"]["workload"] == "W1" and r["spec"]["impl"] == impl
                          and r["spec"]["contender"] == c and r["spec"]["workers"] == n
                          and not r["spec"].get("fit")), None)
                rate = _rate(r)
                if r is None:
                    cells.append("—")
                elif rate != rate:
                    cells.append("")
                    failed.append(f"{LABELS[c]}, {impl} ops, N={n}: {_status(r)}")
                elif single == single:
                    cells.append(f"{fmt_num(rate)} ({rate / (n * single):.0%})")
                else:
                    cells.append(fmt_num(rate))
                    no_single = True
            if any(x != "—" for x in cells):
                rows.append([LABELS[c], impl, *cells])
    if not rows:
        return ""
    notes = "".join(f"\n\nNot measured: {line}" for line in failed)
    if no_single:
        notes += ("\n\nA figure without a percentage has no efficiency: contender 1's "
                  "1-process run is not in these results.")
    return ("### W1 scaling: images/s (parallel efficiency = images/s ÷ (N × 1-process images/s))\n\n"
            + markdown_table(["contender", "ops", *[f"N={n}" for n in range(1, workers + 1)]], rows)
            + notes)


def fit_table(results: list[dict[str, Any]]) -> str:
    rows = []
    for r in (r for r in results if r["spec"].get("fit")):
        ok = r.get("status") == "ok"
        rows.append([LABELS[r["spec"]["contender"]], r["spec"]["impl"],
                     fmt_num(_rate(r)) if ok else "—",
                     f"{100 * median(r['wait_fraction']):.1f}%" if ok else "",
                     fmt_num(median(r["compute_s"])) if ok else "",
                     fmt_num(median(r["fit_s"])) if ok else "", _status(r)])
    if not rows:
        return ""
    return ("### W1 under a real small CNN `Model.fit` on the CPU\n\n" + markdown_table(
        ["contender", "ops", "images/s in fit", "data wait", "compute-only epoch s",
         "fed epoch s", "status"], rows))


def targets(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def rate(wl: str, impl: str, c: str) -> float:
        return _rate(_find(results, wl, impl, c, fit=False, scaling=False))

    out = []

    def add(name: str, value: float, goal: float, higher: bool = True, detail: str = "") -> None:
        met = (value >= goal) if higher else (value <= goal)
        out.append({"target": name, "value": value, "goal": goal,
                    "met": None if value != value else bool(met), "detail": detail})

    sh = rate("W1", "shmaug", "shmaug_loader")
    add("W1: shmaug (own ops) ÷ Pool recipe (PIL ops)", sh / rate("W1", "pil", "pool"),
        suite_rounds.W1_POOL_GOAL)
    add("W1: shmaug (own ops) ÷ Keras multiprocessing (PIL ops)", sh / rate("W1", "pil", "keras_fork"), 5)
    for wl in ("W1", "W2"):
        add(f"{wl}, PIL ops for all: shmaug ÷ 1 process", rate(wl, "pil", "shmaug_loader")
            / rate(wl, "pil", "keras_single"), 1.8)
        add(f"{wl}, PIL ops for all: shmaug ÷ PyTorch DataLoader", rate(wl, "pil", "shmaug_loader")
            / rate(wl, "pil", "torch"), 1.0)
    for impl in IMPLS:
        add(f"W2 ({impl} ops): shmaug ÷ Keras multiprocessing", rate("W2", impl, "shmaug_loader")
            / rate("W2", impl, "keras_fork"), 2.5)
    def first_batch(c: str) -> float:
        return (_find(results, "W1", "shmaug", c, fit=False, scaling=False) or {}).get(
            "first_batch_s", math.nan)

    add("spawn: shmaug time to first batch (s)", first_batch("shmaug_spawn"), 1.5, higher=False,
        detail=f"Keras spawn: {fmt_num(first_batch('keras_spawn'))} s; "
               f"Grain (always spawn): {fmt_num(first_batch('grain'))} s")
    for wl in WORKLOADS:
        for impl in (*IMPLS, "none"):
            r = _find(results, wl, impl, "shmaug_loader", fit=False, scaling=False)
            if r and r.get("wait"):
                add(f"{wl} ({impl} ops): shmaug data wait at {WAIT_SHARE:.0%} load", r["wait"]["fraction"],
                    0.02, higher=False)
    return out


def targets_table(ts: list[dict[str, Any]], quick: bool = False) -> str:
    rows = [[t["target"], fmt_num(t["value"]), ("≤ " if "wait" in t["target"] or "spawn" in t["target"]
                                                  else "≥ ") + fmt_num(t["goal"]),
             verdict(t["met"], quick), t["detail"]] for t in ts]
    return "### Targets\n\n" + markdown_table(["target", "measured", "goal", "", "note"], rows)


def plots(results: list[dict[str, Any]], out: Path, workers: int) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results if not r["spec"].get("fit") and not r["spec"].get("scaling")]
    wls = [wl for wl in WORKLOADS if any(r["spec"]["workload"] == wl for r in runs)]
    fig, axes = plt.subplots(len(wls) or 1, 1, figsize=(10, 3.2 * max(1, len(wls))), squeeze=False)
    for ax, wl in zip(axes[:, 0], wls):
        names = [c for c in CONTENDERS if any(r["spec"]["contender"] == c and r["spec"]["workload"] == wl
                                              for r in runs)]
        impls = [i for i in (*IMPLS, "none") if any(r["spec"]["impl"] == i and r["spec"]["workload"] == wl for r in runs)]
        width = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            meds, lo, hi = [], [], []
            for c in names:
                r = _find(results, wl, impl, c, fit=False, scaling=False)
                s = summarize(r["rates"]) if r and r.get("status") == "ok" and r.get("rates") else None
                meds.append(s.median if s else 0)
                lo.append(s.median - s.lo if s else 0)
                hi.append(s.hi - s.median if s else 0)
            ys = [i + k * width for i in range(len(names))]
            ax.barh(ys, meds, width, xerr=[lo, hi], label=f"{impl} ops")
        ax.set_yticks([i + width * (len(impls) - 1) / 2 for i in range(len(names))])
        ax.set_yticklabels([LABELS[c] for c in names], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("images/s delivered (median, bars min-max)")
        ax.set_title(f"{wl}: {WORKLOADS[wl].title}, {workers} workers")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    for impl in IMPLS:
        for c in SCALING:
            pts = [(r["spec"]["workers"], _rate(r)) for r in results
                   if r["spec"]["workload"] == "W1" and r["spec"]["impl"] == impl
                   and r["spec"]["contender"] == c and not r["spec"].get("fit")]
            pts = sorted(p for p in pts if p[1] == p[1])
            if pts:
                ax.plot(*zip(*pts), marker="o", label=f"{LABELS[c]} [{impl}]",
                        linestyle="-" if impl == "shmaug" else "--")
    ax.set_xlabel("workers N")
    ax.set_ylabel("W1 images/s")
    ax.set_xticks(range(1, workers + 1))
    ax.legend(fontsize=6)
    ax.set_title("W1 scaling with workers")
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)
    return ["throughput.png", "scaling.png"]


def write(results: list[dict[str, Any]], args: argparse.Namespace, env: dict[str, Any],
          wall_s: float, saved: dict[str, Any] | None = None) -> str:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rounds = suite_rounds.rounds_of(results)
    raw, results = results, suite_rounds.merge(results) if rounds > 1 else results
    ts = targets(results)
    env = dict(env)
    env.setdefault("load_avg_1m_end", round(os.getloadavg()[0], 2))
    meta = {"quick": args.quick, "workers": args.workers, "repeats": args.repeats, "rounds": rounds,
            "wall_s": wall_s, "environment": env, "command": args.command}
    saved = saved or {}
    if saved.get("meta", {}).get("reruns"):
        meta["reruns"] = saved["meta"]["reruns"]
    payload = {"name": NAME, "meta": meta, "targets": ts, "results": raw}
    if rounds > 1:
        payload["rounds"] = suite_rounds.summary(raw)
    if saved.get("superseded"):
        payload["superseded"] = saved["superseded"]
    (out / f"{NAME}.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    pngs = plots(results, out, args.workers)
    reruns = "".join(f"Rows marked *rerun* come from `{r['command']}` (load average "
                     f"{r['environment'].get('load_avg_1m')}): {r['reason']}; the first "
                     "measurements are kept in the JSON under `superseded`.\n\n"
                     for r in meta.get("reruns", []))
    head = (f"# Benchmark suite ({'quick run' if args.quick else 'full run'})\n\n"
            + (f"{QUICK}.\n\n" if args.quick else "") +
            f"`{meta['command']}` · {env.get('usable_cpus')} CPUs ({env.get('cpu', '?')}) · Python {env.get('python')} · commit "
            f"{env.get('git_commit', '?')} · {env.get('time')} · load average {env.get('load_avg_1m')} at start, "
            f"{env['load_avg_1m_end']} at end · {wall_s / 60:.1f} min\n\n{reruns}"
            + (f"**images/s: medians of {rounds} interleaved rounds** (every contender once per round, "
               "each run a fresh child, workload by workload, the order rotated per round) with "
               "min – max over rounds; a round's figure is the median of its timed epochs (epoch 0 is "
               "warm-up). The targets divide those medians; the same-round ratios follow them. Memory, "
               "data wait, same-image probe, fit and scaling: round 1 only; time to first batch: "
               "median over rounds; "
               if rounds > 1 else
               "images/s: medians of timed epochs (epoch 0 is warm-up) with min – max; ")
            + "'vs 1.' is the speed-up over contender 1 with the same ops; memory is USS / PSS summed over the main "
            "process and its workers, mid-epoch. *data wait: share of wall time a consumer that "
            f"takes a fixed time per batch (needing {WAIT_SHARE:.0%} of shmaug's images/s) spends "
            "waiting for the next batch.\n\n")
    text = "\n\n".join(t for t in (head + targets_table(ts, args.quick), suite_rounds.section(raw, args.quick), summary_table(results),
                                   main_table(results, args.workers),
                                   scaling_table(results, args.workers), fit_table(results)) if t)
    text += "\n\n" + "\n".join(f"![{p}]({p})" for p in pngs) + "\n"
    (out / f"{NAME}.md").write_text(text)
    return text
