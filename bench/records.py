"""TFRecord shards: shmaug's ImageRecords against tf.data's own TFRecord pipeline, side by side.

    python -m bench.records [--quick] [--out bench/results/records] [--rounds 3] [--repeats 2]
        [--shards 8] [--contenders shmaug_tfrecord,shmaug_files,tf_tfrecord] [--data DIR]
        [--workers 2] [--batch-size 64] [--timeout 900]

Makes ``bench.files``' ImageNet-like folder of JPEGs (about 500x375, quality 90), writes the
same JPEGs into ``--shards`` TFRecord files with ``tf.io.TFRecordWriter`` (in a child process:
shmaug's workers fork, and forking after TensorFlow has started is unsafe), record i holding
file i with label i. Then, round by round, the contenders' order rotated every round, each
contender (``bench.records_peers``) reads them in its own child (``bench.files_child``) under a
hard timeout: one warm-up, ``--repeats`` timed epochs, each checked to deliver every image
exactly once. 224x224 output, the same flip + rotation + blur, ``--workers`` processes.
A round's figure is the median of its epochs, the table quotes the median over rounds, and the
ratios are taken within a round. Targets (issue 28): shmaug ahead of tf.data on TFRecords, and
within 10% of ImageFiles over the same images as files. Writes ``records.json`` and
``records.md`` to ``--out``; the CPU and the load are in their header.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import _harness as H
from bench import _report as R
from bench.files import prepare, run_args
from bench.records_peers import LABELS

CONTENDERS = tuple(LABELS)
FOLDER = "imagenet"


def parser() -> Any:
    p = H.base_parser(__doc__.splitlines()[0], "bench/results/records")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=2, help="timed epochs per round")
    p.add_argument("--shards", type=int, default=8)
    return run_args(p, CONTENDERS)


def write_shards(folder: Path, shards: int) -> list[str]:
    """The folder's JPEGs in ``shards`` TFRecord files (made once per folder), in a child."""
    where = folder / f"tfrecords_{shards}"
    stamp = where / "made.json"
    if not stamp.is_file():
        H.child_result([sys.executable, "-m", "bench.records_write", str(folder), str(where),
                        str(shards)], 1800)
    return [str(p) for p in json.loads(stamp.read_text())]


def run_one(args: Any, folder: Path, shards: list[str], contender: str) -> dict[str, Any]:
    spec = {"folder": str(folder), "contender": contender, "workers": args.workers,
            "batch_size": 8 if args.quick else args.batch_size,
            "repeats": 1 if args.quick else args.repeats,
            "peers": "bench.records_peers", "extra": {"shards": shards}}
    out = H.run_json([sys.executable, "-m", "bench.files_child", json.dumps(spec)], args.timeout)
    res = dict(out.value) if out.ok else {"status": out.status, "error": out.error}
    if res.get("status") == "ok" and res.get("problems"):
        res["status"] = "duplicates/missing: " + "; ".join(res["problems"])[:200]
    return {"contender": contender, **res}


def medians(results: list[dict[str, Any]], contender: str) -> list[float]:
    """Per round, the contender's median images/s (nan where it failed)."""
    out = []
    for r in sorted({x["round"] for x in results}):
        res = next(x for x in results if x["round"] == r and x["contender"] == contender)
        ok = res.get("status") == "ok" and res.get("rates")
        out.append(H.summarize(res["rates"]).median if ok else math.nan)
    return out


def report(args: Any, results: list[dict[str, Any]], made: dict[str, Any],
           contenders: list[str]) -> str:
    section = (f"ImageNet-like JPEGs: {made['files']} images, {made['mean_kb']:.0f} kB on "
               f"average, in {args.shards} TFRecord shards; 224x224, flip + rotate + blur, "
               f"{args.workers} workers")
    ours = medians(results, "shmaug_tfrecord") if "shmaug_tfrecord" in contenders else []
    rows, ratio_rows = [], []
    for c in contenders:
        rates = medians(results, c)
        good = [v for v in rates if not math.isnan(v)]
        res = next(x for x in results if x["contender"] == c)
        row = R.Row(section, LABELS[c], "throughput", "images/s",
                    H.summarize(good) if good else None,
                    status="ok" if len(good) == len(rates) else str(res.get("status")),
                    note="" if good else str(res.get("error", ""))[:120])
        ratios = [a / b for a, b in zip(ours, rates) if b and not math.isnan(a + b)]
        if c != "shmaug_tfrecord" and ratios:
            got = H.summarize(ratios).median
            row.ratio = f"shmaug_tfrecord {R.fmt_num(got)}x"
            goal, text = (1.0, "ahead") if c == "tf_tfrecord" else (0.9, "within 10%")
            row.target = f"{text}: {'met' if got > goal else 'MISSED'}"
            ratio_rows.append([f"shmaug_tfrecord ÷ {LABELS[c]}", R.fmt_num(got),
                               R.fmt_num(min(ratios)), len(ratios)])
        rows.append(row)
    extra = ("### Same-round ratios\n\n"
             + R.markdown_table(["ratio", "median", "min", "rounds"], ratio_rows))
    meta = {"quick": args.quick, "rounds": len(ours) or 1, "workers": args.workers,
            "shards": args.shards, "folder": made, "results": results,
            "environment": R.environment()}
    return R.write_results(args.out, "records", rows, meta, extra)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    contenders = [c for c in args.contenders.split(",") if c]
    for bad in [c for c in contenders if c not in LABELS]:
        raise SystemExit(f"unknown contender {bad!r}; known {list(LABELS)}")
    H.prepare_out(args.out)
    temporary = None if args.data else tempfile.mkdtemp(prefix="shmaug_bench_records_")
    root = Path(args.data or temporary)  # type: ignore[arg-type]
    try:
        folder, made = prepare(root, FOLDER, args.quick)
        shards = write_shards(folder, args.shards)
        results = H.rotated_rounds(1 if args.quick else args.rounds, contenders,
                                   lambda c: run_one(args, folder, shards, c), "bench records")
        for res in results:
            res["round"] += 1
        print(report(args, results, made, contenders))
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
