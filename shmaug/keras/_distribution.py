"""What a Keras distribution (``keras.distribution``, on JAX) asks of a ``shmaug.Sequence``.

Under ``keras.distribution.DataParallel`` over several processes, Keras' ``fit`` takes from each
process's dataset that process's part of the global batch and assembles the global array with
``jax.make_array_from_process_local_data`` (process 0's rows first). A Sequence therefore must
serve each process a different shard of every epoch, and:

- take its shard from the distribution (process index and count) when the user gave none:
  every host fed the whole dataset would train on each sample once per host, silently;
- turn the distribution's ``auto_shard_dataset`` off: Keras shards only ``tf.data`` datasets and
  refuses any other under it, while a Sequence is sharded already;
- serve per process a batch that splits evenly over its local devices (JAX refuses a partial
  last batch that does not, with ``IndivisibleError``);
- see that every process built the model from the same initial weights: Keras' own
  ``keras.distribution.initialize()`` sets one common seed, ``jax.distributed.initialize``
  alone does not, and nothing checks that replicated variables agree.

Read only by the facade (``sequence.py``), lazily: the engine never imports Keras.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import keras

from ..errors import ArgumentError, DistributionError

if TYPE_CHECKING:
    from .sequence import Sequence

log = logging.getLogger(__name__)


def current() -> Any:
    """The Keras distribution in effect, or None (also on backends without one)."""
    get = getattr(getattr(keras, "distribution", None), "distribution", None)
    return get() if callable(get) else None


def processes(dist: Any) -> tuple[int, int]:
    """``(count, index)`` of the processes ``dist`` spans: (1, 0) for one."""
    return int(getattr(dist, "_num_processes", 1)), int(getattr(dist, "_process_id", 0))


def process_shard(dist: Any) -> tuple[int, int]:
    """The shard this process serves: its index of the process count.

    Raises:
        ArgumentError: when model replicas span several processes (each replica's processes
            then need the same data, which a shard per process is not).
    """
    count, index = processes(dist)
    replicas = getattr(dist, "num_model_replicas", count)
    if replicas < count:
        raise ArgumentError(
            f"The Keras distribution spreads {replicas} model replica(s) over {count} "
            f"processes, so processes of one replica need the same batches; shmaug cannot "
            f"tell which processes share a replica. Fix: pass `num_shards` (the number of "
            f"model replicas) and `shard_index` (this process's replica) to shmaug.Sequence.")
    return count, index


def take_over_sharding(dist: Any) -> None:
    """Keras refuses a PyDataset under ``auto_shard_dataset=True``; the Sequence is sharded."""
    if getattr(dist, "auto_shard_dataset", False):
        dist.auto_shard_dataset = False
        log.info("shmaug.Sequence shards each epoch across the %d processes itself: set the "
                 "Keras distribution's auto_shard_dataset to False (Keras shards only "
                 "tf.data datasets)", processes(dist)[0])


def local_devices(dist: Any) -> int:
    """How many devices of this process each batch is split over (1: none)."""
    mesh, axis = getattr(dist, "device_mesh", None), getattr(dist, "batch_dim_name", None)
    if mesh is None or axis not in tuple(mesh.axis_names):
        return 1
    return max(1, int(mesh.shape[tuple(mesh.axis_names).index(axis)]) // processes(dist)[0])


def check_split(dist: Any, batch_size: int, last_batch: int) -> None:
    """Every batch this process serves must split evenly over its local devices.

    Raises:
        ArgumentError: naming ``batch_size`` or ``drop_remainder`` and the fix.
    """
    devices = local_devices(dist)
    if batch_size % devices:
        raise ArgumentError(
            f"`batch_size`={batch_size} does not split evenly over the {devices} devices of "
            f"this process that the Keras distribution shards each batch across. Fix: pass "
            f"a multiple of {devices}, e.g. "
            f"batch_size={batch_size - batch_size % devices or devices}.")
    if last_batch % devices:
        raise ArgumentError(
            f"The last batch of each epoch holds {last_batch} samples, which do not split "
            f"evenly over the {devices} devices of this process that the Keras distribution "
            f"shards each batch across (JAX would stop with IndivisibleError). Fix: for "
            f"training, pass `drop_remainder=True`; for a set read whole (validation, "
            f"evaluate, predict: drop_remainder would leave its last {last_batch} samples out), "
            f"a dataset size (per process) that is a multiple of {devices}, or evaluate it "
            f"without the distribution.")


def check_common_seed(dist: Any) -> None:
    """Processes that drew different initial weights train apart, unnoticed: refuse it.

    Raises:
        DistributionError: when several processes run and no Keras random seed is set.
    """
    if processes(dist)[0] < 2:
        return
    try:
        from keras.src.utils.rng_utils import get_random_seed
    except ImportError:  # another Keras layout: nothing to read, nothing to say
        return
    if get_random_seed() is None:
        raise DistributionError(
            f"The Keras distribution runs {processes(dist)[0]} processes but no Keras random "
            f"seed is set, so each process built its model from different initial weights "
            f"and nothing makes them agree. Fix: call keras.utils.set_random_seed(S) with the "
            f"same S in every process before building the model (or start the processes with "
            f"keras.distribution.initialize(), which sets a common seed).")


def follow(seq: Sequence) -> Any:
    """Under a Keras distribution (before the workers start): this process's shard of a
    multi-process one, unless the user chose one; then the checks it needs (above). Returns the
    distribution, or None."""
    dist = current()
    if dist is None:
        return None
    if processes(dist)[0] > 1:
        if not seq.shards_given and seq.num_shards == 1:
            seq.reshard(*process_shard(dist))
            log.info("shmaug.Sequence serves shard %d of %d (this process of the Keras "
                     "distribution)", seq.shard_index, seq.num_shards)
        take_over_sharding(dist)
    check_split(dist, seq.batch_size, seq.last_batch_size)
    return dist

