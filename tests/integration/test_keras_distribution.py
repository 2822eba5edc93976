"""shmaug.Sequence under keras.distribution on JAX: several processes (examples/multi_host_jax.py
over loopback), several devices in one process, and what a user must get right.

Each case runs in a fresh interpreter: JAX fixes its device count and its process group when
it starts.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._helpers import needs_keras

pytestmark = [
    needs_keras, pytest.mark.timeout(300),
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX"),
]
ROOT = Path(__file__).resolve().parents[2]


def run_jax(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)


def test_two_processes_train_as_one_fed_the_same_global_batches():
    """The example checks itself: identical weights in both processes, each epoch's shards
    together every sample once, and the weights of one process fed the same global batches
    (1e-5)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "examples/multi_host_jax.py", "--quick"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "shard 0 of 2" in proc.stdout and "shard 1 of 2" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("ok:")


ONE_HOST = """
import jax
jax.config.update("jax_num_cpu_devices", 2)
import keras, numpy as np, shmaug
from tests import _ops

x = np.random.default_rng(0).random((48, 8, 8, 1)).astype("float32")
y = np.arange(48) % 4

def weights(distributed):
    keras.distribution.set_distribution(
        keras.distribution.DataParallel() if distributed else None)
    with shmaug.Sequence(x, y, batch_size=8, augment=_ops.noisy, workers=2, seed=1,
                         shuffle=True) as seq:
        model = _ops.tiny_model((8, 8, 1), 4, seed=0)
        model.compile("sgd", "sparse_categorical_crossentropy")
        model.fit(seq, epochs=2, verbose=0)
    return [np.asarray(w) for w in model.get_weights()]

assert len(jax.devices()) == 2
gap = max(float(np.abs(a - b).max()) for a, b in zip(weights(True), weights(False)))
assert gap <= 1e-5, gap
print("gap", gap)
"""


def test_one_process_two_devices_trains_as_one_device():
    proc = run_jax(ONE_HOST)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("gap")


SPLIT = """
import sys, jax
jax.config.update("jax_num_cpu_devices", 2)
import keras, numpy as np, shmaug
keras.distribution.set_distribution(keras.distribution.DataParallel())
x = np.zeros((int(sys.argv[1]), 4, 4), "float32")
try:
    shmaug.Sequence(x, batch_size=int(sys.argv[2]), drop_remainder=sys.argv[3] == "1")
    print("accepted")
except shmaug.ArgumentError as e:
    print(e)
"""


@pytest.mark.parametrize("n, batch, drop, says", [
    (48, 7, "0", "`batch_size`=7 does not split evenly over the 2 devices"),
    (21, 8, "0", "last batch of each epoch holds 5 samples.*`drop_remainder=True`"),
    (21, 8, "1", "accepted"),
    (20, 8, "0", "accepted"),  # a last batch of 4 splits over 2
])
def test_batches_that_do_not_split_over_the_devices_are_refused_with_the_fix(n, batch, drop,
                                                                              says):
    """JAX would stop fit with IndivisibleError at the last batch of the first epoch."""
    proc = run_jax(SPLIT, str(n), str(batch), drop)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import re

    assert re.search(says, proc.stdout), proc.stdout
