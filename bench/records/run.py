"""Record formats: shmaug's ImageRecords against each format's own reader, on the same JPEGs.

    python -m bench.records [--quick] [--out bench/results/records] [--rounds 3] [--repeats 2]
        [--shards 8] [--contenders shmaug_files,shmaug_tfrecord,tf_tfrecord,...] [--data DIR]
        [--workers 2] [--batch-size 64] [--timeout 900]

(``--quick``: tiny sizes, and every contender but Grain's and ``to_tf_dataset``, whose
start-up alone takes most of a minute, unless ``--contenders`` names them.)

Makes ``bench.files``' ImageNet-like folder of JPEGs (about 500x375, quality 90), writes the
same JPEGs into ``--shards`` shards of each format with its own writer (``bench.records.write``,
in a child process: shmaug's workers fork, and forking after TensorFlow has started is unsafe):
TFRecord, ArrayRecord, a Hugging Face dataset, WebDataset tars; record i holds file i with
label i. Then, round by round, the contenders' order rotated every round, each contender
(``bench.records.peers``: shmaug on each format, each format's own reader, and shmaug over the
files) reads them in its own child (``bench.files.child``) under a hard timeout: one warm-up,
``--repeats`` timed epochs, each checked to deliver every image exactly once. 224x224 output,
the same flip + rotation + blur, ``--workers`` processes. A round's figure is the median of its
epochs, the table quotes the median over rounds, and the ratios are taken within a round.
Targets: shmaug ahead of each format's own reader on its format, and within 10% of ImageFiles
over the same images as files. A reader whose library is not installed (Grain, torch) is
reported as skipped. Then, in one more child (``bench.records.stages``), what one sample costs
each shmaug source in one process: the bytes fetched, and fetch + decode + resize. Writes
``records.json`` and ``records.md`` to ``--out``; the CPU and the load are in their header.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from bench.common.harness import (

    described, base_parser, child_result, missing_module, prepare_out, rotated_rounds, summarize,

)
from bench.common.report import (
    Row, environment, fmt_num, markdown_table, process_age_s, verdict, write_results,
)
from bench.files.child import run_child
from bench.files.run import contender_list, data_root, prepare, run_args, same_round
from bench.records.peers import FORMATS, LABELS, NEEDS

CONTENDERS = tuple(LABELS)
# Left out of --quick unless named: their start-up alone takes most of a minute (Grain's
# spawned workers import TensorFlow to parse Examples; to_tf_dataset spawns its workers anew
# every epoch), which a smoke test does not need.
SLOW_START = ("grain_array_record", "hf_tf_dataset")
FOLDER = "imagenet"
FILES = "shmaug_files"  # the same images as files: the "within 10%" reference


def parser() -> Any:
    p = base_parser(described(__doc__), "bench/results/records")
    p.add_argument("--shards", type=int, default=8)
    p = run_args(p, CONTENDERS)
    p.set_defaults(contenders=None)
    return p


def write_formats(folder: Path, shards: int) -> dict[str, Any]:
    """The folder's JPEGs in ``shards`` shards of each format (made once per folder), in a child."""
    where = folder / f"records_{shards}"
    stamp = where / "made.json"
    if not stamp.is_file():
        child_result([sys.executable, "-m", "bench.records.write", str(folder), str(where),
                        str(shards)], 1800)
    made: dict[str, Any] = json.loads(stamp.read_text())
    return made


def stages(folder: Path, data: dict[str, Any], quick: bool) -> dict[str, Any]:
    """Per sample, in one process: each source's fetch and load (``bench.records.stages``)."""
    limit = "0" if quick else "500"
    return child_result([sys.executable, "-m", "bench.records.stages", str(folder),
                           json.dumps(data), limit], 900)


def stages_table(cost: dict[str, Any]) -> str:
    files = cost.get("files", {}).get("load_us", math.nan)
    rows = [[name, c["n"], fmt_num(c["fetch_us"]), fmt_num(c["load_us"]),
             fmt_num(c["load_us"] / files) + "x"] for name, c in cost.items()]
    return ("### One sample in one process, stage by stage (mean µs; second pass)\n\n"
            "fetch: the encoded bytes from the source's table; load: fetch + decode + resize "
            "to 224x224, a worker's whole read (the ops come after).\n\n"
            + markdown_table(["source", "samples", "fetch µs", "load µs", "load ÷ files"],
                               rows))


def run_one(args: Any, folder: Path, data: dict[str, Any], contender: str) -> dict[str, Any]:
    missing = missing_module(NEEDS.get(contender, ()))
    if missing:  # what its child would report
        print(f"{contender:20} skipped: {missing}", file=sys.stderr)
        return {"contender": contender, "status": "skipped", "error": missing}
    res = run_child(args, folder, contender, peers="bench.records.peers", extra={"data": data})
    print(f"{contender:20} {res.get('status')}: "
          f"{fmt_num(summarize(res.get('rates') or []).median)} images/s", file=sys.stderr)
    return {"contender": contender, **res}


def medians(results: list[dict[str, Any]], contender: str) -> list[float]:
    """Per round, the contender's median images/s (nan where it failed or did not run)."""
    out = []
    for r in sorted({x["round"] for x in results}):
        res = next((x for x in results if x["round"] == r and x["contender"] == contender), {})
        ok = res.get("status") == "ok" and res.get("rates")
        out.append(summarize(res["rates"]).median if ok else math.nan)
    return out


def judged(ratios: list[float], goal: float, text: str) -> tuple[str, str]:
    """A ratio's cell and its target's verdict (``goal`` exclusive)."""
    if not ratios:
        return "", ""
    got = summarize(ratios).median
    return fmt_num(got), f"{text}: {verdict(got > goal)}"


def contender_row(section: str, results: list[dict[str, Any]], c: str) -> tuple[Row, list[float]]:
    rates = medians(results, c)
    good = [v for v in rates if not math.isnan(v)]
    res = next(x for x in results if x["contender"] == c)
    status = "ok" if len(good) == len(rates) else str(res.get("status"))
    return Row(section, LABELS[c], "throughput", "images/s", summarize(good) if good else None,
                 status=status, note="" if status == "ok" else str(res.get("error", ""))[:160]), rates


def report(args: Any, results: list[dict[str, Any]], made: dict[str, Any], data: dict[str, Any],
           contenders: list[str], cost: dict[str, Any]) -> str:
    images = (f"{made['files']} ImageNet-like JPEGs ({made['mean_kb']:.0f} kB on average); "
              f"224x224, flip + rotate + blur, {args.workers} workers")
    rows: list[Row] = []
    ratio_rows: list[list[Any]] = []
    round_rows: list[list[Any]] = []
    files = medians(results, FILES) if FILES in contenders else []
    if files:
        row, _ = contender_row(f"files: {images}", results, FILES)
        rows.append(row)
        round_rows.append([LABELS[FILES], *map(fmt_num, files)])
    for fmt, (title, ours, peers) in FORMATS.items():
        section = f"{title}, {args.shards} shards: {images}"
        mine = medians(results, ours) if ours in contenders else []
        for c in [x for x in (ours, *peers) if x in contenders]:
            row, rates = contender_row(section, results, c)
            round_rows.append([LABELS[c], *map(fmt_num, rates)])
            if c == ours:
                pairs = [(f"{LABELS[ours]} ÷ {LABELS[FILES]}", same_round(mine, files), 0.9,
                          "within 10% of ImageFiles")]
            else:
                pairs = [(f"{LABELS[ours]} ÷ {LABELS[c]}", same_round(mine, rates), 1.0,
                          "shmaug ahead")]
            for name, ratios, goal, text in pairs:
                cell, row.target = judged(ratios, goal, text)
                if cell:
                    row.ratio = f"{cell}x" if c == ours else f"shmaug {cell}x"
                    ratio_rows.append([title, name, cell, fmt_num(min(ratios)), len(ratios)])
            rows.append(row)
    rounds = len(files or medians(results, contenders[0]))
    missing = "".join(f"\n\nNo {fmt} data: {why}" for fmt, why in data.get("missing", {}).items())
    left = [LABELS[c] for c in CONTENDERS if c not in contenders]
    missing += f"\n\nNot run (not in --contenders): {'; '.join(left)}." if left else ""
    extra = ("### Same-round ratios\n\n"
             + markdown_table(["format", "ratio", "median", "min", "rounds"], ratio_rows)
             + f"\n\n### images/s in each of {rounds} rounds\n\n"
             + markdown_table(["contender", *[f"round {k}" for k in range(1, rounds + 1)]],
                                round_rows) + missing + "\n\n" + stages_table(cost))
    meta = {"quick": args.quick, "rounds": rounds, "repeats": 1 if args.quick else args.repeats,
            "workers": args.workers, "shards": args.shards, "folder": made, "data": data,
            "stages": cost, "results": results, "environment": environment(),
            "wall_s": process_age_s()}
    return write_results(args.out, "records", rows, meta, extra)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    default = [c for c in CONTENDERS if not (args.quick and c in SLOW_START)]
    contenders = contender_list(args.contenders, LABELS) if args.contenders else default
    prepare_out(args.out)
    with data_root(args.data, "shmaug_bench_records_") as root:
        folder, made = prepare(root, FOLDER, args.quick)
        data = write_formats(folder, args.shards)
        results = rotated_rounds(1 if args.quick else args.rounds, contenders,
                                   lambda c: run_one(args, folder, data, c), "bench records")
        for res in results:
            res["round"] += 1
        cost = stages(folder, data, args.quick)
        print(report(args, results, made, data, contenders, cost))
    return 0


if __name__ == "__main__":
    sys.exit(main())
