"""The facade on Keras backends other than TensorFlow, where they are installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import numpy as np, keras, shmaug
from tests import _ops
assert keras.backend.backend() == "{backend}"
x = np.random.default_rng(0).random((64, 8, 8, 1)).astype("float32")
epochs = []
class Spy(shmaug.Sequence):
    def on_epoch_begin(self):
        super().on_epoch_begin()
        epochs.append([])
    def __getitem__(self, index):
        x, y = super().__getitem__(index)
        epochs[-1].extend(y["id"].tolist())
        return x, y["label"]
with Spy(x, {{"label": np.arange(64) % 4, "id": np.arange(64)}}, batch_size=8,
         augment=_ops.noisy, workers=2, seed=0, shuffle=True) as seq:
    model = _ops.tiny_model((8, 8, 1), 4)
    model.fit(seq, epochs=2, verbose=0)
    # Some backends run a one-batch pseudo-epoch first to build the model; the two
    # training epochs are the last two.
    for seen in epochs[-2:]:
        assert sorted(seen) == list(range(64)), seen
    print("ok", seq.stats()["hit_rate"])
"""


@pytest.mark.parametrize("backend, module", [("torch", "torch"), ("jax", "jax")])
def test_fit_on_backend(backend, module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(backend=backend)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")
