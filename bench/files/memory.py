"""Memory flat in the dataset's size: 1.28 million image files, and 100,000 COCO-annotated
images with a polygon mask per box, from listing to batches.

    python -m bench.files.memory [--quick] [--out bench/results/files/memory]
        [--files 1280000] [--small 10000] [--annotated 100000] [--annotated-small 2000]
        [--cases files,annotated] [--batches 50] [--compare-with DIR]

Files: makes a folder of ``--files`` JPEGs in 1,000 class folders, as hard links of small
JPEGs (one per folder) (``bench.files.data.link_tree``, in a temporary folder removed at the
end), and a small one of ``--small`` files. Then, in a fresh child process for each case and
start method (fork and spawn), it times the listing (``ImageFiles.from_directory``),
``Loader()`` (2 workers) and the first batch, reads ``--batches`` more shuffled batches (so
the workers reach paths all over the table), and measures each worker's USS (memory no other
process shares). The reference is an in-memory array dataset under the same loader settings
(batch 64, 16x16x3 uint8, ``hflip``).

Annotated: the same kind of folder of ``--annotated`` (and ``--annotated-small``) 64x64
JPEGs, with a COCO ``instances`` JSON beside it (sizes given, 80 categories, 7 boxes per
image, each with an 8-point polygon mask, written with ``json``). In a fresh child per case
and start method it times ``shmaug.sources.from_coco(json, folder, image_size=(64, 64),
bounding_box_format="xyxy", masks="instances")`` (boxes and labels as arrays, which the
engine puts in shared memory; the masks a source the workers draw from one shared table of
polygons), then ``Loader(files, y, batch_size=64, augment=Compose([Op("hflip")],
bounding_box_format="xyxy"), workers=2, seed=0, shuffle=True)``, reads the first batch and
``--batches`` more, and measures each worker's USS, against the small annotated set's and an
in-memory array dataset of as many samples.

``--compare-with DIR`` measures the shmaug checkout in ``DIR`` too (e.g. ``/work/main``, the
code before a change), in the same run.

Targets: files: worker USS within 10 MiB of the array dataset's, whatever the file count;
listing + ``Loader()`` under 10 s for 1.28 million files. Annotated: worker USS within 10 MiB
of the small annotated set's. Writes ``files_memory.json`` and ``.md`` to ``--out``. A full
run takes about 3 minutes on 2 cores (linking 1.28 million files about 20 s, listing it about
3 s per case; writing the 100,000 images' JSON (158 MB) about 11 s, ``from_coco`` on it about
15 s per case, with a peak of about 1 GiB in the child while the JSON is parsed).
``--quick``: 2,000 files and 2,000 annotated images, 3 batches, about 15 s.
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
from bench.common.harness import described

HERE = Path(__file__).resolve()
SIDE = (16, 16)  # output images: an array of 1.28 million of them fits in memory (1 GB)
COCO_SIDE = (64, 64)  # the annotated images' size, as stored and as read
BOXES = 7  # per annotated image, each with a polygon mask
CATEGORIES = 80
TARGET_MIB = 10.0
LIST_GOAL_S = 10.0
CASES = ("files", "annotated")


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this (fresh) process; imports only shmaug, numpy and psutil, so that it can
    measure another checkout of shmaug (``--compare-with``)."""
    import numpy as np
    import psutil

    import shmaug

    out: dict[str, Any] = {"shmaug": os.path.dirname(shmaug.__file__)}
    t0 = time.perf_counter()
    augment: Any = shmaug.get("hflip")
    if spec["kind"] == "files":
        x: Any = shmaug.ImageFiles.from_directory(spec["folder"], image_size=SIDE)
        y: Any = None
        out["files"] = len(x)
    elif spec["kind"] == "coco":
        import shmaug.ops
        import shmaug.sources

        x, y = shmaug.sources.from_coco(spec["json"], spec["folder"], image_size=COCO_SIDE,
                                        bounding_box_format="xyxy", masks="instances")
        augment = shmaug.ops.Compose([shmaug.ops.Op("hflip")], bounding_box_format="xyxy")
        out["files"] = len(x)
        out["boxes"] = int((y["labels"] >= 0).sum())
    else:
        x = np.random.default_rng(0).integers(0, 256, (spec["n"], *SIDE, 3), np.uint8)
        y = np.arange(spec["n"])
    t1 = time.perf_counter()
    out["main_uss_before_loader_mib"] = psutil.Process().memory_full_info().uss / 2**20
    loader = shmaug.Loader(x, y, batch_size=64, augment=augment, workers=2,
                           seed=0, shuffle=True, start_method=spec["method"])
    try:
        t2 = time.perf_counter()
        batches = iter(loader)
        first = next(batches)
        t3 = time.perf_counter()
        out["batch"] = _shapes(first)
        if spec["kind"] == "coco":  # the workers drew masks, and the flip moved boxes with them
            _, ys = first
            assert ys["masks"].any() and (ys["boxes"][ys["labels"] >= 0] >= 0).all()
        for _ in range(spec["batches"]):
            try:
                next(batches)
            except StopIteration:  # a small set's epoch ended: the next one
                batches = iter(loader)
                next(batches)
        uss = [psutil.Process(p).memory_full_info().uss / 2**20 for p in loader.pids]
        out.update(list_s=t1 - t0, loader_s=t2 - t1, first_batch_s=t3 - t2, worker_uss_mib=uss,
                   main_uss_mib=psutil.Process().memory_full_info().uss / 2**20)
    finally:
        loader.close()
    return out


def _shapes(batch: Any) -> Any:
    """A batch's arrays as their shapes and dtypes (for the record: what the workers made)."""
    if isinstance(batch, dict):
        return {k: _shapes(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return [_shapes(v) for v in batch]
    return f"{getattr(batch, 'dtype', type(batch).__name__)}{list(getattr(batch, 'shape', ()))}"


def make_coco(root: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """A COCO ``instances`` JSON of the ``n`` JPEGs ``link_tree`` made under ``root/tree``
    (all ``COCO_SIDE``, their sizes given), ``BOXES`` boxes per image, each with an
    8-point polygon (an irregular octagon inside its box); returns its path, size and the
    seconds it took."""
    import numpy as np

    began = time.perf_counter()
    tree = root / "tree"
    names = sorted(f"{d.name}/{f.name}" for d in os.scandir(tree) for f in os.scandir(d.path))
    assert len(names) == n, (len(names), n)
    height, width = COCO_SIDE
    rng = np.random.default_rng(seed)
    count = n * BOXES
    size = rng.uniform(6, 32, (count, 2))  # box width, height
    corner = rng.uniform(0, 1, (count, 2)) * ((width, height) - size)
    angle = np.linspace(0, 2 * np.pi, 8, endpoint=False) + rng.uniform(0, 0.3, (count, 1))
    reach = rng.uniform(0.7, 1.0, (count, 8))  # an irregular octagon in the box
    centre = corner + size / 2
    px = centre[:, :1] + reach * np.cos(angle) * size[:, :1] / 2
    py = centre[:, 1:] + reach * np.sin(angle) * size[:, 1:] / 2
    polygon = np.round(np.stack([px, py], 2).reshape(count, 16), 2).tolist()
    bbox = np.round(np.concatenate([corner, size], 1), 2).tolist()
    category = rng.integers(1, CATEGORIES + 1, count).tolist()
    data = {
        "images": [{"id": i + 1, "file_name": name, "width": width, "height": height}
                   for i, name in enumerate(names)],
        "categories": [{"id": c, "name": f"class_{c}"} for c in range(1, CATEGORIES + 1)],
        "annotations": [{"id": k + 1, "image_id": k // BOXES + 1, "category_id": category[k],
                         "bbox": bbox[k], "iscrowd": 0, "segmentation": [polygon[k]],
                         "area": 0.0} for k in range(count)],
    }
    path = root / "instances.json"
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")  # C encoder
    return {"json": str(path), "bytes": path.stat().st_size, "images": n, "boxes": count,
            "json_s": time.perf_counter() - began}


def run_child(spec: dict[str, Any], pythonpath: str, timeout_s: float) -> dict[str, Any]:
    import subprocess

    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run([sys.executable, str(HERE), "--child", json.dumps(spec)], env=env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "error": f"no result within {timeout_s:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT "):]), status="ok")
    return {"status": "error", "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}


def summary(results: list[dict[str, Any]], link_s: dict[int, float], batches: int,
            coco: dict[int, dict[str, Any]], load: tuple[float | None, float | None]) -> str:
    """Worker USS (largest of the 2 workers, MiB) side by side: arrays and files, arrays and
    annotated images, at both counts."""
    from bench.common.report import fmt_num, markdown_table

    def table(kind: str, title: str) -> str:
        counts = sorted({r["n"] for r in results if r["kind"] == kind})
        if not counts:
            return ""
        rows = []
        for who in dict.fromkeys(r["checkout"] for r in results):
            for method in ("fork", "spawn"):
                cells = []
                for k in ("array", kind):
                    for n in counts:
                        r = next((r for r in results if (r["checkout"], r["method"], r["kind"],
                                                         r["n"]) == (who, method, k, n)), None)
                        ok = r is not None and r.get("status") == "ok"
                        cells.append(fmt_num(max(r["worker_uss_mib"])) if ok else "—")
                rows.append([who, method, *cells])
        heads = [f"{k} {n:,}" for k in ("array", kind) for n in counts]
        return (f"### {title}\n\n" + markdown_table(["checkout", "start", *heads], rows)
                + "\n\n")

    def uss(who: str, method: str, kind: str, n: int) -> float | None:
        r = next((r for r in results if (r["checkout"], r["method"], r["kind"], r["n"]) ==
                  (who, method, kind, n) and r.get("status") == "ok"), None)
        return None if r is None else max(r["worker_uss_mib"])

    growth = ""
    if len(coco) == 2:
        small, big = sorted(coco)
        for who in dict.fromkeys(r["checkout"] for r in results):
            got = [uss(who, "spawn", k, n) for k in ("coco", "array") for n in (small, big)]
            if None in got:
                continue
            extra = (got[1] - got[0]) - (got[3] - got[2])  # type: ignore[operator]
            if extra > 1.0:  # what the spawned workers got pickled, 16 bytes per image
                growth += (
                    f"Spawned annotated workers ({who}) grow {extra:.1f} MiB more than the "
                    f"array's from {small:,} to {big:,} samples; 16 bytes per image would be "
                    f"{16 * (big - small) / 2**20:.1f} MiB: the masks' image sizes (int64 "
                    f"(N, 2), ``CocoMaskLoad.sizes``) reach a spawned worker pickled by value "
                    f"(a numpy view of the shared block, not its handle). ")
    made = ", ".join(f"{n:,} files in {s:.1f} s" for n, s in link_s.items())
    jsons = ", ".join(f"{c['images']:,} images and {c['boxes']:,} boxes in {c['json_s']:.1f} s "
                      f"({c['bytes'] / 1e6:.0f} MB)" for c in coco.values())
    start, end = (f"{v:.2f}" if v is not None else "?" for v in load)
    return (table("files", "Worker USS (MiB, the larger of 2 workers) by file count")
            + table("coco", "Worker USS (MiB, the larger of 2 workers) by annotated image "
                    "count (from_coco, masks=\"instances\")")
            + f"Folders made as hard links ({made})"
            + (f"; COCO JSONs written ({jsons})" if jsons else "")
            + f". {growth}Each case runs in a fresh process; USS after the first batch and {batches} "
            f"more shuffled batches. Load average (1 min) {start} at start, {end} at the end "
            f"(2 cores shared with other work). What an array dataset's workers also grow by "
            f"with the sample count is the engine's epoch order (4 bytes per sample per "
            f"worker, the last epochs cached), not the dataset.")


def _case_rows(rows: list[Any], mine: list[dict[str, Any]], r: dict[str, Any], who: str,
               method: str) -> None:
    """The rows of one case ``r``, among ``mine`` (its checkout's and start method's)."""
    from bench.common.harness import summarize
    from bench.common.report import Row

    base = next((b for b in mine if b["kind"] == "array" and b["n"] == r["n"]), {})
    base_uss = max(base.get("worker_uss_mib") or [float("nan")])
    what = {"array": f"array dataset, {r['n']:,} x {SIDE[0]}x{SIDE[1]}x3 in memory",
            "files": f"ImageFiles, {r['n']:,} files",
            "coco": f"from_coco, {r['n']:,} images, {r['n'] * BOXES:,} boxes with polygon "
                    f"masks"}[r["kind"]]
    section = f"{who}, {method}: {what}"
    if r["status"] != "ok":
        rows.append(Row(section, "worker USS", "", "MiB", None, status=r["status"],
                        note=r.get("error", "")))
        return
    uss = max(r["worker_uss_mib"])
    note = f"main process USS {r['main_uss_mib']:.0f} MiB"
    target = ""
    if r["kind"] == "files":
        target = (f"within {TARGET_MIB:g} MiB of the array of as many samples: "
                  f"{uss - base_uss:+.1f} MiB, {'met' if uss - base_uss <= TARGET_MIB else 'MISSED'}")
    elif r["kind"] == "coco":
        small = min((s for s in mine if s["kind"] == "coco"), key=lambda s: s["n"])
        note += f"; array of as many samples: {uss - base_uss:+.1f} MiB"
        if small is not r and small.get("status") == "ok":
            excess = uss - max(small["worker_uss_mib"])
            target = (f"within {TARGET_MIB:g} MiB of the {small['n']:,}-image set's: "
                      f"{excess:+.1f} MiB, {'met' if excess <= TARGET_MIB else 'MISSED'}")
    rows.append(Row(section, "worker USS (largest of 2)", "size", "MiB",
                    summarize(r["worker_uss_mib"]), target=target, note=note))
    if r["kind"] == "files":
        total = r["list_s"] + r["loader_s"]
        goal = "" if r["n"] < 1_000_000 else (
            f"under {LIST_GOAL_S:g} s: {'met' if total < LIST_GOAL_S else 'MISSED'}")
        rows.append(Row(section, "listing + Loader()", "time", "s", summarize([total]),
                        target=goal, note=f"listing {r['list_s']:.2f} s, Loader() "
                                          f"{r['loader_s']:.2f} s"))
    elif r["kind"] == "coco":
        rows.append(Row(section, "from_coco() + Loader()", "time", "s",
                        summarize([r["list_s"] + r["loader_s"]]),
                        note=f"from_coco {r['list_s']:.2f} s, Loader() {r['loader_s']:.2f} s; "
                             f"main USS {r['main_uss_before_loader_mib']:.0f} MiB before "
                             f"Loader()"))
    rows.append(Row(section, "first batch after Loader()", "time", "s",
                    summarize([r["first_batch_s"]])))


def main(argv: list[str] | None = None) -> int:
    from bench.common.harness import REPO_ROOT, base_parser, prepare_out
    from bench.common.report import Row, environment, write_results
    from bench.files.data import link_tree

    p = base_parser(described(__doc__), "bench/results/files/memory")
    p.add_argument("--files", type=int, default=1_280_000)
    p.add_argument("--small", type=int, default=10_000)
    p.add_argument("--annotated", type=int, default=100_000,
                   help="COCO-annotated images of the large annotated case")
    p.add_argument("--annotated-small", type=int, default=2_000,
                   help="annotated images of the small case, the reference")
    p.add_argument("--cases", default=",".join(CASES),
                   help=f"which cases, comma-separated, of {', '.join(CASES)}")
    p.add_argument("--batches", type=int, default=50)
    p.add_argument("--compare-with", default=None, help="another shmaug checkout to measure")
    p.add_argument("--timeout", type=float, default=600)
    args = p.parse_args(argv)
    chosen = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not chosen or set(chosen) - set(CASES):
        p.error(f"--cases takes a comma-separated list of {', '.join(CASES)}; got {args.cases!r}")
    # quick: one count per kind (a child per case), the same folder for both
    file_sizes = (2_000,) if args.quick else (args.small, args.files)
    coco_sizes = (2_000,) if args.quick else (args.annotated_small, args.annotated)
    file_sizes = file_sizes if "files" in chosen else ()
    coco_sizes = coco_sizes if "annotated" in chosen else ()
    batches = 3 if args.quick else args.batches
    prepare_out(args.out)  # before measuring anything
    env = environment()  # its load average: the machine's before this run's work
    load_start = env.get("load_avg_1m")
    checkouts = {"this checkout": str(REPO_ROOT)}
    if args.compare_with:
        checkouts[f"before ({args.compare_with})"] = os.path.abspath(args.compare_with)
    tmp = Path(tempfile.mkdtemp(prefix="shmaug_bench_files_memory_"))
    rows: list[Row] = []
    results: list[dict[str, Any]] = []
    link_s: dict[int, float] = {}
    coco: dict[int, dict[str, Any]] = {}
    try:
        for n in sorted({*file_sizes, *coco_sizes}):
            link_s[n] = link_tree(tmp / f"n{n}", n, classes=min(1000, max(1, n // 100)))
        for n in coco_sizes:
            coco[n] = make_coco(tmp / f"n{n}", n)
        kinds = [*(("files", n) for n in file_sizes), *(("coco", n) for n in coco_sizes)]
        cases = [("array", n) for n in sorted({n for _, n in kinds})] + kinds
        for who, path in checkouts.items():
            for method in ("fork", "spawn"):
                for kind, n in cases:
                    spec = {"kind": kind, "n": n, "folder": str(tmp / f"n{n}" / "tree"),
                            "method": method, "batches": batches}
                    if kind == "coco":
                        spec["json"] = coco[n]["json"]
                    res = run_child(spec, path, args.timeout)
                    res.update(spec, checkout=who)
                    results.append(res)
                    print(f"{who} {method} {kind} {n}: {res.get('status')} "
                          f"{res.get('worker_uss_mib') or res.get('error')}", file=sys.stderr)
        for who in checkouts:
            for method in ("fork", "spawn"):
                mine = [r for r in results if r["checkout"] == who and r["method"] == method]
                for r in mine:
                    _case_rows(rows, mine, r, who, method)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = (load_start, os.getloadavg()[0] if hasattr(os, "getloadavg") else None)
    meta = {"quick": args.quick, "files": list(file_sizes), "annotated": list(coco_sizes),
            "boxes_per_image": BOXES, "coco_image_size": list(COCO_SIDE), "batches": batches,
            "link_s": link_s, "coco_json": coco, "load_avg_1m_start_end": load,
            "results": results, "environment": env}
    print(write_results(args.out, "files_memory", rows, meta,
                        summary(results, link_s, batches, coco, load)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print("RESULT " + json.dumps(child(json.loads(sys.argv[2]))), flush=True)
        raise SystemExit(0)
    sys.path.insert(0, str(HERE.parents[2]))  # run as a file: the repository's bench package
    raise SystemExit(main())
