"""Run by test_distribute in a subprocess: one small training run on 2 logical CPU devices.

Usage: python -m tests.integration._child_distribute MODE OUT_JSON RECORD_PATH
MODE: plain (fit, no strategy), mirrored (fit under MirroredStrategy), ed (custom loop over
strategy.experimental_distribute_dataset(seq.to_tf_dataset())), dfn (custom loop over
strategy.distribute_datasets_from_function(lambda ctx: seq.to_tf_dataset(input_context=ctx))).
Writes {"weights0": weights after epoch 0, "accuracy": last epoch's}; RECORD_PATH gets what
was fed (see _fed.Recorded), tagged with the epoch.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

CPUS = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(CPUS[0], [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tests.integration._fed import Recorded, jitter  # noqa: E402

N, SIDE, GLOBAL_BATCH, EPOCHS, REPLICAS = 64, 8, 16, 4, 2


def data():
    rng = np.random.default_rng(0)
    y = np.arange(N) % 2
    x = (rng.random((N, SIDE, SIDE, 1)) * 0.3 + 0.5 * y[:, None, None, None]).astype(np.float32)
    return x, y


def model():
    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((SIDE, SIDE, 1)), keras.layers.Flatten(),
                          keras.layers.Dense(2, activation="softmax")])
    m.compile(keras.optimizers.SGD(1.0), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def flat(m):
    return np.concatenate([w.ravel() for w in m.get_weights()]).tolist()


class Tag(keras.callbacks.Callback):
    def __init__(self, seq, out):
        super().__init__()
        self.seq, self.out = seq, out

    def on_epoch_begin(self, epoch, logs=None):
        self.seq.keras_epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            self.out["weights0"] = flat(self.model)
        self.out["accuracy"] = float(logs["accuracy"])


def custom_loop(strategy, seq, dist, m, out):
    """The recipe for tf.distribute without fit (and the only one under MultiWorkerMirroredStrategy)."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(reduction=None)

    @tf.function
    def step(batch):
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                p = m(x, training=True)
                loss = tf.nn.compute_average_loss(loss_fn(y, p), global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, m.trainable_variables)
            m.optimizer.apply_gradients(zip(grads, m.trainable_variables))
            hits = tf.reduce_sum(tf.cast(tf.argmax(p, -1) == tf.cast(y, tf.int64), tf.float32))
            return hits

        return strategy.reduce("SUM", strategy.run(replica_step, args=batch), axis=None)

    for epoch in range(EPOCHS):
        seq.keras_epoch = epoch
        hits = sum(float(step(batch)) for batch in dist)
        if epoch == 0:
            out["weights0"] = flat(m)
        out["accuracy"] = hits / N


def main() -> None:
    mode, out_path, record = sys.argv[1:4]
    x, y = data()
    per_replica = mode == "dfn"  # distribute_datasets_from_function feeds whole batches
    seq = Recorded(x, y, batch_size=GLOBAL_BATCH // REPLICAS if per_replica else GLOBAL_BATCH,
                   augment=jitter, workers=1, seed=3, shuffle=True, start_method="fork",
                   path=record)
    out: dict = {}
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with seq:
        if mode == "plain":
            m = model()
            m.fit(seq, epochs=EPOCHS, verbose=0, callbacks=[Tag(seq, out)])
        elif mode == "mirrored":
            with strategy.scope():
                m = model()
            m.fit(seq, epochs=EPOCHS, verbose=0, callbacks=[Tag(seq, out)])
        else:
            with strategy.scope():
                m = model()
                m.optimizer.build(m.trainable_variables)
            if mode == "ed":
                dist = strategy.experimental_distribute_dataset(seq.to_tf_dataset())
            else:
                dist = strategy.distribute_datasets_from_function(
                    lambda ctx: seq.to_tf_dataset(input_context=ctx))
            custom_loop(strategy, seq, dist, m, out)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
