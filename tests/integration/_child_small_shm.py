"""Run by test_small_shm inside a mount namespace whose /dev/shm is a small tmpfs: build
loaders until one does not fit, run every one built, and print what happened as JSON."""

from __future__ import annotations

import json
import sys

import numpy as np

import shmaug
from tests import _ops


def main(count: int, rows: int) -> None:
    x = np.zeros((rows, 128, 128, 3), np.uint8)  # 256: 12.6 MB each; a batch of 64 is 3.1 MB
    loaders, refused = [], ""
    try:
        for _ in range(count):
            loaders.append(shmaug.Loader(x, None, batch_size=64, augment=_ops.identity,
                                         workers=2, seed=0))
    except shmaug.SharedMemoryError as exc:
        refused = str(exc)
    for _ in range(2):
        for loader in loaders:
            for _ in loader:
                pass
    for loader in loaders:
        loader.close()
    print(json.dumps({"built": len(loaders), "refused": refused}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
