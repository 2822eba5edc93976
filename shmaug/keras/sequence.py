"""The Keras facade: a ``keras.utils.PyDataset`` whose batches come from shmaug's workers.

It imports Keras, as ``callbacks.py``, ``_distribution.py`` and ``_batches.py`` do
(``_checks.py`` only inside ``pin_memory``); the facade's other modules import without it. It
owns the mapping from the batch indices Keras asks for to the batches the engine plans (the
rules are ``_passes``'), and the epoch counter; the ``Loader`` owns processes and memory; each
other concern of a Sequence (resume, ``to_tf_dataset``, sharding, the idle stop, ``repr``)
is a module of the facade (the package docstring maps them).

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

import functools
import inspect
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import keras
import numpy as np

from ..engine.config import checks as check
from ..engine.config.options import (BatchOptions, Bounds, Count, Options, Order, OutputOptions,
                                     Settings, Shape, ShuffleArg, StartMethod, WorkerOptions,
                                     WorkersArg)
from ..engine.workers import lazy_imports
from ..engine.loader import Loader, lend, rewritten, start, warn_if_pinned_in_vain
from ..ops import declared
from ..ops.mixing import Mix
from . import _checks as facade_checks
from . import _describe, _distribution, _idle, _resume, _tf_data
from . import _stack as stack
from ._passes import Passes, reads_in_order
from ._runtime import Life, Runtime, data_of
from ._batches import assemble, for_keras, for_outputs, fresh
from ..errors import ClosedError, warn

log = logging.getLogger(__name__)
S = TypeVar("S", bound="Sequence")  # a subclass's own type, from ``with``

_HELD = 2  # batches kept for a second ask: Keras' NUM_BATCHES_FOR_TENSOR_SPEC probes, and
# the first batches of a pass (which a build pass may have taken already: _passes rule 3)
_LIVE: weakref.WeakSet[Sequence] = weakref.WeakSet()  # for StallMonitor


_MADE: weakref.WeakSet[Sequence] = weakref.WeakSet()  # every one, started or not


def _after_fork_in_child() -> None:
    """A fork (gunicorn's preload_app) starts workers of its own for a Sequence it inherits,
    at its next batch, as after an idle stop: the parent's workers and memory are the
    parent's (a fork is refused them: ``Loader``), and a Sequence whose workers the parent
    happened to run was refused, one stopped while idle served. A lock another thread held
    at the fork (Keras' data thread inside ``seq[i]``) is free here: it hung the fork."""
    for seq in list(_MADE):
        rt = seq._runtime
        rt.lock = threading.Lock()
        if rt.life is Life.STARTED:
            rt.life = Life.STOPPED_IDLE  # (the parent's loader stays: its figures)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
# What Sequence.__init__ sets (a test holds it to that): missing, a subclass skipped it. The
# settings and the Order pickle with a Sequence; the Runtime is what pickling drops.
_SET_UP = frozenset({"image_key", "x", "batch_size", "seed", "shuffle", "num_shards",
                     "shard_index", "mix", "_settings", "_order", "_runtime", "_pin_memory",
                     "_pipeline"})


_CLOSED = ("This shmaug.Sequence is closed (or is a copy: the data and the workers belong to "
           "the original). Fix: create a new one; a copy in another process (Grain's worker "
           "processes, a DataLoader's workers) serves nothing: read it where it was made, with "
           "threads at most (shmaug runs the worker processes itself).")


def _open_length(seq: Sequence) -> int:
    """``len(seq)``, or ``ClosedError`` for a closed one: what Keras reads before its first
    step. JAX's trainer takes the model's weights for that step, and a first batch that
    raises loses them: a fit cell run again on a closed Sequence left a model of None."""
    if seq._runtime.life is Life.CLOSED:
        raise ClosedError(_CLOSED)
    return _length(seq)


def _length(seq: Sequence) -> int:
    """``len(seq)``, a subclass's own ``__len__`` included (a ported ``PyDataset``'s, from its
    batch size): it may serve fewer batches than the Sequence makes (a floor leaves out the
    last, partial one), never more, which Keras would ask for (one epoch trained two passes,
    and ``predict`` failed inside TensorFlow)."""
    own, plan = len(seq), seq._order.plan
    if own > len(plan):
        raise facade_checks.own_length(type(seq).__qualname__, own, plan, seq.num_shards,
                                       seq.shard_index)
    return own


class _KerasFree:
    """What a worker's ``Sequence`` stands on while Keras is not loaded there: Keras'
    ``PyDataset`` constructor and attributes, none of its machinery. A hook that reads
    ``self.workers`` works, and so does a Sequence built at a module's top, which a fresh
    worker runs again when it imports that module (slow before, never wrong)."""

    def __init__(self, workers: int = 1, use_multiprocessing: bool = False,
                 max_queue_size: int = 10) -> None:
        self._workers, self._use_multiprocessing = workers, use_multiprocessing
        self._max_queue_size = max_queue_size

    workers = property(lambda self: self._workers,
                       lambda self, value: setattr(self, "_workers", value))
    use_multiprocessing = property(lambda self: self._use_multiprocessing,
                                   lambda self, value: setattr(self, "_use_multiprocessing",
                                                               value))
    max_queue_size = property(lambda self: self._max_queue_size,
                              lambda self, value: setattr(self, "_max_queue_size", value))
    num_batches = property(lambda self: len(self))


def _pydataset() -> type:
    """Keras' ``PyDataset``; in a worker that has not loaded Keras, ``_KerasFree``.

    A worker unpickles a subclass's hooks, or an augment defined in the module of a subclass:
    defining the class there must not load Keras and its backend, seconds in each worker at
    every start (issue 51). A worker's copy only runs the hooks (``augment``, ``load``), which
    need nothing of ``PyDataset`` but its attributes; only the main process asks Keras'
    questions of it. A worker whose user module loaded Keras anyway (``from keras import
    layers`` at its top) gets the real base, which costs nothing more there.
    """
    return _KerasFree if lazy_imports.pending("keras") else keras.utils.PyDataset


if TYPE_CHECKING:
    from keras.utils import PyDataset as _PyDataset
else:
    _PyDataset = _pydataset()


class _FacadeApi:
    """What the facade's other modules (``_describe``, ``_distribution``, ``_idle``,
    ``_tf_data``, ``_checks``, the callbacks) ask of a ``Sequence``: one named member per
    need, so that none of them reads its private state. Part of ``Sequence``, kept apart to
    be read as one list."""

    _settings: Settings
    _order: Order
    _runtime: Runtime
    _pipeline: Any
    num_shards: int
    shard_index: int
    mix: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        facade_checks.subclassed(cls, _FACADE_NAMES)
        if inspect.isfunction(cls.__dict__.get("on_epoch_end")) and cls.__module__ != __name__:
            # (a user's override: a static or class method is left as it is)
            setattr(cls, "on_epoch_end", _told_without_super(cls.__dict__["on_epoch_end"]))

    def overrides(self, hook: str) -> bool:
        """Whether a subclass overrides ``hook`` (``"load"``, ``"augment"``, ``"targets"``,
        ``"model_inputs"``)."""
        return getattr(type(self), hook) is not getattr(Sequence, hook)

    @property
    def running_loader(self) -> Loader | None:
        """The loader whose workers run now, if any (starts none, takes no lock)."""
        return self._runtime.running

    @property
    def batch_requests(self) -> int:
        """The asks for a batch since the workers started (or ``reset_stats``)."""
        return self._runtime.requests

    def targets_as_given(self) -> Any:
        """The targets ``y`` as the batches gather them, before the ``targets`` hook."""
        return self._runtime.side.get("y")

    @property
    def changes_samples(self) -> bool:
        """Whether a pass changes the samples (an ``augment``, an override of it, a ``mix``):
        a training set's, where reading in order would be a mistake."""
        return self._pipeline is not None or self.overrides("augment") or self.mix is not None

    def served_before_restore(self) -> dict[int, Any]:
        """The indices a pass restored half-way had served, which it will not serve again."""
        with self._runtime.lock:
            return self._runtime.passes.restored

    @property
    def shards_given(self) -> bool:
        """Whether ``num_shards`` was passed (else a distribution may choose the shard)."""
        return self._settings.batches.num_shards is not None

    @property
    def last_batch_size(self) -> int:
        """The samples in the last batch of an epoch (of this shard)."""
        start, stop = self._order.plan.bounds(len(self._order.plan) - 1)
        return stop - start

    def reshard(self, num_shards: int, shard_index: int) -> None:
        """Serve another shard (checked), before the workers start: its epochs' plan, and
        passes over it that keep the epoch sought (the Loader, once started, has the same)."""
        self._set_order(self._order.sharded(num_shards, shard_index))
        self._runtime.over_batches(len(self._order.plan))

    @property
    def longest_pause_s(self) -> float:
        """The longest idle stop after which a batch was asked for again (0: none): a
        Sequence in use by turns, as a validation set is in epochs longer than the stop."""
        return self._runtime.longest_pause_s

    @property
    def last_asked(self) -> float:
        """When a batch was last asked for (``time.monotonic()``; ``_idle`` stops the oldest)."""
        return self._runtime.used

    def stop_if_idle(self, now: float, after_s: float) -> float | None:
        """Stop the workers if no batch was asked for in ``after_s`` seconds (``_idle``'s
        watch); how long they were idle, or None."""
        return self._runtime.stop_if_idle(now, after_s, partial(_idle.forget, cast(Sequence, self)))

    def __setattr__(self, name: str, value: Any) -> None:
        made = "_order" in self.__dict__  # (__init__'s last)
        if made and name in facade_checks.DATA:  # (as held or served, or as given)
            held = self.__dict__.get("x") if name == "x" else self._runtime.side.get(name)
            facade_checks.keep_data(name, held, self._runtime.given.get(name), self, value)
        if name in facade_checks.FIXED and made:
            # the value it holds, or the argument as given, changes nothing; else refused
            facade_checks.keep_setting(name, getattr(self, name, None), self._settings, value,
                                        self)
            if name in self.__dict__ or hasattr(type(self), name):
                return  # (what it holds stays; one it does not hold is a subclass's to keep)
        super().__setattr__(name, value)

    def _set_order(self, order: Order) -> None:
        self._order = order  # invariant: which samples each batch holds, for this shard
        self.num_shards, self.shard_index = order.num_shards, order.shard_index


_FACADE_NAMES = frozenset(name for name in vars(_FacadeApi) if not name.startswith("__"))


class Sequence(_PyDataset, _tf_data.DatasetForms, _FacadeApi):  # type: ignore[misc]
    """A Keras ``PyDataset`` fed by shmaug's worker processes over shared memory.

    Takes the ``Loader``'s arguments with the same meaning and defaults. WorkersArg start on first
    use.

    Keras' ``PyDataset`` arguments work as a Keras user expects: ``workers`` is how many
    processes prepare batches (shmaug's; the default ``"auto"`` lets the pool size itself
    between epochs, see ``shmaug.Loader``; 0 runs in this process; ``shmaug.ray.Workers(...)``
    runs them on Ray nodes), ``max_queue_size`` how many batches the ring holds (None, the
    default: 2 per worker + 2, within a memory bound, see ``shmaug.Loader``);
    ``use_multiprocessing`` is accepted and changes nothing,
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
    - ``targets(self, y_batch)`` runs in this process on each batch's targets;
    - ``model_inputs(self, x_batch)`` runs in this process on each batch's inputs (views returned
      stacked by ``augment`` split into a model's several inputs).

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
        sample_weight: Any = None,
        image_key: str | None = None,
        value_range: Bounds | None = None,
        num_shards: Count | None = None,
        shard_index: Count | None = None,
        sampling_weights: Any = None,
        samples_per_epoch: Count | None = None,
        mix: Mix | None = None,
        pin_memory: bool | None = None,
        use_multiprocessing: bool | None = None,
    ) -> None:
        early = facade_checks.set_early(self)  # (a subclass's settings set before this call)
        # Keras must not add threads or processes of its own on top of shmaug's (its adapter
        # starts them for workers > 1, or workers > 0 with use_multiprocessing).
        super().__init__(workers=1, use_multiprocessing=False, max_queue_size=max_queue_size)
        facade_checks.use_multiprocessing(use_multiprocessing)
        self._pin_memory = pin_memory  # None: decided when the workers start
        self.image_key, images, extra_inputs = facade_checks.split_inputs(
            x, image_key, self.overrides("load"))
        # The Loader's arguments, each checked once (a Sequence lends or copies as Keras'
        # hold allows, so it takes no `copy`; its pin_memory=None is decided at start)
        self._settings = Settings(
            BatchOptions(batch_size=batch_size, shuffle=shuffle, shuffle_window=shuffle_window,
                         drop_remainder=drop_remainder, seed=seed, num_shards=num_shards,
                         shard_index=shard_index, sampling_weights=sampling_weights,
                         samples_per_epoch=samples_per_epoch),
            WorkerOptions(workers=workers, start_method=start_method,
                          max_queue_size=max_queue_size, timeout=timeout,
                          pin_memory=False if pin_memory is None else pin_memory),
            OutputOptions(augment=augment, output_shape=output_shape, output_dtype=output_dtype,
                          value_range=value_range, mix=mix))
        load = self.load if self.overrides("load") else None  # else a source's (ImageFiles)
        data = data_of(images, load, y=y, inputs=extra_inputs, sample_weight=sample_weight)
        self.x: Any = data.x  # invariant: what the workers read (array) or what `load` indexes
        options = Options.of(self._settings, data, per_pass=True, hook=self.augment if
                             self.overrides("augment") else None,
                             hook_name=f"{type(self).__qualname__}.augment")
        self._pipeline = options.pipeline.argument  # what `super().augment` runs
        self._runtime = Runtime(Passes(len(options.order.plan)), data, options.pipeline,
                                given={"x": id(x), "y": id(y), "sample_weight": id(sample_weight)})
        _MADE.add(self)
        facade_checks.side_targets(self._runtime.side, self.overrides("targets"))
        self.batch_size: int = options.order.plan.batch_size
        self.seed: int = options.order.seed
        self.mix: Mix | None = options.pipeline.mix  # with its classes known from y
        # As given (a weighted draw is random: True); None follows Keras pass by pass
        self.shuffle: bool | str | None = True if options.order.weights is not None \
            else cast("bool | str | None", self._settings.batches.shuffle)  # (checked)
        self._set_order(options.order)
        facade_checks.made_otherwise(self, early, self._settings)
        _distribution.follow(self)  # a multi-process Keras distribution set already

    if not TYPE_CHECKING:  # (mypy would take every attribute for one this may answer)
        def __getattr__(self, name: str) -> Any:
            """Reached only for a missing attribute: one ``__init__`` sets means that a
            subclass's ``__init__`` never called ours."""
            if "_settings" not in self.__dict__ and (
                    name in _SET_UP or isinstance(getattr(Sequence, name, None), property)):
                # (a property of ours, num_batches, reads what __init__ sets: its error lands here)
                raise facade_checks.not_set_up(type(self).__qualname__, name)
            raise facade_checks.missing(type(self).__name__, name)

    # -- hooks a subclass may override -------------------------------------------------------

    def augment(self, image: np.ndarray, rng: np.random.Generator) -> Any:
        """In a worker, per sample: the ``augment`` argument (see ``ops.declared``)."""
        return declared.run(self._pipeline, image, rng)

    def load(self, index: int) -> Any:
        """Runs in a worker to produce sample ``index``. Default: ``x[index]`` from shared
        memory."""
        return self.x[index]

    def targets(self, y_batch: Any) -> Any:
        """Runs in this process on each batch's targets. Default: unchanged."""
        return y_batch

    def model_inputs(self, x_batch: Any) -> Any:
        """Runs in this process on each batch's inputs (the images, or the dict of ``x``).
        Default: unchanged."""
        return x_batch

    # -- Keras' PyDataset contract -----------------------------------------------------------

    num_batches = property(lambda self: _open_length(self))  # (what Keras reads first)

    def __len__(self) -> int:
        if self._runtime.running is None:  # Keras reads the length before it asks for a batch
            _distribution.follow(self)
        return len(self._order.plan)

    def __iter__(self) -> Iterator[Any]:
        """A pass's batches (after ``load_state_dict`` mid-pass: the ones it had not served)."""
        return _one_pass(self)

    def __getitem__(self, index: int) -> Any:
        index = check.batch_index(index, _length(self))
        caller = stack.asking_loop(self)
        # Keras' own asks get the backend's tensors where that spares it a copy
        to_keras = stack.keras_asks(self)
        rt = self._runtime
        with rt.lock:
            passes = rt.passes
            begins = passes.begins(caller, index)
            if begins and stack.keras_is_building():  # JAX, torch: asked from the build
                passes.building(True)  # itself (also when on_epoch_begin is overridden)
            in_order = True  # whose order: read off the stack only where a pass begins (a
            if begins or caller is None:  # pass in progress keeps its own), or for a look
                adapter = stack.keras_adapter(self)
                if adapter is not None:  # (Keras asks: JAX and torch build metrics on a
                    _check_keras_pass(self)  # first batch, TensorFlow probes, before epochs)
                in_order = _in_order(self, adapter)  # (by hand: outside Keras' passes and fit)
                if in_order and adapter is None and not rt.read_by_hand:  # (once an epoch:
                    rt.read_by_hand = stack.by_hand()  # the walk is the stack's)
            if begins and not in_order:
                self._order.check_shuffled_pass()  # shards of it need a common seed
            if (begins or caller is None and index == 0) and rt.running is not None \
                    and rewritten(rt.running):  # (a pass, or a loop by hand, begins)
                _copy_again(self, rt)
            loader = _ensure_loader(self)
            key, in_pass = passes.ask(index, caller, in_order)
            if in_pass:
                if passes.taken == 1:  # a pass starts where it likes
                    rt.previous = -1
                rt.note_order(index, key[2] or not self._order.shuffle, loader)
            start, stop = self._order.plan.bounds(key[1])
            rt.asked(stop - start)
            batch = rt.held.get(key)
            if batch is not None:
                rt.hits += 1
                rt.held.move_to_end(key)
                batch = fresh(batch)  # (the held one stays as made, whatever is done to this)
                return for_keras(batch) if to_keras else batch
            epoch, planned, ordered = key
            held = passes.taken <= _HELD if in_pass else index < _HELD  # a pass's first
            # ones (which a build pass may have taken), a look at them (Keras' probes): kept
            # for a second ask, so copied (a slot lent for them would be held as long as the
            # caller keeps one: a plot's seq[0] left a ring of 2 no room to read ahead); the
            # others are lent, their slot theirs while Keras (or a loop by hand) holds them
            xb, side = lend(loader, planned, epoch=epoch, in_order=ordered, keep=held)
            rt.hits += loader.last_hit
            batch = assemble(self, rt, xb, side, key)
            if held:
                rt.held[key] = batch
                while len(rt.held) > _HELD:
                    rt.held.popitem(last=False)
                batch = fresh(batch)  # (the held one stays as made, whatever is done to this)
            return for_keras(batch) if to_keras else batch

    def on_epoch_begin(self) -> None:
        """Keras begins an epoch: one of its own, or the one it runs to build an unbuilt model
        (which only borrows its epoch: _passes rule 3; on TensorFlow only this tells, since
        tf.data's threads ask: an override should call ``super().on_epoch_begin()``)."""
        building = stack.keras_is_building()
        adapter = stack.keras_adapter(self)
        inferring = adapter is not None and stack.keras_is_inferring()
        if adapter is not None and not inferring:  # (building too: JAX's and torch's build
            _check_losses(self)  # runs the loss)
        if adapter is not None and not (building or inferring):
            _check_fit(self)
        if adapter is not None and not building:  # (TensorFlow: tf.data's threads ask)
            facade_checks.labels_for_the_loss(stack.trainer_call(), _labelled(self))
        rt = self._runtime
        with rt.lock:
            if adapter is not None:  # whose passes Keras never shuffles (see _in_order)
                rt.inferring[adapter] = inferring
            rt.passes.building(building)
            told = inferring and not building and not rt.warned_inferring
            rt.warned_inferring |= told
        if told:
            _warn_what_inference_reads(self)
        facade_checks.hooks_unchanged(self, rt)  # a curriculum's attribute, set between epochs

    def on_epoch_end(self) -> None:
        """An epoch ends. After a loop by hand (``seq[i]`` for each batch, Keras' Sequence
        contract) the next one gets the next epoch, as the next ``for batch in seq`` does;
        after Keras' own passes nothing moves (_passes rule 5). An override should call
        ``super().on_epoch_end()``, else such a loop replays the same epoch."""
        self._runtime.epoch_ends += 1
        # Keras' passes are its generators: its calls (before its first pass too, after the
        # signature probes) move nothing; a train_on_batch loop (Keras 2's) is told of its order
        if self._runtime.epoch_ended(stack.from_adapter(self),
                                     self.shuffle is None and self.changes_samples):
            facade_checks.read_in_order("A loop by hand (seq[i], then on_epoch_end())")

    # -- the rest of the public surface ------------------------------------------------------

    def batch(self, index: int, *, epoch: int | None = None, in_order: bool = False) -> Any:
        """Batch ``index`` of shmaug's order for ``epoch`` (default: the current one), as Keras
        gets it: ``x``, ``(x, y)`` or ``(x, y, sample_weight)``, with ``model_inputs()`` and
        ``targets()`` applied (not a ``__getitem__`` of a subclass's own).
        Random access that moves no pass and decides nothing: the batch a ``fit`` pass
        (shuffled unless ``shuffle=False``) serves at that position, or with ``in_order=True``
        the one ``evaluate`` and ``predict`` serve. (``seq.loader.batch`` is the engine's
        view: images and the raw targets.)

        Example:
            >>> xb, yb = seq.batch(3, epoch=1)
        """
        index = check.batch_index(index, _length(self), "seq.batch(0)")
        epoch = self.epoch if epoch is None else check.non_negative_int("epoch", epoch)
        in_order = check.boolean("in_order", in_order) or (
            not self._order.shuffle and self.mix is None)  # (with a mix, in order: unmixed)
        with self._runtime.lock:
            xb, side = _ensure_loader(self).batch(index, epoch=epoch, in_order=in_order)
            return assemble(self, self._runtime, xb, side, (epoch, index, in_order))

    @property
    def epoch(self) -> int:
        """The epoch of the pass in progress (else of the next pass); set it to make the next
        pass start there (e.g. to resume)."""
        return self._runtime.passes.current_epoch

    @epoch.setter
    def epoch(self, value: int) -> None:
        self.seek(value, 0)

    def seek(self, epoch: int, batch: int = 0) -> None:
        """Make the next pass (Keras' next generator, the next ``for`` over the Sequence)
        start at batch ``batch`` of epoch ``epoch``: its first new index gets that batch, the
        next one the batch after, and so on. A pass in progress goes on with its own epoch."""
        epoch, batch = facade_checks.seek(epoch, batch, len(self))
        rt = self._runtime
        with rt.lock:
            rt.passes.seek(epoch, batch)
            rt.previous = -1

    STATE_VERSION = _resume.VERSION  # of state_dict()'s format

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
        return _resume.state_of(self, self._order, self._runtime)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``, also of another host's shard).

        Raises:
            ArgumentError: for a state of another dataset length, batch size, shuffle,
                drop_remainder, shard count, seed or format version (naming the field).
        """
        batches = len(self)  # first: under a distribution it may take this process's shard
        _resume.restore(self, state, batches, self._order, self._runtime)

    @property
    def loader(self) -> Loader:
        """The engine behind this dataset (started on first access): its own passes count its
        epochs, so ``seq.loader.indices(i, epoch=seq.epoch)`` names a Sequence pass's batch."""
        with self._runtime.lock:
            return _ensure_loader(self)

    def stats(self) -> dict[str, Any]:
        """The loader's figures (``Loader.stats``) with this facade's ``hit_rate`` (asks
        served from batches made already), ``requests``, ``batches``, ``images`` and
        ``images_per_s``: what it served since ``reset_stats`` (``seq.loader.stats()``:
        what the workers handed over)."""
        with self._runtime.lock:  # a loader stopped when idle (or closed) still has its figures
            return self._runtime.stats(self._runtime.loader or _ensure_loader(self))

    def reset_stats(self) -> None:
        rt = self._runtime
        if rt.life is not Life.STOPPED_IDLE:  # (stopped while idle: no restart for this; the
            self.loader.reset_stats()  # next start begins at zero)
        rt.reset_counts()

    def close(self) -> None:
        """Stop the workers and free shared memory. Idempotent.

        Takes no lock: a thread waiting inside ``__getitem__`` (Keras' tf.data thread) holds
        the facade's lock, and ends with ``ClosedError`` once the loader is closed.
        """
        _closing(self, self._runtime)

    def __enter__(self: S) -> S:
        if self._runtime.life is Life.CLOSED:  # (fails here, not at its first batch)
            raise ClosedError(_CLOSED)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # What the workers get: the subclass state and the definition, without the Runtime
        # (the engine, the lock, the data that already sits in shared memory, the bookkeeping).
        state = self.__dict__.copy()
        del state["_runtime"]
        if not self.overrides("load"):
            state["x"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A worker's copy (or copy.copy / deepcopy): it runs the hooks but serves no batches.
        self.__dict__.update(state)
        self._runtime = Runtime.copied(len(self._order.plan))

    def __repr__(self) -> str:
        """The settings as given, with what they resolve to. ``workers`` is shmaug's count of
        processes (``seq.workers``, Keras' attribute, reads 1: see the class docstring)."""
        return _describe.sequence_repr(self, Sequence, self._settings, self._order, self._runtime)


_TOLD_WITHOUT_SUPER: weakref.WeakSet[type] = weakref.WeakSet()  # (once per class)


def _told_without_super(on_epoch_end: Callable[..., Any]) -> Callable[..., Any]:
    """A subclass's ``on_epoch_end``, warning once where it returns without having called
    ``super().on_epoch_end()``, as Keras users write it (``PyDataset``'s does nothing): a
    loop by hand then replayed one epoch's order and augmentations, and ``seq.epoch`` lagged."""
    @functools.wraps(on_epoch_end)
    def told(self: Sequence, *args: Any, **kwargs: Any) -> Any:
        rt = self.__dict__.get("_runtime")
        before = None if rt is None else rt.epoch_ends
        result = on_epoch_end(self, *args, **kwargs)
        if rt is not None and rt.epoch_ends == before and type(self) not in _TOLD_WITHOUT_SUPER:
            _TOLD_WITHOUT_SUPER.add(type(self))
            warn(f"{type(self).__qualname__}.on_epoch_end returned without calling "
                 f"super().on_epoch_end(): a loop by hand (seq[i] for each batch, then "
                 f"on_epoch_end()) gets the same epoch again, its order and augmentations, "
                 f"and seq.epoch falls behind Keras'. Fix: call super().on_epoch_end() in it.")
        return result
    return told


def _ensure_loader(seq: Sequence) -> Loader:
    """``seq``'s running loader; started here (with the lock held) if none runs."""
    rt, now = seq._runtime, time.monotonic()
    if rt.life is Life.STOPPED_IDLE:
        rt.longest_pause_s = max(rt.longest_pause_s, now - rt.used)
    rt.used = now
    if rt.life is Life.CLOSED:
        raise ClosedError(_CLOSED)
    if rt.running is None:
        dist = _distribution.follow(seq)
        if dist is not None:
            _distribution.check_common_seed(dist)
        assert rt.data is not None and rt.pipeline is not None  # (only a copy has none)
        _idle.starting()  # a notebook cell run again: free the old one first
        rt.loader = start(Options(seq._settings, rt.data, seq._order, rt.pipeline),
                          pin_memory=facade_checks.pin_memory(seq._pin_memory))
        rt.life = Life.STARTED
        _LIVE.add(seq)
        _idle.watch(seq)
        facade_checks.hooks_started(seq, rt, _SET_UP)  # (last: it may warn, and a warning
        # may be an error)
        if seq._pin_memory:  # (asked for, not decided here)
            warn_if_pinned_in_vain(rt.loader, sequence=True)
    assert rt.loader is not None
    return rt.loader


def _copy_again(seq: Sequence, rt: Runtime) -> None:
    """Rows of ``x`` were written since the workers' copy was made (a buffer grown in place
    between active-learning rounds): they stop, as when idle, and the pass beginning starts
    them on a new copy; what they had made ahead is made again (a batch is a function of the
    seed, the epoch and the index)."""
    log.info("Rows of `x` were written since its copy in shared memory was made: the "
             "workers start again on a new copy")
    loader, rt.life = rt.running, Life.STOPPED_IDLE
    rt.used = time.monotonic()  # (not an idle pause: this ask goes on)
    rt.held.clear()  # (batches of the old rows, kept for a second ask)
    _idle.forget(seq)
    assert loader is not None
    loader.close()


def _closing(seq: Sequence, rt: Runtime) -> None:
    """``seq.close()``: its workers stopped, Keras' passes and the user's arrays let go
    (TensorFlow keeps a Sequence reachable after ``fit``: a fold's arrays went with it)."""
    rt.life = Life.CLOSED
    rt.passes.release()  # Keras' generators and adapters, held to know them again
    _idle.forget(seq)
    if rt.loader is not None:
        rt.loader.close()
    rt.release_data()
    if rt.data is not None:
        object.__setattr__(seq, "x", rt.data.x)


def _one_pass(seq: Sequence) -> Iterator[Any]:
    """``for batch in seq``: one pass, its loop this generator's frame (``_passes``)."""
    served, me = seq.served_before_restore(), sys._getframe()
    facade_checks.hooks_unchanged(seq, seq._runtime)
    try:
        for index in range(len(seq)):
            if index not in served:
                yield seq[index]
    finally:  # run to its end, broken off or dropped: its pass answers no more looks (no
        seq._runtime.passes.loop_over(me)  # lock: a collection may run this; nor sys, which
        # is gone when a generator left open closes at interpreter exit)
        seq._runtime.pause()  # the figures' pass ends too, as a Loader's `for` loop's


def _check_losses(seq: Sequence) -> None:
    """What ``fit``'s model computes its losses on, checked against the Sequence's targets
    and weights as its training passes begin (also the pass JAX and torch build it with)."""
    model = stack.fit_argument("self")
    facade_checks.mixed_loss(seq, model)
    if not seq.overrides("targets"):  # (else the hook's targets meet the outputs)
        facade_checks.weights_for_losses(
            for_outputs(seq.targets_as_given()), seq._runtime.side["sample_weight"], model)


def _check_keras_pass(seq: Sequence) -> None:
    """What Keras needs of the batches of a pass its adapter begins, checked before its
    first (Keras standardizes that batch, with ``fit``'s ``class_weight``, before any
    epoch begins)."""
    facade_checks.labels_for_the_loss(stack.trainer_call(), _labelled(seq))
    if not seq.overrides("model_inputs"):
        facade_checks.text_inputs(seq._runtime.side["inputs"],
                                  (stack.trainer_call() or ("fit",))[0])
    if not seq.overrides("targets"):
        facade_checks.one_output_for_class_weight(for_outputs(seq.targets_as_given()),
                                                  stack.fit_argument("class_weight"))


def _check_fit(seq: Sequence) -> None:
    """What ``fit``'s arguments can be checked against, as its training passes begin: its
    validation data's labels against a mix's soft targets and the classes' numbers, and
    an ``initial_epoch`` against the Sequence's own count."""
    validation = stack.fit_argument("validation_data")
    if seq.mix is not None and not seq.overrides("targets"):
        # its validation batches must take the mix's loss too (unless a targets hook
        # reshapes the soft targets: then what loss is unknown)
        facade_checks.validation_labels(seq.mix, validation)
    facade_checks.validation_classes(*(_source_labelled(s) for s in (seq, validation)))
    steps, callbacks = stack.fit_argument("steps_per_epoch"), stack.fit_argument("callbacks")
    if not facade_checks.resumed_unsynced(seq, stack.fit_argument("initial_epoch"),
                                          stack.fit_argument("epoch"), steps, callbacks):
        facade_checks.restored_mid_pass(seq, seq._runtime.passes.restored, steps, callbacks)


def _labelled(seq: Sequence) -> bool:
    """Whether ``seq``'s batches may hold labels: a ``y`` given, or a hook of a subclass's
    that may make them (``targets``, its own ``__getitem__``)."""
    return seq.targets_as_given() is not None or seq.overrides("targets") or \
        type(seq).__getitem__ is not Sequence.__getitem__


def _source_labelled(seq: Any) -> Any:
    """The source a Sequence's labels are read from (an ``ImageFiles`` whose classes number
    them), or None: labels of its own (a ``y`` given), or not a Sequence."""
    source = getattr(seq, "x", None)
    given = seq.targets_as_given() if isinstance(seq, Sequence) else None
    return source if given is not None and given is getattr(source, "labels", None) else None


def _warn_what_inference_reads(seq: Sequence) -> None:
    """Evaluate, predict and fit's validation read a Sequence's passes: say where those are
    not every sample of x once, in its order."""
    plan = seq._order.plan
    if seq._order.weights is not None:
        warn(f"This Sequence draws every pass by `sampling_weights`, so evaluate, predict and "
             f"fit's validation read the weighted draw ({len(plan)} batches of drawn samples, "
             f"repeats included), not x in its order: predictions do not line up with x, and "
             f"metrics are of the reweighted set. Fix: evaluate and predict through a "
             f"Sequence of the same data without sampling_weights.")
    elif plan.drop_remainder and plan.n % plan.batch_size:
        warn(f"This Sequence has drop_remainder=True, so evaluate, predict and fit's "
             f"validation leave out its last {plan.n % plan.batch_size} of {plan.n} samples "
             f"(batches of {plan.batch_size}): predict returns {len(plan) * plan.batch_size} "
             f"rows, which do not line up with x. Fix: evaluate and predict through a "
             f"Sequence of the same data without drop_remainder.")


def _in_order(seq: Sequence, adapter: Any) -> bool:
    """Whether a pass beginning now, asked by Keras' ``adapter``, reads in the dataset's
    order (``_passes.reads_in_order``). Called with the lock held."""
    inferring = adapter is not None and seq._runtime.inferring.get(adapter, False)
    return reads_in_order(shuffle=seq.shuffle, shuffles=bool(seq._order.shuffle),
                          weighted=seq._order.weights is not None,
                          mixed=seq.mix is not None, adapter=adapter, inferring=inferring)
