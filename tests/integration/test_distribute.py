"""tf.distribute on one host: MirroredStrategy on 2 logical CPU devices, with fit and with a
custom loop over experimental_distribute_dataset / distribute_datasets_from_function. Each
run is a subprocess (logical devices must be set before TensorFlow starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tensorflow")  # before the helpers below, which import it
from tests.integration._fed import read

pytestmark = [pytest.mark.keras, pytest.mark.timeout(300), pytest.mark.slow]

N, EPOCHS = 64, 4  # as in _child_distribute
# Weights after epoch 0 vs the run without a strategy: the same data in the same order, the
# gradient of each global batch summed over 2 replicas instead of taken at once; only the
# float32 summation order differs (measured: 3e-8 max abs on weights of order 0.1).
WEIGHT_ATOL = 1e-6


def train(tmp_path, mode):
    out, record = tmp_path / f"{mode}.json", tmp_path / f"{mode}.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration._child_distribute", mode, str(out), str(record)],
        cwd=os.getcwd(), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    with open(out) as f:
        return json.load(f), read(record)[0]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return train(tmp_path_factory.mktemp("plain"), "plain")


@pytest.mark.parametrize("mode", ["mirrored", "ed", "dfn"])
def test_mirrored_strategy_feeds_every_sample_once_and_trains_like_one_device(
        tmp_path, plain, mode):
    (base, base_fed), (got, fed) = plain, train(tmp_path, mode)
    for epoch in range(EPOCHS):
        assert sorted(fed[epoch]) == list(range(N)), f"epoch {epoch}: every sample once"
        assert fed[epoch] == base_fed[epoch], f"epoch {epoch}: the same augmented samples"
    np.testing.assert_allclose(got["weights0"], base["weights0"], rtol=0, atol=WEIGHT_ATOL)
    assert got["accuracy"] >= 0.95 and base["accuracy"] >= 0.95  # it converges


def test_input_context_that_disagrees_with_explicit_shards_is_refused():
    tf = pytest.importorskip("tensorflow")
    import shmaug

    x = np.zeros((10, 4, 4), np.float32)
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    with shmaug.Sequence(x, batch_size=2, workers=0, num_shards=2, shard_index=0,
                         shuffle=False) as seq:
        with pytest.raises(shmaug.ArgumentError,
                           match=r"assigns shard 1 of 2.*created with num_shards=2, shard_index=0"):
            seq.to_tf_dataset(input_context=ctx)
    with shmaug.Sequence(x, batch_size=2, workers=0, shuffle=False) as seq:
        seq[0]  # started unsharded: too late for a context to shard it
        with pytest.raises(shmaug.ArgumentError, match=r"already runs with num_shards=1"):
            seq.to_tf_dataset(input_context=ctx)
    with shmaug.Sequence(x, np.arange(10), batch_size=2, workers=0, seed=0,
                         shuffle=True) as seq:
        ds = seq.to_tf_dataset(input_context=ctx)  # the context decides: shard 1 of 2
        assert (seq.num_shards, seq.shard_index, len(seq)) == (2, 1, 3)
        ids = np.concatenate([y.numpy() for _, y in ds])
        assert len(ids) == 5 and set(ids) <= set(range(10))
        opts = ds.options().experimental_distribute.auto_shard_policy
        assert opts == tf.data.experimental.AutoShardPolicy.OFF  # not sharded twice


# -- several hosts: examples/multi_worker.py, 2 processes over loopback -----------------------


def test_multi_worker_example_shards_each_epoch_across_hosts(tmp_path):
    import hashlib
    import importlib.util
    import signal
    from pathlib import Path

    import shmaug

    root = Path(__file__).resolve().parents[2]
    script = root / "examples" / "multi_worker.py"
    record = tmp_path / "fed"
    env = {**os.environ, "PYTHONPATH": str(root), "TF_CPP_MIN_LOG_LEVEL": "3"}
    # Its own session, so the hosts and their shmaug workers all go if anything hangs.
    proc = subprocess.Popen([sys.executable, str(script), "--quick", "--epochs", "2",
                             "--record", str(record), "--timeout", "200"],
                            env=env, cwd=root, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, (out + err)[-4000:]
    assert "all 2 hosts finished" in out

    spec = importlib.util.spec_from_file_location("multi_worker", script)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    x, y = example.make_data(quick=True)
    hosts = [read(f"{record}.{k}")[0] for k in range(2)]
    with shmaug.Loader(x, y, batch_size=example.PER_REPLICA_BATCH, augment=example.augment(),
                       workers=0, seed=example.SEED, shuffle=True) as one_host:
        for epoch in range(2):
            ids = [i for h in hosts for i in h[epoch]]
            assert sorted(ids) == list(range(len(x))), "the whole epoch, nothing twice"
            assert all(len(h[epoch]) == len(x) // 2 for h in hosts)
            expected = {}
            for b in range(len(one_host)):
                xb, _ = one_host.batch(b, epoch=epoch)
                for i, row in zip(one_host.indices(b, epoch=epoch).tolist(), xb):
                    expected[i] = hashlib.sha1(row.tobytes()).hexdigest()[:16]
            assert {**hosts[0][epoch], **hosts[1][epoch]} == expected, "as one host makes them"
