"""What the suite runs: which contenders on which workload, and in which order.

Owns the contender sets (the full run, the ``--quick`` smoke set, the scaling and
``Model.fit`` subsets), ``plan()``, which turns the options into stages of run specs (a
spec is the JSON one child process measures, see ``bench/suite/child.py``), and ``schedule()``,
which lays those specs out in ``--rounds`` interleaved rounds. Pure: it starts nothing and
imports no contender library.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench.common.workloads import IMPLS, WORKLOADS

CONTENDERS = ("keras_single", "keras_threads", "keras_fork", "keras_spawn", "pool", "tfdata_gen",
              "tfdata_map", "torch", "grain", "shmaug_loader", "shmaug_spawn", "shmaug_sequence",
              "copy")
QUICK_SET = {  # every kind once on W1; one code path each elsewhere (each run is a child that
    # imports TensorFlow: W2's Keras run would repeat W1's path, so W2 runs shmaug alone)
    ("W1", "shmaug"): ("keras_single", "keras_fork", "pool", "tfdata_map", "torch", "grain",
                       "shmaug_loader", "shmaug_spawn", "shmaug_sequence"),
    ("W1", "pil"): ("shmaug_loader",),
    ("W2", "shmaug"): ("shmaug_loader",),
    ("W2", "pil"): (),
    ("W3", "none"): ("copy", "shmaug_loader"),
}
# In a quick run these children do not import TensorFlow first (seconds each, and nothing of
# theirs needs it): fork workers under a TensorFlow that is loaded still run in Keras', the
# Sequence's and tf.data's children, and spawned ones re-importing it in shmaug_spawn's.
QUICK_NO_TF = ("shmaug_loader", "copy")
SCALING = ("pool", "torch", "shmaug_loader")
FIT = ("keras_single", "keras_fork", "pool", "shmaug_sequence")
W3_SET = ("keras_single", "keras_fork", "pool", "tfdata_map", "torch", "grain", "shmaug_loader",
          "copy")


def spec_key(s: dict[str, Any]) -> str:
    kind = "fit" if s.get("fit") else ("scaling" if s.get("scaling") else "run")
    return f"{kind}/{s['workload']}/{s['impl']}/{s['contender']}/w{s['workers']}"


def plan(args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    """Stages of specs: a stage may depend on the one before (the wait step uses shmaug's rate)."""
    base = dict(quick=args.quick, repeats=args.repeats, workers=args.workers)
    first, second, extra = [], [], []
    for wl in args.workloads:
        impls = IMPLS if WORKLOADS[wl].augmented else ("none",)
        for impl in impls:
            if args.impls and impl != "none" and impl not in args.impls:
                continue
            names = QUICK_SET.get((wl, impl), ()) if args.quick else (
                W3_SET if wl == "W3" else CONTENDERS)
            names = [c for c in names if c in args.contenders and (c != "copy" or wl == "W3")]
            for c in names:
                spec = dict(base, workload=wl, impl=impl, contender=c, probe=wl == "W1")
                (first if c == "shmaug_loader" else second).append(spec)
            if wl == "W1" and not args.no_scaling:
                for c in SCALING if not args.quick else ("shmaug_loader",):
                    if c in args.contenders and (not args.quick or impl == "shmaug"):
                        for w in range(1, args.workers):
                            extra.append(dict(base, workload=wl, impl=impl, contender=c,
                                              workers=w, scaling=True))
    if not args.no_fit and "W1" in args.workloads:
        for c in FIT if not args.quick else ("shmaug_sequence",):
            if c in args.contenders:
                extra.append(dict(base, workload="W1", impl="shmaug", contender=c, fit=True,
                                  fit_batches=4 if args.quick else 8))
    fits = [s for s in extra if s.get("fit")]
    w1 = [s for s in second if s["workload"] == "W1"]
    rest = [s for s in second if s["workload"] != "W1"]
    return [first, w1 + fits + rest + [s for s in extra if not s.get("fit")]]


def schedule(args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    """The whole run as stages, every spec tagged with its ``round`` (1-based).

    One round (the default): ``plan()``'s stages. ``--rounds R`` > 1 interleaves: round 1 runs
    workload by workload, shmaug's Loader first (the other contenders' data-wait step is set
    from its rate), then the fit and scaling runs; rounds 2..R run every main spec again,
    workload by workload, each workload's specs rotated by the round number so that no
    contender is always first. Only round 1 measures the data wait, the same-image probe
    for replayed random streams (a property of the code, not of the load), the fit and the
    scaling; every run of every round is a fresh child with its own exactly-once checks.
    """
    stages = plan(args)
    rounds = getattr(args, "rounds", 1) or 1
    if rounds <= 1:
        return [[dict(s, round=1) for s in stage] for stage in stages]
    specs = [s for stage in stages for s in stage]
    main = [s for s in specs if not s.get("fit") and not s.get("scaling")]
    extra = [s for s in specs if s.get("fit") or s.get("scaling")]
    out: list[list[dict[str, Any]]] = []
    for k in range(rounds):
        for wl in args.workloads:
            group = [s for s in main if s["workload"] == wl]  # plan order: shmaug_loader first
            if not group:
                continue
            if k == 0:
                out.append([dict(s, round=1) for s in group if s["contender"] == "shmaug_loader"])
                out.append([dict(s, round=1) for s in group if s["contender"] != "shmaug_loader"])
            else:
                j = k % len(group)
                out.append([dict(s, round=k + 1, probe=False) for s in group[j:] + group[:j]])
        if k == 0:
            out.append([dict(s, round=1) for s in extra])
    return [stage for stage in out if stage]
