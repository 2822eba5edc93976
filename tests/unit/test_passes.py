"""The rules that bind each ask of a PyDataset to a batch of shmaug's stream (shmaug/_passes.py),
played with plain objects for Keras' generators: no Keras, no process."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmaug.keras._passes import Passes

B = 5  # batches per epoch


class Fixed:
    """``Passes`` whose every pass reads one order (shuffled, or the dataset's), with keys
    shown as (epoch, batch): the rules as they stand for passes of one order."""

    def __init__(self, batches: int, shuffle: bool) -> None:
        self.passes, self.in_order = Passes(batches), not shuffle

    def ask(self, index, caller):
        key, taken = self.passes.ask(index, caller, self.in_order)
        assert key[2] is self.in_order
        return key[:2], taken

    def restore(self, epoch, cursor, bindings):
        self.passes.restore(epoch, cursor, {i: (*k, self.in_order) for i, k in bindings.items()},
                            self.in_order)

    @property
    def bindings(self):
        return {i: k[:2] for i, k in self.passes.bindings.items()}

    @property
    def restored(self):
        return {i: k[:2] for i, k in self.passes.restored.items()}

    def __getattr__(self, name):
        return getattr(self.passes, name)


def stream(start: int, count: int) -> list[tuple[int, int]]:
    return [divmod(g, B) for g in range(start, start + count)]


def take(passes, indices, caller):
    return [passes.ask(i, caller) for i in indices]


def build(passes, indices) -> None:
    """Keras' build pass: on_epoch_begin from its _symbolic_build, a fresh generator."""
    passes.building(True)
    take(passes, indices, object())
    passes.building(False)


def test_a_pass_takes_its_epoch_in_order_whatever_the_indices():
    p, loop = Fixed(B, shuffle=True), object()
    got = take(p, [3, 0, 4, 1, 2], loop)
    assert [k for k, _ in got] == stream(0, 5) and all(taken for _, taken in got)
    assert p.position == (1, 0)


def test_unshuffled_index_i_is_batch_i_of_the_passes_epoch():
    p = Fixed(B, shuffle=False)
    assert [k for k, _ in take(p, [3, 0, 4, 1, 2], object())] == [(0, 3), (0, 0), (0, 4),
                                                                     (0, 1), (0, 2)]
    assert [k for k, _ in take(p, [2, 1], object())] == [(1, 2), (1, 1)]


def test_a_pass_carries_on_across_keras_epochs_from_any_thread():
    """steps_per_epoch below len: Keras keeps one generator across its epochs, and tf.data
    pulls from it between them. Same loop, same pass: the epoch boundaries Keras draws do not
    matter (a CI failure of the thread-based rule, replayed: it served a batch twice)."""
    p, loop = Fixed(B, shuffle=True), object()
    keys = [k for k, _ in take(p, [1, 4, 0], loop) + take(p, [3, 2], loop)]
    assert keys == stream(0, 5)


def test_a_second_loop_takes_an_epoch_of_its_own():
    """validation_data that is the training Sequence itself under steps_per_epoch, or
    next(iter(seq)) in a callback: the first loop's pass goes on in its own epoch."""
    p, train, other = Fixed(B, shuffle=True), object(), object()
    first = take(p, [4, 2], train)
    assert [k for k, _ in take(p, [0, 1, 2, 3, 4], other)] == stream(5, 5)
    rest = take(p, [0, 1, 3], train)
    assert [k for k, _ in first + rest] == stream(0, 5)
    assert [k for k, _ in take(p, [2], object())] == [(2, 0)]


def test_looks_move_nothing_and_the_next_pass_takes_the_looked_at_batches():
    """TensorFlow's signature probes (indices 0 and 1, from no loop) are the next pass's
    first batches, whatever indices that pass asks first."""
    p = Fixed(B, shuffle=True)
    assert [p.ask(i, None) for i in (0, 1, 0)] == [((0, 0), False), ((0, 1), False),
                                                   ((0, 0), False)]
    assert p.position == (0, 0)
    assert [k for k, _ in take(p, [4, 2], object())] == stream(0, 2)


def test_a_look_sees_the_batch_its_index_got_in_the_unfinished_pass():
    p, loop = Fixed(B, shuffle=True), object()
    take(p, [2, 3], loop)
    assert p.ask(3, None) == ((0, 1), False)
    assert p.ask(0, None) == ((0, 2), False)  # not asked yet: the pass's next batch
    assert take(p, [4], loop) == [((0, 2), True)]


def test_after_a_whole_pass_a_look_is_about_the_next_pass():
    """A fit per epoch in a loop: each fit's probes come after the last pass ended (Keras'
    on_epoch_end)."""
    p, loop = Fixed(B, shuffle=True), object()
    take(p, range(B), loop)
    p.loop_over()
    assert p.ask(0, None) == ((1, 0), False)


@pytest.mark.parametrize("end", ["keras", "its loop", "another loop's", "by hand"])
def test_a_pass_that_took_its_last_batch_answers_looks_until_its_loop_is_over(end):
    """Keras trains on the batches it fetched ahead, and a for loop's body runs after its
    last ask: seq[i] there gave the next epoch's batch i, and seq.epoch read the next
    epoch (a reviewer's callback logging the batch just trained)."""
    p, loop = Fixed(B, shuffle=True), object()
    order = [3, 0, 4, 1, 2]
    keys = dict(zip(order, (k for k, _ in take(p, order, loop))))
    assert [p.ask(i, None)[0] for i in range(B)] == [keys[i] for i in range(B)]
    assert p.current_epoch == 0 and p.position == (1, 0)
    if end == "keras":
        p.loop_over()
    elif end == "its loop":
        p.loop_over(loop)
        p.loop_over(object())  # (another loop's end changes nothing more)
    elif end == "another loop's":
        p.loop_over(object())
        assert p.ask(0, None) == (keys[0], False)
        take(p, [2], object())
    else:
        p.epoch_ended()
    assert p.current_epoch == 1
    assert p.ask(0, None)[0][0] == p.current_epoch


@pytest.mark.parametrize("drawn", [1, 3, B])
def test_the_build_pass_borrows_its_epoch(drawn):
    """JAX and torch draw one batch to build the model, TensorFlow under a strategy as many as
    tf.data pulls ahead (a whole small epoch, seen); then EpochIterator.reset() drops that
    generator and the first epoch starts a fresh one at the epoch's batch 0."""
    p, built, order = Fixed(B, shuffle=True), object(), [3, 0, 4, 1, 2]
    p.building(True)
    assert all(not took for _, took in take(p, order[:drawn], built))
    assert [k for k, _ in take(p, [1, 3, 0, 4, 2], object())] == stream(0, 5)
    if drawn < B:  # tf.data still pulling from the dropped build pass: it moves nothing
        assert take(p, [order[drawn]], built) == [((0, drawn), False)]


def test_a_pass_cut_short_ends_its_epoch():
    """A fit cut short, then a new fit: the new pass is a whole epoch."""
    p = Fixed(B, shuffle=True)
    take(p, [0, 1], object())
    assert [k for k, _ in take(p, [4, 3], object())] == stream(5, 2)


def test_after_a_pass_cut_short_and_whole_passes_the_state_is_the_next_epoch():
    """A fit cut short (Ctrl-C, stop_training) mid-epoch, then a whole fit: what epoch says,
    state_dict saves and a look sees is the epoch after the last whole one, not the dropped
    pass's (which was served again from a restored state)."""
    p = Fixed(B, shuffle=True)
    take(p, [0, 1, 2], object())
    for _ in range(2):
        take(p, range(B), object())
        p.loop_over()  # Keras' on_epoch_end
    assert p.position == (3, 0) and p.bindings == {}
    assert p.ask(0, None) == ((3, 0), False)
    assert [k for k, _ in take(p, [4], object())] == [(3, 0)]
    assert p.position == (3, 1)


def test_a_training_pass_that_validation_comes_between_is_still_the_latest():
    """steps_per_epoch below len and the training Sequence as its own validation_data: at
    the epoch's end (where checkpoints save the state) the training pass is mid-epoch, and
    the whole in-order validation pass after it did not end it."""
    p, train, val = Fixed(B, shuffle=True), object(), object()
    take(p, [4, 2, 0], train)
    p.in_order = True
    take(p, range(B), val)
    p.loop_over()  # Keras' on_epoch_end, after evaluate
    p.in_order = False
    assert p.position == (0, 3) and p.bindings == {4: (0, 0), 2: (0, 1), 0: (0, 2)}
    assert p.ask(1, None) == ((0, 3), False)
    assert take(p, [1], train) == [((0, 3), True)]


def test_an_in_order_pass_broken_off_and_whole_shuffled_passes_after_are_the_next_epoch():
    """``evaluate(steps=1)``, ``predict(steps=k)`` or a loop broken off, then a whole fit:
    nothing pauses an in-order pass, so the state is the epoch after the fit's."""
    p = Fixed(B, shuffle=True)
    p.in_order = True
    take(p, [0], object())
    p.in_order = False
    for _ in range(3):
        take(p, range(B), object())
        p.loop_over()  # Keras' on_epoch_end
    assert p.position == (4, 0) and p.bindings == {}
    assert p.ask(0, None) == ((4, 0), False)


def test_a_seek_after_a_pass_cut_short_is_where_the_state_stands():
    p = Fixed(B, shuffle=True)
    take(p, [0, 1, 2], object())
    p.seek(5, 0)
    assert p.position == (5, 0) and p.bindings == {}


def test_a_loop_going_round_again_starts_a_new_pass():
    p, loop = Fixed(B, shuffle=True), object()
    take(p, [0, 1], loop)
    assert p.ask(0, loop) == ((1, 0), True)  # the old pass was cut: epoch 0's rest is skipped
    assert p.ask(1, loop) == ((1, 1), True)


def test_seek_makes_the_next_pass_start_there():
    p = Fixed(B, shuffle=True)
    build(p, [2])  # then EpochSync seeks (resume at Keras epoch 3)
    p.seek(3, 0)
    assert [k for k, _ in take(p, [1, 0], object())] == stream(15, 2)


def test_a_restored_pass_is_resumed_by_the_next_loop_but_not_by_a_build():
    p, loop = Fixed(B, shuffle=True), object()
    take(p, [4, 1], loop)
    q = Fixed(B, shuffle=True)
    q.restore(*p.position, p.bindings)
    assert q.restored == {4: (0, 0), 1: (0, 1)}
    build(q, [3])  # JAX's build in the new process: it borrows the epoch after the restored one
    assert [k for k, _ in take(q, [0, 2, 3], object())] == stream(2, 3)
    assert q.restored == {} and q.position == (1, 0)


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_restored_pass_a_hand_loop_goes_on_with_ends_at_its_on_epoch_end(shuffle):
    """A state saved inside a ``for`` loop, resumed by a loop by hand (``seq[i]`` for the
    batches left, then ``on_epoch_end()``): the looks went on with the restored epoch but
    ``on_epoch_end`` moved nothing, so every later epoch by hand replayed that epoch."""
    p, loop = Fixed(B, shuffle=shuffle), object()
    take(p, [0, 1], loop)
    q = Fixed(B, shuffle=shuffle)
    q.restore(*p.position, p.bindings)
    assert [k for k, _ in take(q, [2, 3, 4], None)] == stream(2, 3)  # the epoch's rest
    q.epoch_ended()
    assert [k for k, _ in take(q, range(B), None)] == stream(B, B)  # the next epoch
    q.epoch_ended()
    assert [k for k, _ in take(q, range(B), None)] == stream(2 * B, B)


@pytest.mark.parametrize("shuffle", [True, False])
def test_loops_by_hand_after_a_loop_broken_off_get_the_epochs_after(shuffle):
    """``next(iter(seq))`` or a ``for`` loop left with ``break``, then loops by hand: their
    looks went on with the unfinished pass's epoch, which their ``on_epoch_end`` did not
    end, so each replayed it. The first goes on with it, the next get the epochs after."""
    p, loop = Fixed(B, shuffle=shuffle), object()
    take(p, [0, 1], loop)
    p.loop_over(loop)  # broken off
    assert [k for k, _ in take(p, range(B), None)] == stream(0, B)  # the rest of its epoch
    p.epoch_ended()
    for epoch in (1, 2):
        assert [k for k, _ in take(p, range(B), None)] == stream(epoch * B, B)
        p.epoch_ended()


def test_a_look_then_an_epoch_end_never_takes_the_epoch_back():
    """A callback looking at a batch at each epoch's end, then ``on_epoch_end()`` (or
    ``to_tf_dataset``'s generator ending), while validation (the training Sequence itself)
    had claimed the next epoch: the seek went back to it, and validation read it twice."""
    p, train, val = Passes(B), object(), object()
    assert [p.ask(i, train, False)[0][0] for i in (4, 2)] == [0, 0]  # steps_per_epoch=2:
    assert {p.ask(i, val, True)[0][0] for i in range(B)} == {1}  # on across Keras epochs
    p.loop_over()  # Keras' epoch ends
    p.ask(5, None, False)  # the callback's look: the training pass's next batch
    p.epoch_ended()  # and its seq.on_epoch_end()
    assert [p.ask(i, train, False)[0][0] for i in (1, 0)] == [0, 0]
    again = object()  # the next validation
    assert {p.ask(i, again, True)[0][0] for i in range(B)} == {2}  # not 1 again


def test_a_new_loop_or_one_going_round_again_begins_a_pass():
    p, loop = Fixed(B, shuffle=True), object()
    assert p.begins(loop, 0) and not p.begins(None, 0)
    p.ask(0, loop)
    assert not p.begins(loop, 1) and p.begins(object(), 1)
    assert p.begins(loop, 0)  # an index again: the loop goes round (a generator's epoch 2)
    take(p, range(1, B), loop)
    assert p.begins(loop, 5)  # a whole epoch taken


def test_a_loop_going_round_again_begins_its_pass_in_its_own_order():
    """A user's generator ``while True: for i in range(len(seq)): yield seq[i]`` over a
    shuffled Sequence: each round is a pass of its own, shuffled as the first (the order is
    decided where a pass begins, so the facade must know it begins)."""
    passes, loop = Passes(B), object()
    for epoch in range(3):
        for i in range(B):
            # the facade reads the order (shuffled, here) only where a pass begins
            key, _ = passes.ask(i, loop, False if passes.begins(loop, i) else True)
            assert key == (epoch, i, False)


def test_a_restored_shuffled_pass_goes_on_whatever_indices_a_new_loop_asks():
    """A hand loop, or fit, after load_state_dict: a fresh loop asks from index 0 again,
    including indices the saved pass had asked; the pass goes on with its next batches."""
    p, loop = Fixed(B, shuffle=True), object()
    take(p, [4, 1], loop)
    q = Fixed(B, shuffle=True)
    q.restore(*p.position, p.bindings)
    assert [k for k, _ in take(q, range(B), object())] == stream(2, B - 2) + stream(B, 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_whatever_keras_does_every_pass_is_one_whole_epoch_of_its_own(seed, fits):
    """Random fits, each: maybe looks, maybe a build pass, then epochs of random index
    orders, the last maybe cut, and now and then a second loop in between. Every whole pass is
    one whole epoch, and no two passes share an epoch."""
    rng = random.Random(seed)
    p = Fixed(B, shuffle=rng.random() < 0.7)
    whole, epochs_taken = [], []
    for _ in range(fits):
        for i in rng.sample(range(B), rng.randint(0, 2)):
            p.ask(i, None)
        if rng.random() < 0.5:
            build(p, rng.sample(range(B), rng.randint(1, B)))
        for _ in range(rng.randint(1, 3)):
            order = rng.sample(range(B), B)
            loop = object()
            if rng.random() < 0.2:
                keys = [k for k, _ in take(p, order[:rng.randint(1, B - 1)], loop)]
                epochs_taken.append(keys[0][0])
                break  # cut: the fit ends
            cut = rng.randint(1, B - 1)
            keys = [k for k, _ in take(p, order[:cut], loop)]
            if rng.random() < 0.3:  # another loop of the same Sequence, meanwhile
                other = [k for k, _ in take(p, rng.sample(range(B), B), object())]
                epochs_taken.append(other[0][0])
            keys += [k for k, _ in take(p, order[cut:], loop)]
            epochs = {e for e, _ in keys}
            assert len(epochs) == 1 and sorted(b for _, b in keys) == list(range(B))
            whole.append(epochs.pop())
            epochs_taken.append(whole[-1])
    assert len(epochs_taken) == len(set(epochs_taken))  # no epoch fed by two passes
    assert whole == sorted(whole)


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_loop_by_hand_gets_a_new_epoch_after_each_on_epoch_end(shuffle):
    """seq[i] for each batch then on_epoch_end(), Keras' Sequence contract: epochs 0, 1, 2,
    as three passes get; the same index twice within an epoch, the same batch."""
    p = Fixed(B, shuffle=shuffle)
    for epoch in range(3):
        keys = [p.ask(i, None)[0] for i in [2, 0, 4, 1, 3, 2, 0]]
        assert {e for e, _ in keys} == {epoch}
        assert sorted(set(keys)) == [(epoch, b) for b in range(B)]
        assert keys[5:] == keys[:2]
        p.epoch_ended()
    assert p.position == (3, 0)


def test_on_epoch_end_after_a_pass_moves_nothing():
    """Keras calls on_epoch_end after each of its passes, whose epoch the pass has claimed
    (TensorFlow's signature probes before it, looks, are taken by the pass)."""
    p = Fixed(B, shuffle=True)
    take(p, [0, 1], None)  # the probes
    take(p, [3, 0, 4, 1, 2], object())
    p.epoch_ended()
    assert [k for k, _ in take(p, [1, 0], object())] == stream(5, 2)


def test_a_hand_loop_cut_short_ends_its_epoch_and_a_pass_follows():
    p = Fixed(B, shuffle=True)
    take(p, [0, 1], None)
    p.epoch_ended()
    assert [k for k, _ in take(p, range(B), object())] == stream(5, 5)


def test_each_pass_keeps_the_order_it_began_with():
    """Keras decides the order per pass: fit's passes shuffled, predict's and evaluate's in the
    dataset's order, on one Sequence in any sequence of calls; each claims an epoch of its own."""
    p = Passes(B)
    fit, predict, fit2, evaluate = object(), object(), object(), object()
    shuffled = [p.ask(i, fit, False)[0] for i in (3, 0, 4, 1, 2)]
    assert shuffled == [(0, b, False) for b in range(B)]  # k-th new index: batch k
    in_order = [p.ask(i, predict, True)[0] for i in range(B)]
    assert in_order == [(1, i, True) for i in range(B)]  # index i: batch i of epoch 1's order
    # A pass in progress keeps its order whatever the next asks say
    assert p.ask(2, fit2, False)[0] == (2, 0, False)
    assert p.ask(0, fit2, True)[0] == (2, 1, False)
    assert [p.ask(i, evaluate, True)[0] for i in (0, 1)] == [(3, 0, True), (3, 1, True)]
    assert p.position == (3, 2) and p.in_order


def test_a_look_stands_for_the_pass_it_would_meet():
    """With no pass in progress a look takes the order the next pass will have; in a pass, that
    pass's order (so the pass then serves the look's batch from the cache)."""
    p = Passes(B)
    assert p.ask(3, None, True)[0] == (0, 3, True)
    assert p.ask(3, None, False)[0] == (0, 0, False)
    loop = object()
    p.ask(4, loop, True)
    assert p.ask(1, None, False)[0] == (0, 1, True)  # the pass in progress reads in order
