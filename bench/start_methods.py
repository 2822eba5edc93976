"""Time from ``Loader(...)`` to its first batch under each start method, in a fresh process.

Each run is a new interpreter that first imports a framework (as a training script does),
then times a ``Loader``'s construction and first batch twice: the first pays for starting
workers in a process that has none (forkserver: its server too), the second is what every
later loader of the same process pays. ``python -m bench.start_methods`` prints a Markdown
table; the committed figures are in docs/loader.md ("Start methods").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

METHODS = ("fork", "forkserver", "spawn")


def child(method: str, framework: str) -> dict[str, float]:
    if framework != "none":
        __import__(framework)
    import shmaug

    x = np.random.default_rng(0).integers(0, 255, (2048, 64, 64, 3), dtype=np.uint8)
    times = {}
    for run in ("first", "second"):
        start = time.perf_counter()
        with shmaug.Loader(x, batch_size=64, augment=shmaug.get("rotate"), workers=2, seed=0,
                           start_method=method) as loader:
            next(iter(loader))
            times[run] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--framework", default="tensorflow", help="imported first, or none")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.framework)))
        return
    print(f"| start method ({args.framework} imported) | first loader, s | a later loader, s |")
    print("| --- | --- | --- |")
    for method in METHODS:
        runs = [json.loads(subprocess.run(
            [sys.executable, "-m", "bench.start_methods", "--child", method, "--framework",
             args.framework], check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            for _ in range(args.repeats)]
        first, second = (float(np.median([r[k] for r in runs])) for k in ("first", "second"))
        print(f"| {method} | {first:.2f} | {second:.2f} |")


if __name__ == "__main__":
    main()
