"""The actor that makes batches on a Ray node: a local ``Loader`` of the options the trainer
shipped once, on that node's cores.

It runs shmaug's own worker pool (its processes, its shared memory, its ring) and hands each
batch out as an array, which Ray moves through its object store. It prefetches the batches the
trainer will ask it for next (its stripe of the epoch), not simply the following ones.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import numpy as np

from ..engine.config.options import Options, StartMethod, WorkerOptions
from ..engine.handoff.prefetch import EpochBatch
from ..engine.loader import serve, start


class Maker:
    """One node's batch maker (run as a Ray actor by ``RayFleet``).

    Args:
        options: the trainer's loader options (``engine.remote.shipped``), from the object
            store: an in-memory dataset arrives there once per node, read in place.
        workers: shmaug worker processes to run on this node.
        start_method: theirs (forkserver by default: a Ray worker runs threads, and fork after
            threads start can deadlock).
    """

    def __init__(self, options: Options, workers: int,
                 start_method: StartMethod | None) -> None:
        local = WorkerOptions(workers=workers, start_method=start_method,
                              max_queue_size=options.settings.workers.max_queue_size,
                              timeout=options.settings.workers.timeout, copy=True)
        self._loader = start(replace(options, settings=replace(options.settings,
                                                                workers=local)))

    def ready(self) -> tuple[tuple[int, ...], str, tuple[float, float] | None, int]:
        """One sample's output shape and dtype, the images' value range, and this pid."""
        loader = self._loader
        return loader.output_shape, loader.output_dtype.str, loader.value_range, os.getpid()

    def make(self, key: int, index: int, ahead: list[EpochBatch]) -> np.ndarray:
        """Batch ``index`` of epoch key ``key``; ``ahead``: the ones asked of it next."""
        return serve(self._loader, key, index, ahead)

    def pids(self) -> list[int]:
        """This actor's process and its workers'."""
        return [os.getpid(), *self._loader.pids]

    def close(self) -> Any:
        """Stop the workers and free the node's shared memory."""
        self._loader.close()
