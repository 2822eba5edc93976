"""Keras callbacks for ``shmaug.Sequence``: which epoch to serve, and how well it was fed.

``EpochSync`` follows Keras' own epoch number (resume with ``BackupAndRestore``,
``initial_epoch``); ``StallMonitor`` reports, per epoch, whether
training waited for data. Both read the Sequence; neither owns processes or memory.
"""

from __future__ import annotations

import logging
import numbers
import weakref
from typing import Any

import keras

from .. import platform
from ..engine.handoff import depth
from ..memory.store import enlarge
from ..errors import ArgumentError, ArgumentTypeError, got, warn
from .sequence import _LIVE, Sequence

log = logging.getLogger(__name__)


def keras_position(epoch: int, steps: int, batches: int) -> int:
    """How many batches Keras' ``fit`` draws from one iterator before epoch ``epoch``.

    With ``steps_per_epoch`` (``steps``) below ``batches`` Keras keeps one iterator across
    epochs, and the epoch that reaches its end is cut short (a fresh iterator starts the next
    epoch): every ``ceil(batches / steps)`` epochs consume exactly ``batches`` batches.
    """
    if steps >= batches:
        return epoch * batches
    cycle = -(-batches // steps)
    return (epoch // cycle) * batches + min((epoch % cycle) * steps, batches)


_CUT: weakref.WeakSet[Sequence] = weakref.WeakSet()  # in a fit with an EpochSync not ended


class EpochSync(keras.callbacks.Callback):  # type: ignore[misc]
    """Makes ``sequence`` serve the epoch Keras says it is in: the epoch's permutation and
    augmentations follow Keras' epoch number, not how many passes the Sequence has seen.

    Needed to resume ``fit`` with ``keras.callbacks.BackupAndRestore``: Keras restores the
    epoch and restarts it from its first step (also after a mid-epoch backup with
    ``save_freq`` in batches: Keras 3 saves the batch but does not skip to it), so the
    restarted epoch must be that epoch's data again, from its first batch. Also makes
    ``fit(initial_epoch=E)`` start at epoch E. With ``steps_per_epoch`` below ``len`` one
    epoch of shmaug's spans several of Keras'; a resumed fit starts a fresh Keras pass, which
    then gets the next whole epoch of shmaug's rather than the rest of one (that would
    straddle two shuffled orders within one Keras epoch).

    Args:
        sequence: the training ``shmaug.Sequence``.

    Example:
        >>> model.fit(seq, epochs=10, callbacks=[
        ...     keras.callbacks.BackupAndRestore("backup"), shmaug.EpochSync(seq)])
    """

    follows_keras_epochs = True  # what the facade's checks look for among fit's callbacks

    def __init__(self, sequence: Sequence) -> None:
        super().__init__()
        self.sequence = sequence
        self._started = False  # invariant: an epoch of this fit call has begun
        self._again = False  # this fit runs a cut one again (``on_train_begin``)

    def on_train_begin(self, logs: Any = None) -> None:
        self._started = False
        # whether a fit with an EpochSync of this Sequence was cut (an error, Ctrl-C): this
        # one runs it again, and redoes the epoch it was cut in, which the Sequence had
        # passed at its pass's end, before validation and a backup
        self._again = self.sequence in _CUT
        _CUT.add(self.sequence)

    def on_train_end(self, logs: Any = None) -> None:
        _CUT.discard(self.sequence)

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        batches = len(self.sequence)
        steps = (self.params or {}).get("steps") or batches
        # A fresh Keras iterator each epoch (steps >= len): nothing was prefetched, seek
        # every time. Otherwise only at the start: the iterator runs on across epochs.
        if steps >= batches or not self._started:
            start, batch = divmod(keras_position(epoch, steps, batches), batches)
            # A fit's first epoch is a fresh pass of Keras' (a new iterator) even where the
            # uninterrupted run was in the middle of one: it gets a whole epoch, the next.
            start += batch > 0
            if not self._started and epoch == 0 and start < self.sequence.epoch and \
                    not self._again:  # (a fit run again after one was cut redoes it)
                _tell_rewound(self.sequence.epoch, epoch, start)
            self.sequence.seek(start, 0)
        self._started = True


def _tell_rewound(served: int, epoch: int, start: int) -> None:
    """A later ``fit`` counting Keras' epochs from 0 again (no ``initial_epoch``) would make
    ``EpochSync`` serve epochs the Sequence has served, their order and draws, silently."""
    warn(f"EpochSync moves this Sequence back from its epoch {served} to epoch {start}, "
         f"where Keras' epoch {epoch} begins this fit (a fit without initial_epoch counts "
         f"from 0): it trains on those epochs' order and augmentations again. Fix: "
         f"fit(..., initial_epoch={served}, epochs={served} + the epochs to train) to go "
         f"on, or leave EpochSync out of this fit (a Sequence goes on by itself); where each "
         f"fit should see the same epochs (trials compared), seq.seek({start}) before it "
         f"says so.")


LOGGED = ("images_per_s", "wait_fraction", "hit_rate", "workers")  # stats() keys it logs


_DISK = ("(Data already in a .npy larger than the RAM is read from the disk each pass, at "
         "its speed for random reads: faster storage, or record shards with "
         "shuffle=\"blocks\".)")


_SHORT = 8  # batches: an epoch shorter is mostly the wait for a pass's first batches


def _not_the_pipeline(stats: dict[str, Any]) -> str:
    """Why an input-bound epoch asks no change of the pipeline (an epoch too short to tell;
    workers idle most of it), or "": logged, not warned (a warning is what to change)."""
    queue = stats.get("queue") or {}
    busy = stats.get("worker_busy") or []
    if stats.get("batches", _SHORT) < _SHORT and max(busy, default=0.0) < 0.8:  # (workers
        # busy the whole short epoch: a real stall, told below)
        return (f"An epoch of {stats['batches']} batches is too short to tell the pipeline's "
                f"pace: its first batches wait while the workers begin the pass, whatever "
                f"they run. Longer epochs' figures (stats(), this callback's log) tell.")
    if not queue.get("limited") and busy and max(busy) < 0.5:  # more workers would idle too
        return ("The workers were idle most of the epoch, so the wait was the hand-off of "
                "the batches or the first ones of each pass, not the augmentation (a short "
                "epoch shows it most); more `workers` would idle too.")
    return ""


def _remedy(stats: dict[str, Any]) -> str:
    """What to try for an input-bound epoch: the queue when it was the limit (more workers
    would find no free slot), else the workers and the work; or why nothing would help."""
    queue = stats.get("queue") or {}
    busy = stats.get("worker_busy") or []
    if said := _not_the_pipeline(stats):
        return said
    if queue.get("limited") and queue.get("by") in (depth.MEMORY, depth.SHM):
        return (f"The queue was the limit, not the workers ({queue['why']}: fewer batches "
                f"ahead than workers). Try: {depth.more_room(queue['by'], enlarge())}.")
    if queue.get("limited"):
        return (f"The queue was the limit, not the workers ({queue['why']}: fewer batches "
                f"ahead than workers). Try: a larger `max_queue_size`, or leave it out (the "
                f"default holds 2 batches per worker + 2).")
    cores = platform.cpu_count()
    if len(busy) >= cores:  # more workers would only share the cores the others use
        return (f"The {len(busy)} workers already have this machine's {cores} cores to "
                f"share (with the training itself), so more would not help. Try: a cheaper "
                f"augmentation pipeline, packing decoded images into a .npy file so workers "
                f"stop decoding them, or a machine with more cores. {_DISK}")
    return ("Try: more `workers` (up to the number of cores), a cheaper augmentation "
            "pipeline, or packing decoded images into a .npy file so workers stop decoding "
            f"them. {_DISK}")


class StallMonitor(keras.callbacks.Callback):  # type: ignore[misc]
    """Logs each epoch's input-pipeline figures and says plainly when training waits for data.

    Watches ``sequence``, or every ``shmaug.Sequence`` that served batches during the epoch.
    The figures of the busiest one also go into the epoch's ``logs``, so they land in
    ``History``, under the names and with the meaning ``Sequence.stats()`` gives them:
    ``images_per_s``, ``wait_fraction`` (the share of the epoch spent waiting for data),
    ``hit_rate`` (the share of batches ready when Keras asked) and ``workers`` (which
    ``workers="auto"`` may change between epochs). It calls ``reset_stats()`` as each epoch
    begins, so ``stats()`` then covers the epoch in progress.

    Args:
        sequence: the dataset to watch; None watches them all.
        threshold: the share of time spent waiting for data above which an epoch counts as
            input-bound.

    Example:
        >>> model.fit(train, epochs=5, callbacks=[shmaug.StallMonitor()])
    """

    def __init__(self, sequence: Sequence | None = None, threshold: float = 0.1) -> None:
        super().__init__()
        if sequence is not None and not isinstance(sequence, Sequence):
            raise ArgumentTypeError(
                f"StallMonitor watches a shmaug.Sequence; `sequence` is {got(sequence)}. Fix: "
                f"pass the Sequence given to fit (StallMonitor(train)), or leave it out to "
                f"watch every Sequence.")
        number = isinstance(threshold, numbers.Real) and not isinstance(threshold, bool)
        if not number or not 0 <= threshold <= 1:
            raise (ArgumentError if number else ArgumentTypeError)(
                f"`threshold` is the share of an epoch spent waiting for data above which it "
                f"is input-bound, between 0 and 1; received {got(threshold)}. Fix: pass e.g. "
                f"threshold=0.1 (10%).")
        self.sequence = sequence  # None: every live shmaug.Sequence
        self.threshold = float(threshold)
        self.history: list[dict[str, Any]] = []  # one entry per epoch per watched sequence
        self._warned: weakref.WeakSet[Sequence] = weakref.WeakSet()  # said input-bound once

    def __repr__(self) -> str:
        watched = "every shmaug.Sequence" if self.sequence is None else \
            f"a {type(self.sequence).__name__} of {len(self.sequence)} batches"
        return f"StallMonitor(threshold={self.threshold:g}, watching {watched})"

    def _watched(self) -> list[Sequence]:
        seqs = [self.sequence] if self.sequence is not None else list(_LIVE)
        running = [(s, s.running_loader) for s in seqs]
        return [s for s, loader in running if loader is not None and not loader.closed]

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        for seq in self._watched():
            seq.reset_stats()

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        watched = sorted(self._watched(), key=lambda s: -s.batch_requests)
        for rank, seq in enumerate(watched):
            if not seq.batch_requests:
                continue
            s = seq.stats()
            s["epoch"] = epoch
            self.history.append(s)
            busy = ", ".join(f"{b:.0%}" for b in s["worker_busy"]) or "n/a"
            decided = s.get("workers_decision")  # workers="auto": the latest decision
            log.info(  # numbered from 1, as Keras' progress bar does
                "epoch %d: %.0f images/s, waiting for data %.1f%% of the time, %.1f%% of "
                "batches ready when asked, %d batches queued, workers: %d%s, busy: %s",
                epoch + 1, s["images_per_s"], 100 * s["wait_fraction"], 100 * s["hit_rate"],
                s["queue_depth"], s["workers"], f" (auto: {decided})" if decided else "",
                busy)
            if logs is not None and rank == 0:  # the busiest: normally the training set
                logs.update({key: s[key] for key in LOGGED})
            if s["wait_fraction"] > self.threshold and seq not in self._warned:
                said = (f"Training is input-bound: in epoch {epoch + 1} "
                        f"{s['wait_fraction']:.0%} of the time went to waiting for data "
                        f"({s['workers']} shmaug workers, busy {busy}). {_remedy(s)}")
                if _not_the_pipeline(s):  # nothing to change: logged, and a later epoch
                    log.info(said)  # that has something to change is still warned of
                else:
                    self._warned.add(seq)  # the per-epoch figures stay in the log line above
                    warn(said)
