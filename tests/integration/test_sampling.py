"""Weighted sampling with real workers: the same batches for any worker count and start
method, shards that together are the global draw, resume mid-epoch, and ``fit``."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

import shmaug
from tests import _ops
from tests._helpers import assert_same_batches, needs_keras

pytestmark = pytest.mark.timeout(120)

LABELS = np.repeat([0, 1], [36, 4])  # 40 samples (the `images` fixture), 10% class 1
ARGS = dict(batch_size=6, augment=_ops.noisy, seed=5, sampling_weights="balanced",
            samples_per_epoch=30, start_method="fork")


def loader(images, **kwargs):
    # `y` is the sample index (to see which sample came); the weights balance LABELS.
    w = 1.0 / np.bincount(LABELS)[LABELS]
    return shmaug.Loader(images, np.arange(len(images)),
                         **{**ARGS, "sampling_weights": w, **kwargs})


def run(images, n_epochs=2, **kwargs):
    with loader(images, **kwargs) as it:
        return [b for _ in range(n_epochs) for b in it]


def test_batches_are_the_same_for_any_workers_and_start_method(images):
    expected = run(images, workers=0)
    assert_same_batches(run(images, workers=2), expected)
    assert_same_batches(run(images, n_epochs=1, workers=1, start_method="spawn"),
                        expected[:5])
    drawn = np.concatenate([y for _, y in expected])
    assert len(drawn) == 60 and len(np.unique(drawn)) < 60  # with replacement
    assert np.isin(drawn, np.flatnonzero(LABELS)).mean() > 0.3  # class 1 is 10% of the data


def test_a_sample_drawn_twice_in_an_epoch_is_augmented_two_ways(images):
    (xb, yb), = run(images, n_epochs=1, workers=2, batch_size=30)
    index = np.flatnonzero(np.bincount(yb) > 1)[0]
    first, second = xb[yb == index][:2]
    assert not np.array_equal(first, second)


def test_shards_on_two_hosts_together_are_the_global_draw(images):
    whole = run(images, workers=0, batch_size=30)
    shards = [run(images, workers=1, batch_size=15, num_shards=2, shard_index=k)
              for k in range(2)]
    for epoch in range(2):
        xw, yw = whole[epoch]
        (x0, y0), (x1, y1) = shards[0][epoch], shards[1][epoch]
        # Host k takes draws k, k + 2, ...: the same samples, augmented the same way.
        np.testing.assert_array_equal(np.stack([y0, y1], 1).ravel(), yw)
        np.testing.assert_array_equal(np.stack([x0, x1], 1).reshape(xw.shape), xw)


def test_resume_mid_epoch_lands_on_the_same_batches(images):
    expected = run(images, workers=2)
    with loader(images, workers=2) as first:
        got = []
        for batch in first:
            got.append(batch)
            if len(got) == 3:
                state = json.loads(json.dumps(first.state_dict()))
                break
    assert (state["epoch"], state["batch"]) == (0, 3)
    with loader(images, workers=2) as second:
        second.load_state_dict(state)
        got += list(second) + list(second)
    assert_same_batches(got, expected)


@needs_keras
def test_fit_trains_on_the_balanced_draw_for_len_steps(images):
    import keras

    from tests._ops import tiny_model

    x = images[..., None]
    seq = shmaug.Sequence(x, LABELS, batch_size=8, augment=_ops.noisy, workers=1, seed=0,
                          sampling_weights={0: 1.0, 1: 9.0}, samples_per_epoch=48,
                          start_method="fork")
    assert len(seq) == 6
    seen: list[np.ndarray] = []

    class Count(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    try:
        history = tiny_model(x.shape[1:], 2).fit(seq, epochs=2, verbose=0,
                                                  callbacks=[Count()])
        assert len(history.history["loss"]) == 2 and len(seen) == 12
        fed = np.concatenate([seq.batch(i, epoch=e)[1] for e in range(2) for i in range(6)])
        assert len(fed) == 96 and 0.3 < fed.mean() < 0.7  # class 1 is 10% of the data
    finally:
        seq.close()


def test_an_image_folders_labels_are_its_classes(tmp_path):
    from shmaug.sources.files import ImageFiles
    from tests.integration.test_files import picture, write_folder

    files = ImageFiles.from_directory(write_folder(tmp_path / "data"), image_size=(6, 6),
                                      color_mode="rgb")
    only = {c: float(c == 1) for c in range(len(files.class_names))}
    with shmaug.Loader(files, batch_size=4, workers=0, seed=0, sampling_weights=only,
                       samples_per_epoch=8) as loader:
        drawn = np.concatenate([y for _, y in loader])
    assert drawn.tolist() == [1] * 8
    (tmp_path / "flat").mkdir()
    for i in range(3):
        picture("RGB", (8, 8), i).save(tmp_path / "flat" / f"{i}.png")
    flat = ImageFiles.from_directory(tmp_path / "flat", image_size=(6, 6), labels=None)
    with pytest.raises(shmaug.ArgumentError, match=r"no labels \(`y` is None and `x` has no "
                       r"`labels`\)"):
        shmaug.Loader(flat, batch_size=4, workers=0, sampling_weights="balanced")


@needs_keras
def test_predict_on_a_weighted_sequence_warns_that_it_reads_the_draw(images):
    """predict on a weighted Sequence returned samples_per_epoch rows in drawn order, which
    do not line up with x, without a word; it still reads the draw, and says so once."""
    from tests._ops import tiny_model

    x = images[..., None]
    with shmaug.Sequence(x, LABELS, batch_size=8, workers=0, seed=0,
                         sampling_weights="balanced", samples_per_epoch=48) as seq:
        model = tiny_model(x.shape[1:], 2)
        said = []
        for _ in range(2):  # (recorded: a backend's own warnings pass by, as outside a test)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert len(model.predict(seq, verbose=0)) == 48
            said += [str(w.message) for w in caught if w.category is shmaug.ShmaugWarning]
        assert len(said) == 1, said  # once per Sequence
        assert re.search(r"sampling_weights.*predict.*not x in its order.*without "
                         r"sampling_weights", said[0])


@needs_keras
def test_predict_on_a_sequence_dropping_its_remainder_warns_of_the_rows_it_leaves_out(images):
    """A Kaggle submission's 53 test images came back as 48 predictions, without a word."""
    from tests._ops import tiny_model

    x = images[..., None]  # 40 samples
    model = tiny_model(x.shape[1:], 2)
    for drop, rows in ((True, 32), (False, 40)):
        with shmaug.Sequence(x, LABELS, batch_size=16, workers=0, drop_remainder=drop) as seq:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert len(model.predict(seq, verbose=0)) == rows
                model.evaluate(seq, verbose=0)
            said = [str(w.message) for w in caught if w.category is shmaug.ShmaugWarning]
        assert len(said) == drop, said  # once per Sequence, and not without drop_remainder
        if drop:
            assert re.search(r"drop_remainder=True.*last 8 of 40 samples.*predict returns 32 "
                             r"rows.*without drop_remainder", said[0])
