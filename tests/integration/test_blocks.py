"""``shuffle="blocks"`` end to end: real WebDataset shards on disk and in the real S3 server
(the ``s3`` fixture, tests/integration/conftest.py), read by real worker processes.

The order keeps what the exact shuffle keeps: the same batches for any worker count and start
method, every record once per epoch, resume from a state mid-epoch, disjoint hosts; it reads
a few shards at a time; ``predict`` on a Sequence still reads the records in their order.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import shmaug
from tests import _ops
from tests import records_data as D
from tests._helpers import assert_same_batches

pytestmark = pytest.mark.timeout(120)
SIZES = [7, 12, 9, 10, 8, 11]  # records per shard: record i labelled i
N = sum(SIZES)
BOUNDS = np.concatenate([[0], np.cumsum(SIZES)])
ARGS = dict(batch_size=8, augment=_ops.noisy, seed=7, shuffle="blocks", shuffle_window=2)


def write_shards(folder) -> list:
    folder.mkdir(parents=True, exist_ok=True)
    return [D.write_tar(folder / f"shard-{k}.tar", D.wds_members(
        int(BOUNDS[k]), int(BOUNDS[k + 1]), label=lambda i: i)) for k in range(len(SIZES))]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("blocks")
    write_shards(folder)
    return folder


def source(where: str, **kwargs) -> shmaug.ImageRecords:
    return shmaug.ImageRecords.from_webdataset(
        f"{where}/shard-{{0..{len(SIZES) - 1}}}.tar", image_ext="png",
        image_size=D.SHAPE[:2], **kwargs)


def epochs(records, count=2, **kwargs) -> list:
    with shmaug.Loader(records, **{**ARGS, **kwargs}) as loader:
        return [(x.copy(), y.copy()) for _ in range(count) for x, y in loader]


def check_epoch(ys: np.ndarray, window: int = 2) -> None:
    """Every record once, and each window of the epoch within ``window`` shards."""
    assert sorted(ys.tolist()) == list(range(N))
    shard_of = np.searchsorted(BOUNDS, ys, side="right") - 1
    at = 0
    while at < N:
        firsts = list(dict.fromkeys(shard_of[at:].tolist()))[:window]
        span = int(sum(SIZES[s] for s in firsts))
        assert set(shard_of[at:at + span].tolist()) == set(firsts)
        at += span


def test_any_worker_count_and_start_method_gives_the_same_blocks_epochs(shards):
    records = source(str(shards))
    expected = epochs(records, workers=0)
    for workers, method in [(1, "fork"), (2, "fork"), (2, "spawn")]:
        assert_same_batches(epochs(records, workers=workers, start_method=method), expected)
    ys = np.concatenate([y for _, y in expected])
    check_epoch(ys[:N])
    check_epoch(ys[N:])
    assert not np.array_equal(ys[:N], ys[N:])  # the next epoch is another order
    assert not np.array_equal(ys[:N], np.arange(N))


def test_a_state_saved_mid_epoch_resumes_the_blocks_order(shards):
    records = source(str(shards))
    expected = epochs(records, workers=2, start_method="fork")
    with shmaug.Loader(records, workers=2, start_method="fork", **ARGS) as first:
        it = iter(first)
        got = [tuple(a.copy() for a in next(it)) for _ in range(5)]
        state = json.loads(json.dumps(first.state_dict()))
        del it
    assert state["fingerprint"]["shuffle"] == "blocks"
    with shmaug.Loader(records, workers=2, start_method="fork", **ARGS) as second:
        second.load_state_dict(state)
        while len(got) < len(expected):
            got.extend((x.copy(), y.copy()) for x, y in second)
    assert_same_batches(got, expected)
    with shmaug.Loader(records, workers=0, **{**ARGS, "shuffle_window": 3}) as other:
        with pytest.raises(shmaug.ArgumentError, match=r"blocks=.*'window': 2.*"
                           r"'window': 3.*same `shuffle_window`"):
            other.load_state_dict(state)


@pytest.mark.parametrize("drop_remainder", [False, True])
def test_hosts_take_disjoint_parts_of_one_blocks_order(shards, drop_remainder):
    records = source(str(shards))
    hosts = [epochs(records, count=1, workers=1, start_method="fork", num_shards=3,
                    shard_index=k, drop_remainder=drop_remainder) for k in range(3)]
    taken = [np.concatenate([y for _, y in host]) for host in hosts]
    assert len({len(t) for t in taken}) == 1  # every host runs the same steps
    union = np.concatenate(taken)
    assert len(set(union.tolist())) == len(union)
    per_host = N // 3 - (N // 3) % 8 if drop_remainder else N // 3
    assert len(union) == 3 * per_host


def test_a_sequence_shuffles_its_passes_by_blocks_and_predicts_in_order(shards):
    keras = pytest.importorskip("keras")
    records = source(str(shards))
    loader_ys = np.concatenate([y for _, y in epochs(records, count=1, workers=0)])
    with shmaug.Sequence(records, workers=2, start_method="fork", **ARGS) as seq:
        assert seq.shuffle == "blocks"
        ys = np.concatenate([y for _, y in seq])  # a loop by hand: a shuffled pass
        np.testing.assert_array_equal(ys, loader_ys)
        model = keras.Sequential([keras.Input(D.SHAPE), keras.layers.Flatten()])
        with shmaug.Sequence(records, workers=2, start_method="fork",
                             **{**ARGS, "augment": None}) as plain:
            out = model.predict(plain, verbose=0)
    expected = np.stack([D.image(i).reshape(-1) for i in range(N)]).astype(out.dtype)
    np.testing.assert_array_equal(out, expected)


@pytest.fixture(scope="module")
def bucket(s3, shards):
    """The shards uploaded under ``blocks/`` of the real S3 server; its storage options."""
    pytest.importorskip("s3fs", reason="needs the remote extra: pip install 'shmaug[remote]'")
    boto3 = pytest.importorskip("boto3")
    from tests.integration._s3 import BUCKET, KEY, SECRET, options

    endpoint, _ = s3
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    for path in sorted(shards.glob("*.tar")):
        client.upload_file(str(path), BUCKET, f"blocks/{path.name}")
    return f"s3://{BUCKET}/blocks", options(endpoint)


def test_shards_in_a_bucket_give_the_local_blocks_order(bucket, shards):
    where, storage_options = bucket
    remote = source(where, storage_options=storage_options)
    assert np.array_equal(remote.shard_bounds(), BOUNDS)
    assert_same_batches(epochs(remote, workers=2, start_method="spawn"),
                        epochs(source(str(shards)), workers=0))


def cached(folder) -> list:
    return sorted(folder.glob("*.data"))


def test_the_disk_cache_downloads_the_shards_in_the_order_of_use(bucket, tmp_path):
    """The workers hand the source the order: after one batch, every shard the bound holds
    is on its way, not only those of the tasks queued (one here)."""
    where, storage_options = bucket
    records = source(where, storage_options=storage_options, cache_dir=tmp_path)
    with shmaug.Loader(records, workers=2, start_method="fork", max_queue_size=1,
                       **{**ARGS, "shuffle_window": 1}) as loader:
        it = iter(loader)
        next(it)
        deadline = time.monotonic() + 20
        while len(cached(tmp_path)) < len(SIZES) and time.monotonic() < deadline:
            time.sleep(0.05)
        del it
    assert len(cached(tmp_path)) == len(SIZES)


def test_a_bound_of_two_shards_evicts_by_the_order_and_changes_no_batch(bucket, shards,
                                                                        tmp_path):
    where, storage_options = bucket
    limit = sum(sorted(p.stat().st_size for p in shards.glob("*.tar"))[-2:])
    with pytest.warns(shmaug.ShmaugWarning, match=r"evicts the one it will read again last"
                      r".*shuffle=\"blocks\" and a bound of `shuffle_window` shards"):
        records = source(where, storage_options=storage_options, cache_dir=tmp_path,
                         cache_limit=limit)
    # One process; workers share the bound as tests/unit/test_disk_cache.py shows.
    assert_same_batches(epochs(records, workers=0), epochs(source(str(shards)), workers=0))
    assert sum(p.stat().st_size for p in cached(tmp_path)) <= limit
