"""``workers=0``: the slice loop of the workers, run in the main process.

What a ``WorkerPool`` is to the loader (``submit``, ``poll``, ``close``), with no process:
``poll`` runs one task on the caller's thread, so a user can step through an op with a
debugger and get the very batches the workers give.
"""

from __future__ import annotations

from collections import deque

from ..handoff.ring import OutputRing
from ...seeding import globals_kept
from ..plan.schedule import Task
from .runner import SliceRunner
from .wire import Result


class InlinePool:
    """``workers=0``: the same ``SliceRunner`` in the main process, one task per ``poll``.

    Lets a user step through an op with a debugger and get the very batches the workers give.
    """

    workers = 0
    respawns = 0
    pids: list[int] = []

    def __init__(self, runner: SliceRunner) -> None:
        self._runner = runner
        self._pending: deque[Task] = deque()  # invariant: submitted, not yet run
        self.status = None

    def attach_ring(self, ring: OutputRing) -> None:
        self._runner.out, self._runner.target_out = ring.view, ring.targets

    def submit(self, task: Task) -> None:
        self._pending.append(task)

    def cancel_pending(self, tickets: set[int]) -> list[int]:
        dropped = [t.ticket for t in self._pending if t.ticket in tickets]
        self._pending = deque(t for t in self._pending if t.ticket not in tickets)
        return dropped

    def poll(self, timeout_s: float) -> list[Result]:
        if not self._pending or timeout_s <= 0:  # nothing runs unless we are willing to wait
            return []
        task = self._pending.popleft()
        with globals_kept():  # the user's own: ops may seed them (per sample, `from_pil`)
            return [self._runner.run(task)]

    def close(self) -> None:
        self._pending.clear()
