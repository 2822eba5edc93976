"""Run by the fault tests in a subprocess: Model.fit on a shmaug.Sequence until interrupted.

Prints one JSON line {"pids", "segments"} once training is under way. With ``--rounds N`` it
takes N-1 Ctrl-C's in its stride, as a notebook user does (each one ends ``fit`` with
KeyboardInterrupt; it prints {"interrupted", "alive", "segments"} after closing that round's
Sequence, then trains a fresh one), and lets the N-th end the process.
With ``--hang`` the op hangs on the samples of batch 10 (no ``timeout=``): the run
waits on it for good, until a Ctrl-C ends it.
Usage: python -m tests.integration._child_fit START_METHOD [--rounds N | --hang]
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
import psutil

import shmaug
from tests import _ops


class Announce(keras.callbacks.Callback):
    def __init__(self, seq):
        super().__init__()
        self.seq = seq

    def on_train_batch_end(self, batch, logs=None):
        if batch == 1:
            loader = self.seq.loader
            print(json.dumps({"pids": loader.pids, "segments": loader._run.store.names}), flush=True)


def sequence(method: str) -> shmaug.Sequence:
    x = np.random.default_rng(0).random((512, 8, 8, 1)).astype(np.float32)
    return shmaug.Sequence(x, np.arange(512) % 4, batch_size=16, augment=_ops.slow_noisy,
                           workers=2, seed=0, shuffle=True, start_method=method)


def hanging(method: str) -> shmaug.Sequence:
    """In order, with the samples of batch 10 marked: their op never returns."""
    x = np.random.default_rng(0).random((512, 8, 8, 1)).astype(np.float32)
    x[160:176, 0, 0, 0] = _ops.MARKER  # (past the batches Keras reads for their spec)
    return shmaug.Sequence(x, np.arange(512) % 4, batch_size=16, augment=_ops.hang_always_on_marker,
                           workers=2, seed=0, shuffle=False, start_method=method)


def leftovers(pids: list[int], segments: list[str]) -> dict[str, list]:
    alive = []
    for p in pids:  # (one that ends between the two looks has ended)
        try:
            if psutil.Process(p).status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return {"alive": alive, "segments": [s for s in segments if os.path.exists(f"/dev/shm/{s}")]}


def main() -> None:
    method = sys.argv[1]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 1
    model = _ops.tiny_model((8, 8, 1), 4)
    if "--hang" in sys.argv:
        seq = hanging(method)
        model.fit(seq, epochs=1, verbose=0, shuffle=False, callbacks=[Announce(seq)])
        return
    for _ in range(rounds - 1):
        seq = sequence(method)
        interrupted = False
        try:
            model.fit(seq, epochs=1000, verbose=0, callbacks=[Announce(seq)])
        except KeyboardInterrupt:
            interrupted = True
        pids, segments = seq.loader.pids, seq.loader._run.store.names
        seq.close()
        print(json.dumps({"interrupted": interrupted, **leftovers(pids, segments)}), flush=True)
    seq = sequence(method)
    model.fit(seq, epochs=1000, verbose=0, callbacks=[Announce(seq)])


if __name__ == "__main__":
    main()
