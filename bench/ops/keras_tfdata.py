"""The Keras contender of ``bench/ops/keras_rows.py``: a Keras layer (or block) in tf.data.

Owns how Keras' own augmentation is run as its guides run it: the layer mapped over batches
of 32 (vectorised per batch, ``num_parallel_calls=AUTOTUNE``), on one core like every other
contender (TensorFlow's intra- and inter-op pools and the dataset's private pool of 1
thread). The first batch of each timed run is fetched untimed (tracing, pool start), the
next ``batches`` are timed, and the iterator is dropped, so no batch made during another
contender's turn is counted.

TensorFlow is imported on first use, never at module import; ``available()`` says whether it
can be.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any


BATCH = 32
_CONFIGURED: list[bool] = []


def available() -> bool:
    return importlib.util.find_spec("tensorflow") is not None and \
        importlib.util.find_spec("keras") is not None


def _tf() -> Any:
    import tensorflow as tf

    if not _CONFIGURED:  # before TensorFlow's runtime starts: one core, as the others
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        _CONFIGURED.append(True)
    return tf


def runner(layer: Any, images: Any, batch: int = BATCH) -> Callable[[int], float]:
    """``run(batches) -> µs per image`` of ``layer`` over ``images`` (N, H, W, C), or Keras'
    dict of images and their targets, in tf.data, ``batch`` images a batch."""
    tf = _tf()
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    data = (tf.data.Dataset.from_tensor_slices(images).repeat().batch(batch)
            .map(lambda x: layer(x, training=True), num_parallel_calls=tf.data.AUTOTUNE)
            .with_options(options))

    def run(batches: int) -> float:
        it = iter(data)
        next(it)  # untimed: tracing and the pool's start
        t0 = time.perf_counter()
        for _ in range(batches):
            next(it)
        us = (time.perf_counter() - t0) / (batches * batch) * 1e6
        del it
        return us

    return run


def layers() -> Any:
    """``keras.layers``, imported with TensorFlow configured first."""
    _tf()
    import keras

    return keras.layers
