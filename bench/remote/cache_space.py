"""What a disk cache of many image files costs per write once it is full: its listing, and
each write's eviction, least recently used first, against ranking every entry per write.

    python -m bench.remote.cache_space [--entries 200000] [--writes 200]

A bucket of image files cached on the host holds one file per image: a million for ImageNet.
At the bound every write evicts, and each write is a worker's time. This makes ``--entries``
small entries in a temporary folder (a minute for 200,000), bounds the cache at their size,
then times ``Space.reserve`` for ``--writes`` new entries (each completed as a download is),
side by side in the same folder:

- ``lru`` as ``Space`` runs it: the order of use kept since the listing;
- ``lru`` ranking every entry per write (a policy ``Space`` does not know: what it did
  before the order was kept, and what any other policy still does).

Also the listing itself, which a process repeats at most every ``RESCAN_S`` seconds and every
``RESCAN_SHARE`` listings' time. Prints a Markdown table; the CPU and its load are in the
header.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from bench.common.report import cpu_model
from shmaug.sources.cache import _space as CS
from bench.common.harness import described

SIZE = 100  # bytes per entry: the folder's entry count is what is measured, not its bytes


def make_entries(folder: str, count: int) -> None:
    for i in range(count):
        with open(os.path.join(folder, f"img{i:09d}-{i:016x}.data"), "wb") as f:
            f.write(b"x" * SIZE)


def per_write_ms(space: CS.Space, folder: str, writes: int, tag: str) -> float:
    """The median of ``writes`` reservations at the bound, each completed, in ms."""
    times = []
    for j in range(writes):
        final = os.path.join(folder, f"{tag}{j:09d}-{j:016x}.data")
        began = time.perf_counter()
        assert space.reserve(final, SIZE) is None
        times.append(time.perf_counter() - began)
        os.replace(CS.sibling(final, CS.PART), final)  # the download done
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remote.cache_space",
                                     description=described(__doc__))
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--writes", type=int, default=200)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    folder = tempfile.mkdtemp(prefix="bench-cache-space-")
    try:
        make_entries(folder, args.entries)
        listed = CS.Space(folder, args.entries * SIZE)
        began = time.perf_counter()
        listed._listed()
        listing = time.perf_counter() - began
        kept = per_write_ms(listed, folder, args.writes, "kept")
        ranked = CS.Space(folder, args.entries * SIZE,
                          evict=lambda folder, need: CS.lru(list(folder.entries.values()),
                                                            need))  # a list: ranked first
        ranked._listed()
        sorting = per_write_ms(ranked, folder, args.writes, "ranked")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"`python -m bench.remote.cache_space --entries {args.entries} --writes "
          f"{args.writes}`\n\n{args.entries:,} entries at the bound; {cpu_model()}, "
          f"{os.cpu_count()} CPUs, load average {load:.2f}\n\n"
          f"| step | ms |\n|---|---:|\n"
          f"| listing the folder (once per RESCAN_S, at most every {CS.RESCAN_SHARE} "
          f"listings' time) | {1e3 * listing:,.0f} |\n"
          f"| a write at the bound, lru in the order kept since the listing (median) | "
          f"{kept:.3f} |\n"
          f"| a write at the bound, lru ranking every entry (median) | {sorting:.3f} |")


if __name__ == "__main__":
    main()
