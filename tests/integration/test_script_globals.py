"""A script's globals reach the workers as they stand, under every start method: a spawned or
forkserver worker imports the script again without running its ``if __name__ == "__main__":``
block, so an augment reading a global that block (or a ``global`` statement) set again read
the import's value there (a shift of 0 where forked workers shifted by 5), without a word:
such an augment goes to fresh workers by value (``engine.workers.shipping``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = '''
import hashlib, sys
import numpy as np
import shmaug

STRENGTH = 0
LEVEL = 1


def shift(image, rng):
    return np.roll(image, STRENGTH * LEVEL + int(rng.integers(0, 2)), axis=0)


def set_level():
    global LEVEL
    LEVEL = 2


if __name__ == "__main__":
    STRENGTH = 5  # an option read from the command line
    set_level()
    x = np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3)
    method = sys.argv[1]
    kw = dict(workers=0) if method == "none" else dict(workers=2, start_method=method)
    with shmaug.Loader(x, batch_size=4, augment=shift, seed=0, **kw) as loader:
        print("DIGEST", hashlib.md5(b"".join(xb.tobytes() for xb, _ in loader)).hexdigest())
'''


def test_globals_the_main_block_sets_reach_spawned_workers_as_they_stand(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    digests = {}
    for method in ("none", "fork", "spawn", "forkserver"):
        done = subprocess.run([sys.executable, str(script), method], cwd=tmp_path,
                              capture_output=True, text=True, timeout=150,
                              env={"PYTHONPATH": str(ROOT), **__import__("os").environ})
        assert done.returncode == 0, done.stderr[-2000:]
        digests[method] = done.stdout.split("DIGEST ")[1].strip()
    assert len(set(digests.values())) == 1, digests
