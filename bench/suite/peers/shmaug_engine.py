"""Contender 6: shmaug as a plain ``Loader`` (fork or spawn). Imports no Keras: the
image-folder bench (``bench.files``) builds on it too. The ``Sequence`` Keras' adapter drives
is ``keras_dataset.ShmaugSequence``.
"""

from __future__ import annotations

from typing import Any, Iterator

from bench.suite.peers._base import Base


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
