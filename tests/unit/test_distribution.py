"""A Sequence under a multi-process Keras distribution takes its shard and gets the rest right
(shmaug/_distribution.py). The distribution here is a stand-in with the attributes Keras'
`Distribution` has; two real processes over loopback are test_keras_distribution's."""

from __future__ import annotations

import numpy as np
import pytest

from tests._helpers import needs_keras

pytestmark = needs_keras


class Mesh:
    def __init__(self, devices: int) -> None:
        self.shape, self.axis_names = (devices,), ("batch",)


class TwoProcesses:
    """Keras' DataParallel over 2 processes with ``local`` devices each (as in Keras 3.15)."""

    def __init__(self, index: int = 1, local: int = 1, replicas: int | None = None) -> None:
        self._num_processes, self._process_id = 2, index
        self.device_mesh, self.batch_dim_name = Mesh(2 * local), "batch"
        self.num_model_replicas = 2 * local if replicas is None else replicas
        self.auto_shard_dataset = True


@pytest.fixture
def distribution():
    keras = pytest.importorskip("keras")

    def use(dist):
        keras.distribution.set_distribution(dist)
        return dist

    yield use
    keras.distribution.set_distribution(None)


def sequence(**kwargs):
    import shmaug

    x = np.zeros((40, 4, 4), np.float32)
    return shmaug.Sequence(x, batch_size=4, workers=0, seed=3, shuffle=True, **kwargs)


def test_a_sequence_takes_its_shard_from_the_processes_and_turns_auto_shard_off(distribution):
    dist = distribution(TwoProcesses(index=1))
    with sequence() as seq:
        assert (seq.num_shards, seq.shard_index, len(seq)) == (2, 1, 5)
    assert dist.auto_shard_dataset is False  # Keras would refuse a PyDataset otherwise


def test_a_distribution_set_after_the_sequence_is_followed_before_keras_reads_its_length(
        distribution):
    with sequence() as seq:
        distribution(TwoProcesses(index=0))
        assert len(seq) == 5 and (seq.num_shards, seq.shard_index) == (2, 0)


def test_shards_the_user_chose_are_kept(distribution):
    distribution(TwoProcesses(index=1))
    with sequence(num_shards=4, shard_index=2) as seq:
        assert (seq.num_shards, seq.shard_index) == (4, 2)


def test_without_a_seed_the_shards_would_not_share_an_order_and_are_refused(distribution):
    import shmaug

    distribution(TwoProcesses())
    with pytest.raises(shmaug.ArgumentError, match="seed"):
        shmaug.Sequence(np.zeros((40, 4, 4), np.float32), batch_size=4, workers=0, shuffle=True)


def test_model_replicas_across_processes_need_explicit_shards(distribution):
    import shmaug

    distribution(TwoProcesses(replicas=1))
    with pytest.raises(shmaug.ArgumentError, match="`num_shards`.*`shard_index`"):
        sequence()


def test_hosts_without_a_common_seed_are_refused_at_the_first_batch(distribution, monkeypatch):
    import shmaug
    from keras.src.utils import rng_utils

    distribution(TwoProcesses())
    with sequence() as seq:
        monkeypatch.setattr(rng_utils, "get_random_seed", lambda: None)
        with pytest.raises(shmaug.DistributionError, match=r"keras.utils.set_random_seed"):
            seq[0]
        monkeypatch.setattr(rng_utils, "get_random_seed", lambda: 7)
        assert seq[0].shape == (4, 4, 4)


def test_each_process_batch_must_split_over_its_devices(distribution):
    import shmaug

    distribution(TwoProcesses(local=2))
    with pytest.raises(shmaug.ArgumentError, match="`batch_size`=3 does not split evenly"):
        shmaug.Sequence(np.zeros((40, 4, 4), np.float32), batch_size=3, seed=0, workers=0)
    # (drop_remainder for training only: a set read whole would lose its last samples)
    with pytest.raises(shmaug.ArgumentError, match="last batch.*3 samples.*for training, pass "
                                                   "`drop_remainder=True`; for a set read whole "
                                                   r"\(validation.*last 3 samples out"):
        shmaug.Sequence(np.zeros((46, 4, 4), np.float32), batch_size=4, seed=0, workers=0)
