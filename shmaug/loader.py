"""The plain-Python engine: batches of augmented samples from a persistent worker pool.

``Loader`` wires the pieces together and owns them: it puts the dataset in a ``SharedStore``,
allocates the ``OutputRing``, starts the ``WorkerPool`` (or the ``InlinePool`` for
``workers=0``), and keeps up to ``max_queue_size`` batches in flight ahead of the consumer.
A batch is known by its key ``(epoch, batch)``; since its content is a pure function of that
key, the consumer may ask in any order, ask twice, or resume at any epoch.
"""

from __future__ import annotations

import logging
import pickle
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from . import _validate as check
from ._worker import BUSY_S, SKIPPED, STATUS_FIELDS, SliceRunner, WorkerSpec, skipped_count
from .errors import ClosedError, rebuild
from .ops.core import check_picklable
from .pool import InlinePool, WorkerPool, describe_death, describe_timeout
from .ring import OutputRing
from .schedule import BatchPlan, OrderCache, Task
from .seeding import global_rng_use, rng_for
from .store import ArrayHandle, SharedStore, mapped_file_handle

log = logging.getLogger(__name__)

_POLL_S = 0.1  # how long one wait for results lasts before the loop re-checks everything

Key = tuple[int, int]  # (epoch, batch)


@dataclass
class _Batch:
    """One batch being produced in one ring slot."""

    key: Key
    slot: int
    rows: int
    tickets: set[int] = field(default_factory=set)  # invariant: dispatched, not yet answered
    error: BaseException | None = None  # first failure of any of its tasks
    dropped: bool = False  # no longer wanted: free the slot when `tickets` is empty


def _shutdown(pool: Any, store: SharedStore) -> None:
    # Workers first, then the memory they write into (NOTE [shutdown order] in pool.py).
    try:
        pool.close()
    finally:
        store.close()


class Loader:
    """Augmented batches from a persistent pool of worker processes over shared memory.

    One pass over the loader is one epoch; the next pass is the next epoch, also when the
    previous one was cut short (``break``; even ``next(iter(loader))`` starts a pass). Every
    sample
    appears exactly once per epoch, and a sample's augmentation depends only on
    ``(seed, epoch, sample index)``, so epochs are bit-identical for any ``workers``,
    ``start_method`` or crash history.

    Args:
        x: images, a numeric array ``(N, H, W)`` or ``(N, H, W, C)``, copied once into
            shared memory where workers read it in place; or a path to a ``.npy`` file (or a
            ``np.memmap`` / ``np.load(..., mmap_mode="r")`` array), which every worker maps
            read-only: nothing is copied, and data larger than RAM streams from disk.
        y: targets: an array of length N, a dict / list / tuple of such arrays, or None.
            Gathered in this process (they are small).
        batch_size: samples per batch.
        augment: a picklable ``fn(image, rng) -> image`` (``rng`` is a
            ``numpy.random.Generator``), e.g. a ``shmaug.Compose``; None for none.
        workers: worker processes; None for one per available core; 0 runs everything in
            this process (for debugging; the batches are identical).
        seed: makes every epoch reproducible; None draws one (see ``loader.seed``).
        shuffle: visit samples in a new random order each epoch.
        drop_remainder: drop the last batch when it is smaller than ``batch_size``.
        start_method: "fork", "spawn", "forkserver", or None for the platform default.
        max_queue_size: batches prepared ahead of the consumer (ring slots in shared memory).
        timeout: seconds one task (a batch, or a worker's share of one) may run before
            ``WorkerTimeout``; None waits forever.
        output_shape: shape of one augmented sample; learned from sample 0 when None.
        output_dtype: dtype of augmented samples; learned from sample 0 when None.
        copy: True hands out private copies of each batch. False lends read-only views of
            the shared slot instead (no copy in this process: for consumers that copy anyway,
            e.g. to a device); a lent batch stays valid only until the next batch is asked
            for, so do not keep it (``list(loader)`` would hold overwritten views).
        load: advanced: ``fn(index) -> image`` run in the workers instead of ``x[index]``;
            then ``x`` only gives the length and is not copied into shared memory. An ``x``
            with a ``load(index)`` method (a sample source such as ``shmaug.ImageFiles``)
            is used that way without this argument.

    Raises:
        ArgumentError, ArgumentTypeError: for a bad argument, before any process starts.
        NotPicklableError: when ``augment`` (or ``load``) cannot be sent to a worker.
        SharedMemoryError: when /dev/shm cannot hold the dataset and the ring.

    Example:
        >>> with shmaug.Loader(x, y, batch_size=64, augment=fn, workers=2, seed=0) as loader:
        ...     for xb, yb in loader:
        ...         train_step(xb, yb)
    """

    def __init__(
        self,
        x: Any,
        y: Any = None,
        batch_size: int = 32,
        augment: Callable[[np.ndarray, np.random.Generator], Any] | None = None,
        *,
        workers: int | None = None,
        seed: int | None = None,
        shuffle: bool = False,
        drop_remainder: bool = False,
        start_method: str | None = None,
        max_queue_size: int = 8,
        timeout: float | None = None,
        output_shape: tuple[int, ...] | None = None,
        output_dtype: Any = None,
        load: Callable[[int], Any] | None = None,
        copy: bool = True,
    ) -> None:
        self._closed = True  # until fully built, so close() and __del__-time paths are safe
        if load is None and callable(getattr(x, "load", None)):
            load = x.load  # a sample source such as shmaug.ImageFiles: workers decode
            if y is None:
                y = getattr(x, "labels", None)  # as Keras' image_dataset_from_directory
        if load is None:
            x = check.array_source(x)
        n = check.length(x, load)
        if load is None:
            x = check.images(x)
        self.y = check.targets(y, n)
        self.batch_size = check.positive_int("batch_size", batch_size)
        self.workers = check.workers(workers)
        self.seed = check.seed(seed)
        self.shuffle = bool(shuffle)
        self.start_method = check.start_method(start_method)
        self.max_queue_size = check.positive_int("max_queue_size", max_queue_size)
        self.timeout = check.timeout(timeout)
        self.augment = check.callable_or_none("augment", augment)
        load = check.callable_or_none("load", load)
        self._load = load  # invariant: what workers call to make sample i, or None for x[i]
        self._plan = BatchPlan(n, self.batch_size, bool(drop_remainder))
        check.nonempty_epoch(self._plan)
        self._orders = OrderCache(self.seed, n, self.shuffle)
        self._epoch = 0  # invariant: the epoch the next full pass will produce

        # Only gathering to do: one copy in this process beats a round trip through workers.
        self._gather_only = self.augment is None and load is None
        sample_shape, dtype = (
            (tuple(x.shape[1:]), x.dtype) if self._gather_only
            else self._learn_output(x, load, output_shape, output_dtype)
        )
        seed_globals = global_rng_use(self.augment, load)  # None: workers watch for draws
        payload = b"" if self.workers == 0 or self._gather_only else self._payload(load)

        self._store = SharedStore()
        self._ring: OutputRing | None = None
        self._pool: Any = _NoPool()
        try:
            if self._gather_only:
                self._x: Any = x
            else:
                x_handle, self._x = self._place_dataset(x, load)
                self._ring = OutputRing(self._store, self.max_queue_size, self.batch_size,
                                        sample_shape, dtype)
                if self.workers == 0:
                    self._pool = InlinePool(SliceRunner(
                        self._x, self._ring.view, self.augment, load, seed=self.seed, n=n,
                        shuffle=self.shuffle, seed_globals=seed_globals,
                        generation=self._ring.generation))
                else:
                    spec = WorkerSpec(x_handle, self._ring.handle, payload, self.seed, n,
                                      self.shuffle, seed_globals)
                    self._pool = WorkerPool(
                        spec, self.workers, self.start_method, self.timeout,
                        generation=self._ring.generation,
                        in_flight_per_worker=self.max_queue_size + 1)
        except BaseException:
            self._store.close()
            raise
        # Backstop for a loader that is never closed: runs at garbage collection or exit.
        self._finalizer = weakref.finalize(self, _shutdown, self._pool, self._store)
        self.output_shape: tuple[int, ...] = sample_shape
        self.output_dtype = np.dtype(dtype)
        self._inflight: dict[Key, _Batch] = {}  # invariant: one entry per busy, wanted slot
        self._by_ticket: dict[int, _Batch] = {}  # invariant: every dispatched, unanswered ticket
        self._next_ticket = 0
        # Prefetched batches go whole to one worker when the lookahead has enough batches to
        # keep every worker busy; otherwise each is cut in as many pieces as that takes.
        lookahead = max(1, self.max_queue_size - 1)
        self._ahead_parts = max(1, -(-max(self.workers, 1) // lookahead))
        self.reset_stats()  # sets _t0 and _counters: the stats window starts now
        self.last_hit = False  # whether the last batch() was ready when asked for
        self.copy = bool(copy)
        self._lent: int | None = None  # invariant: the slot a copy=False batch() still lends
        self._closed = False
        log.debug("Loader ready: %d samples, %d batches/epoch, %d workers (%s)", n,
                  len(self), self.workers, self.start_method or "default start method")

    # -- set-up helpers --------------------------------------------------------------------

    def _learn_output(self, x: Any, load: Any, shape: Any, dtype: Any) -> tuple[tuple[int, ...], Any]:
        """Shape and dtype of one augmented sample: declared, or seen on sample 0."""
        if shape is not None and dtype is not None:
            return check.shape("output_shape", shape), check.dtype("output_dtype", dtype)
        import random

        saved = random.getstate(), np.random.get_state()  # the probe must not move the user's RNGs
        try:
            image = x[0] if load is None else load(0)
            if self.augment is not None:
                image = self.augment(image, rng_for(self.seed, 0, 0))
        finally:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
        image = check.sample_output(image)
        return (
            check.shape("output_shape", shape) if shape is not None else tuple(image.shape),
            check.dtype("output_dtype", dtype) if dtype is not None else image.dtype,
        )

    def _place_dataset(self, x: Any, load: Any) -> tuple[ArrayHandle | None, Any]:
        """Where workers read samples: nowhere (``load``), the file behind a memory map, or a
        shared-memory copy made once here."""
        if load is not None:
            return None, x
        handle = mapped_file_handle(x)
        if handle is not None:
            log.debug("dataset is memory-mapped from %s; nothing copied", handle.name)
            view = x.view()
            view.flags.writeable = False
            return handle, view
        handle, view = self._store.put(x)
        view.flags.writeable = False  # ops get read-only views, here as in workers
        return handle, view

    def _payload(self, load: Any) -> bytes:
        check_picklable(self.augment, "augment")
        if load is not None:
            check_picklable(load, "load")
        return pickle.dumps((self.augment, load), protocol=pickle.HIGHEST_PROTOCOL)

    # -- the public surface ----------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._plan)

    @property
    def epoch(self) -> int:
        """The current epoch: the one a pass in progress produces, else the one the next pass
        will; set it to resume a run."""
        return self._epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._epoch = check.non_negative_int("epoch", value)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (empty when none run)."""
        return list(self._pool.pids) if self._pool is not None else []

    def __iter__(self) -> Iterator[tuple[np.ndarray, Any]]:
        epoch = self._epoch
        try:
            for batch in range(len(self)):
                yield self.batch(batch, epoch=epoch)
        finally:
            # Also when the pass is cut short (a `break` after steps_per_epoch batches, an
            # exception): the next pass must not repeat this epoch's augmentations.
            if self._epoch == epoch:  # unless the consumer set another one meanwhile
                self._epoch = epoch + 1

    def batch(self, index: int, *, epoch: int | None = None) -> tuple[np.ndarray, Any]:
        """Batch ``index`` of ``epoch`` (default: the current one) as ``(x, y)`` copies.

        Random access is allowed; batches after this one are prefetched on the guess that
        the consumer goes on in order.
        """
        self._ensure_open()
        epoch = self._epoch if epoch is None else check.non_negative_int("epoch", epoch)
        positions = self.indices(index, epoch=epoch)
        start, stop = self._plan.bounds(index)
        began = time.perf_counter()
        if not self._counters["t_first"]:
            self._counters["t_first"] = began
        hits = self._counters["hits"]
        if self._gather_only:
            xb = self._x[positions]
            self._counters["hits"] += 1
        else:
            xb = self._produce((epoch, index), stop - start)
        self.last_hit = self._counters["hits"] > hits
        self._counters["wait_s"] += time.perf_counter() - began
        self._counters["images"] += stop - start
        self._counters["batches"] += 1
        return xb, check.gather(self.y, positions)

    def indices(self, index: int, *, epoch: int | None = None) -> np.ndarray:
        """The dataset indices of the samples in batch ``index`` of ``epoch``, in order."""
        epoch = self._epoch if epoch is None else check.non_negative_int("epoch", epoch)
        start, stop = self._plan.bounds(check.non_negative_int("index", index))
        return self._orders(epoch)[start:stop]

    def stats(self) -> dict[str, Any]:
        """Throughput and stall figures since start (or the last ``reset_stats()``).

        Keys: ``images_per_s``, ``wait_fraction`` (share of the consumer's time spent
        waiting for data), ``hit_rate`` (batches ready when asked), ``queue_depth`` (batches
        ready now), ``worker_busy`` (per-worker busy fraction), ``respawns``, ``batches``,
        ``skipped`` (unreadable samples a ``load`` replaced, e.g. with ``on_error="skip"``).
        """
        c = self._counters
        now = time.perf_counter()
        elapsed = now - c["t_first"] if c["t_first"] else 0.0
        busy: list[float] = []
        skipped = skipped_count(self._load)  # workers=0 runs `load` right here
        status = getattr(self._pool, "status", None)
        if status is not None:
            span = max(now - self._t0, 1e-9)
            busy = [min(1.0, status[w * STATUS_FIELDS + BUSY_S] / span)
                    for w in range(self.workers)]
            skipped = int(sum(status[w * STATUS_FIELDS + SKIPPED] for w in range(self.workers)))
        ready = sum(1 for b in self._inflight.values() if not b.tickets and b.error is None)
        return {
            "images_per_s": c["images"] / elapsed if elapsed > 0 else 0.0,
            "wait_fraction": c["wait_s"] / elapsed if elapsed > 0 else 0.0,
            "hit_rate": c["hits"] / c["batches"] if c["batches"] else 0.0,
            "queue_depth": ready,
            "worker_busy": busy,
            "respawns": getattr(self._pool, "respawns", 0),
            "batches": c["batches"],
            "skipped": skipped,
        }

    def reset_stats(self) -> None:
        """Start the ``stats()`` window afresh (e.g. at each epoch)."""
        self._counters: dict[str, float] = dict(wait_s=0.0, images=0, batches=0, hits=0,
                                                t_first=0.0)
        self._t0 = time.perf_counter()
        status = getattr(self._pool, "status", None)
        if status is not None:
            for w in range(self.workers):
                status[w * STATUS_FIELDS + BUSY_S] = 0.0

    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent."""
        self._closed = True
        self._inflight = {}
        self._by_ticket = {}
        self._x = None
        if self._ring is not None:
            self._ring.view = np.empty(0)  # drop our view so the block can be unmapped
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> Any:
        raise TypeError(
            "A shmaug.Loader owns processes and shared memory and cannot be pickled. Fix: "
            "create it in the process that consumes it."
        )

    # -- producing batches -----------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ClosedError("This shmaug.Loader is closed. Fix: create a new one.")

    def _lookahead(self, key: Key) -> list[Key]:
        """The keys the consumer most likely wants next: the following batches, in order."""
        epoch, batch = key
        out = []
        assert self._ring is not None
        for _ in range(self._ring.slots - 1):
            batch += 1
            if batch >= len(self):
                epoch, batch = epoch + 1, 0
            out.append((epoch, batch))
        return out

    def _produce(self, key: Key, rows: int) -> np.ndarray:
        assert self._ring is not None
        if self._lent is not None:  # asking for the next batch ends the previous lease
            self._ring.release(self._lent)
            self._lent = None
        wanted = [key, *self._lookahead(key)]
        self._collect(0.0)  # file what finished while the consumer was busy
        self._drop_unwanted(set(wanted))
        hit = key in self._inflight and not self._inflight[key].tickets
        while key not in self._inflight:
            if not self._schedule(key, parts=max(self.workers, 1)):
                self._collect()  # every slot holds work we no longer want: let it drain
        for ahead in wanted[1:]:
            if ahead not in self._inflight and not self._schedule(ahead, parts=self._ahead_parts):
                break
        batch = self._inflight[key]
        while batch.tickets and batch.error is None:
            self._collect()
        self._counters["hits"] += hit
        del self._inflight[key]
        if batch.error is not None:
            self._drop(batch)
            raise batch.error
        assert self._ring is not None
        if not self.copy:
            lent: np.ndarray = self._ring.view[batch.slot, :rows].view()
            lent.flags.writeable = False
            self._lent = batch.slot
            return lent
        out = self._ring.read(batch.slot, rows)
        self._ring.release(batch.slot)
        return out

    def _schedule(self, key: Key, parts: int) -> bool:
        """Start a batch in a free slot, cut into ``parts`` tasks; False when none is free.

        A batch the consumer is already waiting for is cut across all workers (it arrives
        soonest); a prefetched one goes whole to one worker, which halves the messages and
        wake-ups this process pays per batch while the workers keep the same pace.
        """
        assert self._ring is not None
        acquired = self._ring.acquire()
        if acquired is None:
            return False
        slot, generation = acquired
        start, stop = self._plan.bounds(key[1])
        batch = _Batch(key, slot, stop - start)
        self._inflight[key] = batch
        for lo, hi in self._plan.slices(key[1], parts):
            ticket = self._next_ticket
            self._next_ticket += 1
            batch.tickets.add(ticket)
            self._by_ticket[ticket] = batch
            self._pool.submit(Task(ticket, key[0], slot, generation, lo, hi, start))
        return True

    def _drop_unwanted(self, wanted: set[Key]) -> None:
        for key in [k for k in self._inflight if k not in wanted]:
            self._drop(self._inflight.pop(key))

    def _drop(self, batch: _Batch) -> None:
        """Forget a batch; its slot frees once the tasks already running have answered."""
        batch.dropped = True
        assert self._ring is not None
        self._ring.cancel(batch.slot)
        for ticket in self._pool.cancel_pending(set(batch.tickets)):
            batch.tickets.discard(ticket)
            self._by_ticket.pop(ticket, None)
        self._free_if_idle(batch)

    def _free_if_idle(self, batch: _Batch) -> None:
        if batch.dropped and not batch.tickets:
            assert self._ring is not None
            self._ring.release(batch.slot)

    def _collect(self, timeout_s: float = _POLL_S) -> None:
        """Wait (bounded) for worker results and file them under their batches."""
        self._ensure_open()  # close() from another thread ends every wait
        for result in self._pool.poll(timeout_s):
            kind, ticket = result[0], result[1]
            batch = self._by_ticket.pop(ticket, None)
            if batch is None:
                continue
            batch.tickets.discard(ticket)
            if kind == "failed" and batch.error is None:
                batch.error = rebuild(result[2])
            elif kind == "died" and batch.error is None:
                batch.error = describe_death(result[2], result[3], result[4])
            elif kind == "timeout" and batch.error is None:
                batch.error = describe_timeout(result[2], result[3], float(self.timeout or 0))
            self._free_if_idle(batch)


class _NoPool:
    """Placeholder so the finalizer always has something to close."""

    pids: list[int] = []

    def close(self) -> None:
        pass

