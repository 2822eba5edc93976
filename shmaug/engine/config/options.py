"""A loader's options, defined once: each argument's group, default and check, and what the
arguments resolve to against the data, before anything starts.

``Loader`` and ``Sequence`` take the same flat keyword arguments (Keras users expect them).
Both pass each by keyword to its field in one of three frozen groups (``Settings``), as Grain
groups its ``ReadOptions`` and ``MultiprocessingOptions``:

- ``BatchOptions``: which samples make each batch, in which order (batch_size, shuffle,
  drop_remainder, seed, the shards, weighted sampling);
- ``WorkerOptions``: who makes the batches, how far ahead, and how they are handed over
  (workers, start_method, max_queue_size, timeout, copy, pin_memory);
- ``OutputOptions``: what a sample becomes (augment, output_shape, output_dtype, value_range,
  mix).

Each group checks its fields in ``__post_init__`` (with ``checks``' messages) as far as they
can be checked without the data. ``Options.of`` checks the rest against the data, once: the
shards and the sampling weights against the dataset (``Order``), the value range and the
targets the pipeline moves (``Pipeline``), the queue against a sample's size. ``Options`` is
all a ``Loader`` builds from. A ``Sequence`` resolves its options when it is made and hands
them to every ``Loader`` it starts (``engine.loader.start``), so nothing is checked twice.
Nothing here allocates shared memory or starts a process, so a bad argument costs nothing to
refuse.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from ...ops.core import with_value_range
from ...ops.declared import Declared, refuse_blind
from ...ops.plan import Plan, plan_of
from ...ops.mixing import Mix
from ..plan import blocks as _blocks
from .. import source
from . import checks as check
from . import describe
from . import inputs, ranges, tree
from ..plan import sampling
from ..workers.runner import AugmentFn, Load
from ..plan.schedule import BatchPlan, Shuffle
from ..remote import RemoteWorkers

log = logging.getLogger(__name__)

# Targets as the loader keeps them (``y``): None, an array of one entry per sample, or a dict /
# list / tuple of them (nested), as Keras takes a model's targets. Not ``handoff.ring.Targets``, the
# augmented targets a worker writes, by name.
TargetTree = Union[None, np.ndarray, dict[str, "TargetTree"], list["TargetTree"],
                   tuple["TargetTree", ...]]


# What the arguments take, said alike to a type checker and to the checks: numpy's integers
# where a count goes (one read off an array), a list as well as a tuple where a shape or a
# pair goes, and the few words an option knows.
Count = Union[int, np.integer]
WorkersArg = Union[int, np.integer, Literal["auto"], RemoteWorkers, None]
ShuffleArg = Union[bool, np.bool_, Literal["blocks"], None]
StartMethod = Literal["fork", "spawn", "forkserver"]
Shape = Sequence[int]
Bounds = Sequence[float]


def _set(options: object, name: str, value: object) -> None:
    """A field of a frozen group, replaced by its checked form in ``__post_init__``."""
    object.__setattr__(options, name, value)


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """Which samples make each batch, and in which order."""

    batch_size: Count = 32
    shuffle: ShuffleArg = None  # None: a Loader's False; a Sequence's "as Keras asks,
    # per pass"; "blocks": shards permuted, records shuffled within windows (``plan.blocks``)
    shuffle_window: Count | None = None  # shards per window of "blocks"; None: the default
    drop_remainder: bool = False
    seed: int | np.integer | None = None  # None: drawn once, by Order.of
    num_shards: Count | None = None  # checked against the dataset, by Order.of
    shard_index: Count | None = None  # likewise
    # Weighted sampling (see plan.sampling): checked against the labels, by Order.of.
    sampling_weights: ArrayLike | Mapping[Any, float] | None = None
    samples_per_epoch: Count | None = None

    def __post_init__(self) -> None:
        _set(self, "batch_size", check.positive_int("batch_size", self.batch_size))
        _set(self, "shuffle", check.shuffle(self.shuffle))
        _set(self, "shuffle_window", check.shuffle_window(self.shuffle_window, self.shuffle))
        _set(self, "drop_remainder", check.boolean("drop_remainder", self.drop_remainder))
        if self.seed is not None:
            _set(self, "seed", check.seed(self.seed))


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """Who makes the batches, how far ahead of the consumer, and how they are handed over."""

    # a count, or "auto", or makers elsewhere (shmaug.ray); None as given: one per core
    workers: WorkersArg = check.AUTO_WORKERS
    start_method: StartMethod | None = None
    max_queue_size: Count | None = None  # None: follows the workers (handoff.depth); checked
    # against a batch's memory by Options.of
    timeout: float | None = None
    copy: bool = True
    pin_memory: bool = False

    def __post_init__(self) -> None:
        _set(self, "workers", check.workers(self.workers))
        _set(self, "start_method", check.start_method(self.start_method))
        _set(self, "max_queue_size", check.queue_size(self.max_queue_size))
        _set(self, "timeout", check.timeout(self.timeout))
        _set(self, "copy", check.boolean("copy", self.copy))
        _set(self, "pin_memory", check.boolean("pin_memory", self.pin_memory))

    @property
    def auto(self) -> bool:
        """``workers="auto"``: the pool sizes itself between epochs (see ``autoscale``)."""
        return self.workers == check.AUTO_WORKERS

    @property
    def count(self) -> int:
        """The workers asked for; with ``"auto"``, the usable cores (where the pool starts);
        remote ones: all they run."""
        if isinstance(self.workers, RemoteWorkers):
            return self.workers.count
        return self.workers if isinstance(self.workers, int) else check.default_workers()

    @property
    def remote(self) -> RemoteWorkers | None:
        """The remote workers asked for, if any."""
        return self.workers if isinstance(self.workers, RemoteWorkers) else None


@dataclass(frozen=True, slots=True)
class OutputOptions:
    """What a sample becomes: the augmentation, and what it makes of a sample."""

    augment: AugmentFn | None = None
    output_shape: Shape | None = None  # as given (a Sequence's repr shows it so)
    output_dtype: DTypeLike | None = None  # as given
    value_range: Bounds | None = None  # as given (a Loader's repr shows it so)
    mix: Mix | None = None  # MixUp / CutMix over pairs; checked against the labels by Pipeline
    shape: tuple[int, ...] | None = field(init=False)  # output_shape, checked
    dtype: np.dtype | None = field(init=False)  # output_dtype, checked
    bounds: tuple[float, float] | None = field(init=False)  # value_range, checked (floats)

    def __post_init__(self) -> None:
        _set(self, "augment", check.callable_or_none("augment", self.augment))
        _set(self, "shape", None if self.output_shape is None
             else check.shape("output_shape", self.output_shape))
        _set(self, "dtype", None if self.output_dtype is None
             else check.dtype("output_dtype", self.output_dtype))
        _set(self, "bounds", ranges.value_range(self.value_range))
        _set(self, "mix", check.mix(self.mix))


@dataclass(frozen=True, slots=True)
class Settings:
    """The arguments as given, checked, by concern. ``Loader`` and ``Sequence`` each pass
    every argument by keyword to the field of the same name (``tests/unit/test_loader_args.py``
    holds both signatures and both calls to these fields, names and defaults)."""

    batches: BatchOptions = field(default_factory=BatchOptions)
    workers: WorkerOptions = field(default_factory=WorkerOptions)
    output: OutputOptions = field(default_factory=OutputOptions)


@dataclass(frozen=True, slots=True)
class Data:
    """The samples, checked: what workers read, the targets, and how many there are."""

    x: np.ndarray | Sized  # the images (an array or a memory map), or what `load` indexes
    y: TargetTree  # each of length n
    load: Load | None  # what workers call for sample i; None: x[i]
    n: int  # samples in the dataset (all shards)
    shown: str  # how repr shows `x` as given
    # where in y the labels lie (``labels``): y itself; a Sequence's y, not its other inputs
    labels_at: tree.Path = ()
    shown_y: str | None = None  # how repr shows `y` once released (None: as it is now)

    @classmethod
    def of(cls, x: Any, y: Any, load: Load | None) -> Data:
        """``Loader``'s ``x``, ``y`` and ``load``, checked (a ``Sequence`` checks its own)."""
        shown = describe.brief(x)
        if load is None and not inputs.is_source(x):
            x = inputs.image_array(x, y)  # an array; images of several sizes: a source
        if load is None and inputs.is_source(x):
            load = x.load  # a sample source such as shmaug.ImageFiles: workers decode
            if y is None:
                y = source.labels(x)  # as Keras' image_dataset_from_directory
        n = len(x) if load is None else inputs.length(x)
        y = inputs.targets(y, n)
        inputs.spatial_sources(y, x)
        return cls(x, y, check.callable_or_none("load", load), n, shown)

    def released(self) -> Data:
        """This data without the user's arrays (a closed loader's, which TensorFlow may keep
        reachable, fold after fold): each as an empty array of its dtype and sample shape."""
        return replace(self, x=tree.emptied(self.x), y=tree.emptied(self.y),
                       shown_y=describe.brief(self.y) if self.shown_y is None else self.shown_y)

    @property
    def labels(self) -> TargetTree:
        """What sampling by class and a mix read: the entry of ``y`` at ``labels_at``."""
        labels = self.y
        for key in self.labels_at:
            labels = labels[key]  # type: ignore[index]
        return labels

    @property
    def images(self) -> np.ndarray | None:
        """The array workers read sample i of; None where ``load`` makes it."""
        if self.load is not None:
            return None
        assert isinstance(self.x, np.ndarray)  # (Data.of made it one)
        return self.x


@dataclass(frozen=True, slots=True)
class Order:
    """Which samples each batch holds, and in which order: ``BatchOptions`` against the data."""

    n: int  # samples in the dataset (all shards)
    seed: int  # as given, or drawn
    seed_drawn: bool
    # the engine plans shuffled epochs (always under weighted sampling); a ``Blocks`` layout
    # under shuffle="blocks"
    shuffle: Shuffle
    weights: np.ndarray | None  # one sampling weight per sample; None: each sample once
    samples: int  # in an epoch (all shards): drawn with weights, else n
    num_shards: int
    shard_index: int
    plan: BatchPlan  # the batches of this shard's epochs
    # shuffle=None under `per_pass`: whether a pass shuffles is known only when it begins, so
    # its shards' need for a common seed is checked then (check_shuffled_pass), not here
    per_pass: bool = False

    @classmethod
    def of(cls, batches: BatchOptions, n: int, labels: TargetTree, *,
           per_pass: bool = False, x: Any = None) -> Order:
        """``per_pass``: ``shuffle=None`` leaves the order to each pass (a ``Sequence``'s, as
        Keras asks), so the engine plans shuffled epochs for the passes that shuffle. ``x``:
        the data, whose shards ``shuffle="blocks"`` permutes."""
        weights = sampling.weights(batches.sampling_weights, labels, n)
        samples = sampling.samples_per_epoch(batches.samples_per_epoch, n, weights is not None)
        window = None if batches.shuffle_window is None else int(batches.shuffle_window)
        layout = _blocks.blocks(batches.shuffle, window, x, n,
                                weights is not None)
        shuffle: Shuffle = layout if layout is not None else bool(
            (per_pass if batches.shuffle is None else batches.shuffle) or
            weights is not None)  # a draw by weight is random
        per_pass_shuffle = per_pass and batches.shuffle is None and weights is None
        given = None if batches.seed is None else int(batches.seed)  # (a numpy integer too)
        num_shards, shard_index, plan = check.sharded_plan(
            samples, int(batches.batch_size), batches.drop_remainder, batches.num_shards,
            batches.shard_index, bool(shuffle) and not per_pass_shuffle, given)
        seed = check.draw_seed() if given is None else given
        if given is None:  # (a run that logs INFO can be repeated from its log alone)
            log.info("seed=None drew seed=%d: pass seed=%d to repeat this run's order and "
                     "augmentations", seed, seed)
        return cls(n, seed, given is None, shuffle, weights, samples, num_shards,
                   shard_index, plan, per_pass_shuffle)

    def sharded(self, num_shards: int | None, shard_index: int | None) -> Order:
        """This order for another shard of the same epochs (a ``Sequence``'s, taken from a
        Keras distribution or an ``InputContext``), checked."""
        count, index, plan = check.sharded_plan(
            self.samples, self.plan.batch_size, self.plan.drop_remainder, num_shards,
            shard_index, bool(self.shuffle) and not self.per_pass,
            None if self.seed_drawn else self.seed)
        return replace(self, num_shards=count, shard_index=index, plan=plan)

    def check_shuffled_pass(self) -> None:
        """A pass that shuffles, beginning: its shards split one global order, which only a
        seed every host shares makes (``per_pass`` left this check to the pass)."""
        check.shard_seed(self.num_shards, True, None if self.seed_drawn else self.seed)

    def fingerprint(self) -> dict[str, Any]:
        """What the batches depend on, besides the seed: a saved state must match it."""
        extra = sampling.fingerprint(self.weights, self.samples)
        shuffle: bool | str = bool(self.shuffle)
        if isinstance(self.shuffle, _blocks.Blocks):  # JSON: the name, and its layout apart
            shuffle, extra = _blocks.BLOCKS, {**extra, "blocks": self.shuffle.fingerprint()}
        return check.fingerprint(self.n, self.plan, shuffle, self.num_shards, extra)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """What workers run on each sample: ``OutputOptions`` against the data."""

    augment: AugmentFn | None  # with the value range bound in, where it takes one
    plan: Plan  # what it does (``ops.plan``): the engine asks nothing else of it
    value_range: tuple[float, float] | None  # None while a `load` source is unprobed
    checked: bool  # whether the data is checked against the value range
    range_origin: str  # where value_range came from, as errors say it (ranges.range_origin)
    moved: dict[str, Any]  # targets workers transform with their image, by name
    mix: Mix | None  # as given, its classes known from the labels
    # target sources (masks in files) whose rows workers make and pass on unmoved, by place
    made: dict[str, Any]
    # where each of the worker targets lies in y, by name: a batch's rows are put back there
    places: dict[str, tree.Path]
    mixed_at: tree.Path | None  # where the labels a mix turns into soft targets lie in y
    blended_at: tuple[tree.Path, ...] = ()  # where what a mix blends beside them lies

    @property
    def worker_targets(self) -> dict[str, Any]:
        """Every target the workers make rows of (moved, or made from a source), by name."""
        return {**self.moved, **self.made}

    @classmethod
    def of(cls, output: OutputOptions, data: Data, hook: AugmentFn | None = None,
           hook_name: str = "augment") -> Pipeline:
        """``hook``: a ``Sequence``'s own ``augment`` method (``hook_name``), run instead of
        the argument and keeping its plan: it gets what the argument would (an undecoded
        photo for a decode-time crop), its ``super().augment`` runs the argument with the
        value range bound, and the targets the argument moves move there (``ops.declared``)."""
        images = data.images
        plan = plan_of(output.augment)
        value_range = ranges.resolve_range(output.bounds, plan,
                                           None if images is None else images.dtype)
        origin = ranges.range_origin(output.bounds, plan)
        # Said once, for all. The dtype's own range is bound only for float data, where it
        # spares each op a pass over the image (``params.levels``): for integers an op reads
        # it off the image's dtype for free, and so follows one an op before it changed (a
        # uint8 image made float [0, 1]), as called by hand, instead of taking 0..255 for it.
        # Not past a first step of the user's (``Plan.takes_raw``): its floats' range is its
        # own, which each op then reads off the image it is given.
        bound = output.bounds if output.bounds is not None or images is None or \
            images.dtype.kind != "f" or plan.takes_raw else value_range
        if bound is not None and plan.ranged:
            plan = plan_of(with_value_range(output.augment, bound))
        plan = plan.reading_boxes(inputs.box_format(data.y))  # the boxes' own, if they say
        inputs.pipeline_input(plan, images)  # a dtype or layout ops misread
        check.shared_generators(output.augment, hook)
        inputs.sized_output(data.x, plan, output.shape)  # photos of many sizes
        plan.refuse_unmoved(inputs.spatial_targets(data.labels))
        shape = source.fixed_image_shape(data.x, data.load)
        inputs.unnamed_masks(data.y, plan, shape, data.labels_at)
        if hook is not None and output.augment is None:
            refuse_blind(hook, hook_name, inputs.spatial_targets(data.labels))
        if hook is None and output.augment is None:
            inputs.stored_as(images, output.dtype)
            inputs.float16_room(images, output.dtype)
        moved = inputs.augmented_targets(data.y, plan, shape, data.labels_at, data.x)
        # Ops that clip need the true range; a plain user function gets data as it is,
        # unchecked unless the user declared a range.
        checked = output.bounds is not None or plan.ranged and not plan.takes_raw
        mix = None if output.mix is None else output.mix.for_labels(
            data.labels, inputs.spatial_targets(data.labels))
        made = tree.made_targets(data.y, moved)
        places = {name: filed.path for name, filed in {**moved, **made}.items()}
        made_sources = {name: filed.value for name, filed in made.items()}
        inputs.unfiled_sources(made_sources, plan)
        augment = plan.pipeline
        if hook is not None:
            augment = Declared(hook, augment, hook_name)
            plan = plan_of(augment)
        mixed_at = None if mix is None else tree.only_leaf(data.labels, data.labels_at)
        blended = () if mix is None else inputs.blended_beside(data.y, data.labels_at, mix)
        return cls(augment, plan, value_range, checked, origin,
                   {name: filed.value for name, filed in moved.items()}, mix, made_sources,
                   places, mixed_at, blended)

    def released(self) -> Pipeline:
        """This pipeline without the targets it moves (``Data.released``)."""
        return replace(self, moved=tree.emptied(self.moved))

    @property
    def argument(self) -> AugmentFn | None:
        """The ``augment`` argument with the value range bound: what workers run, or what a
        ``Sequence`` subclass's override runs through ``super().augment``."""
        return self.augment.pipeline if isinstance(self.augment, Declared) else self.augment


@dataclass(frozen=True, slots=True)
class Options:
    """All a ``Loader`` builds from: the settings, and what they resolved to for its data."""

    settings: Settings
    data: Data
    order: Order
    pipeline: Pipeline

    def released(self) -> Options:
        """These options without the user's arrays (``Data.released``): a closed loader's."""
        return replace(self, data=self.data.released(), pipeline=self.pipeline.released())

    @classmethod
    def of(cls, settings: Settings, data: Data, *, per_pass: bool = False,
           hook: AugmentFn | None = None, hook_name: str = "augment") -> Options:
        """The settings checked against the data: each check once (``per_pass`` as for
        ``Order.of``, ``hook`` as for ``Pipeline.of``)."""
        images = data.images
        order = Order.of(settings.batches, data.n, data.labels, per_pass=per_pass, x=data.x)
        if settings.workers.max_queue_size is not None:
            check.queue_fits(int(settings.workers.max_queue_size), order.plan.rows,
                             None if images is None else images[0].nbytes)
        return cls(settings, data, order, Pipeline.of(settings.output, data, hook, hook_name))
