"""``workers="auto"`` at work: each epoch's figures measured, the rule asked between epochs.

``AutoWorkers`` sits in the ``Loader``'s ``batch()``: after each batch it notes the consumer's
wait, whether the batch was ready, and the workers' busy seconds so far (the pool's shared
status array); when the consumer asks for a batch of another epoch, the epoch before is
closed and ``_autotune.decide`` says how many workers the next one gets. The Loader resizes
the pool (``WorkerPool.resize``). Epochs are told apart by the batch keys the consumer asks
for, so this works the same under a plain ``for`` loop, ``shmaug.Sequence`` and random access.

An epoch counts from its first ask to its last batch handed out: the time between epochs
(validation, checkpoints) is the consumer's business, and counting it would make the
workers look idle. Epochs too short to judge are pooled with the next ones until they are
long enough (``_autotune.MIN_BATCHES`` and ``MIN_SECONDS``); the first is judged alone (it
holds the start-up, and the rule leaves it out).

It owns no process and no memory; it reads the busy seconds the pool keeps (``busy_s``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import _autotune
from ._autotune import Decision, EpochFigures, Tuning, decide

log = logging.getLogger(__name__)

HISTORY = 64  # decisions kept (the latest last)


class AutoWorkers:
    """Figures of the epochs in progress, and the decisions taken so far.

    Args:
        cores: the most workers there may be (the usable cores).
        busy_s: the workers' busy seconds so far, summed over every status slot, those of
            workers retiring after a shrink too (they work for the epoch they are in);
            ``WorkerPool.busy_s``, which reads the pool's status wherever it lives.
    """

    def __init__(self, cores: int, busy_s: Callable[[], float]) -> None:
        self.cores = cores
        self._busy_s = busy_s
        self.state = Tuning()  # the rule's memory
        self.decisions: list[tuple[int, Decision]] = []  # (last epoch judged, decision)
        self._epoch: int | None = None  # invariant: the epoch being measured (None: none yet)
        # The epoch in progress: invariant: its first ask, its last hand-out, and the
        # workers' busy seconds at both.
        self._t_first = self._t_last = self._busy_first = self._busy_last = 0.0
        # Pooled figures of the epochs closed but not judged yet (and the one in progress
        # once closed): invariant: batches, ready ones, seconds, wait, busy seconds.
        self._batches = self._hits = self._short_misses = 0
        self._seconds = self._wait_s = self._busy = 0.0

    @property
    def last(self) -> Decision | None:
        return self.decisions[-1][1] if self.decisions else None

    def before(self, epoch: int, workers: int, now: float) -> int | None:
        """At an ask for a batch of ``epoch``, with ``workers`` running: the count to resize to
        first, when the ask starts another epoch and the rule says to change; else None."""
        if epoch == self._epoch:
            return None
        change = None
        if self._epoch is not None:
            self._seconds += self._t_last - self._t_first
            self._busy += self._busy_last - self._busy_first
            if self._judgeable():
                change = self._judge(self._epoch, workers)
        self._epoch = epoch
        self._t_first = self._t_last = now
        self._busy_first = self._busy_last = self._busy_s()
        return change

    def after(self, waited_s: float, hit: bool, now: float, short: bool = False) -> None:
        """A batch of the epoch in progress was handed out after ``waited_s``; ``short``: the
        ring had fewer slots ahead than workers when it was asked for."""
        self._batches += 1
        self._hits += hit
        self._short_misses += short and not hit
        self._wait_s += waited_s
        self._t_last = now
        self._busy_last = self._busy_s()

    def summary(self) -> str | None:
        """The latest decision, for ``stats()``: e.g. "2 -> 1: waited 0.4%, ..."."""
        last = self.last
        return None if last is None else last.reason

    def _judgeable(self) -> bool:
        """Enough pooled figures to judge (the first epoch is judged alone, whatever its
        length: the rule leaves it out, and it must not hide in a pool)."""
        if not self._batches:
            return False
        return self.state.seen == 0 or (self._batches >= _autotune.MIN_BATCHES
                                        and self._seconds >= _autotune.MIN_SECONDS)

    def _judge(self, epoch: int, workers: int) -> int | None:
        """Ask the rule about the pooled figures (``workers`` ran through them: the pool is
        resized only between epochs), then start a new pool of figures."""
        figures = EpochFigures(workers, self._batches, self._seconds, self._wait_s,
                               self._busy, self._hits, self._short_misses)
        decision = decide(figures, self.cores, self.state)
        self.state = decision.state
        self.decisions = [*self.decisions[-HISTORY + 1:], (epoch, decision)]
        self._batches = self._hits = self._short_misses = 0
        self._seconds = self._wait_s = self._busy = 0.0
        if decision.workers == workers:
            log.debug("shmaug workers after epoch %d: %s", epoch, decision.reason)
            return None
        log.info("shmaug workers after epoch %d: %s", epoch, decision.reason)
        return decision.workers
