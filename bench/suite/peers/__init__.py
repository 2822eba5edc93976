"""The suite's contenders, one module per family, and the registry that names them.

A contender is built from ``(x, y, batch_size, augment, out_dtype, workers, start_method)``
and offers ``epoch()`` (an iterator of ``(xb, yb)`` numpy batches in order), ``pids()`` (its
worker processes), ``keras_data()`` (what ``Model.fit`` is given, or None) and ``close()``;
``_base.Base`` holds what they share. The families:

- ``keras_dataset``: ``keras.utils.PyDataset`` in one process, and with workers (threads, fork,
  spawn) driven through Keras' ``PyDatasetAdapter`` exactly as ``fit`` drives it;
- ``pool_recipe``: the hand-rolled RawArray + ``mp.Pool`` Sequence;
- ``tf_data``: ``tf.data`` ``from_generator`` and ``numpy_function`` map;
- ``torch_loader``: PyTorch ``DataLoader(num_workers=N, persistent_workers=True)``;
- ``grain_loader``: Grain ``MapDataset`` + ``mp_prefetch`` (Grain always spawns);
- ``shmaug_engine``: ``shmaug.Loader`` (``keras_dataset`` has ``shmaug.Sequence`` as Keras
  drives it);
- ``copy_ceiling``: the one-process memory copy.

A family module is imported only when one of its contenders is built (``build``), so the suite's
parent process never imports TensorFlow, torch or grain, and a missing optional library
surfaces as the ``ImportError`` the child reports as "skipped".
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from bench.common.harness import guarded, wait_gone
from bench.suite.peers._base import Base


@dataclass(frozen=True)
class Entry:
    """Where a contender lives: ``bench.suite.peers.<module>.<cls>``, started with ``method``."""

    module: str
    cls: str
    method: str | None  # multiprocessing start method; None: no processes of its own
    label: str  # how tables and plots name it
    library: str | None = None  # an optional library it needs beyond TensorFlow, Keras, shmaug


def missing_library(name: str) -> str | None:
    """The ``ModuleNotFoundError`` text a child would report for contender ``name`` when its
    optional library (torch, grain) is not installed; None when it is, or needs none. Lets a
    driver skip the child (a process that imports TensorFlow, seconds) to learn just that."""
    import importlib.util

    library = REGISTRY[name].library
    if library is None or importlib.util.find_spec(library) is not None:
        return None
    return f"ModuleNotFoundError: No module named '{library}'"


REGISTRY: dict[str, Entry] = {
    "keras_single": Entry("keras_dataset", "KerasSingle", None, "1. Keras PyDataset, 1 process"),
    "keras_threads": Entry("keras_dataset", "KerasAdapter", None, "2. Keras PyDataset, threads"),
    "keras_fork": Entry("keras_dataset", "KerasAdapter", "fork",
                        "2. Keras PyDataset, multiprocessing (fork)"),
    "keras_spawn": Entry("keras_dataset", "KerasAdapter", "spawn",
                         "2. Keras PyDataset, multiprocessing (spawn)"),
    "pool": Entry("pool_recipe", "Pool", "fork", "3. Pool + RawArray recipe (fork)"),
    "pool_spawn": Entry("pool_recipe", "Pool", "spawn", "3. Pool + RawArray recipe (spawn)"),
    "tfdata_gen": Entry("tf_data", "TfGen", None, "4. tf.data from_generator + prefetch"),
    "tfdata_map": Entry("tf_data", "TfMap", None, "4. tf.data numpy_function map(AUTOTUNE)"),
    "torch": Entry("torch_loader", "Torch", "fork", "5. PyTorch DataLoader (fork)",
                   "torch"),
    "grain": Entry("grain_loader", "Grain", "spawn", "5. Grain MapDataset + mp_prefetch (spawn)",
                   "grain"),
    "shmaug_loader": Entry("shmaug_engine", "ShmaugLoader", "fork", "6. shmaug Loader (fork)"),
    "shmaug_spawn": Entry("shmaug_engine", "ShmaugLoader", "spawn", "6. shmaug Loader (spawn)"),
    "shmaug_sequence": Entry("keras_dataset", "ShmaugSequence", "fork",
                             "6. shmaug Sequence via Keras' adapter"),
    "shmaug_sequence_pageable": Entry("keras_dataset", "ShmaugSequencePageable", "fork",
                                      "6. shmaug Sequence, ring not page-locked"),
    "copy": Entry("copy_ceiling", "Copy", None, "ceiling: copy in 1 process"),
}


def build(name: str, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
          workers: int) -> Base:
    """Contender ``name`` over ``(x, y)``; raises ImportError when its library is missing."""
    entry = REGISTRY[name]
    cls = getattr(importlib.import_module(f"bench.suite.peers.{entry.module}"), entry.cls)
    contender: Base = cls(x, y, bs, augment, out_dtype, workers, entry.method)
    return contender


@contextlib.contextmanager
def running(name: str, x: np.ndarray, y: np.ndarray, bs: int, augment: Any, out_dtype: Any,
            workers: int) -> Iterator[Base]:
    """``build``, and whatever happens inside, close the contender and see its workers gone."""
    contender = build(name, x, y, bs, augment, out_dtype, workers)
    try:
        yield contender
    finally:
        pids = guarded(contender.pids, 10).value or []
        guarded(contender.close, 15)
        wait_gone(pids, 10)


__all__ = ["REGISTRY", "Base", "Entry", "build", "missing_library", "running"]
