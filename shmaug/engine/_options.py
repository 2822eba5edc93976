"""What a ``Loader`` was asked for, checked and resolved in one step, before anything starts.

``resolve`` runs every check of the arguments (``_checks``: the settings, ``_inputs``: the
data) and returns a frozen ``Options``; the ``Loader`` then only builds from it. Nothing here
allocates shared memory or starts a process, so a bad argument costs nothing to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..ops.core import with_value_range
from . import _checks as check
from . import _describe as describe
from . import _inputs as inputs
from . import _sampling as sampling
from ._schedule import BatchPlan


@dataclass(frozen=True, slots=True)
class Options:
    """A loader's arguments, checked, with what they resolve to."""

    x: Any  # the images (an array or a memory map), or what `load` indexes (a source)
    y: Any  # the checked targets: None, an array, or a dict / list / tuple of them
    load: Callable[[int], Any] | None  # what workers call for sample i; None: x[i]
    n: int  # samples in the dataset (all shards)
    batch_size: int
    augment: Any  # with the value range bound in, where it takes one
    workers: int  # the count asked for (with "auto": the usable cores, where it starts)
    auto_workers: bool  # workers="auto": the pool sizes itself between epochs
    seed: int  # as given, or drawn
    seed_drawn: bool
    shuffle: bool  # True under weighted sampling, whatever was asked: a draw is random
    weights: np.ndarray | None  # one sampling weight per sample; None: each sample once
    samples: int  # in an epoch (all shards): drawn with weights, else n
    copy: bool
    start_method: str | None
    max_queue_size: int
    timeout: float | None
    value_range: tuple[float, float] | None  # None while a `load` source is unprobed
    given_range: tuple[float, float] | None  # the value_range argument itself
    checked: bool  # whether the data is checked against the value range
    augmented: dict[str, np.ndarray]  # targets workers transform with their image, by name
    output_shape: tuple[int, ...] | None  # as declared; None: learned from sample 0
    output_dtype: np.dtype | None
    num_shards: int
    shard_index: int
    plan: BatchPlan  # the batches of this shard's epochs
    shown_x: str  # how repr shows `x` as given
    shown_range: Any  # the value_range argument as given, for repr


def resolve(x: Any, y: Any, batch_size: Any, augment: Any, *, workers: Any, seed: Any,
            shuffle: Any, drop_remainder: Any, start_method: Any, max_queue_size: Any,
            timeout: Any, output_shape: Any, output_dtype: Any, load: Any, copy: Any,
            value_range: Any, num_shards: Any, shard_index: Any, sampling_weights: Any = None,
            samples_per_epoch: Any = None) -> Options:
    """``Loader``'s arguments as ``Options``; raises the first problem with its fix."""
    shown_x = describe.brief(x)
    if load is None and inputs.is_source(x):
        load = x.load  # a sample source such as shmaug.ImageFiles: workers decode
        if y is None:
            y = getattr(x, "labels", None)  # as Keras' image_dataset_from_directory
    x = inputs.image_array(x) if load is None else x
    n = len(x) if load is None else inputs.length(x)
    y = inputs.targets(y, n)
    batch_size = check.positive_int("batch_size", batch_size)
    asked = check.workers(workers)
    auto = asked == check.AUTO
    seed_drawn = seed is None
    seed = check.seed(seed)
    shuffle = bool(check.shuffle(shuffle))  # None: in order (only a Sequence follows Keras)
    weights = sampling.weights(sampling_weights, y, n)
    samples = sampling.samples_per_epoch(samples_per_epoch, n, weights is not None)
    shuffle = shuffle or weights is not None
    copy = check.boolean("copy", copy)
    start_method = check.start_method(start_method)
    max_queue_size = check.max_queue_size(max_queue_size, min(batch_size, n),
                                          None if load else x[0].nbytes)
    timeout = check.timeout(timeout)
    augment = check.callable_or_none("augment", augment)
    load = check.callable_or_none("load", load)
    given = inputs.value_range(value_range)
    resolved = inputs.resolve_range(given, augment, None if load else x.dtype)
    augment = with_value_range(augment, resolved)  # said once, for all
    inputs.pipeline_input(augment, None if load else x)  # a dtype or layout ops misread
    augmented = inputs.augmented_targets(y, augment, None if load else tuple(x.shape[1:]))
    num_shards, shard_index, plan = check.sharded_plan(
        samples, batch_size, drop_remainder, num_shards, shard_index, shuffle, None if seed_drawn
        else seed)
    return Options(
        x=x, y=y, load=load, n=n, batch_size=batch_size, augment=augment,
        workers=check.default_workers() if auto else int(asked), auto_workers=auto,
        seed=seed, seed_drawn=seed_drawn, shuffle=shuffle, weights=weights, samples=samples,
        copy=copy,
        start_method=start_method, max_queue_size=max_queue_size, timeout=timeout,
        value_range=resolved, given_range=given,
        # Ops that clip need the true range; a plain user function gets data as it is,
        # unchecked unless the user declared a range.
        checked=given is not None or hasattr(augment, "with_value_range"),
        augmented=augmented,
        output_shape=None if output_shape is None else check.shape("output_shape",
                                                                   output_shape),
        output_dtype=None if output_dtype is None else check.dtype("output_dtype",
                                                                   output_dtype),
        num_shards=num_shards, shard_index=shard_index, plan=plan, shown_x=shown_x,
        shown_range=value_range)
