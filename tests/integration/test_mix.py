"""MixUp / CutMix through the engine (``mix=``): the workers mix each batch's pairs, the main
process its labels, and what comes out is the same for any worker count and start method,
with labels that say exactly what each row's pixels hold; batches read in order are unmixed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import shmaug
from shmaug.ops import Compose, Mix, MixUp, Op
from tests._helpers import assert_same_batches, needs_keras

N, SIDE = 22, 12  # an odd last batch of 6 at batch_size=8: its rows 4, 5 still pair


def constant_images() -> np.ndarray:
    """Sample i is filled with i / N, so a row's mean is its samples' mix of those values."""
    return np.repeat(np.arange(N, dtype=np.float32) / N, SIDE * SIDE * 3).reshape(
        N, SIDE, SIDE, 3)


def epoch_batches(**kwargs) -> list:
    with shmaug.Loader(constant_images(), np.arange(N), batch_size=8, seed=5, shuffle=True,
                       **kwargs) as loader:
        return [loader.batch(i, epoch=e) for e in (0, 1) for i in range(len(loader))]


def test_each_row_holds_what_its_soft_label_says() -> None:
    """One class per sample: a row's label is its mix of samples, its mean pixel the same
    mix of their values (MixUp blends, CutMix's share is its box's pixels)."""
    batches = epoch_batches(workers=2, mix=Mix(num_classes=N, p=0.9))
    values = np.arange(N, dtype=np.float64) / N
    mixed = 0
    for xb, yb in batches:
        assert yb.dtype == np.float32 and yb.shape == (len(xb), N)
        np.testing.assert_allclose(xb.mean(axis=(1, 2, 3)), yb @ values, atol=1e-5)
        mixed += int(np.sum(yb.max(axis=1) < 1))
    assert mixed > 0.6 * 2 * N  # p=0.9: most pairs are mixed


@pytest.mark.parametrize("column", [True, False])
def test_one_sigmoid_units_targets_are_blended_as_they_are(column) -> None:
    """Binary targets as Keras takes them, one column of floats in [0, 1] ((N, 1) or (N,)):
    blended as the pixels are (sample i's image is i / N, and so is its target here). They
    were refused, and the fix offered (ids with num_classes=2) made two columns that a
    one-unit model refuses."""
    targets = (np.arange(N, dtype=np.float32) / N).reshape((N, 1) if column else (N,))
    with shmaug.Loader(constant_images(), targets, batch_size=8, seed=5, shuffle=True,
                       workers=1, mix=Mix(p=0.9)) as loader:
        for i in range(len(loader)):
            xb, yb = loader.batch(i)
            assert yb.shape == (len(xb), *targets.shape[1:]) and yb.dtype == np.float32
            np.testing.assert_allclose(yb.reshape(-1), xb.mean(axis=(1, 2, 3)), atol=1e-5)
        _, plain = loader.batch(0, in_order=True)
        np.testing.assert_array_equal(plain, targets[:8])
    with pytest.raises(shmaug.ArgumentError, match=r"one sigmoid unit.*no label_smoothing.*"
                                                   r"BinaryCrossentropy\(label_smoothing"):
        shmaug.Loader(constant_images(), targets, mix=MixUp(label_smoothing=0.1))
    flags = (np.arange(N) % 2).astype(bool).reshape(targets.shape)  # bools: as floats
    with shmaug.Loader(constant_images(), flags, batch_size=8, seed=5, shuffle=True,
                       workers=0, mix=MixUp(1.0)) as loader:
        assert loader.batch(0)[1].dtype == np.float32
    with pytest.raises(shmaug.ArgumentError, match=r"num_classes=2.*For one sigmoid unit's 0/1 "
                                                   r"targets, pass them as floats"):
        shmaug.Loader(constant_images(), flags.astype(int), mix=MixUp())
    with shmaug.Loader(constant_images(), flags, batch_size=8, workers=0,  # bools as ids
                       mix=MixUp(num_classes=2)) as loader:
        assert loader.batch(0)[1].shape == (8, 2)
    with pytest.raises(shmaug.ArgumentError, match=r"num_classes=2\) \(the largest id in y is 0"):
        shmaug.Loader(constant_images(), np.zeros(N, int), mix=MixUp())  # (1 is refused)


@pytest.mark.slow
def test_the_same_batches_for_any_workers_and_start_method() -> None:
    """A pipeline that draws, then the mix: bit-identical with the batch cut among 0, 1 or
    3 workers, forked or spawned."""
    augment = Compose([Op("rotate", degrees=(-20, 20)), Op("gaussian_noise", sigma=0.05)])
    mix = Mix(mixup_alpha=0.4, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=N)
    reference = epoch_batches(workers=0, augment=augment, mix=mix)
    for workers, start_method in ((1, "fork"), (3, "fork"), (2, "spawn")):
        assert_same_batches(epoch_batches(workers=workers, start_method=start_method,
                                          augment=augment, mix=mix), reference)


def test_batches_read_in_order_are_not_mixed() -> None:
    """``in_order=True`` (a Sequence's evaluate and predict): the samples as augmented, in
    the dataset's order, labels one-hot; also where the loader does not shuffle."""
    x = constant_images()
    for shuffle in (True, False):
        with shmaug.Loader(x, np.arange(N) % 4, batch_size=8, seed=1, shuffle=shuffle,
                           workers=1, mix=MixUp(1.0, num_classes=4)) as loader:
            xb, yb = loader.batch(0, in_order=True)
            np.testing.assert_array_equal(xb, x[:8])
            np.testing.assert_array_equal(yb, np.eye(4, dtype=np.float32)[np.arange(8) % 4])
            trained, soft = loader.batch(0)
            assert not np.array_equal(trained, xb) and soft.max(axis=1).min() < 1


def test_a_one_output_dict_of_labels_comes_back_soft_in_its_place() -> None:
    with shmaug.Loader(constant_images(), {"out": np.arange(N) % 4}, batch_size=8, seed=1,
                       workers=0, mix=MixUp(1.0, num_classes=4)) as loader:
        _, yb = loader.batch(0)
    assert set(yb) == {"out"} and yb["out"].shape == (8, 4) and yb["out"].dtype == np.float32


def test_a_mix_is_refused_before_anything_starts() -> None:
    x = constant_images()
    with pytest.raises(shmaug.ArgumentError, match=r"num_classes=22"):
        shmaug.Loader(x, np.arange(N), mix=MixUp())
    with pytest.raises(shmaug.ArgumentError, match=r"y=None"):
        shmaug.Loader(x, mix=MixUp(num_classes=3))
    with pytest.raises(shmaug.ArgumentError, match=r"from -1 to .*Fix: drop or relabel the "
                                                   r"samples of id -1"):
        shmaug.Loader(x, np.arange(N) % 3 - 1, mix=MixUp(num_classes=3))
    with pytest.raises(shmaug.ArgumentTypeError, match=r"`mix`.*Fix"):
        shmaug.Loader(x, np.arange(N), mix=0.2)


@needs_keras
def test_the_other_inputs_and_the_sample_weights_are_blended_as_their_images() -> None:
    """A dict ``x`` with a tabular input beside the images: each row's features (and sample
    weight) are its pair's, blended by its label's weights, as its pixels are. They were the
    row's own sample's, unmixed: a row 12% one sample got all of that sample's features."""
    x = constant_images()
    features = np.random.default_rng(0).normal(size=(N, 3)).astype(np.float32)
    weights = np.linspace(0.5, 2.0, N).astype(np.float32)
    with shmaug.Sequence({"image": x, "tab": features}, np.arange(N), image_key="image",
                         sample_weight=weights, batch_size=8, seed=5, shuffle=True, workers=2,
                         mix=Mix(num_classes=N, p=0.9)) as seq:
        batches = [seq.batch(i, epoch=e) for e in (0, 1) for i in range(len(seq))]
        mixed = 0
        for xb, yb, wb in batches:
            np.testing.assert_allclose(xb["image"].mean(axis=(1, 2, 3)), yb @ (np.arange(N) / N),
                                       atol=1e-5)
            np.testing.assert_allclose(xb["tab"], yb @ features, atol=1e-5)
            np.testing.assert_allclose(wb, yb @ weights, atol=1e-5)
            mixed += int(np.sum(yb.max(axis=1) < 1))
        assert mixed > N
        xb, yb, wb = seq.batch(0, in_order=True)  # evaluate's: as given
        np.testing.assert_array_equal(xb["tab"], features[:8])
        np.testing.assert_array_equal(wb, weights[:8])
    whole = np.where(np.arange(N) % 2, 1, 5)  # whole-number weights, as fit takes them
    with shmaug.Sequence(x, np.arange(N), sample_weight=whole, batch_size=8, seed=5,
                         shuffle=True, workers=0, mix=Mix(num_classes=N, p=0.9)) as seq:
        _, yb, wb = seq.batch(0)
        np.testing.assert_allclose(wb, yb @ whole, atol=1e-5)
        assert seq.batch(0, in_order=True)[2].dtype == wb.dtype == np.float32  # one signature
    ids = np.arange(N)
    with pytest.raises(shmaug.ArgumentError, match=r"`x\['ids'\]` is .*int64.*does not blend"
                                                   r".*Fix: pass it as floats"):
        shmaug.Sequence({"image": x, "ids": ids}, np.arange(N), image_key="image",
                        mix=MixUp(num_classes=N), workers=0)


@needs_keras
def test_fit_trains_on_mixed_batches_and_evaluates_and_predicts_on_plain_ones() -> None:
    """On whichever backend Keras runs: each step of ``fit`` gets the mixed rows and the soft
    targets shmaug made for them together (seen inside the step), the loss falls, and
    ``evaluate`` / ``predict`` on the same Sequence read the samples in order, unmixed."""
    import keras

    x = constant_images()
    y = np.arange(N) % 2
    x[y == 1, : SIDE // 2] = 1.0  # class 1: a bright top half, so there is something to learn
    rows: list[np.ndarray] = []  # what each step's model saw, then its loss
    targets: list[np.ndarray] = []

    def log(into: list, tensor) -> None:
        try:
            into.append(keras.ops.convert_to_numpy(tensor))
        except Exception:  # a symbolic tensor or a tracer (JAX traces the loss once): no batch
            pass

    class Tap(keras.layers.Layer):
        def call(self, inputs, training=None):
            if training:
                log(rows, inputs)
            return inputs

    def logged_loss(y_true, y_pred):
        log(targets, y_true)
        return keras.losses.categorical_crossentropy(y_true, y_pred)

    keras.utils.set_random_seed(0)
    inputs = keras.Input((SIDE, SIDE, 3))
    top = keras.layers.Cropping2D(((0, SIDE // 2), (0, 0)))(Tap()(inputs))
    out = keras.layers.Dense(2, activation="softmax")(keras.layers.GlobalAveragePooling2D()(top))
    model = keras.Model(inputs, out)
    model.compile(keras.optimizers.Adam(0.05), loss=logged_loss, run_eagerly=True)
    epochs = 6
    seq = shmaug.Sequence(x, y, batch_size=8, workers=2, seed=3,
                          mix=Mix(mixup_alpha=0.4, cutmix_alpha=1.0, num_classes=2))
    with seq:
        history = model.fit(seq, epochs=epochs, verbose=0)
        made = {row.tobytes(): label for e in range(epochs) for i in range(len(seq))
                for row, label in zip(*seq.batch(i, epoch=e))}
        trained = list(zip(rows, targets))
        targets.clear()
        model.evaluate(seq, verbose=0)
        predicted = model.predict(seq, verbose=0)
    assert len(trained) == epochs * len(seq)
    for xb, yb in trained:
        np.testing.assert_array_equal(yb, np.stack([made[row.tobytes()] for row in xb]))
    soft = np.concatenate([yb for _, yb in trained])
    assert np.any((soft > 0.01) & (soft < 0.99))  # mixed targets reached the loss
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert targets and all(np.all((t == 0) | (t == 1)) for t in targets)  # one-hot, unmixed
    np.testing.assert_allclose(predicted, model.predict(x, verbose=0), atol=1e-5)


@needs_keras
def test_sampled_by_weight_evaluate_and_predict_still_read_unmixed() -> None:
    """A weighted draw has no dataset order, but with a mix the inference passes still get the
    samples as augmented and one-hot labels (the draw's order, unmixed)."""
    import keras

    x = constant_images()
    seen: list[np.ndarray] = []

    def logged_loss(y_true, y_pred):
        try:
            seen.append(keras.ops.convert_to_numpy(y_true))
        except Exception:  # a tracer (JAX traces the loss once)
            pass
        return keras.losses.categorical_crossentropy(y_true, y_pred)

    model = keras.Sequential([keras.Input((SIDE, SIDE, 3)), keras.layers.Flatten(),
                              keras.layers.Dense(4, activation="softmax")])
    model.compile("adam", logged_loss, run_eagerly=True)
    with shmaug.Sequence(x, np.arange(N) % 4, batch_size=8, seed=0, workers=2,
                         sampling_weights=np.ones(N), mix=MixUp(1.0, num_classes=4)) as seq, \
            warnings.catch_warnings():
        warnings.filterwarnings("ignore", "This Sequence draws every pass",
                                shmaug.ShmaugWarning)  # (what this test reads on purpose)
        model.evaluate(seq, verbose=0)
        predicted = model.predict(seq, verbose=0)  # (the pass's own weighted draw)
    assert seen and all(np.all((t == 0) | (t == 1)) for t in seen)
    plain = model.predict(x, verbose=0)  # each row: one of the unmixed samples'
    nearest = np.abs(predicted[:, None, :] - plain[None, :, :]).max(axis=2).min(axis=1)
    assert nearest.max() < 1e-5


@needs_keras
def test_the_policies_and_the_mix_train_under_fit_the_same_for_any_workers() -> None:
    """timm's recipe with every policy (RandAugment, TrivialAugmentWide, AutoAugment, AugMix)
    and MixUp / CutMix, on whichever backend Keras runs: ``fit`` takes it, and the batches
    are the same with the work in this process or in two workers."""
    import keras

    from shmaug.ops import Maybe

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (24, 32, 32, 3), np.uint8)
    y = np.eye(3, dtype=np.float32)[np.arange(24) % 3]
    augment = Compose([Op("resized_crop", scale=(0.3, 1.0)), Maybe(Op("hflip")),
                       Op("rand_augment", num_ops=2, magnitude=9), Op("trivial_augment_wide"),
                       Op("auto_augment"), Op("aug_mix")])
    mix = Mix(label_smoothing=0.1)
    batches = []
    for workers in (0, 2):
        with shmaug.Sequence(x, y, batch_size=8, augment=augment, mix=mix, seed=1,
                             workers=workers) as seq:
            batches.append([seq.batch(i, epoch=1) for i in range(len(seq))])
    assert_same_batches(batches[1], batches[0])
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32, 32, 3), dtype="uint8"),
                              keras.layers.Rescaling(1 / 255),
                              keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", keras.losses.CategoricalCrossentropy())
    with shmaug.Sequence(x, y, batch_size=8, augment=augment, mix=mix, seed=1,
                         workers=2) as seq:
        history = model.fit(seq, validation_data=seq, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"] + history.history["val_loss"]))
