"""The simplest calls run quietly and correctly (issue 30 §3), on every backend (CI runs this
module under each ``KERAS_BACKEND``): ``shuffle=None`` follows what Keras asks for."""

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
        assert (train.shuffle, val.shuffle) == (True, False)
        assert "shuffle=None (follows Keras: True)" in repr(train)
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
        assert seq.shuffle is False
    np.testing.assert_allclose(got, model.predict(x, batch_size=_fit.BATCH, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_fit_shuffle_false_and_explicit_settings_are_kept():
    x, y = _fit.data()
    log = _fit.Log()
    model = _fit.model(log)
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=2, seed=1) as follows, \
            shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=2, shuffle=False) as fixed:
        model.fit(follows, epochs=1, shuffle=False, verbose=0, callbacks=[_fit.EpochTag(log)])
        assert follows.shuffle is False
        assert ids(log.train[0]) == list(range(_fit.N))
        assert fixed.shuffle is False and repr(fixed).count("shuffle=False") == 1


def test_a_state_saved_under_fit_restores_into_a_sequence_that_follows_keras():
    x, y = _fit.data()
    with shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=0, seed=1, shuffle=True) as a, \
            shmaug.Sequence(x, y, batch_size=_fit.BATCH, workers=0, seed=1) as b:
        b.load_state_dict(a.state_dict())
        assert b.shuffle is True
