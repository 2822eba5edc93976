"""What the suite runs: which contenders on which workload, and in which order.

Owns the contender sets (the full run, the ``--quick`` smoke set, the scaling and
``Model.fit`` subsets) and ``plan()``, which turns the options into stages of run specs (a
spec is the JSON one child process measures, see ``bench/contenders.py``). Pure: it starts
nothing and imports no contender library.
"""

from __future__ import annotations

import argparse
from typing import Any

from bench import workloads as W

CONTENDERS = ("keras_single", "keras_threads", "keras_fork", "keras_spawn", "pool", "tfdata_gen",
              "tfdata_map", "torch", "grain", "shmaug_loader", "shmaug_spawn", "shmaug_sequence",
              "copy")
QUICK_SET = {  # every kind once on W1; one code path each elsewhere
    ("W1", "shmaug"): ("keras_single", "keras_fork", "pool", "tfdata_map", "torch", "grain",
                       "shmaug_loader", "shmaug_spawn", "shmaug_sequence"),
    ("W1", "pil"): ("shmaug_loader",),
    ("W2", "shmaug"): ("keras_single", "shmaug_loader"),
    ("W2", "pil"): (),
    ("W3", "none"): ("copy", "shmaug_loader"),
}
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
        impls = W.IMPLS if W.WORKLOADS[wl].augmented else ("none",)
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
