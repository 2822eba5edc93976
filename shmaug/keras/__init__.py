"""The Keras facade: a ``keras.utils.PyDataset`` over the engine's ``Loader``.

Public: ``Sequence`` (``shmaug.keras.sequence``), ``StallMonitor`` and ``EpochSync``
(``shmaug.keras.callbacks``). Internal: ``_passes`` (which epoch each of Keras' passes takes),
``_stack`` (who asks, read off the call stack), ``_idle`` (stopping unused workers) and
``_distribution`` (a process's shard under ``keras.distribution``).

The only part of shmaug that imports Keras, and only when one of the public names is used:
``import shmaug`` does not load this package, and its pure internals (``_passes``) import
without Keras installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .callbacks import EpochSync, StallMonitor
    from .sequence import Sequence

__all__ = ["EpochSync", "Sequence", "StallMonitor"]
_HOME = {"EpochSync": "callbacks", "Sequence": "sequence", "StallMonitor": "callbacks"}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # Tab completion: the public names and modules, as dir(shmaug) (not Any, importlib, ...).
    return sorted({*__all__, "callbacks", "sequence"})
