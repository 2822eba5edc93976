"""docs/ops.md's MixUp path, validated on held-out data as a Keras user does it (issue 51,
section 4): a training Sequence with ``mix=`` trains on soft targets under
``CategoricalCrossentropy``, so ``fit``'s validation Sequence, made from the held-out
``subset="validation"`` of the same folder, must hand out one-hot labels too. The page gives
two ways, each run here through a real ``fit``: ``label_mode="categorical"`` on both subsets,
or class ids with the same ``mix=`` given to the validation Sequence (never mixed there, its
labels one-hot). The snippet itself runs in test_readme (docs/ops.md's MixUp block).

The old snippet validated on ``train``, which hid that a validation Sequence of class ids
stops ``fit`` with Keras' "must have the same rank" ``ValueError``; the last test pins the
message a user who forgets gets instead.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import shmaug
from shmaug.ops import Mix, MixUp
from tests._helpers import needs_keras

pytestmark = [needs_keras, pytest.mark.keras, pytest.mark.timeout(180)]

CLASSES, PER_CLASS, SIDE = ("cat", "dog", "owl"), 6, 16
SPLIT = dict(image_size=(SIDE, SIDE), validation_split=0.25, seed=1337)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("mixup_docs") / "photos"
    rng = np.random.default_rng(0)
    for name in CLASSES:
        (root / name).mkdir(parents=True)
        for i in range(PER_CLASS):
            pixels = rng.integers(0, 256, (SIDE + 4, SIDE + 2, 3), np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    return root


def model_for(classes: int):
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((SIDE, SIDE, 3)), keras.layers.Rescaling(1 / 255),
                              keras.layers.Conv2D(4, 3, activation="relu"),
                              keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(classes, activation="softmax")])
    model.compile("adam", keras.losses.CategoricalCrossentropy())
    return model


def fit(train: shmaug.Sequence, val: shmaug.Sequence) -> dict[str, list[float]]:
    """Two epochs of ``fit`` validating on ``val``; its history."""
    model = model_for(len(CLASSES))
    return model.fit(train, validation_data=val, epochs=2, verbose=0).history


def test_categorical_subsets_train_mixed_and_validate_on_the_held_out_subset(folder) -> None:
    """The snippet's way: ``label_mode="categorical"`` on both subsets, a mix without
    ``num_classes``; the validation batches are the held-out files, one-hot, unmixed."""
    train_files, val_files = shmaug.ImageFiles.from_directory(
        folder, label_mode="categorical", subset="both", **SPLIT)
    mix = Mix(mixup_alpha=0.8, cutmix_alpha=1.0, switch_p=0.5, label_smoothing=0.1)
    train = shmaug.Sequence(train_files, batch_size=4, mix=mix, seed=0, workers=0)
    val = shmaug.Sequence(val_files, batch_size=4, workers=0)
    with train, val:
        history = fit(train, val)
        labels = np.concatenate([val[i][1] for i in range(len(val))])
    assert len(history["val_loss"]) == 2 and np.all(np.isfinite(history["val_loss"]))
    assert labels.shape == (len(val_files), len(CLASSES))
    np.testing.assert_array_equal(labels, np.asarray(val_files.labels))  # as the files say


def test_class_ids_validate_through_the_same_mix(folder) -> None:
    """The issue's path (class ids, ``MixUp(0.2, num_classes=3)``, a validation Sequence of
    ``subset="validation"``), made to work as the page says: the validation Sequence gets the
    same ``mix=``, and hands out the held-out images as they are, labels one-hot."""
    train_files = shmaug.ImageFiles.from_directory(folder, subset="training", **SPLIT)
    val_files = shmaug.ImageFiles.from_directory(folder, subset="validation", **SPLIT)
    mix = MixUp(0.2, num_classes=len(CLASSES))
    train = shmaug.Sequence(train_files, batch_size=4, mix=mix, seed=0, workers=0)
    val = shmaug.Sequence(val_files, batch_size=4, mix=mix, workers=0)
    plain = shmaug.Sequence(val_files, batch_size=4, workers=0)
    with train, val, plain:
        history = fit(train, val)
        for i in range(len(val)):
            (xb, yb), (x_plain, ids) = val[i], plain[i]
            np.testing.assert_array_equal(xb, x_plain)  # not mixed
            np.testing.assert_array_equal(yb, np.eye(len(CLASSES), dtype=np.float32)[ids])
    assert len(history["val_loss"]) == 2 and np.all(np.isfinite(history["val_loss"]))


def test_a_validation_sequence_of_class_ids_is_refused_with_the_fix(folder) -> None:
    """A user who forgets: class ids in the validation Sequence, no mix there. Keras would
    stop ``fit`` when validation starts with "Arguments `target` and `output` must have the
    same rank"; the training Sequence names the fix before the first step instead."""
    train_files = shmaug.ImageFiles.from_directory(folder, subset="training", **SPLIT)
    val_files = shmaug.ImageFiles.from_directory(folder, subset="validation", **SPLIT)
    mix = MixUp(0.2, num_classes=len(CLASSES))
    train = shmaug.Sequence(train_files, batch_size=4, mix=mix, seed=0, workers=0)
    val = shmaug.Sequence(val_files, batch_size=4, workers=0)
    with train, val, pytest.raises(shmaug.ArgumentError,
                                   match=r"label_mode=.categorical.*mix="):
        fit(train, val)


def test_validation_arrays_of_class_ids_are_refused_too() -> None:
    """``validation_data=(x, y)`` of class ids beside a mixed training Sequence."""
    x = np.zeros((8, SIDE, SIDE, 3), np.uint8)
    ids = np.arange(8) % len(CLASSES)
    with shmaug.Sequence(x, ids, batch_size=4, mix=MixUp(0.2, num_classes=len(CLASSES)),
                         seed=0, workers=0) as train, \
            pytest.raises(shmaug.ArgumentError, match=r"to_categorical\(y_val, 3\)"):
        model_for(len(CLASSES)).fit(train, validation_data=(x, ids), epochs=1, verbose=0)


@pytest.mark.parametrize("loss", [lambda keras: "sparse_categorical_crossentropy",
                                  lambda keras: keras.losses.SparseCategoricalCrossentropy(
                                      from_logits=True),
                                  lambda keras: keras.losses.SparseCategoricalCrossentropy(
                                      name="scce")], ids=["by name", "a Loss", "renamed"])
def test_a_sparse_loss_under_a_mix_is_refused_with_the_loss_to_use(loss) -> None:
    """Keras stopped ``fit`` at its first step with "Argument output must have rank (ndim)
    target.ndim - 1", naming neither the mix nor the loss."""
    import keras

    model = model_for(len(CLASSES))
    model.compile("adam", loss(keras))
    x = np.zeros((8, SIDE, SIDE, 3), np.uint8)
    with shmaug.Sequence(x, np.arange(8) % len(CLASSES), batch_size=4, seed=0, workers=0,
                         mix=MixUp(0.2, num_classes=len(CLASSES))) as train, \
            pytest.raises(shmaug.ArgumentError, match=r"compiled with loss '(sparse_categorical"
                                                      r"_crossentropy|scce)'.*Categorical"
                                                      r"Crossentropy"):
        model.fit(train, epochs=1, verbose=0)


def test_a_loss_of_the_users_that_takes_soft_targets_is_not_refused() -> None:
    """A subclass of Keras' sparse loss keeps its name, but may read soft targets its way."""
    import keras

    class SoftToIds(keras.losses.SparseCategoricalCrossentropy):
        def call(self, y_true, y_pred):
            return super().call(keras.ops.argmax(y_true, axis=-1), y_pred)

    model = model_for(len(CLASSES))
    model.compile("adam", SoftToIds())
    x = np.zeros((8, SIDE, SIDE, 3), np.uint8)
    with shmaug.Sequence(x, np.arange(8) % len(CLASSES), batch_size=4, seed=0, workers=0,
                         mix=MixUp(0.2, num_classes=len(CLASSES))) as train:
        assert len(model.fit(train, epochs=1, verbose=0).history["loss"]) == 1


def test_a_validation_sequence_whose_targets_hook_one_hots_is_not_refused() -> None:
    class OneHotValidation(shmaug.Sequence):  # (here: the module imports without Keras)
        """A validation Sequence of class ids whose ``targets`` hook one-hots them."""

        def targets(self, y_batch):
            return np.eye(len(CLASSES), dtype=np.float32)[y_batch]

    x = np.zeros((8, SIDE, SIDE, 3), np.uint8)
    ids = np.arange(8) % len(CLASSES)
    with shmaug.Sequence(x, ids, batch_size=4, mix=MixUp(0.2, num_classes=len(CLASSES)),
                         seed=0, workers=0) as train, \
            OneHotValidation(x, ids, batch_size=4, workers=0) as val:
        history = model_for(len(CLASSES)).fit(train, validation_data=val, epochs=1,
                                              verbose=0).history
    assert np.isfinite(history["val_loss"]).all()
