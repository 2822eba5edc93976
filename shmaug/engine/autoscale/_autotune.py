"""How many workers ``workers="auto"`` runs: a pure rule over an epoch's figures.

Owns the decision only. ``autoworkers`` measures the figures and ``WorkerPool.resize`` acts on
the answer; nothing here starts a process or reads a clock, so each branch is tested on staged
figures (tests/unit/test_autotune.py).

The goal: the fewest workers that keep the consumer's wait for data within ``TARGET_WAIT`` of
its time, never more than the usable cores. The pool starts with the usable cores; after each
epoch (never inside one) the rule looks at what that epoch showed:

- the share of the epoch the consumer spent waiting for batches (``wait``);
- how many workers' worth of time the workers spent making them (``demand``: their busy
  seconds over the epoch's seconds; 1.5 means one and a half workers busy throughout);
- the share of batches that were ready when asked (``hit_rate``).

and answers:

1. Not judged: the first epoch (it holds the start-up: workers starting, the probe, a Keras
   model compiling), and figures of fewer than ``MIN_BATCHES`` batches or ``MIN_SECONDS``
   (too little to tell a trend from noise; ``autoworkers`` pools short epochs until they
   are enough).
2. The consumer waited more than ``TARGET_WAIT`` and the workers were the cause (under
   ``MIN_HIT_RATE`` of the batches ready when asked, or workers busy ``SATURATED`` of the
   time or more): grow, by as many workers as the wait says are missing, at least one, at
   most to the usable cores. The count that starved is not tried again for
   ``RETRY_EPOCHS`` judged epochs, twice that after it starves again, and so on, so that a
   consumer that slows down later can still be served by fewer.
3. Otherwise (the wait was within ``TARGET_WAIT``, or longer only for batches that were
   ready: the hand-over, a copy on the consumer's thread, which fewer workers do not
   lengthen): shrink to the fewest workers that would do the same work busy at most
   ``HEADROOM`` of the time (``ceil(demand / HEADROOM)``), at most halving per epoch, and
   never to a count that starved recently; else keep.

Between 1 and 2: a consumer that waited, for at least half of its waits, while the ring had
fewer slots ahead than workers (a ``max_queue_size`` too small for them; ``handoff.depth``)
was held up by the queue, not the workers: keep the count, and say so.

The counts a pool goes through never change a batch: a sample's augmentation depends only on
(seed, epoch, sample index).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..handoff.depth import queue_limited

TARGET_WAIT = 0.02  # the share of its time the consumer may wait for data
HEADROOM = 0.75  # the busy share fewer workers may reach doing the same work
SATURATED = 0.85  # workers this busy (each, on average) cannot make batches any faster
MIN_HIT_RATE = 0.9  # fewer batches than this ready when asked: the workers are behind
MIN_BATCHES = 8  # an epoch with fewer batches is not judged
MIN_SECONDS = 0.5  # nor one shorter than this
RETRY_EPOCHS = 4  # judged epochs before a count that starved the consumer is tried again


@dataclass(frozen=True, slots=True)
class EpochFigures:
    """What an epoch (or a few short ones, pooled) showed, from the consumer's side and the
    workers'."""

    workers: int  # workers running through the epoch
    batches: int  # batches handed out
    seconds: float  # from the first ask to the last batch handed out
    wait_s: float  # the consumer's time spent waiting for them
    busy_s: float  # the workers' time spent making samples, summed over workers
    hits: int  # batches that were ready when asked
    # batches waited for while the ring had fewer slots ahead than workers (handoff.depth)
    short_misses: int = 0

    @property
    def queue_limited(self) -> bool:
        """The ring, not the workers, held the consumer up (``depth.queue_limited``)."""
        return queue_limited(self.short_misses, self.batches - self.hits)

    @property
    def wait(self) -> float:
        """The share of the epoch the consumer waited."""
        return min(1.0, self.wait_s / self.seconds) if self.seconds > 0 else 0.0

    @property
    def demand(self) -> float:
        """How many workers' worth of time the work took (busy seconds per second)."""
        return self.busy_s / self.seconds if self.seconds > 0 else 0.0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.batches if self.batches else 1.0


@dataclass(frozen=True, slots=True)
class Tuning:
    """What the rule remembers between epochs."""

    seen: int = 0  # epochs offered, judged or not
    judged: int = 0  # epochs judged
    too_few: int = 0  # the last count that starved the consumer (0: none yet)
    retry_at: int = 0  # from this judged epoch on, `too_few` may be tried again
    backoff: int = RETRY_EPOCHS  # the wait before that, doubled when it starves again


@dataclass(frozen=True, slots=True)
class Decision:
    """The count for the next epoch, why, and the rule's memory after it."""

    workers: int
    reason: str
    state: Tuning


def decide(figures: EpochFigures, cores: int, state: Tuning = Tuning()) -> Decision:
    """The worker count for the next epoch, given the last one's ``figures`` (see the module
    docstring). ``cores``: the most workers there may be (the usable cores)."""
    n = figures.workers
    seen = dataclasses.replace(state, seen=state.seen + 1)
    if state.seen == 0:
        return Decision(n, "first epoch (start-up): not judged", seen)
    if figures.batches < MIN_BATCHES or figures.seconds < MIN_SECONDS:
        return Decision(n, (f"epoch too short to judge ({figures.batches} batches in "
                            f"{figures.seconds:.2f} s)"), seen)
    state = dataclasses.replace(seen, judged=state.judged + 1)
    wait, demand, hit_rate = figures.wait, figures.demand, figures.hit_rate
    seen_as = (f"waited {wait:.1%}, {hit_rate:.0%} of batches ready, workers busy "
               f"{demand / n:.0%}")
    starved = wait > TARGET_WAIT and (hit_rate < MIN_HIT_RATE or demand >= SATURATED * n)
    if starved and figures.queue_limited:  # more workers would find no slot either
        return Decision(n, f"kept {n}: {seen_as}; the queue is the limit, not the workers "
                           f"(the ring had fewer slots ahead than workers: raise "
                           f"`max_queue_size`, or leave it out)", state)
    if starved:
        backoff = 2 * state.backoff if n <= state.too_few else RETRY_EPOCHS
        state = dataclasses.replace(state, too_few=n, retry_at=state.judged + backoff,
                                    backoff=backoff)
        if n >= cores:
            return Decision(n, f"kept {n}: {seen_as}; the usable cores are all in use", state)
        # Workers are the bottleneck: the epoch took about n / (1 - wait) worker-epochs of
        # the consumer's pace; make that fit within TARGET_WAIT.
        grown = math.ceil(n * (1 - TARGET_WAIT) / max(1 - wait, 0.05) - 1e-9)
        grown = min(cores, max(n + 1, grown))
        return Decision(grown, f"{n} -> {grown}: {seen_as}", state)
    # The consumer waited at most TARGET_WAIT, or longer for batches that were ready (the
    # hand-over, which fewer workers do not lengthen): the same work may need fewer.
    floor = state.too_few + 1 if state.judged < state.retry_at else 1
    needed = max(1, math.ceil(demand / HEADROOM - 1e-9))
    shrunk = min(n, max(needed, floor, -(-n // 2)))
    if shrunk < n:
        return Decision(shrunk, f"{n} -> {shrunk}: {seen_as}; {shrunk} would be busy "
                                f"{demand / shrunk:.0%}", state)
    if n <= 1:
        why = "one is the fewest"
    elif floor > needed:
        why = (f"{floor - 1} starved the consumer lately (tried again in "
               f"{state.retry_at - state.judged} epochs)")
    else:
        why = f"{n - 1} would be busy {demand / (n - 1):.0%}"
    if wait > TARGET_WAIT:
        why += "; the wait is the hand-over of ready batches, not the workers"
    return Decision(n, f"kept {n}: {seen_as}; {why}", state)
