"""The plain-Python engine: batches of augmented samples from a persistent worker pool.

``Loader`` wires the pieces together and owns them: it puts the dataset in a ``SharedStore``,
allocates the ``OutputRing``, starts the ``WorkerPool`` (or the ``InlinePool`` for
``workers=0``), and lets a ``Prefetcher`` keep up to ``max_queue_size`` batches in flight
ahead of the consumer.
A batch is known by its key ``(epoch, batch)``; since its content is a pure function of that
key, the consumer may ask in any order, ask twice, or resume at any epoch.
"""

from __future__ import annotations

import logging
import pickle
import time
import weakref
from typing import Any, Callable, Iterator

import numpy as np

from ..errors import ArgumentError, ClosedError, warn
from ..ops._params import dtype_range
from ..ops.core import check_picklable
from ..ops.mixing import Mix
from ..seeding import global_rng_use
from . import _checks as check
from . import _describe as describe
from . import _inputs as inputs
from ._autoworkers import AutoWorkers
from ._copier import Copier
from ._gather import Gatherer
from ._options import Data, Options, Settings
from ._pool import InlinePool, WorkerPool
from ._prefetch import CLOSED, Handoff, Prefetcher
from ._probe import await_probe, output_of
from ._recycle import Recycler
from ._ring import OutputRing
from ._schedule import IN_ORDER, OrderCache, Shard, in_order, seed_epoch
from ._stats import Figures
from ._store import (
    ArrayHandle,
    SharedStore,
    check_need,
    copied_bytes,
    mapped_file_handle,
)
from ._runner import SliceRunner, op_name
from ._worker import WorkerSpec

log = logging.getLogger(__name__)

_OPEN: weakref.WeakSet[Loader] = weakref.WeakSet()  # for close_open_loaders


def close_open_loaders() -> None:
    """Close every loader of this process that is still open (any thread may call it: the
    command line does, when Ctrl-C finds the main thread blocked elsewhere for good)."""
    for loader in list(_OPEN):
        loader.close()


class _NoPool:
    """No workers (nothing to augment, or not started yet): the finalizer still has something
    to close."""

    pids: list[int] = []

    def close(self) -> None:
        pass


_Pool = WorkerPool | InlinePool | _NoPool  # who makes the batches
_Unfilled = tuple[np.ndarray, np.ndarray] | None  # a shared block's rows still to copy, and
# their data


def _shutdown(prefetch: Prefetcher | None, pool: _Pool, store: SharedStore,
              copier: Copier | None = None) -> None:
    # A consumer waiting in another thread (a tf.data thread inside __getitem__) gets
    # ClosedError; then the copier thread, the workers, and last the memory they read and
    # write (NOTE [shutdown order] in _pool.py).
    if prefetch is not None:
        prefetch.close()
    if copier is not None:
        copier.close()
    try:
        pool.close()
    finally:
        store.close()


class Loader:
    """Augmented batches from a persistent pool of worker processes over shared memory.

    One pass over the loader is one epoch; the next pass is the next epoch, also when the
    previous one was cut short (``break``; even ``next(iter(loader))`` starts a pass). Every
    sample
    appears exactly once per epoch (with ``sampling_weights``: as often as a draw by weight
    picks it), and a sample's augmentation depends only on
    ``(seed, epoch, sample index)``, so epochs are bit-identical for any ``workers``,
    ``start_method`` or crash history.

    Args:
        x: images, a numeric array ``(N, H, W)`` or ``(N, H, W, C)``, copied once into
            shared memory where workers read it in place; or a path to a ``.npy`` file (or a
            ``np.memmap`` / ``np.load(..., mmap_mode="r")`` array), which every worker maps
            read-only: nothing is copied, and data larger than RAM streams from disk.
        y: targets: an array of length N, a dict / list / tuple of such arrays, or None.
            Gathered in this process (they are small), except those `augment` transforms
            with their image (a dict entry under one of ``augment.target_names``, such as
            an albumentations pipeline's ``mask`` or ``bboxes``): they go to shared memory
            and come back augmented, batched by the workers.
        batch_size: samples per batch.
        augment: a picklable ``fn(image, rng) -> image`` (``rng`` is a
            ``numpy.random.Generator``), e.g. a ``shmaug.Compose``; None for none.
        workers: worker processes. ``"auto"`` (the default) starts with one per available
            core, then after each epoch grows or shrinks the pool to the fewest that keep the
            consumer's wait for data under 2% (see ``shmaug.engine._autotune``; the count is in
            ``loader.workers`` and ``stats()``); None: one per core, fixed; a number: that
            many, fixed; 0 runs everything in this process (for debugging). The batches are
            identical for any of these.
        seed: makes every epoch reproducible; None draws one (see ``loader.seed``).
        shuffle: True visits samples in a new random order each epoch; False, or None (the
            default), in their order. (A ``shmaug.Sequence``'s None follows Keras instead:
            shuffled for ``fit``'s training data, in order for the rest.) ``"blocks"``: for
            record shards (``shmaug.ImageRecords``) in a bucket, each epoch permutes the
            shards and shuffles the records within windows of ``shuffle_window`` shards, so a
            reader needs a few shards at a time (see [Determinism](../determinism.md));
            refused for data without shards.
        shuffle_window: shards whose records ``shuffle="blocks"`` mixes; None: 8.
        drop_remainder: drop the last batch when it is smaller than ``batch_size``.
        start_method: "fork", "spawn", "forkserver", or None: a method other than fork set
            with ``multiprocessing.set_start_method``, else the platform's if it is not fork, else
            fork while no JAX, TensorFlow or torch is imported and forkserver once one is
            (fork after their threads start can deadlock; see [Faults and errors](../faults.md)).
        max_queue_size: batches prepared ahead of the consumer (ring slots in shared memory).
        timeout: seconds one task (a batch, or a worker's share of one) may run before
            ``WorkerTimeout``; None waits forever. (A source in a bucket fetches the samples
            of the tasks queued behind a task with it, within its time.)
        output_shape: shape of one augmented sample; learned from sample 0 when None (made
            by a worker, under ``timeout``, like every sample).
        output_dtype: dtype of augmented samples; learned from sample 0 when None.
            ``"bfloat16"`` is ``ml_dtypes``' (what Keras, JAX and TensorFlow install).
        copy: True hands out private copies of each batch (made in the memory of an
            earlier batch once nothing refers to that one any more: no view, memoryview or
            tensor sharing it; see ``shmaug.engine._recycle``). False lends read-only views of
            the shared slot instead (no copy in this process: for consumers that copy anyway,
            e.g. to a device); a lent batch stays valid only until the next batch is asked
            for, so do not keep it (``list(loader)`` would hold overwritten views). One kept
            past ``close()`` stays readable (the mapping lives while a view does; its name is
            unlinked), with the contents it had when the loader closed.
        pin_memory: True page-locks the output ring (registers it with the CUDA driver, as
            ``torch.utils.data.DataLoader(pin_memory=True)`` pins its batches), so that a
            batch's copy to the GPU (``torch.from_numpy(xb).to("cuda")``,
            ``jax.device_put(xb)``) is read by the device from the slot a worker wrote: on an
            H100 that took the main thread's time per float32 224x224 batch of 64 from 6.0
            ms to 1.2 ms (``bench.gpu pinned``). Needs ``copy=False`` (a copied batch is in
            pageable memory again); a copy that does not wait (``non_blocking=True``) must
            finish before the next batch is asked for, since the slot is then rewritten.
            Where there is no NVIDIA driver or GPU, a warning says so and the ring stays
            pageable; ``loader.pinned`` says which. A ``Sequence`` does it by itself where
            Keras trains on an NVIDIA GPU with torch or JAX.
        value_range: the (low, high) the images' values lie in, as Keras' augmentation layers
            take it; None: by dtype, uint8 (0, 255), uint16 (0, 65535), floats (0, 1). It is
            bound into a shmaug pipeline (where the pipeline does not say its own), and the
            data is checked against it (when ``augment`` is a shmaug pipeline or the range is
            given): float images copied into shared memory all of them, memory-mapped or
            loaded ones their sample 0. Data outside it, or NaN, is refused with the fix,
            rather than clipped.
        load: advanced: ``fn(index) -> image`` run in the workers instead of ``x[index]``;
            then ``x`` only gives the length and is not copied into shared memory. An ``x``
            with a ``load(index)`` method (a sample source such as ``shmaug.ImageFiles``)
            is used that way without this argument.
        num_shards: how many hosts (or processes) share each epoch, as
            ``tf.data.Dataset.shard``; None for one. Each gets ``N // num_shards`` samples
            per epoch of the same global order (same ``seed`` everywhere) and augments only
            those; the ``N % num_shards`` left over rotate from epoch to epoch.
        shard_index: this host's part, ``0..num_shards - 1`` (its rank).
        sampling_weights: draw each epoch's samples with replacement, sample i with
            probability ``w[i] / sum(w)``, as torch's ``WeightedRandomSampler``: an array of
            one weight >= 0 per sample; a dict ``{class: weight}``; or ``"balanced"``
            (every class equally likely). Classes are the labels in ``y`` (integers or
            one-hot rows; a source's ``labels`` when ``y`` is left out). The draw depends
            only on ``(seed, epoch)``, so it is the same for any ``workers``; it implies
            ``shuffle=True``, and each draw gets a random stream of its own, so a sample
            drawn twice in an epoch is augmented two ways. None: every sample once.
        samples_per_epoch: with ``sampling_weights``, the draws of one epoch (all shards
            together); None: the dataset's length. ``len(loader)`` follows from it.
        mix: MixUp and / or CutMix (``shmaug.ops.MixUp(alpha)``, ``CutMix(factor)``,
            ``Mix(...)``): the workers mix neighbouring samples of each batch in pairs after
            augmenting them, and ``y`` (one array of class ids or one-hot rows) comes out as
            float32 soft targets mixed alike. Batches read in order (``in_order=True``: a
            ``Sequence``'s ``evaluate`` and ``predict``) are not mixed; their labels come
            as one-hot rows (so the same loss takes them). None: no mixing.

    Raises:
        ArgumentError, ArgumentTypeError: for a bad argument, before any process starts.
        NotPicklableError: when ``augment`` (or ``load``) cannot be sent to a worker.
        SharedMemoryError: when /dev/shm cannot hold the dataset and the ring.
        WorkerError, WorkerDied, WorkerTimeout: when making sample 0 (the probe that sizes
            the output) raises, crashes its worker or outlasts ``timeout``.

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
        workers: int | str | None = "auto",
        seed: int | None = None,
        shuffle: bool | str | None = None,
        shuffle_window: int | None = None,
        drop_remainder: bool = False,
        start_method: str | None = None,
        max_queue_size: int = 8,
        timeout: float | None = None,
        output_shape: tuple[int, ...] | None = None,
        output_dtype: Any = None,
        load: Callable[[int], Any] | None = None,
        copy: bool = True,
        pin_memory: bool = False,
        value_range: tuple[float, float] | None = None,
        num_shards: int | None = None,
        shard_index: int | None = None,
        sampling_weights: Any = None,
        samples_per_epoch: int | None = None,
        mix: Mix | None = None,
    ) -> None:
        data = Data.of(x, y, load)  # the data first, then the settings: each checked once
        self._build(Options.of(Settings.of(locals()), data))
        if self._pin_memory and (self._ring is None or self.copy):
            why, fix = (("has none (nothing to augment: batches are gathered copies)",
                         "copy=False and an augment") if self._ring is None else
                        ("hands out copies of its batches (copy=True)", "copy=False"))
            warn(f"pin_memory=True page-locks the ring the workers write, but this loader "
                 f"{why}, so a batch's copy to a GPU gains nothing. Fix: pass {fix}, or leave "
                 f"pin_memory out.")

    @classmethod
    def _from_options(cls, options: Options, *, pin_memory: bool | None = None) -> Loader:
        """A loader of options resolved already: a ``Sequence``'s, checked once when it was
        made, for every loader it starts; ``pin_memory``, where given, in place of the
        options' (a Sequence decides it when its workers start)."""
        loader = cls.__new__(cls)
        loader._build(options, pin_memory)
        return loader

    def _build(self, o: Options, pin_memory: bool | None = None) -> None:
        self._closed = True  # until fully built, so close() and __del__-time paths are safe
        self._options = o  # invariant: what was asked, checked; the rest is what was built
        self._pin_memory = o.settings.workers.pin_memory if pin_memory is None else pin_memory
        order, asked = o.order, o.settings.workers
        self.y, self.batch_size, self.seed, self.shuffle = (
            o.data.y, order.plan.batch_size, order.seed, order.shuffle)
        self.auto_workers, self._workers_asked = asked.auto, asked.count
        self.start_method, self.max_queue_size, self.timeout, self.copy = (
            asked.start_method, asked.max_queue_size, asked.timeout, asked.copy)
        self.augment, self._augmented = o.pipeline.augment, o.pipeline.moved
        self.mix = o.pipeline.mix  # invariant: MixUp / CutMix of training batches, or None
        # invariant: where the labels the mix turns into soft targets are kept (y's array)
        self._labels: np.ndarray | None = None
        if self.mix is not None:
            self._labels = self.mix.label_array(o.data.labels)
        # invariant: the (low, high) the images lie in; None while a `load` source is unprobed
        self.value_range = o.pipeline.value_range
        self.num_shards, self.shard_index, self._plan = (
            order.num_shards, order.shard_index, order.plan)
        self._shard = Shard(self.num_shards, self.shard_index)
        self._n = order.n  # invariant: samples in the dataset (all shards)
        # invariant: cumulative sampling weights (shared with the workers once they start)
        self._cdf = None if order.weights is None else np.cumsum(order.weights)
        self._orders = OrderCache(self.seed, order.samples, self.shuffle, shard=self._shard,
                                  cdf=self._cdf)
        self._epoch = 0  # invariant: the epoch the next pass produces
        self._start = 0  # invariant: the batch the next pass starts at (0 unless resumed)
        self._pass: int | None = None  # the epoch of the pass in progress, if any
        self._done = 0  # invariant: batches the pass in progress has handed out
        # Only gathering to do: one copy in this process beats a round trip through workers.
        self._gather_only = self.augment is None and o.data.load is None and self.mix is None
        self._store = SharedStore()
        self._ring: OutputRing | None = None
        self._pool: _Pool = _NoPool()
        self._marks: np.ndarray | None = None  # invariant: 1 where `load` stood in (shared)
        self._x: Any = None  # invariant: where workers read (a shared view, a map, a source)
        self._load: Any = None  # invariant: what workers call for sample i; None: x[i]
        try:
            shape, dtype = self._start_engine(o)
        except BaseException:  # a bad probe, Ctrl-C, /dev/shm full: leave nothing behind
            _shutdown(None, self._pool, self._store)
            raise
        self.output_shape: tuple[int, ...] = shape
        self.output_dtype = np.dtype(dtype)
        # Copies batches out of shared memory (or gathers them) ahead of the consumer; not
        # with workers=0, which keeps everything on the caller's thread for debugging.
        self._copier = Copier() if self.workers else None
        self._recycler = Recycler()  # the arrays batches are copied into (see _recycle)
        # Batches gathered from x, when there is nothing to augment (no ring, no pool).
        self._gather = Gatherer(self._x, self._copier, self._recycler, self._rows, len(self)) \
            if self._gather_only else None
        # invariant: measures epochs and decides the count, with workers="auto" and a pool
        self._auto = AutoWorkers(self._workers_asked, self._pool.busy_s) \
            if self.auto_workers and isinstance(self._pool, WorkerPool) else None
        self._prefetch = None if self._ring is None else Prefetcher(
            self._ring, self._pool, self._plan, workers=self.workers, timeout=self.timeout,
            copier=self._copier, recycler=self._recycler if self.workers else None,
            step=1 if self.mix is None else 2)
        # Backstop for a loader that is never closed: runs at garbage collection or exit.
        self._finalizer = weakref.finalize(self, _shutdown, self._prefetch, self._pool,
                                           self._store, self._copier)
        self._figures = Figures(self._pool)  # stats(): the window starts now
        self.last_hit = False  # whether the last batch() was ready when asked for
        self._closed = False
        _OPEN.add(self)
        log.debug("Loader ready: %d samples, %d batches/epoch, %d workers (%s)", self._n,
                  len(self), self.workers, self.start_method or "default start method")

    # -- set-up helpers --------------------------------------------------------------------

    def _start_engine(self, o: Options) -> tuple[tuple[int, ...], Any]:
        """Where workers read, the ring, the workers, and sample 0 (made by a worker like
        every sample, it sizes the ring): the output's shape and dtype. With nothing to
        augment, only where the batches are gathered from."""
        images = o.data.images
        seed_globals = global_rng_use(self.augment, o.data.load)  # None: workers watch draws
        load = self._marking(o.data.load, self._n)
        self._load = load
        payload = b"" if self.workers == 0 or self._gather_only else self._payload(load)
        if self._gather_only:
            assert images is not None  # (nothing to augment and no `load`)
            self._x = images
            return tuple(images.shape[1:]), images.dtype
        shape, dtype = o.settings.output.shape, o.settings.output.dtype
        if o.pipeline.checked and self.value_range is not None and images is not None \
                and mapped_file_handle(images) is None:
            inputs.check_values(images, self.value_range,  # all of it
                                o.settings.output.bounds is not None, self.augment)
        # A batch never holds more than the dataset: batch_size=10**12 is one batch of n.
        self._ring = OutputRing(self._store, self.max_queue_size, min(self.batch_size, self._n))
        # What must fit in /dev/shm, checked before anything is copied there: the data and
        # the targets now (with the ring when its size is declared), the ring once the probe
        # has sized it, before the data's rows past sample 0.
        need = copied_bytes(images, self._augmented, self.workers)
        if shape is not None and dtype is not None:  # before any process starts, too
            self._ring.check_fits(shape, dtype, besides=need)
        else:
            check_need(need)
        x_handle, self._x, unfilled = self._place_dataset(o.data.x, load)
        self._pool = self._start_pool(x_handle, load, payload, seed_globals, o.order.samples)
        # User code runs only where workers run it: the probe is a task like any other.
        probe = await_probe(self._pool, self.timeout)
        self.value_range = self.value_range or dtype_range(probe.input_dtype)
        if o.pipeline.checked and self.value_range is not None:
            inputs.check_probe_values(probe.input_range, probe.input_nonfinite,
                                      self.value_range, o.settings.output.bounds is not None,
                                      probe.input_dtype, self.augment)
        sample_shape, dtype = output_of(probe, shape, dtype)
        self._fill_dataset(unfilled, sample_shape, dtype, probe.targets)
        self._ring.allocate(sample_shape, dtype, targets=probe.targets)
        if self._pin_memory:
            self._ring.pin()
        self._pool.attach_ring(self._ring)
        return sample_shape, dtype

    def _start_pool(self, x_handle: ArrayHandle | None, load: Any, payload: bytes,
                    seed_globals: bool | None, n: int) -> WorkerPool | InlinePool:
        """The workers (or, for ``workers=0``, the same slice loop in this process); ``n``:
        samples per epoch (all shards)."""
        assert self._ring is not None
        if self.workers == 0:
            return InlinePool(SliceRunner(
                self._x, None, self.augment, load, seed=self.seed, n=n, shuffle=self.shuffle,
                seed_globals=seed_globals, generation=self._ring.generation,
                shard=self._shard, target_inputs=self._augmented, cdf=self._cdf,
                mix=self.mix))
        weights = None if self._cdf is None else self._store.put(
            self._cdf, what="the sampling weights")[0]
        target_inputs = {}
        for name, array in self._augmented.items():  # where workers read them, as the images
            target_inputs[name] = mapped_file_handle(array) or self._store.put(
                array, what=f"the target y[{name!r}]")[0]
        spec = WorkerSpec(x_handle, None, payload, self.seed, n, self.shuffle, seed_globals,
                          self._shard, target_inputs, weights, mix=self.mix)
        return WorkerPool(spec, self.workers, self.start_method, self.timeout,
                          store=self._store, generation=self._ring.generation_handle,
                          in_flight_per_worker=self.max_queue_size + 1,
                          capacity=self._workers_asked,
                          op=op_name(self.augment if self.augment is not None else load))

    def _marking(self, load: Any, n: int) -> Any:
        """``load`` made to mark the samples it stands in for (a source such as
        ``ImageFiles`` with ``on_error="skip"``), in a shared byte per sample; others as
        they are. Marks are counted when their batch is delivered (``_count_stand_ins``)."""
        if callable(getattr(load, "sharing", None)):
            # A source's own tables (ImageFiles' paths) go into this loader's shared memory
            # once, so workers attach to them instead of each receiving a copy.
            load = load.sharing(self._store)
        if not callable(getattr(load, "marking", None)):
            return load
        handle, self._marks = self._store.empty((n,), np.uint8, what="the skip marks")
        return load.marking(handle, self._marks)

    def _count_stand_ins(self, indices: np.ndarray) -> None:
        """Count the delivered samples a ``load`` stood in for; warn at the first one."""
        assert self._marks is not None
        marked = indices[self._marks[indices] != 0]
        if not marked.size:
            return
        name = getattr(self._load, "name", str)
        if self._figures.stood_in({i: name(i) for i in marked.tolist()}):
            warn(self._load.replaced_warning(int(marked[0])))

    def _place_dataset(self, x: Any, load: Any) -> tuple[ArrayHandle | None, Any, _Unfilled]:
        """Where workers read samples: nowhere (``load``), the file behind a memory map, or a
        shared-memory copy made here, of sample 0 only (for the probe), with the rows still
        to copy once the whole need is known to fit (``_fill_dataset``)."""
        if load is not None:
            return None, x, None
        handle = mapped_file_handle(x)
        if handle is not None:
            log.debug("dataset is memory-mapped from %s; nothing copied", handle.name)
            view = x.view()
            view.flags.writeable = False
            return handle, view, None
        handle, view = self._store.put(x, rows=1)
        unfilled = view[1:], x[1:]  # writable, unlike the view handed out
        view.flags.writeable = False  # ops get read-only views, here as in workers
        return handle, view, unfilled

    def _fill_dataset(self, unfilled: _Unfilled, sample_shape: tuple[int, ...], dtype: Any,
                      targets: Any) -> None:
        """Once the ring is sized: check that it fits with the dataset's rows past sample 0
        (``unfilled``, from _place_dataset), then copy them."""
        assert self._ring is not None
        rest = None if unfilled is None else unfilled[1]
        self._ring.check_fits(sample_shape, dtype, targets, besides=copied_bytes(rest, {}, 0))
        if unfilled is not None:
            unfilled[0][...] = rest

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
        """The current epoch: the one the pass in progress produces, else the one the next
        pass will; set it to choose the next pass's epoch (to resume a run)."""
        return self._epoch if self._pass is None else self._pass

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._epoch = check.non_negative_int("epoch", value)
        self._start = 0
        self._pass = None  # reads back as set; a pass still running goes on with its own

    @property
    def workers(self) -> int:
        """Worker processes running now: with ``workers="auto"``, the count chosen so far (0
        for ``workers=0``; with nothing to augment, the count asked for, though none runs)."""
        pool = self._pool
        return self._workers_asked if isinstance(pool, _NoPool) else pool.workers

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (empty when none run)."""
        return list(self._pool.pids)

    def __iter__(self) -> Iterator[tuple[np.ndarray, Any]]:
        epoch, start = self._epoch, self._start
        # Moved on as the pass starts: a pass cut short (a `break` after steps_per_epoch
        # batches, a kept iterator) must not make the next pass repeat this epoch.
        self._epoch, self._start = epoch + 1, 0
        self._pass, self._done = epoch, start
        try:
            for batch in range(start, len(self)):
                out = self.batch(batch, epoch=epoch)
                self._done = batch + 1  # handed out: a state saved now resumes after it
                yield out
        finally:
            if self._pass == epoch:
                self._pass = None

    STATE_VERSION = 1  # of state_dict()'s format; bumped when its meaning changes

    def state_dict(self) -> dict[str, Any]:
        """Where iteration stands, as a small JSON-ready dict, for ``load_state_dict``.

        Holds the seed, the epoch and the batches of it already handed out by the pass in
        progress (or where the next pass starts), the shard, and a fingerprint of what the
        batches depend on (dataset length, batch size, shuffle, drop_remainder, num_shards).
        All hosts of a sharded run stand at the same (epoch, batch), so any host's state
        resumes every host. It always says what this loader would yield next: after a
        ``break`` out of a pass, that is the next epoch (a new ``for`` starts one), so to
        resume mid-epoch, save the state inside the loop, before the ``break``.

        Example:
            >>> json.dump(loader.state_dict(), open("loader.json", "w"))
        """
        if self._pass is not None and self._done < len(self):
            epoch, batch = self._pass, self._done
        elif self._pass is not None:  # the pass handed out its last batch
            epoch, batch = self._pass + 1, 0
        else:
            epoch, batch = self._epoch, self._start
        return {"format": "shmaug.Loader", "version": self.STATE_VERSION, "seed": self.seed,
                "epoch": epoch, "batch": batch, "shard_index": self.shard_index,
                "fingerprint": self._fingerprint()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``): the next pass yields, bit for bit,
        the batches the saved run would have yielded next.

        Raises:
            ArgumentError: for a state of another dataset length, batch size, shuffle,
                drop_remainder, shard count, seed or format version (naming the field).
        """
        expected = {**self._fingerprint(), "seed": self.seed}
        epoch, batch = check.resume_state(state, "shmaug.Loader", self.STATE_VERSION,
                                          expected, len(self))
        self._epoch, self._start, self._pass = epoch, batch, None

    def _fingerprint(self) -> dict[str, Any]:
        return self._options.order.fingerprint()

    def batch(self, index: int, *, epoch: int | None = None,
              in_order: bool = False) -> tuple[np.ndarray, Any]:
        """Batch ``index`` of ``epoch`` (default: the current one) as ``(x, y)`` copies.

        Random access is allowed; batches after this one are prefetched on the guess that
        the consumer goes on in order. A negative ``index`` counts from the end, as for
        ``seq[-1]`` and any Python sequence. ``in_order=True`` reads the epoch in the
        dataset's order even when the loader shuffles (each sample augmented as in that
        epoch's shuffled pass): how a ``Sequence`` serves ``evaluate`` and ``predict``.
        """
        return self._batch(index, epoch, in_order,
                           Handoff.COPY if self.copy else Handoff.UNTIL_NEXT)

    def _batch(self, index: int, epoch: int | None, in_order: bool,
               handoff: Handoff) -> tuple[np.ndarray, Any]:
        """``batch``, handed over as ``handoff`` says: a ``Sequence`` lends what Keras asks
        for (``Handoff.LEND``: the slot is the batch's while any array of it lives)."""
        self._ensure_open()
        index = check.batch_index(index, len(self), "loader.batch(0)")
        epoch = self.epoch if epoch is None else self._epoch_arg(epoch)
        key = self._key(epoch, in_order)
        start, stop = self._plan.bounds(index)
        positions = self._orders(key)[start:stop]
        began = time.perf_counter()
        if self._auto is not None:  # between two epochs: the pool may be resized
            self._follow_auto(epoch, began)
        self._figures.asked(began)
        made: dict[str, np.ndarray] = {}  # augmented targets
        if self._gather_only:
            assert self._gather is not None
            xb, hit = self._gather(key, index, positions), True
        else:
            assert self._prefetch is not None
            xb, made, hit = self._prefetch.produce((key, index), stop - start,
                                                   handoff=handoff)
            if self._marks is not None:  # made now, so its stand-ins are marked by now
                self._count_stand_ins(positions)
        self.last_hit = bool(hit)
        done = time.perf_counter()
        self._figures.delivered(stop - start, done - began, self.last_hit)
        if self._auto is not None:
            self._auto.after(done - began, self.last_hit, done)
        made_by_id = {id(self._augmented[k]): v for k, v in made.items()}
        if self.mix is not None:  # soft targets; one-hot where read in order (unmixed)
            assert self._labels is not None
            made_by_id[id(self._labels)] = self.mix.one_hot(self._labels[positions]) \
                if key & IN_ORDER else self._soft_labels(key, start, positions)
        return xb, inputs.gather(self.y, positions, made_by_id)

    def _soft_labels(self, key: int, start: int, positions: np.ndarray) -> np.ndarray:
        """The labels of the batch at ``start`` mixed as the workers mixed its images: the
        same draws (``Mix.draws``), from the same (seed, epoch, shard, batch)."""
        assert self.mix is not None and self._labels is not None and self._ring is not None
        slot = self._ring.view.shape[1:]  # (rows of a full batch, *sample shape)
        drawn = self.mix.draws(self.seed, seed_epoch(key), self.shard_index, start, slot[0],
                               slot[1:])
        return self.mix.soft_labels(self._labels[positions], drawn)

    def _key(self, epoch: int, ordered: bool) -> int:
        """The engine's key of ``epoch`` read shuffled, or in the dataset's order. Where the
        loader does not shuffle (or draws by weight: a draw has no dataset order) the two are
        one stream, and share its batches; but with a ``mix`` never (in order: unmixed)."""
        apart = (self.shuffle and self._cdf is None) or self.mix is not None
        return in_order(epoch) if ordered and apart else epoch

    @staticmethod
    def _epoch_arg(value: Any) -> int:
        epoch: int = check.non_negative_int("epoch", value)
        if epoch >= IN_ORDER:
            raise ArgumentError(
                f"`epoch` must be below 2**62; received {epoch}. Fix: count epochs from 0.")
        return epoch

    def _follow_auto(self, epoch: int, now: float) -> None:
        """``workers="auto"``: at the first ask of another epoch, resize the pool if the
        last epoch's figures say so (``_autoworkers``)."""
        assert self._auto is not None
        change = self._auto.before(epoch, self.workers, now)
        if change is not None:
            self._resize(change)

    def _resize(self, workers: int) -> None:
        """Run ``workers`` workers from now on (at most the usable cores, with "auto").
        Batches already in flight are finished by the workers that hold them."""
        assert self._prefetch is not None and isinstance(self._pool, WorkerPool)  # (auto's)
        self._pool.resize(workers)
        self._prefetch.resized(workers)

    def indices(self, index: int, *, epoch: int | None = None,
                in_order: bool = False) -> np.ndarray:
        """The dataset indices of the samples in batch ``index`` of ``epoch`` (negative:
        from the end), in order; ``in_order`` as for ``batch``."""
        epoch = self.epoch if epoch is None else self._epoch_arg(epoch)
        return self._rows(check.batch_index(index, len(self), "loader.indices(0)"),
                          self._key(epoch, in_order))

    def _rows(self, index: int, key: int) -> np.ndarray:
        """The dataset indices of batch ``index`` of the epoch key ``key``."""
        start, stop = self._plan.bounds(index)
        return self._orders(key)[start:stop]

    def stats(self) -> dict[str, Any]:
        """Throughput and stall figures since start (or the last ``reset_stats()``).

        Keys: ``images_per_s``, ``wait_fraction`` (share of the consumer's time spent
        waiting for data), ``hit_rate`` (batches ready when asked), ``queue_depth`` (batches
        ready now), ``workers`` (running now), ``workers_decision`` (with
        ``workers="auto"``: the latest decision and why, e.g. ``"2 -> 1: waited 0.3%, ..."``;
        else None), ``worker_busy`` (per-worker busy fraction), ``respawns``, ``batches``,
        ``images`` (augmented samples handed out: with ``num_shards`` K, 1/K of an epoch's)
        and, for a source that stands in for unreadable samples (``shmaug.ImageFiles`` with
        ``on_error="skip"``):

        - ``skipped``: stand-ins in the batches delivered since start (or ``reset_stats()``).
          Each unreadable file counts once per epoch its batch is delivered in: a whole epoch
          adds the number of unreadable files, two epochs twice that. Only what was delivered
          counts (not the sample 0 probe, prefetched or cancelled batches, or work a replaced
          worker redid), so it is the same for any ``workers`` and ``start_method``.
        - ``unreadable``: the sorted paths of the unreadable files met in delivered batches
          since start (not reset): a fact about the data, complete after one whole epoch.

        A sample counts as unreadable from the first time it was (a file that is fixed
        during the run still counts).
        """
        ready = self._prefetch.ready if self._prefetch is not None else 0
        return self._figures.report(self.workers, ready,
                                    None if self._auto is None else self._auto.summary())

    def reset_stats(self) -> None:
        """Start the ``stats()`` window afresh (e.g. at each epoch)."""
        self._figures.reset()

    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent."""
        self._closed = True
        _OPEN.discard(self)
        self._x = None
        if self._gather is not None:
            self._gather.clear()
        self._recycler.clear()
        if self._ring is not None:
            self._ring.detach()
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pinned(self) -> bool:
        """Whether the output ring is page-locked (``pin_memory=True`` where the CUDA driver
        took it)."""
        return self._ring is not None and self._ring.pinned

    def __repr__(self) -> str:
        """The settings as given, with what they resolved to: the worker count, the start
        method, the seed (drawn when None was given) and the output learned from sample 0."""
        order = self._options.order
        workers: Any = self.workers
        if self.workers and self._gather_only:
            workers = f"{self.workers} (none started: nothing to augment)"
        settings: list[tuple[str, Any]] = [
            ("x", self._options.data.shown), ("y", describe.brief(self.y)),
            ("batch_size", self.batch_size), ("augment", describe.brief(self.augment)),
            ("workers", workers),
            ("start_method", repr(describe.resolved_start_method(self.start_method))
             if self.workers else "None (workers=0: this process)"),
            ("seed", f"{self.seed} (drawn: seed=None)" if order.seed_drawn else self.seed),
            ("shuffle", self.shuffle), ("drop_remainder", self._plan.drop_remainder),
            ("max_queue_size", self.max_queue_size)]
        optional = [("timeout", self.timeout, None), ("copy", self.copy, True),
                    ("pin_memory", self._pin_memory, False),
                    ("value_range", self._options.settings.output.value_range, None),
                    ("num_shards", self.num_shards, 1), ("shard_index", self.shard_index, 0),
                    ("sampling_weights", order.weights, None),
                    ("samples_per_epoch", order.samples, self._n), ("mix", self.mix, None),
                    ("load", self._load if not hasattr(self._load, "marking") else None, None)]
        settings += [(k, describe.brief(v)) for k, v, default in optional
                     if v is not default and (default is None or v != default)]
        settings += [("output_shape", self.output_shape), ("output_dtype", str(self.output_dtype))]
        return describe.call_repr("shmaug.Loader", settings) + (" (closed)" if self._closed else "")

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> Any:
        raise TypeError(
            "A shmaug.Loader owns processes and shared memory and cannot be pickled. Fix: "
            "create it in the process that consumes it."
        )

    def _ensure_open(self) -> None:
        if self._closed:
            raise ClosedError(CLOSED)

