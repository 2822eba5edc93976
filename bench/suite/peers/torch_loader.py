"""Contender 5: PyTorch's ``DataLoader(num_workers=N, persistent_workers=True)``.

A map-style dataset returns one augmented sample and its id; the collate function stacks them
into numpy first so every dtype (float16 included) takes the same path. torch is optional:
without it, building this contender raises the ``ImportError`` the suite reports as skipped.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from bench.suite.peers._base import Base


class TorchSamples:
    """A map-style dataset: one augmented sample and its id."""

    def __init__(self, x: np.ndarray, y: np.ndarray, augment: Any, out_dtype: Any) -> None:
        self.x, self.y, self.augment, self.out_dtype = x, y, augment, out_dtype

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, j: int) -> Any:
        if self.augment is None:
            return self.x[j], self.y[j]
        return self.augment(self.x[j], np.random.default_rng()).astype(self.out_dtype, copy=False), self.y[j]


def _torch_collate(items: list[Any]) -> Any:
    """Stack into numpy (float16 has no default torch collate path issue, but keep it equal)."""
    import torch

    xb = np.stack([a for a, _ in items])
    return torch.from_numpy(xb), torch.from_numpy(np.array([b for _, b in items]))


class Torch(Base):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        import torch  # noqa: F401  -- ImportError is reported as "skipped"
        from torch.utils.data import DataLoader

        self.loader = DataLoader(TorchSamples(self.x, self.y, self.augment, self.out_dtype),
                                 batch_size=self.bs, shuffle=False, num_workers=self.workers,
                                 persistent_workers=True, collate_fn=_torch_collate,
                                 multiprocessing_context=self.method)

    def epoch(self) -> Iterator[Any]:
        for xb, yb in self.loader:
            yield xb.numpy(), yb.numpy()

    def close(self) -> None:
        it = getattr(self.loader, "_iterator", None)
        if it is not None:
            it._shutdown_workers()
