"""The plain-Python engine's front door: ``Loader``, batches of augmented samples from a
persistent worker pool.

A ``Loader`` takes two steps, each once: what was asked, checked (``config.options``:
``Options``, which it keeps, and whose fields its attributes read), then what is started for
it (``running.Running``: the shared store, the ring, the workers, the prefetch). Itself it
keeps only what a consumer sees: which batch of which epoch comes next (``plan.cursor``), the
targets gathered beside each batch, and the soft labels of a mix. A batch is known by its key
``(epoch, batch)``; since its content is a pure function of that key, the consumer may ask in
any order, ask twice, or resume at any epoch.

The Keras facade starts and reads its loaders through two named functions, its door into the
engine: ``start`` (a loader of options a ``Sequence`` resolved once) and ``lend`` (a batch
handed over as Keras gets it); a remote maker asks its loader through ``serve``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar, overload

import numpy as np

from ..errors import ArgumentError, ClosedError, warn
from ..ops.mixing import Mix
from .config import checks as check
from .config import describe, tree
from .config.options import (BatchOptions, Bounds, Count, Data, Options, OutputOptions, Settings,
                             Shape, ShuffleArg, StartMethod, WorkerOptions, WorkersArg)
from .handoff.prefetch import CLOSED, EpochBatch, Handoff
from .plan.cursor import Cursor
from .plan.schedule import IN_ORDER, in_order, seed_epoch
from .running import Running
from . import source

log = logging.getLogger(__name__)

_OPEN: weakref.WeakSet[Loader] = weakref.WeakSet()  # for close_open_loaders
T = TypeVar("T")
L = TypeVar("L", bound="Loader")  # a subclass's own type, from ``with``


def close_open_loaders() -> None:
    """Close every loader of this process that is still open (any thread may call it: the
    command line does, when Ctrl-C finds the main thread blocked elsewhere for good)."""
    for loader in list(_OPEN):
        loader.close()


class _Fixed:
    """A loader's attribute that setting is refused, with the fix (it would be ignored)."""

    _name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __set__(self, loader: Loader, value: Any) -> None:
        raise check.fixed_setting("loader", self._name, value)


class _Asked(_Fixed, Generic[T]):
    """What was asked (the loader's ``Options``), kept in one place."""

    def __init__(self, read: Callable[[Options], T]) -> None:
        self._read = read

    @overload
    def __get__(self, loader: None, owner: Any = None) -> _Asked[T]: ...

    @overload
    def __get__(self, loader: Loader, owner: Any = None) -> T: ...

    def __get__(self, loader: Loader | None, owner: Any = None) -> T | _Asked[T]:
        return self if loader is None else self._read(loader._options)


class _Made(_Fixed, Generic[T]):
    """What the loader made of what was asked (its ``Running``), said in ``doc``."""

    def __init__(self, read: Callable[[Running], T], doc: str) -> None:
        self._read, self.__doc__ = read, doc

    @overload
    def __get__(self, loader: None, owner: Any = None) -> _Made[T]: ...

    @overload
    def __get__(self, loader: Loader, owner: Any = None) -> T: ...

    def __get__(self, loader: Loader | None, owner: Any = None) -> T | _Made[T]:
        return self if loader is None else self._read(loader._run)


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
            consumer's wait for data under 2% (see ``shmaug.engine.autoscale``; the count is
            in ``loader.workers`` and ``stats()``); None: one per core, fixed; a number: that
            many, fixed; 0 runs everything in this process (for debugging);
            ``shmaug.ray.Workers(nodes, cpus_per_node)``: on Ray nodes, each running a pool of
            its own (see [Ray](../ray.md)). The batches are identical for any of these.
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
        max_queue_size: batches the ring holds in shared memory (made, being made, or held).
            None (default): 2 per worker + 2, at least 8 (for the most workers "auto" may
            run), within 2 GiB and half the free /dev/shm past the data still to copy there.
            A number is kept as given. ``stats()["queue"]`` says what chose it.
        timeout: seconds one task (a batch, or a worker's share of one) may run before
            ``WorkerTimeout``; None waits forever. (A source in a bucket fetches the samples
            of the tasks queued behind a task with it, within its time.)
        output_shape: shape of one augmented sample; learned from sample 0 when None (made
            by a worker, under ``timeout``, like every sample).
        output_dtype: dtype of every sample, augmented or not; learned from sample 0 when None.
            ``"bfloat16"`` is ``ml_dtypes``' (what Keras, JAX and TensorFlow install).
        copy: True hands out private copies of each batch (made in the memory of an
            earlier batch once nothing refers to that one any more: no view, memoryview or
            tensor sharing it; see ``shmaug.engine.handoff.recycle``). False lends read-only
            views of the shared slot (no copy in this process: for consumers that copy anyway,
            e.g. to a device), valid until the next batch is asked for: do not keep one
            (``list(loader)`` would hold overwritten views), nor let work still running read it
            (a JAX ``jit`` step returns before reading its input, and on CPU ``device_put``
            shares the array: block on the step first). With nothing to augment there is
            no slot to lend: its batches are gathered copies. One kept past ``close()`` stays
            readable (the mapping lives while a view does), as it was when the loader closed.
        pin_memory: True page-locks the output ring (registers it with the CUDA driver, as
            ``torch.utils.data.DataLoader(pin_memory=True)`` pins its batches), so that a
            batch's copy to the GPU (``torch.from_numpy(xb).to("cuda")``,
            ``jax.device_put(xb)``) is read by the device from the slot a worker wrote: on an
            H100 that took the main thread's time per float32 224x224 batch of 64 from 6.0
            ms to 1.2 ms (``bench.gpu pinned``). Needs ``copy=False``; a copy that does not
            wait (``non_blocking=True``; JAX's ``device_put`` until ``block_until_ready``)
            must finish before the next batch is asked for, which rewrites the slot. Where
            there is no NVIDIA driver or GPU, a warning says so and the ring stays pageable;
            ``loader.pinned`` says which. A ``Sequence`` does it by itself where Keras trains
            on an NVIDIA GPU with torch or JAX.
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
            together; None: the dataset's length), which ``len(loader)`` follows.
        mix: MixUp and / or CutMix (``shmaug.ops.MixUp(alpha)``, ``CutMix(factor)``,
            ``Mix(...)``): the workers mix neighbouring samples of each batch in pairs after
            augmenting them, and ``y`` (one array of class ids or one-hot rows) comes out as
            float32 soft targets mixed alike. Batches read ``in_order`` (``evaluate``,
            ``predict``) are not mixed; their labels come as one-hot rows. None: no mixing.

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

    y: _Asked[Any] = _Asked(lambda o: o.data.y)
    batch_size = _Asked(lambda o: o.order.plan.batch_size)
    seed = _Asked(lambda o: o.order.seed)
    shuffle = _Asked(lambda o: o.order.shuffle)
    num_shards = _Asked(lambda o: o.order.num_shards)
    shard_index = _Asked(lambda o: o.order.shard_index)
    auto_workers = _Asked(lambda o: o.settings.workers.auto)
    start_method = _Asked(lambda o: o.settings.workers.start_method)
    max_queue_size = _Asked(lambda o: o.settings.workers.max_queue_size)
    timeout = _Asked(lambda o: o.settings.workers.timeout)
    copy = _Asked(lambda o: o.settings.workers.copy)
    augment: _Asked[Any] = _Asked(lambda o: o.pipeline.augment)
    mix = _Asked(lambda o: o.pipeline.mix)  # MixUp / CutMix of training batches, or None
    workers = _Made(lambda r: r.workers, "Worker processes running now: with "
                    "``workers=\"auto\"``, the count chosen so far (0 for ``workers=0``; with "
                    "nothing to augment, the count asked for, though none runs).")
    value_range = _Made(lambda r: r.value_range, "The (low, high) the images lie in: as "
                        "given, else by the data's (or sample 0's) dtype.")
    output_shape = _Made(lambda r: r.output_shape, "The shape of one sample (as given, else "
                         "learned from sample 0).")
    output_dtype = _Made(lambda r: r.output_dtype, "The dtype of every sample (as given, "
                         "else learned from sample 0).")

    def __init__(
        self,
        x: Any,
        y: Any = None,
        batch_size: Count = 32,
        augment: Callable[[np.ndarray, np.random.Generator], Any] | None = None,
        *,
        workers: WorkersArg = "auto",
        seed: Count | None = None,
        shuffle: ShuffleArg = None,
        shuffle_window: Count | None = None,
        drop_remainder: bool = False,
        start_method: StartMethod | None = None,
        max_queue_size: Count | None = None,
        timeout: float | None = None,
        output_shape: Shape | None = None,
        output_dtype: Any = None,
        load: Callable[[int], Any] | None = None,
        copy: bool = True,
        pin_memory: bool = False,
        value_range: Bounds | None = None,
        num_shards: Count | None = None,
        shard_index: Count | None = None,
        sampling_weights: Any = None,
        samples_per_epoch: Count | None = None,
        mix: Mix | None = None,
    ) -> None:
        data = Data.of(x, y, load)  # the data first, then the settings: each checked once
        settings = Settings(
            BatchOptions(batch_size=batch_size, shuffle=shuffle, shuffle_window=shuffle_window,
                         drop_remainder=drop_remainder, seed=seed, num_shards=num_shards,
                         shard_index=shard_index, sampling_weights=sampling_weights,
                         samples_per_epoch=samples_per_epoch),
            WorkerOptions(workers=workers, start_method=start_method,
                          max_queue_size=max_queue_size, timeout=timeout, copy=copy,
                          pin_memory=pin_memory),
            OutputOptions(augment=augment, output_shape=output_shape, output_dtype=output_dtype,
                          value_range=value_range, mix=mix))
        self._start(Options.of(settings, data))
        warn_if_pinned_in_vain(self)

    def _start(self, o: Options, pin_memory: bool | None = None) -> None:
        self._closed = True  # until fully built, so close() and __del__-time paths are safe
        self._options = o  # invariant: what was asked, checked; the rest is what was started
        self._cursor = Cursor()  # invariant: which epoch and batch the consumer gets next
        self._making = threading.Lock()  # one batch at a time: two threads' passes take turns
        pin = o.settings.workers.pin_memory if pin_memory is None else pin_memory
        self._run = Running(o, pin)  # invariant: the store, ring, workers (NOTE in workers/pool.py)
        self.last_hit = False  # whether the last batch() was ready when asked for
        self._closed = False
        _OPEN.add(self)
        log.debug("Loader ready: %d samples, %d batches/epoch, %d workers (%s)", self._run.n,
                  len(self), self.workers, self.start_method or "default start method")

    # -- the public surface ----------------------------------------------------------------

    def __len__(self) -> int:
        """Batches per epoch."""
        return len(self._options.order.plan)

    @property
    def epoch(self) -> int:
        """The epoch of the pass in progress, else of the next; set it to resume a run."""
        return self._cursor.current

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._cursor.seek(check.non_negative_int("epoch", value))

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (empty when none run)."""
        return list(self._run.pool.pids)

    def __iter__(self) -> Iterator[tuple[np.ndarray, Any]]:
        run, epoch, start = self._cursor.begin()  # (moved on: a pass cut short repeats no epoch)
        self._run.tell_rewritten()  # (rows of x written since it was copied)
        try:
            for batch in range(start, len(self)):  # (a pass lends, under copy=False)
                out = self._batch(batch, epoch, False, Handoff.COPY if self.copy else
                                  Handoff.UNTIL_NEXT)
                self._cursor.handed(run, batch)  # a state saved now resumes after it
                yield out
        finally:
            self._cursor.end(run)
            self.pause_stats()

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
        epoch, batch = self._cursor.next(len(self))
        return {"format": "shmaug.Loader", "version": self.STATE_VERSION, "seed": self.seed,
                "epoch": epoch, "batch": batch, "shard_index": self.shard_index,
                "fingerprint": self._options.order.fingerprint()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``): the next pass yields, bit for bit,
        the batches the saved run would have yielded next.

        Raises:
            ArgumentError: for a state of another dataset length, batch size, shuffle,
                drop_remainder, shard count, seed or format version (naming the field).
        """
        expected = {**self._options.order.fingerprint(), "seed": self.seed}
        self._cursor.seek(*check.resume_state(state, "shmaug.Loader", self.STATE_VERSION,
                                              expected, len(self)))

    def batch(self, index: int, *, epoch: int | None = None,
              in_order: bool = False) -> tuple[np.ndarray, Any]:
        """Batch ``index`` of ``epoch`` (default: the current one) as ``(x, y)`` copies, also
        under ``copy=False`` (which lends a pass's batches, each until the next ask: this too).

        Random access is allowed; batches after this one are prefetched on the guess that
        the consumer goes on in order. A negative ``index`` counts from the end, as for
        ``seq[-1]``. ``in_order=True`` reads the epoch in the dataset's order even when the
        loader shuffles (each sample augmented as in that epoch's shuffled pass): how a
        ``Sequence`` serves ``evaluate`` and ``predict``."""
        return self._batch(index, epoch, in_order, Handoff.COPY)

    def _batch(self, index: int, epoch: int | None, in_order: bool,
               handoff: Handoff) -> tuple[np.ndarray, Any]:
        """``batch``, handed over as ``handoff`` says (``lend``: the facade's)."""
        self._ensure_open()
        index = check.batch_index(index, len(self), "loader.batch(0)")
        epoch = self.epoch if epoch is None else _epoch_arg(epoch)
        key = self._key(epoch, in_order)
        positions = self._run.rows(index, key)
        with self._making:
            xb, made, self.last_hit = self._run.make(epoch, key, index, positions, handoff,
                                                     time.perf_counter())
        pipeline = self._options.pipeline
        made_at = {pipeline.places[name]: rows for name, rows in made.items()}
        rows = self._run.target_rows(positions)  # (a stand-in's targets are its own)
        if pipeline.mixed_at is not None:  # a mix's soft targets, and what it blends beside
            made_at.update(self._run.mixed(key, index, rows, pipeline, self.y))
        return xb, tree.gather(self.y, rows, made_at)

    def _key(self, epoch: int, ordered: bool) -> int:
        """The engine's key of ``epoch`` read shuffled, or in the dataset's order. Where the
        loader does not shuffle (or draws by weight: a draw has no dataset order) the two are
        one stream, and share its batches; but with a ``mix`` never (in order: unmixed)."""
        apart = (self.shuffle and self._run.cdf is None) or self.mix is not None
        return in_order(epoch) if ordered and apart else epoch

    def indices(self, index: int, *, epoch: int | None = None,
                in_order: bool = False) -> np.ndarray:
        """The dataset indices of batch ``index`` (negative: from the end) of ``epoch``, in
        order; ``in_order`` as for ``batch``."""
        epoch = self.epoch if epoch is None else _epoch_arg(epoch)
        return self._run.rows(check.batch_index(index, len(self), "loader.indices(0)"),
                              self._key(epoch, in_order))

    def stats(self) -> dict[str, Any]:
        """Throughput and stall figures of the passes since start (or ``reset_stats()``).

        Keys: ``images_per_s``, ``wait_fraction`` (share of the consumer's time spent
        waiting for data), ``hit_rate`` (batches ready when asked), ``queue_depth`` (batches
        ready now), ``workers`` (running now), ``workers_decision`` (with
        ``workers="auto"``: the latest decision and why, e.g. ``"2 -> 1: waited 0.3%, ..."``;
        else None), ``queue`` (the ring: ``slots``, ``why`` (what chose them) and ``by`` (in
        a word), ``bound_bytes`` (the default's memory bound), ``slot_waits`` (batches asked
        for while the ring had room for fewer batches ahead than workers) and ``limited`` (the
        queue, not the workers, held the consumer up); None with nothing to augment),
        ``worker_busy`` (per-worker busy fraction), ``respawns``, ``batches``,
        ``images`` (augmented samples handed out: with ``num_shards`` K, 1/K of an epoch's),
        ``whole_decodes`` (photos decoded whole instead of a decode-time crop's window, by
        reason, each also logged once) and, for a source that stands in for unreadable
        samples (``shmaug.ImageFiles`` with ``on_error="skip"``):

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
        return self._run.stats()

    def reset_stats(self) -> None:
        """Start the ``stats()`` window afresh (e.g. at each epoch)."""
        self._run.figures.reset()

    def pause_stats(self) -> None:
        """A pass is over (a loop's end): ``stats()`` leaves out the time to the next ask."""
        self._run.figures.pause()

    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent."""
        self._closed = True
        _OPEN.discard(self)
        self._run.close()
        self._options = self._options.released()  # the user's arrays go with the workers

    @property
    def closed(self) -> bool:
        return self._closed or self._run.owner != os.getpid()  # (a fork's: the parent's)

    @property
    def pinned(self) -> bool:
        """Whether the ring is page-locked (``pin_memory=True`` where the CUDA driver took it)."""
        return self._run.ring is not None and self._run.ring.pinned

    def __repr__(self) -> str:
        """The settings as given, with what they resolved to: the worker count, the start
        method, the seed (drawn when None was given) and the output learned from sample 0."""
        run, data = self._run, self._options.data
        given = data.load is not getattr(data.x, "load", None)  # (not a source's own)
        load = run.load if given and not source.stands_in(run.load) else None
        return describe.loader_repr(self._options, workers=self.workers,
                                    gathering=run.gather_only, pin_memory=run.pin_memory,
                                    load=load, output=(self.output_shape, self.output_dtype),
                                    closed=self._closed, pool=run.pool,
                                    slots=None if run.ring is None else run.ring.slots)

    def __enter__(self: L) -> L:
        return self._ensure_open() or self  # (closed: fails here, not at its first batch)

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
        if self._run.owner != os.getpid():
            raise ClosedError(
                f"This shmaug loader (a Loader, or a Sequence's) was made in process "
                f"{self._run.owner}, and this process ({os.getpid()}) is a fork of it (os.fork, "
                f"gunicorn's preload_app): its workers and shared memory are that process's, "
                f"and answer it alone. Fix: make the loader in this process, after the fork "
                f"(gunicorn: in each worker, e.g. its post_fork hook, not at preload).")


def _epoch_arg(value: Any) -> int:
    """An ``epoch`` argument, checked."""
    epoch: int = check.non_negative_int("epoch", value)
    if epoch >= IN_ORDER:
        raise ArgumentError(
            f"`epoch` must be below 2**62; received {epoch}. Fix: count epochs from 0.")
    return epoch


def warn_if_pinned_in_vain(loader: Loader, *, sequence: bool = False) -> None:
    """``pin_memory=True`` where no batch's copy to a GPU reads the pinned ring (a
    ``sequence``'s loader: one that lends its batches whatever its ``copy``)."""
    run = loader._run
    if run.pin_memory and (run.ring is None or loader.copy and not sequence):
        why, fix = (("has none (nothing to augment: batches are gathered copies)",
                     "an augment" if sequence else "copy=False and an augment")
                    if run.ring is None else
                    ("hands out copies of its batches (copy=True)", "copy=False"))
        warn(f"pin_memory=True page-locks the ring the workers write, but this loader "
             f"{why}, so a batch's copy to a GPU gains nothing. Fix: pass {fix}, or leave "
             f"pin_memory out.")


def start(options: Options, *, pin_memory: bool | None = None) -> Loader:
    """A loader of options resolved already: the facade's door. A ``Sequence`` checks its
    options once, when it is made, and starts a loader of them each time its workers start;
    ``pin_memory``, where given, in place of the options' (a Sequence decides it then)."""
    loader = Loader.__new__(Loader)
    loader._start(options, pin_memory)
    return loader


def lend(loader: Loader, index: int, *, epoch: int, in_order: bool,
         keep: bool) -> tuple[np.ndarray, Any]:
    """Batch ``index`` of ``epoch`` as the facade hands it to Keras: a copy where ``keep`` (a
    batch held for a second ask), else lent (``Handoff.LEND``: the slot is the batch's while
    any array of it lives)."""
    return loader._batch(index, epoch, in_order, Handoff.COPY if keep else Handoff.LEND)


def rewritten(loader: Loader) -> bool:
    """Whether rows of the user's array ``x`` were written since ``loader`` copied it (a
    Sequence then copies it again; a Loader warns as its next pass begins)."""
    return loader._run.rewritten()


def serve(loader: Loader, key: int, index: int, ahead: Iterable[EpochBatch]) -> np.ndarray:
    """Batch ``index`` of epoch key ``key``, made by ``loader``, which prefetches ``ahead``
    (the batches this maker is asked for next) rather than the batches after this one: a
    remote maker's door (``engine.remote``)."""
    prefetch = loader._run.prefetch
    if prefetch is not None:
        prefetch.hint = list(ahead)
    xb, _ = loader.batch(index, epoch=seed_epoch(key), in_order=bool(key & IN_ORDER))
    return xb


def pool_of(loader: Loader) -> Any:
    """What makes ``loader``'s batches (a ``Sequence``'s repr shows how its workers started)."""
    return loader._run.pool
