"""Run by test_resume_fit in a subprocess: Model.fit with BackupAndRestore and EpochSync,
recording what each Keras epoch was fed, optionally SIGKILLing itself mid-epoch.

Usage: python -m tests.integration._child_resume BACKUP_DIR RECORD_PATH SAVE_FREQ [KILL_EPOCH KILL_BATCH]
RECORD_PATH gets one JSON line per batch served inside an epoch: [keras epoch, ids, hashes];
RECORD_PATH + ".pids" the training process's and its workers' pids, once training runs.
"""

from __future__ import annotations

import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

import shmaug
from tests import _ops
from tests.integration._fed import Recorded

N, SIDE, BATCH, EPOCHS = 48, 8, 8, 3


class Control(keras.callbacks.Callback):
    def __init__(self, seq, kill_at):
        super().__init__()
        self.seq, self.kill_at, self.epoch = seq, kill_at, -1

    def on_train_begin(self, logs=None):
        with open(self.seq.path + ".pids", "w") as f:
            json.dump([os.getpid(), *self.seq.loader.pids], f)

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = self.seq.keras_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if (self.epoch, batch) == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    backup, record, save_freq = sys.argv[1:4]
    kill_at = tuple(int(a) for a in sys.argv[4:6]) or None
    x = np.random.default_rng(0).random((N, SIDE, SIDE, 1)).astype(np.float32)
    seq = Recorded(x, np.arange(N, dtype=np.float32), batch_size=BATCH, augment=_ops.noisy,
                   workers=1, seed=5, shuffle=True, start_method="fork", path=record)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((SIDE, SIDE, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    backup_cb = keras.callbacks.BackupAndRestore(
        backup, save_freq="epoch" if save_freq == "epoch" else int(save_freq))
    with seq:
        model.fit(seq, epochs=EPOCHS, verbose=0,
                  callbacks=[backup_cb, shmaug.EpochSync(seq), Control(seq, kill_at)])


if __name__ == "__main__":
    main()
