"""Weighted sampling without processes: the draw's frequencies against the weights, zero
weights, shards of one draw, and every refused argument (``workers=0`` or nothing to augment:
no process starts)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shmaug
from shmaug.engine.plan.schedule import Shard, epoch_order, weighted_draw
from tests import _ops
from tests._helpers import needs_keras

CLASSES = np.repeat([0, 1, 2, 3], [300, 60, 30, 10])  # imbalanced: 400 samples
X = np.zeros((len(CLASSES), 2, 2), np.uint8)
try:
    from scipy.stats import chi2

    CRITICAL = {df: float(chi2.ppf(0.999, df)) for df in (1, 3)}
except ImportError:  # the same values, tabled (p = 0.001)
    CRITICAL = {1: 10.828, 3: 16.266}


def chi_square(observed: np.ndarray, p: np.ndarray) -> float:
    """Pearson's statistic of counts ``observed`` against probabilities ``p``."""
    expected = p * observed.sum()
    return float(((observed - expected) ** 2 / expected).sum())


def drawn_labels(epochs: int = 3, **kwargs) -> np.ndarray:
    """The labels a loader hands out over ``epochs`` (nothing to augment: no process)."""
    with shmaug.Loader(X, CLASSES, batch_size=64, seed=3, workers=0, **kwargs) as loader:
        return np.concatenate([y for _ in range(epochs) for _, y in loader])


@pytest.mark.parametrize("weights, p", [
    ("balanced", np.full(4, 0.25)),
    ({0: 1.0, 1: 2.0, 2: 4.0, 3: 0.5}, np.array([300, 120, 120, 5]) / 545),
])
def test_drawn_class_frequencies_follow_the_weights(weights, p):
    labels = drawn_labels(sampling_weights=weights)
    assert len(labels) == 3 * len(CLASSES)
    counts = np.bincount(labels, minlength=4)
    assert chi_square(counts, p) < CRITICAL[3], counts
    # The test has the power to see weights ignored: the dataset's own frequencies fail it.
    plain = np.bincount(drawn_labels(shuffle=True), minlength=4)
    assert chi_square(plain, p) > CRITICAL[3]


def test_per_sample_weights_and_samples_per_epoch():
    w = np.where(np.arange(len(CLASSES)) % 2 == 0, 3.0, 1.0)  # even samples 3x as likely
    with shmaug.Loader(X, np.arange(len(CLASSES)), batch_size=64, seed=1, workers=0,
                       sampling_weights=w, samples_per_epoch=1000) as loader:
        assert len(loader) == 16  # ceil(1000 / 64)
        drawn = np.concatenate([y for _ in range(2) for _, y in loader])
    assert len(drawn) == 2000
    even = np.bincount(drawn % 2, minlength=2)
    assert chi_square(even, np.array([0.75, 0.25])) < CRITICAL[1]


def test_zero_weights_are_never_drawn():
    w = np.zeros(50)
    w[[3, 17, 48]] = [1.0, 2.0, 1e-9]  # first and last indices weigh nothing
    cdf = np.cumsum(w)
    drawn = np.concatenate([weighted_draw(0, e, cdf, 10_000) for e in range(5)])
    assert set(np.unique(drawn).tolist()) <= {3, 17, 48}
    assert {3, 17} <= set(drawn.tolist())


@given(st.lists(st.sampled_from([0.0, 1e-12, 0.5, 1.0, 1e6]), min_size=1, max_size=60),
       st.integers(0, 2**40), st.integers(0, 50), st.integers(1, 300), st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_any_draw_stays_on_positive_weights_and_shards_split_it(weights, seed, epoch,
                                                                 samples, shards):
    w = np.array(weights)
    if not w.sum() > 0:
        w[-1] = 1.0
    cdf = np.cumsum(w)
    whole = epoch_order(seed, epoch, samples, True, cdf=cdf)
    assert len(whole) == samples and (w[whole] > 0).all()
    if samples >= shards:
        parts = [epoch_order(seed, epoch, samples, True, Shard(shards, k), cdf=cdf)
                 for k in range(shards)]
        kept = shards * (samples // shards)
        np.testing.assert_array_equal(np.stack(parts, 1).ravel(), whole[:kept])


def test_a_draw_depends_on_seed_and_epoch_only():
    cdf = np.cumsum(np.arange(1.0, 41.0))
    a = weighted_draw(5, 2, cdf, 100)
    np.testing.assert_array_equal(a, weighted_draw(5, 2, cdf, 100))
    assert not np.array_equal(a, weighted_draw(5, 3, cdf, 100))
    assert not np.array_equal(a, weighted_draw(6, 2, cdf, 100))


def test_shards_of_an_epoch_are_the_global_draw_split_evenly():
    cdf = np.cumsum(np.linspace(0.1, 1.0, 40))
    whole = epoch_order(9, 4, 101, True, cdf=cdf)
    parts = [epoch_order(9, 4, 101, True, Shard(2, k), cdf=cdf) for k in range(2)]
    assert [len(p) for p in parts] == [50, 50]
    np.testing.assert_array_equal(np.stack(parts, axis=1).ravel(), whole[:100])


def test_sampling_implies_shuffle_and_shows_in_repr():
    with shmaug.Loader(X, CLASSES, batch_size=64, workers=0, seed=0, shuffle=False,
                       sampling_weights="balanced", samples_per_epoch=128) as loader:
        assert loader.shuffle and len(loader) == 2
        assert "sampling_weights=<float64 array (400,)>, samples_per_epoch=128" in repr(loader)


def test_labels_may_be_one_hot_or_a_sources_labels():
    one_hot = np.eye(4, dtype=np.float32)[CLASSES]
    labels = drawn_labels(1, sampling_weights={0: 0, 1: 0, 2: 0, 3: 1})
    assert set(labels.tolist()) == {3}
    smoothed = one_hot * 0.9 + 0.1 / 4  # label smoothing: still one class a row
    for rows in (one_hot, smoothed):
        with shmaug.Loader(X, rows, batch_size=64, workers=0, seed=0,
                           sampling_weights={0: 0, 1: 1, 2: 0, 3: 0}) as loader:
            assert set(np.argmax(np.concatenate([y for _, y in loader]), 1).tolist()) == {1}
    source = _LabelledSource()
    with shmaug.Loader(source, batch_size=8, augment=_ops.identity, workers=0, seed=0,
                       sampling_weights={0: 1, 1: 0}) as loader:
        xb, yb = loader.batch(0)
    assert not yb.any() and not xb.any()  # class 0 only: its images are zeros


class _LabelledSource:
    """A sample source as the engine sees one: a length, ``load(i)`` and ``labels``."""

    labels = np.arange(10) % 2

    def __len__(self) -> int:
        return 10

    def load(self, index: int) -> np.ndarray:
        return np.full((2, 2), self.labels[index] * 255, np.uint8)


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(sampling_weights=-np.ones(400)), ValueError,
     r"`sampling_weights` must be finite and >= 0; received -1.0 at sample 0"),
    (dict(sampling_weights=np.r_[np.ones(399), np.nan]), ValueError, r"received nan at sample 399"),
    (dict(sampling_weights=np.r_[np.ones(399), np.inf]), ValueError, "finite"),
    (dict(sampling_weights=np.zeros(400)), ValueError, r"all zero.*Fix: give at least one"),
    (dict(sampling_weights=np.ones(399)), ValueError,
     r"one weight per sample of `x` \(400\); received shape \(399,\).*len\(sampling_weights\)"),
    (dict(sampling_weights=np.ones((400, 2))), ValueError, r"shape \(400, 2\)"),
    (dict(sampling_weights=["a"] * 400), ValueError, "one weight per sample"),
    (dict(sampling_weights="equal"), ValueError, r"received 'equal'.*\"balanced\""),
    (dict(sampling_weights={0: 1, 1: 1}), ValueError, r"no weight for the class\(es\) \[2, 3\]"),
    (dict(sampling_weights={"cat": 1, "dog": 2}), ValueError,  # a source's class names
     r"classes given: \['cat', 'dog'\]\).*keyed by the labels' numbers.*class_indices"),
    (dict(sampling_weights={0: 1, 1: 1, 2: 1, 3: -2}), ValueError,
     r"`sampling_weights\[3\]` must be finite and >= 0; received -2.0"),
    (dict(sampling_weights={0: 0, 1: 0, 2: 0, 3: 0}), ValueError, "all zero"),
    (dict(sampling_weights="balanced", y=None), ValueError,
     r"weighs classes, but there are no labels.*Fix: pass the labels as `y`"),
    (dict(sampling_weights="balanced", y={"a": CLASSES, "b": CLASSES}), TypeError,
     r"needs one array of labels, but `y` is a dict of \['a', 'b'\]\. .*Several outputs: "
     r"weigh by one head's"),  # (not a cut repr of the arrays)
    (dict(sampling_weights="balanced", y=CLASSES / 2), ValueError, r"dtype float64.*Fix"),
    (dict(sampling_weights="balanced", y=CLASSES - 1), ValueError,
     r"labels are negative \(-1 at sample \d+: no class.*per-sample weights"),
    (dict(sampling_weights="balanced",  # OCR's padded character ids: no one-hot rows
          y=np.c_[CLASSES + 5, CLASSES, -np.ones(400, int)]), ValueError,
     r"read from `y` as one-hot rows, but 400 of its rows are not one \(row 0: \[\d+, \d+, -1\]"
     r".*per-sample weights"),
    (dict(sampling_weights="balanced", y=np.eye(4)[CLASSES] * (CLASSES != 0)[:, None]),
     ValueError, r"\d+ all-zero \(no class.*weight 0"),  # unlabelled rows
    (dict(sampling_weights={0: 1, 1: 1, 2: 1, 3: 1},  # multi-hot
          y=np.c_[np.ones(400), np.eye(4)[CLASSES][:, 1:]]), ValueError,
     r"rows are not one.*\d+ that name no one class \(multi-hot"),
    (dict(sampling_weights="balanced",  # both kinds, the first bad row all-zero: both counted
          y=np.where((CLASSES == 0)[:, None], 0.0, np.where((CLASSES == 1)[:, None], 1.0,
                                                             np.eye(4)[CLASSES]))), ValueError,
     r"\d+ all-zero .* and \d+ that name no one class"),
    (dict(samples_per_epoch=100), ValueError,
     r"`samples_per_epoch`=100 draws .* Fix: pass `sampling_weights` too"),
    (dict(sampling_weights="balanced", samples_per_epoch=0), ValueError,
     r"`samples_per_epoch` must be a positive integer; received 0"),
    (dict(sampling_weights="balanced", samples_per_epoch=2.5), ValueError, "received 2.5"),
    (dict(sampling_weights="balanced", samples_per_epoch=10, batch_size=64,
          drop_remainder=True), ValueError, "no batch"),
    (dict(sampling_weights="balanced", num_shards=2, shard_index=0, seed=None), ValueError,
     r"needs a `seed`"),
])
def test_bad_sampling_arguments_are_refused_naming_the_fix(kwargs, error, pattern):
    kwargs = {"y": CLASSES, "batch_size": 8, "workers": 0, "seed": 0, **kwargs}
    with pytest.raises(error, match=pattern) as info:
        shmaug.Loader(X, kwargs.pop("y"), **kwargs)
    assert isinstance(info.value, shmaug.ShmaugError)


@pytest.mark.parametrize("workers", [0, 1])
def test_draws_outnumbering_the_dataset_fill_batches_larger_than_it(workers):
    """Tiles of 4 scenes: 16 draws a epoch in batches of 8. The ring was sized for batches of
    at most the dataset's 4 rows, and the fifth row crashed in the worker (an IndexError
    blaming a sample)."""
    x = np.arange(4, dtype=np.uint8).repeat(6 * 6).reshape(4, 6, 6)
    with shmaug.Loader(x, np.arange(4), batch_size=8, augment=_ops.identity, workers=workers,
                       seed=0, sampling_weights=np.ones(4), samples_per_epoch=16) as loader:
        batches = list(loader)
    assert [len(yb) for _, yb in batches] == [8, 8]
    for xb, yb in batches:
        np.testing.assert_array_equal(xb, x[yb])


def test_a_one_output_dict_of_labels_is_weighed_as_its_labels():
    """``{"output": y}`` (a one-output model's, which a mix takes too) was refused."""
    args = dict(batch_size=40, workers=0, seed=0, sampling_weights="balanced")
    with shmaug.Loader(X, {"out": CLASSES}, **args) as named, \
            shmaug.Loader(X, CLASSES, **args) as plain:
        np.testing.assert_array_equal(named.batch(0)[1]["out"], plain.batch(0)[1])


def test_a_state_resumes_only_the_same_sampling():
    args = dict(batch_size=64, workers=0, seed=0, shuffle=True)
    with shmaug.Loader(X, CLASSES, sampling_weights="balanced", **args) as loader:
        state = json.loads(json.dumps(loader.state_dict()))
        loader.load_state_dict(state)
    others = [dict(), dict(sampling_weights={0: 1, 1: 1, 2: 1, 3: 2}),
              dict(sampling_weights="balanced", samples_per_epoch=500)]
    for other in others:
        with shmaug.Loader(X, CLASSES, **args, **other) as loader:
            with pytest.raises(shmaug.ArgumentError, match=r"saved with sampling=.*Fix: pass "
                               r"the same `sampling_weights` and `samples_per_epoch`"):
                loader.load_state_dict(state)
            if not other:  # nor the reverse: a plain run's state into a weighted loader
                plain = loader.state_dict()
    with shmaug.Loader(X, CLASSES, sampling_weights="balanced", **args) as loader:
        with pytest.raises(shmaug.ArgumentError, match="saved with sampling=None"):
            loader.load_state_dict(plain)


@needs_keras
def test_a_sequence_draws_as_its_loader_and_len_follows_samples_per_epoch():
    seq = shmaug.Sequence({"image": X, "extra": np.ones((400, 1))}, CLASSES, batch_size=64,
                          workers=0, seed=0, sampling_weights="balanced", samples_per_epoch=200,
                          image_key="image")
    try:
        assert len(seq) == 4 and seq.shuffle
        assert "sampling" in seq.state_dict()["fingerprint"]
        labels = np.concatenate([seq.batch(i, epoch=e)[1] for e in range(3) for i in range(4)])
        assert chi_square(np.bincount(labels, minlength=4), np.full(4, 0.25)) < CRITICAL[3]
        np.testing.assert_array_equal(labels[:64], seq.loader.batch(0, epoch=0)[1]["y"])
    finally:
        seq.close()
    with pytest.raises(shmaug.ArgumentError, match=r"`sampling_weights` given as \"balanced\" "
                       r"weighs classes, but there are no labels"):
        shmaug.Sequence(X, batch_size=8, sampling_weights="balanced")
