"""Interleaved rounds (``python -m bench --rounds R``): each round's figures, medians, same-round ratios.

A result's spec carries its ``round`` (``plan.schedule``). This module owns what the
rounds mean in the report:

- ``merge()`` folds a contender's runs of every round into one result whose ``rates`` are the
  per-round figures (each round's figure is the median of its timed epochs), so the suite's
  tables quote the median over rounds with min – max over rounds; a failure in any round makes
  the merged status that failure. Memory, data wait and the same-image probe come from round
  1 (the only round that measures the wait and the probe); time to first batch is the median
  over rounds.
- ``section()`` writes the per-round tables: images/s and W1 time to first batch per round,
  and the same-round ratios (shmaug ÷ Grain, shmaug ÷ the Pool recipe) with median and min.
- ``summary()`` is the same for ``suite.json``.

Pure: it runs nothing and imports no contender library.
"""

from __future__ import annotations

import math
from typing import Any

from bench.common.harness import summarize
from bench.common.report import NOT_JUDGED, fmt_num, markdown_table
from bench.common.workloads import IMPLS, WORKLOADS
from bench.suite.peers import REGISTRY
from bench.suite.plan import CONTENDERS, spec_key

LABELS = {name: entry.label for name, entry in REGISTRY.items()}
SHORT = {"shmaug_loader": "shmaug (fork)", "shmaug_spawn": "shmaug (spawn)", "grain": "Grain",
         "pool": "Pool recipe"}
OPS = (*IMPLS, "none")
# same-round ratios: (numerator contender, denominator contender, goal: shmaug ahead)
PAIRS = (("shmaug_loader", "grain", 1.0), ("shmaug_spawn", "grain", 1.0), ("shmaug_loader", "pool", 1.0))
W1_POOL_GOAL = 6.0  # issue 12: W1, shmaug with its own ops ÷ the Pool recipe with the users' PIL code


def _round(r: dict[str, Any]) -> int:
    return int(r["spec"].get("round", 1))


def rounds_of(results: list[dict[str, Any]]) -> int:
    return max((_round(r) for r in results), default=1)


def _main(r: dict[str, Any]) -> bool:
    return not r["spec"].get("fit") and not r["spec"].get("scaling")


def _figure(r: dict[str, Any] | None) -> float:
    if r is None or r.get("status") != "ok" or not r.get("rates"):
        return math.nan
    return summarize(r["rates"]).median


def _known(values: list[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def merge(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per spec (round left out); a spec run in one round only is kept as it is."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(spec_key(r["spec"]), []).append(r)
    return [rs[0] if len(rs) == 1 else _fold(sorted(rs, key=_round)) for rs in groups.values()]


def _fold(rs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rs if r.get("status") == "ok" and r.get("rates")]
    bad = [r for r in rs if not (r.get("status") == "ok" and r.get("rates"))]
    m = dict(ok[0] if ok else rs[0])
    m["spec"] = {k: v for k, v in m["spec"].items() if k != "round"}
    m["rates"] = [_figure(r) for r in ok]
    m["round_rates"] = [_figure(r) for r in rs]
    m["epoch_rates"] = [r.get("rates") for r in rs]
    m["rounds"] = [_round(r) for r in rs]
    first = [r["first_batch_s"] for r in ok if r.get("first_batch_s") is not None]
    m["first_batch_s"] = summarize(first).median if first else None
    distinct = [r["distinct"] for r in rs if r.get("distinct") is not None]
    m["distinct"] = min(distinct) if distinct else None
    if bad:
        m["status"] = f"{bad[0].get('status', '?')} (round {_round(bad[0])})"
        m["error"] = f"{len(bad)}/{len(rs)} rounds failed; {bad[0].get('error', '')}"[:300]
    return m


def _by_round(results: list[dict[str, Any]], wl: str, impl: str, c: str, what: str = "rate") -> list[float]:
    """The figure of one contender in each round 1..R (nan where it failed or did not run)."""
    out = [math.nan] * rounds_of(results)
    for r in results:
        s = r["spec"]
        if _main(r) and (s["workload"], s["impl"], s["contender"]) == (wl, impl, c):
            if what == "rate":
                out[_round(r) - 1] = _figure(r)
            elif r.get("status") == "ok" and r.get("first_batch_s") is not None:
                out[_round(r) - 1] = r["first_batch_s"]
    return out


def _ratios(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Same-round ratios: numerator and denominator taken in the same round, then summarized."""
    rows = []

    def add(name: str, a: list[float], b: list[float], goal: float) -> None:
        per = [x / y if not math.isnan(x) and not math.isnan(y) and y else math.nan
               for x, y in zip(a, b)]
        good = _known(per)
        if good:
            rows.append({"ratio": name, "per_round": per, "median": summarize(good).median,
                         "min": min(good), "goal": goal, "rounds": len(good),
                         "rounds_met": sum(p >= goal for p in good),
                         "met_every_round": min(good) >= goal and len(good) == len(per)})

    for wl in WORKLOADS:
        for impl in OPS:
            for num, den, goal in PAIRS:
                add(f"{wl} {impl} ops: {SHORT[num]} ÷ {SHORT[den]}", _by_round(results, wl, impl, num),
                    _by_round(results, wl, impl, den), goal)
    add("W1: shmaug (fork, shmaug ops) ÷ Pool recipe (PIL ops)",
        _by_round(results, "W1", "shmaug", "shmaug_loader"), _by_round(results, "W1", "pil", "pool"),
        W1_POOL_GOAL)
    for impl in IMPLS:  # first batch under spawn: how many times sooner shmaug's comes than Grain's
        add(f"W1 {impl} ops, first batch under spawn: Grain s ÷ shmaug s",
            _by_round(results, "W1", impl, "grain", "first"),
            _by_round(results, "W1", impl, "shmaug_spawn", "first"), 1.0)
    return rows


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``suite.json`` keeps of the rounds: each contender's figure per round, the ratios."""
    rates = []
    for wl in WORKLOADS:
        for impl in OPS:
            for c in CONTENDERS:
                per = _by_round(results, wl, impl, c)
                good = _known(per)
                if good:
                    rates.append({"workload": wl, "impl": impl, "contender": c, "per_round": per,
                                  "median": summarize(good).median, "min": min(good), "max": max(good),
                                  "first_batch_s": _by_round(results, wl, impl, c, "first")})
    return {"rounds": rounds_of(results), "images_per_s": rates, "ratios": _ratios(results)}


def section(results: list[dict[str, Any]], quick: bool = False) -> str:
    """The per-round tables for ``suite.md`` (empty for a one-round run)."""
    n = rounds_of(results)
    if n <= 1:
        return ""
    s = summary(results)
    rounds = [f"round {k}" for k in range(1, n + 1)]
    rows = [[e["workload"], e["impl"], LABELS[e["contender"]], *[fmt_num(v) for v in e["per_round"]],
             fmt_num(e["median"]), f"{fmt_num(e['min'])} – {fmt_num(e['max'])}"]
            for e in s["images_per_s"]]
    first = [[e["impl"], LABELS[e["contender"]], *[fmt_num(v) for v in e["first_batch_s"]],
              fmt_num(summarize(_known(e["first_batch_s"])).median)]
             for e in s["images_per_s"] if e["workload"] == "W1" and _known(e["first_batch_s"])]
    ratios = [[t["ratio"], *[fmt_num(v) for v in t["per_round"]], fmt_num(t["median"]),
               fmt_num(t["min"]), f"≥ {fmt_num(t['goal'])}",
               NOT_JUDGED if quick else
               f"{t['rounds_met']}/{n} rounds" + ("" if t["median"] >= t["goal"] else ", median MISSED")]
              for t in s["ratios"]]
    parts = [f"### Interleaved rounds: images/s delivered in each of {n} rounds\n\n"
             "Each round runs every contender once, each in a fresh child, workload by workload, "
             "the order rotated per round; a round's figure is the median of its timed epochs.\n\n"
             + markdown_table(["workload", "ops", "contender", *rounds, "median", "min – max"], rows)]
    if first:
        parts.append("### W1 time to first batch (s) in each round, from construction\n\n"
                     + markdown_table(["ops", "contender", *rounds, "median"], first))
    if ratios:
        parts.append("### Same-round ratios (both figures from the same round)\n\n" + markdown_table(
            ["ratio", *rounds, "median", "min", "goal", "met in"], ratios))
    return "\n\n".join(parts)
