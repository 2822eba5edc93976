"""A ``Sequence`` as a ``tf.data.Dataset`` (``to_tf_dataset``): one epoch per iteration, with
the exact output signature and length, for custom loops, ``tf.distribute`` and ``fit``; and
the ``DatasetForms`` base that gives a Sequence that method and ``to_grain`` (Grain's form is
``interop.grain_batches``).

Imports TensorFlow only when called. Under ``strategy.distribute_datasets_from_function`` the
``InputContext`` assigns the shard (``follow_context``), before the workers start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, cast

import numpy as np

from ..errors import ArgumentError
from . import _checks as facade_checks

if TYPE_CHECKING:
    from .sequence import Sequence


class DatasetForms:
    """A ``Sequence`` as another library's dataset: tf.data, Grain (a base of ``Sequence``,
    which keeps its own class to its own concerns)."""

    def to_tf_dataset(self, input_context: Any = None) -> Any:
        """A prefetching ``tf.data.Dataset`` of one epoch per iteration (custom loops,
        ``tf.distribute``), with the exact ``output_signature`` and length.

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
        return to_tf_dataset(cast("Sequence", self), input_context)

    def to_grain(self, epoch: int | None = None) -> Any:
        """A Grain ``MapDataset`` of the batches ``fit`` on this Sequence serves, for models
        whose ``fit`` takes no ``PyDataset`` (keras-hub's detectors and segmenters), on any
        backend: element ``i`` is ``self.batch(i % len(self), epoch=epoch + i // len(self))``
        (``epoch`` defaults to ``self.epoch``), so Grain's ``repeat`` runs the next epochs,
        each shuffled anew unless ``shuffle=False``. Grain's iterator state records the
        element, not this base epoch: to resume from it, make the dataset with the run's own
        ``epoch`` (``to_grain(epoch=0)``), not after another pass over the Sequence moved
        ``self.epoch`` on. Pass ``fit(shuffle=False)``: the batches
        come shuffled already. keras-hub's task models repeat it for their epochs; a plain
        Keras ``fit`` starts it over each epoch, so give it ``.repeat()`` with
        ``steps_per_epoch=len(seq)``. Read it in this process (Grain's threads, not its
        worker processes: ``mp_prefetch`` would read a copy, which serves nothing; shmaug
        runs the workers). Needs ``pip install grain``; see [Detection](../detection.md).

        Example:
            >>> detector.fit(train.to_grain(), epochs=10, shuffle=False)  # keras-hub's
            >>> model.fit(train.to_grain().repeat(), epochs=10, steps_per_epoch=len(train),
            ...           shuffle=False)  # a plain Keras model  # doctest: +SKIP
        """
        from .interop import grain_batches  # (imports Grain)

        return grain_batches.to_grain(cast("Sequence", self), epoch)


def to_tf_dataset(seq: Sequence, input_context: Any = None) -> Any:
    """``seq`` as a prefetching ``tf.data.Dataset`` (see ``Sequence.to_tf_dataset``)."""
    import tensorflow as tf

    if input_context is not None:
        follow_context(seq, input_context)
    if seq.shuffle is None and seq.changes_samples:  # (a plain validation set reads in order)
        facade_checks.read_in_order("to_tf_dataset()")  # (its own reads: not by hand)
    first = seq[0]  # a look: it moves the stream nowhere (_passes rule 2)
    # Every batch whole: the rows of each part of one sample per row are known (XLA, TPUs); a
    # hook's parts may hold other rows (a batch's boxes, one row each).
    whole = seq.last_batch_size == seq.batch_size and not (
        seq.overrides("targets") or seq.overrides("model_inputs"))

    def spec(a: Any) -> Any:
        shape = np.shape(a)
        rows = seq.batch_size if whole and shape[:1] == (seq.batch_size,) else None
        return tf.TensorSpec((rows, *shape[1:]), tf.as_dtype(np.asarray(a).dtype))

    signature = tf.nest.map_structure(spec, first)
    whole_epoch = not seq.served_before_restore()

    def epoch() -> Iterator[Any]:
        seq.on_epoch_begin()  # a subclass's hooks run per epoch, as under fit
        served = seq.served_before_restore()  # a pass restored half-way serves only the rest
        if served and whole_epoch:
            raise ArgumentError(
                "This Sequence was restored half-way through an epoch (load_state_dict) "
                "after to_tf_dataset() made this dataset, whose declared length is a whole "
                "epoch: tf.data would stop at the missing batches (\"expected to contain N "
                "elements\"). Fix: call to_tf_dataset() after load_state_dict().")
        for i in range(len(seq)):
            if i not in served:
                yield seq[i]
        seq.on_epoch_end()

    dataset = tf.data.Dataset.from_generator(epoch, output_signature=signature)
    if whole_epoch:  # every iteration is one whole epoch: say how long, or Keras' fit (its
        # EpochIterator, keras-hub's fit on tf.data) runs it dry each epoch and warns "Your
        # input ran out of data"; a pass restored half-way is shorter once, so left unknown
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(seq)))
    if seq.num_shards > 1:  # sharded already: tf.distribute must not shard it again
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)
        dataset = dataset.with_options(options)
    return dataset.prefetch(tf.data.AUTOTUNE)


def follow_context(seq: Sequence, ctx: Any) -> None:
    """Take the shard an ``InputContext`` assigns (before the workers start)."""
    wanted = (int(ctx.num_input_pipelines), int(ctx.input_pipeline_id))
    if wanted == (seq.num_shards, seq.shard_index):
        return
    given = seq.shards_given
    if given or seq.running_loader is not None:
        why = ("was created with" if given else "already runs with")
        raise ArgumentError(
            f"`input_context` assigns shard {wanted[1]} of {wanted[0]} "
            f"(input_pipeline_id / num_input_pipelines), but this Sequence {why} "
            f"num_shards={seq.num_shards}, shard_index={seq.shard_index}. Fix: leave "
            f"num_shards and shard_index out and let the context decide, or pass "
            f"num_shards={wanted[0]}, shard_index={wanted[1]}."
        )
    seq.reshard(*wanted)
