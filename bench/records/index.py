"""TFRecord index at ImageNet's scale: build time, table size and worker memory.

    python -m bench.records.index [--quick] [--out bench/results/records/index]
        [--records 1281167] [--shards 1024]

Writes ``--records`` tiny TFRecord records (a 4x4 PNG and an int64 label of 1,000 classes; the
frames and Examples are made by hand here, so no TensorFlow is started before the workers
fork) into ``--shards`` files in a temporary folder (removed at the end), then measures
``ImageRecords.from_tfrecord`` over them: the index build with labels (every record read and
its label parsed, kept in an ``index_cache``), the same build again reusing that cache, and
the build with ``label_key=None`` (headers only), the record table's size, and the
USS of 2 workers after a shuffled batch, against the same workers over an in-memory array
dataset of as many samples. Targets (issue 28): build under 60 s, under 5 s when reused;
worker USS within 10 MiB of the array dataset's.
"""

from __future__ import annotations

import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.harness import base_parser, described, prepare_out, summarize, worker_memory
from bench.common.report import Row, environment, write_results


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def example(image: bytes, label: int) -> bytes:
    """A serialized tf.train.Example {image/encoded: bytes, image/class/label: int64}."""
    entries = [(b"image/encoded", _field(1, _field(1, image))),
               (b"image/class/label", _field(3, _field(1, _varint(label))))]
    features = b"".join(_field(1, _field(1, key) + _field(2, value)) for key, value in entries)
    return _field(1, features)


def write(root: Path, records: int, shards: int) -> float:
    import cv2

    from shmaug.sources.formats.tfrecord import masked_crc

    png = cv2.imencode(".png", np.zeros((4, 4, 3), np.uint8))[1].tobytes()
    frames = []
    for label in range(1000):
        data = example(png, label)
        head = struct.pack("<Q", len(data))
        frames.append(head + struct.pack("<I", masked_crc(head)) + data
                      + struct.pack("<I", masked_crc(data)))
    began = time.perf_counter()
    for k, part in enumerate(np.array_split(np.arange(records), shards)):
        (root / f"train-{k:05d}-of-{shards:05d}").write_bytes(
            b"".join(frames[i % 1000] for i in part.tolist()))
    return time.perf_counter() - began


def worker_uss(x: Any, y: Any) -> list[float]:
    import shmaug

    # A flip, so the array's loader runs workers too (with nothing to do it only gathers).
    with shmaug.Loader(x, y, batch_size=256, workers=2, shuffle=True, seed=0,
                       augment=shmaug.Maybe("hflip", p=0.5), start_method="fork") as loader:
        loader.batch(0)
        return [w["uss"] for w in worker_memory(list(loader.pids))]


def main(argv: list[str] | None = None) -> int:
    p = base_parser(described(__doc__), "bench/results/records/index")
    p.add_argument("--records", type=int, default=1_281_167)
    p.add_argument("--shards", type=int, default=1024)
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.shards = 20_000, 16
    prepare_out(args.out)
    import shmaug

    root = Path(tempfile.mkdtemp(prefix="shmaug_bench_records_index_"))
    try:
        wrote = write(root, args.records, args.shards)
        pattern = str(root / "train-*")
        began = time.perf_counter()
        records = shmaug.ImageRecords.from_tfrecord(pattern, image_size=(4, 4),
                                                    index_cache=root / "index")
        build = time.perf_counter() - began
        began = time.perf_counter()
        shmaug.ImageRecords.from_tfrecord(pattern, image_size=(4, 4), index_cache=root / "index")
        reused = time.perf_counter() - began
        began = time.perf_counter()
        shmaug.ImageRecords.from_tfrecord(pattern, image_size=(4, 4), label_key=None)
        headers = time.perf_counter() - began
        ours = worker_uss(records, None)
        array = np.zeros((args.records, 4, 4, 3), np.uint8)
        theirs = worker_uss(array, records.labels)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    section = f"{args.records:,} TFRecord records in {args.shards:,} shards (4x4 PNGs)"
    gap = max(ours) - max(theirs)
    rows = [
        Row(section, "index build, labels read", "time", "s", summarize([build]),
              target=f"< 60 s: {'met' if build < 60 else 'MISSED'}"),
        Row(section, "index reused from index_cache (shards unchanged)", "time", "s",
              summarize([reused]), target=f"< 5 s: {'met' if reused < 5 else 'MISSED'}"),
        Row(section, "index build, headers only (label_key=None)", "time", "s",
              summarize([headers])),
        Row(section, "worker USS, ImageRecords", "memory", "MiB", summarize(ours),
              target=f"within 10 MiB of the array's: {gap:+.1f} MiB, "
                     f"{'met' if gap <= 10 else 'MISSED'}"),
        Row(section, "worker USS, in-memory array of as many samples", "memory", "MiB",
              summarize(theirs)),
    ]
    meta = {"quick": args.quick, "records": args.records, "shards": args.shards,
            "write_s": wrote, "table_mib": len(records.table._arrays[0]) / 2**20,
            "environment": environment()}
    print(write_results(args.out, "records_index", rows, meta,
                          f"Record table: {meta['table_mib']:.1f} MiB in shared memory."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
