"""Resume: a loader or sequence restored from ``state_dict()`` (through JSON) continues with
exactly the batches an uninterrupted run produces."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest

import shmaug
from tests import _ops
from tests._helpers import needs_keras

pytestmark = pytest.mark.timeout(120)

ARGS = dict(batch_size=6, augment=_ops.noisy, seed=11, shuffle=True, start_method="fork")


def loader(images, **kwargs):
    return shmaug.Loader(images, np.arange(len(images)), **{**ARGS, **kwargs})


def through_json(state):
    return json.loads(json.dumps(state))


def consume(loader, taken):
    """Iterate epoch after epoch; return the first ``taken`` batches and the state saved right
    after the last of them was handed out (its pass still open; None: after the pass ended)."""
    got = []
    while True:
        for batch in loader:
            got.append(batch)
            if len(got) == taken:
                return got, loader.state_dict()
        if taken is None:
            return got, loader.state_dict()


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("taken", [3, 7, 10, None])  # 7 batches per epoch; None: one whole pass
def test_loader_resumes_bit_for_bit(images, workers, taken):
    with loader(images, workers=workers) as whole:
        expected = [b for _ in range(3) for b in whole]
    with loader(images, workers=workers) as first:
        got, state = consume(first, taken)
        state = through_json(state)
    assert (state["epoch"], state["batch"]) == divmod(len(got), 7)
    with loader(images, workers=workers) as second:
        second.load_state_dict(state)
        assert second.state_dict() == state
        while len(got) < len(expected):
            got.extend(second)
    for (x, y), (xe, ye) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(y, ye)
        np.testing.assert_array_equal(x, xe)


def test_sharded_loader_resumes_from_any_hosts_state(images):
    with loader(images, workers=0, num_shards=2, shard_index=0) as host0:
        it = iter(host0)
        next(it), next(it)
        state = through_json(host0.state_dict())
        del it
    with loader(images, workers=0, num_shards=2, shard_index=1) as whole, \
            loader(images, workers=0, num_shards=2, shard_index=1) as host1:
        expected = list(whole)[2:]
        host1.load_state_dict(state)
        for (x, y), (xe, ye) in zip(list(host1), expected, strict=True):
            np.testing.assert_array_equal(x, xe)


@pytest.mark.parametrize(
    "change, pattern",
    [
        (dict(images=20), r"samples=40 but this shmaug.Loader has samples=20.*same dataset"),
        (dict(batch_size=5), r"batch_size=6 .* batch_size=5.*same `batch_size`\. A new stage "
                             r"of a schedule.*carries only the epoch on: `loader.epoch = "
                             r"state\['epoch'\]`"),
        (dict(shuffle=False), r"shuffle=True .* shuffle=False"),
        (dict(drop_remainder=True), r"drop_remainder=False"),
        (dict(num_shards=2, shard_index=0), r"num_shards=1 .* num_shards=2.*hosts"),
        (dict(seed=12), r"seed=11 .* seed=12.*seed=state\['seed'\]"),
    ],
)
def test_a_state_from_another_run_is_refused(images, change, pattern):
    with loader(images, workers=0) as saved:
        state = saved.state_dict()
    n = change.pop("images", len(images))
    with loader(images[:n], workers=0, **change) as other:
        with pytest.raises(shmaug.ArgumentError, match=pattern):
            other.load_state_dict(state)


def test_a_state_of_another_format_or_version_is_refused(images):
    with loader(images, workers=0) as one:
        state = one.state_dict()
        with pytest.raises(shmaug.ArgumentError, match=r"version=2.*reads .*version=1"):
            one.load_state_dict({**state, "version": 2})
        with pytest.raises(shmaug.ArgumentError, match=r"batch=99.*batch in 0..6"):
            one.load_state_dict({**state, "batch": 99})
        with pytest.raises(shmaug.ArgumentTypeError, match=r"`state` must be the dict.*save "
                                                           r"`loader.state_dict\(\)`"):
            one.load_state_dict("state.json")


@needs_keras
def test_a_sequences_state_errors_name_the_sequence(images):
    with shmaug.Sequence(images, np.arange(len(images)), batch_size=6, workers=0) as seq:
        with pytest.raises(shmaug.ArgumentTypeError, match=r"save `seq.state_dict\(\)`"):
            seq.load_state_dict("state.json")
        state = seq.state_dict()
    with shmaug.Sequence(images, np.arange(len(images)), batch_size=8, workers=0) as seq:
        with pytest.raises(shmaug.ArgumentError, match=r"`seq.epoch = state\['epoch'\]`"):
            seq.load_state_dict(state)


# -- Sequence: Keras' way of asking, with short epochs (fit(steps_per_epoch=k)) ------------------


def keras_script(batches, epochs, steps, seed=5):
    """What Keras' fit(shuffle=True, steps_per_epoch=steps) asks of a PyDataset: the two
    signature probes (looks), then epochs of ``steps`` requests drawn from one shuffled pass
    over the indices, a new pass (a new generator) when it runs out. A list of ("look", i) /
    ("pass",) / ("get", i) / ("begin",) / ("end",)."""
    rng = random.Random(seed)
    script: list[tuple] = [("look", 0), ("look", 1)]
    order: list[int] = []
    for _ in range(epochs):
        script.append(("begin",))
        for _ in range(steps):
            if not order:
                order = rng.sample(range(batches), batches)
                script.append(("pass",))
            script.append(("get", order.pop(0)))
        script.append(("end",))
    return script


def asking_loop(seq):
    """A generator that asks ``seq`` for the indices sent to it, as Keras' adapter asks from
    one generator per pass."""
    index = yield
    while True:
        index = yield seq[index]


def play(seq, script):
    out, loop = [], None
    for event in script:
        if event[0] == "look":
            out.append(seq[event[1]])
        elif event[0] == "get":
            if loop is None:  # a pass restored from a state: a new process's first loop
                loop = asking_loop(seq)
                next(loop)
            out.append(loop.send(event[1]))
        elif event[0] == "pass":
            loop = asking_loop(seq)
            next(loop)
        else:
            getattr(seq, f"on_epoch_{event[0]}")()
    return out


def sequence(images, **kwargs):
    return shmaug.Sequence(images, np.arange(len(images)), **{**ARGS, "workers": 2, **kwargs})


@needs_keras
@pytest.mark.parametrize("cut", [12, 17])  # after Keras epoch 2 ends; inside epoch 3
def test_sequence_resumes_its_bindings_across_short_epochs(images, cut):
    pytest.importorskip("keras")
    script = keras_script(7, epochs=6, steps=3)  # 7 batches per epoch, Keras epochs of 3
    with sequence(images) as whole:
        expected = play(whole, script)
    with sequence(images) as first:
        got = play(first, script[:cut])
        state = through_json(first.state_dict())
    with sequence(images) as second:
        second.load_state_dict(state)
        got += play(second, script[cut:])
    assert len(got) == len(expected)
    for (x, y), (xe, ye) in zip(got, expected):
        np.testing.assert_array_equal(y, ye)
        np.testing.assert_array_equal(x, xe)


@needs_keras
@pytest.mark.parametrize("batches, steps", [(5, 2), (6, 3), (6, 6), (4, 7), (7, 1)])
def test_keras_position_follows_keras_epoch_iterator(batches, steps):
    """Where EpochSync seeks: the batches Keras' own EpochIterator draws before each epoch."""
    import warnings

    keras = pytest.importorskip("keras")
    from keras.src.trainers.epoch_iterator import EpochIterator

    from shmaug.keras.callbacks import keras_position

    class Counting(keras.utils.PyDataset):
        def __len__(self):
            return batches

        def __getitem__(self, i):
            return np.zeros((1, 1), np.float32), np.zeros((1,), np.float32)

    iterator = EpochIterator(Counting(), steps_per_epoch=steps)
    drawn = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Your input ran out of data" for cut-short epochs
        for epoch in range(9):
            assert keras_position(epoch, steps, batches) == drawn, epoch
            for _, _, data in iterator:
                drawn += len(data)


@needs_keras
def test_to_tf_dataset_resumes_a_pass_restored_half_way():
    # The signature probe and the restored pass must not count as abandoned passes: that
    # skipped the rest of epoch 0 and all of epoch 1.
    pytest.importorskip("tensorflow")
    x = np.arange(9, dtype=np.float32).reshape(9, 1, 1, 1)
    y = np.arange(9)

    def sequence() -> Any:
        return shmaug.Sequence(x, y, batch_size=3, workers=0, seed=4, shuffle=True)

    def labels(dataset: Any) -> list[list[int]]:
        return [batch[1].numpy().tolist() for batch in dataset]

    with sequence() as reference:
        dataset = reference.to_tf_dataset()
        expected = labels(dataset) + labels(dataset)  # epochs 0 and 1, three batches each
    with sequence() as first:
        one_pass = iter(first)  # a loop over the indices, as Keras' generator
        served = [next(one_pass)[1].tolist(), next(one_pass)[1].tolist()]
        state = json.loads(json.dumps(first.state_dict()))
    assert served == expected[:2]
    with sequence() as resumed:
        resumed.load_state_dict(state)
        dataset = resumed.to_tf_dataset()
        assert labels(dataset) == expected[2:3]  # the rest of epoch 0
        assert labels(dataset) == expected[3:]  # then epoch 1, whole


@needs_keras
def test_loops_by_hand_resume_the_rest_of_a_pass_and_go_round_shuffled():
    """``for b in seq`` broken off, saved, loaded into a new Sequence: the next loop gives
    the rest of that epoch, the one after it the next epoch whole, as without the break. A
    user's generator going round the indices again and again gets each epoch shuffled."""
    pytest.importorskip("keras")
    x = np.arange(36, dtype=np.float32).reshape(36, 1, 1, 1)

    def sequence() -> Any:
        return shmaug.Sequence(x, np.arange(36), batch_size=4, workers=0, seed=4, shuffle=True)

    def labels(batches) -> list[list[int]]:
        return [b[1].tolist() for b in batches]

    with sequence() as whole:
        expected = labels(whole) + labels(whole)  # epochs 0 and 1, nine batches each
    assert sorted(sum(expected[9:], [])) == list(range(36)) != sum(expected[9:], [])
    with sequence() as first:
        served = []
        for batch in first:
            served.append(batch[1].tolist())
            if len(served) == 5:
                break
        state = json.loads(json.dumps(first.state_dict()))
    with sequence() as resumed:
        resumed.load_state_dict(state)
        assert served + labels(resumed) + labels(resumed) == expected
    with sequence() as seq:
        def forever():
            while True:
                for i in range(len(seq)):
                    yield seq[i]

        rounds = forever()
        assert [next(rounds)[1].tolist() for _ in range(18)] == expected


@needs_keras
@pytest.mark.parametrize("shuffle", [True, None])
def test_a_loop_by_hand_resumes_where_its_looks_stood(shuffle):
    """``seq[i]`` for each batch, then ``on_epoch_end()`` (Keras' Sequence contract): a state
    saved after 4 steps, shuffled, resumed at batch 0, so the epoch served 4 batches twice
    and 4 never; then the epoch after it, as without the stop."""
    pytest.importorskip("keras")
    x = np.arange(40, dtype=np.float32).reshape(40, 1, 1, 1)

    def sequence() -> Any:
        return shmaug.Sequence(x, np.arange(40), batch_size=4, workers=0, seed=4,
                               shuffle=shuffle)

    def by_hand(seq, indices) -> list[list[int]]:
        return [seq[i][1].tolist() for i in indices]

    with sequence() as whole:
        expected = by_hand(whole, range(10))
        whole.on_epoch_end()
        expected += by_hand(whole, range(10))
    with sequence() as first:
        served = by_hand(first, range(4))
        state = json.loads(json.dumps(first.state_dict()))
    with sequence() as resumed:
        resumed.load_state_dict(state)
        served += by_hand(resumed, range(4, 10))
        resumed.on_epoch_end()
        assert served + by_hand(resumed, range(10)) == expected


@needs_keras
def test_a_copied_sequence_says_it_cannot_serve_batches():
    import copy

    pytest.importorskip("keras")
    with shmaug.Sequence(np.zeros((8, 4, 4), np.float32), np.arange(8), batch_size=4,
                         workers=0) as seq:
        for clone in (copy.copy(seq), copy.deepcopy(seq)):
            with pytest.raises(shmaug.ClosedError, match="is a copy"):
                clone[0]
        assert len(seq[0][0]) == 4  # the original is untouched


@needs_keras
def test_a_dataset_made_before_a_half_way_restore_says_to_make_it_after():
    """TensorFlow's order (the dataset first, then the checkpoint): the dataset declared a
    whole epoch, served the rest and stopped with tf.data's "expected to contain 3 elements
    but contained only 1", which named neither shmaug nor the fix."""
    tf = pytest.importorskip("tensorflow")
    x = np.arange(9, dtype=np.float32).reshape(9, 1, 1, 1)
    with shmaug.Sequence(x, np.arange(9), batch_size=3, workers=0, seed=4, shuffle=True) as first:
        one_pass = iter(first)
        next(one_pass), next(one_pass)
        state = first.state_dict()
    with shmaug.Sequence(x, np.arange(9), batch_size=3, workers=0, seed=4,
                         shuffle=True) as resumed:
        dataset = resumed.to_tf_dataset()
        resumed.load_state_dict(state)
        with pytest.raises(tf.errors.OpError, match=r"restored half-way.*Fix: call "
                                                    r"to_tf_dataset\(\) after load_state_dict"):
            list(dataset)
