"""Contender 3: the hand-rolled recipe users write when Keras' own workers let them down.

The dataset is copied once into a ``multiprocessing.RawArray``; a ``keras.utils.PyDataset``
holds an ``mp.Pool(N, initializer)`` whose workers view that array; ``__getitem__`` cuts the
batch into N index slices, ``starmap``s them, and concatenates what comes back (pickled).
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Iterator

import keras
import numpy as np

from bench.common.workloads import make_batch
from bench.suite.peers._base import Base


_POOL: dict[str, Any] = {}


def _pool_init(raw: Any, shape: tuple[int, ...], dtype: str, augment: Any, out_dtype: Any) -> None:
    _POOL["x"] = np.frombuffer(raw, dtype=dtype).reshape(shape)
    _POOL["augment"], _POOL["out_dtype"] = augment, out_dtype


def _pool_work(lo: int, hi: int) -> np.ndarray:
    return make_batch(_POOL["x"], _POOL["augment"], lo, hi, _POOL["out_dtype"])


class PoolSequence(keras.utils.PyDataset):  # type: ignore[misc]
    """The recipe: dataset in a RawArray, an ``mp.Pool`` held by a Sequence, ``starmap`` over
    index slices in ``__getitem__``, results concatenated."""

    def __init__(self, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
                 workers: int, method: str) -> None:
        super().__init__()
        ctx = mp.get_context(method)
        self.raw = ctx.RawArray("b", x.nbytes)
        np.frombuffer(self.raw, dtype=x.dtype).reshape(x.shape)[...] = x
        self.pool = ctx.Pool(workers, initializer=_pool_init,
                             initargs=(self.raw, x.shape, x.dtype.str, augment, out_dtype))
        self.n, self.y, self.bs, self.workers = len(x), y, bs, workers

    def __len__(self) -> int:
        return -(-self.n // self.bs)

    def __getitem__(self, i: int) -> Any:
        lo, hi = i * self.bs, min((i + 1) * self.bs, self.n)
        cuts = np.linspace(lo, hi, self.workers + 1).astype(int)
        parts = self.pool.starmap(_pool_work, [(int(a), int(b)) for a, b in zip(cuts, cuts[1:])])
        return np.concatenate(parts), self.y[lo:hi]


class Pool(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.seq = PoolSequence(self.x, self.y, self.bs, self.augment, self.out_dtype,
                                self.workers, self.method or "fork")

    def epoch(self) -> Iterator[Any]:
        for i in range(len(self.seq)):
            yield self.seq[i]

    def keras_data(self) -> Any:
        return self.seq

    def close(self) -> None:
        self.seq.pool.terminate()
        self.seq.pool.join()
