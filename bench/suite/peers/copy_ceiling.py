"""The ceiling for W3 (no augmentation): slice and copy each batch in this process."""

from __future__ import annotations

from typing import Any, Iterator

from bench.suite.peers._base import Base


class Copy(Base):
    """The memory-copy ceiling: slice and copy each batch in this process."""

    def epoch(self) -> Iterator[Any]:
        for i in range(self.nb):
            lo, hi = i * self.bs, min((i + 1) * self.bs, len(self.x))
            yield self.x[lo:hi].copy(), self.y[lo:hi]
