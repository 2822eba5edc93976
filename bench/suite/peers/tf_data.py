"""Contender 4: ``tf.data``, the two ways users wrap Python augmentation in it.

``TfGen``: ``Dataset.from_generator(batches).prefetch(AUTOTUNE)``; ``TfMap``:
``Dataset.range(batches).map(tf.numpy_function(batch), num_parallel_calls=AUTOTUNE)``. Both
run the same per-batch work (``workloads.make_batch``) in TensorFlow's threads.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import tensorflow as tf

from bench.common.workloads import make_batch
from bench.suite.peers._base import Base


class TfBase(Base):
    def _signature(self) -> Any:
        return (tf.TensorSpec((None, *self.x.shape[1:]), tf.as_dtype(np.dtype(self.out_dtype))),
                tf.TensorSpec((None,), tf.as_dtype(self.y.dtype)))

    def epoch(self) -> Iterator[Any]:
        yield from self.ds.as_numpy_iterator()

    def keras_data(self) -> Any:
        return self.ds


class TfGen(TfBase):
    """``Dataset.from_generator(batches).prefetch(AUTOTUNE)``."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)

        def gen() -> Iterator[Any]:
            for i in range(self.nb):
                lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
                yield make_batch(self.x, self.augment, lo, hi, self.out_dtype), self.y[lo:hi]

        self.ds = tf.data.Dataset.from_generator(gen, output_signature=self._signature()).prefetch(
            tf.data.AUTOTUNE)


class TfMap(TfBase):
    """``Dataset.range(batches).map(tf.numpy_function(batch), num_parallel_calls=AUTOTUNE)``."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        sig = self._signature()

        def batch(i: Any) -> Any:
            lo, hi = int(i) * self.bs, min((int(i) + 1) * self.bs, len(self.x))
            return make_batch(self.x, self.augment, lo, hi, self.out_dtype), self.y[lo:hi]

        def wrap(i: Any) -> Any:
            xb, yb = tf.numpy_function(batch, [i], [sig[0].dtype, sig[1].dtype])
            xb.set_shape(sig[0].shape)
            yb.set_shape(sig[1].shape)
            return xb, yb

        self.ds = tf.data.Dataset.range(self.nb).map(
            wrap, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
