"""What a ``Loader`` starts from its options, makes batches with, and stops: the second of its
two steps (the first, ``config.options``, says what was asked, checked).

``Running`` puts the dataset in a ``SharedStore`` (or maps its file), allocates the
``OutputRing``, starts the ``WorkerPool`` (or the ``InlinePool`` for ``workers=0``), has a
worker make sample 0 to size the ring (its depth: ``handoff.depth``), and lets a
``Prefetcher`` keep that many batches in flight; with nothing to augment, a ``Gatherer``
copies batches straight from the data instead. It owns all of these and frees them in the
shutdown order (NOTE [shutdown order] in ``workers/pool.py``), from ``close()`` or, for a
loader never closed, from a weakref finalizer. It plans nothing: which samples a batch holds is the
loader's to say (``rows``), and a batch is known by its key ``(epoch, batch)``.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from typing import Any

import numpy as np

from .. import whole_decodes
from ..errors import warn
from ..memory.store import (
    ArrayHandle,
    SharedStore,
    check_need,
    copied_bytes,
    enlarge,
    mapped_file_handle,
    warn_if_beyond_memory,
)
from ..ops.core import check_picklable
from ..ops.params import dtype_range
from ..seeding import global_rng_use
from . import source
from .autoscale.autoworkers import AutoWorkers
from .config import inputs, ranges, tree
from .config.options import Options
from .handoff import depth, presses
from .handoff.copier import Copier
from .handoff.gather import Gatherer
from .handoff.prefetch import Handoff, Prefetcher
from .handoff.recycle import Recycler
from .handoff.ring import OutputRing
from .handoff.stats import Figures
from .plan.schedule import IN_ORDER, OrderCache, Shard, seed_epoch
from .remote import RemotePool, RemoteWorkers, shipped
from .workers.inline import InlinePool
from .workers.pool import WorkerPool
from .workers.probe import await_probe, output_of
from .workers.runner import SliceRunner, op_name
from .workers import shipping
from .workers.worker import WorkerSpec

log = logging.getLogger(__name__)


class _NoPool:
    """No workers (nothing to augment, or not started yet): the finalizer still has something
    to close."""

    pids: list[int] = []

    def close(self) -> None:
        pass


Pool = WorkerPool | InlinePool | RemotePool | _NoPool  # who makes the batches
_COMPARED_BYTES = 1 << 24  # the user's array is compared with the workers' copy this much at
# a time (a whole GiB in about 0.15 s on a 2-core host: a row or two rewritten is found)


def _tell_strided_map(x: Any) -> None:
    """Warn of a memory map the workers cannot map from its file, a view with a step or a
    flip (``full[::2]``, ``full[..., ::-1]``): it is copied into shared memory whole, which
    a user who passed a map (docs/files.md: nothing copied) does not expect."""
    if isinstance(x, np.memmap) and x.mode != "c" and x.filename is not None and \
            mapped_file_handle(x) is None:
        warn(f"`x` is a view of the memory map of {str(x.filename)!r} with a step or a flip "
             f"(not contiguous), which workers cannot map from the file: it is copied into "
             f"shared memory, {x.nbytes:,} bytes. Fix: pass the map itself or a contiguous "
             f"slice of it (x[a:b]), and take the step or the flip in `augment`.")


def _same_rows(given: np.ndarray, copy: np.ndarray) -> bool:
    """Whether ``given`` holds the bytes of ``copy`` (of its shape and dtype), row for row;
    read a chunk at a time, as words where they divide (rows that are not each one run of
    memory, a transposed view's or a Fortran-ordered array's, are gathered first: 4-150x
    slower)."""
    step = max(1, _COMPARED_BYTES // max(1, given[:1].nbytes))
    for start in range(0, len(given), step):
        a = np.ascontiguousarray(given[start:start + step]).reshape(-1).view(np.uint8)
        b = copy[start:start + step].reshape(-1).view(np.uint8)
        if a.nbytes % 8 == 0:
            a, b = a.view(np.uint64), b.view(np.uint64)
        if np.not_equal(a, b).any():
            return False
    return True


_Unfilled = tuple[np.ndarray, np.ndarray, ArrayHandle] | None  # a shared block's rows still
# to copy, their data, and the block (whose room they take once they are known to fit)


def _shutdown(prefetch: Prefetcher | None, pool: Pool, store: SharedStore,
              copier: Copier | None = None, ring: OutputRing | None = None) -> None:
    # A consumer waiting in another thread (a tf.data thread inside __getitem__) gets
    # ClosedError; then the copier thread, the workers (their queued work made stale first:
    # a slow op's next epoch is not made before they stop), and last the memory they read and
    # write (NOTE [shutdown order] in workers/pool.py).
    if prefetch is not None:
        prefetch.close()
    if copier is not None:
        copier.close()
    try:
        if ring is not None:
            ring.cancel_all()
        pool.close()
    finally:
        if ring is not None:
            ring.detach()
        store.close()


def _disown_in_child() -> None:
    """A fork of this process (``os.fork``, gunicorn's preload_app) inherits its running
    loaders: at the fork's exit their finalizers stopped the parent's workers, and batches
    asked there came from the parent's workers, mixed with the parent's own. The fork leaves
    the workers to the parent (``workers.pool``) and its memory mapped as it is (unmapped, it
    would leave the pool's status rows and the ring pointing at nothing: a segfault at the
    fork's next ``stats()``), and ``owner`` refuses its batches."""
    for run in list(_LIVE):
        run._finalizer.detach()


_LIVE: weakref.WeakSet[Running] = weakref.WeakSet()  # this process's running loaders
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_disown_in_child)


class Running:
    """A loader's running parts (see the module docstring), built from ``options`` and
    stopped by ``close``; ``pin_memory`` as resolved for this start."""

    def __init__(self, options: Options, pin_memory: bool) -> None:
        o, order = options, options.order
        self.pin_memory = pin_memory
        self.workers_asked = o.settings.workers.count
        self.plan = order.plan
        self.shard = Shard(order.num_shards, order.shard_index)
        self.n = order.n  # invariant: samples in the dataset (all shards)
        # invariant: cumulative sampling weights (shared with the workers once they start)
        self.cdf = None if order.weights is None else np.cumsum(order.weights)
        self._seed = order.seed
        self.orders = OrderCache(order.seed, order.samples, order.shuffle, shard=self.shard,
                                 cdf=self.cdf)
        # the targets workers move with the images, and those they make from a source
        self._augment, self._moved, self._made = o.pipeline.augment, o.pipeline.moved, \
            o.pipeline.made
        self._mix, self._settings = o.pipeline.mix, o.settings.workers
        # invariant: where the labels a mix turns into soft targets are kept (y's array)
        self.labels = None if self._mix is None else self._mix.label_array(o.data.labels)
        # invariant: the (low, high) the images lie in; None while a `load` source is unprobed
        self.value_range = o.pipeline.value_range
        # Only gathering to do: one copy in this process beats a round trip through workers.
        # (An output_shape or output_dtype other than x's has the workers write each sample,
        # checked and cast as an augmented one is.)
        output, x = o.settings.output, o.data.x
        self.gather_only = (self._augment is None and o.data.load is None and self._mix is None
                            and not self._made and isinstance(x, np.ndarray)
                            and output.shape in (None, x.shape[1:])
                            and output.dtype in (None, x.dtype))
        self.store = SharedStore()
        presses.watch_presses()  # a wait off the main thread then ends at Ctrl-C too
        self.ring: OutputRing | None = None
        self.pool: Pool = _NoPool()
        self.marks: np.ndarray | None = None  # invariant: stand-in + 1 where `load` stood in
        self.x: Any = None  # invariant: where workers read (a shared view, a map, a source)
        # the user's array x where self.x is a copy of it, to tell rows written into it later
        self._given: weakref.ref[np.ndarray] | None = None
        self._told_rewritten = False  # a pass found rows of it rewritten, and said so
        self.load: Any = None  # invariant: what workers call for sample i; None: x[i]
        self.undecoded = False  # invariant: workers get photos undecoded (a decode-time crop)
        try:
            shape, dtype = self._start(o)
        except BaseException:  # a bad probe, Ctrl-C, /dev/shm full: leave nothing behind
            _shutdown(None, self.pool, self.store, ring=self.ring)
            raise
        self.output_shape: tuple[int, ...] = shape
        self.output_dtype: np.dtype[Any] = np.dtype(dtype)
        # Copies batches out of shared memory (or gathers them) ahead of the consumer; not
        # with workers=0, which keeps everything on the caller's thread for debugging.
        self.copier = Copier() if self.workers else None
        self.recycler = Recycler()  # the arrays batches are copied into (see handoff.recycle)
        # Batches gathered from x, when there is nothing to augment (no ring, no pool).
        self.gather = Gatherer(self.x, self.copier, self.recycler, self.rows, len(self.plan)) \
            if self.gather_only else None
        # invariant: measures epochs and decides the count, with workers="auto" and a pool
        self.auto = AutoWorkers(self.workers_asked, self.pool.busy_s) \
            if self._settings.auto and isinstance(self.pool, WorkerPool) else None
        self.prefetch = None if self.ring is None else Prefetcher(
            self.ring, self.pool, self.plan,
            # remote makers take whole batches: one task each
            workers=1 if isinstance(self.pool, RemotePool) else self.workers,
            timeout=self._settings.timeout, copier=self.copier,
            recycler=self.recycler if self.workers else None,
            step=1 if self._mix is None else 2)
        # Backstop for a loader that is never closed: runs at garbage collection or exit.
        self._finalizer: weakref.finalize[..., Any] = weakref.finalize(
            self, _shutdown, self.prefetch, self.pool, self.store, self.copier, self.ring)
        self.owner = os.getpid()  # invariant: whose workers these are (a fork's are not)
        _LIVE.add(self)
        self.figures = Figures(self.pool)  # stats(): the window starts now

    @property
    def workers(self) -> int:
        """Worker processes running now (the count asked, where none runs)."""
        pool = self.pool
        return self.workers_asked if isinstance(pool, _NoPool) else pool.workers

    def rows(self, index: int, key: int) -> np.ndarray:
        """The dataset indices of batch ``index`` of the epoch key ``key``."""
        start, stop = self.plan.bounds(index)
        return self.orders(key)[start:stop]

    # -- making batches ----------------------------------------------------------------------

    def make(self, epoch: int, key: int, index: int, positions: np.ndarray, handoff: Handoff,
             began: float) -> tuple[np.ndarray, dict[str, np.ndarray], bool]:
        """Batch ``index`` of ``epoch`` read as its key ``key`` says (the samples at
        ``positions``), asked at ``began``: its images, the targets the workers moved with
        them (by name), and whether it was ready when asked."""
        if self.auto is not None:  # between two epochs: the pool may be resized
            change = self.auto.before(epoch, self.workers, began)
            if change is not None:
                self.resize(change)
        self.figures.asked(began)
        made: dict[str, np.ndarray] = {}
        if self.gather is not None:
            xb, hit = self.gather(key, index, positions), True
        else:
            assert self.prefetch is not None
            xb, made, hit = self.prefetch.produce((key, index), len(positions), handoff=handoff)
            if self.marks is not None:  # made now, so its stand-ins are marked by now
                self._count_stand_ins(positions)
            if self.undecoded:  # a fallback to a whole decode: said once per reason
                for reason in self.figures.untold_whole_decodes():
                    log.warning(whole_decodes.message(reason))
        done = time.perf_counter()
        short = self.prefetch is not None and self.prefetch.short
        self.figures.delivered(len(positions), done - began, bool(hit), short)
        if self.auto is not None:
            self.auto.after(done - began, bool(hit), done, short)
        return xb, made, bool(hit)

    def rewritten(self) -> bool:
        """Whether rows of the user's array differ from the copy the workers read: written
        after it was made (a buffer grown in place between active-learning rounds), each row
        compared whole."""
        given = self._given() if self._given is not None else None
        if given is None or given.shape != self.x.shape or given.dtype != self.x.dtype:
            return False
        return not _same_rows(given, self.x)

    def tell_rewritten(self) -> None:
        """As a Loader's pass begins: warn, once, where rows of the user's array differ from
        the copy the workers read (a buffer edited in place between epochs, pseudo-labels,
        paired its new labels, read at each batch, with its old images)."""
        if self._told_rewritten or not self.rewritten():
            return
        self._told_rewritten = True  # (x stays known: a Sequence's rewritten() still asks)
        warn("Rows of `x` were written after the loader was made: its workers read the copy "
             "made then, while `y` is read at each batch, so new labels would go with old "
             "images. Fix: make a new loader for the new data (a shmaug.Sequence copies "
             "`x` again at its next pass) (docs/loader.md#changing-settings-between-epochs).")

    def mixed(self, key: int, index: int, positions: np.ndarray, pipeline: Any,
              y: Any) -> dict[Any, np.ndarray]:
        """What a mix makes of batch ``index`` of the epoch key ``key`` (the samples at
        ``positions``) beside its images, by place in ``y``: its labels as soft targets, and
        what lies beside them (another input, sample weights) as floats, mixed pair by pair
        with the draws (``Mix.draws``, once a batch) the workers mixed its images with;
        one-hot and as they are where read in order (unmixed)."""
        mix, at_labels = self._mix, pipeline.mixed_at
        assert mix is not None and self.labels is not None and self.ring is not None
        beside = {at: tree.leaf(y, at)[positions] for at in pipeline.blended_at}
        if key & IN_ORDER:  # (floats either way: a pass's batches keep one signature)
            return {at_labels: mix.one_hot(self.labels[positions]),
                    **{at: r if r.dtype.kind == "f" else r.astype(np.float32)
                       for at, r in beside.items()}}
        slot = self.ring.view.shape[1:]  # (rows of a full batch, *sample shape)
        drawn = mix.draws(self._seed, seed_epoch(key), self.shard.index,
                          self.plan.bounds(index)[0], slot[0], slot[1:])
        return {at_labels: mix.soft_labels(self.labels[positions], drawn),
                **{at: mix.blended(r, drawn) for at, r in beside.items()}}

    def resize(self, workers: int) -> None:
        """Run ``workers`` workers from now on (at most the usable cores, with "auto").
        Batches already in flight are finished by the workers that hold them."""
        assert self.prefetch is not None and isinstance(self.pool, WorkerPool)  # (auto's)
        self.pool.resize(workers)
        self.prefetch.resized(workers)

    def target_rows(self, positions: np.ndarray) -> np.ndarray:
        """The rows of ``y`` that go with the samples at ``positions`` once made: a
        stand-in's own where ``load`` stood one in for an unreadable sample (its value,
        labels and weights: not those of the image it replaced)."""
        if self.marks is None:
            return positions
        marks = self.marks[positions]
        return np.where(marks != 0, marks.astype(np.int64) - 1, positions) if marks.any() \
            else positions

    def _count_stand_ins(self, indices: np.ndarray) -> None:
        """Count the delivered samples a ``load`` stood in for; warn at the first one."""
        assert self.marks is not None
        marked = indices[self.marks[indices] != 0]
        if not marked.size:
            return
        if self.figures.stood_in({i: self.load.name(i) for i in marked.tolist()}):
            warn(self.load.replaced_warning(int(marked[0])))

    def stats(self) -> dict[str, Any]:
        ready = self.prefetch.ready if self.prefetch is not None else 0
        return self.figures.report(self.workers, ready,
                                   None if self.auto is None else self.auto.summary(),
                                   None if self.ring is None else self.ring.depth)

    def close(self) -> None:
        """Stop the workers and free the shared memory (NOTE [shutdown order]). Idempotent.
        Holds none of the user's arrays after (a closed loader may be kept: TensorFlow keeps
        a Sequence's). Nothing in a fork of the process that started it (``owner``): its
        parts are that process's, and a lock a thread of it held at the fork stays held."""
        if self.owner != os.getpid():
            return
        self.x, self.labels, self._moved = None, None, {}
        if self.gather is not None:
            self.gather.clear()
        self.recycler.clear()
        self._finalizer()

    # -- starting ----------------------------------------------------------------------------

    def _start(self, o: Options) -> tuple[tuple[int, ...], Any]:
        """Where workers read, the ring, the workers, and sample 0 (made by a worker like
        every sample, it sizes the ring): the output's shape and dtype. With nothing to
        augment, only where the batches are gathered from."""
        images = o.data.images
        seed_globals = global_rng_use(  # None: workers watch draws
            self._augment, o.data.load, *(t.load for t in o.pipeline.worker_targets.values()
                                          if not isinstance(t, np.ndarray)))
        # A source's own tables (ImageFiles' paths) go into this loader's shared memory once,
        # so workers attach to them instead of each receiving a copy; a source that stands in
        # for unreadable samples marks them with their stand-in, in shared memory, counted
        # when their batch is delivered (``_count_stand_ins``), whose targets they then take.
        load, self.marks = source.marked(source.shared(o.data.load, self.store), self.store,
                                         self.n)
        # JPEGs undecoded, for a decode-time crop, where whole decodes may happen (counted)
        handing = source.undecoded(load, o.pipeline.plan.takes_undecoded)
        self.undecoded, load = handing is not load, handing
        self.load = load
        remote = o.settings.workers.remote
        payload = (b"", None) if self.workers == 0 or self.gather_only or remote is not None \
            else self._payload(load)
        if o.pipeline.checked and self.value_range is not None and images is not None:
            mapped = mapped_file_handle(images) is not None  # (its sample 0, as a worker's)
            ranges.check_values(np.asarray(images[:1]) if mapped else images,  # augmented
                                self.value_range, o.pipeline.range_origin, o.pipeline.plan,
                                part=mapped)
        if self.gather_only:
            assert images is not None  # (nothing to augment and no `load`)
            self.x = images
            return tuple(images.shape[1:]), images.dtype
        shape, dtype = o.settings.output.shape, o.settings.output.dtype
        # A batch never holds more than an epoch: batch_size=10**12 is one batch of n.
        # Generations for the most slots the depth may take: as given, or the default for
        # the most workers there may be (the autotuner's start); settled once sized.
        self.ring = OutputRing(self.store, int(self._settings.max_queue_size or
                                                depth.for_workers(self.workers_asked)),
                               self.plan.rows)
        if remote is not None:
            return self._start_remote(o, remote)
        # What must fit in /dev/shm, checked before anything is copied there: the data and
        # the targets now (with the ring when its size is declared), the ring once the probe
        # has sized it, before the data's rows past sample 0.
        _tell_strided_map(images)
        need = copied_bytes(images, {k: v for k, v in self._moved.items()
                                     if isinstance(v, np.ndarray)}, self.workers)
        if shape is not None and dtype is not None:  # before any process starts, too
            self._size_ring(shape, dtype, None, need)
        else:
            check_need(need, own=self.store.names)
        warn_if_beyond_memory(need)  # (/dev/shm may be as large as RAM: both would fill)
        x_handle, self.x, unfilled = self._place_dataset(o.data.x, load)
        self.pool = self._start_pool(x_handle, load, payload, seed_globals, o)
        # User code runs only where workers run it: the probe is a task like any other.
        probe = await_probe(self.pool, self._settings.timeout)
        self.value_range = self.value_range or dtype_range(probe.input_dtype)
        if o.pipeline.checked and self.value_range is not None:
            ranges.check_probe_values(probe.input_range, probe.input_nonfinite,
                                      self.value_range, o.pipeline.range_origin,
                                      probe.input_dtype, o.pipeline.plan)
        sample_shape, dtype = output_of(probe, shape, dtype)
        if o.data.y is not None:  # (a Ray maker is shipped no y: not checked there)
            inputs.unmoved_sized(o.data.labels, o.pipeline.plan, None if images is None
                                 else tuple(images.shape[1:]), sample_shape)
        self._fill_dataset(unfilled, sample_shape, dtype, probe.targets)
        self.ring.allocate(sample_shape, dtype, targets=probe.targets)
        if self.pin_memory:
            self.ring.pin()
        self.pool.attach_ring(self.ring)
        return sample_shape, dtype

    def _start_remote(self, o: Options, remote: RemoteWorkers) -> tuple[tuple[int, ...], Any]:
        """Makers elsewhere (``engine.remote``): the options shipped to them once, sample 0's
        output learned from one of them; here only the ring they fill. The data stays where
        they read it (this process copies none of it into shared memory)."""
        assert self.ring is not None
        self.pool = pool = RemotePool(remote.start(shipped(o), len(self.plan)), self.plan)
        shape, dtype, value_range = pool.probe()
        self.value_range = self.value_range or value_range
        self._size_ring(shape, np.dtype(dtype), None, {})  # (the default: for all they run)
        self.ring.allocate(shape, np.dtype(dtype), targets={})
        if self.pin_memory:
            self.ring.pin()
        pool.attach_ring(self.ring)
        return shape, np.dtype(dtype)

    def _start_pool(self, x_handle: ArrayHandle | None, load: Any,
                    payload: tuple[bytes, bytes | None],
                    seed_globals: bool | None, o: Options) -> WorkerPool | InlinePool:
        """The workers (or, for ``workers=0``, the same slice loop in this process)."""
        assert self.ring is not None
        order, n = o.order, o.order.samples  # n: samples per epoch (all shards)
        drawn = o.pipeline.plan.takes_undrawn
        if self.workers == 0:
            return InlinePool(SliceRunner(
                self.x, None, self._augment, load, seed=order.seed, n=n, shuffle=order.shuffle,
                seed_globals=seed_globals, generation=self.ring.generation,
                shard=self.shard, target_inputs=self._target_rows(self._moved, None, drawn),
                target_made=self._target_rows(self._made, None), cdf=self.cdf, mix=self._mix,
                cast=o.settings.output.dtype is not None))
        weights = None if self.cdf is None else self.store.put(
            self.cdf, what="the sampling weights")[0]
        spec = WorkerSpec(x_handle, None, payload[0], order.seed, n, order.shuffle, seed_globals,
                          self.shard, self._target_rows(self._moved, self.store, drawn),
                          weights,
                          mix=self._mix, target_made=self._target_rows(self._made, self.store),
                          payload_by_value=payload[1], cast=o.settings.output.dtype is not None)
        return WorkerPool(spec, self.workers, self._settings.start_method,
                          self._settings.timeout, store=self.store,
                          generation=self.ring.generation_handle,
                          in_flight_per_worker=self.ring.slots + 1,
                          capacity=self.workers_asked,
                          op=op_name(self._augment if self._augment is not None else load))

    @staticmethod
    def _target_rows(targets: dict[str, Any], store: SharedStore | None,
                     drawn: bool = False) -> dict[str, Any]:
        """Where a worker reads each target's rows: an array (with ``store``, for workers:
        its shared block's handle, or its file's where memory-mapped), or a target source's
        ``load`` (with ``store``: its tables in the store, as an image source's; ``drawn``:
        its masks left for the pipeline to draw)."""
        rows: dict[str, Any] = {}
        for name, target in targets.items():
            if not isinstance(target, np.ndarray):
                load = source.drawing(target.load, drawn)
                rows[name] = load if store is None else source.shared(load, store)
                if store is not None:  # (named, not a bare pickling error at process start)
                    check_picklable(rows[name], f"y[{name!r}].load" if name[0] != "y" else
                                    f"{name}.load")
            elif store is None:
                rows[name] = target
            else:
                rows[name] = mapped_file_handle(target) or store.put(
                    target, what=f"the target y[{name!r}]")[0]
        return rows

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
        handle, view = self.store.put(x, rows=1)
        if not isinstance(x, np.memmap):  # (a file's map: rewritten, a read may fault)
            self._given = weakref.ref(x)
        unfilled = view[1:], x[1:], handle  # writable, unlike the view handed out
        view.flags.writeable = False  # ops get read-only views, here as in workers
        return handle, view, unfilled

    def _fill_dataset(self, unfilled: _Unfilled, sample_shape: tuple[int, ...], dtype: Any,
                      targets: Any) -> None:
        """Once the ring is sized: check that it fits with the dataset's rows past sample 0
        (``unfilled``, from _place_dataset), then copy them."""
        assert self.ring is not None
        rest = None if unfilled is None else unfilled[1]
        self._size_ring(sample_shape, dtype, targets, copied_bytes(rest, {}, 0))
        if unfilled is not None:
            self.store.reserve(unfilled[2])  # (its room, now that it is known to fit)
            unfilled[0][...] = rest

    def _size_ring(self, sample_shape: tuple[int, ...], dtype: Any, targets: Any,
                   besides: dict[str, int]) -> None:
        """Settle the ring's depth for samples of this layout (``handoff.depth``), then check
        that it fits with ``besides`` (bytes still to be copied to shared memory)."""
        assert self.ring is not None
        asked = self._settings.max_queue_size  # (checked: an int, or None)
        chosen = self.ring.choose(None if asked is None else int(asked), self.workers_asked,
                                  sample_shape, dtype, targets, besides=besides)
        log.debug("shmaug queue: %s", chosen.describe())
        self.ring.check_fits(sample_shape, dtype, targets, besides=besides)
        if chosen.why in (depth.MEMORY, depth.SHM) and \
                depth.short(chosen.slots - 1, self.workers_asked):
            warn(f"The queue holds {chosen.slots} batch(es), too few for {self.workers_asked} "
                 f"workers to each have one ahead ({chosen.describe()}): they will wait for "
                 f"free slots. Fix: {depth.more_room(chosen.why, enlarge())}.")

    def _payload(self, load: Any) -> tuple[bytes, bytes | None]:
        """The user's code for the workers: pickled as is, and with a heavy module's code by
        value for workers that start fresh (``workers.shipping``)."""
        try:
            return shipping.pickled((self._augment, load), self._settings.start_method)
        except Exception:
            check_picklable(self._augment, "augment")  # (the error that names the member)
            if load is not None:
                check_picklable(load, "load")
            raise
