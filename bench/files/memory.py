"""Memory flat in the number of files: 1.28 million files, from listing to batches.

    python -m bench.files.memory [--quick] [--out bench/results/files/memory]
        [--files 1280000] [--small 10000] [--batches 50] [--compare-with DIR]

Makes a folder of ``--files`` JPEGs in 1,000 class folders, as hard links of small JPEGs (one per folder)
(``bench.files.data.link_tree``, in a temporary folder removed at the end), and a small one of
``--small`` files. Then, in a fresh child process for each case and start method (fork and
spawn), it times the listing (``ImageFiles.from_directory``), ``Loader()`` (2 workers) and the
first batch, reads ``--batches`` more shuffled batches (so the workers reach paths all over the
table), and measures each worker's USS (memory no other process shares). The reference is an
in-memory array dataset under the same loader settings (batch 64, 64x64x3 uint8, ``hflip``).
``--compare-with DIR`` measures the shmaug checkout in ``DIR`` too (e.g. ``/work/main``, the
code before this change), in the same run.

Targets: worker USS within 10 MiB of the array dataset's, whatever the file count; listing +
``Loader()`` under 10 s for 1.28 million files. Writes ``files_memory.json`` and ``.md`` to
``--out``. A full run takes about 3 minutes on 2 cores (linking 1.28 million files about 30 s,
listing it about 5 s per case).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
SIDE = (16, 16)  # output images: an array of 1.28 million of them fits in memory (1 GB)
TARGET_MIB = 10.0
LIST_GOAL_S = 10.0


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this (fresh) process; imports only shmaug, numpy and psutil, so that it can
    measure another checkout of shmaug (``--compare-with``)."""
    import numpy as np
    import psutil

    import shmaug

    out: dict[str, Any] = {"shmaug": os.path.dirname(shmaug.__file__)}
    t0 = time.perf_counter()
    if spec["kind"] == "files":
        x: Any = shmaug.ImageFiles.from_directory(spec["folder"], image_size=SIDE)
        y = None
        out["files"] = len(x)
    else:
        x = np.random.default_rng(0).integers(0, 256, (spec["n"], *SIDE, 3), np.uint8)
        y = np.arange(spec["n"])
    t1 = time.perf_counter()
    loader = shmaug.Loader(x, y, batch_size=64, augment=shmaug.get("hflip"), workers=2,
                           seed=0, shuffle=True, start_method=spec["method"])
    try:
        t2 = time.perf_counter()
        batches = iter(loader)
        next(batches)
        t3 = time.perf_counter()
        for _ in range(spec["batches"]):
            next(batches)
        uss = [psutil.Process(p).memory_full_info().uss / 2**20 for p in loader.pids]
        out.update(list_s=t1 - t0, loader_s=t2 - t1, first_batch_s=t3 - t2, worker_uss_mib=uss,
                   main_uss_mib=psutil.Process().memory_full_info().uss / 2**20)
    finally:
        loader.close()
    return out


def run_child(spec: dict[str, Any], pythonpath: str, timeout_s: float) -> dict[str, Any]:
    import subprocess

    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, str(HERE), "--child", json.dumps(spec)], env=env,
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT "):]), status="ok")
    return {"status": "error", "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}


def summary(results: list[dict[str, Any]], link_s: dict[int, float], batches: int) -> str:
    """Worker USS (largest of the 2 workers, MiB) side by side: arrays and files, both counts."""
    from bench.common.report import fmt_num, markdown_table

    counts = sorted({r["n"] for r in results})
    table = []
    for who in dict.fromkeys(r["checkout"] for r in results):
        for method in ("fork", "spawn"):
            cells = []
            for kind in ("array", "files"):
                for n in counts:
                    r = next((r for r in results if (r["checkout"], r["method"], r["kind"],
                                                     r["n"]) == (who, method, kind, n)), None)
                    ok = r is not None and r.get("status") == "ok"
                    cells.append(fmt_num(max(r["worker_uss_mib"])) if ok else "—")
            table.append([who, method, *cells])
    heads = [f"{kind} {n:,}" for kind in ("array", "files") for n in counts]
    made = ", ".join(f"{n:,} files in {s:.1f} s" for n, s in link_s.items())
    return ("### Worker USS (MiB, the larger of 2 workers) by sample count\n\n"
            + markdown_table(["checkout", "start", *heads], table)
            + f"\n\nFolders made as hard links ({made}); each case runs in a fresh process; "
            f"USS after the first batch and {batches} more shuffled batches. What an array "
            f"dataset's workers also grow by with the sample count is the engine's epoch order "
            f"(4 bytes per sample per worker, the last epochs cached), not the dataset.")


def main(argv: list[str] | None = None) -> int:
    from bench.common.harness import REPO_ROOT, base_parser, prepare_out, summarize
    from bench.common.report import Row, environment, write_results
    from bench.files.data import link_tree

    p = base_parser(__doc__.splitlines()[0], "bench/results/files/memory")
    p.add_argument("--files", type=int, default=1_280_000)
    p.add_argument("--small", type=int, default=10_000)
    p.add_argument("--batches", type=int, default=50)
    p.add_argument("--compare-with", default=None, help="another shmaug checkout to measure")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args(argv)
    big, small = (2_000, None) if args.quick else (args.files, args.small)
    sizes = (big,) if small is None else (small, big)  # quick: one count (a child per case)
    batches = 3 if args.quick else args.batches
    prepare_out(args.out)  # before measuring anything
    checkouts = {"this checkout": str(REPO_ROOT)}
    if args.compare_with:
        checkouts[f"before ({args.compare_with})"] = os.path.abspath(args.compare_with)
    tmp = Path(tempfile.mkdtemp(prefix="shmaug_bench_files_memory_"))
    rows: list[Row] = []
    results: list[dict[str, Any]] = []
    link_s: dict[int, float] = {}
    try:
        link_s = {n: link_tree(tmp / f"n{n}", n, classes=min(1000, max(1, n // 100)))
                  for n in sizes}
        cases = [(kind, n, str(tmp / f"n{n}" / "tree")) for n in sizes
                 for kind in ("array", "files")]
        for who, path in checkouts.items():
            for method in ("fork", "spawn"):
                for kind, n, folder in cases:
                    spec = {"kind": kind, "n": n, "folder": folder, "method": method,
                            "batches": batches}
                    res = run_child(spec, path, args.timeout)
                    res.update(spec, checkout=who)
                    results.append(res)
                    print(f"{who} {method} {kind} {n}: {res.get('status')} "
                          f"{res.get('worker_uss_mib')}", file=sys.stderr)
        for who in checkouts:
            for method in ("fork", "spawn"):
                mine = [r for r in results if r["checkout"] == who and r["method"] == method]
                for r in mine:
                    base = next(b for b in mine if b["kind"] == "array" and b["n"] == r["n"])
                    base_uss = max(base.get("worker_uss_mib") or [float("nan")])
                    what = (f"array dataset, {r['n']:,} x {SIDE[0]}x{SIDE[1]}x3 in memory"
                            if r["kind"] == "array" else f"ImageFiles, {r['n']:,} files")
                    section = f"{who}, {method}: {what}"
                    if r["status"] != "ok":
                        rows.append(Row(section, "worker USS", "", "MiB", None,
                                          status=r["status"], note=r.get("error", "")))
                        continue
                    uss = max(r["worker_uss_mib"])
                    excess = uss - base_uss
                    target = "" if r["kind"] == "array" else (
                        f"within {TARGET_MIB:g} MiB of the array of as many samples: "
                        f"{excess:+.1f} MiB, "
                        f"{'met' if excess <= TARGET_MIB else 'MISSED'}")
                    rows.append(Row(section, "worker USS (largest of 2)", "size", "MiB",
                                      summarize(r["worker_uss_mib"]), target=target,
                                      note=f"main process USS {r['main_uss_mib']:.0f} MiB"))
                    if r["kind"] == "files":
                        total = r["list_s"] + r["loader_s"]
                        goal = "" if r["n"] < 1_000_000 else (
                            f"under {LIST_GOAL_S:g} s: {'met' if total < LIST_GOAL_S else 'MISSED'}")
                        rows.append(Row(section, "listing + Loader()", "time", "s",
                                          summarize([total]), target=goal,
                                          note=f"listing {r['list_s']:.2f} s, Loader() "
                                               f"{r['loader_s']:.2f} s"))
                    rows.append(Row(section, "first batch after Loader()", "time", "s",
                                      summarize([r["first_batch_s"]])))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {"quick": args.quick, "files": big, "small": small, "batches": batches,
            "link_s": link_s, "results": results, "environment": environment()}
    print(write_results(args.out, "files_memory", rows, meta, summary(results, link_s, batches)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print("RESULT " + json.dumps(child(json.loads(sys.argv[2]))), flush=True)
        raise SystemExit(0)
    sys.path.insert(0, str(HERE.parents[2]))  # run as a file: the repository's bench package
    raise SystemExit(main())
