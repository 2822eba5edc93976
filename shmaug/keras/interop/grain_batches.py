"""A ``Sequence`` as a Grain ``MapDataset`` (``to_grain``): what keras-hub's task models
(``RetinaNetObjectDetector``, ``DeepLabV3ImageSegmenter``, ...) take in ``fit`` on every
backend, where a ``PyDataset`` is refused ("Could not build a TypeSpec").

Element ``i`` is a whole batch: batch ``i % len(seq)`` of epoch ``first + i // len(seq)``,
read through ``Sequence.batch``, so it is the batch a ``fit`` pass on the Sequence itself would
serve there (shuffled, and mixed under a ``mix``, unless the Sequence has ``shuffle=False``).
Grain reads an index past the length as the next epoch (``MapDataset.repeat`` passes it on
unchanged), which is how keras-hub's ``fit`` runs its epochs: ``ds.repeat(epochs)`` with the
length declared, so Keras never runs the data dry and warns. Random access keeps Grain's
threads, which ask ahead and out of order, exact: a batch is a pure function of (seed, epoch,
index). Grain is imported here, and this module only when ``to_grain`` is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grain

from ...engine.config import checks as check

if TYPE_CHECKING:
    from ..sequence import Sequence


class SequenceBatches(grain.MapDataset):  # type: ignore[misc]
    """The batches of a ``Sequence``, one epoch per ``len(seq)`` indices (see the module)."""

    def __init__(self, seq: Sequence, first_epoch: int) -> None:
        super().__init__()
        self._seq, self._first_epoch = seq, first_epoch
        self._length = len(seq)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):  # Grain's contract: a slice is a dataset
            return self.slice(index)
        epoch, position = divmod(int(index), self._length)
        return self._seq.batch(position, epoch=self._first_epoch + epoch)

    def __str__(self) -> str:
        return f"SequenceBatches(batches={self._length}, first_epoch={self._first_epoch})"


def to_grain(seq: Sequence, epoch: int | None = None) -> SequenceBatches:
    """``seq`` as a Grain ``MapDataset`` of batches (see ``Sequence.to_grain``)."""
    first = seq.epoch if epoch is None else check.non_negative_int("epoch", epoch)
    return SequenceBatches(seq, first)
