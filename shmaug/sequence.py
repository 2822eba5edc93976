"""The Keras facade: a ``keras.utils.PyDataset`` whose batches come from shmaug's workers.

With callbacks.py, the only module that imports Keras. It owns the mapping from the batch indices
Keras asks for to the batches the engine plans, and the epoch counter; the ``Loader`` owns
processes and memory.

Keras' ``fit(shuffle=True)`` asks for batch indices in random order and, on the TensorFlow
backend, asks for batches 0 and 1 once up front to learn the output signature. Inside epochs,
Keras asks for each index once per *pass* of its generator, and a pass can span several Keras
epochs (with ``steps_per_epoch`` below ``len(seq)`` Keras' iterator carries on where the last
epoch stopped). So the facade binds indices per pass, not per epoch: an index asked for the
first time takes the next batch of our own stream of batches (epoch after epoch, in order),
a probed index keeps the batch it was probed with, and an index asked again inside an epoch
means Keras has started a new pass. The engine can then prefetch in order, and every
``len(seq)`` batches fed are one epoch of ours: every sample exactly once. A pass Keras
leaves half-asked ends our epoch there too, so the next one starts aligned: the next
``fit``'s probes say so (after an op raised, Ctrl-C, or ``fit(steps_per_epoch=k)``), and so
does Ctrl-C inside a batch. Probe batches are held until the epoch asks for them again.

Asks outside an epoch are probes only when they come from a thread Python started (the one
calling ``fit``, or a user's). tf.data runs Keras' generator on threads of its own and keeps
pulling across the gap between two Keras epochs; those asks belong to the pass like any other
(Keras never asks them again), and taking them for probes once served a batch twice and
skipped another.
"""

from __future__ import annotations

import logging
import threading
import traceback
import weakref
from collections import OrderedDict
from typing import Any, Callable, Iterator

import keras
import numpy as np

from . import _describe as describe
from . import _validate as check
from .errors import ArgumentError, ClosedError, ErrorRecord, rebuild, warn
from .loader import Loader

log = logging.getLogger(__name__)

_PROBES_HELD = 2  # Keras' NUM_BATCHES_FOR_TENSOR_SPEC: batches served before the first epoch
Key = tuple[int, int]  # (epoch, planned batch): what the engine makes
# What threading calls a thread it did not start (TensorFlow's own, running tf.data). Were
# the class ever gone, every ask outside an epoch would be a probe again (the old rule).
_FOREIGN_THREAD: Any = getattr(threading, "_DummyThread", ())
_LIVE: weakref.WeakSet[Sequence] = weakref.WeakSet()  # for StallMonitor


class Sequence(keras.utils.PyDataset):  # type: ignore[misc]
    """A Keras ``PyDataset`` fed by shmaug's worker processes over shared memory.

    Takes the ``Loader``'s arguments with the same meaning and defaults. Workers start on first
    use.

    Keras' ``PyDataset`` arguments work as a Keras user expects: ``workers`` is how many
    processes prepare batches (shmaug's; 0 runs in this process), ``max_queue_size`` how many
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
        num_shards, shard_index: this host's part of every epoch (see ``shmaug.Loader``);
            ``len(seq)`` is then the batches of one shard.
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
        workers: int | None = None,
        seed: int | None = None,
        shuffle: bool = False,
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
        use_multiprocessing: bool | None = None,
    ) -> None:
        # Keras must not add threads or processes of its own on top of shmaug's (its adapter
        # starts them for workers > 1, or workers > 0 with use_multiprocessing).
        super().__init__(workers=1, use_multiprocessing=False, max_queue_size=max_queue_size)
        if check.use_multiprocessing(use_multiprocessing) is False:
            warn(
                "shmaug.Sequence always runs its `workers` in processes (they share the data "
                "through shared memory, so a process costs no copy), so "
                "use_multiprocessing=False cannot make them threads and is ignored. Fix: leave "
                "it out; pass workers=0 to run everything in this process instead.")
        self.image_key, images, extra_inputs = _split_inputs(x, image_key)
        self._loader_args: dict[str, Any] = dict(
            batch_size=check.positive_int("batch_size", batch_size),
            augment=check.callable_or_none("augment", augment),
            workers=check.workers(workers),
            seed=check.seed(seed),
            shuffle=check.boolean("shuffle", shuffle),
            drop_remainder=check.boolean("drop_remainder", drop_remainder),
            start_method=check.start_method(start_method),
            max_queue_size=check.max_queue_size(max_queue_size),
            timeout=check.timeout(timeout),
            output_shape=output_shape,
            output_dtype=output_dtype,
            value_range=check.value_range(value_range),
        )
        source = callable(getattr(images, "load", None))  # e.g. shmaug.ImageFiles
        if source and y is None:
            y = getattr(images, "labels", None)  # as Keras' image_dataset_from_directory
        custom_load = self._overrides("load") or source
        images = images if custom_load else check.image_array(images)
        check.pipeline_input(self._loader_args["augment"], images)  # a dtype or layout ops misread
        n = check.length(images) if custom_load else len(images)
        self.x = images  # invariant: what the workers read (array) or what `load` indexes
        self._side = {  # gathered per batch in this process, but for targets `augment` moves
            "y": check.targets(y, n, "y"),  # first: its `mask` is the one augmented
            "inputs": check.targets(extra_inputs or None, n, "x"),
            "sample_weight": check.targets(sample_weight, n, "sample_weight"),
        }
        if self._overrides("augment"):
            self._refuse_lost_targets()
        self.batch_size: int = self._loader_args["batch_size"]
        self.seed: int = self._loader_args["seed"]
        self.shuffle: bool = self._loader_args["shuffle"]
        self._n = n  # invariant: samples in the dataset (all shards)
        self._seed_given = seed is not None  # an InputContext's shards need it too
        self._shard_given = num_shards is not None  # else an InputContext may set the shard
        self._set_shard(num_shards, shard_index, drop_remainder)
        self._loader: Loader | None = None  # started on first use, so subclass state is complete
        self._closed = False  # set by close(); no loader starts after it
        self._lock = threading.Lock()  # Keras may call from a tf.data thread
        # The stream of batches: the next index bound takes (epoch, cursor), then the cursor
        # moves on, into the next epoch after len(self) batches.
        self._epoch = 0  # invariant: the epoch of the next batch of the stream
        self._cursor = 0  # invariant: how many batches of that epoch are bound already
        self._bindings: dict[int, Key] = {}  # Keras index -> key, this pass of Keras'
        self._asked: set[int] = set()  # indices asked inside an epoch, this pass
        self._held: OrderedDict[Key, Any] = OrderedDict()  # served outside an epoch (probes)
        self._in_epoch = False  # between on_epoch_begin and on_epoch_end
        self._foreign_pass = False  # a tf.data thread asked in this epoch (see _in_pass)
        self._resumed = False  # a restored pass is half-served: to_tf_dataset serves the rest
        self._requests = 0
        self._hits = 0
        self._previous = -1  # the last index asked for (shuffle=False order check)
        self._out_of_order = 0  # requests that did not follow their predecessor
        self._warned = False

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
        return len(self._plan)

    def __getitem__(self, index: int) -> Any:
        index = check.batch_index(index, len(self))
        with self._lock:
            loader = self._ensure_loader()
            in_pass = self._in_pass()
            self._check_order(index, loader, in_pass)
            epoch, planned = key = self._bind(index, in_pass)
            self._requests += 1
            if key in self._held:
                self._hits += 1
                return self._held.pop(key) if in_pass else self._held[key]
            try:
                xb, side = loader.batch(planned, epoch=epoch)
            except KeyboardInterrupt:
                if in_pass:  # Ctrl-C in this thread ends fit here: so does the stream's epoch
                    self._in_epoch = False
                    self._abandon_pass()
                raise
            self._hits += loader.last_hit
            batch = self._assemble(xb, side, loader.indices(planned, epoch=epoch), epoch)
            if not in_pass:  # a signature probe: Keras asks for it again in the epoch
                self._held[key] = batch
                while len(self._held) > _PROBES_HELD:
                    self._held.popitem(last=False)
            return batch

    def on_epoch_begin(self) -> None:
        with self._lock:
            self._in_epoch = True
            self._foreign_pass = False

    def on_epoch_end(self) -> None:
        self._in_epoch = False

    # -- the rest of the public surface ------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The epoch of the next batch served; set it to start there (e.g. to resume)."""
        return self._epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.seek(value, 0)

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Serve from batch ``batch`` of epoch ``epoch`` on: the next index Keras asks for
        (whichever it is) gets that batch, the one after the next batch, and so on."""
        epoch = check.non_negative_int("epoch", epoch)
        batch = check.non_negative_int("batch", batch)
        if batch >= len(self):
            raise ArgumentError(
                f"`batch` must be below the {len(self)} batches of an epoch; received {batch}. "
                f"Fix: pass seek(epoch + batch // {len(self)}, batch % {len(self)})."
            )
        with self._lock:
            self._epoch, self._cursor = epoch, batch
            self._bindings.clear()
            self._asked.clear()
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
            return {
                "format": "shmaug.Sequence", "version": self.STATE_VERSION, "seed": self.seed,
                "epoch": self._epoch, "batch": self._cursor, "shard_index": self.shard_index,
                "fingerprint": self._fingerprint,
                "bindings": [[i, e, b] for i, (e, b) in sorted(self._bindings.items())],
                "asked": sorted(self._asked), "in_epoch": self._in_epoch,
            }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``, also of another host's shard).

        Raises:
            ArgumentError: for a state of another dataset length, batch size, shuffle,
                drop_remainder, shard count, seed or format version (naming the field).
        """
        expected = {**self._fingerprint, "seed": self.seed}
        epoch, cursor = check.resume_state(state, "shmaug.Sequence", self.STATE_VERSION,
                                           expected, len(self))
        bindings = check.bindings(state.get("bindings"), state.get("asked"), len(self))
        with self._lock:
            self._epoch, self._cursor = epoch, cursor
            self._bindings = {i: (e, b) for i, e, b in bindings}
            self._asked = {int(i) for i in state.get("asked") or ()}
            self._in_epoch = bool(state.get("in_epoch"))
            self._resumed = self._in_epoch and 0 < len(self._asked) < len(self)
            self._held.clear()
            self._previous = -1

    @property
    def loader(self) -> Loader:
        """The engine behind this dataset (started on first access)."""
        with self._lock:
            return self._ensure_loader()

    def stats(self) -> dict[str, Any]:
        """The loader's figures (see ``Loader.stats``) with this facade's ``hit_rate``:
        the share of ``__getitem__`` calls served from batches already prepared."""
        stats = self.loader.stats()
        stats["hit_rate"] = self._hits / self._requests if self._requests else 0.0
        stats["requests"] = self._requests
        stats["workers"] = self.loader.workers
        return stats

    def reset_stats(self) -> None:
        self.loader.reset_stats()
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
        first = self._peek()

        def spec(a: Any) -> Any:
            return tf.TensorSpec((None, *np.shape(a)[1:]), tf.as_dtype(np.asarray(a).dtype))

        signature = tf.nest.map_structure(spec, first)

        def epoch() -> Iterator[Any]:
            with self._lock:  # a pass restored half-way serves only what it had not served
                served, self._resumed = (self._asked if self._resumed else set()), False
            self.on_epoch_begin()
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

    def _peek(self) -> Any:
        """A batch to read the output signature from that moves the stream nowhere: the
        pass that follows (a restored one too) starts where the stream stood."""
        with self._lock:
            saved = (self._epoch, self._cursor, dict(self._bindings), set(self._asked),
                     self._in_epoch, self._previous)
            self._in_epoch = False  # a probe: its batch is held for the pass that asks for it
        try:
            return self[0]
        finally:
            with self._lock:
                (self._epoch, self._cursor, self._bindings, self._asked, self._in_epoch,
                 self._previous) = saved

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

    def _set_shard(self, num_shards: Any, shard_index: Any, drop_remainder: Any) -> None:
        """Checked, and the epoch plan that follows from it (the Loader, once started, agrees)."""
        self.num_shards, self.shard_index, self._plan = check.sharded_plan(
            self._n, self.batch_size, drop_remainder, num_shards, shard_index, self.shuffle,
            self.seed if self._seed_given else None)
        self._loader_args.update(num_shards=self.num_shards, shard_index=self.shard_index)

    @property
    def _fingerprint(self) -> dict[str, Any]:
        return check.fingerprint(self._n, self._plan, self.shuffle, self.num_shards)

    def close(self) -> None:
        """Stop the workers and free shared memory. Idempotent.

        Takes no lock: a thread waiting inside ``__getitem__`` (Keras' tf.data thread) holds
        the facade's lock, and ends with ``ClosedError`` once the loader is closed.
        """
        self._closed = True
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
        for name in ("_loader", "_lock", "_held", "_bindings", "_asked", "_side", "_warned",
                     "_closed"):
            state.pop(name, None)
        if not self._overrides("load"):
            state["x"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A worker's copy (or copy.copy / deepcopy): it runs the hooks but serves no batches.
        self.__dict__.update(state)
        self._loader, self._lock, self._held = None, threading.Lock(), OrderedDict()
        self._bindings, self._asked, self._side, self._warned = {}, set(), {}, False
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
            ("shuffle", self.shuffle), ("drop_remainder", self._plan.drop_remainder),
            ("max_queue_size", args["max_queue_size"])]
        optional = [("sample_weight", self._side.get("sample_weight")),
                    ("image_key", self.image_key), ("timeout", args["timeout"]),
                    ("output_shape", args["output_shape"]),
                    ("output_dtype", args["output_dtype"]), ("value_range", args["value_range"])]
        settings += [(k, describe.brief(v)) for k, v in optional if v is not None]
        if self.num_shards > 1:
            settings += [("num_shards", self.num_shards), ("shard_index", self.shard_index)]
        state = "closed" if self._closed else "not started" if self._loader is None else \
            "started"
        extra = f"; hooks overridden: {', '.join(hooks)}" if hooks else ""
        return describe.call_repr(name, settings) + f" ({len(self)} batches, {state}{extra})"

    # -- inside -------------------------------------------------------------------------------

    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(Sequence, hook)

    def _ensure_loader(self) -> Loader:
        if self._closed:
            raise ClosedError("This shmaug.Sequence is closed (or is a copy: the data and the "
                              "workers belong to the original). Fix: create a new one.")
        if self._loader is None:
            load = self.load if self._overrides("load") else None
            if self._overrides("augment"):
                augment: Any = self.augment
            else:
                augment = self._loader_args["augment"]
            args = {**self._loader_args, "augment": augment}
            self._loader = Loader(self.x, self._side, load=load, **args)
            _LIVE.add(self)
        return self._loader

    def _refuse_lost_targets(self) -> None:
        """An ``augment`` override sees only the image: the targets that the `augment`
        argument would have moved with it (a mask, boxes) would come back untouched."""
        op = self._loader_args["augment"]
        moved = check.augmented_targets(self._side, op) if op is not None else {}
        if moved:
            raise ArgumentError(
                f"{type(self).__name__} overrides `augment`, which receives only the image, "
                f"but the `augment` argument ({type(op).__name__}) moves the targets "
                f"{sorted(moved)} with each image; they would no longer follow it. Fix: drop "
                f"the override and put its work into the pipeline, or rename those targets.")

    def _check_order(self, index: int, loader: Loader, in_pass: bool) -> None:
        """Say once when Keras' random batch order defeats prefetching (shuffle=False)."""
        if self.shuffle or not in_pass or loader.pids == []:
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

    def _in_pass(self) -> bool:
        """Whether this ask is part of the pass Keras iterates (not a probe): it comes from a
        thread Python did not start (tf.data pulling ahead, also between epochs), or inside
        an epoch from a Python thread while no tf.data thread has asked in it (the JAX and
        torch backends ask from the thread calling fit). Under tf.data a Python thread's ask
        is a probe or a look by hand, also the next fit's probes after an interrupted fit,
        when Keras never ended the epoch."""
        if isinstance(threading.current_thread(), _FOREIGN_THREAD):
            self._foreign_pass = self._in_epoch or self._foreign_pass
            return True
        return self._in_epoch and not self._foreign_pass

    def _bind(self, index: int, in_pass: bool) -> Key:
        """The batch for Keras' index: bound earlier in this pass, or the stream's next one."""
        if in_pass:
            if index in self._asked:  # Keras asks an index once per pass: this is a new one
                self._new_pass()
            self._asked.add(index)
        elif self._asked:
            # A probe after the pass's asks (the next fit's signature probes, a look by hand)
            # belongs to the next pass: an old binding would hand back a batch already trained
            # on, made again, and its random access would drop the prefetched batches.
            self._abandon_pass()
        key = self._bindings.get(index)
        if key is None:
            # shuffle=False: index i is batch i, of the stream's epoch.
            key = self._bindings[index] = (self._epoch, self._cursor if self.shuffle else index)
            self._cursor += 1
            if self._cursor == len(self):
                self._epoch, self._cursor = self._epoch + 1, 0
                self._previous = -1
        return key

    def _new_pass(self) -> None:
        """Forget this pass's bindings. One Keras left half-asked (an interrupted fit, a new
        fit after ``fit(steps_per_epoch=k)``) ends the stream's epoch there, so the next pass
        is one whole epoch: its samples each once, none of the old epoch's."""
        if len(self._asked) < len(self) and self._cursor:
            self._epoch, self._cursor = self._epoch + 1, 0
        self._bindings.clear()
        self._asked.clear()

    def _abandon_pass(self) -> None:
        """A new pass begun outside Keras' own asks (a probe, Ctrl-C): also drop the batches
        held for the old pass."""
        self._new_pass()
        self._held.clear()
        self._previous = -1

    def _assemble(self, xb: np.ndarray, side: dict[str, Any], indices: np.ndarray,
                  epoch: int) -> Any:
        inputs: Any = xb
        if side["inputs"] is not None:
            inputs = {self.image_key: xb, **side["inputs"]}
        if side["y"] is None:
            return inputs
        try:
            y = self.targets(side["y"])
        except Exception as exc:
            record = ErrorRecord.capture(
                exc, traceback.format_exc(), worker_id=-1, sample_index=int(indices[0]),
                epoch=epoch, op=f"{type(self).__qualname__}.targets")
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


def _split_inputs(x: Any, image_key: str | None) -> tuple[str | None, Any, dict[str, Any]]:
    """``x`` or a dict of inputs -> (image key, the images, the other inputs)."""
    if not isinstance(x, dict):
        return None, x, {}
    if image_key is None:
        candidates = [k for k, v in x.items() if np.ndim(v) in (3, 4)]
        if len(candidates) != 1:
            raise ArgumentError(
                f"`x` is a dict, so shmaug needs to know which entry holds the images to "
                f"augment; candidates (3-D or 4-D arrays): {candidates}. Fix: pass "
                f"`image_key=` naming that entry."
            )
        image_key = candidates[0]
    if image_key not in x:
        raise ArgumentError(
            f"`image_key`={image_key!r} is not a key of `x` (keys: {list(x)}). Fix: pass one "
            f"of those."
        )
    return image_key, x[image_key], {k: v for k, v in x.items() if k != image_key}
