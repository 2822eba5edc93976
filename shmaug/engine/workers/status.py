"""The workers' status block: one row of named float64 fields per worker slot, in shared memory.

Each worker writes only its own row (``WorkerStatus``), without a lock: which task it runs and
since when, the sample it is on, whether it has started, and its busy seconds and task count.
The parent reads every row (``StatusBlock``) to blame a death or a timeout on a task, to see a
new worker ready, and to measure how busy the workers are (``Loader.stats()``,
``workers="auto"``). Nothing outside this module computes where a field sits.

The block itself is one of the store's arrays, made and unlinked by ``WorkerPool``; this module
owns only its layout. Tickets are stored as float64, exact below 2**53.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...whole_decodes import REASONS

# The fields of one row, in order: their offsets, and how many a row holds. The tests and the
# pool size the block with ``StatusBlock.size``; a row's fields are read by name below.
BUSY_S, CURRENT_INDEX, TASKS_DONE, READY, TICKET, STARTED, WHOLE_DECODES = range(7)
# then one count per reason of ``whole_decodes.REASONS``: photos decoded whole
STATUS_FIELDS = WHOLE_DECODES + len(REASONS)
IDLE = -1.0  # the TICKET of a worker between tasks


class _Field:
    """One named float64 field of a ``WorkerStatus`` row, read and written in place."""

    __slots__ = ("offset",)

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __get__(self, row: WorkerStatus, owner: type | None = None) -> float:
        return float(row.array[row.base + self.offset])

    def __set__(self, row: WorkerStatus, value: float) -> None:
        row.array[row.base + self.offset] = value


class WorkerStatus:
    """One worker's row of the block, by name: what the worker writes, what the parent reads.

    ``array`` is the whole block (a numpy float64 array, or any sequence of floats); the row
    starts at ``base``.
    """

    __slots__ = ("array", "base")

    busy_s = _Field(BUSY_S)  # seconds spent in tasks, summed (written by the worker only)
    current_index = _Field(CURRENT_INDEX)  # the sample being made: whom a death blames
    tasks_done = _Field(TASKS_DONE)  # tasks answered
    ready = _Field(READY)  # 1.0 once attached and unpickled: start-up is over
    ticket = _Field(TICKET)  # the task being run, or IDLE
    started = _Field(STARTED)  # time.monotonic() when that task began

    def __init__(self, array: Any, wid: int) -> None:
        self.array = array  # invariant: the block this row belongs to
        self.base = wid * STATUS_FIELDS  # invariant: where the row starts in it

    @property
    def idle(self) -> bool:
        """Between tasks (or never given one)."""
        return self.ticket == IDLE

    def reset(self) -> None:
        """A new worker in this slot: not ready, running nothing (its figures carry on)."""
        self.ready, self.ticket = 0.0, IDLE

    def add_whole_decodes(self, new: tuple[int, ...]) -> None:
        """Photos this worker decoded whole since it last said, by reason (in ``REASONS``'
        order)."""
        for offset, n in enumerate(new, WHOLE_DECODES):
            self.array[self.base + offset] += n


class StatusBlock:
    """Every worker slot's row over one block (the parent's view); ``row(wid)`` by slot."""

    __slots__ = ("array", "_rows")

    def __init__(self, array: Any) -> None:
        self.array = array  # invariant: STATUS_FIELDS floats per slot
        self._rows = [WorkerStatus(array, wid) for wid in range(len(array) // STATUS_FIELDS)]

    @staticmethod
    def size(slots: int) -> int:
        """How many float64 a block for ``slots`` worker slots holds."""
        return slots * STATUS_FIELDS

    def row(self, wid: int) -> WorkerStatus:
        return self._rows[wid]

    def busy_s(self) -> list[float]:
        """Each slot's busy seconds so far."""
        return [row.busy_s for row in self._rows]

    def busy_total(self) -> float:
        """Every slot's busy seconds so far, summed."""
        return float(sum(row.busy_s for row in self._rows))

    def tasks_done(self) -> float:
        """Tasks answered by every slot, summed."""
        return sum(row.tasks_done for row in self._rows)

    def whole_decodes(self) -> tuple[float, ...]:
        """Photos decoded whole by every slot, by reason (in ``REASONS``' order)."""
        rows = np.asarray(self.array).reshape(-1, STATUS_FIELDS)
        return tuple(rows[:, WHOLE_DECODES:].sum(axis=0).tolist())
