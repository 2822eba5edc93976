"""A script's globals as spawned workers see them: a spawn or forkserver worker imports the
script again without running its ``if __name__ == "__main__":`` block, so an augment reading a
global that block (or a ``global`` statement) sets again read the import's value there (a shift
of 0 where forked workers shifted by 5), without a word. Left to choose, shmaug forks such a
script's workers (``launch.default_start_method``); told to start them fresh, it says so
(``shipping.tell_rebound``)."""

from __future__ import annotations

import os
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


def _amount():
    return STRENGTH * LEVEL


def shift(image, rng):
    return np.roll(image, _amount() + int(rng.integers(0, 2)), axis=0)


def set_level():
    global LEVEL
    LEVEL = 2


if __name__ == "__main__":
    STRENGTH = 5  # an option read from the command line
    set_level()
    x = np.arange(16 * 8 * 8 * 3, dtype=np.uint8).reshape(16, 8, 8, 3)
    method = sys.argv[1]
    if method == "default-threaded":
        import torch  # a threaded runtime: the default would be forkserver
    kw = (dict(workers=0) if method == "none" else dict(workers=2) if method.startswith(
        "default") else dict(workers=2, start_method=method))
    with shmaug.Loader(x, batch_size=4, augment=shift, seed=0, **kw) as loader:
        print("DIGEST", hashlib.md5(b"".join(xb.tobytes() for xb, _ in loader)).hexdigest())
'''


def run(script: Path, method: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-W", "always", str(script), method],
                          cwd=script.parent, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_global_the_main_block_sets_again_forks_by_default_or_is_told(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    digest = {m: run(script, m) for m in ("none", "fork", "default-threaded", "spawn")}
    same = digest["none"].stdout.split("DIGEST ")[1].split()[0]
    for method in ("fork", "default-threaded"):  # (a threaded runtime: forked all the same)
        assert digest[method].stdout.split("DIGEST ")[1].split()[0] == same, method
        assert "sets again" not in digest[method].stderr
    told = digest["spawn"].stderr
    assert "`shift` reads `LEVEL`, `STRENGTH`, which your script sets again" in told, told
    assert "functools.partial(shift, level=LEVEL)" in told
