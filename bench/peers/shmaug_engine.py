"""Contender 6: shmaug, as a plain ``Loader`` and as the ``Sequence`` Keras' adapter drives.

``ShmaugLoader`` iterates ``shmaug.Loader`` (fork or spawn); ``ShmaugSequence`` is
``shmaug.Sequence`` driven by ``PyDatasetAdapter`` exactly as under ``Model.fit``.
"""

from __future__ import annotations

from typing import Any, Iterator

from bench.peers._base import Base
from bench.peers.keras_dataset import KerasAdapter


class ShmaugLoader(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import shmaug

        self.loader = shmaug.Loader(self.source(), self.y, batch_size=self.bs,
                                    augment=self.augment, workers=self.workers, seed=0,
                                    start_method=self.method)

    def source(self) -> Any:
        """What the loader reads: the workload's array (a subclass: files)."""
        return self.x

    def epoch(self) -> Iterator[Any]:
        yield from self.loader

    def pids(self) -> list[int]:
        return list(self.loader.pids)

    def close(self) -> None:
        self.loader.close()


class ShmaugSequence(KerasAdapter):
    """``shmaug.Sequence`` driven by Keras' ``PyDatasetAdapter``, as under ``fit``."""

    full_warmup = False  # it asks Keras for no workers: no enqueuer, nothing stale

    def __init__(self, *a: Any) -> None:
        Base.__init__(self, *a)
        import shmaug
        from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

        self.ds = shmaug.Sequence(self.x, self.y, batch_size=self.bs, augment=self.augment,
                                  workers=self.workers, seed=0, start_method=self.method)
        self.adapter = PyDatasetAdapter(self.ds, shuffle=False)

    def pids(self) -> list[int]:
        return list(self.ds.loader.pids) if self.ds._loader is not None else []

    def close(self) -> None:
        self.ds.close()
