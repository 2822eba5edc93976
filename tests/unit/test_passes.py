"""The rules that bind each ask of a PyDataset to a batch of shmaug's stream (shmaug/_passes.py),
played with plain objects for Keras' generators: no Keras, no process."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmaug._passes import Passes

B = 5  # batches per epoch


def stream(start: int, count: int) -> list[tuple[int, int]]:
    return [divmod(g, B) for g in range(start, start + count)]


def take(passes: Passes, indices, caller):
    return [passes.ask(i, caller) for i in indices]


def build(passes: Passes, indices) -> None:
    """Keras' build pass: on_epoch_begin from its _symbolic_build, a fresh generator."""
    passes.building(True)
    take(passes, indices, object())
    passes.building(False)


def test_a_pass_takes_the_stream_in_order_whatever_the_indices():
    p, loop = Passes(B, shuffle=True), object()
    got = take(p, [3, 0, 4, 1, 2], loop)
    assert [k for k, _ in got] == stream(0, 5) and all(taken for _, taken in got)
    assert (p.epoch, p.cursor) == (1, 0)


def test_unshuffled_index_i_is_batch_i_of_the_passes_epoch():
    p = Passes(B, shuffle=False)
    assert [k for k, _ in take(p, [3, 0, 4, 1, 2], object())] == [(0, 3), (0, 0), (0, 4),
                                                                     (0, 1), (0, 2)]
    assert [k for k, _ in take(p, [2, 1], object())] == [(1, 2), (1, 1)]


def test_a_pass_carries_on_across_keras_epochs_from_any_thread():
    """steps_per_epoch below len: Keras keeps one generator across its epochs, and tf.data
    pulls from it between them. Same loop, same pass: the epoch boundaries Keras draws do not
    matter (a CI failure of the thread-based rule, replayed: it served a batch twice)."""
    p, loop = Passes(B, shuffle=True), object()
    keys = [k for k, _ in take(p, [1, 4, 0], loop) + take(p, [3, 2], loop)]
    assert keys == stream(0, 5)


def test_looks_move_nothing_and_the_next_pass_takes_the_looked_at_batches():
    """TensorFlow's signature probes (indices 0 and 1, from no loop) are the next pass's
    first batches, whatever indices that pass asks first."""
    p = Passes(B, shuffle=True)
    assert [p.ask(i, None) for i in (0, 1, 0)] == [((0, 0), False), ((0, 1), False),
                                                   ((0, 0), False)]
    assert (p.epoch, p.cursor) == (0, 0)
    assert [k for k, _ in take(p, [4, 2], object())] == stream(0, 2)


def test_a_look_sees_the_batch_its_index_got_in_the_unfinished_pass():
    p, loop = Passes(B, shuffle=True), object()
    take(p, [2, 3], loop)
    assert p.ask(3, None) == ((0, 1), False)
    assert p.ask(0, None) == ((0, 2), False)  # not asked yet: the stream's next batch


def test_after_a_whole_pass_a_look_is_about_the_next_pass():
    """A fit per epoch in a loop: each fit's probes come after the last pass ended."""
    p, loop = Passes(B, shuffle=True), object()
    take(p, range(B), loop)
    assert p.ask(0, None) == ((1, 0), False)


@pytest.mark.parametrize("drawn", [1, 3, B])
def test_the_build_pass_gives_its_batches_back(drawn):
    """JAX and torch draw one batch to build the model, TensorFlow under a strategy as many as
    tf.data pulls ahead (a whole small epoch, seen); then EpochIterator.reset() drops that
    generator and the first epoch starts a fresh one at the stream's batch 0."""
    p = Passes(B, shuffle=True)
    build(p, [3, 0, 4, 1, 2][:drawn])
    assert [k for k, _ in take(p, [1, 3, 0, 4, 2], object())] == stream(0, 5)


def test_a_pass_cut_short_ends_the_epoch():
    """A fit cut short, then a new fit: the new pass is a whole epoch."""
    p = Passes(B, shuffle=True)
    take(p, [0, 1], object())
    assert [k for k, _ in take(p, [4, 3], object())] == stream(5, 2)


def test_a_loop_going_round_again_starts_a_new_pass():
    p, loop = Passes(B, shuffle=True), object()
    take(p, [0, 1], loop)
    assert p.ask(0, loop) == ((1, 0), True)  # the old pass was cut: epoch 0's rest is skipped
    assert p.ask(1, loop) == ((1, 1), True)


def test_a_superseded_loop_moves_nothing():
    """tf.data may still pull from the generator of a pass Keras has dropped."""
    p, built, epoch0 = Passes(B, shuffle=True), object(), object()
    p.building(True)
    take(p, [2], built)
    take(p, [0], epoch0)
    assert p.ask(4, built) == ((0, 1), False)  # a look: the stream's next batch
    assert [k for k, _ in take(p, [1, 2], epoch0)] == stream(1, 2)


def test_seek_ends_the_pass_and_the_next_loop_starts_there():
    p = Passes(B, shuffle=True)
    build(p, [2])  # then EpochSync seeks (resume at Keras epoch 3)
    p.seek(3, 0)
    assert [k for k, _ in take(p, [1, 0], object())] == stream(15, 2)


def test_a_restored_pass_is_resumed_by_the_next_loop():
    p, loop = Passes(B, shuffle=True), object()
    take(p, [4, 1], loop)
    saved = (p.epoch, p.cursor, p.bindings)
    q = Passes(B, shuffle=True)
    q.restore(*saved)
    assert q.restored == {4: (0, 0), 1: (0, 1)}
    assert [k for k, _ in take(q, [0, 2, 3], object())] == stream(2, 3)
    assert q.restored == {}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_whatever_keras_does_the_trained_passes_are_whole_epochs(seed, fits):
    """Random fits, each: maybe looks, maybe a build pass, then epochs of
    random index orders, the last maybe cut. Every whole pass is one whole epoch, and the
    epochs of the whole passes follow each other without repeating."""
    rng = random.Random(seed)
    p = Passes(B, shuffle=rng.random() < 0.7)
    whole = []
    for _ in range(fits):
        for i in rng.sample(range(B), rng.randint(0, 2)):
            p.ask(i, None)
        if rng.random() < 0.5:
            build(p, rng.sample(range(B), rng.randint(1, B)))
        for epoch in range(rng.randint(1, 3)):
            order = rng.sample(range(B), B)
            if rng.random() < 0.2:
                take(p, order[:rng.randint(1, B - 1)], object())  # cut: fit ends
                break
            keys = [k for k, _ in take(p, order, object())]
            epochs = {e for e, _ in keys}
            assert len(epochs) == 1 and sorted(b for _, b in keys) == list(range(B))
            whole.append(epochs.pop())
    assert whole == sorted(set(whole))


def test_only_a_new_loop_begins_a_pass():
    p, loop = Passes(B, shuffle=True), object()
    assert p.begins(loop) and not p.begins(None)
    p.ask(0, loop)
    assert not p.begins(loop) and p.begins(object())
