"""The simplest calls run quietly and correctly (issue 30 §3), on every backend (CI runs this
module under each ``KERAS_BACKEND``): ``shuffle=None`` follows what Keras asks for, pass by
pass (issue 36 §0, §1)."""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug
from tests import _fit

pytestmark = [pytest.mark.keras, pytest.mark.timeout(180)]


def ids(batches):
    return [i for b in batches for i, _ in b]


def test_the_simplest_fit_trains_on_shuffled_epochs_and_validates_in_order():
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    args = dict(batch_size=_fit.BATCH, workers=2, seed=1)
    with shmaug.Sequence(x, y, augment=_fit.mark, **args) as train, \
            shmaug.Sequence(x, y, **args) as val:
        model.fit(train, validation_data=val, epochs=2, verbose=0,  # warnings are errors:
                  callbacks=[_fit.EpochTag(log)])  # no ShmaugWarning about the order
        assert (train.shuffle, val.shuffle) == (None, None)  # as given: decided per pass
        assert "shuffle=None (follows Keras per pass" in repr(train)
    plan = _fit.Plan(x, seed=1, shuffle=True)
    try:
        assert [plan.which_epoch(log.train[e]) for e in (0, 1)] == [0, 1]
    finally:
        plan.close()
    assert ids(log.train[0]) != list(range(_fit.N))  # samples shuffled, each once
    assert [ids([b]) for b in log.evaluated] == [list(range(_fit.N))] * 2  # in order


def test_predict_and_evaluate_keep_the_natural_order():
    x, y = _fit.data()
    model = _fit.model(_fit.Log())
    with shmaug.Sequence(x, batch_size=_fit.BATCH, workers=2) as seq:
        got = model.predict(seq, verbose=0)
    np.testing.assert_allclose(got, model.predict(x, batch_size=_fit.BATCH, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_fit_shuffle_false_and_explicit_settings_are_kept():
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=2, seed=1) as follows, \
            shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=2, shuffle=False) as fixed:
        model.fit(follows, epochs=1, shuffle=False, verbose=0, callbacks=[_fit.EpochTag(log)])
        assert ids(log.train[0]) == list(range(_fit.N))
        assert fixed.shuffle is False and repr(fixed).count("shuffle=False") == 1


def test_a_state_saved_under_fit_restores_into_a_sequence_that_follows_keras():
    x, y = _fit.data()
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=0, seed=1, shuffle=True) as a, \
            shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=0, seed=1) as b:
        a.batch(0)
        b.load_state_dict(a.state_dict())
        assert b.batch(2, epoch=3)[1].tolist() == a.batch(2, epoch=3)[1].tolist()


def predictions_match(model, seq, x):
    np.testing.assert_allclose(model.predict(seq, verbose=0),
                               model.predict(x, batch_size=_fit.BATCH, verbose=0),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shuffle", [None, True])
def test_predict_and_evaluate_after_fit_read_in_order_and_fit_still_shuffles(shuffle):
    """fit -> predict -> fit -> evaluate on one Sequence: Keras decides the order per pass, so
    predictions line up with x (rows shuffled by the fit before them was issue 36 §0), and
    the fit after them trains on a shuffled epoch; shuffle=True means training passes only."""
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    tag = _fit.EpochTag(log)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.same, workers=2, seed=1,
                         shuffle=shuffle) as seq:
        for _ in range(2):
            log.train.clear()
            model.fit(seq, epochs=1, verbose=0, callbacks=[tag])
            fed = ids(log.train[0])
            assert fed != list(range(_fit.N)) and sorted(fed) == list(range(_fit.N))
            log.evaluated.append([])
            predictions_match(model, seq, x)  # (the Tap writes both predicts down)
            assert ids([log.evaluated[-1][:_fit.N]]) == list(range(_fit.N))  # in order
        log.evaluated.append([])
        loss = model.evaluate(seq, verbose=0)
        assert ids([log.evaluated[-1]]) == list(range(_fit.N))  # evaluate: in order
        np.testing.assert_allclose(
            loss, model.evaluate(x, y, batch_size=_fit.BATCH, verbose=0), rtol=1e-5)


def test_looking_before_fit_decides_nothing():
    """seq.batch, seq[i], len, iteration, stats(), repr before fit (a grid of samples): fit
    then still trains on shuffled epochs, for every Sequence of the script (issue 36 §1)."""
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    plan = _fit.Plan(x, seed=1, shuffle=True)
    try:
        for look in range(2):  # a second Sequence in the same script: no warning-once path
            with shmaug.Sequence(x, y, batch_size=_fit.BATCH, augment=_fit.mark, workers=2,
                                 seed=1) as seq:
                before = repr(seq)
                seq.batch(0, epoch=0)
                seq[1]
                len(seq)
                next(iter(seq))
                seq.stats()
                assert "shuffle=None (follows Keras per pass" in repr(seq) and \
                    "shuffle=None (follows Keras per pass" in before
                log.train.clear()
                model.fit(seq, epochs=1, verbose=0, callbacks=[_fit.EpochTag(log)])
                assert ids(log.train[0]) != list(range(_fit.N))
                plan.which_epoch(log.train[0])  # a whole shuffled epoch of shmaug's
    finally:
        plan.close()


def test_shards_without_a_seed_are_refused_when_a_pass_shuffles_not_before():
    """shuffle=None with num_shards: reading in order needs no common seed, a shuffled pass
    does (hosts must split one global order); so the refusal comes with fit's first pass,
    while len(), predict's order and evaluate work."""
    from keras.src.trainers.data_adapters.py_dataset_adapter import PyDatasetAdapter

    x, y = _fit.data()
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=0, num_shards=2,
                         shard_index=1) as seq:
        assert len(seq) == 3
        ordered = PyDatasetAdapter(seq, shuffle=False)
        ordered.on_epoch_begin()
        assert len(list(ordered.get_numpy_iterator())) == 3
        ordered.on_epoch_end()
        shuffled = PyDatasetAdapter(seq, shuffle=True)
        shuffled.on_epoch_begin()
        with pytest.raises(shmaug.ArgumentError, match=r"needs a `seed`"):
            next(iter(shuffled.get_numpy_iterator()))
