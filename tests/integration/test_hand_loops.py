"""Loops written by hand around a Sequence (Keras' Sequence contract: ``seq[i]`` for each
batch, ``on_epoch_end()`` between epochs) get shmaug's epochs 0, 1, 2, ... as ``for batch in
seq`` does; on every backend (CI runs this module under each ``KERAS_BACKEND``)."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug
from tests import _fit

pytestmark = [pytest.mark.keras, pytest.mark.timeout(120)]


def rows(batch):
    xb = batch[0]
    return [(int(round(i)), float(m)) for i, m in xb[:, 0, 0, :]]


def by_hand(seq, epochs):
    out = []
    for _ in range(epochs):
        epoch = [rows(seq[i]) for i in range(len(seq))]
        assert rows(seq[1]) == epoch[1]  # the same index again: the same batch
        out.append(epoch)
        seq.on_epoch_end()
    return out


class WithSuper(shmaug.Sequence):
    def on_epoch_end(self):
        self.ended = getattr(self, "ended", 0) + 1
        super().on_epoch_end()


class WithoutSuper(shmaug.Sequence):
    def on_epoch_end(self):
        self.ended = getattr(self, "ended", 0) + 1


@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffled", "unshuffled"])
@pytest.mark.parametrize("cls", [shmaug.Sequence, WithSuper], ids=["Sequence", "super"])
def test_a_hand_loop_gets_the_epochs_for_loops_get(shuffle, cls):
    x, y = _fit.data()
    args = dict(batch_size=_fit.BATCH, augment=_fit.mark, workers=2, seed=3, shuffle=shuffle)
    with cls(x, y, **args) as seq, shmaug.Sequence(x, y, **args) as ref:
        got = by_hand(seq, 3)
        expected = [[rows(b) for b in ref] for _ in range(3)]
    assert got == expected
    plan = _fit.Plan(x, seed=3, shuffle=shuffle)
    try:
        assert [plan.which_epoch(e) for e in got] == [0, 1, 2]
    finally:
        plan.close()


def test_a_state_saved_in_a_for_loop_goes_on_by_hand_with_the_epochs_after():
    """Saved inside ``for batch in seq``, resumed by a loop by hand: the rest of that epoch,
    then epochs 1 and 2, not epoch 0 again and again (its ``on_epoch_end`` moved nothing)."""
    x, y = _fit.data()
    args = dict(batch_size=_fit.BATCH, augment=_fit.mark, workers=0, seed=3, shuffle=True)
    with shmaug.Sequence(x, y, **args) as ref:
        expected = [[rows(b) for b in ref] for _ in range(3)]
    with shmaug.Sequence(x, y, **args) as seq:
        for i, _ in enumerate(seq):
            if i == 1:
                state = seq.state_dict()
                break
    with shmaug.Sequence(x, y, **args) as seq:
        seq.load_state_dict(state)
        rest = [rows(seq[i]) for i in range(2, len(seq))]
        seq.on_epoch_end()
        assert rest == expected[0][2:]
        assert by_hand(seq, 2) == expected[1:]


def test_loops_by_hand_after_a_peek_get_the_epochs_after():
    """``next(iter(seq))`` (a look at the data), then loops by hand: each replayed epoch 0.
    The first goes on with the peek's epoch, the next get the epochs after it."""
    x, y = _fit.data()
    args = dict(batch_size=_fit.BATCH, augment=_fit.mark, workers=0, seed=3, shuffle=True)
    with shmaug.Sequence(x, y, **args) as ref:
        expected = [[rows(b) for b in ref] for _ in range(3)]
    with shmaug.Sequence(x, y, **args) as seq:
        assert rows(next(iter(seq))) == expected[0][0]
        assert by_hand(seq, 3) == expected


def test_a_subclass_not_calling_super_replays_its_epoch_by_hand_but_not_under_fit():
    """What the README says: without super().on_epoch_end() a loop by hand gets epoch 0
    again each time (told once, naming the class; it was silent); fit (and for-loops) still
    take a new epoch per pass."""
    x, y = _fit.data()
    with WithoutSuper(x, y, batch_size=_fit.BATCH, augment=_fit.mark, workers=2, seed=3,
                      shuffle=True) as seq:
        with pytest.warns(shmaug.ShmaugWarning, match=r"WithoutSuper.on_epoch_end returned "
                                                      r"without calling super\(\)"):
            first, second = by_hand(seq, 2)
        assert first == second and seq.ended == 2
        plan = _fit.Plan(x, seed=3, shuffle=True)
        try:
            assert plan.which_epoch([rows(b) for b in seq]) == 0
            assert plan.which_epoch([rows(b) for b in seq]) == 1
        finally:
            plan.close()


class StaticEnd(shmaug.Sequence):
    @staticmethod
    def on_epoch_end():
        pass


def test_an_on_epoch_end_of_a_subclass_may_be_a_static_method():
    """The check that an override calls super() wraps plain functions only: a static method
    was handed the Sequence, a TypeError under fit."""
    x, y = _fit.data()
    with StaticEnd(x, y, batch_size=_fit.BATCH, workers=0, seed=3) as seq:
        by_hand(seq, 2)


def test_a_hand_loop_then_fit_goes_on_with_the_next_epoch():
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.mark, workers=2, seed=3,
                         shuffle=True) as seq:
        by_hand(seq, 2)
        model.fit(seq, epochs=2, verbose=0, callbacks=[_fit.EpochTag(log)])
    plan = _fit.Plan(x, seed=3, shuffle=True)
    try:
        assert [plan.which_epoch(log.train[k]) for k in range(2)] == [2, 3]
    finally:
        plan.close()


@pytest.mark.parametrize("shuffle", [False, True])
def test_batch_gives_what_a_pass_serves_and_moves_nothing(shuffle):
    import numpy as np

    x = np.arange(10 * 4 * 4, dtype=np.uint8).reshape(10, 4, 4)
    y = np.arange(10)
    with shmaug.Sequence(x, y, batch_size=4, workers=0, shuffle=shuffle, seed=5) as seq:
        looked = [seq.batch(i, epoch=1) for i in range(len(seq))]
        assert isinstance(looked[0], tuple) and len(looked[0]) == 2  # (x, y), as Keras gets it
        assert seq.epoch == 0
        first = list(seq)  # epoch 0: the looks did not claim it
        second = list(seq)  # epoch 1
    for (xa, ya), (xb, yb) in zip(looked, second):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)
    assert shuffle is False or not np.array_equal(first[0][1], second[0][1])


def test_a_batch_edited_in_place_leaves_the_next_ask_and_a_replay_as_made():
    """A torch habit (``x.div_(255)`` in a ``train_step``, ``b += 100`` in a loop) edited the
    batches the Sequence keeps for a second ask (a pass's first two, a look): the same index
    asked again, or the epoch replayed after ``seek(0)``, came back edited."""
    x, y = _fit.data()
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.mark, workers=0, seed=3,
                         shuffle=True) as seq:
        made = [b[0].copy() for b in seq]
        seq.seek(0)
        for batch in seq:
            batch[0][...] += 100  # (uint8: wraps; any edit will do)
        seq.seek(0)
        replayed = [b[0] for b in seq]
        look = seq[0][0]
        as_made = look.copy()
        look[...] = 0
        again = seq[0][0]
    for a, b in zip(made, replayed):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(again, as_made)
