"""What Keras' ``fit`` really trained on, on every backend: a model whose first layer writes
down each batch ``train_step`` feeds it, and the batches shmaug planned for each epoch.

Sample i carries i in pixel (0, 0, 0); ``mark`` writes a draw of the sample's own random
stream into channel 1, so a fed row tells which sample it is *and* which epoch's augmentation
it got (a function of (seed, epoch, sample)).
"""

from __future__ import annotations

import keras
import numpy as np

import shmaug
from tests._ops import fails_at_sample_7_once, mark, same  # noqa: F401  (workers
# import them from there, without Keras: a module that imports Keras costs each worker seconds)

N, SIDE, BATCH = 24, 4, 4  # 6 batches per epoch


def data(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros((n, SIDE, SIDE, 2), np.float32)
    x[:, 0, 0, 0] = np.arange(n)
    return x, (np.arange(n) % 3).astype(np.float32)


class Log:
    """Rows fed per Keras epoch: ``train[k]`` is a list of batches, each a list of
    (sample id, mark) pairs; ``evaluated`` the rows of each run of evaluate, in order."""

    def __init__(self) -> None:
        self.train: dict[int, list[list[tuple[int, float]]]] = {}
        self.evaluated: list[list[tuple[int, float]]] = []
        self.epoch = -1


class Tap(keras.layers.Layer):
    """Writes down the concrete batches it sees: training ones under the current Keras epoch,
    the others (evaluate) apart. The symbolic build's tensors are not batches."""

    def __init__(self, log: Log, **kwargs):
        super().__init__(**kwargs)
        self.log = log

    def call(self, x, training=None):
        try:
            rows = keras.ops.convert_to_numpy(x[:, 0, 0, :])
        except Exception:  # a symbolic tensor or a tracer: building, not fed
            rows = None
        if rows is not None:
            batch = [(int(round(i)), float(m)) for i, m in rows]
            if training:
                self.log.train.setdefault(self.log.epoch, []).append(batch)
            elif self.log.evaluated:
                self.log.evaluated[-1].extend(batch)
        return x


class EpochTag(keras.callbacks.Callback):
    def __init__(self, log: Log) -> None:
        super().__init__()
        self.log = log

    def on_epoch_begin(self, epoch, logs=None):
        self.log.epoch = epoch

    def on_test_begin(self, logs=None):
        self.log.evaluated.append([])


def model(log: Log) -> keras.Model:
    keras.utils.set_random_seed(0)
    inp = keras.Input((SIDE, SIDE, 2))
    h = keras.layers.Flatten()(Tap(log)(inp))
    m = keras.Model(inp, keras.layers.Dense(1)(h))
    m.compile("sgd", "mse", run_eagerly=True)  # Tap sees concrete batches on every backend
    return m


class Plan:
    """What shmaug epoch e holds, made in this process (``workers=0`` gives the same batches
    as any worker count)."""

    def __init__(self, x, *, seed: int, shuffle: bool, augment=mark, batch_size: int = BATCH):
        self.loader = shmaug.Loader(x, batch_size=batch_size, augment=augment, workers=0,
                                    seed=seed, shuffle=shuffle)

    def close(self) -> None:
        self.loader.close()

    def batch(self, epoch: int, b: int) -> list[tuple[int, float]]:
        xb, _ = self.loader.batch(b, epoch=epoch)
        return [(int(round(i)), float(m)) for i, m in xb[:, 0, 0, :]]

    def epoch(self, epoch: int) -> dict[int, float]:
        return {i: m for b in range(len(self.loader)) for i, m in self.batch(epoch, b)}

    def which_epoch(self, batches: list[list[tuple[int, float]]], candidates=range(8)) -> int:
        """The shmaug epoch these fed batches are, each sample exactly once and each batch one
        planned batch of it; AssertionError otherwise."""
        rows = [r for b in batches for r in b]
        ids = [i for i, _ in rows]
        assert len(ids) == len(set(ids)), f"a sample fed twice: {sorted(ids)}"
        fed = dict(rows)
        for e in candidates:
            if fed == self.epoch(e):
                planned_batches = {tuple(self.batch(e, b)) for b in range(len(self.loader))}
                assert all(tuple(b) in planned_batches for b in batches), "a batch mixed"
                return e
        raise AssertionError(f"the fed rows are no whole shmaug epoch: ids {sorted(ids)}")

    def stream(self, epoch: int, start: int, count: int) -> list[list[tuple[int, float]]]:
        """``count`` batches of the stream from batch ``start`` of ``epoch`` on."""
        out, per = [], len(self.loader)
        for g in range(epoch * per + start, epoch * per + start + count):
            out.append(self.batch(*divmod(g, per)))
        return out
