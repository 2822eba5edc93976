"""Sample 0, made by a worker before the ring exists: it tells the ring its sample shape and
dtype, and the loader the range of the data the workers read.

User code runs only where workers run it, so the probe is a task like any other: a probe that
hangs, raises or crashes its worker is an exception here, not a hung or crashed main process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import OutputMismatchError
from .reports import as_error
from ..handoff.prefetch import RESULTS_POLL_S
from ...memory.store import dtype_of
from .wire import Probe, Probed, probe_task

_PROBE_TICKET = 0  # the Prefetcher's tickets start at 1 (and stay exact in the float64 status)


def await_probe(pool: Any, timeout: float | None) -> Probe:
    """Run the probe (sample 0) on ``pool`` and wait for its answer: the same timeout, death
    handling and error reporting as every task, so a probe that hangs, raises or crashes its
    worker is an exception here, not a hung or crashed main process."""
    pool.submit(probe_task(_PROBE_TICKET))
    while True:
        for result in pool.poll(RESULTS_POLL_S):
            if result.ticket == _PROBE_TICKET:
                if isinstance(result, Probed):
                    return result.probe
                raise as_error(result, timeout)


def output_of(probe: Probe, shape: tuple[int, ...] | None, dtype: np.dtype[Any] | None
              ) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The ring's sample shape and dtype: as declared, else as the probe saw them."""
    if shape is not None and shape != probe.shape:
        raise OutputMismatchError(
            f"`output_shape` is {shape} but sample index 0 came out (of `augment`, or as `x` "
            f"or `load` gives it where there is none) with shape {probe.shape}. Fix: pass "
            f"output_shape={probe.shape}, or leave it out to learn it from sample 0; to change "
            f"the size, resize in `augment` (Op('resize', height=..., width=...))."
        )
    return probe.shape, dtype_of(probe.dtype) if dtype is None else dtype

