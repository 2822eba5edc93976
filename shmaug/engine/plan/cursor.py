"""Where a loader's iteration stands: the epoch and batch its next pass starts at, and the pass
in progress. Pure bookkeeping, what ``Loader.state_dict`` saves and ``load_state_dict`` sets.

A pass moves the cursor on as it starts, so a pass cut short (a ``break`` after
``steps_per_epoch`` batches, a kept iterator) never makes the next pass repeat its epoch; while
it runs, the cursor counts the batches it has handed out, so a state saved inside the loop
resumes right after the last one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Cursor:
    """A loader's place in its stream of epochs (see the module docstring)."""

    epoch: int = 0  # invariant: the epoch the next pass produces
    start: int = 0  # invariant: the batch the next pass starts at (0 unless resumed)
    running: int | None = None  # the epoch of the pass in progress, if any
    done: int = 0  # invariant: batches the pass in progress has handed out

    @property
    def current(self) -> int:
        """The epoch of the pass in progress, else the one the next pass produces."""
        return self.epoch if self.running is None else self.running

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Start the next pass at batch ``batch`` of ``epoch``; a pass still running goes on
        with its own."""
        self.epoch, self.start, self.running = epoch, batch, None

    def begin(self) -> tuple[int, int]:
        """A pass starts: its epoch and first batch. The cursor moves on to the next epoch."""
        epoch, start = self.epoch, self.start
        self.epoch, self.start = epoch + 1, 0
        self.running, self.done = epoch, start
        return epoch, start

    def handed(self, batch: int) -> None:
        """The pass in progress handed out ``batch``."""
        self.done = batch + 1

    def end(self, epoch: int) -> None:
        """The pass over ``epoch`` ended (or was dropped); a later pass may run already."""
        if self.running == epoch:
            self.running = None

    def next(self, batches: int) -> tuple[int, int]:
        """The (epoch, batch) the loader yields next, of ``batches`` per epoch: after the last
        batch of a pass, the next epoch's first."""
        if self.running is not None and self.done < batches:
            return self.running, self.done
        if self.running is not None:  # the pass handed out its last batch
            return self.running + 1, 0
        return self.epoch, self.start
