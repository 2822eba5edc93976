"""Run by test_sequence_fit in a subprocess: Model.fit on a shmaug.Sequence until interrupted.

Prints one JSON line {"pids", "segments"} once training is under way.
Usage: python -m tests.integration._child_fit START_METHOD
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

import shmaug
from tests import _ops


class Announce(keras.callbacks.Callback):
    def __init__(self, seq):
        super().__init__()
        self.seq = seq

    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            loader = self.seq.loader
            print(json.dumps({"pids": loader.pids, "segments": loader._store.names}), flush=True)


def main() -> None:
    x = np.random.default_rng(0).random((512, 8, 8, 1)).astype(np.float32)
    seq = shmaug.Sequence(x, np.arange(512) % 4, batch_size=16, augment=_ops.slow_noisy,
                          workers=2, seed=0, shuffle=True, start_method=sys.argv[1])
    model = _ops.tiny_model((8, 8, 1), 4)
    model.fit(seq, epochs=1000, verbose=0, callbacks=[Announce(seq)])


if __name__ == "__main__":
    main()
