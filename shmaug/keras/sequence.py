"""The Keras facade: a ``keras.utils.PyDataset`` whose batches come from shmaug's workers.

With callbacks.py and _distribution.py, the only modules that import Keras. It owns the
mapping from the batch indices Keras asks for to the batches the engine plans (the rules are
``_passes``'), and the epoch counter; the ``Loader`` owns processes and memory.

Keras asks a ``PyDataset`` for batches with nothing but an index: in random order under
``fit(shuffle=True)``; a few outside any epoch (the TensorFlow backend's signature probes, the
batch every backend draws to build an unbuilt model); from the thread calling ``fit`` (JAX,
torch) or from tf.data's threads (TensorFlow), which pull ahead, also across the gap between
epochs. Which of these asks train, and in which epoch, cannot depend on threads or timing, so
the facade reads the one signal that is the same on every backend: *which loop asks*. Keras
runs every pass over the indices as one fresh generator (``PyDatasetAdapter._get_iterator``),
kept across its epochs when ``steps_per_epoch`` is below ``len``. The generator frame that
calls ``__getitem__`` is the pass; an ask from no generator is a look. The pass Keras runs to
build an unbuilt model begins with ``on_epoch_begin`` called from its trainer's
``_symbolic_build``, which the facade reads off the stack. ``_passes.py`` holds the rules that
bind each ask to a batch of shmaug's stream (rule by rule, with the Keras behaviour each
answers) and ``_stack.py`` finds the asking frames; this module keeps the few batches asked
twice and the workers' lifecycle (``_idle.py`` stops those nobody asks).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from ..engine import _checks as check
from ..engine import _describe as describe
from ..engine import _inputs as inputs
from ..engine import _sampling as sampling
from ..engine.loader import Loader
from . import _checks as facade_checks
from . import _distribution, _idle
from . import _stack as stack
from ._passes import Key, Passes
from ..errors import (
    ArgumentError, ClosedError, ErrorRecord, NotInitializedError, rebuild, warn)

log = logging.getLogger(__name__)

_HELD = 2  # batches kept for a second ask: Keras' NUM_BATCHES_FOR_TENSOR_SPEC probes, and
# the first batches of a pass (which a build pass may have taken already: _passes rule 3)
_LIVE: weakref.WeakSet[Sequence] = weakref.WeakSet()  # for StallMonitor
_SET_UP = frozenset({  # what Sequence.__init__ sets: missing, a subclass skipped it
    "image_key", "_loader_args", "x", "_side", "_samples", "_sampling", "batch_size", "seed",
    "shuffle", "_shuffles", "_n", "_seed_given", "_shard_given", "num_shards", "shard_index",
    "_plan", "_passes", "_inferring", "_loader", "_closed", "_lock", "_held", "_requests",
    "_hits", "_previous", "_out_of_order", "_warned", "_used", "_stopped"})


class Sequence(keras.utils.PyDataset):  # type: ignore[misc]
    """A Keras ``PyDataset`` fed by shmaug's worker processes over shared memory.

    Takes the ``Loader``'s arguments with the same meaning and defaults. Workers start on first
    use.

    Keras' ``PyDataset`` arguments work as a Keras user expects: ``workers`` is how many
    processes prepare batches (shmaug's; the default ``"auto"`` lets the pool size itself
    between epochs, see ``shmaug.Loader``; 0 runs in this process), ``max_queue_size`` how many
    batches are prepared ahead; ``use_multiprocessing`` is accepted and changes nothing,
    because shmaug's workers are always processes (``False`` gets a ``ShmaugWarning``: it
    cannot make them threads). Keras itself is told ``workers=1, use_multiprocessing=False``
    so that it adds no threads or processes on top; hence ``seq.workers`` reads 1: it is the
    attribute Keras reads to decide whether to start threads or processes of its own, so it
    must say 1 however many processes shmaug runs. shmaug's count is in ``repr(seq)``,
    ``seq.loader.workers`` and ``seq.stats()["workers"]``.

    Subclass it to change what a sample is, without touching the engine:

    - ``augment(self, image, rng)`` runs in the workers for each sample;
    - ``load(self, index)`` runs in the workers to produce sample ``index`` (then ``x`` may
      be anything with a length, such as a list of file paths);
    - ``targets(self, y_batch)`` runs in this process on each batch's targets.

    Hooks that run in workers see a copy of the instance (pickled once per worker, without
    the loader and without the arrays already in shared memory).

    Args:
        x: images (N, H, W[, C]); or a dict of inputs whose image entry is ``image_key``.
        y: targets (array, or dict / list of arrays for multi-output models), or None.
        sample_weight: per-sample weights, or None.
        image_key: with a dict ``x``, the entry to augment (default: the only 3-D/4-D one).
        shuffle: decided per pass, as Keras decides it. None (the default) follows Keras:
            ``fit``'s training passes are shuffled (``fit(shuffle=True)``, Keras' default;
            in order under ``fit(shuffle=False)``), while ``evaluate``, ``predict`` and
            ``fit``'s validation passes read the samples in their order, so predictions line
            up with ``x``, whatever ran on the Sequence before; a loop by hand (``for b in
            seq``, ``to_tf_dataset``) reads in order too. True shuffles every pass except
            ``evaluate``, ``predict`` and validation (training passes only, loops by hand
            included); False never shuffles. Each sample is seen once per epoch either way,
            and a seed gives the same epochs. Looking at a batch (``seq[i]``, ``seq.batch``,
            ``len``, ``repr``, ``stats``) decides nothing.
        num_shards, shard_index: this host's part of every epoch (see ``shmaug.Loader``);
            ``len(seq)`` is then the batches of one shard.
        sampling_weights, samples_per_epoch: draw each epoch with replacement by weight (see
            ``shmaug.Loader``); classes are those of ``y``. Not Keras' ``sample_weight`` /
            ``class_weight``, which weigh the loss. ``len(seq)`` follows
            ``samples_per_epoch``.
        use_multiprocessing: Keras' argument, accepted for drop-in use (see above).
        Other arguments: as ``shmaug.Loader``.

    Example:
        >>> train = shmaug.Sequence(x, y, batch_size=256, augment=shmaug.presets.glyph_distort(),
        ...                         workers=2, seed=0, shuffle=True)
        >>> model.fit(train, epochs=10)
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
        shuffle: bool | None = None,
        drop_remainder: bool = False,
        start_method: str | None = None,
        max_queue_size: int = 8,
        timeout: float | None = None,
        output_shape: tuple[int, ...] | None = None,
        output_dtype: Any = None,
        sample_weight: Any = None,
        image_key: str | None = None,
        value_range: tuple[float, float] | None = None,
        num_shards: int | None = None,
        shard_index: int | None = None,
        sampling_weights: Any = None,
        samples_per_epoch: int | None = None,
        use_multiprocessing: bool | None = None,
    ) -> None:
        # Keras must not add threads or processes of its own on top of shmaug's (its adapter
        # starts them for workers > 1, or workers > 0 with use_multiprocessing).
        super().__init__(workers=1, use_multiprocessing=False, max_queue_size=max_queue_size)
        if facade_checks.use_multiprocessing(use_multiprocessing) is False:
            warn(
                "shmaug.Sequence always runs its `workers` in processes (they share the data "
                "through shared memory, so a process costs no copy), so "
                "use_multiprocessing=False cannot make them threads and is ignored. Fix: leave "
                "it out; pass workers=0 to run everything in this process instead.")
        self.image_key, images, extra_inputs = facade_checks.split_inputs(x, image_key)
        self._loader_args: dict[str, Any] = dict(
            batch_size=check.positive_int("batch_size", batch_size),
            augment=check.callable_or_none("augment", augment),
            workers=check.workers(workers),
            seed=check.seed(seed),
            shuffle=check.shuffle(shuffle),
            drop_remainder=check.boolean("drop_remainder", drop_remainder),
            start_method=check.start_method(start_method),
            max_queue_size=check.max_queue_size(max_queue_size),
            timeout=check.timeout(timeout),
            output_shape=output_shape,
            output_dtype=output_dtype,
            value_range=inputs.value_range(value_range),
        )
        source = not self._overrides("load") and inputs.is_source(images)  # e.g. ImageFiles
        if source and y is None:
            y = getattr(images, "labels", None)  # as Keras' image_dataset_from_directory
        custom_load = self._overrides("load") or source
        images = images if custom_load else inputs.image_array(images)
        inputs.pipeline_input(self._loader_args["augment"], images)  # a dtype or layout ops misread
        n = inputs.length(images) if custom_load else len(images)
        self.x = images  # invariant: what the workers read (array) or what `load` indexes
        self._side = {  # gathered per batch in this process, but for targets `augment` moves
            "y": inputs.targets(y, n, "y"),  # first: its `mask` is the one augmented
            "inputs": inputs.targets(extra_inputs or None, n, "x"),
            "sample_weight": inputs.targets(sample_weight, n, "sample_weight"),
        }
        weights = sampling.weights(sampling_weights, self._side["y"], n)
        self._samples = sampling.samples_per_epoch(samples_per_epoch, n, weights is not None)
        self._sampling = sampling.fingerprint(weights, self._samples)  # {} without weights
        self._loader_args.update(sampling_weights=weights, samples_per_epoch=samples_per_epoch)
        if self._overrides("augment"):
            self._refuse_lost_targets()
        self.batch_size: int = self._loader_args["batch_size"]
        self.seed: int = self._loader_args["seed"]
        # As given (a weighted draw is random: True); None follows Keras pass by pass
        self.shuffle: bool | None = True if weights is not None else self._loader_args["shuffle"]
        self._shuffles = self.shuffle is not False  # the engine's plan: some pass may shuffle
        self._loader_args["shuffle"] = self._shuffles
        self._n = n  # invariant: samples in the dataset (all shards)
        self._seed_given = seed is not None  # an InputContext's shards need it too
        self._shard_given = num_shards is not None  # else an InputContext may set the shard
        self._set_shard(num_shards, shard_index, drop_remainder)
        self._follow_distribution()  # a multi-process Keras distribution set already
        # Keras' adapters seen beginning an epoch -> whether evaluate or predict runs them
        self._inferring: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
        self._loader: Loader | None = None  # started on first use, so subclass state is complete
        self._stopped: Loader | None = None  # the last loader stopped when idle (its stats)
        self._used = 0.0  # invariant: monotonic time of the latest ask for a batch
        self._closed = False  # set by close(); no loader starts after it
        self._lock = threading.Lock()  # Keras may call from a tf.data thread
        self._held: OrderedDict[Key, Any] = OrderedDict()  # batches likely asked again, LRU
        self._requests = 0
        self._hits = 0
        self._previous = -1  # the last index a pass asked for (shuffle=False order check)
        self._out_of_order = 0  # requests that did not follow their predecessor
        self._warned = False

    if not TYPE_CHECKING:  # (mypy would take every attribute for one this may answer)
        def __getattr__(self, name: str) -> Any:
            """Reached only for a missing attribute: one ``__init__`` sets means that a
            subclass's ``__init__`` never called ours."""
            if name in _SET_UP and "_loader_args" not in self.__dict__:
                cls = type(self).__qualname__
                raise NotInitializedError(
                    f"{cls}.__init__ did not call super().__init__(...), so this "
                    f"shmaug.Sequence was never set up (it has no `{name}`). Fix: call "
                    f"super().__init__(x, y, batch_size=..., ...) in {cls}.__init__, before "
                    f"the Sequence is used.")
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- hooks a subclass may override -------------------------------------------------------

    def augment(self, image: np.ndarray, rng: np.random.Generator) -> Any:
        """Runs in a worker for each sample. Default: the ``augment`` argument, if any."""
        fn = self._loader_args["augment"]
        return image if fn is None else fn(image, rng)

    def load(self, index: int) -> Any:
        """Runs in a worker to produce sample ``index``. Default: ``x[index]`` from shared memory."""
        return self.x[index]

    def targets(self, y_batch: Any) -> Any:
        """Runs in this process on each batch's targets. Default: unchanged."""
        return y_batch

    # -- Keras' PyDataset contract -----------------------------------------------------------

    def __len__(self) -> int:
        if self._loader is None:  # Keras reads the length before it asks for any batch
            self._follow_distribution()
        return len(self._plan)

    def __getitem__(self, index: int) -> Any:
        index = check.batch_index(index, len(self))
        caller = stack.asking_loop(self)
        with self._lock:
            loader = self._ensure_loader()
            passes = self._passes
            begins = passes.begins(caller)
            if begins and stack.keras_is_building():  # JAX, torch: asked from the build
                passes.building(True)  # itself (also when on_epoch_begin is overridden)
            # Whose order: read off the stack only where a pass begins, or for a look
            in_order = self._in_order(stack.keras_adapter(self)) if begins or caller is None \
                else True
            key, in_pass = passes.ask(index, caller, in_order)
            if in_pass:
                if passes.taken == 1:  # a pass starts where it likes
                    self._previous = -1
                self._check_order(index, key[2], loader)
            self._requests += 1
            batch = self._held.get(key)
            if batch is not None:
                self._hits += 1
                self._held.move_to_end(key)
                return batch
            epoch, planned, ordered = key
            xb, side = loader.batch(planned, epoch=epoch, in_order=ordered)
            self._hits += loader.last_hit
            batch = self._assemble(xb, side, key)
            if not in_pass or passes.taken <= _HELD:  # a look or a build pass's, or a pass's
                self._held[key] = batch  # first ones (which a build pass may have taken)
                while len(self._held) > _HELD:
                    self._held.popitem(last=False)
            return batch

    def on_epoch_begin(self) -> None:
        """Keras begins an epoch: one of its own, or the one it runs to build an unbuilt model
        (which only borrows its epoch: _passes rule 3; on TensorFlow only this tells, since
        tf.data's threads ask: an override should call ``super().on_epoch_begin()``)."""
        building = stack.keras_is_building()
        adapter = stack.keras_adapter(self)
        inferring = adapter is not None and stack.keras_is_inferring()
        with self._lock:
            if adapter is not None:  # whose passes Keras never shuffles (see _in_order)
                self._inferring[adapter] = inferring
            self._passes.building(building)

    def on_epoch_end(self) -> None:
        """An epoch ends. After a loop by hand (``seq[i]`` for each batch, Keras' Sequence
        contract) the next one gets the next epoch, as the next ``for batch in seq`` does;
        after Keras' own passes nothing moves (_passes rule 5). An override should call
        ``super().on_epoch_end()``, else such a loop replays the same epoch."""
        if stack.from_adapter(self):  # Keras' passes are its generators; its calls move nothing
            return  # (fit calls it before its first pass, after the signature probes)
        with self._lock:
            self._passes.epoch_ended()

    # -- the rest of the public surface ------------------------------------------------------

    def batch(self, index: int, *, epoch: int | None = None, in_order: bool = False) -> Any:
        """Batch ``index`` of shmaug's order for ``epoch`` (default: the current one), as Keras
        gets it: ``x``, ``(x, y)`` or ``(x, y, sample_weight)``, with ``targets()`` applied.
        Random access that moves no pass and decides nothing: the batch a ``fit`` pass
        (shuffled unless ``shuffle=False``) serves at that position, or with ``in_order=True``
        the one ``evaluate`` and ``predict`` serve. (``seq.loader.batch`` is the engine's
        view: images and the raw targets.)

        Example:
            >>> xb, yb = seq.batch(3, epoch=1)
        """
        index = check.batch_index(index, len(self), "seq.batch(0)")
        epoch = self.epoch if epoch is None else check.non_negative_int("epoch", epoch)
        in_order = check.boolean("in_order", in_order) or not self._shuffles
        with self._lock:
            xb, side = self._ensure_loader().batch(index, epoch=epoch, in_order=in_order)
            return self._assemble(xb, side, (epoch, index, in_order))


    @property
    def epoch(self) -> int:
        """The epoch of the pass in progress (else of the next pass); set it to make the next
        pass start there (e.g. to resume)."""
        return self._passes.position[0]

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.seek(value, 0)

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Make the next pass (Keras' next generator, the next ``for`` over the Sequence)
        start at batch ``batch`` of epoch ``epoch``: its first new index gets that batch, the
        next one the batch after, and so on. A pass in progress goes on with its own epoch."""
        epoch = check.non_negative_int("epoch", epoch)
        batch = check.non_negative_int("batch", batch)
        if batch >= len(self):
            raise ArgumentError(
                f"`batch` must be below the {len(self)} batches of an epoch; received {batch}. "
                f"Fix: pass seek(epoch + batch // {len(self)}, batch % {len(self)})."
            )
        with self._lock:
            self._passes.seek(epoch, batch)
            self._previous = -1

    STATE_VERSION = 1  # of state_dict()'s format; bumped when its meaning changes

    def state_dict(self) -> dict[str, Any]:
        """Where the stream of batches stands, as a small JSON-ready dict.

        Besides the ``Loader``'s fields (seed, epoch, batch, shard, fingerprint) it holds this
        pass's bindings of Keras indices to batches, which carry an epoch across several short
        Keras epochs (``fit(steps_per_epoch=k)`` with k < ``len(seq)``). A restored Sequence
        asked for the same indices then serves the same batches, bit for bit. To resume
        ``fit`` itself use ``shmaug.EpochSync`` (Keras restarts its own iterator). Under
        ``to_tf_dataset()`` the state counts the batches tf.data has fetched, which its
        prefetch buffer holds ahead of the training loop: save at an epoch's end there.
        """
        with self._lock:
            passes = self._passes
            bindings = passes.bindings
            epoch, batch = passes.position
            return {
                "format": "shmaug.Sequence", "version": self.STATE_VERSION, "seed": self.seed,
                "epoch": epoch, "batch": batch, "shard_index": self.shard_index,
                "fingerprint": self._fingerprint,
                "bindings": [[i, e, b] for i, (e, b, _) in sorted(bindings.items())],
                "in_order": passes.in_order,
                "asked": sorted(bindings), "in_epoch": bool(bindings),
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``, also of another host's shard).

        Raises:
            ArgumentError: for a state of another dataset length, batch size, shuffle,
                drop_remainder, shard count, seed or format version (naming the field).
        """
        batches = len(self)  # first: under a distribution it may take this process's shard
        expected = {**self._fingerprint, "seed": self.seed}
        epoch, cursor = check.resume_state(state, "shmaug.Sequence", self.STATE_VERSION,
                                           expected, batches)
        bindings = facade_checks.bindings(state.get("bindings"), state.get("asked"), batches)
        in_order = state.get("in_order") is True or not self._shuffles
        with self._lock:
            self._passes.restore(epoch, cursor, {i: (e, b, in_order) for i, e, b in bindings},
                                 in_order)
            self._previous = -1

    @property
    def loader(self) -> Loader:
        """The engine behind this dataset (started on first access)."""
        with self._lock:
            return self._ensure_loader()

    def stats(self) -> dict[str, Any]:
        """The loader's figures (see ``Loader.stats``) with this facade's ``hit_rate``:
        the share of ``__getitem__`` calls served from batches already prepared."""
        with self._lock:  # a loader stopped when idle still has its figures: no restart
            loader = self._loader if self._loader is not None else self._stopped
        if loader is None:
            loader = self.loader
        stats = loader.stats()
        stats["hit_rate"] = self._hits / self._requests if self._requests else 0.0
        stats["requests"] = self._requests
        stats["workers"] = loader.workers
        return stats

    def reset_stats(self) -> None:
        if self._loader is not None or self._stopped is None:  # (stopped while idle: no
            self.loader.reset_stats()  # restart for this; the next start begins at zero)
        self._requests = self._hits = 0

    def to_tf_dataset(self, input_context: Any = None) -> Any:
        """A prefetching ``tf.data.Dataset`` of one epoch per iteration (custom loops,
        ``tf.distribute``), with the exact ``output_signature``.

        Args:
            input_context: a ``tf.distribute.InputContext``, as
                ``strategy.distribute_datasets_from_function`` passes it: the dataset is then
                shard ``ctx.input_pipeline_id`` of ``ctx.num_input_pipelines`` (set before the
                workers start; explicit ``num_shards``/``shard_index`` must agree). Its batches
                go whole to one replica, so ``batch_size`` is the per-replica batch size.

        Example:
            >>> dist = strategy.distribute_datasets_from_function(
            ...     lambda ctx: seq.to_tf_dataset(input_context=ctx))
        """
        import tensorflow as tf

        if input_context is not None:
            self._follow(input_context)
        first = self[0]  # a look: it moves the stream nowhere (_passes rule 2)

        def spec(a: Any) -> Any:
            return tf.TensorSpec((None, *np.shape(a)[1:]), tf.as_dtype(np.asarray(a).dtype))

        signature = tf.nest.map_structure(spec, first)

        def epoch() -> Iterator[Any]:
            self.on_epoch_begin()  # a subclass's hooks run per epoch, as under fit
            with self._lock:  # a pass restored half-way serves only what it had not served
                served = self._passes.restored
            for i in range(len(self)):
                if i not in served:
                    yield self[i]
            self.on_epoch_end()

        dataset = tf.data.Dataset.from_generator(epoch, output_signature=signature)
        if self.num_shards > 1:  # sharded already: tf.distribute must not shard it again
            options = tf.data.Options()
            options.experimental_distribute.auto_shard_policy = (
                tf.data.experimental.AutoShardPolicy.OFF)
            dataset = dataset.with_options(options)
        return dataset.prefetch(tf.data.AUTOTUNE)

    def _follow(self, ctx: Any) -> None:
        """Take the shard an ``InputContext`` assigns (before the workers start)."""
        wanted = (int(ctx.num_input_pipelines), int(ctx.input_pipeline_id))
        if wanted == (self.num_shards, self.shard_index):
            return
        if self._shard_given or self._loader is not None:
            why = ("was created with" if self._shard_given else "already runs with")
            raise ArgumentError(
                f"`input_context` assigns shard {wanted[1]} of {wanted[0]} "
                f"(input_pipeline_id / num_input_pipelines), but this Sequence {why} "
                f"num_shards={self.num_shards}, shard_index={self.shard_index}. Fix: leave "
                f"num_shards and shard_index out and let the context decide, or pass "
                f"num_shards={wanted[0]}, shard_index={wanted[1]}."
            )
        self._set_shard(*wanted, self._plan.drop_remainder)

    def _follow_distribution(self) -> Any:
        """Under a Keras distribution (before the workers start): this process's shard of a
        multi-process one, unless the user chose one; then the checks it needs (see
        ``_distribution``). Returns the distribution, or None."""
        dist = _distribution.current()
        if dist is None:
            return None
        if _distribution.processes(dist)[0] > 1:
            if not self._shard_given and self.num_shards == 1:
                self._set_shard(*_distribution.process_shard(dist), self._plan.drop_remainder)
                log.info("shmaug.Sequence serves shard %d of %d (this process of the Keras "
                         "distribution)", self.shard_index, self.num_shards)
            _distribution.take_over_sharding(dist)
        start, stop = self._plan.bounds(len(self._plan) - 1)
        _distribution.check_split(dist, self.batch_size, stop - start)
        return dist

    def _set_shard(self, num_shards: Any, shard_index: Any, drop_remainder: Any) -> None:
        """Checked, and the epoch plan that follows from it (the Loader, once started, agrees)."""
        self.num_shards, self.shard_index, self._plan = check.sharded_plan(
            self._samples, self.batch_size, drop_remainder, num_shards, shard_index,
            self._shuffles, self.seed if self._seed_given else None)
        self._loader_args.update(num_shards=self.num_shards, shard_index=self.shard_index)
        old = getattr(self, "_passes", None)
        self._passes = Passes(len(self._plan))  # which batch answers each ask
        if old is not None:  # a shard taken after a seek: the epoch sought stays
            self._passes.seek(old.position[0], 0)

    @property
    def _fingerprint(self) -> dict[str, Any]:
        return check.fingerprint(self._n, self._plan, self._shuffles, self.num_shards,
                                 self._sampling)

    def close(self) -> None:
        """Stop the workers and free shared memory. Idempotent.

        Takes no lock: a thread waiting inside ``__getitem__`` (Keras' tf.data thread) holds
        the facade's lock, and ends with ``ClosedError`` once the loader is closed.
        """
        self._closed = True
        self._passes.release()  # Keras' generators and adapters, held to know them again
        _idle.forget(self)
        loader = self._loader
        if loader is not None:
            loader.close()

    def __enter__(self) -> Sequence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # What the workers get: the subclass state without the engine, the lock, the data
        # that already sits in shared memory, or the per-epoch bookkeeping.
        state = self.__dict__.copy()
        for name in ("_loader", "_lock", "_held", "_passes", "_side", "_warned", "_closed",
                     "_stopped", "_inferring"):
            state.pop(name, None)
        if not self._overrides("load"):
            state["x"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A worker's copy (or copy.copy / deepcopy): it runs the hooks but serves no batches.
        self.__dict__.update(state)
        self._loader, self._lock, self._held = None, threading.Lock(), OrderedDict()
        self._stopped = None
        self._passes = Passes(len(self._plan))
        self._inferring = weakref.WeakKeyDictionary()
        self._side, self._warned = {}, False
        self._closed = True

    def __repr__(self) -> str:
        """The settings as given, with what they resolve to. ``workers`` is shmaug's count of
        processes (``seq.workers``, Keras' attribute, reads 1: see the class docstring)."""
        args = self._loader_args
        name = "shmaug.Sequence" if type(self) is Sequence else type(self).__qualname__
        hooks = [h for h in ("load", "augment", "targets") if self._overrides(h)]
        count = args["workers"]
        settings: list[tuple[str, Any]] = [
            ("x", describe.brief(self.x)), ("y", describe.brief(self._side.get("y"))),
            ("batch_size", self.batch_size),
            ("augment", f"{name}.augment" if "augment" in hooks else describe.brief(args["augment"])),
            ("workers", f"{count} (shmaug's processes; Keras reads seq.workers == 1)"
             if count else "0 (this process)"),
            ("start_method", repr(describe.resolved_start_method(args["start_method"]))
             if count else "None"),
            ("seed", self.seed if self._seed_given else f"{self.seed} (drawn: seed=None)"),
            ("shuffle", "None (follows Keras per pass: fit shuffles, evaluate and predict read "
             "in order)" if self.shuffle is None else self.shuffle),
            ("drop_remainder", self._plan.drop_remainder),
            ("max_queue_size", args["max_queue_size"])]
        optional = [("sample_weight", self._side.get("sample_weight")),
                    ("image_key", self.image_key), ("timeout", args["timeout"]),
                    ("output_shape", args["output_shape"]),
                    ("output_dtype", args["output_dtype"]), ("value_range", args["value_range"]),
                    ("sampling_weights", args["sampling_weights"]),
                    ("samples_per_epoch", args["samples_per_epoch"])]
        settings += [(k, describe.brief(v)) for k, v in optional if v is not None]
        if self.num_shards > 1:
            settings += [("num_shards", self.num_shards), ("shard_index", self.shard_index)]
        state = "closed" if self._closed else "started" if self._loader is not None else \
            "stopped while idle" if self._stopped is not None else \
            "not started"
        extra = f"; hooks overridden: {', '.join(hooks)}" if hooks else ""
        return describe.call_repr(name, settings) + f" ({len(self._plan)} batches, {state}{extra})"

    # -- inside -------------------------------------------------------------------------------

    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(Sequence, hook)

    def _ensure_loader(self) -> Loader:
        self._used = time.monotonic()
        if self._closed:
            raise ClosedError("This shmaug.Sequence is closed (or is a copy: the data and the "
                              "workers belong to the original). Fix: create a new one.")
        if self._loader is None:
            dist = self._follow_distribution()
            if dist is not None:
                _distribution.check_common_seed(dist)
            load = self.load if self._overrides("load") else None
            if self._overrides("augment"):
                augment: Any = self.augment
            else:
                augment = self._loader_args["augment"]
            args = {**self._loader_args, "augment": augment}
            _idle.starting()  # a notebook cell run again: free the old one first
            self._loader = Loader(self.x, self._side, load=load, **args)
            _LIVE.add(self)
            _idle.watch(self)
        return self._loader

    def _stop_if_idle(self, now: float, after_s: float | None = None) -> None:
        """Stop the workers and free the shared memory if no batch was asked for in
        ``after_s`` (default ``_idle.STOP_AFTER_S``; never while one is being served: that
        holds the lock)."""
        after_s = _idle.STOP_AFTER_S if after_s is None else after_s
        if now - self._used < after_s or not self._lock.acquire(blocking=False):
            return
        try:
            loader = self._loader
            if loader is None or now - self._used < after_s:
                return
            self._loader, self._stopped = None, loader
            _idle.forget(self)
        finally:
            self._lock.release()
        loader.close()
        log.info("shmaug.Sequence idle for %.0f s: its workers stopped and its shared memory "
                 "freed (they start again on the next batch asked for)", now - self._used)

    def _in_order(self, adapter: Any) -> bool:
        """Whether a pass beginning now (or the pass a look stands for) reads its epoch in the
        dataset's order, asked by Keras' ``adapter`` (None: a loop by hand, or a look).

        Keras decides the order per pass, never once per dataset: ``fit``'s training passes
        follow ``fit(shuffle=...)`` (its adapter's ``shuffle``), while ``evaluate``,
        ``predict`` and ``fit``'s validation are never shuffled (their adapters were seen
        beginning an epoch under ``evaluate``/``predict``: ``on_epoch_begin``). A look
        decides nothing: it only names the batch the next pass would serve. Called with the
        lock held."""
        if not self._shuffles:
            return True
        if self._sampling:  # a weighted draw has no dataset order: every pass is the draw
            return False
        if adapter is None:
            return self.shuffle is None  # loops by hand: in order unless shuffle=True
        if self._inferring.get(adapter, False):
            return True
        return self.shuffle is None and not getattr(adapter, "shuffle", False)

    def _refuse_lost_targets(self) -> None:
        """An ``augment`` override sees only the image: the targets that the `augment`
        argument would have moved with it (a mask, boxes) would come back untouched."""
        op = self._loader_args["augment"]
        moved = inputs.augmented_targets(self._side, op) if op is not None else {}
        if moved:
            raise ArgumentError(
                f"{type(self).__name__} overrides `augment`, which receives only the image, "
                f"but the `augment` argument ({type(op).__name__}) moves the targets "
                f"{sorted(moved)} with each image; they would no longer follow it. Fix: drop "
                f"the override and put its work into the pipeline, or rename those targets.")

    def _check_order(self, index: int, in_order: bool, loader: Loader) -> None:
        """Say once when Keras' random batch order defeats prefetching (a pass read in the
        dataset's order, under ``fit(shuffle=True)``)."""
        if not in_order or loader.pids == []:
            return
        if self._previous >= 0 and index != self._previous + 1:
            self._out_of_order += 1
            if self._out_of_order == 3 and not self._warned:
                self._warned = True
                warn(
                    "Keras asks this shmaug.Sequence for batches in random order (fit's "
                    "default shuffle=True) while it has shuffle=False, so its workers cannot "
                    "prepare the next batch ahead of time. For training data pass "
                    "shuffle=True to shmaug.Sequence (it then shuffles the samples itself, "
                    "each exactly once per epoch, and prefetches in order), or call "
                    "fit(..., shuffle=False).")
        self._previous = index

    def _assemble(self, xb: np.ndarray, side: dict[str, Any], key: Key) -> Any:
        self._used = time.monotonic()  # (the batch may have taken long to come)
        inputs: Any = xb
        if side["inputs"] is not None:
            inputs = {self.image_key: xb, **side["inputs"]}
        if side["y"] is None:
            return inputs
        try:
            y = self.targets(side["y"])
        except Exception as exc:
            epoch, planned, ordered = key
            assert self._loader is not None  # (self.loader would take the lock held here)
            first = int(self._loader.indices(planned, epoch=epoch, in_order=ordered)[0])
            record = ErrorRecord.capture(
                exc, traceback.format_exc(), worker_id=-1, sample_index=first, epoch=epoch,
                op=f"{type(self).__qualname__}.targets")
            raise rebuild(record) from None
        if side["sample_weight"] is not None:
            return inputs, _as_tuples(y), _as_tuples(side["sample_weight"])
        return inputs, _as_tuples(y)


def _as_tuples(structure: Any) -> Any:
    """Lists become tuples (inside dicts too): Keras takes a tuple of targets on every backend,
    while the TensorFlow backend's output signature refuses a list."""
    if isinstance(structure, (list, tuple)):
        return tuple(_as_tuples(v) for v in structure)
    if isinstance(structure, dict):
        return {k: _as_tuples(v) for k, v in structure.items()}
    return structure


