"""What a ``Sequence`` builds and pickling drops, in one object, with its life cycle as one state.

A ``Sequence`` keeps two kinds of state. Its definition (the checked settings, its ``Order``,
the public attributes, a subclass's own) pickles with it: workers get a copy to run its hooks,
``copy.copy`` and ``deepcopy`` make one. Everything else is a ``Runtime``: the data (already in
shared memory once the workers start), the pipeline resolved for it, the loader, the lock,
the batches held for a second ask, the passes and the counters. ``__getstate__`` drops the
``Runtime`` whole and ``__setstate__`` gives the copy a fresh one, ``CLOSED``: a copy runs
hooks but serves no batches. Pure bookkeeping: no Keras, no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engine.config import describe
from ..engine.config import inputs as inputs_
from ..engine.config.options import Data, Pipeline
from ..engine.handoff.stats import PassClock
from ..engine.loader import Loader
from ..errors import warn
from ._passes import Key, Passes


class Life(enum.Enum):
    """Where a Sequence's workers stand (the value is how ``repr`` says it)."""

    NOT_STARTED = "not started"  # no loader yet: the first ask starts one
    STARTED = "started"  # a loader runs
    STOPPED_IDLE = "stopped while idle"  # its loader closed (_idle); the next ask starts one
    CLOSED = "closed"  # close() (or a copy): no loader starts again


@dataclass(eq=False, slots=True)
class Runtime:
    """A Sequence's state that pickling drops (see the module docstring)."""

    passes: Passes  # which batch answers each ask of Keras
    data: Data | None  # the samples, checked; None in a copy (they stay with the original)
    pipeline: Pipeline | None  # what workers run, resolved for `data`; None in a copy
    life: Life = Life.NOT_STARTED
    # invariant: the running loader while STARTED; else the last one (stopped or closed: its
    # figures stay readable), or None before the first start
    loader: Loader | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # Keras may call from a
    # tf.data thread; held while a batch is served
    held: OrderedDict[Key, Any] = field(default_factory=OrderedDict)  # batches likely asked
    # again, least recently used first
    # Keras' adapters seen beginning an epoch -> whether evaluate or predict runs them
    inferring: weakref.WeakKeyDictionary[Any, bool] = field(
        default_factory=weakref.WeakKeyDictionary)
    used: float = 0.0  # invariant: monotonic time of the latest ask for a batch
    epoch_ends: int = 0  # calls of Sequence.on_epoch_end (an override's super() included)
    longest_pause_s: float = 0.0  # the longest idle stop after which it was asked again
    requests: int = 0  # asks for a batch since start (or reset_stats)
    hits: int = 0  # of them, served from a batch prepared already
    images: int = 0  # the samples of those batches
    clock: PassClock = field(default_factory=PassClock)  # the time of Keras' passes
    previous: int = -1  # the last index a pass asked for (shuffle=False order check)
    out_of_order: int = 0  # requests that did not follow their predecessor
    warned: bool = False  # the random-order warning was given
    warned_inferring: bool = False  # what inference reads (a weighted draw, a dropped
    # remainder) was told
    # what the worker hooks read, as the first workers started (_checks.hooks_started);
    # None before
    hook_prints: dict[str, bytes] | None = None
    told_hooks: set[tuple[str, Any]] = field(default_factory=set)  # changes told: (name, print)
    read_by_hand: bool = False  # a loop by hand (no Keras pass, no fit) read in order since
    # the last on_epoch_end
    warned_order: bool = False  # a loop by hand reading a training set in order was told
    # the ids of the data arguments as given (x, y, sample_weight): what a subclass's
    # __init__ may set on itself again (``_checks.keep_data``); ids only, nothing kept alive
    given: dict[str, int] = field(default_factory=dict)

    def asked(self, rows: int) -> None:
        """One ask for a batch of ``rows`` samples, in the facade's figures."""
        self.requests += 1
        self.images += rows
        self.clock.open()

    def reset_counts(self) -> None:
        """The facade's figures from zero (``reset_stats``)."""
        self.requests = self.hits = self.images = 0
        self.clock = PassClock()

    def pause(self) -> None:
        """Keras' pass is over: the time until the next ask (its validation, the program after
        ``fit``) is left out of the figures, the loader's too."""
        self.clock.pause()
        if self.loader is not None:
            self.loader.pause_stats()

    def epoch_ended(self, by_keras: bool, training_set: bool) -> bool:
        """``on_epoch_end()``: the figures' pass ends; Keras' own calls (``by_keras``) end its
        loop and move nothing, a loop by hand's end its epoch (``_passes`` rule 5). Whether to
        tell, once, that a loop by hand read a ``training_set`` in order."""
        with self.lock:
            self.pause()
            told = training_set and self.read_by_hand and not by_keras and not self.warned_order
            self.warned_order |= told
            self.read_by_hand = False
            if by_keras:
                self.passes.loop_over()
            else:
                self.passes.epoch_ended()
            return told

    def release_data(self) -> None:
        """Hold no more of the user's arrays (``Data.released``): a closed Sequence's, which
        TensorFlow keeps reachable after ``fit``, a fold after fold of them in a k-fold loop."""
        if self.data is not None:
            self.data = self.data.released()
        if self.pipeline is not None:
            self.pipeline = self.pipeline.released()
        self.held.clear()

    @classmethod
    def copied(cls, batches: int) -> Runtime:
        """A copy's: closed, without data, with passes over ``batches`` per epoch."""
        return cls(Passes(batches), None, None, Life.CLOSED)

    @property
    def running(self) -> Loader | None:
        """The loader whose workers run now, if any."""
        return self.loader if self.life is Life.STARTED else None

    @property
    def side(self) -> dict[str, Any]:
        """The targets, other inputs and sample weights, by name (none in a copy)."""
        if self.data is None:
            return {}
        assert isinstance(self.data.y, dict)  # (as data_of made it)
        return self.data.y

    def over_batches(self, batches: int) -> None:
        """New passes over ``batches`` per epoch (another shard's), keeping the epoch sought;
        called before the workers start."""
        epoch = self.passes.position[0]
        self.passes = Passes(batches)
        self.passes.seek(epoch, 0)

    def stop_if_idle(self, now: float, after_s: float,
                     stopped: Callable[[], None]) -> float | None:
        """Stop the workers if no batch was asked for in ``after_s`` seconds (never while one
        is being served: that holds the lock); ``stopped`` runs under the lock once they are
        marked so. The loader stays (its figures). Returns how long they were idle, or None."""
        if now - self.used < after_s or not self.lock.acquire(blocking=False):
            return None
        try:
            loader = self.running
            if loader is None or now - self.used < after_s:
                return None
            self.life = Life.STOPPED_IDLE  # (its loader stays: its figures)
            stopped()
        finally:
            self.lock.release()
        loader.close()
        return now - self.used

    def note_order(self, index: int, in_order: bool, loader: Loader) -> None:
        """Say once when Keras' random batch order defeats prefetching (a pass read in the
        dataset's order, under ``fit(shuffle=True)``); with no worker running, nothing is
        prepared ahead to defeat."""
        if not in_order or loader.pids == []:
            return
        if self.previous >= 0 and index != self.previous + 1:
            self.out_of_order += 1
            if self.out_of_order == 3 and not self.warned:
                self.warned = True
                warn(
                    "Keras asks this shmaug.Sequence for batches in random order (fit's "
                    "default shuffle=True) while it has shuffle=False, so its workers cannot "
                    "prepare the next batch ahead of time. For training data pass "
                    "shuffle=True to shmaug.Sequence (it then shuffles the samples itself, "
                    "each exactly once per epoch, and prefetches in order), or call "
                    "fit(..., shuffle=False).")
        self.previous = index

    def stats(self, loader: Loader) -> dict[str, Any]:
        """``loader``'s figures with the facade's: ``hit_rate``, the share of asks served from
        batches already prepared, ``requests``, and ``batches``, ``images`` and
        ``images_per_s`` as served to Keras (the loader's own left out what it handed over
        before a reset at an epoch's start: Keras' probes, batches made ahead, all of a
        short epoch's, so that a StallMonitor's epoch read 0 batches beside its images/s)."""
        stats = loader.stats()
        stats["hit_rate"] = self.hits / self.requests if self.requests else 0.0
        stats["requests"] = self.requests
        if self.requests:
            elapsed = self.clock.seconds()
            stats["images_per_s"] = self.images / elapsed if elapsed > 0 else 0.0
            stats["batches"], stats["images"] = self.requests, self.images
        stats["workers"] = loader.workers
        return stats


def data_of(images: Any, load: Any, *, y: Any, inputs: Any, sample_weight: Any) -> Data:
    """A Sequence's samples, checked as a Loader's (``Data.of``: a source's ``load`` and
    labels included), and beside ``y`` what is gathered per batch in this process (but for
    the targets ``augment`` moves): the other ``inputs`` of a dict ``x`` and the
    ``sample_weight``."""
    data = Data.of(images, y, load)
    side = {
        "y": data.y,  # first: its `mask` is the one augmented
        "inputs": inputs_.targets(inputs or None, data.n, "x"),
        "sample_weight": inputs_.targets(sample_weight, data.n, "sample_weight"),
    }
    inputs_.weights(side["sample_weight"])
    return dataclasses.replace(data, y=side, shown=describe.brief(data.x), labels_at=("y",))
