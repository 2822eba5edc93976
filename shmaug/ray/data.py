"""A shmaug pipeline inside Ray Data: ``dataset.map_batches(AugmentBatches(pipeline, seed=0))``.

For data that already lives in a Ray Dataset. Each row is augmented with the stream a
``Loader`` with the same seed gives that sample in that epoch (keyed by the row's dataset
index, in an ``id`` column), so the two agree sample for sample, whichever Ray Data task or
node makes the row, and in whatever order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..engine.config import checks as check
from ..errors import ArgumentError
from ..seeding import SampleSeeder, global_rng_use, globals_kept


class AugmentBatches:
    """A ``map_batches`` function (``batch_format="numpy"``) that augments each row's image.

    Args:
        augment: ``fn(image, rng) -> image``, as a ``Loader`` takes it.
        seed: the ``Loader``'s seed.
        epoch: the epoch whose streams to use (a new one each pass, as a ``Loader`` does).
        image: the column of images (each row one image).
        index: the column of each row's dataset index (what a ``Loader`` keys streams by).

    Example:
        >>> ds = ray.data.from_items([{"image": im, "id": i} for i, im in enumerate(x)])
        >>> ds.map_batches(shmaug.ray.AugmentBatches(pipeline, seed=0), batch_format="numpy")
    """

    def __init__(self, augment: Callable[[np.ndarray, np.random.Generator], Any], *,
                 seed: int, epoch: int = 0, image: str = "image", index: str = "id") -> None:
        self.augment = check.callable_or_none("augment", augment)
        self.seed = check.seed(seed)
        self.epoch = check.non_negative_int("epoch", epoch)
        self.image, self.index = image, index
        # An op that may draw from `random`, `np.random` or torch gets them seeded per sample.
        self._globals = global_rng_use(augment) is not False

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for column in (self.image, self.index):
            if column not in batch:
                raise ArgumentError(
                    f"shmaug.ray.AugmentBatches needs a column {column!r}; the batch has "
                    f"{sorted(batch)}. Fix: name the columns with `image=` and `index=`, or "
                    f"add the dataset index (e.g. `ds.add_column`).")
        seeder = SampleSeeder(self.seed, seed_globals=self._globals, seed_torch=self._globals)
        indices = np.asarray(batch[self.index], dtype=np.int64)
        with globals_kept():
            out = [np.asarray(self.augment(image, rng)) for image, rng in
                   zip(batch[self.image], seeder.streams(self.epoch, indices))]
        return {**batch, self.image: np.stack(out)}
