"""Contenders 1 and 2: what a Keras user writes, a ``keras.utils.PyDataset``.

``KerasSingle`` calls ``__getitem__`` in this process; ``KerasAdapter`` gives the dataset
``workers=N`` (threads, or processes under fork / spawn) and drives it through Keras'
``PyDatasetAdapter`` exactly as ``Model.fit`` does (``on_epoch_begin``, the numpy iterator,
``on_epoch_end``); ``ShmaugSequence`` (contender 6 as Keras drives it) reuses that code.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Iterator

import keras
import numpy as np

from bench.common.workloads import make_batch
from bench.suite.peers._base import Base


class AugDataset(keras.utils.PyDataset):  # type: ignore[misc]
    """What a Keras user writes: gather and augment each sample in ``__getitem__``."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch_size: int, augment: Any,
                 out_dtype: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.x, self.y, self.bs, self.augment, self.out_dtype = x, y, batch_size, augment, out_dtype

    def __len__(self) -> int:
        return -(-len(self.x) // self.bs)

    def __getitem__(self, i: int) -> Any:
        lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
        return make_batch(self.x, self.augment, lo, hi, self.out_dtype), self.y[lo:hi]


class KerasSingle(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.ds = AugDataset(self.x, self.y, self.bs, self.augment, self.out_dtype)

    def epoch(self) -> Iterator[Any]:
        for i in range(len(self.ds)):
            yield self.ds[i]

    def keras_data(self) -> Any:
        return self.ds


class KerasAdapter(Base):
    """``PyDataset(workers=N)`` driven the way ``fit`` drives it (its ``PyDatasetAdapter``)."""

    full_warmup = True

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

        if self.method:
            mp.set_start_method(self.method, force=True)  # Keras' pool follows it
        self.ds = AugDataset(self.x, self.y, self.bs, self.augment, self.out_dtype,
                             workers=self.workers, use_multiprocessing=self.method is not None)
        self.adapter = PyDatasetAdapter(self.ds, shuffle=False)

    def epoch(self) -> Iterator[Any]:
        self.adapter.on_epoch_begin()
        try:
            yield from self.adapter.get_numpy_iterator()
        finally:
            self.adapter.on_epoch_end()

    def keras_data(self) -> Any:
        return self.ds


class ShmaugSequence(KerasAdapter):
    """``shmaug.Sequence`` driven by Keras' ``PyDatasetAdapter``, as under ``fit``."""

    full_warmup = False  # it asks Keras for no workers: no enqueuer, nothing stale
    pin_memory: bool | None = None  # the Sequence's default

    def __init__(self, *a: Any) -> None:
        Base.__init__(self, *a)
        import shmaug
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

        self.ds = shmaug.Sequence(self.x, self.y, batch_size=self.bs, augment=self.augment,
                                  workers=self.workers, seed=0, start_method=self.method,
                                  pin_memory=self.pin_memory)
        self.adapter = PyDatasetAdapter(self.ds, shuffle=False)

    def pids(self) -> list[int]:
        # Only a loader already running: Sequence.loader would start one. Where the Sequence
        # keeps it is private (it moved once, and every run of this contender then failed).
        runtime = getattr(self.ds, "_runtime", None)
        loader = getattr(runtime, "loader", None) or getattr(self.ds, "_loader", None)
        return list(loader.pids) if loader is not None else []

    def close(self) -> None:
        self.ds.close()


class ShmaugSequencePageable(ShmaugSequence):
    """The same, its ring left pageable where the Sequence would page-lock it (a GPU)."""

    pin_memory = False
