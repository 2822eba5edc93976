"""How far ``shuffle="blocks"`` is from the exact shuffle, and what it saves a reader.

    python -m bench.records.locality [--quick] [--shards 1024] [--per-shard 1250]
                                     [--batch-size 256] [--out bench/results/locality]

Pure planning, no I/O: the epoch orders the engine computes (``engine.plan.schedule.permutation``) for an
ImageNet-like layout (by default 1,024 shards of 1,250 records), exact and by blocks for
several ``shuffle_window`` values, each measured over four epochs:

- *displacement*: mean |epoch position - storage index| / n (a uniform shuffle: 1/3);
- *corr*: correlation of epoch position with storage index (uniform: 0), with its spread
  across epochs (blocks permute only the shards: about 1 / sqrt(shards));
- *neighbours*: mean distance in the epoch between records stored side by side in one shard,
  / n (uniform: 1/3);
- *shards/batch*: distinct shards in a batch; *same-shard pairs*: the chance that two records
  of a batch share a shard (uniform: about 1 / shards);
- *downloads/epoch*: whole shards a host fetches with a disk cache of ``shuffle_window``
  shards evicting the least recently used (the exact shuffle, with the same cache).

Prints a Markdown table and writes it, with the JSON, under ``--out``.
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict

import numpy as np

from bench.common.harness import described, prepare_out
from shmaug.engine.plan.blocks import Blocks
from shmaug.engine.plan.schedule import permutation

WINDOWS = (1, 2, 4, 8, 16, 64)


def lru_downloads(shard_of: np.ndarray, capacity: int) -> int:
    """Whole-shard downloads reading ``shard_of`` in order through an LRU of ``capacity``."""
    cache: OrderedDict[int, None] = OrderedDict()
    fetched = 0
    previous = -1
    for s in shard_of.tolist():
        if s == previous:  # the common case under blocks: no bookkeeping
            continue
        previous = s
        if s in cache:
            cache.move_to_end(s)
            continue
        fetched += 1
        cache[s] = None
        if len(cache) > capacity:
            cache.popitem(last=False)
    return fetched


def measure(order: np.ndarray, per_shard: int, batch_size: int, capacity: int) -> dict:
    n = len(order)
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    index = np.arange(n)
    same = (index[:-1] // per_shard) == (index[1:] // per_shard)
    shard_of = order // per_shard
    batches = np.sort(shard_of[: n - n % batch_size].reshape(-1, batch_size), axis=1)
    distinct = 1 + (np.diff(batches, axis=1) != 0).sum(axis=1)
    runs = np.diff(np.flatnonzero(np.diff(batches, axis=1, prepend=-1, append=-1) != 0))
    pairs = (runs * (runs - 1)).sum() / (len(batches) * batch_size * (batch_size - 1))
    return {
        "displacement": float(np.abs(position - index).mean() / n),
        "corr": float(np.corrcoef(position, index)[0, 1]),
        "neighbours": float(np.abs(np.diff(position))[same].mean() / n),
        "shards_per_batch": float(distinct.mean()),
        "same_shard_pairs": float(pairs),
        "downloads_per_epoch": lru_downloads(shard_of, capacity),
    }


def table(shards: int, per_shard: int, batch_size: int, windows: tuple[int, ...],
          epochs: int = 4) -> list[dict]:
    n = shards * per_shard
    bounds = np.arange(0, n + 1, per_shard, dtype=np.int64)
    rows = []
    for window in (None, *windows):
        kind: bool | Blocks = True if window is None else Blocks(bounds, window)
        capacity = window or min(windows, key=lambda w: abs(w - 8))
        runs = [measure(permutation(0, e, n, kind), per_shard, batch_size, capacity)
                for e in range(epochs)]
        row = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
        row["corr_sd"] = float(np.std([r["corr"] for r in runs]))  # across epochs
        rows.append({"order": "exact" if window is None else f"blocks, window {window}",
                     "cache_shards": capacity, **row})
    return rows


def markdown(rows: list[dict], shards: int, per_shard: int, batch_size: int) -> str:
    head = (f"{shards} shards x {per_shard} records, batch {batch_size}, mean of 4 epochs (corr: mean ± sd)\n\n"
            "| order | displacement | corr | neighbours | shards/batch | same-shard pairs "
            "| cache (shards) | downloads/epoch |\n|---|---|---|---|---|---|---|---|\n")
    return head + "".join(
        f"| {r['order']} | {r['displacement']:.3f} | {r['corr']:+.3f} ± {r['corr_sd']:.3f} | "
        f"{r['neighbours']:.4f} | {r['shards_per_batch']:.1f} | {r['same_shard_pairs']:.4f} "
        f"| {r['cache_shards']} | {r['downloads_per_epoch']:,.0f} |\n" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.records.locality",
                                     description=described(__doc__))
    parser.add_argument("--quick", action="store_true", help="32 shards of 50: a smoke run")
    parser.add_argument("--shards", type=int, default=1024)
    parser.add_argument("--per-shard", type=int, default=1250)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--out", default="bench/results/locality")
    args = parser.parse_args()
    out = prepare_out(args.out)
    if args.quick:
        args.shards, args.per_shard, args.batch_size = 32, 50, 32
    windows = tuple(w for w in WINDOWS if w < args.shards) + (args.shards,)
    rows = table(args.shards, args.per_shard, args.batch_size, windows)
    text = markdown(rows, args.shards, args.per_shard, args.batch_size)
    print(text)
    (out / "locality.md").write_text(
        f"`python -m bench.records.locality{' --quick' if args.quick else ''}`\n\n{text}")
    (out / "locality.json").write_text(json.dumps(
        {"shards": args.shards, "per_shard": args.per_shard, "batch_size": args.batch_size,
         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
