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
    """A loader's place in its stream of epochs (see the module docstring). A pass is known by
    the id ``begin`` gives it, not by its epoch: after ``seek`` two passes can run the same
    epoch (a kept iterator's and the new one), and the old one's end must not end the new."""

    epoch: int = 0  # invariant: the epoch the next pass produces
    start: int = 0  # invariant: the batch the next pass starts at (0 unless resumed)
    # invariant: the passes begun and not ended, [id, epoch, batches handed out], the one that
    # handed out a batch last, last. That one is the pass in progress, until a pass ends: a
    # pass left suspended (a kept iterator) is not in progress again, unless it hands out
    # another batch (the outer loop, once a loop inside it over the same loader has ended).
    # (each change assigns a new tuple: another thread reading state_dict() or epoch while a
    # loop runs sees one whole, never a list half moved)
    running: tuple[tuple[int, int, int], ...] = ()
    live: bool = False  # invariant: running[-1] is the pass in progress
    begun: int = 0  # invariant: the passes begun so far, the next one's id

    @property
    def current(self) -> int:
        """The epoch of the pass in progress, else the one the next pass produces."""
        runs = self.running
        return runs[-1][1] if self.live and runs else self.epoch

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Start the next pass at batch ``batch`` of ``epoch``; a pass still running goes on
        with its own, no longer the one in progress."""
        self.epoch, self.start, self.running, self.live = epoch, batch, (), False

    def begin(self) -> tuple[int, int, int]:
        """A pass starts: its id, epoch and first batch. The cursor moves on to the next
        epoch."""
        epoch, start, run = self.epoch, self.start, self.begun
        self.epoch, self.start, self.begun = epoch + 1, 0, run + 1
        self.running = (*self.running, (run, epoch, start))
        self.live = True
        return run, epoch, start

    def handed(self, run: int, batch: int) -> None:
        """Pass ``run`` handed out ``batch``: it is the one in progress."""
        runs = self.running
        for begun, epoch, _ in runs:
            if begun == run:
                self.running = (*(r for r in runs if r[0] != run), (run, epoch, batch + 1))
                self.live = True
                return

    def end(self, run: int) -> None:
        """Pass ``run`` ended (or was dropped); a later pass may run already."""
        runs = self.running
        kept = tuple(r for r in runs if r[0] != run)
        if len(kept) < len(runs):
            self.live = self.live and runs[-1][0] != run
            self.running = kept

    def next(self, batches: int) -> tuple[int, int]:
        """The (epoch, batch) the loader yields next, of ``batches`` per epoch: after the last
        batch of a pass, where the next pass starts."""
        runs = self.running
        if self.live and runs and runs[-1][2] < batches:
            return runs[-1][1], runs[-1][2]
        return self.epoch, self.start
