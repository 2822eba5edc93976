"""The Keras facade: a ``keras.utils.PyDataset`` over the engine's ``Loader``.

Public: ``Sequence`` (``shmaug.keras.sequence``), ``StallMonitor`` and ``EpochSync``
(``shmaug.keras.callbacks``). Internal: ``_passes`` (which epoch each of Keras' passes takes)
and ``_distribution`` (a process's shard under ``keras.distribution``).

The only part of shmaug that imports Keras, and only when one of these names is used
(``import shmaug`` does not load this package).
"""

from .callbacks import EpochSync, StallMonitor
from .sequence import Sequence

__all__ = ["EpochSync", "Sequence", "StallMonitor"]
