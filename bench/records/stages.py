"""``bench.records``' child: what one record costs each source in ONE process, stage by stage.

    python -m bench.records.stages FOLDER DATA_JSON [LIMIT]

For ``ImageFiles`` over the folder and ``ImageRecords`` over each format written
(``bench.records.write``'s made.json, as JSON), over the first LIMIT samples (all: 0), twice
(the second pass is timed, with the files in the page cache): the mean microseconds per
sample of ``fetch`` (the encoded bytes, as a worker gets them from the source's table) and of
``load`` (fetch + decode + resize to 224x224: a worker's whole read). It tells where a
record source's gap to files lies, without the pool's noise. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def per_sample_us(fn: Any, n: int) -> float:
    for i in range(n):  # the first pass warms the page cache and opens the readers
        fn(i)
    began = time.perf_counter()
    for i in range(n):
        fn(i)
    return 1e6 * (time.perf_counter() - began) / n


def main(folder: str, data: dict[str, Any], limit: int) -> dict[str, Any]:
    import cv2
    import shmaug

    from bench.records.peers import FORMATS, shmaug_source

    cv2.setNumThreads(1)  # as in a worker
    sources = {"files": shmaug.ImageFiles.from_directory(folder, image_size=(224, 224))}
    sources.update({fmt: shmaug_source(fmt, data[fmt]) for fmt in FORMATS if fmt in data})
    out = {}
    for name, source in sources.items():
        n = min(limit or len(source), len(source))
        out[name] = {"n": n, "fetch_us": per_sample_us(source.load.table.fetch, n),
                     "load_us": per_sample_us(source.load, n)}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], json.loads(sys.argv[2]),
                          int(sys.argv[3]) if len(sys.argv) > 3 else 0)))
