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
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import keras
import numpy as np

from ..engine import _checks as check
from ..engine import _describe as describe
from ..engine import _inputs as inputs
from ..engine._options import Data, Options, Order, Settings
from ..engine._prefetch import Handoff
from ..engine.loader import Loader
from ..ops.mixing import Mix
from . import _checks as facade_checks
from . import _distribution, _idle
from . import _stack as stack
from ._passes import Key, Passes
from ._runtime import Life, Runtime
from ._tensors import for_keras
from ..errors import (
    ArgumentError, ClosedError, ErrorRecord, NotInitializedError, rebuild, warn)

log = logging.getLogger(__name__)

_HELD = 2  # batches kept for a second ask: Keras' NUM_BATCHES_FOR_TENSOR_SPEC probes, and
# the first batches of a pass (which a build pass may have taken already: _passes rule 3)
_LIVE: weakref.WeakSet[Sequence] = weakref.WeakSet()  # for StallMonitor
# What Sequence.__init__ sets (a test holds it to that): missing, a subclass skipped it. The
# settings and the Order pickle with a Sequence; the Runtime is what pickling drops.
_SET_UP = frozenset({"image_key", "x", "batch_size", "seed", "shuffle", "num_shards",
                     "shard_index", "mix", "_settings", "_order", "_runtime", "_pin_memory"})


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
            ``len``, ``repr``, ``stats``) decides nothing. ``"blocks"`` is True with the
            locality order of record shards (see ``shmaug.Loader``).
        shuffle_window: shards per window under ``shuffle="blocks"`` (see ``shmaug.Loader``).
        num_shards, shard_index: this host's part of every epoch (see ``shmaug.Loader``);
            ``len(seq)`` is then the batches of one shard.
        sampling_weights, samples_per_epoch: draw each epoch with replacement by weight (see
            ``shmaug.Loader``); classes are those of ``y``. Not Keras' ``sample_weight`` /
            ``class_weight``, which weigh the loss. ``len(seq)`` follows
            ``samples_per_epoch``.
        mix: MixUp / CutMix (``shmaug.ops.MixUp``, ``CutMix``, ``Mix``; see
            ``shmaug.Loader``): the training passes get mixed images and soft targets (train
            with ``CategoricalCrossentropy``); ``evaluate``, ``predict``, validation and other
            passes read in order get the samples as they are, labels one-hot. Under the
            Sequence's ``shuffle=False`` the training passes are mixed in order; but
            ``fit(shuffle=False)`` reads a ``shuffle=None`` Sequence as ``evaluate`` does, in
            order and unmixed (Keras' threads cannot tell the two apart): to mix in order,
            pass ``shuffle=False`` to the Sequence.
        pin_memory: page-lock the output ring, so that the backend's copy of a batch to the
            GPU reads the slot a worker wrote (see ``shmaug.Loader``). None (the default):
            decided when the workers start, True where Keras trains on an NVIDIA GPU with
            torch or JAX; TensorFlow copies each batch into a tensor of its own first, so it
            gains nothing there.
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
        shuffle: bool | str | None = None,
        shuffle_window: int | None = None,
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
        mix: Mix | None = None,
        pin_memory: bool | None = None,
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
        self._pin_memory = pin_memory  # None: decided when the workers start
        pin_memory = False if pin_memory is None else pin_memory  # (Settings reads it)
        self.image_key, images, extra_inputs = facade_checks.split_inputs(x, image_key)
        self._settings = Settings.of(locals())  # the Loader's arguments, each checked once
        source = not self._overrides("load") and inputs.is_source(images)  # e.g. ImageFiles
        if source and y is None:
            y = getattr(images, "labels", None)  # as Keras' image_dataset_from_directory
        load = self.load if self._overrides("load") else images.load if source else None
        images = images if load is not None else inputs.image_array(images)
        n = inputs.length(images) if load is not None else len(images)
        self.x = images  # invariant: what the workers read (array) or what `load` indexes
        side = {  # gathered per batch in this process, but for targets `augment` moves
            "y": inputs.targets(y, n, "y"),  # first: its `mask` is the one augmented
            "inputs": inputs.targets(extra_inputs or None, n, "x"),
            "sample_weight": inputs.targets(sample_weight, n, "sample_weight"),
        }
        data = Data(images, side, load, n, side["y"], describe.brief(images))
        hook = self.augment if self._overrides("augment") else None
        if hook is not None:
            self._check_behind_hook(data)
        options = Options.of(self._settings, data, per_pass=True, hook=hook)
        self._runtime = Runtime(Passes(len(options.order.plan)), data, options.pipeline)
        self.batch_size: int = self._settings.batches.batch_size
        self.seed: int = options.order.seed
        self.mix: Mix | None = options.pipeline.mix  # with its classes known from y
        # As given (a weighted draw is random: True); None follows Keras pass by pass
        self.shuffle: bool | str | None = True if options.order.weights is not None \
            else self._settings.batches.shuffle
        self._set_order(options.order)
        self._follow_distribution()  # a multi-process Keras distribution set already

    if not TYPE_CHECKING:  # (mypy would take every attribute for one this may answer)
        def __getattr__(self, name: str) -> Any:
            """Reached only for a missing attribute: one ``__init__`` sets means that a
            subclass's ``__init__`` never called ours."""
            if name in _SET_UP and "_settings" not in self.__dict__:
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
        fn = self._settings.output.augment
        return image if fn is None else fn(image, rng)

    def load(self, index: int) -> Any:
        """Runs in a worker to produce sample ``index``. Default: ``x[index]`` from shared
        memory."""
        return self.x[index]

    def targets(self, y_batch: Any) -> Any:
        """Runs in this process on each batch's targets. Default: unchanged."""
        return y_batch

    # -- Keras' PyDataset contract -----------------------------------------------------------

    def __len__(self) -> int:
        if self._runtime.running is None:  # Keras reads the length before it asks for a batch
            self._follow_distribution()
        return len(self._order.plan)

    def __getitem__(self, index: int) -> Any:
        index = check.batch_index(index, len(self))
        caller = stack.asking_loop(self)
        # Keras' own asks get the backend's tensors where that spares it a copy
        to_keras = stack.keras_asks(self)
        rt = self._runtime
        with rt.lock:
            passes = rt.passes
            begins = passes.begins(caller)
            if begins and stack.keras_is_building():  # JAX, torch: asked from the build
                passes.building(True)  # itself (also when on_epoch_begin is overridden)
            # Whose order: read off the stack only where a pass begins, or for a look
            in_order = self._in_order(stack.keras_adapter(self)) if begins or caller is None \
                else True
            if begins and not in_order:
                self._order.check_shuffled_pass()  # shards of it need a common seed
            loader = self._ensure_loader()
            key, in_pass = passes.ask(index, caller, in_order)
            if in_pass:
                if passes.taken == 1:  # a pass starts where it likes
                    rt.previous = -1
                self._check_order(index, key[2] or not self._order.shuffle, loader)
            rt.requests += 1
            batch = rt.held.get(key)
            if batch is not None:
                rt.hits += 1
                rt.held.move_to_end(key)
                return for_keras(batch) if to_keras else batch
            epoch, planned, ordered = key
            held = not in_pass or passes.taken <= _HELD  # a look or a build pass's, or a
            # pass's first ones (which a build pass may have taken): kept for a second ask,
            # so copied; the others are lent, their slot theirs while Keras holds them
            xb, side = loader._batch(planned, epoch, ordered,
                                     Handoff.COPY if held else Handoff.LEND)
            rt.hits += loader.last_hit
            batch = self._assemble(xb, side, key)
            if held:
                rt.held[key] = batch
                while len(rt.held) > _HELD:
                    rt.held.popitem(last=False)
            return for_keras(batch) if to_keras else batch

    def on_epoch_begin(self) -> None:
        """Keras begins an epoch: one of its own, or the one it runs to build an unbuilt model
        (which only borrows its epoch: _passes rule 3; on TensorFlow only this tells, since
        tf.data's threads ask: an override should call ``super().on_epoch_begin()``)."""
        building = stack.keras_is_building()
        adapter = stack.keras_adapter(self)
        inferring = adapter is not None and stack.keras_is_inferring()
        rt = self._runtime
        with rt.lock:
            if adapter is not None:  # whose passes Keras never shuffles (see _in_order)
                rt.inferring[adapter] = inferring
            rt.passes.building(building)

    def on_epoch_end(self) -> None:
        """An epoch ends. After a loop by hand (``seq[i]`` for each batch, Keras' Sequence
        contract) the next one gets the next epoch, as the next ``for batch in seq`` does;
        after Keras' own passes nothing moves (_passes rule 5). An override should call
        ``super().on_epoch_end()``, else such a loop replays the same epoch."""
        if stack.from_adapter(self):  # Keras' passes are its generators; its calls move nothing
            return  # (fit calls it before its first pass, after the signature probes)
        with self._runtime.lock:
            self._runtime.passes.epoch_ended()

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
        in_order = check.boolean("in_order", in_order) or (
            not self._order.shuffle and self.mix is None)  # (with a mix, in order: unmixed)
        with self._runtime.lock:
            xb, side = self._ensure_loader().batch(index, epoch=epoch, in_order=in_order)
            return self._assemble(xb, side, (epoch, index, in_order))


    @property
    def epoch(self) -> int:
        """The epoch of the pass in progress (else of the next pass); set it to make the next
        pass start there (e.g. to resume)."""
        return self._runtime.passes.position[0]

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
        rt = self._runtime
        with rt.lock:
            rt.passes.seek(epoch, batch)
            rt.previous = -1

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
        with self._runtime.lock:
            passes = self._runtime.passes
            bindings = passes.bindings
            epoch, batch = passes.position
            return {
                "format": "shmaug.Sequence", "version": self.STATE_VERSION, "seed": self.seed,
                "epoch": epoch, "batch": batch, "shard_index": self.shard_index,
                "fingerprint": self._order.fingerprint(),
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
        expected = {**self._order.fingerprint(), "seed": self.seed}
        epoch, cursor = check.resume_state(state, "shmaug.Sequence", self.STATE_VERSION,
                                           expected, batches)
        bindings = facade_checks.bindings(state.get("bindings"), state.get("asked"), batches)
        in_order = state.get("in_order") is True or not self._order.shuffle
        rt = self._runtime
        with rt.lock:
            rt.passes.restore(epoch, cursor, {i: (e, b, in_order) for i, e, b in bindings},
                              in_order)
            rt.previous = -1

    @property
    def loader(self) -> Loader:
        """The engine behind this dataset (started on first access)."""
        with self._runtime.lock:
            return self._ensure_loader()

    def stats(self) -> dict[str, Any]:
        """The loader's figures (see ``Loader.stats``) with this facade's ``hit_rate``:
        the share of ``__getitem__`` calls served from batches already prepared."""
        rt = self._runtime
        with rt.lock:  # a loader stopped when idle (or closed) still has its figures
            loader = rt.loader
        if loader is None:
            loader = self.loader
        stats = loader.stats()
        stats["hit_rate"] = rt.hits / rt.requests if rt.requests else 0.0
        stats["requests"] = rt.requests
        stats["workers"] = loader.workers
        return stats

    def reset_stats(self) -> None:
        rt = self._runtime
        if rt.life is not Life.STOPPED_IDLE:  # (stopped while idle: no restart for this; the
            self.loader.reset_stats()  # next start begins at zero)
        rt.requests = rt.hits = 0

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
            with self._runtime.lock:  # a pass restored half-way serves only what it had not
                served = self._runtime.passes.restored  # served
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
        given = self._settings.batches.num_shards is not None
        if given or self._runtime.running is not None:
            why = ("was created with" if given else "already runs with")
            raise ArgumentError(
                f"`input_context` assigns shard {wanted[1]} of {wanted[0]} "
                f"(input_pipeline_id / num_input_pipelines), but this Sequence {why} "
                f"num_shards={self.num_shards}, shard_index={self.shard_index}. Fix: leave "
                f"num_shards and shard_index out and let the context decide, or pass "
                f"num_shards={wanted[0]}, shard_index={wanted[1]}."
            )
        self._set_shard(*wanted)

    def _follow_distribution(self) -> Any:
        """Under a Keras distribution (before the workers start): this process's shard of a
        multi-process one, unless the user chose one; then the checks it needs (see
        ``_distribution``). Returns the distribution, or None."""
        dist = _distribution.current()
        if dist is None:
            return None
        if _distribution.processes(dist)[0] > 1:
            if self._settings.batches.num_shards is None and self.num_shards == 1:
                self._set_shard(*_distribution.process_shard(dist))
                log.info("shmaug.Sequence serves shard %d of %d (this process of the Keras "
                         "distribution)", self.shard_index, self.num_shards)
            _distribution.take_over_sharding(dist)
        plan = self._order.plan
        start, stop = plan.bounds(len(plan) - 1)
        _distribution.check_split(dist, self.batch_size, stop - start)
        return dist

    def _set_shard(self, num_shards: int, shard_index: int) -> None:
        """Take another shard (checked) before the workers start: its epochs' plan, and passes
        over it that keep the epoch sought (the Loader, once started, has the same)."""
        self._set_order(self._order.sharded(num_shards, shard_index))
        old = self._runtime.passes
        self._runtime.passes = Passes(len(self._order.plan))
        self._runtime.passes.seek(old.position[0], 0)

    def _set_order(self, order: Order) -> None:
        self._order = order  # invariant: which samples each batch holds, for this shard
        self.num_shards, self.shard_index = order.num_shards, order.shard_index

    def close(self) -> None:
        """Stop the workers and free shared memory. Idempotent.

        Takes no lock: a thread waiting inside ``__getitem__`` (Keras' tf.data thread) holds
        the facade's lock, and ends with ``ClosedError`` once the loader is closed.
        """
        rt = self._runtime
        rt.life = Life.CLOSED
        rt.passes.release()  # Keras' generators and adapters, held to know them again
        _idle.forget(self)
        if rt.loader is not None:
            rt.loader.close()

    def __enter__(self) -> Sequence:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # What the workers get: the subclass state and the definition, without the Runtime
        # (the engine, the lock, the data that already sits in shared memory, the bookkeeping).
        state = self.__dict__.copy()
        del state["_runtime"]
        if not self._overrides("load"):
            state["x"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A worker's copy (or copy.copy / deepcopy): it runs the hooks but serves no batches.
        self.__dict__.update(state)
        self._runtime = Runtime.copied(len(self._order.plan))

    def __repr__(self) -> str:
        """The settings as given, with what they resolve to. ``workers`` is shmaug's count of
        processes (``seq.workers``, Keras' attribute, reads 1: see the class docstring)."""
        given, order, side = self._settings, self._order, self._side
        name = "shmaug.Sequence" if type(self) is Sequence else type(self).__qualname__
        hooks = [h for h in ("load", "augment", "targets") if self._overrides(h)]
        count = given.workers.workers
        settings: list[tuple[str, Any]] = [
            ("x", describe.brief(self.x)), ("y", describe.brief(side.get("y"))),
            ("batch_size", self.batch_size),
            ("augment", f"{name}.augment" if "augment" in hooks
             else describe.brief(given.output.augment)),
            ("workers", f"{count} (shmaug's processes; Keras reads seq.workers == 1)"
             if count else "0 (this process)"),
            ("start_method", repr(describe.resolved_start_method(given.workers.start_method))
             if count else "None"),
            ("seed", f"{self.seed} (drawn: seed=None)" if order.seed_drawn else self.seed),
            ("shuffle", "None (follows Keras per pass: fit shuffles, evaluate and predict read "
             "in order)" if self.shuffle is None else self.shuffle),
            ("drop_remainder", order.plan.drop_remainder),
            ("max_queue_size", given.workers.max_queue_size)]
        optional = [("sample_weight", side.get("sample_weight")),
                    ("image_key", self.image_key), ("timeout", given.workers.timeout),
                    ("output_shape", given.output.output_shape),
                    ("output_dtype", given.output.output_dtype),
                    ("value_range", given.output.bounds), ("sampling_weights", order.weights),
                    ("samples_per_epoch", given.batches.samples_per_epoch),
                    ("mix", self.mix)]
        settings += [(k, describe.brief(v)) for k, v in optional if v is not None]
        if self.num_shards > 1:
            settings += [("num_shards", self.num_shards), ("shard_index", self.shard_index)]
        extra = f"; hooks overridden: {', '.join(hooks)}" if hooks else ""
        return describe.call_repr(name, settings) + \
            f" ({len(order.plan)} batches, {self._runtime.life.value}{extra})"

    # -- inside -------------------------------------------------------------------------------

    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(Sequence, hook)

    @property
    def _side(self) -> dict[str, Any]:
        """The targets, other inputs and sample weights, by name (none in a copy)."""
        data = self._runtime.data
        if data is None:
            return {}
        assert isinstance(data.y, dict)  # (as __init__ made it)
        return data.y

    def _ensure_loader(self) -> Loader:
        """The running loader; started here (with the lock held) if none runs."""
        rt = self._runtime
        rt.used = time.monotonic()
        if rt.life is Life.CLOSED:
            raise ClosedError("This shmaug.Sequence is closed (or is a copy: the data and the "
                              "workers belong to the original). Fix: create a new one.")
        if rt.running is None:
            dist = self._follow_distribution()
            if dist is not None:
                _distribution.check_common_seed(dist)
            assert rt.data is not None and rt.pipeline is not None  # (only a copy has none)
            _idle.starting()  # a notebook cell run again: free the old one first
            rt.loader = Loader._from_options(
                Options(self._settings, rt.data, self._order, rt.pipeline),
                pin_memory=facade_checks.pin_memory(self._pin_memory))
            rt.life = Life.STARTED
            _LIVE.add(self)
            _idle.watch(self)
        assert rt.loader is not None
        return rt.loader

    def _stop_if_idle(self, now: float, after_s: float | None = None) -> None:
        """Stop the workers and free the shared memory if no batch was asked for in
        ``after_s`` (default ``_idle.STOP_AFTER_S``; never while one is being served: that
        holds the lock)."""
        after_s = _idle.STOP_AFTER_S if after_s is None else after_s
        rt = self._runtime
        if now - rt.used < after_s or not rt.lock.acquire(blocking=False):
            return
        try:
            loader = rt.running
            if loader is None or now - rt.used < after_s:
                return
            rt.life = Life.STOPPED_IDLE  # (its loader stays: its figures)
            _idle.forget(self)
        finally:
            rt.lock.release()
        loader.close()
        log.info("shmaug.Sequence idle for %.0f s: its workers stopped and its shared memory "
                 "freed (they start again on the next batch asked for)", now - rt.used)

    def _in_order(self, adapter: Any) -> bool:
        """Whether a pass beginning now (or the pass a look stands for) reads its epoch in the
        dataset's order, asked by Keras' ``adapter`` (None: a loop by hand, or a look).

        Keras decides the order per pass, never once per dataset: ``fit``'s training passes
        follow ``fit(shuffle=...)`` (its adapter's ``shuffle``), while ``evaluate``,
        ``predict`` and ``fit``'s validation are never shuffled (their adapters were seen
        beginning an epoch under ``evaluate``/``predict``: ``on_epoch_begin``). A look
        decides nothing: it only names the batch the next pass would serve. Called with the
        lock held."""
        if not self._order.shuffle and self.mix is None:
            return True
        inferring = self._runtime.inferring.get(adapter, False) if adapter is not None \
            else False
        if self._order.weights is not None and not (inferring and self.mix is not None):
            return False  # a weighted draw has no dataset order: every pass is the draw (but
            # with a mix, an inference pass reads it unmixed: the loader's in-order key)
        if adapter is None:
            return self.shuffle is None  # loops by hand: in order unless shuffle=True
        if inferring:
            return True
        return self.shuffle is None and not getattr(adapter, "shuffle", False)

    def _check_behind_hook(self, data: Data) -> None:
        """An ``augment`` override runs instead of the `augment` argument, which it may still
        call (``super().augment``): the argument must take the images, and since the override
        sees only the image, the targets the argument would have moved with it (a mask,
        boxes) are refused: they would come back untouched."""
        op = self._settings.output.augment
        inputs.pipeline_input(op, data.x)  # a dtype or layout ops misread
        moved = inputs.augmented_targets(data.y, op) if op is not None else {}
        if moved:
            raise ArgumentError(
                f"{type(self).__name__} overrides `augment`, which receives only the image, "
                f"but the `augment` argument ({type(op).__name__}) moves the targets "
                f"{sorted(moved)} with each image; they would no longer follow it. Fix: drop "
                f"the override and put its work into the pipeline, or rename those targets.")

    def _check_order(self, index: int, in_order: bool, loader: Loader) -> None:
        """Say once when Keras' random batch order defeats prefetching (a pass read in the
        dataset's order, under ``fit(shuffle=True)``)."""
        rt = self._runtime
        if not in_order or loader.pids == []:
            return
        if rt.previous >= 0 and index != rt.previous + 1:
            rt.out_of_order += 1
            if rt.out_of_order == 3 and not rt.warned:
                rt.warned = True
                warn(
                    "Keras asks this shmaug.Sequence for batches in random order (fit's "
                    "default shuffle=True) while it has shuffle=False, so its workers cannot "
                    "prepare the next batch ahead of time. For training data pass "
                    "shuffle=True to shmaug.Sequence (it then shuffles the samples itself, "
                    "each exactly once per epoch, and prefetches in order), or call "
                    "fit(..., shuffle=False).")
        rt.previous = index

    def _assemble(self, xb: np.ndarray, side: dict[str, Any], key: Key) -> Any:
        self._runtime.used = time.monotonic()  # (the batch may have taken long to come)
        inputs: Any = xb
        if side["inputs"] is not None:
            inputs = {self.image_key: xb, **side["inputs"]}
        if side["y"] is None:
            return inputs
        try:
            y = self.targets(side["y"])
        except Exception as exc:
            epoch, planned, ordered = key
            loader = self._runtime.running  # (self.loader would take the lock held here)
            assert loader is not None
            first = int(loader.indices(planned, epoch=epoch, in_order=ordered)[0])
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


