"""The Keras facade under real `Model.fit` on the CPU, with real workers (fork and spawn), on
whichever Keras backend runs the suite; which batches each epoch is fed is test_fit_epochs'."""

from __future__ import annotations

import logging
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import pytest

keras = pytest.importorskip("keras")

import shmaug  # noqa: E402
from tests import _ops  # noqa: E402

pytestmark = [pytest.mark.keras, pytest.mark.timeout(240), pytest.mark.slow]
BACKEND = keras.backend.backend()

N, SIDE, CLASSES = 96, 8, 4
# fit(shuffle=True) over a Sequence with shuffle=False: how often Keras' random order trips the
# ShmaugWarning depends on Keras' unseeded shuffle. Tests about something else allow it here;
# test_unshuffled_training_data_under_fit_shuffle_says_how_to_fix expects it.
RANDOM_ORDER_ALLOWED = pytest.mark.filterwarnings(
    "ignore:Keras asks this shmaug.Sequence for batches in random order:shmaug.ShmaugWarning")


def data(n=N):
    rng = np.random.default_rng(0)
    x = rng.random((n, SIDE, SIDE, 1)).astype(np.float32)
    y = np.arange(n) % CLASSES
    return x, y


def id_model():
    """Two outputs: a class and the (ignored) sample id, so the test can see what was fed."""
    inp = keras.Input((SIDE, SIDE, 1))
    h = keras.layers.Flatten()(inp)
    out = keras.layers.Dense(CLASSES, activation="softmax", name="label")(h)
    ident = keras.layers.Dense(1, name="id")(h)
    model = keras.Model(inp, {"label": out, "id": ident})
    model.compile("adam", loss={"label": "sparse_categorical_crossentropy", "id": "mse"},
                  loss_weights={"label": 1.0, "id": 0.0})
    return model


class Requests(shmaug.Sequence):
    """Records the sample ids of every batch Keras asks for, probes included, in order."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[int, ...]] = []

    def __getitem__(self, index):
        batch = super().__getitem__(index)
        self.asked.append(tuple(batch[1]["id"].tolist()))
        return batch


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_batch_looked_at_by_hand_between_epochs_moves_nothing(where):
    pytest.importorskip("tensorflow")
    """seq[i] called by the user (any Python thread) outside an epoch is a look, not part of
    the stream: after to_tf_dataset() too, whose epochs run on tf.data's threads."""
    import threading

    x, y = data(40)
    with shmaug.Sequence(x, {"label": y, "id": np.arange(40)}, batch_size=4, workers=0,
                         seed=7, shuffle=True) as seq:
        dataset = seq.to_tf_dataset()
        epochs = [[b[1]["id"].numpy().tolist() for b in dataset]]
        if where == "main":
            seq[0]
        else:
            thread = threading.Thread(target=seq.__getitem__, args=(0,))
            thread.start()
            thread.join()
        epochs.append([b[1]["id"].numpy().tolist() for b in dataset])
        for e, batches in enumerate(epochs):
            assert batches == [seq.loader.indices(i, epoch=e).tolist() for i in range(10)]


def test_a_look_at_the_end_of_a_pass_is_the_batch_that_pass_gave():
    """seq[i] in a for loop's body, or in a callback after a training step, is a look at the
    batch the pass gave index i: at each pass's end it gave the next epoch's batch i (Keras
    fetches ahead; a loop's body runs after its last ask), and seq.epoch read the next
    epoch."""
    x, y = data(40)
    with shmaug.Sequence(x, y, batch_size=8, augment=_ops.noisy, workers=2, seed=5,
                         shuffle=False) as seq:
        for i, (xb, _) in enumerate(seq):
            np.testing.assert_array_equal(seq[i][0], xb)
            assert seq.epoch == 0
        assert seq.epoch == 1
        seen = []

        class Look(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.epoch = epoch + 1  # (the for loop above took shmaug's epoch 0)

            def on_train_batch_end(self, batch, logs=None):
                given = seq.batch(batch, epoch=self.epoch, in_order=True)[0]
                seen.append((self.epoch, batch, np.array_equal(seq[batch][0], given)))

        model = _ops.tiny_model((SIDE, SIDE, 1), CLASSES, seed=0)
        model.fit(seq, epochs=2, shuffle=False, verbose=0, callbacks=[Look()])
    assert seen == [(e, b, True) for e in (1, 2) for b in range(len(seq))]


def test_a_callback_ending_the_epoch_under_fit_is_not_told_of_an_order_by_hand():
    """From the diff review: a TF 2.x-era callback calling `seq.on_epoch_end()` under fit (a
    shuffled pass, augmenting, shuffle left out) was warned that a loop by hand read in order
    (an error under warnings as errors, as here: fit stopped after epoch 1)."""
    x, y = data(40)
    with shmaug.Sequence(x, y, batch_size=8, augment=_ops.noisy, workers=2, seed=5) as seq:
        class EndIt(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                seq[0]  # a look (a grid of samples logged), then the epoch ended by hand
                seq.on_epoch_end()

        model = _ops.tiny_model((SIDE, SIDE, 1), CLASSES, seed=0)
        model.fit(seq, epochs=2, verbose=0, callbacks=[EndIt()])
        model.predict(seq, verbose=0)  # TTA passes too
        seq.on_epoch_end()


def test_a_whole_pass_whose_loop_is_dropped_leaves_looks_to_the_next_epoch():
    """``zip(range(len(seq)), seq)`` takes every batch without running the loop to its end:
    from the diff review, a hand loop after it (looks, then on_epoch_end) replayed its epoch."""
    x, y = data(40)
    with shmaug.Sequence(x, {"label": y, "id": np.arange(40)}, batch_size=8, workers=0,
                         seed=7, shuffle=True) as seq:
        first = [b[1]["id"].tolist() for _, b in zip(range(len(seq)), seq)]
        assert seq.epoch == 1
        by_hand = [seq[i][1]["id"].tolist() for i in range(len(seq))]
        seq.on_epoch_end()
        assert first == [seq.loader.indices(i, epoch=0).tolist() for i in range(5)]
    assert by_hand != first


@pytest.mark.parametrize("workers", [0, 1])
def test_an_attribute_the_workers_hooks_read_changed_after_they_started_is_told(workers):
    """A schedule's ``self.level`` set between epochs reached no worker (and a restart
    after an idle stop did take it): the batches depended on timing, without a word."""
    from tests.integration._override_seq import Leveled

    x, y = data(16)
    with Leveled(x, y, batch_size=8, workers=workers, seed=0) as seq:
        for _ in seq:
            seq.seen += 1  # not read by a hook: nothing to tell
        with warnings.catch_warnings(record=True) as told:
            warnings.simplefilter("always")
            list(seq)
            seq.level = 3
            levels = {float(xb.max()) for xb, _ in seq}
            list(seq)  # (told once for that value)
            seq.level = 4  # a progressive resize's second stage went untold
            list(seq)
    about = [w for w in told if "self.level" in str(w.message)]
    if workers:
        assert levels == {0.0} and len(about) == 2  # the workers' copy, and said so
        assert "Leveled.augment" in str(about[0].message) and "self.seen" not in str(
            about[0].message)
    else:
        assert levels == {3.0} and not about  # workers=0 reads the instance itself


@pytest.mark.parametrize("kind", ["CallableHook", "Averaging"])
def test_what_no_hook_reads_off_self_is_not_told(kind):
    """From the diff review: an augment that is an object crashed the workers' start (it has
    no code to read), and one calling image.mean() was said to read a `self.mean`."""
    from tests.integration import _override_seq

    x, y = data(16)
    with getattr(_override_seq, kind)(x, y, batch_size=8, workers=1, seed=0,
                                      shuffle=False) as seq:  # (read in order: not told)
        list(seq)
        seq.mean = 5.0  # (a running statistic of the subclass's own)
        list(seq)  # (warnings are errors here)


def test_each_fits_probes_take_the_next_passes_batches():
    """fit called once per epoch in a loop (as `shmaug demo` does): each fit first probes
    indices 0 and 1 for the output signature, after a whole pass. Those probes belong to the
    next pass; bound to the old pass's indices they re-made batches already trained on, and
    that random access dropped the next pass's prefetched batches (18% of asks missed)."""
    x, y = data(40)
    with Requests(x, {"label": y, "id": np.arange(40)}, batch_size=4, augment=_ops.noisy,
                  workers=2, seed=7, shuffle=True) as seq:
        model = id_model()
        for epoch in range(3):
            seq.asked.clear()
            model.fit(seq, initial_epoch=epoch, epochs=epoch + 1, verbose=0)
            this_pass = {tuple(seq.loader.indices(i, epoch=epoch).tolist())
                         for i in range(len(seq))}
            if BACKEND == "tensorflow":
                assert len(seq.asked) > len(seq)  # the probes were asked, then the pass
            assert set(seq.asked) == this_pass


def train_weights(workers, method="fork", epochs=1):
    if BACKEND == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, augment=_ops.noisy, workers=workers, seed=3,
                         shuffle=True, start_method=method) as seq:
        model = _ops.tiny_model((SIDE, SIDE, 1), CLASSES, seed=0)
        model.fit(seq, epochs=epochs, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_same_seed_same_weights_for_any_worker_count(method):
    w1 = train_weights(1, method)
    w2 = train_weights(2, method)
    for a, b in zip(w1, w2):
        np.testing.assert_array_equal(a, b)


@RANDOM_ORDER_ALLOWED
def test_op_exception_surfaces_out_of_fit():
    x, y = data()
    x[7, 0, 0, 0] = _ops.MARKER
    with shmaug.Sequence(x, y, batch_size=8, augment=_ops.fail_on_marker, workers=2,
                         value_range=(0, 255)) as seq:
        model = _ops.tiny_model((SIDE, SIDE, 1), CLASSES)
        with pytest.raises(Exception, match=r"(?s)bad pixel in this sample.*sample index 7"):
            model.fit(seq, epochs=1, verbose=0)


def test_validation_evaluate_predict_keep_natural_order_and_reuse_the_pool():
    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, augment=_ops.noisy, workers=2, seed=1,
                         shuffle=True) as train, shmaug.Sequence(x, y, batch_size=16) as val, \
            shmaug.Sequence(x, batch_size=16) as pred:
        model = _ops.tiny_model((SIDE, SIDE, 1), CLASSES)
        history = model.fit(train, validation_data=val, epochs=2, verbose=0)
        pids = train.loader.pids
        model.fit(train, validation_data=val, epochs=1, verbose=0)  # again: same processes
        assert train.loader.pids == pids
        assert "val_loss" in history.history
        predicted = model.predict(pred, verbose=0)
        np.testing.assert_allclose(predicted, model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
        assert np.isfinite(model.evaluate(val, verbose=0)[0])
        ys = [val[i][1] for i in range(len(val))]
        np.testing.assert_array_equal(np.concatenate(ys), y)


@RANDOM_ORDER_ALLOWED
def test_targets_onehot_sparse_dict_absent_and_class_weight():
    x, y = data()

    class OneHot(shmaug.Sequence):
        def targets(self, y_batch):
            return keras.utils.to_categorical(y_batch, CLASSES)

    onehot_model = _ops.tiny_model((SIDE, SIDE, 1), CLASSES)
    onehot_model.compile("adam", "categorical_crossentropy")
    with OneHot(x, y, batch_size=16, augment=_ops.noisy, workers=1, seed=0) as seq:
        assert seq[0][1].shape == (16, CLASSES)
        onehot_model.fit(seq, epochs=1, verbose=0)
    with shmaug.Sequence(x, y, batch_size=16, augment=_ops.noisy, workers=1) as seq:
        _ops.tiny_model((SIDE, SIDE, 1), CLASSES).fit(
            seq, epochs=1, verbose=0, class_weight={0: 1.0, 1: 2.0, 2: 1.0, 3: 1.0})
    with shmaug.Sequence(x, batch_size=16, augment=_ops.noisy, workers=1) as seq:
        assert isinstance(seq[0], np.ndarray)
    meta = np.random.default_rng(1).random((N, 3)).astype(np.float32)
    with shmaug.Sequence({"image": x, "meta": meta}, {"label": y, "score": meta[:, :1]},
                         batch_size=16, augment=_ops.noisy, workers=1) as seq:
        inputs, targets = seq[1]
        assert set(inputs) == {"image", "meta"} and set(targets) == {"label", "score"}
        np.testing.assert_array_equal(inputs["meta"], meta[16:32])
        img = keras.Input((SIDE, SIDE, 1), name="image")
        m = keras.Input((3,), name="meta")
        h = keras.layers.Concatenate()([keras.layers.Flatten()(img), m])
        model = keras.Model({"image": img, "meta": m},
                            {"label": keras.layers.Dense(CLASSES, activation="softmax",
                                                         name="label")(h),
                             "score": keras.layers.Dense(1, name="score")(h)})
        model.compile("adam", {"label": "sparse_categorical_crossentropy", "score": "mse"})
        model.fit(seq, epochs=1, verbose=0)


def test_the_loaders_indices_at_the_sequences_epoch_name_its_batches():
    """keras.md said `self.loader.indices(i)` named the pass's batch: the loader counts its
    own passes (at 0 under a Sequence), so a hard-example miner pinned its losses on epoch
    0's samples; `epoch=seq.epoch` names them (and reading `seq.loader` seeks nothing: a
    loop over it moves on, from the diff review)."""
    x, y = data(24)
    with shmaug.Sequence(x, np.arange(24), batch_size=8, workers=0, seed=3,
                         shuffle=True) as seq:
        for _ in range(3):
            for k, (_, ids) in enumerate(seq):
                np.testing.assert_array_equal(seq.loader.indices(k, epoch=seq.epoch), ids)
        firsts = [next(iter(seq.loader))[0].sum() for _ in range(3)]
        assert len(set(firsts)) == 3 and seq.loader.epoch == 3


def test_a_dict_x_finds_its_images_as_a_source_or_a_list_of_several_sizes(tmp_path):
    """An ImageFiles source or a list of images of several sizes beside other inputs was
    "candidates (3-D or 4-D arrays): []" (or numpy's ValueError, on the list)."""
    from PIL import Image

    paths = []
    for i in range(4):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(np.full((6 + i, 6, 3), 40 * i, np.uint8)).save(paths[-1])
    files = shmaug.ImageFiles.from_paths(paths, image_size=(6, 6))
    images = [np.full((6 + i, 6, 3), 40 * i, np.uint8) for i in range(4)]
    resize = shmaug.ops.Op("resize", height=6, width=6)
    for x in (files, images):
        with shmaug.Sequence({"pixels": x, "meta": np.arange(4)[:, None]}, np.arange(4),
                             batch_size=4, workers=0, augment=resize) as seq:
            inputs, targets = seq[0]
            assert seq.image_key == "pixels" and inputs["pixels"].shape == (4, 6, 6, 3)
            np.testing.assert_array_equal(inputs["pixels"][:, 0, 0, 0], 40 * targets)


def test_text_beside_the_images_is_refused_as_keras_begins_a_pass_not_by_hand():
    """Captions in a dict `x` stopped fit at its first batch with Keras' bare "Invalid
    dtype: str544"; a loop of one's own reads them (and to_tf_dataset carries them)."""
    x, y = data(16)
    captions = [f"a photo of {i}" for i in range(16)]
    img = keras.Input((SIDE, SIDE, 1), name="image")
    model = keras.Model(img, keras.layers.Dense(CLASSES)(keras.layers.Flatten()(img)))
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with shmaug.Sequence({"image": x, "caption": captions}, y, batch_size=8, workers=0,
                         image_key="image") as seq:
        assert list(seq[1][0]["caption"][:1]) == ["a photo of 8"]
        for call in (model.fit, model.predict):
            with pytest.raises(shmaug.ArgumentError, match=rf"`x\['caption'\]` holds text "
                                                           rf"\(<U\d+, e.g. 'a photo of 0'\).*"
                                                           rf"{call.__name__} would stop.*"
                                                           rf"TextVectorization"):
                call(seq, verbose=0)


def test_per_output_weights_fit_cannot_use_are_refused_as_fit_begins():
    """Second review: a weights dict without an output that has a loss stopped fit with
    Keras' bare KeyError ('score'), and class_weight beside two outputs with an IndexError;
    an output whose loss is None needs no weights, and weights for each output train."""
    x, y = data()
    w = np.ones(N, np.float32)

    def model(losses):
        img = keras.Input((SIDE, SIDE, 1), name="image")
        h = keras.layers.Flatten()(img)
        m = keras.Model(img, {"label": keras.layers.Dense(CLASSES, activation="softmax",
                                                          name="label")(h),
                              "score": keras.layers.Dense(1, name="score")(h)})
        m.compile("adam", losses)
        return m

    both = {"label": "sparse_categorical_crossentropy", "score": "mse"}
    targets = {"label": y, "score": x[:, 0, 0, :]}
    with shmaug.Sequence(x, targets, sample_weight={"label": w}, batch_size=16,
                         workers=1) as seq:
        with pytest.raises(shmaug.ArgumentError, match=r"no weights for the outputs "
                                                       r"\['score'\].*np\.ones\(N\)"):
            model(both).fit(seq, epochs=1, verbose=0)
        with warnings.catch_warnings():  # (Keras': the output without a loss trains not)
            warnings.filterwarnings("ignore", "Gradients do not exist", UserWarning)
            model({"label": "sparse_categorical_crossentropy", "score": None}).fit(
                seq, epochs=1, verbose=0)  # (no loss on it: no weights needed)
        with warnings.catch_warnings():  # (a list's None: by position, as Keras takes it)
            warnings.filterwarnings("ignore", "Gradients do not exist", UserWarning)
            model(["sparse_categorical_crossentropy", None]).fit(seq, epochs=1, verbose=0)
        with pytest.raises(shmaug.ArgumentError, match=r"no weights for the outputs "
                                                       r"\['score'\]"):  # (by position)
            model([None, "mse"]).fit(seq, epochs=1, verbose=0)
    with shmaug.Sequence(x, targets, sample_weight={"label": w, "score": w},
                         batch_size=16, workers=1) as seq:
        model(both).fit(seq, epochs=1, verbose=0)
    with shmaug.Sequence(x, targets, batch_size=16, workers=1) as seq:
        with pytest.raises(shmaug.ArgumentError, match=r"class_weight.*has 2 outputs \(\['label', "
                                                       r"'score'\]\).*`sample_weight`"):
            model(both).fit(seq, epochs=1, verbose=0, class_weight={0: 1.0, 1: 2.0})


class ListTargets(shmaug.Sequence):
    def targets(self, y_batch):
        return [y_batch, (y_batch % 2).astype("float32")[:, None]]  # a list, made per batch


def two_output_model():
    inp = keras.Input((SIDE, SIDE, 1))
    h = keras.layers.Flatten()(inp)
    model = keras.Model(inp, [keras.layers.Dense(CLASSES, activation="softmax")(h),
                              keras.layers.Dense(1)(h)])
    model.compile("adam", ["sparse_categorical_crossentropy", "mse"])
    return model


@RANDOM_ORDER_ALLOWED
def test_a_list_of_targets_trains_a_two_output_model():
    x, y = data()
    y_reg = np.random.default_rng(1).random((N, 1)).astype(np.float32)
    with shmaug.Sequence(x, [y, y_reg], batch_size=16, augment=_ops.noisy, workers=1) as seq:
        assert isinstance(seq[0][1], tuple)  # what Keras takes on every backend
        history = two_output_model().fit(seq, epochs=1, verbose=0)
    with ListTargets(x, y, batch_size=16, workers=0) as seq:
        two_output_model().fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


class LoadsAndAugments(shmaug.Sequence):
    """Samples made from an index, a subclass attribute, and a custom augment."""

    def __init__(self, n, **kwargs):
        super().__init__(list(range(n)), np.arange(n) % CLASSES, **kwargs)
        self.offset = 0.5  # set after super().__init__: workers must still see it

    def load(self, index):
        return np.full((SIDE, SIDE, 1), index / N, np.float32)

    def augment(self, image, rng):
        if image[0, 0, 0] == 13 / N:
            raise RuntimeError("thirteen")
        return image + self.offset


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_subclass_hooks_run_in_workers_with_subclass_state(method):
    # one Sequence (a spawned worker imports Keras to rebuild the subclass: seconds each)
    with LoadsAndAugments(16, batch_size=4, workers=2, start_method=method) as seq:
        xb, yb = seq[1]
        np.testing.assert_allclose(xb[:, 0, 0, 0], np.arange(4, 8) / N + 0.5, rtol=1e-6)
        assert yb.tolist() == [0, 1, 2, 3]
        with pytest.raises(RuntimeError, match=r"(?s)thirteen.*LoadsAndAugments.augment.*sample index 13"):
            seq[3]


@pytest.mark.parametrize("hook", ["targets", "model_inputs"])
def test_a_hooks_error_names_the_hook_and_the_sample(hook):
    def raises(self, batch):
        raise KeyError(f"no such part in {hook}")

    Bad = type("Bad", (shmaug.Sequence,), {hook: raises})
    x, y = data()
    with Bad(x, y, batch_size=8, workers=0) as seq:
        with pytest.raises(KeyError, match=rf"(?s)no such part.*Bad.{hook}.*sample index 0"):
            seq[0]


def two_views(image, rng):  # SimCLR's: two views of each sample, stacked (ops.md)
    return np.stack([image + rng.random(), image - rng.random()]).astype(np.float32)


class TwoInputs(shmaug.Sequence):
    """The views a function returns stacked, split into a two-input model's inputs."""

    inputs = ("first", "second")  # a subclass's own name: no hook of shmaug's

    def model_inputs(self, x_batch):
        return dict(zip(self.inputs, (x_batch[:, 0], x_batch[:, 1])))


def test_a_model_inputs_hook_feeds_views_to_a_two_input_model():
    x, y = data()
    first, second = keras.Input((SIDE, SIDE, 1), name="first"), \
        keras.Input((SIDE, SIDE, 1), name="second")
    h = keras.layers.Concatenate()([keras.layers.Flatten()(first),
                                    keras.layers.Flatten()(second)])
    model = keras.Model({"first": first, "second": second},
                        keras.layers.Dense(CLASSES, activation="softmax")(h))
    model.compile("adam", "sparse_categorical_crossentropy")
    with TwoInputs(x, y, batch_size=16, augment=two_views, workers=1, seed=3,
                   shuffle=True) as seq:
        xb, yb = seq.batch(0, epoch=0)
        assert sorted(xb) == ["first", "second"] and xb["first"].shape == (16, SIDE, SIDE, 1)
        served, _ = seq[0]  # a pass's first batch: epoch 0's first of its order
        np.testing.assert_array_equal(np.asarray(served["second"]), xb["second"])
        assert not np.array_equal(xb["first"], xb["second"])
        assert "hooks overridden: model_inputs" in repr(seq)
        history = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


class OneHot:
    """A callable object as a hook, as `augment = SomeOp()` is."""

    def __call__(self, y_batch):
        return np.eye(CLASSES, dtype=np.float32)[y_batch]


def test_hooks_that_are_callable_objects_or_static_methods_run():
    class Objects(shmaug.Sequence):
        targets = OneHot()

    class Static(shmaug.Sequence):
        @staticmethod
        def model_inputs(x_batch):
            return x_batch * 2

    class Stores(shmaug.Sequence):  # labels kept under the hook's name: no hook
        def __init__(self, x, y, **kwargs):
            super().__init__(x, y, **kwargs)
            self.targets = y

    x, y = data()
    with Objects(x, y, batch_size=8, workers=0) as seq:
        assert seq[0][1].shape == (8, CLASSES)
    with Stores(x, y, batch_size=8, workers=0, shuffle=False) as seq:
        np.testing.assert_array_equal(seq[0][1], y[:8])
    with Static(x, y, batch_size=8, workers=0, shuffle=False) as seq:
        np.testing.assert_array_equal(seq[0][0], x[:8] * 2)


def test_to_tf_dataset():
    pytest.importorskip("tensorflow")
    x, y = data()

    class Counted(shmaug.Sequence):  # a subclass's epoch hooks run per epoch, as under fit
        ends = 0

        def on_epoch_end(self):
            type(self).ends += 1
            super().on_epoch_end()

    with Counted(x, y, batch_size=16, augment=_ops.noisy, workers=2, seed=0,
                 shuffle=True) as seq:
        ds = seq.to_tf_dataset()
        whole = N % 16 == 0  # every batch whole: the signature says their size (XLA)
        assert ds.element_spec[0].shape.as_list() == [16 if whole else None, SIDE, SIDE, 1]
        seen = np.concatenate([b[1].numpy() for b in ds])
        assert len(seen) == N
        assert sorted(np.concatenate([b[1].numpy() for b in ds]).tolist()) == sorted(y.tolist())
    assert Counted.ends == 2


def test_to_tf_dataset_says_a_sequence_following_keras_reads_in_order():
    """Made with shuffle left out (it follows Keras' fit per pass), its tf.data form read the
    samples in order and MixUp off, as evaluate's, and a custom loop trained on that without
    a word. With drop_remainder, every batch is whole: the signature says its size (XLA)."""
    pytest.importorskip("tensorflow")
    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, workers=0, seed=0, augment=_ops.noisy) as seq:
        with pytest.warns(shmaug.ShmaugWarning, match=r"reads this Sequence in order.*"
                                                      r"shuffle=None.*Fix: pass shuffle=True"):
            dataset = seq.to_tf_dataset()
        with warnings.catch_warnings(record=True) as caught:  # its own reads, a pass and its
            warnings.simplefilter("always")  # end, are not told again as a loop by hand
            assert len(list(dataset)) == len(seq)
            seq.on_epoch_end()
        assert not [w for w in caught if "loop by hand" in str(w.message)]
    with shmaug.Sequence(x, y, batch_size=16, workers=0) as validation:  # changes nothing:
        validation.to_tf_dataset()  # in order is what it is for (warnings are errors here)
    with shmaug.Sequence(x[:-1], y[:-1], batch_size=16, workers=0, seed=0, shuffle=True,
                         drop_remainder=True) as seq:
        assert seq.to_tf_dataset().element_spec[0].shape.as_list() == [16, SIDE, SIDE, 1]

    class Flat(shmaug.Sequence):  # a batch's boxes as rows of (image, class, box): YOLO's
        def targets(self, y_batch):
            return np.zeros((2 * len(y_batch) + int(y_batch[0]) % 2, 6), np.float32)

    with Flat(x, y, batch_size=16, workers=0, seed=0, shuffle=True) as seq:
        assert seq.to_tf_dataset().element_spec[1].shape.as_list() == [None, 6]
        assert len(list(seq.to_tf_dataset())) == len(seq)


def test_fit_on_to_tf_dataset_gets_every_epoch_without_a_warning():
    """fit on seq.to_tf_dataset(), as keras-hub's task models take it: the dataset says its
    length, so Keras starts each epoch afresh. Of unknown length, Keras ran it dry every epoch
    and warned "Your input ran out of data; interrupting training"."""
    pytest.importorskip("tensorflow")
    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, workers=0, seed=0, shuffle=True) as seq:
        dataset = seq.to_tf_dataset()
        assert int(dataset.cardinality()) == len(seq)
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            history = _ops.tiny_model((SIDE, SIDE, 1), CLASSES).fit(
                dataset, epochs=2, shuffle=False, verbose=0)
        assert [str(w.message) for w in warned] == []
        assert len(history.history["loss"]) == 2


def test_stall_monitor(caplog):
    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, augment=_ops.noisy, workers=2, seed=0,
                         shuffle=True) as seq:
        monitor = shmaug.StallMonitor(threshold=0.0)
        with caplog.at_level(logging.INFO, logger="shmaug"), \
                warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            history = _ops.tiny_model((SIDE, SIDE, 1), CLASSES).fit(
                seq, epochs=2, verbose=0, callbacks=[monitor])
        assert len(monitor.history) >= 2
        # One set of names: History carries stats()'s own keys, nothing else of ours.
        assert {"images_per_s", "wait_fraction", "hit_rate"} <= set(history.history)
        assert not {"data_wait", "prefetch_hit_rate"} & set(history.history)
        for key in ("images_per_s", "wait_fraction", "hit_rate"):
            assert history.history[key][-1] == monitor.history[-1][key]
        assert "images/s" in caplog.text  # the figures: every epoch, in the log
        from shmaug.keras.callbacks import _not_the_pipeline

        warned = ours(warned)
        logged = [r for r in caplog.records if "input-bound" in r.getMessage()]
        # the advice: once per Sequence, as a warning where there is a change to make, in the
        # log where there is none (an observability engineer's fit under
        # filterwarnings("error") ended on "more workers would idle too")
        bound = [h for h in monitor.history if h["wait_fraction"] > 0]
        assert len(warned) == any(not _not_the_pipeline(h) for h in bound), monitor.history
        assert len(logged) >= sum(1 for h in bound[:1] if _not_the_pipeline(h))
        assert all("input-bound" in str(w.message) for w in warned)
        assert 0 <= seq.stats()["hit_rate"] <= 1


def test_stall_monitor_still_warns_of_a_stall_after_an_epoch_it_only_logged(caplog):
    """A diff review's: a first short epoch's note (logged: nothing to change) used up the
    Sequence's one warning, and a later real stall, workers busy, went unwarned."""
    class Scripted(shmaug.Sequence):
        figures: list = []

        def stats(self):
            return {**super().stats(), **self.figures.pop(0)}

    x, y = data(32)
    with Scripted(x, y, batch_size=16, workers=1, seed=0) as seq:
        seq[0]  # (a Sequence that served a batch is watched)
        Scripted.figures = [
            {"batches": 3, "wait_fraction": 0.5, "worker_busy": [0.2]},  # too short to tell
            {"batches": 50, "wait_fraction": 0.7, "worker_busy": [0.99]},  # a real stall
            {"batches": 50, "wait_fraction": 0.7, "worker_busy": [0.99]}]  # told once
        monitor = shmaug.StallMonitor(seq)
        with caplog.at_level(logging.INFO, logger="shmaug"), \
                warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            for epoch in range(3):
                monitor.on_epoch_end(epoch, {})
    said = [str(w.message) for w in ours(warned)]
    assert len(said) == 1 and "in epoch 2" in said[0], said
    assert any("in epoch 1" in r.getMessage() and "too short" in r.getMessage()
               for r in caplog.records), caplog.text


def test_a_short_epochs_figures_count_the_batches_handed_over_before_it_began():
    """Keras' probes and the batches made ahead reach the facade before StallMonitor resets
    the figures at the epoch's start: a two-batch epoch said 0 images/s."""
    x, y = data(32)
    with shmaug.Sequence(x, y, batch_size=16, workers=2, seed=0, shuffle=True) as seq:
        monitor = shmaug.StallMonitor(seq, threshold=1.0)  # (the figures, not the advice)
        _ops.tiny_model((SIDE, SIDE, 1), CLASSES).fit(seq, epochs=2, verbose=0,
                                                      callbacks=[monitor])
    for epoch in monitor.history:
        assert epoch["requests"] == 2 and epoch["images_per_s"] > 0, epoch
        assert (epoch["batches"], epoch["images"]) == (2, 32), epoch  # (they read 0, 0)


def test_the_figures_leave_out_validation_and_the_time_after_fit():
    """The training Sequence's figures are its passes': a slow validation pass (1.5 s an
    epoch) counted in them made images/s a third of what it was, and read after ``fit`` they
    shrank with every second waited. (A second of the three is slack for what ``fit`` does
    outside the passes: on torch under CI's load the margin once came to 3 ms.)"""
    import time

    class SlowValidation(keras.callbacks.Callback):
        def on_test_end(self, logs=None):
            time.sleep(1.5)

    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, augment=_ops.noisy, workers=2, seed=0,
                         shuffle=True) as seq, \
            shmaug.Sequence(x[:32], y[:32], batch_size=16, workers=2) as val:
        monitor = shmaug.StallMonitor(seq, threshold=1.0)
        began = time.perf_counter()
        history = _ops.tiny_model((SIDE, SIDE, 1), CLASSES).fit(
            seq, epochs=2, verbose=0, validation_data=val,
            callbacks=[monitor, SlowValidation()])
        fitted = time.perf_counter() - began
        after = seq.stats()
        time.sleep(0.5)
        assert seq.stats()["images_per_s"] == after["images_per_s"]
    epochs = [N / rate for rate in history.history["images_per_s"]]  # each pass's seconds
    assert sum(epochs) < fitted - 2.0  # the validation's 3 s left out
    assert 2 * N / after["images_per_s"] < fitted - 2.0


@pytest.mark.parametrize("loop", ["for", "by index"])
def test_the_figures_leave_out_the_time_between_loops_by_hand(loop):
    """A tf.data migrator's reviewer: three `for batch in seq` passes with 3 s between them
    gave images/s a sixth of what the passes ran at (a Loader's left the gaps out, as
    loader.md says): the figures' pass ended only at Keras' own ends."""
    import time

    x, y = data()
    with shmaug.Sequence(x, y, batch_size=16, augment=_ops.noisy, workers=2, seed=0,
                         shuffle=True) as seq:
        passes = 0.0
        for _ in range(3):
            began = time.perf_counter()
            if loop == "for":
                for _batch in seq:
                    pass
            else:
                for i in range(len(seq)):
                    seq[i]
                seq.on_epoch_end()
            passes += time.perf_counter() - began
            time.sleep(0.5)
        stats = seq.stats()
    assert stats["requests"] == 3 * len(seq)
    assert 3 * N / stats["images_per_s"] <= passes + 0.2, (stats["images_per_s"], passes)


def test_unshuffled_training_data_under_fit_shuffle_says_how_to_fix():
    x, y = data()
    with shmaug.Sequence(x, y, batch_size=8, augment=_ops.noisy, workers=1,
                         shuffle=False) as seq:  # chosen (the default follows fit)
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            _ops.tiny_model((SIDE, SIDE, 1), CLASSES).fit(seq, epochs=2, verbose=0)
    warned = ours(warned)
    assert len(warned) == 1  # once per Sequence, not per epoch
    assert "pass shuffle=True to shmaug.Sequence" in str(warned[0].message)
    package = os.path.dirname(shmaug.__file__)
    assert not warned[0].filename.startswith(package)  # shown at the caller's line, not ours


def ours(warned):
    """shmaug's warnings among those recorded, not the backend's own (JAX's about fork,
    Keras-on-torch's numpy 2 deprecations)."""
    return [w for w in warned if issubclass(w.category, shmaug.ShmaugWarning)]


class Pairs(shmaug.Sequence):
    """Counts the rows of every batch Keras asked for whose image is not its label."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unpaired = 0

    def __getitem__(self, index):
        xb, yb = super().__getitem__(index)
        self.unpaired += int((xb[:, 0, 0, 0] != yb).sum())
        return xb, yb


def test_rows_written_into_x_between_fits_reach_the_next_fit():
    """Active learning with a buffer grown in place: the workers read the copy made before the
    new rows were written while `y` is read at each batch, so 12 new labels went with blank
    images, without a word (an 8-row spot check missed them), unless an idle stop had copied
    `x` again meanwhile. The next pass now copies it again, whichever backend probes first."""
    x, y = np.zeros((300, SIDE, SIDE, 1), np.float32), np.zeros(300, np.float32)
    x[:200], y[:200] = (np.arange(200) % 5)[:, None, None, None], np.arange(200) % 5
    model = keras.Sequential([keras.Input((SIDE, SIDE, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with Pairs(x, y, batch_size=25, augment=_ops.identity, workers=2, seed=0,
               shuffle=True) as seq:
        model.fit(seq, epochs=1, verbose=0)
        first = seq.loader
        x[200:212], y[200:212] = 3, 3
        model.fit(seq, epochs=2, verbose=0)
        assert seq.loader is not first  # (copied again, once)
        again = seq.loader
        model.fit(seq, epochs=1, verbose=0)
        assert seq.loader is again  # nothing written: nothing copied
        x[250], y[250] = 4, 4  # a loop by hand (seq[i], then on_epoch_end) takes it too
        for i in range(len(seq)):
            seq[i]
        seq.on_epoch_end()
        seq[0], seq[0]  # (the second a batch held for a second ask)
        x[260:265], y[260:265] = 2, 2
        model.fit(seq, epochs=1, verbose=0)
        x[270:275], y[270:275] = 1, 1
        seq.batch(0, in_order=True), seq[5]  # looks between an edit and a pass: old rows,
        seq.unpaired = 0  # (seq[5] among them)
        model.fit(seq, epochs=1, verbose=0)  # which turn nothing off
    assert seq.unpaired == 0


class OwnLoss(keras.Model):
    """Self-supervised: a loss of the outputs alone, no labels."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return keras.ops.mean(keras.ops.square(y_pred))


def test_fit_and_evaluate_on_a_sequence_without_labels_name_them():
    """A Sequence made without `y` (an unlabelled source, from_paths without labels) under a
    model compiled with a loss: Keras failed with "None values not supported" (TensorFlow) or
    "'NoneType' object has no attribute 'shape'" (JAX, torch). predict, and a model whose
    own compute_loss needs no labels, go on."""
    x, _ = data()
    model = keras.Sequential([keras.Input((SIDE, SIDE, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(CLASSES, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    with shmaug.Sequence(x, batch_size=16, augment=_ops.identity, workers=1, seed=0) as seq:
        for call in (model.fit, model.evaluate):
            with pytest.raises(shmaug.ArgumentError, match=rf"{call.__name__}\(\) computes the "
                               r"model's loss \(sparse_categorical_crossentropy\) on labels, "
                               r"but this shmaug.Sequence gives none.*Fix: pass the labels"):
                call(seq, verbose=0)
        assert model.predict(seq, verbose=0).shape == (N, CLASSES)
        labels = np.arange(N) % CLASSES  # paired outside it: by a generator, and a callback's
        batches = ((seq[i], labels[i * 16:(i + 1) * 16]) for i in range(len(seq)))  # loop

        class Embed(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                [self.model(xb) for xb in seq]

        model.fit(batches, steps_per_epoch=len(seq), shuffle=False, verbose=0,
                  callbacks=[Embed()])
        inputs = keras.Input((SIDE, SIDE, 1))
        own = OwnLoss(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(inputs)))
        own.compile("sgd")
        assert len(own.fit(seq, epochs=1, verbose=0).history["loss"]) == 1
