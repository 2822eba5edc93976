"""Run by test_faults in a subprocess: start a loader, report its pids and segments, consume.

Usage: python -m tests.integration._child_loader START_METHOD [--no-close] [--gil]
(``--gil``: every sample but the first holds its worker in C code that holds the GIL)
"""

from __future__ import annotations

import json
import sys

import numpy as np

import shmaug
from shmaug.memory.store import SEGMENT_PREFIX
from tests import _ops


def main() -> None:
    method = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "default" else None
    x = np.zeros((64, 8, 8), np.uint8)
    augment = _ops.slow_noisy
    if "--gil" in sys.argv:  # (sample 0, which the loader's probe makes, stays quick)
        x[1:, 0, 0], augment = _ops.MARKER, _ops.gil_hog_on_marker
    loader = shmaug.Loader(x, batch_size=4, augment=augment, workers=2, seed=0,
                           start_method=method)
    segments = [s for s in loader._run.store.names if s.startswith(SEGMENT_PREFIX)]
    print(json.dumps({"pids": loader.pids, "segments": segments}), flush=True)
    if "--no-close" in sys.argv:
        for _ in range(10**6):
            for _ in loader:
                pass
    with loader:
        for _ in range(10**6):
            for _ in loader:
                pass


if __name__ == "__main__":
    main()
