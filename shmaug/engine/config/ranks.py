"""The other processes of a distributed run, which no loader argument names: a loader that
reads the whole dataset in every rank, and ranks whose shards of one epoch do not split it.

DDP, Lightning and Accelerate shard only a ``DataLoader``, and nothing of theirs sees a
shmaug loader's ``seed`` or ``shard_index``; neither framework is imported here.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from ...errors import warn

_MADE: Counter[tuple[int, int, int]] = Counter()  # sharded loaders made here, by dataset
# length, batch size and shard count: the k-th of each kind on every rank is compared


def unsharded() -> None:
    """Warn where torch.distributed runs several ranks (DDP, Lightning, Accelerate), or
    jax.distributed several processes, and the data is not sharded: every rank trained on
    the same batches, without a word."""
    dist = _torch_distributed()
    ranks = dist.get_world_size() if dist is not None else 1
    if ranks > 1:
        warn(f"torch.distributed runs {ranks} ranks, and this loader reads the whole dataset "
             f"in each: every rank would train on the same batches (DDP, Lightning and "
             f"Accelerate shard only a DataLoader). Fix: pass num_shards={ranks}, "
             f"shard_index=torch.distributed.get_rank() (num_shards=1 to read it whole on "
             f"purpose, e.g. a validation set read by rank 0 alone).")
    # jax.distributed.initialize()'s state (its client set, the process count it was given);
    # not where a Keras distribution is set, whose Sequence takes its shard from it
    keras_distribution = getattr(getattr(sys.modules.get("keras"), "distribution", None),
                                 "distribution", None)
    if callable(keras_distribution) and keras_distribution() is not None:
        return
    state = getattr(sys.modules.get("jax._src.distributed"), "global_state", None)
    processes = getattr(state, "num_processes", 1) if getattr(state, "client", None) else 1
    if isinstance(processes, int) and processes > 1:
        warn(f"jax.distributed runs {processes} processes, and this loader reads the whole "
             f"dataset in each: every process would train on the same batches. Fix: pass "
             f"num_shards=jax.process_count(), shard_index=jax.process_index() (num_shards=1 "
             f"to read it whole on purpose).")


def agree(num_shards: int, shard_index: int, seed: int | None, n: int, batch_size: int,
          shuffle: bool) -> None:
    """Under torch.distributed, warn where the ranks shuffle their shards of one epoch with
    seeds of their own (``seed=rank``, ``seed + rank``): each shards another order, so about
    a quarter of the samples are read twice and as many never (2 ranks). Each rank leaves its
    seed in the process group's store, then reads what the others left already: of two
    ranks, the later is told, and nothing waits on another rank (a loader one rank makes
    alone is never held up). Loaders are matched as the k-th of their dataset length, batch
    size and shard count on each rank. Two ranks on one shard are told where there are as
    many shards as ranks (``shard_index=LOCAL_RANK`` on several nodes): with fewer, ranks of
    a model-parallel group share theirs."""
    dist = _torch_distributed() if num_shards > 1 and shuffle else None
    if dist is None:
        return
    kind = (n, batch_size, num_shards)
    _MADE[kind] += 1
    key = f"shmaug/{n}/{batch_size}/{num_shards}/{_MADE[kind]}/"
    rank = dist.get_rank()
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set(key + str(rank), f"{shard_index}:{seed}")  # (first: of two ranks, one
        world = dist.get_world_size()  # sees the other)
        left = {r: store.get(key + str(r)).decode().split(":") for r in range(world)
                if r != rank and store.check([key + str(r)])}
    except Exception:  # noqa: BLE001 - a store that cannot say (another backend): nothing to tell
        return
    other = next((r for r, (_, theirs) in left.items() if theirs != str(seed)), None)
    if other is not None:
        warn(f"Rank {rank} of torch.distributed shuffles its shard with seed={seed} and "
             f"rank {other} with seed={left[other][1]}: shards of one epoch split one order, "
             f"which only a common seed makes, so some samples are read twice and others "
             f"never. Fix: pass the same seed on every rank (augmentations differ per "
             f"sample already: a seed per rank is not needed for them).")
    same = next((r for r, (index, _) in left.items() if index == str(shard_index)), None)
    if same is not None and num_shards >= world:  # (fewer shards than ranks: groups share)
        warn(f"Ranks {same} and {rank} of torch.distributed both read shard_index="
             f"{shard_index} of {num_shards}, so another shard is never read (shard_index="
             f"LOCAL_RANK on several nodes?). Fix: shard_index=torch.distributed.get_rank().")


def _torch_distributed() -> Any:
    """``torch.distributed`` where a process group of several ranks runs, else None."""
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    try:
        return dist if dist is not None and dist.is_available() and dist.is_initialized() \
            and dist.get_world_size() > 1 else None
    except Exception:  # noqa: BLE001 - a torch that cannot say: nothing to tell
        return None
