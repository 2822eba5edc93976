"""Sharded loaders with real workers: each host augments only its part, and a sample looks
the same whichever host draws it."""

from __future__ import annotations

import os

import numpy as np
import pytest

import shmaug
from tests import _ops

pytestmark = pytest.mark.timeout(120)

K = 3  # 40 samples: 13 per shard, 1 left over


class Record:
    """Adds noise and appends each sample index it made to a file (one O_APPEND write per
    sample, so several workers may share the file)."""

    uses_global_rng = False  # else a sample that draws from them is made twice (seeding.py)

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = image + rng.integers(0, 3, image.shape, dtype=image.dtype)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{int(image.flat[0])},{int(image.flat[1])}\n".encode())
        finally:
            os.close(fd)
        return out


def indexed(images: np.ndarray) -> np.ndarray:
    """Images whose first two pixels spell their index (so a worker can say what it made)."""
    out = images.copy()
    out[:, 0, 0], out[:, 0, 1] = np.arange(len(out)) // 256, np.arange(len(out)) % 256
    return out


def run(images, epochs=2, **kwargs):
    kwargs = {"batch_size": 4, "augment": _ops.noisy, "seed": 7, "shuffle": True,
              "start_method": "fork", **kwargs}
    with shmaug.Loader(images, np.arange(len(images)), **kwargs) as loader:
        out = []
        for _ in range(epochs):
            batches = list(loader)
            out.append((np.concatenate([x for x, _ in batches]),
                        np.concatenate([y for _, y in batches])))
        return out, loader.stats()


@pytest.mark.parametrize("shuffle", [True, False])
def test_shards_split_the_epoch_and_match_the_unsharded_run(images, shuffle):
    whole, _ = run(images, workers=0, shuffle=shuffle)
    shards = [run(images, workers=1, shuffle=shuffle, num_shards=K, shard_index=k)[0]
              for k in range(K)]
    for epoch in range(2):
        served = np.concatenate([shards[k][epoch][1] for k in range(K)])
        assert len(served) == len(np.unique(served)) == K * (len(images) // K)
        x_whole, y_whole = whole[epoch]
        for k in range(K):
            x, y = shards[k][epoch]
            assert len(y) == len(images) // K
            # Same (seed, epoch, sample index): the same augmented sample.
            at = np.argsort(y_whole)[y]
            np.testing.assert_array_equal(x, x_whole[at])
    if not shuffle:  # the left-over sample rotates
        left = [set(range(len(images))) - set(np.concatenate([s[e][1] for s in shards]).tolist())
                for e in range(2)]
        assert left[0] != left[1]


def test_a_shard_augments_only_its_part(images, tmp_path):
    images = indexed(images)
    path = str(tmp_path / "made.txt")
    # One ring slot: no lookahead, so what was made is exactly what was asked for.
    with shmaug.Loader(images, np.arange(len(images)), batch_size=4, augment=Record(path),
                       workers=2, seed=3, shuffle=True, max_queue_size=1, start_method="fork",
                       num_shards=2, shard_index=1) as loader:
        os.unlink(path)  # the probe (sample 0, to size the output) is not epoch work
        served = np.concatenate([y for _, y in loader])
        stats = loader.stats()
    with open(path) as f:
        made = sorted(int(a) * 256 + int(b) for a, b in (line.split(",") for line in f))
    assert made == sorted(served.tolist())
    assert len(made) == stats["images"] == len(images) // 2
    assert stats["batches"] == 5


RANK = """
import os, sys, warnings
import numpy as np, torch.distributed as dist, shmaug
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
x = np.zeros((8, 4, 4), np.uint8)
with warnings.catch_warnings(record=True) as told:
    warnings.simplefilter("always")
    shmaug.Loader(x, batch_size=2, workers=0).close()
    shmaug.Loader(x, batch_size=2, workers=0, num_shards=2, shard_index=dist.get_rank()).close()
    shmaug.Loader(x, batch_size=2, workers=0, num_shards=1).close()  # whole, on purpose
print("TOLD", [str(w.message) for w in told if issubclass(w.category, shmaug.ShmaugWarning)])
dist.destroy_process_group()
"""


DISAGREE = """
import os, sys, warnings
import numpy as np, torch.distributed as dist, shmaug
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
rank, x = dist.get_rank(), np.zeros((12, 4, 4), np.uint8)
with warnings.catch_warnings(record=True) as told:
    warnings.simplefilter("always")
    for seed, index in ((0, rank), (rank, rank), (5, 0)):  # agreed, a seed per rank, and a
        # shard two ranks share where there are as many shards as ranks
        if rank == 1:
            dist.barrier()  # (rank 0's loader first: rank 1 finds what it left)
        shmaug.Loader(x, batch_size=2, workers=0, shuffle=True, seed=seed, num_shards=2,
                      shard_index=index).close()
        if rank == 0:
            dist.barrier()
    if rank == 0:  # a validation set rank 0 alone reads: nothing waits on rank 1
        shmaug.Loader(x, batch_size=3, workers=0, shuffle=True, seed=1, num_shards=2,
                      shard_index=0).close()
print("TOLD", [str(w.message) for w in told if issubclass(w.category, shmaug.ShmaugWarning)])
dist.barrier()
dist.destroy_process_group()
"""


def _ranks(script: str) -> list[str]:
    """Run ``script`` as ranks 0 and 1 of a gloo process group; what each was told."""
    import socket
    import subprocess
    import sys

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(rank), port], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
             for rank in (0, 1)]
    told = []
    for rank in ranks:
        out, err = rank.communicate(timeout=100)
        assert rank.returncode == 0, err[-2000:]
        told.append(out.split("TOLD ")[1].strip())
    return told


def test_torch_ranks_whose_shards_do_not_split_one_epoch_are_told():
    """`seed=rank` (a seed per rank, for augmentations): each rank sharded another order, so
    746 of 3,000 samples were read twice an epoch and as many never, without a word."""
    pytest.importorskip("torch")
    first, second = _ranks(DISAGREE)
    assert first == "[]", first  # (rank 0 came first each time: nothing left to compare)
    assert second.count("shuffles its shard with seed=1 and rank 0 with seed=0") == 1, second
    assert second.count("Ranks 0 and 1 of torch.distributed both read shard_index=0") == 1, \
        second
    assert second.count("of torch.distributed") == 2, second
    assert "Fix: pass the same seed on every rank" in second


RACE = """
import os, sys, warnings
import numpy as np, torch.distributed as dist, shmaug
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
rank = dist.get_rank()
with warnings.catch_warnings(record=True) as told:
    warnings.simplefilter("always")
    for round in range(20):  # both at once, as after init_process_group's barrier
        dist.barrier()
        shmaug.Loader(np.zeros((12 + round, 4, 4), np.uint8), batch_size=2, workers=0,
                      shuffle=True, seed=rank, num_shards=2, shard_index=rank).close()
print("TOLD", sum(issubclass(w.category, shmaug.ShmaugWarning) for w in told))
dist.barrier()
dist.destroy_process_group()
"""


def test_a_seed_per_rank_is_told_when_the_ranks_make_their_loaders_at_once():
    """Each rank read what the others left before leaving its own: ranks leaving a barrier
    together both found nothing, and 15 of 40 such runs went untold."""
    pytest.importorskip("torch")
    told = [int(count) for count in _ranks(RACE)]
    assert sum(told) >= 20, told  # every round told, on one rank or both


def test_ranks_of_torch_distributed_reading_the_whole_dataset_are_told():
    """DDP, Lightning and Accelerate shard only a DataLoader: with num_shards left out, both
    ranks trained on the same 100 samples an epoch, without a word."""
    pytest.importorskip("torch")
    for told in _ranks(RANK):
        assert told.count("torch.distributed runs 2 ranks") == 1, told
        assert "num_shards=2, shard_index=torch.distributed.get_rank()" in told
