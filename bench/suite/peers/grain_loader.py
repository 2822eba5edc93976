"""Contender 5 (with PyTorch): Grain, started the way its docs start a multiprocess pipeline.

    MapDataset.source(Samples(x, y))               random access to (image, id)
      .random_map(Augment(...), seed=0)            Grain's per-element RNG, see below
      .batch(batch_size)                           each epoch batched on its own, last batch kept
        + enable_shared_memory_output()            workers build each batch in shared memory
      .repeat()                                    one endless stream, reseeded every epoch
      .to_iter_dataset(ReadOptions(num_threads=0)) in-memory data: no reader threads
      .mp_prefetch(MultiprocessingOptions(num_workers=N))   N worker processes (always spawn)

Why the ``Dataset`` API and not ``grain.DataLoader(worker_count=N)``: Grain 0.2.x builds the
DataLoader from these same pieces (``DataLoader._create_dataset``: ``to_iter_dataset``, the
operations, ``enable_shared_memory_output``, ``mp_prefetch``), but its ``IndexSampler`` joins
the epochs before ``Batch``, so when ``n % batch_size != 0`` (W1 20,000 / 256, W2 2,000 / 64) a
batch straddles two epochs and the per-epoch exactly-once check could not hold for it.
``MapDataset.batch`` batches each epoch separately.

Randomness is Grain's own: ``random_map`` hands the transform a ``np.random.Generator``
(Philox) whose counter is reset to ``(seed, element index)``; after ``repeat()`` the index of
sample ``i`` in epoch ``e`` is ``e * n + i``, so each (epoch, sample) gets its own stream
whichever worker runs it. ``ReadOptions(num_threads=0)`` follows Grain's advice for data
already in memory (``ReadOptions`` docstring: threads only add GIL contention).

What a Grain user pays here, and the table shows: ``mp_prefetch`` always spawns; each worker
re-imports the main script (this suite's child imports TensorFlow first, like a training
script) and receives the whole pipeline, dataset included, by ``cloudpickle`` (Grain's
shared ``InMemoryDataSource`` holds only scalars, strings and bytes, not arrays). Batches come
back as Grain ``SharedMemoryArray`` views, not copied out; Grain unlinks each block when the
array is garbage collected.
"""

from __future__ import annotations

from typing import Any, Iterator

import grain
import numpy as np

from bench.suite.peers._base import Base


class Samples:
    """A ``RandomAccessDataSource`` over arrays already in memory: ``(image, id)`` by index."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[np.ndarray, Any]:
        return self.x[i], self.y[i]


class Augment(grain.transforms.RandomMap):  # type: ignore[misc]
    """The workload's ``fn(image, rng)`` as a Grain ``RandomMap``, with Grain's rng."""

    def __init__(self, augment: Any, out_dtype: Any) -> None:
        self.augment, self.out_dtype = augment, out_dtype

    def random_map(self, element: tuple[np.ndarray, Any], rng: np.random.Generator) -> Any:
        image, target = element
        return self.augment(image, rng).astype(self.out_dtype, copy=False), target


class Grain(Base):
    """One ``mp_prefetch`` iterator for the contender's whole life; ``epoch()`` takes ``nb``
    batches from it (its workers stay up between epochs, as ``persistent_workers`` would)."""

    # One stream across epochs: a warm-up that stopped after a few batches would shift every
    # later epoch's boundary, so its warm-up is a whole epoch.
    full_warmup = True

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        ds = grain.MapDataset.source(Samples(self.x, self.y))
        if self.augment is not None:
            ds = ds.random_map(Augment(self.augment, self.out_dtype), seed=0)
        batched = ds.batch(self.bs)
        if self.workers > 0:  # as grain.DataLoader does: only when there are workers
            batched.enable_shared_memory_output()
        pipeline = batched.repeat().to_iter_dataset(grain.ReadOptions(num_threads=0))
        if self.workers > 0:
            pipeline = pipeline.mp_prefetch(grain.MultiprocessingOptions(num_workers=self.workers))
        self.it = iter(pipeline)

    def epoch(self) -> Iterator[Any]:
        for _ in range(self.nb):
            yield next(self.it)

    def close(self) -> None:
        self.it.close()  # Grain's advice: close an mp_prefetch iterator, do not wait for GC
