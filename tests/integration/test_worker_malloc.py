"""Workers tune glibc's allocator for themselves, whatever the parent set (tf.data sets
M_TRIM_THRESHOLD to 128 KB in the process that runs fit): large per-sample arrays then come
from memory already touched, not from new pages each time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shmaug import platform as _platform

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(_platform.glibc_mallopt() is None, reason="glibc only"),
]

SCRIPT = r"""
import json, resource, sys
import numpy as np
import shmaug
from shmaug import platform as _platform
from shmaug.engine.workers import worker as _worker

def faults(image, rng):
    # Page faults while making ten 1 MB arrays, after one to warm up.
    np.ones(1 << 17)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        a = np.ones(1 << 17)
        del a
    return np.full(image.shape, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

if sys.argv[1] == "untuned":
    _worker._tune_malloc = lambda: None
_platform.glibc_mallopt()(-1, 128 * 1024)  # what tf.data's from_generator does
x = np.zeros((4, 2, 2), np.int64)
with shmaug.Loader(x, batch_size=4, augment=faults, workers=1, seed=0,
                   start_method="fork") as loader:
    xb, _ = loader.batch(0)
print(json.dumps(int(xb.max())))
"""


def worker_faults(mode: str, **env: str) -> int:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True,
                          timeout=100, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return int(json.loads(proc.stdout.splitlines()[-1]))


def test_a_worker_forked_after_tf_data_reuses_its_memory():
    # Untuned, each 1 MB array is an mmap of its own: 256 pages faulted in, ten times.
    assert worker_faults("untuned") > 1000
    assert worker_faults("tuned") < 200


def test_malloc_settings_the_user_gave_are_left_alone():
    # The user's own threshold (as large as TF's) stays: the ten arrays are mmaps again.
    assert worker_faults("tuned", MALLOC_MMAP_THRESHOLD_=str(128 * 1024)) > 1000
